// --idle: idle time per stream split into host wait, kernel wait and other (HTA's analysis:
// under --compat hta it reads HTA's view of the store).
#include "registry.h"

namespace kernalyse::registry {

const Analysis& idle() {
  static const Analysis a{"idle",
                          "idle breakdown per stream: host wait, kernel wait, other",
                          /*in_all=*/true,
                          /*in_page=*/false,
                          View::Hta,
                          Reads{.launches = true},
                          [](const AnalysisContext& ctx) -> std::any {
                            return stream_idle(ctx.store(View::Hta), ctx.cross_rank(View::Hta));
                          },
                          [](const std::any& r, const AnalysisContext& ctx, Report* out) {
                            idle_report(std::any_cast<const std::vector<StreamIdle>&>(r),
                                        ctx.options().kernel_wait_ns, out);
                          }};
  return a;
}

}  // namespace kernalyse::registry
