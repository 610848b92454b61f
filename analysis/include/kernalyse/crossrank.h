// Cross-rank analyses: communication/computation overlap, temporal breakdown, idle breakdown,
// collective matching and the straggler ledger with root cause. Formulas in docs/analyses.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernalyse/analysis.h"
#include "kernalyse/classify.h"

namespace kernalyse {

enum class Compat { Native, Hta };

struct CrossRankOptions {
  Filter filter;
  Compat compat = Compat::Native;
  int64_t kernel_wait_ns = 30'000;  // idle gaps below this are "kernel wait" (HTA's 30 µs)
  int top = 20;
  bool verbose = false;
};

// What HTA 0.6.1 would see: integer-µs times (ts rounded up, ts+dur down), and with >= 2
// ProfilerSteps only work launched before the last step starts; categories by HTA's name rules;
// host events that carry a stream count as GPU rows. Times stay in ns (multiples of 1000).
Store hta_view(const Store& s);

// HTA's name-based kernel classification (hta/common/types.py), used by --compat hta.
Category hta_category(std::string_view name);

void overlap_analysis(const Store& s, const CrossRankOptions& opt, Report* out);
void breakdown_analysis(const Store& s, const CrossRankOptions& opt, Report* out);
void idle_analysis(const Store& s, const CrossRankOptions& opt, Report* out);
void straggler_analysis(const Store& s, const CrossRankOptions& opt, Report* out);

// --- building blocks, exposed for tests ---
// Lengths over one rank's activities (any order): each category's union and the exclusive
// split that the breakdown uses.
struct UnionStats {
  int64_t span_ns = 0;         // last end - first start
  int64_t busy_ns = 0;         // |U(all)|
  int64_t compute_ns = 0;      // |U(comp)|
  int64_t comm_ns = 0;         // |U(comm)|
  int64_t overlap_ns = 0;      // |U(comm) ∩ U(comp)|
  int64_t comm_excl_ns = 0;    // |U(comm) \ U(comp)|  (exposed communication)
  int64_t memory_excl_ns = 0;  // |U(mem) \ U(comp) \ U(comm)|
  int64_t other_excl_ns = 0;   // |U(other) \ the rest|
  int64_t count = 0;
};
struct CatInterval {
  int64_t start;
  int64_t end;
  Category cat;
};
UnionStats union_stats(std::vector<CatInterval> v);

// --- typed results behind those tables (the trace diff compares them) ---
// Union statistics per rank (step = kNoStep), or per (rank, step) when per_step.
struct RankUnion {
  int32_t rank = 0;
  int32_t step = kNoStep;
  UnionStats u;
};
std::vector<RankUnion> rank_unions(const Store& s, const CrossRankOptions& opt, bool per_step);
// The idle split of one stream (the --idle table's row, in ns).
struct StreamIdle {
  int32_t rank = 0, device = 0, stream = 0;
  int64_t host_ns = 0, kernel_ns = 0, other_ns = 0, gaps = 0, max_gap_ns = 0, overlaps = 0;
};
std::vector<StreamIdle> stream_idle(const Store& s, const CrossRankOptions& opt);
// The straggler ledger per rank, and the rank that inflicted most wait while last (-1: none).
struct LedgerRank {
  int32_t rank = 0;
  int64_t times_last = 0, inflicted_ns = 0, suffered_ns = 0;
};
struct Ledger {
  int64_t matched = 0;  // collective instances matched on all their ranks
  int32_t worst = -1;
  std::vector<LedgerRank> ranks;
};
Ledger straggler_ledger(const Store& s, const CrossRankOptions& opt);

}  // namespace kernalyse
