// The one collective matcher (rule in docs/analyses.md, "Collective matching"): communication
// kernels of the same collective instance on different ranks. The straggler ledger, the Perfetto
// export's flows, waits and `collective id`s and the HTML heatmap all use it, so an instance has
// one id everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernalyse/store.h"

namespace kernalyse {

struct CollectiveArrival {
  int32_t rank;
  uint32_t row;       // activity row of the rank's communication kernel
  int32_t nccl = -1;  // its /nccl row, -1 if it has none
};

struct Collective {
  int64_t id = 0;  // index in CollectiveMatch::matched: instances in order of first arrival
  std::string op;  // collective name (NCCL metadata) or the op parsed from the kernel name
  std::vector<CollectiveArrival> arrivals;  // one per rank, sorted by rank
  std::vector<int32_t> expected;            // ranks that take part (all of them arrived)
  int64_t msg_bytes = -1;                   // largest message size among the arrivals, -1 unknown
};

struct UnmatchedCollective {
  std::string op;
  std::vector<int32_t> ranks_present;
  size_t ranks_expected = 0;
};

struct CollectiveMatch {
  std::string method;          // "collector (communicator, collective, seq)", ..., "none"
  size_t comm_kernels = 0;     // communication kernels among the rows
  std::vector<int32_t> ranks;  // ranks with GPU work among the rows, sorted
  std::vector<Collective> matched;
  // Point-to-point pairs (op "send/recv"): a Send and the Recv of another rank that complete
  // together, ids after the last of `matched`. Not in the ledger, which ranks collectives.
  std::vector<Collective> p2p;
  size_t unmatched_count = 0;
  std::vector<UnmatchedCollective> unmatched;  // the first kMaxUnmatchedListed, in key order
  static constexpr size_t kMaxUnmatchedListed = 50;
};

// Matches the communication kernels among `rows` (activity rows, any order; pass every row for
// whole-store ids). Throws nothing on odd input: kernels that match nothing are counted unmatched.
CollectiveMatch match_collectives(const Store& s, const std::vector<uint32_t>& rows);

// Per activity row: the id of the matched collective it belongs to, -1 for none (also for p2p).
std::vector<int64_t> collective_of_row(const Store& s, const CollectiveMatch& m);

// What identified the instances, in three words: "operation id" (NCCL's own id, the same on every
// rank), "(pg, seq)" (process group or communicator and sequence number), "order" (the k-th
// occurrence), "none" (nothing to match).
std::string matched_by(const std::string& method);

// "_allgather_base", "AllGather" -> "allgatherbase", "allgather": letters only, lower case.
std::string collective_op_key(const std::string& op);

}  // namespace kernalyse
