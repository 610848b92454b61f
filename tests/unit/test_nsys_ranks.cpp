// Ranks of Nsight Systems processes from their evidence (aggregator/src/nsys_ranks.cpp).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "kernalyse/error.h"
#include "kernalyse/nsys_ranks.h"

using namespace kernalyse;

namespace {

NsysProcess proc(const std::string& file, const std::string& host, int64_t pid,
                 std::vector<RankClaim> claims = {}) {
  NsysProcess p;
  p.file = file;
  p.host = host;
  p.pid = pid;
  p.claims = std::move(claims);
  return p;
}

}  // namespace

TEST(NsysRanks, StrongerSourceWinsAndEachProcessKeepsItsOwnClaim) {
  // b's marks say 0 but a's environment took 0: b falls to its file name.
  std::vector<NsysProcess> ps = {
      proc("a", "h0", 10, {{0, "env:PMI_RANK"}}),
      proc("b", "h0", 11, {{0, "network marks"}, {1, "file name"}}),
      proc("c", "h1", 12, {{2, "nccl"}, {5, "env:RANK"}}),
  };
  RankAssignment a = assign_nsys_ranks(ps, false);
  EXPECT_EQ(a.rank, (std::vector<int32_t>{0, 1, 5}));
  EXPECT_EQ(a.source, (std::vector<std::string>{"env:PMI_RANK", "file name", "env:RANK"}));
  ASSERT_FALSE(a.warnings.empty());
  EXPECT_NE(a.warnings[0].find("rank 0 (network marks) of b: already the rank of a (env:PMI_RANK)"),
            std::string::npos)
      << a.warnings[0];
}

TEST(NsysRanks, OneRankClaimedTwiceAtOneLevelIsNotUsed) {
  std::vector<NsysProcess> ps = {
      proc("a", "h0", 10, {{0, "env:SLURM_PROCID"}, {0, "network marks"}}),
      proc("b", "h0", 11, {{0, "env:SLURM_PROCID"}, {1, "network marks"}}),
  };
  RankAssignment a = assign_nsys_ranks(ps, false);
  EXPECT_EQ(a.rank, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(a.source[0], "network marks");
  EXPECT_EQ(a.source[1], "network marks");
}

TEST(NsysRanks, NothingKnownAssumesHostPidOrderInOneWarning) {
  std::vector<NsysProcess> ps = {proc("x", "b", 5), proc("y", "a", 9), proc("z", "a", 3)};
  RankAssignment a = assign_nsys_ranks(ps, false);
  EXPECT_EQ(a.rank, (std::vector<int32_t>{2, 1, 0}));  // (a,3) (a,9) (b,5)
  for (const auto& s : a.source) EXPECT_EQ(s, "assumed");
  ASSERT_EQ(a.warnings.size(), 1u);
  EXPECT_NE(a.warnings[0].find("rank 0 z (host a, pid 3), rank 1 y (host a, pid 9), rank 2 x"),
            std::string::npos)
      << a.warnings[0];
}

TEST(NsysRanks, AssumedRanksStayInTheirHostsBlock) {
  // Host "a" (sorts first) knows rank 4, host "b" rank 0: blocks b = [0, 3), a = [3, 6); the free
  // ranks in plain order would give a's unknown processes 1 and 2.
  std::vector<NsysProcess> ps = {
      proc("a1", "a", 1, {{4, "network marks"}}), proc("a2", "a", 2), proc("a3", "a", 3),
      proc("b1", "b", 1, {{0, "network marks"}}), proc("b2", "b", 2), proc("b3", "b", 3)};
  RankAssignment a = assign_nsys_ranks(ps, false);
  EXPECT_EQ(a.rank, (std::vector<int32_t>{4, 3, 5, 0, 1, 2}));
  // A host without known ranks fills the gap between known ones.
  std::vector<NsysProcess> q = {proc("a1", "a", 1, {{0, "env:RANK"}}), proc("b1", "b", 1),
                                proc("c1", "c", 1, {{2, "env:RANK"}})};
  EXPECT_EQ(assign_nsys_ranks(q, false).rank, (std::vector<int32_t>{0, 1, 2}));
}

TEST(NsysRanks, NoBlockLayoutFallsBackToTheFreeRanksInOrder) {
  // Host a's known ranks 0 and 3 need a block of 4: it has 2 processes.
  std::vector<NsysProcess> ps = {proc("a1", "a", 1, {{0, "env:RANK"}}),
                                 proc("a2", "a", 2, {{3, "env:RANK"}}), proc("b1", "b", 1),
                                 proc("b2", "b", 2)};
  EXPECT_EQ(assign_nsys_ranks(ps, false).rank, (std::vector<int32_t>{0, 3, 1, 2}));
}

TEST(NsysRanks, LocalRankOrdersAHostBeforePid) {
  std::vector<NsysProcess> ps = {proc("p", "h", 100), proc("q", "h", 200)};
  ps[0].local_rank = 1;
  ps[1].local_rank = 0;
  EXPECT_EQ(assign_nsys_ranks(ps, false).rank, (std::vector<int32_t>{1, 0}));
}

TEST(NsysRanks, OnlyInputIsRankZeroWithANote) {
  RankAssignment a = assign_nsys_ranks({proc("one", "h", 1)}, true);
  EXPECT_EQ(a.rank[0], 0);
  EXPECT_EQ(a.source[0], "only input");
  EXPECT_TRUE(a.warnings.empty());
  EXPECT_EQ(a.notes.size(), 1u);
}

TEST(NsysRanks, TheSameProcessTwiceWithoutARankIsRefused) {
  std::vector<NsysProcess> ps = {proc("a", "h", 7), proc("b", "h", 7)};
  try {
    assign_nsys_ranks(ps, false);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("a and b: the same process (host h, pid 7)"),
              std::string::npos)
        << e.what();
  }
  // Told apart by their ranks: fine.
  ps[0].claims = {{0, "env:RANK"}};
  ps[1].claims = {{1, "env:RANK"}};
  EXPECT_EQ(assign_nsys_ranks(ps, false).rank, (std::vector<int32_t>{0, 1}));
}

TEST(NsysRanks, EnvironmentTexts) {
  EXPECT_EQ(env_list_value("PATH=/a:/b;SLURM_PROCID=3;X=1", "SLURM_PROCID").value_or("-"), "3");
  EXPECT_EQ(env_list_value("MY_SLURM_PROCID=3;RANK=1", "SLURM_PROCID").value_or("-"), "-");
  EXPECT_EQ(env_list_value("LOCAL_RANK=2", "RANK").value_or("-"), "-");
  EXPECT_EQ(env_assignment_value("PMI_RANK=\"7\"", "PMI_RANK").value_or("-"), "7");
  EXPECT_EQ(env_assignment_value("PMI_RANK=7", "PMI_RANK").value_or("-"), "7");
  EXPECT_EQ(env_assignment_value("PMI_RANKX=7", "PMI_RANK").value_or("-"), "-");
}

TEST(NsysRanks, NetworkMarksNameTheRecordingProcess) {
  const std::string m = "Data_Size: 1048576, Sender_Rank: 4, Receiver_Rank: 5, Channel_ID: 0";
  EXPECT_EQ(network_mark_rank("ncclNetIsend(): " + m).value_or(-1), 4);
  EXPECT_EQ(network_mark_rank("ncclNetSendTest(): " + m).value_or(-1), 4);
  EXPECT_EQ(network_mark_rank("ncclNetIrecv(): " + m).value_or(-1), 5);
  EXPECT_EQ(network_mark_rank("ncclNetRecvTest(): " + m).value_or(-1), 5);
  EXPECT_FALSE(network_mark_rank("ncclNetIsend()"));
  EXPECT_FALSE(network_mark_rank("ncclNetIsend(): Sender_Rank: 99999999999"));
}

TEST(NsysRanks, PayloadFieldsRawAndAfterNsysHeader) {
  std::string raw(12, '\0');
  raw[0] = 3, raw[4] = 8, raw[8] = static_cast<char>(0xFF);  // Rank 3, ranks 8, device -1 (int)
  raw[9] = raw[10] = raw[11] = static_cast<char>(0xFF);
  EXPECT_EQ(payload_field(raw, 5, 0).value_or(-9), 3);
  EXPECT_EQ(payload_field(raw, 5, 4).value_or(-9), 8);
  EXPECT_EQ(payload_field(raw, 5, 8).value_or(-9), -1);
  EXPECT_EQ(payload_field(raw, 6, 8).value_or(-9), 0xFFFFFFFF);
  EXPECT_FALSE(payload_field(raw, 5, 9));   // past the end
  EXPECT_FALSE(payload_field(raw, 19, 0));  // a float: not read
  std::string head(32, '\0');
  head[16] = 12;  // payload size = blob size - 32
  EXPECT_EQ(payload_field(head + raw, 5, 4).value_or(-9), 8);
}

TEST(NsysRanks, RenumberMovesEveryRankColumn) {
  Store s;
  s.activities.rank = {0, 1, 1};
  s.launches.rank = {1};
  s.annotations.rank = {0};
  s.ranks.resize(2);
  s.ranks[0].rank = 0;
  s.ranks[1].rank = 1;
  renumber_ranks(s, {7, 3});
  EXPECT_EQ(s.activities.rank, (std::vector<int32_t>{7, 3, 3}));
  EXPECT_EQ(s.launches.rank, (std::vector<int32_t>{3}));
  EXPECT_EQ(s.annotations.rank, (std::vector<int32_t>{7}));
  EXPECT_EQ(s.ranks[0].rank, 7);
  EXPECT_EQ(s.ranks[1].rank, 3);
}
