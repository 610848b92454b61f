// Internal helpers shared by the cross-rank analyses (not a public header).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

#include "kernalyse/store.h"

namespace kernalyse::detail {

// Rows of one rank given in store order (device, stream, start) → start order, by merging the
// already-sorted per-stream runs (O(n log streams)) instead of sorting.
std::vector<uint32_t> merge_streams_by_start(const Store& s, const std::vector<uint32_t>& rows);

// (rank, correlation) → launch start. CUPTI correlation ids are dense per process, so a flat
// array usually replaces a hash map (8 M launches: 64 MB instead of ~500 MB); sparse ids fall
// back to a sorted vector and binary search.
class LaunchIndex {
 public:
  static constexpr int64_t kNone = INT64_MIN;
  explicit LaunchIndex(const Store& s);
  int64_t find(int32_t rank, int64_t correlation) const;

 private:
  struct PerRank {
    int64_t lo = 0;
    std::vector<int64_t> dense;                       // start by correlation - lo
    std::vector<std::pair<int64_t, int64_t>> sparse;  // (correlation, start), sorted
  };
  std::map<int32_t, PerRank> ranks_;
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
