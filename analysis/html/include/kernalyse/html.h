// A self-contained HTML report of a store: run summary, per-rank timeline lanes, straggler
// heatmap, overlap, gap histogram, top kernels, GPU memory; charts drawn offline by the embedded
// charting library. Built from aggregates and a down-sampled timeline (size budget in
// docs/report.md), never from per-event data.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "kernalyse/alltoall.h"
#include "kernalyse/analysis.h"
#include "kernalyse/critical_path.h"
#include "kernalyse/crossrank.h"
#include "kernalyse/diff.h"
#include "kernalyse/energy.h"
#include "kernalyse/progress.h"
#include "kernalyse/roofline.h"
#include "kernalyse/store.h"

namespace kernalyse {

// What the page draws: the typed results of the registry's page analyses, which the pipeline runs
// with the run's options and collective match (html_report.h, analysis/pipeline). Not owned.
struct PageResults {
  Filter filter;  // the selection the analyses ran on (--rank/--step)
  const SummaryResult* summary = nullptr;
  const GapResult* gaps = nullptr;
  const RankUnionTables* unions = nullptr;  // overlap and breakdown
  const RangeResult* ranges = nullptr;
  const RooflineResult* roof = nullptr;
  const EnergyResult* energy = nullptr;
  const StragglerResult* ledger = nullptr;
  const CriticalPathResult* cpath = nullptr;
  const AllToAllResult* alltoall = nullptr;  // null when the analysis did not run
  CrossRankOptions cross_rank;               // the ledger's options, for its tables
};

// The page's own options (the analyses' are the pipeline's: HtmlOptions in html_report.h).
struct PageOptions {
  std::optional<int64_t> from_ns, to_ns;      // timeline and memory window, ns from export_base_ns
  int timeline_bins = 1000;                   // time bins per rank and lane
  int max_collectives = 400;                  // heatmap columns; more instances are binned
  bool force = false;                         // replace an existing file
  std::string title;                          // shown in the page header, e.g. the input file
  ProgressMode progress = ProgressMode::Off;  // "writing <path>", in report sections built
};

struct HtmlStats {
  int64_t bytes = 0;  // size of the file written
};

// What the page reads of the run's rows besides the analyses' results (its run summary, ranks
// table and timeline): the whole store's (page_source) or made a rank at a time (the pipeline's
// write_html_by_rank). The same section builders draw both.
struct PageRows {
  int64_t earliest = INT64_MAX;         // every table's earliest time (the origin, export.h)
  int64_t activities = 0;               // the selected activity rows
  std::map<int32_t, int64_t> per_rank;  // of which per rank
  int64_t first_gpu = INT64_MAX;        // the selected GPU work's span
  int64_t last_gpu = INT64_MIN;
  // The rows `rows` of s (a slice or the whole store; its earliest time: all its rows).
  void add(const Store& s, const std::vector<uint32_t>& rows);
};

// One rank's selected activity rows (of `s`, in store order), for its timeline lane.
using RankRowsVisitor =
    std::function<void(const Store& s, int32_t rank, std::span<const uint32_t> rows)>;

struct PageSource {
  // Attributes, strings and /ranks of the run; its GPU memory and power counters (all of them, or
  // at least those of every rank).
  const Store* header = nullptr;
  PageRows rows;
  std::string scope;  // describe_filter() of the selection
  // Visits each rank's selected rows in rank order (once, after the window is known).
  std::function<void(const RankRowsVisitor&)> each_rank;
};

// The whole store's source: `s` and its rows selected by `filter` (a bad --rank/--step throws).
// `s` outlives the result.
PageSource page_source(const Store& s, const Filter& filter);

// The data the page's script draws from (also embedded in the page as JSON). Exposed for tests.
nlohmann::json html_page_data(const PageSource& src, const PageResults& r, const PageOptions& opt);

// Writes the page to a temporary name and renames it onto path; refuses an existing file without
// opt.force (checked by the caller before the analyses too). progress: the caller's bar, advanced
// through the page's own steps (kPageSteps). Throws Error naming the file.
constexpr int64_t kPageSteps = 2;
HtmlStats write_html_page(const PageSource& src, const PageResults& r, const std::string& path,
                          const PageOptions& opt, Progress* progress = nullptr);

// Self-contained HTML page drawing a trace diff's BASE and TEST side by side (diff_html.cpp);
// refuses an existing file without force; written to a temporary name and renamed. Throws Error.
// Returns bytes written.
int64_t write_diff_html(const TraceDiff& d, const std::string& path, bool force);

// Writes content to a temporary name next to path and renames it onto path: no partial file is
// ever left; refuses an existing path without force. Throws Error naming the file.
// "&", "<", ">", '"' as HTML entities.
std::string escape_html(std::string_view s);

void write_file_atomic(const std::string& path, std::string_view content, bool force);

}  // namespace kernalyse
