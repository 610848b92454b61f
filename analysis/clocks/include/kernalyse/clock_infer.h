// Clock alignment inferred from the collectives of traces recorded without one (Kineto, nsys):
// one unknown clock per host, happened-before bounds as difference constraints, and a robust fit
// of near-simultaneous completion inside them. Method and limits: docs/clocks.md ("Inferred").
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "kernalyse/collectives.h"
#include "kernalyse/crossrank.h"
#include "kernalyse/store.h"

namespace kernalyse {

// ---- the narrow input: what the inference needs of one matched collective instance ----------
struct ClockArrival {
  int32_t rank = 0;
  int64_t start_ns = 0, end_ns = 0;  // the rank's kernel, as recorded (the rank's own clock)
  int32_t peer = -1;                 // point-to-point: the peer rank, -1 if unknown
};
struct ClockInstance {
  std::string op;    // letters only, lower case: "allreduce", "allgather", "sendrecv", ...
  std::string algo;  // NCCL algorithm from the kernel name: "RING", "TREE", "NVLS", ... or ""
  std::vector<ClockArrival> arrivals;  // one per rank
  // Point-to-point instances whose peers are not recorded: the group whose instances are judged
  // together (the kernels' streams, "stream 84/84"); "" none.
  std::string group;
};
// A point-to-point message seen on both sides: its receive completed (on to_rank's clock) after
// its send started (on from_rank's clock). NCCL's network plugin NVTX marks give these
// (ncclNetIsend / ncclNetRecvTest with sender, receiver, channel and sequence): a pair of
// messages in opposite directions bounds the two clocks' offset from both sides, as a ping-pong.
struct ClockMessage {
  int32_t from_rank = 0, to_rank = 0;
  int64_t sent_ns = 0;      // the send started (from_rank's clock)
  int64_t received_ns = 0;  // the receive was seen complete (to_rank's clock)
};
struct ClockEvidence {
  std::vector<ClockInstance> instances;
  std::vector<ClockMessage> messages;
  // rank → host name. Ranks on one host share a clock (one unknown per host); a rank with no
  // host ("" or absent) is taken as alone on its own host.
  std::map<int32_t, std::string> host;
  std::vector<int32_t> ranks;  // every rank of the run (also those without collectives)
  // The job's world size as recorded (-1 unknown). A SendRecv kernel pairs two ranks only when
  // its peer is recorded, or when the world is these two ranks: a trace set that samples 2 ranks
  // of 128 may hold SendRecvs of each with third ranks, which bound nothing between the two.
  int32_t world_size = -1;
};

struct InferOptions {
  double min_drift_span_s = 0.5;  // shorter runs: offsets only, no drift
  // The completion fits use at most this many instances, every k-th in first-arrival order (the
  // happened-before bounds and the checks use all of them): beyond a few thousand, more samples
  // move the medians by far less than their noise, at O(instances · hosts²) cost.
  size_t max_fit_instances = 4096;
};

// ---- the output: per host, the correction t' = t + offset_ns + drift·(t − t_ref_ns) -----------
struct HostClock {
  std::string host;  // "" for a rank alone on an unnamed host
  std::vector<int32_t> ranks;
  bool reference = false;
  int64_t offset_ns = 0;  // correction at t_ref_ns (add to the recorded time)
  double drift = 0.0;     // correction per ns of recorded time
  int64_t uncertainty_ns = 0;
  int64_t bound_lo_ns = 0, bound_hi_ns = 0;  // feasible correction at t_ref_ns (happened-before)
  int64_t samples = 0;                       // completion samples used
};
struct ClockInference {
  bool ok = false;
  std::string why;               // "too little evidence: ..." when !ok
  std::vector<HostClock> hosts;  // reference host first
  int64_t t_ref_ns = 0;
  int64_t collectives = 0;        // instances spanning >= 2 hosts, used
  int64_t messages = 0;           // point-to-point messages between two hosts, used as bounds
  int64_t constrained = 0;        // instances that gave happened-before bounds
  int64_t violations_before = 0;  // instances violating happened-before on the recorded times
  int64_t violations_after = 0;   // ... after the correction (0 by construction)
  int64_t skew_before_ns = 0;     // median completion skew across hosts (simultaneous ops)
  int64_t skew_after_ns = 0;
  bool drift_fitted = false;
  std::string method;              // "inferred from N collectives across H hosts"
  std::vector<std::string> notes;  // what was assumed (hosts unknown, p2p direction, ...)
  // Set by keep_recorded_clocks (--align auto's rule), never by infer_clocks: "" when the
  // correction is to be applied, else the one line saying why the recorded clocks stay.
  std::string kept;
};

ClockInference infer_clocks(const ClockEvidence& ev, const InferOptions& opt = {});

// ---- --align auto: move clocks only on evidence (docs/clocks.md, "When") --------------------
// The recorded clocks move only when they contradict the collectives: a happened-before
// violation on the recorded times, or some host's correction (at either end of the collectives'
// span, drift included) larger than its own stated uncertainty. Otherwise the inference only says
// the recorded clocks agree with it within its ±, and moving them would change every analysis
// (HTA's breakdown moves with sub-µs shifts) for nothing. why: the one line either way.
bool moves_clocks(const ClockInference& inf, const ClockEvidence& ev, std::string* why);
// Applies the rule to a successful inference: when it does not move the clocks, inf->kept gets
// the line ("recorded clocks kept: 0 violations, corrections within ±…"), which
// apply_clock_inference, describe and clock_inference_json honour. Returns whether it moves.
bool keep_recorded_clocks_unless_evidence(ClockInference* inf, const ClockEvidence& ev);

// ---- the Store side --------------------------------------------------------------------------
// Whether every rank's clock is already aligned (clock_method not "none ...").
bool clocks_aligned(const Store& s);

// Builds the evidence from the store's matched collectives (match_collectives, collectives.h, on
// every row). match: when given, receives that matching, for CrossRankOptions::match.
ClockEvidence clock_evidence(const Store& s,
                             std::shared_ptr<const CollectiveMatch>* match = nullptr);

// Applies a successful inference: every time column of each rank moves by its host's correction,
// and /ranks records it (clock_offset_ns, clock_drift as the composed map, clock_uncertainty_ns,
// clock_method), so the recorded times stay recoverable. Sets the clock_domain attribute.
// Does nothing when the inference failed or kept the recorded clocks (inf.kept).
void apply_clock_inference(Store& s, const ClockInference& inf);

// One line for reports: "clocks inferred from 18 collectives across 2 hosts, ±4.0 µs (...)" or
// "too little evidence: ..., clocks kept as recorded".
std::string describe(const ClockInference& inf);

// The inference as JSON ("clock_inference" in docs/json.md): its fields, the hosts and describe().
nlohmann::json clock_inference_json(const ClockInference& inf);

}  // namespace kernalyse
