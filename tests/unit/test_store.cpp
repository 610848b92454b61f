// Store data model (string table, merge, sort) and the HDF5 writer/reader.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <numeric>
#include <random>
#include <sstream>

#include "kernalyse/store.h"
#include "kernalyse/store_io.h"
#include "kernalyse/utc.h"

namespace fs = std::filesystem;
using namespace kernalyse;

namespace {

// A per-rank store as the importer would produce it: `n` kernels on two streams, one launch
// per kernel, a step annotation, and NCCL info on every third activity.
Store rank_store(int32_t rank, size_t n, const std::string& prefix = "k") {
  Store s;
  s.attrs.produced_by = "test";
  s.attrs.tool_version = "9.9.9";
  RankInfo ri;
  ri.rank = rank;
  ri.world_size = 4;
  ri.host = "host" + std::to_string(rank);
  ri.devices = "0";
  ri.device_name = "NVIDIA H100";
  ri.source = "rank" + std::to_string(rank) + ".json";
  ri.base_time_ns = 1712195495519689047 + rank;
  ri.clock_offset_ns = -1234 * rank;
  ri.clock_drift = 1.5e-6 * rank;
  ri.clock_uncertainty_ns = 250;
  ri.clock_method = "mpi-pingpong";
  ri.emulated = rank % 2 == 1;
  ri.events_total = 100 + rank;
  ri.events_malformed = 1;
  ri.events_ignored = 2;
  ri.records_dropped = 3;
  s.ranks.push_back(ri);
  uint32_t step_name = s.strings.intern("ProfilerStep#0");
  for (size_t i = 0; i < n; ++i) {
    Activities& a = s.activities;
    a.rank.push_back(rank);
    a.device.push_back(0);
    a.stream.push_back(i % 2 ? 7 : 13);
    a.kind.push_back(uint8_t(i % 3 == 0 ? Kind::Kernel : Kind::Memcpy));
    a.category.push_back(uint8_t(i % 3 == 0 ? Category::Communication : Category::Memory));
    a.start_ns.push_back(1000 * int64_t(i));
    a.end_ns.push_back(1000 * int64_t(i) + 500);
    a.name_id.push_back(s.strings.intern(prefix + std::to_string(i % 5)));
    a.correlation.push_back(int64_t(rank) * 1000000 + int64_t(i));
    a.step.push_back(0);
    LaunchCalls& l = s.launches;
    l.rank.push_back(rank);
    l.pid.push_back(4242);
    l.tid.push_back(4243);
    l.start_ns.push_back(1000 * int64_t(i) - 100);
    l.end_ns.push_back(1000 * int64_t(i) - 50);
    l.name_id.push_back(s.strings.intern("cudaLaunchKernel"));
    l.correlation.push_back(int64_t(rank) * 1000000 + int64_t(i));
    l.step.push_back(0);
    if (i % 3 == 0) {
      NcclInfo& c = s.nccl;
      c.activity.push_back(i);
      c.collective_id.push_back(s.strings.intern("allreduce"));
      c.seq.push_back(int64_t(i / 3));
      c.pg_name_id.push_back(s.strings.intern("0"));
      c.pg_desc_id.push_back(s.strings.intern("default_pg"));
      c.pg_ranks_id.push_back(s.strings.intern("[0, 1, 2, 3]"));
      c.group_size.push_back(4);
      c.in_nelems.push_back(1024);
      c.out_nelems.push_back(1024);
      c.msg_bytes.push_back(4096);
      c.dtype_id.push_back(s.strings.intern("Float"));
      c.comm_hash.push_back(0xfeedface00000000ull + uint64_t(rank));
      c.peer.push_back(i % 2 ? -1 : (rank + 1) % 4);  // some p2p rows
    }
  }
  Annotations& an = s.annotations;
  an.rank.push_back(rank);
  an.kind.push_back(uint8_t(AnnotationKind::Step));
  an.pid.push_back(4242);
  an.tid.push_back(4243);
  an.start_ns.push_back(-200);
  an.end_ns.push_back(1000 * int64_t(n));
  an.name_id.push_back(step_name);
  an.step.push_back(0);
  return s;
}

// Each test gets its own scratch directory.
class StoreIo : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kernalyse-store-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  size_t file_count() const {
    return std::distance(fs::directory_iterator(dir_), fs::directory_iterator());
  }
  fs::path dir_;
};

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string slurp(const std::string& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

bool have_h5py() {
  return std::system("/usr/bin/python3 -c 'import h5py, numpy' >/dev/null 2>&1") == 0;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

TEST(StoreEnums, Names) {
  EXPECT_STREQ(to_string(Kind::Kernel), "kernel");
  EXPECT_STREQ(to_string(Kind::Memcpy), "memcpy");
  EXPECT_STREQ(to_string(Kind::Memset), "memset");
  EXPECT_STREQ(to_string(Kind::Sync), "sync");
  EXPECT_STREQ(to_string(Kind::Other), "other");
  EXPECT_STREQ(to_string(Category::Computation), "computation");
  EXPECT_STREQ(to_string(Category::Communication), "communication");
  EXPECT_STREQ(to_string(Category::Memory), "memory");
  EXPECT_STREQ(to_string(Category::Other), "other");
  EXPECT_STREQ(to_string(AnnotationKind::Step), "step");
  EXPECT_STREQ(to_string(AnnotationKind::User), "user");
  EXPECT_STREQ(to_string(AnnotationKind::GpuUser), "gpu_user");
  EXPECT_STREQ(to_string(AnnotationKind::Nvtx), "nvtx");
}

TEST(StringTable, InternsAndAssigns) {
  StringTable t;
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t.at(0), "");
  EXPECT_EQ(t.intern(""), 0u);
  uint32_t a = t.intern("ncclDevKernel_AllReduce");
  uint32_t b = t.intern(std::string_view("gemm"));
  EXPECT_EQ(a, 1u);
  EXPECT_EQ(b, 2u);
  EXPECT_EQ(t.intern(std::string("ncclDevKernel_AllReduce")), a);
  EXPECT_EQ(t.at(b), "gemm");
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(t.all(), (std::vector<std::string>{"", "ncclDevKernel_AllReduce", "gemm"}));

  t.assign({"", "x", "y"});
  EXPECT_EQ(t.size(), 3u);
  EXPECT_EQ(t.intern("y"), 2u);
  EXPECT_EQ(t.intern("gemm"), 3u);  // the old index is gone
  t.assign({});
  EXPECT_EQ(t.size(), 1u);
  EXPECT_EQ(t.intern(""), 0u);
}

TEST(StringTable, DuplicatesInAFileKeepTheFirstId) {
  StringTable t;
  // A store file may hold a string twice: its rows keep both ids, lookups give the first, also
  // after the index grows past the assigned table.
  t.assign({"", "k", "dup", "k", "dup"});
  EXPECT_EQ(t.size(), 5u);
  EXPECT_EQ(t.intern("dup"), 2u);
  EXPECT_EQ(t.intern("k"), 1u);
  for (int i = 0; i < 1000; ++i) t.intern("grow " + std::to_string(i));
  EXPECT_EQ(t.intern("dup"), 2u);
  EXPECT_EQ(t.intern("k"), 1u);
  EXPECT_EQ(t.at(3), "k");
  // A spool's table may hold a million empty strings: indexed once, not as one probe chain
  // (quadratic: this test would run for minutes).
  t.assign(std::vector<std::string>(1000000));
  EXPECT_EQ(t.size(), 1000000u);
  EXPECT_EQ(t.intern(""), 0u);
  EXPECT_EQ(t.intern("new"), 1000000u);
}

TEST(StringTable, StringsThatDifferLateOrOnlyInLength) {
  StringTable t;
  const std::string base(40, 'a');
  std::vector<std::string> v = {base,
                                base + "b",
                                base.substr(0, 39),
                                base + std::string(1, '\0'),
                                std::string(1, '\0'),
                                std::string(2, '\0'),
                                "a"};
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(t.intern(v[i]), i + 1) << i;
  for (size_t i = 0; i < v.size(); ++i) EXPECT_EQ(t.intern(v[i]), i + 1) << i;
  EXPECT_EQ(t.size(), v.size() + 1);
}

TEST(StringTable, ManyStrings) {
  StringTable t;
  // std::to_string alone (not "s" + ...): GCC 12 gives a false -Wrestrict on the latter.
  for (int round = 0; round < 2; ++round)
    for (int i = 0; i < 100000; ++i) ASSERT_EQ(t.intern(std::to_string(i)), uint32_t(i + 1));
}

TEST(MergeStores, RemapsStringsAndFixesNccl) {
  std::vector<Store> parts;
  parts.push_back(rank_store(1, 10, "b"));  // out of rank order on purpose
  parts.push_back(rank_store(0, 7, "a"));
  // Expected per-rank content before the merge, by name text.
  auto names = [](const Store& s) {
    std::vector<std::string> v;
    for (uint32_t id : s.activities.name_id) v.push_back(s.strings.at(id));
    return v;
  };
  std::vector<std::string> want0 = names(parts[1]), want1 = names(parts[0]);
  Store m = merge_stores(std::move(parts));

  ASSERT_EQ(m.activities.size(), 17u);
  ASSERT_EQ(m.ranks.size(), 2u);
  EXPECT_EQ(m.ranks[0].rank, 0);
  EXPECT_EQ(m.ranks[1].rank, 1);
  EXPECT_EQ(m.ranks[0].source, "rank0.json");
  EXPECT_TRUE(m.attrs.emulated);  // rank 1 is emulated
  EXPECT_EQ(m.strings.at(0), "");
  // Rows sorted by (rank, device, stream, start): rank 0's stream 7 rows come first.
  for (size_t i = 1; i < m.activities.size(); ++i) {
    const Activities& a = m.activities;
    EXPECT_LE(std::tie(a.rank[i - 1], a.device[i - 1], a.stream[i - 1], a.start_ns[i - 1]),
              std::tie(a.rank[i], a.device[i], a.stream[i], a.start_ns[i]));
  }
  // Names survive the remap: correlation = rank * 1e6 + original index identifies each row.
  for (size_t i = 0; i < m.activities.size(); ++i) {
    int64_t corr = m.activities.correlation[i];
    int32_t r = int32_t(corr / 1000000);
    size_t orig = size_t(corr % 1000000);
    ASSERT_EQ(r, m.activities.rank[i]);
    EXPECT_EQ(m.strings.at(m.activities.name_id[i]), (r == 0 ? want0 : want1)[orig]);
  }
  // String table is deduplicated across parts.
  std::vector<std::string> all = m.strings.all();
  std::sort(all.begin(), all.end());
  EXPECT_EQ(std::adjacent_find(all.begin(), all.end()), all.end());

  // Launches and annotations: remapped and sorted by (rank, start).
  ASSERT_EQ(m.launches.size(), 17u);
  for (size_t i = 0; i < m.launches.size(); ++i)
    EXPECT_EQ(m.strings.at(m.launches.name_id[i]), "cudaLaunchKernel");
  EXPECT_EQ(m.launches.rank.front(), 0);
  EXPECT_EQ(m.launches.rank.back(), 1);
  ASSERT_EQ(m.annotations.size(), 2u);
  EXPECT_EQ(m.annotations.rank, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(m.strings.at(m.annotations.name_id[1]), "ProfilerStep#0");

  // NCCL rows point at the same activity (by correlation) and their ids are remapped.
  ASSERT_EQ(m.nccl.size(), 3u + 4u);
  auto r_of = [](int64_t corr) { return int32_t(corr / 1000000); };
  for (size_t k = 0; k < m.nccl.size(); ++k) {
    uint64_t row = m.nccl.activity[k];
    ASSERT_LT(row, m.activities.size());
    int64_t corr = m.activities.correlation[row];
    EXPECT_EQ(corr % 1000000 % 3, 0) << "nccl row " << k << " points at a non-NCCL activity";
    EXPECT_EQ(m.nccl.seq[k], corr % 1000000 / 3);
    EXPECT_EQ(m.strings.at(m.nccl.collective_id[k]), "allreduce");
    EXPECT_EQ(m.strings.at(m.nccl.pg_desc_id[k]), "default_pg");
    EXPECT_EQ(m.strings.at(m.nccl.pg_ranks_id[k]), "[0, 1, 2, 3]");
    EXPECT_EQ(m.strings.at(m.nccl.dtype_id[k]), "Float");
    EXPECT_EQ(m.strings.at(m.nccl.pg_name_id[k]), "0");
    EXPECT_EQ(m.nccl.comm_hash[k], 0xfeedface00000000ull + uint64_t(r_of(corr)));
    EXPECT_EQ(m.nccl.peer[k], corr % 1000000 % 2 ? -1 : (r_of(corr) + 1) % 4);
  }
  EXPECT_TRUE(std::is_sorted(m.nccl.activity.begin(), m.nccl.activity.end()));
}

TEST(MergeStores, DuplicateRank) {
  std::vector<Store> parts;
  parts.push_back(rank_store(0, 3));
  parts.push_back(rank_store(1, 3));
  parts.push_back(rank_store(1, 3));
  parts[1].ranks[0].source = "a/rank1.json";
  parts[2].ranks[0].source = "b/rank1.json";
  EXPECT_EQ(error_of([&] { merge_stores(std::move(parts)); }),
            "duplicate rank 1: a/rank1.json and b/rank1.json");
}

TEST(MergeStores, EmptyAndZeroActivityRank) {
  EXPECT_EQ(merge_stores({}).activities.size(), 0u);
  std::vector<Store> parts;
  parts.push_back(rank_store(2, 0));
  parts.push_back(rank_store(0, 4));
  Store m = merge_stores(std::move(parts));
  EXPECT_EQ(m.activities.size(), 4u);
  ASSERT_EQ(m.ranks.size(), 2u);
  EXPECT_EQ(m.ranks[1].rank, 2);
  EXPECT_EQ(m.annotations.size(), 2u);
}

TEST(MergeStores, BadStringIdIsAnError) {
  std::vector<Store> parts;
  parts.push_back(rank_store(0, 3));
  parts[0].activities.name_id[1] = 999;
  EXPECT_NE(error_of([&] { merge_stores(std::move(parts)); }).find("string id 999 out of range"),
            std::string::npos);
}

TEST(SortActivities, SortsStablyAndKeepsNccl) {
  Store s;
  Activities& a = s.activities;
  // rows: (rank, device, stream, start, end), correlation = original row
  struct Row {
    int32_t r, d, st;
    int64_t b, e;
  };
  std::vector<Row> rows = {{1, 0, 7, 50, 60}, {0, 1, 7, 10, 20}, {0, 0, 9, 5, 6},
                           {0, 0, 7, 30, 40}, {0, 0, 7, 30, 35}, {0, 0, 7, 30, 40},
                           {0, 0, 7, 10, 99}};
  for (size_t i = 0; i < rows.size(); ++i) {
    a.rank.push_back(rows[i].r);
    a.device.push_back(rows[i].d);
    a.stream.push_back(rows[i].st);
    a.kind.push_back(uint8_t(i));
    a.category.push_back(uint8_t(i % 4));
    a.start_ns.push_back(rows[i].b);
    a.end_ns.push_back(rows[i].e);
    a.name_id.push_back(uint32_t(i));
    a.correlation.push_back(int64_t(i));
    a.step.push_back(int32_t(i));
  }
  s.nccl.activity = {5, 0, 3};
  s.nccl.seq = {5, 0, 3};
  for (auto* v : {&s.nccl.collective_id, &s.nccl.pg_name_id, &s.nccl.pg_desc_id,
                  &s.nccl.pg_ranks_id, &s.nccl.dtype_id})
    *v = {0, 0, 0};
  s.nccl.group_size = {2, 2, 2};
  s.nccl.in_nelems = s.nccl.out_nelems = s.nccl.msg_bytes = {1, 1, 1};
  s.nccl.comm_hash = {50, 0, 30};  // = 10 * seq: must follow their rows
  s.nccl.peer = {5, -1, 3};

  sort_activities(s);
  // Expected order; rows 3 and 5 tie completely and keep their input order.
  EXPECT_EQ(a.correlation, (std::vector<int64_t>{6, 4, 3, 5, 2, 1, 0}));
  EXPECT_EQ(a.start_ns, (std::vector<int64_t>{10, 30, 30, 30, 5, 10, 50}));
  EXPECT_EQ(a.end_ns, (std::vector<int64_t>{99, 35, 40, 40, 6, 20, 60}));
  EXPECT_EQ(a.rank, (std::vector<int32_t>{0, 0, 0, 0, 0, 0, 1}));
  EXPECT_EQ(a.device, (std::vector<int32_t>{0, 0, 0, 0, 0, 1, 0}));
  EXPECT_EQ(a.stream, (std::vector<int32_t>{7, 7, 7, 7, 9, 7, 7}));
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a.kind[i], uint8_t(a.correlation[i]));
    EXPECT_EQ(a.name_id[i], uint32_t(a.correlation[i]));
    EXPECT_EQ(a.step[i], int32_t(a.correlation[i]));
    EXPECT_EQ(a.category[i], uint8_t(a.correlation[i] % 4));
  }
  ASSERT_EQ(s.nccl.size(), 3u);
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_EQ(a.correlation[s.nccl.activity[k]], s.nccl.seq[k]);
    EXPECT_EQ(s.nccl.comm_hash[k], uint64_t(10 * s.nccl.seq[k]));
    EXPECT_EQ(s.nccl.peer[k], s.nccl.seq[k] ? s.nccl.seq[k] : -1);
  }
  EXPECT_TRUE(std::is_sorted(s.nccl.activity.begin(), s.nccl.activity.end()));

  // Sorting again is a no-op.
  Store copy = s;
  sort_activities(s);
  EXPECT_EQ(s.activities.correlation, copy.activities.correlation);
  EXPECT_EQ(s.nccl.activity, copy.nccl.activity);
}

TEST(SortActivities, LargeRandomMatchesStableSort) {
  // Big enough for the multi-threaded path; few distinct keys, so many ties test stability.
  const size_t n = 300000;
  std::mt19937_64 rng(42);
  Store s;
  Activities& a = s.activities;
  for (size_t i = 0; i < n; ++i) {
    a.rank.push_back(int32_t(rng() % 4));
    a.device.push_back(int32_t(rng() % 2));
    a.stream.push_back(int32_t(rng() % 3) - 1);  // includes a negative stream id
    a.kind.push_back(0);
    a.category.push_back(0);
    a.start_ns.push_back(int64_t(rng() % 1000) - 500);
    a.end_ns.push_back(int64_t(rng() % 3));
    a.name_id.push_back(0);
    a.correlation.push_back(int64_t(i));
    a.step.push_back(kNoStep);
  }
  for (size_t i = 0; i < n; i += 1000) {
    s.nccl.activity.push_back(i);
    s.nccl.seq.push_back(int64_t(i));
  }
  const size_t nc = s.nccl.size();
  for (auto* v : {&s.nccl.collective_id, &s.nccl.pg_name_id, &s.nccl.pg_desc_id,
                  &s.nccl.pg_ranks_id, &s.nccl.dtype_id})
    v->assign(nc, 0);
  s.nccl.group_size.assign(nc, 1);
  s.nccl.in_nelems.assign(nc, 0);
  s.nccl.out_nelems.assign(nc, 0);
  s.nccl.msg_bytes.assign(nc, 0);

  std::vector<size_t> want(n);
  std::iota(want.begin(), want.end(), 0);
  std::stable_sort(want.begin(), want.end(), [&](size_t x, size_t y) {
    return std::tie(a.rank[x], a.device[x], a.stream[x], a.start_ns[x], a.end_ns[x]) <
           std::tie(a.rank[y], a.device[y], a.stream[y], a.start_ns[y], a.end_ns[y]);
  });
  Store orig = s;
  sort_activities(s);
  for (size_t i = 0; i < n; ++i) {
    ASSERT_EQ(size_t(a.correlation[i]), want[i]) << "row " << i;
    ASSERT_EQ(a.rank[i], orig.activities.rank[want[i]]);
    ASSERT_EQ(a.device[i], orig.activities.device[want[i]]);
    ASSERT_EQ(a.stream[i], orig.activities.stream[want[i]]);
    ASSERT_EQ(a.start_ns[i], orig.activities.start_ns[want[i]]);
    ASSERT_EQ(a.end_ns[i], orig.activities.end_ns[want[i]]);
  }
  for (size_t k = 0; k < nc; ++k) EXPECT_EQ(a.correlation[s.nccl.activity[k]], s.nccl.seq[k]);
}

// ---------------------------------------------------------------------------------------------

namespace {

void expect_same(const Store& x, const Store& y) {
  EXPECT_EQ(x.attrs.schema_version, y.attrs.schema_version);
  EXPECT_EQ(x.attrs.tool_version, y.attrs.tool_version);
  EXPECT_EQ(x.attrs.produced_by, y.attrs.produced_by);
  EXPECT_EQ(x.attrs.command_line, y.attrs.command_line);
  EXPECT_EQ(x.attrs.created_utc, y.attrs.created_utc);
  EXPECT_EQ(x.attrs.clock_domain, y.attrs.clock_domain);
  EXPECT_EQ(x.attrs.emulated, y.attrs.emulated);
  EXPECT_EQ(x.strings.all(), y.strings.all());

  EXPECT_EQ(x.activities.rank, y.activities.rank);
  EXPECT_EQ(x.activities.device, y.activities.device);
  EXPECT_EQ(x.activities.stream, y.activities.stream);
  EXPECT_EQ(x.activities.kind, y.activities.kind);
  EXPECT_EQ(x.activities.category, y.activities.category);
  EXPECT_EQ(x.activities.start_ns, y.activities.start_ns);
  EXPECT_EQ(x.activities.end_ns, y.activities.end_ns);
  EXPECT_EQ(x.activities.name_id, y.activities.name_id);
  EXPECT_EQ(x.activities.correlation, y.activities.correlation);
  EXPECT_EQ(x.activities.step, y.activities.step);

  EXPECT_EQ(x.launches.rank, y.launches.rank);
  EXPECT_EQ(x.launches.pid, y.launches.pid);
  EXPECT_EQ(x.launches.tid, y.launches.tid);
  EXPECT_EQ(x.launches.start_ns, y.launches.start_ns);
  EXPECT_EQ(x.launches.end_ns, y.launches.end_ns);
  EXPECT_EQ(x.launches.name_id, y.launches.name_id);
  EXPECT_EQ(x.launches.correlation, y.launches.correlation);
  EXPECT_EQ(x.launches.step, y.launches.step);

  EXPECT_EQ(x.annotations.rank, y.annotations.rank);
  EXPECT_EQ(x.annotations.kind, y.annotations.kind);
  EXPECT_EQ(x.annotations.pid, y.annotations.pid);
  EXPECT_EQ(x.annotations.tid, y.annotations.tid);
  EXPECT_EQ(x.annotations.start_ns, y.annotations.start_ns);
  EXPECT_EQ(x.annotations.end_ns, y.annotations.end_ns);
  EXPECT_EQ(x.annotations.name_id, y.annotations.name_id);
  EXPECT_EQ(x.annotations.step, y.annotations.step);

  EXPECT_EQ(x.nccl.activity, y.nccl.activity);
  EXPECT_EQ(x.nccl.collective_id, y.nccl.collective_id);
  EXPECT_EQ(x.nccl.seq, y.nccl.seq);
  EXPECT_EQ(x.nccl.pg_name_id, y.nccl.pg_name_id);
  EXPECT_EQ(x.nccl.pg_desc_id, y.nccl.pg_desc_id);
  EXPECT_EQ(x.nccl.pg_ranks_id, y.nccl.pg_ranks_id);
  EXPECT_EQ(x.nccl.group_size, y.nccl.group_size);
  EXPECT_EQ(x.nccl.in_nelems, y.nccl.in_nelems);
  EXPECT_EQ(x.nccl.out_nelems, y.nccl.out_nelems);
  EXPECT_EQ(x.nccl.msg_bytes, y.nccl.msg_bytes);
  EXPECT_EQ(x.nccl.dtype_id, y.nccl.dtype_id);
  EXPECT_EQ(x.nccl.comm_hash, y.nccl.comm_hash);
  EXPECT_EQ(x.nccl.peer, y.nccl.peer);

  ASSERT_EQ(x.ranks.size(), y.ranks.size());
  for (size_t i = 0; i < x.ranks.size(); ++i) {
    const RankInfo& a = x.ranks[i];
    const RankInfo& b = y.ranks[i];
    EXPECT_EQ(a.rank, b.rank);
    EXPECT_EQ(a.world_size, b.world_size);
    EXPECT_EQ(a.host, b.host);
    EXPECT_EQ(a.devices, b.devices);
    EXPECT_EQ(a.device_name, b.device_name);
    EXPECT_EQ(a.source, b.source);
    EXPECT_EQ(a.base_time_ns, b.base_time_ns);
    EXPECT_EQ(a.clock_offset_ns, b.clock_offset_ns);
    EXPECT_EQ(a.clock_drift, b.clock_drift);  // exact: stored as IEEE double
    EXPECT_EQ(a.clock_uncertainty_ns, b.clock_uncertainty_ns);
    EXPECT_EQ(a.clock_method, b.clock_method);
    EXPECT_EQ(a.emulated, b.emulated);
    EXPECT_EQ(a.events_total, b.events_total);
    EXPECT_EQ(a.events_malformed, b.events_malformed);
    EXPECT_EQ(a.events_ignored, b.events_ignored);
    EXPECT_EQ(a.records_dropped, b.records_dropped);
  }
}

Store sample_store() {
  std::vector<Store> parts;
  parts.push_back(rank_store(0, 50));
  // Rank 1 has no activities at all.
  parts.push_back(rank_store(1, 0));
  parts.push_back(rank_store(3, 20, "ü-kernel<float, 128>"));  // UTF-8 and punctuation
  Store s = merge_stores(std::move(parts));
  s.attrs.tool_version = "0.1.0-test";
  s.attrs.produced_by = "kernalyse-merge (kineto import)";
  s.attrs.command_line = "kernalyse-merge 'a b' -o run.h5";
  s.attrs.created_utc = "2024-04-04T12:00:00Z";
  s.attrs.clock_domain = "per-rank wall clock";
  s.ranks[1].host = "";  // empty strings round-trip too
  s.ranks[1].clock_method = "none (per-rank wall clock)";
  return s;
}

}  // namespace

TEST_F(StoreIo, RoundTripAllTables) {
  Store s = sample_store();
  ASSERT_GT(s.nccl.size(), 0u);
  const std::string p = path("run.h5");
  write_store(s, p);
  EXPECT_TRUE(is_hdf5_file(p));
  EXPECT_EQ(file_count(), 1u);  // no temp file left
  Store r = read_store(p);
  expect_same(s, r);
}

TEST_F(StoreIo, RoundTripEmptyStore) {
  Store s;  // all tables empty, no ranks
  const std::string p = path("empty.h5");
  write_store(s, p);
  Store r = read_store(p);
  EXPECT_EQ(r.activities.size(), 0u);
  EXPECT_EQ(r.ranks.size(), 0u);
  EXPECT_EQ(r.strings.size(), 1u);
  EXPECT_EQ(r.attrs.schema_version, kSchemaVersion);
  EXPECT_FALSE(r.attrs.tool_version.empty());  // filled in by the writer
  EXPECT_FALSE(r.attrs.created_utc.empty());
}

TEST_F(StoreIo, RoundTripEmptyTablesWithRanks) {
  std::vector<Store> parts;
  parts.push_back(rank_store(0, 0));
  parts.push_back(rank_store(1, 0));
  Store s = merge_stores(std::move(parts));
  s.launches = {};
  s.annotations = {};
  s.attrs.created_utc = "2024-01-01T00:00:00Z";
  const std::string p = path("ranks-only.h5");
  write_store(s, p);
  expect_same(s, read_store(p));
}

TEST_F(StoreIo, RefusesToOverwriteUnlessForced) {
  const std::string p = path("run.h5");
  write_store(rank_store(0, 3), p);
  EXPECT_EQ(error_of([&] { write_store(rank_store(0, 5), p); }),
            p + ": exists (use --force to replace it)");
  EXPECT_EQ(read_store(p).activities.size(), 3u);
  WriteOptions force;
  force.force = true;
  write_store(rank_store(0, 5), p, force);
  EXPECT_EQ(read_store(p).activities.size(), 5u);
  EXPECT_EQ(file_count(), 1u);
}

TEST_F(StoreIo, FailedWritesLeaveNothingBehind) {
  // Missing directory.
  std::string p = path("no/such/dir/run.h5");
  std::string err = error_of([&] { write_store(rank_store(0, 3), p); });
  EXPECT_EQ(err, "cannot create " + p + ": No such file or directory");
  // Parent is a regular file.
  std::ofstream(path("file")) << "x";
  p = path("file/run.h5");
  err = error_of([&] { write_store(rank_store(0, 3), p); });
  EXPECT_EQ(err, "cannot create " + p + ": Not a directory");
  EXPECT_EQ(file_count(), 1u);

  // A failure after the temp file exists (inconsistent columns): temp removed, old file intact.
  p = path("run.h5");
  write_store(rank_store(0, 3), p);
  Store bad = rank_store(0, 4);
  bad.launches.tid.pop_back();
  WriteOptions force;
  force.force = true;
  err = error_of([&] { write_store(bad, p, force); });
  EXPECT_EQ(err, p + ": column /launches/tid has 3 rows, expected 4");
  EXPECT_EQ(file_count(), 2u);  // "file" and run.h5 only
  EXPECT_EQ(read_store(p).activities.size(), 3u);

  // A directory in the way.
  fs::create_directory(path("adir"));
  EXPECT_EQ(error_of([&] { write_store(bad, path("adir"), force); }),
            path("adir") + ": is a directory");
}

TEST_F(StoreIo, ReadErrors) {
  EXPECT_EQ(error_of([&] { read_store(path("missing.h5")); }),
            path("missing.h5") + ": no such file");
  std::ofstream(path("trace.json")) << "{\"traceEvents\": []}";
  EXPECT_FALSE(is_hdf5_file(path("trace.json")));
  EXPECT_FALSE(is_hdf5_file(path("missing.h5")));
  EXPECT_EQ(error_of([&] { read_store(path("trace.json")); }),
            path("trace.json") + ": not an HDF5 file");
  std::ofstream(path("empty")).flush();
  EXPECT_EQ(error_of([&] { read_store(path("empty")); }), path("empty") + ": not an HDF5 file");

  // An HDF5 file without schema_version: rename the attribute in the bytes of a real store
  // (attribute names are stored verbatim; v0 superblocks and v1 object headers carry no checksum).
  const std::string p = path("run.h5");
  write_store(rank_store(0, 3), p);
  std::string bytes = slurp(p);
  size_t at = bytes.find("schema_version");
  ASSERT_NE(at, std::string::npos);
  ASSERT_EQ(bytes.find("schema_version", at + 1), std::string::npos);
  bytes[at + 13] = 'X';
  const std::string other = path("other.h5");
  std::ofstream(other, std::ios::binary) << bytes;
  EXPECT_TRUE(is_hdf5_file(other));
  EXPECT_EQ(error_of([&] { read_store(other); }),
            other + ": not a kernalyse store (no schema_version)");

  // A truncated store is an error, not a crash.
  std::ofstream(path("cut.h5"), std::ios::binary) << slurp(p).substr(0, 600);
  std::string err = error_of([&] { read_store(path("cut.h5")); });
  EXPECT_EQ(err.rfind(path("cut.h5") + ": ", 0), 0u) << err;
  EXPECT_EQ(err.find('\n'), std::string::npos) << err;
}

TEST_F(StoreIo, NewerSchemaAndForeignHdf5ViaH5py) {
  if (!have_h5py()) GTEST_SKIP() << "/usr/bin/python3 with h5py not available";
  const std::string p = path("run.h5");
  write_store(rank_store(0, 3), p);
  const std::string script =
      "import h5py, numpy as np, sys\n"
      "with h5py.File(sys.argv[1], 'r+') as f: f.attrs.modify('schema_version', np.int32(7))\n"
      "h5py.File(sys.argv[2], 'w').create_dataset('x', data=[1, 2])\n";
  const std::string cmd =
      "/usr/bin/python3 -c \"" + script + "\" '" + p + "' '" + path("plain.h5") + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  EXPECT_EQ(error_of([&] { read_store(p); }), p + ": schema version 7 is newer than this tool (3)");
  EXPECT_EQ(error_of([&] { read_store(path("plain.h5")); }),
            path("plain.h5") + ": not a kernalyse store (no schema_version)");
}

TEST_F(StoreIo, NcclCommHashAndPeerRoundTrip) {
  Store s = sample_store();
  ASSERT_GT(s.nccl.size(), 0u);
  s.nccl.comm_hash.back() = ~uint64_t{0};  // full 64-bit range
  s.nccl.peer.back() = 2;
  const std::string p = path("run.h5");
  write_store(s, p);
  Store r = read_store(p);
  EXPECT_EQ(r.nccl.comm_hash, s.nccl.comm_hash);
  EXPECT_EQ(r.nccl.peer, s.nccl.peer);
  EXPECT_EQ(r.nccl.comm_hash.back(), ~uint64_t{0});
}

TEST_F(StoreIo, NcclWithoutCommHashAndPeer) {
  // A producer that predates the columns leaves them empty: written (and merged) as 0 / -1.
  Store s = sample_store();
  const size_t n = s.nccl.size();
  s.nccl.comm_hash.clear();
  s.nccl.peer.clear();
  write_store(s, path("run.h5"));
  Store r = read_store(path("run.h5"));
  EXPECT_EQ(r.nccl.comm_hash, std::vector<uint64_t>(n, 0));
  EXPECT_EQ(r.nccl.peer, std::vector<int32_t>(n, -1));
  std::vector<Store> parts;
  parts.push_back(std::move(s));
  Store m = merge_stores(std::move(parts));
  EXPECT_EQ(m.nccl.comm_hash, std::vector<uint64_t>(n, 0));
  EXPECT_EQ(m.nccl.peer, std::vector<int32_t>(n, -1));
}

TEST_F(StoreIo, ReadsStoresWrittenBeforeCommHashAndPeer) {
  if (!have_h5py()) GTEST_SKIP() << "/usr/bin/python3 with h5py not available";
  Store s = sample_store();
  const std::string p = path("run.h5");
  write_store(s, p);
  const std::string cmd =
      "/usr/bin/python3 -c \"import h5py, sys\n"
      "with h5py.File(sys.argv[1], 'r+') as f:\n"
      "    del f['nccl/comm_hash']; del f['nccl/peer']\n\" '" +
      p + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  Store r = read_store(p);
  EXPECT_EQ(r.nccl.activity, s.nccl.activity);
  EXPECT_EQ(r.nccl.comm_hash, std::vector<uint64_t>(s.nccl.size(), 0));
  EXPECT_EQ(r.nccl.peer, std::vector<int32_t>(s.nccl.size(), -1));
}

TEST_F(StoreIo, ColumnSelection) {
  Store s = sample_store();
  const std::string p = path("run.h5");
  write_store(s, p);

  ColumnSelection sel;
  sel.activity_correlation = false;
  sel.activity_step = false;
  sel.launches = false;
  sel.nccl = false;
  Store r = read_store(p, sel);
  EXPECT_EQ(r.activities.start_ns, s.activities.start_ns);
  EXPECT_EQ(r.activities.name_id, s.activities.name_id);
  EXPECT_TRUE(r.activities.correlation.empty());
  EXPECT_TRUE(r.activities.step.empty());
  EXPECT_EQ(r.launches.size(), 0u);
  EXPECT_TRUE(r.launches.rank.empty());
  EXPECT_EQ(r.nccl.size(), 0u);
  EXPECT_EQ(r.annotations.start_ns, s.annotations.start_ns);
  EXPECT_EQ(r.ranks.size(), s.ranks.size());
  EXPECT_EQ(r.strings.all(), s.strings.all());

  ColumnSelection only_nccl;
  only_nccl.activities = false;
  only_nccl.launches = false;
  only_nccl.annotations = false;
  r = read_store(p, only_nccl);
  EXPECT_EQ(r.activities.size(), 0u);
  EXPECT_TRUE(r.activities.rank.empty());
  EXPECT_EQ(r.annotations.size(), 0u);
  EXPECT_EQ(r.nccl.activity, s.nccl.activity);

  // A store read without some columns can still be merged/sorted and written back.
  sel.launches = true;
  r = read_store(p, sel);
  std::vector<Store> parts;
  parts.push_back(std::move(r));
  Store m = merge_stores(std::move(parts));
  EXPECT_EQ(m.activities.correlation.size(), s.activities.size());
}

// One UTC formatter (kernalyse/utc.h): milliseconds floor, also before 1970.
TEST(Utc, MillisecondsFloorOnBothSidesOfTheEpoch) {
  EXPECT_EQ(kernalyse::utc_ms(1'795'478'101'123'999'999), "2026-11-23T23:55:01.123Z");
  EXPECT_EQ(kernalyse::utc_ms(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(kernalyse::utc_ms(-1), "1969-12-31T23:59:59.999Z");
  EXPECT_EQ(kernalyse::utc_ms(-1'000'000'000), "1969-12-31T23:59:59.000Z");
  EXPECT_EQ(kernalyse::utc_now().size(), 20u);
}

namespace {

// The rows of `rank` in `whole`, every column, equal `slice`'s (a table with a rank column).
template <class Tab>
void expect_rank_rows(const Tab& whole, const Tab& slice, int32_t rank, const char* table) {
  std::vector<size_t> rows;
  for (size_t i = 0; i < whole.size(); ++i)
    if (whole.rank[i] == rank) rows.push_back(i);
  for_each_column_pair(whole, slice, [&](const auto& def, const auto& w, const auto& x) {
    ASSERT_EQ(x.size(), rows.size()) << table << "/" << def.name << " rank " << rank;
    for (size_t k = 0; k < rows.size(); ++k)
      EXPECT_EQ(x[k], w[rows[k]]) << table << "/" << def.name << " row " << k;
  });
}

}  // namespace

// RankSlices (--diff reads a store a rank at a time): each slice holds exactly one rank's rows of
// every table in table order, its /nccl rows pointing into the slice; in rank order; the header
// has every /ranks row and no table rows.
TEST_F(StoreIo, RankSlicesHoldEachRanksRows) {
  Store s = sample_store();
  s.ops.rank = {0, 0, 3};  // a few ops too (sorted by rank like every writer's)
  s.ops.pid = s.ops.tid = {1, 1, 1};
  s.ops.start_ns = {1, 2, 3}, s.ops.end_ns = {4, 5, 6};
  s.ops.name_id = {1, 2, 1};
  s.ops.external_id = s.ops.correlation = {7, 8, 9};
  s.ops.dims_id = s.ops.types_id = s.ops.concrete_id = {0, 0, 0};
  const std::string p = path("run.h5");
  write_store(s, p);
  const Store whole = read_store(p);
  RankSlices slices(p, ColumnSelection::all());
  EXPECT_EQ(slices.header().ranks.size(), 3u);
  EXPECT_EQ(slices.header().strings.all(), whole.strings.all());
  EXPECT_EQ(slices.header().activities.size() + slices.header().launches.size(), 0u);
  std::vector<int32_t> seen;
  size_t nccl = 0;
  slices.for_each([&](const Store& x) {
    ASSERT_EQ(x.ranks.size(), 1u);
    const int32_t r = x.ranks[0].rank;
    seen.push_back(r);
    EXPECT_EQ(x.strings.all(), whole.strings.all());
    expect_rank_rows(whole.activities, x.activities, r, "activities");
    expect_rank_rows(whole.launches, x.launches, r, "launches");
    expect_rank_rows(whole.annotations, x.annotations, r, "annotations");
    expect_rank_rows(whole.counters, x.counters, r, "counters");
    expect_rank_rows(whole.ops, x.ops, r, "ops");
    // /nccl: the whole store's rows of this rank's activities, in order, re-pointed.
    size_t first = 0;
    while (first < whole.activities.size() && whole.activities.rank[first] != r) ++first;
    std::vector<size_t> want;
    for (size_t i = 0; i < whole.nccl.size(); ++i)
      if (whole.activities.rank[whole.nccl.activity[i]] == r) want.push_back(i);
    ASSERT_EQ(x.nccl.size(), want.size());
    for (size_t k = 0; k < want.size(); ++k) {
      EXPECT_EQ(x.nccl.activity[k] + first, whole.nccl.activity[want[k]]);
      EXPECT_EQ(x.nccl.seq[k], whole.nccl.seq[want[k]]);
      EXPECT_EQ(x.nccl.comm_hash[k], whole.nccl.comm_hash[want[k]]);
    }
    nccl += x.nccl.size();
  });
  EXPECT_EQ(seen, (std::vector<int32_t>{0, 1, 3}));  // rank 1: a step annotation only
  ASSERT_EQ(slices.size(), 3u);                      // each slice's rank, without reading it
  EXPECT_EQ(std::vector<int32_t>({slices.rank(0), slices.rank(1), slices.rank(2)}), seen);
  EXPECT_EQ(nccl, whole.nccl.size());
  EXPECT_GT(nccl, 0u);
  // A slice read on its own is the same as the one for_each handed over.
  Store one = slices.read(2);
  expect_rank_rows(whole.activities, one.activities, 3, "activities");
}

// narrow(): the second pass's fewer columns from the same slices, the rank columns not scanned
// again. The slices stay those of the constructor's tables: rank 1 has a step annotation only, and
// a new reader without /annotations would have two slices, so that slice k named another rank
// (under mpirun, each process's [first, last) of the first reader's slices).
TEST_F(StoreIo, RankSlicesNarrowKeepsTheSlicesAndReadsFewerColumns) {
  const Store s = sample_store();
  const std::string p = path("run.h5");
  write_store(s, p);
  const Store whole = read_store(p);
  RankSlices slices(p, ColumnSelection::all());
  ColumnSelection less = ColumnSelection::all();
  less.annotations = less.counters = less.ops = less.nccl = false;
  less.activity_step = less.launch_detail = false;
  slices.narrow(less);
  ASSERT_EQ(slices.size(), 3u);
  std::vector<int32_t> seen;
  for (size_t k = 0; k < slices.size(); ++k) {
    const Store x = slices.read(k);
    ASSERT_EQ(x.ranks.size(), 1u);
    const int32_t r = x.ranks[0].rank;
    seen.push_back(r);
    std::vector<int64_t> start, launch_start;
    for (size_t i = 0; i < whole.activities.size(); ++i)
      if (whole.activities.rank[i] == r) start.push_back(whole.activities.start_ns[i]);
    for (size_t i = 0; i < whole.launches.size(); ++i)
      if (whole.launches.rank[i] == r) launch_start.push_back(whole.launches.start_ns[i]);
    EXPECT_EQ(x.activities.start_ns, start) << "rank " << r;
    EXPECT_EQ(x.launches.start_ns, launch_start) << "rank " << r;
    EXPECT_TRUE(x.activities.step.empty());  // not wanted any more
    EXPECT_TRUE(x.launches.tid.empty());     // launch detail: not wanted
    EXPECT_EQ(x.annotations.size(), 0u);     // the table is not read
    EXPECT_EQ(x.nccl.size(), 0u);
  }
  EXPECT_EQ(seen, (std::vector<int32_t>{0, 1, 3}));
  RankSlices fresh(p, less);  // what pass 2 did before: rank 1 is not a slice of it
  EXPECT_EQ(fresh.size(), 2u);
}

// A store whose rows are not grouped by rank (another writer's) is refused with one line; the
// caller then reads it whole, which still works.
TEST_F(StoreIo, RankSlicesRefuseRowsNotGroupedByRank) {
  Store s = sample_store();
  ASSERT_GT(s.launches.size(), 2u);
  for_each_column(s.launches, [](const auto&, auto& col) {
    std::rotate(col.begin(), col.end() - 1, col.end());  // rank 3's last launch goes first
  });
  const std::string p = path("run.h5");
  write_store(s, p);
  EXPECT_EQ(error_of([&] { RankSlices x(p, ColumnSelection::all()); }),
            p + ": /launches is not grouped by rank (row 1)");
  EXPECT_EQ(read_store(p).launches.size(), s.launches.size());
}
