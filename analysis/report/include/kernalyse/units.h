// Display units, defined once: ns to µs for tables and JSON, durations and byte counts as text.
// Times stay int64 ns everywhere else (docs/store.md); only renderers convert.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace kernalyse {

// int64 ns → µs (the *_us columns of tables and JSON).
inline double us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

// "812 ns", "12.345 µs", "3.210 ms", "1.234 s".
std::string format_duration(int64_t ns);
// "512 B", "3.0 KiB", "1.5 MiB", "2.25 GiB".
std::string format_bytes(int64_t bytes);
// Energy: "12.3 mJ", "812.34 J", "12.35 kJ" (below 10 Wh), "12.50 Wh", "1.250 kWh".
std::string format_energy(double joules);
// Power: "850 mW", "312.5 W", "1.25 kW".
std::string format_power(double watts);
// Work and rates, decimal SI prefixes (as vendors quote peaks): "812 FLOP", "1.23 GFLOP";
// "456.7 TFLOP/s"; bandwidth "3.35 TB/s", "812.0 GB/s"; intensity "12.3 FLOP/B".
std::string format_flops(double flops);
std::string format_flop_rate(double flops_per_s);
std::string format_bandwidth(double bytes_per_s);

// "12.5" (µs), "12500ns", "12.5us", "12.5µs", "3ms", "1s" → ns (exact decimal). Throws Error.
int64_t parse_time_to_ns(std::string_view text);

// int64 ns → exact decimal µs with three fraction digits ("-0.001", "1234.567").
std::string ns_to_us_text(int64_t ns);

}  // namespace kernalyse
