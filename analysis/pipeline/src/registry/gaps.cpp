// --gaps: idle gaps per stream, device and rank, their transitions and histogram.
#include "registry.h"

namespace kernalyse::registry {

const Analysis& gaps() {
  static const Analysis a{"gaps",
                          "idle-gap analysis per stream, device and rank",
                          /*in_all=*/true,
                          /*in_page=*/true,
                          View::Store,
                          Reads{},
                          [](const AnalysisContext& ctx) -> std::any {
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
                            return gap_analysis(ctx.store(), go);
                          },
                          [](const std::any& r, const AnalysisContext&, Report* out) {
                            gap_report(std::any_cast<const GapResult&>(r), out);
                          }};
  return a;
}

}  // namespace kernalyse::registry
