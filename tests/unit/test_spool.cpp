// The per-rank spool: blocks round-trip; a torn or corrupt tail is detected and dropped, never
// misread; every complete block before it is kept.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "kernalyse/spool.h"

using namespace kernalyse;

namespace {

std::string tmpfile(const char* name) {
  return (std::filesystem::temp_directory_path() / name).string();
}

void write_sample(const std::string& path, int blocks) {
  spool::Writer w;
  ASSERT_TRUE(w.open(path));
  std::string names = std::string("") + '\0' + "gemm" + '\0';
  ASSERT_TRUE(w.write_block(spool::BlockType::Strings, 2, names.data(), names.size()));
  for (int b = 0; b < blocks; ++b) {
    std::vector<spool::Activity> acts;
    for (int i = 0; i < 100; ++i)
      acts.push_back({b * 1000 + i * 10, b * 1000 + i * 10 + 5, b * 100 + i, 0, 7, 1, 0});
    ASSERT_TRUE(w.write_block(spool::BlockType::Activities, static_cast<uint32_t>(acts.size()),
                              acts.data(), acts.size() * sizeof(acts[0])));
  }
}

}  // namespace

TEST(Spool, RoundTrip) {
  std::string p = tmpfile("kernalyse_spool_rt.kspool");
  write_sample(p, 3);
  spool::Contents c = spool::read(p);
  EXPECT_FALSE(c.truncated) << c.problem;
  ASSERT_EQ(c.strings.size(), 2u);
  EXPECT_EQ(c.strings[1], "gemm");
  ASSERT_EQ(c.activities.size(), 300u);
  // Packed records: compare aligned copies (EXPECT_EQ takes references; F10 in issue 19).
  const int64_t start = c.activities[250].start_ns, correlation = c.activities[250].correlation;
  EXPECT_EQ(start, 2000 + 50 * 10);
  EXPECT_EQ(correlation, 250);
  EXPECT_EQ(c.blocks, 4);
  std::filesystem::remove(p);
}

TEST(Spool, TornTailAtEveryByteKeepsCompleteBlocks) {
  std::string p = tmpfile("kernalyse_spool_torn.kspool");
  write_sample(p, 3);
  auto size = std::filesystem::file_size(p);
  std::ifstream in(p, std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t block = sizeof(spool::BlockHeader) + 100 * sizeof(spool::Activity);
  size_t strings_block = size - 3 * block;
  std::string q = tmpfile("kernalyse_spool_cut.kspool");
  for (size_t cut = 1; cut < size; cut += 97) {
    std::ofstream(q, std::ios::binary).write(all.data(), static_cast<std::streamsize>(cut));
    spool::Contents c = spool::read(q);
    size_t complete = cut < strings_block ? 0 : (cut - strings_block) / block;
    EXPECT_EQ(c.activities.size(), complete * 100) << "cut at " << cut;
    bool on_boundary = cut == strings_block + complete * block;
    EXPECT_EQ(c.truncated, !on_boundary) << "cut at " << cut;
  }
  std::filesystem::remove(p);
  std::filesystem::remove(q);
}

TEST(Spool, CorruptPayloadIsDetectedByChecksum) {
  std::string p = tmpfile("kernalyse_spool_bad.kspool");
  write_sample(p, 3);
  {
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    auto size = std::filesystem::file_size(p);
    f.seekp(static_cast<std::streamoff>(size - 10));  // inside the last block's payload
    f.put('\x7f');
  }
  spool::Contents c = spool::read(p);
  EXPECT_TRUE(c.truncated);
  EXPECT_NE(c.problem.find("checksum"), std::string::npos) << c.problem;
  EXPECT_EQ(c.activities.size(), 200u);  // the two intact blocks
  std::filesystem::remove(p);
}
