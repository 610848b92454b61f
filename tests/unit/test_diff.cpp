// Trace diff (analysis/analyses/src/diff.cpp): kernels matched by full name, one-sided names
// grouped by the innermost range that launched them, partial groups, steps, and the per-rank
// figures taken from the analyses' typed results.
#include <gtest/gtest.h>

#include <map>

#include "kernalyse/crossrank.h"
#include "kernalyse/diff.h"

using namespace kernalyse;

namespace {

struct Builder {
  Store s;
  int64_t corr = 0;
  int64_t corr_step = 1;  // > 1: sparse correlation ids (the join's sorted-table path)
  void range(int64_t start, int64_t end, const char* name) {
    auto& a = s.annotations;
    a.rank.push_back(0);
    a.kind.push_back(static_cast<uint8_t>(AnnotationKind::User));
    a.pid.push_back(1);
    a.tid.push_back(1);
    a.start_ns.push_back(start);
    a.end_ns.push_back(end);
    a.name_id.push_back(s.strings.intern(name));
    a.step.push_back(kNoStep);
  }
  // A launch at `at` on thread 1 of rank 0 and its kernel, starting 1000 ns later.
  void kernel(int64_t at, const char* name, int64_t dur) {
    corr += corr_step;
    auto& l = s.launches;
    l.rank.push_back(0);
    l.pid.push_back(1);
    l.tid.push_back(1);
    l.start_ns.push_back(at);
    l.end_ns.push_back(at + 5);
    l.name_id.push_back(s.strings.intern("cudaLaunchKernel"));
    l.correlation.push_back(corr);
    l.step.push_back(kNoStep);
    auto& a = s.activities;
    a.rank.push_back(0);
    a.device.push_back(0);
    a.stream.push_back(7);
    a.kind.push_back(static_cast<uint8_t>(Kind::Kernel));
    a.category.push_back(static_cast<uint8_t>(Category::Computation));
    a.start_ns.push_back(1000 + at);
    a.end_ns.push_back(1000 + at + dur);
    a.name_id.push_back(s.strings.intern(name));
    a.correlation.push_back(corr);
    a.step.push_back(kNoStep);
  }
  // The ATen op that launched the last kernel (an /ops row joined by correlation).
  void op(const char* name) {
    auto& o = s.ops;
    o.rank.push_back(0);
    o.pid.push_back(1);
    o.tid.push_back(1);
    o.start_ns.push_back(s.launches.start_ns.back() - 1);
    o.end_ns.push_back(s.launches.end_ns.back() + 1);
    o.name_id.push_back(s.strings.intern(name));
    o.external_id.push_back(corr);
    o.correlation.push_back(corr);
    o.dims_id.push_back(0);
    o.types_id.push_back(0);
    o.concrete_id.push_back(0);
  }
  Store done() {
    RankInfo ri;
    ri.rank = 0;
    s.ranks.push_back(ri);
    sort_activities(s);
    return std::move(s);
  }
};

const KernelOnly* find(const std::vector<KernelOnly>& v, const std::string& n) {
  for (const auto& k : v)
    if (k.name == n) return &k;
  return nullptr;
}

}  // namespace

TEST(Diff, FusionUnderInnermostRangeAndLeftovers) {
  Builder b, t;
  // BASE: "block" encloses "act" (innermost) launching mul+add; "add" also launched outside any
  // range once; "gone" outside any range.
  b.range(0, 10'000, "block");
  b.range(100, 900, "act");
  b.kernel(200, "mul", 50);
  b.kernel(300, "add", 40);
  b.kernel(20'000, "add", 30);
  b.kernel(21'000, "gone", 70);
  b.kernel(22'000, "gemm", 100);
  // TEST: the same ranges, one fused kernel under "act"; "gemm" slower.
  t.range(0, 10'000, "block");
  t.range(100, 900, "act");
  t.kernel(200, "fused", 60);
  t.kernel(22'000, "gemm", 150);
  DiffOptions o;
  o.cross_rank = false;
  TraceDiff d = diff_stores(b.done(), t.done(), o);
  ASSERT_EQ(d.replaced.size(), 1u);
  const ReplacedGroup& g = d.replaced[0];
  EXPECT_EQ(g.range, "act");
  EXPECT_EQ(g.base.count, 2);
  EXPECT_EQ(g.base.total_ns, 90);
  EXPECT_EQ(g.test.count, 1);
  EXPECT_EQ(g.test.total_ns, 60);
  // What the group does not explain stays one-sided: the add launched outside, and "gone".
  ASSERT_EQ(d.only_base.size(), 2u);
  ASSERT_NE(find(d.only_base, "add"), nullptr);
  EXPECT_EQ(find(d.only_base, "add")->side.count, 1);
  EXPECT_EQ(find(d.only_base, "add")->side.total_ns, 30);
  EXPECT_EQ(find(d.only_base, "gone")->side.total_ns, 70);
  EXPECT_TRUE(d.only_test.empty());
  ASSERT_EQ(d.kernels.size(), 1u);
  EXPECT_EQ(d.kernels[0].name, "gemm");
  EXPECT_EQ(d.kernels[0].test.total_ns - d.kernels[0].base.total_ns, 50);
  EXPECT_FALSE(d.identical());
}

// Correlation ids a billion apart (sparse: the join sorts instead of indexing), and the sliced
// input run_diff uses: the same group as with dense ids. TEST's string table also holds BASE's
// one-sided names (as if another rank had them), so the first pass cannot know they are
// one-sided: a second pass over BASE gathers their launchers.
TEST(Diff, SparseCorrelationIdsAndASecondPassGiveTheSameGroup) {
  Builder b, t;
  b.corr_step = t.corr_step = 1'000'000'000;
  b.range(0, 10'000, "block");
  b.range(100, 900, "act");
  b.kernel(200, "mul", 50);
  b.kernel(300, "add", 40);
  b.kernel(20'000, "add", 30);
  t.range(0, 10'000, "block");
  t.range(100, 900, "act");
  t.kernel(200, "fused", 60);
  t.s.strings.intern("mul"), t.s.strings.intern("add");
  DiffOptions o;
  o.cross_rank = false;
  const Store base = b.done(), test = t.done();
  int base_passes = 0, test_passes = 0;
  const DiffInput bi{&base, [&](const auto& f) { ++base_passes, f(base); }};
  const DiffInput ti{&test, [&](const auto& f) { ++test_passes, f(test); }};
  TraceDiff d = diff_inputs(bi, ti, o);
  EXPECT_EQ(base_passes, 2);
  EXPECT_EQ(test_passes, 1);  // "fused" is not in BASE's strings: gathered in the first pass
  ASSERT_EQ(d.replaced.size(), 1u);
  EXPECT_EQ(d.replaced[0].range, "act");
  EXPECT_EQ(d.replaced[0].base.count, 2);
  EXPECT_EQ(d.replaced[0].base.total_ns, 90);
  EXPECT_EQ(d.replaced[0].test.total_ns, 60);
  ASSERT_EQ(d.only_base.size(), 1u);
  EXPECT_EQ(d.only_base[0].side.total_ns, 30);
}

// Two ranges starting together (the inner one recorded first, as a range closes first): the
// longer encloses the other, so the group is named after the inner one.
TEST(Diff, RangesStartingTogetherNameTheInnerOne) {
  Builder b, t;
  for (Builder* x : {&b, &t}) {
    x->range(100, 900, "attn");
    x->range(100, 10'000, "layer 0");
  }
  b.kernel(200, "mul", 50);
  t.kernel(200, "fused", 60);
  DiffOptions o;
  o.cross_rank = false;
  TraceDiff d = diff_stores(b.done(), t.done(), o);
  ASSERT_EQ(d.replaced.size(), 1u);
  EXPECT_EQ(d.replaced[0].range, "attn");
}

TEST(Diff, NoSharedRangeMeansNoGroup) {
  Builder b, t;
  b.range(0, 1000, "eager");
  b.kernel(100, "a", 10);
  t.range(0, 1000, "compiled");
  t.kernel(100, "b", 10);
  DiffOptions o;
  o.cross_rank = false;
  TraceDiff d = diff_stores(b.done(), t.done(), o);
  EXPECT_TRUE(d.replaced.empty());
  ASSERT_EQ(d.only_base.size(), 1u);
  ASSERT_EQ(d.only_test.size(), 1u);
}

// Another vendor's kernels for the same ATen ops, no ranges: grouped by the launching op. A range
// group takes its kernels first; what is left of a name goes to the op rule; an op only one side
// launched forms nothing.
TEST(Diff, OneSidedKernelsUnderTheSameAtenOpFormAnOpGroup) {
  Builder b, t;
  b.range(0, 1000, "attn");
  b.kernel(100, "cuda_softmax", 10);
  b.op("aten::softmax");  // under a range both sides share: a range group, not an op group
  b.kernel(2000, "cuda_softmax", 20);
  b.op("aten::softmax");
  b.kernel(3000, "cuda_gelu_a", 30);
  b.op("aten::gelu");
  b.kernel(4000, "cuda_gelu_b", 5);
  b.op("aten::gelu");
  b.kernel(5000, "cuda_only_here", 7);
  b.op("aten::cumsum");
  t.range(0, 1000, "attn");
  t.kernel(100, "rocm_softmax", 8);
  t.op("aten::softmax");
  t.kernel(2000, "rocm_softmax", 12);
  t.op("aten::softmax");
  t.kernel(3000, "rocm_gelu", 25);
  t.op("aten::gelu");
  t.kernel(6000, "rocm_new", 9);
  t.op("aten::sort");
  DiffOptions o;
  o.cross_rank = false;
  TraceDiff d = diff_stores(b.done(), t.done(), o);
  ASSERT_EQ(d.replaced.size(), 3u);
  EXPECT_EQ(d.replaced[0].by, "range");
  EXPECT_EQ(d.replaced[0].range, "attn");
  EXPECT_EQ(d.replaced[0].base.total_ns, 10);
  EXPECT_EQ(d.replaced[0].test.total_ns, 8);
  std::map<std::string, const ReplacedGroup*> ops;
  for (size_t i = 1; i < d.replaced.size(); ++i) {
    EXPECT_EQ(d.replaced[i].by, "op");
    ops[d.replaced[i].range] = &d.replaced[i];
  }
  ASSERT_EQ(ops.count("aten::softmax"), 1u);
  EXPECT_EQ(ops["aten::softmax"]->base.count, 1);  // the one outside "attn"
  EXPECT_EQ(ops["aten::softmax"]->base.total_ns, 20);
  EXPECT_EQ(ops["aten::softmax"]->test.total_ns, 12);
  ASSERT_EQ(ops.count("aten::gelu"), 1u);
  EXPECT_EQ(ops["aten::gelu"]->before.size(), 2u);  // two kernels became one
  EXPECT_EQ(ops["aten::gelu"]->base.total_ns, 35);
  EXPECT_EQ(ops["aten::gelu"]->test.total_ns, 25);
  ASSERT_EQ(d.only_base.size(), 1u);
  EXPECT_EQ(d.only_base[0].name, "cuda_only_here");
  ASSERT_EQ(d.only_test.size(), 1u);
  EXPECT_EQ(d.only_test[0].name, "rocm_new");
}

TEST(Diff, SelfIsIdenticalAndRanksComeFromTheAnalyses) {
  Builder b;
  b.kernel(100, "a", 10);
  b.kernel(500, "b", 20);
  b.kernel(900, "a", 30);
  const Store s = b.done();
  TraceDiff d = diff_stores(s, s, DiffOptions{});
  EXPECT_TRUE(d.identical());
  ASSERT_EQ(d.ranks.size(), 1u);
  ASSERT_TRUE(d.ranks[0].base && d.ranks[0].test);
  // The rank figures are the overlap/breakdown unions and the idle split, unchanged.
  CrossRankOptions xo;
  auto u = rank_unions(s, xo, false);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(d.ranks[0].base->unions.span_ns, u[0].u.span_ns);
  EXPECT_EQ(d.ranks[0].base->unions.busy_ns, 60);
  auto idle = stream_idle(s, xo);
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_EQ(d.ranks[0].base->host_wait_ns + d.ranks[0].base->kernel_wait_ns +
                d.ranks[0].base->other_idle_ns,
            idle[0].host_ns + idle[0].kernel_ns + idle[0].other_ns);
  EXPECT_EQ(u[0].u.span_ns - u[0].u.busy_ns,
            idle[0].host_ns + idle[0].kernel_ns + idle[0].other_ns);
  // The JSON object says so too.
  Report r = diff_report(d);
  EXPECT_TRUE(r.json["diff"]["identical"].get<bool>());
  EXPECT_EQ(r.json["diff"]["kernels"].size(), 2u);
}
