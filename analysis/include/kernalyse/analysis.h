// Analyses over a Store. Each fills tables into a Report; none prints.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernalyse/report.h"
#include "kernalyse/store.h"
#include "kernalyse/units.h"

namespace kernalyse {

// Common filters: --rank R, --step N.
struct Filter {
  std::optional<int32_t> rank;
  std::optional<int32_t> step;
};

// Indices of activities passing the filter (all kinds), in store order. Throws Error when
// --rank names a rank the store lacks or --step a ProfilerStep#N that no selected rank has.
std::vector<uint32_t> select_activities(const Store& s, const Filter& f);

// "rank 3, all steps", "ranks 0-7, ProfilerStep#5", ... for headlines and titles.
std::string describe_filter(const Store& s, const Filter& f);

// Display names for the distinct name ids of the given rows: simplified (merged) unless verbose.
// Simplification runs once per distinct name id, never per row.
struct NameGroups {
  std::vector<int32_t> group_of;   // indexed by name_id; -1 where no given row uses it
  std::vector<std::string> names;  // indexed by group
};
// kernels_only: look only at rows with kind == Kernel.
NameGroups group_names(const Store& s, const std::vector<uint32_t>& rows, bool verbose,
                       bool kernels_only);

enum class SummarySort { Count, Total, Mean, Pct };

struct SummaryOptions {
  Filter filter;
  SummarySort sort = SummarySort::Total;
  int top = 0;           // 0 = all
  bool verbose = false;  // full names instead of simplified
  bool per_rank = true;  // also one table per rank
};
void kernel_summary(const Store& s, const SummaryOptions& opt, Report* out);

// The numbers behind the summary's first table: per kernel name (full names when verbose, else
// simplified) the count and total/min/max duration of the selected kernels, all ranks together;
// in name-group order (first appearance of the name id).
struct KernelStat {
  std::string name;
  int64_t count = 0, total_ns = 0, min_ns = 0, max_ns = 0;
};
std::vector<KernelStat> kernel_stats(const Store& s, const Filter& f, bool verbose);

// GPU time by annotated range ("model-aware mapping"): every CPU range (NVTX, user annotation;
// not ProfilerStep) gets the GPU work launched inside it on the same thread, joined through the
// launch's correlation id. Inclusive: a kernel counts for each range that encloses its launch.
struct RangeOptions {
  Filter filter;
  int top = 20;  // 0 = all
};
void range_analysis(const Store& s, const RangeOptions& opt, Report* out);

// The join behind --ranges (shared with --energy): the CPU ranges (NVTX, user annotations; not
// ProfilerStep) passing the filter, and for each the launches on its rank and thread that start
// inside it (start <= launch start <= end), in start order. GPU work joins a launch through
// (rank, correlation).
class RangeLaunches {
 public:
  RangeLaunches(const Store& s, const Filter& f);
  std::vector<uint32_t> ranges;                                                   // annotation rows
  std::pair<const uint32_t*, const uint32_t*> launches_in(uint32_t range) const;  // launch rows

 private:
  const Store* s_;
  std::map<std::pair<int32_t, int64_t>, std::vector<uint32_t>> by_thread_;
};

enum class GapSort { Count, Mean, Max, Std, Total };

struct GapOptions {
  Filter filter;
  double hist_min_us = 0.0;
  double hist_max_us = 1000.0;
  int bins = 20;
  GapSort sort = GapSort::Total;
  int top = 20;
  bool verbose = false;
};
void gap_analysis(const Store& s, const GapOptions& opt, Report* out);

// --- building blocks, exposed for tests ---
struct Interval {
  int64_t start;
  int64_t end;
};
struct GapStats {
  int64_t count = 0;          // gaps > 0
  int64_t total_ns = 0;       // sum of gaps > 0
  int64_t overlaps = 0;       // next start < latest end so far
  int64_t touching = 0;       // gap == 0
  int64_t busy_ns = 0;        // |union|
  int64_t span_ns = 0;        // last end - first start
  std::vector<int64_t> gaps;  // the positive gaps, in order
};
// Intervals sorted by start; gap = next start - latest end so far. Unsorted input is sorted
// by (start, end) first.
GapStats stream_gaps(const std::vector<Interval>& sorted);
// Union length of arbitrary intervals (sorted internally).
int64_t union_length(std::vector<Interval> v);

}  // namespace kernalyse
