#include "nvml_power.h"

#include <dlfcn.h>
#include <time.h>

#include <chrono>
#include <cstdlib>
#include <cstring>

#include "kernalyse/store.h"

namespace kernalyse::collector {

namespace {

// The NVML ABI we use (nvml.h, stable since the _v2 entry points): return 0 is NVML_SUCCESS.
using nvmlDevice_t = void*;
using InitFn = int (*)();
using ShutdownFn = int (*)();
using CountFn = int (*)(unsigned*);
using ByIndexFn = int (*)(unsigned, nvmlDevice_t*);
using ByUuidFn = int (*)(const char*, nvmlDevice_t*);
using PowerFn = int (*)(nvmlDevice_t, unsigned*);  // milliwatts
using ErrorStringFn = const char* (*)(int);

// The collector clock (sink.h now_ns(): CLOCK_MONOTONIC_RAW), read here directly so that this
// file needs nothing from the Collector.
int64_t raw_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

}  // namespace

std::vector<DeviceRef> map_visible_devices(const char* cvd, unsigned nvml_count) {
  std::vector<DeviceRef> out;
  if (!cvd || !*cvd) {
    for (unsigned i = 0; i < nvml_count; ++i)
      out.push_back({static_cast<int32_t>(i), static_cast<int>(i), ""});
    return out;
  }
  std::string all(cvd);
  size_t pos = 0;
  while (pos <= all.size()) {
    size_t comma = all.find(',', pos);
    std::string e = all.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    while (!e.empty() && e.front() == ' ') e.erase(0, 1);
    while (!e.empty() && e.back() == ' ') e.pop_back();
    DeviceRef r;
    r.cuda_ordinal = static_cast<int32_t>(out.size());
    if (!e.empty() && e.find_first_not_of("0123456789") == std::string::npos) {
      r.nvml_index = std::atoi(e.c_str());
      if (static_cast<unsigned>(r.nvml_index) >= nvml_count) break;
    } else if (e.rfind("GPU-", 0) == 0 || e.rfind("MIG-", 0) == 0) {
      r.uuid = e;
    } else {
      break;
    }
    out.push_back(r);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

void PowerSampler::start(Sink& sink, int64_t period_ms) {
  {
    std::lock_guard<std::mutex> g(mu_);
    if (stop_) return;  // never again after stop(): the run is over
  }
  if (period_ms <= 0 || thread_.joinable()) return;
  try {
    thread_ = std::thread([this, s = &sink, period_ms] { run(s, period_ms); });
  } catch (const std::exception&) {
    std::lock_guard<std::mutex> g(mu_);
    problem_ = "cannot start the power sampling thread";
  }
}

void PowerSampler::add_device(int32_t cuda_ordinal, const std::string& uuid) {
  std::lock_guard<std::mutex> g(mu_);
  for (const DeviceRef& d : added_)
    if (d.cuda_ordinal == cuda_ordinal) return;
  added_.push_back({cuda_ordinal, -1, uuid});
}

void PowerSampler::stop() {
  {
    std::lock_guard<std::mutex> g(mu_);
    stop_ = true;
  }
  if (!thread_.joinable()) return;
  cv_.notify_all();
  thread_.join();
}

int64_t PowerSampler::samples() const {
  std::lock_guard<std::mutex> g(mu_);
  return samples_;
}

std::string PowerSampler::problem() const {
  std::lock_guard<std::mutex> g(mu_);
  return problem_;
}

void PowerSampler::run(Sink* sink, int64_t period_ms) {
  auto fail = [&](std::string why) {
    std::lock_guard<std::mutex> g(mu_);
    problem_ = std::move(why);
  };
  void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) {
    const char* e = dlerror();
    return fail(std::string("libnvidia-ml.so.1 not found: ") + (e ? e : "dlopen failed"));
  }
  auto sym = [&](const char* n) { return dlsym(lib, n); };
  auto init = reinterpret_cast<InitFn>(sym("nvmlInit_v2"));
  auto shutdown = reinterpret_cast<ShutdownFn>(sym("nvmlShutdown"));
  auto count = reinterpret_cast<CountFn>(sym("nvmlDeviceGetCount_v2"));
  auto by_index = reinterpret_cast<ByIndexFn>(sym("nvmlDeviceGetHandleByIndex_v2"));
  auto by_uuid = reinterpret_cast<ByUuidFn>(sym("nvmlDeviceGetHandleByUUID"));
  auto power = reinterpret_cast<PowerFn>(sym("nvmlDeviceGetPowerUsage"));
  auto error_string = reinterpret_cast<ErrorStringFn>(sym("nvmlErrorString"));
  if (!init || !shutdown || !count || !by_index || !by_uuid || !power) {
    dlclose(lib);
    return fail("libnvidia-ml.so.1 lacks the NVML functions kernalyse uses");
  }
  if (init() != 0) {
    dlclose(lib);
    return fail("nvmlInit_v2 failed");
  }
  unsigned n = 0;
  if (count(&n) != 0) n = 0;
  const std::vector<DeviceRef> visible =
      map_visible_devices(std::getenv("CUDA_VISIBLE_DEVICES"), n);
  struct Dev {
    int32_t ordinal;
    nvmlDevice_t h;
  };
  std::vector<Dev> devs;
  size_t resolved = 0;  // devices of added_ looked up so far
  // Sample until stop(), then once more so the series reaches the end of the run.
  for (bool last = false;;) {
    std::vector<DeviceRef> fresh;
    {
      std::lock_guard<std::mutex> g(mu_);
      fresh.assign(added_.begin() + static_cast<std::ptrdiff_t>(resolved), added_.end());
      resolved = added_.size();
    }
    for (const DeviceRef& r : fresh) {  // by UUID (CUPTI's device record), else by ordinal
      nvmlDevice_t h = nullptr;
      int rc = -1;
      if (!r.uuid.empty()) rc = by_uuid(r.uuid.c_str(), &h);
      for (const DeviceRef& v : visible)
        if (rc != 0 && v.cuda_ordinal == r.cuda_ordinal)
          rc = v.nvml_index >= 0 ? by_index(static_cast<unsigned>(v.nvml_index), &h)
                                 : by_uuid(v.uuid.c_str(), &h);
      if (rc == 0 && h)
        devs.push_back({r.cuda_ordinal, h});
      else
        fail("NVML has no device for CUDA device " + std::to_string(r.cuda_ordinal));
    }
    for (const Dev& d : devs) {
      unsigned mw = 0;
      if (const int rc = power(d.h, &mw); rc != 0) {
        // Said once, so that a run without samples says why (a VM or a GPU without power
        // readings answers "Not Supported").
        const char* what = error_string ? error_string(rc) : nullptr;
        std::lock_guard<std::mutex> g(mu_);
        if (problem_.empty() && samples_ == 0)
          problem_ = "nvmlDeviceGetPowerUsage on CUDA device " + std::to_string(d.ordinal) + ": " +
                     (what ? what : "error " + std::to_string(rc));
        continue;
      }
      kernalyse_emu_counter c{raw_ns(), d.ordinal, kCounterPower, static_cast<int64_t>(mw)};
      sink->counter(c, false);
      std::lock_guard<std::mutex> g(mu_);
      ++samples_;
      if (problem_.rfind("nvmlDeviceGetPowerUsage", 0) == 0) problem_.clear();  // transient
    }
    if (last) break;
    std::unique_lock<std::mutex> g(mu_);
    last = cv_.wait_for(g, std::chrono::milliseconds(period_ms), [this] { return stop_; });
  }
  shutdown();
  dlclose(lib);
}

}  // namespace kernalyse::collector
