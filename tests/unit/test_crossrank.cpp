// Cross-rank analyses on hand-made data: union_stats interval arithmetic, overlap and temporal
// breakdown, idle breakdown (native and HTA), the HTA view, and the straggler ledger with
// planted truth. Every expected value is derived by hand in the comments next to it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "kernalyse/analysis.h"
#include "kernalyse/checked.h"
#include "kernalyse/collectives.h"
#include "kernalyse/crossrank.h"
#include "kernalyse/export.h"
#include "kernalyse/report.h"
#include "kernalyse/store.h"
#include "kernalyse/units.h"

namespace kernalyse {
namespace {

constexpr int64_t kUs = 1000;  // ns per µs; hand-made times below are written in µs

// --- store building -------------------------------------------------------------------------

struct Nccl {
  std::string collective;
  int64_t seq;
  std::string pg_name;
  std::string pg_ranks;
  int64_t msg_bytes;
};

struct Row {
  Row(int32_t rank_, int32_t stream_, int64_t start_us_, int64_t end_us_, std::string name_,
      Category cat_ = Category::Computation, Kind kind_ = Kind::Kernel,
      int64_t corr_ = kNoCorrelation, int32_t step_ = kNoStep)
      : rank(rank_),
        stream(stream_),
        start_us(start_us_),
        end_us(end_us_),
        name(std::move(name_)),
        cat(cat_),
        kind(kind_),
        corr(corr_),
        step(step_) {}
  int32_t rank;
  int32_t stream;
  int64_t start_us;
  int64_t end_us;
  std::string name;
  Category cat;
  Kind kind;
  int64_t corr;
  int32_t step;
  std::optional<Nccl> nccl;
  int32_t device = 0;
  int64_t start_ns_extra = 0;  // sub-µs offsets (hta_view rounding tests)
  int64_t end_ns_extra = 0;
};

struct Launch {
  int32_t rank;
  int64_t corr;
  int64_t start_us;
  int64_t start_ns_extra = 0;
};

// Activities sorted by (rank, device, stream, start, end) as a merged store is; nccl rows point
// at the sorted indices.
Store make_store(std::vector<Row> rows, const std::vector<Launch>& launches = {}, int nranks = -1) {
  std::stable_sort(rows.begin(), rows.end(), [](const Row& x, const Row& y) {
    auto kx = std::make_tuple(x.rank, x.device, x.stream, x.start_us * kUs + x.start_ns_extra,
                              x.end_us * kUs + x.end_ns_extra);
    auto ky = std::make_tuple(y.rank, y.device, y.stream, y.start_us * kUs + y.start_ns_extra,
                              y.end_us * kUs + y.end_ns_extra);
    return kx < ky;
  });
  Store s;
  Activities& a = s.activities;
  int32_t max_rank = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const Row& r = rows[i];
    max_rank = std::max(max_rank, r.rank);
    a.rank.push_back(r.rank);
    a.device.push_back(r.device);
    a.stream.push_back(r.stream);
    a.kind.push_back(static_cast<uint8_t>(r.kind));
    a.category.push_back(static_cast<uint8_t>(r.cat));
    a.start_ns.push_back(r.start_us * kUs + r.start_ns_extra);
    a.end_ns.push_back(r.end_us * kUs + r.end_ns_extra);
    a.name_id.push_back(s.strings.intern(r.name));
    a.correlation.push_back(r.corr);
    a.step.push_back(r.step);
    if (r.nccl) {
      NcclInfo& n = s.nccl;
      n.activity.push_back(i);
      n.collective_id.push_back(s.strings.intern(r.nccl->collective));
      n.seq.push_back(r.nccl->seq);
      n.pg_name_id.push_back(s.strings.intern(r.nccl->pg_name));
      n.pg_desc_id.push_back(s.strings.intern("default_pg"));
      n.pg_ranks_id.push_back(s.strings.intern(r.nccl->pg_ranks));
      n.group_size.push_back(-1);
      n.in_nelems.push_back(-1);
      n.out_nelems.push_back(-1);
      n.msg_bytes.push_back(r.nccl->msg_bytes);
      n.dtype_id.push_back(s.strings.intern("Float"));
    }
  }
  for (const Launch& l : launches) {
    LaunchCalls& c = s.launches;
    c.rank.push_back(l.rank);
    c.pid.push_back(100 + l.rank);
    c.tid.push_back(100 + l.rank);
    c.start_ns.push_back(l.start_us * kUs + l.start_ns_extra);
    c.end_ns.push_back(l.start_us * kUs + l.start_ns_extra + 5 * kUs);
    c.name_id.push_back(s.strings.intern("cudaLaunchKernel"));
    c.correlation.push_back(l.corr);
    c.step.push_back(kNoStep);
  }
  if (nranks < 0) nranks = max_rank + 1;
  for (int32_t r = 0; r < nranks; ++r) {
    RankInfo ri;
    ri.rank = r;
    ri.world_size = nranks;
    s.ranks.push_back(ri);
  }
  return s;
}

void add_step(Store& s, int32_t rank, AnnotationKind kind, const std::string& name,
              int64_t start_ns, int64_t end_ns, int32_t step) {
  Annotations& an = s.annotations;
  an.rank.push_back(rank);
  an.kind.push_back(static_cast<uint8_t>(kind));
  an.pid.push_back(0);
  an.tid.push_back(0);
  an.start_ns.push_back(start_ns);
  an.end_ns.push_back(end_ns);
  an.name_id.push_back(s.strings.intern(name));
  an.step.push_back(step);
}

// --- table access -----------------------------------------------------------------------------

const Table& table(Report&&, const std::string&) = delete;  // would dangle
const Table& table(const Report& rep, const std::string& key) {
  for (const Table& t : rep.tables)
    if (t.key == key) return t;
  throw std::runtime_error("no table " + key);
}
bool has_table(const Report& rep, const std::string& key) {
  return std::any_of(rep.tables.begin(), rep.tables.end(),
                     [&](const Table& t) { return t.key == key; });
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
std::string sval(const Table& t, size_t row, const std::string& c) {
  return std::get<std::string>(t.rows.at(row).at(col(t, c)));
}
bool is_null(const Table& t, size_t row, const std::string& c) {
  return std::holds_alternative<std::monostate>(t.rows.at(row).at(col(t, c)));
}

nlohmann::json as_json(const Report& r) {
  std::ostringstream o;
  render_json(r, o);
  return nlohmann::json::parse(o.str());
}

constexpr double kEps = 1e-9;

// ============================================================================================
// 1. union_stats
// ============================================================================================

TEST(UnionStats, EmptyInput) {
  const UnionStats u = union_stats({});
  EXPECT_EQ(u.count, 0);
  EXPECT_EQ(u.span_ns, 0);
  EXPECT_EQ(u.busy_ns, 0);
  EXPECT_EQ(u.compute_ns, 0);
  EXPECT_EQ(u.comm_ns, 0);
  EXPECT_EQ(u.overlap_ns, 0);
  EXPECT_EQ(u.comm_excl_ns, 0);
  EXPECT_EQ(u.memory_excl_ns, 0);
  EXPECT_EQ(u.other_excl_ns, 0);
}

TEST(UnionStats, AllShapesTogether) {
  // comp: [0,100) and [50,150) overlap, [150,200) touches, [20,30) nested, [600,650) disjoint
  //   → U(comp) = [0,200) ∪ [600,650) = 200 + 50 = 250
  // comm: [180,300) → 120; ∩ comp = [180,200) = 20; exposed = 100
  // mem:  [250,400) minus U(comp ∪ comm) = [0,300) → [300,400) = 100
  // other: [390,500) minus the rest ([0,400)) → [400,500) = 100
  // busy: [0,500) ∪ [600,650) = 550 (= 250 + 100 + 100 + 100); span 650 - 0 = 650
  // Given in scrambled order: union_stats sorts.
  const UnionStats u = union_stats({{390, 500, Category::Other},
                                    {150, 200, Category::Computation},
                                    {600, 650, Category::Computation},
                                    {250, 400, Category::Memory},
                                    {50, 150, Category::Computation},
                                    {180, 300, Category::Communication},
                                    {20, 30, Category::Computation},
                                    {0, 100, Category::Computation}});
  EXPECT_EQ(u.count, 8);
  EXPECT_EQ(u.compute_ns, 250);
  EXPECT_EQ(u.comm_ns, 120);
  EXPECT_EQ(u.overlap_ns, 20);
  EXPECT_EQ(u.comm_excl_ns, 100);
  EXPECT_EQ(u.memory_excl_ns, 100);
  EXPECT_EQ(u.other_excl_ns, 100);
  EXPECT_EQ(u.busy_ns, 550);
  EXPECT_EQ(u.span_ns, 650);
}

TEST(UnionStats, InterleavedCommAndComputeOverlap) {
  // comm [0,10) [20,30) [40,50) = 30; comp [5,25) [45,60) = 35
  // ∩: [5,10)=5, [20,25)=5, [45,50)=5 → 15; exposed comm 30 - 15 = 15
  // busy [0,30) ∪ [40,60) = 50; span 60; other = 50 - 35 - 15 - 0 = 0
  const UnionStats u = union_stats({{0, 10, Category::Communication},
                                    {20, 30, Category::Communication},
                                    {40, 50, Category::Communication},
                                    {5, 25, Category::Computation},
                                    {45, 60, Category::Computation}});
  EXPECT_EQ(u.comm_ns, 30);
  EXPECT_EQ(u.compute_ns, 35);
  EXPECT_EQ(u.overlap_ns, 15);
  EXPECT_EQ(u.comm_excl_ns, 15);
  EXPECT_EQ(u.busy_ns, 50);
  EXPECT_EQ(u.span_ns, 60);
  EXPECT_EQ(u.other_excl_ns, 0);
  EXPECT_EQ(u.memory_excl_ns, 0);
}

TEST(UnionStats, TouchingAcrossCategoriesIsNoOverlap) {
  // comm [0,10) then comp [10,20): they touch, ∩ is empty.
  const UnionStats u =
      union_stats({{0, 10, Category::Communication}, {10, 20, Category::Computation}});
  EXPECT_EQ(u.overlap_ns, 0);
  EXPECT_EQ(u.comm_excl_ns, 10);
  EXPECT_EQ(u.busy_ns, 20);
  EXPECT_EQ(u.span_ns, 20);
}

TEST(UnionStats, CommHiddenUnderComputeAndMemoryHiddenUnderBoth) {
  // comp [0,100); comm [10,40) inside comp → overlap 30, exposed 0.
  // comm [120,150) outside comp; mem [90,130) lies in comp ∪ comm? [90,100) in comp,
  // [100,120) in neither, [120,130) in comm → memory exclusive = 20.
  // busy [0,150) = 150 = comp 100 + exposed comm 30 + mem 20 + other 0.
  const UnionStats u = union_stats({{0, 100, Category::Computation},
                                    {10, 40, Category::Communication},
                                    {120, 150, Category::Communication},
                                    {90, 130, Category::Memory}});
  EXPECT_EQ(u.comm_ns, 60);
  EXPECT_EQ(u.overlap_ns, 30);
  EXPECT_EQ(u.comm_excl_ns, 30);
  EXPECT_EQ(u.memory_excl_ns, 20);
  EXPECT_EQ(u.other_excl_ns, 0);
  EXPECT_EQ(u.busy_ns, 150);
}

TEST(UnionStats, CategoryWithNoIntervals) {
  // No communication at all: comm, overlap and exposed are 0; memory and other still split.
  // comp [0,50); mem [40,80) → excl [50,80) = 30; other [70,100) → excl [80,100) = 20.
  const UnionStats u = union_stats(
      {{0, 50, Category::Computation}, {40, 80, Category::Memory}, {70, 100, Category::Other}});
  EXPECT_EQ(u.comm_ns, 0);
  EXPECT_EQ(u.overlap_ns, 0);
  EXPECT_EQ(u.comm_excl_ns, 0);
  EXPECT_EQ(u.compute_ns, 50);
  EXPECT_EQ(u.memory_excl_ns, 30);
  EXPECT_EQ(u.other_excl_ns, 20);
  EXPECT_EQ(u.busy_ns, 100);

  // Only "other" intervals: everything busy is other; compute 0.
  const UnionStats o =
      union_stats({{5, 15, Category::Other}, {10, 30, Category::Other}, {40, 45, Category::Other}});
  EXPECT_EQ(o.compute_ns, 0);
  EXPECT_EQ(o.busy_ns, 30);  // [5,30) + [40,45)
  EXPECT_EQ(o.other_excl_ns, 30);
  EXPECT_EQ(o.span_ns, 40);
}

// ============================================================================================
// 2. overlap_analysis / breakdown_analysis
// ============================================================================================

// Rank 0 (µs): comp [0,100) s7 step 1; comm [50,200) s20 step 1; memcpy [220,260) s7 step 2;
//   "other" kernel [270,280) s7 step 2; a Sync [300,1000) that native mode leaves out.
// Rank 1: comp [0,400) s7 step 1; memset [400,450) s7 step 2; no communication.
Store overlap_store(bool with_steps) {
  auto st = [&](int32_t n) { return with_steps ? n : kNoStep; };
  return make_store({
      {0, 7, 0, 100, "gemm", Category::Computation, Kind::Kernel, 1, st(1)},
      {0, 20, 50, 200, "ncclDevKernel_AllReduce", Category::Communication, Kind::Kernel, 2, st(1)},
      {0, 7, 220, 260, "Memcpy DtoH", Category::Memory, Kind::Memcpy, 3, st(2)},
      {0, 7, 270, 280, "mystery", Category::Other, Kind::Kernel, 4, st(2)},
      {0, 8, 300, 1000, "Context Sync", Category::Other, Kind::Sync, kNoCorrelation, st(2)},
      {1, 7, 0, 400, "gemm", Category::Computation, Kind::Kernel, 1, st(1)},
      {1, 7, 400, 450, "Memset", Category::Memory, Kind::Memset, 2, st(2)},
  });
}

TEST(CrossRankOverlap, PerRankValuesAndNullPercentWithoutComm) {
  const Store s = overlap_store(false);
  Report rep;
  overlap_analysis(s, {}, &rep);
  EXPECT_FALSE(has_table(rep, "overlap_steps"));  // no steps set
  const Table& t = table(rep, "overlap");
  ASSERT_EQ(t.rows.size(), 2u);
  // Rank 0: comm 150, overlap [50,100) = 50 → 33.33 %, exposed 100; span [0,280) = 280
  // (the Sync to 1000 does not count in native mode) → exposed 100/280 = 35.714 %.
  EXPECT_EQ(ival(t, 0, "rank"), 0);
  EXPECT_NEAR(dval(t, 0, "comm_us"), 150.0, kEps);
  EXPECT_NEAR(dval(t, 0, "overlap_us"), 50.0, kEps);
  EXPECT_NEAR(dval(t, 0, "overlap_pct"), 100.0 * 50 / 150, kEps);
  EXPECT_NEAR(dval(t, 0, "exposed_comm_us"), 100.0, kEps);
  EXPECT_NEAR(dval(t, 0, "exposed_comm_pct"), 100.0 * 100 / 280, kEps);
  EXPECT_NEAR(dval(t, 0, "span_us"), 280.0, kEps);
  EXPECT_EQ(sval(t, 0, "note"), "");
  // Rank 1: no comm → overlap_pct null (never NaN); exposed 0 of span 450 → 0 %.
  EXPECT_EQ(ival(t, 1, "rank"), 1);
  EXPECT_NEAR(dval(t, 1, "comm_us"), 0.0, kEps);
  EXPECT_TRUE(is_null(t, 1, "overlap_pct"));
  EXPECT_NEAR(dval(t, 1, "exposed_comm_us"), 0.0, kEps);
  EXPECT_NEAR(dval(t, 1, "exposed_comm_pct"), 0.0, kEps);
  EXPECT_NEAR(dval(t, 1, "span_us"), 450.0, kEps);
  EXPECT_EQ(sval(t, 1, "note"), "no communication kernels");

  const nlohmann::json j = as_json(rep);
  ASSERT_EQ(j["overlap"].size(), 2u);
  EXPECT_TRUE(j["overlap"][1]["overlap_pct"].is_null());
  EXPECT_NEAR(j["overlap"][0]["overlap_pct"].get<double>(), 100.0 / 3, 1e-9);
  EXPECT_NEAR(j["overlap"][0]["exposed_comm_us"].get<double>(), 100.0, kEps);
}

TEST(CrossRankBreakdown, NonComputeIsCommPlusMemoryPlusOther) {
  const Store s = overlap_store(false);
  Report rep;
  breakdown_analysis(s, {}, &rep);
  EXPECT_FALSE(has_table(rep, "breakdown_steps"));
  const Table& t = table(rep, "breakdown");
  ASSERT_EQ(t.rows.size(), 2u);
  // Rank 0: span 280; busy [0,200) ∪ [220,260) ∪ [270,280) = 250 → idle 30; compute 100;
  // non-compute 280 - 100 - 30 = 150 = exposed comm 100 + memory 40 + other 10.
  EXPECT_NEAR(dval(t, 0, "span_us"), 280.0, kEps);
  EXPECT_NEAR(dval(t, 0, "idle_us"), 30.0, kEps);
  EXPECT_NEAR(dval(t, 0, "compute_us"), 100.0, kEps);
  EXPECT_NEAR(dval(t, 0, "non_compute_us"), 150.0, kEps);
  EXPECT_NEAR(dval(t, 0, "comm_us"), 100.0, kEps);
  EXPECT_NEAR(dval(t, 0, "memory_us"), 40.0, kEps);
  EXPECT_NEAR(dval(t, 0, "other_us"), 10.0, kEps);
  EXPECT_NEAR(dval(t, 0, "non_compute_us"),
              dval(t, 0, "comm_us") + dval(t, 0, "memory_us") + dval(t, 0, "other_us"), kEps);
  EXPECT_NEAR(dval(t, 0, "idle_pct"), 100.0 * 30 / 280, kEps);
  EXPECT_NEAR(dval(t, 0, "compute_pct"), 100.0 * 100 / 280, kEps);
  EXPECT_NEAR(dval(t, 0, "non_compute_pct"), 100.0 * 150 / 280, kEps);
  // Rank 1: span 450, busy 450 → idle 0; compute 400; non-compute 50 = memory 50.
  EXPECT_NEAR(dval(t, 1, "span_us"), 450.0, kEps);
  EXPECT_NEAR(dval(t, 1, "idle_us"), 0.0, kEps);
  EXPECT_NEAR(dval(t, 1, "compute_us"), 400.0, kEps);
  EXPECT_NEAR(dval(t, 1, "non_compute_us"), 50.0, kEps);
  EXPECT_NEAR(dval(t, 1, "comm_us"), 0.0, kEps);
  EXPECT_NEAR(dval(t, 1, "memory_us"), 50.0, kEps);
  EXPECT_NEAR(dval(t, 1, "other_us"), 0.0, kEps);
}

TEST(CrossRankOverlap, PerStepTables) {
  const Store s = overlap_store(true);
  Report rep;
  overlap_analysis(s, {}, &rep);
  breakdown_analysis(s, {}, &rep);
  const Table& o = table(rep, "overlap_steps");
  ASSERT_EQ(o.rows.size(), 4u);  // (0,1) (0,2) (1,1) (1,2)
  EXPECT_EQ(ival(o, 0, "rank"), 0);
  EXPECT_EQ(ival(o, 0, "step"), 1);
  // Rank 0 step 1: comp [0,100), comm [50,200) → comm 150, overlap 50, exposed 100, span 200.
  EXPECT_NEAR(dval(o, 0, "comm_us"), 150.0, kEps);
  EXPECT_NEAR(dval(o, 0, "overlap_us"), 50.0, kEps);
  EXPECT_NEAR(dval(o, 0, "exposed_comm_pct"), 50.0, kEps);  // 100 / 200
  EXPECT_NEAR(dval(o, 0, "span_us"), 200.0, kEps);
  // Rank 0 step 2: no comm → overlap_pct null.
  EXPECT_EQ(ival(o, 1, "step"), 2);
  EXPECT_TRUE(is_null(o, 1, "overlap_pct"));
  EXPECT_EQ(ival(o, 2, "rank"), 1);
  EXPECT_EQ(ival(o, 3, "step"), 2);

  const Table& b = table(rep, "breakdown_steps");
  ASSERT_EQ(b.rows.size(), 4u);
  // Rank 0 step 2: memcpy [220,260), other [270,280) (Sync excluded) → span 60, busy 50,
  // idle 10, compute 0, non-compute 50 = memory 40 + other 10.
  EXPECT_EQ(ival(b, 1, "rank"), 0);
  EXPECT_EQ(ival(b, 1, "step"), 2);
  EXPECT_NEAR(dval(b, 1, "span_us"), 60.0, kEps);
  EXPECT_NEAR(dval(b, 1, "idle_us"), 10.0, kEps);
  EXPECT_NEAR(dval(b, 1, "compute_us"), 0.0, kEps);
  EXPECT_NEAR(dval(b, 1, "non_compute_us"), 50.0, kEps);
  EXPECT_NEAR(dval(b, 1, "memory_us"), 40.0, kEps);
  EXPECT_NEAR(dval(b, 1, "other_us"), 10.0, kEps);
  // Rank 1 step 1: comp [0,400) only → compute 100 %.
  EXPECT_NEAR(dval(b, 2, "compute_pct"), 100.0, kEps);

  const nlohmann::json j = as_json(rep);
  ASSERT_TRUE(j.contains("overlap_steps"));
  ASSERT_TRUE(j.contains("breakdown_steps"));
  EXPECT_TRUE(j["overlap_steps"][1]["overlap_pct"].is_null());
  EXPECT_EQ(j["overlap_steps"][1]["step"].get<int>(), 2);
}

TEST(CrossRankOverlap, HtaModeHasNoStepTablesAndCountsSyncs) {
  const Store s = overlap_store(true);
  CrossRankOptions opt;
  opt.compat = Compat::Hta;
  Report rep;
  overlap_analysis(s, opt, &rep);
  breakdown_analysis(s, opt, &rep);
  EXPECT_FALSE(has_table(rep, "overlap_steps"));
  EXPECT_FALSE(has_table(rep, "breakdown_steps"));
  // HTA counts the Sync [300,1000): rank 0 span 1000, busy 250 + 700 = 950, idle 50;
  // other = mystery 10 + sync 700 = 710.
  const Table& b = table(rep, "breakdown");
  EXPECT_NEAR(dval(b, 0, "span_us"), 1000.0, kEps);
  EXPECT_NEAR(dval(b, 0, "idle_us"), 50.0, kEps);
  EXPECT_NEAR(dval(b, 0, "other_us"), 710.0, kEps);
}

TEST(CrossRankOverlap, RankFilter) {
  const Store s = overlap_store(false);
  CrossRankOptions opt;
  opt.filter.rank = 1;
  Report rep;
  overlap_analysis(s, opt, &rep);
  const Table& t = table(rep, "overlap");
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(ival(t, 0, "rank"), 1);
}

// ============================================================================================
// 3. idle_analysis
// ============================================================================================

// Rank 0, stream 7 (µs); launches by correlation:
//  k1 [0,10)     corr 1, launch -5
//  k2 [15,20)    corr 2, launch 12 > prev end 10        → host wait 5
//  k3 [25,30)    corr 3, launch 1                       → kernel wait 5 (< 30)
//  k4 [100,110)  corr 4, launch 2                       → other 70 (≥ 30)
//  k5 [105,108)  corr 5, launch 3: starts before k4 ends (overlap)
//  k6 [140,150)  no correlation                         → native gap 140-110 = 30 → other
//  k7 [160,165)  corr 7, no launch recorded             → kernel wait 10
//  plus a Sync [30,100) on stream 7 that is not GPU work (ignored).
// Rank 0, stream 8: one kernel → no gaps.
Store idle_store() {
  return make_store(
      {
          {0, 7, 0, 10, "k1", Category::Computation, Kind::Kernel, 1},
          {0, 7, 15, 20, "k2", Category::Computation, Kind::Kernel, 2},
          {0, 7, 25, 30, "k3", Category::Computation, Kind::Kernel, 3},
          {0, 7, 30, 100, "Sync", Category::Other, Kind::Sync, kNoCorrelation},
          {0, 7, 100, 110, "k4", Category::Computation, Kind::Kernel, 4},
          {0, 7, 105, 108, "k5", Category::Computation, Kind::Kernel, 5},
          {0, 7, 140, 150, "k6", Category::Computation, Kind::Kernel, kNoCorrelation},
          {0, 7, 160, 165, "k7", Category::Computation, Kind::Kernel, 7},
          {0, 8, 0, 50, "lonely", Category::Computation, Kind::Kernel, 8},
      },
      {{0, 1, -5}, {0, 2, 12}, {0, 3, 1}, {0, 4, 2}, {0, 5, 3}, {0, 8, 0}});
}

TEST(CrossRankIdle, NativeHostKernelOtherAndOverlaps) {
  const Store s = idle_store();
  Report rep;
  idle_analysis(s, {}, &rep);
  const Table& t = table(rep, "idle");
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(ival(t, 0, "stream"), 7);
  // host 5 (k2); kernel wait 5 (k3) + 10 (k7) = 15; other 70 (k4) + 30 (k6) = 100;
  // idle 120 over 5 gaps (k5's overlap is not idle), mean 24, max 70, 1 overlap.
  EXPECT_NEAR(dval(t, 0, "host_wait_us"), 5.0, kEps);
  EXPECT_NEAR(dval(t, 0, "kernel_wait_us"), 15.0, kEps);
  EXPECT_NEAR(dval(t, 0, "other_us"), 100.0, kEps);
  EXPECT_NEAR(dval(t, 0, "idle_us"), 120.0, kEps);
  EXPECT_NEAR(dval(t, 0, "host_wait_ratio"), 5.0 / 120, kEps);
  EXPECT_NEAR(dval(t, 0, "kernel_wait_ratio"), 15.0 / 120, kEps);
  EXPECT_NEAR(dval(t, 0, "other_ratio"), 100.0 / 120, kEps);
  EXPECT_EQ(ival(t, 0, "gaps"), 5);
  EXPECT_NEAR(dval(t, 0, "mean_gap_us"), 24.0, kEps);
  EXPECT_NEAR(dval(t, 0, "max_gap_us"), 70.0, kEps);
  EXPECT_EQ(ival(t, 0, "overlaps"), 1);
  // Stream 8: a single kernel: no idle, ratios and mean are null.
  EXPECT_EQ(ival(t, 1, "stream"), 8);
  EXPECT_NEAR(dval(t, 1, "idle_us"), 0.0, kEps);
  EXPECT_EQ(ival(t, 1, "gaps"), 0);
  EXPECT_TRUE(is_null(t, 1, "host_wait_ratio"));
  EXPECT_TRUE(is_null(t, 1, "mean_gap_us"));
}

TEST(CrossRankIdle, HtaModeUsesPreviousRowEndAndSumsNegativeGaps) {
  const Store s = idle_store();
  CrossRankOptions opt;
  opt.compat = Compat::Hta;
  Report rep;
  idle_analysis(s, opt, &rep);
  const Table& t = table(rep, "idle");
  // prev end = previous row's end: k2 +5 host; k3 +5 kernel; k4 +70 other (prev end 110);
  // k5 105-110 = -5 → kernel wait (< 30), prev end becomes 108; k6 140-108 = 32 → other;
  // k7 160-150 = 10 → kernel. host 5, kernel 5-5+10 = 10, other 70+32 = 102, idle 117,
  // 6 gaps, mean 19.5, max 70, no overlaps counted.
  EXPECT_NEAR(dval(t, 0, "host_wait_us"), 5.0, kEps);
  EXPECT_NEAR(dval(t, 0, "kernel_wait_us"), 10.0, kEps);
  EXPECT_NEAR(dval(t, 0, "other_us"), 102.0, kEps);
  EXPECT_NEAR(dval(t, 0, "idle_us"), 117.0, kEps);
  EXPECT_EQ(ival(t, 0, "gaps"), 6);
  EXPECT_NEAR(dval(t, 0, "mean_gap_us"), 19.5, kEps);
  EXPECT_NEAR(dval(t, 0, "max_gap_us"), 70.0, kEps);
  EXPECT_EQ(ival(t, 0, "overlaps"), 0);
}

TEST(CrossRankIdle, CustomKernelWaitThreshold) {
  const Store s = idle_store();
  CrossRankOptions opt;
  opt.kernel_wait_ns = 80 * kUs;
  Report rep;
  idle_analysis(s, opt, &rep);
  const Table& t = table(rep, "idle");
  // Threshold 80 µs: k4's 70 and k6's 30 become kernel wait: 5 + 70 + 30 + 10 = 115; host 5.
  EXPECT_NEAR(dval(t, 0, "host_wait_us"), 5.0, kEps);
  EXPECT_NEAR(dval(t, 0, "kernel_wait_us"), 115.0, kEps);
  EXPECT_NEAR(dval(t, 0, "other_us"), 0.0, kEps);
  EXPECT_NEAR(dval(t, 0, "other_ratio"), 0.0, kEps);
  // Threshold 10 µs: k3's 5 stays kernel wait, k7's 10 is not < 10 → other:
  // kernel 5, other 70 + 30 + 10 = 110.
  opt.kernel_wait_ns = 10 * kUs;
  Report rep2;
  idle_analysis(s, opt, &rep2);
  const Table& t2 = table(rep2, "idle");
  EXPECT_NEAR(dval(t2, 0, "kernel_wait_us"), 5.0, kEps);
  EXPECT_NEAR(dval(t2, 0, "other_us"), 110.0, kEps);
}

TEST(CrossRankIdle, LaunchAtExactlyPreviousEndIsNotHostWait) {
  // k2's launch at 10 == k1's end: the stream was not yet idle → gap 5 is kernel wait.
  const Store s = make_store({{0, 7, 0, 10, "a", Category::Computation, Kind::Kernel, 1},
                              {0, 7, 15, 20, "b", Category::Computation, Kind::Kernel, 2}},
                             {{0, 1, 0}, {0, 2, 10}});
  Report rep;
  idle_analysis(s, {}, &rep);
  const Table& t = table(rep, "idle");
  EXPECT_NEAR(dval(t, 0, "host_wait_us"), 0.0, kEps);
  EXPECT_NEAR(dval(t, 0, "kernel_wait_us"), 5.0, kEps);
}

// ============================================================================================
// 4. hta_view / hta_category
// ============================================================================================

TEST(HtaCategory, NameRules) {
  EXPECT_EQ(hta_category("ncclDevKernel_AllReduce_Sum_f32_RING_LL"), Category::Communication);
  EXPECT_EQ(hta_category("void ncclKernel_AllGather_RING_LL(...)"), Category::Communication);
  EXPECT_EQ(hta_category("Memcpy DtoD (Device -> Device)"), Category::Memory);
  EXPECT_EQ(hta_category("Memset (Device)"), Category::Memory);
  EXPECT_EQ(hta_category("Context Sync"), Category::Other);
  EXPECT_EQ(hta_category("Stream Wait Event"), Category::Other);
  EXPECT_EQ(hta_category("void gemm<float, 128>(float*, float const*)"), Category::Computation);
  // "Memcpy" not at the start: not memory (re.match anchors), but also not computation.
  EXPECT_EQ(hta_category("void at::native::Memcpy_kernel"), Category::Other);
}

TEST(HtaView, RoundsRelativeToBaseTime) {
  // base not a multiple of 1000, so rounding must happen on (t - base).
  const int64_t base = 1'700'000'000'000'000'123;
  Row k1{0, 7, 0, 0, "void gemm<float>(float*)"};
  k1.start_ns_extra = base + 1500;  // rel 1.5 µs → up → 2 µs
  k1.end_ns_extra = base + 3999;    // rel 3.999 µs → down → 3 µs
  Row k2{0, 8, 0, 0, "Memcpy DtoD (Device -> Device)", Category::Computation, Kind::Memcpy};
  k2.start_ns_extra = base + 5000;  // exact µs stays
  k2.end_ns_extra = base + 7000;
  Row k3{0, 9, 0, 0, "ncclDevKernel_X", Category::Computation};
  k3.start_ns_extra = base - 1500;  // rel -1.5 µs → up → -1 µs
  k3.end_ns_extra = base - 500;     // rel -0.5 µs → down → -1 µs
  Row k4{0, 10, 0, 0, "Context Sync", Category::Computation, Kind::Sync};
  k4.start_ns_extra = base + 1200;  // sub-µs event: start up to 2 µs, end down to 1 µs
  k4.end_ns_extra = base + 1800;
  Store s = make_store({k1, k2, k3, k4}, {{0, 42, 0, base + 10'001}});
  s.ranks[0].base_time_ns = base;

  const Store v = hta_view(s);
  ASSERT_EQ(v.activities.size(), 4u);  // one step or none: nothing dropped
  // Sorted (rank, device, stream): streams 7, 8, 9, 10.
  const Activities& a = v.activities;
  EXPECT_EQ(a.stream[0], 7);
  EXPECT_EQ(a.start_ns[0], base + 2000);
  EXPECT_EQ(a.end_ns[0], base + 3000);
  EXPECT_EQ(a.category[0], static_cast<uint8_t>(Category::Computation));
  EXPECT_EQ(a.start_ns[1], base + 5000);
  EXPECT_EQ(a.end_ns[1], base + 7000);
  EXPECT_EQ(a.category[1], static_cast<uint8_t>(Category::Memory));
  EXPECT_EQ(a.start_ns[2], base - 1000);
  EXPECT_EQ(a.end_ns[2], base - 1000);
  EXPECT_EQ(a.category[2], static_cast<uint8_t>(Category::Communication));
  EXPECT_EQ(a.start_ns[3], base + 2000);
  EXPECT_EQ(a.end_ns[3], base + 1000);
  EXPECT_EQ(a.category[3], static_cast<uint8_t>(Category::Other));
  // Launch start base+10.001 µs → up → base+11 µs; end (start + 5 µs) → down → base+15 µs.
  ASSERT_EQ(v.launches.size(), 1u);
  EXPECT_EQ(v.launches.start_ns[0], base + 11'000);
  EXPECT_EQ(v.launches.end_ns[0], base + 15'000);
}

// Two ranks. Rank 0 has ProfilerStep#1 at 0 and #2 at 99.5 µs (rounds up to 100 µs); its
// launches: corr 1 at 10 µs (kept), corr 2 at 99.8 µs (rounds up to 100 = the last step start
// → dropped), corr 3 at 150 µs (dropped). Kernels: corr 1, 2, 3 and one without correlation.
// Rank 1 has a single ProfilerStep#1 at 0. HTA's filter is on when its symbol table (all
// ranks' names) has two step names: rank 1 is filtered too, at its last (only) step, 0.
Store step_store(bool late_memcpy = false) {
  Row r0k1{0, 7, 20, 30, "gemm", Category::Computation, Kind::Kernel, 1};
  Row r0k2{0, 7, 110, 120, "gemm", Category::Computation, Kind::Kernel, 2};
  Row r0k3{0, 7, 160, 170, "gemm", Category::Computation, Kind::Kernel, 3};
  Row r0k4{0, 8, 50, 60, "Memcpy DtoD (Device -> Device)", Category::Memory, Kind::Memcpy};
  Row r1k1{1, 7, 20, 30, "gemm", Category::Computation, Kind::Kernel, 1};
  Row r1k3{1, 7, 160, 170, "gemm", Category::Computation, Kind::Kernel, 3};
  std::vector<Row> rows = {r0k1, r0k2, r0k3, r0k4, r1k1, r1k3};
  if (late_memcpy) rows.push_back({0, 9, 150, 160, "Memcpy DtoD", Category::Memory, Kind::Memcpy});
  Store s = make_store(rows, {{0, 1, 10}, {0, 2, 99, 800}, {0, 3, 150}, {1, 1, 10}, {1, 3, 150}});
  add_step(s, 0, AnnotationKind::Step, "ProfilerStep#1", 0, 99'500, 1);
  add_step(s, 0, AnnotationKind::Step, "ProfilerStep#2", 99'500, 200'000, 2);
  add_step(s, 1, AnnotationKind::Step, "ProfilerStep#1", 0, 200'000, 1);
  return s;
}

TEST(HtaView, LastStepWindowDropsWorkLaunchedInIt) {
  const Store v = hta_view(step_store());
  // Rank 0 keeps corr 1 and the uncorrelated memcpy (a "CPU row" to HTA, starting before the
  // last step); rank 1 keeps nothing: all its work was launched after its only step began.
  std::vector<std::pair<int32_t, int64_t>> kept;
  for (size_t i = 0; i < v.activities.size(); ++i)
    kept.emplace_back(v.activities.rank[i], v.activities.correlation[i]);
  const std::vector<std::pair<int32_t, int64_t>> want = {
      {0, 1}, {0, kNoCorrelation}};  // sorted by (rank, device, stream, start)
  EXPECT_EQ(kept, want);
  // Launches: rank 0 keeps only corr 1; rank 1 none.
  std::vector<std::pair<int32_t, int64_t>> kl;
  for (size_t i = 0; i < v.launches.size(); ++i)
    kl.emplace_back(v.launches.rank[i], v.launches.correlation[i]);
  const std::vector<std::pair<int32_t, int64_t>> want_l = {{0, 1}};
  EXPECT_EQ(kl, want_l);
  // Categories follow HTA's name rules, not the input column.
  EXPECT_EQ(v.activities.category[1], static_cast<uint8_t>(Category::Memory));
}

TEST(HtaView, UncorrelatedWorkInTheLastStepIsDropped) {
  // A memcpy without correlation at 150 µs on rank 0: HTA takes it for a CPU row, dropped as it
  // starts after the last step (100 µs).
  const Store v = hta_view(step_store(/*late_memcpy=*/true));
  for (size_t i = 0; i < v.activities.size(); ++i) EXPECT_NE(v.activities.stream[i], 9);
  EXPECT_EQ(v.activities.size(), 2u);
}

TEST(HtaView, OneStepNameOnCpuAndGpuIsNoFilter) {
  // ProfilerStep#6 on the CPU at 0 and again as a GPU annotation at 50 µs: one name in HTA's
  // symbol table, so no last-step filter: work launched at 100 µs stays.
  Row k{0, 7, 120, 130, "gemm", Category::Computation, Kind::Kernel, 1};
  Store s = make_store({k}, {{0, 1, 100}});
  add_step(s, 0, AnnotationKind::Step, "ProfilerStep#6", 0, 200'000, 6);
  add_step(s, 0, AnnotationKind::GpuUser, "ProfilerStep#6", 50'000, 200'000, kNoStep);
  const Store v = hta_view(s);
  EXPECT_EQ(v.activities.size(), 1u);
  EXPECT_EQ(v.launches.size(), 1u);
}

TEST(HtaView, EpochMicrosecondsRoundedAsHtaSeesThem) {
  // No base time: the JSON ts is epoch µs, 1712195495519689.047, which as a double is
  // 1712195495519689.0 (a 0.25 µs step there): HTA rounds that up to ...689, not ...690.
  const int64_t t = 1'712'195'495'519'689'047;
  const auto [st, en] = hta_round(0, t, t + 2'500);  // dur 2.5 µs: end = 689.0 + 2.5 → 691
  EXPECT_EQ(st, 1'712'195'495'519'689'000);
  EXPECT_EQ(en, 1'712'195'495'519'691'000);
  // Relative times (with a base) keep their ns: 1.2 + 0.6 → [2, 1] µs as before.
  const auto [s2, e2] = hta_round(5'000, 6'200, 6'800);
  EXPECT_EQ(s2, 7'000);
  EXPECT_EQ(e2, 6'000);
}

TEST(HtaView, OneFileIsOneRank) {
  // Two ranks imported from one merged file: HTA sees one rank (the file's first), on no
  // particular device: both kernels on rank 0, device 2 (the lowest), stream 4.
  Row a{0, 4, 10, 20, "ncclDevKernel_Generic"};
  a.device = 2;
  Row b{1, 4, 15, 30, "ncclDevKernel_Generic"};
  b.device = 3;
  Store s = make_store({a, b});
  for (auto& r : s.ranks) r.source = "merged.json";
  const Store v = hta_view(s);
  ASSERT_EQ(v.ranks.size(), 1u);
  ASSERT_EQ(v.activities.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(v.activities.rank[i], 0);
    EXPECT_EQ(v.activities.device[i], 2);
  }
}

TEST(HtaView, GpuProfilerStepAnnotationCountsAsAStep) {
  // Rank 1 gains a GPU-side "ProfilerStep#2" annotation at 100 µs: now it has two steps and
  // its corr-3 work launched at 150 µs is dropped.
  Store s = step_store();
  add_step(s, 1, AnnotationKind::GpuUser, "ProfilerStep#2", 100'000, 200'000, kNoStep);
  const Store v = hta_view(s);
  int64_t rank1 = 0;
  for (size_t i = 0; i < v.activities.size(); ++i)
    if (v.activities.rank[i] == 1) {
      ++rank1;
      EXPECT_EQ(v.activities.correlation[i], 1);
    }
  EXPECT_EQ(rank1, 1);
}

// ============================================================================================
// 5. straggler_analysis
// ============================================================================================

const char* kAllReduce = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";

// Three ranks, four collectives; iteration k starts at T = 2000k µs with a "gemm" on stream 7
// starting at T, then the AllReduce kernel on stream 20 starting when the gemm ends.
//  k=0: every gemm 1000 → all arrive at T+1000; comm [1000,1100) everywhere. skew 0.
//  k=1: rank 2's gemm 1500 → arrives at 3500; comm r0,r1 [3000,3600), r2 [3500,3600).
//  k=2: rank 2's gemm 1500 → arrives at 5500; comm r0,r1 [5000,5600), r2 [5500,5600).
//  k=3: rank 1's gemm 1200 → arrives at 7200; comm r0 [7000,7100) (ends before rank 1
//       arrives: its wait is capped at its own 100 µs), r1 [7200,7300), r2 [7000,7300).
// with_nccl: each comm kernel gets (pg "0", "allreduce", Seq k, ranks "[0, 1, 2]", 1 MB), and
// rank 1 uses another kernel name and stream (metadata matching must not care).
Store straggler_store(bool with_nccl = false) {
  std::vector<Row> rows;
  auto comm = [&](int32_t r, int k, int64_t s, int64_t e) {
    Row x{r, 20, s, e, kAllReduce, Category::Communication};
    x.corr = 100 + k;
    if (with_nccl) {
      if (r == 1) x.name = "ncclDevKernel_AllReduce_Sum_f32_TREE_LL", x.stream = 24;
      x.nccl = Nccl{"allreduce", k, "0", "[0, 1, 2]", 1'000'000};
    }
    rows.push_back(x);
  };
  auto gemm = [&](int32_t r, int k, int64_t s, int64_t e) {
    Row x{r, 7, s, e, "gemm", Category::Computation};
    x.corr = k;
    rows.push_back(x);
  };
  for (int32_t r = 0; r < 3; ++r) {
    gemm(r, 0, 0, 1000);
    comm(r, 0, 1000, 1100);
  }
  for (int32_t r = 0; r < 3; ++r) {
    int64_t arrive1 = r == 2 ? 3500 : 3000, arrive2 = r == 2 ? 5500 : 5000;
    gemm(r, 1, 2000, arrive1);
    comm(r, 1, arrive1, 3600);
    gemm(r, 2, 4000, arrive2);
    comm(r, 2, arrive2, 5600);
  }
  gemm(0, 3, 6000, 7000);
  comm(0, 3, 7000, 7100);
  gemm(1, 3, 6000, 7200);
  comm(1, 3, 7200, 7300);
  gemm(2, 3, 6000, 7000);
  comm(2, 3, 7000, 7300);
  return make_store(rows);
}

nlohmann::json stragglers(const Store& s, CrossRankOptions opt = {}, Report* keep = nullptr) {
  Report rep;
  straggler_analysis(s, opt, &rep);
  if (keep) *keep = rep;
  return json_of(rep).at("stragglers");
}

const nlohmann::json& rank_entry(const nlohmann::json& js, int r) {
  for (const auto& e : js.at("ranks"))
    if (e.at("rank").get<int>() == r) return e;
  throw std::runtime_error("no rank entry");
}

TEST(Stragglers, PlantedLateRankLedger) {
  Report rep;
  const nlohmann::json js = stragglers(straggler_store(), {}, &rep);
  EXPECT_EQ(js["match"], "kernel (name, stream, occurrence)");
  EXPECT_EQ(js["matched"].get<int>(), 4);
  EXPECT_EQ(js["unmatched_count"].get<int>(), 0);
  const auto& c = js["collectives"];
  ASSERT_EQ(c.size(), 4u);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(c[k]["id"].get<int>(), k);
    EXPECT_EQ(c[k]["ranks"].get<int>(), 3);
    EXPECT_EQ(c[k]["match"], "kernel (name, stream, occurrence)");
    EXPECT_FALSE(c[k]["noise"].get<bool>());
    EXPECT_TRUE(c[k]["busbw_gbps"].is_null());  // no message size without NCCL metadata
  }

  // k=0: everyone together: no last rank, no waits; transfer 100.
  EXPECT_TRUE(c[0]["last_rank"].is_null());
  EXPECT_NEAR(c[0]["skew_us"].get<double>(), 0.0, kEps);
  EXPECT_NEAR(c[0]["inflicted_us"].get<double>(), 0.0, kEps);
  EXPECT_NEAR(c[0]["transfer_us"].get<double>(), 100.0, kEps);
  EXPECT_NEAR(c[0]["causes"]["kernels_us"].get<double>(), 0.0, kEps);

  // k=1, k=2: rank 2 last by 500; ranks 0 and 1 wait 500 each (within their 600 µs kernels),
  // inflicted 1000; lateness 500 - all of it the extra gemm time (1500 vs peers' median 1000
  // between the previous collective's end and arrival; idle before the gemm is 900 resp. 400
  // on every rank, so no idle excess).
  for (int k : {1, 2}) {
    SCOPED_TRACE(k);
    EXPECT_EQ(c[k]["last_rank"].get<int>(), 2);
    EXPECT_NEAR(c[k]["skew_us"].get<double>(), 500.0, kEps);
    EXPECT_NEAR(c[k]["wait_us"]["0"].get<double>(), 500.0, kEps);
    EXPECT_NEAR(c[k]["wait_us"]["1"].get<double>(), 500.0, kEps);
    EXPECT_NEAR(c[k]["wait_us"]["2"].get<double>(), 0.0, kEps);
    EXPECT_NEAR(c[k]["inflicted_us"].get<double>(), 1000.0, kEps);
    EXPECT_NEAR(c[k]["completion_skew_us"].get<double>(), 0.0, kEps);
    EXPECT_NEAR(c[k]["transfer_us"].get<double>(), 100.0, kEps);
    EXPECT_NEAR(c[k]["lateness_us"].get<double>(), 500.0, kEps);
    EXPECT_NEAR(c[k]["causes"]["kernels_us"].get<double>(), 500.0, kEps);
    EXPECT_NEAR(c[k]["causes"]["host_delay_us"].get<double>(), 0.0, kEps);
    EXPECT_NEAR(c[k]["causes"]["other_idle_us"].get<double>(), 0.0, kEps);
    EXPECT_NEAR(c[k]["causes"]["inherited_us"].get<double>(), 0.0, kEps);
    EXPECT_NEAR(c[k]["causes"]["unexplained_us"].get<double>(), 0.0, kEps);
  }

  // k=3: rank 1 last by 200 (7200 vs 7000). Rank 0's kernel [7000,7100) is shorter than the
  // 200 it would wait → wait capped at 100; rank 2 waits 200; inflicted 300. Completion skew
  // 7300 - 7100 = 200; transfer min(7100-7200, 7300-7200, 7300-7200) < 0 → 0.
  EXPECT_EQ(c[3]["last_rank"].get<int>(), 1);
  EXPECT_NEAR(c[3]["skew_us"].get<double>(), 200.0, kEps);
  EXPECT_NEAR(c[3]["wait_us"]["0"].get<double>(), 100.0, kEps);
  EXPECT_NEAR(c[3]["wait_us"]["1"].get<double>(), 0.0, kEps);
  EXPECT_NEAR(c[3]["wait_us"]["2"].get<double>(), 200.0, kEps);
  EXPECT_NEAR(c[3]["inflicted_us"].get<double>(), 300.0, kEps);
  EXPECT_NEAR(c[3]["completion_skew_us"].get<double>(), 200.0, kEps);
  EXPECT_NEAR(c[3]["transfer_us"].get<double>(), 0.0, kEps);
  EXPECT_NEAR(c[3]["causes"]["kernels_us"].get<double>(), 200.0, kEps);

  // Per rank: r0 never last, suffered 500+500+100 = 1100; r1 last once, inflicted 300,
  // suffered 500+500 = 1000, kernels 200; r2 last twice, inflicted 2000, suffered 200,
  // mean lateness 500, kernels 1000.
  const auto& r0 = rank_entry(js, 0);
  EXPECT_EQ(r0["times_last"].get<int>(), 0);
  EXPECT_NEAR(r0["inflicted_us"].get<double>(), 0.0, kEps);
  EXPECT_NEAR(r0["suffered_us"].get<double>(), 1100.0, kEps);
  EXPECT_TRUE(r0["mean_lateness_us"].is_null());
  const auto& r1 = rank_entry(js, 1);
  EXPECT_EQ(r1["times_last"].get<int>(), 1);
  EXPECT_NEAR(r1["inflicted_us"].get<double>(), 300.0, kEps);
  EXPECT_NEAR(r1["suffered_us"].get<double>(), 1000.0, kEps);
  EXPECT_NEAR(r1["mean_lateness_us"].get<double>(), 200.0, kEps);
  EXPECT_NEAR(r1["causes"]["kernels_us"].get<double>(), 200.0, kEps);
  const auto& r2 = rank_entry(js, 2);
  EXPECT_EQ(r2["times_last"].get<int>(), 2);
  EXPECT_NEAR(r2["inflicted_us"].get<double>(), 2000.0, kEps);
  EXPECT_NEAR(r2["suffered_us"].get<double>(), 200.0, kEps);
  EXPECT_NEAR(r2["mean_lateness_us"].get<double>(), 500.0, kEps);
  EXPECT_NEAR(r2["causes"]["kernels_us"].get<double>(), 1000.0, kEps);
  EXPECT_NEAR(r2["causes"]["host_delay_us"].get<double>(), 0.0, kEps);
  EXPECT_EQ(r2["noise_skipped"].get<int>(), 0);

  // delay_by_kernel: (2, gemm) 500 + 500 over 2 instances first, then (1, gemm) 200 over 1.
  const auto& d = js["delay_by_kernel"];
  ASSERT_EQ(d.size(), 2u);
  EXPECT_EQ(d[0]["rank"].get<int>(), 2);
  EXPECT_EQ(d[0]["kernel"], "gemm");
  EXPECT_NEAR(d[0]["delay_us"].get<double>(), 1000.0, kEps);
  EXPECT_EQ(d[0]["instances"].get<int>(), 2);
  EXPECT_EQ(d[1]["rank"].get<int>(), 1);
  EXPECT_NEAR(d[1]["delay_us"].get<double>(), 200.0, kEps);

  // Headline: 2 of 4, 0.5 ms late on average, 2.0 ms inflicted in total, 100 % gemm.
  const std::string h = js["headline"];
  EXPECT_EQ(h.rfind("rank 2 arrived last at 2 of 4", 0), 0u) << h;
  EXPECT_NE(h.find("0.5 ms late on average"), std::string::npos) << h;
  EXPECT_NE(h.find("2.0 ms of waiting in total"), std::string::npos) << h;
  EXPECT_NE(h.find("100 % of its lateness is longer `gemm` kernels"), std::string::npos) << h;
  ASSERT_FALSE(rep.lead.empty());  // the verdict goes before every other headline line
  EXPECT_EQ(rep.lead.front(), h);

  // Tables: collectives ordered by inflicted (1000, 1000, 300, 0; stable for ties).
  const Table& ct = table(rep, "stragglers_collectives");
  ASSERT_EQ(ct.rows.size(), 4u);
  EXPECT_EQ(ival(ct, 0, "id"), 1);
  EXPECT_EQ(ival(ct, 1, "id"), 2);
  EXPECT_EQ(ival(ct, 2, "id"), 3);
  EXPECT_EQ(ival(ct, 3, "id"), 0);
  EXPECT_TRUE(is_null(ct, 3, "last_rank"));
  EXPECT_EQ(ival(ct, 2, "last_rank"), 1);
  const Table& rt = table(rep, "stragglers_ranks");
  ASSERT_EQ(rt.rows.size(), 3u);
  EXPECT_EQ(ival(rt, 2, "times_last"), 2);
  EXPECT_NEAR(dval(rt, 2, "kernels_us"), 1000.0, kEps);
  const Table& dt = table(rep, "delay_by_kernel");
  ASSERT_EQ(dt.rows.size(), 2u);
  EXPECT_EQ(sval(dt, 0, "kernel"), "gemm");
}

TEST(Stragglers, NcclMetadataMatchingAndBusBandwidth) {
  const nlohmann::json js = stragglers(straggler_store(/*with_nccl=*/true));
  EXPECT_EQ(js["match"], "nccl (process group, collective, Seq)");
  EXPECT_EQ(js["matched"].get<int>(), 4);
  const auto& c = js["collectives"];
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0]["op"], "allreduce");
  EXPECT_EQ(c[0]["msg_bytes"].get<int64_t>(), 1'000'000);
  // allreduce over 3 ranks: busbw = 1e6 B * 2*(3-1)/3 / 100'000 ns = 13.333 GB/s.
  EXPECT_NEAR(c[0]["busbw_gbps"].get<double>(), 1e6 * (4.0 / 3.0) / 1e5, 1e-9);
  EXPECT_NEAR(c[1]["busbw_gbps"].get<double>(), 1e6 * (4.0 / 3.0) / 1e5, 1e-9);
  // k=3: transfer 0 → no bandwidth.
  EXPECT_TRUE(c[3]["busbw_gbps"].is_null());
  // Same ledger as with kernel matching.
  EXPECT_EQ(c[1]["last_rank"].get<int>(), 2);
  EXPECT_EQ(c[3]["last_rank"].get<int>(), 1);
  const std::string h = js["headline"];
  EXPECT_EQ(h.rfind("rank 2 arrived last at 2 of 4 allreduces", 0), 0u) << h;
}

TEST(Stragglers, NcclSeqBeatsOccurrenceOrder) {
  // Rank 1 logs Seq 1 before Seq 0 on different streams (launch order differs); matching by
  // Seq pairs rank 0's Seq-0 [100,200) with rank 1's Seq-0 [300,400) → skew 200, rank 1 last;
  // Seq 1: rank 0 [500,600), rank 1 [150,600) → rank 0 last by 350.
  auto comm = [](int32_t r, int32_t stream, int64_t s, int64_t e, int64_t seq) {
    Row x{r, stream, s, e, kAllReduce, Category::Communication};
    x.nccl = Nccl{"allreduce", seq, "0", "[0, 1]", 4096};
    return x;
  };
  const Store s = make_store({comm(0, 20, 100, 200, 0), comm(0, 20, 500, 600, 1),
                              comm(1, 20, 300, 400, 0), comm(1, 21, 150, 600, 1)});
  const nlohmann::json js = stragglers(s);
  EXPECT_EQ(js["match"], "nccl (process group, collective, Seq)");
  const auto& c = js["collectives"];
  ASSERT_EQ(c.size(), 2u);
  // Sorted by earliest start: Seq 0 (100) before Seq 1 (150).
  EXPECT_EQ(c[0]["last_rank"].get<int>(), 1);
  EXPECT_NEAR(c[0]["skew_us"].get<double>(), 200.0, kEps);
  // Rank 0 waits min(300-100, 200-100) = 100 (capped by its own kernel).
  EXPECT_NEAR(c[0]["wait_us"]["0"].get<double>(), 100.0, kEps);
  EXPECT_EQ(c[1]["last_rank"].get<int>(), 0);
  EXPECT_NEAR(c[1]["skew_us"].get<double>(), 350.0, kEps);
  EXPECT_NEAR(c[1]["wait_us"]["1"].get<double>(), 350.0, kEps);
}

// Two tensor-parallel groups inside a pipeline (ranks 0,1 and 2,3), their rank lists not recorded
// (the collector's communicators): each instance expects the ranks seen using its group, not every
// rank, so both groups' collectives match (before: none did).
TEST(Stragglers, SubCommunicatorsWithoutRankListsMatch) {
  auto comm = [](int32_t r, const char* pg, int64_t s, int64_t e, int64_t seq) {
    Row x{r, 20, s, e, kAllReduce, Category::Communication};
    x.nccl = Nccl{"allreduce", seq, pg, "", 4096};
    return x;
  };
  const Store s = make_store({comm(0, "comm:a", 100, 200, 0), comm(1, "comm:a", 150, 200, 0),
                              comm(2, "comm:b", 100, 300, 0), comm(3, "comm:b", 250, 300, 0),
                              comm(0, "comm:a", 400, 500, 1), comm(1, "comm:a", 400, 500, 1),
                              comm(3, "comm:b", 600, 700, 1)});  // rank 2 never ran seq 1
  const nlohmann::json js = stragglers(s);
  EXPECT_EQ(js["matched"].get<int>(), 3);
  EXPECT_EQ(js["unmatched_count"].get<int>(), 1);
  const auto& c = js["collectives"];
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0]["ranks"].get<int>(), 2);
  EXPECT_EQ(c[0]["last_rank"].get<int>(), 1);  // comm:a seq 0 (first arrival 100, discovered first)
  EXPECT_EQ(c[1]["last_rank"].get<int>(), 3);  // comm:b seq 0
  EXPECT_NEAR(c[1]["skew_us"].get<double>(), 150.0, kEps);
}

TEST(Stragglers, PointToPointPairsInTheOneMatcher) {
  // Pipeline stages: rank 0 sends to rank 1 twice (no Seq: paired by occurrence within the
  // process group), next to an all-reduce of both. The sends and recvs pair in the matcher (its
  // p2p list, ids after the collectives) and are not unmatched; a lone send stays unmatched.
  auto p2p = [](int32_t r, const char* op, int64_t s, int64_t e) {
    Row x{r, 30, s, e, std::string("ncclDevKernel_") + op, Category::Communication};
    x.nccl = Nccl{op, -1, "pp", "", 1024};
    return x;
  };
  auto ar = [](int32_t r, int64_t s, int64_t e) {
    Row x{r, 20, s, e, kAllReduce, Category::Communication};
    x.nccl = Nccl{"allreduce", -1, "world", "", 4096};
    return x;
  };
  const Store s =
      make_store({ar(0, 10, 50), ar(1, 20, 50), p2p(0, "Send", 100, 200), p2p(1, "Recv", 150, 200),
                  p2p(0, "Send", 300, 400), p2p(1, "Recv", 300, 400), p2p(0, "Send", 500, 600)});
  std::vector<uint32_t> all(s.activities.size());
  for (uint32_t i = 0; i < all.size(); ++i) all[i] = i;
  const CollectiveMatch m = match_collectives(s, all);
  ASSERT_EQ(m.matched.size(), 1u);
  ASSERT_EQ(m.p2p.size(), 2u);
  for (size_t k = 0; k < m.p2p.size(); ++k) {
    EXPECT_EQ(m.p2p[k].id, static_cast<int64_t>(1 + k));
    EXPECT_EQ(m.p2p[k].op, "send/recv");
    ASSERT_EQ(m.p2p[k].arrivals.size(), 2u);
    EXPECT_NE(m.p2p[k].arrivals[0].rank, m.p2p[k].arrivals[1].rank);
  }
  EXPECT_EQ(s.activities.start_ns[m.p2p[0].arrivals[1].row], 150000);  // the first recv
  EXPECT_EQ(m.unmatched_count, 1u);  // the third send, whose recv never ran
  ASSERT_EQ(m.unmatched.size(), 1u);
  EXPECT_EQ(collective_op_key(m.unmatched[0].op), "send");
  // The ledger ranks collectives only.
  EXPECT_EQ(stragglers(s)["matched"].get<int>(), 1);
}

TEST(Stragglers, HostLaunchDelayIsTheCause) {
  // Three ranks: gemm [100,1100) (corr 1, launched at 10); AllReduce (corr 2) launched at 20
  // and starting at 1100 on ranks 0 and 2; rank 1's launch comes at 1400, after its GPU went
  // idle at 1100, and its kernel starts at 1410. Kernels end at 1500.
  // Lateness 1410 - 1100 = 310; no previous collective, so the window starts at the first
  // kernel (100): gemm time is 1000 everywhere (no excess); rank 1's idle [1100,1410) is host
  // idle (launch 1400 > 1100) vs 0 for peers → host delay 310, all of the lateness.
  std::vector<Row> rows;
  std::vector<Launch> launches;
  for (int32_t r = 0; r < 3; ++r) {
    rows.push_back({r, 7, 100, 1100, "gemm", Category::Computation, Kind::Kernel, 1});
    int64_t st = r == 1 ? 1410 : 1100;
    rows.push_back({r, 20, st, 1500, kAllReduce, Category::Communication, Kind::Kernel, 2});
    launches.push_back({r, 1, 10});
    launches.push_back({r, 2, r == 1 ? 1400 : 20});
  }
  Report rep;
  const nlohmann::json js = stragglers(make_store(rows, launches), {}, &rep);
  const auto& c = js["collectives"];
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]["last_rank"].get<int>(), 1);
  EXPECT_NEAR(c[0]["skew_us"].get<double>(), 310.0, kEps);
  EXPECT_NEAR(c[0]["lateness_us"].get<double>(), 310.0, kEps);
  EXPECT_NEAR(c[0]["causes"]["host_delay_us"].get<double>(), 310.0, kEps);
  EXPECT_NEAR(c[0]["causes"]["kernels_us"].get<double>(), 0.0, kEps);
  EXPECT_NEAR(c[0]["causes"]["other_idle_us"].get<double>(), 0.0, kEps);
  EXPECT_NEAR(c[0]["causes"]["unexplained_us"].get<double>(), 0.0, kEps);
  // Waits: ranks 0 and 2 wait 310 each (their kernels last 400) → inflicted 620.
  EXPECT_NEAR(c[0]["inflicted_us"].get<double>(), 620.0, kEps);
  EXPECT_NEAR(rank_entry(js, 1)["causes"]["host_delay_us"].get<double>(), 310.0, kEps);
  const std::string h = js["headline"];
  EXPECT_EQ(h.rfind("rank 1 arrived last at 1 of 1", 0), 0u) << h;
  EXPECT_NE(h.find("100 % of its lateness is host launch delay"), std::string::npos) << h;
  EXPECT_TRUE(js["delay_by_kernel"].empty());

  // Without the launch table the same idle is "other idle".
  const nlohmann::json j2 = stragglers(make_store(rows));
  EXPECT_NEAR(j2["collectives"][0]["causes"]["other_idle_us"].get<double>(), 310.0, kEps);
  EXPECT_NEAR(j2["collectives"][0]["causes"]["host_delay_us"].get<double>(), 0.0, kEps);
}

TEST(Stragglers, ClockUncertaintyMakesSkewNoise) {
  // ±300 µs on every rank: u_last + u_first = 600 ≥ every skew (500, 500, 200) → all noise,
  // nobody blamed, and the headline says so.
  Store s = straggler_store();
  for (auto& r : s.ranks) r.clock_uncertainty_ns = 300 * kUs;
  const nlohmann::json js = stragglers(s);
  const auto& c = js["collectives"];
  ASSERT_EQ(c.size(), 4u);
  // k=0: skew 0 ≤ 600 is within the bound too (noise by the formula), but it has no last
  // arriver: last_rank null, and no rank may be charged a skipped instance for it.
  EXPECT_TRUE(c[0]["noise"].get<bool>());
  EXPECT_TRUE(c[0]["last_rank"].is_null());
  for (int k : {1, 2, 3}) {
    SCOPED_TRACE(k);
    EXPECT_TRUE(c[k]["noise"].get<bool>());
    EXPECT_NEAR(c[k]["causes"]["kernels_us"].get<double>(), 0.0, kEps);
  }
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(rank_entry(js, r)["times_last"].get<int>(), 0);
    EXPECT_NEAR(rank_entry(js, r)["inflicted_us"].get<double>(), 0.0, kEps);
  }
  EXPECT_EQ(rank_entry(js, 2)["noise_skipped"].get<int>(), 2);  // k=1, k=2
  EXPECT_EQ(rank_entry(js, 1)["noise_skipped"].get<int>(), 1);  // k=3
  EXPECT_EQ(rank_entry(js, 0)["noise_skipped"].get<int>(), 0);  // never last
  EXPECT_TRUE(js["delay_by_kernel"].empty());
  const std::string h = js["headline"];
  EXPECT_EQ(h.rfind("no straggler: all 4 matched collectives started together", 0), 0u) << h;
}

TEST(Stragglers, ClockUncertaintyBelowSkewStillBlames) {
  // ±150 µs: bound 300 < 500 (k=1, 2 still blamed on rank 2) but ≥ 200 (k=3 is noise, so
  // rank 1 is not blamed).
  Store s = straggler_store();
  for (auto& r : s.ranks) r.clock_uncertainty_ns = 150 * kUs;
  const nlohmann::json js = stragglers(s);
  const auto& c = js["collectives"];
  EXPECT_FALSE(c[1]["noise"].get<bool>());
  EXPECT_TRUE(c[3]["noise"].get<bool>());
  EXPECT_EQ(rank_entry(js, 2)["times_last"].get<int>(), 2);
  EXPECT_EQ(rank_entry(js, 1)["times_last"].get<int>(), 0);
  EXPECT_EQ(rank_entry(js, 1)["noise_skipped"].get<int>(), 1);
  EXPECT_EQ(js["headline"].get<std::string>().rfind("rank 2 arrived last at 2 of 4", 0), 0u);
}

TEST(Stragglers, SingleRank) {
  const Store s =
      make_store({{0, 7, 0, 100, "gemm"}, {0, 20, 100, 200, kAllReduce, Category::Communication}});
  Report rep;
  const nlohmann::json js = stragglers(s, {}, &rep);
  const std::string h = js["headline"];
  EXPECT_EQ(h.rfind("only 1 rank", 0), 0u) << h;
  EXPECT_EQ(js["matched"].get<int>(), 0);
  EXPECT_EQ(js["unmatched_count"].get<int>(), 1);
  EXPECT_TRUE(js["collectives"].empty());
}

TEST(Stragglers, StepsMakeHeadlinePerStep) {
  // Same ledger with every row in one of two steps (k=0,1 → step 1; k=2,3 → step 2): rank 2
  // was last in steps 1 and 2 → 2000 µs / 2 steps = 1.0 ms of waiting per step.
  Store s = straggler_store();
  for (size_t i = 0; i < s.activities.size(); ++i)
    s.activities.step[i] = s.activities.start_ns[i] < 4000 * kUs ? 1 : 2;
  const nlohmann::json js = stragglers(s);
  const std::string h = js["headline"];
  EXPECT_NE(h.find("1.0 ms of waiting per step"), std::string::npos) << h;
  EXPECT_EQ(js["collectives"][0]["step"].get<int>(), 1);
  EXPECT_EQ(js["collectives"][3]["step"].get<int>(), 2);
}

// One matcher: the Perfetto export's `collective id`s, waits and flows name the ledger's
// instances. Rank 2 lacks the last all-reduce (k=3 on ranks 0 and 1 only): the ledger leaves it
// unmatched, so the export must give it no id either (the export's former rule, >= 2 ranks,
// gave it id 3). The kernel-name rule is used (no NCCL metadata), names simplified in both.
TEST(Stragglers, ExportCollectiveIdsAreTheLedgers) {
  Store full = straggler_store();
  std::vector<size_t> keep;
  const Activities& fa = full.activities;
  for (size_t i = 0; i < fa.size(); ++i)
    if (!(fa.rank[i] == 2 && fa.category[i] == static_cast<uint8_t>(Category::Communication) &&
          fa.start_ns[i] == 7000 * kUs))
      keep.push_back(i);
  Store s = full;
  Activities& a = s.activities;
  auto pick = [&](auto& col, const auto& from) {
    col.clear();
    for (size_t i : keep) col.push_back(from[i]);
  };
  pick(a.rank, fa.rank), pick(a.device, fa.device), pick(a.stream, fa.stream);
  pick(a.kind, fa.kind), pick(a.category, fa.category), pick(a.start_ns, fa.start_ns);
  pick(a.end_ns, fa.end_ns), pick(a.name_id, fa.name_id), pick(a.correlation, fa.correlation);
  pick(a.step, fa.step);

  for (bool verbose : {false, true}) {
    CrossRankOptions opt;
    opt.verbose = verbose;  // display option: must not change the ids
    const nlohmann::json js = stragglers(s, opt);
    ASSERT_EQ(js["matched"].get<int>(), 3);
    EXPECT_EQ(js["unmatched_count"].get<int>(), 1);
  }
  const nlohmann::json js = stragglers(s);
  std::map<std::pair<int, int64_t>, int64_t> ledger;  // (rank, kernel start) → id
  CollectiveMatch cm = match_collectives(s, select_activities(s, {}));
  ASSERT_EQ(cm.matched.size(), 3u);
  for (const auto& c : cm.matched) {
    EXPECT_EQ(js["collectives"][static_cast<size_t>(c.id)]["id"].get<int64_t>(), c.id);
    EXPECT_EQ(js["collectives"][static_cast<size_t>(c.id)]["op"], c.op);
    for (const auto& x : c.arrivals) ledger[{x.rank, a.start_ns[x.row]}] = c.id;
  }

  auto dir =
      std::filesystem::temp_directory_path() / ("kernalyse-coll-ids-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "t.json").string();
  ExportOptions eo;
  eo.force = true;
  ExportStats st = export_perfetto(s, path, eo);
  std::ifstream in(path);
  const nlohmann::json trace = nlohmann::json::parse(in);
  std::filesystem::remove_all(dir);
  const int64_t base = export_base_ns(s);
  std::map<std::pair<int, int64_t>, int64_t> exported;
  int waits = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] != "X" || !e["args"].contains("collective id")) continue;
    const int64_t id = e["args"]["collective id"].get<int64_t>();
    if (e["cat"] == "wait") {  // each wait equals the ledger's wait of that rank at that id
      ++waits;
      const auto& w = js["collectives"][static_cast<size_t>(id)]["wait_us"];
      EXPECT_NEAR(w[std::to_string(e["pid"].get<int>())].get<double>(),
                  e["args"]["wait_ns"].get<double>() / 1000.0, kEps);
      continue;
    }
    const int64_t ts = std::llround(e["ts"].get<double>() * 1000.0) + base;
    exported[{e["pid"].get<int>(), ts}] = id;
  }
  EXPECT_EQ(exported, ledger);
  EXPECT_EQ(waits, 4);     // k=1, k=2: ranks 0 and 1 wait for rank 2 (k=3 is unmatched now)
  EXPECT_EQ(st.flows, 6);  // 3 instances × 2 other ranks
}

// ============================================================================================
// Extreme timestamps (issue 19): times at the edge of the supported range (|t| <= 2^62 - 1 ns,
// about ±4.6e15 µs; the importers refuse ±9e15 µs) are each in range, but sums of durations over
// ranks, streams and instances are not. Totals saturate at the int64 limits, never wrap.
// ============================================================================================

constexpr int64_t kEdgeUs = kMaxAbsTimeNs / kUs;  // 4,611,686,018,427,387 µs

TEST(ExtremeTimes, UnionOfReversedIntervalsSaturates) {
  // Records that end before they start (a spool or nsys quirk) are separate groups of negative
  // length: three of -2·edge sum to < INT64_MIN.
  std::vector<CatInterval> v(3, {kEdgeUs * kUs, -kEdgeUs * kUs, Category::Communication});
  const UnionStats u = union_stats(v);
  EXPECT_EQ(u.busy_ns, INT64_MIN);
  EXPECT_EQ(u.comm_ns, INT64_MIN);
  EXPECT_EQ(u.overlap_ns, 0);
  EXPECT_EQ(u.comm_excl_ns, INT64_MIN);
  EXPECT_EQ(u.span_ns, -2 * kEdgeUs * kUs);
}

TEST(ExtremeTimes, HtaIdleNegativeGapsSaturate) {
  // Three kernels over the whole range on one stream: HTA's gaps (start - previous end) are
  // -2·edge each, two of them already past INT64_MIN.
  const Store s = make_store({{0, 7, -kEdgeUs, kEdgeUs, "gemm"},
                              {0, 7, -kEdgeUs, kEdgeUs, "gemm"},
                              {0, 7, -kEdgeUs, kEdgeUs, "gemm"}});
  CrossRankOptions opt;
  opt.compat = Compat::Hta;
  const std::vector<StreamIdle> idle = stream_idle(s, opt);
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_EQ(idle[0].kernel_ns, INT64_MIN);
  EXPECT_EQ(idle[0].gaps, 2);
  Report rep;
  idle_analysis(s, opt, &rep);
  EXPECT_NEAR(dval(table(rep, "idle"), 0, "idle_us"), static_cast<double>(INT64_MIN) / kUs, 16.0);
  // Native mode: overlaps, no idle.
  const std::vector<StreamIdle> native = stream_idle(s, {});
  EXPECT_EQ(native[0].kernel_ns, 0);
  EXPECT_EQ(native[0].overlaps, 2);
}

TEST(ExtremeTimes, HtaViewWithDamagedBaseTimeStaysInRange) {
  Store s = make_store({{0, 7, -kEdgeUs, kEdgeUs, "gemm"}});
  s.activities.start_ns[0] -= 903;  // -kMaxAbsTimeNs: the rounding must not leave the range
  s.activities.end_ns[0] += 903;
  for (int64_t base : {INT64_MIN, INT64_MAX, -kMaxAbsTimeNs, int64_t{0}}) {
    s.ranks[0].base_time_ns = base;
    const Store h = hta_view(s);
    ASSERT_EQ(h.activities.size(), 1u);
    EXPECT_TRUE(time_in_range(h.activities.start_ns[0])) << base;
    EXPECT_TRUE(time_in_range(h.activities.end_ns[0])) << base;
    EXPECT_LE(h.activities.start_ns[0] - s.activities.start_ns[0], 999) << base;
  }
}

TEST(ExtremeTimes, StragglerTotalsSaturate) {
  // Ranks 0 and 1 run the collective over the whole range; rank 2 arrives at the very end,
  // after two overlapping compute kernels (streams 7 and 8) over the range. Each wait is
  // (2·edge - 1) µs and fits; their sum and the two kernels' time do not.
  const std::string comm = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
  std::vector<Row> rows = {{0, 20, -kEdgeUs, kEdgeUs, comm, Category::Communication},
                           {1, 20, -kEdgeUs, kEdgeUs, comm, Category::Communication},
                           {2, 7, -kEdgeUs, kEdgeUs - 1, "gemm"},
                           {2, 8, -kEdgeUs, kEdgeUs - 1, "gemm"},
                           {2, 20, kEdgeUs - 1, kEdgeUs, comm, Category::Communication}};
  const Store s = make_store(rows);
  const StragglerResult r = straggler_ledger(s, {});
  ASSERT_EQ(r.collectives.size(), 1u);
  const StragglerCollective& c = r.collectives[0];
  const int64_t wait = (2 * kEdgeUs - 1) * kUs;
  EXPECT_EQ(c.last_rank, 2);
  EXPECT_EQ(c.skew_ns, wait);
  EXPECT_EQ(c.lateness_ns, wait);
  EXPECT_EQ(c.inflicted_ns, INT64_MAX);  // wait + wait saturates
  for (const auto& [rank, w] : c.wait_ns) EXPECT_EQ(w, rank == 2 ? 0 : wait) << rank;
  // The compute time in rank 2's window saturates; the causes are scaled to the lateness.
  EXPECT_GE(c.causes.kernels_ns, wait - 4096);
  EXPECT_LE(c.causes.kernels_ns, wait);
  EXPECT_GE(c.causes.unexplained_ns, 0);
  for (const StragglerRank& g : r.ranks) {
    EXPECT_GE(g.inflicted_ns, 0) << g.rank;
    EXPECT_GE(g.suffered_ns, 0) << g.rank;
  }
  EXPECT_EQ(worst_straggler(r), 2);
  EXPECT_NE(straggler_headline(r).find("rank 2 arrived last"), std::string::npos);
}

}  // namespace
}  // namespace kernalyse

// hta_round reads (t - base) as HTA's parser reads the JSON's µs: the double nearest the exact
// decimal. Up to 2^53 ns it divides instead of parsing text (issue 27): the same doubles, so the
// same rounded times, checked here against the text path on times near epoch µs, small, negative
// and fractional, and past 2^53 (where it still parses the text).
TEST(HtaRound, SameAsParsingTheExactDecimal) {
  auto by_text = [](int64_t base, int64_t start, int64_t end) {
    auto parse = [](int64_t ns) {
      double d = 0;
      const std::string t = kernalyse::ns_to_us_text(ns);
      std::from_chars(t.data(), t.data() + t.size(), d);
      return d;
    };
    const double x = parse(start - base), d = parse(end - start);
    return std::pair<int64_t, int64_t>{base + static_cast<int64_t>(std::ceil(x)) * 1000,
                                       base + static_cast<int64_t>(std::floor(x + d)) * 1000};
  };
  std::mt19937_64 g(27);
  int64_t checked = 0;
  for (int64_t base : {int64_t{0}, int64_t{1'700'000'000'000'000'123}, int64_t{-987'654'321}}) {
    for (int i = 0; i < 200'000; ++i) {
      const int64_t span = i % 3 == 0 ? int64_t{1} << 56 : i % 3 == 1 ? int64_t{1} << 40 : 5'000;
      const int64_t rel = static_cast<int64_t>(g() % static_cast<uint64_t>(span)) - span / 2;
      const int64_t dur = static_cast<int64_t>(g() % 10'000'000);
      int64_t start = 0, end = 0;
      if (__builtin_add_overflow(base, rel, &start) || __builtin_add_overflow(start, dur, &end))
        continue;
      const auto got = kernalyse::hta_round(base, start, end);
      const auto want = by_text(base, start, end);
      ASSERT_EQ(got, want) << "base " << base << " start " << start << " end " << end;
      ++checked;
    }
  }
  EXPECT_GT(checked, 400'000);
}
