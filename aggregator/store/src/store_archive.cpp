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

}  // namespace kernalyse
