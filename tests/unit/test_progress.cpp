// Progress formatter: amounts, rates, ETA, redraw throttling and line cadence, with an injected
// clock and output stream.
#include <gtest/gtest.h>

#include <sstream>
#include <thread>
#include <vector>

#include "kernalyse/progress.h"

using namespace kernalyse;

namespace {

struct FakeClock {
  int64_t t = 1'000'000'000;
  Progress::Clock fn() {
    return [this] { return t; };
  }
  void sec(double s) { t += static_cast<int64_t>(s * 1e9); }
};

int count(const std::string& s, char c) {
  return static_cast<int>(std::count(s.begin(), s.end(), c));
}

}  // namespace

TEST(Progress, Amounts) {
  EXPECT_EQ(Progress::format_amount(512, "bytes"), "512 B");
  EXPECT_EQ(Progress::format_amount(4'120'000, "bytes"), "4.12 MB");
  EXPECT_EQ(Progress::format_amount(412'000'000, "bytes"), "412 MB");
  EXPECT_EQ(Progress::format_amount(1'230'000'000, "bytes"), "1.23 GB");
  EXPECT_EQ(Progress::format_amount(999, "events"), "999 events");
  EXPECT_EQ(Progress::format_amount(12'300, "events"), "12.3k events");
  EXPECT_EQ(Progress::format_amount(2'500'000, "events"), "2.50M events");
}

TEST(Progress, RatesAndDurations) {
  EXPECT_EQ(Progress::format_rate(412.4e6, "bytes"), "412 MB/s");
  EXPECT_EQ(Progress::format_rate(1.5e9, "bytes"), "1.50 GB/s");
  EXPECT_EQ(Progress::format_rate(20e3, "bytes"), "20.0 kB/s");
  EXPECT_EQ(Progress::format_rate(3.4e6, "events"), "3.40M events/s");
  EXPECT_EQ(Progress::format_duration(2.1), "3s");  // rounded up: never promise too early
  EXPECT_EQ(Progress::format_duration(125), "2m05s");
  EXPECT_EQ(Progress::format_duration(3725), "1h02m");
}

TEST(Progress, EtaNeedsEnoughData) {
  FakeClock c;
  std::ostringstream out;
  Progress p("importing a.json", 1000, "bytes", ProgressMode::Tty, &out, c.fn());
  EXPECT_FALSE(p.eta_s(500, 0.2));  // too early
  EXPECT_FALSE(p.eta_s(5, 10));     // under 1 %
  ASSERT_TRUE(p.eta_s(500, 2.0));
  EXPECT_DOUBLE_EQ(*p.eta_s(500, 2.0), 2.0);  // 250/s, 500 left
  Progress unknown("x", 0, "bytes", ProgressMode::Tty, &out, c.fn());
  EXPECT_FALSE(unknown.eta_s(500, 2.0));
}

TEST(Progress, TtyLine) {
  FakeClock c;
  std::ostringstream out;
  Progress p("importing rank0.json", 1'000'000'000, "bytes", ProgressMode::Tty, &out, c.fn());
  std::string l = p.tty_line(580'000'000, 1.0);
  EXPECT_EQ(l, "importing rank0.json [=============>          ]  58% 580 MB/s ETA 1s");
  // No rate at 0 s, no ETA before enough data.
  EXPECT_EQ(p.tty_line(0, 0), "importing rank0.json [>                       ]   0%");
  Progress unknown("writing", 0, "events", ProgressMode::Tty, &out, c.fn());
  EXPECT_EQ(unknown.tty_line(20'000, 2.0), "writing 20.0k events 10.0k events/s");
}

TEST(Progress, TtyLineFitsTheTerminal) {
  FakeClock c;
  std::ostringstream out;
  Progress p("importing /very/long/directory/name/of/traces/rank-000123.json", 1000, "bytes",
             ProgressMode::Tty, &out, c.fn());
  // Unlimited: the label keeps its last 37 characters.
  EXPECT_EQ(
      p.tty_line(500, 1.0),
      "...ctory/name/of/traces/rank-000123.json [============>           ]  50% 500 B/s ETA 1s");
  p.set_columns(80);  // the label gives way, the file name stays
  std::string l = p.tty_line(500, 1.0);
  EXPECT_EQ(l.size(), 79u);
  EXPECT_EQ(l, "...me/of/traces/rank-000123.json [============>           ]  50% 500 B/s ETA 1s");
  p.set_columns(30);  // too narrow even for the bar: cut, never wrapped
  EXPECT_EQ(p.tty_line(500, 1.0).size(), 29u);
}

TEST(Progress, TtyRedrawIsThrottled) {
  FakeClock c;
  std::ostringstream out;
  Progress p("importing a.json", 900'000, "bytes", ProgressMode::Tty, &out, c.fn());
  // 1000 advances within 50 ms: one draw at most (the first).
  for (int i = 0; i < 1000; ++i) {
    p.advance(100);
    c.t += 50'000;
  }
  EXPECT_LE(count(out.str(), '\r'), 1);
  // Over 2 s of steady progress: about 10 redraws a second, never more.
  for (int i = 0; i < 2000; ++i) {
    p.advance(400);
    c.t += 1'000'000;
  }
  int draws = count(out.str(), '\r');
  EXPECT_GE(draws, 10);
  EXPECT_LE(draws, 22);
  EXPECT_EQ(count(out.str(), '\n'), 0);
  p.finish();
  std::string s = out.str();
  EXPECT_EQ(count(s, '\n'), 1);
  EXPECT_NE(s.find("100% 900 kB in 2.05s ("), std::string::npos) << s;
  p.finish();  // idempotent
  EXPECT_EQ(out.str(), s);
}

TEST(Progress, ChecksTheClockRarely) {
  int64_t t = 0;
  int reads = 0;
  std::ostringstream out;
  Progress p("export", 100'000'000, "events", ProgressMode::Tty, &out, [&] {
    ++reads;
    return t;  // time stands still: every check is "fast", so the interval widens
  });
  for (int i = 0; i < 10'000'000; ++i) p.advance(1);
  EXPECT_LT(reads, 2000);  // bounded by total/1000 per check, not one per unit
}

TEST(Progress, LinesEveryTenPercentAndDone) {
  FakeClock c;
  std::ostringstream out;
  Progress p("importing a.json", 1000, "bytes", ProgressMode::Lines, &out, c.fn());
  for (int i = 0; i < 100; ++i) {
    c.sec(0.1);
    p.advance(10);
  }
  p.finish();
  std::string s = out.str();
  EXPECT_EQ(s.find('\r'), std::string::npos);
  EXPECT_EQ(count(s, '\n'), 10) << s;  // 10 % ... 90 %, then the done line
  EXPECT_NE(s.find("importing a.json: 50% (500 B of 1.00 kB, 100 B/s, ETA 5s)\n"),
            std::string::npos)
      << s;
  EXPECT_NE(s.find("importing a.json: 1.00 kB done in 10.00s (100 B/s)\n"), std::string::npos) << s;
}

TEST(Progress, LinesQuickTaskGetsOnlyTheDoneLine) {
  FakeClock c;
  std::ostringstream out;
  Progress p("writing run.h5", 1000, "bytes", ProgressMode::Lines, &out, c.fn());
  for (int i = 0; i < 100; ++i) {
    c.sec(0.005);
    p.advance(10);
  }
  p.finish();
  EXPECT_EQ(out.str(), "writing run.h5: 1.00 kB done in 0.50s (2.00 kB/s)\n");
}

TEST(Progress, LinesAtLeastEveryFiveSeconds) {
  FakeClock c;
  std::ostringstream out;
  Progress p("slow", 0, "events", ProgressMode::Lines, &out, c.fn());  // unknown total
  for (int i = 0; i < 120; ++i) {
    c.sec(0.1);
    p.advance(1);
  }
  EXPECT_EQ(count(out.str(), '\n'), 2) << out.str();  // at 5 s and 10 s
  EXPECT_NE(out.str().find("slow: 50 events (10 events/s)\n"), std::string::npos) << out.str();
}

TEST(Progress, OffPrintsNothing) {
  std::ostringstream out;
  int reads = 0;
  Progress p("x", 100, "bytes", ProgressMode::Off, &out, [&] { return int64_t{++reads}; });
  for (int i = 0; i < 1000; ++i) p.advance(1);
  p.finish();
  EXPECT_EQ(out.str(), "");
  EXPECT_EQ(reads, 0);
}

TEST(Progress, UnfinishedTtyLineIsEnded) {
  std::ostringstream out;
  {
    Progress p("x", 100, "bytes", ProgressMode::Tty, &out);
    p.advance(10);
  }  // an error unwinds past the bar: the next message must start on its own line
  EXPECT_EQ(out.str().back(), '\n');
}

TEST(Progress, SharedAcrossThreads) {
  std::ostringstream out;
  Progress p("importing 4 files", 4'000'000, "bytes", ProgressMode::Lines, &out);
  std::vector<std::thread> ts;
  for (int k = 0; k < 4; ++k)
    ts.emplace_back([&] {
      for (int i = 0; i < 1000; ++i) p.advance(1000);
    });
  for (auto& t : ts) t.join();
  EXPECT_EQ(p.done(), 4'000'000);
  p.finish();
  EXPECT_NE(out.str().find("4.00 MB done in"), std::string::npos) << out.str();
}

TEST(Progress, ParseMode) {
  EXPECT_EQ(parse_progress_mode("off"), ProgressMode::Off);
  EXPECT_EQ(parse_progress_mode("lines"), ProgressMode::Lines);
  EXPECT_EQ(parse_progress_mode("tty"), ProgressMode::Tty);
  EXPECT_TRUE(parse_progress_mode("auto").has_value());
  EXPECT_FALSE(parse_progress_mode("fancy").has_value());
}

TEST(Progress, TickerBatchesAndFlushes) {
  std::ostringstream out;
  Progress p("rows", 3000, "events", ProgressMode::Lines, &out);
  {
    ProgressTicker ticker(p);
    for (int i = 0; i < 3000; ++i) ticker.tick();
    EXPECT_EQ(p.done(), 2048);  // handed over in blocks of 1024
    ticker.flush();
    EXPECT_EQ(p.done(), 3000);
    ticker.tick();
  }  // the destructor flushes the rest
  EXPECT_EQ(p.done(), 3001);
}
