// Spool → store without MPI (aggregator/spool/src/spool_store.cpp): the Meta block round-trips, the
// conversion applies the clock and the anchor, and the offline recovery of a spool directory
// keeps every complete block, names the truncated and the missing ranks.
#include <gtest/gtest.h>

#include <filesystem>

#include "kernalyse/spool.h"
#include "kernalyse/spool_store.h"
#include "kernalyse/store_io.h"

using namespace kernalyse;
namespace fs = std::filesystem;

namespace {

spool::Meta meta_for(int rank, int size, bool with_end) {
  spool::Meta m;
  m.fixed.rank = rank;
  m.fixed.world_size = size;
  m.fixed.pid = 4242;
  m.fixed.start_local_ns = 1'000;
  m.fixed.start_offset_ns = rank == 0 ? 0 : 500;  // rank 0's clock reads local + 500
  m.fixed.start_rtt_ns = rank == 0 ? 0 : 40;
  m.fixed.has_start = 1;
  m.fixed.end_local_ns = 1'001'000;
  m.fixed.end_offset_ns = rank == 0 ? 0 : 1'500;  // drift 1e-3
  m.fixed.end_rtt_ns = rank == 0 ? 0 : 60;
  m.fixed.has_end = with_end ? 1 : 0;
  m.fixed.anchor_ns = 1'700'000'000'000'000'000;
  m.fixed.emulated = 1;
  m.host = "node7";
  m.command = "app --x";
  return m;
}

// Strings, then `blocks` activity blocks of 10 kernels, a step range, and the Meta block.
void write_rank(const std::string& path, int rank, int size, int blocks, bool with_end) {
  spool::Writer w;
  ASSERT_TRUE(w.open(path));
  std::string names = std::string("") + '\0' + "gemm" + '\0' + "ProfilerStep#3" + '\0';
  ASSERT_TRUE(w.write_block(spool::BlockType::Strings, 3, names.data(), names.size()));
  ASSERT_TRUE(w.write_meta(meta_for(rank, size, false)));
  for (int b = 0; b < blocks; ++b) {
    std::vector<spool::Activity> acts;
    for (int i = 0; i < 10; ++i) {
      int64_t t = 1'000 + (b * 10 + i) * 1'000;
      acts.push_back({t, t + 500, b * 10 + i, 0, 7, 1, 0});
    }
    ASSERT_TRUE(w.write_block(spool::BlockType::Activities, 10, acts.data(),
                              acts.size() * sizeof(acts[0])));
  }
  spool::Range step{0, 1'000'000'000, 1, 2};
  ASSERT_TRUE(w.write_block(spool::BlockType::Ranges, 1, &step, sizeof step));
  if (with_end) {
    ASSERT_TRUE(w.write_meta(meta_for(rank, size, true)));
  }
}

}  // namespace

TEST(SpoolStore, MetaRoundTripAndConversion) {
  const std::string p = (fs::temp_directory_path() / "kernalyse_spool_store.kspool").string();
  write_rank(p, 1, 2, 2, true);
  spool::Contents c = spool::read(p);
  ASSERT_FALSE(c.truncated) << c.problem;
  ASSERT_TRUE(c.has_meta);
  EXPECT_EQ(c.meta.fixed.rank, 1);
  EXPECT_EQ(c.meta.fixed.has_end, 1);  // the last Meta block wins
  EXPECT_EQ(c.meta.host, "node7");
  EXPECT_EQ(c.meta.command, "app --x");
  ASSERT_EQ(c.activities.size(), 20u);

  SpoolMeta m;
  m.rank = 1;
  m.world_size = 2;
  m.pid = 4242;
  m.anchor_ns = 1'000'000;
  m.emulated = true;
  const ClockSample start{1'000, 500, 40}, end{1'001'000, 1'500, 60};
  const ClockModel clock = fit_clock_samples(start, &end);
  Store s = spool_to_store(c, m, clock);
  ASSERT_EQ(s.activities.size(), 20u);
  // First kernel at local 1000: + offset 500 + anchor.
  EXPECT_EQ(s.activities.start_ns[0], 1'000 + 500 + 1'000'000);
  // Local 11000 is 10000 ns after the start sample: + 500 + 10 ns of drift.
  EXPECT_EQ(s.activities.start_ns[10], 11'000 + 510 + 1'000'000);
  EXPECT_EQ(s.activities.step[0], 3);  // inside ProfilerStep#3
  ASSERT_EQ(s.ranks.size(), 1u);
  EXPECT_EQ(s.ranks[0].rank, 1);
  EXPECT_TRUE(s.ranks[0].emulated);
  EXPECT_EQ(s.ranks[0].clock_uncertainty_ns, 30);
  EXPECT_NE(s.ranks[0].clock_method.find("linear drift"), std::string::npos);
  fs::remove(p);
}

TEST(SpoolStore, RecoverDirectory) {
  const fs::path dir = fs::temp_directory_path() / "kernalyse_recover_test";
  fs::remove_all(dir);
  fs::create_directories(dir);
  write_rank((dir / "rank-0.kspool").string(), 0, 3, 3, true);
  write_rank((dir / "rank-1.kspool").string(), 1, 3, 3, false);
  // Rank 1 torn in the middle of its last activity block (the range block and after are lost).
  const auto full = fs::file_size(dir / "rank-1.kspool");
  const size_t range_block = sizeof(spool::BlockHeader) + sizeof(spool::Range);
  fs::resize_file(dir / "rank-1.kspool", full - range_block - 100);

  RecoveryReport rep;
  Store s = recover_spool_dir(dir.string(), &rep);
  EXPECT_EQ(rep.world_size, 3);
  ASSERT_EQ(rep.ranks.size(), 3u);
  EXPECT_FALSE(rep.ranks[0].truncated);
  EXPECT_TRUE(rep.ranks[0].has_end_sample);
  EXPECT_EQ(rep.ranks[0].records, 31);
  EXPECT_TRUE(rep.ranks[1].truncated);
  EXPECT_EQ(rep.ranks[1].records, 20);  // two complete activity blocks
  EXPECT_EQ(rep.ranks[1].problem, "torn block");
  EXPECT_TRUE(rep.ranks[2].missing);
  EXPECT_LT(rep.ranks[1].data_end_ns, rep.ranks[0].data_end_ns);
  const auto lines = rep.lines();
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[1].find("rank 1: truncated at byte " + std::to_string(rep.ranks[1].cut_byte)),
            std::string::npos)
      << lines[1];
  EXPECT_NE(lines[1].find("before the last rank"), std::string::npos) << lines[1];
  EXPECT_EQ(lines[2], "rank 2: missing (no spool file)");
  EXPECT_EQ(s.activities.size(), 50u);
  ASSERT_EQ(s.ranks.size(), 3u);
  EXPECT_EQ(s.ranks[2].rank, 2);
  EXPECT_NE(s.ranks[2].source.find("missing"), std::string::npos);
  EXPECT_NE(s.ranks[1].source.find("truncated at byte"), std::string::npos);
  EXPECT_EQ(s.attrs.produced_by, "kernalyse-merge --spool (crash recovery)");

  fs::remove_all(dir);
  fs::create_directories(dir);
  EXPECT_THROW(recover_spool_dir(dir.string(), nullptr), Error);  // no spool files
  fs::remove_all(dir);
}
