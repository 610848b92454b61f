// --energy: joules per kernel, rank, step and range from power samples.
#include "kernalyse/energy.h"

#include "registry.h"

namespace kernalyse::registry {

const Analysis& energy() {
  static const Analysis a{
      "energy",
      "energy (J) per kernel, rank and step from gpu_power_mw samples or --power-log",
      /*in_all=*/true,
      /*in_page=*/true,
      View::Store,
      Reads{.launch_threads_ranges = true},  // its per-range rows join ranges like --ranges
      [](const AnalysisContext& ctx) -> std::any {
        const AnalysisOptions& o = ctx.options();
        EnergyOptions eo;
        eo.filter = o.filter;
        if (!ctx.page()) {
          eo.verbose = o.verbose;
          eo.tokens = o.tokens;
          eo.units_per_step = o.units_per_step;
        }
        return energy_analysis(ctx.store(), eo);
      },
      [](const std::any& r, const AnalysisContext& ctx, Report* out) {
        energy_report(std::any_cast<const EnergyResult&>(r), out, ctx.options().top);
      }};
  return a;
}

}  // namespace kernalyse::registry
