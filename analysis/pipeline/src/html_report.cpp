#include "kernalyse/html_report.h"

#include "kernalyse/atomic_file.h"

namespace kernalyse {

std::vector<const Analysis*> page_analyses() {
  std::vector<const Analysis*> page;
  for (const Analysis* a : analyses())
    if (a->in_page) page.push_back(a);
  return page;
}

AnalysisOptions page_analysis_options(const HtmlOptions& opt) {
  AnalysisOptions ao = opt.analysis;
  ao.compat = Compat::Native;  // the page shows kernalyse's own numbers
  return ao;
}

PageResults page_results(const AnalysisResults& res, const AnalysisContext& ctx) {
  PageResults p;
  p.filter = ctx.options().filter;
  p.summary = res.get<SummaryResult>("summary");
  p.gaps = res.get<GapResult>("gaps");
  p.unions = *res.get<const RankUnionTables*>("overlap");
  p.ranges = res.get<RangeResult>("ranges");
  p.roof = *res.get<const RooflineResult*>("roofline");
  p.energy = res.get<EnergyResult>("energy");
  p.ledger = res.get<std::shared_ptr<const StragglerResult>>("stragglers")->get();
  p.cpath = res.get<CriticalPathResult>("critical-path");
  p.alltoall = res.get<AllToAllResult>("alltoall");
  p.cross_rank = ctx.cross_rank(View::Store);
  return p;
}

namespace {

// The registry's page analyses, run once on the shared pool with the run's options and
// collective match; the context and results outlive the PageResults that point into them.
struct PageRun {
  AnalysisContext ctx;
  AnalysisResults results;
  PageResults page;
};

std::unique_ptr<PageRun> run_page(const Store& s, const HtmlOptions& opt) {
  auto r = std::unique_ptr<PageRun>(
      new PageRun{AnalysisContext(s, page_analysis_options(opt), opt.match, true), {}, {}});
  r->results = run_analyses(r->ctx, page_analyses(), /*render=*/false);
  r->page = page_results(r->results, r->ctx);
  return r;
}

}  // namespace

nlohmann::json html_report_data(const Store& s, const HtmlOptions& opt) {
  const PageSource src = page_source(s, opt.analysis.filter);
  const auto run = run_page(s, opt);
  return html_page_data(src, run->page, opt);
}

HtmlStats write_html_report(const Store& s, const std::string& path, const HtmlOptions& opt) {
  check_output_path(path, opt.force);  // before the analyses run
  Progress progress("writing " + path, kPageAnalysisSteps + kPageSteps, "sections", opt.progress);
  const PageSource src = page_source(s, opt.analysis.filter);  // a bad --rank/--step throws
  const auto run = run_page(s, opt);
  progress.advance(kPageAnalysisSteps);
  HtmlStats st = write_html_page(src, run->page, path, opt, &progress);
  progress.finish();
  return st;
}

}  // namespace kernalyse
