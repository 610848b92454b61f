// What the tools take as input: trace files, directories of them, or stores; and the import of a
// set of trace files into one store (one file per task, on the shared pool).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernalyse/classify.h"
#include "kernalyse/kineto.h"
#include "kernalyse/progress.h"
#include "kernalyse/spread.h"
#include "kernalyse/store.h"

namespace kernalyse {

// Expands directories into their *.json / *.json.gz / *.sqlite files (sorted); checks that the
// files exist. Throws Error naming the path.
std::vector<std::string> expand_inputs(const std::vector<std::string>& in);

struct ImportFilesOptions {
  std::optional<int32_t> rank;  // --rank: the rank of a single trace that carries none
  std::string step_range;       // --step-range (Nsight Systems reports only)
  const Classifier* classifier = nullptr;
  ProgressMode progress = ProgressMode::Off;
  // Each Kineto file's GPU activity rows in file order (ImportOptions::gpu_event).
  std::function<void(const std::string& path, int32_t stream, int64_t correlation)> gpu_event;
  bool ops = true;  // ImportOptions::ops
  // Under mpirun (spread.h): each process imports its share of the files (contiguous, about equal
  // bytes); import_files sends them to process 0, which goes on as one process would (the others
  // get an empty store back); import_files_spread keeps them spread.
  const Spread* spread = nullptr;
  size_t chunk_rows = size_t{1} << 12;  // import_file_streamed: ImportOptions::chunk_rows
  // What an import of several traces to a store may hold in memory (KERNALYSE_IMPORT_MEMORY_MB;
  // 0: half the physical memory); above it, SpilledImport (load.cpp).
  uint64_t memory_bytes = 0;
};

// Imports trace files (Kineto JSON or Nsight Systems reports: one kind per run) into one store,
// one file per task. Errors: the first failing file's, one line naming it; several files that
// do not say their rank, one line listing them all.
Store import_files(const std::vector<std::string>& files, const ImportFilesOptions& opt,
                   ImportStats* stats);

// Under mpirun with -o alone (issue 28): each process imports its share of the files, every
// process learns every file's outcome (the same error on all of them; the Nsight Systems reports
// ranked together; the whole run's stats in *stats), and the files move so that each process holds
// a run of them whose ranks no other process's lie between (place_files in inputs.cpp), merged:
// its part of the store, for write_store_world (store_io.h). When the files' ranks repeat or
// interleave, every file goes to process 0 instead, which returns the whole merged store with
// *whole set (the others an empty one): then process 0 goes on as one process does. One process
// (no spread): import_files, *whole set.
Store import_files_spread(const std::vector<std::string>& files, const ImportFilesOptions& opt,
                          ImportStats* stats, bool* whole);

// Several trace files (Kineto or rocprofv3; not Nsight Systems reports, which are ranked
// together) imported with at most the pool's width of files' rows in memory (issue 28): each
// file's part, in the form merge_stores takes it, goes to an unlinked temporary file in `dir` as
// soon as it is imported; read() brings one back. import_files' errors and stats. When the
// files' ranks neither repeat nor interleave, the parts in merge order are the merged store's
// rows in order (a store written part by part: load.cpp); otherwise merge_stores of them all.
class SpilledImport {
 public:
  // `seen`, when set, is shown each file's part (by file index, in the form read() returns it)
  // on the pool's thread before it goes to disk: what a caller gathers from every part.
  SpilledImport(const std::vector<std::string>& files, const ImportFilesOptions& opt,
                ImportStats* stats, const std::string& dir,
                const std::function<void(size_t file, const Store& part)>& seen = nullptr);
  ~SpilledImport();
  SpilledImport(const SpilledImport&) = delete;
  SpilledImport& operator=(const SpilledImport&) = delete;
  bool in_rank_order() const;
  size_t size() const;          // parts
  Store read(size_t k) const;   // part k in merge order (by first rank)
  uint64_t disk_bytes() const;  // of the temporary file

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One Kineto trace imported straight into the store file `out` (import_kineto_streamed): what
// import_files does for that one file, in memory that does not grow with it. Returns the rest of
// the store for out.commit(): its header and small tables, or the whole store when the file had
// to be finished in memory (then out holds no rows).
Store import_file_streamed(const std::string& file, const ImportFilesOptions& opt,
                           ImportStats* stats, StoreStream& out, const std::string& spill_dir);

}  // namespace kernalyse
