// vicuna_tp: a Megatron-style tensor-parallel decoder forward pass (Vicuna/LLaMA-7B shapes) on an
// EMULATED device. There is no GPU: per rank, host threads play the device streams and the main
// thread plays the host that launches onto them.
//
//   host (main thread)      enqueues ops like cudaLaunchKernel / ncclAllReduce, each launch costing
//                           a modelled ~5 us of CPU, plus --launch-delay-us before every layer's
//                           first op on the delayed rank; consumes each step's logits one step late
//                           (so it runs at most one step ahead of the device).
//   compute stream (7)      one thread, executes kernels in order; a kernel "runs" for its modelled
//                           time (roofline: max(FLOP / peak, bytes / HBM bandwidth)) by sleeping.
//   NCCL stream (20)        one thread, executes collectives in order as REAL MPI collectives on a
//                           small buffer (so waiting for a late rank is real), followed by a sleep
//                           for the modelled transfer time.
//
// Cross-stream ordering is that of CUDA events in Megatron TP: a collective waits for all compute
// enqueued before it, compute enqueued after a collective waits for it. The device timeline is
// modelled but anchored to real time (see stream_main): OS wake-up noise of the stream threads
// does not enter the records, the host's real behaviour and the real MPI waits do.
//
// Every executed op is reported through the kernalyse emulated-device C API (kernalyse/emu.h),
// looked up with dlsym(RTLD_DEFAULT, ...) at startup; without it the program runs unprofiled.
// Times are int64 ns of CLOCK_MONOTONIC_RAW (kernalyse_emu_now_ns when present).
//
// --spawn N: no MPI at all. The process forks N workers itself, as inference servers (vLLM,
// SGLang) fork their tensor-parallel workers, each with RANK/LOCAL_RANK/WORLD_SIZE set, and the
// collectives go through shared memory (ShmComms below) instead of MPI.
#include <dlfcn.h>
#include <mpi.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "kernalyse/emu.h"

namespace {

// ---------------------------------------------------------------------------------------------
// Clock, sleeping, the collector API

int64_t raw_now() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// Sleep until CLOCK_MONOTONIC_RAW reaches target. clock_nanosleep does not accept MONOTONIC_RAW,
// so sleep relative for the remaining time and re-check (never busy-waits).
void sleep_until_raw(int64_t target) {
  for (;;) {
    int64_t rem = target - raw_now();
    if (rem <= 0) return;
    timespec ts{time_t(rem / 1000000000), long(rem % 1000000000)};
    nanosleep(&ts, nullptr);
  }
}

void sleep_for_ns(int64_t ns) {
  if (ns > 0) sleep_until_raw(raw_now() + ns);
}

// Default timer slack (50 us) would stretch every short sleep; ask for 1 ns on each thread.
void tight_timer_slack() { prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL); }

int64_t os_tid() { return int64_t(syscall(SYS_gettid)); }

struct Collector {
  kernalyse_emu_now_ns_fn now = nullptr;
  kernalyse_emu_record_activity_fn activity = nullptr;
  kernalyse_emu_record_launch_fn launch = nullptr;
  kernalyse_emu_record_nccl_fn nccl = nullptr;
  kernalyse_emu_record_range_fn range = nullptr;
  kernalyse_emu_record_memory_fn memory = nullptr;
  kernalyse_emu_record_counter_fn counter = nullptr;
  kernalyse_emu_record_coll_mark_fn coll_mark = nullptr;
  std::mutex m;  // the three stream/host threads report concurrently; serialise for the collector

  void lookup() {
    now = reinterpret_cast<kernalyse_emu_now_ns_fn>(dlsym(RTLD_DEFAULT, "kernalyse_emu_now_ns"));
    activity = reinterpret_cast<kernalyse_emu_record_activity_fn>(
        dlsym(RTLD_DEFAULT, "kernalyse_emu_record_activity"));
    launch = reinterpret_cast<kernalyse_emu_record_launch_fn>(
        dlsym(RTLD_DEFAULT, "kernalyse_emu_record_launch"));
    nccl = reinterpret_cast<kernalyse_emu_record_nccl_fn>(
        dlsym(RTLD_DEFAULT, "kernalyse_emu_record_nccl"));
    range = reinterpret_cast<kernalyse_emu_record_range_fn>(
        dlsym(RTLD_DEFAULT, "kernalyse_emu_record_range"));
    memory = reinterpret_cast<kernalyse_emu_record_memory_fn>(
        dlsym(RTLD_DEFAULT, "kernalyse_emu_record_memory"));
    counter = reinterpret_cast<kernalyse_emu_record_counter_fn>(
        dlsym(RTLD_DEFAULT, "kernalyse_emu_record_counter"));
    coll_mark = reinterpret_cast<kernalyse_emu_record_coll_mark_fn>(
        dlsym(RTLD_DEFAULT, "kernalyse_emu_record_coll_mark"));
  }
  // The emulated device keeps its timeline in raw_now(); records are shifted onto the collector's
  // clock, documented as the same CLOCK_MONOTONIC_RAW (then the measured offset is just the call
  // latency, and is dropped).
  int64_t offset = 0;
  void calibrate() {
    if (!now) return;
    const int64_t a = raw_now(), c = now(), b = raw_now();
    offset = c - (a + (b - a) / 2);
    if (offset > -100000 && offset < 100000) offset = 0;
  }
  bool profiled() const { return activity != nullptr; }
  int64_t to_collector(int64_t raw) const { return raw + offset; }
  void record(const kernalyse_emu_activity& a) {
    if (!activity) return;
    std::lock_guard<std::mutex> g(m);
    activity(&a);
  }
  void record(const kernalyse_emu_launch& l) {
    if (!launch) return;
    std::lock_guard<std::mutex> g(m);
    launch(&l);
  }
  void record(const kernalyse_emu_nccl& n) {
    if (!nccl) return;
    std::lock_guard<std::mutex> g(m);
    nccl(&n);
  }
  void record(const kernalyse_emu_memory& x) {
    if (!memory) return;
    std::lock_guard<std::mutex> g(m);
    memory(&x);
  }
  void record(const kernalyse_emu_counter& c) {
    if (!counter) return;
    std::lock_guard<std::mutex> g(m);
    counter(&c);
  }
  void record(const kernalyse_emu_range& r) {
    if (!range) return;
    std::lock_guard<std::mutex> g(m);
    range(&r);
  }
  void record(const kernalyse_emu_coll_mark& c) {
    if (!coll_mark) return;
    std::lock_guard<std::mutex> g(m);
    coll_mark(&c);
  }
};

Collector g_col;

// ---------------------------------------------------------------------------------------------
// Options

struct Options {
  int layers = 8;
  int hidden = 4096;
  int steps = 20;
  int seq_len = 2048;  // tokens per sequence
  int batch = 1;       // sequences per step
  int vocab = 32000;
  int pp = 1;
  bool sequence_parallel = false;
  int slow_rank = -1;
  double slow_factor = 1.0;
  double jitter = 0.02;
  double launch_delay_us = 0.0;
  int launch_delay_rank = -2;  // -2: unset (→ slow rank, else every rank)
  uint64_t seed = 1;
  double time_scale = 1.0;
  int exit_code = 0;
  bool blocking_mpi = false;  // --mpi-wait block: blocking MPI calls instead of test+sleep polling
  bool modelled_collectives = false;  // --modelled-collectives: ends from modelled times only
  bool print_model = false;
  bool print_offset = false;  // --print-offset: the emulator's own clock offset and its error
  // Power model (the emulated NVML): watts per kernel class, sampled every power_ms.
  double power_ms = 100.0;  // 0: no power samples
  double power_noise_w = 0.0;
  double watts[5] = {90.0, 650.0, 550.0, 300.0, 200.0};  // idle, gemm, attention, memory, comm
  std::string power_truth;  // rank 0 writes the planted energy truth (JSON) here
  int spawn = 0;            // --spawn N: fork N workers, collectives through shared memory
  int hang_rank = -1;       // --hang-rank R --hang-at-step S: R misbehaves at step S's first
  int hang_step = -1;       // tensor-parallel collective (--hang-kind)
  std::string hang_kind = "skip";
};

// Kernel classes of the power model; 0 is the idle floor.
enum PowerClass { kIdle = 0, kGemm = 1, kAttention = 2, kMemory = 3, kComm = 4 };
const char* const kPowerClassName[5] = {"idle", "gemm", "attention", "memory", "comm"};

const char* kUsage =
    "usage: vicuna_tp [options]   (run under mpirun; every rank is one tensor-parallel GPU)\n"
    "  --layers N            decoder layers (default 8)\n"
    "  --hidden N            hidden size (default 4096; heads = hidden/128, ffn = hidden*43/16)\n"
    "  --steps N             forward steps (default 20)\n"
    "  --seq-len N           tokens per sequence (default 2048)\n"
    "  --batch N             sequences per step (default 1)\n"
    "  --pp 1|2              pipeline stages; 2 splits the ranks into two halves (default 1)\n"
    "  --sequence-parallel   reduce-scatter + all-gather instead of all-reduce\n"
    "  --slow-rank R         rank whose compute kernels run --slow-factor times longer\n"
    "  --slow-factor F       (default 1.0)\n"
    "  --jitter J            fractional noise (sd) on kernel durations (default 0.02)\n"
    "  --launch-delay-us D   host delay before each layer's first launch on the delayed rank\n"
    "                        (scaled by --time-scale like every modelled time)\n"
    "  --launch-delay-rank R the delayed rank (default: --slow-rank; -1 or neither: every rank)\n"
    "  --seed S              random seed (default 1)\n"
    "  --time-scale X        multiplier on all modelled times (default 1.0)\n"
    "  --mpi-wait poll|block how the NCCL stream waits on MPI (default poll: test + 20 us sleep)\n"
    "  --modelled-collectives a collective ends its transfer time after the last member's\n"
    "                        modelled arrival, even when the real MPI call returned later (a\n"
    "                        loaded machine's scheduling delays stay out of the records: runs\n"
    "                        with and without --slow-rank then differ by the slowing alone)\n"
    "  --print-model         print the per-op modelled durations on rank 0\n"
    "  --print-offset        each rank: its clock's offset to rank 0 as the emulator measured it,\n"
    "                        and that measurement's error (half its best round trip), on stderr\n"
    "  --exit-code N         exit with N after MPI_Finalize\n"
    "  --power-ms P          emulated NVML: sample board power every P ms (default 100; 0: off)\n"
    "  --power-watts SPEC    planted power model, W: "
    "idle=90,gemm=650,attention=550,memory=300,comm=200\n"
    "                        (a running kernel adds its class's watts above idle)\n"
    "  --power-noise W       Gaussian noise (sd, W) on each power sample (default 0)\n"
    "  --power-truth FILE    rank 0 writes the planted energy per class, idle and total (JSON)\n"
    "  --spawn N             no MPI: fork N workers (RANK/LOCAL_RANK/WORLD_SIZE set), collectives\n"
    "                        through shared memory\n"
    "  --hang-rank R         with --hang-at-step S: rank R misbehaves at step S's first\n"
    "  --hang-at-step S      tensor-parallel collective, as --hang-kind says:\n"
    "  --hang-kind K         skip: never enters it and stalls (the others hang in it);\n"
    "                        op: issues AllGather for AllReduce (or AllReduce otherwise);\n"
    "                        size: issues it with twice the count (op and size: a desync the\n"
    "                        emulated transport still completes)\n";

// Returns "" on success, else an error message. --help returns "help".
std::string parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string val;
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
    auto as_dbl = [&](double& out) -> bool {
      if (!take()) return false;
      char* end = nullptr;
      double v = std::strtod(val.c_str(), &end);
      if (end == val.c_str() || *end) return false;
      out = v;
      return true;
    };
    bool ok = true;
    if (a == "--help" || a == "-h")
      return "help";
    else if (a == "--layers")
      ok = as_int(o.layers) && o.layers >= 1;
    else if (a == "--hidden")
      ok = as_int(o.hidden) && o.hidden >= 128;
    else if (a == "--steps")
      ok = as_int(o.steps) && o.steps >= 1;
    else if (a == "--seq-len")
      ok = as_int(o.seq_len) && o.seq_len >= 1;
    else if (a == "--batch")
      ok = as_int(o.batch) && o.batch >= 1;
    else if (a == "--pp")
      ok = as_int(o.pp) && (o.pp == 1 || o.pp == 2);
    else if (a == "--sequence-parallel")
      o.sequence_parallel = true;
    else if (a == "--slow-rank")
      ok = as_int(o.slow_rank);
    else if (a == "--slow-factor")
      ok = as_dbl(o.slow_factor) && o.slow_factor > 0;
    else if (a == "--jitter")
      ok = as_dbl(o.jitter) && o.jitter >= 0;
    else if (a == "--launch-delay-us")
      ok = as_dbl(o.launch_delay_us) && o.launch_delay_us >= 0;
    else if (a == "--launch-delay-rank")
      ok = as_int(o.launch_delay_rank);
    else if (a == "--seed") {
      int s = 0;
      ok = as_int(s);
      o.seed = uint64_t(uint32_t(s));
    } else if (a == "--time-scale")
      ok = as_dbl(o.time_scale) && o.time_scale > 0;
    else if (a == "--exit-code")
      ok = as_int(o.exit_code);
    else if (a == "--mpi-wait") {
      ok = take() && (val == "poll" || val == "block");
      o.blocking_mpi = ok && val == "block";
    } else if (a == "--modelled-collectives")
      o.modelled_collectives = true;
    else if (a == "--print-model")
      o.print_model = true;
    else if (a == "--print-offset")
      o.print_offset = true;
    else if (a == "--spawn")
      ok = as_int(o.spawn) && o.spawn >= 1 && o.spawn <= 64;
    else if (a == "--hang-rank")
      ok = as_int(o.hang_rank) && o.hang_rank >= 0;
    else if (a == "--hang-at-step")
      ok = as_int(o.hang_step) && o.hang_step >= 0;
    else if (a == "--hang-kind")
      ok = take() && ((o.hang_kind = val) == "skip" || val == "op" || val == "size");
    else if (a == "--power-ms")
      ok = as_dbl(o.power_ms) && o.power_ms >= 0;
    else if (a == "--power-noise")
      ok = as_dbl(o.power_noise_w) && o.power_noise_w >= 0;
    else if (a == "--power-truth")
      ok = take() && !(o.power_truth = val).empty();
    else if (a == "--power-watts") {
      ok = take();
      for (size_t b = 0; ok && b < val.size();) {  // class=watts[,class=watts...]
        size_t e = val.find(',', b);
        if (e == std::string::npos) e = val.size();
        const std::string item = val.substr(b, e - b);
        const size_t eq2 = item.find('=');
        int cls = -1;
        for (int c = 0; c < 5 && eq2 != std::string::npos; ++c)
          if (item.compare(0, eq2, kPowerClassName[c]) == 0) cls = c;
        char* end = nullptr;
        const double w = cls < 0 ? -1 : std::strtod(item.c_str() + eq2 + 1, &end);
        ok = cls >= 0 && end && !*end && w >= 0 && w < 1e5;
        if (ok) o.watts[cls] = w;
        b = e + 1;
      }
    } else
      return "unknown option '" + a + "'";
    if (!ok) return "bad or missing value for " + a;
  }
  return "";
}

// ---------------------------------------------------------------------------------------------
// Performance model: an H100-SXM-like device slowed down by kEmuSlowdown, so that kernels last
// 0.1-1.6 ms (a layer ~6 ms at tp 4): the real host (5 us launches) stays well ahead of the device
// and real MPI/poll latencies (~0.1 ms with 4 ranks x 3 threads on 2 cores) stay small against
// the modelled transfers, also at --time-scale 0.2.

constexpr double kEmuSlowdown = 12.0;
constexpr double kGemmFlops = 989e12 * 0.70;   // dense BF16 peak x achieved GEMM efficiency
constexpr double kFlashFlops = 989e12 * 0.45;  // flash-attention forward efficiency
constexpr double kHbmBw = 3.35e12 * 0.85;      // bytes/s
constexpr double kNvlinkBusBw = 370e9;         // NCCL ring bus bandwidth, bytes/s
constexpr double kCollLatency = 12e-6;         // s per collective
constexpr double kLaunchCost = 5e-6;           // s of host time per launch
constexpr double kBf16 = 2.0;

int64_t to_ns(double seconds, double scale) {
  return int64_t(std::llround(seconds * kEmuSlowdown * scale * 1e9));
}

double gemm_s(double m, double n, double k) {
  double flops = 2.0 * m * n * k;
  double bytes = (m * k + k * n + m * n) * kBf16;
  return std::max(flops / kGemmFlops, bytes / kHbmBw);
}
double mem_s(double bytes) { return bytes / kHbmBw; }
// Ring algorithms: all-reduce moves 2(n-1)/n of the buffer, reduce-scatter / all-gather (n-1)/n
// of the full (gathered) buffer.
double allreduce_s(double bytes, int n) {
  return n <= 1 ? kCollLatency : kCollLatency + 2.0 * (n - 1) / n * bytes / kNvlinkBusBw;
}
double gather_s(double full_bytes, int n) {
  return n <= 1 ? kCollLatency : kCollLatency + double(n - 1) / n * full_bytes / kNvlinkBusBw;
}
double p2p_s(double bytes) { return kCollLatency + bytes / kNvlinkBusBw; }

const char* const kGemmColumn =
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
    "segment_k_off_kernel__5x_cublas";
const char* const kGemmRow =
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_"
    "segment_k_off_kernel__5x_cublas";
const char* const kGemmSkinny =
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x128x64_warpgroupsize1x1x1_execute_"
    "segment_k_off_kernel__5x_cublas";
const char* const kFlash =
    "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
    "cutlass::bfloat16_t> >(Flash_fwd_params)";
const char* const kLayerNorm =
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>"
    "(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, "
    "float*, "
    "c10::BFloat16*)";
const char* const kSilu =
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::"
    "silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#2}::"
    "operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::"
    "(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() "
    "const::"
    "{lambda()#2}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)";
const char* const kNcclAllReduce =
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
const char* const kNcclAllGather =
    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
const char* const kNcclReduceScatter =
    "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)";
const char* const kNcclSendRecv = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)";

// ---------------------------------------------------------------------------------------------
// Communicators, ops, the emulated device

struct Comm {
  MPI_Comm comm = MPI_COMM_NULL;
  uint64_t hash = 0;  // same on every member
  int size = 1;
  int rank = 0;
  int64_t seq = 0;  // per-communicator counter, advanced in launch order (same on every member)
  int shm = -1;     // --spawn: this communicator's row in the shared-memory area
  int64_t ops = 0;  // --spawn: shared-memory operations done on it (one thread uses it at a time)
};

// --spawn: the shared-memory stand-in for MPI. One anonymous shared mapping made before the
// fork; per communicator and member a small ring of published values with the member's op
// number. Op g of a member publishes its value in slot g % kShmRing, then waits (20 µs sleeps,
// like the MPI polling) until every member published op g; the result is the maximum. A member
// publishes op g only after it read every value of op g-1, so no slot is overwritten while
// another member may still read it. A member that never arrives leaves the others waiting: a
// hang, as in NCCL.
constexpr int kShmMaxComms = 72, kShmMaxRanks = 64, kShmRing = 4;
struct ShmCell {
  std::atomic<int64_t> op{0};
  std::atomic<int64_t> val[kShmRing];
};
struct ShmArea {
  ShmCell cell[kShmMaxComms][kShmMaxRanks];
  double truth[kShmMaxRanks][6];
};
ShmArea* g_shm = nullptr;  // non-null in --spawn workers
bool g_spawn = false;
Comm g_world;  // --spawn: all workers (MPI runs use MPI_COMM_WORLD)

int64_t shm_max(Comm& c, int64_t v) {
  const int64_t g = ++c.ops;
  ShmCell* row = g_shm->cell[c.shm];
  row[c.rank].val[g % kShmRing].store(v, std::memory_order_relaxed);
  row[c.rank].op.store(g, std::memory_order_release);
  int64_t best = v;
  for (int m = 0; m < c.size; ++m) {
    while (row[m].op.load(std::memory_order_acquire) < g) {
      const timespec nap{0, 20000};
      nanosleep(&nap, nullptr);
    }
    best = std::max(best, row[m].val[g % kShmRing].load(std::memory_order_relaxed));
  }
  return best;
}

// The maximum over all ranks, and a barrier: MPI or shared memory.
int64_t world_max(int64_t v) {
  if (g_spawn) return shm_max(g_world, v);
  int64_t out = v;
  MPI_Allreduce(&v, &out, 1, MPI_INT64_T, MPI_MAX, MPI_COMM_WORLD);
  return out;
}
void world_barrier() {
  if (g_spawn)
    shm_max(g_world, 0);
  else
    MPI_Barrier(MPI_COMM_WORLD);
}

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

// Builds a communicator from MPI_Comm_split and names it by its world ranks. --spawn: the
// members are the ranks r with color_of(r) == color, its shared-memory row `shm_row`.
template <class ColorOf>
Comm make_comm(const char* kind, int color, int world_rank, ColorOf color_of, int shm_row) {
  Comm c;
  std::vector<int> members;
  if (g_spawn) {
    for (int r = 0; r < g_world.size; ++r)
      if (color_of(r) == color) {
        if (r == world_rank) c.rank = int(members.size());
        members.push_back(r);
      }
    c.size = int(members.size());
    c.shm = shm_row;
  } else {
    MPI_Comm_split(MPI_COMM_WORLD, color, world_rank, &c.comm);
    MPI_Comm_size(c.comm, &c.size);
    MPI_Comm_rank(c.comm, &c.rank);
    members.resize(size_t(c.size));
    MPI_Allgather(&world_rank, 1, MPI_INT, members.data(), 1, MPI_INT, c.comm);
  }
  std::string name = std::string("vicuna_tp/") + kind + "[";
  for (size_t i = 0; i < members.size(); ++i) {
    if (i) name += ',';
    name += std::to_string(members[i]);
  }
  name += "]";
  c.hash = fnv1a(name);
  return c;
}

enum class Coll { None, AllReduce, AllGather, ReduceScatter, Send, Recv };

const char* coll_name(Coll c) {
  switch (c) {
    case Coll::AllReduce:
      return "AllReduce";
    case Coll::AllGather:
      return "AllGather";
    case Coll::ReduceScatter:
      return "ReduceScatter";
    case Coll::Send:
      return "Send";
    case Coll::Recv:
      return "Recv";
    default:
      return "";
  }
}

enum StreamIdx { kCompute = 0, kNccl = 1 };
constexpr int32_t kStreamId[2] = {7, 20};

struct Op {
  const char* name = "";
  int64_t duration_ns = 0;  // compute: kernel time; collective: transfer time after MPI returns
  int64_t correlation = 0;
  uint64_t dep_count = 0;  // wait until the other stream completed this many ops
  Coll coll = Coll::None;
  Comm* comm = nullptr;
  int peer = -1;  // rank in comm for Send/Recv
  int tag = 0;
  int64_t count = 0;       // NCCL element count (the API's count argument)
  int64_t launch_end = 0;  // raw ns: the op cannot start before its launch call returned
  int power_class = kIdle;
  int64_t seq = -1;            // the communicator's sequence number (collectives)
  Coll tag_coll = Coll::None;  // what the records say (differs from coll only when a desync
  int64_t tag_count = 0;       // is planted: --hang-kind op|size)
};

struct Ran {  // an executed op, for the power model
  int64_t start, end;
  int power_class;
};

struct Stream {
  std::deque<Op> q;
  uint64_t enqueued = 0;
  uint64_t completed = 0;
  std::vector<int64_t> ends;  // modelled end (raw ns) of every completed op, in order
};

struct Device {
  std::mutex m;
  std::condition_variable cv;
  Stream s[2];
  bool stop = false;
  int32_t device_id = 0;
  bool blocking_mpi = false;
  bool modelled_collectives = false;  // end = last modelled arrival + transfer, nothing real
  int64_t epoch = 0;  // raw ns before which no op starts (a common start on one host)
  // The emulated hardware has one physical time; the ranks' raw clocks may not (other hosts,
  // or the time namespaces of the clock tests). physical = raw + phys_offset (rank 0's clock).
  int64_t phys_offset = 0;
  std::vector<Ran> ran;  // every executed op (both streams), for the power model
};

// Sleeps between MPI_Test calls until `req` completes: ranks that wait must not spin on the shared
// cores (a spinning waiter takes the CPU the ranks it waits for need).
void idle_wait(MPI_Request* req) {
  for (int done = 0;;) {
    MPI_Test(req, &done, MPI_STATUS_IGNORE);
    if (done) return;
    sleep_for_ns(20000);
  }
}

// Each rank's raw-clock offset to rank 0 by min-RTT ping-pong, once at start-up. This is the
// emulator's own physics (modelled times compared across ranks), not the measurement: the
// collector aligns the recorded clocks independently. Its error (up to half the best round trip)
// is a per-rank constant in every modelled collective end, which no completion fit can tell from
// a clock offset, so it must stay small on a loaded machine too: ranks not being measured wait
// idly for their turn and at the end (busy-waiting ranks took the measured pair's CPUs: errors
// up to 1 ms, seen in test_run_timens.sh under load), and rank 0 keeps exchanging, past 30 timed
// rounds, until a round trip under 20 µs or 300 rounds or 100 ms per peer.
int64_t physical_offset(MPI_Comm comm, int64_t* error_ns) {
  *error_ns = 0;
  if (g_spawn) return 0;  // one host, one CLOCK_MONOTONIC_RAW
  int rank = 0, n = 1;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &n);
  constexpr int kWarm = 3, kRounds = 30, kMaxRounds = 300, kTag = 7701;
  constexpr int64_t kGoodRtt = 20000, kMaxNs = 100000000;
  int64_t off = 0;
  if (rank == 0) {
    for (int p = 1; p < n; ++p) {
      int64_t best_rtt = INT64_MAX, best = 0;
      const int64_t t_begin = raw_now();
      for (int k = 0;; ++k) {
        int64_t t1 = raw_now(), tw = 0;
        if (k >= kWarm + kRounds &&
            (best_rtt <= kGoodRtt || k >= kMaxRounds || t1 - t_begin > kMaxNs)) {
          t1 = -1;  // tells the peer the exchanges are over
          MPI_Send(&t1, 1, MPI_INT64_T, p, kTag, comm);
          break;
        }
        MPI_Send(&t1, 1, MPI_INT64_T, p, kTag, comm);
        MPI_Recv(&tw, 1, MPI_INT64_T, p, kTag, comm, MPI_STATUS_IGNORE);
        int64_t rtt = raw_now() - t1;
        if (k >= kWarm && rtt < best_rtt) best_rtt = rtt, best = t1 + rtt / 2 - tw;
      }
      const int64_t result[2] = {best, best_rtt / 2};
      MPI_Send(result, 2, MPI_INT64_T, p, kTag + 1, comm);
    }
  } else {
    for (int k = 0;; ++k) {
      int64_t t1 = 0;
      if (k == 0) {  // our turn comes after the lower ranks': wait for it idly
        MPI_Request req;
        MPI_Irecv(&t1, 1, MPI_INT64_T, 0, kTag, comm, &req);
        idle_wait(&req);
      } else {
        MPI_Recv(&t1, 1, MPI_INT64_T, 0, kTag, comm, MPI_STATUS_IGNORE);
      }
      if (t1 < 0) break;
      int64_t tw = raw_now();
      MPI_Send(&tw, 1, MPI_INT64_T, 0, kTag, comm);
    }
    int64_t result[2] = {0, 0};
    MPI_Recv(result, 2, MPI_INT64_T, 0, kTag + 1, comm, MPI_STATUS_IGNORE);
    off = result[0], *error_ns = result[1];
  }
  MPI_Request done;
  MPI_Ibarrier(comm, &done);
  idle_wait(&done);
  return off;
}

// The MPI call carries the synchronisation (a small payload: each rank's modelled arrival time,
// combined with MAX), the modelled transfer time carries the volume.
constexpr int kMpiElems = 64;
constexpr int64_t kPollNs = 20000;

void wait_request(MPI_Request* req, int n) {
  int done = 0;
  for (;;) {
    MPI_Testall(n, req, &done, MPI_STATUSES_IGNORE);
    if (done) return;
    sleep_for_ns(kPollNs);  // waiting ranks must not spin on the shared cores
  }
}

// Runs the collective for real and returns the latest arrival (raw ns) among its members.
int64_t run_mpi(const Device& dev, const Op& op, int64_t arrival) {
  Comm& c = *op.comm;
  const int n = std::max(c.size, 1);
  const int part = std::max(kMpiElems / n, 1);
  const int64_t phys = arrival + dev.phys_offset;  // exchanged on the common physical clock
  if (g_spawn) return shm_max(c, phys) - dev.phys_offset;
  std::vector<int64_t> send(size_t(part) * size_t(n), phys);
  std::vector<int64_t> recv(size_t(part) * size_t(n), phys);
  MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
  int nreq = 1;
  const bool block = dev.blocking_mpi;
  switch (op.coll) {
    case Coll::AllReduce:
      if (block)
        MPI_Allreduce(send.data(), recv.data(), part, MPI_INT64_T, MPI_MAX, c.comm);
      else
        MPI_Iallreduce(send.data(), recv.data(), part, MPI_INT64_T, MPI_MAX, c.comm, &req[0]);
      recv.resize(size_t(part));
      break;
    case Coll::ReduceScatter:
      if (block)
        MPI_Reduce_scatter_block(send.data(), recv.data(), part, MPI_INT64_T, MPI_MAX, c.comm);
      else
        MPI_Ireduce_scatter_block(send.data(), recv.data(), part, MPI_INT64_T, MPI_MAX, c.comm,
                                  &req[0]);
      recv.resize(size_t(part));
      break;
    case Coll::AllGather:
      if (block)
        MPI_Allgather(send.data(), part, MPI_INT64_T, recv.data(), part, MPI_INT64_T, c.comm);
      else
        MPI_Iallgather(send.data(), part, MPI_INT64_T, recv.data(), part, MPI_INT64_T, c.comm,
                       &req[0]);
      break;
    case Coll::Send:
    case Coll::Recv:
      // Like an NCCL send/recv pair, both sides complete once both are there: exchange arrivals.
      if (block) {
        MPI_Sendrecv(send.data(), 1, MPI_INT64_T, op.peer, op.tag, recv.data(), 1, MPI_INT64_T,
                     op.peer, op.tag, c.comm, MPI_STATUS_IGNORE);
      } else {
        MPI_Irecv(recv.data(), 1, MPI_INT64_T, op.peer, op.tag, c.comm, &req[0]);
        MPI_Isend(send.data(), 1, MPI_INT64_T, op.peer, op.tag, c.comm, &req[1]);
        nreq = 2;
      }
      recv.resize(1);
      break;
    default:
      return arrival;
  }
  if (!block) wait_request(req, nreq);
  int64_t latest = phys;
  for (int64_t v : recv) latest = std::max(latest, v);
  return latest - dev.phys_offset;
}

// The device timeline is modelled, anchored to real time: an op starts when its launch call has
// returned, the previous op on its stream has ended and its event dependency has ended (all in
// modelled time), and ends its modelled duration later; the thread sleeps until that end. Late
// OS wake-ups of the stream threads therefore do not leak into the records (the next sleep is
// just shorter), while everything the host does (launch costs, launch delays, synchronisation)
// is real. A collective ends its transfer time after the LAST member's arrival, which the MPI call
// (really waiting for that member) delivers; on one host every member records the same end.
void stream_main(Device& dev, int idx) {
  tight_timer_slack();
  Stream& me = dev.s[idx];
  Stream& other = dev.s[1 - idx];
  int64_t prev_end = dev.epoch;
  for (;;) {
    Op op;
    int64_t ready = 0;
    {
      std::unique_lock<std::mutex> lk(dev.m);
      dev.cv.wait(lk, [&] {
        return (dev.stop && me.q.empty()) ||
               (!me.q.empty() && other.completed >= me.q.front().dep_count);
      });
      if (me.q.empty()) return;
      op = me.q.front();
      me.q.pop_front();
      ready = std::max(op.launch_end, prev_end);
      if (op.dep_count > 0) ready = std::max(ready, other.ends[op.dep_count - 1]);
    }
    const int64_t start = ready;
    int64_t end = start + op.duration_ns;
    if (op.coll != Coll::None) {
      // The rank enters the collective (the hang and desync report's record), waits in it for
      // the others, and completes it.
      kernalyse_emu_coll_mark mark{};
      mark.comm_hash = op.comm->hash;
      mark.seq = op.seq;
      mark.collective = coll_name(op.tag_coll);
      mark.bytes = int64_t(double(op.tag_count) * kBf16);
      mark.nranks = op.comm->size;
      mark.comm_rank = op.comm->rank;
      mark.ts_ns = g_col.to_collector(raw_now());
      g_col.record(mark);
      const int64_t latest = run_mpi(dev, op, start);
      mark.state = 1;
      mark.ts_ns = g_col.to_collector(raw_now());
      g_col.record(mark);
      const int64_t done = raw_now();
      // Never before the real completion (which follows every member's real entry, so no member
      // ends before the last one started, whatever our estimate of the other clocks), nor before
      // our own arrival plus the transfer; never after the real completion plus the transfer.
      end = dev.modelled_collectives
                ? std::max(start, latest) + op.duration_ns
                : std::clamp(latest + op.duration_ns, std::max(start + op.duration_ns, done),
                             done + op.duration_ns);
    }
    sleep_until_raw(end);

    kernalyse_emu_activity a{};
    a.kind = KERNALYSE_EMU_KERNEL;
    a.device = dev.device_id;
    a.stream = kStreamId[idx];
    a.correlation = op.correlation;
    a.name = op.name;
    a.start_ns = g_col.to_collector(start);
    a.end_ns = g_col.to_collector(end);
    g_col.record(a);
    prev_end = end;
    {
      std::lock_guard<std::mutex> lk(dev.m);
      me.ends.push_back(end);
      ++me.completed;
      dev.ran.push_back({start, end, op.power_class});
    }
    dev.cv.notify_all();
  }
}

// ---------------------------------------------------------------------------------------------
// Host side

struct Host {
  Device& dev;
  const Options& o;
  std::mt19937_64 rng;
  std::normal_distribution<double> noise{0.0, 1.0};
  double compute_factor = 1.0;
  int64_t launch_cost_ns = 0;
  int64_t correlation = 0;
  int64_t tid = 0;
  int world_rank = 0;
  int step = 0;
  bool planted = false;  // --hang-rank: done once

  Host(Device& d, const Options& opt, uint64_t seed) : dev(d), o(opt), rng(seed) {}

  int64_t jittered(double seconds, double factor) {
    double j = o.jitter > 0 ? std::clamp(1.0 + o.jitter * noise(rng), 0.05, 3.0) : 1.0;
    return to_ns(seconds * factor * j, o.time_scale);
  }

  void push(int idx, Op op, const char* api) {
    kernalyse_emu_launch l{};
    // The launch call itself is CPU work on the host thread (a few us): spin, do not sleep.
    const int64_t launch_start = raw_now();
    while (raw_now() < launch_start + launch_cost_ns) {
    }
    l.start_ns = g_col.to_collector(launch_start);
    op.correlation = ++correlation;
    l.correlation = op.correlation;
    l.thread = tid;
    l.name = api;
    if (op.coll != Coll::None) {
      Comm& c = *op.comm;
      kernalyse_emu_nccl n{};
      n.correlation = op.correlation;
      n.comm_hash = c.hash;
      n.collective = coll_name(op.tag_coll);
      n.seq = op.seq = c.seq++;
      n.count = op.tag_count;
      n.dtype = "BFloat16";
      n.bytes = int64_t(double(op.tag_count) * kBf16);
      n.nranks = c.size;
      n.peer = op.peer;
      n.algo = op.peer >= 0 ? "" : "RING";
      n.proto = "LL";
      n.n_channels = -1;  // the emulated device has no channels
      n.comm_rank = c.rank;
      g_col.record(n);
    }
    op.launch_end = raw_now();
    l.end_ns = g_col.to_collector(op.launch_end);
    {
      std::lock_guard<std::mutex> lk(dev.m);
      op.dep_count =
          dev.s[1 - idx].enqueued;  // event wait on everything enqueued on the other stream
      dev.s[idx].q.push_back(op);
      ++dev.s[idx].enqueued;
    }
    dev.cv.notify_all();
    g_col.record(l);
  }

  void kernel(const char* name, double seconds) {
    Op op;
    op.name = name;
    op.duration_ns = jittered(seconds, compute_factor);
    op.power_class = name == kFlash                          ? kAttention
                     : (name == kLayerNorm || name == kSilu) ? kMemory
                                                             : kGemm;
    push(kCompute, op, "cudaLaunchKernel");
  }

  void collective(Coll c, Comm& comm, int64_t count, double seconds, int peer = -1, int tag = 0) {
    Op op;
    op.coll = c;
    op.comm = &comm;
    op.peer = peer;
    op.tag = tag;
    op.count = count;
    op.duration_ns = jittered(seconds, 1.0);
    op.power_class = kComm;
    op.tag_coll = c;
    op.tag_count = count;
    if (!planted && world_rank == o.hang_rank && step == o.hang_step && c != Coll::Send &&
        c != Coll::Recv) {
      planted = true;
      if (o.hang_kind == "skip") {
        // Never enters it: stalls in host code (as a rank stuck in a data loader or on another
        // code path would), while the others wait in the collective. Until killed.
        std::fprintf(stderr, "vicuna_tp: rank %d skips step %d's %s and stalls (--hang-rank)\n",
                     world_rank, step, coll_name(c));
        for (;;) sleep(1);
      }
      if (o.hang_kind == "op")
        op.tag_coll = c == Coll::AllReduce ? Coll::AllGather : Coll::AllReduce;
      if (o.hang_kind == "size") op.tag_count = count * 2;
      std::fprintf(stderr, "vicuna_tp: rank %d issues step %d's %s as %s of %lld elements\n",
                   world_rank, step, coll_name(c), coll_name(op.tag_coll),
                   static_cast<long long>(op.tag_count));
    }
    const char* api = "";
    switch (c) {
      case Coll::AllReduce:
        op.name = kNcclAllReduce;
        api = "ncclAllReduce";
        break;
      case Coll::AllGather:
        op.name = kNcclAllGather;
        api = "ncclAllGather";
        break;
      case Coll::ReduceScatter:
        op.name = kNcclReduceScatter;
        api = "ncclReduceScatter";
        break;
      case Coll::Send:
        op.name = kNcclSendRecv;
        api = "ncclSend";
        break;
      case Coll::Recv:
        op.name = kNcclSendRecv;
        api = "ncclRecv";
        break;
      default:
        break;
    }
    push(kNccl, op, api);
  }

  struct Mark {
    uint64_t n[2] = {0, 0};
  };
  Mark mark() {
    std::lock_guard<std::mutex> lk(dev.m);
    return Mark{{dev.s[0].enqueued, dev.s[1].enqueued}};
  }
  // Wait until everything enqueued before `m` has completed (an event synchronize).
  void wait_for(const Mark& m) {
    std::unique_lock<std::mutex> lk(dev.m);
    dev.cv.wait(lk, [&] { return dev.s[0].completed >= m.n[0] && dev.s[1].completed >= m.n[1]; });
  }
  void synchronize() { wait_for(mark()); }
};

// Shapes of one rank's share of the model.
struct Shapes {
  double m;    // tokens per step
  double h;    // hidden
  double ffn;  // SwiGLU intermediate (full)
  double vocab;
  int tp;
  int batch;
  double seq;
};

struct OpTimes {  // seconds before kEmuSlowdown and --time-scale
  double ln, ln_sp, qkv, flash, out, fc1, act, fc2, lm_head;
  double ar, rs, ag, logits_ag, p2p;
};

OpTimes model(const Shapes& s, bool sp) {
  OpTimes t{};
  const double tp = s.tp;
  const double m_ln = sp ? s.m / tp : s.m;
  t.ln = mem_s(s.m * s.h * kBf16 * 2);
  t.ln_sp = mem_s(m_ln * s.h * kBf16 * 2);
  t.qkv = gemm_s(s.m, 3.0 * s.h / tp, s.h);
  // causal flash attention: QK^T and PV, half the score matrix
  t.flash = 4.0 * s.batch * s.seq * s.seq * (s.h / tp) * 0.5 / kFlashFlops;
  t.out = gemm_s(s.m, s.h, s.h / tp);
  t.fc1 = gemm_s(s.m, 2.0 * s.ffn / tp, s.h);
  t.act = mem_s(s.m * (s.ffn / tp) * kBf16 * 3);
  t.fc2 = gemm_s(s.m, s.h, s.ffn / tp);
  t.lm_head = gemm_s(s.batch, s.vocab / tp, s.h);  // logits of each sequence's last position
  const double act_bytes = s.m * s.h * kBf16;
  t.ar = allreduce_s(act_bytes, s.tp);
  t.rs = gather_s(act_bytes, s.tp);
  t.ag = gather_s(act_bytes, s.tp);
  t.logits_ag = gather_s(s.batch * s.vocab * kBf16, s.tp);
  t.p2p = p2p_s(sp ? act_bytes / tp : act_bytes);
  return t;
}

// The emulated NVML sampler. The device's power at t is the idle floor plus, for each op running
// at t, its class's watts above idle. Samples are taken every `period` from a random phase before
// the device's epoch until the first one at or after its last op's end, as instantaneous readings
// (plus noise),
// and reported as gpu_power_mw counters. They are computed from the modelled timeline once the
// device has stopped (the timeline is only final then); the timestamps are those of the readings.
// truth[c] receives the exact energy (J) of class c with the attribution the analysis uses over
// the sampled window: each instant's power split equally among the ops running then, idle apart.
void sample_power(const Device& dev, const Options& o, uint64_t seed, double truth[6]) {
  for (int c = 0; c < 6; ++c) truth[c] = 0;
  if (o.power_ms <= 0 || dev.ran.empty()) return;
  const int64_t period = std::max<int64_t>(1000, std::llround(o.power_ms * 1e6));
  std::mt19937_64 rng(seed ^ 0x5EED5EEDull);
  std::normal_distribution<double> noise(0.0, 1.0);
  int64_t last = dev.epoch;
  for (const Ran& r : dev.ran) last = std::max(last, r.end);
  const int64_t first = dev.epoch - int64_t(rng() % uint64_t(period));
  // One sweep over the ops' start (+class) and end (-class) events and the sample times.
  std::vector<std::pair<int64_t, int>> ev;
  ev.reserve(2 * dev.ran.size());
  for (const Ran& r : dev.ran)
    ev.push_back({r.start, r.power_class}), ev.push_back({r.end, -r.power_class});
  std::sort(ev.begin(), ev.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  int running[5] = {0, 0, 0, 0, 0};
  size_t i = 0;
  auto apply_upto = [&](int64_t t) {
    for (; i < ev.size() && ev[i].first <= t; ++i)
      running[std::abs(ev[i].second)] += ev[i].second > 0 ? 1 : -1;
  };
  auto watts_now = [&] {
    double w = o.watts[kIdle];
    for (int c = 1; c < 5; ++c) w += running[c] * (o.watts[c] - o.watts[kIdle]);
    return w;
  };
  int64_t cur = first, next_sample = first;
  apply_upto(cur);
  for (;;) {
    if (cur == next_sample) {
      const double w = std::max(0.0, watts_now() + o.power_noise_w * noise(rng));
      g_col.record(kernalyse_emu_counter{g_col.to_collector(cur), dev.device_id, "gpu_power_mw",
                                         int64_t(std::llround(w * 1000.0))});
      if (cur >= last) break;
      next_sample += period;
    }
    const int64_t next = i < ev.size() ? std::min(next_sample, ev[i].first) : next_sample;
    const int n = running[1] + running[2] + running[3] + running[4];
    const double joules = watts_now() * double(next - cur) * 1e-9;
    truth[5] += joules;
    if (n == 0) truth[kIdle] += joules;
    for (int c = 1; c < 5 && n > 0; ++c) truth[c] += joules * running[c] / n;
    cur = next;
    apply_upto(cur);
  }
}

// --spawn N: the parent forks the workers and waits for them; each child returns (true) to run
// as rank r. The parent forwards SIGTERM/SIGINT to them and exits with the first failure.
pid_t g_kids[kShmMaxRanks];
int g_nkids = 0;
void forward_to_kids(int sig) {
  for (int k = 0; k < g_nkids; ++k) kill(g_kids[k], sig);
}

bool spawn_workers(int n, int* parent_rc) {
  void* mem =
      mmap(nullptr, sizeof(ShmArea), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    std::perror("vicuna_tp: mmap");
    *parent_rc = 2;
    return false;
  }
  g_shm = new (mem) ShmArea();
  for (int r = 0; r < n; ++r) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("vicuna_tp: fork");
      forward_to_kids(SIGTERM);
      *parent_rc = 2;
      return false;
    }
    if (pid == 0) {
      // What torch.multiprocessing / vLLM workers get: the collector numbers ranks by RANK.
      setenv("RANK", std::to_string(r).c_str(), 1);
      setenv("LOCAL_RANK", std::to_string(r).c_str(), 1);
      setenv("WORLD_SIZE", std::to_string(n).c_str(), 1);
      setenv("LOCAL_WORLD_SIZE", std::to_string(n).c_str(), 1);
      g_spawn = true;
      g_world.size = n;
      g_world.rank = r;
      g_world.shm = 0;
      g_world.hash = fnv1a("vicuna_tp/world");
      return true;
    }
    g_kids[g_nkids++] = pid;
  }
  struct sigaction sa {};
  sa.sa_handler = forward_to_kids;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  int rc = 0;
  for (int k = 0; k < g_nkids; ++k) {
    int st = 0;
    while (waitpid(g_kids[k], &st, 0) < 0 && errno == EINTR) {
    }
    const int krc = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (rc == 0) rc = krc;
  }
  *parent_rc = rc;
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  std::string err = parse(argc, argv, o);
  int provided = MPI_THREAD_MULTIPLE;
  int world_rank = 0, world_size = 1;
  if (err.empty() && o.spawn > 0) {
    int rc = 0;
    if (!spawn_workers(o.spawn, &rc)) return rc;
    world_rank = g_world.rank;
    world_size = g_world.size;
  } else {
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &world_size);
  }
  auto finalize = [&] {
    if (!g_spawn) MPI_Finalize();
  };
  if (!err.empty()) {
    bool help = err == "help";
    if (world_rank == 0) {
      if (!help) std::fprintf(stderr, "vicuna_tp: %s\n", err.c_str());
      std::fputs(kUsage, help ? stdout : stderr);
    }
    finalize();
    return help ? 0 : 2;
  }
  // Only the NCCL-stream thread calls MPI while the device runs; the main thread calls it before
  // the stream threads start and after they are joined, so SERIALIZED suffices.
  if (provided < MPI_THREAD_SERIALIZED) {
    if (world_rank == 0)
      std::fprintf(stderr, "vicuna_tp: MPI provides thread level %d, need SERIALIZED or better\n",
                   provided);
    MPI_Abort(MPI_COMM_WORLD, 3);
  }
  if (o.pp == 2 && (world_size % 2 != 0)) {
    if (world_rank == 0) std::fprintf(stderr, "vicuna_tp: --pp 2 needs an even number of ranks\n");
    finalize();
    return 2;
  }

  tight_timer_slack();
  g_col.lookup();
  g_col.calibrate();

  const int half = world_size / o.pp;
  const int stage = world_rank / half;
  // Shared-memory rows (--spawn): 0 the world, 1 + stage the tensor-parallel groups, 3 + j the
  // pipeline pairs.
  Comm tp = make_comm(
      "tp", stage, world_rank, [&](int r) { return r / half; }, 1 + stage);
  Comm pp;
  if (o.pp == 2)
    pp = make_comm(
        "pp", world_rank % half, world_rank, [&](int r) { return r % half; },
        3 + world_rank % half);

  Shapes sh{};
  sh.tp = tp.size;
  sh.batch = o.batch;
  sh.seq = o.seq_len;
  sh.m = double(o.batch) * o.seq_len;
  sh.h = o.hidden;
  sh.ffn = std::round(o.hidden * 43.0 / 16.0 / 256.0) * 256.0;  // 11008 for 4096
  sh.vocab = o.vocab;
  const OpTimes t = model(sh, o.sequence_parallel);

  if (o.print_model && world_rank == 0) {
    auto ms = [&](double s) { return double(to_ns(s, o.time_scale)) / 1e6; };
    std::fprintf(stderr,
                 "vicuna_tp model (ms, tp %d, tokens %.0f, hidden %.0f, ffn %.0f, x%.0f slowdown, "
                 "time-scale %g):\n  layernorm %.3f%s  qkv %.3f  flash %.3f  out %.3f  fc1 %.3f  "
                 "silu %.3f  fc2 %.3f  lm_head %.3f\n  allreduce %.3f  reduce_scatter %.3f  "
                 "all_gather %.3f  logits_all_gather %.3f  send/recv %.3f  launch %.4f (host)\n",
                 sh.tp, sh.m, sh.h, sh.ffn, kEmuSlowdown, o.time_scale,
                 ms(o.sequence_parallel ? t.ln_sp : t.ln),
                 o.sequence_parallel ? " (sequence shard)" : "", ms(t.qkv), ms(t.flash), ms(t.out),
                 ms(t.fc1), ms(t.act), ms(t.fc2), ms(t.lm_head), ms(t.ar), ms(t.rs), ms(t.ag),
                 ms(t.logits_ag), ms(t.p2p), kLaunchCost * o.time_scale * 1e3);
  }

  Device dev;
  dev.blocking_mpi = o.blocking_mpi;
  dev.modelled_collectives = o.modelled_collectives;
  {
    const char* lr = std::getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (!lr) lr = std::getenv("SLURM_LOCALID");
    if (!lr) lr = std::getenv("LOCAL_RANK");
    dev.device_id = lr ? std::atoi(lr) : 0;
  }

  uint64_t seed = o.seed * 0x9E3779B97F4A7C15ull + uint64_t(world_rank) * 0xBF58476D1CE4E5B9ull + 1;
  Host host(dev, o, seed);
  host.tid = os_tid();
  host.world_rank = world_rank;
  host.launch_cost_ns = int64_t(std::llround(kLaunchCost * o.time_scale * 1e9));
  if (world_rank == o.slow_rank) host.compute_factor = o.slow_factor;
  const int delay_rank = o.launch_delay_rank != -2 ? o.launch_delay_rank : o.slow_rank;
  const bool delayed = o.launch_delay_us > 0 && (delay_rank < 0 || delay_rank == world_rank);
  const int64_t launch_delay_ns =
      delayed ? int64_t(std::llround(o.launch_delay_us * 1e3 * o.time_scale)) : 0;

  // Layers of this pipeline stage.
  const int first_layer = o.pp == 2 ? stage * (o.layers / 2) : 0;
  const int last_layer = o.pp == 2 && stage == 0 ? o.layers / 2 : o.layers;
  const bool last_stage = stage == o.pp - 1;
  const int64_t act_elems = int64_t(sh.m) * o.hidden;
  const int64_t shard_elems = act_elems / std::max(tp.size, 1);

  // The device starts once the first layer is launched, at a common moment: the latest rank's
  // clock plus 2 ms, so that the first ops of every rank start together although the ranks leave
  // MPI_Allreduce at different moments (bounded for ranks on other hosts, whose raw clocks are not
  // ours). Until then the main thread is the only MPI caller; afterwards only the NCCL stream.
  std::thread compute_thread, nccl_thread;
  bool started = false;
  auto start_device = [&] {
    if (started) return;
    started = true;
    const int64_t mine = raw_now();
    const int64_t mine_phys = mine + dev.phys_offset;
    const int64_t latest = world_max(mine_phys);
    dev.epoch = std::clamp(latest - dev.phys_offset + 2000000, mine, raw_now() + 50000000);
    compute_thread = std::thread(stream_main, std::ref(dev), int(kCompute));
    nccl_thread = std::thread(stream_main, std::ref(dev), int(kNccl));
  };
  int64_t phys_error = 0;
  dev.phys_offset = physical_offset(MPI_COMM_WORLD, &phys_error);
  if (o.print_offset)
    std::fprintf(stderr, "vicuna_tp: rank %d emulator clock offset %lld ns +- %lld ns\n",
                 world_rank, static_cast<long long>(dev.phys_offset),
                 static_cast<long long>(phys_error));
  world_barrier();

  // Device memory, as CUPTI's allocation records would show it: this rank's weight shards once,
  // then an activation workspace per step (allocated at the step's start, freed at its end).
  const int64_t weight_bytes = int64_t(double(last_layer - first_layer) *
                                       (4.0 * sh.h * sh.h + 3.0 * sh.h * sh.ffn) / tp.size * kBf16);
  const int64_t workspace_bytes = int64_t(double(act_elems) * 8.0 * kBf16);
  g_col.record(
      kernalyse_emu_memory{g_col.to_collector(raw_now()), 0, -1, weight_bytes, 0x7f0000000000ull});
  const int64_t t0 = raw_now();
  Host::Mark prev_step;
  for (int step = 0; step < o.steps; ++step) {
    // The host-side step range, as PyTorch's profiler marks it (ProfilerStep#N): GPU work joins
    // its step through its launch.
    const int64_t step_start = raw_now();
    host.step = step;
    g_col.record(kernalyse_emu_memory{g_col.to_collector(step_start), 0, 0, workspace_bytes,
                                      0x7f1000000000ull});
    if (o.pp == 2 && stage == 1)
      host.collective(Coll::Recv, pp, o.sequence_parallel ? shard_elems : act_elems, t.p2p, 0,
                      step);
    // Each block: norm in (sequence-parallel: on the shard, then all-gather), column- then
    // row-parallel work, reduce out (all-reduce, or reduce-scatter back to the shard).
    auto norm_in = [&] {
      if (o.sequence_parallel) {
        host.kernel(kLayerNorm, t.ln_sp);
        host.collective(Coll::AllGather, tp, shard_elems, t.ag);
      } else {
        host.kernel(kLayerNorm, t.ln);
      }
    };
    auto reduce_out = [&] {
      if (o.sequence_parallel)
        host.collective(Coll::ReduceScatter, tp, shard_elems, t.rs);
      else
        host.collective(Coll::AllReduce, tp, act_elems, t.ar);
    };
    // NVTX-like ranges per layer and block, as a model annotates them (Megatron, vLLM): the
    // store's --ranges analysis attributes each launched kernel to its layer.
    const int64_t host_tid = host.tid;  // the thread the launches are recorded on
    auto range = [&](const std::string& name, int64_t start) {
      g_col.record(kernalyse_emu_range{g_col.to_collector(start), g_col.to_collector(raw_now()),
                                       host_tid, name.c_str()});
    };
    for (int layer = first_layer; layer < last_layer; ++layer) {
      if (launch_delay_ns > 0) sleep_for_ns(launch_delay_ns);
      const int64_t layer_start = raw_now();
      norm_in();  // attention block
      host.kernel(kGemmColumn, t.qkv);
      host.kernel(kFlash, t.flash);
      host.kernel(kGemmRow, t.out);
      reduce_out();
      range("attn", layer_start);
      const int64_t mlp_start = raw_now();
      norm_in();  // MLP block
      host.kernel(kGemmColumn, t.fc1);
      host.kernel(kSilu, t.act);
      host.kernel(kGemmRow, t.fc2);
      reduce_out();
      range("mlp", mlp_start);
      range("layer " + std::to_string(layer), layer_start);
      start_device();
    }
    if (last_stage) {
      host.kernel(kLayerNorm, o.sequence_parallel ? t.ln_sp : t.ln);
      host.kernel(kGemmSkinny, t.lm_head);
      const int64_t logit_elems = int64_t(o.batch) * (o.vocab / std::max(tp.size, 1));
      host.collective(Coll::AllGather, tp, logit_elems, t.logits_ag);
    } else {
      host.collective(Coll::Send, pp, o.sequence_parallel ? shard_elems : act_elems, t.p2p, 1,
                      step);
    }
    // The host consumes each step's logits one step late (async output processing): it runs at
    // most one step ahead of the device, and its wake-up from the sync never gates the device.
    start_device();
    Host::Mark this_step = host.mark();
    if (step > 0) host.wait_for(prev_step);
    prev_step = this_step;
    g_col.record(kernalyse_emu_memory{g_col.to_collector(raw_now()), 0, 0, -workspace_bytes,
                                      0x7f1000000000ull});
    const std::string step_name = "ProfilerStep#" + std::to_string(step);
    g_col.record(kernalyse_emu_range{g_col.to_collector(step_start), g_col.to_collector(raw_now()),
                                     static_cast<int64_t>(syscall(SYS_gettid)), step_name.c_str()});
  }
  host.synchronize();
  const int64_t elapsed = raw_now() - t0;

  {
    std::lock_guard<std::mutex> lk(dev.m);
    dev.stop = true;
  }
  dev.cv.notify_all();
  compute_thread.join();
  nccl_thread.join();
  double truth[6];
  sample_power(dev, o, seed, truth);
  std::vector<double> all_truth(size_t(world_size) * 6);
  if (g_spawn) {
    std::copy(truth, truth + 6, g_shm->truth[world_rank]);
    world_barrier();  // every worker's truth is in place
    for (int r = 0; r < world_size; ++r)
      std::copy(g_shm->truth[r], g_shm->truth[r] + 6, all_truth.begin() + r * 6);
  } else {
    MPI_Gather(truth, 6, MPI_DOUBLE, all_truth.data(), 6, MPI_DOUBLE, 0, MPI_COMM_WORLD);
  }
  if (world_rank == 0 && !o.power_truth.empty()) {
    // {"total_j": .., "idle_j": .., "classes": {"gemm": ..}, "ranks": [{"rank": 0, ...}]}
    FILE* f = std::fopen(o.power_truth.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "vicuna_tp: %s: cannot write the power truth\n", o.power_truth.c_str());
    } else {
      double sum[6] = {0, 0, 0, 0, 0, 0};
      for (int r = 0; r < world_size; ++r)
        for (int c = 0; c < 6; ++c) sum[c] += all_truth[size_t(r) * 6 + size_t(c)];
      std::fprintf(f, "{\"period_ms\": %.6f, \"total_j\": %.9f, \"idle_j\": %.9f, \"classes\": {",
                   o.power_ms, sum[5], sum[0]);
      for (int c = 1; c < 5; ++c)
        std::fprintf(f, "%s\"%s\": %.9f", c > 1 ? ", " : "", kPowerClassName[c], sum[c]);
      std::fprintf(f, "}, \"ranks\": [");
      for (int r = 0; r < world_size; ++r)
        std::fprintf(f, "%s{\"rank\": %d, \"total_j\": %.9f, \"idle_j\": %.9f}", r ? ", " : "", r,
                     all_truth[size_t(r) * 6 + 5], all_truth[size_t(r) * 6]);
      std::fprintf(f, "]}\n");
      std::fclose(f);
    }
  }

  const int64_t max_elapsed = world_max(elapsed);
  if (world_rank == 0) {
    std::fprintf(
        stderr,
        "vicuna_tp: %d ranks (tp %d, pp %d%s), %d layers, hidden %d, %d steps, %.2f ms/step, "
        "emulated device%s%s\n",
        world_size, tp.size, o.pp, o.sequence_parallel ? ", sequence-parallel" : "", o.layers,
        o.hidden, o.steps, double(max_elapsed) / 1e6 / o.steps,
        g_col.profiled() ? ", profiled" : "", g_spawn ? ", spawned (shared memory)" : "");
  }
  if (!g_spawn) {
    MPI_Comm_free(&tp.comm);
    if (pp.comm != MPI_COMM_NULL) MPI_Comm_free(&pp.comm);
  }
  finalize();
  return o.exit_code;
}
