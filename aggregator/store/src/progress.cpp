// Progress bar / log lines (kernalyse/progress.h). Everything but the atomic add in advance() runs
// at most once per `check_every_` units, and check_every_ doubles while checks come faster than
// every 10 ms, so a hot loop reads the clock a few hundred times a second at most.
#include "kernalyse/progress.h"

#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

namespace kernalyse {

ProgressMode progress_mode_auto() {
  const char* term = std::getenv("TERM");
  if (::isatty(STDERR_FILENO) && !(term && std::strcmp(term, "dumb") == 0))
    return ProgressMode::Tty;
  return ProgressMode::Lines;
}

std::optional<ProgressMode> parse_progress_mode(std::string_view s) {
  if (s == "auto") return progress_mode_auto();
  if (s == "tty") return ProgressMode::Tty;
  if (s == "lines") return ProgressMode::Lines;
  if (s == "off") return ProgressMode::Off;
  return std::nullopt;
}

namespace {

constexpr int64_t kFastCheckNs = 10'000'000;  // checks closer than this widen the check interval

std::string fmt(const char* f, double v) {
  char b[32];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

// 3 significant digits at most: "4.12", "41.2", "412".
std::string sig3(double v) {
  return v < 10 ? fmt("%.2f", v) : v < 100 ? fmt("%.1f", v) : fmt("%.0f", v);
}

bool is_bytes(std::string_view unit) { return unit == "bytes"; }

}  // namespace

std::string Progress::format_amount(double v, std::string_view unit) {
  if (is_bytes(unit)) {
    if (v < 1e3) return fmt("%.0f", v) + " B";
    if (v < 1e6) return sig3(v / 1e3) + " kB";
    if (v < 1e9) return sig3(v / 1e6) + " MB";
    return sig3(v / 1e9) + " GB";
  }
  std::string u;  // built with append: GCC 12 warns (-Wrestrict, a false positive) on " " + str
  if (!unit.empty()) u.append(" ").append(unit);
  if (v < 1e4) return fmt("%.0f", v) + u;
  if (v < 1e6) return sig3(v / 1e3) + "k" + u;
  if (v < 1e9) return sig3(v / 1e6) + "M" + u;
  return sig3(v / 1e9) + "G" + u;
}

std::string Progress::format_rate(double per_s, std::string_view unit) {
  std::string r = format_amount(per_s, unit);
  return r.append("/s");
}

std::string Progress::format_duration(double s) {
  auto t = static_cast<int64_t>(std::ceil(std::max(0.0, s)));
  char b[32];
  if (t < 60)
    std::snprintf(b, sizeof b, "%llds", static_cast<long long>(t));
  else if (t < 3600)
    std::snprintf(b, sizeof b, "%lldm%02llds", static_cast<long long>(t / 60),
                  static_cast<long long>(t % 60));
  else
    std::snprintf(b, sizeof b, "%lldh%02lldm", static_cast<long long>(t / 3600),
                  static_cast<long long>(t % 3600 / 60));
  return b;
}

Progress::Progress(std::string label, int64_t total, std::string unit, ProgressMode mode,
                   std::ostream* out, Clock clock)
    : label_(std::move(label)),
      unit_(std::move(unit)),
      total_(std::max<int64_t>(total, 0)),
      mode_(mode),
      out_(out ? out : &std::cerr),
      clock_(std::move(clock)) {
  if (mode_ == ProgressMode::Off) {
    next_check_.store(INT64_MAX, std::memory_order_relaxed);
    return;
  }
  if (mode_ == ProgressMode::Tty && !out) {  // drawing on our stderr: fit its width
    winsize ws{};
    columns_ = ::ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0 ? ws.ws_col : 80;
  }
  t0_ = last_check_ = now();
  // Lines waits 5 s from the start for its time-based line; Tty draws at the first check.
  last_draw_ = mode_ == ProgressMode::Lines ? t0_ : INT64_MIN / 2;
  next_check_.store(1, std::memory_order_relaxed);
}

Progress::~Progress() {
  if (mode_ == ProgressMode::Tty && drawn_ && !finished_) emit("\n");
}

int64_t Progress::now() const {
  if (clock_) return clock_();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void Progress::emit(const std::string& s) {
  out_->write(s.data(), static_cast<std::streamsize>(s.size()));
  out_->flush();
}

std::optional<double> Progress::eta_s(int64_t done, double elapsed_s) const {
  if (total_ <= 0 || done <= 0 || elapsed_s < 0.5 || done * 100 < total_) return std::nullopt;
  double rate = static_cast<double>(done) / elapsed_s;
  return static_cast<double>(std::max<int64_t>(total_ - done, 0)) / rate;
}

std::string Progress::bar(int64_t done) const {
  std::string s;
  if (total_ > 0) {
    double f = std::clamp(static_cast<double>(done) / static_cast<double>(total_), 0.0, 1.0);
    int fill = static_cast<int>(f * kBarWidth);
    s += " [";
    s.append(static_cast<size_t>(fill), '=');
    if (fill < kBarWidth) {
      s += '>';
      s.append(static_cast<size_t>(kBarWidth - fill - 1), ' ');
    }
    // Integer percent: a floating floor would show 57 % for 0.58.
    s.append("] ")
        .append(fmt("%3.0f", static_cast<double>(std::min<int64_t>(done * 100 / total_, 100))))
        .append("%");
  } else {
    // append(), not " " + str: GCC 12 warns there (-Wrestrict, a false positive).
    s.append(" ").append(format_amount(static_cast<double>(done), unit_));
  }
  return s;
}

// A line longer than the terminal wraps, and '\r' then redraws only its last row: the label
// gives way first (keeping its end, the file name), then the line is cut.
std::string Progress::fit(const std::string& tail) const {
  size_t room = 40;
  if (columns_ > 0) room = columns_ > tail.size() + 9 ? columns_ - 1 - tail.size() : 8;
  std::string s = label_.size() <= room || room <= 3
                      ? label_
                      : std::string("...").append(label_, label_.size() - (room - 3));
  s += tail;
  if (columns_ > 1 && s.size() > columns_ - 1) s.resize(columns_ - 1);
  return s;
}

std::string Progress::tty_line(int64_t done, double elapsed_s) const {
  std::string tail = bar(done);
  if (elapsed_s >= 0.05)
    tail.append(" ").append(format_rate(static_cast<double>(done) / elapsed_s, unit_));
  if (auto eta = eta_s(done, elapsed_s)) tail.append(" ETA ").append(format_duration(*eta));
  return fit(tail);
}

void Progress::check(int64_t done, bool final) {
  std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
  if (final)
    lock.lock();
  else if (!lock.try_lock())
    return;  // another thread is drawing; it will see our units later
  if (finished_) return;
  const int64_t t = now();
  if (!final) {
    int64_t cap = total_ > 0 ? std::max<int64_t>(1, total_ / 1000) : int64_t{1} << 40;
    if (t - last_check_ < kFastCheckNs) check_every_ = std::min(check_every_ * 2, cap);
    last_check_ = t;
    next_check_.store(done + check_every_, std::memory_order_relaxed);
  }
  const double elapsed = static_cast<double>(t - t0_) / 1e9;
  const double rate = elapsed > 0 ? static_cast<double>(done) / elapsed : 0;
  if (mode_ == ProgressMode::Tty) {
    if (!final && t - last_draw_ < kRedrawNs) return;
    last_draw_ = t;
    std::string line = tty_line(done, elapsed);
    if (final) {
      // Replace rate/ETA by what it took: "... 100% 412 MB in 1.02s (404 MB/s)".
      std::string tail = total_ > 0 ? bar(done) : std::string();
      tail.append(" ").append(format_amount(static_cast<double>(done), unit_)).append(" in ");
      tail.append(fmt("%.2f", elapsed)).append("s (").append(format_rate(rate, unit_)).append(")");
      line = fit(tail);
    }
    size_t width = line.size();
    if (width < drawn_width_) line.append(drawn_width_ - width, ' ');  // wipe a longer old line
    drawn_width_ = width;
    drawn_ = true;
    emit("\r" + line + (final ? "\n" : ""));
    return;
  }
  // Lines.
  if (final) {
    emit(label_ + ": " + format_amount(static_cast<double>(done), unit_) + " done in " +
         fmt("%.2f", elapsed) + "s (" + format_rate(rate, unit_) + ")\n");
    return;
  }
  int pct = total_ > 0 ? static_cast<int>(std::min<int64_t>(done * 100 / total_, 100)) : 0;
  // Tasks done within the grace period get only their done line (CI logs stay short).
  bool decile = total_ > 0 && pct < 100 && pct >= next_decile_ * 10 && t - t0_ >= kLinesGraceNs;
  if (!decile && t - last_draw_ < kLineEveryNs) return;
  if (total_ > 0) next_decile_ = pct / 10 + 1;
  last_draw_ = t;
  std::string s = label_ + ": ";
  if (total_ > 0)
    s += std::to_string(pct) + "% (" + format_amount(static_cast<double>(done), unit_) + " of " +
         format_amount(static_cast<double>(total_), unit_) + ", ";
  else
    s += format_amount(static_cast<double>(done), unit_) + " (";
  s += format_rate(rate, unit_);
  if (auto eta = eta_s(done, elapsed)) s += ", ETA " + format_duration(*eta);
  emit(s + ")\n");
}

void Progress::finish() {
  if (mode_ == ProgressMode::Off) return;
  check(done_.load(std::memory_order_relaxed), true);
  std::lock_guard<std::mutex> lock(mu_);
  finished_ = true;
}

}  // namespace kernalyse
