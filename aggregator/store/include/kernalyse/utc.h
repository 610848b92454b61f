// UTC wall-clock text, one way for every message and attribute that prints a time of day.
#pragma once

#include <cstdint>
#include <string>

namespace kernalyse {

// Now, to the second: "2026-11-23T23:50:01Z" (the store's created_utc attribute).
std::string utc_now();

// Epoch nanoseconds to the millisecond: "2026-11-21T06:55:01.123Z". Times before 1970 floor
// (never a negative millisecond field).
std::string utc_ms(int64_t epoch_ns);

}  // namespace kernalyse
