// Progress reporting for long imports, store writes and exports (docs/progress.md).
//
//   Progress p("writing report.html", n_events, "events", opt.progress);
//   for (...) { ...; p.advance(1); }
//   p.finish();
//
// The mode is chosen once by the CLI (progress_mode_auto(), --progress, --quiet) and passed down
// in the options structs; libraries default to Off so tests and embedders print nothing.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <iosfwd>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace kernalyse {

enum class ProgressMode : uint8_t {
  Off,    // --quiet: nothing at all
  Lines,  // not a terminal: a plain line every ~10 % (after 1 s) or 5 s, and a "done" line
  Tty,    // one line redrawn in place with '\r', at most ~10 times a second
};

// Tty if stderr is a terminal and TERM is not "dumb", else Lines.
ProgressMode progress_mode_auto();
// "auto", "tty", "lines", "off" → mode (auto resolved); nullopt for anything else.
std::optional<ProgressMode> parse_progress_mode(std::string_view s);

// One task's progress. advance() may be called from several threads at once (a multi-file
// import shares one bar); the clock is read only every `check_every` units, so the hot path is an
// atomic add and a compare. Off costs one well-predicted branch.
class Progress {
 public:
  // Monotonic time in ns; injectable for tests.
  using Clock = std::function<int64_t()>;

  // unit "bytes" is shown scaled (kB/MB/GB, rate in MB/s); any other unit is a plain count
  // ("events", "columns"), scaled with k/M/G. total 0 = unknown (no percentage or ETA).
  Progress(std::string label, int64_t total, std::string unit, ProgressMode mode,
           std::ostream* out = nullptr, Clock clock = {});
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  // Without finish() (an error unwinding), ends a drawn TTY line so the error starts clean.
  ~Progress();

  void advance(int64_t n) {
    if (mode_ == ProgressMode::Off) return;
    int64_t d = done_.fetch_add(n, std::memory_order_relaxed) + n;
    if (d >= next_check_.load(std::memory_order_relaxed)) check(d, false);
  }
  void set(int64_t done) {
    if (mode_ == ProgressMode::Off) return;
    done_.store(done, std::memory_order_relaxed);
    if (done >= next_check_.load(std::memory_order_relaxed)) check(done, false);
  }
  // Final line: "<label> [====] 100% 412 MB in 1.02s (404 MB/s)" (Tty) or
  // "<label>: done in 1.02s, 412 MB (404 MB/s)" (Lines). Idempotent.
  void finish();

  ProgressMode mode() const { return mode_; }
  int64_t done() const { return done_.load(std::memory_order_relaxed); }

  // Formatting pieces (public for tests).
  static std::string format_amount(double v, std::string_view unit);    // "412 MB", "1.2M events"
  static std::string format_rate(double per_s, std::string_view unit);  // "412 MB/s"
  static std::string format_duration(double s);                         // "3s", "2m05s", "1h02m"
  // The TTY line for `done` units after `elapsed_s`.
  std::string tty_line(int64_t done, double elapsed_s) const;
  // Terminal width the TTY line must fit (less one column); 0 = unlimited (the label is cut at
  // 40). Taken from stderr when drawing there (80 if unknown), else 0.
  void set_columns(size_t columns) { columns_ = columns; }
  // ETA in s, or nullopt before enough data (< 0.5 s elapsed or < 1 % done) or with no total.
  std::optional<double> eta_s(int64_t done, double elapsed_s) const;

  static constexpr int64_t kRedrawNs = 100'000'000;        // Tty: at most 10 redraws a second
  static constexpr int64_t kLineEveryNs = 5'000'000'000;   // Lines: at least every 5 s
  static constexpr int64_t kLinesGraceNs = 1'000'000'000;  // Lines: no 10 % lines before 1 s
  static constexpr int kBarWidth = 24;

 private:
  void check(int64_t done, bool final);
  void emit(const std::string& s);
  std::string bar(int64_t done) const;             // " [====>   ]  58%", or " 412 MB"
  std::string fit(const std::string& tail) const;  // label (cut to fit) + tail
  int64_t now() const;

  std::string label_, unit_;
  int64_t total_;
  ProgressMode mode_;
  std::ostream* out_;
  Clock clock_;
  std::atomic<int64_t> done_{0};
  std::atomic<int64_t> next_check_{0};
  std::mutex mu_;  // guards everything below; check() only try-locks it
  int64_t check_every_ = 1;
  int64_t t0_ = 0, last_check_ = 0, last_draw_ = INT64_MIN / 2;
  int next_decile_ = 1;  // Lines: next 10 % boundary to report
  size_t drawn_width_ = 0;
  size_t columns_ = 0;
  bool drawn_ = false, finished_ = false;
};

// Per-row loops on one thread: a plain counter handed to the Progress every 1024 units, so a row
// costs an increment and a compare instead of an atomic add (~7 ns). flush() before finish().
class ProgressTicker {
 public:
  explicit ProgressTicker(Progress& p) : p_(p) {}
  ProgressTicker(const ProgressTicker&) = delete;
  ProgressTicker& operator=(const ProgressTicker&) = delete;
  ~ProgressTicker() { flush(); }
  void tick() {
    if (++pending_ == 1024) flush();
  }
  void flush() {
    if (pending_) p_.advance(pending_);
    pending_ = 0;
  }

 private:
  Progress& p_;
  int64_t pending_ = 0;
};

}  // namespace kernalyse
