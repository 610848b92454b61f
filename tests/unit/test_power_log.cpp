// nvidia-smi power-log importer (aggregator/importers/src/power_log.cpp): both real formats written
// by hand as nvidia-smi prints them, malformed lines counted, missing columns and logs that do not
// overlap the run refused with one message naming the file.
#include <gtest/gtest.h>

#include "kernalyse/energy.h"
#include "kernalyse/power_log.h"
#include "kernalyse/store_io.h"

using namespace kernalyse;

namespace {

// 2024-04-04T12:00:00Z in epoch ns.
constexpr int64_t kNoon = 1712232000LL * 1'000'000'000;

// `nvidia-smi --query-gpu=timestamp,index,power.draw --format=csv -lms 40` on a 2-GPU node.
const char* kWithHeader =
    "timestamp, index, power.draw [W]\n"
    "2024/04/04 12:00:00.000, 0, 100.00 W\n"
    "2024/04/04 12:00:00.001, 1, 61.25 W\n"
    "2024/04/04 12:00:00.040, 0, 300.50 W\n"
    "2024/04/04 12:00:00.041, 1, 62.00 W\n"
    "2024/04/04 12:00:00.080, 0, [N/A]\n"
    "2024/04/04 12:00:00.120, 0, 300.50 W\n";

// `--format=csv,noheader,nounits`: CRLF line ends and a trailing blank line, as copied from
// Windows.
const char* kNoHeader =
    "2024/04/04 12:00:00.000, 0, 100.00\r\n"
    "2024/04/04 12:00:00.040, 0, 300.50\r\n"
    "2024/04/04 12:00:00.080, 0\r\n"
    "\r\n";

Store one_rank_store(int64_t start, int64_t end) {
  Store s;
  auto& a = s.activities;
  a.rank.push_back(0), a.device.push_back(0), a.stream.push_back(7);
  a.kind.push_back(static_cast<uint8_t>(Kind::Kernel));
  a.category.push_back(static_cast<uint8_t>(Category::Computation));
  a.start_ns.push_back(start), a.end_ns.push_back(end);
  a.name_id.push_back(s.strings.intern("gemm"));
  a.correlation.push_back(kNoCorrelation), a.step.push_back(kNoStep);
  RankInfo r;
  r.rank = 0;
  r.devices = "0";
  s.ranks.push_back(r);
  return s;
}

}  // namespace

TEST(PowerLog, CsvWithHeaderAndUnits) {
  const PowerLog log = parse_nvsmi_power_csv(kWithHeader, "smi.csv", 0);
  EXPECT_TRUE(log.header);
  EXPECT_EQ(log.lines, 6);
  EXPECT_EQ(log.malformed, 1);  // [N/A]
  EXPECT_EQ(log.first_bad_line, 6);
  EXPECT_NE(log.first_bad_reason.find("[N/A]"), std::string::npos);
  ASSERT_EQ(log.samples.size(), 5u);
  EXPECT_EQ(log.samples[0].ts_ns, kNoon);
  EXPECT_EQ(log.samples[0].mw, 100'000);
  EXPECT_EQ(log.samples[1].gpu, 1);
  EXPECT_EQ(log.samples[1].mw, 61'250);
  EXPECT_EQ(log.samples[2].ts_ns, kNoon + 40'000'000);
  EXPECT_EQ(log.samples[2].mw, 300'500);
}

TEST(PowerLog, CsvNoHeaderNoUnitsAndTimeZone) {
  const PowerLog log = parse_nvsmi_power_csv(kNoHeader, "smi.csv", 2 * 3600);  // logged at UTC+2
  EXPECT_FALSE(log.header);
  EXPECT_EQ(log.malformed, 1);  // the 2-field line
  EXPECT_EQ(log.first_bad_line, 3);
  ASSERT_EQ(log.samples.size(), 2u);
  EXPECT_EQ(log.samples[0].ts_ns, kNoon - 2 * 3600 * 1'000'000'000LL);
  EXPECT_EQ(log.samples[1].mw, 300'500);
}

TEST(PowerLog, MissingColumnIsOneClearError) {
  try {
    parse_nvsmi_power_csv("timestamp, power.draw [W]\n2024/04/04 12:00:00.000, 100.00 W\n",
                          "smi.csv", 0);
    FAIL() << "accepted a log without the index column";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "smi.csv:1: no index column in the header (log with nvidia-smi "
                 "--query-gpu=timestamp,index,power.draw --format=csv)");
  }
  try {
    parse_nvsmi_power_csv("2024/04/04 12:00:00.000, 100.00\n", "smi.csv", 0);
    FAIL() << "accepted a headerless log with 2 columns";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("smi.csv:1: 2 column(s)"), std::string::npos) << e.what();
  }
}

TEST(PowerLog, HostileInputIsCountedNeverTrusted) {
  const PowerLog log = parse_nvsmi_power_csv(
      "timestamp, index, power.draw [W]\n"
      "9999/99/99 99:99:99.999, 0, 1 W\n"                     // out of range
      "2024/04/04 12:00:00.000, 99999999999999999999, 1 W\n"  // index overflow
      "2024/04/04 12:00:00.000, 0, 1e400 W\n"                 // overflow
      "2024/04/04 12:00:00.000, 0, -5 W\n"                    // negative
      "2024/04/04 12:00:00.000, 0, nan W\n"
      "2024/04/04 12:00:00.000, 0, 5 W, extra\n"
      ",,,\n"
      "2024/04/04 12:00:00.0000000000001, 0, 5 W\n",
      "fuzz.csv", 0);
  EXPECT_EQ(log.lines, 8);
  EXPECT_EQ(log.malformed, 8);
  EXPECT_TRUE(log.samples.empty());
}

TEST(PowerLog, AttachedLogGivesEnergyAndReplacesSamples) {
  Store s = one_rank_store(kNoon, kNoon + 40'000'000);
  PowerLog log = parse_nvsmi_power_csv(kWithHeader, "smi.csv", 0);
  EXPECT_THROW(attach_power_log(&s, log, 0, std::nullopt), Error);  // two GPUs: name one
  attach_power_log(&s, log, 0, 0);
  ASSERT_EQ(s.counters.size(), 3u);  // GPU 0's samples only
  const EnergyResult e = energy_analysis(s, {});
  // 100 W -> 300.5 W over the kernel's 40 ms: (100 + 300.5) / 2 * 0.04 = 8.01 J
  ASSERT_EQ(e.kernels.size(), 1u);
  EXPECT_NEAR(e.kernels[0].joules, 8.01, 1e-9);
  EXPECT_NEAR(e.total_j, 8.01 + 300.5 * 0.08, 1e-9);
}

TEST(PowerLog, LogThatDoesNotOverlapTheRunIsRefused) {
  Store s =
      one_rank_store(kNoon + 3600'000'000'000LL, kNoon + 3601'000'000'000LL);  // an hour later
  const PowerLog log = parse_nvsmi_power_csv(kNoHeader, "smi.csv", 0);
  try {
    attach_power_log(&s, log, 0, std::nullopt);
    FAIL() << "attached a log from another time";
  } catch (const Error& e) {
    EXPECT_STREQ(
        e.what(),
        "smi.csv: the log (2024-04-04T12:00:00.000Z to 2024-04-04T12:00:00.040Z) does not "
        "overlap rank 0's run (2024-04-04T13:00:00.000Z to 2024-04-04T13:00:01.000Z); wrong "
        "file, or another time zone (timestamps are read in TZ of this process)");
  }
}
