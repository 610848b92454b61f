// Display units (units.h).
#include "kernalyse/units.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>

#include "kernalyse/checked.h"
#include "kernalyse/error.h"

namespace kernalyse {

std::string format_bytes(int64_t bytes) {
  char buf[64];
  const double v = static_cast<double>(bytes);
  if (bytes < 1024)
    std::snprintf(buf, sizeof buf, "%" PRId64 " B", bytes);
  else if (bytes < (int64_t{1} << 20))
    std::snprintf(buf, sizeof buf, "%.1f KiB", v / 1024.0);
  else if (bytes < (int64_t{1} << 30))
    std::snprintf(buf, sizeof buf, "%.1f MiB", v / 1048576.0);
  else
    std::snprintf(buf, sizeof buf, "%.2f GiB", v / 1073741824.0);
  return buf;
}

std::string format_duration(int64_t ns) {
  char buf[64];
  const double v = static_cast<double>(ns);
  const int64_t mag = ns < 0 ? -ns : ns;
  if (mag < 1000)
    std::snprintf(buf, sizeof buf, "%" PRId64 " ns", ns);
  else if (mag < 1000000)
    std::snprintf(buf, sizeof buf, "%.3f µs", v / 1e3);
  else if (mag < 1000000000)
    std::snprintf(buf, sizeof buf, "%.3f ms", v / 1e6);
  else
    std::snprintf(buf, sizeof buf, "%.3f s", v / 1e9);
  return buf;
}

std::string format_energy(double j) {
  char buf[64];
  const double mag = std::fabs(j);
  // kJ up to 10 Wh, then Wh: users compare runs in Wh / kWh, kernels in J.
  if (mag < 1.0)
    std::snprintf(buf, sizeof buf, "%.1f mJ", j * 1e3);
  else if (mag < 1e3)
    std::snprintf(buf, sizeof buf, "%.2f J", j);
  else if (mag < 3.6e4)
    std::snprintf(buf, sizeof buf, "%.2f kJ", j / 1e3);
  else if (mag < 3.6e6)
    std::snprintf(buf, sizeof buf, "%.2f Wh", j / 3.6e3);
  else
    std::snprintf(buf, sizeof buf, "%.3f kWh", j / 3.6e6);
  return buf;
}

std::string format_power(double w) {
  char buf[64];
  const double mag = std::fabs(w);
  if (mag < 1.0)
    std::snprintf(buf, sizeof buf, "%.0f mW", w * 1e3);
  else if (mag < 1e3)
    std::snprintf(buf, sizeof buf, "%.1f W", w);
  else
    std::snprintf(buf, sizeof buf, "%.2f kW", w / 1e3);
  return buf;
}

namespace {
// v with a decimal prefix (k, M, G, T, P, E) and unit; 3 significant digits at least.
std::string si(double v, const char* unit) {
  static const char* kPrefix[] = {"", "k", "M", "G", "T", "P", "E"};
  char buf[64];
  int i = 0;
  double m = std::fabs(v);
  while (m >= 1000.0 && i < 6) m /= 1000.0, v /= 1000.0, ++i;
  if (i == 0 && m == std::floor(m))
    std::snprintf(buf, sizeof buf, "%.0f %s", v, unit);
  else
    std::snprintf(buf, sizeof buf,
                  m < 10    ? "%.2f %s%s"
                  : m < 100 ? "%.1f %s%s"
                            : "%.0f %s%s",
                  v, kPrefix[i], unit);
  return buf;
}
}  // namespace

std::string format_flops(double f) { return si(f, "FLOP"); }
std::string format_flop_rate(double f) { return si(f, "FLOP/s"); }
std::string format_bandwidth(double b) { return si(b, "B/s"); }

std::string ns_to_us_text(int64_t ns) {
  char b[32];
  uint64_t u = ns < 0 ? 0 - static_cast<uint64_t>(ns) : static_cast<uint64_t>(ns);
  std::snprintf(b, sizeof b, "%s%llu.%03llu", ns < 0 ? "-" : "",
                static_cast<unsigned long long>(u / 1000),
                static_cast<unsigned long long>(u % 1000));
  return b;
}

int64_t parse_time_to_ns(std::string_view text) {
  std::string_view t = text;
  int64_t mul_num = 1000, mul_den = 1;  // ns per unit, default µs
  auto strip = [&](std::string_view suf, int64_t num, int64_t den) {
    if (t.size() >= suf.size() && t.substr(t.size() - suf.size()) == suf) {
      t.remove_suffix(suf.size());
      mul_num = num, mul_den = den;
      return true;
    }
    return false;
  };
  strip("ns", 1, 1) || strip("us", 1000, 1) || strip("\xC2\xB5s", 1000, 1) ||
      strip("ms", 1000000, 1) || strip("s", 1000000000, 1);
  // Exact decimal: integer part and up to 9 fraction digits.
  bool neg = false;
  size_t i = 0;
  if (i < t.size() && (t[i] == '-' || t[i] == '+')) neg = t[i++] == '-';
  __int128 ip = 0, frac = 0, fscale = 1;
  size_t digits = 0;
  for (; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i, ++digits) ip = ip * 10 + (t[i] - '0');
  if (i < t.size() && t[i] == '.') {
    for (++i; i < t.size() && t[i] >= '0' && t[i] <= '9'; ++i, ++digits)
      if (fscale < 1000000000000LL) frac = frac * 10 + (t[i] - '0'), fscale *= 10;
  }
  if (digits == 0 || i != t.size() || ip > (__int128)1 << 80)
    throw Error("invalid time '" + std::string(text) + "' (examples: 1500, 1500us, 1.5ms, 20ns)");
  __int128 v = ip * mul_num / mul_den + frac * mul_num / (fscale * mul_den);
  // Within the supported range (docs/limits.md), so that origin + T cannot overflow.
  if (v > kMaxAbsTimeNs) throw Error("time out of range: '" + std::string(text) + "'");
  return static_cast<int64_t>(neg ? -v : v);
}

}  // namespace kernalyse
