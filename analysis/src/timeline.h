// Internal helpers shared by the cross-rank analyses (not a public header).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "kernalyse/analysis.h"
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

// The straggler ledger's collective matching (stragglers.cpp): one instance per (process group or
// kernel name, collective, Seq or occurrence), its arrivals one per rank (activity rows).
struct LedgerArrival {
  int32_t rank;
  uint32_t row;
};
struct LedgerInstance {
  std::string key, op;
  std::vector<LedgerArrival> arrivals;  // one per rank, sorted by rank
  std::vector<int32_t> expected;        // ranks that should take part
  int64_t msg_bytes = -1;
};
struct LedgerMatch {
  std::string method;  // "nccl (process group, collective, Seq)", "kernel (name, occurrence)", ...
  size_t ncomm = 0;    // communication kernels looked at
  std::vector<LedgerInstance> instances;
  std::vector<size_t> matched;    // complete on all expected ranks, by first start
  std::vector<size_t> unmatched;  // in the order first seen
};
// comm: per rank its communication kernels in start order; all_ranks: sorted; nccl_of: activity
// row → /nccl row (-1 none; may be empty when the store has no /nccl rows).
LedgerMatch match_ledger_collectives(const Store& s, const std::map<int32_t, std::vector<uint32_t>>& comm,
                                     const std::vector<int32_t>& all_ranks, const NameGroups& groups,
                                     const std::vector<int32_t>& nccl_of);

}  // namespace kernalyse::detail
