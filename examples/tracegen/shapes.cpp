// kernalyse-tracegen --shapes DIR: two one-rank PyTorch-profiler traces recorded "with shapes"
// (cpu_op events with Input Dims / Input type / Concrete Inputs, launches and kernels joined by
// External id and correlation) whose roofline classes and hints are planted:
//   DIR/hints.json  every hint rule's condition holds (docs/analyses.md, "Hints");
//   DIR/clean.json  none holds;
//   DIR/planted.json  per trace: every op row (op, shape) with its call count, FLOPs over its
//                     calls and class, and the hint ids that must fire.
// Kernel durations are set from the planted FLOP/s or B/s against the H100 SXM datasheet figures
// (989.5 TFLOP/s bf16 dense, 67 fp32, 3.35 TB/s), chosen far from every class boundary, so that
// the classes do not hinge on rounding. The device is named after the H100 (its peak-table entry)
// and the files carry "kernalyseSynthetic": true like every tracegen output.
#include "shapes.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

using i64 = int64_t;

constexpr double kBf16Peak = 989.5e12, kFp32Peak = 67e12, kBw = 3.35e12;

std::string us3(i64 ns) {  // ns as µs with exactly three decimals
  char b[48];
  std::snprintf(b, sizeof b, "%s%lld.%03lld", ns < 0 ? "-" : "", (long long)(std::llabs(ns) / 1000),
                (long long)(std::llabs(ns) % 1000));
  return b;
}

struct Planted {
  std::string op, shape, cls;
  i64 count = 0;
  double flops = 0;  // over all calls, -1: not modelled
};

class Writer {
 public:
  std::string events;
  std::vector<Planted> planted;
  i64 cpu = 1'000'000, gpu[2] = {1'000'000, 1'000'000};  // CPU clock; stream 7, stream 23
  i64 ext = 1, corr = 1000;

  // One op call launching one kernel of dur ns on stream s (0: compute 7, 1: NCCL 23). The CPU
  // spends 2 µs in the op and 1 µs in the launch; the kernel starts when both the launch (plus
  // 4 µs of latency) and the stream allow. host_gap_ns: the CPU first waits until the stream has
  // been idle that long (a host-bound launch).
  void call(const std::string& op, const std::string& dims, const std::string& types,
            const std::string& concrete, const std::string& kernel, i64 dur, int s = 0,
            i64 host_gap_ns = 0, const char* cat = "kernel") {
    if (host_gap_ns > 0) cpu = std::max(cpu, gpu[s] + host_gap_ns);
    const i64 op_start = cpu, launch = cpu + 1000, launch_end = launch + 1000;
    const i64 start = std::max(gpu[s], launch_end + 4000);
    const i64 e = ext++, c = corr++;
    cpu = launch_end + 1000;
    add("{\"ph\":\"X\",\"cat\":\"cpu_op\",\"name\":\"" + op +
        "\",\"pid\":100,\"tid\":100,\"ts\":" + us3(op_start) + ",\"dur\":" + us3(cpu - op_start) +
        ",\"args\":{\"External id\":" + std::to_string(e) +
        (dims.empty() ? "" : ",\"Input Dims\":" + dims) +
        (types.empty() ? "" : ",\"Input type\":" + types) +
        (concrete.empty() ? "" : ",\"Concrete Inputs\":" + concrete) + "}}");
    add("{\"ph\":\"X\",\"cat\":\"cuda_runtime\",\"name\":\"cudaLaunchKernel\",\"pid\":100,\"tid\":"
        "100,\"ts\":" +
        us3(launch) + ",\"dur\":" + us3(launch_end - launch) + ",\"args\":{\"External id\":" +
        std::to_string(e) + ",\"correlation\":" + std::to_string(c) + "}}");
    add(std::string("{\"ph\":\"X\",\"cat\":\"") + cat + "\",\"name\":\"" + kernel +
        "\",\"pid\":0,\"tid\":" + (s ? "23" : "7") + ",\"ts\":" + us3(start) +
        ",\"dur\":" + us3(dur) + ",\"args\":{\"External id\":" + std::to_string(e) +
        ",\"device\":0,\"stream\":" + (s ? "23" : "7") + ",\"correlation\":" + std::to_string(c) +
        "}}");
    gpu[s] = start + dur;
  }
  void plant(const std::string& op, const std::string& shape, i64 count, double flops_per_call,
             const std::string& cls) {
    planted.push_back({op, shape, cls, count, flops_per_call < 0 ? -1 : flops_per_call * count});
  }
  void add(const std::string& e) {
    if (!events.empty()) events += ",\n";
    events += e;
  }
  void write(const std::string& path) const {
    std::ofstream f(path, std::ios::trunc);
    f << "{\"schemaVersion\":1,\"kernalyseSynthetic\":true,\"deviceProperties\":[{\"id\":0,"
         "\"name\":\"NVIDIA H100 80GB HBM3 (kernalyse synthetic, emulated)\"}],\n"
         "\"traceEvents\":[\n"
      << events << "\n]}\n";
    if (!f) throw std::runtime_error("cannot write " + path);
  }
};

i64 ns_for(double work, double rate) { return std::llround(work / rate * 1e9); }

const char* kBf16x2 = "[\"c10::BFloat16\",\"c10::BFloat16\"]";

// Every rule fires: fp32 GEMMs, unfused attention, many short elementwise kernels, host launch
// gaps, exposed communication.
void hints_trace(Writer& w, int iters) {
  const double gemm32 = 2.0 * 2048 * 2048 * 2048;      // fp32 mm, at 5 TFLOP/s
  const double qk = 2.0 * 32 * 2048 * 2048 * 128;      // bmm Q·Kᵀ and P·V
  const double big_bf16 = 2.0 * 8192 * 8192 * 8192;    // bf16 mm at 60 % of peak
  const double add_big_bytes = 3.0 * 8192 * 8192 * 2;  // bf16 add at 80 % of BW
  for (int it = 0; it < iters; ++it) {
    w.call("aten::mm", "[[2048,2048],[2048,2048]]", "[\"float\",\"float\"]", "[\"\",\"\"]",
           "ampere_sgemm_128x64_nn", ns_for(gemm32, 5e12));
    w.call("aten::bmm", "[[32,2048,128],[32,128,2048]]", kBf16x2, "[\"\",\"\"]",
           "cutlass_80_tensorop_bf16_s16816gemm_bmm", ns_for(qk, 34e12));
    w.call("aten::_softmax", "[[32,2048,2048],[],[]]", "[\"c10::BFloat16\",\"Scalar\",\"Scalar\"]",
           "[\"\",\"-1\",\"False\"]", "softmax_warp_forward", 1'000'000);
    w.call("aten::bmm", "[[32,2048,2048],[32,2048,128]]", kBf16x2, "[\"\",\"\"]",
           "cutlass_80_tensorop_bf16_s16816gemm_bmm", ns_for(qk, 34e12));
    w.call("aten::mm", "[[8192,8192],[8192,8192]]", kBf16x2, "[\"\",\"\"]",
           "sm90_xmma_gemm_bf16bf16_bf16f32", ns_for(big_bf16, 0.6 * kBf16Peak));
    w.call("aten::add", "[[8192,8192],[8192,8192],[]]",
           "[\"c10::BFloat16\",\"c10::BFloat16\",\"Scalar\"]", "[\"\",\"\",\"1\"]",
           "at::native::vectorized_elementwise_kernel<4, add_big>",
           ns_for(add_big_bytes, 0.8 * kBw));
    for (int k = 0; k < 300; ++k)  // short kernels, launched ahead: latency-bound
      w.call("aten::add", "[[1024,1024],[1024,1024],[]]",
             "[\"c10::BFloat16\",\"c10::BFloat16\",\"Scalar\"]", "[\"\",\"\",\"1\"]",
             "at::native::vectorized_elementwise_kernel<4, add_small>", 5000);
    for (int k = 0; k < 20; ++k)  // the host launches late: 100 µs of idle before each 3 µs kernel
      w.call("aten::mul", "[[256],[256]]", kBf16x2, "[\"\",\"\"]",
             "at::native::vectorized_elementwise_kernel<4, mul_small>", 3000, 0, 100'000);
    // The all-reduce runs on its own stream after the compute is done: exposed.
    w.gpu[1] = std::max(w.gpu[1], w.gpu[0]);
    w.call("nccl:all_reduce", "[[16777216]]", "[\"c10::BFloat16\"]", "",
           "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", 2'000'000, 1);
    w.gpu[0] = std::max(w.gpu[0], w.gpu[1]);
  }
  const i64 n = iters;
  w.plant("aten::mm", "[[2048,2048],[2048,2048]]", n, gemm32, "compute-bound");
  w.plant("aten::bmm", "[[32,2048,128],[32,128,2048]]", n, qk, "memory-bound");
  w.plant("aten::bmm", "[[32,2048,2048],[32,2048,128]]", n, qk, "memory-bound");
  w.plant("aten::_softmax", "[[32,2048,2048],[],[]]", n, 0, "memory-bound");
  w.plant("aten::mm", "[[8192,8192],[8192,8192]]", n, big_bf16, "compute-bound");
  w.plant("aten::add", "[[8192,8192],[8192,8192],[]]", n, 0, "memory-bound");
  w.plant("aten::add", "[[1024,1024],[1024,1024],[]]", 300 * n, 0, "latency-bound");
  w.plant("aten::mul", "[[256],[256]]", 20 * n, 0, "host-launch-bound");
  w.plant("nccl:all_reduce", "[[16777216]]", n, -1, "communication");
}

// Nothing to fix: bf16 GEMMs and flash attention near peak, large memory-bound kernels near the
// bandwidth, the CPU far ahead of the GPU, no communication.
void clean_trace(Writer& w, int iters) {
  const double big_bf16 = 2.0 * 8192 * 8192 * 8192;
  const double attn = 2.0 * 4 * 32 * 4096 * 4096 * (128 + 128) * 0.5;  // causal
  const double ln_bytes = 2.0 * 8 * 4096 * 4096 * 2 + 2.0 * 4096 * 2;  // in + out + γ, β
  for (int it = 0; it < iters; ++it) {
    w.call("aten::mm", "[[8192,8192],[8192,8192]]", kBf16x2, "[\"\",\"\"]",
           "sm90_xmma_gemm_bf16bf16_bf16f32", ns_for(big_bf16, 0.7 * kBf16Peak));
    w.call("aten::_flash_attention_forward",
           "[[4,4096,32,128],[4,4096,32,128],[4,4096,32,128],[],[],[],[],[],[],[],[]]",
           "[\"c10::BFloat16\",\"c10::BFloat16\",\"c10::BFloat16\",\"\",\"\",\"Scalar\","
           "\"Scalar\",\"Scalar\",\"Scalar\",\"Scalar\",\"Scalar\"]",
           "[\"\",\"\",\"\",\"\",\"\",\"4096\",\"4096\",\"0.\",\"True\",\"False\",\"0.088\"]",
           "pytorch_flash::flash_fwd_kernel", ns_for(attn, 0.5 * kBf16Peak));
    w.call("aten::native_layer_norm", "[[8,4096,4096],[],[4096],[4096],[]]",
           "[\"c10::BFloat16\",\"ScalarList\",\"c10::BFloat16\",\"c10::BFloat16\",\"Scalar\"]",
           "[\"\",\"[4096]\",\"\",\"\",\"1e-05\"]", "vectorized_layer_norm_kernel",
           ns_for(ln_bytes, 0.7 * kBw));
  }
  const i64 n = iters;
  w.plant("aten::mm", "[[8192,8192],[8192,8192]]", n, big_bf16, "compute-bound");
  w.plant("aten::_flash_attention_forward",
          "[[4,4096,32,128],[4,4096,32,128],[4,4096,32,128],[],[],[],[],[],[],[],[]]", n, attn,
          "compute-bound");
  w.plant("aten::native_layer_norm", "[[8,4096,4096],[],[4096],[4096],[]]", n, 0, "memory-bound");
}

std::string num(double v) {
  char b[64];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

std::string planted_json(const std::string& file, const Writer& w,
                         const std::vector<std::string>& hints) {
  std::string j = "  \"" + file + "\": {\n    \"hints\": [";
  for (size_t i = 0; i < hints.size(); ++i) j += (i ? ", \"" : "\"") + hints[i] + "\"";
  j += "],\n    \"ops\": [\n";
  for (size_t i = 0; i < w.planted.size(); ++i) {
    const Planted& p = w.planted[i];
    j += "      {\"op\": \"" + p.op + "\", \"shape\": \"" + p.shape +
         "\", \"count\": " + std::to_string(p.count) +
         ", \"flops\": " + (p.flops < 0 ? "null" : num(p.flops)) + ", \"class\": \"" + p.cls +
         "\"}" + (i + 1 < w.planted.size() ? ",\n" : "\n");
  }
  return j + "    ]\n  }";
}

}  // namespace

void write_shapes(const std::string& dir, int iters) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  Writer h, c;
  hints_trace(h, iters);
  clean_trace(c, iters);
  h.write((fs::path(dir) / "hints.json").string());
  c.write((fs::path(dir) / "clean.json").string());
  std::ofstream p(fs::path(dir) / "planted.json", std::ios::trunc);
  p << "{\n  \"generator\": \"kernalyse-tracegen --shapes\",\n  \"synthetic\": true,\n"
    << planted_json(
           "hints.json", h,
           {"fused-attention", "fp32-gemm", "fusion", "cuda-graphs", "overlap-communication"})
    << ",\n"
    << planted_json("clean.json", c, {}) << "\n}\n";
  if (!p) throw std::runtime_error("cannot write planted.json in " + dir);
  (void)kFp32Peak;
}
