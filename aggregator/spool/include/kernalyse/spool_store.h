// Spool → store, without MPI: the one conversion of a rank's spool file
// (aggregator/spool/include/kernalyse/spool.h) into a single-rank Store, used by the collector at
// MPI_Finalize and by the offline crash recovery (kernalyse-merge --spool DIR). docs/collector.md,
// "Crash recovery".
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernalyse/clockmodel.h"
#include "kernalyse/progress.h"
#include "kernalyse/store.h"

namespace kernalyse {

namespace spool {
struct Contents;
}

// What the spool's records do not carry themselves: who wrote them and how to anchor them.
struct SpoolMeta {
  int32_t rank = 0;
  int32_t world_size = -1;
  int64_t pid = 0;
  std::string host;
  std::string command;    // the profiled application's command line
  int64_t anchor_ns = 0;  // rank 0's CLOCK_REALTIME − CLOCK_MONOTONIC_RAW at the start sync
  bool emulated = false;
  bool shared_clock = false;  // a process-tree rank: every rank reads one host's raw clock
  std::string source;         // RankInfo::source ("kernalyse-run: CMD", "spool: PATH ...")
  std::string produced_by = "kernalyse-run (collector)";
  std::string tool_version;
};

// One rank's records mapped to run time (clock.to_root(t) + anchor_ns), steps assigned, NCCL
// tags joined to their kernels, one RankInfo row. Records whose string ids are out of range (a
// spool whose string block was lost) are dropped and counted in records_dropped.
Store spool_to_store(const spool::Contents& c, const SpoolMeta& meta, const ClockModel& clock);

// Per-rank outcome of a recovery.
struct RankRecovery {
  int32_t rank = 0;
  std::string path;         // "" if missing
  bool missing = false;     // world size says it existed, but no spool file
  bool recovered = false;   // at least one complete block was read
  bool truncated = false;   // a torn or corrupt tail was dropped
  std::string problem;      // what was wrong with the tail ("torn block", ...) or the file
  bool unreadable = false;  // the file could not be read at all ("cannot open: ...")
  int64_t cut_byte = 0;     // where the kept prefix ends (= bytes kept)
  int64_t file_bytes = 0;
  int64_t blocks = 0;
  int64_t records = 0;
  bool has_clock = false;       // a Meta block with the start sample was found
  bool has_end_sample = false;  // the rank reached its end clock sync (finished normally)
  int64_t data_end_ns = 0;      // last record end, run time (epoch ns if anchored); 0 if none
  bool tree = false;            // a process-tree rank (kernalyse-run without MPI)
  std::string rank_origin;      // tree ranks: "RANK=2", "start order (...)"
  // Why nothing was recovered: "cannot open: Permission denied", "empty file",
  // "bad block magic at byte 0".
  std::string why_nothing() const;
};

struct RecoveryReport {
  std::string dir;
  int32_t world_size = 0;
  std::vector<RankRecovery> ranks;  // sorted by rank, missing ones included
  int64_t last_end_ns = 0;          // the latest data end over all ranks
  // Tree spools left out as a launcher's, not a rank's (spool_store.cpp, settle_tree_ranks).
  std::vector<std::string> not_ranks;
  // One line per rank: "rank 2: truncated at byte N (torn block); ...", "rank 3: missing ...".
  std::vector<std::string> lines() const;
};
// The same for scripts (`--spool DIR --json`): per rank its status, record counts and data end.
nlohmann::json recovery_json(const RecoveryReport& r);

// The rank-<r>.kspool files in `dir` by the rank in their name. Throws kernalyse::Error if `dir`
// is not a directory, holds none, or a name's rank is past the limit (docs/limits.md).
std::map<int32_t, std::string> list_spool_files(const std::string& dir);

// Reads every rank-<r>.kspool in `dir`, converts each with spool_to_store (clock from the spool's
// Meta block: start sample → offset only; with the end sample, offset and drift; process-tree
// ranks: the host's shared clock, exact), merges them, and adds a RankInfo row for every missing
// rank (not for process trees, whose rank numbers need not be dense on one node). Throws
// kernalyse::Error if `dir` is not a directory, holds no spool files, or no rank has a complete
// block. `progress`: "recovering DIR", in spool bytes, one step per rank file read.
Store recover_spool_dir(const std::string& dir, RecoveryReport* report,
                        ProgressMode progress = ProgressMode::Off);

}  // namespace kernalyse
