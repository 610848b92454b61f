#include "kernalyse/html_report.h"

#include "kernalyse/atomic_file.h"

namespace kernalyse {
namespace {

// Progress steps of the analyses, before the page's own (kPageSteps).
constexpr int64_t kAnalysisSteps = 4;

// The registry's page analyses, run once on the shared pool with the run's options and
// collective match; the context and results outlive the PageResults that point into them.
struct PageRun {
  AnalysisContext ctx;
  AnalysisResults results;
  PageResults page;
};

std::unique_ptr<PageRun> run_page(const Store& s, const HtmlOptions& opt) {
  AnalysisOptions ao = opt.analysis;
  ao.compat = Compat::Native;  // the page shows kernalyse's own numbers
  auto r = std::unique_ptr<PageRun>(new PageRun{AnalysisContext(s, ao, opt.match, true), {}, {}});
  std::vector<const Analysis*> page;
  for (const Analysis* a : analyses())
    if (a->in_page) page.push_back(a);
  r->results = run_analyses(r->ctx, page, /*render=*/false);
  const AnalysisResults& res = r->results;
  PageResults& p = r->page;
  p.filter = ao.filter;
  p.summary = res.get<SummaryResult>("summary");
  p.gaps = res.get<GapResult>("gaps");
  p.unions = *res.get<const RankUnionTables*>("overlap");
  p.ranges = res.get<RangeResult>("ranges");
  p.roof = *res.get<const RooflineResult*>("roofline");
  p.energy = res.get<EnergyResult>("energy");
  p.ledger = res.get<std::shared_ptr<const StragglerResult>>("stragglers")->get();
  p.cpath = res.get<CriticalPathResult>("critical-path");
  p.cross_rank = r->ctx.cross_rank(View::Store);
  return r;
}

}  // namespace

nlohmann::json html_report_data(const Store& s, const HtmlOptions& opt) {
  const auto run = run_page(s, opt);
  return html_page_data(s, run->page, opt);
}

HtmlStats write_html_report(const Store& s, const std::string& path, const HtmlOptions& opt) {
  check_output_path(path, opt.force);  // before the analyses run
  Progress progress("writing " + path, kAnalysisSteps + kPageSteps, "sections", opt.progress);
  const auto run = run_page(s, opt);
  progress.advance(kAnalysisSteps);
  HtmlStats st = write_html_page(s, run->page, path, opt, &progress);
  progress.finish();
  return st;
}

}  // namespace kernalyse
