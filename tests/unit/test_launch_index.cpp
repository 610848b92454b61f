// detail::LaunchRows / LaunchIndex (analysis/analyses/include/kernalyse/timeline.h, internal):
// (rank, correlation) → the launch row and its start, dense and sparse ids, misses, and a rank
// whose launches come in two runs (an unsorted launch table).
#include <gtest/gtest.h>

#include "kernalyse/timeline.h"

namespace kernalyse {
namespace {

void launch(Store& s, int32_t rank, int64_t corr, int64_t start) {
  LaunchCalls& l = s.launches;
  l.rank.push_back(rank);
  l.pid.push_back(1);
  l.tid.push_back(1);
  l.start_ns.push_back(start);
  l.end_ns.push_back(start + 5);
  l.name_id.push_back(0);
  l.correlation.push_back(corr);
  l.step.push_back(kNoStep);
}

TEST(LaunchIndex, DenseSparseMissesAndSplitRuns) {
  Store s;
  launch(s, 0, 10, 100);  // rank 0: dense ids 10..12
  launch(s, 0, 11, 110);
  launch(s, 0, 12, 120);
  launch(s, 1, 5, 500);  // rank 1: ids far apart, a sparse table
  launch(s, 1, 5'000'000'000, 600);
  launch(s, 0, 13, 130);              // rank 0 again, after rank 1
  launch(s, 0, kNoCorrelation, 140);  // no id: never found
  const detail::LaunchRows rows(s.launches);
  const detail::LaunchIndex index(s);
  EXPECT_EQ(rows.find(0, 11), 1);
  EXPECT_EQ(index.find(0, 11), 110);
  EXPECT_EQ(rows.find(1, 5'000'000'000), 4);
  EXPECT_EQ(index.find(1, 5), 500);
  EXPECT_EQ(index.find(0, 13), 130);  // the second run of rank 0
  EXPECT_EQ(rows.find(0, 14), -1);    // -1 stays signed
  EXPECT_EQ(index.find(0, 9), detail::LaunchIndex::kNone);
  EXPECT_EQ(index.find(2, 10), detail::LaunchIndex::kNone);
  EXPECT_EQ(index.find(0, kNoCorrelation), detail::LaunchIndex::kNone);
}

}  // namespace
}  // namespace kernalyse
