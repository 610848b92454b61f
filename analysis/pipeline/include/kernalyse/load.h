// A run's input made ready for the analyses: a store read with the columns they use, or trace
// files imported; clocks aligned per --align (docs/clocks.md); node stores merged into one.
// The tools' flags map onto LoadOptions; what the loading says goes to its callbacks.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernalyse/clock_infer.h"
#include "kernalyse/collectives.h"
#include "kernalyse/diff.h"
#include "kernalyse/inputs.h"
#include "kernalyse/store.h"
#include "kernalyse/store_io.h"

namespace kernalyse {

struct LoadOptions {
  ImportFilesOptions import;
  std::string align = "auto";    // --align: auto, inferred, off
  bool recorded_clocks = false;  // --compat hta: HTA's view is the recorded clocks, never aligned
  std::string output;            // -o: the imported (or merged) store is written there
  bool force = false;            // replace an existing output
  std::string command_line;      // recorded in the written store
  // The caller wants nothing but opt.output (no analysis, no export): one Kineto trace is then
  // imported straight into it (import_file_streamed), and import_run returns only its header.
  bool output_only = false;
  // Where the loading's lines go (null: nowhere): info lines (quiet runs pass null) and
  // warnings (always shown).
  std::function<void(const std::string&)> info, warn;
};

struct LoadedRun {
  Store store;
  std::optional<ClockInference> inference;       // set when clocks were inferred and applied
  std::shared_ptr<const CollectiveMatch> match;  // the inference's matching of this store
  // Under mpirun with -o alone: every process wrote its ranks' rows of the store (parallel
  // HDF5), which none holds whole (`store` is empty); false when process 0 holds it.
  bool written_by_all = false;
};

// The memory a run may hold before rows go to disk (a set of traces imported, the critical
// path's steps): `asked` (KERNALYSE_IMPORT_MEMORY_MB), else half the physical memory.
uint64_t memory_budget(uint64_t asked);

// Whether --align infers the clocks of this store (auto: when the ranks' clocks are not aligned;
// never for --compat hta).
bool infers_clocks(const Store& s, const LoadOptions& opt);

// Infers and applies the clocks when --align says so (auto: only on evidence that the recorded
// clocks are wrong, docs/clocks.md); the inference's line goes to info. Returns the inference
// when it ran.
std::optional<ClockInference> align_clocks(Store& s, const LoadOptions& opt,
                                           std::shared_ptr<const CollectiveMatch>* match);

// One store file with the columns `sel`; with may_align, its clocks aligned per --align. The
// inference reads the activities, /nccl, the annotations and the ranks only: it runs on a
// second thread while this one reads the launches, ops and counters (libhdf5 stays on one
// thread), which hides most of its cost.
LoadedRun read_run(const std::string& file, const ColumnSelection& sel, bool may_align,
                   const LoadOptions& opt);

// Trace files imported into one store (import_files), clocks aligned per --align, written to
// opt.output when set (checked before the import starts).
LoadedRun import_run(const std::vector<std::string>& files, const LoadOptions& opt);

// Several stores (one kernalyse-run per node) into one, written to opt.output: the later ones'
// ranks moved past the earlier ones' when they overlap (start-order ranks of two nodes), the
// hosts' clocks aligned by the inferred-clock method (within a host the recorded alignment
// stays). Returns the inference (empty when none ran).
ClockInference merge_node_stores(const std::vector<std::string>& files, const LoadOptions& opt);

// One side of --diff: a store whose clocks stay as recorded, read a rank at a time (RankSlices),
// or else a store or traces held whole (imported in memory), with the same rules as the
// analyses' input.
// Under mpirun (`spread`): a store read a rank at a time spreads its slices over the processes
// (RankSlices is then constructed by all of them together); a side read whole is analysed by
// process 0 (DiffInput). Every process calls it, for both sides, in the same order.
struct DiffSource {
  std::unique_ptr<RankSlices> slices;
  Store whole;
  const Spread* spread = nullptr;
  DiffInput input();
};
DiffSource load_diff_source(const std::string& input, const LoadOptions& opt,
                            const Spread* spread = nullptr);

}  // namespace kernalyse
