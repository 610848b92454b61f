// The rows a large import keeps on disk (kernalyse/spill.h) and the store written in batches
// (StoreStream): sorted runs merged back in order whatever the chunking, temporary files that
// leave nothing behind, and a batched store equal to write_store's.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <random>
#include <tuple>

#include "kernalyse/error.h"
#include "kernalyse/spill.h"
#include "kernalyse/store_io.h"

namespace fs = std::filesystem;
using namespace kernalyse;

namespace {

struct Row {
  int64_t key;
  uint64_t seq;
};
struct RowLess {
  bool operator()(const Row& a, const Row& b) const {
    return std::tie(a.key, a.seq) < std::tie(b.key, b.seq);
  }
};

fs::path fresh_dir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("kernalyse-spill-" + name + "-" + std::to_string(getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

}  // namespace

TEST(Spill, SorterMergesRunsInOrderForEveryChunking) {
  const fs::path dir = fresh_dir("sort");
  std::mt19937_64 rng(7);
  std::vector<Row> rows;
  for (uint64_t i = 0; i < 5000; ++i)
    rows.push_back(Row{static_cast<int64_t>(rng() % 300) - 150, i});
  std::vector<Row> want = rows;
  std::sort(want.begin(), want.end(), RowLess());
  for (size_t chunk : {1, 2, 7, 64, 4999, 5000, 100000}) {
    RowSorter<Row, RowLess> s(dir.string(), chunk);
    for (const Row& r : rows) s.add(r);
    EXPECT_EQ(s.size(), rows.size());
    EXPECT_EQ(s.runs(),
              chunk >= rows.size() ? (chunk == rows.size() ? 1u : 0u) : rows.size() / chunk)
        << chunk;
    auto reader = s.open();
    std::vector<Row> got;
    for (Row r; reader.next(&r);) got.push_back(r);
    ASSERT_EQ(got.size(), want.size()) << chunk;
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i].key, want[i].key) << "chunk " << chunk << " row " << i;
      ASSERT_EQ(got[i].seq, want[i].seq) << "chunk " << chunk << " row " << i;
    }
  }
  // The temporaries are unlinked: the directory stays empty all along.
  EXPECT_TRUE(fs::is_empty(dir));
  fs::remove_all(dir);
}

TEST(Spill, EmptySorter) {
  const fs::path dir = fresh_dir("empty");
  RowSorter<Row, RowLess> s(dir.string(), 4);
  auto reader = s.open();
  Row r{};
  EXPECT_FALSE(reader.next(&r));
  fs::remove_all(dir);
}

TEST(Spill, MissingDirectoryIsOneClearError) {
  try {
    RowSorter<Row, RowLess> s("/nonexistent/kernalyse-spill", 1);
    s.add(Row{1, 0});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "cannot create a temporary file in /nonexistent/kernalyse-spill"),
              std::string::npos)
        << e.what();
  }
}

namespace {

Store sample_store() {
  Store s;
  s.attrs.produced_by = "test";
  s.attrs.created_utc = "2026-11-28T00:00:00Z";
  const uint32_t k = s.strings.intern("kernel");
  for (int i = 0; i < 1000; ++i) {
    Activities& a = s.activities;
    a.rank.push_back(0);
    a.device.push_back(0);
    a.stream.push_back(7);
    a.kind.push_back(0);
    a.category.push_back(0);
    a.start_ns.push_back(100 * i);
    a.end_ns.push_back(100 * i + 50);
    a.name_id.push_back(k);
    a.correlation.push_back(i);
    a.step.push_back(i / 250);
  }
  Annotations& an = s.annotations;
  an.rank = {0};
  an.kind = {static_cast<uint8_t>(AnnotationKind::Step)};
  an.pid = {1};
  an.tid = {1};
  an.start_ns = {0};
  an.end_ns = {100000};
  an.name_id = {s.strings.intern("ProfilerStep#0")};
  an.step = {0};
  RankInfo r;
  r.rank = 0;
  r.devices = "0";
  s.ranks.push_back(r);
  fill_unknown_columns(s);
  return s;
}

// Rows [b, e) of the store's activities as a batch.
Store activity_batch(const Store& s, size_t b, size_t e) {
  Store out;
  for_each_column_pair(out.activities, s.activities, [&](const auto&, auto& dst, const auto& src) {
    dst.assign(src.begin() + static_cast<ptrdiff_t>(b), src.begin() + static_cast<ptrdiff_t>(e));
  });
  return out;
}

}  // namespace

TEST(StoreStream, BatchesMakeTheStoreWriteStoreMakes) {
  const fs::path dir = fresh_dir("stream");
  const Store s = sample_store();
  write_store(s, (dir / "whole.h5").string());
  {
    StoreStream out((dir / "batched.h5").string());
    out.begin("activities", s.activities.size());
    for (size_t b = 0; b < s.activities.size(); b += 300)
      out.append(activity_batch(s, b, std::min(b + 300, s.activities.size())));
    EXPECT_EQ(out.rows("activities"), 1000u);
    Store header = s;
    header.activities = Activities();
    out.commit(header);
  }
  const Store whole = read_store((dir / "whole.h5").string());
  const Store batched = read_store((dir / "batched.h5").string());
  EXPECT_EQ(batched.activities.start_ns, whole.activities.start_ns);
  EXPECT_EQ(batched.activities.step, whole.activities.step);
  EXPECT_EQ(batched.activities.correlation, whole.activities.correlation);
  EXPECT_EQ(batched.annotations.start_ns, whole.annotations.start_ns);
  EXPECT_EQ(batched.strings.all(), whole.strings.all());
  ASSERT_EQ(batched.ranks.size(), 1u);
  EXPECT_EQ(batched.ranks[0].devices, "0");
  fs::remove_all(dir);
}

TEST(StoreStream, FewerRowsThanAnnouncedAreCutMoreAreRefusedAndNothingIsLeft) {
  const fs::path dir = fresh_dir("cut");
  const Store s = sample_store();
  {
    StoreStream out((dir / "cut.h5").string());
    out.begin("activities", 1000);
    out.append(activity_batch(s, 0, 600));
    Store header = s;
    header.activities = Activities();
    out.commit(header);
  }
  EXPECT_EQ(read_store((dir / "cut.h5").string()).activities.size(), 600u);
  {
    StoreStream out((dir / "over.h5").string());
    out.begin("activities", 10);
    EXPECT_THROW(out.append(activity_batch(s, 0, 11)), Error);
  }  // never committed: no file, no temporary
  EXPECT_FALSE(fs::exists(dir / "over.h5"));
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.path().filename() != "cut.h5";
  EXPECT_EQ(files, 0u);
  fs::remove_all(dir);
}
