// vicuna_tp_cuda: the real-GPU build of vicuna_tp. A Megatron-style tensor-parallel decoder
// (Vicuna/LLaMA-like shapes, bf16) on CUDA: cuBLAS (or an own tiled kernel) for the GEMMs, NCCL
// all-reduces between the ranks, a few small custom kernels, NVTX ranges.
//
// Per layer, on each of the T ranks (one GPU per rank, or several ranks sharing one GPU):
//   attn:  rmsnorm -> column-parallel GEMM [H, 3H/T] -> rope -> attention-lite (per local head)
//          -> row-parallel GEMM [H/T, H] -> all-reduce -> residual add
//   mlp:   rmsnorm -> column-parallel GEMM [H, 4H/T] -> GeLU -> row-parallel GEMM [4H/T, H]
//          -> all-reduce -> residual add
// Each decode step processes --batch tokens (one per sequence) through every layer, reduces the
// hidden state to a checksum and copies it to the host (the "next token"), then synchronises.
//
// Ground truth for validating a profiler (bench/gpu/validate.sh): every kernel the program
// launches itself goes through one counting wrapper (names are extern "C", so CUPTI reports them
// unmangled); cuBLAS calls and NCCL collectives are counted per call; with --event-timing, CUDA
// events around every GEMM and GeLU give an independent duration per launch, summed per name.
// --report-json FILE writes all of it (rank 0 gathers every rank's report). Times are int64 ns.
//
// No usable device (no driver, no GPU): one line on stderr and exit code 2.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>
#include <nvtx3/nvToolsExt.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace {

using bf16 = __nv_bfloat16;

int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

int g_rank = 0;

[[noreturn]] void die(const char* what, const char* detail) {
  std::fprintf(stderr, "vicuna_tp_cuda: rank %d: %s: %s\n", g_rank, what, detail);
  MPI_Abort(MPI_COMM_WORLD, 3);
  std::exit(3);
}

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) die(what, cudaGetErrorString(e));
}
void check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS) die(what, cublasGetStatusString(s));
}
void check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) die(what, ncclGetErrorString(r));
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Kernels. extern "C": CUPTI (and so the store) sees exactly these names.

extern "C" __global__ void vtp_init_weights(bf16* w, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    // A cheap integer hash: reproducible weights in (-scale, scale) without cuRAND.
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    w[i] = __float2bfloat16((float(h & 0xffff) / 32768.0f - 1.0f) * scale);
  }
}

// One block per token: y = x / rms(x) * 1 (no learned scale: it would not change the work).
extern "C" __global__ void vtp_rmsnorm(const bf16* x, bf16* y, int h) {
  __shared__ float part[32];
  const bf16* row = x + int64_t(blockIdx.x) * h;
  float s = 0.f;
  for (int i = threadIdx.x; i < h; i += blockDim.x) {
    float v = __bfloat162float(row[i]);
    s += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x < 32) {
    s = threadIdx.x < (blockDim.x >> 5) ? part[threadIdx.x] : 0.f;
    for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
    if (threadIdx.x == 0) part[0] = rsqrtf(s / float(h) + 1e-6f);
  }
  __syncthreads();
  const float inv = part[0];
  for (int i = threadIdx.x; i < h; i += blockDim.x)
    y[int64_t(blockIdx.x) * h + i] = __float2bfloat16(__bfloat162float(row[i]) * inv);
}

// Rotary embedding on the q and k thirds of qkv [m, 3*hl] (hl = local hidden), position = step.
extern "C" __global__ void vtp_rope(bf16* qkv, int m, int hl, int head_dim, int pos) {
  const int64_t pairs = int64_t(m) * 2 * (hl / 2);  // q and k, two elements per rotation
  for (int64_t p = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; p < pairs;
       p += int64_t(gridDim.x) * blockDim.x) {
    const int64_t tok = p / hl;
    const int j = int(p % hl);         // pair index within q||k
    const int part = j / (hl / 2);     // 0 = q, 1 = k
    const int e = (j % (hl / 2)) * 2;  // element in that third
    const int d = e % head_dim;
    const float theta = float(pos) * __powf(10000.f, -float(d) / float(head_dim));
    float c, s;
    __sincosf(theta, &s, &c);
    bf16* v = qkv + tok * 3 * hl + int64_t(part) * hl + e;
    const float a = __bfloat162float(v[0]), b = __bfloat162float(v[1]);
    v[0] = __float2bfloat16(a * c - b * s);
    v[1] = __float2bfloat16(a * s + b * c);
  }
}

// Attention-lite: one block per (token, local head); score = q.k / sqrt(d), out = v * sigmoid.
// Decode-sized stand-in for attention over a KV cache: same launch pattern, little work.
extern "C" __global__ void vtp_attn_lite(const bf16* qkv, bf16* out, int hl, int head_dim) {
  __shared__ float part[32];
  const int tok = blockIdx.x, head = blockIdx.y;
  const bf16* q = qkv + int64_t(tok) * 3 * hl + int64_t(head) * head_dim;
  const bf16* k = q + hl;
  const bf16* v = q + 2 * hl;
  float s = 0.f;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x)
    s += __bfloat162float(q[i]) * __bfloat162float(k[i]);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int w = 0; w < int(blockDim.x >> 5); ++w) t += part[w];
    part[0] = 1.f / (1.f + __expf(-t * rsqrtf(float(head_dim))));
  }
  __syncthreads();
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x)
    out[int64_t(tok) * hl + int64_t(head) * head_dim + i] =
        __float2bfloat16(__bfloat162float(v[i]) * part[0]);
}

// GeLU (tanh approximation), in place.
extern "C" __global__ void vtp_gelu(bf16* x, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float v = __bfloat162float(x[i]);
    x[i] = __float2bfloat16(0.5f * v * (1.f + tanhf(0.7978845608f * (v + 0.044715f * v * v * v))));
  }
}

extern "C" __global__ void vtp_residual_add(bf16* x, const bf16* y, int64_t n) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x)
    x[i] = __float2bfloat16(__bfloat162float(x[i]) + __bfloat162float(y[i]));
}

// Own GEMM (--gemm custom): C[m,n] = A[m,k] * B[k,n], row-major bf16, fp32 accumulation, 32x32
// shared-memory tiles. Slow next to cuBLAS, but one kernel per call with a name we know, so a
// profiler's kernel count can be checked exactly.
constexpr int kTile = 32;
extern "C" __global__ void vtp_gemm(const bf16* a, const bf16* b, bf16* c, int m, int n, int k) {
  __shared__ float as[kTile][kTile + 1];
  __shared__ float bs[kTile][kTile + 1];
  const int row = blockIdx.y * kTile + threadIdx.y;
  const int col = blockIdx.x * kTile + threadIdx.x;
  float acc = 0.f;
  for (int t = 0; t < k; t += kTile) {
    const int ac = t + threadIdx.x, br = t + threadIdx.y;
    as[threadIdx.y][threadIdx.x] =
        row < m && ac < k ? __bfloat162float(a[int64_t(row) * k + ac]) : 0.f;
    bs[threadIdx.y][threadIdx.x] =
        br < k && col < n ? __bfloat162float(b[int64_t(br) * n + col]) : 0.f;
    __syncthreads();
#pragma unroll 8
    for (int i = 0; i < kTile; ++i) acc += as[threadIdx.y][i] * bs[i][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) c[int64_t(row) * n + col] = __float2bfloat16(acc);
}

// The step's "token": a sum over the hidden state, copied to the host by the caller.
extern "C" __global__ void vtp_checksum(const bf16* x, int64_t n, float* out) {
  __shared__ float part[32];
  float s = 0.f;
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) s += __bfloat162float(x[i]);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_down_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0) part[threadIdx.x >> 5] = s;
  __syncthreads();
  if (threadIdx.x == 0) {
    float t = 0.f;
    for (int w = 0; w < int(blockDim.x >> 5); ++w) t += part[w];
    *out = t;
  }
}

// Busy-waits ns nanoseconds of GPU time (%globaltimer): the slow rank's extra work, and the
// gate that lets the host queue a whole step ahead under --event-timing.
extern "C" __global__ void vtp_spin(int64_t ns) {
  uint64_t t0, t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (int64_t(t - t0) < ns);
}

namespace {

// ---------------------------------------------------------------------------------------------
// Options

struct Options {
  int layers = 8;
  int hidden = 4096;
  int steps = 20;
  int warmup = 2;  // first steps, run and counted but not in the timed decode loop
  int batch = 8;   // tokens per decode step (one per sequence)
  int slow_rank = -1;
  double slow_us = 200.0;  // extra GPU work per layer on the slow rank
  bool custom_gemm = false;
  bool event_timing = false;
  bool share_gpu = true;    // several ranks on one GPU: give NCCL one host id per rank
  bool cuda_graph = false;  // capture the layers once, replay them as one graph per step
  std::string report;
  uint32_t seed = 1;
  int exit_code = 0;
};

const char* kUsage =
    "usage: vicuna_tp_cuda [options]   (under mpirun; every rank is one tensor-parallel GPU)\n"
    "  --layers N          decoder layers (default 8)\n"
    "  --hidden N          hidden size, a multiple of 128 x ranks (default 4096; heads of 128)\n"
    "  --steps N           decode steps (default 20), after --warmup N untimed ones (default 2)\n"
    "  --batch N           tokens per step, one per sequence (default 8)\n"
    "  --slow-rank R       rank that runs --slow-us of extra GPU work per layer\n"
    "  --slow-us U         (default 200)\n"
    "  --gemm cublas|custom  cuBLAS (default) or the own tiled kernel (exact kernel counts)\n"
    "  --event-timing      CUDA events around every GEMM and GeLU of the timed steps (adds a gate\n"
    "                      kernel per step)\n"
    "  --no-share-gpu      do not set per-rank NCCL_HOSTID when ranks share a GPU\n"
    "  --cuda-graph        capture the layers of the first step as a CUDA graph and replay it in\n"
    "                      every step (kernels run from cudaGraphLaunch; not with --event-timing)\n"
    "  --report-json FILE  ground truth for validation: launches, collectives, step times, events\n"
    "  --seed S            weight seed (default 1)\n"
    "  --exit-code N       exit with N after MPI_Finalize\n";

std::string parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], val;
    if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      val = a.substr(eq + 1);
      a = a.substr(0, eq);
    }
    auto take = [&]() -> bool {
      if (!val.empty()) return true;
      if (i + 1 >= argc) return false;
      val = argv[++i];
      return true;
    };
    auto as_int = [&](int& out) -> bool {
      if (!take()) return false;
      char* end = nullptr;
      long v = std::strtol(val.c_str(), &end, 10);
      if (end == val.c_str() || *end) return false;
      out = int(v);
      return true;
    };
    bool ok = true;
    if (a == "--help" || a == "-h")
      return "help";
    else if (a == "--layers")
      ok = as_int(o.layers) && o.layers >= 1;
    else if (a == "--hidden")
      ok = as_int(o.hidden) && o.hidden >= 128 && o.hidden % 128 == 0;
    else if (a == "--steps")
      ok = as_int(o.steps) && o.steps >= 1;
    else if (a == "--warmup")
      ok = as_int(o.warmup) && o.warmup >= 0;
    else if (a == "--batch")
      ok = as_int(o.batch) && o.batch >= 1;
    else if (a == "--slow-rank")
      ok = as_int(o.slow_rank);
    else if (a == "--slow-us") {
      ok = take();
      char* end = nullptr;
      if (ok) o.slow_us = std::strtod(val.c_str(), &end);
      ok = ok && end && !*end && o.slow_us >= 0;
    } else if (a == "--gemm") {
      ok = take() && (val == "cublas" || val == "custom");
      o.custom_gemm = ok && val == "custom";
    } else if (a == "--event-timing")
      o.event_timing = true;
    else if (a == "--no-share-gpu")
      o.share_gpu = false;
    else if (a == "--cuda-graph")
      o.cuda_graph = true;
    else if (a == "--report-json")
      ok = take() && !(o.report = val).empty();
    else if (a == "--seed") {
      int s = 0;
      ok = as_int(s);
      o.seed = uint32_t(s);
    } else if (a == "--exit-code")
      ok = as_int(o.exit_code);
    else
      return "unknown option '" + a + "'";
    if (!ok) return "bad or missing value for " + a;
  }
  if (o.cuda_graph && o.event_timing) return "--cuda-graph and --event-timing exclude each other";
  return "";
}

// ---------------------------------------------------------------------------------------------
// Ground truth

struct Truth {
  std::map<std::string, int64_t> launched;     // own kernels, by name
  std::map<std::string, int64_t> gemm_calls;   // by role (qkv, out, fc1, fc2)
  std::map<std::string, int64_t> collectives;  // NCCL calls, by collective
  int64_t nccl_bytes = 0;
  int64_t memcpy_d2h = 0;
  std::map<std::string, int64_t> event_ns, event_n;  // by kernel name (cublas: "cublas_gemm")
  std::map<std::string, int64_t> event_role_ns;      // by role (qkv, out, fc1, fc2, gelu)
  std::map<std::string, int64_t> nvtx_ranges;        // ranges pushed, by name
  std::vector<int64_t> step_ns;                      // every step, warm-up included
  // What the app put inside each "layer L" range over all steps: own kernels + GEMM calls +
  // collectives (the NVTX attribution check compares the profiler's per-layer counts to it).
  std::vector<int64_t> layer_own_kernels, layer_gemm_calls, layer_collectives;
};

Truth g_truth;
int g_layer = -1;  // the layer whose NVTX range is open, -1 outside

// Every own kernel launch goes through here: count it (also per layer), check the launch.
#define VTP_LAUNCH(kernel, grid, block, smem, stream, ...)          \
  do {                                                              \
    kernel<<<(grid), (block), (smem), (stream)>>>(__VA_ARGS__);     \
    check(cudaGetLastError(), "launch " #kernel);                   \
    ++g_truth.launched[#kernel];                                    \
    if (g_layer >= 0) ++g_truth.layer_own_kernels[size_t(g_layer)]; \
  } while (0)

struct NvtxRange {
  explicit NvtxRange(const std::string& name) {
    nvtxRangePushA(name.c_str());
    // Count by family: "layer 3" -> "layer", "ProfilerStep#7" -> "ProfilerStep#".
    std::string fam = name.rfind("layer ", 0) == 0          ? "layer"
                      : name.rfind("ProfilerStep#", 0) == 0 ? "ProfilerStep#"
                                                            : name;
    ++g_truth.nvtx_ranges[fam];
  }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

// Event pairs of one step; read after the step's synchronisation.
struct EventPool {
  std::vector<cudaEvent_t> ev;
  std::vector<std::pair<std::string, std::string>> what;  // (name key, role) per pair
  size_t used = 0;
  void begin(cudaStream_t s, const std::string& key, const std::string& role) {
    if (2 * used + 2 > ev.size()) {
      for (int i = 0; i < 64; ++i) {
        cudaEvent_t e;
        check(cudaEventCreate(&e), "cudaEventCreate");
        ev.push_back(e);
      }
    }
    if (what.size() <= used) what.resize(used + 1);
    what[used] = {key, role};
    check(cudaEventRecord(ev[2 * used], s), "cudaEventRecord");
  }
  void end(cudaStream_t s) {
    check(cudaEventRecord(ev[2 * used + 1], s), "cudaEventRecord");
    ++used;
  }
  void harvest() {
    for (size_t i = 0; i < used; ++i) {
      float ms = 0.f;
      check(cudaEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]), "cudaEventElapsedTime");
      const int64_t ns = int64_t(double(ms) * 1e6 + 0.5);
      g_truth.event_ns[what[i].first] += ns;
      ++g_truth.event_n[what[i].first];
      g_truth.event_role_ns[what[i].second] += ns;
    }
    used = 0;
  }
  ~EventPool() {
    for (cudaEvent_t e : ev) cudaEventDestroy(e);
  }
};

// ---------------------------------------------------------------------------------------------
// The model

struct Layer {
  bf16 *wqkv, *wo, *w1, *w2;  // [H, 3H/T], [H/T, H], [H, 4H/T], [4H/T, H], row-major
};

struct Model {
  const Options& o;
  int tp, rank;
  int h, hl, fl, m;  // hidden, local hidden (H/T), local ffn (4H/T), tokens per step
  int head_dim = 128;
  cudaStream_t stream{};
  cublasHandle_t blas{};
  ncclComm_t comm{};
  std::vector<Layer> layers;
  bf16 *x{}, *xn{}, *qkv{}, *attn{}, *part{}, *ffn{};
  float* d_sum{};
  float* h_sum{};  // pinned
  EventPool events;
  bool slow = false;

  Model(const Options& opt, int tp_size, int tp_rank)
      : o(opt),
        tp(tp_size),
        rank(tp_rank),
        h(opt.hidden),
        hl(opt.hidden / tp_size),
        fl(4 * opt.hidden / tp_size),
        m(opt.batch) {}

  bf16* alloc(int64_t elems) {
    void* p = nullptr;
    check(cudaMalloc(&p, size_t(elems) * sizeof(bf16)), "cudaMalloc");
    return static_cast<bf16*>(p);
  }

  void init_weights(bf16* w, int64_t n, int fan_in, uint32_t salt) {
    VTP_LAUNCH(vtp_init_weights, 1024, 256, 0, stream, w, n, o.seed * 7919u + salt,
               1.0f / std::sqrt(float(fan_in)));
  }

  void setup() {
    check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
    if (!o.custom_gemm) {
      check(cublasCreate(&blas), "cublasCreate");
      check(cublasSetStream(blas, stream), "cublasSetStream");
    }
    layers.resize(size_t(o.layers));
    uint32_t salt = uint32_t(rank) * 1000003u;
    for (Layer& l : layers) {
      l.wqkv = alloc(int64_t(h) * 3 * hl);
      l.wo = alloc(int64_t(hl) * h);
      l.w1 = alloc(int64_t(h) * fl);
      l.w2 = alloc(int64_t(fl) * h);
      init_weights(l.wqkv, int64_t(h) * 3 * hl, h, ++salt);
      init_weights(l.wo, int64_t(hl) * h, hl * tp, ++salt);
      init_weights(l.w1, int64_t(h) * fl, h, ++salt);
      init_weights(l.w2, int64_t(fl) * h, fl * tp, ++salt);
    }
    x = alloc(int64_t(m) * h);
    xn = alloc(int64_t(m) * h);
    qkv = alloc(int64_t(m) * 3 * hl);
    attn = alloc(int64_t(m) * hl);
    part = alloc(int64_t(m) * h);
    ffn = alloc(int64_t(m) * fl);
    check(cudaMalloc(reinterpret_cast<void**>(&d_sum), sizeof(float)), "cudaMalloc");
    check(cudaMallocHost(reinterpret_cast<void**>(&h_sum), sizeof(float)), "cudaMallocHost");
    init_weights(x, int64_t(m) * h, 1, 17u);  // the same input on every rank (same salt)
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }

  // C[m_,n] = A[m_,k] * B[k,n], row-major. cuBLAS is column-major: C^T = B^T A^T.
  void gemm(const bf16* a, const bf16* b, bf16* c, int m_, int n, int k, const char* role,
            bool timed) {
    const std::string key = o.custom_gemm ? "vtp_gemm" : "cublas_gemm";
    if (timed) events.begin(stream, key, role);
    if (o.custom_gemm) {
      dim3 grid(unsigned((n + kTile - 1) / kTile), unsigned((m_ + kTile - 1) / kTile));
      VTP_LAUNCH(vtp_gemm, grid, dim3(kTile, kTile), 0, stream, a, b, c, m_, n, k);
    } else {
      const float alpha = 1.f, beta = 0.f;
      check(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, n, m_, k, &alpha, b, CUDA_R_16BF, n, a,
                         CUDA_R_16BF, k, &beta, c, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT),
            "cublasGemmEx");
    }
    if (timed) events.end(stream);
    ++g_truth.gemm_calls[role];
    if (g_layer >= 0) ++g_truth.layer_gemm_calls[size_t(g_layer)];
  }

  void all_reduce(bf16* buf, int64_t n) {
    check(ncclAllReduce(buf, buf, size_t(n), ncclBfloat16, ncclSum, comm, stream), "ncclAllReduce");
    ++g_truth.collectives["AllReduce"];
    g_truth.nccl_bytes += n * int64_t(sizeof(bf16));
    if (g_layer >= 0) ++g_truth.layer_collectives[size_t(g_layer)];
  }

  static unsigned blocks_for(int64_t n) {
    return unsigned(std::min<int64_t>((n + 255) / 256, 4096));
  }

  // The layers of one step: attention-lite and MLP, each ending in an all-reduce.
  void layers_body(int s, bool timed) {
    const int64_t act = int64_t(m) * h;
    for (int li = 0; li < o.layers; ++li) {
      const Layer& l = layers[size_t(li)];
      NvtxRange layer_range("layer " + std::to_string(li));
      g_layer = li;
      if (slow) VTP_LAUNCH(vtp_spin, 1, 1, 0, stream, int64_t(o.slow_us * 1e3));
      {
        NvtxRange r("attn");
        VTP_LAUNCH(vtp_rmsnorm, m, 256, 0, stream, x, xn, h);
        gemm(xn, l.wqkv, qkv, m, 3 * hl, h, "qkv", timed);
        VTP_LAUNCH(vtp_rope, blocks_for(int64_t(m) * hl), 256, 0, stream, qkv, m, hl, head_dim, s);
        VTP_LAUNCH(vtp_attn_lite, dim3(unsigned(m), unsigned(hl / head_dim)), 128, 0, stream, qkv,
                   attn, hl, head_dim);
        gemm(attn, l.wo, part, m, h, hl, "out", timed);
        all_reduce(part, act);
        VTP_LAUNCH(vtp_residual_add, blocks_for(act), 256, 0, stream, x, part, act);
      }
      {
        NvtxRange r("mlp");
        VTP_LAUNCH(vtp_rmsnorm, m, 256, 0, stream, x, xn, h);
        gemm(xn, l.w1, ffn, m, fl, h, "fc1", timed);
        const int64_t nf = int64_t(m) * fl;
        if (timed) events.begin(stream, "vtp_gelu", "gelu");
        VTP_LAUNCH(vtp_gelu, blocks_for(nf), 256, 0, stream, ffn, nf);
        if (timed) events.end(stream);
        gemm(ffn, l.w2, part, m, h, fl, "fc2", timed);
        all_reduce(part, act);
        VTP_LAUNCH(vtp_residual_add, blocks_for(act), 256, 0, stream, x, part, act);
      }
      g_layer = -1;
    }
  }

  // --cuda-graph: the first step's layers are captured once (the app's counters count them once,
  // count_replay adds the same again for every later replay): the kernels run per step as without
  // a graph, but from cudaGraphLaunch, as under PyTorch's CUDA graphs or vLLM's decode.
  cudaGraphExec_t graph_exec{};
  Truth per_replay;

  void capture_layers(int s) {
    const Truth before = g_truth;
    cudaGraph_t graph{};
    check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
    layers_body(s, false);
    check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    check(cudaGraphInstantiate(&graph_exec, graph, 0), "cudaGraphInstantiate");
    check(cudaGraphDestroy(graph), "cudaGraphDestroy");
    auto diff = [](const std::map<std::string, int64_t>& a,
                   const std::map<std::string, int64_t>& b) {
      std::map<std::string, int64_t> d;
      for (const auto& [k, v] : a) {
        auto it = b.find(k);
        if (const int64_t n = v - (it == b.end() ? 0 : it->second)) d[k] = n;
      }
      return d;
    };
    per_replay.launched = diff(g_truth.launched, before.launched);
    per_replay.gemm_calls = diff(g_truth.gemm_calls, before.gemm_calls);
    per_replay.collectives = diff(g_truth.collectives, before.collectives);
    per_replay.nccl_bytes = g_truth.nccl_bytes - before.nccl_bytes;
  }

  void count_replay() {
    for (const auto& [k, v] : per_replay.launched) g_truth.launched[k] += v;
    for (const auto& [k, v] : per_replay.gemm_calls) g_truth.gemm_calls[k] += v;
    for (const auto& [k, v] : per_replay.collectives) g_truth.collectives[k] += v;
    g_truth.nccl_bytes += per_replay.nccl_bytes;
  }

  void step(int s) {
    // Events only in the timed steps: a cuBLAS GEMM's first call of a shape loads its kernels
    // while the gate holds the stream, so the first step's first event pair held 139 ms around a
    // 0.5 ms kernel on the first GPU run (docs/gpu-validation.md, check d2). The check compares
    // the store's kernels of the same steps (kernalyse-merge --step).
    const bool timed = o.event_timing && s >= o.warmup;
    if (o.event_timing) {
      // Hold the stream while the host queues the step, so that each event pair brackets its
      // kernel alone and not the host's launch latency (the GPU would otherwise wait for it).
      VTP_LAUNCH(vtp_spin, 1, 1, 0, stream, int64_t(500000) + int64_t(o.layers) * 100000);
    }
    if (!o.cuda_graph)
      layers_body(s, timed);
    else if (!graph_exec)
      capture_layers(s);  // counted once, as captured; the launch below runs them
    else
      count_replay();
    if (graph_exec) check(cudaGraphLaunch(graph_exec, stream), "cudaGraphLaunch");
    const int64_t act = int64_t(m) * h;
    // Keep activations bounded across steps: renormalise the hidden state in place.
    VTP_LAUNCH(vtp_rmsnorm, m, 256, 0, stream, x, x, h);
    VTP_LAUNCH(vtp_checksum, 1, 256, 0, stream, x, act, d_sum);
    check(cudaMemcpyAsync(h_sum, d_sum, sizeof(float), cudaMemcpyDeviceToHost, stream),
          "cudaMemcpyAsync");
    ++g_truth.memcpy_d2h;
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    if (o.event_timing) events.harvest();
  }
};

// ---------------------------------------------------------------------------------------------
// Report

std::string jstr(const std::string& s) {
  std::string r = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') r += '\\';
    r += c;
  }
  return r + "\"";
}

std::string jmap(const std::map<std::string, int64_t>& m) {
  std::string r = "{";
  for (const auto& [k, v] : m) r += (r.size() > 1 ? ", " : "") + jstr(k) + ": " + std::to_string(v);
  return r + "}";
}

std::string jvec(const std::vector<int64_t>& v) {
  std::string r = "[";
  for (size_t i = 0; i < v.size(); ++i) r += (i ? ", " : "") + std::to_string(v[i]);
  return r + "]";
}

std::string rank_report(const Options& o, int rank, int device, const std::string& dev_name,
                        double checksum) {
  std::vector<int64_t> timed(
      g_truth.step_ns.begin() + std::min<size_t>(size_t(o.warmup), g_truth.step_ns.size()),
      g_truth.step_ns.end());
  int64_t loop = 0;
  for (int64_t t : timed) loop += t;
  std::vector<int64_t> sorted = timed;
  std::sort(sorted.begin(), sorted.end());
  const int64_t median = sorted.empty() ? 0 : sorted[sorted.size() / 2];
  int64_t own = 0;
  for (const auto& [k, v] : g_truth.launched) own += v;
  char cs[64];
  std::snprintf(cs, sizeof cs, "%.9g", checksum);
  std::string r = "{";
  r += "\"rank\": " + std::to_string(rank) + ", \"device\": " + std::to_string(device);
  r += ", \"device_name\": " + jstr(dev_name);
  r += ", \"kernels_launched\": " + jmap(g_truth.launched);
  r += ", \"kernels_launched_total\": " + std::to_string(own);
  r += ", \"gemm_calls\": " + jmap(g_truth.gemm_calls);
  r += ", \"nccl_collectives\": " + jmap(g_truth.collectives);
  r += ", \"nccl_bytes\": " + std::to_string(g_truth.nccl_bytes);
  r += ", \"memcpy_d2h\": " + std::to_string(g_truth.memcpy_d2h);
  r += ", \"nvtx_ranges\": " + jmap(g_truth.nvtx_ranges);
  r += ", \"layer_own_kernels\": " + jvec(g_truth.layer_own_kernels);
  r += ", \"layer_gemm_calls\": " + jvec(g_truth.layer_gemm_calls);
  r += ", \"layer_collectives\": " + jvec(g_truth.layer_collectives);
  r += ", \"step_ns\": " + jvec(g_truth.step_ns);
  r += ", \"decode_loop_ns\": " + std::to_string(loop);
  r += ", \"median_step_ns\": " + std::to_string(median);
  r += ", \"event_ns\": " + jmap(g_truth.event_ns);
  r += ", \"event_launches\": " + jmap(g_truth.event_n);
  r += ", \"event_ns_by_role\": " + jmap(g_truth.event_role_ns);
  r += ", \"checksum\": " + std::string(cs);
  return r + "}";
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int world_rank = 0, world_size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  g_rank = world_rank;

  Options o;
  std::string err = parse(argc, argv, o);
  if (err.empty() && o.hidden % (128 * world_size) != 0)
    err = "--hidden must be a multiple of 128 x ranks (" + std::to_string(128 * world_size) + ")";
  if (!err.empty()) {
    const bool help = err == "help";
    if (world_rank == 0) {
      if (!help) std::fprintf(stderr, "vicuna_tp_cuda: %s\n", err.c_str());
      std::fputs(kUsage, help ? stdout : stderr);
    }
    MPI_Finalize();
    return help ? 0 : 2;
  }

  // Device from the node-local rank, modulo the devices there: several ranks may share one GPU.
  MPI_Comm local;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank, MPI_INFO_NULL, &local);
  int local_rank = 0, local_size = 1;
  MPI_Comm_rank(local, &local_rank);
  MPI_Comm_size(local, &local_size);
  MPI_Comm_free(&local);
  int ndev = 0;
  const cudaError_t derr = cudaGetDeviceCount(&ndev);
  int bad = (derr != cudaSuccess || ndev < 1) ? 1 : 0, any_bad = 0;
  MPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (any_bad) {
    if (bad && (world_rank == 0 || local_rank == 0))
      std::fprintf(stderr, "vicuna_tp_cuda: no usable CUDA device on rank %d (%s)\n", world_rank,
                   derr != cudaSuccess ? cudaGetErrorString(derr) : "no devices");
    MPI_Finalize();
    return 2;
  }
  const int device = local_rank % ndev;
  check(cudaSetDevice(device), "cudaSetDevice");
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");

  // NCCL refuses two ranks of one communicator on the same GPU ("Duplicate GPU detected": it
  // compares host hash and bus id). A distinct NCCL_HOSTID per rank makes each rank its own
  // "node", connected through the socket transport on loopback: slow but correct, which is
  // enough to profile two ranks on one GPU. Must be set before the first NCCL call (the host
  // hash is computed once).
  const bool shared_gpu = local_size > ndev;
  if (shared_gpu && o.share_gpu && world_size > 1) {
    const std::string id = "vicuna-tp-rank-" + std::to_string(world_rank);
    setenv("NCCL_HOSTID", id.c_str(), 0);
    setenv("NCCL_NET", "Socket", 0);
    setenv("NCCL_SOCKET_IFNAME", "lo", 0);
    setenv("NCCL_IB_DISABLE", "1", 0);
  }

  ncclUniqueId id{};
  if (world_rank == 0) check(ncclGetUniqueId(&id), "ncclGetUniqueId");
  MPI_Bcast(&id, int(sizeof id), MPI_BYTE, 0, MPI_COMM_WORLD);

  Model model(o, world_size, world_rank);
  model.slow = world_rank == o.slow_rank;
  g_truth.layer_own_kernels.assign(size_t(o.layers), 0);
  g_truth.layer_gemm_calls.assign(size_t(o.layers), 0);
  g_truth.layer_collectives.assign(size_t(o.layers), 0);
  model.setup();
  check(ncclCommInitRank(&model.comm, world_size, id, world_rank), "ncclCommInitRank");
  MPI_Barrier(MPI_COMM_WORLD);

  for (int s = 0; s < o.warmup + o.steps; ++s) {
    const int64_t t0 = now_ns();
    {
      // Steps are numbered like PyTorch's profiler: warm-up steps too.
      NvtxRange r("ProfilerStep#" + std::to_string(s));
      model.step(s);
    }
    g_truth.step_ns.push_back(now_ns() - t0);
  }
  const double checksum = double(*model.h_sum);

  int64_t loop = 0;
  for (size_t i = size_t(o.warmup); i < g_truth.step_ns.size(); ++i) loop += g_truth.step_ns[i];
  int64_t max_loop = 0;
  MPI_Reduce(&loop, &max_loop, 1, MPI_INT64_T, MPI_MAX, 0, MPI_COMM_WORLD);

  if (!o.report.empty()) {
    const std::string mine = rank_report(o, world_rank, device, prop.name, checksum);
    int len = int(mine.size());
    std::vector<int> lens(static_cast<size_t>(world_size));
    MPI_Gather(&len, 1, MPI_INT, lens.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
    std::vector<int> displs(size_t(world_size), 0);
    int total = 0;
    for (int r = 0; r < world_size; ++r) {
      displs[size_t(r)] = total;
      total += lens[size_t(r)];
    }
    std::string all(size_t(world_rank == 0 ? total : 0), '\0');
    MPI_Gatherv(mine.data(), len, MPI_CHAR, all.data(), lens.data(), displs.data(), MPI_CHAR, 0,
                MPI_COMM_WORLD);
    if (world_rank == 0) {
      int nccl_version = 0;  // the loaded library's, not the header's
      ncclGetVersion(&nccl_version);
      FILE* f = std::fopen(o.report.c_str(), "w");
      if (!f) {
        std::fprintf(stderr, "vicuna_tp_cuda: cannot write %s\n", o.report.c_str());
      } else {
        std::fprintf(f,
                     "{\"app\": \"vicuna_tp_cuda\", \"world_size\": %d, \"layers\": %d, "
                     "\"hidden\": %d, \"batch\": %d, \"steps\": %d, \"warmup\": %d, "
                     "\"gemm\": \"%s\", \"event_timing\": %s, \"slow_rank\": %d, "
                     "\"slow_us\": %g, \"shared_gpu\": %s, \"nccl_version\": %d, "
                     "\"decode_loop_ns_max\": %lld, \"ranks\": [",
                     world_size, o.layers, o.hidden, o.batch, o.steps, o.warmup,
                     o.custom_gemm ? "custom" : "cublas", o.event_timing ? "true" : "false",
                     o.slow_rank, o.slow_us, shared_gpu ? "true" : "false", nccl_version,
                     static_cast<long long>(max_loop));
        for (int r = 0; r < world_size; ++r) {
          if (r) std::fputs(",\n  ", f);
          std::fwrite(all.data() + displs[size_t(r)], 1, size_t(lens[size_t(r)]), f);
        }
        std::fputs("]}\n", f);
        std::fclose(f);
      }
    }
  }
  if (world_rank == 0)
    std::fprintf(
        stderr,
        "vicuna_tp_cuda: %d ranks, %d layers, hidden %d, batch %d, %d steps (+%d warm-up), "
        "%.3f ms/step, %s GEMMs, %s, checksum %.6g\n",
        world_size, o.layers, o.hidden, o.batch, o.steps, o.warmup,
        double(max_loop) / 1e6 / o.steps, o.custom_gemm ? "custom" : "cuBLAS", prop.name, checksum);

  ncclCommDestroy(model.comm);
  if (model.blas) cublasDestroy(model.blas);
  MPI_Finalize();
  return o.exit_code;
}
