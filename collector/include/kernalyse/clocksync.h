// Clock alignment over MPI (docs/clocks.md). Every timestamp of a rank is CLOCK_MONOTONIC_RAW
// int64 ns; offsets to rank 0 come from ping-pong exchanges keeping the minimum round trip, taken
// at start and at end; drift is linear between the two.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

namespace kernalyse {

// CLOCK_MONOTONIC_RAW in ns: not slewed by NTP; what the collector stamps and aligns.
int64_t now_raw_ns();

// One offset measurement: at local time `local_ns`, rank 0's clock reads local_ns + offset_ns.
struct ClockSample {
  int64_t local_ns = 0;
  int64_t offset_ns = 0;
  int64_t rtt_ns = 0;  // best (minimum) round trip; the offset's error is at most rtt_ns / 2
};

// Collective over `comm`: rank 0 ping-pongs with every other rank in turn, `exchanges` times
// each (>= 10), keeping the exchange with the minimum round trip. Rank 0 gets {now, 0, 0}.
ClockSample measure_offset_to_root(MPI_Comm comm, int exchanges = 20);

// Local raw time → run time (rank 0's raw clock), linear between two samples.
struct ClockModel {
  int64_t t0_local = 0;       // local time of the first sample
  int64_t offset0_ns = 0;     // offset at t0_local
  double drift = 0.0;         // d(offset)/d(local time), dimensionless (1e-6 = 1 ppm)
  int64_t uncertainty_ns = 0; // half the worse best round trip, plus fit residual
  std::string method;         // e.g. "mpi-pingpong min-RTT, start+end, linear drift"
  int64_t to_root(int64_t local_ns) const;
};
// `end` may be null (one sample: offset only, no drift).
ClockModel fit_clock(const ClockSample& start, const ClockSample* end);

}  // namespace kernalyse
