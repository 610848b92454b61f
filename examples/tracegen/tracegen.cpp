// kernalyse-tracegen: writes synthetic multi-rank PyTorch-profiler (Kineto) Chrome-trace JSON, one
// file per rank, for the demo, the tests and the benchmark. Every file carries the top-level marker
// "kernalyseSynthetic": true and names its device "kernalyse synthetic GPU (emulated)".
//
// Model. Every rank runs the same op program (same kernels, collectives and sizes, drawn from the
// seed alone) with its own timing (drawn from seed and rank). One CPU thread launches the ops;
// compute kernels, memcpys and memsets run on stream 7, NCCL kernels on stream 23. An NCCL kernel
// starts when its launch, the comm stream and the compute work before it are done, and ends only
// once every rank has reached it, so a late rank makes the others wait. Pass 1 simulates all ranks
// in lockstep to find when each collective can start everywhere; pass 2 replays each rank (one
// thread per rank) and writes it. Times are int64 ns; ts/dur are written as µs with exactly three
// decimals, relative to baseTimeNanoseconds.
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

namespace {

using i64 = int64_t;

struct Options {
  int ranks = 2;
  i64 kernels = 10000;  // exact number of "kernel" events per rank, NCCL kernels included
  int steps = 4;
  std::string out, truth;
  bool gz = false, minify = false;
  int gz_level = 1;
  uint64_t seed = 1;
  int slow_rank = -1;
  double slow_factor = 1.0;
  int delay_rank = -1;
  i64 delay_ns = 0, jitter_ns = 0;
  int threads = 0;
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

struct Us { i64 ns; };    // written as µs with 3 decimals, exact
struct Num { double v; };  // written in shortest round-trip form

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
  void put(i64 v) { n_ = size_t(std::to_chars(buf_.data() + n_, buf_.data() + buf_.size(), v).ptr - buf_.data()); }
  void put(Us u) {
    put(u.ns / 1000);
    const int f = int(u.ns % 1000);
    char* p = buf_.data() + n_;
    p[0] = '.', p[1] = char('0' + f / 100), p[2] = char('0' + f / 10 % 10), p[3] = char('0' + f % 10);
    n_ += 4;
  }
  void put(Num x) { n_ = size_t(std::to_chars(buf_.data() + n_, buf_.data() + buf_.size(), x.v).ptr - buf_.data()); }
  void flush() { write(buf_.data(), n_), n_ = 0; }
  void close() {
    flush();
    if (f_ && std::fclose(f_) != 0) f_ = nullptr, throw std::runtime_error("write failed (fclose)");
    if (gz_ && gzclose(gz_) != Z_OK) gz_ = nullptr, throw std::runtime_error("write failed (gzclose)");
    f_ = nullptr, gz_ = nullptr;
  }
  i64 bytes = 0, events = 0;

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
      if (c == '\\' && i + 1 < s.size()) r += s[++i];
      else if (c == '"') in = false;
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
    for (size_t b; (b = s.find('@', a)) != std::string::npos; a = b + 1) f.push_back(s.substr(a, b - a));
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
enum { FILL, GEMM_H, GEMM_H_NT, GEMM_A, CUTLASS, FLASH_F, FLASH_B, LN, LN_BWD, GELU, ADD, MUL, SOFTMAX, REDUCE,
       ADAM, EMBED, TRITON, N_COMPUTE };
const KSpec kCompute[N_COMPUTE] = {
    {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<float>, at::detail::Array<char*, 1>)",
     "aten::fill_", 2, 6, 1056, 1, 128, 16, 0},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
     "aten::mm", 80, 400, 132, 1, 384, 168, 213248},
    {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize256x128x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
     "aten::mm", 150, 600, 132, 1, 384, 168, 229888},
    {"ampere_bf16_s16816gemm_bf16_128x64_ldg8_f2f_stages_64x4_tn", "aten::addmm", 40, 200, 96, 8, 128, 254, 65536},
    {"void cutlass::Kernel2<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_nn_align8>(cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_64x4_nn_align8::Params)",
     "aten::addmm", 30, 120, 64, 16, 128, 230, 73728},
    {"void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(flash::Flash_fwd_params)",
     "flash_attn::_flash_attn_forward", 100, 300, 16, 64, 128, 255, 49152},
    {"void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits<128, 64, 128, 8, 2, 4, 2, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 64, 128, 8, cutlass::bfloat16_t> >, true, false, false, false, false, true, false, false>(flash::Flash_bwd_params)",
     "flash_attn::_flash_attn_backward", 200, 600, 32, 64, 256, 255, 147456},
    {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)",
     "aten::native_layer_norm", 8, 25, 8192, 1, 256, 30, 0},
    {"void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<c10::BFloat16, float>(c10::BFloat16 const*, c10::BFloat16 const*, float const*, float const*, c10::BFloat16 const*, c10::BFloat16*, int)",
     "aten::native_layer_norm_backward", 10, 30, 8192, 1, 128, 40, 1024},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)",
     "aten::gelu", 10, 40, 65536, 1, 128, 28, 0},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, at::detail::Array<char*, 3>)",
     "aten::add", 5, 20, 65536, 1, 128, 24, 0},
    {"void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3> >(int, at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, at::detail::Array<char*, 3>)",
     "aten::mul", 3, 10, 32768, 1, 128, 22, 0},
    {"void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)",
     "aten::_softmax", 20, 60, 8192, 1, 1024, 32, 256},
    {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, float, 4>)",
     "aten::sum", 5, 30, 264, 1, 512, 32, 16},
    {"void at::native::(anonymous namespace)::multi_tensor_apply_kernel<at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double, double, double, double, double, double, bool, double*, double*>(at::native::(anonymous namespace)::TensorListMetadata<4>, at::native::(anonymous namespace)::FusedAdamMathFunctor<float, 4, (at::native::ADAM_MODE)1, false>, double, double, double, double, double, double, bool, double*, double*)",
     "aten::_fused_adamw_", 100, 500, 320, 1, 512, 72, 0},
    {"void at::native::(anonymous namespace)::indexSelectLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>(at::cuda::detail::TensorInfo<c10::BFloat16, unsigned int>, at::cuda::detail::TensorInfo<c10::BFloat16 const, unsigned int>, at::cuda::detail::TensorInfo<long const, unsigned int>, int, int, unsigned int, unsigned int, long)",
     "aten::index_select", 10, 40, 4224, 1, 128, 26, 0},
    {"triton_poi_fused__to_copy_add_mul_native_layer_norm_0", "Torch-Compiled Region", 4, 15, 16384, 1, 256, 28, 0},
};
const int kFwd[] = {LN, GEMM_H, FLASH_F, GEMM_A, ADD, LN, CUTLASS, GELU, GEMM_H, ADD, TRITON, SOFTMAX};
const int kBwd[] = {MUL, GEMM_H_NT, GEMM_A, GELU, CUTLASS, LN_BWD, REDUCE, FLASH_B, GEMM_H_NT, GEMM_A, ADD, LN_BWD};
const int kOpt[] = {REDUCE, ADAM, FILL};

struct CSpec {
  const char* name;
  const char* coll;
  const char* op;
  const char* launch;
  int cbid, kind;  // kind: 0 all-reduce, 1 all-gather, 2 reduce-scatter
};
enum { AR, AG, RS, N_COLL };
const CSpec kColl[N_COLL] = {
    {"ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "allreduce", "c10d::allreduce_",
     "cudaLaunchKernelExC", 430, 0},
    {"ncclKernel_AllGather_RING_LL_Sum_int8_t(ncclWork*)", "_allgather_base", "c10d::_allgather_base_",
     "cudaLaunchKernel", 211, 1},
    {"ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "_reduce_scatter_base",
     "c10d::_reduce_scatter_base_", "cudaLaunchKernelExC", 430, 2},
};
constexpr int kNames = int(N_COMPUTE) + int(N_COLL);  // truth name index: compute specs, then collectives
constexpr i64 kStream[2] = {7, 23};         // compute, comm
constexpr int kSms = 132;

// Per-kernel args after "correlation" (launch configuration), fixed per name.
std::string kernel_tail(int gx, int gy, int bx, int regs, int smem) {
  const double bps = double(gx) * gy / kSms, wps = bps * ((bx + 31) / 32);
  char b[320];
  std::snprintf(b, sizeof b,
                "\"registers per thread\": %d, \"shared memory\": %d, \"blocks per SM\": %.6f, \"warps per SM\": "
                "%.6f, \"grid\": [%d, %d, 1], \"block\": [%d, 1, 1], \"est. achieved occupancy %%\": %d",
                regs, smem, bps, wps, gx, gy, bx, int(std::min(100.0, wps / 64 * 100)));
  return b;
}

struct Ctx {
  Options o;
  Tmpl head, foot, meta1, meta, span, step, cpu_op, runtime, flow_s, flow_f, kernel, nccl, mem;
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
  "traceEvents": [)J", m);
    foot = Tmpl("\n  ],\n  \"traceName\": \"rank-@.json\",\n  \"displayTimeUnit\": \"ms\",\n  \"baseTimeNanoseconds\": @\n}\n", m);
    const std::string mt = R"J({"name": "@", "ph": "M", "ts": @, "pid": @, "tid": @, "args": {"@": @}})J";
    meta1 = Tmpl("\n  " + mt, m);
    meta = Tmpl(",\n  " + mt, m);
    span = Tmpl(R"J(,
  {"ph": "X", "cat": "Trace", "ts": @, "dur": @, "pid": "Spans", "tid": "PyTorch Profiler", "name": "PyTorch Profiler (0)", "args": {"Op count": 0}})J", m);
    step = Tmpl(R"J(,
  {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#@", "pid": @, "tid": @, "ts": @, "dur": @, "args": {"External id": @, "Record function id": 0, "Ev Idx": @}})J", m);
    cpu_op = Tmpl(R"J(,
  {"ph": "X", "cat": "cpu_op", "name": "@", "pid": @, "tid": @, "ts": @, "dur": @, "args": {"External id": @, "Record function id": 0, "Sequence number": @, "Fwd thread id": 0, "Ev Idx": @}})J", m);
    runtime = Tmpl(R"J(,
  {"ph": "X", "cat": "cuda_runtime", "name": "@", "pid": @, "tid": @, "ts": @, "dur": @, "args": {"External id": @, "cbid": @, "correlation": @}})J", m);
    flow_s = Tmpl(R"J(,
  {"ph": "s", "id": @, "pid": @, "tid": @, "ts": @, "cat": "ac2g", "name": "ac2g"})J", m);
    flow_f = Tmpl(R"J(,
  {"ph": "f", "id": @, "pid": @, "tid": @, "ts": @, "cat": "ac2g", "name": "ac2g", "bp": "e"})J", m);
    const std::string k = R"J(,
  {"ph": "X", "cat": "kernel", "name": "@", "pid": @, "tid": @, "ts": @, "dur": @, "args": {"External id": @, "queued": 0, "device": @, "context": 1, "stream": @, "correlation": @, @)J";
    kernel = Tmpl(k + "}}", m);
    nccl = Tmpl(k + R"J(, "Collective name": "@", "In msg nelems": @, "Out msg nelems": @, "Group size": @, "dtype": "BFloat16", "In split size": "[]", "Out split size": "[]", "Process Group Name": "0", "Process Group Description": "default_pg", "Process Group Ranks": "@", "Seq": @}})J", m);
    mem = Tmpl(R"J(,
  {"ph": "X", "cat": "@", "name": "@", "pid": @, "tid": @, "ts": @, "dur": @, "args": {"External id": @, "device": @, "context": 1, "stream": @, "correlation": @, "bytes": @, "memory bandwidth (GB/s)": @}})J", m);
    for (const KSpec& s : kCompute) tails.push_back(kernel_tail(s.gx, s.gy, s.bx, s.regs, s.smem));
    for (int c = 0; c < N_COLL; ++c) tails.push_back(kernel_tail(c == AG ? 16 : 24, 1, c == AG ? 256 : 640, 96, 0));
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
  i64 ops = 0, gaps = 0, gap_ns = 0, overlaps = 0, touching = 0, busy_ns = 0, first = 0, last_end = 0;
  void add(i64 s, i64 e) {
    if (ops++ == 0) {
      first = s, last_end = e, busy_ns = e - s;
      return;
    }
    const i64 g = s - last_end;
    if (g > 0) ++gaps, gap_ns += g;
    else if (g == 0) ++touching;
    else ++overlaps;
    busy_ns += std::max<i64>(0, e - std::max(s, last_end));
    last_end = std::max(last_end, e);
  }
};

struct Truth {
  i64 kernels = 0, memcpy = 0, memset = 0, nccl = 0, steps = 0, kernel_ns = 0, bytes = 0, events = 0;
  i64 count[kNames] = {}, total_ns[kNames] = {};
  StreamStats all[2], kern[2];
};

struct Stream {
  i64 free = 0, prev_start = -1, prev_end = 0;
};

constexpr i64 kNever = std::numeric_limits<i64>::max();

// One rank's simulation. advance() runs until the next NCCL kernel is ready to start and returns that
// time (or -1 when the rank is done); finish_collective(t) completes it, every rank having arrived by t.
class RankSim {
 public:
  RankSim(const Ctx& cx, int rank, Out* out)
      : cx_(cx), o_(cx.o), rank_(rank), out_(out), srng_(o_.seed * 0x9e3779b97f4a7c15ULL + 0x5eed),
        trng_((o_.seed + 1) * 0xbf58476d1ce4e5b9ULL ^ uint64_t(rank + 1) * 0x94d049bb133111ebULL),
        pid_(40000 + 113 * rank), tid_bwd_(pid_ + 9), dev_(rank % 8) {
    cpu_ = kT0 + trng_.range(0, 50000);
    t0_ = cpu_;
    if (out_) {
      fill(*out_, cx_.head, dev_, rank_, o_.ranks, o_.ranks, cx_.ranks_json);
      emit(*out_, cx_.meta1, "process_name", Us{t0_}, pid_, 0, "name", "\"python3\"");
    }
  }

  i64 advance() {
    while (step_ < o_.steps) {
      if (!in_step_) begin_step();
      for (; idx_ < ks_; ++idx_) {
        i64 not_before = 0;
        int spec;
        bool bwd = false;
        if (idx_ < n_fwd_) {
          const i64 j = idx_;
          if (j % 48 == 24) return launch_collective(AG);
          spec = j == 0 ? EMBED : kFwd[(j - 1) % i64(std::size(kFwd))];
        } else if (idx_ < n_fwd_ + n_bwd_) {
          const i64 j = idx_ - n_fwd_;
          bwd = true;
          if (j == 0) mem_op(2, "Memset (Device)", srng_.range(1 << 16, 64 << 20), 1200, tid_bwd_);
          if (j % bucket_ == bucket_ - 1) return launch_collective(++bwd_colls_ % 4 == 0 ? RS : AR);
          spec = kBwd[j % i64(std::size(kBwd))];
        } else {
          const i64 j = idx_ - n_fwd_ - n_bwd_;
          if (j == 0) not_before = st_[1].free;  // the optimizer waits for all gradients
          spec = kOpt[j % i64(std::size(kOpt))];
        }
        if (idx_ >= wait_at_) not_before = std::max(not_before, wait_t_), wait_at_ = kNever;
        if (srng_.chance(0.01)) {
          if (srng_.chance(0.5)) mem_op(2, "Memset (Device)", srng_.range(1 << 12, 16 << 20), 1200, tid(bwd));
          else mem_op(1, "Memcpy DtoD (Device -> Device)", srng_.range(1 << 12, 16 << 20), 1000, tid(bwd));
        }
        compute(spec, bwd, not_before);
      }
      end_step();
    }
    if (!done_) finish_file();
    return -1;
  }

  void finish_collective(i64 t_all) {
    const Pending& p = pend_;
    const CSpec& c = kColl[p.c];
    const i64 end = t_all + p.xfer + trng_.range(0, 2000), dur = end - p.start;
    st_[1].free = std::max(st_[1].free, end);
    st_[1].prev_start = p.start, st_[1].prev_end = end;
    record(N_COMPUTE + p.c, 1, p.start, end);
    ++t.nccl;
    if (c.kind == 1) wait_at_ = idx_ + 3, wait_t_ = end;  // prefetched all-gather, used 3 kernels later
    if (out_) {
      Out& o = *out_;
      emit(o, cx_.nccl, c.name, dev_, kStream[1], Us{p.start}, Us{dur}, p.ext, dev_, kStream[1], p.corr,
           cx_.tails[N_COMPUTE + p.c], c.coll, p.in, p.out, o_.ranks, cx_.pg_ranks, p.seq);
      emit(o, cx_.flow_f, p.corr, dev_, kStream[1], Us{p.start});
    }
    ++idx_;
  }

  Truth t;

 private:
  static constexpr i64 kT0 = 1'000'000'000;  // first CPU time, ns after baseTimeNanoseconds
  static constexpr i64 kBase = 1'735'689'600'000'000'000;  // 2025-01-01T00:00:00Z

  struct Pending {
    int c;
    i64 in, out, xfer, start, ext, corr, seq;
  };

  i64 tid(bool bwd) const { return bwd ? tid_bwd_ : pid_; }

  void begin_step() {
    ks_ = o_.kernels / o_.steps + (step_ < o_.kernels % o_.steps ? 1 : 0);
    const i64 n_opt = std::min<i64>(ks_, 3), rest = ks_ - n_opt;
    n_fwd_ = rest * 2 / 5, n_bwd_ = rest - n_fwd_;
    bucket_ = srng_.range(20, 40), bwd_colls_ = 0, idx_ = 0, wait_at_ = kNever;
    step_start_ = cpu_, step_ext_ = ++ext_;
    if (ks_ > 0) mem_op(1, "Memcpy HtoD (Pinned -> Device)", srng_.range(1 << 20, 64 << 20), 20, pid_);
    in_step_ = true;
  }

  void end_step() {
    if (ks_ > 0) {  // loss.item(): a small copy back, then the host waits for the stream
      mem_op(1, "Memcpy DtoH (Device -> Pageable)", 4, 20, pid_);
      host_sync(pid_);
    }
    cpu_ += trng_.range(20000, 200000);
    ++t.steps;
    if (out_)
      emit(*out_, cx_.step, step_ + 1, pid_, pid_, Us{step_start_}, Us{cpu_ - step_start_}, step_ext_, step_ext_);
    ++step_, in_step_ = false;
  }

  void finish_file() {
    done_ = true;
    if (!out_) return;
    Out& o = *out_;
    const i64 dev = dev_;
    emit(o, cx_.meta, "process_labels", Us{t0_}, pid_, 0, "labels", "\"CPU\"");
    emit(o, cx_.meta, "process_name", Us{t0_}, dev, 0, "name", "\"python3\"");
    emit(o, cx_.meta, "process_labels", Us{t0_}, dev, 0, "labels", "\"GPU " + std::to_string(dev) + "\"");
    emit(o, cx_.meta, "process_sort_index", Us{t0_}, dev, 0, "sort_index", 16777216 + dev);
    emit(o, cx_.meta, "thread_name", Us{t0_}, pid_, pid_, "name", "\"thread " + std::to_string(pid_) + " (python)\"");
    emit(o, cx_.meta, "thread_name", Us{t0_}, pid_, tid_bwd_, "name",
         "\"thread " + std::to_string(tid_bwd_) + " (pt_autograd_0)\"");
    for (i64 s : kStream) {
      emit(o, cx_.meta, "thread_name", Us{t0_}, dev, s, "name", "\"stream " + std::to_string(s) + " \"");
      emit(o, cx_.meta, "thread_sort_index", Us{t0_}, dev, s, "sort_index", s);
    }
    emit(o, cx_.span, Us{t0_}, Us{cpu_ - t0_});
    fill(o, cx_.foot, rank_, kBase);
  }

  // The GPU start on the compute stream: the drawn gap after the latest end, not before ready.
  i64 place(i64 ready) {
    Stream& s = st_[0];
    const double u = trng_.uni();
    i64 start;
    if (u < 0.01 && s.prev_start >= 0) start = s.prev_start + std::max<i64>(1, i64(double(s.prev_end - s.prev_start) * (0.2 + 0.6 * trng_.uni())));
    else if (u < 0.03) start = s.free;
    else if (u < 0.58) start = s.free + trng_.range(500, 3000);
    else if (u < 0.86) start = s.free + trng_.range(3000, 30000);
    else if (u < 0.97) start = s.free + trng_.range(30000, 300000);
    else start = s.free + trng_.range(300000, 3000000);
    return std::max({start, ready, s.prev_start + 1});
  }

  // CPU side of one launch: optional enclosing cpu_op, the runtime call, launch-queue back-pressure.
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
    if (l.op_dur) emit(o, cx_.cpu_op, op, pid_, tid, Us{l.op_ts}, Us{l.op_dur}, l.ext, l.ext, l.ext);
    emit(o, cx_.runtime, name, pid_, tid, Us{l.ts}, Us{l.dur}, l.ext, cbid, l.corr);
    emit(o, cx_.flow_s, l.corr, pid_, tid, Us{l.ts});
  }

  void record(int name, int stream, i64 s, i64 e) {
    t.all[stream].add(s, e), t.kern[stream].add(s, e);
    ++t.kernels, ++t.count[name], t.total_ns[name] += e - s, t.kernel_ns += e - s;
  }

  i64 noisy(i64 base) { return std::max<i64>(1000, std::llround(double(base) * (0.97 + 0.06 * trng_.uni()))); }

  void finish_on_compute(i64 start, i64 end) {
    Stream& s = st_[0];
    s.free = std::max(s.free, end), s.prev_start = start, s.prev_end = end;
    ring_[qi_++ & 1023] = end;
  }

  void compute(int spec, bool bwd, i64 not_before) {
    const KSpec& k = kCompute[spec];
    i64 dur = noisy(srng_.range(k.lo_us * 1000, k.hi_us * 1000));
    if (rank_ == o_.slow_rank) dur = std::llround(double(dur) * o_.slow_factor);
    if (o_.jitter_ns > 0) dur += trng_.range(0, o_.jitter_ns);
    const Launch l = cpu_launch(false, 3000, 9000);
    const i64 start = std::max(place(l.ts + l.dur), not_before), end = start + dur;
    finish_on_compute(start, end);
    record(spec, 0, start, end);
    if (out_) {
      emit_launch(l, k.op, "cudaLaunchKernel", 211, tid(bwd));
      emit(*out_, cx_.kernel, k.name, dev_, kStream[0], Us{start}, Us{dur}, l.ext, dev_, kStream[0], l.corr, cx_.tails[spec]);
      emit(*out_, cx_.flow_f, l.corr, dev_, kStream[0], Us{start});
    }
  }

  // kind 1 memcpy, 2 memset; gbps: the transfer rate (bytes per ns).
  void mem_op(int kind, const char* name, i64 bytes, i64 gbps, i64 tid) {
    const i64 dur = noisy(1500 + bytes / gbps);
    const Launch l = cpu_launch(false, 5000, 20000);
    const i64 start = place(l.ts + l.dur), end = start + dur;
    finish_on_compute(start, end);
    t.all[0].add(start, end);
    ++(kind == 1 ? t.memcpy : t.memset);
    if (out_) {
      emit_launch(l, kind == 1 ? "aten::copy_" : "aten::zero_", kind == 1 ? "cudaMemcpyAsync" : "cudaMemsetAsync",
                  kind == 1 ? 41 : 51, tid);
      emit(*out_, cx_.mem, kind == 1 ? "gpu_memcpy" : "gpu_memset", name, dev_, kStream[0], Us{start}, Us{dur}, l.ext,
           dev_, kStream[0], l.corr, bytes, Num{double(bytes) / double(dur)});
      emit(*out_, cx_.flow_f, l.corr, dev_, kStream[0], Us{start});
    }
  }

  void host_sync(i64 tid) {  // cudaStreamSynchronize on the compute stream
    const i64 ts = cpu_;
    cpu_ = std::max(cpu_, st_[0].free) + trng_.range(2000, 6000);
    const i64 ext = ++ext_, corr = ++corr_;
    if (out_) emit(*out_, cx_.runtime, "cudaStreamSynchronize", pid_, tid, Us{ts}, Us{cpu_ - ts}, ext, 131, corr);
  }

  i64 launch_collective(int c) {
    const CSpec& cs = kColl[c];
    const i64 n = srng_.range(1 << 16, 1 << 22) * (c == AR ? 4 : 1);  // elements per rank (AR: whole buffer)
    const i64 world = o_.ranks;
    pend_.c = c;
    pend_.in = c == RS ? n * world : n;
    pend_.out = c == AG ? n * world : n;
    const i64 wire = 2 * std::max(pend_.in, pend_.out) * (world - 1) / world * (c == AR ? 2 : 1);  // bf16 bytes
    pend_.xfer = 6000 + wire / 40;  // ~40 GB/s bus bandwidth plus latency
    pend_.seq = ++seq_;
    const i64 th = tid(c != AG);
    if (rank_ == o_.delay_rank && o_.delay_ns > 0) {  // --launch-delay: host work after a sync, GPU idles
      host_sync(th);
      const i64 ts = cpu_, ext = ++ext_;
      cpu_ += o_.delay_ns;
      if (out_) emit(*out_, cx_.cpu_op, "kernalyse::injected_launch_delay", pid_, th, Us{ts}, Us{o_.delay_ns}, ext, ext, ext);
    }
    const Launch l = cpu_launch(true, 6000, 14000);
    pend_.ext = l.ext, pend_.corr = l.corr;
    pend_.start = std::max({l.ts + l.dur, st_[1].free + trng_.range(1000, 4000), st_[0].free + trng_.range(1000, 5000)});
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
  i64 ks_ = 0, n_fwd_ = 0, n_bwd_ = 0, bucket_ = 20, bwd_colls_ = 0, idx_ = 0, step_start_ = 0, step_ext_ = 0;
  i64 wait_at_ = kNever, wait_t_ = 0;
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
       ", \"gap_total_ns\": " + std::to_string(s.gap_ns) + ", \"overlaps\": " + std::to_string(s.overlaps) +
       ", \"touching\": " + std::to_string(s.touching) + ", \"busy_ns\": " + std::to_string(s.busy_ns) +
       ", \"span_ns\": " + std::to_string(s.last_end - s.first) + ", \"first_start_ns\": " + std::to_string(s.first) +
       ", \"last_end_ns\": " + std::to_string(s.last_end);
}

void write_truth(const Options& o, const std::vector<Truth>& tr) {
  std::string j = "{\n  \"generator\": \"kernalyse-tracegen\",\n  \"synthetic\": true,\n";
  char p[512];
  std::snprintf(p, sizeof p,
                "  \"params\": {\"ranks\": %d, \"kernels\": %lld, \"steps\": %d, \"seed\": %llu, \"slow_rank\": %d, "
                "\"slow_factor\": %g, \"launch_delay_rank\": %d, \"launch_delay_ns\": %lld, \"jitter_ns\": %lld},\n",
                o.ranks, (long long)o.kernels, o.steps, (unsigned long long)o.seed, o.slow_rank, o.slow_factor,
                o.delay_rank, (long long)o.delay_ns, (long long)o.jitter_ns);
  j += p;
  j += "  \"time_unit\": \"ns, relative to baseTimeNanoseconds\",\n";
  j += "  \"gap_definition\": \"per stream, ops in start order: gap = start - latest end so far; gaps/gap_total_ns: "
       "gap > 0; touching: gap == 0; overlaps: gap < 0\",\n  \"ranks\": [";
  for (size_t r = 0; r < tr.size(); ++r) {
    const Truth& t = tr[r];
    j += r ? ",\n" : "\n";
    j += "    {\"rank\": " + std::to_string(r) + ", \"file\": \"" + rank_file(o, int(r)).substr(o.out.size() + 1) +
         "\", \"bytes\": " + std::to_string(t.bytes) + ", \"events\": " + std::to_string(t.events) +
         ", \"kernels\": " + std::to_string(t.kernels) + ", \"memcpy\": " + std::to_string(t.memcpy) +
         ", \"memset\": " + std::to_string(t.memset) + ", \"nccl_kernels\": " + std::to_string(t.nccl) +
         ", \"profiler_steps\": " + std::to_string(t.steps) + ", \"first_step\": 1, \"kernel_total_ns\": " +
         std::to_string(t.kernel_ns) + ",\n     \"kernel_names\": {";
    bool first = true;
    for (int n = 0; n < kNames; ++n) {
      if (!t.count[n]) continue;
      j += first ? "\n" : ",\n";
      first = false;
      j += std::string("       \"") + (n < N_COMPUTE ? kCompute[n].name : kColl[n - N_COMPUTE].name) +
           "\": {\"count\": " + std::to_string(t.count[n]) + ", \"total_ns\": " + std::to_string(t.total_ns[n]) +
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
    j += "}}";
  }
  j += "\n  ]\n}\n";
  FILE* f = std::fopen(o.truth.c_str(), "wb");
  if (!f || std::fwrite(j.data(), 1, j.size(), f) != j.size() || std::fclose(f) != 0)
    throw std::runtime_error("cannot write " + o.truth);
}

void run(const Options& o) {
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
        if (s < 0) ++done;
        else starts[size_t(r)].push_back(s), tmax = std::max(tmax, s);
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
          if (c >= t_all.size() || s != starts[size_t(r)][c]) throw std::logic_error("pass 2 diverged from pass 1");
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
  const int nt = std::max(1, std::min(o.ranks, o.threads > 0 ? o.threads : int(std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  for (int i = 0; i < nt; ++i) pool.emplace_back(worker);
  for (auto& th : pool) th.join();
  for (int r = 0; r < o.ranks; ++r)
    if (!errors[size_t(r)].empty()) throw std::runtime_error(rank_file(o, r) + ": " + errors[size_t(r)]);
  if (!o.truth.empty()) write_truth(o, truth);
}

const char* kUsage =
    "usage: kernalyse-tracegen --ranks N --kernels K --steps S --out DIR [--gz] [--gz-level L] [--seed X]\n"
    "                          [--minify] [--truth FILE] [--slow-rank R --slow-factor F]\n"
    "                          [--launch-delay-rank R --launch-delay-us D] [--jitter-us J] [--threads T]\n"
    "Writes DIR/rank-<r>.json[.gz]: synthetic PyTorch-profiler (Kineto) traces, exactly K kernel events per\n"
    "rank (NCCL kernels included), S ProfilerSteps. All data is marked synthetic (emulated device).\n";

}  // namespace

int main(int argc, char** argv) {
  Options o;
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
        if (pos != v.size() || !(d >= lo) || d > 1e15) throw std::invalid_argument("bad value for " + a + ": " + v);
        return d;
      };
      if (a == "--help" || a == "-h") return std::fputs(kUsage, stdout), 0;
      else if (a == "--ranks") o.ranks = int(num(1));
      else if (a == "--kernels") o.kernels = i64(num(0));
      else if (a == "--steps") o.steps = int(num(1));
      else if (a == "--out") o.out = val();
      else if (a == "--gz") o.gz = true;
      else if (a == "--gz-level") o.gz_level = std::min(9, int(num(1)));
      else if (a == "--seed") {
        const std::string v = val();
        if (std::from_chars(v.data(), v.data() + v.size(), o.seed).ptr != v.data() + v.size() || v.empty())
          throw std::invalid_argument("bad value for --seed: " + v);
      }
      else if (a == "--minify") o.minify = true;
      else if (a == "--truth") o.truth = val();
      else if (a == "--slow-rank") o.slow_rank = int(num(0));
      else if (a == "--slow-factor") o.slow_factor = num(0.01);
      else if (a == "--launch-delay-rank") o.delay_rank = int(num(0));
      else if (a == "--launch-delay-us") o.delay_ns = std::llround(num(0) * 1000);
      else if (a == "--jitter-us") o.jitter_ns = std::llround(num(0) * 1000);
      else if (a == "--threads") o.threads = int(num(1));
      else throw std::invalid_argument("unknown argument " + a);
    }
    if (o.out.empty()) throw std::invalid_argument("--out DIR is required");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernalyse-tracegen: %s\n%s", e.what(), kUsage);
    return 2;
  }
  try {
    const auto t0 = std::chrono::steady_clock::now();
    run(o);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "kernalyse-tracegen: %d rank(s) x %lld kernels -> %s (%.2f s)\n", o.ranks,
                 (long long)o.kernels, o.out.c_str(), s);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "kernalyse-tracegen: error: %s\n", e.what());
    return 1;
  }
  return 0;
}
