// Cross-rank analyses: communication/computation overlap, temporal breakdown, idle breakdown,
// collective matching and the straggler ledger with root cause. Formulas in docs/analyses.md.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernalyse/analysis.h"
#include "kernalyse/classify.h"

namespace kernalyse {

enum class Compat { Native, Hta };

namespace detail {
struct LedgerMatch;  // the ledger's matched collectives (analysis/src/timeline.h)
}

struct CrossRankOptions {
  Filter filter;
  Compat compat = Compat::Native;
  int64_t kernel_wait_ns = 30'000;  // idle gaps below this are "kernel wait" (HTA's 30 µs)
  int top = 20;
  bool verbose = false;
  // The ledger's matching as clock_evidence() computed it on this store (matching does not depend
  // on a per-rank monotone clock correction): reused, not recomputed, when no --rank/--step
  // filter and no --verbose apply. Null: the ledger matches itself.
  std::shared_ptr<const detail::LedgerMatch> match;
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

}  // namespace kernalyse
