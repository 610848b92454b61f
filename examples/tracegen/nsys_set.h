// kernalyse-tracegen --format nsys with --nsys-*: a set of Nsight Systems reports shaped like a
// real multi-host job's, where the rank evidence is what the flags plant (nsys_set.cpp).
#pragma once

#include <string>
#include <vector>

#include "kernalyse/store.h"

struct NsysSetOptions {
  std::string names = "rank";  // rank: rank-<r>.sqlite; hostpid: report_<host>_<pid>.sqlite
  std::string env;             // none, all, or R[:VAR],... (VAR default OMPI_COMM_WORLD_RANK)
  std::string payload;         // none, all, or R,...: ncclCommInitRank payloads
  std::string marks;           // none, all, cross-host: NCCL network marks (ring neighbours)
  bool per_host = false;       // one report per host holding its processes (report_<host>.sqlite)
  bool any() const {
    return names != "rank" || !env.empty() || !payload.empty() || !marks.empty() || per_host;
  }
};

// Takes --nsys-names, --nsys-env, --nsys-payload, --nsys-marks (with `value`) and --nsys-per-host
// (no value); false for another flag. Throws std::invalid_argument on a bad value.
bool parse_nsys_set_flag(const std::string& flag, const std::string& value, NsysSetOptions* o);
// Whether the flag takes a value.
bool nsys_set_flag_has_value(const std::string& flag);

// Writes the ranks' stores (rank r = ranks[r], on host r / ranks_per_host, "tracegen-node<h>";
// ranks_per_host 0: one host per rank) into DIR as the options say. Each process's pid falls
// with its rank within its host (50000 + 1000·host + 10·(K−1−local)), so (host, pid) order is not
// rank order.
void write_nsys_set(const std::vector<kernalyse::Store>& ranks, int ranks_per_host,
                    const NsysSetOptions& o, const std::string& dir);
