// --roofline and --hints: one performance model run feeds both.
#include "kernalyse/roofline.h"

#include "registry.h"

namespace kernalyse::registry {

namespace {
const RooflineResult& model(const AnalysisContext& ctx) {
  return ctx.shared<RooflineResult>("roofline", [&] {
    RooflineOptions ro;
    ro.filter = ctx.options().filter;
    ro.peaks = ctx.options().peaks;  // --peaks: the page's too
    if (!ctx.page()) ro.verbose = ctx.options().verbose;
    return roofline_analysis(ctx.store(), ro);
  });
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
      nullptr};  // the whole store (not in --all)
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
      nullptr};  // the whole store (not in --all)
  return a;
}

}  // namespace kernalyse::registry
