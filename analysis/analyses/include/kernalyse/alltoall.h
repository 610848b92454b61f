// All-to-all(v) traffic and the host topology of communication (docs/analyses.md, "All-to-all and
// host split"): a rank × rank matrix of the bytes each all-to-all instance moved, from the NCCL
// metadata's split sizes, and for every collective kind the split of its GPU time between
// instances whose ranks share one host and instances that cross hosts (hosts from /ranks).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernalyse/collectives.h"
#include "kernalyse/report.h"
#include "kernalyse/store.h"

namespace kernalyse {

struct AllToAllStep {
  int32_t step = kNoStep;
  int64_t instances = 0, bytes = 0;
  int64_t time_ns = 0;  // summed over instances: last end - first start across their ranks
};

struct HostSplit {
  std::string op;
  int64_t instances = 0, intra_instances = 0, inter_instances = 0, unknown_instances = 0;
  int64_t intra_ns = 0, inter_ns = 0;  // GPU time of the arrivals (summed over ranks)
};

struct AllToAllResult {
  std::vector<int32_t> ranks;               // matrix order
  std::vector<std::string> hosts;           // per rank of `ranks`, "" unknown
  std::vector<std::vector<int64_t>> bytes;  // [sender][receiver], summed over instances
  int64_t instances = 0;                    // all-to-all instances with their bytes known
  int64_t even_instances = 0;               // of which without split sizes (an even split assumed)
  int64_t unknown_instances = 0;            // all-to-all instances without a message size
  int64_t intra_bytes = 0, inter_bytes = 0;
  std::vector<AllToAllStep> steps;
  std::vector<HostSplit> split;  // by op name
  std::string matched_by;        // how the instances were matched across ranks
};

AllToAllResult alltoall_analysis(const Store& s, const CollectiveMatch& m);
// Text, CSV and JSON: headline, the matrix, the per-step table, the host split.
void alltoall_report(const AllToAllResult& r, Report* out);
// The HTML page's heat map data: ranks, cells [sender, receiver, bytes], max.
nlohmann::json alltoall_page_data(const AllToAllResult& r);

}  // namespace kernalyse
