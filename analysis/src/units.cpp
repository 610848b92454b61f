// Display units (units.h).
#include "kernalyse/units.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>

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

}  // namespace kernalyse
