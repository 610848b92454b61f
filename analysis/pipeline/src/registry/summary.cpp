// --summary: the kernel summary (the default report).
#include "kernalyse/sliced_folds.h"
#include "registry.h"

namespace kernalyse::registry {

namespace {
SummaryOptions summary_options(const AnalysisContext& ctx) {
  const AnalysisOptions& o = ctx.options();
  SummaryOptions so;
  so.filter = o.filter;
  if (ctx.page()) {  // the page's kernel bars: all ranks together, top 20
    so.top = top_or(ctx, 20);
    so.per_rank = false;
  } else {
    so.sort = o.sort;
    so.top = o.top;
    so.verbose = o.verbose;
  }
  return so;
}
}  // namespace

const Analysis& summary() {
  static const Analysis a{
      "summary",
      "kernel summary (the default report)",
      /*in_all=*/true,
      /*in_page=*/true,
      View::Store,
      Reads{},
      [](const AnalysisContext& ctx) -> std::any {
        return kernel_summary(ctx.store(), summary_options(ctx));
      },
      [](const std::any& r, const AnalysisContext&, Report* out) {
        summary_report(std::any_cast<const SummaryResult&>(r), out);
      },
      [](const AnalysisContext& ctx) -> std::unique_ptr<SlicedRun> {
        auto f = std::make_shared<SummaryFold>(summary_options(ctx));
        auto run = std::make_unique<FoldRun>(
            [f](const AnalysisContext& s) { f->add(s.store()); },
            [f](const AnalysisContext& w) -> std::any { return f->finish(w.store()); });
        run->spread([f] { return f->save(); }, [f](const std::string& b) { f->merge(b); });
        return run;
      }};
  return a;
}

}  // namespace kernalyse::registry
