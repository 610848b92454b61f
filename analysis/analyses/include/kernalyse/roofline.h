// Performance model, part 2: roofline placement of each op (per input shape) and each kernel
// name, a bottleneck class, and hints that fire only on measured facts (docs/analyses.md).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "kernalyse/analysis.h"
#include "kernalyse/perfmodel.h"

namespace kernalyse {

struct RooflineOptions {
  Filter filter;
  std::optional<DevicePeaks> peaks;  // --peaks FILE: replaces the table for every rank
  int64_t latency_ns = 10000;        // mean time per call below this: latency-bound
  bool verbose = false;              // full kernel names
};

struct RooflineRow {
  std::string op;            // op name, or kernel name (kernel rows)
  std::string shape;         // "Input Dims" text (op rows), "" for kernel rows
  std::string dtype;         // peak-table column the bound uses ("bf16", "tf32", ...), "" if none
  std::string family;        // to_string(OpFamily), "communication", "memory" (copies), "" unknown
  int64_t count = 0;         // op calls (op rows) or kernels (kernel rows)
  int64_t time_ns = 0;       // Σ GPU time of the calls' kernels, copies and memsets
  int64_t work_time_ns = 0;  // of time_ns, in kernels whose op work is known (rates use it)
  int64_t host_wait_ns = 0;  // GPU idle before these kernels while their launch was pending
  bool has_work = false;     // flops/bytes known (op rows: every call; kernel rows: some kernels)
  double flops = 0, bytes = 0;
  // Derived (NaN-free: only meaningful when has_work / bound_flops_per_s > 0).
  double flops_per_s = 0, bytes_per_s = 0, intensity = 0;
  double bound_flops_per_s = 0;  // min(peak[dtype], intensity · bandwidth); 0 for bytes-only
  double pct_of_bound = 0;       // of the FLOP/s bound, or of the bandwidth for bytes-only rows
  bool has_bound = false;
  std::string cls;     // compute-bound, memory-bound, latency-bound, communication,
                       // host-launch-bound, unknown
  std::string reason;  // why that class, with the numbers
};

struct Hint {
  std::string id;    // rule id (docs/analyses.md lists the rules)
  std::string text;  // the sentence, numbers included
  nlohmann::json numbers = nlohmann::json::object();
};

struct RooflineResult {
  std::string device;                // device name the peaks are for
  std::optional<DevicePeaks> peaks;  // none: device not in the table and no --peaks
  bool store_has_ops = false;        // the store has /ops rows at all
  int64_t gpu_time_ns = 0;           // Σ selected GPU work time
  int64_t attributed_ns = 0;         // of which in kernels of ops with known work
  std::vector<RooflineRow> ops;      // per (op, shapes, types), by time
  std::vector<RooflineRow> kernels;  // per kernel name, by time
  struct Missing {
    std::string op, why;
    int64_t count = 0, time_ns = 0;
  };
  std::vector<Missing> unmodelled;  // ops with kernels but no work (no shapes, no formula)
  std::vector<std::string> notes;
  std::vector<Hint> hints;
};

// Builds the placement and the hints over the selected rows. Needs activities (with
// correlation), launches (rank, start, correlation) and ops.
RooflineResult roofline_analysis(const Store& s, const RooflineOptions& opt);
// --roofline: headline, the op and kernel tables (JSON roofline[] and roofline_kernels[]).
void roofline_report(const RooflineResult& r, Report* out);
// --hints: one line per hint (JSON hints[]: id, text, numbers).
void hints_report(const RooflineResult& r, Report* out);

}  // namespace kernalyse
