// Kineto / PyTorch-profiler Chrome-trace JSON importer (.json and .json.gz), streaming.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernalyse/classify.h"
#include "kernalyse/progress.h"
#include "kernalyse/store.h"
#include "kernalyse/store_io.h"  // Error

namespace kernalyse {

struct ImportOptions {
  // Rank for a file whose distributedInfo has none (checked before the file name).
  std::optional<int32_t> rank;
  // The file is the only input: with no rank in its data, --rank or its name it is rank 0 (a
  // one-GPU torch.profiler trace carries no distributedInfo), said in ImportStats::notes.
  bool only_input = false;
  // Nsight Systems import: a regex with one capture group for N that makes NVTX ranges steps
  // (default "ProfilerStep#(\d+)", matched against the whole range name).
  std::string step_range;
  const Classifier* classifier = nullptr;  // nullptr: default NCCL/RCCL patterns
  // Advanced by the file bytes consumed (compressed bytes for .gz), so one Progress whose total
  // is the inputs' on-disk sizes (input_bytes()) can be shared by parallel imports.
  Progress* progress = nullptr;
  // Told each GPU activity row of a Kineto file in the file's order (its stream and
  // correlation), from the importing thread: kernalyse.hta orders HTA's idle rows by it (HTA
  // lists a rank's streams in its trace's event order, which the store's sorted rows lose).
  std::function<void(const std::string& path, int32_t stream, int64_t correlation)> gpu_event;
  // Keep the cpu_ops that launch GPU work for /ops (false: no /ops, and their names and shapes
  // never copied: kernalyse.hta's runs, whose HTA analyses read none; issue 27).
  bool ops = true;
  // import_kineto_streamed: rows of each big table sorted in memory before a sorted run of them
  // goes to disk; a trace of fewer than 64 × chunk_rows rows (activities, launches and cpu_ops)
  // is imported in memory. Small runs were the fastest as well as the smallest: a run sorts in
  // the cache, and the memory is reused, not touched fresh (docs/benchmarks.md).
  size_t chunk_rows = size_t{1} << 12;
};

struct ImportStats {
  int64_t bytes = 0;  // uncompressed JSON bytes read
  int64_t events = 0;
  int64_t malformed = 0;
  std::vector<std::string> warnings;  // e.g. "rank taken from file name"
  std::vector<std::string> notes;     // informational, e.g. "the only input, taken as rank 0"
};

// A trace that does not say its rank (and none was given): the CLI lists every such file.
class NoRankError : public Error {
 public:
  using Error::Error;
};

// Imports one per-rank trace file into a single-rank Store (activities sorted). PyTorch
// profile_memory "[memory]" events of CUDA devices become kCounterGpuMemory counters
// (value "Total Allocated", sorted by rank, device, name, ts).
// Throws Error("<file>: <problem>") for a malformed file (truncated gzip, invalid JSON, not a
// trace, empty, no rank). Malformed individual events are counted, not fatal.
Store import_kineto_file(const std::string& path, const ImportOptions& opt, ImportStats* stats);

// The same import straight into a store file (kernalyse-merge FILE -o OUT), in memory that does
// not grow with the file (issue 28): past 64 × opt.chunk_rows rows, every opt.chunk_rows rows of
// activities, launches and cpu_ops go to unlinked temporary files in `spill_dir` as a sorted run,
// and /activities, /launches and /ops are written to `out` from them at the end, sorted and joined
// as import_kineto_file does. Returns the rest of that store (attributes, strings, /ranks,
// annotations, counters, NCCL metadata), which the caller completes and hands to out.commit(). A
// smaller trace, and a merged multi-rank one, are finished in memory: then *whole is set, nothing
// was written to `out` and the store is returned whole.
Store import_kineto_streamed(const std::string& path, const ImportOptions& opt, ImportStats* stats,
                             StoreStream& out, const std::string& spill_dir, bool* whole);

// Same, from an in-memory JSON text (tests); `name` stands in for the file name.
Store import_kineto_string(std::string_view json, const std::string& name, const ImportOptions& opt,
                           ImportStats* stats);

// On-disk size of a trace file (the unit import progress counts in); 0 if it cannot be read.
int64_t input_bytes(const std::string& path);

// Rank from a file name ("rank-3", "rank3", "rank_3", "worker3"); nullopt if none. Throws Error
// when the number does not fit int32 (docs/limits.md): "rank4294967297" is not rank 1.
std::optional<int32_t> rank_from_filename(const std::string& path);

// Host from a torch.profiler tensorboard_trace_handler file name,
// "<host>_<pid>.<time_ns>.pt.trace.json[.gz]" (its default worker name is hostname_pid); "" if
// the name has another form or its worker part names a rank instead ("rank_0.<ts>.pt.trace.json").
std::string host_from_filename(const std::string& path);

// Exact decimal-text µs → int64 ns ("5.1" → 5100, "1712195495519689.047" → ...689047).
// Returns false if the text is not a number.
bool parse_us_to_ns(std::string_view text, int64_t* ns);

}  // namespace kernalyse
