// The MPI-free half of clock alignment (docs/clocks.md): a rank's offset samples to rank 0 and
// the linear model fitted through them. The collector measures the samples over MPI
// (clocksync.h); the offline spool recovery (spool_store.h) refits them from the spool's Meta
// blocks without MPI.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "kernalyse/checked.h"

namespace kernalyse {

// One offset measurement: at local time `local_ns`, rank 0's clock reads local_ns + offset_ns.
struct ClockSample {
  int64_t local_ns = 0;
  int64_t offset_ns = 0;
  int64_t rtt_ns = 0;  // best (minimum) round trip; the offset's error is at most rtt_ns / 2
};

// Local raw time → run time (rank 0's raw clock), linear between two samples.
struct ClockModel {
  int64_t t0_local = 0;        // local time of the first sample
  int64_t offset0_ns = 0;      // offset at t0_local
  double drift = 0.0;          // d(offset)/d(local time), dimensionless (1e-6 = 1 ppm)
  int64_t uncertainty_ns = 0;  // half the worse best round trip, plus fit residual
  std::string method;          // e.g. "mpi-pingpong min-RTT, start+end, linear drift"
  // Checked (values come from spool files, docs/limits.md): false when a step would overflow
  // or the result leaves the supported time range; *out is then untouched.
  bool try_to_root(int64_t local_ns, int64_t* out) const {
    int64_t dt, r;
    if (!checked_sub(local_ns, t0_local, &dt)) return false;
    const double corr = drift * static_cast<double>(dt);
    if (!(std::fabs(corr) < 0x1p62)) return false;  // also NaN
    if (!checked_add(local_ns, offset0_ns, &r) || !checked_add(r, std::llround(corr), &r) ||
        !time_in_range(r))
      return false;
    *out = r;
    return true;
  }
  // For the collector's own clock readings, which are in range.
  int64_t to_root(int64_t local_ns) const {
    int64_t r = local_ns;
    try_to_root(local_ns, &r);
    return r;
  }
};

// Fits the model through `start` and, if not null, `end` (else offset only, no drift).
// `exchanges` (> 0) is only quoted in the method string.
inline ClockModel fit_clock_samples(const ClockSample& start, const ClockSample* end,
                                    int exchanges = 0) {
  ClockModel m;
  m.t0_local = start.local_ns;
  m.offset0_ns = start.offset_ns;
  // Rank 0 measures nothing: its samples have rtt 0 and offset 0.
  const bool reference = start.rtt_ns == 0 && start.offset_ns == 0 &&
                         (end == nullptr || (end->rtt_ns == 0 && end->offset_ns == 0));
  if (reference) {
    m.method = "reference (rank 0)";
    return m;
  }
  const std::string pingpong = exchanges > 0
                                   ? "mpi-pingpong min-RTT (>= " + std::to_string(exchanges) +
                                         " exchanges, more while RTT > 2 us)"
                                   : "mpi-pingpong min-RTT";
  int64_t worst_rtt = start.rtt_ns;
  int64_t d_offset = 0, d_local = 0;  // a pair whose differences overflow gives no drift
  if (end != nullptr && end->local_ns != start.local_ns &&
      checked_sub(end->offset_ns, start.offset_ns, &d_offset) &&
      checked_sub(end->local_ns, start.local_ns, &d_local)) {
    m.drift = static_cast<double>(d_offset) / static_cast<double>(d_local);
    worst_rtt = std::max(worst_rtt, end->rtt_ns);
    m.method = pingpong + " at start and end, linear drift";
  } else {
    m.method = pingpong + " at one point, no drift";
  }
  // Each offset is within RTT/2 of the truth; a line through two points has no residual.
  m.uncertainty_ns = worst_rtt / 2 + worst_rtt % 2;  // (rtt + 1) / 2 without overflow
  return m;
}

}  // namespace kernalyse
