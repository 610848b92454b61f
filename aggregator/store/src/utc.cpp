#include "kernalyse/utc.h"

#include <cstdio>
#include <ctime>

namespace kernalyse {
namespace {
std::string format(time_t sec, const char* fmt) {
  tm t{};
  gmtime_r(&sec, &t);
  char buf[48];
  std::strftime(buf, sizeof buf, fmt, &t);
  return buf;
}
}  // namespace

std::string utc_now() {
  timespec rt{};
  clock_gettime(CLOCK_REALTIME, &rt);
  return format(rt.tv_sec, "%Y-%m-%dT%H:%M:%SZ");
}

std::string utc_ms(int64_t epoch_ns) {
  int64_t ms = epoch_ns / 1'000'000;
  if (epoch_ns % 1'000'000 < 0) --ms;  // floor, so that -1 ns is ...59.999, not .-00
  int64_t sec = ms / 1000, rem = ms % 1000;
  if (rem < 0) rem += 1000, --sec;
  char out[64];
  std::snprintf(out, sizeof out, "%s.%03dZ",
                format(static_cast<time_t>(sec), "%Y-%m-%dT%H:%M:%S").c_str(),
                static_cast<int>(rem));
  return out;
}

}  // namespace kernalyse
