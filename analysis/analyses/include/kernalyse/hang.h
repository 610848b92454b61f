// Hang and desync report from a run's spool files (kernalyse-merge --spool DIR --hang): per
// communicator, the last collective each rank entered and completed, the collective the others
// wait in and the ranks that never entered it, and collectives whose op or size differs between
// ranks at the same sequence number (as PyTorch's NCCL Flight Recorder reports them for its
// users, but from the collector's CollMark records). No MPI, no store: works on a killed job.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kernalyse {

// One rank on one communicator.
struct CommRankProgress {
  int32_t rank = 0;           // the run's rank (spool)
  int32_t comm_rank = -1;     // its rank in the communicator
  int64_t last_entered = -1;  // sequence number, -1: none
  int64_t last_completed = -1;
  std::string last_entered_op;  // "AllReduce", ...
  int64_t last_entered_bytes = 0;
  bool waiting = false;  // entered last_entered and never completed it
};

struct CommHang {
  uint64_t comm_hash = 0;
  int32_t nranks = 0;                   // communicator size as the ranks recorded it
  std::vector<CommRankProgress> ranks;  // ranks that recorded anything on it, by rank
  int64_t stuck_seq = -1;               // lowest collective entered but not completed; -1: none
  std::string stuck_op;                 // its op and size (as the waiting ranks entered it)
  int64_t stuck_bytes = 0;
  std::vector<int32_t> waiting;        // ranks inside stuck_seq
  std::vector<int32_t> never_entered;  // ranks on the communicator that did not reach it
  int32_t unseen = 0;                  // members that recorded nothing on it at all
  // No rank waiting, but the ranks stopped at different collectives (a killed job whose
  // "completed" marks come at launch, as NCCL's for collectives without network; or a rank that
  // skipped one and went on): the furthest collective entered, and the ranks that did not.
  int64_t front_seq = -1;
  std::vector<int32_t> behind;
};

struct CollMismatch {
  uint64_t comm_hash = 0;
  int64_t seq = 0;
  struct Side {
    std::string op;
    int64_t bytes = 0;
    std::vector<int32_t> ranks;
  };
  std::vector<Side> sides;  // one per distinct (op, bytes), largest group first
};

struct HangReport {
  std::string dir;
  int32_t ranks = 0;            // spool files read
  int64_t marks = 0;            // CollMark records read
  std::vector<CommHang> comms;  // by communicator hash
  std::vector<CollMismatch> mismatches;
  bool hung() const;  // some communicator has a stuck collective or a rank behind
  std::vector<std::string> lines() const;
};

// Reads every rank-<r>.kspool in `dir` (complete blocks only, like the recovery). Throws
// kernalyse::Error if `dir` holds no spool file.
HangReport hang_report_dir(const std::string& dir);

// "0x" + 16 hex digits: how the reports name a communicator.
std::string comm_name(uint64_t comm_hash);

// --hang --json: the report as one object (spool, ranks, marks, hung, comms, mismatches, lines).
nlohmann::json hang_json(const HangReport& h);

}  // namespace kernalyse
