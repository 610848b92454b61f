// --summary: the kernel summary (the default report).
#include "registry.h"

namespace kernalyse::registry {

const Analysis& summary() {
  static const Analysis a{"summary",
                          "kernel summary (the default report)",
                          /*in_all=*/true,
                          /*in_page=*/true,
                          View::Store,
                          Reads{},
                          [](const AnalysisContext& ctx) -> std::any {
                            const AnalysisOptions& o = ctx.options();
                            SummaryOptions so;
                            so.filter = o.filter;
                            if (ctx.page()) {  // the page's kernel bars: all ranks together, top 20
                              so.top = top_or(ctx, 20);
                              so.per_rank = false;
                            } else {
                              so.sort = o.sort;
                              so.top = o.top;
                              so.verbose = o.verbose;
                            }
                            return kernel_summary(ctx.store(), so);
                          },
                          [](const std::any& r, const AnalysisContext&, Report* out) {
                            summary_report(std::any_cast<const SummaryResult&>(r), out);
                          }};
  return a;
}

}  // namespace kernalyse::registry
