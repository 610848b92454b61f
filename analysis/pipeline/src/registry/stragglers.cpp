// --stragglers: collective matching across ranks, the straggler ledger and its root causes.
#include "registry.h"

namespace kernalyse::registry {

const Analysis& stragglers() {
  static const Analysis a{"stragglers",
                          "collective matching across ranks, straggler ledger and root cause",
                          /*in_all=*/true,
                          /*in_page=*/true,
                          View::Store,
                          Reads{.launches = true, .nccl = true},
                          [](const AnalysisContext& ctx) -> std::any {
                            // Shared: the report's deferred JSON keeps it after the run.
                            return std::make_shared<const StragglerResult>(
                                straggler_ledger(ctx.store(), ctx.cross_rank(View::Store)));
                          },
                          [](const std::any& r, const AnalysisContext& ctx, Report* out) {
                            straggler_report(
                                std::any_cast<const std::shared_ptr<const StragglerResult>&>(r),
                                ctx.cross_rank(View::Store), out);
                          }};
  return a;
}

}  // namespace kernalyse::registry
