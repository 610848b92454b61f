// Cross-rank analyses: communication/computation overlap, temporal breakdown, idle breakdown,
// collective matching and the straggler ledger with root cause. Formulas in docs/analyses.md.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "kernalyse/analysis.h"
#include "kernalyse/classify.h"
#include "kernalyse/collectives.h"

namespace kernalyse {

enum class Compat { Native, Hta };
// --compat's words.
inline constexpr Vocabulary<Compat, 2> kCompatWords{
    {{{Compat::Native, "native"}, {Compat::Hta, "hta"}}}};
static_assert(kCompatWords.complete());

struct CrossRankOptions {
  Filter filter;
  Compat compat = Compat::Native;
  int64_t kernel_wait_ns = 30'000;  // idle gaps below this are "kernel wait" (HTA's 30 µs)
  int top = 20;
  bool verbose = false;
  bool causes = true;  // straggler ledger: false skips the root-cause windows (the costly part)
  // The whole store's matching as clock_evidence() computed it (docs/clocks.md): the ledger reuses
  // it instead of matching again when no --rank/--step filter applies (matching reads no times
  // but the first-arrival order, which the ledger redoes on the times as they are now). Null: the
  // ledger matches itself.
  std::shared_ptr<const CollectiveMatch> match;
};

// What HTA 0.6.1 would see: integer-µs times (ts rounded up, ts+dur down), and with >= 2
// ProfilerSteps only work launched before the last step starts; categories by HTA's name rules;
// host events that carry a stream count as GPU rows. Times stay in ns (multiples of 1000).
Store hta_view(const Store& s);
// One event's times as HTA reads them (its JSON times relative to base_ns, as doubles): start
// rounded up, start + duration down, in ns (base_ns + multiples of 1000).
std::pair<int64_t, int64_t> hta_round(int64_t base_ns, int64_t start_ns, int64_t end_ns);

// HTA's name-based kernel classification (hta/common/types.py), used by --compat hta.
Category hta_category(std::string_view name);

void overlap_analysis(const Store& s, const CrossRankOptions& opt, Report* out);
void breakdown_analysis(const Store& s, const CrossRankOptions& opt, Report* out);
void idle_analysis(const Store& s, const CrossRankOptions& opt, Report* out);

// The straggler ledger as numbers (all times int64 ns); renderers turn it into text, JSON
// (docs/json.md "stragglers"), CSV and the HTML heatmap.
struct StragglerCauses {
  int64_t kernels_ns = 0, host_delay_ns = 0, other_idle_ns = 0, inherited_ns = 0,
          unexplained_ns = 0;
};
struct StragglerCollective {
  int64_t id = 0;  // the matcher's collective id
  std::string op;
  int32_t ranks = 0;
  int32_t last_rank = -1;  // -1: every rank started at the same time (no last arriver)
  int64_t skew_ns = 0, inflicted_ns = 0, completion_skew_ns = 0, transfer_ns = 0;
  std::vector<std::pair<int32_t, int64_t>> wait_ns;  // (rank, wait), by rank
  std::optional<double> busbw_gbps;                  // none: no message size or transfer
  int64_t msg_bytes = -1;
  bool noise = false;  // skew within the two ranks' clock uncertainty
  int32_t step = kNoStep;
  int64_t lateness_ns = 0;
  StragglerCauses causes;
};
struct StragglerRank {
  int32_t rank = 0;
  int64_t times_last = 0, inflicted_ns = 0, suffered_ns = 0, lateness_ns = 0, noise_skipped = 0;
  int64_t steps = 0;  // distinct steps among its collectives
  StragglerCauses causes;
};
struct KernelDelay {
  int32_t rank = 0;
  std::string kernel;
  int64_t delay_ns = 0, instances = 0;
};
struct StragglerResult {
  std::string method;
  size_t ranks_analysed = 0, comm_kernels = 0, unmatched_count = 0;
  size_t p2p_pairs = 0;  // sends paired with their receives (CollectiveMatch::p2p)
  std::vector<UnmatchedCollective> unmatched;
  int64_t nxn_instances = 0, violations_aligned = 0, violations_unaligned = 0;
  std::vector<StragglerCollective> collectives;  // by id
  std::vector<StragglerRank> ranks;              // by rank
  std::vector<KernelDelay> delay_by_kernel;      // largest delay first
  // How far cross-rank times can be trusted (from /ranks clock_method): unaligned recording
  // clocks, or clocks inferred from the collectives with a stated error (docs/clocks.md).
  bool clocks_aligned = true;
  size_t ranks_inferred = 0;
  std::string
      clock_method;  // the inference's method, e.g. "inferred from N collectives across H hosts"
  // The largest ± among the inferred ranks, or among ranks kept as recorded whose clocks the
  // inference found consistent (--align auto without evidence against them).
  int64_t clock_uncertainty_ns = 0;
};
StragglerResult straggler_ledger(const Store& s, const CrossRankOptions& opt);
// The rank that inflicted most wait while arriving last; -1 when no rank was ever last.
int32_t worst_straggler(const StragglerResult& r);
// The sentence a user can act on ("rank 2 arrived last at ...").
std::string straggler_headline(const StragglerResult& r);
// The caution on cross-rank times: unaligned clocks, or the inferred clocks' stated error ("clocks
// inferred from N collectives across H hosts, ±X µs: skews below that are noise"); "" if none.
std::string straggler_clock_caution(const StragglerResult& r);
// The matching and clock-check notes.
std::vector<std::string> straggler_notes(const StragglerResult& r);
// The ledger's tables (collectives top by inflicted, per rank, delay by kernel), in that order.
std::vector<Table> straggler_tables(const StragglerResult& r, const CrossRankOptions& opt);
// straggler_ledger rendered into a report: headline, notes, tables and the "stragglers" JSON
// (built when JSON is rendered: the report keeps the result).
void straggler_report(std::shared_ptr<const StragglerResult> r, const CrossRankOptions& opt,
                      Report* out);
// Both steps at once.
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
// Both at once, from one ordered pass per rank, the ranks on parallel threads: what the overlap
// and breakdown tables are rendered from (per_step is empty in --compat hta or without steps).
struct RankUnionTables {
  std::vector<RankUnion> whole, per_step;  // by rank; by (rank, step)
  bool steps = false;                      // per_step computed (its table is shown, even empty)
};
RankUnionTables rank_union_tables(const Store& s, const CrossRankOptions& opt);
void overlap_report(const RankUnionTables& u, Report* out);
void breakdown_report(const RankUnionTables& u, Report* out);
// The idle split of one stream (the --idle table's row, in ns).
struct StreamIdle {
  int32_t rank = 0, device = 0, stream = 0;
  int64_t host_ns = 0, kernel_ns = 0, other_ns = 0, gaps = 0, max_gap_ns = 0, overlaps = 0;
  // Gaps per category (HTA lists a category of a stream when it has one: kernalyse.hta).
  int64_t host_gaps = 0, kernel_gaps = 0, other_gaps = 0;
};
std::vector<StreamIdle> stream_idle(const Store& s, const CrossRankOptions& opt);
// The --idle table from it.
void idle_report(const std::vector<StreamIdle>& streams, int64_t kernel_wait_ns, Report* out);

}  // namespace kernalyse
