// --stragglers: collective matching across ranks, the straggler ledger and its root causes.
#include "kernalyse/sliced_folds.h"
#include "registry.h"

namespace kernalyse::registry {

namespace {
// A rank at a time: the match from the cross-rank rows, each rank's root-cause windows from its
// slice (after the match), the ledger from both. The kernels' name ids come from the pipeline.
std::unique_ptr<SlicedRun> sliced_ledger(const AnalysisContext&) {
  auto fold = std::make_shared<std::unique_ptr<StragglerFold>>();
  auto run = std::make_unique<FoldRun>(
      [fold](const AnalysisContext& slice) { (*fold)->add(slice.store()); },
      [fold](const AnalysisContext& whole) -> std::any {
        return std::make_shared<const StragglerResult>((*fold)->finish(whole.store()));
      },
      [fold](const AnalysisContext& whole) {
        *fold = std::make_unique<StragglerFold>(whole.cross_rank(View::Store));
        (*fold)->begin(whole.store(), whole.shared<std::vector<uint8_t>>(
                                          "kernel names", [] { return std::vector<uint8_t>(); }));
      });
  run->spread([fold] { return (*fold)->save(); },
              [fold](const std::string& b) { (*fold)->merge(b); });
  return run;
}
}  // namespace

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
                          },
                          sliced_ledger};
  return a;
}

}  // namespace kernalyse::registry
