// Nsight Systems SQLite importer (`nsys export --type sqlite`, schema 2.9 to 3.30), streaming.
#pragma once

#include <string>

#include "kernalyse/kineto.h"  // ImportOptions, ImportStats, NoRankError
#include "kernalyse/store.h"

namespace kernalyse {

// True if the file starts with the SQLite 3 header ("SQLite format 3\0"): how kernalyse-merge
// tells an Nsight Systems export from a JSON trace, whatever its name.
bool is_sqlite_file(const std::string& path);

// Imports one process's report into a single-rank Store (activities sorted, steps assigned):
// kernels (demangled names through StringIds), memcpy / memset, CUDA runtime and driver calls
// (launches), NVTX push/pop and start/end ranges (annotations; ProfilerStep#N, or the first
// capture group of opt.step_range, are steps), NCCL kernels (nccl rows: collective, algorithm and
// protocol from the kernel name). Ranks: assign_nsys_ranks (nsys_ranks.h) over this report's
// processes alone (a report of several processes is split by pid, one rank each). Throws
// Error("<file>: <problem>") for a file that is not a readable SQLite database or has no kernel
// table; malformed rows are counted, not fatal.
Store import_nsys_file(const std::string& path, const ImportOptions& opt, ImportStats* stats);

}  // namespace kernalyse
