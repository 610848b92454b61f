// GPU board power from NVML, sampled into the Sink as `gpu_power_mw` counters
// (docs/collector.md, "Power"). libnvidia-ml.so.1 is opened at run time with our own few
// prototypes (no NVML headers or library at build time); without it there is simply no power.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "sink.h"

namespace kernalyse::collector {

// Which NVML device each CUDA ordinal of this process is, from CUDA_VISIBLE_DEVICES: null or ""
// (unset) → ordinal i is NVML index i (i < nvml_count); "2,3" → indices; "GPU-…"/"MIG-…" →
// UUIDs. An entry that is neither ends the list (CUDA ignores what follows an invalid entry).
struct DeviceRef {
  int32_t cuda_ordinal = 0;
  int nvml_index = -1;  // -1: look it up by uuid
  std::string uuid;
};
std::vector<DeviceRef> map_visible_devices(const char* cuda_visible_devices, unsigned nvml_count);

class PowerSampler {
 public:
  ~PowerSampler() { stop(); }
  // Starts a thread that opens NVML off the caller's thread (which may be inside cuInit) and
  // samples the power of the devices added so far every `period_ms` into `sink`. period_ms <= 0:
  // does nothing.
  void start(Sink& sink, int64_t period_ms);
  // A device this process uses (its CUDA ordinal, and its NVML UUID "GPU-…" if known, else "":
  // then CUDA_VISIBLE_DEVICES maps it). Only devices added are sampled: on a shared node each
  // rank reports the GPUs it ran on, not all of them.
  void add_device(int32_t cuda_ordinal, const std::string& uuid);
  // Stops and joins the thread (a last sample is taken first).
  void stop();
  int64_t samples() const;
  // "" while fine, else why there is no power ("libnvidia-ml.so.1 not found: ...").
  std::string problem() const;

 private:
  void run(Sink* sink, int64_t period_ms);
  std::thread thread_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::vector<DeviceRef> added_;  // nvml_index unused: resolved by the thread
  int64_t samples_ = 0;
  std::string problem_;
};

}  // namespace kernalyse::collector
