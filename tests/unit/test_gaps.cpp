// Gap analysis: interval arithmetic on hand-made streams, device/rank unions, transitions,
// histogram, filters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernalyse/analysis.h"
#include "kernalyse/report.h"
#include "kernalyse/store_io.h"

namespace kernalyse {
namespace {

struct R {
  int32_t rank, device, stream;
  int64_t start, end;
  std::string name;
  Kind kind = Kind::Kernel;
  int32_t step = kNoStep;
};

Store make_store(const std::vector<R>& rows) {
  Store s;
  Activities& a = s.activities;
  for (const R& r : rows) {
    a.rank.push_back(r.rank);
    a.device.push_back(r.device);
    a.stream.push_back(r.stream);
    a.kind.push_back(static_cast<uint8_t>(r.kind));
    a.category.push_back(
        static_cast<uint8_t>(r.kind == Kind::Kernel ? Category::Computation : Category::Memory));
    a.start_ns.push_back(r.start);
    a.end_ns.push_back(r.end);
    a.name_id.push_back(s.strings.intern(r.name));
    a.correlation.push_back(kNoCorrelation);
    a.step.push_back(r.step);
  }
  return s;
}

const Table& table(Report&&, const std::string&) = delete;  // would dangle
const Table& table(const Report& rep, const std::string& key) {
  for (const Table& t : rep.tables)
    if (t.key == key) return t;
  throw std::runtime_error("no table " + key);
}

size_t col(const Table& t, const std::string& name) {
  auto it = std::find(t.columns.begin(), t.columns.end(), name);
  if (it == t.columns.end()) throw std::runtime_error("no column " + name);
  return static_cast<size_t>(it - t.columns.begin());
}

int64_t ival(const Table& t, size_t row, const std::string& c) {
  return std::get<int64_t>(t.rows.at(row).at(col(t, c)));
}
double dval(const Table& t, size_t row, const std::string& c) {
  return std::get<double>(t.rows.at(row).at(col(t, c)));
}
bool is_null(const Table& t, size_t row, const std::string& c) {
  return std::holds_alternative<std::monostate>(t.rows.at(row).at(col(t, c)));
}

Report gaps(const Store& s, GapOptions opt = {}) {
  Report r;
  gap_analysis(s, opt, &r);
  return r;
}

// --- stream_gaps / union_length ---

TEST(StreamGaps, Empty) {
  const GapStats g = stream_gaps({});
  EXPECT_EQ(g.count, 0);
  EXPECT_EQ(g.total_ns, 0);
  EXPECT_EQ(g.overlaps, 0);
  EXPECT_EQ(g.busy_ns, 0);
  EXPECT_EQ(g.span_ns, 0);
  EXPECT_TRUE(g.gaps.empty());
  EXPECT_EQ(union_length({}), 0);
}

TEST(StreamGaps, SingleInterval) {
  const GapStats g = stream_gaps({{100, 250}});
  EXPECT_EQ(g.count, 0);
  EXPECT_EQ(g.busy_ns, 150);
  EXPECT_EQ(g.span_ns, 150);
}

TEST(StreamGaps, PlainGaps) {
  const GapStats g = stream_gaps({{0, 10}, {15, 20}, {40, 50}});
  EXPECT_EQ(g.count, 2);
  EXPECT_EQ(g.total_ns, 25);
  EXPECT_EQ(g.gaps, (std::vector<int64_t>{5, 20}));
  EXPECT_EQ(g.busy_ns, 25);
  EXPECT_EQ(g.span_ns, 50);
  EXPECT_EQ(g.overlaps, 0);
}

TEST(StreamGaps, TouchingIsNotAGap) {
  const GapStats g = stream_gaps({{0, 10}, {10, 20}, {20, 30}});
  EXPECT_EQ(g.count, 0);
  EXPECT_EQ(g.touching, 2);
  EXPECT_EQ(g.overlaps, 0);
  EXPECT_EQ(g.busy_ns, 30);
}

TEST(StreamGaps, OverlapsAreCountedNotIdle) {
  const GapStats g = stream_gaps({{0, 10}, {5, 15}, {20, 30}});
  EXPECT_EQ(g.overlaps, 1);
  EXPECT_EQ(g.count, 1);
  EXPECT_EQ(g.total_ns, 5);  // 20 - 15, not 20 - 10
  EXPECT_EQ(g.busy_ns, 25);
  EXPECT_EQ(g.span_ns, 30);
}

TEST(StreamGaps, NestedUsesLatestEndSoFar) {
  // [10,20] and [30,40] lie inside [0,100]: no idle until 150.
  const GapStats g = stream_gaps({{0, 100}, {10, 20}, {30, 40}, {150, 160}});
  EXPECT_EQ(g.overlaps, 2);
  EXPECT_EQ(g.count, 1);
  EXPECT_EQ(g.total_ns, 50);
  EXPECT_EQ(g.busy_ns, 110);
  EXPECT_EQ(g.span_ns, 160);
}

TEST(StreamGaps, UnsortedInputIsSorted) {
  const GapStats g = stream_gaps({{40, 50}, {0, 10}, {15, 20}});
  EXPECT_EQ(g.gaps, (std::vector<int64_t>{5, 20}));
  EXPECT_EQ(g.busy_ns, 25);
}

TEST(UnionLength, Arbitrary) {
  EXPECT_EQ(union_length({{5, 15}, {0, 10}, {20, 30}, {25, 26}}), 25);
  EXPECT_EQ(union_length({{0, 10}, {10, 20}}), 20);
  EXPECT_EQ(union_length({{3, 3}}), 0);
}

// --- gap_analysis on stores ---

TEST(GapAnalysis, EmptyStore) {
  Store s;
  const Report r = gaps(s);
  EXPECT_TRUE(table(r, "gaps_per_stream").rows.empty());
  EXPECT_TRUE(table(r, "gaps_per_device").rows.empty());
  EXPECT_TRUE(table(r, "gaps_per_rank").rows.empty());
  EXPECT_TRUE(table(r, "gap_transitions").rows.empty());
  ASSERT_FALSE(r.headline.empty());
  EXPECT_NE(r.headline[0].find("no activities"), std::string::npos);
  std::ostringstream js;
  render_json(r, js);
  EXPECT_EQ(js.str().find("NaN"), std::string::npos);
  EXPECT_TRUE(nlohmann::json::accept(js.str()));
}

TEST(GapAnalysis, SingleActivity) {
  const Report r = gaps(make_store({{0, 0, 7, 100, 200, "k"}}));
  const Table& st = table(r, "gaps_per_stream");
  ASSERT_EQ(st.rows.size(), 1u);
  EXPECT_EQ(ival(st, 0, "gaps"), 0);
  EXPECT_EQ(ival(st, 0, "busy_ns"), 100);
  EXPECT_EQ(ival(st, 0, "idle_ns"), 0);
  EXPECT_TRUE(is_null(st, 0, "mean_gap_us"));
  EXPECT_TRUE(is_null(st, 0, "median_gap_us"));
  EXPECT_DOUBLE_EQ(dval(st, 0, "idle_pct"), 0.0);
  EXPECT_TRUE(table(r, "gap_transitions").rows.empty());
}

TEST(GapAnalysis, DeviceIdleIsTheUnionOfStreams) {
  // Stream 1: [0,10] [30,40]; stream 2: [5,20] [50,60].
  // Per stream gaps 20 and 30; device union [0,20] [30,40] [50,60] → idle 10 + 10.
  const Store s = make_store({{0, 0, 1, 0, 10, "a"},
                              {0, 0, 1, 30, 40, "b"},
                              {0, 0, 2, 5, 20, "c"},
                              {0, 0, 2, 50, 60, "d"}});
  const Report r = gaps(s);
  const Table& st = table(r, "gaps_per_stream");
  ASSERT_EQ(st.rows.size(), 2u);
  EXPECT_EQ(ival(st, 0, "stream"), 1);
  EXPECT_EQ(ival(st, 0, "idle_ns"), 20);
  EXPECT_EQ(ival(st, 1, "idle_ns"), 30);
  const Table& dv = table(r, "gaps_per_device");
  ASSERT_EQ(dv.rows.size(), 1u);
  EXPECT_EQ(ival(dv, 0, "streams"), 2);
  EXPECT_EQ(ival(dv, 0, "activities"), 4);
  EXPECT_EQ(ival(dv, 0, "idle_ns"), 20);
  EXPECT_EQ(ival(dv, 0, "gaps"), 2);
  EXPECT_EQ(ival(dv, 0, "span_ns"), 60);
  EXPECT_EQ(ival(dv, 0, "busy_ns"), 40);
  EXPECT_NEAR(dval(dv, 0, "idle_pct"), 100.0 * 20 / 60, 1e-9);
  EXPECT_DOUBLE_EQ(dval(dv, 0, "median_gap_us"), 0.010);
  const Table& rk = table(r, "gaps_per_rank");
  ASSERT_EQ(rk.rows.size(), 1u);
  EXPECT_EQ(ival(rk, 0, "idle_ns"), 20);
  EXPECT_EQ(r.json["gap_totals"]["device_idle_ns"], 20);
  EXPECT_EQ(r.json["gap_totals"]["stream_idle_ns"], 50);
  EXPECT_EQ(r.json["gap_totals"]["streams"], 2);
  EXPECT_EQ(r.json["gap_totals"]["devices"], 1);
  EXPECT_EQ(r.json["gap_totals"]["ranks"], 1);
}

TEST(GapAnalysis, StreamCoveredByAnotherLeavesNoDeviceIdle) {
  // Stream 2 covers the gap of stream 1 entirely.
  const Store s =
      make_store({{0, 0, 1, 0, 10, "a"}, {0, 0, 1, 90, 100, "a"}, {0, 0, 2, 5, 95, "nccl"}});
  const Report r = gaps(s);
  EXPECT_EQ(ival(table(r, "gaps_per_stream"), 0, "idle_ns"), 80);
  const Table& dv = table(r, "gaps_per_device");
  EXPECT_EQ(ival(dv, 0, "idle_ns"), 0);
  EXPECT_EQ(ival(dv, 0, "busy_ns"), 100);
  EXPECT_TRUE(is_null(dv, 0, "max_gap_us"));
}

TEST(GapAnalysis, MemcpyFillsTheStream) {
  const Store s = make_store({{0, 0, 1, 0, 10, "k1"},
                              {0, 0, 1, 10, 20, "Memcpy HtoD", Kind::Memcpy},
                              {0, 0, 1, 25, 30, "k2"}});
  const Report rep_st = gaps(s);
  const Table& st = table(rep_st, "gaps_per_stream");
  EXPECT_EQ(ival(st, 0, "gaps"), 1);
  EXPECT_EQ(ival(st, 0, "idle_ns"), 5);
  EXPECT_EQ(ival(st, 0, "touching"), 1);
}

TEST(GapAnalysis, RankIdleIsTheUnionOfDevices) {
  // Device 0: [0,10] [40,50]; device 1: [20,30]. Rank union gaps: 10 + 10.
  const Store s = make_store({{0, 0, 1, 0, 10, "a"},
                              {0, 0, 1, 40, 50, "a"},
                              {0, 1, 1, 20, 30, "b"},
                              {1, 0, 1, 0, 5, "a"}});
  const Report r = gaps(s);
  const Table& dv = table(r, "gaps_per_device");
  ASSERT_EQ(dv.rows.size(), 3u);
  EXPECT_EQ(ival(dv, 0, "idle_ns"), 30);
  EXPECT_EQ(ival(dv, 1, "idle_ns"), 0);
  const Table& rk = table(r, "gaps_per_rank");
  ASSERT_EQ(rk.rows.size(), 2u);
  EXPECT_EQ(ival(rk, 0, "rank"), 0);
  EXPECT_EQ(ival(rk, 0, "devices"), 2);
  EXPECT_EQ(ival(rk, 0, "idle_ns"), 20);
  EXPECT_EQ(ival(rk, 0, "span_ns"), 50);
  EXPECT_EQ(ival(rk, 1, "rank"), 1);
  EXPECT_EQ(ival(rk, 1, "busy_ns"), 5);
  EXPECT_EQ(r.json["gap_totals"]["ranks"], 2);
  EXPECT_EQ(r.json["gap_totals"]["devices"], 3);
  EXPECT_EQ(r.json["gap_totals"]["rank_idle_ns"], 20);  // rank 0: 20, rank 1: 0
  EXPECT_EQ(r.json["gap_totals"]["rank_span_ns"], 55);
}

TEST(GapAnalysis, Percentiles) {
  // Gaps 10, 20, 30, 40, 100 ns on one stream.
  std::vector<R> rows;
  int64_t t = 0;
  for (int64_t g : {0, 10, 20, 30, 40, 100}) {
    t += g;
    rows.push_back({0, 0, 1, t, t + 5, "k"});
    t += 5;
  }
  const Report rep_st = gaps(make_store(rows));
  const Table& st = table(rep_st, "gaps_per_stream");
  EXPECT_EQ(ival(st, 0, "gaps"), 5);
  EXPECT_DOUBLE_EQ(dval(st, 0, "median_gap_us"), 0.030);
  EXPECT_NEAR(dval(st, 0, "p95_gap_us"), (40 + 0.8 * 60) / 1e3, 1e-12);  // numpy linear
  EXPECT_DOUBLE_EQ(dval(st, 0, "mean_gap_us"), 0.040);
  EXPECT_DOUBLE_EQ(dval(st, 0, "max_gap_us"), 0.100);
}

TEST(GapAnalysis, UnsortedStoreGivesTheSameAnswer) {
  std::vector<R> rows;
  std::mt19937 rng(7);
  const char* const kNames[] = {"k0", "k1", "k2", "k3"};
  for (int rank = 0; rank < 2; ++rank)
    for (int stream = 0; stream < 3; ++stream) {
      int64_t t = 0;
      for (int k = 0; k < 50; ++k) {
        t += static_cast<int64_t>(rng() % 100) - 20;
        const int64_t d = 1 + rng() % 50;
        rows.push_back({rank, 0, stream, t, t + d, kNames[rng() % 4]});
        t += d;
      }
    }
  const Store sorted = make_store(rows);
  std::shuffle(rows.begin(), rows.end(), rng);
  const Store shuffled = make_store(rows);
  std::ostringstream a, b;
  render_json(gaps(sorted), a);
  render_json(gaps(shuffled), b);
  EXPECT_EQ(a.str(), b.str());
}

TEST(GapAnalysis, Transitions) {
  // Stream: A [0,10] → B [15,20] → A [20,30] → B [25,28] (overlap) → A [40,50] (gap 10).
  const Store s = make_store({{0, 0, 1, 0, 10, "A"},
                              {0, 0, 1, 15, 20, "B"},
                              {0, 0, 1, 20, 30, "A"},
                              {0, 0, 1, 25, 28, "B"},
                              {0, 0, 1, 40, 50, "A"}});
  GapOptions opt;
  opt.sort = GapSort::Count;
  const Report r = gaps(s, opt);
  const Table& t = table(r, "gap_transitions");
  ASSERT_EQ(t.rows.size(), 2u);
  // A→B: gap 5 once, overlap once. B→A: 0 and 40-30=10. Count sort: B→A (2) first.
  EXPECT_EQ(std::get<std::string>(t.rows[0][col(t, "from")]), "B");
  EXPECT_EQ(std::get<std::string>(t.rows[0][col(t, "to")]), "A");
  EXPECT_EQ(ival(t, 0, "count"), 2);
  EXPECT_EQ(ival(t, 0, "total_ns"), 10);
  EXPECT_DOUBLE_EQ(dval(t, 0, "mean_us"), 0.005);
  EXPECT_DOUBLE_EQ(dval(t, 0, "std_us"), 0.005);
  EXPECT_EQ(ival(t, 0, "max_ns"), 10);
  EXPECT_EQ(std::get<std::string>(t.rows[1][col(t, "from")]), "A");
  EXPECT_EQ(ival(t, 1, "count"), 1);
  EXPECT_EQ(ival(t, 1, "overlaps"), 1);
  EXPECT_EQ(ival(t, 1, "total_ns"), 5);
  // The sum of positive transition gaps equals the stream's idle time.
  int64_t total = 0;
  for (size_t i = 0; i < t.rows.size(); ++i) total += ival(t, i, "total_ns");
  EXPECT_EQ(total, ival(table(r, "gaps_per_stream"), 0, "idle_ns"));
}

TEST(GapAnalysis, TransitionsUseSimplifiedNamesUnlessVerbose) {
  const Store s = make_store({{0, 0, 1, 0, 10, "void k<int>(int)"},
                              {0, 0, 1, 20, 30, "void k<float>(float)"},
                              {0, 0, 1, 40, 50, "void k<int>(int)"}});
  const Report rep_t = gaps(s);
  const Table& t = table(rep_t, "gap_transitions");
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(std::get<std::string>(t.rows[0][0]), "k");
  EXPECT_EQ(ival(t, 0, "count"), 2);
  GapOptions v;
  v.verbose = true;
  const Report rv = gaps(s, v);
  EXPECT_EQ(table(rv, "gap_transitions").rows.size(), 2u);
}

TEST(GapAnalysis, TransitionSortAndTop) {
  // X→Y: gaps 1,1,1 (count 3, total 3); Y→X: gap 50 (max); Z pairs never repeat.
  const Store s = make_store({{0, 0, 1, 0, 10, "X"},
                              {0, 0, 1, 11, 20, "Y"},
                              {0, 0, 1, 70, 80, "X"},
                              {0, 0, 1, 81, 90, "Y"},
                              {0, 1, 1, 0, 10, "X"},
                              {0, 1, 1, 11, 20, "Y"}});
  GapOptions opt;
  opt.sort = GapSort::Max;
  opt.top = 1;
  const Report r = gaps(s, opt);
  const Table& t = table(r, "gap_transitions");
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(std::get<std::string>(t.rows[0][0]), "Y");
  opt.sort = GapSort::Count;
  const Report rep_t2 = gaps(s, opt);
  const Table& t2 = table(rep_t2, "gap_transitions");
  EXPECT_EQ(std::get<std::string>(t2.rows[0][0]), "X");
  EXPECT_EQ(ival(t2, 0, "count"), 3);
}

TEST(GapAnalysis, Histogram) {
  // Gaps of 0.5, 5, 15, 2000 µs with bins [0,10) [10,20] and --hist-min 1.
  std::vector<R> rows;
  int64_t t = 0;
  for (int64_t g : {0, 500, 5000, 15000, 2000000}) {
    t += g;
    rows.push_back({0, 0, 1, t, t + 100, "k"});
    t += 100;
  }
  GapOptions opt;
  opt.hist_min_us = 1;
  opt.hist_max_us = 21;
  opt.bins = 2;
  const Report r = gaps(make_store(rows), opt);
  const auto& h = r.json["histogram"];
  EXPECT_EQ(h["edges_us"], (std::vector<double>{1, 11, 21}));
  EXPECT_EQ(h["counts"], (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(h["underflow"], 1);
  EXPECT_EQ(h["overflow"], 1);
  const Table& ht = table(r, "gap_histogram");
  EXPECT_EQ(ht.rows.size(), 4u);  // underflow, 2 bins, overflow
  ASSERT_EQ(r.text_blocks.size(), 1u);
  EXPECT_NE(r.text_blocks[0].find("[1, 11)"), std::string::npos);
  EXPECT_NE(r.text_blocks[0].find("> 21"), std::string::npos);
}

TEST(GapAnalysis, BadHistogramOptionsThrow) {
  const Store s = make_store({{0, 0, 1, 0, 10, "k"}});
  GapOptions opt;
  opt.bins = 0;
  EXPECT_THROW(gaps(s, opt), Error);
  opt = {};
  opt.hist_min_us = 5;
  opt.hist_max_us = 5;
  EXPECT_THROW(gaps(s, opt), Error);
}

TEST(GapAnalysis, RankAndStepFilters) {
  const Store s = make_store({{0, 0, 1, 0, 10, "k", Kind::Kernel, 1},
                              {0, 0, 1, 20, 30, "k", Kind::Kernel, 1},
                              {0, 0, 1, 100, 110, "k", Kind::Kernel, 2},
                              {0, 0, 1, 200, 210, "k", Kind::Kernel, 2},
                              {1, 0, 1, 0, 10, "k", Kind::Kernel, 1},
                              {1, 0, 1, 50, 60, "k", Kind::Kernel, 1}});
  GapOptions opt;
  opt.filter.step = 2;
  const Report rep_st = gaps(s, opt);
  const Table& st = table(rep_st, "gaps_per_stream");
  ASSERT_EQ(st.rows.size(), 1u);          // rank 1 has no step 2 activity
  EXPECT_EQ(ival(st, 0, "idle_ns"), 90);  // the step-1 → step-2 gap is outside the window
  opt.filter.step = 1;
  opt.filter.rank = 1;
  const Report rep_st2 = gaps(s, opt);
  const Table& st2 = table(rep_st2, "gaps_per_stream");
  ASSERT_EQ(st2.rows.size(), 1u);
  EXPECT_EQ(ival(st2, 0, "rank"), 1);
  EXPECT_EQ(ival(st2, 0, "idle_ns"), 40);
  opt.filter.step = 9;
  try {
    gaps(s, opt);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no ProfilerStep#9 in rank 1"), std::string::npos)
        << e.what();
  }
  opt.filter = {};
  opt.filter.rank = 5;
  EXPECT_THROW(gaps(s, opt), Error);
}

TEST(GapAnalysis, NoNaNInJsonAndCsvWrites) {
  const Store s = make_store({{0, 0, 1, 0, 10, "a,b \"q\""}, {0, 0, 1, 10, 20, "a"}});
  const Report r = gaps(s);
  std::ostringstream js;
  render_json(r, js);
  EXPECT_EQ(js.str().find("NaN"), std::string::npos);
  EXPECT_EQ(js.str().find("nan"), std::string::npos);
  const auto doc = nlohmann::json::parse(js.str());
  EXPECT_TRUE(doc.contains("gaps_per_stream"));
  EXPECT_TRUE(doc.contains("histogram"));
  EXPECT_TRUE(doc["gaps_per_stream"][0]["mean_gap_us"].is_null());
  EXPECT_FALSE(doc.contains("gap_histogram"));
}

// The typed result: every scope's numbers worked out by hand.
TEST(GapResult, ScopesTransitionsHistogram) {
  const Store s = make_store({{0, 0, 1, 0, 10, "A"},
                              {0, 0, 1, 15, 20, "B"},
                              {0, 0, 1, 18, 30, "C"},  // overlaps B
                              {0, 0, 2, 12, 14, "A"},
                              {0, 0, 2, 40, 50, "B"},
                              {0, 1, 3, 100, 110, "A"},
                              {1, 0, 1, 5, 8, "A"}});
  GapOptions opt;
  opt.hist_min_us = 0;
  opt.hist_max_us = 0.02;  // two bins of 10 ns
  opt.bins = 2;
  const GapResult g = gap_analysis(s, opt);
  EXPECT_EQ(g.activities, 7);
  ASSERT_EQ(g.streams.size(), 4u);
  const GapScope& s1 = g.streams[0];
  EXPECT_EQ(s1.stream, 1);
  EXPECT_EQ(s1.span_ns, 30);
  EXPECT_EQ(s1.busy_ns, 25);
  EXPECT_EQ(s1.idle_ns, 5);
  EXPECT_EQ(s1.gaps, 1);
  EXPECT_EQ(s1.overlaps, 1);
  EXPECT_EQ(g.streams[1].idle_ns, 26);
  EXPECT_EQ(g.stream_gaps, 2);
  EXPECT_EQ(g.stream_idle_ns, 31);
  EXPECT_EQ(g.stream_overlaps, 1);

  ASSERT_EQ(g.devices.size(), 3u);  // rank 0 device 0 and 1, rank 1 device 0
  const GapScope& d0 = g.devices[0];
  EXPECT_EQ(d0.streams, 2);
  EXPECT_EQ(d0.activities, 5);
  EXPECT_EQ(d0.span_ns, 50);
  EXPECT_EQ(d0.idle_ns, 13);  // 10→12, 14→15, 30→40
  EXPECT_EQ(d0.gaps, 3);
  EXPECT_EQ(d0.max_gap_ns, 10);
  EXPECT_DOUBLE_EQ(d0.median_gap_ns, 2);
  EXPECT_EQ(g.device_idle_ns, 13);
  EXPECT_EQ(g.device_span_ns, 50 + 10 + 3);

  ASSERT_EQ(g.ranks.size(), 2u);
  EXPECT_EQ(g.ranks[0].devices, 2);
  EXPECT_EQ(g.ranks[0].streams, 3);
  EXPECT_EQ(g.ranks[0].device, -1);
  EXPECT_EQ(g.ranks[0].span_ns, 110);
  EXPECT_EQ(g.ranks[0].idle_ns, 63);  // the device-0 gaps and 50→100
  EXPECT_EQ(g.ranks[1].devices, 1);
  EXPECT_EQ(g.ranks[1].gaps, 0);
  EXPECT_TRUE(std::isnan(g.ranks[1].median_gap_ns));
  EXPECT_EQ(g.rank_idle_ns, 63);
  EXPECT_EQ(g.rank_span_ns, 113);

  ASSERT_EQ(g.transitions.size(), 2u);
  EXPECT_EQ(g.transitions[0].from, "A");
  EXPECT_EQ(g.transitions[0].to, "B");
  EXPECT_EQ(g.transitions[0].count, 2);
  EXPECT_EQ(g.transitions[0].total_ns, 31);
  EXPECT_EQ(g.transitions[0].max_ns, 26);
  EXPECT_DOUBLE_EQ(g.transitions[0].mean_ns, 15.5);
  EXPECT_EQ(g.transitions[1].from, "B");  // only overlapped: last, no gap statistics
  EXPECT_EQ(g.transitions[1].count, 0);
  EXPECT_EQ(g.transitions[1].overlaps, 1);
  EXPECT_EQ(g.transition_pairs, 2u);

  EXPECT_EQ(g.counts, (std::vector<int64_t>{1, 0}));  // 5 ns in [0, 10); 26 ns above 20
  EXPECT_EQ(g.underflow, 0);
  EXPECT_EQ(g.overflow, 1);
  EXPECT_EQ(g.edges_us.size(), 3u);

  // The renderer shows exactly these numbers.
  Report rep;
  gap_report(g, &rep);
  EXPECT_EQ(ival(table(rep, "gaps_per_rank"), 0, "idle_ns"), 63);
  EXPECT_EQ(ival(table(rep, "gaps_per_device"), 0, "streams"), 2);
  EXPECT_EQ(rep.json["gap_totals"]["device_span_ns"], 63);
  EXPECT_EQ(rep.json["histogram"]["overflow"], 1);
}

}  // namespace
}  // namespace kernalyse
