// Kernel summary on hand-built stores: stats, shares, filters, name merging, sorting, top N.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "kernalyse/analysis.h"
#include "kernalyse/report.h"
#include "kernalyse/store_io.h"

namespace kernalyse {
namespace {

struct K {
  int32_t rank;
  std::string name;
  int64_t dur;
  int32_t step = kNoStep;
  Kind kind = Kind::Kernel;
  Category cat = Category::Computation;
};

// Kernels back to back on one stream per rank, in store order.
Store make_store(const std::vector<K>& rows) {
  Store s;
  Activities& a = s.activities;
  int64_t t = 0;
  for (const K& k : rows) {
    a.rank.push_back(k.rank);
    a.device.push_back(0);
    a.stream.push_back(7);
    a.kind.push_back(static_cast<uint8_t>(k.kind));
    a.category.push_back(static_cast<uint8_t>(k.cat));
    a.start_ns.push_back(t);
    a.end_ns.push_back(t + k.dur);
    a.name_id.push_back(s.strings.intern(k.name));
    a.correlation.push_back(kNoCorrelation);
    a.step.push_back(k.step);
    t += k.dur + 10;
  }
  return s;
}

Report summarize(const Store& s, SummaryOptions opt = {}) {
  Report r;
  kernel_summary(s, opt, &r);
  return r;
}

const Table* find(const Report& r, const std::string& key) {
  for (const Table& t : r.tables)
    if (t.key == key) return &t;
  return nullptr;
}
const Table& table(Report&&, const std::string&) = delete;  // would dangle
const Table& table(const Report& r, const std::string& key) {
  const Table* t = find(r, key);
  if (!t) throw std::runtime_error("no table " + key);
  return *t;
}
size_t col(const Table& t, const std::string& name) {
  auto it = std::find(t.columns.begin(), t.columns.end(), name);
  if (it == t.columns.end()) throw std::runtime_error("no column " + name);
  return static_cast<size_t>(it - t.columns.begin());
}
std::string name(const Table& t, size_t row) { return std::get<std::string>(t.rows.at(row)[0]); }
int64_t ival(const Table& t, size_t row, const std::string& c) {
  return std::get<int64_t>(t.rows.at(row).at(col(t, c)));
}
double dval(const Table& t, size_t row, const std::string& c) {
  return std::get<double>(t.rows.at(row).at(col(t, c)));
}
std::vector<std::string> names(const Table& t) {
  std::vector<std::string> out;
  for (size_t i = 0; i < t.rows.size(); ++i) out.push_back(name(t, i));
  return out;
}

// Row names of the all-ranks table.
std::vector<std::string> order(const Store& s, const SummaryOptions& opt) {
  const Report r = summarize(s, opt);
  return names(table(r, "kernel_summary"));
}

const std::vector<K> kBasic = {
    {0, "A", 1000},
    {0, "A", 2000},
    {0, "A", 3000},
    {0, "B", 4000},
    {0, "Memcpy HtoD", 9000, kNoStep, Kind::Memcpy, Category::Memory},  // not a kernel
};

TEST(KernelSummary, CountsStatsAndShares) {
  const Report r = summarize(make_store(kBasic));
  const Table& t = table(r, "kernel_summary");
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(names(t), (std::vector<std::string>{"A", "B"}));  // total 6000 vs 4000
  EXPECT_EQ(ival(t, 0, "count"), 3);
  EXPECT_EQ(ival(t, 0, "total_ns"), 6000);
  EXPECT_DOUBLE_EQ(dval(t, 0, "total_us"), 6.0);
  EXPECT_DOUBLE_EQ(dval(t, 0, "mean_us"), 2.0);
  EXPECT_NEAR(dval(t, 0, "std_us"), std::sqrt(2.0 / 3.0), 1e-12);  // population std
  EXPECT_DOUBLE_EQ(dval(t, 0, "min_us"), 1.0);
  EXPECT_DOUBLE_EQ(dval(t, 0, "max_us"), 3.0);
  EXPECT_DOUBLE_EQ(dval(t, 0, "pct_launches"), 75.0);
  EXPECT_DOUBLE_EQ(dval(t, 0, "pct_time"), 60.0);
  EXPECT_DOUBLE_EQ(dval(t, 1, "std_us"), 0.0);
  EXPECT_DOUBLE_EQ(dval(t, 1, "pct_launches"), 25.0);
  EXPECT_EQ(std::get<std::string>(t.rows[0][col(t, "category")]), "computation");
  EXPECT_EQ(r.json["kernel_summary_totals"]["kernels"], 4);
  // One rank: no per-rank tables.
  EXPECT_EQ(find(r, "kernel_summary_rank0"), nullptr);
}

TEST(KernelSummary, LargeDurationsKeepStdExact) {
  // Σd² of these overflows 64 bits; the std must still be exact.
  std::vector<K> rows;
  for (int i = 0; i < 1000; ++i) rows.push_back({0, "big", 4000000000000LL + (i % 2) * 2});
  const Report rep_t = summarize(make_store(rows));
  const Table& t = table(rep_t, "kernel_summary");
  EXPECT_NEAR(dval(t, 0, "std_us"), 0.001, 1e-12);
}

TEST(KernelSummary, PerRankTablesAndRankFilter) {
  const Store s = make_store({{0, "A", 1000}, {0, "B", 1000}, {1, "A", 5000}, {3, "C", 100}});
  const Report r = summarize(s);
  EXPECT_EQ(table(r, "kernel_summary").rows.size(), 3u);
  const Table& r0 = table(r, "kernel_summary_rank0");
  EXPECT_EQ(r0.rows.size(), 2u);
  EXPECT_DOUBLE_EQ(dval(r0, 0, "pct_launches"), 50.0);  // shares within the rank
  const Table& r1 = table(r, "kernel_summary_rank1");
  ASSERT_EQ(r1.rows.size(), 1u);
  EXPECT_DOUBLE_EQ(dval(r1, 0, "pct_time"), 100.0);
  EXPECT_NE(find(r, "kernel_summary_rank3"), nullptr);
  EXPECT_EQ(find(r, "kernel_summary_rank2"), nullptr);
  // Tables come in rank order after the all-ranks table.
  EXPECT_EQ(r.tables[1].key, "kernel_summary_rank0");
  EXPECT_EQ(r.tables[3].key, "kernel_summary_rank3");

  SummaryOptions opt;
  opt.filter.rank = 1;
  const Report f = summarize(s, opt);
  const Table& t = table(f, "kernel_summary");
  ASSERT_EQ(t.rows.size(), 1u);
  EXPECT_EQ(name(t, 0), "A");
  EXPECT_EQ(ival(t, 0, "total_ns"), 5000);
  EXPECT_EQ(f.tables.size(), 1u);

  opt.filter.rank = 2;  // not in the store
  EXPECT_THROW(summarize(s, opt), Error);
  opt.per_rank = false;
  opt.filter.rank.reset();
  EXPECT_EQ(summarize(s, opt).tables.size(), 1u);
}

TEST(KernelSummary, StepFilter) {
  const Store s = make_store({{0, "A", 1000, 1},
                              {0, "B", 1000, 2},
                              {0, "A", 3000, 2},
                              {1, "A", 500, 2},
                              {1, "C", 100, kNoStep}});
  SummaryOptions opt;
  opt.filter.step = 2;
  const Report rep_t = summarize(s, opt);
  const Table& t = table(rep_t, "kernel_summary");
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(name(t, 0), "A");
  EXPECT_EQ(ival(t, 0, "count"), 2);
  EXPECT_EQ(ival(t, 0, "total_ns"), 3500);

  opt.filter.step = 7;
  try {
    summarize(s, opt);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "no ProfilerStep#7 in ranks 0-1");
  }
  opt.filter.step = 1;
  opt.filter.rank = 1;
  EXPECT_THROW(summarize(s, opt), Error);  // step 1 exists, but not on rank 1
}

TEST(KernelSummary, StepKnownFromAnnotationsButEmpty) {
  Store s = make_store({{0, "A", 1000, 1}});
  s.annotations.rank.push_back(0);
  s.annotations.kind.push_back(static_cast<uint8_t>(AnnotationKind::Step));
  s.annotations.pid.push_back(1);
  s.annotations.tid.push_back(1);
  s.annotations.start_ns.push_back(5000);
  s.annotations.end_ns.push_back(6000);
  s.annotations.name_id.push_back(s.strings.intern("ProfilerStep#3"));
  s.annotations.step.push_back(3);
  SummaryOptions opt;
  opt.filter.step = 3;
  const Report r = summarize(s, opt);
  EXPECT_TRUE(table(r, "kernel_summary").rows.empty());
  ASSERT_FALSE(r.headline.empty());
  EXPECT_NE(r.headline[0].find("no kernel activities"), std::string::npos);
}

TEST(KernelSummary, SimplifiedNamesMergeUnlessVerbose) {
  const Store s = make_store({{0, "void gemm<float, 128>(float const*, int)", 1000},
                              {0, "void gemm<half, 64>(half const*, int)", 3000},
                              {0, "other_kernel", 500}});
  const Report rep_t = summarize(s);
  const Table& t = table(rep_t, "kernel_summary");
  ASSERT_EQ(t.rows.size(), 2u);
  EXPECT_EQ(name(t, 0), "gemm");
  EXPECT_EQ(ival(t, 0, "count"), 2);
  EXPECT_EQ(ival(t, 0, "min_ns"), 1000);
  EXPECT_EQ(ival(t, 0, "max_ns"), 3000);
  EXPECT_DOUBLE_EQ(dval(t, 0, "std_us"), 1.0);

  SummaryOptions opt;
  opt.verbose = true;
  const Report rep_v = summarize(s, opt);
  const Table& v = table(rep_v, "kernel_summary");
  ASSERT_EQ(v.rows.size(), 3u);
  EXPECT_EQ(name(v, 0), "void gemm<half, 64>(half const*, int)");
  EXPECT_EQ(v.max_text_width, 0u);
}

TEST(KernelSummary, SortOrdersAndTop) {
  // A: many short; B: one long; C: medium.
  std::vector<K> rows;
  for (int i = 0; i < 10; ++i) rows.push_back({0, "A", 100});  // count 10, total 1000, mean 100
  rows.push_back({0, "B", 5000});                              // count 1, total 5000, mean 5000
  for (int i = 0; i < 3; ++i) rows.push_back({0, "C", 1000});  // count 3, total 3000, mean 1000
  const Store s = make_store(rows);
  SummaryOptions opt;
  opt.sort = SummarySort::Count;
  EXPECT_EQ(order(s, opt), (std::vector<std::string>{"A", "C", "B"}));
  opt.sort = SummarySort::Total;
  EXPECT_EQ(order(s, opt), (std::vector<std::string>{"B", "C", "A"}));
  opt.sort = SummarySort::Mean;
  EXPECT_EQ(order(s, opt), (std::vector<std::string>{"B", "C", "A"}));
  opt.sort = SummarySort::Pct;
  EXPECT_EQ(order(s, opt), (std::vector<std::string>{"B", "C", "A"}));

  opt.sort = SummarySort::Count;
  opt.top = 2;
  const Report r = summarize(s, opt);
  const Table& t = table(r, "kernel_summary");
  EXPECT_EQ(names(t), (std::vector<std::string>{"A", "C"}));
  // Shares stay relative to everything, not just the rows shown.
  EXPECT_NEAR(dval(t, 0, "pct_launches"), 100.0 * 10 / 14, 1e-9);
  bool noted = false;
  for (const auto& h : r.headline) noted |= h.find("top 2 of 3") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(KernelSummary, TiesBreakByName) {
  const Store s = make_store({{0, "b", 100}, {0, "a", 100}, {0, "c", 100}});
  EXPECT_EQ(order(s, {}), (std::vector<std::string>{"a", "b", "c"}));
}

TEST(KernelSummary, CategoryColumn) {
  const Store s = make_store(
      {{0, "ncclDevKernel_AllReduce", 100, kNoStep, Kind::Kernel, Category::Communication},
       {0, "memsetish", 10, kNoStep, Kind::Kernel, Category::Memory}});
  const Report rep_t = summarize(s);
  const Table& t = table(rep_t, "kernel_summary");
  EXPECT_EQ(std::get<std::string>(t.rows[0][col(t, "category")]), "communication");
  EXPECT_EQ(std::get<std::string>(t.rows[1][col(t, "category")]), "memory");
}

TEST(KernelSummary, EmptyStoreAndNoKernels) {
  for (const Store& s : {Store{}, make_store({{0, "Memcpy", 10, kNoStep, Kind::Memcpy}})}) {
    const Report r = summarize(s);
    EXPECT_TRUE(table(r, "kernel_summary").rows.empty());
    ASSERT_FALSE(r.headline.empty());
    EXPECT_NE(r.headline[0].find("no kernel activities"), std::string::npos);
    std::ostringstream js, tx;
    render_json(r, js);
    render_text(r, tx);
    EXPECT_EQ(js.str().find("NaN"), std::string::npos);
    EXPECT_TRUE(nlohmann::json::accept(js.str()));
    EXPECT_NE(tx.str().find("(no rows)"), std::string::npos);
  }
}

TEST(KernelSummary, TextTruncatesLongNames) {
  const std::string longname(200, 'x');
  const Report r = summarize(make_store({{0, longname, 100}}));
  std::ostringstream tx;
  render_text(r, tx);
  EXPECT_EQ(tx.str().find(longname), std::string::npos);
  EXPECT_NE(tx.str().find(std::string(63, 'x') + "…"), std::string::npos);
  std::ostringstream js;
  render_json(r, js);
  EXPECT_NE(js.str().find(longname), std::string::npos);  // JSON keeps the full name
}

// The typed result: exact int64 ns per name and scope, before any rendering.
TEST(KernelSummaryResult, NumbersPerScope) {
  const Store s = make_store({{0, "alpha", 100},
                              {0, "alpha", 300},
                              {0, "beta", 50, kNoStep, Kind::Kernel, Category::Communication},
                              {1, "alpha", 200},
                              {1, "gamma", 1000}});
  const SummaryResult r = kernel_summary(s, SummaryOptions{});
  EXPECT_EQ(r.ranks, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(r.all.rank, -1);
  EXPECT_EQ(r.all.count, 5);
  EXPECT_EQ(r.all.total_ns, 1650);
  EXPECT_EQ(r.all.distinct, 3u);
  ASSERT_EQ(r.all.rows.size(), 3u);
  EXPECT_EQ(r.all.rows[0].name, "gamma");  // by total: 1000, 600, 50
  const SummaryRow& a = r.all.rows[1];
  EXPECT_EQ(a.name, "alpha");
  EXPECT_EQ(a.count, 3);
  EXPECT_EQ(a.total_ns, 600);
  EXPECT_EQ(a.min_ns, 100);
  EXPECT_EQ(a.max_ns, 300);
  EXPECT_NEAR(a.std_ns, std::sqrt(20000.0 / 3.0), 1e-9);  // {100, 300, 200} around 200
  EXPECT_EQ(category_label(a.categories), "computation");
  EXPECT_EQ(category_label(r.all.rows[2].categories), "communication");
  ASSERT_EQ(r.by_rank.size(), 2u);
  EXPECT_EQ(r.by_rank[0].rank, 0);
  EXPECT_EQ(r.by_rank[0].total_ns, 450);
  ASSERT_EQ(r.by_rank[0].rows.size(), 2u);
  EXPECT_EQ(r.by_rank[0].rows[0].total_ns, 400);
  EXPECT_EQ(r.by_rank[1].rank, 1);
  EXPECT_EQ(r.by_rank[1].rows[0].name, "gamma");

  // The top-N cut keeps the denominators; one rank or per_rank off: no per-rank tables.
  SummaryOptions top;
  top.top = 1;
  top.per_rank = false;
  const SummaryResult t = kernel_summary(s, top);
  ASSERT_EQ(t.all.rows.size(), 1u);
  EXPECT_EQ(t.all.distinct, 3u);
  EXPECT_EQ(t.all.total_ns, 1650);
  EXPECT_TRUE(t.by_rank.empty());
  SummaryOptions one;
  one.filter.rank = 1;
  EXPECT_TRUE(kernel_summary(s, one).by_rank.empty());
  EXPECT_EQ(kernel_summary(s, one).all.total_ns, 1200);

  // The renderer shows exactly these numbers.
  Report rep;
  summary_report(r, &rep);
  const Table& k = table(rep, "kernel_summary");
  EXPECT_EQ(ival(k, 1, "total_ns"), 600);
  EXPECT_DOUBLE_EQ(dval(k, 1, "std_us"), a.std_ns / 1e3);
  EXPECT_EQ(rep.json["kernel_summary_totals"]["total_ns"], 1650);
}

}  // namespace
}  // namespace kernalyse
