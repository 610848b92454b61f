// The HTML report of a run: the registry's page analyses (pipeline.h, `in_page`) run with the
// run's options and collective match, then drawn by the page renderer (html.h, analysis/html).
#pragma once

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "kernalyse/html.h"
#include "kernalyse/pipeline.h"

namespace kernalyse {

struct HtmlOptions : PageOptions {
  // The analyses' options, as for the text report (--rank/--step, --top, the gap histogram's
  // edges, --kernel-wait-us, --peaks); the page runs its variant of each (pipeline.h).
  AnalysisOptions analysis;
  // The run's collective match (the clock inference's), reused by the page's ledger and
  // critical path; null: they match themselves.
  std::shared_ptr<const CollectiveMatch> match;
};

// The registry's page analyses (in_page), in registry order, and the options they run with.
std::vector<const Analysis*> page_analyses();
AnalysisOptions page_analysis_options(const HtmlOptions& opt);
// The page's typed results out of the page analyses' (run whole or a rank at a time; `res` and
// `ctx` outlive them).
PageResults page_results(const AnalysisResults& res, const AnalysisContext& ctx);

// Progress steps of the analyses, before the page's own (kPageSteps).
constexpr int64_t kPageAnalysisSteps = 4;

// The data the page's script draws from (also embedded in the page as JSON). Exposed for tests.
nlohmann::json html_report_data(const Store& s, const HtmlOptions& opt);

// Writes the report to a temporary name and renames it onto path; refuses an existing file
// without opt.force, before any analysis runs. Throws Error naming the file.
HtmlStats write_html_report(const Store& s, const std::string& path, const HtmlOptions& opt);

}  // namespace kernalyse
