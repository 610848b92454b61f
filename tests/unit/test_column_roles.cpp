// The column roles of store.h against the operations that derive from them: clock alignment moves
// every time column, merging node stores renumbers every rank column, HTA's view rounds every
// time column. Walks every table, so a new table or column is covered without a change here
// (the defects this guards against: /ops left out of both hand-written lists).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <type_traits>

#include "kernalyse/clock_infer.h"
#include "kernalyse/crossrank.h"
#include "kernalyse/load.h"
#include "kernalyse/store.h"
#include "kernalyse/store_io.h"

namespace fs = std::filesystem;
using namespace kernalyse;

namespace {

constexpr int64_t kBase = 1'700'000'000'000'000'000;

// Every table with two rows, one of rank 0 and one of rank 1: times 1000.5 µs apart per column
// kind, every other column a valid value (string ids 1, nccl rows pointing at activities).
Store two_rank_store() {
  Store s;
  const uint32_t name = s.strings.intern("ncclDevKernel_AllReduce_Sum_f32_RING_LL");
  for_each_table(s, [&](const char*, auto& t) {
    for_each_column(t, [&](const auto& def, auto& col) {
      using T = typename std::decay_t<decltype(col)>::value_type;
      for (int r = 0; r < 2; ++r) {
        if constexpr (std::is_same_v<T, int64_t>) {
          if (is_time(def.role)) {
            col.push_back(kBase + 1'000'500 + (def.role == ColumnRole::End ? 2'000'250 : 0));
            continue;
          }
        }
        if (def.role == ColumnRole::Rank)
          col.push_back(T(r));
        else if (def.role == ColumnRole::String)
          col.push_back(T(name));
        else if (def.role == ColumnRole::Row)
          col.push_back(T(r));
        else
          col.push_back(def.unknown);
      }
    });
  });
  for (int r = 0; r < 2; ++r) {
    RankInfo ri;
    ri.rank = r;
    ri.host = "host" + std::to_string(r);
    ri.source = "rank" + std::to_string(r);
    ri.base_time_ns = kBase;
    s.ranks.push_back(ri);
  }
  return s;
}

// Each time column's value at row `row`, by "table.column".
std::map<std::string, int64_t> times(const Store& s, size_t row) {
  std::map<std::string, int64_t> out;
  for_each_table(s, [&](const char* table, const auto& t) {
    for_each_column(t, [&](const auto& def, const auto& col) {
      if constexpr (std::is_same_v<std::decay_t<decltype(col)>, std::vector<int64_t>>)
        if (is_time(def.role) && row < col.size())  // a table a view leaves empty has none
          out[std::string(table) + "." + def.name] = col[row];
    });
  });
  return out;
}

}  // namespace

TEST(ColumnRoles, EachRoleHasItsType) {
  size_t time_columns = 0;
  const Store s;
  for_each_table(s, [&](const char* table, const auto& t) {
    bool has_time = false;
    for_each_column(t, [&](const auto& def, const auto& col) {
      using T = typename std::decay_t<decltype(col)>::value_type;
      const std::string where = std::string(table) + "." + def.name;
      if (is_time(def.role)) {
        EXPECT_TRUE((std::is_same_v<T, int64_t>)) << where << ": times are int64 ns";
        has_time = true;
        ++time_columns;
      }
      if (def.role == ColumnRole::Rank) {
        EXPECT_TRUE((std::is_same_v<T, int32_t>)) << where;
      }
      if (def.role == ColumnRole::String) {
        EXPECT_TRUE((std::is_same_v<T, uint32_t>)) << where;
      }
      if (def.role == ColumnRole::Row) {
        EXPECT_TRUE((std::is_same_v<T, uint64_t>)) << where;
      }
      // A uint32 column that is not a string id would be remapped as one when stores merge.
      if (std::is_same_v<T, uint32_t>) {
        EXPECT_EQ(def.role, ColumnRole::String) << where;
      }
    });
    if (has_time) {
      EXPECT_NE(rank_column(t), nullptr) << table << " has times but no rank column";
    }
  });
  EXPECT_GE(time_columns, 9u);  // activities, launches, annotations, ops (2 each), counters (1)
}

TEST(ColumnRoles, ClockAlignmentMovesEveryTimeColumnOfItsRank) {
  Store s = two_rank_store();
  const auto before0 = times(s, 0), before1 = times(s, 1);
  ClockInference inf;
  inf.ok = true;
  inf.method = "inferred from 3 collectives across 2 hosts";
  inf.t_ref_ns = kBase;
  HostClock h0, h1;
  h0.host = "host0", h0.ranks = {0}, h0.reference = true;
  h1.host = "host1", h1.ranks = {1}, h1.offset_ns = -3'000'000, h1.uncertainty_ns = 500;
  inf.hosts = {h0, h1};
  apply_clock_inference(s, inf);
  const auto after0 = times(s, 0), after1 = times(s, 1);
  ASSERT_EQ(after1.size(), before1.size());
  for (const auto& [col, t] : before1)
    EXPECT_EQ(after1.at(col), t - 3'000'000) << col << " of rank 1 was not moved";
  EXPECT_EQ(after0, before0) << "the reference host's times moved";
  EXPECT_TRUE(after1.count("ops.start_ns") && after1.count("ops.end_ns"));
}

TEST(ColumnRoles, ShiftRanksRenumbersEveryRankColumn) {
  Store s = two_rank_store();
  shift_ranks(s, 8);
  size_t rank_columns = 0;
  for_each_table(s, [&](const char* table, const auto& t) {
    for_each_column(t, [&](const auto& def, const auto& col) {
      if (def.role != ColumnRole::Rank) return;
      ++rank_columns;
      if constexpr (std::is_same_v<std::decay_t<decltype(col)>, std::vector<int32_t>>) {
        EXPECT_EQ(col, (std::vector<int32_t>{8, 9})) << table << "." << def.name;
      }
    });
  });
  EXPECT_EQ(rank_columns, 5u);  // every table but /nccl (its rows follow their activity)
  EXPECT_EQ(s.ranks[0].rank, 8);
  EXPECT_EQ(s.ranks[1].rank, 9);
}

TEST(ColumnRoles, MergingNodeStoresKeepsEveryTablesRows) {
  const fs::path dir = fs::temp_directory_path() / ("kernalyse_roles_" + std::to_string(getpid()));
  fs::create_directories(dir);
  // Two node stores whose ranks both start at 0 (start-order ranks of two nodes).
  for (const char* n : {"a.h5", "b.h5"}) {
    Store s = two_rank_store();
    s.ranks[0].host = s.ranks[1].host = n;
    s.ranks[0].clock_method = s.ranks[1].clock_method = "MPI ping-pong (within the node)";
    write_store(s, (dir / n).string(), WriteOptions{true});
  }
  LoadOptions lo;
  lo.align = "off";
  lo.output = (dir / "m.h5").string();
  merge_node_stores({(dir / "a.h5").string(), (dir / "b.h5").string()}, lo);
  const Store m = read_store(lo.output);
  ASSERT_EQ(m.ranks.size(), 4u);
  for_each_table(m, [&](const char* table, const auto& t) {
    const auto* rank = rank_column(t);
    if (!rank) return;
    ASSERT_EQ(rank->size(), 4u) << table;
    for (int32_t r = 0; r < 4; ++r)
      EXPECT_EQ(std::count(rank->begin(), rank->end(), r), 1) << table << " rank " << r;
  });
  fs::remove_all(dir);
}

TEST(ColumnRoles, HtaViewRoundsTimesAndKeepsEveryColumn) {
  Store s = two_rank_store();
  const Store v = hta_view(s);
  for (size_t row = 0; row < 2; ++row)
    for (const auto& [col, t] : times(v, row))
      if (col.rfind("activities.", 0) == 0 || col.rfind("launches.", 0) == 0) {
        EXPECT_EQ((t - kBase) % 1000, 0) << col << ": HTA's times are whole µs";
      }
  EXPECT_EQ(v.activities.start_ns[0], kBase + 1'001'000);  // start rounded up
  EXPECT_EQ(v.activities.end_ns[0], kBase + 3'000'000);    // end rounded down
  for_each_column(v.activities, [&](const auto& def, const auto& col) {
    EXPECT_EQ(col.size(), 2u) << "activities." << def.name;
  });
}
