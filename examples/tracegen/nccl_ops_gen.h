// kernalyse-tracegen --nccl-ops: a small job whose NCCL collectives carry NCCL's own ids (operation
// ids, sequence numbers, communicator hashes), with all-to-all(v) steps of planted uneven splits,
// send/receive pairs and, optionally, copy-engine collectives (docs/analyses.md).
#pragma once

#include <string>

struct NcclOpsOptions {
  int ranks = 4, steps = 6;
  int ranks_per_host = 0;  // 0: every rank on one host
  std::string out, truth;
  std::string format = "json";  // json (Kineto) or nsys (SQLite with NCCL_GPU_OPERATIONS)
  bool ids = true;              // write operation ids (false: --no-op-ids)
  int late_rank = -1;           // this rank's capture misses the first all-reduce
  bool ce = false;              // an all-gather per step on the copy engines (a copy, no kernel)
};

// Writes DIR/rank-<r>.sqlite or DIR/<host>_<pid>.<ts>.pt.trace.json per rank and, with truth,
// the planted values as JSON. Throws std::runtime_error on a write error.
void write_nccl_ops_job(const NcclOpsOptions& o);
