// --critical-path (and --what-if): the cross-rank critical path per step.
#include "registry.h"

namespace kernalyse::registry {

const Analysis& critical_path() {
  static const Analysis a{"critical-path",
                          "cross-rank critical path per step: by rank, kind, kernel and range",
                          /*in_all=*/false,
                          /*in_page=*/true, View::Store,
                          // It follows the launching threads and their synchronisations.
                          Reads{.launches = true, .launch_threads = true, .nccl = true},
                          [](const AnalysisContext& ctx) -> std::any {
                            CriticalPathOptions co;
                            co.filter = ctx.options().filter;
                            co.top = top_or(ctx, 20);
                            co.match = ctx.cross_rank(View::Store).match;
                            if (!ctx.page()) {  // the page draws the measured path only
                              co.verbose = ctx.options().verbose;
                              co.what_if = ctx.options().what_if;
                            }
                            return kernalyse::critical_path(ctx.store(), co);
                          },
                          [](const std::any& r, const AnalysisContext&, Report* out) {
                            critical_path_report(std::any_cast<const CriticalPathResult&>(r), out);
                          },
                          // A step at a time: its graph spans every rank's rows of the step.
                          sliced_critical_path, /*sliced_when_large=*/true};
  return a;
}

}  // namespace kernalyse::registry
