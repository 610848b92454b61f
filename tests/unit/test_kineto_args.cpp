// The Kineto argument names (kineto_args.h): one table that the importer matches and the Kineto
// export writes. A name the export writes must read back into the same column, so the store's
// NCCL metadata survives export -> import; every name is listed once.
#include <gtest/gtest.h>

#include <set>
#include <string>

#include "kernalyse/kineto_args.h"

namespace kernalyse {
namespace {

TEST(KinetoArgs, EveryNameOnce) {
  std::set<std::string_view> seen;
  for (std::string_view n : kineto_arg::kAll) {
    EXPECT_FALSE(n.empty());
    EXPECT_TRUE(seen.insert(n).second) << "listed twice: " << n;
  }
  // The names PyTorch writes, spelled as PyTorch spells them (ParamCommsUtils, kineto).
  EXPECT_EQ(std::string_view(kineto_arg::kExternalId), "External id");
  EXPECT_EQ(std::string_view(kineto_arg::kCollectiveName), "Collective name");
  EXPECT_EQ(std::string_view(kineto_arg::kPgRanks), "Process Group Ranks");
}

}  // namespace
}  // namespace kernalyse
