// Clock alignment over MPI (docs/clocks.md). Every timestamp of a rank is CLOCK_MONOTONIC_RAW
// int64 ns; offsets to rank 0 come from ping-pong exchanges keeping the minimum round trip, taken
// at start and at end; drift is linear between the two.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>

#include "kernalyse/clockmodel.h"

namespace kernalyse {

// CLOCK_MONOTONIC_RAW in ns: not slewed by NTP; what the collector stamps and aligns.
int64_t now_raw_ns();

// Collective over `comm`: rank 0 ping-pongs with every other rank in turn, `exchanges` times
// each (>= 10), keeping the exchange with the minimum round trip. Rank 0 gets {now, 0, 0}.
ClockSample measure_offset_to_root(MPI_Comm comm, int exchanges = 20);

// `end` may be null (one sample: offset only, no drift). fit_clock_samples, quoting the
// exchanges of this process's last measure_offset_to_root in the method string.
ClockModel fit_clock(const ClockSample& start, const ClockSample* end);

}  // namespace kernalyse
