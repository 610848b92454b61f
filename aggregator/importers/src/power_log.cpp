// nvidia-smi power-log CSV importer (kernalyse/power_log.h). Every field is distrusted: field
// counts are checked per line, numbers are parsed with from_chars and range-checked before any
// arithmetic, so a fuzzed log can only be counted as malformed or refused with one message.
#include "kernalyse/power_log.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <fstream>
#include <set>
#include <sstream>

#include "kernalyse/store_io.h"
#include "kernalyse/utc.h"

namespace kernalyse {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

std::vector<std::string_view> split(std::string_view line) {
  std::vector<std::string_view> f;
  for (size_t b = 0;;) {
    const size_t c = line.find(',', b);
    f.push_back(trim(line.substr(b, c == std::string_view::npos ? std::string_view::npos : c - b)));
    if (c == std::string_view::npos) return f;
    b = c + 1;
  }
}

// An unsigned decimal of exactly `digits` digits (0 = any number of digits, at least one).
bool uint_field(std::string_view s, size_t digits, int64_t* out) {
  if (s.empty() || (digits && s.size() != digits) || s.size() > 9) return false;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) return false;
  *out = v;
  return true;
}

// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's days_from_civil).
int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// "2024/04/04 12:00:00.123" (nvidia-smi's format; '-' separators accepted too) as if it were
// UTC, in ns. Years 1970-2200 only: int64 ns cannot hold much more, and no log is older.
bool parse_timestamp(std::string_view s, int64_t* ns) {
  if (s.size() < 19 || (s[4] != '/' && s[4] != '-') || s[7] != s[4] ||
      (s[10] != ' ' && s[10] != 'T') || s[13] != ':' || s[16] != ':')
    return false;
  int64_t y, mo, d, h, mi, se, frac = 0;
  if (!uint_field(s.substr(0, 4), 4, &y) || !uint_field(s.substr(5, 2), 2, &mo) ||
      !uint_field(s.substr(8, 2), 2, &d) || !uint_field(s.substr(11, 2), 2, &h) ||
      !uint_field(s.substr(14, 2), 2, &mi) || !uint_field(s.substr(17, 2), 2, &se))
    return false;
  if (y < 1970 || y > 2200 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60)
    return false;
  std::string_view rest = s.substr(19);
  if (!rest.empty()) {
    if (rest[0] != '.' || rest.size() < 2 || rest.size() > 10) return false;
    std::string_view digits = rest.substr(1);
    if (!uint_field(digits, digits.size(), &frac)) return false;
    for (size_t i = digits.size(); i < 9; ++i) frac *= 10;
  }
  *ns = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60 + se;
  *ns = *ns * 1'000'000'000 + frac;
  return true;
}

// "250.34", "250.34 W"; "[N/A]" and friends are not numbers. mW, 0 .. 10 MW.
bool parse_watts(std::string_view s, bool units, int64_t* mw) {
  if (units) {
    if (s.size() < 2 || s.back() != 'W') return false;
    s = trim(s.substr(0, s.size() - 1));
  }
  if (s.empty() || s.size() > 32) return false;
  double w = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), w);
  if (ec != std::errc() || p != s.data() + s.size() || !std::isfinite(w) || w < 0 || w > 1e7)
    return false;
  *mw = std::llround(w * 1000.0);
  return true;
}

// Local-time offset east of UTC (s) of this process's time zone at about that local instant.
int64_t local_offset_s(int64_t local_as_utc_ns) {
  const time_t guess = static_cast<time_t>(local_as_utc_ns / 1'000'000'000);
  tm t{};
  localtime_r(&guess, &t);
  return t.tm_gmtoff;
}

}  // namespace

PowerLog parse_nvsmi_power_csv(std::string_view text, const std::string& file,
                               std::optional<int64_t> utc_offset_s) {
  PowerLog log;
  log.file = file;
  int64_t line_no = 0;
  size_t col_ts = 0, col_idx = 1, col_pw = 2, ncols = 3;
  bool units = false, seen_first = false;
  auto bad = [&](const std::string& why) {
    ++log.malformed;
    if (log.first_bad_line == 0) log.first_bad_line = line_no, log.first_bad_reason = why;
  };
  for (size_t b = 0; b < text.size();) {
    size_t e = text.find('\n', b);
    if (e == std::string_view::npos) e = text.size();
    std::string_view line = trim(text.substr(b, e - b));
    b = e + 1;
    ++line_no;
    if (line.empty()) continue;
    std::vector<std::string_view> f = split(line);
    if (!seen_first) {
      seen_first = true;
      int64_t ignored = 0;
      if (!parse_timestamp(f[0], &ignored)) {  // a header: find the columns by name
        log.header = true;
        const size_t none = f.size();
        col_ts = col_idx = col_pw = none;
        for (size_t i = 0; i < f.size(); ++i) {
          const std::string_view n = f[i];
          if (n == "timestamp")
            col_ts = i;
          else if (n == "index")
            col_idx = i;
          else if (n.rfind("power.draw", 0) == 0 && col_pw == none) {
            col_pw = i;
            units = n.find("[W]") != std::string_view::npos;
          }
        }
        std::string missing;
        if (col_ts == none) missing += " timestamp";
        if (col_idx == none) missing += " index";
        if (col_pw == none) missing += " power.draw";
        if (!missing.empty())
          throw Error(file + ":" + std::to_string(line_no) + ": no" + missing +
                      " column in the header (log with nvidia-smi "
                      "--query-gpu=timestamp,index,power.draw --format=csv)");
        ncols = f.size();
        continue;
      }
      // No header: --format=csv,noheader[,nounits] with the query's column order.
      if (f.size() < 3)
        throw Error(file + ":" + std::to_string(line_no) + ": " + std::to_string(f.size()) +
                    " column(s); a log without header needs timestamp, index, power.draw in that "
                    "order (nvidia-smi --query-gpu=timestamp,index,power.draw)");
      ncols = f.size();
      units = !f[2].empty() && f[2].back() == 'W';
    }
    ++log.lines;
    if (f.size() != ncols) {
      bad(std::to_string(f.size()) + " fields, expected " + std::to_string(ncols));
      continue;
    }
    PowerLogSample smp;
    int64_t idx = 0;
    if (!parse_timestamp(f[col_ts], &smp.ts_ns)) {
      bad("bad timestamp '" + std::string(f[col_ts].substr(0, 40)) + "'");
      continue;
    }
    if (!uint_field(f[col_idx], 0, &idx) || idx > 65535) {
      bad("bad GPU index '" + std::string(f[col_idx].substr(0, 40)) + "'");
      continue;
    }
    if (!parse_watts(f[col_pw], units, &smp.mw)) {
      bad("bad power.draw '" + std::string(f[col_pw].substr(0, 40)) + "'");
      continue;
    }
    smp.gpu = static_cast<int32_t>(idx);
    smp.ts_ns -= (utc_offset_s ? *utc_offset_s : local_offset_s(smp.ts_ns)) * 1'000'000'000;
    log.samples.push_back(smp);
  }
  return log;
}

PowerLog read_nvsmi_power_csv(const std::string& file, std::optional<int64_t> utc_offset_s) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file + ": cannot open the power log");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw Error(file + ": read error");
  PowerLog log = parse_nvsmi_power_csv(text.str(), file, utc_offset_s);
  if (log.samples.empty())
    throw Error(file + ": no power samples" +
                (log.malformed
                     ? " (" + std::to_string(log.malformed) + " malformed line(s), first at line " +
                           std::to_string(log.first_bad_line) + ": " + log.first_bad_reason + ")"
                     : std::string()));
  return log;
}

void attach_power_log(Store* s, const PowerLog& log, int32_t rank, std::optional<int32_t> gpu) {
  const RankInfo* ri = nullptr;
  for (const auto& r : s->ranks)
    if (r.rank == rank) ri = &r;
  if (!ri) throw Error(log.file + ": rank " + std::to_string(rank) + " is not in the store");
  std::set<int32_t> gpus;
  for (const auto& x : log.samples) gpus.insert(x.gpu);
  if (!gpu) {
    if (gpus.size() != 1) {
      std::string list;
      for (int32_t g : gpus) {
        if (!list.empty()) list += ',';
        list += std::to_string(g);
      }
      throw Error(log.file + ": the log has GPUs " + list + "; name one: " + log.file + "@" +
                  std::to_string(rank) + ":GPU");
    }
    gpu = *gpus.begin();
  } else if (!gpus.count(*gpu)) {
    throw Error(log.file + ": no samples of GPU " + std::to_string(*gpu) + " in the log");
  }
  int32_t device = 0;  // the rank's first CUDA device
  {
    int64_t d = 0;
    const std::string& devs = ri->devices;
    const size_t comma = devs.find(',');
    if (uint_field(devs.substr(0, comma), 0, &d) && d < 65536) device = static_cast<int32_t>(d);
  }
  int64_t lo = INT64_MAX, hi = INT64_MIN, run_lo = INT64_MAX, run_hi = INT64_MIN;
  for (const auto& x : log.samples)
    if (x.gpu == *gpu) lo = std::min(lo, x.ts_ns), hi = std::max(hi, x.ts_ns);
  const Activities& a = s->activities;
  for (size_t i = 0; i < a.size(); ++i)
    if (a.rank[i] == rank)
      run_lo = std::min(run_lo, a.start_ns[i]), run_hi = std::max(run_hi, a.end_ns[i]);
  if (run_lo > run_hi)
    throw Error(log.file + ": rank " + std::to_string(rank) +
                " has no GPU work to attach power to");
  if (hi < run_lo || lo > run_hi)
    throw Error(log.file + ": the log (" + utc_ms(lo) + " to " + utc_ms(hi) +
                ") does not overlap rank " + std::to_string(rank) + "'s run (" + utc_ms(run_lo) +
                " to " + utc_ms(run_hi) +
                "); wrong file, or another time zone (timestamps are read in TZ of this process)");
  Counters& k = s->counters;
  const uint32_t name = s->strings.intern(kCounterPower);
  Counters kept;
  for (size_t i = 0; i < k.size(); ++i) {
    if (k.rank[i] == rank && k.device[i] == device && k.name_id[i] == name) continue;
    kept.rank.push_back(k.rank[i]), kept.device.push_back(k.device[i]);
    kept.name_id.push_back(k.name_id[i]), kept.ts_ns.push_back(k.ts_ns[i]),
        kept.value.push_back(k.value[i]);
  }
  for (const auto& x : log.samples) {
    if (x.gpu != *gpu) continue;
    kept.rank.push_back(rank), kept.device.push_back(device), kept.name_id.push_back(name);
    kept.ts_ns.push_back(x.ts_ns), kept.value.push_back(x.mw);
  }
  sort_counters(kept, s->strings);
  k = std::move(kept);
}

PowerLog attach_power_log_spec(Store* store, const std::string& spec) {
  std::string file = spec;
  std::optional<int32_t> rank, gpu;
  const size_t at = spec.rfind('@');
  if (at != std::string::npos) {
    const std::string tail = spec.substr(at + 1);
    const size_t colon = tail.find(':');
    auto num = [&](const std::string& t) -> std::optional<int32_t> {
      if (t.empty() || t.size() > 6 || t.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
      return std::stoi(t);
    };
    rank = num(tail.substr(0, colon));
    if (colon != std::string::npos) gpu = num(tail.substr(colon + 1));
    if (!rank || (colon != std::string::npos && !gpu))
      throw Error("--power-log " + spec + ": expected FILE, FILE@RANK or FILE@RANK:GPU");
    file = spec.substr(0, at);
  } else if (store->ranks.size() != 1) {
    throw Error(file + ": the store has " + std::to_string(store->ranks.size()) +
                " ranks; say which one this power log belongs to: --power-log " + file + "@RANK");
  }
  PowerLog log = read_nvsmi_power_csv(file);
  attach_power_log(store, log, rank ? *rank : store->ranks.front().rank, gpu);
  return log;
}

std::string describe(const PowerLog& log) {
  std::string s = "power log " + log.file + ": " + std::to_string(log.samples.size()) + " samples";
  if (log.malformed)
    s += ", " + std::to_string(log.malformed) + " malformed line(s) skipped (first: line " +
         std::to_string(log.first_bad_line) + ", " + log.first_bad_reason + ")";
  return s;
}

}  // namespace kernalyse
