// Performance model, part 1: the work of one operator call (FLOPs, bytes) from the shapes the
// PyTorch profiler records (`record_shapes`), and what a device can do (peak FLOP/s per dtype,
// memory bandwidth). Every formula is written out in docs/analyses.md ("Performance model").
// The roofline placement and the hints built on it are in roofline.h.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kernalyse {

// One operator input as recorded: a tensor's dims (empty for a scalar, or an unrecorded input),
// a tensor list's dims (`aten::cat`), its type text ("c10::BFloat16", "float", "Scalar", ...) and
// its concrete value text where the profiler kept one ("False", "[1, 1]", "0.125").
struct OpInput {
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> list;  // a TensorList input: one dims per tensor
  bool is_list = false;
  std::string type;
  std::string concrete;
};

// Parses the /ops text columns ("Input Dims", "Input type", "Concrete Inputs" JSON text).
// Returns false (and leaves *out empty) when the dims text is empty or not a list.
bool parse_op_inputs(std::string_view dims_json, std::string_view types_json,
                     std::string_view concrete_json, std::vector<OpInput>* out);

// Bytes per element of a profiler type name, -1 if unknown ("Scalar", "", "c10::complex<...>").
int64_t dtype_bytes_of(std::string_view type);
// The peak-table column a type computes in: "fp64", "fp32", "bf16", "fp16", "fp8", "int8", or
// "" when unknown.
std::string dtype_class(std::string_view type);

enum class OpFamily : uint8_t { Gemm, Attention, Conv, Elementwise, Norm, Softmax, Copy, Other };
const char* to_string(OpFamily f);
// The family of an op name, from the name alone (Other when none of the formulas knows it).
OpFamily op_family(std::string_view op);

struct OpWork {
  bool known = false;  // a formula applied to the recorded shapes
  OpFamily family = OpFamily::Other;
  double flops = 0;   // floating-point operations (2 per multiply-add)
  double bytes = 0;   // minimum device-memory traffic: inputs read once, output written once
  std::string dtype;  // peak-table column ("bf16", ...), "" when unknown
  std::string why;    // when !known: what was missing ("no shapes recorded", "no formula", ...)
};
// The work of one call of `op` with these inputs.
OpWork op_work(std::string_view op, const std::vector<OpInput>& in);

// Dense (no structured sparsity) peak FLOP/s per dtype and memory bandwidth of one device.
// 0 = the device has no such unit (or no published figure).
struct DevicePeaks {
  std::string name;                // display name
  std::vector<std::string> match;  // case-insensitive substrings of the trace's device name
  double fp64 = 0, fp32 = 0, tf32 = 0, bf16 = 0, fp16 = 0, fp8 = 0, int8 = 0;  // FLOP/s
  double bytes_per_s = 0;  // device memory bandwidth
  std::string source;      // where the numbers come from
};
// The built-in table (analysis/analyses/src/peaks.cpp; sources in each entry and docs/analyses.md).
const std::vector<DevicePeaks>& builtin_peaks();
// The entry whose match string the device name contains (first match in table order, most
// specific first); nullopt when the device is not in the table.
std::optional<DevicePeaks> find_peaks(std::string_view device_name);
// A --peaks FILE.json (the format kernalyse-scan writes; docs/analyses.md). Throws Error naming
// the file on anything unreadable or out of range.
DevicePeaks load_peaks_file(const std::string& path);
// The peak for a dtype column; 0 when unknown. "tf32" is asked for explicitly.
double peak_flops(const DevicePeaks& p, std::string_view dtype);

}  // namespace kernalyse
