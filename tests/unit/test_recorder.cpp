// The collector's record path without MPI: source records (the emu.h form every source uses)
// → Recorder → spool file → spool_to_store → store file and back. Schema-2 fields: NCCL
// algo/proto/channels/comm rank, the GPU memory counter, loss counts and the status line.
#include <gtest/gtest.h>

#include <filesystem>

#include "../../collector/src/recorder.h"
#include "kernalyse/spool.h"
#include "kernalyse/spool_store.h"
#include "kernalyse/store_io.h"

using namespace kernalyse;
namespace fs = std::filesystem;

namespace {

struct RecorderTest : ::testing::Test {
  fs::path dir;
  void SetUp() override {
    dir = fs::temp_directory_path() /
          ("kl_recorder_" + std::to_string(::getpid()) + "_" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir);
  }
  void TearDown() override { fs::remove_all(dir); }

  // Flushes `r` into a spool (twice, to cross a flush boundary) and converts it.
  Store convert(collector::Recorder& r, spool::Writer& w) {
    EXPECT_TRUE(w.is_open());
    EXPECT_TRUE(r.flush(w));
    w.close();
    spool::Contents c = spool::read((dir / "rank-0.kspool").string());
    EXPECT_FALSE(c.truncated) << c.problem;
    SpoolMeta m;
    m.rank = 3;
    m.world_size = 4;
    m.anchor_ns = 1'000'000'000;
    ClockModel clock;  // identity
    return spool_to_store(c, m, clock);
  }
};

kernalyse_emu_nccl nccl_rec(int64_t corr, const char* coll, int64_t seq, int32_t peer) {
  kernalyse_emu_nccl n{};
  n.correlation = corr;
  n.comm_hash = 0xabcdef0123456789ull;
  n.collective = coll;
  n.seq = seq;
  n.count = 4096;
  n.dtype = "ncclBfloat16";
  n.bytes = 8192;
  n.nranks = 4;
  n.peer = peer;
  n.algo = peer < 0 ? "RING" : nullptr;
  n.proto = "LL";
  n.n_channels = 2;
  n.comm_rank = 1;
  return n;
}

}  // namespace

TEST_F(RecorderTest, EveryRecordTypeReachesTheStore) {
  collector::Recorder r;
  spool::Writer w;
  ASSERT_TRUE(w.open((dir / "rank-0.kspool").string()));
  r.activity(
      {KERNALYSE_EMU_KERNEL, 0, 7, 1000, 2000, 11, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"},
      false);
  r.activity({KERNALYSE_EMU_KERNEL, 0, 13, 1500, 1800, 12, "gemm"}, false);
  r.activity({KERNALYSE_EMU_MEMCPY, 0, 13, 2100, 2200, 13, "Memcpy HtoD (Pageable -> Device)"},
             false);
  r.launch({900, 950, 11, 77, "cuLaunchKernelEx"});
  r.nccl(nccl_rec(11, "AllReduce", 5, -1));
  r.nccl(nccl_rec(99, "AllReduce", 6, -1));  // its kernel was never seen: unlinked
  ASSERT_TRUE(r.flush(w));                   // a flush boundary in the middle
  r.nccl(nccl_rec(12, "Send", -1, 2));
  r.range({800, 2500, 77, "layer 3"});
  // Memory: +100 and +50 on device 0, −100 later; +7 on device 1.
  r.memory({1000, 0, -1, 100, 0x1000});
  r.memory({1200, 0, 13, 50, 0x2000});
  r.memory({1200, 1, -1, 7, 0x3000});
  r.memory({1900, 0, -1, -100, 0x1000});
  r.counter({1100, 0, kCounterPower, 350000}, false);  // an NVML power sample, mW
  r.losses({3, 2, 1});
  r.status("cupti: 1 CUDA device", "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(r.pending(), 7);  // since the flush
  Store s = convert(r, w);

  ASSERT_EQ(s.ranks.size(), 1u);
  const RankInfo& ri = s.ranks[0];
  EXPECT_EQ(ri.rank, 3);
  EXPECT_FALSE(ri.emulated);
  EXPECT_EQ(ri.collector_status, "cupti: 1 CUDA device");
  EXPECT_EQ(ri.device_name, "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(ri.records_dropped_cupti, 3);
  EXPECT_EQ(ri.records_dropped, 2);
  EXPECT_EQ(ri.events_malformed, 1);
  EXPECT_EQ(ri.events_ignored, 1);  // the unlinked NCCL record

  ASSERT_EQ(s.activities.size(), 3u);
  ASSERT_EQ(s.nccl.size(), 2u);
  for (size_t k = 0; k < s.nccl.size(); ++k) {
    const uint64_t a = s.nccl.activity[k];
    const bool send = s.strings.at(s.nccl.collective_id[k]) == "Send";
    EXPECT_EQ(s.activities.correlation[a], send ? 12 : 11);
    EXPECT_EQ(s.nccl.comm_hash[k], 0xabcdef0123456789ull);
    EXPECT_EQ(s.nccl.seq[k], send ? -1 : 5);
    EXPECT_EQ(s.nccl.peer[k], send ? 2 : -1);
    EXPECT_EQ(s.nccl.comm_rank[k], 1);
    EXPECT_EQ(s.nccl.n_channels[k], 2);
    EXPECT_EQ(s.strings.at(s.nccl.algo_id[k]), send ? "" : "RING");
    EXPECT_EQ(s.strings.at(s.nccl.proto_id[k]), "LL");
    EXPECT_EQ(s.strings.at(s.nccl.dtype_id[k]), "ncclBfloat16");
    EXPECT_EQ(s.nccl.msg_bytes[k], 8192);
    EXPECT_EQ(s.nccl.group_size[k], 4);
  }
  ASSERT_EQ(s.annotations.size(), 1u);
  EXPECT_EQ(s.strings.at(s.annotations.name_id[0]), "layer 3");
  EXPECT_EQ(s.annotations.start_ns[0], 1'000'000'800);

  // Memory in use per device as a step function, in run time.
  const Counters& k = s.counters;
  ASSERT_EQ(k.size(), 5u);
  std::vector<std::tuple<int32_t, int64_t, int64_t>> got, power;
  for (size_t i = 0; i < k.size(); ++i) {
    EXPECT_EQ(k.rank[i], 3);
    const std::string& name = s.strings.at(k.name_id[i]);
    (name == kCounterPower ? power : got)
        .emplace_back(k.device[i], k.ts_ns[i] - 1'000'000'000, k.value[i]);
    if (i) {  // sorted by (rank, device, name text, ts)
      EXPECT_LE(std::make_tuple(k.device[i - 1], s.strings.at(k.name_id[i - 1]), k.ts_ns[i - 1]),
                std::make_tuple(k.device[i], s.strings.at(k.name_id[i]), k.ts_ns[i]));
    }
  }
  EXPECT_EQ(got, (std::vector<std::tuple<int32_t, int64_t, int64_t>>{
                     {0, 1000, 100}, {0, 1200, 150}, {0, 1900, 50}, {1, 1200, 7}}));
  EXPECT_EQ(power, (std::vector<std::tuple<int32_t, int64_t, int64_t>>{{0, 1100, 350000}}));

  // And through the HDF5 store.
  const std::string h5 = (dir / "run.h5").string();
  write_store(s, h5);
  Store b = read_store(h5);
  EXPECT_EQ(b.counters.value, k.value);
  EXPECT_EQ(b.counters.ts_ns, k.ts_ns);
  EXPECT_EQ(b.counters.device, k.device);
  EXPECT_EQ(b.nccl.algo_id.size(), 2u);
  EXPECT_EQ(b.nccl.n_channels, s.nccl.n_channels);
  EXPECT_EQ(b.nccl.comm_rank, s.nccl.comm_rank);
  EXPECT_EQ(b.ranks[0].collector_status, "cupti: 1 CUDA device");
  EXPECT_EQ(b.ranks[0].records_dropped_cupti, 3);
}

TEST_F(RecorderTest, EmulatedActivityLabelsTheRank) {
  collector::Recorder r;
  spool::Writer w;
  ASSERT_TRUE(w.open((dir / "rank-0.kspool").string()));
  r.activity({KERNALYSE_EMU_KERNEL, 0, 7, 1000, 2000, 1, "gemm"}, true);
  EXPECT_TRUE(r.emulated());
  spool::Contents c;
  ASSERT_TRUE(r.flush(w));
  w.close();
  c = spool::read((dir / "rank-0.kspool").string());
  SpoolMeta m;
  m.emulated = r.emulated();
  Store s = spool_to_store(c, m, ClockModel{});
  EXPECT_TRUE(s.ranks[0].emulated);
  EXPECT_EQ(s.ranks[0].collector_status, "emulated device (no GPU)");
}

TEST_F(RecorderTest, StoresWithoutSchema2PartsMerge) {
  // A part whose producer predates the schema-2 NCCL columns merges with one that has them.
  collector::Recorder r;
  spool::Writer w;
  ASSERT_TRUE(w.open((dir / "rank-0.kspool").string()));
  r.activity({KERNALYSE_EMU_KERNEL, 0, 7, 1000, 2000, 11, "ncclKernel"}, false);
  r.nccl(nccl_rec(11, "AllReduce", 0, -1));
  Store a = convert(r, w);
  Store old;
  old.activities.rank = {0};
  old.activities.device = {0};
  old.activities.stream = {7};
  old.activities.start_ns = {5};
  old.activities.end_ns = {6};
  old.activities.name_id = {old.strings.intern("ncclKernel")};
  old.nccl.activity = {0};
  old.nccl.collective_id = {old.strings.intern("allreduce")};
  old.nccl.seq = {0};
  old.nccl.pg_name_id = {0};
  old.nccl.pg_desc_id = {0};
  old.nccl.pg_ranks_id = {0};
  old.nccl.group_size = {2};
  old.nccl.in_nelems = {1};
  old.nccl.out_nelems = {1};
  old.nccl.msg_bytes = {2};
  old.nccl.dtype_id = {0};
  RankInfo ri;
  ri.rank = 0;
  old.ranks = {ri};
  std::vector<Store> parts;
  parts.push_back(std::move(old));
  parts.push_back(std::move(a));
  Store m = merge_stores(std::move(parts));
  ASSERT_EQ(m.nccl.size(), 2u);
  EXPECT_EQ(m.nccl.n_channels, (std::vector<int32_t>{-1, 2}));
  EXPECT_EQ(m.nccl.comm_rank, (std::vector<int32_t>{-1, 1}));
  EXPECT_EQ(m.strings.at(m.nccl.algo_id[0]), "");
  EXPECT_EQ(m.strings.at(m.nccl.algo_id[1]), "RING");
  EXPECT_EQ(m.counters.size(), 0u);
}
