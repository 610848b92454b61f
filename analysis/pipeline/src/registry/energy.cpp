// --energy: joules per kernel, rank, step and range from power samples.
#include "kernalyse/energy.h"

#include <map>

#include "registry.h"

namespace kernalyse::registry {

namespace {
EnergyOptions energy_options(const AnalysisContext& ctx) {
  const AnalysisOptions& o = ctx.options();
  EnergyOptions eo;
  eo.filter = o.filter;
  if (!ctx.page()) {
    eo.verbose = o.verbose;
    eo.tokens = o.tokens;
    eo.units_per_step = o.units_per_step;
  }
  return eo;
}

// A rank at a time, for runs without power samples (the common case: no energy to split, only
// the uncovered work and the ranges' instances to count). A slice with samples makes finish
// return nothing: the pipeline then runs the analysis on the whole store.
std::unique_ptr<SlicedRun> sliced_energy(const AnalysisContext& ctx) {
  struct Acc {
    EnergyResult sum;
    std::map<std::string, EnergyRow> ranges;
    bool sampled = false;
  };
  auto acc = std::make_shared<Acc>();
  const EnergyOptions eo = energy_options(ctx);
  // One slice's (or, under MPI, a process's) counts and range rows added.
  auto absorb = [acc](const EnergyResult& r) {
    acc->sampled = acc->sampled || !r.devices.empty() || !r.kernels.empty() || !r.ranks.empty() ||
                   !r.steps.empty() || r.total_j != 0 || r.period_ns != 0 ||
                   r.median_kernel_ns != 0;
    acc->sum.uncovered += r.uncovered;
    acc->sum.unsampled_devices += r.unsampled_devices;
    for (const EnergyRow& x : r.ranges) {
      EnergyRow& into = acc->ranges[x.name];
      into.name = x.name;
      into.calls += x.calls;
      into.count += x.count;
      into.busy_ns += x.busy_ns;
      into.joules += x.joules;
      acc->sampled = acc->sampled || x.joules != 0;
    }
  };
  auto run = std::make_unique<FoldRun>(
      [acc, absorb, eo](const AnalysisContext& slice) {
        if (!acc->sampled) absorb(energy_analysis(slice.store(), eo));
      },
      [acc, eo](const AnalysisContext&) -> std::any {
        if (acc->sampled) return {};
        EnergyResult out = acc->sum;
        out.tokens = eo.tokens;
        out.units_per_step = eo.units_per_step;
        for (const auto& [name, row] : acc->ranges) out.ranges.push_back(row);
        return out;  // by name: all joules are 0, so energy_analysis's order too
      });
  run->spread(
      [acc] {
        Archive ar;
        ar.put(acc->sampled), ar.put(acc->sum.uncovered), ar.put(acc->sum.unsampled_devices);
        ar.put<uint64_t>(acc->ranges.size());
        for (const auto& [name, x] : acc->ranges)
          ar.put(name), ar.put(x.calls), ar.put(x.count), ar.put(x.busy_ns), ar.put(x.joules);
        return ar.bytes();
      },
      [absorb](const std::string& bytes) {
        Archive ar(bytes);
        EnergyResult r;
        const bool sampled = ar.get<bool>();
        ar.get(r.uncovered), ar.get(r.unsampled_devices);
        for (uint64_t n = ar.get<uint64_t>(); n > 0; --n) {
          EnergyRow& x = r.ranges.emplace_back();
          ar.get(x.name), ar.get(x.calls), ar.get(x.count), ar.get(x.busy_ns), ar.get(x.joules);
        }
        if (sampled) r.period_ns = 1;  // makes the merged state "sampled" too
        absorb(r);
      });
  return run;
}
}  // namespace

const Analysis& energy() {
  static const Analysis a{
      "energy",
      "energy (J) per kernel, rank and step from gpu_power_mw samples or --power-log",
      /*in_all=*/true,
      /*in_page=*/true,
      View::Store,
      Reads{.launch_threads_ranges = true},  // its per-range rows join ranges like --ranges
      [](const AnalysisContext& ctx) -> std::any {
        return energy_analysis(ctx.store(), energy_options(ctx));
      },
      [](const std::any& r, const AnalysisContext& ctx, Report* out) {
        energy_report(std::any_cast<const EnergyResult&>(r), out, ctx.options().top);
      },
      sliced_energy};
  return a;
}

}  // namespace kernalyse::registry
