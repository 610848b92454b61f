// --ranges: GPU time by NVTX / user-annotation range.
#include "registry.h"

namespace kernalyse::registry {

const Analysis& ranges() {
  static const Analysis a{
      "ranges",
      "GPU time by NVTX / user-annotation range (kernels launched inside each range)",
      /*in_all=*/true,
      /*in_page=*/true,
      View::Store,
      Reads{.launches = true, .launch_threads_ranges = true},
      [](const AnalysisContext& ctx) -> std::any {
        RangeOptions ro;
        ro.filter = ctx.options().filter;
        ro.top = top_or(ctx, 20);
        return range_analysis(ctx.store(), ro);
      },
      [](const std::any& r, const AnalysisContext&, Report* out) {
        range_report(std::any_cast<const RangeResult&>(r), out);
      }};
  return a;
}

}  // namespace kernalyse::registry
