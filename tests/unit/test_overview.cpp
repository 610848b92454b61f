// store_overview (analysis/analyses/src/overview.cpp): what every kernalyse-merge report starts
// with.
#include <gtest/gtest.h>

#include <string>

#include "kernalyse/analysis.h"

namespace kernalyse {
namespace {

void counter(Store& s, int32_t rank, int32_t device, const char* name, int64_t value) {
  Counters& k = s.counters;
  k.rank.push_back(rank);
  k.device.push_back(device);
  k.name_id.push_back(s.strings.intern(name));
  k.ts_ns.push_back(static_cast<int64_t>(k.ts_ns.size()));
  k.value.push_back(value);
}

bool has_line(const Report& r, const std::string& line) {
  for (const auto& h : r.headline)
    if (h == line) return true;
  return false;
}

TEST(StoreOverview, PeaksStatusAndDroppedRecords) {
  Store s;
  s.attrs.clock_domain = "one timeline";
  for (int32_t r : {0, 1}) {
    RankInfo ri;
    ri.rank = r;
    s.ranks.push_back(ri);
  }
  s.ranks[1].collector_status = "no CUDA device: driver missing";
  s.ranks[1].records_dropped = 3;
  s.ranks[1].records_dropped_cupti = 4;
  counter(s, 0, 0, kCounterGpuMemory, 100);
  counter(s, 0, 0, kCounterGpuMemory, 3 * 1024);
  counter(s, 0, 0, kCounterGpuMemory, 200);
  counter(s, 1, 2, kCounterPower, 250'000);
  Report r;
  store_overview(s, &r);
  EXPECT_EQ(r.headline.at(0), "ranks: 0,1; clocks: one timeline");
  EXPECT_TRUE(has_line(r, "rank 1: no CUDA device: driver missing"));
  EXPECT_TRUE(has_line(r, "rank 1: 7 records dropped (CUPTI 4, kernalyse 3)"));
  EXPECT_TRUE(has_line(r, "peak GPU memory in use: rank 0 GPU 0 " + format_bytes(3 * 1024)));
  EXPECT_EQ(r.json["ranks"][0]["peak_gpu_memory_bytes"]["0"], 3 * 1024);
  EXPECT_TRUE(r.json["ranks"][1]["peak_gpu_memory_bytes"].empty());
  EXPECT_EQ(r.json["ranks"][1]["peak_gpu_power_mw"]["2"], 250'000);
  EXPECT_EQ(r.json["emulated"], false);

  s.attrs.emulated = true;
  Report e;
  store_overview(s, &e);
  EXPECT_EQ(e.headline.at(0), "DATA IS SYNTHETIC/EMULATED: no real GPU recorded these events");
  EXPECT_EQ(e.json["emulated"], true);
}

}  // namespace
}  // namespace kernalyse
