// The analysis pipeline: one registry of analyses that every front end walks (kernalyse-merge's
// flags and column selection, the HTML report; next the Python module and the MPI runner). An
// analysis is one descriptor: its name (the CLI flag --NAME, the result's key), its help, what it
// reads besides the activities, which view of the store it runs on, how it runs into a typed
// result and how that renders into a Report (text, JSON and CSV renderers consume the Report).
// Adding an analysis is one file defining its descriptor (analysis/pipeline/src/registry/) and one
// line in the registry list (analysis/pipeline/src/pipeline.cpp); docs/architecture.md.
#pragma once

#include <any>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernalyse/analysis.h"
#include "kernalyse/collectives.h"
#include "kernalyse/critical_path.h"
#include "kernalyse/crossrank.h"
#include "kernalyse/perfmodel.h"
#include "kernalyse/report.h"
#include "kernalyse/store.h"

namespace kernalyse {

struct Spread;  // kernalyse/spread.h

// Every analysis option, once (kernalyse-merge's flags map onto it one to one). Each descriptor
// takes the part it uses; 0 for `top` means each analysis's own default.
struct AnalysisOptions {
  Filter filter;
  int top = 0;
  bool verbose = false;
  SummarySort sort = SummarySort::Total;
  GapSort gap_sort = GapSort::Total;
  double hist_min_us = 0, hist_max_us = 1000;
  int bins = 20;
  Compat compat = Compat::Native;
  int64_t kernel_wait_ns = 30'000;
  int64_t tokens = 0, units_per_step = 0;
  std::optional<DevicePeaks> peaks;
  std::vector<WhatIf> what_if;
  // The memory the critical path of a store read a rank at a time may hold in its steps' rows
  // before they go to a scratch file (critical_sliced.cpp); 0: half the physical memory
  // (memory_budget, kernalyse/load.h).
  uint64_t memory_bytes = 0;
};

// Which store an analysis reads. Hta: HTA's view of it (hta_view) under --compat hta, for the
// analyses that reproduce HTA's numbers; every other analysis reads the store as it is.
enum class View : uint8_t { Store, Hta };

// What an analysis reads besides the activities (which all read): the pipeline reads a store
// with the union of its analyses' needs, so that peak memory stays near the columns used.
struct Reads {
  bool launches = false;               // rank, start, correlation (and the activities' correlation)
  bool launch_threads = false;         // the launches' pid, tid, end and name too
  bool launch_threads_ranges = false;  // the same, only when the store has NVTX / user ranges
  bool nccl = false;
  bool ops = false;  // the ATen ops, without their times (no analysis reads them)
};

// What one run of the pipeline shares between its analyses: the store (clocks as aligned), HTA's
// view of it (made once, on first use), the whole store's collective match, the options.
class AnalysisContext {
 public:
  // match: the collective match the clock inference computed on this store, or null. page: the
  // HTML report's variant of the analyses (its own cuts and defaults, docs/report.md).
  AnalysisContext(const Store& s, const AnalysisOptions& o,
                  std::shared_ptr<const CollectiveMatch> match = nullptr, bool page = false);
  const Store& store(View v = View::Store) const;
  const AnalysisOptions& options() const { return opt_; }
  bool page() const { return page_; }
  // The cross-rank analyses' options for a view (the match only on the store's own rows).
  CrossRankOptions cross_rank(View v) const;
  // The view an analysis runs on here: its own under --compat hta, else the store.
  View view_of(View declared) const;
  // A value computed once per context and shared between analyses (overlap and breakdown share
  // one union pass, roofline and hints one model); thread-safe, the first caller computes it.
  template <class T>
  const T& shared(const std::string& key, const std::function<T()>& make) const {
    Slot& slot = slot_of(key);
    std::call_once(slot.once, [&] { slot.value = std::make_shared<T>(make()); });
    return *static_cast<const T*>(slot.value.get());
  }

 private:
  struct Slot {
    std::once_flag once;
    std::shared_ptr<void> value;
  };
  Slot& slot_of(const std::string& key) const;
  const Store& store_;
  AnalysisOptions opt_;
  std::shared_ptr<const CollectiveMatch> match_;
  bool page_;
  mutable std::mutex mu_;
  mutable std::map<std::string, std::unique_ptr<Slot>> slots_;
};

// An analysis run a rank at a time (analyse_by_rank, kernalyse/sliced.h): made per pipeline run
// from the whole run's context, fed each rank's slice in rank order, then asked for the typed
// result that `run` would have made on the whole store. Memory is a slice's rows plus what the
// state keeps across ranks (per-name totals, per-rank rows, the cross-rank rows).
class SlicedRun {
 public:
  virtual ~SlicedRun() = default;
  // One rank's slice: the context's store holds that rank's rows (header attributes and strings
  // as in the whole store). The slices come in ascending rank order.
  virtual void add(const AnalysisContext& slice) = 0;
  // The typed result; `whole`'s store holds the header (attributes, strings, /ranks) and the
  // cross-rank rows (kernalyse/sliced.h), not the per-rank rows.
  virtual std::any finish(const AnalysisContext& whole) = 0;
  // True when add() needs the whole run's cross-rank rows and their collective match: begin()
  // gets the whole run's context (its store: the cross-rank rows, matched) before the slices,
  // which then come in a pass after the cross-rank rows are gathered (with the activities and
  // the launches' rank, start and correlation only, unless the inferred clocks moved the times).
  virtual bool after_match() const { return false; }
  // True when add() after the match needs every column it was opened with (the pass after the
  // match otherwise reads only the activities and the launches' rank, start and correlation).
  virtual bool reads_all_columns() const { return false; }
  virtual void begin(const AnalysisContext& /*whole*/) {}
  // Under MPI (kernalyse/sliced.h, Spread): the state after this process's slices as bytes, and
  // the state of a process whose slices come after this one's merged into this one (then
  // finish() gives what one process that had added every slice would give).
  virtual std::string save() const = 0;
  virtual void merge(const std::string& bytes) = 0;
  // Under MPI, on every process after its slices and before save() (collective): work that
  // needs the rows of every process (the critical path's steps, critical_sliced.cpp).
  virtual void share(const Spread& /*spread*/) {}
};

struct Analysis {
  std::string name;  // the flag (--NAME) and the result's key: "gaps", "critical-path"
  std::string help;
  bool in_all = false;   // one of --all's analyses
  bool in_page = false;  // the HTML report draws it
  View view = View::Store;
  Reads reads;
  // The typed result (SummaryResult, GapResult, ...), from the context's store and options.
  std::function<std::any(const AnalysisContext&)> run;
  // Its Report part: headline lines, tables and JSON keys.
  std::function<void(const std::any&, const AnalysisContext&, Report*)> render;
  // Its rank-at-a-time form (SlicedRun), or null: then a run with it reads the store whole.
  std::function<std::unique_ptr<SlicedRun>(const AnalysisContext&)> sliced;
  // Its rank-at-a-time form pays only for a store past the memory budget (the critical path's
  // steps go through a scratch file): a smaller store, or several processes, read it whole.
  bool sliced_when_large = false;
};

// The registry, in output order.
const std::vector<const Analysis*>& analyses();
// The analysis of that name, or null.
const Analysis* find_analysis(std::string_view name);

// One pipeline run's results, in registry order.
struct AnalysisResult {
  const Analysis* analysis = nullptr;
  std::any value;
  Report part;  // rendered when run_analyses was asked to render
};
struct AnalysisResults {
  std::vector<AnalysisResult> items;
  // The typed result of the named analysis, or null when it did not run.
  template <class T>
  const T* get(std::string_view name) const {
    for (const auto& r : items)
      if (r.analysis->name == name) return std::any_cast<T>(&r.value);
    return nullptr;
  }
};

// Runs the analyses (in registry order, whatever the order given) as tasks on the shared pool,
// the longest-running first; each only reads the store. With render, each also fills its Report
// part on its task.
AnalysisResults run_analyses(const AnalysisContext& ctx, std::vector<const Analysis*> which,
                             bool render);
// Appends the rendered parts in registry order, after the --compat hta note when an analysis
// ran on HTA's view: the output does not depend on timing.
void append_results(AnalysisResults&& results, const AnalysisContext& ctx, Report* report);

// The columns a store is read with for these analyses (and the clock inference, when it may
// run: it matches collectives). has_ranges is asked only when an analysis reads the launches'
// threads for NVTX / user ranges.
ColumnSelection columns_for(const std::vector<const Analysis*>& which, Compat compat,
                            bool may_align, const std::function<bool()>& has_ranges);

// Whether the store has NVTX or user ranges (a small read of the annotations tells).
bool store_has_ranges(const Store& annotations_only);

// columns_for of the store file `store`, its ranges told by a read of its annotations alone when
// an analysis asks.
ColumnSelection columns_for_store(const std::string& store,
                                  const std::vector<const Analysis*>& which, Compat compat,
                                  bool may_align);

}  // namespace kernalyse
