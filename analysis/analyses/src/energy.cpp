// Energy per kernel name, rank and step from `gpu_power_mw` samples (docs/analyses.md, "Energy").
// Per (rank, device): power is linear between consecutive samples; a sweep over the sample times
// and the GPU work's start/end times cuts the sampled window into pieces in which both the power
// line and the set of running work are fixed. A piece's energy (trapezoid) goes to the idle
// account when nothing runs, else in equal parts to each running activity (time share: they all
// run for the whole piece). Each activity's energy is the difference of one running "energy per
// running activity" sum at its end and at its start, so the sweep is O(n log n), not O(n·k).
#include "kernalyse/energy.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace kernalyse {

namespace {

constexpr double kJoulesPerMwNs = 1e-12;  // mW × ns → J

int64_t median(std::vector<int64_t>& v) {  // reorders v
  if (v.empty()) return 0;
  auto mid = v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2);
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

struct Event {
  int64_t t;
  bool start;
  uint32_t work;  // index into the device's work list
};

struct Share {
  double joules = 0;
  int64_t covered_ns = 0;  // time inside the sampled window
  bool attributed = false;
};

using RankDevice = std::pair<int32_t, int32_t>;
using Samples = std::vector<std::pair<int64_t, int64_t>>;  // (time, mW)

// Power samples and work per (rank, device).
struct DeviceInputs {
  std::map<RankDevice, Samples> power;
  std::map<RankDevice, std::vector<uint32_t>> work;
};

DeviceInputs device_inputs(const Store& s, const std::vector<uint32_t>& rows,
                           const EnergyOptions& opt) {
  const Activities& a = s.activities;
  const Counters& k = s.counters;
  DeviceInputs in;
  for (uint32_t i : rows) in.work[{a.rank[i], a.device[i]}].push_back(i);
  uint32_t power_id = 0;  // 0 (the empty string) never names a counter
  for (uint32_t id = 1; id < s.strings.size(); ++id)
    if (s.strings.at(id) == kCounterPower) power_id = id;
  for (size_t i = 0; i < k.size(); ++i) {
    if (power_id == 0 || k.name_id[i] != power_id) continue;
    if (opt.filter.rank && k.rank[i] != *opt.filter.rank) continue;
    in.power[{k.rank[i], k.device[i]}].emplace_back(k.ts_ns[i], k.value[i]);
  }
  return in;
}

// The sweep over the devices: each activity's share, and what the result's medians need.
struct EnergySweep {
  const Activities& a;
  EnergyResult& r;
  std::vector<Share> share;  // per activity row; empty (none attributed) without power samples
  std::vector<int64_t> intervals, durations;
  std::map<int32_t, double> rank_idle;

  EnergySweep(const Activities& acts, EnergyResult& res) : a(acts), r(res) {}

  // The start and end events of the device's work clipped to [w0, w1]; marks it attributed.
  std::vector<Event> work_events(const std::vector<uint32_t>& mine, int64_t w0, int64_t w1) {
    std::vector<Event> ev;
    ev.reserve(2 * mine.size());
    for (uint32_t w = 0; w < mine.size(); ++w) {
      const uint32_t i = mine[w];
      const int64_t b = std::max(a.start_ns[i], w0), e = std::min(a.end_ns[i], w1);
      if (e < b || (e == b && a.end_ns[i] > a.start_ns[i])) {
        ++r.uncovered;
        continue;
      }
      share[i].attributed = true;
      share[i].covered_ns = e - b;
      durations.push_back(a.end_ns[i] - a.start_ns[i]);
      ev.push_back({b, true, w});
      ev.push_back({e, false, w});
    }
    std::sort(ev.begin(), ev.end(), [](const Event& x, const Event& y) { return x.t < y.t; });
    return ev;
  }

  // The integration over [w0, w1]: each activity's joules; *total and *idle of the device.
  void integrate(const Samples& samples, const std::vector<uint32_t>& mine,
                 const std::vector<Event>& ev, int64_t w0, int64_t w1, double* total_out,
                 double* idle_out) {
    // The sweep: `cur` moves forward only; samples[j-1] .. samples[j] is the segment holding it.
    size_t j = 1;
    while (j + 1 < samples.size() && samples[j].first <= w0) ++j;
    auto mw_at = [&](int64_t t) {  // t within segment j
      const auto& [t0, p0] = samples[j - 1];
      const auto& [t1, p1] = samples[j];
      if (t1 <= t0) return static_cast<double>(p1);  // duplicate timestamps: the later one wins
      return static_cast<double>(p0) +
             static_cast<double>(p1 - p0) *
                 (static_cast<double>(t - t0) / static_cast<double>(t1 - t0));
    };
    double unit = 0, idle = 0, total = 0;
    int64_t running = 0, cur = w0;
    auto advance = [&](int64_t to) {
      while (cur < to) {
        const int64_t y = std::min(to, samples[j].first > cur ? samples[j].first : to);
        const double e =
            0.5 * (mw_at(cur) + mw_at(y)) * static_cast<double>(y - cur) * kJoulesPerMwNs;
        total += e;
        if (running == 0)
          idle += e;
        else
          unit += e / static_cast<double>(running);
        cur = y;
        while (j + 1 < samples.size() && samples[j].first <= cur) ++j;
      }
    };
    std::vector<double> at_start(mine.size(), 0.0);
    for (const Event& x : ev) {
      advance(x.t);
      if (x.start) {
        at_start[x.work] = unit;
        ++running;
      } else {
        share[mine[x.work]].joules = unit - at_start[x.work];
        --running;
      }
    }
    advance(w1);
    *total_out = total, *idle_out = idle;
  }

  // One (rank, device): its sampled window (the step's span with --step), its work's energy,
  // its EnergyDevice row.
  void device(const RankDevice& rd, Samples& samples, const std::vector<uint32_t>& mine,
              const EnergyOptions& opt) {
    if (share.empty()) share.resize(a.size());
    std::stable_sort(samples.begin(), samples.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    if (samples.size() < 2) return;
    int64_t w0 = samples.front().first, w1 = samples.back().first;
    if (opt.filter.step) {  // --step: the step's own span on this device
      if (mine.empty()) return;
      int64_t lo = INT64_MAX, hi = INT64_MIN;
      for (uint32_t i : mine) lo = std::min(lo, a.start_ns[i]), hi = std::max(hi, a.end_ns[i]);
      w0 = std::max(w0, lo), w1 = std::min(w1, hi);
    }
    if (w1 <= w0) {
      r.uncovered += static_cast<int64_t>(mine.size());
      return;
    }
    for (size_t j = 1; j < samples.size(); ++j)
      if (samples[j].first > samples[j - 1].first)
        intervals.push_back(samples[j].first - samples[j - 1].first);
    const std::vector<Event> ev = work_events(mine, w0, w1);
    double total = 0, idle = 0;
    integrate(samples, mine, ev, w0, w1, &total, &idle);
    EnergyDevice d;
    d.rank = rd.first, d.device = rd.second;
    d.samples = static_cast<int64_t>(samples.size());
    d.first_ns = w0, d.last_ns = w1;
    std::vector<int64_t> own;
    for (size_t q = 1; q < samples.size(); ++q)
      if (samples[q].first > samples[q - 1].first)
        own.push_back(samples[q].first - samples[q - 1].first);
    d.period_ns = median(own);
    d.total_j = total, d.idle_j = idle;
    r.total_j += total, r.idle_j += idle;
    rank_idle[rd.first] += idle;
    r.devices.push_back(d);
  }
};

// Roll-ups by kernel name, rank and step.
void energy_rollups(const Store& s, const std::vector<uint32_t>& rows, const EnergyOptions& opt,
                    const EnergySweep& sw, EnergyResult& r) {
  const Activities& a = s.activities;
  const std::vector<Share>& share = sw.share;
  // Without power samples no row is attributed (share is empty): no kernel rows to name (grouping
  // every kernel's name was 40 of the analysis's 310 µs on the trace_filter pair).
  const NameGroups g = share.empty() ? NameGroups{} : group_names(s, rows, opt.verbose, false);
  std::vector<EnergyRow> by_name(g.names.size());
  std::map<int32_t, EnergyRow> by_rank;
  std::map<int32_t, EnergyRow> by_step;
  for (const auto& [rank, idle] : sw.rank_idle) by_rank[rank].idle_j = idle;
  for (uint32_t i : rows) {
    if (share.empty() || !share[i].attributed) continue;
    for (EnergyRow* row :
         {&by_name[static_cast<size_t>(g.group_of[a.name_id[i]])], &by_rank[a.rank[i]],
          a.step[i] != kNoStep ? &by_step[a.step[i]] : nullptr}) {
      if (!row) continue;
      ++row->count;
      row->busy_ns += share[i].covered_ns;
      row->joules += share[i].joules;
    }
  }
  for (size_t n = 0; n < by_name.size(); ++n) {
    if (by_name[n].count == 0) continue;
    by_name[n].name = g.names[n];
    r.kernels.push_back(std::move(by_name[n]));
  }
  std::stable_sort(r.kernels.begin(), r.kernels.end(), [](const EnergyRow& x, const EnergyRow& y) {
    return x.joules != y.joules ? x.joules > y.joules : x.name < y.name;
  });
  for (auto& [rank, row] : by_rank) row.rank = rank, r.ranks.push_back(row);
  for (auto& [step, row] : by_step) row.step = step, r.steps.push_back(row);
}

// Per range name (inclusive, as --ranges): the work launched inside each NVTX / user range.
void energy_by_range(const Store& s, const std::vector<uint32_t>& rows, const EnergyOptions& opt,
                     const std::vector<Share>& share, EnergyResult& r) {
  const Activities& a = s.activities;
  if (a.correlation.size() != a.size()) return;
  std::map<uint32_t, EnergyRow> by_range;
  if (share.empty()) {
    // Without power samples no row is attributed: each range's row is its calls alone, and the
    // join of launches to ranges is not needed (most of the analysis on the trace_filter pair,
    // which has no samples).
    for (uint32_t q : range_rows(s, opt.filter)) ++by_range[s.annotations.name_id[q]].calls;
  } else {
    const RangeLaunches join(s, opt.filter);
    std::map<std::pair<int32_t, int64_t>, EnergyRow> by_launch;  // (rank, correlation)
    for (uint32_t q : join.ranges) {
      const auto [first, last] = join.launches_in(q);
      for (const uint32_t* x = first; x != last; ++x)
        by_launch.try_emplace({s.launches.rank[*x], s.launches.correlation[*x]});
    }
    for (uint32_t i : rows) {
      if (!share[i].attributed || a.correlation[i] == kNoCorrelation) continue;
      auto it = by_launch.find({a.rank[i], a.correlation[i]});
      if (it == by_launch.end()) continue;
      ++it->second.count;
      it->second.busy_ns += share[i].covered_ns;
      it->second.joules += share[i].joules;
    }
    for (uint32_t q : join.ranges) {
      EnergyRow& row = by_range[s.annotations.name_id[q]];
      ++row.calls;
      const auto [first, last] = join.launches_in(q);
      for (const uint32_t* x = first; x != last; ++x) {
        auto it = by_launch.find({s.launches.rank[*x], s.launches.correlation[*x]});
        row.count += it->second.count;
        row.busy_ns += it->second.busy_ns;
        row.joules += it->second.joules;
      }
    }
  }
  for (auto& [name, row] : by_range) row.name = s.strings.at(name), r.ranges.push_back(row);
  std::stable_sort(r.ranges.begin(), r.ranges.end(), [](const EnergyRow& x, const EnergyRow& y) {
    return x.joules != y.joules ? x.joules > y.joules : x.name < y.name;
  });
}

}  // namespace

EnergyResult energy_analysis(const Store& s, const EnergyOptions& opt) {
  EnergyResult r;
  r.tokens = opt.tokens;
  r.units_per_step = opt.units_per_step;
  const Activities& a = s.activities;

  std::vector<uint32_t> rows;
  for (uint32_t i : select_activities(s, opt.filter))
    if (is_gpu_work(static_cast<Kind>(a.kind[i])) && a.end_ns[i] >= a.start_ns[i])
      rows.push_back(i);

  DeviceInputs in = device_inputs(s, rows, opt);
  for (const auto& [rd, w] : in.work)
    if (!in.power.count(rd) || in.power.at(rd).size() < 2)
      ++r.unsampled_devices, r.uncovered += static_cast<int64_t>(w.size());

  EnergySweep sw(a, r);
  for (auto& [rd, samples] : in.power)
    sw.device(rd, samples, in.work.count(rd) ? in.work.at(rd) : std::vector<uint32_t>{}, opt);
  r.active_j = r.total_j - r.idle_j;
  r.period_ns = median(sw.intervals);
  r.median_kernel_ns = median(sw.durations);

  energy_rollups(s, rows, opt, sw, r);
  energy_by_range(s, rows, opt, sw.share, r);
  return r;
}

}  // namespace kernalyse

namespace kernalyse {

namespace {

double ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

nlohmann::json row_json(const EnergyRow& r) {
  nlohmann::json j = {{"count", r.count}, {"busy_ns", r.busy_ns}, {"joules", r.joules}};
  if (r.busy_ns > 0) j["avg_w"] = r.joules / (static_cast<double>(r.busy_ns) * 1e-9);
  return j;
}

}  // namespace

void energy_report(const EnergyResult& e, Report* out, int top) {
  const double pct_idle = e.total_j > 0 ? 100.0 * e.idle_j / e.total_j : 0.0;
  if (e.devices.empty()) {
    out->headline.push_back(
        "energy: no gpu_power_mw samples in the selection (NVML sampling, the "
        "emulated device, or --power-log give them)");
  } else {
    char pct[32];
    std::snprintf(pct, sizeof pct, "%.1f", pct_idle);
    out->headline.push_back("energy: " + format_energy(e.total_j) + " on " +
                            std::to_string(e.devices.size()) + " GPU(s), idle " +
                            format_energy(e.idle_j) + " (" + pct + " %), sampling period " +
                            format_duration(e.period_ns));
  }
  if (e.statistical())
    out->headline.push_back("energy: per-kernel figures are statistical (median kernel " +
                            format_duration(e.median_kernel_ns) + " < sampling period " +
                            format_duration(e.period_ns) + "): valid in aggregate, not per launch");
  if (e.uncovered > 0 || e.unsampled_devices > 0)
    out->headline.push_back("energy: " + std::to_string(e.uncovered) +
                            " GPU activities outside any power sample window got no energy (" +
                            std::to_string(e.unsampled_devices) + " device(s) without samples)");
  if (e.tokens > 0)
    out->headline.push_back("energy: " + format_energy(e.total_j / static_cast<double>(e.tokens)) +
                            " per token (" + std::to_string(e.tokens) + " tokens)");

  Table kt;
  kt.key = "energy_kernels";
  kt.title = "Energy per kernel (J; time share of the board power while it ran)";
  kt.columns = {"kernel", "count", "busy_ms", "energy", "pct_active", "avg_w", "joules", "busy_ns"};
  kt.text_hidden = {false, false, false, false, false, false, true, true};
  kt.max_text_width = 60;
  kt.in_json = false;  // the `energy` object carries it
  auto shown = [&](const std::vector<EnergyRow>& v, Table* t) {
    if (top <= 0 || v.size() <= static_cast<size_t>(top)) return v.size();
    t->title += " (top " + std::to_string(top) + " of " + std::to_string(v.size()) + ")";
    return static_cast<size_t>(top);
  };
  const size_t nk = shown(e.kernels, &kt);
  for (size_t q = 0; q < nk; ++q) {
    const EnergyRow& r = e.kernels[q];
    kt.rows.push_back(
        {r.name, r.count, ms(r.busy_ns), format_energy(r.joules),
         e.active_j > 0 ? Cell(100.0 * r.joules / e.active_j) : Cell{},
         r.busy_ns > 0 ? Cell(r.joules / (static_cast<double>(r.busy_ns) * 1e-9)) : Cell{},
         r.joules, r.busy_ns});
  }
  Table rt;
  rt.key = "energy_ranks";
  rt.title = "Energy per rank";
  rt.columns = {"rank", "energy", "active_j", "idle_j", "total_j", "busy_ms"};
  rt.in_json = false;
  for (const EnergyRow& r : e.ranks)
    rt.rows.push_back({int64_t{r.rank}, format_energy(r.joules + r.idle_j), r.joules, r.idle_j,
                       r.joules + r.idle_j, ms(r.busy_ns)});
  Table gt;
  gt.key = "energy_ranges";
  gt.title = "Energy per annotated range (GPU work launched inside; nested ranges each count it)";
  gt.columns = {"range", "calls", "gpu_items", "energy", "active_j", "busy_ms"};
  gt.max_text_width = 48;
  gt.in_json = false;
  const size_t ng = shown(e.ranges, &gt);
  for (size_t q = 0; q < ng; ++q) {
    const EnergyRow& r = e.ranges[q];
    gt.rows.push_back({r.name, r.calls, r.count, format_energy(r.joules), r.joules, ms(r.busy_ns)});
  }
  Table st;
  st.key = "energy_steps";
  st.title = "Energy per step (GPU work of the step; idle energy not included)";
  st.columns = {"step", "energy", "active_j", "count", "busy_ms"};
  st.in_json = false;
  for (const EnergyRow& r : e.steps)
    st.rows.push_back({int64_t{r.step}, format_energy(r.joules), r.joules, r.count, ms(r.busy_ns)});

  nlohmann::json j = {{"total_j", e.total_j},
                      {"idle_j", e.idle_j},
                      {"active_j", e.active_j},
                      {"sampling_period_ns", e.period_ns},
                      {"median_kernel_ns", e.median_kernel_ns},
                      {"statistical", e.statistical()},
                      {"uncovered_activities", e.uncovered},
                      {"unsampled_devices", e.unsampled_devices}};
  if (e.tokens > 0) j["j_per_token"] = e.total_j / static_cast<double>(e.tokens);
  if (e.units_per_step > 0 && !e.steps.empty())
    j["j_per_unit"] =
        e.total_j / static_cast<double>(e.units_per_step * static_cast<int64_t>(e.steps.size()));
  nlohmann::json dev = nlohmann::json::array(), ranks = nlohmann::json::array(),
                 steps = nlohmann::json::array(), kernels = nlohmann::json::array();
  for (const EnergyDevice& d : e.devices)
    dev.push_back({{"rank", d.rank},
                   {"device", d.device},
                   {"samples", d.samples},
                   {"first_ns", d.first_ns},
                   {"last_ns", d.last_ns},
                   {"sampling_period_ns", d.period_ns},
                   {"total_j", d.total_j},
                   {"idle_j", d.idle_j}});
  for (const EnergyRow& r : e.ranks) {
    nlohmann::json x = row_json(r);
    x["rank"] = r.rank, x["idle_j"] = r.idle_j, x["total_j"] = r.joules + r.idle_j;
    ranks.push_back(x);
  }
  for (const EnergyRow& r : e.steps) {
    nlohmann::json x = row_json(r);
    x["step"] = r.step;
    steps.push_back(x);
  }
  for (const EnergyRow& r : e.kernels) {
    nlohmann::json x = row_json(r);
    x["kernel"] = r.name;
    kernels.push_back(x);
  }
  j["devices"] = dev, j["ranks"] = ranks, j["steps"] = steps, j["kernels"] = kernels;
  nlohmann::json ranges = nlohmann::json::array();
  for (const EnergyRow& r : e.ranges) {
    nlohmann::json x = row_json(r);
    x["range"] = r.name, x["calls"] = r.calls;
    ranges.push_back(x);
  }
  j["ranges"] = ranges;
  out->json["energy"] = j;
  out->tables.push_back(std::move(kt));
  out->tables.push_back(std::move(rt));
  out->tables.push_back(std::move(st));
  if (!gt.rows.empty()) out->tables.push_back(std::move(gt));
}

}  // namespace kernalyse
