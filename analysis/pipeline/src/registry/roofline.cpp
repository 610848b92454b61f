// --roofline and --hints: one performance model run feeds both.
#include "kernalyse/roofline.h"

#include "kernalyse/sliced_folds.h"
#include "registry.h"

namespace kernalyse::registry {

namespace {
RooflineOptions roofline_options(const AnalysisContext& ctx) {
  RooflineOptions ro;
  ro.filter = ctx.options().filter;
  ro.peaks = ctx.options().peaks;  // --peaks: the page's too
  if (!ctx.page()) ro.verbose = ctx.options().verbose;
  return ro;
}
const RooflineResult& model(const AnalysisContext& ctx) {
  return ctx.shared<RooflineResult>(
      "roofline", [&] { return roofline_analysis(ctx.store(), roofline_options(ctx)); });
}
// A rank at a time: the model's fold (sliced_folds.h); roofline and hints each fold the slices,
// and the first to finish makes the result both render.
std::unique_ptr<SlicedRun> sliced_model(const AnalysisContext& ctx) {
  auto f = std::make_shared<RooflineFold>(roofline_options(ctx));
  auto run = std::make_unique<FoldRun>([f](const AnalysisContext& slice) { f->add(slice.store()); },
                                       [f](const AnalysisContext& whole) -> std::any {
                                         return &whole.shared<RooflineResult>(
                                             "roofline", [&] { return f->finish(whole.store()); });
                                       });
  run->spread([f] { return f->save(); }, [f](const std::string& b) { f->merge(b); });
  return run;
}
const RooflineResult& of(const std::any& r) { return *std::any_cast<const RooflineResult*>(r); }
}  // namespace

const Analysis& roofline() {
  static const Analysis a{
      "roofline",
      "performance model: FLOPs/bytes per op from recorded shapes, achieved FLOP/s and B/s "
      "against the device's roofline, bottleneck class per op and kernel",
      /*in_all=*/false,
      /*in_page=*/true,
      View::Store,
      Reads{.launches = true, .ops = true},
      [](const AnalysisContext& ctx) -> std::any { return &model(ctx); },
      [](const std::any& r, const AnalysisContext&, Report* out) { roofline_report(of(r), out); },
      sliced_model};
  return a;
}

const Analysis& hints() {
  static const Analysis a{
      "hints",
      "optimisation hints, each from a rule whose measured condition holds, with its numbers",
      /*in_all=*/false,
      /*in_page=*/false,
      View::Store,
      Reads{.launches = true, .ops = true},
      [](const AnalysisContext& ctx) -> std::any { return &model(ctx); },
      [](const std::any& r, const AnalysisContext&, Report* out) { hints_report(of(r), out); },
      sliced_model};
  return a;
}

}  // namespace kernalyse::registry
