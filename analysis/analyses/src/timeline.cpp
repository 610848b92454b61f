#include "kernalyse/timeline.h"

#include <algorithm>
#include <queue>

namespace kernalyse::detail {

std::vector<uint32_t> merge_streams_by_start(const Store& s, std::span<const uint32_t> rows) {
  const auto& a = s.activities;
  struct Run {
    size_t pos, end;
  };
  std::vector<Run> runs;
  bool sorted_runs = true;
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && a.device[rows[j]] == a.device[rows[i]] &&
           a.stream[rows[j]] == a.stream[rows[i]]) {
      sorted_runs = sorted_runs && a.start_ns[rows[j - 1]] <= a.start_ns[rows[j]];
      ++j;
    }
    runs.push_back({i, j});
    i = j;
  }
  if (!sorted_runs) {  // not in store order: plain sort
    std::vector<uint32_t> out(rows.begin(), rows.end());
    std::stable_sort(out.begin(), out.end(),
                     [&](uint32_t x, uint32_t y) { return a.start_ns[x] < a.start_ns[y]; });
    return out;
  }
  if (runs.size() <= 1) return {rows.begin(), rows.end()};
  using Item = std::pair<int64_t, size_t>;  // (start, run)
  std::priority_queue<Item, std::vector<Item>, std::greater<>> heap;
  for (size_t r = 0; r < runs.size(); ++r) heap.emplace(a.start_ns[rows[runs[r].pos]], r);
  std::vector<uint32_t> out;
  out.reserve(rows.size());
  while (!heap.empty()) {
    size_t r = heap.top().second;
    heap.pop();
    out.push_back(rows[runs[r].pos++]);
    if (runs[r].pos < runs[r].end) heap.emplace(a.start_ns[rows[runs[r].pos]], r);
  }
  return out;
}

RowsByRank::RowsByRank(const Store& s, const std::vector<uint32_t>& rows) {
  const auto& rank = s.activities.rank;
  std::vector<std::pair<int32_t, std::span<const uint32_t>>> runs;
  for (size_t i = 0; i < rows.size();) {
    size_t j = i + 1;
    while (j < rows.size() && rank[rows[j]] == rank[rows[i]]) ++j;
    runs.emplace_back(rank[rows[i]], std::span<const uint32_t>(rows).subspan(i, j - i));
    i = j;
  }
  std::stable_sort(runs.begin(), runs.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  bool contiguous = true;  // one run per rank
  for (size_t k = 1; k < runs.size(); ++k)
    contiguous = contiguous && runs[k].first != runs[k - 1].first;
  if (contiguous) {
    ranks_ = std::move(runs);
    return;
  }
  regrouped_.reserve(rows.size());
  for (size_t k = 0; k < runs.size();) {  // runs of one rank are adjacent now, in row order
    const size_t from = regrouped_.size();
    const int32_t r = runs[k].first;
    for (; k < runs.size() && runs[k].first == r; ++k)
      regrouped_.insert(regrouped_.end(), runs[k].second.begin(), runs[k].second.end());
    ranks_.emplace_back(
        r, std::span<const uint32_t>(regrouped_).subspan(from, regrouped_.size() - from));
  }
}

RangeFinder::RangeFinder(const Annotations& an) : an_(an) {
  for (size_t i = 0; i < an.size(); ++i) {
    const auto k = static_cast<AnnotationKind>(an.kind[i]);
    if (k == AnnotationKind::User || k == AnnotationKind::Nvtx)
      by_thread_[{an.rank[i], an.tid[i]}].idx.push_back(static_cast<uint32_t>(i));
  }
  for (auto& [key, r] : by_thread_) {
    std::stable_sort(r.idx.begin(), r.idx.end(), [&](uint32_t x, uint32_t y) {
      return an.start_ns[x] != an.start_ns[y] ? an.start_ns[x] < an.start_ns[y]
                                              : an.end_ns[x] > an.end_ns[y];
    });
    std::vector<int32_t> open;
    r.parent.resize(r.idx.size());
    for (size_t q = 0; q < r.idx.size(); ++q) {
      while (!open.empty() && an.end_ns[r.idx[open.back()]] < an.start_ns[r.idx[q]])
        open.pop_back();
      r.parent[q] = open.empty() ? -1 : open.back();
      open.push_back(static_cast<int32_t>(q));
    }
  }
}

uint32_t RangeFinder::find(int32_t rank, int64_t tid, int64_t t) const {
  auto it = by_thread_.find({rank, tid});
  if (it == by_thread_.end()) return 0;
  const Ranges& r = it->second;
  auto p = std::upper_bound(r.idx.begin(), r.idx.end(), t,
                            [&](int64_t ts, uint32_t x) { return ts < an_.start_ns[x]; });
  int32_t q = static_cast<int32_t>(p - r.idx.begin()) - 1;  // last range starting at or before t
  while (q >= 0 && an_.end_ns[r.idx[static_cast<size_t>(q)]] < t) q = r.parent[q];
  return q >= 0 ? an_.name_id[r.idx[static_cast<size_t>(q)]] : 0;
}

}  // namespace kernalyse::detail
