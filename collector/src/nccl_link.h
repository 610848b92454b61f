// The join between the NCCL profiler plugin (nccl_plugin.cpp) and the CUPTI source
// (cupti_source.cpp): NCCL launches its kernel with the driver's cuLaunchKernelEx inside a
// KernelLaunch profiler event, on the thread that ends the group. The CUPTI driver-API callback
// (API entry of cuLaunchKernel / cuLaunchKernelEx) reports that launch's correlation id here; the
// kernel activity record carries the same id, so the plugin's collective records point at it.
#pragma once

#include <cstdint>

namespace kernalyse::collector {

// Called on the launching thread with CUPTI's correlation id. If this thread is inside an NCCL
// KernelLaunch event, the id is bound to that launch (and so to its group's collectives and
// p2p ops) and true is returned; otherwise false (an ordinary kernel launch).
bool nccl_on_driver_launch(uint64_t correlation_id);

}  // namespace kernalyse::collector
