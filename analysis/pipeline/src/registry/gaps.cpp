// --gaps: idle gaps per stream, device and rank, their transitions and histogram.
#include "kernalyse/sliced_folds.h"
#include "registry.h"

namespace kernalyse::registry {

namespace {
GapOptions gap_options(const AnalysisContext& ctx) {
  const AnalysisOptions& o = ctx.options();
  GapOptions go;
  go.filter = o.filter;
  go.hist_min_us = o.hist_min_us;
  go.hist_max_us = o.hist_max_us;
  go.bins = o.bins;
  go.top = top_or(ctx, go.top);
  if (!ctx.page()) {
    go.sort = o.gap_sort;
    go.verbose = o.verbose;
  }
  return go;
}
}  // namespace

const Analysis& gaps() {
  static const Analysis a{
      "gaps",
      "idle-gap analysis per stream, device and rank",
      /*in_all=*/true,
      /*in_page=*/true,
      View::Store,
      Reads{},
      [](const AnalysisContext& ctx) -> std::any {
        return gap_analysis(ctx.store(), gap_options(ctx));
      },
      [](const std::any& r, const AnalysisContext&, Report* out) {
        gap_report(std::any_cast<const GapResult&>(r), out);
      },
      [](const AnalysisContext& ctx) -> std::unique_ptr<SlicedRun> {
        auto f = std::make_shared<GapFold>(gap_options(ctx));
        auto run = std::make_unique<FoldRun>(
            [f](const AnalysisContext& s) { f->add(s.store()); },
            [f](const AnalysisContext& w) -> std::any { return f->finish(w.store()); });
        run->spread([f] { return f->save(); }, [f](const std::string& b) { f->merge(b); });
        return run;
      }};
  return a;
}

}  // namespace kernalyse::registry
