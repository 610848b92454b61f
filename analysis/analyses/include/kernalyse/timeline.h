// Internal helpers shared by the cross-rank analyses (not a public header).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <span>
#include <unordered_map>
#include <vector>

#include "kernalyse/analysis.h"
#include "kernalyse/store.h"

namespace kernalyse::detail {

// Adds [s, e) to a union kept as disjoint intervals, fed in start order; touching intervals join
// (HTA: a new group when ts > the max end so far).
inline void push_merge(std::vector<Interval>& m, int64_t s, int64_t e) {
  if (!m.empty() && s <= m.back().end)
    m.back().end = std::max(m.back().end, e);
  else
    m.push_back({s, e});
}

// Rows of one rank given in store order (device, stream, start) → start order, by merging the
// already-sorted per-stream runs (O(n log streams)) instead of sorting.
std::vector<uint32_t> merge_streams_by_start(const Store& s, std::span<const uint32_t> rows);

// A selection's rows split per rank, ranks ascending, each rank's rows in selection order. The
// store keeps a rank's rows contiguous, so the split is usually views into the selection (no
// copy; `rows` must outlive it); otherwise the rows are regrouped into own storage.
class RowsByRank {
 public:
  RowsByRank(const Store& s, const std::vector<uint32_t>& rows);
  RowsByRank(const RowsByRank&) = delete;  // the views may point into its own storage
  RowsByRank& operator=(const RowsByRank&) = delete;
  size_t size() const { return ranks_.size(); }
  int32_t rank(size_t k) const { return ranks_[k].first; }
  std::span<const uint32_t> rows(size_t k) const { return ranks_[k].second; }

 private:
  std::vector<uint32_t> regrouped_;
  std::vector<std::pair<int32_t, std::span<const uint32_t>>> ranks_;
};

// (rank, correlation) → launch row (-1: none), for joins that need more of the launch than its
// start (its thread, its name). Correlation ids are dense per process, so a flat array per
// rank replaces a hash map where it can.
class LaunchRows {
 public:
  explicit LaunchRows(const LaunchCalls& l) {
    const size_t n = l.size();
    for (size_t b = 0; b < n;) {
      size_t e = b;
      int64_t lo = INT64_MAX, hi = INT64_MIN;
      while (e < n && l.rank[e] == l.rank[b]) {
        if (l.correlation[e] >= 0)
          lo = std::min(lo, l.correlation[e]), hi = std::max(hi, l.correlation[e]);
        ++e;
      }
      PerRank& p = ranks_[l.rank[b]];
      const bool dense = lo <= hi && p.dense.empty() && p.sparse.empty() &&
                         static_cast<uint64_t>(hi - lo) < 4 * (e - b) + 1024;
      if (dense) {
        p.lo = lo;
        p.dense.assign(static_cast<size_t>(hi - lo) + 1, UINT32_MAX);
      }
      for (size_t i = b; i < e; ++i) {
        const int64_t c = l.correlation[i];
        if (c < 0) continue;
        if (dense)
          p.dense[static_cast<size_t>(c - lo)] = static_cast<uint32_t>(i);
        else
          p.sparse.emplace(c, static_cast<uint32_t>(i));
      }
      b = e;
    }
  }
  int64_t find(int32_t rank, int64_t corr) const {  // thread-safe: no cache
    if (corr < 0) return -1;
    auto pr = ranks_.find(rank);
    if (pr == ranks_.end()) return -1;
    const PerRank& p = pr->second;
    if (!p.dense.empty()) {
      const int64_t k = corr - p.lo;
      const uint32_t r = k < 0 || k >= static_cast<int64_t>(p.dense.size())
                             ? UINT32_MAX
                             : p.dense[static_cast<size_t>(k)];
      if (r != UINT32_MAX) return static_cast<int64_t>(r);  // int64: -1 must stay signed
      if (p.sparse.empty()) return -1;
    }
    // Sparse ids, or a rank whose launches come in more than one run (an unsorted table).
    auto it = p.sparse.find(corr);
    return it == p.sparse.end() ? -1 : static_cast<int64_t>(it->second);
  }

 private:
  struct PerRank {
    int64_t lo = 0;
    std::vector<uint32_t> dense;
    std::unordered_map<int64_t, uint32_t> sparse;
  };
  std::map<int32_t, PerRank> ranks_;
};

// (rank, correlation) → launch start, for the joins that need only that (stragglers' host delay,
// the idle split, the roofline's host wait): LaunchRows and the start column.
class LaunchIndex {
 public:
  static constexpr int64_t kNone = INT64_MIN;
  explicit LaunchIndex(const Store& s) : rows_(s.launches), start_(s.launches.start_ns) {}
  int64_t find(int32_t rank, int64_t correlation) const {
    const int64_t r = rows_.find(rank, correlation);
    return r < 0 ? kNone : start_[static_cast<size_t>(r)];
  }

 private:
  LaunchRows rows_;
  const std::vector<int64_t>& start_;
};

// The innermost NVTX / user range on a CPU thread enclosing a time (ranges on one thread nest).
// Of two ranges starting together the longer is taken to enclose the other. Used to attribute a
// kernel to the range its launch ran in (--diff's replaced groups, the critical path's roll-up).
class RangeFinder {
 public:
  explicit RangeFinder(const Annotations& an);
  bool empty() const { return by_thread_.empty(); }
  // Name id of the innermost range on (rank, tid) containing t; 0 (the empty string) when none.
  uint32_t find(int32_t rank, int64_t tid, int64_t t) const;

 private:
  struct Ranges {
    std::vector<uint32_t> idx;    // annotation rows by (start, longer first)
    std::vector<int32_t> parent;  // enclosing range's position in idx, -1 if none
  };
  const Annotations& an_;
  std::map<std::pair<int32_t, int64_t>, Ranges> by_thread_;
};

}  // namespace kernalyse::detail
