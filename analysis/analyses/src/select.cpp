// Row selection (--rank, --step) and name grouping shared by analyses.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernalyse/analysis.h"
#include "kernalyse/classify.h"
#include "kernalyse/error.h"

namespace kernalyse {
namespace {

// Ranks the store knows: the rank table, else (hand-built or partial stores) the rank column.
std::vector<int32_t> store_ranks(const Store& s) {
  std::vector<int32_t> out;
  for (const RankInfo& r : s.ranks) out.push_back(r.rank);
  if (out.empty()) {
    // The column is sorted by rank, so runs make this cheap; unique() handles unsorted input too.
    const auto& col = s.activities.rank;
    for (size_t i = 0; i < col.size(); ++i)
      if (out.empty() || out.back() != col[i]) out.push_back(col[i]);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

// "0-3,5,7-8"
std::string rank_ranges(const std::vector<int32_t>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += std::to_string(ranks[i]);
    if (j > i) out += '-' + std::to_string(ranks[j]);
    i = j + 1;
  }
  return out;
}

std::string ranks_phrase(const std::vector<int32_t>& ranks) {
  if (ranks.empty()) return "no ranks";
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_ranges(ranks);
}

bool step_exists(const Store& s, const Filter& f) {
  const int32_t n = *f.step;
  const Annotations& a = s.annotations;
  const bool ann_rank = a.rank.size() == a.size();
  for (size_t i = 0; i < a.step.size(); ++i) {
    if (a.step[i] != n) continue;
    if (i < a.kind.size() && a.kind[i] != static_cast<uint8_t>(AnnotationKind::Step)) continue;
    if (f.rank && ann_rank && a.rank[i] != *f.rank) continue;
    return true;
  }
  // Annotations may not have been loaded; activities carry the step they were assigned.
  const Activities& act = s.activities;
  for (size_t i = 0; i < act.step.size(); ++i)
    if (act.step[i] == n && (!f.rank || act.rank[i] == *f.rank)) return true;
  return false;
}

}  // namespace

std::string describe_filter(const Store& s, const Filter& f) {
  std::string out = f.rank ? "rank " + std::to_string(*f.rank) : ranks_phrase(store_ranks(s));
  out += f.step ? ", ProfilerStep#" + std::to_string(*f.step) : ", all steps";
  return out;
}

bool filter_applies(const Store& s, const Filter& f) {
  if (f.rank) {
    const auto ranks = store_ranks(s);
    if (!std::binary_search(ranks.begin(), ranks.end(), *f.rank)) return false;
  }
  return !f.step || s.activities.step.size() != s.activities.size() || step_exists(s, f);
}

std::vector<uint32_t> select_activities(const Store& s, const Filter& f) {
  const Activities& a = s.activities;
  const size_t n = a.size();
  if (n > UINT32_MAX) throw Error("store has more than 2^32 activities; not supported");
  if (f.rank) {
    const auto ranks = store_ranks(s);
    if (!std::binary_search(ranks.begin(), ranks.end(), *f.rank))
      throw Error("no rank " + std::to_string(*f.rank) + " in store (" + ranks_phrase(ranks) + ")");
  }
  if (f.step) {
    if (a.step.size() != n) throw Error("--step needs the activities' step column");
    if (!step_exists(s, f)) {
      const std::vector<int32_t> where = f.rank ? std::vector<int32_t>{*f.rank} : store_ranks(s);
      throw Error("no ProfilerStep#" + std::to_string(*f.step) + " in " + ranks_phrase(where));
    }
  }
  std::vector<uint32_t> out;
  if (!f.rank && !f.step) {
    out.resize(n);
    for (size_t i = 0; i < n; ++i) out[i] = static_cast<uint32_t>(i);
    return out;
  }
  size_t lo = 0, hi = n;
  if (f.rank && std::is_sorted(a.rank.begin(), a.rank.end())) {
    // Sorted store: the rank is one contiguous run; skip the rest.
    lo = std::lower_bound(a.rank.begin(), a.rank.end(), *f.rank) - a.rank.begin();
    hi = std::upper_bound(a.rank.begin(), a.rank.end(), *f.rank) - a.rank.begin();
  }
  for (size_t i = lo; i < hi; ++i) {
    if (f.rank && a.rank[i] != *f.rank) continue;
    if (f.step && a.step[i] != *f.step) continue;
    out.push_back(static_cast<uint32_t>(i));
  }
  return out;
}

NameGroups group_names(const Store& s, const std::vector<uint32_t>& rows, bool verbose,
                       bool kernels_only) {
  const Activities& a = s.activities;
  const size_t nstr = s.strings.size();
  NameGroups g;
  g.group_of.assign(nstr, -1);
  // Mark used ids first so each distinct name is simplified once, not once per row.
  std::vector<uint8_t> used(nstr, 0);
  const auto kernel = static_cast<uint8_t>(Kind::Kernel);
  for (uint32_t i : rows) {
    if (kernels_only && a.kind[i] != kernel) continue;
    const uint32_t id = a.name_id[i];
    if (id >= nstr) throw Error("activity name id " + std::to_string(id) + " out of range");
    used[id] = 1;
  }
  return group_used_names(s, used, verbose);
}

NameGroups group_used_names(const Store& s, const std::vector<uint8_t>& used, bool verbose) {
  const size_t nstr = s.strings.size();
  NameGroups g;
  g.group_of.assign(nstr, -1);
  std::unordered_map<std::string, int32_t> by_name;
  for (size_t id = 0; id < nstr && id < used.size(); ++id) {
    if (!used[id]) continue;
    std::string name = verbose ? s.strings.at(static_cast<uint32_t>(id))
                               : simplify_kernel_name(s.strings.at(static_cast<uint32_t>(id)));
    auto [it, fresh] = by_name.emplace(name, static_cast<int32_t>(g.names.size()));
    if (fresh) g.names.push_back(std::move(name));
    g.group_of[id] = it->second;
  }
  return g;
}

}  // namespace kernalyse
