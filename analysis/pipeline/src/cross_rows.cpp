// The cross-rank rows of a run (cross_rows.h).
#include "cross_rows.h"

#include <algorithm>
#include <string>

#include "kernalyse/archive.h"
#include "kernalyse/store_archive.h"

namespace kernalyse::detail {

namespace {

// Rows `rows` of `src` appended to `dst`, column by column (a column the reader skipped, empty
// in the slice, stays empty).
template <class Tab>
void append_rows(Tab& dst, const Tab& src, const std::vector<uint32_t>& rows) {
  const size_t n = src.size();
  for_each_column_pair(dst, src, [&](const auto&, auto& d, const auto& c) {
    if (c.size() != n) return;
    for (uint32_t i : rows) d.push_back(c[i]);
  });
}

}  // namespace

CrossRows::CrossRows(const Store& header) {
  store.attrs = header.attrs;
  store.strings = header.strings;
  store.ranks = header.ranks;
  kernel_names.assign(header.strings.size(), 0);
  mark.assign(header.strings.size(), 0);
  for (uint32_t id = 0; id < header.strings.size(); ++id) {
    const std::string& name = header.strings.at(id);
    mark[id] = name.rfind("ncclNetIsend(): ", 0) == 0 || name.rfind("ncclNetRecvTest(): ", 0) == 0;
    if (name == kCounterGpuMemory || name == kCounterPower) counter_ids.push_back(id);
  }
}

void CrossRows::add(const Store& s) {
  activities(s);
  std::vector<uint32_t> rows;
  const Annotations& an = s.annotations;
  for (uint32_t i = 0; i < an.size(); ++i)
    if (an.kind[i] == static_cast<uint8_t>(AnnotationKind::Nvtx) && an.name_id[i] < mark.size() &&
        mark[an.name_id[i]])
      rows.push_back(i);
  append_rows(store.annotations, an, rows);
  rows.clear();
  const Counters& k = s.counters;
  for (uint32_t i = 0; i < k.size(); ++i)
    if (std::find(counter_ids.begin(), counter_ids.end(), k.name_id[i]) != counter_ids.end())
      rows.push_back(i);
  append_rows(store.counters, k, rows);
}

std::vector<uint32_t> cross_activity_rows(const Store& s) {
  const Activities& a = s.activities;
  std::vector<uint8_t> keep(a.size(), 0);
  for (size_t j = 0; j < s.nccl.size(); ++j)
    if (s.nccl.activity[j] < a.size()) keep[s.nccl.activity[j]] = 1;
  const auto kernel = static_cast<uint8_t>(Kind::Kernel);
  int32_t rank_with_gpu = INT32_MIN;
  std::vector<std::pair<int32_t, uint32_t>> first_gpu;  // per rank of the slice
  for (uint32_t i = 0; i < a.size(); ++i) {
    if (a.kind[i] == kernel && a.category[i] == static_cast<uint8_t>(Category::Communication))
      keep[i] = 1;
    if (is_gpu_work(static_cast<Kind>(a.kind[i])) && a.rank[i] != rank_with_gpu) {
      rank_with_gpu = a.rank[i];
      first_gpu.emplace_back(a.rank[i], i);
    }
  }
  // One scan for the ranks with a kept row (a part of an import holds many ranks).
  std::vector<int32_t> kept_ranks;
  for (uint32_t j = 0; j < a.size(); ++j)
    if (keep[j] && (kept_ranks.empty() || kept_ranks.back() != a.rank[j]))
      kept_ranks.push_back(a.rank[j]);
  std::sort(kept_ranks.begin(), kept_ranks.end());
  for (auto [r, i] : first_gpu)
    if (!std::binary_search(kept_ranks.begin(), kept_ranks.end(), r)) keep[i] = 1;
  std::vector<uint32_t> rows;
  for (uint32_t i = 0; i < a.size(); ++i)
    if (keep[i]) rows.push_back(i);
  return rows;
}

void CrossRows::activities(const Store& s) {
  const Activities& a = s.activities;
  const auto kernel = static_cast<uint8_t>(Kind::Kernel);
  for (uint32_t i = 0; i < a.size(); ++i)
    if (a.kind[i] == kernel && a.name_id[i] < kernel_names.size()) kernel_names[a.name_id[i]] = 1;
  const std::vector<uint32_t> rows = cross_activity_rows(s);
  std::vector<uint64_t> at(a.size(), UINT64_MAX);  // slice row → cross row
  const size_t base = store.activities.size();
  for (size_t k = 0; k < rows.size(); ++k) at[rows[k]] = base + k;
  append_rows(store.activities, a, rows);
  std::vector<uint32_t> nrows(s.nccl.size());
  for (uint32_t j = 0; j < nrows.size(); ++j) nrows[j] = j;
  const size_t nbase = store.nccl.size();
  append_rows(store.nccl, s.nccl, nrows);
  for (size_t j = nbase; j < store.nccl.size(); ++j)
    store.nccl.activity[j] = s.nccl.activity[j - nbase] < a.size()
                                 ? at[s.nccl.activity[j - nbase]]
                                 : UINT64_MAX;  // out of range, as it was
}

std::pair<size_t, size_t> own_slices(size_t n, const Spread* spread) {
  const size_t p = spread ? static_cast<size_t>(spread->process) : 0;
  const size_t procs = spread ? static_cast<size_t>(std::max(spread->processes, 1)) : 1;
  return {n * p / procs, n * (p + 1) / procs};
}

// The cross-rank rows of every process, in rank order, on every process (all_gather_tables), and
// the kernels' name marks.
void exchange_cross(CrossRows& c, const Spread& spread) {
  Archive mine;
  mine.put(c.kernel_names);
  Archive all(spread.all_gather(mine.bytes()));
  for (int p = 0; p < spread.processes; ++p) {
    const auto names = all.get<std::vector<uint8_t>>();
    for (size_t i = 0; i < names.size() && i < c.kernel_names.size(); ++i)
      c.kernel_names[i] |= names[i];
  }
  all_gather_tables(c.store, spread);
}

}  // namespace kernalyse::detail
