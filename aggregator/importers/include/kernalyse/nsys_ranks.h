// Ranks of the processes in a set of Nsight Systems reports (docs: README "Nsight Systems
// reports"). A report records no rank of its own; each process is given one from the evidence it
// carries, strongest first: MPI_RANKS, the "MPI Rank N" thread name, a launcher variable in the
// recorded environment, NCCL's ncclCommInitRank NVTX payload, NCCL's network marks, --rank, the
// file name. Processes nothing names get the free ranks in (host, pid) order, consistent with the
// ranks already known on each host, and one warning names them. Only processes that cannot be
// told apart (the same host and pid, no rank) are refused.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kernalyse/kineto.h"  // ImportOptions, ImportStats
#include "kernalyse/store.h"

namespace kernalyse {

// One piece of evidence: "rank `rank`, says `source`".
struct RankClaim {
  int32_t rank = 0;
  std::string source;  // a name from kRankSources: "env:PMI_RANK", "nccl", "file name", ...
};

// The evidence sources, strongest first (the order assign_nsys_ranks tries them in).
inline constexpr const char* kRankSources[] = {"MPI_RANKS",
                                               "MPI rank thread name",
                                               "env:OMPI_COMM_WORLD_RANK",
                                               "env:PMIX_RANK",
                                               "env:PMI_RANK",
                                               "env:SLURM_PROCID",
                                               "env:RANK",
                                               "nccl",
                                               "network marks",
                                               "--rank",
                                               "file name"};
// Index of a source in kRankSources; -1 for another name.
int rank_source_level(std::string_view source);

// One process of a report and what it says about its rank.
struct NsysProcess {
  std::string file;               // the report
  std::string host;               // its Hostname, "" if unknown
  int64_t pid = -1;               // its pid, -1 if unknown
  bool shared_file = false;       // the report holds several processes (named "FILE (pid P)")
  int64_t local_rank = -1;        // LOCAL_RANK & co.: orders assumed ranks within a host; -1 none
  std::vector<RankClaim> claims;  // any order; at most one per source
  std::string name() const;       // "FILE" or "FILE (pid P)"
};

struct RankAssignment {
  std::vector<int32_t> rank;          // per process
  std::vector<std::string> source;    // per process: a claim's source, "only input" or "assumed"
  std::vector<std::string> warnings;  // one line each: claims not used, weak sources, assumed
  std::vector<std::string> notes;
};

// Gives every process a distinct rank: sources strongest first, a claim taken when no other
// process claims that rank at that level and no stronger one took it (else it is not used, and
// the process falls to its next claim); the rest: the only input is rank 0 ("only input"),
// others the free ranks in (host, pid) order ("assumed"), each host's block of consecutive ranks
// chosen to hold the ranks already known there when that is possible. Throws Error naming the
// processes when two with no rank have the same host and pid (they cannot be told apart).
RankAssignment assign_nsys_ranks(const std::vector<NsysProcess>& procs, bool only_input);

// Renumbers a store's ranks: every Rank column and /ranks, old rank r becomes to[r] (an r
// outside `to` is left as it is).
void renumber_ranks(Store& s, const std::vector<int32_t>& to);

// Imports one report (nsys.cpp): its processes, numbered 0..P-1 in pid order in the returned
// store (one rank per process, RankInfo::source naming the file and, when several, the pid), and
// in *procs what each says about its rank. Errors as import_nsys_file.
Store import_nsys_report(const std::string& path, const ImportOptions& opt, ImportStats* stats,
                         std::vector<NsysProcess>* procs);

// Gives the processes of the reports parts[i] (with procs[i], from import_nsys_report) their
// ranks (assign_nsys_ranks over all of them) and renumbers the parts; the rank_source of each
// rank is set; warnings and notes go to *stats.
void rank_nsys_reports(std::vector<Store>& parts,
                       const std::vector<std::vector<NsysProcess>>& procs, bool only_input,
                       ImportStats* stats);

// Parsing helpers (unit-tested):
// The value of NAME in a "A=1;B=x;..." environment list (TARGET_INFO_SYSTEM_ENV's
// DeviceEnvironment); nullopt if absent.
std::optional<std::string> env_list_value(std::string_view list, std::string_view name);
// "NAME=\"VALUE\"" or "NAME=VALUE" (a META_DATA_CAPTURE PROCESS_n:ENVIRONMENT_VARIABLE value):
// VALUE when the name is NAME.
std::optional<std::string> env_assignment_value(std::string_view text, std::string_view name);
// The process's own rank in an NCCL network mark: "ncclNetIsend(): ... Sender_Rank: N" and
// "ncclNetSendTest(): ..." name the sender, "ncclNetIrecv(): ... Receiver_Rank: N" and
// "ncclNetRecvTest(): ..." the receiver, which is the process that recorded the mark.
std::optional<int32_t> network_mark_rank(std::string_view text);
// A field of an NVTX binary payload: `type` an NVTX_PAYLOAD_ENTRY_TYPE integer (1-18, 22),
// `offset` its byte offset in the payload. The blob is the payload itself, or the payload after
// the 32-byte header nsys writes (domain, schema, payload size u64 at byte 16 = blob size - 32).
std::optional<int64_t> payload_field(std::string_view blob, int64_t type, int64_t offset);

}  // namespace kernalyse
