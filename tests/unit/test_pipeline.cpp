// The analysis registry and pipeline (pipeline.h): the registry's shape, the columns it derives,
// its results equal to each analysis run on its own, and --compat hta as the view of HTA's
// analyses only.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "kernalyse/crossrank.h"
#include "kernalyse/pipeline.h"

using namespace kernalyse;

namespace {

constexpr int64_t kUs = 1000;

// Two ranks, two steps; per step a GEMM, an all-reduce (rank 1 arrives 30 µs late) and a copy,
// with sub-µs times so that HTA's rounding changes numbers.
Store two_ranks() {
  Store s;
  const uint32_t gemm = s.strings.intern("sm90_xmma_gemm_bf16");
  const uint32_t ar = s.strings.intern("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  const uint32_t cp = s.strings.intern("Memcpy HtoD (Pageable -> Device)");
  const uint32_t allreduce = s.strings.intern("allreduce");
  auto& a = s.activities;
  int64_t corr = 1;
  for (int32_t r = 0; r < 2; ++r) {
    RankInfo ri;
    ri.rank = r, ri.world_size = 2, ri.source = "rank" + std::to_string(r);
    ri.clock_method = "MPI ping-pong";
    s.ranks.push_back(ri);
    for (int32_t step = 0; step < 2; ++step) {
      const int64_t t0 = step * 1000 * kUs + 333;
      auto add = [&](uint32_t name, Kind k, Category c, int64_t st, int64_t en) {
        a.rank.push_back(r), a.device.push_back(r), a.stream.push_back(7);
        a.kind.push_back(static_cast<uint8_t>(k)), a.category.push_back(static_cast<uint8_t>(c));
        a.start_ns.push_back(st), a.end_ns.push_back(en), a.name_id.push_back(name);
        a.correlation.push_back(corr), a.step.push_back(step);
        s.launches.rank.push_back(r), s.launches.pid.push_back(1), s.launches.tid.push_back(1);
        s.launches.start_ns.push_back(st - 5 * kUs), s.launches.end_ns.push_back(st - 4 * kUs);
        s.launches.name_id.push_back(0), s.launches.correlation.push_back(corr++);
        s.launches.step.push_back(step);
      };
      add(gemm, Kind::Kernel, Category::Computation, t0, t0 + 200 * kUs + r * 30 * kUs);
      const size_t row = a.size();
      add(ar, Kind::Kernel, Category::Communication, t0 + 210 * kUs + r * 30 * kUs,
          t0 + 400 * kUs + 7);
      s.nccl.activity.push_back(row), s.nccl.collective_id.push_back(allreduce);
      add(cp, Kind::Memcpy, Category::Memory, t0 + 450 * kUs, t0 + 500 * kUs + 999);
      auto& an = s.annotations;
      an.rank.push_back(r), an.kind.push_back(static_cast<uint8_t>(AnnotationKind::Step));
      an.pid.push_back(1), an.tid.push_back(1), an.start_ns.push_back(t0 - 10 * kUs);
      an.end_ns.push_back(t0 + 900 * kUs);
      an.name_id.push_back(s.strings.intern("ProfilerStep#" + std::to_string(step)));
      an.step.push_back(step);
    }
  }
  fill_unknown_columns(s);
  sort_activities(s);
  return s;
}

std::string json_text(const Report& r) {
  std::ostringstream o;
  render_json(r, o);
  return o.str();
}

std::vector<const Analysis*> named(std::initializer_list<const char*> names) {
  std::vector<const Analysis*> out;
  for (const char* n : names) {
    const Analysis* a = find_analysis(n);
    EXPECT_NE(a, nullptr) << n;
    if (a) out.push_back(a);
  }
  return out;
}

}  // namespace

TEST(Pipeline, RegistryNamesEachAnalysisOnce) {
  std::set<std::string> names, all;
  for (const Analysis* a : analyses()) {
    EXPECT_TRUE(names.insert(a->name).second) << a->name << " registered twice";
    EXPECT_FALSE(a->help.empty()) << a->name;
    EXPECT_TRUE(a->run && a->render) << a->name;
    if (a->in_all) all.insert(a->name);
  }
  EXPECT_EQ(all, (std::set<std::string>{"summary", "gaps", "overlap", "breakdown", "idle", "ranges",
                                        "energy", "stragglers"}));
  EXPECT_EQ(find_analysis("no-such-analysis"), nullptr);
  // HTA's analyses are the ones that declare its view.
  std::set<std::string> hta;
  for (const Analysis* a : analyses())
    if (a->view == View::Hta) hta.insert(a->name);
  EXPECT_EQ(hta, (std::set<std::string>{"overlap", "breakdown", "idle"}));
}

TEST(Pipeline, ColumnsFollowTheAnalysesReads) {
  int asked = 0;
  auto ranges = [&] {
    ++asked;
    return true;
  };
  ColumnSelection s = columns_for(named({"summary", "gaps"}), Compat::Native, false, ranges);
  EXPECT_FALSE(s.launches);
  EXPECT_FALSE(s.nccl);
  EXPECT_FALSE(s.ops);
  EXPECT_FALSE(s.activity_correlation);
  EXPECT_EQ(asked, 0) << "the ranges probe ran although no analysis joins ranges";
  s = columns_for(named({"summary"}), Compat::Native, /*may_align=*/true, ranges);
  EXPECT_TRUE(s.nccl) << "the clock inference matches collectives";
  s = columns_for(named({"stragglers"}), Compat::Native, false, ranges);
  EXPECT_TRUE(s.launches && s.nccl && s.activity_correlation && !s.launch_detail);
  s = columns_for(named({"ranges"}), Compat::Native, false, ranges);
  EXPECT_TRUE(s.launch_detail);
  EXPECT_EQ(asked, 1);
  s = columns_for(named({"ranges"}), Compat::Native, false, [] { return false; });
  EXPECT_FALSE(s.launch_detail);
  s = columns_for(named({"critical-path"}), Compat::Native, false, nullptr);
  EXPECT_TRUE(s.launch_detail && s.nccl);
  s = columns_for(named({"roofline"}), Compat::Native, false, nullptr);
  EXPECT_TRUE(s.ops && !s.ops_detail);
  // HTA's view cuts at the last step through the launches: only its analyses need them.
  EXPECT_FALSE(columns_for(named({"overlap"}), Compat::Native, false, nullptr).launches);
  EXPECT_TRUE(columns_for(named({"overlap"}), Compat::Hta, false, nullptr).launches);
  EXPECT_FALSE(columns_for(named({"summary"}), Compat::Hta, false, nullptr).launches);
}

TEST(Pipeline, ResultsEqualEachAnalysisRunAlone) {
  const Store s = two_ranks();
  AnalysisOptions o;
  o.top = 5;
  const AnalysisContext ctx(s, o);
  std::vector<const Analysis*> which = named({"stragglers", "summary", "idle", "gaps", "overlap"});
  AnalysisResults res = run_analyses(ctx, which, /*render=*/true);
  ASSERT_EQ(res.items.size(), 5u);
  // Registry order, whatever the order asked.
  EXPECT_EQ(res.items[0].analysis->name, "summary");
  EXPECT_EQ(res.items[4].analysis->name, "stragglers");
  ASSERT_NE(res.get<SummaryResult>("summary"), nullptr);
  EXPECT_EQ(res.get<SummaryResult>("summary")->all.count, 8);  // 4 kernels per rank
  EXPECT_EQ(res.get<GapResult>("ranges"), nullptr);            // not run
  Report got;
  append_results(std::move(res), ctx, &got);

  Report want;
  SummaryOptions so;
  so.top = 5;
  kernel_summary(s, so, &want);
  GapOptions go;
  go.top = 5;
  gap_analysis(s, go, &want);
  CrossRankOptions xo;
  xo.top = 5;
  overlap_report(rank_union_tables(s, xo), &want);
  idle_analysis(s, xo, &want);
  straggler_analysis(s, xo, &want);
  EXPECT_EQ(json_text(got), json_text(want));
}

TEST(Pipeline, CompatHtaIsTheViewOfHtasAnalysesOnly) {
  const Store s = two_ranks();
  AnalysisOptions o;
  o.compat = Compat::Hta;
  const AnalysisContext ctx(s, o);
  AnalysisResults res = run_analyses(ctx, named({"summary", "breakdown", "stragglers"}), true);
  // The summary and the ledger read the store: every kernel, every collective.
  EXPECT_EQ(res.get<SummaryResult>("summary")->all.count, 8);
  const auto& ledger = **res.get<std::shared_ptr<const StragglerResult>>("stragglers");
  EXPECT_EQ(ledger.collectives.size(), 2u);
  // The breakdown reads HTA's view: the last step cut, whole µs.
  const RankUnionTables& u = **res.get<const RankUnionTables*>("breakdown");
  CrossRankOptions hx;
  hx.compat = Compat::Hta;
  const RankUnionTables want = rank_union_tables(hta_view(s), hx);
  ASSERT_EQ(u.whole.size(), want.whole.size());
  for (size_t i = 0; i < u.whole.size(); ++i) {
    EXPECT_EQ(u.whole[i].u.span_ns, want.whole[i].u.span_ns);
    EXPECT_EQ(u.whole[i].u.compute_ns, want.whole[i].u.compute_ns);
    EXPECT_EQ(u.whole[i].u.span_ns % 1000, 0) << "HTA's view is in whole µs";
  }
  Report r;
  append_results(std::move(res), ctx, &r);
  ASSERT_FALSE(r.headline.empty());
  EXPECT_NE(r.headline.front().find("--compat hta"), std::string::npos);
  // Without an HTA analysis there is no HTA note.
  Report plain;
  append_results(run_analyses(ctx, named({"summary"}), true), ctx, &plain);
  for (const auto& h : plain.headline) EXPECT_EQ(h.find("--compat hta"), std::string::npos);
}

TEST(Pipeline, SharedValuesAreComputedOnce) {
  const Store s = two_ranks();
  const AnalysisContext ctx(s, AnalysisOptions{});
  int made = 0;
  for (int i = 0; i < 3; ++i) EXPECT_EQ(ctx.shared<int>("x", [&] { return ++made * 10; }), 10);
  EXPECT_EQ(made, 1);
  AnalysisResults res = run_analyses(ctx, named({"overlap", "breakdown"}), false);
  EXPECT_EQ(*res.get<const RankUnionTables*>("overlap"),
            *res.get<const RankUnionTables*>("breakdown"))
      << "overlap and breakdown share one union pass";
}
