// --alltoall: the all-to-all(v) rank × rank traffic matrix and every collective's intra-/inter-host
// split.
#include "kernalyse/alltoall.h"

#include "kernalyse/analysis.h"
#include "registry.h"

namespace kernalyse::registry {

const Analysis& alltoall() {
  static const Analysis a{
      "alltoall",
      "all-to-all(v) rank x rank byte matrix per step; collective time within vs across hosts",
      /*in_all=*/false,  // opt-in, as the roofline: its tables are per rank pair
      /*in_page=*/true,
      View::Store,
      Reads{.nccl = true},
      [](const AnalysisContext& ctx) -> std::any {
        const Store& s = ctx.store();
        return alltoall_analysis(s,
                                 match_collectives(s, select_activities(s, ctx.options().filter)));
      },
      [](const std::any& r, const AnalysisContext&, Report* out) {
        alltoall_report(std::any_cast<const AllToAllResult&>(r), out);
      },
      nullptr};  // the whole store: the match spans the ranks (not in --all: no sliced form)
  return a;
}

}  // namespace kernalyse::registry
