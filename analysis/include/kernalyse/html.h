// A self-contained HTML report of a store: run summary, per-rank timeline lanes, straggler
// heatmap, overlap, gap histogram, top kernels, GPU memory; charts drawn offline by the embedded
// charting library. Built from aggregates and a down-sampled timeline (size budget in
// docs/report.md), never from per-event data.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "kernalyse/analysis.h"
#include "kernalyse/pipeline.h"
#include "kernalyse/progress.h"
#include "kernalyse/store.h"

namespace kernalyse {

struct HtmlOptions {
  // The analyses' options, as for the text report (--rank/--step, --top, the gap histogram's
  // edges, --kernel-wait-us, --peaks); the page runs its variant of each (pipeline.h).
  AnalysisOptions analysis;
  // The run's collective match (the clock inference's), reused by the page's ledger and
  // critical path; null: they match themselves.
  std::shared_ptr<const CollectiveMatch> match;
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

// The data the page's script draws from (also embedded in the page as JSON). Exposed for tests.
nlohmann::json html_report_data(const Store& s, const HtmlOptions& opt);

// Writes the report to a temporary name and renames it onto path; refuses an existing file
// without opt.force. Throws Error naming the file.
HtmlStats write_html_report(const Store& s, const std::string& path, const HtmlOptions& opt);

// Writes content to a temporary name next to path and renames it onto path: no partial file is
// ever left; refuses an existing path without force. Throws Error naming the file.
// "&", "<", ">", '"' as HTML entities.
std::string escape_html(std::string_view s);

void write_file_atomic(const std::string& path, std::string_view content, bool force);

}  // namespace kernalyse
