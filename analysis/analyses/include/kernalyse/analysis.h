// Analyses over a Store. Each fills tables into a Report; none prints.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
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

// What every analysis report starts with: the emulated-data warning, the ranks and clock domain,
// each rank's collector status and dropped records, peak GPU memory (headline); per rank its
// source, clock alignment and peak memory and power counters (JSON "ranks"), and "emulated".
void store_overview(const Store& s, Report* out);

// Indices of activities passing the filter (all kinds), in store order. Throws Error when
// --rank names a rank the store lacks or --step a ProfilerStep#N that no selected rank has.
std::vector<uint32_t> select_activities(const Store& s, const Filter& f);
// Whether the store has the rank and the ProfilerStep#N the filter names: false exactly where
// select_activities throws for them. A diff reading a run a rank at a time skips the slices it
// is false for, and asks select_activities for the whole run's message if it was false for all.
bool filter_applies(const Store& s, const Filter& f);

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
// The same for the name ids marked in `used` (indexed by name id): a run read a rank at a time
// marks the ids of every slice, then groups them as group_names would the whole store's rows.
NameGroups group_used_names(const Store& s, const std::vector<uint8_t>& used, bool verbose);

// An enum's words (flags' choices, reports' labels): one table per vocabulary, every value once.
template <class E, size_t N>
struct Vocabulary {
  std::array<std::pair<E, std::string_view>, N> words;
  std::string_view name(E e) const {
    for (const auto& [k, w] : words)
      if (k == e) return w;
    return {};
  }
  std::optional<E> parse(std::string_view w) const {
    for (const auto& [k, x] : words)
      if (x == w) return k;
    return std::nullopt;
  }
  std::vector<std::string> all() const {
    std::vector<std::string> out;
    for (const auto& [k, w] : words) out.emplace_back(w);
    return out;
  }
  // Every value 0..N-1 of the enum named exactly once (checked at compile time below).
  constexpr bool complete() const {
    for (size_t v = 0; v < N; ++v) {
      size_t seen = 0;
      for (const auto& kw : words) seen += static_cast<size_t>(kw.first) == v;
      if (seen != 1) return false;
    }
    return true;
  }
};

enum class SummarySort { Count, Total, Mean, Pct };
// --sort's words.
inline constexpr Vocabulary<SummarySort, 4> kSummarySortWords{{{{SummarySort::Count, "count"},
                                                                {SummarySort::Total, "total"},
                                                                {SummarySort::Mean, "mean"},
                                                                {SummarySort::Pct, "pct"}}}};
static_assert(kSummarySortWords.complete());

struct SummaryOptions {
  Filter filter;
  SummarySort sort = SummarySort::Total;
  int top = 0;           // 0 = all
  bool verbose = false;  // full names instead of simplified
  bool per_rank = true;  // also one table per rank
};

// The summary's numbers. One table per scope (all selected ranks, then each rank): per kernel name
// its count and exact int64 ns statistics, sorted by opt.sort and cut to opt.top.
struct SummaryRow {
  std::string name;        // simplified (merged) unless verbose
  uint8_t categories = 0;  // bit per Category seen; category_label() names them
  int64_t count = 0, total_ns = 0, min_ns = 0, max_ns = 0;
  double std_ns = 0;  // population std, from exact integer moments
};
struct SummaryTable {
  int32_t rank = -1;                // -1: all selected ranks
  std::string scope;                // describe_filter() of the table's selection
  int64_t count = 0, total_ns = 0;  // over every name, shown or not: the shares' denominators
  size_t distinct = 0;              // names with kernels (rows before the top-N cut)
  std::vector<SummaryRow> rows;
};
struct SummaryResult {
  SummarySort sort = SummarySort::Total;  // the options it was built with (labels, widths)
  int top = 0;
  bool verbose = false;
  std::vector<int32_t> ranks;         // ranks with kernels, in store order
  SummaryTable all;                   // all selected ranks together
  std::vector<SummaryTable> by_rank;  // by rank number; only with opt.per_rank and > 1 rank
};
SummaryResult kernel_summary(const Store& s, const SummaryOptions& opt);
// Text/JSON/CSV: headline, kernel_summary and kernel_summary_rank<R> tables (docs/json.md),
// kernel_summary_totals.
void summary_report(const SummaryResult& r, Report* out);
// Both steps at once.
void kernel_summary(const Store& s, const SummaryOptions& opt, Report* out);
// "computation", "communication+memory", ...: the Category bits of a mask; "other" for none.
std::string category_label(uint8_t mask);

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
// Per range name: instances, ranks, the GPU items and time launched inside (int64 ns).
struct RangeRow {
  std::string name;
  int64_t calls = 0, ranks = 0, gpu_items = 0, gpu_ns = 0, cpu_ns = 0;
};
struct RangeResult {
  std::string scope;           // describe_filter()
  int64_t instances = 0;       // ranges in the selection
  size_t distinct = 0;         // their names (rows before the top-N cut)
  int64_t gpu_ns = 0;          // all selected GPU work
  int64_t covered_ns = 0;      // of it, launched inside at least one range (each launch once)
  std::vector<RangeRow> rows;  // by GPU time, cut to opt.top
};
RangeResult range_analysis(const Store& s, const RangeOptions& opt);
// Text/JSON/CSV: headline, the "ranges" table, ranges_coverage_pct.
void range_report(const RangeResult& r, Report* out);
// Both steps at once.
void range_analysis(const Store& s, const RangeOptions& opt, Report* out);

// The CPU ranges (NVTX, user annotations; not ProfilerStep) passing the filter: annotation rows.
std::vector<uint32_t> range_rows(const Store& s, const Filter& f);

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
// --gap-sort's words.
inline constexpr Vocabulary<GapSort, 5> kGapSortWords{{{{GapSort::Count, "count"},
                                                        {GapSort::Mean, "mean"},
                                                        {GapSort::Max, "max"},
                                                        {GapSort::Std, "std"},
                                                        {GapSort::Total, "total"}}}};
static_assert(kGapSortWords.complete());

struct GapOptions {
  Filter filter;
  double hist_min_us = 0.0;
  double hist_max_us = 1000.0;
  int bins = 20;
  GapSort sort = GapSort::Total;
  int top = 20;
  bool verbose = false;
};

// The gap analysis' numbers. One scope is a stream, a device (union of its streams) or a rank
// (union of its devices); gap = start − latest end so far, > 0 idle, < 0 an overlap.
struct GapScope {
  int32_t rank = 0, device = -1, stream = -1;  // -1 where the scope is wider
  int64_t devices = 0, streams = 0;            // inside the scope (device and rank rows)
  int64_t activities = 0, span_ns = 0, busy_ns = 0, idle_ns = 0;
  int64_t gaps = 0, overlaps = 0, touching = 0, max_gap_ns = 0;
  double median_gap_ns = 0, p95_gap_ns = 0;  // NaN without gaps (linear interpolation)
};
// Consecutive activities A → B on one stream, by display name.
struct GapTransition {
  std::string from, to;
  int64_t count = 0, overlaps = 0, total_ns = 0, max_ns = 0;  // count: gaps >= 0
  double mean_ns = 0, std_ns = 0;
};
struct GapResult {
  GapSort sort = GapSort::Total;  // the options it was built with (labels, widths)
  bool verbose = false;
  std::string scope;  // describe_filter()
  int64_t activities = 0;
  std::vector<GapScope> streams, devices, ranks;  // in (rank, device, stream) order
  int64_t stream_gaps = 0, stream_idle_ns = 0, stream_overlaps = 0, stream_touching = 0;
  int64_t device_idle_ns = 0, device_span_ns = 0, rank_idle_ns = 0, rank_span_ns = 0;
  std::vector<GapTransition> transitions;  // sorted by opt.sort, cut to opt.top
  size_t transition_pairs = 0;             // before the cut
  // Histogram of the per-stream gaps in µs: bins between edges_us, and those outside.
  std::vector<double> edges_us;
  std::vector<int64_t> counts;
  int64_t underflow = 0, overflow = 0;
};
// Throws Error on bad --bins / --hist-min / --hist-max.
GapResult gap_analysis(const Store& s, const GapOptions& opt);
// Text/JSON/CSV: headline, gaps_per_stream/_device/_rank, gap_transitions, gap_histogram (CSV),
// the histogram's bars (text), histogram and gap_totals (JSON); docs/json.md.
void gap_report(const GapResult& r, Report* out);
// Both steps at once.
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
