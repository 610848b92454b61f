// The straggler ledger (Scalasca's "wait at N×N" mapped to
// NCCL kernels) and the root cause of each last arrival. Formulas in docs/analyses.md.
#include <algorithm>
#include <cmath>
#include <iomanip>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <unordered_map>

#include "kernalyse/archive.h"
#include "kernalyse/checked.h"
#include "kernalyse/crossrank.h"
#include "kernalyse/error.h"
#include "kernalyse/parallel.h"
#include "kernalyse/sliced_folds.h"
#include "kernalyse/timeline.h"

namespace kernalyse {
namespace {

int64_t median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m), v.end());
  int64_t hi = v[m];
  if (v.size() % 2) return hi;
  int64_t lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m));
  return lo + (hi - lo) / 2;
}

// x * scale (scale in [0, 1]) back to ns; x itself when unscaled, so a total at the int64 edge
// is not rounded up past it by the double.
int64_t scaled(int64_t x, double scale) {
  if (scale == 1.0) return x;
  const double v = static_cast<double>(x) * scale;
  return v >= 0x1p63 ? INT64_MAX : std::llround(v);
}

// nccl-tests' bus-bandwidth factor for an op over n ranks.
double busbw_factor(const std::string& op, int n) {
  const std::string o = collective_op_key(op);
  if (n < 2) return 1.0;
  if (o.find("allreduce") != std::string::npos) return 2.0 * (n - 1) / n;
  if (o.find("allgather") != std::string::npos || o.find("reducescatter") != std::string::npos)
    return static_cast<double>(n - 1) / n;
  return 1.0;
}

// N×N collectives: every rank's kernel needs every other rank (Scalasca's "wait at N×N").
bool is_n_by_n(const std::string& op) {
  const std::string o = collective_op_key(op);
  for (const char* k : {"allreduce", "allgather", "reducescatter", "alltoall", "barrier"})
    if (o.find(k) != std::string::npos) return true;
  return false;
}

// Per rank: compute kernels and device idle gaps in time order, for interval queries.
// One rank's GPU timeline for the root-cause windows: its computation kernels (rows, in start
// order) and its device idle gaps.
struct RankTimeline {
  struct Gap {
    int64_t start, end;
    bool host;
  };
  const Activities* a = nullptr;
  const NameGroups* groups = nullptr;
  std::vector<uint32_t> kernels;  // rows, sorted by start
  int64_t max_kernel = 0;
  std::vector<Gap> gaps;  // device idle, sorted

  void kernel_time(int64_t lo, int64_t hi, std::unordered_map<int32_t, int64_t>* out) const {
    const auto& start = a->start_ns;
    // Sums of kernel time over overlapping kernels (several streams) saturate: on extreme
    // times (docs/limits.md) they may pass int64, each term never does.
    auto it = std::lower_bound(kernels.begin(), kernels.end(), sat_sub(lo, max_kernel),
                               [&](uint32_t k, int64_t t) { return start[k] < t; });
    for (; it != kernels.end() && start[*it] < hi; ++it) {
      int64_t s = std::max(lo, start[*it]), e = std::min(hi, a->end_ns[*it]);
      if (e > s) {
        int64_t& into = (*out)[groups->group_of[a->name_id[*it]]];
        into = sat_add(into, e - s);
      }
    }
  }
  void idle_time(int64_t lo, int64_t hi, int64_t* host, int64_t* other) const {
    auto it = std::lower_bound(gaps.begin(), gaps.end(), lo,
                               [](const Gap& g, int64_t t) { return g.end <= t; });
    for (; it != gaps.end() && it->start < hi; ++it) {
      int64_t s = std::max(lo, it->start), e = std::min(hi, it->end);
      if (e > s) {
        int64_t& into = it->host ? *host : *other;
        into = sat_add(into, e - s);
      }
    }
  }
};

// Root-cause inputs: for every (instance, rank) the window from the end of the rank's previous
// matched collective to its arrival, with compute time per kernel name and device idle split
// into host delay / other. One rank's timeline is built at a time (bounded memory).
struct Window {
  int64_t lo = 0, hi = 0;
  bool has_prev = false;
  std::vector<std::pair<int32_t, int64_t>> kernels;  // (name group, ns), sorted by group
  int64_t host = 0, other = 0;
};
using Windows = std::vector<std::vector<Window>>;  // aligned with the arrivals
using Queries = std::map<int32_t, std::vector<std::pair<size_t, size_t>>>;  // rank → (k, arrival)

// Each (instance, arrival)'s window bounds from the matched kernels' times (their own rows); the
// window contents come from the ranks' timelines (rank_windows).
Windows window_bounds(const Activities& a, const std::vector<Collective>& matched,
                      Queries* queries) {
  Windows win(matched.size());
  std::map<int32_t, int64_t> last_end;
  for (size_t k = 0; k < matched.size(); ++k) {
    const auto& av = matched[k].arrivals;
    win[k].resize(av.size());
    for (size_t q = 0; q < av.size(); ++q) {
      Window& w = win[k][q];
      w.hi = a.start_ns[av[q].row];
      auto it = last_end.find(av[q].rank);
      w.has_prev = it != last_end.end();
      w.lo = w.has_prev ? std::min(it->second, w.hi) : INT64_MIN;  // first: from the rank's start
      last_end[av[q].rank] = a.end_ns[av[q].row];
      (*queries)[av[q].rank].emplace_back(k, q);
    }
  }
  return win;
}

// One rank's timeline from its rows (`rows`, store order), then its own windows (each
// (instance, arrival) belongs to one rank: ranks on parallel threads write disjoint windows).
void rank_windows(const Store& s, std::span<const uint32_t> rows, int32_t r,
                  const detail::LaunchIndex& launch_of, const NameGroups& groups,
                  const std::vector<std::pair<size_t, size_t>>& queries, Windows& win) {
  const auto& a = s.activities;
  std::vector<uint32_t> order = detail::merge_streams_by_start(s, rows);
  RankTimeline t;
  t.a = &a;
  t.groups = &groups;
  int64_t busy_end = INT64_MIN, first = INT64_MIN;
  size_t kept = 0;  // the computation kernels, compacted into `order` as it is walked
  for (uint32_t i : order) {
    if (!is_gpu_work(static_cast<Kind>(a.kind[i]))) continue;
    if (first == INT64_MIN) first = a.start_ns[i];
    if (busy_end != INT64_MIN && a.start_ns[i] > busy_end) {
      int64_t launch = launch_of.find(r, a.correlation[i]);
      bool host = launch != detail::LaunchIndex::kNone && launch > busy_end;
      t.gaps.push_back({busy_end, a.start_ns[i], host});
    }
    busy_end = std::max(busy_end, a.end_ns[i]);
    if (a.kind[i] == static_cast<uint8_t>(Kind::Kernel) &&
        a.category[i] == static_cast<uint8_t>(Category::Computation)) {
      order[kept++] = i;
      t.max_kernel = std::max(t.max_kernel, a.end_ns[i] - a.start_ns[i]);
    }
  }
  order.resize(kept);
  t.kernels = std::move(order);
  if (first == INT64_MIN) first = 0;
  std::unordered_map<int32_t, int64_t> kt;
  for (auto [k, q] : queries) {
    Window& wd = win[k][q];
    if (wd.lo == INT64_MIN) wd.lo = std::min(first, wd.hi);
    kt.clear();
    t.kernel_time(wd.lo, wd.hi, &kt);
    wd.kernels.assign(kt.begin(), kt.end());
    std::sort(wd.kernels.begin(), wd.kernels.end());
    t.idle_time(wd.lo, wd.hi, &wd.host, &wd.other);
  }
}

// Root-cause inputs: for every (instance, rank) the window from the end of the rank's previous
// matched collective to its arrival, with compute time per kernel name and device idle split
// into host delay / other. One rank's timeline is built at a time (bounded memory).
Windows arrival_windows(const Store& s, const std::vector<uint32_t>& rows,
                        const std::vector<Collective>& matched, const NameGroups& groups) {
  if (matched.empty()) return {};
  Queries queries;
  Windows win = window_bounds(s.activities, matched, &queries);
  const detail::RowsByRank ranks(s, rows);
  const detail::LaunchIndex launch_of(s);
  parallel_for(ranks.size(), [&](size_t w) {
    const int32_t r = ranks.rank(w);
    auto qit = queries.find(r);
    if (qit != queries.end())
      rank_windows(s, ranks.rows(w), r, launch_of, groups, qit->second, win);
  });
  return win;
}

// The collective match the ledger reads. Match once: the clock inference's matching of the
// whole store is the same one (ids aside).
CollectiveMatch ledger_match(const Store& s, const std::vector<uint32_t>& rows,
                             const CrossRankOptions& opt) {
  const auto& a = s.activities;
  const bool reuse = opt.match && !opt.filter.rank && !opt.filter.step;
  CollectiveMatch cm = reuse ? *opt.match : match_collectives(s, rows);
  if (reuse) {  // the clocks moved since: ids by first arrival on the times as they are now
    std::vector<std::pair<int64_t, size_t>> first;
    for (size_t k = 0; k < cm.matched.size(); ++k) {
      int64_t t = INT64_MAX;
      for (const auto& x : cm.matched[k].arrivals) t = std::min(t, a.start_ns[x.row]);
      first.emplace_back(t, k);
    }
    std::stable_sort(first.begin(), first.end(),
                     [](const auto& x, const auto& y) { return x.first < y.first; });
    std::vector<Collective> sorted;
    sorted.reserve(first.size());
    for (auto [t, k] : first) {
      sorted.push_back(std::move(cm.matched[k]));
      sorted.back().id = static_cast<int64_t>(sorted.size() - 1);
    }
    cm.matched = std::move(sorted);
  }
  return cm;
}

// The inverse of the store's clock map, with base_time_ns added back: an import's base is part
// of what was recorded (Kineto's baseTimeNanoseconds, an nsys session start, different per
// host), not an alignment, so that "unaligned" means the times as recorded. kernalyse-run's
// base is the same on every rank and changes no comparison.
// In int64 around the double: an epoch-sized time as a double is quantised to 256 ns.
struct UnalignedClocks {
  std::map<int32_t, const RankInfo*> rinfo;

  explicit UnalignedClocks(const Store& s) {
    for (const auto& r : s.ranks) rinfo[r.rank] = &r;
  }
  int64_t operator()(int32_t r, int64_t t) const {
    auto it = rinfo.find(r);
    const RankInfo* i = it != rinfo.end() ? it->second : nullptr;
    if (!i) return t;
    // Exact in int64 when it fits (µs-close times must compare right); a damaged rank row's
    // extreme base or offset falls back to double arithmetic, saturated, never wrapped.
    int64_t local = 0, out = 0;
    if (checked_sub(t, i->base_time_ns, &local) && checked_sub(local, i->clock_offset_ns, &local)) {
      const int64_t x = i->clock_drift == 0
                            ? local
                            : std::llround(static_cast<double>(local) / (1.0 + i->clock_drift));
      if (checked_add(x, i->base_time_ns, &out)) return out;
    }
    const double d = (static_cast<double>(t) - static_cast<double>(i->base_time_ns) -
                      static_cast<double>(i->clock_offset_ns)) /
                         (1.0 + i->clock_drift) +
                     static_cast<double>(i->base_time_ns);
    return d >= 9.2e18 ? INT64_MAX : d <= -9.2e18 ? INT64_MIN : static_cast<int64_t>(d);
  }
};

// Happened-before check (no rank ends an N×N collective before the last rank started it),
// on the stored (aligned) times and on each rank's own clock before alignment.
void count_order_violations(const Collective& in, const Activities& a,
                            const UnalignedClocks& unaligned, StragglerResult& res) {
  ++res.nxn_instances;
  int64_t smax_a = INT64_MIN, emin_a = INT64_MAX;
  int64_t smax_u = INT64_MIN, emin_u = INT64_MAX;
  for (const auto& x : in.arrivals) {
    smax_a = std::max(smax_a, a.start_ns[x.row]);
    emin_a = std::min(emin_a, a.end_ns[x.row]);
    smax_u = std::max(smax_u, unaligned(x.rank, a.start_ns[x.row]));
    emin_u = std::min(emin_u, unaligned(x.rank, a.end_ns[x.row]));
  }
  res.violations_aligned += emin_a < smax_a;
  res.violations_unaligned += emin_u < smax_u;
}

// What the ledger sums over the instances, per rank and per (rank, delaying kernel group).
struct LedgerTotals {
  std::map<int32_t, StragglerRank> agg;
  std::map<int32_t, std::set<int32_t>> steps_of;
  std::map<std::pair<int32_t, int32_t>, std::pair<int64_t, int64_t>> delay;  // (rank, group)
  std::map<int32_t, int64_t> uncertainty;
};

// One instance's arrival spread, waits and bus bandwidth; the waits suffered and the steps go to
// the ranks' totals. *last: the last arriver; *lateness: its start after the others' median.
StragglerCollective instance_waits(const Collective& in, const Activities& a, LedgerTotals& tot,
                                   int32_t* last_out, int64_t* lateness) {
  const auto& av = in.arrivals;
  int64_t smin = INT64_MAX, smax = INT64_MIN, emin = INT64_MAX, emax = INT64_MIN;
  int32_t last = av[0].rank;
  for (const auto& x : av) {
    int64_t st = a.start_ns[x.row], en = a.end_ns[x.row];
    if (st > smax) smax = st, last = x.rank;
    smin = std::min(smin, st);
    emin = std::min(emin, en);
    emax = std::max(emax, en);
  }
  int32_t first = av[0].rank;
  for (const auto& x : av)
    if (a.start_ns[x.row] == smin) first = x.rank;
  int64_t u_last = tot.uncertainty[last], u_first = tot.uncertainty[first];
  StragglerCollective sc;
  sc.id = in.id;
  sc.op = in.op;
  sc.ranks = static_cast<int32_t>(av.size());
  sc.skew_ns = smax - smin;
  const int64_t u_both = sat_add(u_last, u_first);
  sc.noise = sc.skew_ns <= u_both && u_both > 0;
  sc.completion_skew_ns = emax - emin;
  sc.msg_bytes = in.msg_bytes;
  sc.step = a.step[av[0].row];
  int64_t transfer = INT64_MAX;
  std::vector<int64_t> starts_others;
  for (const auto& x : av) {
    int64_t st = a.start_ns[x.row], en = a.end_ns[x.row];
    // A record ending before it starts (spool, nsys) waits 0: std::clamp needs lo <= hi.
    int64_t w = std::clamp(smax - st, int64_t{0}, std::max<int64_t>(en - st, 0));
    // Totals over ranks and instances saturate on extreme times (docs/limits.md).
    sc.inflicted_ns = sat_add(sc.inflicted_ns, w);
    tot.agg[x.rank].suffered_ns = sat_add(tot.agg[x.rank].suffered_ns, w);
    sc.wait_ns.emplace_back(x.rank, w);
    transfer = std::min(transfer, en - smax);
    if (x.rank != last) starts_others.push_back(st);
    if (a.step[x.row] != kNoStep) tot.steps_of[x.rank].insert(a.step[x.row]);
  }
  sc.transfer_ns = std::max<int64_t>(transfer, 0);
  if (in.msg_bytes > 0 && sc.transfer_ns > 0)
    sc.busbw_gbps = static_cast<double>(in.msg_bytes) *
                    busbw_factor(in.op, static_cast<int>(av.size())) /
                    static_cast<double>(sc.transfer_ns);
  *lateness = smax - median(starts_others);
  if (sc.skew_ns > 0) sc.lateness_ns = *lateness;
  *last_out = last;
  return sc;
}

// Root cause of the last arrival, against the peers' median over the same interval, charged to
// the last rank's totals and its delaying kernels.
void charge_last_arrival(StragglerCollective& sc, const Collective& in,
                         const std::vector<std::vector<Window>>& win, int32_t last,
                         int64_t lateness, LedgerTotals& tot) {
  const auto& av = in.arrivals;
  StragglerCauses& c = sc.causes;
  sc.last_rank = last;
  const std::vector<Window>& wv = win[static_cast<size_t>(in.id)];
  size_t li = 0;
  for (size_t q = 0; q < av.size(); ++q)
    if (av[q].rank == last) li = q;
  if (wv[li].has_prev) {
    std::vector<int64_t> pe;
    for (size_t q = 0; q < av.size(); ++q)
      if (q != li) pe.push_back(wv[q].lo);
    c.inherited_ns = std::clamp(wv[li].lo - median(pe), int64_t{0}, std::max<int64_t>(lateness, 0));
  }
  auto kernel_ns = [](const Window& w, int32_t g) -> int64_t {
    auto it = std::lower_bound(w.kernels.begin(), w.kernels.end(),
                               std::pair<int32_t, int64_t>{g, INT64_MIN});
    return it != w.kernels.end() && it->first == g ? it->second : 0;
  };
  std::vector<std::pair<int32_t, int64_t>> kex;  // (group, excess)
  int64_t kern = 0;
  for (auto& [g, t] : wv[li].kernels) {
    std::vector<int64_t> peers;
    for (size_t q = 0; q < av.size(); ++q)
      if (q != li) peers.push_back(kernel_ns(wv[q], g));
    int64_t ex = t - median(peers);
    if (ex > 0) kex.emplace_back(g, ex), kern = sat_add(kern, ex);
  }
  std::vector<int64_t> ph, po;
  for (size_t q = 0; q < av.size(); ++q)
    if (q != li) ph.push_back(wv[q].host), po.push_back(wv[q].other);
  int64_t host = std::max<int64_t>(0, wv[li].host - median(ph));
  int64_t oth = std::max<int64_t>(0, wv[li].other - median(po));
  int64_t rest = lateness - c.inherited_ns, total = sat_add(sat_add(kern, host), oth);
  double scale = total > rest && total > 0 ? static_cast<double>(rest) / total : 1.0;
  c.kernels_ns = scaled(kern, scale);
  c.host_delay_ns = scaled(host, scale);
  c.other_idle_ns = scaled(oth, scale);
  c.unexplained_ns = std::max<int64_t>(
      0, sat_sub(sat_sub(sat_sub(rest, c.kernels_ns), c.host_delay_ns), c.other_idle_ns));
  for (auto& [g, ex] : kex) {
    auto& d = tot.delay[{last, g}];
    d.first = sat_add(d.first, scaled(ex, scale));
    d.second += 1;
  }
  StragglerRank& ra = tot.agg[last];
  ra.times_last += 1;
  ra.inflicted_ns = sat_add(ra.inflicted_ns, sc.inflicted_ns);
  ra.lateness_ns = sat_add(ra.lateness_ns, lateness);
  ra.causes.kernels_ns = sat_add(ra.causes.kernels_ns, c.kernels_ns);
  ra.causes.host_delay_ns = sat_add(ra.causes.host_delay_ns, c.host_delay_ns);
  ra.causes.other_idle_ns = sat_add(ra.causes.other_idle_ns, c.other_idle_ns);
  ra.causes.inherited_ns = sat_add(ra.causes.inherited_ns, c.inherited_ns);
  ra.causes.unexplained_ns = sat_add(ra.causes.unexplained_ns, c.unexplained_ns);
}

// The per-rank rows and the delaying kernels, largest delay first.
void ledger_ranks(LedgerTotals& tot, const NameGroups& groups, StragglerResult& res) {
  for (auto& [r, g] : tot.agg) {
    g.steps = static_cast<int64_t>(tot.steps_of[r].size());
    res.ranks.push_back(g);
  }
  for (auto& [k, v] : tot.delay)
    res.delay_by_kernel.push_back(
        {k.first, k.second >= 0 ? groups.names[k.second] : std::string(), v.first, v.second});
  std::stable_sort(
      res.delay_by_kernel.begin(), res.delay_by_kernel.end(),
      [](const KernelDelay& x, const KernelDelay& y) { return x.delay_ns > y.delay_ns; });
}

// How far these cross-rank times can be trusted (the caution / stated error).
void ledger_clocks(const Store& s, StragglerResult& res) {
  for (const auto& ri : s.ranks) {
    res.clocks_aligned = res.clocks_aligned && ri.clock_method.rfind("none", 0) != 0;
    // Kept as recorded by --align auto (no evidence against them): the inference's ± stands.
    if (ri.clock_method.rfind("none", 0) == 0)
      res.clock_uncertainty_ns = std::max(res.clock_uncertainty_ns, ri.clock_uncertainty_ns);
    if (ri.clock_method.rfind("inferred", 0) == 0) {
      ++res.ranks_inferred;
      res.clock_uncertainty_ns = std::max(res.clock_uncertainty_ns, ri.clock_uncertainty_ns);
      res.clock_method = ri.clock_method.substr(0, ri.clock_method.find(" (reference"));
    }
  }
}

}  // namespace

namespace {
// The ledger from the match and the windows (empty windows: no root causes charged).
StragglerResult ledger_of(const Store& s, CollectiveMatch cm, const NameGroups& groups,
                          Windows win) {
  const auto& a = s.activities;
  StragglerResult res;
  res.method = cm.method;
  res.ranks_analysed = cm.ranks.size();
  res.comm_kernels = cm.comm_kernels;
  res.unmatched_count = cm.unmatched_count;
  res.p2p_pairs = cm.p2p.size();
  res.unmatched = std::move(cm.unmatched);
  const std::vector<Collective>& matched = cm.matched;
  if (win.size() != matched.size()) {
    win.assign(matched.size(), {});
    for (size_t k = 0; k < matched.size(); ++k) win[k].resize(matched[k].arrivals.size());
  }
  LedgerTotals tot;
  for (int32_t r : cm.ranks) tot.agg[r].rank = r;
  for (const auto& r : s.ranks) tot.uncertainty[r.rank] = r.clock_uncertainty_ns;
  const UnalignedClocks unaligned(s);
  for (const Collective& in : matched) {
    if (is_n_by_n(in.op)) count_order_violations(in, a, unaligned, res);
    int32_t last = 0;
    int64_t lateness = 0;
    StragglerCollective sc = instance_waits(in, a, tot, &last, &lateness);
    if (!sc.noise && sc.skew_ns > 0) {
      charge_last_arrival(sc, in, win, last, lateness, tot);
    } else if (sc.skew_ns > 0) {  // noise; skew 0: no last arriver to charge
      sc.last_rank = last;
      tot.agg[last].noise_skipped += 1;
    }
    res.collectives.push_back(std::move(sc));
  }
  ledger_ranks(tot, groups, res);
  ledger_clocks(s, res);
  return res;
}
}  // namespace

StragglerResult straggler_ledger(const Store& s, const CrossRankOptions& opt) {
  std::vector<uint32_t> rows = select_activities(s, opt.filter);
  CollectiveMatch cm = ledger_match(s, rows, opt);
  NameGroups groups;  // display names of the delaying kernels (full names with --verbose)
  if (!cm.matched.empty()) groups = group_names(s, rows, opt.verbose, /*kernels_only=*/true);
  // Root-cause inputs per (instance, arrival). Without causes (the diff needs only who was last
  // and the waits) every window stays empty: no previous collective, so no root cause is
  // charged and the costly timelines are skipped.
  Windows win;
  if (opt.causes) win = arrival_windows(s, rows, cm.matched, groups);
  return ledger_of(s, std::move(cm), groups, std::move(win));
}

int32_t worst_straggler(const StragglerResult& r) {
  const StragglerRank* worst = nullptr;
  for (const auto& g : r.ranks)
    if (g.times_last > 0 && (!worst || g.inflicted_ns > worst->inflicted_ns)) worst = &g;
  return worst ? worst->rank : -1;
}

std::string straggler_headline(const StragglerResult& r) {
  const StragglerRank* worst = nullptr;
  const int32_t w = worst_straggler(r);
  for (const auto& g : r.ranks)
    if (g.rank == w) worst = &g;
  std::ostringstream h;
  h.setf(std::ios::fixed);
  size_t nm = r.collectives.size();
  if (r.ranks_analysed < 2) {
    h << "only " << r.ranks_analysed << " rank: no cross-rank straggler analysis";
  } else if (nm == 0) {
    h << "no collective matched across ranks (" << r.comm_kernels
      << " communication kernels, method " << r.method << ")";
  } else if (!worst) {
    h << "no straggler: all " << nm << " matched collectives started together"
      << " (within clock uncertainty)";
  } else {
    const StragglerRank& g = *worst;
    std::set<std::string> ops;
    for (const auto& c : r.collectives) ops.insert(c.op);
    std::string opname = ops.size() == 1 ? *ops.begin() : "collective";
    h.precision(1);
    h << "rank " << g.rank << " arrived last at " << g.times_last << " of " << nm << " " << opname
      << (nm == 1 ? "" : "s") << ", " << us(g.lateness_ns) / 1000.0 / g.times_last
      << " ms late on average, inflicting ";
    if (g.steps > 0)
      h << us(g.inflicted_ns) / 1000.0 / g.steps << " ms of waiting per step";
    else
      h << us(g.inflicted_ns) / 1000.0 << " ms of waiting in total";
    const StragglerCauses& c = g.causes;
    int64_t tot = 0;
    for (int64_t x :
         {c.kernels_ns, c.host_delay_ns, c.other_idle_ns, c.inherited_ns, c.unexplained_ns})
      tot = sat_add(tot, x);
    if (tot > 0) {
      std::pair<int64_t, std::string> best{c.kernels_ns, "kernels"};
      for (const auto& p : {std::pair<int64_t, std::string>{c.host_delay_ns, "host"},
                            {c.other_idle_ns, "other"},
                            {c.inherited_ns, "inherited"},
                            {c.unexplained_ns, "unexplained"}})
        if (p.first > best.first) best = p;
      h.precision(0);
      h << "; " << 100.0 * best.first / tot << " % of its lateness is ";
      if (best.second == "kernels") {
        std::string top;
        for (const auto& d : r.delay_by_kernel)
          if (d.rank == g.rank) {
            top = d.kernel;
            break;
          }
        if (top.size() > 40) top = top.substr(0, 40) + "…";
        h << "longer `" << top << "` kernels";
      } else if (best.second == "host") {
        h << "host launch delay (its GPU waited for the CPU)";
      } else if (best.second == "other") {
        h << "other idle time on its GPU";
      } else if (best.second == "inherited") {
        h << "lateness inherited from the previous collective";
      } else {
        h << "not explained by kernels or idle time";
      }
    }
  }
  return h.str();
}

std::string straggler_clock_caution(const StragglerResult& r) {
  if (r.ranks_analysed < 2) return "";
  if (!r.clocks_aligned && r.clock_uncertainty_ns > 0) {
    std::ostringstream e;
    e << std::fixed << std::setprecision(1)
      << "caution: these ranks' clocks were not aligned (per-host wall clocks, kept as recorded: "
         "they agree with the collectives within ±"
      << us(r.clock_uncertainty_ns) << " µs); skews below that are noise";
    return e.str();
  }
  if (!r.clocks_aligned)
    return "caution: these ranks' clocks were not aligned (per-host wall clocks); arrival skews "
           "include their offsets, typically 1 ms or more under NTP";
  if (r.ranks_inferred < 2) return "";
  std::ostringstream e;
  e << std::fixed << std::setprecision(1) << "clocks " << r.clock_method << ", ±"
    << us(r.clock_uncertainty_ns) << " µs: skews below that are noise";
  return e.str();
}

std::vector<std::string> straggler_notes(const StragglerResult& r) {
  std::vector<std::string> n;
  const std::string by = matched_by(r.method);
  n.push_back("collective matching: " +
              (by == "none" ? r.method : "matched by " + by + " (" + r.method + ")") + "; " +
              std::to_string(r.collectives.size()) + " instances matched on all their ranks, " +
              std::to_string(r.unmatched_count) + " unmatched" +
              (r.p2p_pairs ? ", " + std::to_string(r.p2p_pairs) + " send/receive pairs" : ""));
  if (r.nxn_instances > 0)
    n.push_back("clock check: " + std::to_string(r.violations_aligned) + " of " +
                std::to_string(r.nxn_instances) +
                " all-to-all collectives end on some rank before the last rank "
                "started (happened-before violations)" +
                (r.clocks_aligned ? "; before alignment (the clocks as recorded): " +
                                        std::to_string(r.violations_unaligned)
                                  : std::string(" (clocks as recorded, not aligned)")));
  return n;
}

namespace {

nlohmann::json causes_json(const StragglerCauses& c) {
  return {{"kernels_us", us(c.kernels_ns)},
          {"host_delay_us", us(c.host_delay_ns)},
          {"other_idle_us", us(c.other_idle_ns)},
          {"inherited_us", us(c.inherited_ns)},
          {"unexplained_us", us(c.unexplained_ns)}};
}

// Last arriver of a collective in the tables and JSON: none when no rank started later.
bool has_last(const StragglerCollective& c) { return c.skew_ns > 0; }

}  // namespace

std::vector<Table> straggler_tables(const StragglerResult& r, const CrossRankOptions& opt) {
  auto within_top = [&](size_t i) { return opt.top <= 0 || static_cast<int>(i) < opt.top; };
  Table ct;
  ct.key = "stragglers_collectives";
  ct.title = "Straggler ledger: matched collectives (top by wait inflicted)";
  ct.columns = {"id",
                "op",
                "ranks",
                "last_rank",
                "skew_us",
                "inflicted_us",
                "completion_skew_us",
                "transfer_us",
                "busbw_gbps",
                "noise",
                "step"};
  ct.in_json = false;
  std::vector<const StragglerCollective*> by_inflicted;
  for (const auto& c : r.collectives) by_inflicted.push_back(&c);
  std::stable_sort(by_inflicted.begin(), by_inflicted.end(),
                   [](const auto* x, const auto* y) { return x->inflicted_ns > y->inflicted_ns; });
  for (size_t i = 0; i < by_inflicted.size() && within_top(i); ++i) {
    const StragglerCollective& c = *by_inflicted[i];
    ct.rows.push_back(
        {c.id, c.op, int64_t{c.ranks}, has_last(c) ? Cell(int64_t{c.last_rank}) : Cell{},
         us(c.skew_ns), us(c.inflicted_ns), us(c.completion_skew_ns), us(c.transfer_ns),
         c.busbw_gbps ? Cell(*c.busbw_gbps) : Cell{}, std::string(c.noise ? "noise" : ""),
         c.step == kNoStep ? Cell{} : Cell(int64_t{c.step})});
  }

  Table rt;
  rt.key = "stragglers_ranks";
  rt.title = "Straggler ledger per rank (causes: share of lateness when it arrived last)";
  rt.columns = {"rank",           "times_last",       "inflicted_us",
                "suffered_us",    "mean_lateness_us", "kernels_us",
                "host_delay_us",  "other_idle_us",    "inherited_us",
                "unexplained_us", "noise_skipped"};
  rt.in_json = false;
  for (const auto& g : r.ranks) {
    Cell ml = g.times_last ? Cell(us(g.lateness_ns) / static_cast<double>(g.times_last)) : Cell{};
    rt.rows.push_back({int64_t{g.rank}, g.times_last, us(g.inflicted_ns), us(g.suffered_ns), ml,
                       us(g.causes.kernels_ns), us(g.causes.host_delay_ns),
                       us(g.causes.other_idle_ns), us(g.causes.inherited_ns),
                       us(g.causes.unexplained_ns), g.noise_skipped});
  }

  Table dt;
  dt.key = "delay_by_kernel";
  dt.title =
      "Delay caused per (rank, kernel): extra kernel time before collectives it arrived last at";
  dt.columns = {"rank", "kernel", "delay_us", "instances"};
  dt.max_text_width = opt.verbose ? 0 : 80;
  for (size_t i = 0; i < r.delay_by_kernel.size() && within_top(i); ++i) {
    const KernelDelay& d = r.delay_by_kernel[i];
    dt.rows.push_back({int64_t{d.rank}, d.kernel.empty() ? std::string("?") : d.kernel,
                       us(d.delay_ns), d.instances});
  }
  std::vector<Table> out;
  out.push_back(std::move(ct));
  out.push_back(std::move(rt));
  out.push_back(std::move(dt));
  return out;
}

// The ledger as docs/json.md's "stragglers" key.
static void straggler_json(const StragglerResult& r, const std::string& headline,
                           nlohmann::json& json) {
  nlohmann::json jcoll = nlohmann::json::array();
  for (const auto& c : r.collectives) {
    nlohmann::json waits = nlohmann::json::object();
    for (auto [rank, w] : c.wait_ns) waits[std::to_string(rank)] = us(w);
    jcoll.push_back(
        {{"id", c.id},
         {"op", c.op},
         {"match", r.method},
         {"ranks", c.ranks},
         {"last_rank", has_last(c) ? nlohmann::json(c.last_rank) : nlohmann::json(nullptr)},
         {"skew_us", us(c.skew_ns)},
         {"wait_us", waits},
         {"inflicted_us", us(c.inflicted_ns)},
         {"completion_skew_us", us(c.completion_skew_ns)},
         {"transfer_us", us(c.transfer_ns)},
         {"busbw_gbps", c.busbw_gbps ? nlohmann::json(*c.busbw_gbps) : nlohmann::json(nullptr)},
         {"msg_bytes", c.msg_bytes >= 0 ? nlohmann::json(c.msg_bytes) : nlohmann::json(nullptr)},
         {"noise", c.noise},
         {"step", c.step == kNoStep ? nlohmann::json(nullptr) : nlohmann::json(c.step)},
         {"lateness_us", us(c.lateness_ns)},
         {"causes", causes_json(c.causes)}});
  }
  nlohmann::json jranks = nlohmann::json::array();
  for (const auto& g : r.ranks)
    jranks.push_back(
        {{"rank", g.rank},
         {"times_last", g.times_last},
         {"inflicted_us", us(g.inflicted_ns)},
         {"suffered_us", us(g.suffered_ns)},
         {"mean_lateness_us",
          g.times_last ? nlohmann::json(us(g.lateness_ns) / static_cast<double>(g.times_last))
                       : nlohmann::json(nullptr)},
         {"noise_skipped", g.noise_skipped},
         {"causes", causes_json(g.causes)}});
  nlohmann::json unmatched = nlohmann::json::array();
  for (const auto& u : r.unmatched)
    unmatched.push_back(
        {{"op", u.op}, {"ranks_present", u.ranks_present}, {"ranks_expected", u.ranks_expected}});
  nlohmann::json jd = nlohmann::json::array();
  for (const auto& d : r.delay_by_kernel)
    jd.push_back({{"rank", d.rank},
                  {"kernel", d.kernel},
                  {"delay_us", us(d.delay_ns)},
                  {"instances", d.instances}});
  json["stragglers"] = {{"clock_check",
                         {{"nxn_instances", r.nxn_instances},
                          {"violations_aligned", r.violations_aligned},
                          {"violations_unaligned", r.violations_unaligned}}},
                        {"match", r.method},
                        {"matched_by", matched_by(r.method)},
                        {"matched", r.collectives.size()},
                        {"p2p_pairs", r.p2p_pairs},
                        {"unmatched_count", r.unmatched_count},
                        {"unmatched", unmatched},
                        {"headline", headline},
                        {"clock_caution", straggler_clock_caution(r)},
                        {"collectives", jcoll},
                        {"ranks", jranks},
                        {"delay_by_kernel", jd}};
}

void straggler_analysis(const Store& s, const CrossRankOptions& opt, Report* out) {
  straggler_report(std::make_shared<const StragglerResult>(straggler_ledger(s, opt)), opt, out);
}

void straggler_report(std::shared_ptr<const StragglerResult> r, const CrossRankOptions& opt,
                      Report* out) {
  std::string headline = straggler_headline(*r);
  out->lead.push_back(headline);  // the verdict goes first, before every other headline line

  for (auto& n : straggler_notes(*r)) out->headline.push_back(std::move(n));
  if (std::string c = straggler_clock_caution(*r); !c.empty())
    out->headline.push_back(std::move(c));
  for (auto& t : straggler_tables(*r, opt)) out->tables.push_back(std::move(t));
  // The per-collective list is most of the JSON's cost: built only when JSON is rendered.
  out->json_later.push_back(
      [r = std::move(r), headline](nlohmann::json& json) { straggler_json(*r, headline, json); });
}

// StragglerFold (sliced_folds.h): the match and the window bounds from the cross-rank rows, each
// rank's windows from its slice, the ledger from the cross-rank rows and the windows.
struct StragglerFold::Impl {
  CrossRankOptions opt;
  CollectiveMatch cm;
  NameGroups groups;
  Windows win;
  Queries queries;
  std::vector<int32_t> ranks;  // whose windows add() filled
};

StragglerFold::StragglerFold(const CrossRankOptions& opt) : impl_(std::make_shared<Impl>()) {
  impl_->opt = opt;
}

void StragglerFold::begin(const Store& cross, const std::vector<uint8_t>& kernel_names) {
  Impl& m = *impl_;
  const std::vector<uint32_t> rows = select_activities(cross, m.opt.filter);
  m.cm = ledger_match(cross, rows, m.opt);
  if (m.cm.matched.empty()) return;
  m.groups = group_used_names(cross, kernel_names, m.opt.verbose);
  if (m.opt.causes) m.win = window_bounds(cross.activities, m.cm.matched, &m.queries);
}

void StragglerFold::add(const Store& slice) {
  Impl& m = *impl_;
  if (m.win.empty()) return;
  const std::vector<uint32_t> rows = select_activities(slice, m.opt.filter);
  const detail::RowsByRank ranks(slice, rows);
  const detail::LaunchIndex launch_of(slice);
  for (size_t w = 0; w < ranks.size(); ++w) {
    auto qit = m.queries.find(ranks.rank(w));
    if (qit != m.queries.end())
      rank_windows(slice, ranks.rows(w), ranks.rank(w), launch_of, m.groups, qit->second, m.win);
    m.ranks.push_back(ranks.rank(w));
  }
}

std::string StragglerFold::save() const {
  const Impl& m = *impl_;
  Archive ar;
  for (int32_t r : m.ranks) {
    auto qit = m.queries.find(r);
    if (qit == m.queries.end()) continue;
    for (auto [k, q] : qit->second) {
      const Window& w = m.win[k][q];
      ar.put(static_cast<uint64_t>(k)), ar.put(static_cast<uint64_t>(q));
      ar.put(w.lo), ar.put(w.hi), ar.put(w.has_prev), ar.put(w.kernels), ar.put(w.host);
      ar.put(w.other);
    }
  }
  return ar.bytes();
}

void StragglerFold::merge(const std::string& bytes) {
  Impl& m = *impl_;
  Archive ar(bytes);
  while (!ar.done()) {
    const auto k = ar.get<uint64_t>(), q = ar.get<uint64_t>();
    if (k >= m.win.size() || q >= m.win[k].size()) throw Error("MPI analysis: bad window");
    Window& w = m.win[k][q];
    ar.get(w.lo), ar.get(w.hi), ar.get(w.has_prev), ar.get(w.kernels), ar.get(w.host);
    ar.get(w.other);
  }
}

StragglerResult StragglerFold::finish(const Store& cross) const {
  return ledger_of(cross, impl_->cm, impl_->groups, impl_->win);
}

}  // namespace kernalyse
