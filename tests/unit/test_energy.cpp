// Energy (analysis/analyses/src/energy.cpp): piecewise-linear integration of gpu_power_mw samples,
// time-share split among concurrent GPU work, idle apart, roll-ups per kernel/rank/step; the units
// formatter.
#include <gtest/gtest.h>

#include "kernalyse/energy.h"

using namespace kernalyse;

namespace {

constexpr int64_t kMs = 1'000'000;

struct Builder {
  Store s;
  void kernel(int32_t rank, int32_t device, int32_t stream, int64_t start, int64_t end,
              const char* name, int32_t step = kNoStep) {
    auto& a = s.activities;
    a.rank.push_back(rank);
    a.device.push_back(device);
    a.stream.push_back(stream);
    a.kind.push_back(static_cast<uint8_t>(Kind::Kernel));
    a.category.push_back(static_cast<uint8_t>(Category::Computation));
    a.start_ns.push_back(start);
    a.end_ns.push_back(end);
    a.name_id.push_back(s.strings.intern(name));
    a.correlation.push_back(kNoCorrelation);
    a.step.push_back(step);
  }
  void power(int32_t rank, int32_t device, int64_t ts, int64_t mw) {
    auto& k = s.counters;
    k.rank.push_back(rank);
    k.device.push_back(device);
    k.name_id.push_back(s.strings.intern(kCounterPower));
    k.ts_ns.push_back(ts);
    k.value.push_back(mw);
  }
  Store done(std::initializer_list<int32_t> ranks = {0}) {
    for (int32_t r : ranks) {
      RankInfo ri;
      ri.rank = r;
      s.ranks.push_back(ri);
    }
    sort_activities(s);
    return std::move(s);
  }
};

const EnergyRow* kernel(const EnergyResult& e, const std::string& name) {
  for (const auto& r : e.kernels)
    if (r.name == name) return &r;
  return nullptr;
}

}  // namespace

TEST(Energy, ConstantPowerSplitByTimeShareIdleApart) {
  Builder b;
  for (int64_t t = 0; t <= 100; t += 10) b.power(0, 0, t * kMs, 300'000);  // 300 W for 100 ms
  b.kernel(0, 0, 7, 10 * kMs, 30 * kMs, "A");
  b.kernel(0, 0, 20, 20 * kMs, 40 * kMs, "B");  // overlaps A for 10 ms: that part is split
  const EnergyResult e = energy_analysis(b.done(), {});
  EXPECT_NEAR(e.total_j, 30.0, 1e-9);
  EXPECT_NEAR(e.idle_j, 300 * 0.070, 1e-9);  // 70 ms with nothing running
  ASSERT_NE(kernel(e, "A"), nullptr);
  EXPECT_NEAR(kernel(e, "A")->joules, 300 * 0.015, 1e-9);  // 10 ms alone + half of 10 ms
  EXPECT_NEAR(kernel(e, "B")->joules, 300 * 0.015, 1e-9);
  EXPECT_EQ(kernel(e, "A")->busy_ns, 20 * kMs);
  EXPECT_EQ(e.period_ns, 10 * kMs);
  EXPECT_EQ(e.uncovered, 0);
}

TEST(Energy, PiecewiseLinearBetweenSamples) {
  Builder b;
  b.power(0, 0, 0, 100'000);             // 100 W at 0
  b.power(0, 0, 1000 * kMs, 300'000);    // 300 W at 1 s: P(t) = 100 + 200 t
  b.kernel(0, 0, 7, 0, 500 * kMs, "K");  // ∫0..0.5 = 50 + 25 = 75 J
  const EnergyResult e = energy_analysis(b.done(), {});
  EXPECT_NEAR(e.total_j, 200.0, 1e-9);
  EXPECT_NEAR(kernel(e, "K")->joules, 75.0, 1e-9);
  EXPECT_NEAR(e.idle_j, 125.0, 1e-9);
  EXPECT_NEAR(e.active_j, 75.0, 1e-9);
}

TEST(Energy, RanksStepsDevicesAndUncoveredWork) {
  Builder b;
  for (int32_t r : {0, 1})
    for (int64_t t = 0; t <= 40; t += 10) b.power(r, 0, t * kMs, (200 + 100 * r) * 1000);
  b.kernel(0, 0, 7, 0, 10 * kMs, "K", 0);
  b.kernel(0, 0, 7, 10 * kMs, 20 * kMs, "K", 1);
  b.kernel(1, 0, 7, 0, 20 * kMs, "K", 0);
  b.kernel(1, 0, 7, 50 * kMs, 60 * kMs, "late", 1);  // after the last sample: no energy
  b.kernel(1, 1, 7, 0, 10 * kMs, "nosamples", 0);    // device 1 has no power samples
  const EnergyResult e = energy_analysis(b.done({0, 1}), {});
  EXPECT_EQ(e.uncovered, 2);
  EXPECT_EQ(e.unsampled_devices, 1);
  ASSERT_EQ(e.ranks.size(), 2u);
  EXPECT_NEAR(e.ranks[0].joules, 200 * 0.020, 1e-9);
  EXPECT_NEAR(e.ranks[0].idle_j, 200 * 0.020, 1e-9);
  EXPECT_NEAR(e.ranks[1].joules, 300 * 0.020, 1e-9);
  EXPECT_NEAR(e.ranks[1].idle_j, 300 * 0.020, 1e-9);
  ASSERT_EQ(e.steps.size(), 2u);
  EXPECT_NEAR(e.steps[0].joules, 200 * 0.010 + 300 * 0.020, 1e-9);
  EXPECT_NEAR(e.steps[1].joules, 200 * 0.010, 1e-9);
  EXPECT_EQ(kernel(e, "late"), nullptr);
  EXPECT_NEAR(e.total_j, 200 * 0.04 + 300 * 0.04, 1e-9);
}

TEST(Energy, RankFilterAndStatisticalNote) {
  Builder b;
  for (int32_t r : {0, 1})
    for (int64_t t = 0; t <= 100; t += 10) b.power(r, 0, t * kMs, 250'000);
  for (int64_t t = 0; t < 100; t += 2) b.kernel(1, 0, 7, t * kMs, t * kMs + 500'000, "short");
  EnergyOptions o;
  o.filter.rank = 1;
  const EnergyResult e = energy_analysis(b.done({0, 1}), o);
  ASSERT_EQ(e.devices.size(), 1u);
  EXPECT_EQ(e.devices[0].rank, 1);
  EXPECT_NEAR(e.total_j, 25.0, 1e-9);
  EXPECT_NEAR(kernel(e, "short")->joules, 250 * 0.025, 1e-9);
  EXPECT_TRUE(e.statistical());  // 0.5 ms kernels, 10 ms samples
  Report rep;
  energy_report(e, &rep);
  bool said = false;
  for (const auto& h : rep.headline) said = said || h.find("statistical") != std::string::npos;
  EXPECT_TRUE(said);
  EXPECT_NEAR(rep.json["energy"]["total_j"].get<double>(), 25.0, 1e-9);
  EXPECT_EQ(rep.json["energy"]["kernels"][0]["kernel"], "short");
  EXPECT_EQ(rep.json["energy"]["sampling_period_ns"], 10 * kMs);
}

TEST(Energy, NoSamplesSaysSo) {
  Builder b;
  b.kernel(0, 0, 7, 0, 10, "K");
  const EnergyResult e = energy_analysis(b.done(), {});
  EXPECT_EQ(e.total_j, 0.0);
  EXPECT_EQ(e.unsampled_devices, 1);
  Report rep;
  energy_report(e, &rep);
  EXPECT_NE(rep.headline.at(0).find("no gpu_power_mw samples"), std::string::npos);
}

TEST(EnergyUnits, JoulesKilojoulesWattHours) {
  EXPECT_EQ(format_energy(0.0123), "12.3 mJ");
  EXPECT_EQ(format_energy(0.0), "0.0 mJ");
  EXPECT_EQ(format_energy(1.0), "1.00 J");
  EXPECT_EQ(format_energy(812.345), "812.35 J");
  EXPECT_EQ(format_energy(12'345.0), "12.35 kJ");
  EXPECT_EQ(format_energy(36'000.0), "10.00 Wh");  // 10 Wh: from here on Wh
  EXPECT_EQ(format_energy(45'000.0), "12.50 Wh");
  EXPECT_EQ(format_energy(4.5e6), "1.250 kWh");
  EXPECT_EQ(format_energy(-2.5), "-2.50 J");
  EXPECT_EQ(format_power(0.85), "850 mW");
  EXPECT_EQ(format_power(312.54), "312.5 W");
  EXPECT_EQ(format_power(1250.0), "1.25 kW");
}

TEST(Energy, PerRangeRowsJoinLaunchesInsideTheRange) {
  Builder b;
  for (int64_t t = 0; t <= 100; t += 10) b.power(0, 0, t * kMs, 200'000);  // 200 W
  b.kernel(0, 0, 7, 10 * kMs, 20 * kMs, "A");
  b.kernel(0, 0, 7, 30 * kMs, 50 * kMs, "B");
  b.kernel(0, 0, 7, 60 * kMs, 70 * kMs, "C");
  Store s = b.done();
  // Launches on thread 5 at 1, 2, 3 ms with correlations 1..3 (activities joined by correlation).
  for (int64_t c = 1; c <= 3; ++c) {
    auto& l = s.launches;
    l.rank.push_back(0), l.pid.push_back(1), l.tid.push_back(5);
    l.start_ns.push_back(c * kMs), l.end_ns.push_back(c * kMs + 10);
    l.name_id.push_back(s.strings.intern("cudaLaunchKernel"));
    l.correlation.push_back(c), l.step.push_back(kNoStep);
    s.activities.correlation[static_cast<size_t>(c - 1)] = c;  // A, B, C in start order
  }
  auto range = [&](int64_t start, int64_t end, const char* name) {
    auto& an = s.annotations;
    an.rank.push_back(0), an.kind.push_back(static_cast<uint8_t>(AnnotationKind::Nvtx));
    an.pid.push_back(1), an.tid.push_back(5), an.start_ns.push_back(start),
        an.end_ns.push_back(end);
    an.name_id.push_back(s.strings.intern(name)), an.step.push_back(kNoStep);
  };
  range(0, 4 * kMs, "layer");       // all three launches
  range(kMs / 2, 2 * kMs, "attn");  // A, B
  const EnergyResult e = energy_analysis(s, {});
  ASSERT_EQ(e.ranges.size(), 2u);
  EXPECT_EQ(e.ranges[0].name, "layer");
  EXPECT_EQ(e.ranges[0].count, 3);
  EXPECT_EQ(e.ranges[0].calls, 1);
  EXPECT_NEAR(e.ranges[0].joules, 200 * 0.040, 1e-9);
  EXPECT_EQ(e.ranges[1].name, "attn");
  EXPECT_NEAR(e.ranges[1].joules, 200 * 0.030, 1e-9);
  Report rep;
  energy_report(e, &rep);
  EXPECT_EQ(rep.json["energy"]["ranges"][1]["range"], "attn");
}

// --top keeps the largest kernel and range rows in the tables and says so; JSON keeps them all.
TEST(Energy, TopLimitsTheKernelAndRangeTablesOnly) {
  EnergyResult e;
  for (const char* n : {"a", "b", "c"}) {
    EnergyRow r;
    r.name = n, r.count = 1, r.busy_ns = 1000, r.joules = 1.0;
    e.kernels.push_back(r);
    e.ranges.push_back(r);
  }
  Report rep;
  energy_report(e, &rep, 2);
  int seen = 0;
  for (const Table& t : rep.tables)
    if (t.key == "energy_kernels" || t.key == "energy_ranges") {
      ++seen;
      EXPECT_EQ(t.rows.size(), 2u) << t.key;
      EXPECT_NE(t.title.find("(top 2 of 3)"), std::string::npos) << t.title;
    }
  EXPECT_EQ(seen, 2);
  EXPECT_EQ(rep.json["energy"]["kernels"].size(), 3u);
  Report all;
  energy_report(e, &all);
  for (const Table& t : all.tables)
    if (t.key == "energy_kernels") {
      EXPECT_EQ(t.rows.size(), 3u);
    }
}
