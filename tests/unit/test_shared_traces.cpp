// Every real trace in ../shared/traces imports, with the kernel and NCCL-kernel counts that
// ../shared/traces/README.md states. Skips (visibly) when the folder is absent.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>

#include "kernalyse/analysis.h"
#include "kernalyse/kineto.h"
#include "kernalyse/store_io.h"

using namespace kernalyse;

namespace {

struct Expect {
  const char* path;
  int rank;  // expected rank (-1: the file has none, imported with --rank 0)
  size_t kernels;
  size_t comm_kernels;
};

// Counts from ../shared/traces/README.md (cross-checked with a JSON reader).
const Expect kFiles[] = {
    {"hta/trace_filter/sampled_rank-0.json.gz", 0, 1154, 10},
    {"hta/trace_filter/sampled_rank-1.json.gz", 1, 1104, 10},
    {"hta/nccl_parser_config/nccl_data.json.gz", 0, 2700, 21},
    {"hta/df_index_resolver/df_index_resolver.json.gz", 1, 19370, 2020},
    {"hta/trace_diff/control/control.json.gz", 3, 8568, 60},
    {"hta/trace_diff/test/test.json.gz", 1, 9876, 64},
    {"hta/negative_queue_length_values_check/rank0.json.gz", 0, 6080, 80},
    {"hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz", 0, 4350, 0},
    {"hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz", -1, 14, 0},
    // 1 NCCL kernel and 73 PyTorch symmetric-memory multimem_all_reduce_kernel (communication).
    {"tracelens/b200/eager_trace.json.gz", 0, 768, 74},
    {"tracelens/mi300/resnet_act_checkpoint.json.gz", 0, 2995, 17},
};

std::string traces_dir() { return KERNALYSE_SHARED_TRACES; }

// Readable ctest names instead of a byte dump of the parameter.
void PrintTo(const Expect& e, std::ostream* os) { *os << e.path; }

}  // namespace

class SharedTrace : public ::testing::TestWithParam<Expect> {};

TEST_P(SharedTrace, ImportsWithReadmeCounts) {
  if (!std::filesystem::is_directory(traces_dir()))
    GTEST_SKIP() << traces_dir() << " absent: shared traces not available";
  const Expect& e = GetParam();
  ImportOptions opt;
  if (e.rank < 0) opt.rank = 0;
  ImportStats st;
  Store s = import_kineto_file(traces_dir() + "/" + e.path, opt, &st);
  size_t kernels = 0, comm = 0;
  for (size_t i = 0; i < s.activities.size(); ++i) {
    if (s.activities.kind[i] != static_cast<uint8_t>(Kind::Kernel)) continue;
    ++kernels;
    comm += s.activities.category[i] == static_cast<uint8_t>(Category::Communication);
  }
  EXPECT_EQ(kernels, e.kernels);
  EXPECT_EQ(comm, e.comm_kernels);
  EXPECT_EQ(s.ranks.at(0).rank, e.rank < 0 ? 0 : e.rank);
  EXPECT_EQ(st.malformed, 0);
  // Every activity has a non-negative duration and sits on a real stream.
  for (size_t i = 0; i < s.activities.size(); ++i) {
    ASSERT_GE(s.activities.end_ns[i], s.activities.start_ns[i]);
    ASSERT_GE(s.activities.stream[i], 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Readme, SharedTrace, ::testing::ValuesIn(kFiles), [](const auto& info) {
  std::string n = info.param.path;
  n = n.substr(0, n.find('.'));
  for (auto& c : n)
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  return n;
});

TEST(SharedTraces, AmdTraceWithoutRankNeedsRank) {
  if (!std::filesystem::is_directory(traces_dir()))
    GTEST_SKIP() << traces_dir() << " absent: shared traces not available";
  EXPECT_THROW(
      import_kineto_file(traces_dir() + "/hta/amd_trace/mi250_minitoy_train_ROCm6_2_kineto.json.gz",
                         {}, nullptr),
      Error);
}

TEST(SharedTraces, TraceFilterPairMergesIntoRanks0And1) {
  if (!std::filesystem::is_directory(traces_dir()))
    GTEST_SKIP() << traces_dir() << " absent: shared traces not available";
  std::vector<Store> parts;
  for (const char* f :
       {"hta/trace_filter/sampled_rank-1.json.gz", "hta/trace_filter/sampled_rank-0.json.gz"})
    parts.push_back(import_kineto_file(traces_dir() + "/" + f, {}, nullptr));
  Store m = merge_stores(std::move(parts));
  ASSERT_EQ(m.ranks.size(), 2u);
  EXPECT_EQ(m.ranks[0].rank, 0);
  EXPECT_EQ(m.ranks[1].rank, 1);
  size_t r0 = 0, r1 = 0;
  for (size_t i = 0; i < m.activities.size(); ++i) {
    if (m.activities.kind[i] != static_cast<uint8_t>(Kind::Kernel)) continue;
    (m.activities.rank[i] == 0 ? r0 : r1)++;
  }
  EXPECT_EQ(r0, 1154u);
  EXPECT_EQ(r1, 1104u);
}

// --ranges on a real trace: PyTorch's record_function scopes ("## forward ##", "nccl:all_to_all")
// get the kernels launched inside them. Every "nccl:*" scope launches exactly one NCCL kernel.
TEST(SharedTraces, TraceFilterRangesJoinKernelsToTheirScopes) {
  if (!std::filesystem::is_directory(traces_dir()))
    GTEST_SKIP() << traces_dir() << " absent: shared traces not available";
  std::vector<Store> parts;
  for (const char* f :
       {"hta/trace_filter/sampled_rank-0.json.gz", "hta/trace_filter/sampled_rank-1.json.gz"})
    parts.push_back(import_kineto_file(traces_dir() + "/" + f, {}, nullptr));
  Store m = merge_stores(std::move(parts));
  Report r;
  RangeOptions o;
  o.top = 0;
  range_analysis(m, o, &r);
  const Table& t = r.tables.back();
  ASSERT_EQ(t.key, "ranges");
  EXPECT_EQ(t.rows.size(), 33u);
  int64_t calls = 0;
  for (const auto& row : t.rows) {
    calls += std::get<int64_t>(row[1]);
    const std::string& name = std::get<std::string>(row[0]);
    if (name.rfind("nccl:", 0) == 0) {
      EXPECT_EQ(std::get<int64_t>(row[3]), std::get<int64_t>(row[1])) << name;
    }
  }
  EXPECT_EQ(calls, 134);
  EXPECT_NEAR(r.json["ranges_coverage_pct"].get<double>(), 76.4, 0.05);
}

TEST(SharedTraceCounters, ProfileMemoryEventsOfDfIndexResolver) {
  // The one shared trace recorded with profile_memory=True: 28010 "[memory]" instants, 26770 of
  // them on CUDA device 1 (the rest CPU, Device Id -1). Expected values from a JSON reader.
  const std::string path = traces_dir() + "/hta/df_index_resolver/df_index_resolver.json.gz";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " absent";
  Store s = import_kineto_file(path, {}, nullptr);
  const Counters& c = s.counters;
  ASSERT_EQ(c.size(), 26770u);
  for (size_t i = 0; i < c.size(); ++i) {
    ASSERT_EQ(c.rank[i], 1);
    ASSERT_EQ(c.device[i], 1);
    ASSERT_EQ(s.strings.at(c.name_id[i]), kCounterGpuMemory);
    if (i) {
      ASSERT_LE(c.ts_ns[i - 1], c.ts_ns[i]);
    }
  }
  EXPECT_EQ(c.ts_ns.front(), 1669783687404093000);
  EXPECT_EQ(c.value.front(), 4121780224);
  EXPECT_EQ(c.ts_ns.back(), 1669783689122558000);
  EXPECT_EQ(c.value.back(), 4096614400);
  EXPECT_EQ(*std::max_element(c.value.begin(), c.value.end()), 6629508096);
}
