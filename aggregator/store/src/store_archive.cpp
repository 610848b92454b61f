// Stores as Archive bytes (kernalyse/store_archive.h).
#include "kernalyse/store_archive.h"

#include <string>
#include <utility>
#include <vector>

namespace kernalyse {

namespace {

// The attributes in one place for both directions.
template <class A, class F>
void for_each_attr(A& a, F&& f) {
  f(a.schema_version), f(a.tool_version), f(a.produced_by), f(a.command_line);
  f(a.created_utc), f(a.clock_domain), f(a.emulated);
}

}  // namespace

void put_store(Archive& ar, const Store& s) {
  for_each_attr(s.attrs, [&](const auto& v) { ar.put(v); });
  ar.put(s.strings.all());
  ar.put(static_cast<uint64_t>(s.ranks.size()));
  for (const RankInfo& r : s.ranks)
    for_each_rank_field([&](const auto&, auto member) { ar.put(r.*member); });
  put_tables(ar, s);
}

void put_tables(Archive& ar, const Store& s) {
  for_each_table(s, [&](const char*, const auto& t) {
    for_each_column(t, [&](const auto&, const auto& col) { ar.put(col); });
  });
}

void get_tables(Archive& ar, Store& s) {
  for_each_table(s, [&](const char*, auto& t) {
    for_each_column(t, [&](const auto&, auto& col) { ar.get(col); });
  });
}

void get_store(Archive& ar, Store& s) {
  for_each_attr(s.attrs, [&](auto& v) { ar.get(v); });
  s.strings.assign(ar.get<std::vector<std::string>>());
  s.ranks.resize(ar.get<uint64_t>());
  for (RankInfo& r : s.ranks)
    for_each_rank_field([&](const auto&, auto member) { ar.get(r.*member); });
  get_tables(ar, s);
}

void all_gather_tables(Store& s, const Spread& spread) {
  const auto procs = static_cast<size_t>(spread.processes);
  Archive mine;
  mine.put(static_cast<uint64_t>(s.activities.size()));
  for_each_table(s, [&](const char*, const auto& t) {
    for_each_column(t, [&](const auto&, const auto& col) { mine.put<uint64_t>(col.size()); });
  });
  Archive all(spread.all_gather(mine.bytes()));
  std::vector<uint64_t> activities(procs);  // per process: its activity rows
  std::vector<std::vector<size_t>> rows;    // per column: per process, its rows
  for (size_t p = 0; p < procs; ++p) {
    activities[p] = all.get<uint64_t>();
    size_t k = 0;
    for_each_table(s, [&](const char*, const auto& t) {
      for_each_column(t, [&](const auto&, const auto&) {
        if (k == rows.size()) rows.emplace_back(procs);
        rows[k++][p] = all.get<uint64_t>();
      });
    });
  }
  size_t k = 0;
  std::vector<size_t> nccl_rows;  // per process: its /nccl rows
  for_each_table(s, [&](const char*, auto& t) {
    for_each_column(t, [&](const auto&, auto& col) {
      std::decay_t<decltype(col)> whole;
      std::vector<size_t> bytes(procs);
      size_t n = 0;
      for (size_t p = 0; p < procs; ++p) bytes[p] = rows[k][p] * sizeof(col[0]), n += rows[k][p];
      if (static_cast<const void*>(&col) == &s.nccl.activity) nccl_rows = rows[k];
      ++k;
      whole.resize(n);
      spread.all_gather_into(col.data(), whole.data(), bytes);
      col = std::move(whole);
    });
  });
  size_t at = 0, before = 0;
  for (size_t p = 0; p < procs && p < nccl_rows.size(); ++p) {
    for (size_t i = at; i < at + nccl_rows[p]; ++i)
      if (s.nccl.activity[i] != UINT64_MAX) s.nccl.activity[i] += before;
    at += nccl_rows[p], before += activities[p];
  }
}

}  // namespace kernalyse
