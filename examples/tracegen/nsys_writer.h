// kernalyse-tracegen --format nsys: writes ranks' stores as Nsight Systems SQLite exports.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernalyse/store.h"

// Writes rank s.ranks[0] of a single-rank store to `path` (a new SQLite file), host
// "tracegen-node<rank>", the rank as a RANK row of TARGET_INFO_SYSTEM_ENV. Throws
// std::runtime_error on an SQLite error.
void write_nsys_rank(const kernalyse::Store& s, const std::string& path);

// One process of a report and what it records beside its store's rows (nsys_set.cpp).
struct NsysProcessOut {
  const kernalyse::Store* store = nullptr;  // single-rank
  std::string host;                         // Hostname (the report's: the first process's)
  int64_t pid = 0;                          // globalPid / globalTid of its rows
  std::vector<std::pair<std::string, std::string>> env;  // META_DATA_CAPTURE PROCESS_0 variables
  int64_t system_rank = -1;  // >= 0: a RANK row in TARGET_INFO_SYSTEM_ENV (write_nsys_rank's form)
  int32_t comm_rank = -1, comm_size = 0;  // >= 0: ncclCommInitRank range with its binary payload
  int32_t send_to = -1, recv_from = -1;   // >= 0: NCCL network marks to / from that rank
};

// Writes one report holding the processes (a new SQLite file).
void write_nsys_report(const std::vector<NsysProcessOut>& procs, const std::string& path);
