// rocprofv3 (ROCm profiler SDK) JSON importer: `rocprofv3 --output-format json` (.json, .json.gz).
#pragma once

#include <string>

#include "kernalyse/kineto.h"  // ImportOptions, ImportStats, NoRankError
#include "kernalyse/store.h"

namespace kernalyse {

// True if the file (plain or gzip) is rocprofv3 JSON: its first member is "rocprofiler-sdk-tool".
// Regular files only: sniffing a pipe would eat the bytes the importer must read next.
bool is_rocprof_file(const std::string& path);

// Imports one process's rocprofv3 JSON into a single-rank Store (activities sorted, steps
// assigned): kernel dispatches (names from `kernel_symbols`, GPU agents as devices, HSA queues as
// streams), memory copies, HIP and RCCL API calls as launches (joined to their GPU work by the
// internal correlation id), roctx ranges as annotations (ProfilerStep#N ranges are steps), the host
// name from `metadata.node`. Times are rocprofiler-sdk's ns, kept as recorded. Rank: --rank, the
// file name, the only input (rank 0); else NoRankError. Throws Error("<file>: <problem>") for a
// file that is not rocprofv3 JSON or is not valid JSON; malformed records are counted, not fatal.
Store import_rocprof_file(const std::string& path, const ImportOptions& opt, ImportStats* stats);

}  // namespace kernalyse
