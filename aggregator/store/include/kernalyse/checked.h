// Checked integer arithmetic and the supported timestamp range: the one place every importer,
// the spool reader, the clock model and the store reader go through instead of writing `a + b`
// on values that came from a file (docs/limits.md). Signed overflow is undefined behaviour and,
// in practice, silently stores wrapped numbers; these return false instead, and the caller
// counts the record as malformed.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

namespace kernalyse {

// Timestamps (int64 ns) kernalyse keeps: |t| <= 2^62 - 1 ns (about ±146 years around the epoch).
// Inside this range the difference of any two timestamps fits in int64, so the analyses can
// subtract them freely; a record outside it is malformed (never wrapped, never clamped).
inline constexpr int64_t kMaxAbsTimeNs = (int64_t{1} << 62) - 1;

inline constexpr bool time_in_range(int64_t t) { return t >= -kMaxAbsTimeNs && t <= kMaxAbsTimeNs; }

// *out = a + b / a - b / a * b; false (and *out untouched) on overflow.
inline bool checked_add(int64_t a, int64_t b, int64_t* out) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}
inline bool checked_sub(int64_t a, int64_t b, int64_t* out) {
  int64_t r;
  if (__builtin_sub_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}
inline bool checked_mul(int64_t a, int64_t b, int64_t* out) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}
// Sizes: count * size in bytes, false past SIZE_MAX.
inline bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}
// File offsets: offset + length, false past 2^64 (a corrupt length read from a file).
inline bool checked_add(uint64_t a, uint64_t b, uint64_t* out) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return false;
  *out = r;
  return true;
}

// Totals of durations over many rows or ranks: each term fits (times are in range), but their
// sum may not with extreme input. It saturates at the int64 limits (about 292 years) instead of
// wrapping to a negative total (docs/limits.md).
inline int64_t sat_add(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_add_overflow(a, b, &r)) return r;
  return b > 0 ? INT64_MAX : INT64_MIN;
}

// a - b for quantities derived from such totals, saturating the same way.
inline int64_t sat_sub(int64_t a, int64_t b) {
  int64_t r;
  if (!__builtin_sub_overflow(a, b, &r)) return r;
  return b < 0 ? INT64_MAX : INT64_MIN;
}

// start + dur as an interval end, both in the supported time range; nullopt otherwise.
inline std::optional<int64_t> time_end(int64_t start, int64_t dur) {
  int64_t end;
  if (!time_in_range(start) || !checked_add(start, dur, &end) || !time_in_range(end))
    return std::nullopt;
  return end;
}

// A narrower integer type from an int64 read from a file; nullopt when it does not fit
// (4294967297 is not rank 1).
template <class T>  // T: a signed integer type no wider than int64
inline std::optional<T> narrow(int64_t v) {
  if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
      v > static_cast<int64_t>(std::numeric_limits<T>::max()))
    return std::nullopt;
  return static_cast<T>(v);
}

}  // namespace kernalyse
