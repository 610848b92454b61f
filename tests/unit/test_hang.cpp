// The hang and desync report (analysis/analyses/src/hang.cpp) on spool files written by the
// collector's own Recorder: a rank that never entered the collective the others wait in, ranks that
// stopped at different collectives, mismatched op and size; and the spool's CollMark blocks
// round-trip next to a version-2 file, which still reads.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>

#include "../../collector/src/recorder.h"
#include "kernalyse/error.h"
#include "kernalyse/hang.h"
#include "kernalyse/spool.h"
#include "kernalyse/spool_store.h"

using namespace kernalyse;
namespace fs = std::filesystem;

namespace {

struct Mark {
  int64_t seq;
  const char* op;
  int64_t bytes;
  int state;
};

// A process tree's spool rank-<rank>.kspool: its Meta block (shared clock, the rank's origin),
// then what `rec` holds.
void write_tree_spool(const fs::path& dir, int rank, const std::string& origin, int32_t pid,
                      collector::Recorder& rec) {
  spool::Writer w;
  ASSERT_TRUE(w.open((dir / ("rank-" + std::to_string(rank) + ".kspool")).string()));
  spool::Meta meta;
  meta.fixed.rank = rank;
  meta.fixed.pid = pid;
  meta.fixed.has_start = 1;
  meta.fixed.shared_clock = 1;
  meta.command = "python3 w.py";
  meta.rank_origin = origin;
  ASSERT_TRUE(w.write_meta(meta));
  ASSERT_TRUE(rec.flush(w));
}

// One rank's spool: its Meta block and its marks on communicator 0xabc (4 ranks).
void write_rank(const fs::path& dir, int rank, const std::vector<Mark>& marks) {
  collector::Recorder rec;
  for (const Mark& m : marks)
    rec.coll_mark(
        kernalyse_emu_coll_mark{1000 + m.seq, 0xabc, m.seq, m.op, m.bytes, 4, rank, m.state});
  write_tree_spool(dir, rank, "RANK=" + std::to_string(rank), 0, rec);
}

// Marks for collectives first..last, all entered and completed (AllReduce of 64 B).
std::vector<Mark> done(int64_t first, int64_t last) {
  std::vector<Mark> v;
  for (int64_t s = first; s <= last; ++s)
    v.push_back({s, "AllReduce", 64, 0}), v.push_back({s, "AllReduce", 64, 1});
  return v;
}

class Hang : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kernalyse-hang-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  fs::path dir_;
};

}  // namespace

TEST_F(Hang, RankThatNeverEnteredIsNamed) {
  for (int r : {0, 1, 3}) {
    auto m = done(0, 4);
    m.push_back({5, "AllReduce", 64, 0});  // entered #5, still inside
    write_rank(dir_, r, m);
  }
  write_rank(dir_, 2, done(0, 4));  // completed #4, never entered #5
  const HangReport h = hang_report_dir(dir_.string());
  ASSERT_EQ(h.comms.size(), 1u);
  const CommHang& c = h.comms[0];
  EXPECT_TRUE(h.hung());
  EXPECT_EQ(c.stuck_seq, 5);
  EXPECT_EQ(c.waiting, (std::vector<int32_t>{0, 1, 3}));
  EXPECT_EQ(c.never_entered, (std::vector<int32_t>{2}));
  EXPECT_EQ(c.ranks[2].last_completed, 4);
  EXPECT_EQ(h.marks, 3 * 11 + 10);
  const auto lines = h.lines();
  EXPECT_NE(lines[1].find("ranks 0, 1, 3 wait in collective #5 (AllReduce 64 B); rank 2 has not "
                          "entered it"),
            std::string::npos)
      << lines[1];
  EXPECT_TRUE(h.mismatches.empty());
}

TEST_F(Hang, RanksStoppedApartWithoutWaiting) {
  // NCCL's marks for collectives without network: "completed" at launch, so nobody waits.
  write_rank(dir_, 0, done(0, 7));
  write_rank(dir_, 1, done(0, 7));
  write_rank(dir_, 2, done(0, 6));
  const HangReport h = hang_report_dir(dir_.string());
  ASSERT_EQ(h.comms.size(), 1u);
  EXPECT_EQ(h.comms[0].stuck_seq, -1);
  EXPECT_EQ(h.comms[0].front_seq, 7);
  EXPECT_EQ(h.comms[0].behind, (std::vector<int32_t>{2}));
  EXPECT_TRUE(h.hung());
  EXPECT_NE(h.lines()[1].find("BEHIND"), std::string::npos);
}

TEST_F(Hang, MismatchedOpAndSize) {
  for (int r : {0, 2, 3}) write_rank(dir_, r, done(0, 3));
  auto m = done(0, 1);
  m.push_back({2, "AllGather", 64, 0}), m.push_back({2, "AllGather", 64, 1});
  m.push_back({3, "AllReduce", 128, 0}), m.push_back({3, "AllReduce", 128, 1});
  write_rank(dir_, 1, m);
  const HangReport h = hang_report_dir(dir_.string());
  EXPECT_FALSE(h.hung());
  ASSERT_EQ(h.mismatches.size(), 2u);
  EXPECT_EQ(h.mismatches[0].seq, 2);
  ASSERT_EQ(h.mismatches[0].sides.size(), 2u);
  EXPECT_EQ(h.mismatches[0].sides[0].ranks, (std::vector<int32_t>{0, 2, 3}));
  EXPECT_EQ(h.mismatches[0].sides[1].op, "AllGather");
  EXPECT_EQ(h.mismatches[1].seq, 3);
  EXPECT_EQ(h.mismatches[1].sides[1].bytes, 128);
}

TEST_F(Hang, NoSpoolFileIsAnError) { EXPECT_THROW(hang_report_dir(dir_.string()), Error); }

TEST_F(Hang, TreeMetaAndMarksRoundTripAndVersion2StillReads) {
  write_rank(dir_, 0, done(0, 0));
  const spool::Contents c = spool::read((dir_ / "rank-0.kspool").string());
  EXPECT_FALSE(c.truncated) << c.problem;
  ASSERT_EQ(c.coll_marks.size(), 2u);
  EXPECT_EQ(c.coll_marks[1].state, 1);
  EXPECT_EQ(c.meta.fixed.shared_clock, 1);
  EXPECT_EQ(c.meta.rank_origin, "RANK=0");
  // A version-2 block (no CollMark blocks existed then) is read as before.
  spool::BlockHeader h{spool::kMagic, 2, static_cast<uint16_t>(spool::BlockType::Strings), 1, 2, 0};
  const char payload[2] = {'x', '\0'};
  h.crc = 0xa63fe101;  // crc32("x\0")
  const fs::path v2 = dir_ / "v2.kspool";
  {
    std::FILE* f = std::fopen(v2.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    std::fwrite(&h, sizeof h, 1, f);
    std::fwrite(payload, 1, 2, f);
    std::fclose(f);
  }
  const spool::Contents c2 = spool::read(v2.string());
  EXPECT_FALSE(c2.truncated) << c2.problem;
  ASSERT_EQ(c2.strings.size(), 1u);
  EXPECT_EQ(c2.strings[0], "x");
  // Recovery of a tree spool: the exact shared clock, the rank's origin, no "missing" rows.
  RecoveryReport rep;
  fs::remove(v2);
  const Store s = recover_spool_dir(dir_.string(), &rep);
  ASSERT_EQ(s.ranks.size(), 1u);
  EXPECT_EQ(s.ranks[0].clock_method.rfind("shared host clock", 0), 0u) << s.ranks[0].clock_method;
  EXPECT_EQ(rep.ranks[0].rank_origin, "RANK=0");
}

// torchrun's agent (no RANK, CUDA brought up, no GPU work) claimed rank 0 before its workers, so
// the workers with RANK=0 and RANK=1 became ranks 1 and 2 (the first GPU run,
// docs/gpu-validation.md check h). Recovery leaves the agent out and gives the workers their RANK.
TEST_F(Hang, TreeLauncherWithoutGpuWorkIsNotARank) {
  auto write = [&](int file_rank, const std::string& origin, bool kernel, int32_t pid) {
    collector::Recorder rec;
    if (kernel)
      rec.activity(kernalyse_emu_activity{KERNALYSE_EMU_KERNEL, 0, 7, 1000 + file_rank,
                                          2000 + file_rank, 1, "gemm"},
                   false);
    write_tree_spool(dir_, file_rank, origin, pid, rec);
  };
  auto fresh = [&] {
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  };
  write(0, "start order (no RANK or LOCAL_RANK in its environment)", false, 100);
  write(1, "start order (RANK=0 was taken by another process)", true, 101);
  write(2, "start order (RANK=1 was taken by another process)", true, 102);
  RecoveryReport rep;
  const Store s = recover_spool_dir(dir_.string(), &rep);
  ASSERT_EQ(s.ranks.size(), 2u);
  EXPECT_EQ(s.ranks[0].rank, 0);
  EXPECT_EQ(s.ranks[1].rank, 1);
  EXPECT_EQ(rep.world_size, 2);
  ASSERT_EQ(rep.not_ranks.size(), 1u);
  EXPECT_NE(rep.not_ranks[0].find("pid 100"), std::string::npos) << rep.not_ranks[0];
  ASSERT_EQ(rep.ranks.size(), 2u);
  EXPECT_EQ(rep.ranks[0].rank_origin.rfind("RANK=0 (", 0), 0u) << rep.ranks[0].rank_origin;
  // Pid 101 (RANK=0) is rank 0 now: its kernel carries rank 0.
  ASSERT_EQ(s.activities.size(), 2u);
  for (size_t i = 0; i < s.activities.size(); ++i)
    EXPECT_EQ(s.activities.start_ns[i] - 1001, s.activities.rank[i]);

  // The same launcher with GPU work of its own stays a rank: nothing moves.
  fresh();
  write(0, "start order (no RANK or LOCAL_RANK in its environment)", true, 100);
  write(1, "start order (RANK=0 was taken by another process)", true, 101);
  RecoveryReport rep2;
  const Store s2 = recover_spool_dir(dir_.string(), &rep2);
  EXPECT_EQ(s2.ranks.size(), 2u);
  EXPECT_TRUE(rep2.not_ranks.empty());
  EXPECT_EQ(rep2.ranks[1].rank_origin.rfind("start order (RANK=0", 0), 0u);

  // A RANK past the spool's rank limit (a damaged Meta block) is not taken back: no rank 10^8.
  fresh();
  write(0, "start order (no RANK or LOCAL_RANK in its environment)", false, 100);
  write(1, "start order (RANK=99999999 was taken by another process)", true, 101);
  write(2, "RANK=0", true, 102);
  RecoveryReport rep3;
  const Store s3 = recover_spool_dir(dir_.string(), &rep3);
  ASSERT_EQ(s3.ranks.size(), 2u);
  EXPECT_EQ(s3.ranks[0].rank, 1);
  EXPECT_EQ(s3.ranks[1].rank, 2);
  EXPECT_EQ(rep3.not_ranks.size(), 1u);
}
