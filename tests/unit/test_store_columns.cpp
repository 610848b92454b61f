// The store's column lists (store.h) against what derives from them: docs/store.md's tables, the
// sorts (every column permuted with its row), HDF5 write/read of every column, and the filling of
// columns a producer leaves empty. Generic over the lists: a new column is covered by adding it.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <type_traits>
#include <vector>

#include "kernalyse/store.h"
#include "kernalyse/store_io.h"

namespace fs = std::filesystem;
using namespace kernalyse;

namespace {

// The type names docs/store.md uses.
template <class T>
std::string doc_type() {
  if constexpr (std::is_same_v<T, std::string>) return "UTF-8 string";
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, uint8_t>) return "`uint8`";
  if constexpr (std::is_same_v<T, int32_t>) return "`int32`";
  if constexpr (std::is_same_v<T, uint32_t>) return "`uint32`";
  if constexpr (std::is_same_v<T, int64_t>) return "`int64`";
  if constexpr (std::is_same_v<T, uint64_t>) return "`uint64`";
  if constexpr (std::is_same_v<T, double>) return "`float64`";
  return "?";
}

using Columns = std::vector<std::pair<std::string, std::string>>;  // (name, type) in order

// docs/store.md: every "## `/table`" section's table rows "| `a`, `b` | type | ... |".
std::map<std::string, Columns> documented() {
  std::ifstream in(std::string(KERNALYSE_SOURCE_DIR) + "/docs/store.md");
  std::map<std::string, Columns> out;
  std::string line, table;
  const std::regex section(R"(^## `/(\w+)`.*)");
  const std::regex row(R"(^\| ((?:`\w+`(?:, )?)+) \| ([^|]+?) \|.*)");
  const std::regex name(R"(`(\w+)`)");
  std::smatch m;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) table.clear();
    if (std::regex_match(line, m, section)) table = m[1];
    if (table.empty() || !std::regex_match(line, m, row)) continue;
    const std::string names = m[1], type = m[2];
    for (std::sregex_iterator it(names.begin(), names.end(), name), end; it != end; ++it)
      out[table].emplace_back((*it)[1], type);
  }
  return out;
}

std::map<std::string, Columns> listed() {
  std::map<std::string, Columns> out;
  const Store s;
  for_each_table(s, [&](const char* table, const auto& t) {
    for_each_column(t, [&](const auto& def, const auto& col) {
      using T = typename std::decay_t<decltype(col)>::value_type;
      out[table].emplace_back(def.name, doc_type<T>());
    });
  });
  for_each_rank_field([&](const auto& def, auto) {
    out["ranks"].emplace_back(def.name, doc_type<std::decay_t<decltype(def.unknown)>>());
  });
  return out;
}

// Row i's value of a column in the permutation tests: keys that make the sort a reversal
// (rank/device/stream 0, times descending), everything else distinct per row.
template <class T>
T value(std::string_view table, std::string_view col, size_t i, size_t n,
        const std::vector<uint32_t>& ids) {
  if (col == "rank" || col == "device" || col == "stream") return T(0);
  if (col == "start_ns" || col == "ts_ns") return T(int64_t(n - i) * 10);
  if (col == "end_ns") return T(int64_t(n - i) * 10 + 5);
  if (table == "counters" && col == "name_id") return T(ids[0]);  // a key: one counter
  if constexpr (std::is_same_v<T, uint32_t>) return ids[i];       // string ids
  return T(i + 1);
}

class StoreColumns : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("kernalyse_columns_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& n) const { return (dir_ / n).string(); }
  fs::path dir_;
};

}  // namespace

TEST(StoreColumnsDoc, StoreMdDocumentsEveryColumnInOrder) {
  const auto doc = documented();
  const auto lists = listed();
  ASSERT_EQ(lists.size(), 7u);
  for (const auto& [table, cols] : lists) {
    auto it = doc.find(table);
    ASSERT_NE(it, doc.end()) << "docs/store.md has no section ## `/" << table << "`";
    EXPECT_EQ(it->second, cols) << "docs/store.md's /" << table
                                << " table differs from store.h's column list";
  }
}

TEST_F(StoreColumns, SortsPermuteEveryColumnWithItsRow) {
  constexpr size_t n = 50;
  Store s;
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < n; ++i) ids.push_back(s.strings.intern(std::to_string(1000 + i)));
  for_each_table(s, [&](const char* table, auto& t) {
    if (std::string_view(table) == "nccl") return;  // below: it follows the activities
    for_each_column(t, [&](const auto&, auto& col) { col.resize(n); });
    for_each_column(t, [&](const auto& def, auto& col) {
      using T = typename std::decay_t<decltype(col)>::value_type;
      for (size_t i = 0; i < n; ++i) col[i] = value<T>(table, def.name, i, n, ids);
    });
  });
  RankInfo r;
  r.source = "test";
  s.ranks = {r};
  std::vector<Store> parts;
  parts.push_back(s);
  Store m = merge_stores(std::move(parts));
  size_t checked = 0;
  for_each_table(m, [&](const char* table, const auto& t) {
    if (std::string_view(table) == "nccl") return;
    ASSERT_EQ(t.size(), n) << table;
    for_each_column(t, [&](const auto& def, const auto& col) {
      using T = typename std::decay_t<decltype(col)>::value_type;
      for (size_t j = 0; j < n; ++j)
        ASSERT_EQ(col[j], value<T>(table, def.name, n - 1 - j, n, ids))
            << "/" << table << "/" << def.name << " row " << j;
      ++checked;
    });
  });
  EXPECT_GE(checked, 40u);

  // NCCL rows sort by their activity: activities in order, nccl rows reversed.
  Store c;
  for (size_t i = 0; i < n; ++i) ids[i] = c.strings.intern(std::to_string(1000 + i));
  for_each_column(c.activities, [&](const auto& def, auto& col) {
    using T = typename std::decay_t<decltype(col)>::value_type;
    for (size_t i = 0; i < n; ++i)
      col.push_back(value<T>("activities", def.name, n - 1 - i, n, ids));
  });
  for_each_column(c.nccl, [&](const auto& def, auto& col) {
    using T = typename std::decay_t<decltype(col)>::value_type;
    for (size_t i = 0; i < n; ++i)
      col.push_back(std::string_view(def.name) == "activity"
                        ? T(n - 1 - i)
                        : value<T>("nccl", def.name, i, n, ids));
  });
  c.ranks = {r};
  parts.clear();
  parts.push_back(c);
  Store mc = merge_stores(std::move(parts));
  for_each_column(mc.nccl, [&](const auto& def, const auto& col) {
    using T = typename std::decay_t<decltype(col)>::value_type;
    ASSERT_EQ(col.size(), n);
    for (size_t j = 0; j < n; ++j)
      ASSERT_EQ(col[j], std::string_view(def.name) == "activity"
                            ? T(j)
                            : value<T>("nccl", def.name, n - 1 - j, n, ids))
          << "/nccl/" << def.name << " row " << j;
  });

  // Every column of every table survives HDF5 write and read as it was.
  write_store(m, path("all.h5"));
  Store back = read_store(path("all.h5"));
  for_each_table_pair(m, back, [&](const char* table, const auto& t, const auto& u) {
    for_each_column_pair(t, u, [&](const auto& def, const auto& x, const auto& y) {
      EXPECT_EQ(x, y) << "/" << table << "/" << def.name;
    });
  });
}

TEST_F(StoreColumns, ColumnsAProducerLeavesEmptyHoldUnknown) {
  // Only the Required columns filled: the rest is "unknown" after write/read and after merge.
  constexpr size_t n = 3;
  Store s;
  const uint32_t name = s.strings.intern("x");
  for_each_table(s, [&](const char*, auto& t) {
    for_each_column(t, [&](const auto& def, auto& col) {
      using T = typename std::decay_t<decltype(col)>::value_type;
      if (def.required()) col.assign(n, std::is_same_v<T, uint32_t> ? T(name) : T(0));
    });
  });
  size_t defaulted = 0;
  auto expect_unknown = [&](const Store& x, const char* what) {
    for_each_table(x, [&](const char* table, const auto& t) {
      for_each_column(t, [&](const auto& def, const auto& col) {
        if (def.required()) return;
        using T = typename std::decay_t<decltype(col)>::value_type;
        EXPECT_EQ(col, std::vector<T>(n, def.unknown)) << what << " /" << table << "/" << def.name;
        ++defaulted;
      });
    });
  };
  write_store(s, path("sparse.h5"));
  expect_unknown(read_store(path("sparse.h5")), "read back");
  std::vector<Store> parts;
  parts.push_back(s);
  expect_unknown(merge_stores(std::move(parts)), "merged");
  Store f = s;
  fill_unknown_columns(f);
  expect_unknown(f, "filled");
  EXPECT_GE(defaulted, 3 * 20u);
  // The unknown values the documentation names.
  EXPECT_EQ(f.activities.correlation[0], kNoCorrelation);
  EXPECT_EQ(f.activities.step[0], kNoStep);
  EXPECT_EQ(f.activities.kind[0], uint8_t(Kind::Other));
  EXPECT_EQ(f.nccl.peer[0], -1);
  EXPECT_EQ(f.nccl.n_channels[0], -1);
  EXPECT_EQ(f.nccl.comm_hash[0], 0u);
}
