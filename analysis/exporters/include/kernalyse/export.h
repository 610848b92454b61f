// Exports of a store: one Chrome trace-event JSON for Perfetto UI / chrome://tracing (all ranks,
// aligned), and one Kineto-style JSON per rank for HTA / TraceLens. Streaming writers: no JSON
// DOM of the events is built. Formats and conventions in docs/exports.md.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kernalyse/progress.h"
#include "kernalyse/store.h"
#include "kernalyse/units.h"  // parse_time_to_ns, ns_to_us_text

namespace kernalyse {

// What to export. Times (from/to) are ns offsets from export_base_ns(store), the run's origin
// that the Perfetto output's ts count from; an event is kept if it overlaps [from, to).
struct ExportOptions {
  std::optional<int32_t> rank;
  std::optional<int32_t> step;
  std::optional<int64_t> from_ns, to_ns;
  bool force = false;                         // replace an existing output
  ProgressMode progress = ProgressMode::Off;  // "writing <path>", in store rows visited
};

struct ExportStats {
  int64_t events = 0;    // trace events written (all files)
  int64_t flows = 0;     // flow pairs (Perfetto)
  int64_t counters = 0;  // counter samples ("ph":"C", Perfetto)
  int64_t files = 0;
};

// The run's origin for exported ts: the earliest time in the store (activities, launches,
// annotations, counters), rounded down to a whole µs; 0 for an empty store.
int64_t export_base_ns(const Store& s);

// Whether every rank's clock is as recorded (clock_method "none ...": an import not aligned). The
// Kineto export then writes each rank's own recorded base time, so that its ts are the source's.
bool clocks_as_recorded(const Store& s);

// Chrome trace-event JSON (.json, or gzip when the name ends in .gz). Written to a temporary name
// and renamed; refuses an existing file without opt.force. Throws Error.
ExportStats export_perfetto(const Store& s, const std::string& path, const ExportOptions& opt);

// Kineto-style JSON per rank: DIR/rank-<r>.json (created if absent). Throws Error.
ExportStats export_kineto(const Store& s, const std::string& dir, const ExportOptions& opt);

}  // namespace kernalyse
