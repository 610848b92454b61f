// kernalyse_clocksync_probe [--work-ms N] [--exchanges N]: measures every rank's clock against
// rank 0 at start and after ~N ms (default 500), fits the two-point model and prints one JSON line
// per rank on rank 0's stdout, in rank order:
//   {"rank":r,"offset_ns":θ at t0,"offset_end_ns":θ at the end sample,"drift":…,
//    "uncertainty_ns":…,"rtt_ns":worse best RTT,"t0_local_ns":…,"t1_local_ns":…,
//    "truth":[[lib_ns,sys_ns],[lib_ns,sys_ns]],"method":"…"}
// "truth" pairs, taken next to each sample, read CLOCK_MONOTONIC_RAW twice: through libc (what
// kernalyse stamps, faked under libfaketime) and through the raw syscall (which libfaketime does
// not intercept; time namespaces still apply). tests/cli/test_clock_truth.sh uses them to know the
// true offset of a rank whose clock libfaketime rescales.
#include <mpi.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "kernalyse/clocksync.h"

namespace {

int64_t sys_raw_ns() {
  timespec ts{};
  syscall(SYS_clock_gettime, CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

struct Pair {
  int64_t lib = 0, sys = 0;
};

// libc reading bracketed by two syscall readings; the narrowest bracket of 9 tries, its midpoint.
Pair truth_pair() {
  Pair best;
  int64_t best_width = INT64_MAX;
  for (int i = 0; i < 9; ++i) {
    const int64_t a = sys_raw_ns();
    const int64_t l = kernalyse::now_raw_ns();
    const int64_t b = sys_raw_ns();
    if (b - a < best_width) {
      best_width = b - a;
      best = Pair{l, a + (b - a) / 2};
    }
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int work_ms = 500, exchanges = 20;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--work-ms") == 0)
      work_ms = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--exchanges") == 0)
      exchanges = std::atoi(argv[i + 1]);
  }
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  MPI_Barrier(MPI_COMM_WORLD);
  const Pair p0 = truth_pair();
  const kernalyse::ClockSample s0 = kernalyse::measure_offset_to_root(MPI_COMM_WORLD, exchanges);
  // "Work": sleep (scaled by libfaketime on a faked rank, which is fine: only the span matters).
  timespec req{work_ms / 1000, static_cast<long>(work_ms % 1000) * 1'000'000};
  nanosleep(&req, nullptr);
  MPI_Barrier(MPI_COMM_WORLD);
  const kernalyse::ClockSample s1 = kernalyse::measure_offset_to_root(MPI_COMM_WORLD, exchanges);
  const Pair p1 = truth_pair();
  const kernalyse::ClockModel m = kernalyse::fit_clock(s0, &s1);

  constexpr int kLine = 768;
  char line[kLine];
  std::snprintf(line, kLine,
                "{\"rank\":%d,\"offset_ns\":%" PRId64 ",\"offset_end_ns\":%" PRId64
                ",\"drift\":%.12e,\"uncertainty_ns\":%" PRId64 ",\"rtt_ns\":%" PRId64
                ",\"rtt_start_ns\":%" PRId64 ",\"rtt_end_ns\":%" PRId64 ",\"t0_local_ns\":%" PRId64
                ",\"t1_local_ns\":%" PRId64 ",\"to_root_t1_ns\":%" PRId64 ",\"truth\":[[%" PRId64
                ",%" PRId64 "],[%" PRId64 ",%" PRId64 "]],\"method\":\"%s\"}",
                rank, m.offset0_ns, s1.offset_ns, m.drift, m.uncertainty_ns,
                s0.rtt_ns > s1.rtt_ns ? s0.rtt_ns : s1.rtt_ns, s0.rtt_ns, s1.rtt_ns, s0.local_ns,
                s1.local_ns, m.to_root(s1.local_ns), p0.lib, p0.sys, p1.lib, p1.sys,
                m.method.c_str());
  std::vector<char> all(rank == 0 ? static_cast<size_t>(kLine) * size : 0);
  MPI_Gather(line, kLine, MPI_CHAR, all.data(), kLine, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (rank == 0) {
    for (int r = 0; r < size; ++r) std::printf("%s\n", all.data() + static_cast<size_t>(r) * kLine);
    std::fflush(stdout);
  }
  MPI_Finalize();
  return 0;
}
