// Where the collector's record sources deliver what they saw: the CUPTI activity source
// (cupti_source.cpp, the one file that includes CUPTI headers), the NCCL profiler plugin
// (nccl_plugin.cpp) and the emulated-device C ABI (kernalyse/emu.h). The Collector implements
// it (buffers → per-rank spool → store); a Recorder (recorder.h) is the same buffering without
// the process-wide singleton, for tests. Records use the emu.h structs: one record form for
// every source. Times are int64 ns of the collector clock (now_ns(), CLOCK_MONOTONIC_RAW).
#pragma once

#include <cstdint>

#include "kernalyse/emu.h"

namespace kernalyse::collector {

// Running totals a source reports; the latest report wins (they are cumulative).
struct LossCounts {
  int64_t dropped_cupti = 0;  // CUPTI's own count (cuptiActivityGetNumDroppedRecords)
  int64_t dropped_ours = 0;   // buffers we could not hand out or keep (pool exhausted, ...)
  int64_t skipped = 0;        // corrupt or unknown records skipped by a parser
};

class Sink {
 public:
  virtual ~Sink() = default;
  // Real (CUPTI) records and emulated ones differ only in `emulated`: the store labels the rank.
  virtual void activity(const kernalyse_emu_activity& a, bool emulated) = 0;
  virtual void launch(const kernalyse_emu_launch& l) = 0;
  virtual void nccl(const kernalyse_emu_nccl& n) = 0;
  virtual void range(const kernalyse_emu_range& r) = 0;
  virtual void memory(const kernalyse_emu_memory& m) = 0;
  // A sampled value (NVML power, ...); `emulated` as for activity().
  virtual void counter(const kernalyse_emu_counter& c, bool emulated) = 0;
  virtual void losses(const LossCounts& c) = 0;
  // One line saying what this rank could record ("cupti: 1 CUDA device (NVIDIA H100 ...)",
  // "no CUDA device: ..."); stored per rank. `device_name` may be null.
  virtual void status(const char* line, const char* device_name) = 0;
  // The CUPTI source saw the first GPU work on CUDA device `ordinal` (NVML UUID "GPU-…", or ""
  // if CUPTI did not report it): the Collector samples that device's power (NVML).
  virtual void gpu_device_used(int32_t /*ordinal*/, const char* /*nvml_uuid*/) {}
  // A collective entered or completed (hang and desync reports); sources without it send none.
  virtual void coll_mark(const kernalyse_emu_coll_mark& /*m*/) {}
};

// The process's sink (the Collector), or null when the collector is not recording in this
// process (not started by kernalyse-run, a forked child, profiling disabled).
Sink* process_sink();
// The collector clock (CLOCK_MONOTONIC_RAW ns); CUPTI's timestamp callback returns it.
int64_t now_ns();

}  // namespace kernalyse::collector
