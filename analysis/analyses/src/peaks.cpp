// Device peak table (perfmodel.h): dense peak FLOP/s per dtype and memory bandwidth. Every figure
// is the vendor's published dense (non-sparse) number; where a datasheet gives only the sparse
// figure, it is halved and the entry says so. Matrix (tensor-core / matrix-core) rates are used
// for tf32/bf16/fp16/fp8/int8 and, where the vendor quotes one, fp64; fp32 is the non-tensor
// (CUDA-core / vector) rate, since a plain fp32 GEMM does not use tensor cores unless TF32 is
// allowed. GeForce tensor rates are the ones with FP32 accumulate (what PyTorch uses).
// Measured ceilings replace these with --peaks FILE.json (kernalyse-scan writes one).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernalyse/error.h"
#include "kernalyse/perfmodel.h"

namespace kernalyse {
namespace {

constexpr double T = 1e12;  // TFLOP/s
constexpr double G = 1e9;   // GB/s

DevicePeaks entry(std::string name, std::vector<std::string> match, double fp64, double fp32,
                  double tf32, double bf16, double fp16, double fp8, double int8, double gbps,
                  std::string source) {
  DevicePeaks p;
  p.name = std::move(name);
  p.match = std::move(match);
  p.fp64 = fp64 * T, p.fp32 = fp32 * T, p.tf32 = tf32 * T, p.bf16 = bf16 * T;
  p.fp16 = fp16 * T, p.fp8 = fp8 * T, p.int8 = int8 * T;
  p.bytes_per_s = gbps * G;
  p.source = std::move(source);
  return p;
}

std::string lower(std::string_view s) {
  std::string o(s);
  for (char& c : o) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return o;
}

}  // namespace

const std::vector<DevicePeaks>& builtin_peaks() {
  // Order matters: the first entry whose match string the device name contains wins, so the
  // specific variants (PCIe, 40GB, NVL) come before the generic name.
  // Columns: fp64, fp32, tf32, bf16, fp16, fp8, int8 (TFLOP/s or TOPS, dense), memory GB/s.
  static const std::vector<DevicePeaks> kTable = {
      entry(
          "NVIDIA V100 PCIe", {"v100-pcie", "v100 pcie"}, 7, 14, 0, 0, 112, 0, 0, 900,
          "NVIDIA Tesla V100 datasheet (PCIe): FP64 7, FP32 14, Tensor 112 TFLOPS, HBM2 900 GB/s"),
      entry("NVIDIA V100 SXM2", {"v100"}, 7.8, 15.7, 0, 0, 125, 0, 0, 900,
            "NVIDIA Tesla V100 datasheet (SXM2): FP64 7.8, FP32 15.7, Tensor 125 TFLOPS, HBM2 "
            "900 GB/s"),
      entry("NVIDIA A100 PCIe 40GB", {"a100-pcie-40gb", "a100 pcie 40gb"}, 19.5, 19.5, 156, 312,
            312, 0, 624, 1555,
            "NVIDIA A100 datasheet: FP64 TC 19.5, FP32 19.5, TF32 156, BF16/FP16 312, INT8 624 "
            "(dense; the sheet's starred figures are sparse), 40GB PCIe HBM2 1,555 GB/s"),
      entry("NVIDIA A100 SXM4 40GB", {"a100-sxm4-40gb", "a100 sxm4 40gb", "a100-40gb"}, 19.5, 19.5,
            156, 312, 312, 0, 624, 1555,
            "NVIDIA A100 datasheet: as above, 40GB SXM HBM2 1,555 GB/s"),
      entry("NVIDIA A100 PCIe 80GB", {"a100-pcie-80gb", "a100 80gb pcie", "a100 pcie"}, 19.5, 19.5,
            156, 312, 312, 0, 624, 1935,
            "NVIDIA A100 datasheet: as above, 80GB PCIe HBM2e 1,935 GB/s"),
      entry("NVIDIA A100 SXM4 80GB", {"a100"}, 19.5, 19.5, 156, 312, 312, 0, 624, 2039,
            "NVIDIA A100 datasheet: as above, 80GB SXM HBM2e 2,039 GB/s"),
      entry("NVIDIA H100 PCIe", {"h100 pcie", "h100-pcie"}, 51, 51, 378, 756, 756, 1513, 1513, 2000,
            "NVIDIA H100 datasheet (PCIe): FP64 TC 51, FP32 51, TF32 756*, BF16/FP16 1,513*, FP8 "
            "3,026*, INT8 3,026* (* sparse, halved here), HBM2e 2 TB/s"),
      entry("NVIDIA H100 NVL", {"h100 nvl"}, 60, 60, 418, 835, 835, 1670, 1670, 3900,
            "NVIDIA H100 datasheet (NVL): FP64 TC 60, FP32 60, TF32 835*, BF16/FP16 1,671*, FP8 "
            "3,341* (* sparse, halved here), HBM3 3.9 TB/s"),
      entry("NVIDIA H100 SXM", {"h100"}, 67, 67, 494.5, 989.5, 989.5, 1979, 1979, 3350,
            "NVIDIA H100 datasheet (SXM): FP64 TC 67, FP32 67, TF32 989*, BF16/FP16 1,979*, FP8 "
            "3,958*, INT8 3,958* (* sparse, halved here), HBM3 3.35 TB/s"),
      entry("NVIDIA H800 SXM", {"h800"}, 1, 67, 494.5, 989.5, 989.5, 1979, 1979, 3350,
            "NVIDIA H800 SXM product brief: the H100 SXM's tensor rates, FP64 1 TFLOPS, HBM3 3.35 "
            "TB/s"),
      entry("NVIDIA GH200 (HBM3e)", {"gh200 144g", "gh200 hbm3e", "gh200-144g"}, 67, 67, 494.5,
            989.5, 989.5, 1979, 1979, 4900,
            "NVIDIA GH200 Grace Hopper datasheet: H100 SXM tensor rates (halved sparse), 144GB "
            "HBM3e 4.9 TB/s"),
      entry("NVIDIA GH200", {"gh200"}, 67, 67, 494.5, 989.5, 989.5, 1979, 1979, 4000,
            "NVIDIA GH200 Grace Hopper datasheet: H100 SXM tensor rates (halved sparse), 96GB "
            "HBM3 4 TB/s"),
      entry("NVIDIA H200", {"h200"}, 67, 67, 494.5, 989.5, 989.5, 1979, 1979, 4800,
            "NVIDIA H200 datasheet (SXM): FP64 TC 67, FP32 67, TF32 989*, BF16/FP16 1,979*, FP8 "
            "3,958* (* sparse, halved here), HBM3e 4.8 TB/s"),
      entry("NVIDIA B300", {"b300"}, 1.25, 75, 1100, 2250, 2250, 4500, 4500, 8000,
            "NVIDIA HGX B300 datasheet, per GPU (8-GPU figures / 8, sparse halved): FP64 1.25, "
            "TF32 1.1 P, BF16/FP16 2.25 P, FP8 4.5 P; HBM3e 8 TB/s. FP32 (75) and INT8 are not on "
            "the sheet: the B200's figures"),
      entry("NVIDIA B200", {"b200"}, 37, 75, 1100, 2250, 2250, 4500, 4500, 8000,
            "NVIDIA HGX B200 datasheet, per GPU (8-GPU figures / 8, sparse halved): FP64 TC 37, "
            "FP32 75, TF32 1.1 P, BF16/FP16 2.25 P, FP8 4.5 P, INT8 4.5 P; HBM3e 8 TB/s"),
      entry("NVIDIA L40S", {"l40s"}, 0, 91.6, 183, 362, 362, 733, 733, 864,
            "NVIDIA L40S datasheet: FP32 91.6, TF32 366*, BF16/FP16 733*, FP8 1,466*, INT8 1,466* "
            "(* sparse, halved here), GDDR6 864 GB/s"),
      entry("NVIDIA L4", {"l4"}, 0, 30.3, 60, 121, 121, 242.5, 242.5, 300,
            "NVIDIA L4 datasheet: FP32 30.3, TF32 120*, BF16/FP16 242*, FP8 485*, INT8 485* (* "
            "sparse, halved here), GDDR6 300 GB/s"),
      entry("NVIDIA T4", {"tesla t4", " t4"}, 0, 8.1, 0, 0, 65, 0, 130, 320,
            "NVIDIA T4 datasheet: FP32 8.1, mixed FP16/FP32 65, INT8 130 TOPS, GDDR6 320 GB/s"),
      entry("NVIDIA A10", {"a10"}, 0, 31.2, 62.5, 125, 125, 0, 250, 600,
            "NVIDIA A10 datasheet: FP32 31.2, TF32 125*, BF16/FP16 250*, INT8 500* (* sparse, "
            "halved here), GDDR6 600 GB/s"),
      entry("NVIDIA GeForce RTX 4060 Ti", {"4060 ti"}, 0, 22.1, 11, 44.1, 44.1, 88.3, 176.6, 288,
            "NVIDIA Ada GPU architecture whitepaper rates scaled to the 4060 Ti (34 SMs, 2.535 GHz "
            "boost): FP32 22.1, FP16/BF16 TC with FP32 accumulate 44.1, FP8 88.3, INT8 176.6; "
            "GDDR6 288 GB/s (product page)"),
      entry("NVIDIA GeForce RTX 4090", {"4090"}, 0, 82.6, 82.6, 165.2, 165.2, 330.3, 660.6, 1008,
            "NVIDIA Ada GPU architecture whitepaper (RTX 4090): FP32 82.6, TF32 82.6, FP16/BF16 "
            "TC with FP32 accumulate 165.2, FP8 330.3, INT8 660.6; GDDR6X 1,008 GB/s"),
      entry("NVIDIA GeForce RTX 3090", {"3090"}, 0, 35.6, 35.6, 71, 71, 0, 284, 936,
            "NVIDIA Ampere GA102 whitepaper (RTX 3090): FP32 35.6, TF32 35.6, FP16/BF16 TC with "
            "FP32 accumulate 71, INT8 284; GDDR6X 936 GB/s"),
      entry("AMD Instinct MI210", {"mi210"}, 45.3, 22.6, 0, 181, 181, 0, 181, 1638,
            "AMD Instinct MI210 datasheet: FP64 matrix 45.3, FP32 vector 22.6, FP16/BF16 181, "
            "INT8 181, HBM2e 1.6 TB/s"),
      entry("AMD Instinct MI250X", {"mi250x", "mi250"}, 95.7, 47.9, 0, 383, 383, 0, 383, 3277,
            "AMD Instinct MI250X datasheet: FP64 matrix 95.7, FP32 vector 47.9, FP16/BF16 383, "
            "INT8 383, HBM2e 3.2 TB/s (an MI250 trace is matched here: its two GCDs appear as two "
            "devices, each half of this)"),
      entry("AMD Instinct MI325X", {"mi325x"}, 163.4, 163.4, 653.7, 1307.4, 1307.4, 2614.9, 2614.9,
            6000,
            "AMD Instinct MI325X datasheet: FP64 matrix 163.4, FP32 163.4, TF32 653.7, FP16/BF16 "
            "1,307.4, FP8 2,614.9, INT8 2,614.9 (dense), HBM3E 6 TB/s"),
      entry("AMD Instinct MI300X", {"mi300x", "mi300"}, 163.4, 163.4, 653.7, 1307.4, 1307.4, 2614.9,
            2614.9, 5300,
            "AMD Instinct MI300X datasheet: FP64 matrix 163.4, FP32 163.4, TF32 653.7, FP16/BF16 "
            "1,307.4, FP8 2,614.9, INT8 2,614.9 (dense), HBM3 5.3 TB/s"),
      entry(
          "AMD Instinct MI355X", {"mi355x"}, 78.6, 157.3, 0, 2516.6, 2516.6, 5033.2, 5033.2, 8000,
          "AMD Instinct MI355X datasheet: FP64 78.6, FP32 157.3, FP16/BF16 2.5 P, FP8 5.0 P, INT8 "
          "5.0 P (dense), HBM3E 8 TB/s"),
  };
  return kTable;
}

std::optional<DevicePeaks> find_peaks(std::string_view device_name) {
  if (device_name.empty()) return std::nullopt;
  const std::string n = lower(device_name);
  for (const DevicePeaks& p : builtin_peaks())
    for (const std::string& m : p.match)
      if (n.find(m) != std::string::npos) return p;
  return std::nullopt;
}

double peak_flops(const DevicePeaks& p, std::string_view dtype) {
  if (dtype == "fp64") return p.fp64;
  if (dtype == "fp32") return p.fp32;
  if (dtype == "tf32") return p.tf32;
  if (dtype == "bf16") return p.bf16;
  if (dtype == "fp16") return p.fp16;
  if (dtype == "fp8") return p.fp8;
  if (dtype == "int8") return p.int8;
  return 0;
}

DevicePeaks load_peaks_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(path + ": cannot open the peaks file");
  std::stringstream ss;
  ss << in.rdbuf();
  auto j = nlohmann::json::parse(ss.str(), nullptr, false);
  if (j.is_discarded() || !j.is_object())
    throw Error(path + ": not a peaks file (expected a JSON object, docs/analyses.md)");
  DevicePeaks p;
  p.name = j.value("name", std::string("--peaks ") + path);
  p.source = j.value("source", std::string("--peaks ") + path);
  auto rate = [&](const nlohmann::json& v, const std::string& what) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() < 0 ||
        v.get<double>() > 1e19)
      throw Error(path + ": " + what + " must be a number of FLOP/s or B/s in [0, 1e19]");
    return v.get<double>();
  };
  if (!j.contains("bytes_per_s")) throw Error(path + ": no bytes_per_s (memory bandwidth)");
  p.bytes_per_s = rate(j["bytes_per_s"], "bytes_per_s");
  if (!j.contains("flops_per_s") || !j["flops_per_s"].is_object())
    throw Error(path + ": no flops_per_s object (peak FLOP/s per dtype)");
  for (const auto& [k, v] : j["flops_per_s"].items()) {
    double r = rate(v, "flops_per_s." + k);
    if (k == "fp64")
      p.fp64 = r;
    else if (k == "fp32")
      p.fp32 = r;
    else if (k == "tf32")
      p.tf32 = r;
    else if (k == "bf16")
      p.bf16 = r;
    else if (k == "fp16")
      p.fp16 = r;
    else if (k == "fp8")
      p.fp8 = r;
    else if (k == "int8")
      p.int8 = r;
    else
      throw Error(path + ": unknown dtype \"" + k +
                  "\" in flops_per_s (fp64, fp32, tf32, bf16, fp16, fp8, int8)");
  }
  return p;
}

}  // namespace kernalyse
