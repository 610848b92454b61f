// What the NCCL profiler plugin (nccl_plugin.cpp) reports besides its records: counters of
// what it could not link or chose to ignore, for the collector's status/counters, and one test
// hook. The plugin itself is reached by NCCL through the exported `ncclProfiler_v5` object.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kernalyse::collector {

// Cumulative since the process started.
struct NcclPluginCounts {
  int64_t comms = 0;           // communicators accepted by init
  int64_t refused = 0;         // init refused: the collector is not recording in this process
  int64_t records = 0;         // kernalyse_emu_nccl records delivered to the sink
  int64_t unlinked = 0;        // ...of which without a kernel correlation id (correlation -1)
  int64_t ignored = 0;         // events of known types we did not ask for, or for a refused comm
  int64_t unknown_type = 0;    // descriptors whose type is no single ABI v5 event bit
  int64_t bad_handle = 0;      // stop/record/parent pointers that are not live handles of ours
  int64_t pool_exhausted = 0;  // events we could not track (NULL handle returned to NCCL)
};

NcclPluginCounts nccl_plugin_counts();

// Limits the event pool to `n` live events (0: the default, 65536). For tests; takes effect for
// events started afterwards.
void nccl_plugin_set_pool_limit(size_t n);

}  // namespace kernalyse::collector
