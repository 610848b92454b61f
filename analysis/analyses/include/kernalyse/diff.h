// Trace diff: what changed between two runs (BASE and TEST). A typed result of numbers (int64
// ns, counts, names); the renderers (text/JSON/CSV through a Report, HTML side by side) consume
// it. Definitions in docs/analyses.md ("Trace diff"), JSON in docs/json.md.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "kernalyse/analysis.h"
#include "kernalyse/crossrank.h"
#include "kernalyse/report.h"
#include "kernalyse/spread.h"
#include "kernalyse/store.h"

namespace kernalyse {

struct DiffOptions {
  std::string base_label = "BASE", test_label = "TEST";  // input names, for messages and titles
  Filter filter;                                         // --rank / --step, applied to both sides
  int64_t kernel_wait_ns = 30'000;                       // idle split (as --idle)
  bool cross_rank = true;  // overlap, idle split and straggler ledger per rank
};

// One side's totals of a kernel name (or a group of names).
struct KernelSide {
  int64_t count = 0;
  int64_t total_ns = 0;
};

// A kernel name present in both runs (matched by its full name).
struct KernelDelta {
  std::string name;
  KernelSide base, test;
  bool changed() const { return base.count != test.count || base.total_ns != test.total_ns; }
};

// A kernel name present in one run only (what no replaced group explains).
struct KernelOnly {
  std::string name;
  KernelSide side;
};

// Kernels that disappeared and kernels that appeared under the same launching range (the
// innermost NVTX / user-annotation range enclosing their launch on its CPU thread): a fusion
// (eager elementwise kernels → one Triton kernel) or a vendor's other names for the same op.
struct ReplacedGroup {
  std::string range;               // the range (or op) name both runs share
  std::string by = "range";        // what matched: "range" (NVTX / user range) or "op" (ATen op)
  std::vector<KernelOnly> before;  // BASE-only names launched inside it
  std::vector<KernelOnly> after;   // TEST-only names launched inside it
  KernelSide base, test;           // the sums of before / after
};

// ProfilerStep#N in both or one of the runs: CPU time (longest rank) and GPU span (longest rank).
struct StepSide {
  int64_t cpu_ns = 0;       // max over ranks of the ProfilerStep#N annotation's duration
  int64_t gpu_span_ns = 0;  // max over ranks of last end − first start of the step's GPU work
  int64_t kernels = 0;      // kernels assigned to the step, all ranks
  int32_t ranks = 0;
};
struct StepDelta {
  int32_t step = 0;
  std::optional<StepSide> base, test;
};

// A rank's cross-rank figures on one side (reusing overlap, breakdown, idle and the ledger).
struct RankSide {
  UnionStats unions;         // span, busy, compute, comm, overlap, exposed comm
  int64_t host_wait_ns = 0;  // idle split, summed over the rank's streams
  int64_t kernel_wait_ns = 0;
  int64_t other_idle_ns = 0;
  int64_t times_last = 0;  // straggler ledger
  int64_t inflicted_ns = 0;
  int64_t suffered_ns = 0;
};
struct RankDelta {
  int32_t rank = 0;
  std::optional<RankSide> base, test;
};

struct TraceDiff {
  std::string base_label, test_label;  // input names
  bool base_emulated = false, test_emulated = false;
  KernelSide base_kernels, test_kernels;         // all kernels of each side
  std::vector<StepDelta> steps;                  // by step number
  std::vector<KernelDelta> kernels;              // names in both, by |total delta| descending
  std::vector<KernelOnly> only_base, only_test;  // by total descending
  std::vector<ReplacedGroup> replaced;           // by range name
  std::vector<RankDelta> ranks;                  // by rank
  // The straggler ledger's worst rank (most wait inflicted while last), -1 if none.
  int32_t base_straggler = -1, test_straggler = -1;
  int64_t base_collectives = 0, test_collectives = 0;  // matched collective instances
  bool cross_rank = false;                             // ranks/straggler figures computed
  // True when nothing differs: same kernels (counts and times), steps, ranks' figures.
  bool identical() const;
};

// One side as the diff reads it: `header` holds the attributes, strings and /ranks rows;
// `each_slice(f)` hands f the side's rows as stores that each hold whole ranks (all of a rank's
// rows in one of them) with the header's string ids. It may be called twice (a second pass
// gathers launchers for one-sided names a --rank/--step filter hid from the first).
// Under mpirun (`spread`, kernalyse/spread.h), each_slice hands this process's share of the
// slices only (process p the p-th of P contiguous runs of ranks, or process 0 all of a side read
// whole); the processes' figures are exchanged after each pass, so that every process holds the
// same diff, the serial one. Every process calls diff_inputs (collective).
struct DiffInput {
  const Store* header = nullptr;
  std::function<void(const std::function<void(const Store&)>&)> each_slice;
  const Spread* spread = nullptr;
};
TraceDiff diff_inputs(const DiffInput& base, const DiffInput& test, const DiffOptions& opt);

// Two stores in memory, each its own header and one slice.
TraceDiff diff_stores(const Store& base, const Store& test, const DiffOptions& opt);

// Tables for text and CSV (diff_steps, diff_kernels, diff_only_base, diff_only_test,
// diff_replaced, diff_ranks) and the "diff" JSON object; render with render_text/json/csv.
Report diff_report(const TraceDiff& d, int top = 0);

}  // namespace kernalyse
