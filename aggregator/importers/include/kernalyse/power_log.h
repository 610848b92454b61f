// nvidia-smi power logs (docs/analyses.md, "Energy"): the CSV that
//   nvidia-smi --query-gpu=timestamp,index,power.draw --format=csv -lms 40
// writes (header line, "250.34 W" values), or its --format=csv,noheader,nounits variant (columns
// in exactly that order). Extra columns (uuid, name, ...) are allowed with a header. One importer
// per format: this file only reads this CSV. Malformed lines are counted, never fatal; a header
// without the needed columns is an Error naming the file and line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernalyse/store.h"

namespace kernalyse {

struct PowerLogSample {
  int64_t ts_ns = 0;  // Unix-epoch ns (the log's local wall clock converted to UTC)
  int32_t gpu = 0;    // nvidia-smi's GPU index
  int64_t mw = 0;     // power.draw in mW (the log's W, rounded to mW)
};

struct PowerLog {
  std::string file;
  std::vector<PowerLogSample> samples;  // in file order
  int64_t lines = 0;                    // data lines read (empty lines and the header not counted)
  int64_t malformed = 0;                // data lines skipped
  int64_t first_bad_line = 0;           // 1-based line number of the first skipped line, 0 if none
  std::string first_bad_reason;
  bool header = false;
};

// Parses the log's text. `utc_offset_s`: when set, timestamps are local time at that fixed offset
// east of UTC; when not, at the local time zone of this process (TZ) for each instant, as
// nvidia-smi printed them. Throws Error("FILE:LINE: ...") when the columns cannot be found.
PowerLog parse_nvsmi_power_csv(std::string_view text, const std::string& file,
                               std::optional<int64_t> utc_offset_s = std::nullopt);
PowerLog read_nvsmi_power_csv(const std::string& file,
                              std::optional<int64_t> utc_offset_s = std::nullopt);

// Puts the log's samples of nvidia-smi GPU `gpu` (the log's only GPU when not given) into the
// store as rank `rank`'s gpu_power_mw counter on its first device, replacing the samples the
// store had there. Throws Error naming the file when the rank is absent, the GPU is ambiguous or
// missing, or the log's time range does not overlap the rank's GPU work.
void attach_power_log(Store* s, const PowerLog& log, int32_t rank, std::optional<int32_t> gpu);

// --power-log FILE[@RANK[:GPU]]: reads the log and attaches it as RANK's power (the only rank's
// when the store has one). Returns the log read (its counts for the caller's info line).
PowerLog attach_power_log_spec(Store* s, const std::string& spec);
// "power log FILE: N samples[, M malformed line(s) skipped (first: line L, REASON)]".
std::string describe(const PowerLog& log);

}  // namespace kernalyse
