// Clock alignment over MPI: min-RTT ping-pong against rank 0 and a two-point linear drift model.
// See docs/clocks.md for the method, its error bound and its limits.
#include "kernalyse/clocksync.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <ctime>
#include <limits>
#include <stdexcept>
#include <string>

namespace kernalyse {

namespace {

constexpr int kTagPing = 0x6b63;    // rank 0 → peer: "stamp now" (payload unused)
constexpr int kTagPong = 0x6b64;    // peer → rank 0: the peer's receive stamp t_w
constexpr int kTagResult = 0x6b65;  // rank 0 → peer: {offset, rtt, t_w of the best round}
constexpr int kWarmup = 3;          // untimed exchanges per peer (first-touch, eager-path setup)
// Adaptive part: past the requested exchanges, keep going while the best round trip is above
// kGoodRttNs, up to kMaxRounds or kMaxPeerNs per peer.
constexpr int64_t kGoodRttNs = 2'000;
constexpr int kMaxRounds = 2'000;
constexpr int64_t kMaxPeerNs = 100'000'000;
constexpr int kMinExchanges = 10;

// Exchanges per peer used by the last measure_offset_to_root of this process (for the method
// string only; ClockSample does not carry it). 0 = never measured here.
std::atomic<int> g_last_exchanges{0};

void check(int rc, const char* what);

// Completes `req` without busy-polling: MPI_Test, then sleep ~20 µs. Ranks that are waiting for
// their turn (or for the others to finish) must not steal the CPU from the pair being measured:
// on an oversubscribed node a busy-polling bystander can push every round trip of a pair to
// milliseconds.
void wait_idle(MPI_Request* req, const char* what) {
  const timespec nap{0, 20'000};
  for (;;) {
    int done = 0;
    check(MPI_Test(req, &done, MPI_STATUS_IGNORE), what);
    if (done) return;
    nanosleep(&nap, nullptr);
  }
}

void check(int rc, const char* what) {
  if (rc != MPI_SUCCESS) {
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    throw std::runtime_error(std::string("clocksync: ") + what + ": " + std::string(msg, len));
  }
}

}  // namespace

int64_t now_raw_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

ClockSample measure_offset_to_root(MPI_Comm comm, int exchanges) {
  exchanges = std::max(exchanges, kMinExchanges);
  g_last_exchanges.store(exchanges, std::memory_order_relaxed);

  // A private communicator: the ping-pong cannot match (or be matched by) the caller's messages.
  MPI_Comm cc = MPI_COMM_NULL;
  check(MPI_Comm_dup(comm, &cc), "MPI_Comm_dup");
  int rank = 0, size = 1;
  MPI_Comm_rank(cc, &rank);
  MPI_Comm_size(cc, &size);
  const int rounds = kWarmup + exchanges;

  ClockSample out;
  if (rank == 0) {
    for (int peer = 1; peer < size; ++peer) {
      int64_t best_rtt = std::numeric_limits<int64_t>::max();
      int64_t best_t1 = 0, best_tw = 0;
      const int64_t begin = now_raw_ns();
      // At least `rounds`; then more while the best round trip is still poor (a descheduled
      // rank on a shared machine), within a per-peer time and round budget.
      for (int i = 0;; ++i) {
        if (i >= rounds &&
            (best_rtt <= kGoodRttNs || i >= kMaxRounds || now_raw_ns() - begin >= kMaxPeerNs))
          break;
        int64_t tw = 0;
        const int64_t t1 = now_raw_ns();
        const int64_t ping[2] = {t1, 1};
        check(MPI_Send(ping, 2, MPI_INT64_T, peer, kTagPing, cc), "MPI_Send ping");
        check(MPI_Recv(&tw, 1, MPI_INT64_T, peer, kTagPong, cc, MPI_STATUS_IGNORE),
              "MPI_Recv pong");
        const int64_t t4 = now_raw_ns();
        if (i < kWarmup) continue;
        const int64_t rtt = t4 - t1;
        if (rtt < best_rtt) {
          best_rtt = rtt;
          best_t1 = t1;
          best_tw = tw;
        }
      }
      const int64_t stop[2] = {0, 0};
      check(MPI_Send(stop, 2, MPI_INT64_T, peer, kTagPing, cc), "MPI_Send stop");
      // θ (rank 0 − peer) = t1 + RTT/2 − t_w, rounded to the nearest ns. The differences are
      // taken first: under libfaketime a peer's raw clock can read ~1.8e18 ns.
      const int64_t twice = 2 * (best_t1 - best_tw) + best_rtt;
      const int64_t theta = twice >= 0 ? (twice + 1) / 2 : -((-twice + 1) / 2);
      const int64_t result[3] = {theta, best_rtt, best_tw};
      check(MPI_Send(result, 3, MPI_INT64_T, peer, kTagResult, cc), "MPI_Send result");
    }
    out = ClockSample{now_raw_ns(), 0, 0};
  } else {
    for (int i = 0;; ++i) {
      int64_t ping[2] = {0, 0};
      if (i == 0) {  // wait for this peer's turn idly; the warm-up rounds absorb the wake-up
        MPI_Request req = MPI_REQUEST_NULL;
        check(MPI_Irecv(ping, 2, MPI_INT64_T, 0, kTagPing, cc, &req), "MPI_Irecv ping");
        wait_idle(&req, "MPI_Test ping");
      } else {
        check(MPI_Recv(ping, 2, MPI_INT64_T, 0, kTagPing, cc, MPI_STATUS_IGNORE), "MPI_Recv ping");
      }
      if (ping[1] == 0) break;  // rank 0 has its best round
      const int64_t tw = now_raw_ns();
      check(MPI_Send(&tw, 1, MPI_INT64_T, 0, kTagPong, cc), "MPI_Send pong");
    }
    int64_t result[3] = {0, 0, 0};
    check(MPI_Recv(result, 3, MPI_INT64_T, 0, kTagResult, cc, MPI_STATUS_IGNORE),
          "MPI_Recv result");
    out = ClockSample{result[2], result[0], result[1]};
  }
  // Leave together, and idly: a peer that is done must not busy-poll in whatever the caller does
  // next while rank 0 still measures the others.
  MPI_Request done = MPI_REQUEST_NULL;
  check(MPI_Ibarrier(cc, &done), "MPI_Ibarrier");
  wait_idle(&done, "MPI_Test barrier");
  MPI_Comm_free(&cc);
  return out;
}

ClockModel fit_clock(const ClockSample& start, const ClockSample* end) {
  return fit_clock_samples(start, end, g_last_exchanges.load(std::memory_order_relaxed));
}

}  // namespace kernalyse
