// NVML power sampling (collector/src/nvml_power.h): the CUDA_VISIBLE_DEVICES → NVML device map,
// the sampler on a machine without NVML (this one): no thread left running, no sample, the reason
// named; and its loop against a stand-in NVML. Real readings need a GPU (bench/gpu/validate.sh).
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>

#include "../../collector/src/nvml_power.h"

using namespace kernalyse::collector;

TEST(NvmlPower, VisibleDevicesMap) {
  auto all = map_visible_devices(nullptr, 3);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[2].cuda_ordinal, 2);
  EXPECT_EQ(all[2].nvml_index, 2);
  EXPECT_EQ(map_visible_devices("", 2).size(), 2u);

  auto some = map_visible_devices("3, 1", 4);
  ASSERT_EQ(some.size(), 2u);
  EXPECT_EQ(some[0].cuda_ordinal, 0);
  EXPECT_EQ(some[0].nvml_index, 3);
  EXPECT_EQ(some[1].nvml_index, 1);

  auto uuids = map_visible_devices("GPU-8f3a,MIG-77", 0);
  ASSERT_EQ(uuids.size(), 2u);
  EXPECT_EQ(uuids[0].nvml_index, -1);
  EXPECT_EQ(uuids[0].uuid, "GPU-8f3a");
  EXPECT_EQ(uuids[1].uuid, "MIG-77");

  // CUDA stops at the first invalid entry, and so do we; an index past the devices is invalid.
  EXPECT_EQ(map_visible_devices("0,x,1", 4).size(), 1u);
  EXPECT_EQ(map_visible_devices("5,0", 4).size(), 0u);
  EXPECT_EQ(map_visible_devices("-1", 4).size(), 0u);
}

namespace {
struct CountingSink : Sink {
  int counters = 0;
  void activity(const kernalyse_emu_activity&, bool) override {}
  void launch(const kernalyse_emu_launch&) override {}
  void nccl(const kernalyse_emu_nccl&) override {}
  void range(const kernalyse_emu_range&) override {}
  void memory(const kernalyse_emu_memory&) override {}
  void counter(const kernalyse_emu_counter&, bool) override { ++counters; }
  void losses(const LossCounts&) override {}
  void status(const char*, const char*) override {}
};
}  // namespace

TEST(NvmlPower, WithoutNvmlNothingIsSampledAndTheReasonIsNamed) {
  if (void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(h);
    GTEST_SKIP() << "this machine has NVML: the no-NVML path is not reachable here";
  }
  CountingSink sink;
  PowerSampler p;
  p.add_device(0, "");
  p.start(sink, 5);
  p.stop();
  p.start(sink, 5);  // not again after stop()
  p.stop();
  EXPECT_EQ(p.samples(), 0);
  EXPECT_EQ(sink.counters, 0);
  EXPECT_NE(p.problem().find("libnvidia-ml.so.1 not found"), std::string::npos) << p.problem();

  PowerSampler off;  // period 0: never starts
  off.start(sink, 0);
  off.stop();
  EXPECT_EQ(off.problem(), "");
}

// The sampler's loop against a stand-in NVML (tests/unit/fake_nvml): loaded first by its path,
// it answers the sampler's dlopen("libnvidia-ml.so.1") by its SONAME. Readings become counters;
// a refused reading ("Not Supported", as in some VMs) is named once, and no sample is stored.
TEST(NvmlPower, SamplesAndARefusedReadingIsNamed) {
  if (void* h = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(h);
    GTEST_SKIP() << "this machine has NVML: the stand-in cannot take its name";
  }
  void* fake = dlopen(KERNALYSE_FAKE_NVML, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(fake, nullptr) << dlerror();

  setenv("FAKE_NVML_POWER_MW", "123456", 1);
  CountingSink sink;
  PowerSampler p;
  p.add_device(0, "");
  p.start(sink, 2);
  for (int i = 0; i < 500 && p.samples() < 3; ++i) usleep(2000);
  p.stop();
  EXPECT_GE(p.samples(), 3);
  EXPECT_EQ(sink.counters, p.samples());
  EXPECT_EQ(p.problem(), "");

  setenv("FAKE_NVML_POWER_MW", "-1", 1);
  CountingSink none;
  PowerSampler refused;
  refused.add_device(0, "");
  refused.start(none, 2);
  usleep(20000);
  refused.stop();
  EXPECT_EQ(refused.samples(), 0);
  EXPECT_EQ(none.counters, 0);
  EXPECT_EQ(refused.problem(), "nvmlDeviceGetPowerUsage on CUDA device 0: Not Supported");
  unsetenv("FAKE_NVML_POWER_MW");
  dlclose(fake);
}
