// NCCL operations recorded apart from the kernels that ran them (Nsight Systems' advanced NCCL
// tracing, NCCL_GPU_OPERATIONS): joined to the GPU activity of the same process that ran each
// one, a kernel or, for NCCL's copy-engine collectives, a copy (docs/store.md, "/nccl").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernalyse/store.h"

namespace kernalyse {

struct NcclOpRecord {
  int64_t start = 0, end = 0;  // on the GPU, in the activities' time base
  std::string name;            // "AllReduce", "Send", "AllToAll", ...
  uint64_t comm_hash = 0;      // identical on every rank of the communicator
  int32_t comm_rank = -1;
  int64_t count = -1;  // elements
  std::string dtype;   // "ncclBfloat16", ...
  uint64_t op_id = 0;  // operationId: one collective on every rank; a send and its receive
  int64_t seq = -1;    // seqNumber (collectives)
};

struct NcclOpJoin {
  size_t joined = 0;    // ops given to an activity
  size_t copies = 0;    // of which to a copy (a copy-engine collective: now communication)
  size_t unjoined = 0;  // ops no free activity overlapped
};

// Joins each op to the free activity of `s` (one rank, any order) that overlaps it most: an NCCL
// kernel (category communication) before a copy. The activity's /nccl row gets the op's ids (a
// new row when it had none); a joined copy becomes communication. One op per activity.
NcclOpJoin join_nccl_ops(Store& s, std::vector<NcclOpRecord> ops);

// Bytes of one element of an NCCL datatype name ("ncclFloat32" 4), -1 when unknown; `name` gets
// the PyTorch spelling the store uses ("Float").
int64_t nccl_dtype_bytes(const std::string& nccl, std::string* name);

}  // namespace kernalyse
