// Emulated-collection overhead: ns per record through the collector's C ABI (mutex, intern,
// append, periodic spool flush), measured inside an application run under kernalyse-run:
//   kernalyse-run -o /tmp/x.h5 build/bin/kernalyse_emu_overhead [RECORDS]
#include <dlfcn.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "kernalyse/emu.h"

static int64_t now_ns() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC_RAW, &t);
  return int64_t{t.tv_sec} * 1000000000 + t.tv_nsec;
}

int main(int argc, char** argv) {
  const int64_t n = argc > 1 ? std::atoll(argv[1]) : 2000000;
  auto rec = reinterpret_cast<kernalyse_emu_record_activity_fn>(
      dlsym(RTLD_DEFAULT, "kernalyse_emu_record_activity"));
  if (!rec) {
    std::fprintf(stderr, "run me under kernalyse-run (collector not loaded)\n");
    return 1;
  }
  const char* names[4] = {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n", "flash::flash_fwd_kernel",
                          "ncclDevKernel_AllReduce_Sum_bf16_RING_LL",
                          "vectorized_layer_norm_kernel"};
  kernalyse_emu_activity a{};
  a.kind = KERNALYSE_EMU_KERNEL;
  a.stream = 7;
  const int64_t t0 = now_ns();
  for (int64_t i = 0; i < n; ++i) {
    a.start_ns = t0 + i * 1000;
    a.end_ns = a.start_ns + 800;
    a.correlation = i;
    a.name = names[i & 3];
    rec(&a);
  }
  const int64_t t1 = now_ns();
  std::printf(
      "emulated-collection overhead: %lld records, %.1f ns per record (spool flushes included)\n",
      static_cast<long long>(n), static_cast<double>(t1 - t0) / static_cast<double>(n));
  return 0;
}
