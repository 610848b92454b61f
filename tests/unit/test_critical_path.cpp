// Critical path and what-if re-timing on hand-built graphs (docs/analyses.md, "Critical path").
// Every expected value is derived by hand in the comments next to it; times are written in µs.
#include <gtest/gtest.h>

#include <string>
#include <tuple>
#include <vector>

#include "kernalyse/critical_path.h"
#include "kernalyse/error.h"
#include "kernalyse/store.h"

namespace kernalyse {
namespace {

constexpr int64_t kUs = 1000;

struct GpuRow {
  int32_t rank, stream;
  int64_t start_us, end_us;
  std::string name;
  Category cat = Category::Computation;
  int64_t corr = kNoCorrelation;
};
struct HostRow {
  int32_t rank;
  int64_t start_us, end_us;
  std::string name;
  int64_t corr;
  int64_t tid = 1;
};

// Rows are given in store order: activities by (rank, stream, start), launches by (rank, start).
Store make(const std::vector<GpuRow>& gpu, const std::vector<HostRow>& host = {}) {
  Store s;
  Activities& a = s.activities;
  for (const GpuRow& g : gpu) {
    a.rank.push_back(g.rank), a.device.push_back(0), a.stream.push_back(g.stream);
    a.kind.push_back(static_cast<uint8_t>(Kind::Kernel));
    a.category.push_back(static_cast<uint8_t>(g.cat));
    a.start_ns.push_back(g.start_us * kUs), a.end_ns.push_back(g.end_us * kUs);
    a.name_id.push_back(s.strings.intern(g.name));
    a.correlation.push_back(g.corr), a.step.push_back(kNoStep);
  }
  LaunchCalls& l = s.launches;
  for (const HostRow& h : host) {
    l.rank.push_back(h.rank), l.pid.push_back(100), l.tid.push_back(h.tid);
    l.start_ns.push_back(h.start_us * kUs), l.end_ns.push_back(h.end_us * kUs);
    l.name_id.push_back(s.strings.intern(h.name)), l.correlation.push_back(h.corr);
    l.step.push_back(kNoStep);
  }
  int32_t max_rank = 0;
  for (const GpuRow& g : gpu) max_rank = std::max(max_rank, g.rank);
  for (int32_t r = 0; r <= max_rank; ++r) {
    RankInfo ri;
    ri.rank = r;
    s.ranks.push_back(ri);
  }
  return s;
}

CriticalPathOptions with(std::vector<std::string> specs) {
  CriticalPathOptions o;
  for (const auto& w : specs) o.what_if.push_back(parse_what_if(w));
  return o;
}

int64_t predicted(const CriticalPathResult& r, const std::string& scenario) {
  for (const WhatIfStep& w : r.what_if)
    if (w.scenario == scenario) return w.predicted_step_ns;
  return -1;
}

int64_t by_rank(const StepPath& p, int32_t rank) {
  for (const PathShare& x : p.by_rank)
    if (x.rank == rank) return x.ns;
  return 0;
}

// Two ranks, one all-reduce between two compute kernels:
//   rank 0: K0 [0,100] (stream 7), AR [100,330] (stream 20), K2 [330,400] (stream 7)
//   rank 1: K0 [0,200],            AR [200,330],             K2 [330,380]
// AR starts as K0 ends and K2 as AR ends, on another stream: both inferred event waits (gap 0).
// The last arrival is rank 1 at 200: transfer = 330 - 200 = 130 on both ranks.
Store two_ranks() {
  const Category comm = Category::Communication;
  return make({{0, 7, 0, 100, "K0"},
               {0, 7, 330, 400, "K2"},
               {0, 20, 100, 330, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", comm},
               {1, 7, 0, 200, "K0"},
               {1, 7, 330, 380, "K2"},
               {1, 20, 200, 330, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL", comm}});
}

TEST(CriticalPath, CollectiveJoinsTheLastArrival) {
  const Store s = two_ranks();
  const CriticalPathResult r = critical_path(s, CriticalPathOptions{});
  ASSERT_EQ(r.steps.size(), 1u);
  const StepPath& p = r.steps[0];
  // Sink: rank 0's K2 (ends 400). Back: K2 [330,400], AR transfer [200,330] on rank 0, then the
  // last arrival (rank 1's AR at 200), rank 1's K0 [0,200]. 400 = the whole span, no slack.
  EXPECT_EQ(p.span_end_ns - p.span_start_ns, 400 * kUs);
  EXPECT_EQ(p.path_ns, 400 * kUs);
  EXPECT_EQ(p.slack_ns, 0);
  EXPECT_EQ(p.by_kind[static_cast<int>(PathKind::Compute)], 270 * kUs);       // 70 + 200
  EXPECT_EQ(p.by_kind[static_cast<int>(PathKind::CommTransfer)], 130 * kUs);  // 330 - 200
  EXPECT_EQ(p.by_kind[static_cast<int>(PathKind::Idle)], 0);
  EXPECT_EQ(by_rank(p, 0), 200 * kUs);  // K2 70 + transfer 130
  EXPECT_EQ(by_rank(p, 1), 200 * kUs);  // K0
  EXPECT_EQ(p.collectives, 1);
  EXPECT_EQ(p.collectives_on_path, 1);
  EXPECT_EQ(p.edges_inferred, 4);  // AR after K0 and K2 after AR, on both ranks
  ASSERT_EQ(p.segments.size(), 3u);
  EXPECT_EQ(p.segments[0].rank, 1);
  EXPECT_EQ(p.segments[0].name, "K0");
  EXPECT_EQ(p.segments[1].kind, PathKind::CommTransfer);
  EXPECT_EQ(p.segments[1].start_ns, 200 * kUs);
  EXPECT_EQ(p.segments[2].name, "K2");
}

TEST(CriticalPath, WhatIfRetimesTheGraph) {
  const Store s = two_ranks();
  const CriticalPathResult r = critical_path(
      s, with({"rank=1:median", "kernel=^nomatch$:x2", "comm=overlapped", "kernel=^K0$:x2"}));
  ASSERT_EQ(r.what_if.size(), 4u);
  for (const WhatIfStep& w : r.what_if) EXPECT_EQ(w.measured_step_ns, 400 * kUs);
  // rank 1 at rank 0's durations (the only other rank): K0 100, K2 70. Both arrive at 100, end at
  // 100 + 130 = 230; K2 ends at 300 on both ranks.
  EXPECT_EQ(predicted(r, "rank=1:median"), 300 * kUs);
  // Nothing changed: the re-time reproduces the measured times exactly.
  EXPECT_EQ(predicted(r, "kernel=^nomatch$:x2"), 400 * kUs);
  // No transfer: AR ends at the last arrival (200); K2 [200,270] on rank 0.
  EXPECT_EQ(predicted(r, "comm=overlapped"), 270 * kUs);
  // K0 twice as fast: 50 and 100; last arrival 100, ends 230, K2 ends 300.
  EXPECT_EQ(predicted(r, "kernel=^K0$:x2"), 300 * kUs);
  EXPECT_EQ(r.what_if[0].saved_ns, 100 * kUs);
}

// One rank, one thread: launch A, sync on the stream, host work, launch B.
//   L1 cudaLaunchKernel [0,5] → A [10,110]; S cudaStreamSynchronize [20,115] (waits for A, returns
//   5 after it ended); L2 cudaLaunchKernel [165,170] → B [175,225].
Store host_chain() {
  return make({{0, 7, 10, 110, "A", Category::Computation, 1},
               {0, 7, 175, 225, "B", Category::Computation, 3}},
              {{0, 0, 5, "cudaLaunchKernel", 1},
               {0, 20, 115, "cudaStreamSynchronize", 2},
               {0, 165, 170, "cudaLaunchKernel", 3}});
}

TEST(CriticalPath, HostLaunchAndSync) {
  const Store s = host_chain();
  const CriticalPathResult r = critical_path(s, with({"kernel=^A$:x2"}));
  ASSERT_EQ(r.steps.size(), 1u);
  const StepPath& p = r.steps[0];
  // B [175,225] compute; launch latency [165,175]; host [115,165] and the sync's return [110,115];
  // A [10,110]; its launch latency lies before the span (10) and is not part of the step.
  EXPECT_EQ(p.path_ns, 215 * kUs);
  EXPECT_EQ(p.by_kind[static_cast<int>(PathKind::Compute)], 150 * kUs);
  EXPECT_EQ(p.by_kind[static_cast<int>(PathKind::LaunchLatency)], 10 * kUs);
  EXPECT_EQ(p.by_kind[static_cast<int>(PathKind::Host)], 55 * kUs);
  // A twice as fast: [10,60]; the sync returns at 65 (50 earlier), so L2 starts at 115 and B at
  // 125, ending at 175: span 165.
  EXPECT_EQ(predicted(r, "kernel=^A$:x2"), 165 * kUs);
}

// The by-range roll-up: the innermost NVTX range around each launch, also when an inner range
// starts together with its enclosing one (as a model's "attn" inside "layer 0").
TEST(CriticalPath, InnermostRangeOfTheLaunch) {
  Store s = host_chain();
  Annotations& an = s.annotations;
  for (auto [name, start, end] :
       {std::tuple<const char*, int64_t, int64_t>{"outer", 0, 200}, {"inner", 0, 10}}) {
    an.rank.push_back(0), an.kind.push_back(static_cast<uint8_t>(AnnotationKind::Nvtx));
    an.pid.push_back(100), an.tid.push_back(1);
    an.start_ns.push_back(start * kUs), an.end_ns.push_back(end * kUs);
    an.name_id.push_back(s.strings.intern(name)), an.step.push_back(kNoStep);
  }
  const StepPath p = critical_path(s, CriticalPathOptions{}).steps[0];
  ASSERT_EQ(p.by_range.size(), 2u);
  // A (launched at 0): its 100 µs; B (launched at 165): compute 50 + launch latency 10.
  EXPECT_EQ(p.by_range[0].name, "inner");
  EXPECT_EQ(p.by_range[0].ns, 100 * kUs);
  EXPECT_EQ(p.by_range[1].name, "outer");
  EXPECT_EQ(p.by_range[1].ns, 60 * kUs);
}

// Two streams of one rank, no launches: Y starts 1 µs after X ended on the other stream.
TEST(CriticalPath, InferredEventWaitWithinTolerance) {
  const Store s = make({{0, 7, 0, 100, "X"}, {0, 8, 101, 150, "Y"}});
  CriticalPathOptions o = with({"kernel=^X$:x2"});
  CriticalPathResult r = critical_path(s, o);
  EXPECT_EQ(r.steps[0].edges_inferred, 1);
  EXPECT_EQ(r.steps[0].by_kind[static_cast<int>(PathKind::Idle)], 1 * kUs);
  EXPECT_EQ(predicted(r, "kernel=^X$:x2"), 100 * kUs);  // X [0,50], Y [51,100]
  o.event_tolerance_ns = 0;  // a 1 µs gap is then no evidence: Y keeps its start
  r = critical_path(s, o);
  EXPECT_EQ(r.steps[0].edges_inferred, 0);
  EXPECT_EQ(predicted(r, "kernel=^X$:x2"), 150 * kUs);
  EXPECT_EQ(r.steps[0].path_ns, 49 * kUs);  // Y only: X has slack
  EXPECT_EQ(r.steps[0].slack_ns, 101 * kUs);
}

// Point-to-point: rank 0 computes K [0,100] then sends [100,300]; rank 1 posts its recv at 50
// [50,300] and computes K2 [300,350] on the result. The pair completes once both arrived (100):
// transfer 200 on both sides.
TEST(CriticalPath, SendRecvPairCompletesTogether) {
  const Category comm = Category::Communication;
  Store s = make({{0, 7, 0, 100, "K"},
                  {0, 20, 100, 300, "ncclDevKernel_SendRecv", comm},
                  {1, 7, 300, 350, "K2"},
                  {1, 20, 50, 300, "ncclDevKernel_SendRecv", comm}});
  NcclInfo& n = s.nccl;
  for (uint64_t row : {1u, 3u}) {
    n.activity.push_back(row);
    n.collective_id.push_back(s.strings.intern(row == 1 ? "Send" : "Recv"));
    n.seq.push_back(0), n.pg_name_id.push_back(s.strings.intern("pp"));
    n.pg_desc_id.push_back(0), n.pg_ranks_id.push_back(0), n.group_size.push_back(2);
    n.in_nelems.push_back(-1), n.out_nelems.push_back(-1), n.msg_bytes.push_back(-1);
    n.dtype_id.push_back(0);
  }
  fill_unknown_columns(n);
  const CriticalPathResult r = critical_path(s, with({"kernel=^K$:x2"}));
  const StepPath& p = r.steps[0];
  EXPECT_EQ(p.collectives, 1);
  EXPECT_EQ(p.collectives_on_path, 1);
  // K2 [300,350], transfer [100,300] on rank 1, then the sender's K [0,100].
  EXPECT_EQ(p.path_ns, 350 * kUs);
  EXPECT_EQ(p.by_kind[static_cast<int>(PathKind::CommTransfer)], 200 * kUs);
  EXPECT_EQ(by_rank(p, 0), 100 * kUs);
  // K [0,50]: the pair completes at 50 + 200, K2 ends at 300.
  EXPECT_EQ(predicted(r, "kernel=^K$:x2"), 300 * kUs);
}

TEST(CriticalPath, ParsesWhatIf) {
  EXPECT_EQ(parse_what_if("rank=3:median").rank, 3);
  const WhatIf k = parse_what_if("kernel=gemm:x1.5");
  EXPECT_EQ(k.kind, WhatIf::Kind::KernelFaster);
  EXPECT_EQ(k.regex, "gemm");
  EXPECT_DOUBLE_EQ(k.factor, 1.5);
  EXPECT_EQ(parse_what_if("kernel=a:b:x2").regex, "a:b");
  EXPECT_EQ(parse_what_if("comm=overlapped").kind, WhatIf::Kind::CommOverlapped);
  for (const char* bad : {"rank=:median", "rank=2", "rank=2:mean", "kernel=gemm", "kernel=gemm:x0",
                          "kernel=gemm:x-1", "kernel=(:x2", "comm=on", ""})
    EXPECT_THROW(parse_what_if(bad), Error) << bad;
  // A rank the store does not have.
  EXPECT_THROW(critical_path(two_ranks(), with({"rank=9:median"})), Error);
}

}  // namespace
}  // namespace kernalyse
