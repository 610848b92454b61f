// Energy from board-power samples (`gpu_power_mw` counters: NVML, the emulated device, or an
// imported nvidia-smi log): integrated piecewise-linearly between samples, split among the GPU work
// running at each instant by time share, idle energy apart. Formulas in docs/analyses.md.
// Returns numbers only; energy_report() renders them into a Report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernalyse/analysis.h"
#include "kernalyse/report.h"
#include "kernalyse/store.h"

namespace kernalyse {

struct EnergyOptions {
  Filter filter;
  bool verbose = false;        // full kernel names instead of simplified ones
  int64_t tokens = 0;          // --tokens N: J per token over the run (0 = not given)
  int64_t units_per_step = 0;  // --units-per-step N: J per unit per step (0 = not given)
};

struct EnergyRow {         // one kernel name, range name, rank or step
  std::string name;        // kernel (simplified unless verbose) or range name; "" for rank/step
  int32_t rank = -1;       // rank rows
  int32_t step = kNoStep;  // step rows
  int64_t count = 0;       // activities
  int64_t calls = 0;       // range rows: range instances
  int64_t busy_ns = 0;     // summed activity durations inside sampled windows
  double joules = 0;       // attributed energy
  double idle_j = 0;       // rank rows: energy while no GPU work ran on its devices
};

struct EnergyDevice {  // one (rank, device) power series
  int32_t rank = 0, device = 0;
  int64_t samples = 0;
  int64_t first_ns = 0, last_ns = 0;  // the integrated window
  int64_t period_ns = 0;              // median sampling interval
  double total_j = 0, idle_j = 0;
};

struct EnergyResult {
  double total_j = 0;             // ∫ P dt over every device's sampled window
  double idle_j = 0;              // the part while no GPU work ran on that device
  double active_j = 0;            // total_j - idle_j: attributed to GPU work
  int64_t period_ns = 0;          // median sampling interval over all devices
  int64_t median_kernel_ns = 0;   // median duration of the attributed GPU work
  int64_t uncovered = 0;          // GPU work outside its device's sampled window (no energy)
  int64_t unsampled_devices = 0;  // (rank, device) pairs with GPU work but < 2 power samples
  std::vector<EnergyDevice> devices;
  std::vector<EnergyRow> kernels;          // by attributed joules, descending
  std::vector<EnergyRow> ranks;            // by rank
  std::vector<EnergyRow> steps;            // by step (only activities with a step)
  std::vector<EnergyRow> ranges;           // by range name (inclusive, as --ranges), by joules
  int64_t tokens = 0, units_per_step = 0;  // as given
  // True when the median piece of work is shorter than the sampling period: per-kernel figures
  // are then statistical (valid in aggregate), not measurements of single kernels.
  bool statistical() const { return period_ns > 0 && median_kernel_ns < period_ns; }
};

EnergyResult energy_analysis(const Store& s, const EnergyOptions& opt);
// Tables `energy_kernels`, `energy_ranks`, `energy_steps` (text/CSV), the JSON `energy` object and
// headline lines with the totals. top > 0: the kernel and range tables keep their first `top` rows
// (the largest), as --top does for the other analyses; the JSON object keeps every row.
void energy_report(const EnergyResult& e, Report* out, int top = 0);

}  // namespace kernalyse
