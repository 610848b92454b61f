// GPU time by annotated range (analysis/analyses/src/ranges.cpp): kernels join the ranges whose
// thread launched them inside the range, through the correlation id; nested ranges are inclusive;
// other threads, other ranks, steps and work without a launch stay out.
#include <gtest/gtest.h>

#include "kernalyse/analysis.h"

using namespace kernalyse;

namespace {

struct Builder {
  Store s;
  void range(int32_t rank, int64_t tid, int64_t start, int64_t end, const char* name,
             AnnotationKind kind = AnnotationKind::Nvtx) {
    auto& a = s.annotations;
    a.rank.push_back(rank);
    a.kind.push_back(static_cast<uint8_t>(kind));
    a.pid.push_back(1);
    a.tid.push_back(tid);
    a.start_ns.push_back(start);
    a.end_ns.push_back(end);
    a.name_id.push_back(s.strings.intern(name));
    a.step.push_back(kNoStep);
  }
  // A launch on (rank, tid) at `at` and the kernel it starts, `dur` ns long.
  void kernel(int32_t rank, int64_t tid, int64_t at, int64_t corr, int64_t dur) {
    auto& l = s.launches;
    l.rank.push_back(rank);
    l.pid.push_back(1);
    l.tid.push_back(tid);
    l.start_ns.push_back(at);
    l.end_ns.push_back(at + 5);
    l.name_id.push_back(s.strings.intern("cudaLaunchKernel"));
    l.correlation.push_back(corr);
    l.step.push_back(kNoStep);
    auto& a = s.activities;
    a.rank.push_back(rank);
    a.device.push_back(0);
    a.stream.push_back(7);
    a.kind.push_back(static_cast<uint8_t>(Kind::Kernel));
    a.category.push_back(static_cast<uint8_t>(Category::Computation));
    a.start_ns.push_back(1000 + at);
    a.end_ns.push_back(1000 + at + dur);
    a.name_id.push_back(s.strings.intern("k"));
    a.correlation.push_back(corr);
    a.step.push_back(kNoStep);
  }
  Store done() {
    for (int32_t r : {0, 1}) {
      RankInfo ri;
      ri.rank = r;
      s.ranks.push_back(ri);
    }
    sort_activities(s);
    return std::move(s);
  }
};

const std::vector<Cell>* row(const Report& r, const std::string& name) {
  for (const auto& t : r.tables)
    if (t.key == "ranges")
      for (const auto& x : t.rows)
        if (std::get<std::string>(x[0]) == name) return &x;
  return nullptr;
}

}  // namespace

TEST(Ranges, KernelsJoinTheRangesThatLaunchedThem) {
  Builder b;
  b.range(0, 11, 0, 100, "layer 0");
  b.range(0, 11, 10, 50, "attn");  // nested: inclusive
  b.range(0, 11, 200, 300, "layer 1");
  b.range(1, 11, 0, 100, "layer 0");  // rank 1's own
  b.range(0, 11, 400, 500, "user scope", AnnotationKind::User);
  b.range(0, 11, 0, 1000, "ProfilerStep#0", AnnotationKind::Step);  // steps are not ranges
  b.kernel(0, 11, 20, 1, 30);                                       // attn and layer 0
  b.kernel(0, 11, 60, 2, 40);                                       // layer 0
  b.kernel(0, 22, 70, 3, 500);                                      // another thread: in no range
  b.kernel(0, 11, 150, 4, 7);                                       // between ranges
  b.kernel(0, 11, 300, 5, 9);   // at layer 1's end: inside (inclusive end)
  b.kernel(1, 11, 20, 1, 100);  // rank 1, same correlation number as rank 0's
  b.kernel(0, 11, 450, 6, 14);  // the user annotation
  Store s = b.done();
  Report r;
  range_analysis(s, {}, &r);
  const auto* l0 = row(r, "layer 0");
  ASSERT_NE(l0, nullptr);
  EXPECT_EQ(std::get<int64_t>((*l0)[1]), 2);    // calls (one per rank)
  EXPECT_EQ(std::get<int64_t>((*l0)[2]), 2);    // ranks
  EXPECT_EQ(std::get<int64_t>((*l0)[3]), 3);    // kernels: 2 on rank 0, 1 on rank 1
  EXPECT_EQ(std::get<int64_t>((*l0)[8]), 170);  // ns: 30 + 40 + 100
  const auto* at = row(r, "attn");
  ASSERT_NE(at, nullptr);
  EXPECT_EQ(std::get<int64_t>((*at)[3]), 1);
  EXPECT_EQ(std::get<int64_t>((*at)[8]), 30);
  const auto* l1 = row(r, "layer 1");
  ASSERT_NE(l1, nullptr);
  EXPECT_EQ(std::get<int64_t>((*l1)[8]), 9);
  const auto* us = row(r, "user scope");
  ASSERT_NE(us, nullptr);
  EXPECT_EQ(std::get<int64_t>((*us)[8]), 14);
  EXPECT_EQ(row(r, "ProfilerStep#0"), nullptr);
  // Rows by GPU time, descending.
  const auto& t = r.tables.back();
  EXPECT_EQ(std::get<std::string>(t.rows[0][0]), "layer 0");
  // Coverage: launched inside some range: 30 + 40 + 9 + 100 + 14 = 193 of 700 ns.
  EXPECT_NEAR(r.json["ranges_coverage_pct"].get<double>(), 100.0 * 193 / 700, 1e-9);

  // --rank 1: only rank 1's range and kernel.
  Report r1;
  RangeOptions o;
  o.filter.rank = 1;
  range_analysis(s, o, &r1);
  const auto* only = row(r1, "layer 0");
  ASSERT_NE(only, nullptr);
  EXPECT_EQ(std::get<int64_t>((*only)[8]), 100);
  EXPECT_EQ(row(r1, "attn"), nullptr);
}

TEST(Ranges, NoRangesSaysSo) {
  Builder b;
  b.kernel(0, 11, 20, 1, 30);
  Store s = b.done();
  Report r;
  range_analysis(s, {}, &r);
  ASSERT_FALSE(r.headline.empty());
  EXPECT_NE(r.headline.back().find("no NVTX or user ranges"), std::string::npos);
  EXPECT_TRUE(r.tables.back().rows.empty());
}

// The typed result behind the table: exact ns, the coverage's two terms, the top-N cut.
TEST(Ranges, TypedResult) {
  Builder b;
  b.range(0, 11, 0, 100, "layer 0");
  b.range(0, 11, 10, 50, "attn");
  b.kernel(0, 11, 20, 1, 30);   // both
  b.kernel(0, 11, 60, 2, 40);   // layer 0
  b.kernel(0, 11, 500, 3, 70);  // none
  Store s = b.done();
  RangeOptions opt;
  opt.top = 1;
  const RangeResult r = range_analysis(s, opt);
  EXPECT_EQ(r.instances, 2);
  EXPECT_EQ(r.distinct, 2u);
  EXPECT_EQ(r.gpu_ns, 140);
  EXPECT_EQ(r.covered_ns, 70);  // each launch once, nested or not
  ASSERT_EQ(r.rows.size(), 1u);
  EXPECT_EQ(r.rows[0].name, "layer 0");
  EXPECT_EQ(r.rows[0].calls, 1);
  EXPECT_EQ(r.rows[0].gpu_items, 2);
  EXPECT_EQ(r.rows[0].gpu_ns, 70);
  EXPECT_EQ(r.rows[0].cpu_ns, 100);
  Report rep;
  range_report(r, &rep);
  EXPECT_DOUBLE_EQ(rep.json["ranges_coverage_pct"].get<double>(), 50.0);
}
