// --alltoall: the all-to-all(v) rank × rank traffic matrix and every collective's intra-/inter-host
// split.
#include "kernalyse/alltoall.h"

#include "kernalyse/analysis.h"
#include "registry.h"

namespace kernalyse::registry {

namespace {
// The collective match of the context's store (whole, or the cross-rank rows: the same
// instances) and the bytes of its all-to-all instances.
AllToAllResult alltoall_of(const AnalysisContext& ctx) {
  const Store& s = ctx.store();
  return alltoall_analysis(s, match_collectives(s, select_activities(s, ctx.options().filter)));
}
}  // namespace

const Analysis& alltoall() {
  static const Analysis a{
      "alltoall",
      "all-to-all(v) rank x rank byte matrix per step; collective time within vs across hosts",
      /*in_all=*/false,  // opt-in, as the roofline: its tables are per rank pair
      /*in_page=*/true, View::Store, Reads{.nccl = true},
      [](const AnalysisContext& ctx) -> std::any { return alltoall_of(ctx); },
      [](const std::any& r, const AnalysisContext&, Report* out) {
        alltoall_report(std::any_cast<const AllToAllResult&>(r), out);
      },
      // A rank at a time: nothing from the slices; the match and the bytes are the cross-rank
      // rows' (communication kernels and their /nccl rows).
      [](const AnalysisContext&) -> std::unique_ptr<SlicedRun> {
        auto run = std::make_unique<FoldRun>(
            [](const AnalysisContext&) {},
            [](const AnalysisContext& whole) -> std::any { return alltoall_of(whole); });
        run->spread([] { return std::string(); }, [](const std::string&) {});
        return run;
      }};
  return a;
}

}  // namespace kernalyse::registry
