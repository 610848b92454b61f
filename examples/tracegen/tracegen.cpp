// kernalyse-tracegen: writes synthetic multi-rank PyTorch-profiler (Kineto) Chrome-trace JSON, one
// file per rank, for the demo, the tests and the benchmark. Every file carries the top-level marker
// "kernalyseSynthetic": true and names its device "kernalyse synthetic GPU (emulated)".
//
// Model. Every rank runs the same op program (same kernels, collectives, sizes and GPU gap pattern,
// drawn from the seed alone) with its own timing (kernel durations ±3 %, gaps ±2 %, CPU side: drawn
// from seed and rank). One CPU thread launches the ops; compute kernels, memcpys and memsets run on
// stream 7, NCCL kernels on stream 23. An NCCL kernel starts when its launch, the comm stream and
// its gate kernel (the compute kernel two before it) are done; the kernel between them runs
// alongside (compute/comm overlap); it ends only once every rank has reached it, so a late rank
// makes the others wait, and the next compute kernel uses its result, so the ranks realign after
// every collective. The knobs: --slow-rank makes one rank's compute kernels longer,
// --launch-delay-rank makes one rank's host sync and stall before each gate kernel's launch; either
// makes that rank the last to arrive at every collective, for that reason alone. Pass 1 simulates
// all ranks in lockstep to find when each collective can start everywhere; pass 2 replays each rank
// (one thread per rank) and writes it; with
// --truth it keeps every GPU op to compute the truth file exactly. Times are int64 ns; ts/dur are
// written as µs with exactly three decimals, relative to baseTimeNanoseconds (--clock-skew-us adds
// a per-rank offset to every ts written; the truth keeps true times).
#include <zlib.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kernalyse/kineto.h"
#include "nsys_set.h"
#include "nccl_ops_gen.h"
#include "nsys_writer.h"
#include "rocprof_writer.h"
#include "shapes.h"

namespace {

using i64 = int64_t;

struct Options {
  int ranks = 2;
  i64 kernels = 10000;  // exact number of "kernel" events per rank, NCCL kernels included
  int steps = 4;
  std::string out, truth;
  std::string format = "json";  // json; nsys: one Nsight Systems SQLite export per rank; rocprof
  bool gz = false, minify = false;
  int gz_level = 1;
  uint64_t seed = 1;
  int slow_rank = -1;
  double slow_factor = 1.0;
  int delay_rank = -1;
  i64 delay_ns = 0, jitter_ns = 0;
  int threads = 0;
  // --pair: BASE and TEST runs with planted differences (see kPairNote); variant 0 base, 1 test.
  bool pair = false;
  int variant = 0;
  double pair_factor = 1.5;
  i64 pair_delay_ns = 300000;
  int pair_straggler[2] = {0, 1};  // the launch-delayed rank of BASE and of TEST
  std::vector<std::pair<int, i64>>
      clock_skew;  // --clock-skew-us: (rank, ns) added to all its timestamps
  // --host-skew-us / --host-drift-ppm / --ranks-per-host: rank r runs on host r / K; all ranks of a
  // host read one clock, off by the host's offset plus drift · (true time since the trace's base).
  int ranks_per_host = 0;
  NsysSetOptions nsys;  // --nsys-*: a multi-host set of Nsight Systems reports (nsys_set.h)
  // --nccl-ops: the job with NCCL's own ids instead (nccl_ops_gen.h).
  bool nccl_ops = false, no_op_ids = false, ce = false;
  int nccl_late_rank = -1;
  std::vector<std::pair<int, i64>> host_skew;
  std::vector<std::pair<int, double>> host_drift_ppm;
  int host_of(int rank) const { return ranks_per_host > 0 ? rank / ranks_per_host : rank; }
  i64 skew_of(int rank) const {
    i64 k = 0;
    for (const auto& [r, ns] : clock_skew)
      if (r == rank) k = ns;
    if (ranks_per_host > 0)
      for (const auto& [h, ns] : host_skew)
        if (h == host_of(rank)) k += ns;
    return k;
  }
  double drift_of(int rank) const {
    double d = 0;
    if (ranks_per_host > 0)
      for (const auto& [h, ppm] : host_drift_ppm)
        if (h == host_of(rank)) d = ppm * 1e-6;
    return d;
  }
};

// splitmix64: portable and deterministic (std:: distributions are not).
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double uni() { return double(next() >> 11) * 0x1.0p-53; }
  i64 range(i64 lo, i64 hi) { return lo + i64(next() % uint64_t(hi - lo + 1)); }
  bool chance(double p) { return uni() < p; }
};

struct Us {
  i64 ns;
};  // a duration, written as µs with 3 decimals, exact
struct Ts {
  i64 ns;
};  // a timestamp (true time): written like Us, shifted by the rank's clock skew
struct Num {
  double v;
};  // written in shortest round-trip form

// Buffered writer to a plain or gzip file. Every string put leaves room for one number after it,
// and templates alternate strings and values, so numbers never need a check.
class Out {
 public:
  Out(const std::string& path, bool gz, int level) : buf_(8 << 20) {
    if (gz) {
      gz_ = gzopen(path.c_str(), ("wb" + std::to_string(level)).c_str());
      if (gz_) gzbuffer(gz_, 1 << 20);
    } else {
      f_ = std::fopen(path.c_str(), "wb");
    }
    if (!gz_ && !f_) throw std::runtime_error("cannot open " + path);
  }
  ~Out() {
    if (f_) std::fclose(f_);
    if (gz_) gzclose(gz_);
  }
  void put(std::string_view s) {
    if (n_ + s.size() + 256 > buf_.size()) {
      flush();
      if (s.size() + 256 > buf_.size()) return write(s.data(), s.size());
    }
    std::memcpy(buf_.data() + n_, s.data(), s.size());
    n_ += s.size();
  }
  void put(i64 v) {
    n_ = size_t(std::to_chars(buf_.data() + n_, buf_.data() + buf_.size(), v).ptr - buf_.data());
  }
  void put(Us u) {
    put(u.ns / 1000);
    const int f = int(u.ns % 1000);
    char* p = buf_.data() + n_;
    p[0] = '.', p[1] = char('0' + f / 100), p[2] = char('0' + f / 10 % 10),
    p[3] = char('0' + f % 10);
    n_ += 4;
  }
  void put(Ts t) { put(Us{t.ns + skew + (drift != 0 ? std::llround(drift * double(t.ns)) : 0)}); }
  void put(Num x) {
    n_ = size_t(std::to_chars(buf_.data() + n_, buf_.data() + buf_.size(), x.v).ptr - buf_.data());
  }
  void flush() { write(buf_.data(), n_), n_ = 0; }
  void close() {
    flush();
    if (f_ && std::fclose(f_) != 0) f_ = nullptr, throw std::runtime_error("write failed (fclose)");
    if (gz_ && gzclose(gz_) != Z_OK)
      gz_ = nullptr, throw std::runtime_error("write failed (gzclose)");
    f_ = nullptr, gz_ = nullptr;
  }
  i64 bytes = 0, events = 0;
  i64 skew = 0;      // ns added to every timestamp written (--clock-skew-us, --host-skew-us)
  double drift = 0;  // and drift · ts (--host-drift-ppm)

 private:
  void write(const char* p, size_t n) {
    if (n == 0) return;
    bytes += i64(n);
    const bool ok = f_ ? std::fwrite(p, 1, n, f_) == n : gzwrite(gz_, p, unsigned(n)) == int(n);
    if (!ok) throw std::runtime_error("write failed");
  }
  std::vector<char> buf_;
  size_t n_ = 0;
  FILE* f_ = nullptr;
  gzFile gz_ = nullptr;
};

// Removes the blanks outside JSON strings ("--minify").
std::string strip_ws(std::string_view s) {
  std::string r;
  bool in = false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (in) {
      r += c;
      if (c == '\\' && i + 1 < s.size())
        r += s[++i];
      else if (c == '"')
        in = false;
    } else if (c == '"') {
      in = true, r += c;
    } else if (c != ' ' && c != '\n') {
      r += c;
    }
  }
  return r;
}

// A pretty event text with '@' where values go, split once into fixed fragments.
struct Tmpl {
  std::vector<std::string> f;
  Tmpl() = default;
  Tmpl(std::string_view pretty, bool minify) {
    const std::string s = minify ? strip_ws(pretty) : std::string(pretty);
    size_t a = 0;
    for (size_t b; (b = s.find('@', a)) != std::string::npos; a = b + 1)
      f.push_back(s.substr(a, b - a));
    f.push_back(s.substr(a));
  }
};
template <class... A>
void fill(Out& o, const Tmpl& t, const A&... a) {
  if (t.f.size() != sizeof...(A) + 1) throw std::logic_error("template/argument mismatch");
  size_t i = 0;
  ((o.put(std::string_view(t.f[i++])), o.put(a)), ...);
  o.put(std::string_view(t.f[i]));
}
template <class... A>
void emit(Out& o, const Tmpl& t, const A&... a) {  // one trace event
  fill(o, t, a...);
  ++o.events;
}

// ---- what runs: compute kernels (with the CPU op launching them) and NCCL collectives ----
struct KSpec {
  const char* name;
  const char* op;
  int lo_us, hi_us, gx, gy, bx, regs, smem;
};
enum {
  FILL,
  GEMM_H,
  GEMM_H_NT,
  GEMM_A,
  CUTLASS,
  FLASH_F,
  FLASH_B,
  LN,
  LN_BWD,
  GELU,
  ADD,
  MUL,
  SOFTMAX,
  REDUCE,
  ADAM,
  EMBED,
  TRITON,
  GRP_MUL,
  GRP_SIGMOID,
  GRP_ADD,
  FUSED,
  N_COMPUTE
};
const KSpec kCompute[N_COMPUTE] = {
    {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, "
     "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, "
     "1>)",
     "aten::fill_", 2, 6, 1056, 1, 128, 16, 0},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
     "segment_k_off_kernel__5x_cublas",
     "aten::mm", 80, 400, 132, 1, 384, 168, 213248},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize256x128x64_warpgroupsize2x1x1_execute_"
     "segment_k_off_kernel__5x_cublas",
     "aten::mm", 150, 600, 132, 1, 384, 168, 229888},
    {"ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn", "aten::addmm", 40, 200, 96, 8,
     128, 254, 65536},
    {"void "
     "cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_nn_align8>(cutlass_"
     "80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_nn_align8::Params)",
     "aten::addmm", 30, 120, 64, 16, 128, 230, 73728},
    {"void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
     "cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, "
     "true, false, false, true, true, false, false>(flash::Flash_fwd_params)",
     "flash_attn::_flash_attn_forward", 100, 300, 16, 64, 128, 255, 49152},
    {"void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, "
     "128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, "
     "cutlass::bfloat16_t> >, true, false, false, false, false, true, false, "
     "false>(flash::Flash_bwd_params)",
     "flash_attn::_flash_attn_backward", 200, 600, 32, 64, 256, 255, 147456},
    {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, "
     "float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, "
     "float*, c10::BFloat16*)",
     "aten::native_layer_norm", 8, 25, 8192, 1, 256, 30, 0},
    {"void at::native::(anonymous "
     "namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>(c10::BFloat16 "
     "const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, "
     "c10::BFloat16*, int)",
     "aten::native_layer_norm_backward", 10, 30, 8192, 1, 128, 40, 1024},
    {"void at::native::vectorized_elementwise_kernel<4, "
     "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
     "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() "
     "const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, "
     "at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, "
     "at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() "
     "const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)",
     "aten::gelu", 10, 40, 65536, 1, 128, 28, 0},
    {"void at::native::vectorized_elementwise_kernel<4, "
     "at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3> >(int, "
     "at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)",
     "aten::add", 5, 20, 65536, 1, 128, 24, 0},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, "
     "float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, "
     "at::native::BinaryFunctor<float, float, float, "
     "at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3>)",
     "aten::mul", 3, 10, 32768, 1, 128, 22, 0},
    {"void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, "
     "c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, "
     "c10::BFloat16 const*, int)",
     "aten::_softmax", 20, 60, 8192, 1, 1024, 32, 256},
    {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
     "at::native::func_wrapper_t<float, at::native::sum_functor<float, float, "
     "float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> "
     ">(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
     "at::native::sum_functor<float, float, "
     "float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4>)",
     "aten::sum", 5, 30, 264, 1, 512, 32, 16},
    {"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous "
     "namespace)::TensorListMetadata<4>, at::native::(anonymous "
     "namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double, double, "
     "double, double, double, double, bool, double*, double*>(at::native::(anonymous "
     "namespace)::TensorListMetadata<4>, at::native::(anonymous "
     "namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double, double, "
     "double, double, double, double, bool, double*, double*)",
     "aten::_fused_adamw_", 100, 500, 320, 1, 512, 72, 0},
    {"void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned "
     "int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, "
     "at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, "
     "at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned "
     "int, long)",
     "aten::index_select", 10, 40, 4224, 1, 128, 26, 0},
    {"triton_poi_fused__to_copy_add_mul_native_layer_norm_0", "Torch-Compiled Region", 4, 15, 16384,
     1, 256, 28, 0},
    // --pair only: the eager activation group (BASE) and the Triton kernel fusing it (TEST).
    {"void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<c10::BFloat16, "
     "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, "
     "at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<c10::BFloat16, c10::BFloat16, "
     "c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, "
     "3>)",
     "aten::mul", 10, 40, 65536, 1, 128, 22, 0},
    {"void at::native::vectorized_elementwise_kernel<4, "
     "at::native::sigmoid_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() "
     "const::{lambda()#3}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, "
     "2> >(int, "
     "at::native::sigmoid_kernel_cuda(at::TensorIteratorBase&)::{lambda()#2}::operator()() "
     "const::{lambda()#3}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, "
     "2>)",
     "aten::sigmoid", 10, 40, 65536, 1, 128, 24, 0},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<float>, "
     "at::detail::Array<char*, 3>)",
     "aten::add", 10, 40, 65536, 1, 128, 24, 0},
    {"triton_poi_fused_add_mul_sigmoid_0", "aten::silu", 10, 40, 16384, 1, 256, 28, 0},
};
const int kFwd[] = {LN,      GEMM_H, FLASH_F, GEMM_A, ADD,    LN,
                    CUTLASS, GELU,   GEMM_H,  ADD,    TRITON, SOFTMAX};
const int kBwd[] = {MUL,    GEMM_H_NT, GEMM_A,    GELU,   CUTLASS, LN_BWD,
                    REDUCE, FLASH_B,   GEMM_H_NT, GEMM_A, ADD,     LN_BWD};
const int kOpt[] = {REDUCE, ADAM, FILL};

struct CSpec {
  const char* name;
  const char* coll;
  const char* op;
  const char* launch;
  int cbid, kind;  // kind: 0 all-reduce, 1 all-gather, 2 reduce-scatter
};
enum { AR, AG, RS, AR_TREE, N_COLL };
const CSpec kColl[N_COLL] = {
    {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allreduce",
     "c10d::allreduce_", "cudaLaunchKernelExC", 430, 0},
    {"ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWork*)", "_allgather_base",
     "c10d::_allgather_base_", "cudaLaunchKernel", 211, 1},
    {"ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "_reduce_scatter_base", "c10d::_reduce_scatter_base_", "cudaLaunchKernelExC", 430, 2},
    // With --ranks-per-host only: every third all-reduce runs as a tree, where one rank of each
    // host ends early (as in a real 9-rank tree all-reduce on 3 hosts: 5.8 ms before its host's
    // others).
    {"ncclDevKernel_AllReduce_Sum_bf16_TREE_LL(ncclDevKernelArgsStorage<4096ul>)", "allreduce",
     "c10d::allreduce_", "cudaLaunchKernelExC", 430, 0},
};
constexpr int kNames = int(N_COMPUTE) + int(N_COLL);
// --pair: what TEST changes (docs/analyses.md, "Trace diff").
constexpr int kPairSlow = GEMM_A, kPairRemoved = SOFTMAX, kPairGroup = GELU;
constexpr const char* kPairRange = "mlp.act";  // truth name index: compute specs, then collectives
constexpr i64 kStream[2] = {7, 23};            // compute, comm
constexpr int kSms = 132;

// Per-kernel args after "correlation" (launch configuration), fixed per name.
std::string kernel_tail(int gx, int gy, int bx, int regs, int smem) {
  const double bps = double(gx) * gy / kSms, wps = bps * ((bx + 31) / 32);
  char b[320];
  std::snprintf(
      b, sizeof b,
      "\"registers per thread\": %d, \"shared memory\": %d, \"blocks per SM\": %.6f, \"warps per "
      "SM\": "
      "%.6f, \"grid\": [%d, %d, 1], \"block\": [%d, 1, 1], \"est. achieved occupancy %%\": %d",
      regs, smem, bps, wps, gx, gy, bx, int(std::min(100.0, wps / 64 * 100)));
  return b;
}

struct Ctx {
  Options o;
  Tmpl head, foot, meta1, meta, span, step, range, cpu_op, runtime, flow_s, flow_f, kernel, nccl,
      mem;
  std::vector<std::string> tails;  // per name index
  std::string pg_ranks;            // "[0, 1, ...]" as Kineto writes it inside a string
  std::string ranks_json;          // the same list as JSON in distributedInfo
  explicit Ctx(const Options& opt) : o(opt) {
    const bool m = o.minify;
    head = Tmpl(R"J({
  "schemaVersion": 1,
  "kernalyseSynthetic": true,
  "deviceProperties": [
    {
      "id": @, "name": "kernalyse synthetic GPU (emulated)", "totalGlobalMem": 85520809984,
      "computeMajor": 9, "computeMinor": 0,
      "maxThreadsPerBlock": 1024, "maxThreadsPerMultiprocessor": 2048,
      "regsPerBlock": 65536, "warpSize": 32,
      "sharedMemPerBlock": 49152, "numSms": 132,
      "regsPerMultiprocessor": 65536, "sharedMemPerBlockOptin": 232448, "sharedMemPerMultiprocessor": 233472
    }
  ],
  "distributedInfo": {"backend": "nccl", "rank": @, "world_size": @, "pg_count": 1, "pg_config": [{"pg_name": "0", "pg_desc": "default_pg", "backend_config": "cuda:nccl", "pg_size": @, "ranks": @}], "nccl_version": "2.21.5"},
  "traceEvents": [)J",
                m);
    foot = Tmpl(
        "\n  ],\n  \"traceName\": \"rank-@.json\",\n  \"displayTimeUnit\": \"ms\",\n  "
        "\"baseTimeNanoseconds\": @\n}\n",
        m);
    const std::string mt =
        R"J({"name": "@", "ph": "M", "ts": @, "pid": @, "tid": @, "args": {"@": @}})J";
    meta1 = Tmpl("\n  " + mt, m);
    meta = Tmpl(",\n  " + mt, m);
    span = Tmpl(R"J(,
  {"ph": "X", "cat": "Trace", "ts": @, "dur": @, "pid": "Spans", "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}})J",
                m);
    step = Tmpl(R"J(,
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#@", "pid": @, "tid": @, "ts": @, "dur": @, "args": {"External id": @, "Record function id": 0, "Ev Idx": @}})J",
                m);
    range = Tmpl(R"J(,
  {"ph": "X", "cat": "user_annotation", "name": "@", "pid": @, "tid": @, "ts": @, "dur": @, "args": {"External id": @, "Record function id": 0, "Ev Idx": @}})J",
                 m);
    cpu_op = Tmpl(R"J(,
  {"ph": "X", "cat": "cpu_op", "name": "@", "pid": @, "tid": @, "ts": @, "dur": @, "args": {"External id": @, "Record function id": 0, "Sequence number": @, "Fwd thread id": 0, "Ev Idx": @}})J",
                  m);
    runtime = Tmpl(R"J(,
  {"ph": "X", "cat": "cuda_runtime", "name": "@", "pid": @, "tid": @, "ts": @, "dur": @, "args": {"External id": @, "cbid": @, "correlation": @}})J",
                   m);
    flow_s = Tmpl(R"J(,
  {"ph": "s", "id": @, "pid": @, "tid": @, "ts": @, "cat": "ac2g", "name": "ac2g"})J",
                  m);
    flow_f = Tmpl(R"J(,
  {"ph": "f", "id": @, "pid": @, "tid": @, "ts": @, "cat": "ac2g", "name": "ac2g", "bp": "e"})J",
                  m);
    const std::string k = R"J(,
  {"ph": "X", "cat": "kernel", "name": "@", "pid": @, "tid": @, "ts": @, "dur": @, "args": {"External id": @, "queued": 0, "device": @, "context": 1, "stream": @, "correlation": @, @)J";
    kernel = Tmpl(k + "}}", m);
    nccl = Tmpl(
        k + R"J(, "Collective name": "@", "In msg nelems": @, "Out msg nelems": @, "Group size": @, "dtype": "BFloat16", "In split size": "[]", "Out split size": "[]", "Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": "@", "Seq": @}})J",
        m);
    mem = Tmpl(R"J(,
  {"ph": "X", "cat": "@", "name": "@", "pid": @, "tid": @, "ts": @, "dur": @, "args": {"External id": @, "device": @, "context": 1, "stream": @, "correlation": @, "bytes": @, "memory bandwidth (GB/s)": @}})J",
               m);
    for (const KSpec& s : kCompute) tails.push_back(kernel_tail(s.gx, s.gy, s.bx, s.regs, s.smem));
    for (int c = 0; c < N_COLL; ++c)
      tails.push_back(kernel_tail(c == AG ? 16 : 24, 1, c == AG ? 256 : 640, 96, 0));
    if (m)
      for (auto& t : tails) t = strip_ws(t);
    pg_ranks = "[";
    for (int r = 0; r < o.ranks; ++r) pg_ranks += (r ? ", " : "") + std::to_string(r);
    pg_ranks += "]";
    ranks_json = m ? strip_ws(pg_ranks) : pg_ranks;
  }
};

// Per-stream truth, ops in start order: gap = start - latest end so far.
struct StreamStats {
  i64 ops = 0, gaps = 0, gap_ns = 0, overlaps = 0, touching = 0, busy_ns = 0, first = 0,
      last_end = 0;
  void add(i64 s, i64 e) {
    if (ops++ == 0) {
      first = s, last_end = e, busy_ns = e - s;
      return;
    }
    const i64 g = s - last_end;
    if (g > 0)
      ++gaps, gap_ns += g;
    else if (g == 0)
      ++touching;
    else
      ++overlaps;
    busy_ns += std::max<i64>(0, e - std::max(s, last_end));
    last_end = std::max(last_end, e);
  }
};

// One GPU op, kept for the cross-rank truth (only with --truth): true times (no clock skew), the ts
// of the runtime call that launched it, the ProfilerStep (1-based) whose CPU window holds that
// launch, and for NCCL kernels the collective kind and Seq.
struct GpuOp {
  i64 start, end, launch, seq;
  int stream;  // 0 compute stream, 1 comm stream
  int kind;    // 0 compute kernel, 1 NCCL kernel, 2 memcpy/memset
  int step, coll;
};

struct Truth {
  i64 kernels = 0, memcpy = 0, memset = 0, nccl = 0, steps = 0, kernel_ns = 0, bytes = 0,
      events = 0;
  i64 count[kNames] = {}, total_ns[kNames] = {};
  StreamStats all[2], kern[2];
  std::vector<GpuOp> ops;                         // in simulation order
  std::vector<std::pair<i64, i64>> step_windows;  // ProfilerStep CPU [start, end), true times
  i64 slow_extra_ns = 0;                          // kernel time added by --slow-factor
  i64 delays = 0, delay_ns = 0;                   // --launch-delay injections
};

struct Stream {
  i64 free = 0, prev_start = -1, prev_end = 0;
};

constexpr i64 kNever = std::numeric_limits<i64>::max();

// One rank's simulation. advance() runs until the next NCCL kernel is ready to start and returns
// that time (or -1 when the rank is done); finish_collective(t) completes it, every rank having
// arrived by t.
class RankSim {
 public:
  RankSim(const Ctx& cx, int rank, Out* out)
      : cx_(cx),
        o_(cx.o),
        rank_(rank),
        out_(out),
        srng_(o_.seed * 0x9e3779b97f4a7c15ULL + 0x5eed),
        trng_((o_.seed + 1) * 0xbf58476d1ce4e5b9ULL ^ uint64_t(rank + 1) * 0x94d049bb133111ebULL),
        pid_(40000 + 113 * rank),
        tid_bwd_(pid_ + 9),
        dev_(rank % 8),
        keep_(out && !o_.truth.empty()) {
    if (out_) out_->skew = o_.skew_of(rank), out_->drift = o_.drift_of(rank);
    cpu_ = kT0 + trng_.range(0, 50000);
    t0_ = cpu_;
    if (out_) {
      fill(*out_, cx_.head, dev_, rank_, o_.ranks, o_.ranks, cx_.ranks_json);
      emit(*out_, cx_.meta1, "process_name", Ts{t0_}, pid_, 0, "name", "\"python3\"");
    }
  }

  i64 advance() {
    while (step_ < o_.steps) {
      if (!in_step_) begin_step();
      for (; idx_ < ks_; ++idx_) {
        i64 not_before = 0;
        int spec;
        bool bwd = false;
        if (is_coll(idx_))
          return launch_collective(idx_ < n_fwd_ ? AG : ++bwd_colls_ % 4 == 0 ? RS : AR);
        if (idx_ < n_fwd_) {
          const i64 j = idx_;
          spec = j == 0 ? EMBED : kFwd[(j - 1) % i64(std::size(kFwd))];
        } else if (idx_ < n_fwd_ + n_bwd_) {
          const i64 j = idx_ - n_fwd_;
          bwd = true;
          if (j == 0) mem_op(2, "Memset (Device)", srng_.range(1 << 16, 64 << 20), 1200, tid_bwd_);
          spec = kBwd[j % i64(std::size(kBwd))];
        } else {
          const i64 j = idx_ - n_fwd_ - n_bwd_;
          if (j == 0) not_before = st_[1].free;  // the optimizer waits for all gradients
          spec = kOpt[j % i64(std::size(kOpt))];
        }
        if (idx_ >= wait_at_) not_before = std::max(not_before, wait_t_), wait_at_ = kNever;
        const bool gate = is_coll(idx_ + 2), rides = is_coll(idx_ + 1);
        if (!rides && srng_.chance(0.01)) {
          if (srng_.chance(0.5))
            mem_op(2, "Memset (Device)", srng_.range(1 << 12, 16 << 20), 1200, tid(bwd));
          else
            mem_op(1, "Memcpy DtoD (Device -> Device)", srng_.range(1 << 12, 16 << 20), 1000,
                   tid(bwd));
        }
        if (gate && rank_ == o_.delay_rank && o_.delay_ns > 0) inject_delay(tid(bwd), o_.delay_ns);
        // --pair: both candidate stragglers sync at every gate in both runs (the same random
        // draws), and only this run's straggler is then busy on the host.
        if (gate && o_.pair && (rank_ == o_.pair_straggler[0] || rank_ == o_.pair_straggler[1]))
          inject_delay(tid(bwd), rank_ == o_.pair_straggler[o_.variant] ? o_.pair_delay_ns : 0);
        compute(spec, bwd, not_before, gate || rides);
        if (gate) gate_end_ = st_[0].prev_end;
      }
      end_step();
    }
    if (!done_) finish_file();
    return -1;
  }

  void finish_collective(i64 t_all) {
    const Pending& p = pend_;
    const CSpec& c = kColl[p.c];
    i64 end = t_all + p.xfer + trng_.range(0, 2000);
    // Tree all-reduce: one rank per host (a different one each time) ends after a fifth of the
    // transfer.
    if (p.c == AR_TREE && o_.ranks_per_host > 0 &&
        rank_ % o_.ranks_per_host == p.seq % o_.ranks_per_host)
      end = t_all + 1000 + p.xfer / 5;
    const i64 dur = end - p.start;
    st_[1].free = std::max(st_[1].free, end);
    st_[1].prev_start = p.start, st_[1].prev_end = end;
    record(N_COMPUTE + p.c, 1, p.start, end);
    keep(p.start, end, p.launch, 1, 1, p.c, p.seq);
    ++t.nccl;
    wait_at_ = idx_ + 1, wait_t_ = end;  // the next compute op uses its result
    if (out_) {
      Out& o = *out_;
      emit(o, cx_.nccl, c.name, dev_, kStream[1], Ts{p.start}, Us{dur}, p.ext, dev_, kStream[1],
           p.corr, cx_.tails[N_COMPUTE + p.c], c.coll, p.in, p.out, o_.ranks, cx_.pg_ranks, p.seq);
      emit(o, cx_.flow_f, p.corr, dev_, kStream[1], Ts{p.start});
    }
    ++idx_;
  }

  Truth t;

 private:
  static constexpr i64 kT0 = 1'000'000'000;  // first CPU time, ns after baseTimeNanoseconds
  static constexpr i64 kBase = 1'735'689'600'000'000'000;  // 2025-01-01T00:00:00Z

  struct Pending {
    int c;
    i64 in, out, xfer, start, ext, corr, seq, launch;
  };

  i64 tid(bool bwd) const { return bwd ? tid_bwd_ : pid_; }

  // Whether op index i of the current step is an NCCL collective (the same on every rank).
  bool is_coll(i64 i) const {
    if (i < n_fwd_) return i % 48 == 24;
    if (i < n_fwd_ + n_bwd_) return (i - n_fwd_) % bucket_ == bucket_ - 1;
    return false;
  }

  void keep(i64 start, i64 end, i64 launch, int stream, int kind, int coll = -1, i64 seq = 0) {
    if (keep_) t.ops.push_back(GpuOp{start, end, launch, seq, stream, kind, step_ + 1, coll});
  }

  // --launch-delay: the host syncs on the compute stream, then is busy for D before it launches the
  // collective's gate kernel, so the compute stream idles (host wait) and the collective starts
  // late.
  void inject_delay(i64 th, i64 ns) {
    host_sync(th);
    const i64 ts = cpu_, ext = ++ext_;
    cpu_ += ns;
    ++t.delays, t.delay_ns += ns;
    if (out_)
      emit(*out_, cx_.cpu_op, "kernalyse::injected_launch_delay", pid_, th, Ts{ts}, Us{ns}, ext,
           ext, ext);
  }

  void begin_step() {
    ks_ = o_.kernels / o_.steps + (step_ < o_.kernels % o_.steps ? 1 : 0);
    const i64 n_opt = std::min<i64>(ks_, 3), rest = ks_ - n_opt;
    n_fwd_ = rest * 2 / 5, n_bwd_ = rest - n_fwd_;
    bucket_ = srng_.range(20, 40), bwd_colls_ = 0, idx_ = 0, wait_at_ = kNever, gate_end_ = -1;
    step_start_ = cpu_, step_ext_ = ++ext_;
    if (ks_ > 0)
      mem_op(1, "Memcpy HtoD (Pinned -> Device)", srng_.range(1 << 20, 64 << 20), 20, pid_);
    in_step_ = true;
  }

  void end_step() {
    if (ks_ > 0) {  // loss.item(): a small copy back, then the host waits for the stream
      mem_op(1, "Memcpy DtoH (Device -> Pageable)", 4, 20, pid_);
      host_sync(pid_);
    }
    cpu_ += jitter(srng_.range(20000, 200000));
    ++t.steps;
    t.step_windows.emplace_back(step_start_, cpu_);
    if (out_)
      emit(*out_, cx_.step, step_ + 1, pid_, pid_, Ts{step_start_}, Us{cpu_ - step_start_},
           step_ext_, step_ext_);
    ++step_, in_step_ = false;
  }

  void finish_file() {
    done_ = true;
    if (!out_) return;
    Out& o = *out_;
    const i64 dev = dev_;
    emit(o, cx_.meta, "process_labels", Ts{t0_}, pid_, 0, "labels", "\"CPU\"");
    emit(o, cx_.meta, "process_name", Ts{t0_}, dev, 0, "name", "\"python3\"");
    emit(o, cx_.meta, "process_labels", Ts{t0_}, dev, 0, "labels",
         "\"GPU " + std::to_string(dev) + "\"");
    emit(o, cx_.meta, "process_sort_index", Ts{t0_}, dev, 0, "sort_index", 16777216 + dev);
    emit(o, cx_.meta, "thread_name", Ts{t0_}, pid_, pid_, "name",
         "\"thread " + std::to_string(pid_) + " (python)\"");
    emit(o, cx_.meta, "thread_name", Ts{t0_}, pid_, tid_bwd_, "name",
         "\"thread " + std::to_string(tid_bwd_) + " (pt_autograd_0)\"");
    for (i64 s : kStream) {
      emit(o, cx_.meta, "thread_name", Ts{t0_}, dev, s, "name",
           "\"stream " + std::to_string(s) + " \"");
      emit(o, cx_.meta, "thread_sort_index", Ts{t0_}, dev, s, "sort_index", s);
    }
    emit(o, cx_.span, Ts{t0_}, Us{cpu_ - t0_});
    fill(o, cx_.foot, rank_, kBase);
  }

  // The GPU start on the compute stream: the drawn gap after the latest end, not before ready.
  // The gap pattern belongs to the program (structure rng, the same on every rank); each rank
  // stretches it by up to ±2 % (timing rng), so ranks differ by little more than what the knobs
  // plant. tight: a short gap only (a collective's gate kernel and the kernel riding along: nothing
  // hides a late launch). An overlapping op starts inside the previous one but never ends before
  // it: ends rise in start order, so "the previous op's end" and "the latest end so far" are the
  // same on every stream.
  i64 place(i64 ready, i64 dur, bool tight = false) {
    Stream& s = st_[0];
    const double u = tight ? 0.5 : srng_.uni();
    i64 start;
    if (u < 0.01 && s.prev_start >= 0)
      start = s.free - std::llround(double(std::min(s.prev_end - s.prev_start, dur)) *
                                    (0.2 + 0.6 * srng_.uni()));
    else if (u < 0.03)
      start = s.free;
    else if (u < 0.58)
      start = s.free + jitter(srng_.range(500, 3000));
    else if (u < 0.86)
      start = s.free + jitter(srng_.range(3000, 30000));
    else if (u < 0.97)
      start = s.free + jitter(srng_.range(30000, 300000));
    else
      start = s.free + jitter(srng_.range(300000, 3000000));
    return std::max({start, ready, s.prev_start + 1});
  }
  i64 jitter(i64 v) { return std::llround(double(v) * (0.98 + 0.04 * trng_.uni())); }

  // CPU side of one launch: optional enclosing cpu_op, the runtime call, launch-queue
  // back-pressure.
  struct Launch {
    i64 op_ts, op_dur, ts, dur, ext, corr;
  };
  Launch cpu_launch(bool always_op, i64 lo, i64 hi) {
    Launch l{};
    cpu_ = std::max(cpu_, ring_[qi_ & 1023]);  // at most 1024 ops queued on the compute stream
    const bool op = always_op || trng_.chance(0.6);
    l.op_ts = cpu_;
    if (op) cpu_ += trng_.range(2000, 8000);
    l.ts = cpu_, l.dur = trng_.range(lo, hi), cpu_ += l.dur;
    if (op) cpu_ += trng_.range(1000, 3000), l.op_dur = cpu_ - l.op_ts;
    l.ext = ++ext_, l.corr = ++corr_;
    return l;
  }
  void emit_launch(const Launch& l, const char* op, const char* name, i64 cbid, i64 tid) {
    Out& o = *out_;
    if (l.op_dur)
      emit(o, cx_.cpu_op, op, pid_, tid, Ts{l.op_ts}, Us{l.op_dur}, l.ext, l.ext, l.ext);
    emit(o, cx_.runtime, name, pid_, tid, Ts{l.ts}, Us{l.dur}, l.ext, cbid, l.corr);
    emit(o, cx_.flow_s, l.corr, pid_, tid, Ts{l.ts});
  }

  void record(int name, int stream, i64 s, i64 e) {
    t.all[stream].add(s, e), t.kern[stream].add(s, e);
    ++t.kernels, ++t.count[name], t.total_ns[name] += e - s, t.kernel_ns += e - s;
  }

  i64 noisy(i64 base) {
    return std::max<i64>(1000, std::llround(double(base) * (0.97 + 0.06 * trng_.uni())));
  }

  void finish_on_compute(i64 start, i64 end) {
    Stream& s = st_[0];
    s.free = std::max(s.free, end), s.prev_start = start, s.prev_end = end;
    ring_[qi_++ & 1023] = end;
  }

  void compute(int spec, bool bwd, i64 not_before, bool tight) {
    const KSpec& k = kCompute[spec];
    last_base_ = srng_.range(k.lo_us * 1000, k.hi_us * 1000);
    i64 dur = noisy(last_base_);
    if (rank_ == o_.slow_rank) {
      const i64 d0 = dur;
      dur = std::llround(double(d0) * o_.slow_factor);
      t.slow_extra_ns += dur - d0;
    }
    if (o_.jitter_ns > 0) dur += trng_.range(0, o_.jitter_ns);
    // --pair: TEST's planted changes. Every random draw is made in both runs, so the other
    // kernels keep their durations exactly.
    if (o_.pair && o_.variant == 1 && spec == kPairSlow)
      dur = std::llround(double(dur) * o_.pair_factor);
    const Launch l = cpu_launch(false, 3000, 9000);
    const i64 start = std::max(place(l.ts + l.dur, dur, tight), not_before), end = start + dur;
    if (o_.pair && o_.variant == 1 && spec == kPairRemoved) return;  // drawn, never launched
    if (o_.pair && spec == kPairGroup && !bwd) return fused_group(l, start, dur, tid(bwd));
    finish_on_compute(start, end);
    record(spec, 0, start, end);
    keep(start, end, l.ts, 0, 0);
    if (out_) {
      emit_launch(l, k.op, "cudaLaunchKernel", 211, tid(bwd));
      emit(*out_, cx_.kernel, k.name, dev_, kStream[0], Ts{start}, Us{dur}, l.ext, dev_, kStream[0],
           l.corr, cx_.tails[spec]);
      emit(*out_, cx_.flow_f, l.corr, dev_, kStream[0], Ts{start});
    }
  }

  // --pair: the forward activation as a user range "mlp.act": BASE launches three eager
  // elementwise kernels in it (durations 1/2, 2/5 and 1/2 of the drawn one, back to back), TEST
  // the one Triton kernel fusing them (the drawn duration). Extra launches draw nothing.
  void fused_group(const Launch& first, i64 start, i64 dur, i64 th) {
    const bool fused = o_.variant == 1;
    const int specs[3] = {GRP_MUL, GRP_SIGMOID, GRP_ADD};
    const i64 durs[3] = {std::max<i64>(1000, dur / 2), std::max<i64>(1000, dur * 2 / 5),
                         std::max<i64>(1000, dur / 2)};
    const int n = fused ? 1 : 3;
    const i64 range_ts = first.op_ts, range_ext = ++ext_;
    i64 s0 = start;
    for (int i = 0; i < n; ++i) {
      Launch l = first;
      if (i > 0) {  // back-to-back launches on the same thread
        l = Launch{};
        l.ts = cpu_, l.dur = 4000, cpu_ += 5000, l.ext = ++ext_, l.corr = ++corr_;
      }
      const int spec = fused ? FUSED : specs[i];
      const i64 d = fused ? dur : durs[i], e = s0 + d;
      finish_on_compute(s0, e);
      record(spec, 0, s0, e);
      keep(s0, e, l.ts, 0, 0);
      if (out_) {
        emit_launch(l, kCompute[spec].op, "cudaLaunchKernel", 211, th);
        emit(*out_, cx_.kernel, kCompute[spec].name, dev_, kStream[0], Ts{s0}, Us{d}, l.ext, dev_,
             kStream[0], l.corr, cx_.tails[spec]);
        emit(*out_, cx_.flow_f, l.corr, dev_, kStream[0], Ts{s0});
      }
      s0 = e + 1000;
    }
    if (out_)
      emit(*out_, cx_.range, kPairRange, pid_, th, Ts{range_ts}, Us{cpu_ - range_ts}, range_ext,
           range_ext);
  }

  // kind 1 memcpy, 2 memset; gbps: the transfer rate (bytes per ns).
  void mem_op(int kind, const char* name, i64 bytes, i64 gbps, i64 tid) {
    const i64 dur = noisy(1500 + bytes / gbps);
    const Launch l = cpu_launch(false, 5000, 20000);
    const i64 start = place(l.ts + l.dur, dur), end = start + dur;
    finish_on_compute(start, end);
    t.all[0].add(start, end);
    keep(start, end, l.ts, 0, 2);
    ++(kind == 1 ? t.memcpy : t.memset);
    if (out_) {
      emit_launch(l, kind == 1 ? "aten::copy_" : "aten::zero_",
                  kind == 1 ? "cudaMemcpyAsync" : "cudaMemsetAsync", kind == 1 ? 41 : 51, tid);
      emit(*out_, cx_.mem, kind == 1 ? "gpu_memcpy" : "gpu_memset", name, dev_, kStream[0],
           Ts{start}, Us{dur}, l.ext, dev_, kStream[0], l.corr, bytes,
           Num{double(bytes) / double(dur)});
      emit(*out_, cx_.flow_f, l.corr, dev_, kStream[0], Ts{start});
    }
  }

  void host_sync(i64 tid) {  // cudaStreamSynchronize on the compute stream
    const i64 ts = cpu_;
    cpu_ = std::max(cpu_, st_[0].free) + trng_.range(2000, 6000);
    const i64 ext = ++ext_, corr = ++corr_;
    if (out_)
      emit(*out_, cx_.runtime, "cudaStreamSynchronize", pid_, tid, Ts{ts}, Us{cpu_ - ts}, ext, 131,
           corr);
  }

  i64 launch_collective(int c) {
    const CSpec& cs = kColl[c];
    const i64 n =
        srng_.range(1 << 16, 1 << 22) * (c == AR ? 4 : 1);  // elements per rank (AR: whole buffer)
    if (c == AR && o_.ranks_per_host > 0 && (seq_ + 1) % 3 == 0) c = AR_TREE;
    const i64 world = o_.ranks;
    pend_.c = c;
    pend_.in = c == RS ? n * world : n;
    pend_.out = c == AG ? n * world : n;
    const i64 wire = 2 * std::max(pend_.in, pend_.out) * (world - 1) / world *
                     (kColl[c].kind == 0 ? 2 : 1);  // bf16 bytes
    // ~40 GB/s bus bandwidth plus latency, and at least twice the kernel riding along (so that even
    // a late rank has finished that kernel when the collective ends: nothing carries over)
    pend_.xfer = std::max(6000 + wire / 40, 2 * last_base_);
    pend_.seq = ++seq_;
    const i64 th = tid(c != AG);
    const Launch l = cpu_launch(true, 6000, 14000);
    pend_.ext = l.ext, pend_.corr = l.corr, pend_.launch = l.ts;
    const i64 gate = gate_end_ >= 0 ? gate_end_ : st_[0].free;
    gate_end_ = -1;
    pend_.start = std::max(
        {l.ts + l.dur, st_[1].free + trng_.range(1000, 4000), gate + trng_.range(1000, 5000)});
    if (out_) emit_launch(l, cs.op, cs.launch, cs.cbid, th);
    return pend_.start;
  }

  const Ctx& cx_;
  const Options& o_;
  const int rank_;
  Out* out_;
  Rng srng_, trng_;  // structure (same on every rank), timing (per rank)
  const i64 pid_, tid_bwd_, dev_;
  i64 cpu_ = 0, t0_ = 0, ext_ = 0, corr_ = 0, seq_ = 0;
  int step_ = 0;
  bool in_step_ = false, done_ = false;
  i64 ks_ = 0, n_fwd_ = 0, n_bwd_ = 0, bucket_ = 20, bwd_colls_ = 0, idx_ = 0, step_start_ = 0,
      step_ext_ = 0;
  i64 wait_at_ = kNever, wait_t_ = 0, gate_end_ = -1, last_base_ = 0;
  const bool keep_;  // keep the GPU ops for the cross-rank truth
  Stream st_[2];
  std::array<i64, 1024> ring_{};
  uint64_t qi_ = 0;
  Pending pend_{};
};

std::string rank_file(const Options& o, int r) {
  return o.out + "/rank-" + std::to_string(r) + (o.gz ? ".json.gz" : ".json");
}

void write_stats(std::string& j, const StreamStats& s) {
  j += "\"ops\": " + std::to_string(s.ops) + ", \"gaps\": " + std::to_string(s.gaps) +
       ", \"gap_total_ns\": " + std::to_string(s.gap_ns) +
       ", \"overlaps\": " + std::to_string(s.overlaps) +
       ", \"touching\": " + std::to_string(s.touching) +
       ", \"busy_ns\": " + std::to_string(s.busy_ns) +
       ", \"span_ns\": " + std::to_string(s.last_end - s.first) +
       ", \"first_start_ns\": " + std::to_string(s.first) +
       ", \"last_end_ns\": " + std::to_string(s.last_end);
}

// ---- the cross-rank truth, computed exactly (int64 ns, true times) from the GPU ops generated
// ----
using Ivs = std::vector<std::pair<i64, i64>>;

Ivs unite(Ivs v) {  // the union of intervals, as disjoint sorted intervals
  std::sort(v.begin(), v.end());
  Ivs u;
  for (const auto& [a, b] : v) {
    if (!u.empty() && a <= u.back().second)
      u.back().second = std::max(u.back().second, b);
    else
      u.emplace_back(a, b);
  }
  return u;
}
i64 length(const Ivs& u) {
  i64 n = 0;
  for (const auto& [a, b] : u) n += b - a;
  return n;
}
i64 meet(const Ivs& x, const Ivs& y) {  // |x ∩ y| of two unions
  i64 n = 0;
  for (size_t i = 0, k = 0; i < x.size() && k < y.size();) {
    n += std::max<i64>(0, std::min(x[i].second, y[k].second) - std::max(x[i].first, y[k].first));
    if (x[i].second < y[k].second)
      ++i;
    else
      ++k;
  }
  return n;
}

// Overlap and time breakdown of a set of GPU ops (a rank's run or one ProfilerStep of it).
struct Cover {
  i64 ops = 0, first = 0, last = 0, span = 0, busy = 0, idle = 0, compute = 0, comm = 0,
      overlap = 0, exposed = 0, non_compute = 0, comm_excl = 0, mem_excl = 0, other = 0;
};
Cover cover(const std::vector<const GpuOp*>& ops) {
  Cover c;
  if (ops.empty()) return c;
  Ivs comp, comm, mem, all;
  c.ops = i64(ops.size()), c.first = ops[0]->start, c.last = ops[0]->end;
  for (const GpuOp* g : ops) {
    (g->kind == 0 ? comp : g->kind == 1 ? comm : mem).emplace_back(g->start, g->end);
    all.emplace_back(g->start, g->end);
    c.first = std::min(c.first, g->start), c.last = std::max(c.last, g->end);
  }
  const Ivs C = unite(comp), K = unite(comm), M = unite(mem), A = unite(all);
  Ivs ck = C;
  ck.insert(ck.end(), K.begin(), K.end());
  c.span = c.last - c.first, c.busy = length(A), c.idle = c.span - c.busy, c.compute = length(C);
  c.comm = length(K), c.overlap = meet(K, C), c.exposed = c.comm - c.overlap;
  c.non_compute = c.span - c.compute - c.idle;
  c.comm_excl = c.exposed, c.mem_excl = length(M) - meet(M, unite(std::move(ck)));
  c.other = c.non_compute - c.comm_excl - c.mem_excl;
  return c;
}

// Idle time on one stream: its ops in start order, gap = start - the previous op's end.
struct Idle {
  i64 ops = 0, host_n = 0, host_ns = 0, kwait_n = 0, kwait_ns = 0, other_n = 0, other_ns = 0,
      touching = 0, overlap_n = 0, overlap_ns = 0;
};
constexpr i64 kKernelWaitNs = 30000;  // the default --kernel-wait-us 30
Idle idle(std::vector<const GpuOp*> ops) {
  std::stable_sort(ops.begin(), ops.end(), [](const GpuOp* a, const GpuOp* b) {
    return a->start != b->start ? a->start < b->start : a->end < b->end;
  });
  Idle d;
  d.ops = i64(ops.size());
  for (size_t i = 1; i < ops.size(); ++i) {
    const i64 prev_end = ops[i - 1]->end, g = ops[i]->start - prev_end;
    if (ops[i]->end < prev_end)
      throw std::logic_error("an op ends before the one started before it");
    if (g < 0)
      ++d.overlap_n, d.overlap_ns -= g;
    else if (g == 0)
      ++d.touching;
    else if (ops[i]->launch > prev_end)
      ++d.host_n, d.host_ns += g;
    else if (g < kKernelWaitNs)
      ++d.kwait_n, d.kwait_ns += g;
    else
      ++d.other_n, d.other_ns += g;
  }
  return d;
}

std::string num(i64 v) { return std::to_string(v); }
std::string num(double v) {
  char b[64];
  return std::string(b, std::to_chars(b, b + sizeof b, v).ptr);
}
std::string pct(i64 part, i64 whole) {
  return whole > 0 ? num(100.0 * double(part) / double(whole)) : "null";
}

std::string overlap_json(const Cover& c) {
  return "{\"comm_ns\": " + num(c.comm) + ", \"compute_ns\": " + num(c.compute) +
         ", \"overlap_ns\": " + num(c.overlap) + ", \"exposed_comm_ns\": " + num(c.exposed) +
         ", \"overlap_pct\": " + pct(c.overlap, c.comm) + "}";
}
std::string breakdown_json(const Cover& c) {
  return "{\"gpu_ops\": " + num(c.ops) + ", \"first_start_ns\": " + num(c.first) +
         ", \"last_end_ns\": " + num(c.last) + ", \"span_ns\": " + num(c.span) +
         ", \"busy_ns\": " + num(c.busy) + ", \"idle_ns\": " + num(c.idle) +
         ", \"compute_ns\": " + num(c.compute) + ", \"non_compute_ns\": " + num(c.non_compute) +
         ", \"comm_ns_excl\": " + num(c.comm_excl) + ", \"memory_ns_excl\": " + num(c.mem_excl) +
         ", \"other_ns\": " + num(c.other) + "}";
}
std::string idle_json(const Idle& d) {
  return "{\"ops\": " + num(d.ops) + ", \"host_wait_ns\": " + num(d.host_ns) +
         ", \"host_wait_gaps\": " + num(d.host_n) + ", \"kernel_wait_ns\": " + num(d.kwait_ns) +
         ", \"kernel_wait_gaps\": " + num(d.kwait_n) + ", \"other_ns\": " + num(d.other_ns) +
         ", \"other_gaps\": " + num(d.other_n) + ", \"touching\": " + num(d.touching) +
         ", \"overlap_count\": " + num(d.overlap_n) + ", \"overlap_ns\": " + num(d.overlap_ns) +
         "}";
}

// The collectives, matched across ranks by Seq (the k-th NCCL kernel of every rank).
struct Coll {
  i64 seq;
  int coll, last, tied;
  std::vector<i64> start, end, wait;
  i64 skew, inflicted;
};
std::vector<Coll> collectives(const std::vector<Truth>& tr) {
  const size_t R = tr.size();
  std::vector<std::vector<const GpuOp*>> nc(R);
  for (size_t r = 0; r < R; ++r)
    for (const GpuOp& g : tr[r].ops)
      if (g.kind == 1) nc[r].push_back(&g);
  std::vector<Coll> out;
  for (size_t k = 0; k < nc[0].size(); ++k) {
    Coll c{nc[0][k]->seq, nc[0][k]->coll, 0, 0, {}, {}, {}, 0, 0};
    for (size_t r = 0; r < R; ++r) {
      if (nc[r].size() != nc[0].size() || nc[r][k]->seq != c.seq || nc[r][k]->coll != c.coll)
        throw std::logic_error("ranks disagree on the collective sequence");
      c.start.push_back(nc[r][k]->start), c.end.push_back(nc[r][k]->end);
    }
    const i64 hi = *std::max_element(c.start.begin(), c.start.end());
    const i64 lo = *std::min_element(c.start.begin(), c.start.end());
    c.last = int(std::max_element(c.start.begin(), c.start.end()) -
                 c.start.begin());  // lowest rank on ties
    c.tied = int(std::count(c.start.begin(), c.start.end(), hi));
    c.skew = hi - lo;
    for (size_t r = 0; r < R; ++r) {
      c.wait.push_back(std::clamp(hi - c.start[r], i64(0), c.end[r] - c.start[r]));
      c.inflicted += c.wait.back();
    }
    out.push_back(std::move(c));
  }
  return out;
}

std::string list(const std::vector<i64>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + num(v[i]);
  return s + "]";
}

void write_cross_rank(std::string& j, const Options& o, const std::vector<Truth>& tr) {
  const size_t R = tr.size();
  j += "  \"definitions\": {\n"
       "    \"times\": \"int64 ns of true time relative to baseTimeNanoseconds: a rank's "
       "--clock-skew-us shifts what "
       "its trace shows, never this file\",\n"
       "    \"gpu_ops\": \"kernels, gpu_memcpy and gpu_memset on every stream; compute = kernels "
       "that are not NCCL; "
       "comm = NCCL kernels; memory = memcpy and memset\",\n"
       "    \"overlap\": \"comm_ns = |∪comm|, overlap_ns = |∪comm ∩ ∪compute|, exposed_comm_ns = "
       "|∪comm \\\\ "
       "∪compute|, overlap_pct = 100 overlap_ns / comm_ns (null without comm)\",\n"
       "    \"breakdown\": \"span_ns = last end - first start over the gpu ops, idle_ns = span - "
       "|∪all|, compute_ns = "
       "|∪compute|, non_compute_ns = span - compute - idle = comm_ns_excl + memory_ns_excl + "
       "other_ns, comm_ns_excl "
       "= |∪comm \\\\ ∪compute|, memory_ns_excl = |∪memory \\\\ ∪compute \\\\ ∪comm|\",\n"
       "    \"steps\": \"ProfilerStep#N (N from 1): the gpu ops whose launch (runtime call ts) "
       "lies in the step's CPU "
       "window [ts, ts + dur)\",\n"
       "    \"idle\": \"per stream, ops in (start, end) order, gap = start - end of the op just "
       "before (the same as "
       "the latest end so far: no op ends before the one started before it); gap > 0: host_wait if "
       "the op's launch ts > that end, else kernel_wait if gap < "
       "kernel_wait_threshold_ns, else other; gap < 0: overlap_count/overlap_ns; gap == 0: "
       "touching\",\n"
       "    \"collectives\": \"the k-th NCCL kernel of every rank (same Seq); last_rank = the rank "
       "with the latest "
       "start (lowest such rank when tied_last > 1), skew_ns = max start - min start, wait_ns[r] = "
       "clamp(last start - "
       "start[r], 0, end[r] - start[r]), inflicted_ns = sum of wait_ns\",\n"
       "    \"stragglers\": \"per rank: times_last = collectives where it is last_rank, "
       "inflicted_ns = sum of "
       "inflicted_ns over those, suffered_ns = sum of its own wait_ns, mean_start_after_first_ns = "
       "mean over "
       "collectives of start - min start\"\n  },\n";
  j += "  \"kernel_wait_threshold_ns\": " + num(kKernelWaitNs) + ",\n";
  // What the generator planted, and the straggler and cause it should produce.
  const bool slow = o.slow_rank >= 0 && o.slow_rank < o.ranks && o.slow_factor > 1.0;
  const bool late = o.delay_rank >= 0 && o.delay_rank < o.ranks && o.delay_ns > 0;
  std::string skews = "{";
  for (size_t r = 0; r < R; ++r)
    if (o.skew_of(int(r)))
      skews += std::string(skews.size() > 1 ? ", " : "") + "\"" + num(i64(r)) +
               "\": " + num(o.skew_of(int(r)));
  skews += "}";
  j +=
      "  \"planted\": {\"slow_rank\": " + num(i64(o.slow_rank)) +
      ", \"slow_factor\": " + num(o.slow_factor) +
      ", \"launch_delay_rank\": " + num(i64(o.delay_rank)) +
      ", \"launch_delay_ns\": " + num(o.delay_ns) + ", \"jitter_ns\": " + num(o.jitter_ns) +
      ", \"clock_skew_ns\": " + skews + ", \"ranks_per_host\": " + num(i64(o.ranks_per_host)) +
      ", \"straggler\": " +
      num(i64(slow && !late   ? o.slow_rank
              : late && !slow ? o.delay_rank
                              : -1)) +
      ", \"cause\": " +
      (slow && !late   ? "\"kernels\""
       : late && !slow ? "\"host_delay\""
       : slow && late  ? "\"mixed\""
                       : "null") +
      ", \"note\": \"slow: every compute kernel of slow_rank lasts slow_factor times longer; "
      "launch delay: before "
      "the gate kernel of each collective (the compute kernel whose end the collective waits for), "
      "launch_delay_rank syncs its compute stream and then spends launch_delay_ns on the host "
      "(cpu_op kernalyse::injected_launch_delay), so that stream idles (host wait) and the rank "
      "arrives late; "
      "every collective's result is used by the next compute kernel, so ranks realign after each "
      "one\"},\n";

  const std::vector<Coll> cs = collectives(tr);
  std::vector<i64> times_last(R), inflicted(R), suffered(R), after_first(R);
  for (const Coll& c : cs) {
    ++times_last[size_t(c.last)], inflicted[size_t(c.last)] += c.inflicted;
    const i64 lo = *std::min_element(c.start.begin(), c.start.end());
    for (size_t r = 0; r < R; ++r) suffered[r] += c.wait[r], after_first[r] += c.start[r] - lo;
  }
  j += "  \"collectives\": [";
  for (size_t k = 0; k < cs.size(); ++k) {
    const Coll& c = cs[k];
    j += std::string(k ? ",\n" : "\n") + "    {\"index\": " + num(i64(k)) +
         ", \"seq\": " + num(c.seq) + ", \"op\": \"" + kColl[c.coll].coll +
         "\", \"last_rank\": " + num(i64(c.last)) + ", \"tied_last\": " + num(i64(c.tied)) +
         ", \"skew_ns\": " + num(c.skew) + ", \"inflicted_ns\": " + num(c.inflicted) +
         ", \"start_ns\": " + list(c.start) + ", \"end_ns\": " + list(c.end) +
         ", \"wait_ns\": " + list(c.wait) + "}";
  }
  j += "\n  ],\n  \"stragglers\": [";
  for (size_t r = 0; r < R; ++r)
    j += std::string(r ? ",\n" : "\n") + "    {\"rank\": " + num(i64(r)) +
         ", \"times_last\": " + num(times_last[r]) + ", \"inflicted_ns\": " + num(inflicted[r]) +
         ", \"suffered_ns\": " + num(suffered[r]) + ", \"mean_start_after_first_ns\": " +
         num(cs.empty() ? 0.0 : double(after_first[r]) / double(cs.size())) + "}";
  j += "\n  ],\n";
}

// A rank's cross-rank truth fields (overlap, breakdown, idle, steps, planted), after its "streams".
void write_rank_cross(std::string& j, const Options& o, const Truth& t, int rank) {
  std::vector<const GpuOp*> all, st[2];
  for (const GpuOp& g : t.ops) all.push_back(&g), st[g.stream].push_back(&g);
  const Cover c = cover(all);
  j += ",\n     \"overlap\": " + overlap_json(c) + ",\n     \"breakdown\": " + breakdown_json(c) +
       ",\n     \"idle\": {";
  for (int s = 0; s < 2; ++s)
    j += std::string(s ? ", " : "") + "\"" + num(kStream[s]) + "\": " + idle_json(idle(st[s]));
  j += "},\n     \"steps\": [";
  for (size_t s = 0; s < t.step_windows.size(); ++s) {
    std::vector<const GpuOp*> in;
    for (const GpuOp* g : all)
      if (g->step == int(s) + 1) {
        if (g->launch < t.step_windows[s].first || g->launch >= t.step_windows[s].second)
          throw std::logic_error("a launch lies outside its ProfilerStep");
        in.push_back(g);
      }
    const Cover sc = cover(in);
    j += std::string(s ? ",\n" : "\n") + "       {\"step\": " + num(i64(s) + 1) +
         ", \"cpu_start_ns\": " + num(t.step_windows[s].first) +
         ", \"cpu_end_ns\": " + num(t.step_windows[s].second) +
         ", \"overlap\": " + overlap_json(sc) + ", \"breakdown\": " + breakdown_json(sc) + "}";
  }
  j += "],\n     \"planted\": {\"slow_factor\": " + num(rank == o.slow_rank ? o.slow_factor : 1.0) +
       ", \"slow_extra_kernel_ns\": " + num(t.slow_extra_ns) +
       ", \"launch_delays\": " + num(t.delays) + ", \"launch_delay_ns\": " + num(t.delay_ns) +
       ", \"clock_skew_ns\": " + num(o.skew_of(rank)) + ", \"host\": " + num(i64(o.host_of(rank))) +
       ", \"clock_drift\": " + num(o.drift_of(rank)) + "}";
}

void write_truth(const Options& o, const std::vector<Truth>& tr) {
  std::string j = "{\n  \"generator\": \"kernalyse-tracegen\",\n  \"synthetic\": true,\n";
  char p[512];
  std::snprintf(p, sizeof p,
                "  \"params\": {\"ranks\": %d, \"kernels\": %lld, \"steps\": %d, \"seed\": %llu, "
                "\"slow_rank\": %d, "
                "\"slow_factor\": %g, \"launch_delay_rank\": %d, \"launch_delay_ns\": %lld, "
                "\"jitter_ns\": %lld, ",
                o.ranks, (long long)o.kernels, o.steps, (unsigned long long)o.seed, o.slow_rank,
                o.slow_factor, o.delay_rank, (long long)o.delay_ns, (long long)o.jitter_ns);
  j += p;
  std::string skews;
  for (const auto& [r, ns] : o.clock_skew)
    skews += (skews.empty() ? "" : ",") + std::to_string(r) + ":" + num(double(ns) / 1000);
  j += "\"clock_skew_us\": \"" + skews + "\"},\n";
  j += "  \"time_unit\": \"ns, relative to baseTimeNanoseconds\",\n";
  j += "  \"gap_definition\": \"per stream, ops in start order: gap = start - latest end so far; "
       "gaps/gap_total_ns: "
       "gap > 0; touching: gap == 0; overlaps: gap < 0\",\n";
  write_cross_rank(j, o, tr);
  j += "  \"ranks\": [";
  for (size_t r = 0; r < tr.size(); ++r) {
    const Truth& t = tr[r];
    j += r ? ",\n" : "\n";
    j += "    {\"rank\": " + std::to_string(r) + ", \"file\": \"" +
         rank_file(o, int(r)).substr(o.out.size() + 1) +
         "\", \"bytes\": " + std::to_string(t.bytes) + ", \"events\": " + std::to_string(t.events) +
         ", \"kernels\": " + std::to_string(t.kernels) +
         ", \"memcpy\": " + std::to_string(t.memcpy) + ", \"memset\": " + std::to_string(t.memset) +
         ", \"nccl_kernels\": " + std::to_string(t.nccl) +
         ", \"profiler_steps\": " + std::to_string(t.steps) +
         ", \"first_step\": 1, \"kernel_total_ns\": " + std::to_string(t.kernel_ns) +
         ",\n     \"kernel_names\": {";
    bool first = true;
    for (int n = 0; n < kNames; ++n) {
      if (!t.count[n]) continue;
      j += first ? "\n" : ",\n";
      first = false;
      j += std::string("       \"") +
           (n < N_COMPUTE ? kCompute[n].name : kColl[n - N_COMPUTE].name) +
           "\": {\"count\": " + std::to_string(t.count[n]) +
           ", \"total_ns\": " + std::to_string(t.total_ns[n]) +
           ", \"nccl\": " + (n < N_COMPUTE ? "false" : "true") + "}";
    }
    j += "},\n     \"streams\": {";
    for (int s = 0; s < 2; ++s) {
      j += std::string(s ? "," : "") + "\n       \"" + std::to_string(kStream[s]) + "\": {";
      write_stats(j, t.all[s]);
      j += ", \"kernels_only\": {";
      write_stats(j, t.kern[s]);
      j += "}}";
    }
    j += "}";
    write_rank_cross(j, o, t, int(r));
    j += "}";
  }
  j += "\n  ]\n}\n";
  FILE* f = std::fopen(o.truth.c_str(), "wb");
  if (!f || std::fwrite(j.data(), 1, j.size(), f) != j.size() || std::fclose(f) != 0)
    throw std::runtime_error("cannot write " + o.truth);
}

std::vector<Truth> run(const Options& o) {
  std::filesystem::create_directories(o.out);
  const Ctx cx(o);
  // Pass 1: all ranks in lockstep, no output: when can each collective start everywhere?
  std::vector<i64> t_all;
  std::vector<std::vector<i64>> starts(size_t(o.ranks));
  {
    std::vector<RankSim> sims;
    sims.reserve(size_t(o.ranks));
    for (int r = 0; r < o.ranks; ++r) sims.emplace_back(cx, r, nullptr);
    for (;;) {
      i64 tmax = -1;
      int done = 0;
      for (int r = 0; r < o.ranks; ++r) {
        const i64 s = sims[size_t(r)].advance();
        if (s < 0)
          ++done;
        else
          starts[size_t(r)].push_back(s), tmax = std::max(tmax, s);
      }
      if (done == o.ranks) break;
      if (done) throw std::logic_error("ranks disagree on the collective sequence");
      t_all.push_back(tmax);
      for (auto& s : sims) s.finish_collective(tmax);
    }
  }
  // Pass 2: each rank replays the same simulation and writes its file.
  std::vector<Truth> truth(size_t(o.ranks));
  std::vector<std::string> errors(size_t(o.ranks));
  std::atomic<int> next{0};
  auto worker = [&] {
    for (int r; (r = next++) < o.ranks;) {
      try {
        Out out(rank_file(o, r), o.gz, o.gz_level);
        RankSim sim(cx, r, &out);
        size_t c = 0;
        for (i64 s; (s = sim.advance()) >= 0; ++c) {
          if (c >= t_all.size() || s != starts[size_t(r)][c])
            throw std::logic_error("pass 2 diverged from pass 1");
          sim.finish_collective(t_all[c]);
        }
        out.close();
        sim.t.bytes = out.bytes, sim.t.events = out.events;
        truth[size_t(r)] = sim.t;
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    }
  };
  const int nt = std::max(
      1, std::min(o.ranks, o.threads > 0 ? o.threads : int(std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  for (int i = 0; i < nt; ++i) pool.emplace_back(worker);
  for (auto& th : pool) th.join();
  for (int r = 0; r < o.ranks; ++r)
    if (!errors[size_t(r)].empty())
      throw std::runtime_error(rank_file(o, r) + ": " + errors[size_t(r)]);
  if (!o.truth.empty()) write_truth(o, truth);
  return truth;
}

std::string json_str(const char* s) {  // kernel names hold no quotes or backslashes
  return std::string("\"") + s + "\"";
}

// --pair: OUT/base and OUT/test, and OUT/planted.json naming every planted difference and the
// exact per-name kernel totals of both runs (all ranks), for the diff's tests.
void run_pair(Options o) {
  const std::string root = o.out;
  o.pair_straggler[0] = 0, o.pair_straggler[1] = o.ranks - 1;
  std::vector<Truth> tr[2];
  for (int v = 0; v < 2; ++v) {
    o.variant = v;
    o.out = root + (v ? "/test" : "/base");
    tr[v] = run(o);
  }
  std::string j = "{\n  \"generator\": \"kernalyse-tracegen --pair\",\n  \"synthetic\": true,\n";
  j += "  \"ranks\": " + num(i64(o.ranks)) + ",\n";
  j += "  \"slowed\": {\"name\": " + json_str(kCompute[kPairSlow].name) +
       ", \"factor\": " + num(o.pair_factor) +
       ", \"rule\": \"every instance on every rank: test dur = llround(base dur * factor)\"},\n";
  j += "  \"removed\": {\"name\": " + json_str(kCompute[kPairRemoved].name) + "},\n";
  j += "  \"fused\": {\"range\": \"" + std::string(kPairRange) + "\", \"before\": [" +
       json_str(kCompute[GRP_MUL].name) + ", " + json_str(kCompute[GRP_SIGMOID].name) + ", " +
       json_str(kCompute[GRP_ADD].name) + "], \"after\": [" + json_str(kCompute[FUSED].name) +
       "]},\n";
  j += "  \"straggler\": {\"base\": " + num(i64(o.pair_straggler[0])) +
       ", \"test\": " + num(i64(o.pair_straggler[1])) +
       ", \"launch_delay_ns\": " + num(o.pair_delay_ns) + "},\n";
  j += "  \"note\": \"collective (NCCL) kernels last until the last rank arrives, so their times "
       "change with the "
       "straggler and the timeline: they are consequences, not planted; every other kernel keeps "
       "its exact "
       "durations\",\n";
  j += "  \"kernels\": {";
  bool first = true;
  for (int n = 0; n < kNames; ++n) {
    i64 c[2] = {0, 0}, tot[2] = {0, 0};
    for (int v = 0; v < 2; ++v)
      for (const Truth& t : tr[v]) c[v] += t.count[n], tot[v] += t.total_ns[n];
    if (!c[0] && !c[1]) continue;
    j += std::string(first ? "\n" : ",\n") + "    " +
         json_str(n < N_COMPUTE ? kCompute[n].name : kColl[n - N_COMPUTE].name) +
         ": {\"base\": {\"count\": " + num(c[0]) + ", \"total_ns\": " + num(tot[0]) +
         "}, \"test\": {\"count\": " + num(c[1]) + ", \"total_ns\": " + num(tot[1]) +
         "}, \"nccl\": " + (n < N_COMPUTE ? "false" : "true") + "}";
    first = false;
  }
  j += "\n  }\n}\n";
  const std::string path = root + "/planted.json";
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f || std::fwrite(j.data(), 1, j.size(), f) != j.size() || std::fclose(f) != 0)
    throw std::runtime_error("cannot write " + path);
}

// --format nsys / rocprof: the same planted workload (same seed, same simulation) written as JSON
// into a scratch directory, read back by kernalyse's Kineto importer (exact ns) and written as one
// Nsight Systems SQLite export (DIR/rank-<r>.sqlite) or rocprofv3 JSON file
// (DIR/rank-<r>.json[.gz]) per rank; the truth file is the same.
void run_converted(Options o) {
  namespace fs = std::filesystem;
  const std::string out = o.out;
  const bool gz = o.gz;
  fs::create_directories(out);
  o.out = (fs::path(out) / ".tracegen-json").string();
  o.gz = false;
  fs::remove_all(o.out);
  run(o);
  if (o.format == "nsys" && o.nsys.any()) {  // a multi-host set (nsys_set.h)
    std::vector<kernalyse::Store> stores(static_cast<size_t>(o.ranks));
    for (int r = 0; r < o.ranks; ++r)
      stores[static_cast<size_t>(r)] =
          kernalyse::import_kineto_file(rank_file(o, r), kernalyse::ImportOptions{}, nullptr);
    write_nsys_set(stores, o.ranks_per_host, o.nsys, out);
    fs::remove_all(o.out);
    return;
  }
  for (int r = 0; r < o.ranks; ++r) {
    kernalyse::ImportOptions io;
    kernalyse::Store s = kernalyse::import_kineto_file(rank_file(o, r), io, nullptr);
    const std::string stem = (fs::path(out) / ("rank-" + std::to_string(r))).string();
    if (o.format == "nsys") {
      fs::remove(stem + ".sqlite");
      write_nsys_rank(s, stem + ".sqlite");
    } else {
      write_rocprof_rank(s, stem + (gz ? ".json.gz" : ".json"), gz);
    }
  }
  fs::remove_all(o.out);
}

const char* kUsage =
    "usage: kernalyse-tracegen --ranks N --kernels K --steps S --out DIR [--gz] [--gz-level L] "
    "[--seed X]\n"
    "                          [--minify] [--truth FILE] [--slow-rank R --slow-factor F]\n"
    "                          [--launch-delay-rank R --launch-delay-us D] [--jitter-us J] "
    "[--threads T]\n"
    "                          [--clock-skew-us R:US[,R:US...]] [--format json|nsys|rocprof]\n"
    "                          [--pair [--pair-slow-factor F] [--pair-delay-us D]]\n"
    "       kernalyse-tracegen --nccl-ops --ranks N --steps S --out DIR [--format json|nsys] "
    "[--truth FILE]\n"
    "                          [--ranks-per-host K] [--no-op-ids] [--nccl-late-rank R] "
    "[--ce-collectives]\n"
    "       kernalyse-tracegen --shapes DIR [--iters N]\n"
    "                          [--ranks-per-host K [--host-skew-us H:US,...] [--host-drift-ppm "
    "H:PPM,...]]\n"
    "Writes DIR/rank-<r>.json[.gz]: synthetic PyTorch-profiler (Kineto) traces, exactly K kernel "
    "events per\n"
    "rank (NCCL kernels included), S ProfilerSteps. All data is marked synthetic (emulated "
    "device).\n"
    "--truth FILE: exact counts, gaps, overlap, time breakdown, idle split, every collective's "
    "arrivals and\n"
    "waits, and what the knobs planted. --clock-skew-us shifts all timestamps of rank R by US "
    "(unaligned\n"
    "clocks); the truth keeps true times. --ranks-per-host K puts rank r on host r/K, whose clock "
    "is off by\n"
    "--host-skew-us plus --host-drift-ppm times the time since the trace's base; every third "
    "all-reduce then\n"
    "runs as a tree in which one rank per host ends early.\n"
    "--format nsys writes DIR/rank-<r>.sqlite instead: the same workload as Nsight Systems SQLite "
    "exports;\n"
    "--format rocprof writes DIR/rank-<r>.json[.gz] as rocprofv3 JSON (memsets as fill-kernel "
    "dispatches).\n"
    "--format nsys with --nsys-names hostpid (report_<host>_<pid>.sqlite), --nsys-env "
    "all|none|R[:VAR],...\n"
    "(the launched process's launcher variable, default OMPI_COMM_WORLD_RANK), --nsys-payload "
    "all|none|R,...\n"
    "(ncclCommInitRank payloads), --nsys-marks none|all|cross-host (NCCL network marks between "
    "ring\n"
    "neighbours), --nsys-per-host (one report per host with its processes): a multi-host set "
    "whose rank\n"
    "evidence is only what these flags plant (hosts per --ranks-per-host; pids fall with the "
    "rank).\n"
    "--pair: writes DIR/base and DIR/test (for kernalyse-merge --diff) and DIR/planted.json. TEST "
    "differs\n"
    "from BASE by: one GEMM kernel F times slower (default 1.5), the softmax kernel removed, the "
    "forward\n"
    "activation's three eager kernels (user range mlp.act) fused into one Triton kernel, and the\n"
    "launch-delayed straggler (D us, default 300) moved from rank 0 to the last rank. Other "
    "kernels keep\n"
    "their exact durations; collective kernels absorb the changed waits.\n"
    "--nccl-ops: a job whose collectives carry NCCL's own ids (Kineto Comms Id/Seq, nsys "
    "NCCL_GPU_OPERATIONS),\n"
    "all-to-all(v) steps with planted uneven splits, send/receive pairs; --no-op-ids leaves the "
    "ids out,\n"
    "--nccl-late-rank R drops rank R's first all-reduce (order matching then pairs wrongly), "
    "--ce-collectives\n"
    "adds a copy-engine all-gather per step (a copy, no kernel).\n"
    "--shapes: writes DIR/hints.json and DIR/clean.json, one-rank traces with operator shapes, "
    "and\n"
    "DIR/planted.json: each op's FLOPs and roofline class, and the hints that must fire (none in "
    "clean.json).\n";

}  // namespace

int main(int argc, char** argv) {
  Options o;
  // --shapes DIR [--iters N]: the performance model's planted traces (shapes.cpp); no other flag.
  if (argc >= 3 && std::string_view(argv[1]) == "--shapes") {
    int iters = 3;
    if (argc == 5 && std::string_view(argv[3]) == "--iters") iters = std::atoi(argv[4]);
    if ((argc != 3 && argc != 5) || iters < 1 || iters > 1000) {
      std::fprintf(stderr, "kernalyse-tracegen: usage: --shapes DIR [--iters N (1-1000)]\n");
      return 2;
    }
    try {
      write_shapes(argv[2], iters);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "kernalyse-tracegen: error: %s\n", e.what());
      return 1;
    }
    std::fprintf(stderr,
                 "kernalyse-tracegen: --shapes -> %s (hints.json, clean.json, planted.json)\n",
                 argv[2]);
    return 0;
  }
  try {
    for (int i = 1; i < argc; ++i) {
      const std::string a = argv[i];
      auto val = [&]() -> std::string {
        if (i + 1 >= argc) throw std::invalid_argument(a + " needs a value");
        return argv[++i];
      };
      auto num = [&](double lo) {
        const std::string v = val();
        size_t pos = 0;
        double d = -1;
        try {
          d = std::stod(v, &pos);
        } catch (const std::exception&) {
        }
        if (pos != v.size() || !(d >= lo) || d > 1e15)
          throw std::invalid_argument("bad value for " + a + ": " + v);
        return d;
      };
      // I:X[,I:X...] with I >= 0 and |X| <= lim (X may be negative).
      auto pairs = [&](const std::string& opt, double lim) {
        const std::string v = val();
        std::vector<std::pair<int, double>> out;
        for (size_t p = 0; p <= v.size();) {
          const size_t e = std::min(v.find(',', p), v.size()), c = v.find(':', p);
          size_t n1 = 0, n2 = 0;
          int r = -1;
          double x = 0;
          try {
            if (c < e)
              r = std::stoi(v.substr(p, c - p), &n1),
              x = std::stod(v.substr(c + 1, e - c - 1), &n2);
          } catch (const std::exception&) {
            r = -1;
          }
          if (c >= e || r < 0 || n1 != c - p || n2 != e - c - 1 || !(std::fabs(x) <= lim))
            throw std::invalid_argument("bad value for " + opt + " (want I:X[,I:X...], |X| <= " +
                                        std::to_string(int(lim)) + "): " + v);
          out.emplace_back(r, x);
          p = e + 1;
        }
        return out;
      };
      if (a == "--help" || a == "-h")
        return std::fputs(kUsage, stdout), 0;
      else if (a == "--nccl-ops")
        o.nccl_ops = true;
      else if (a == "--no-op-ids")
        o.no_op_ids = true;
      else if (a == "--ce-collectives")
        o.ce = true;
      else if (a == "--nccl-late-rank")
        o.nccl_late_rank = int(num(0));
      else if (a == "--ranks")
        o.ranks = int(num(1));
      else if (a == "--kernels")
        o.kernels = i64(num(0));
      else if (a == "--steps")
        o.steps = int(num(1));
      else if (a == "--out")
        o.out = val();
      else if (a == "--gz")
        o.gz = true;
      else if (a == "--gz-level")
        o.gz_level = std::min(9, int(num(1)));
      else if (a == "--seed") {
        const std::string v = val();
        if (std::from_chars(v.data(), v.data() + v.size(), o.seed).ptr != v.data() + v.size() ||
            v.empty())
          throw std::invalid_argument("bad value for --seed: " + v);
      } else if (a == "--minify")
        o.minify = true;
      else if (a == "--format") {
        o.format = val();
        if (o.format != "json" && o.format != "nsys" && o.format != "rocprof")
          throw std::invalid_argument("--format is json, nsys or rocprof");
      } else if (a == "--truth")
        o.truth = val();
      else if (a == "--slow-rank")
        o.slow_rank = int(num(0));
      else if (a == "--slow-factor")
        o.slow_factor = num(0.01);
      else if (a == "--launch-delay-rank")
        o.delay_rank = int(num(0));
      else if (a == "--launch-delay-us")
        o.delay_ns = std::llround(num(0) * 1000);
      else if (a == "--jitter-us")
        o.jitter_ns = std::llround(num(0) * 1000);
      else if (a == "--threads")
        o.threads = int(num(1));
      else if (a == "--clock-skew-us") {  // R:US[,R:US...], US may be negative
        for (const auto& [r, us] : pairs(a, 900000))
          o.clock_skew.emplace_back(r, std::llround(us * 1000));
      } else if (a == "--pair")
        o.pair = true;
      else if (a == "--pair-slow-factor")
        o.pair_factor = num(0.01);
      else if (a == "--pair-delay-us")
        o.pair_delay_ns = std::llround(num(0) * 1000);
      else if (a == "--host-skew-us") {  // H:US[,H:US...]
        for (const auto& [h, us] : pairs(a, 900000))
          o.host_skew.emplace_back(h, std::llround(us * 1000));
      } else if (a == "--host-drift-ppm")
        o.host_drift_ppm = pairs(a, 1000);  // H:PPM[,H:PPM...]
      else if (a == "--ranks-per-host")
        o.ranks_per_host = int(num(1));
      else if (a.rfind("--nsys-", 0) == 0 &&
               parse_nsys_set_flag(a, nsys_set_flag_has_value(a) ? val() : "", &o.nsys))
        continue;
      else
        throw std::invalid_argument("unknown argument " + a);
    }
    if (o.out.empty()) throw std::invalid_argument("--out DIR is required");
    if (o.pair && o.ranks < 2)
      throw std::invalid_argument("--pair needs --ranks 2 or more (the straggler moves)");
    if (o.pair && !o.truth.empty())
      throw std::invalid_argument("--pair writes DIR/planted.json; give no --truth");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernalyse-tracegen: %s\n%s", e.what(), kUsage);
    return 2;
  }
  try {
    const auto t0 = std::chrono::steady_clock::now();
    if (o.pair && o.format != "json")
      throw std::runtime_error("--pair writes JSON only (no --format " + o.format + ")");
    if (o.nccl_ops)
      write_nccl_ops_job({o.ranks, o.steps, o.ranks_per_host, o.out, o.truth, o.format,
                          !o.no_op_ids, o.nccl_late_rank, o.ce});
    else if (o.pair)
      run_pair(o);
    else if (o.format != "json")
      run_converted(o);
    else
      run(o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (o.nccl_ops)
      std::fprintf(stderr,
                   "kernalyse-tracegen: %d rank(s) x %d steps (--nccl-ops) -> %s (%.2f s)\n",
                   o.ranks, o.steps, o.out.c_str(), s);
    else
      std::fprintf(stderr, "kernalyse-tracegen: %d rank(s) x %lld kernels -> %s (%.2f s)\n",
                   o.ranks, (long long)o.kernels, o.out.c_str(), s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernalyse-tracegen: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
