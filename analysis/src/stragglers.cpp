// Collective matching across ranks, the straggler ledger (Scalasca's "wait at N×N" mapped to
// NCCL kernels) and the root cause of each last arrival. Formulas in docs/analyses.md.
#include <algorithm>
#include <cmath>
#include <map>
#include <regex>
#include <sstream>
#include <unordered_map>

#include "kernalyse/crossrank.h"
#include "timeline.h"

namespace kernalyse {
namespace {

double us(int64_t ns) { return static_cast<double>(ns) / 1000.0; }

int64_t median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m), v.end());
  int64_t hi = v[m];
  if (v.size() % 2) return hi;
  int64_t lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m));
  return lo + (hi - lo) / 2;
}

std::string op_from_kernel(const std::string& simplified) {
  static const std::regex re(R"(nccl(?:Dev|SymkDev)?Kernel_([A-Za-z]+))");
  std::smatch m;
  if (std::regex_search(simplified, m, re)) return m[1].str();
  return simplified;
}

// nccl-tests' bus-bandwidth factor for an op over n ranks.
// "_allgather_base", "AllGather" → "allgatherbase", "allgather": letters only, lower case.
std::string op_key(const std::string& op) {
  std::string o;
  for (char c : op)
    if (std::isalpha(static_cast<unsigned char>(c))) o += static_cast<char>(std::tolower(c));
  return o;
}

double busbw_factor(const std::string& op, int n) {
  const std::string o = op_key(op);
  if (n < 2) return 1.0;
  if (o.find("allreduce") != std::string::npos) return 2.0 * (n - 1) / n;
  if (o.find("allgather") != std::string::npos || o.find("reducescatter") != std::string::npos)
    return static_cast<double>(n - 1) / n;
  return 1.0;
}

// N×N collectives: every rank's kernel needs every other rank (Scalasca's "wait at N×N").
bool is_n_by_n(const std::string& op) {
  const std::string o = op_key(op);
  for (const char* k : {"allreduce", "allgather", "reducescatter", "alltoall", "barrier"})
    if (o.find(k) != std::string::npos) return true;
  return false;
}

// "[0, 1, 2]" → {0, 1, 2}; empty when it does not parse.
std::vector<int32_t> parse_ranks(const std::string& s) {
  std::vector<int32_t> out;
  std::string cur;
  for (char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      cur += c;
    } else if (!cur.empty()) {
      out.push_back(std::stoi(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) out.push_back(std::stoi(cur));
  return out;
}

// Per rank: compute kernels and device idle gaps in time order, for interval queries.
struct RankTimeline {
  struct K {
    int64_t start, end;
    int32_t group;
  };
  struct Gap {
    int64_t start, end;
    bool host;
  };
  std::vector<K> kernels;  // sorted by start
  int64_t max_kernel = 0;
  std::vector<Gap> gaps;  // device idle, sorted

  void kernel_time(int64_t a, int64_t b, std::unordered_map<int32_t, int64_t>* out) const {
    auto it = std::lower_bound(kernels.begin(), kernels.end(), a - max_kernel,
                               [](const K& k, int64_t t) { return k.start < t; });
    for (; it != kernels.end() && it->start < b; ++it) {
      int64_t s = std::max(a, it->start), e = std::min(b, it->end);
      if (e > s) (*out)[it->group] += e - s;
    }
  }
  void idle_time(int64_t a, int64_t b, int64_t* host, int64_t* other) const {
    auto it = std::lower_bound(gaps.begin(), gaps.end(), a,
                               [](const Gap& g, int64_t t) { return g.end <= t; });
    for (; it != gaps.end() && it->start < b; ++it) {
      int64_t s = std::max(a, it->start), e = std::min(b, it->end);
      if (e > s) (it->host ? *host : *other) += e - s;
    }
  }
};

struct Causes {
  int64_t kernels = 0, host = 0, other = 0, inherited = 0, unexplained = 0;
};

}  // namespace

namespace detail {

// The ledger's collective matcher (docs/analyses.md "Collective matching"), callable on its own
// so that the clock inference (clock_infer.cpp) matches exactly what the ledger reports.
LedgerMatch match_ledger_collectives(const Store& s, const std::map<int32_t, std::vector<uint32_t>>& comm,
                                     const std::vector<int32_t>& all_ranks, const NameGroups& groups,
                                     const std::vector<int32_t>& nccl_of) {
  const auto& a = s.activities;
  auto nccl_row = [&](uint32_t r) { return nccl_of.empty() ? -1 : nccl_of[r]; };
  // Matching method: the best identity every communication kernel has.
  bool all_seq = true, all_meta = true, all_comm = true;
  size_t ncomm = 0;
  for (auto& [r, v] : comm)
    for (uint32_t i : v) {
      ++ncomm;
      int32_t n = nccl_row(i);
      all_meta = all_meta && n >= 0;
      all_seq = all_seq && n >= 0 && s.nccl.seq[n] >= 0;
      // The collector tags kernels with the communicator's hash (its pg name is "comm:<hash>").
      all_comm = all_comm && n >= 0 && n < static_cast<int32_t>(s.nccl.comm_hash.size()) &&
                 s.nccl.comm_hash[n] != 0;
    }
  std::string method = ncomm == 0     ? "none"
                       : all_seq && all_comm ? "collector (communicator, collective, seq)"
                       : all_seq      ? "nccl (process group, collective, Seq)"
                       : all_meta     ? "nccl (process group, collective, occurrence)"
                                      : "kernel (name, stream, occurrence)";

  auto group_name = [&](uint32_t i) {
    int32_t g = groups.group_of[a.name_id[i]];
    return g >= 0 ? groups.names[g] : s.strings.at(a.name_id[i]);
  };
  auto build = [&](bool with_stream) {
    std::unordered_map<std::string, LedgerInstance> inst;
    std::vector<std::string> order;
    for (auto& [r, v] : comm) {
      std::unordered_map<std::string, int64_t> occurrence;
      for (uint32_t i : v) {
        int32_t n = nccl_row(i);
        std::string base, op;
        if (all_meta) {
          op = s.strings.at(s.nccl.collective_id[n]);
          base = s.strings.at(s.nccl.pg_name_id[n]) + "\x1f" + op;
        } else {
          op = op_from_kernel(group_name(i));
          base = group_name(i) + (with_stream ? "\x1f" + std::to_string(a.stream[i]) : "");
        }
        std::string key = base + "\x1f" +
                          std::to_string(all_seq ? s.nccl.seq[n] : occurrence[base]++);
        auto [it, fresh] = inst.try_emplace(key);
        LedgerInstance& in = it->second;
        if (fresh) {
          in.key = key;
          in.op = op;
          order.push_back(key);
          if (all_meta) in.expected = parse_ranks(s.strings.at(s.nccl.pg_ranks_id[n]));
        }
        if (std::none_of(in.arrivals.begin(), in.arrivals.end(),
                         [&](const LedgerArrival& x) { return x.rank == r; }))
          in.arrivals.push_back({r, i});
        if (n >= 0) in.msg_bytes = std::max(in.msg_bytes, s.nccl.msg_bytes[n]);
      }
    }
    return std::make_pair(std::move(inst), std::move(order));
  };
  auto [inst, order] = build(true);
  auto count_matched = [&](std::unordered_map<std::string, LedgerInstance>& m) {
    size_t c = 0;
    for (auto& [k, in] : m) {
      std::vector<int32_t> exp;
      for (int32_t r : in.expected)
        if (std::binary_search(all_ranks.begin(), all_ranks.end(), r)) exp.push_back(r);
      if (exp.empty()) exp = all_ranks;  // no process-group ranks recorded: every rank
      in.expected = exp;
      c += in.arrivals.size() == exp.size() && exp.size() >= 2;
    }
    return c;
  };
  size_t matched_n = count_matched(inst);
  if (!all_meta && matched_n * 2 < inst.size()) {
    // Streams are numbered per process; ranks may use different ones for NCCL. Retry without.
    auto alt = build(false);
    size_t alt_n = count_matched(alt.first);
    if (alt_n > matched_n) {
      inst = std::move(alt.first);
      order = std::move(alt.second);
      matched_n = alt_n;
      method = "kernel (name, occurrence)";
    }
  }

  LedgerMatch out;
  out.method = method;
  out.ncomm = ncomm;
  for (const auto& k : order) {
    LedgerInstance& in = inst[k];
    std::sort(in.arrivals.begin(), in.arrivals.end(),
              [](const LedgerArrival& x, const LedgerArrival& y) { return x.rank < y.rank; });
    bool ok = in.arrivals.size() == in.expected.size() && in.expected.size() >= 2;
    (ok ? out.matched : out.unmatched).push_back(out.instances.size());
    out.instances.push_back(std::move(in));
  }
  std::vector<int64_t> first(out.instances.size(), INT64_MAX);
  for (size_t k = 0; k < out.instances.size(); ++k)
    for (auto& v : out.instances[k].arrivals) first[k] = std::min(first[k], a.start_ns[v.row]);
  std::sort(out.matched.begin(), out.matched.end(),
            [&](size_t x, size_t y) { return first[x] < first[y]; });
  return out;
}

}  // namespace detail

void straggler_analysis(const Store& s, const CrossRankOptions& opt, Report* out) {
  const auto& a = s.activities;
  std::vector<uint32_t> rows = select_activities(s, opt.filter);
  NameGroups groups = group_names(s, rows, opt.verbose, /*kernels_only=*/true);

  std::vector<int32_t> nccl_of;
  if (s.nccl.size()) {
    nccl_of.assign(a.size(), -1);
    for (size_t i = 0; i < s.nccl.size(); ++i)
      if (s.nccl.activity[i] < a.size()) nccl_of[s.nccl.activity[i]] = static_cast<int32_t>(i);
  }

  // Every rank's GPU work in time order (for the timelines), and its communication kernels.
  std::map<int32_t, std::vector<uint32_t>> comm;
  std::map<int32_t, std::vector<uint32_t>> work;
  for (uint32_t i : rows)
    if (is_gpu_work(static_cast<Kind>(a.kind[i]))) work[a.rank[i]].push_back(i);
  for (auto& [r, v] : work) {
    v = detail::merge_streams_by_start(s, v);
    for (uint32_t i : v)
      if (a.kind[i] == static_cast<uint8_t>(Kind::Kernel) &&
          a.category[i] == static_cast<uint8_t>(Category::Communication))
        comm[r].push_back(i);
  }
  std::vector<int32_t> all_ranks;
  for (auto& [r, v] : work) all_ranks.push_back(r);

  // Reuse the clock inference's matching when it saw the same rows (no filter, same names).
  detail::LedgerMatch own;
  const bool reuse = opt.match && !opt.filter.rank && !opt.filter.step && !opt.verbose;
  if (!reuse) own = detail::match_ledger_collectives(s, comm, all_ranks, groups, nccl_of);
  const detail::LedgerMatch& lm = reuse ? *opt.match : own;
  const std::string& method = lm.method;
  const size_t ncomm = lm.ncomm;
  std::vector<const detail::LedgerInstance*> matched;
  for (size_t k : lm.matched) matched.push_back(&lm.instances[k]);
  if (reuse) {  // the clocks moved since: first-arrival order on the times as they are now
    std::vector<std::pair<int64_t, const detail::LedgerInstance*>> o;
    for (auto* in : matched) {
      int64_t t = INT64_MAX;
      for (auto& v : in->arrivals) t = std::min(t, a.start_ns[v.row]);
      o.emplace_back(t, in);
    }
    std::stable_sort(o.begin(), o.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
    for (size_t k = 0; k < o.size(); ++k) matched[k] = o[k].second;
  }
  nlohmann::json unmatched = nlohmann::json::array();
  const size_t unmatched_n = lm.unmatched.size();
  for (size_t k : lm.unmatched) {
    const detail::LedgerInstance& in = lm.instances[k];
    if (unmatched.size() >= 50) break;
    nlohmann::json rk = nlohmann::json::array();
    for (auto& x : in.arrivals) rk.push_back(x.rank);
    unmatched.push_back({{"op", in.op}, {"ranks_present", rk}, {"ranks_expected", in.expected.size()}});
  }

  // Per-rank timelines for root cause: compute kernels, device idle gaps (host vs other).
  std::map<int32_t, int64_t> uncertainty;
  for (const auto& r : s.ranks) uncertainty[r.rank] = r.clock_uncertainty_ns;
  // Root-cause inputs: for every (instance, rank) the window from the end of the rank's previous
  // matched collective to its arrival, with compute time per kernel name and device idle split
  // into host delay / other. One rank's timeline is built at a time (bounded memory).
  struct Window {
    int64_t lo = 0, hi = 0;
    bool has_prev = false;
    std::vector<std::pair<int32_t, int64_t>> kernels;  // (name group, ns), sorted by group
    int64_t host = 0, other = 0;
  };
  std::vector<std::vector<Window>> win(matched.size());  // aligned with arrivals
  if (!matched.empty()) {
    detail::LaunchIndex launch_of(s);
    std::map<int32_t, std::vector<std::pair<size_t, size_t>>> queries;  // rank → (instance, arrival)
    std::map<int32_t, int64_t> last_end;
    for (size_t k = 0; k < matched.size(); ++k) {
      const auto& av = matched[k]->arrivals;
      win[k].resize(av.size());
      for (size_t q = 0; q < av.size(); ++q) {
        Window& w = win[k][q];
        w.hi = a.start_ns[av[q].row];
        auto it = last_end.find(av[q].rank);
        w.has_prev = it != last_end.end();
        w.lo = w.has_prev ? std::min(it->second, w.hi) : INT64_MIN;  // first: from the rank's start
        last_end[av[q].rank] = a.end_ns[av[q].row];
        queries[av[q].rank].emplace_back(k, q);
      }
    }
    for (auto& [r, qs] : queries) {
      RankTimeline t;
      int64_t busy_end = INT64_MIN;
      for (uint32_t i : work[r]) {
        if (busy_end != INT64_MIN && a.start_ns[i] > busy_end) {
          int64_t launch = launch_of.find(r, a.correlation[i]);
          bool host = launch != detail::LaunchIndex::kNone && launch > busy_end;
          t.gaps.push_back({busy_end, a.start_ns[i], host});
        }
        busy_end = std::max(busy_end, a.end_ns[i]);
        if (a.kind[i] == static_cast<uint8_t>(Kind::Kernel) &&
            a.category[i] == static_cast<uint8_t>(Category::Computation)) {
          t.kernels.push_back({a.start_ns[i], a.end_ns[i], groups.group_of[a.name_id[i]]});
          t.max_kernel = std::max(t.max_kernel, a.end_ns[i] - a.start_ns[i]);
        }
      }
      int64_t first = work[r].empty() ? 0 : a.start_ns[work[r].front()];
      std::unordered_map<int32_t, int64_t> kt;
      for (auto [k, q] : qs) {
        Window& w = win[k][q];
        if (w.lo == INT64_MIN) w.lo = std::min(first, w.hi);
        kt.clear();
        t.kernel_time(w.lo, w.hi, &kt);
        w.kernels.assign(kt.begin(), kt.end());
        std::sort(w.kernels.begin(), w.kernels.end());
        t.idle_time(w.lo, w.hi, &w.host, &w.other);
      }
    }
  }

  struct RankAgg {
    int64_t times_last = 0, inflicted = 0, suffered = 0, lateness = 0, noise = 0;
    Causes causes;
    std::map<int32_t, int64_t> steps;
  };
  std::map<int32_t, RankAgg> agg;
  for (int32_t r : all_ranks) agg[r];
  std::map<std::pair<int32_t, int32_t>, std::pair<int64_t, int64_t>> delay;  // (rank, group)

  Table ct;
  ct.key = "stragglers_collectives";
  ct.title = "Straggler ledger: matched collectives (top by wait inflicted)";
  ct.columns = {"id", "op", "ranks", "last_rank", "skew_us", "inflicted_us", "completion_skew_us",
                "transfer_us", "busbw_gbps", "noise", "step"};
  ct.in_json = false;
  nlohmann::json jcoll = nlohmann::json::array();
  std::vector<std::pair<int64_t, std::vector<Cell>>> crow;

  // Happened-before check (no rank ends an N×N collective before the last rank started it),
  // on the stored (aligned) times and on each rank's own clock before alignment.
  std::map<int32_t, const RankInfo*> rinfo;
  for (const auto& r : s.ranks) rinfo[r.rank] = &r;
  auto unaligned = [&](int32_t r, int64_t t) -> double {
    const RankInfo* i = rinfo.count(r) ? rinfo[r] : nullptr;
    if (!i) return static_cast<double>(t);
    return static_cast<double>(t - i->base_time_ns - i->clock_offset_ns) / (1.0 + i->clock_drift);
  };
  int64_t hb_checked = 0, hb_aligned = 0, hb_unaligned = 0;

  int64_t id = 0;
  for (const detail::LedgerInstance* in : matched) {
    if (is_n_by_n(in->op)) {
      ++hb_checked;
      int64_t smax_a = INT64_MIN, emin_a = INT64_MAX;
      double smax_u = -1e300, emin_u = 1e300;
      for (const auto& x : in->arrivals) {
        smax_a = std::max(smax_a, a.start_ns[x.row]);
        emin_a = std::min(emin_a, a.end_ns[x.row]);
        smax_u = std::max(smax_u, unaligned(x.rank, a.start_ns[x.row]));
        emin_u = std::min(emin_u, unaligned(x.rank, a.end_ns[x.row]));
      }
      hb_aligned += emin_a < smax_a;
      hb_unaligned += emin_u < smax_u;
    }
    const auto& av = in->arrivals;
    int64_t smin = INT64_MAX, smax = INT64_MIN, emin = INT64_MAX, emax = INT64_MIN;
    int32_t last = av[0].rank;
    int64_t u_last = 0, u_first = 0;
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
    u_last = uncertainty[last], u_first = uncertainty[first];
    int64_t skew = smax - smin;
    bool noise = skew <= u_last + u_first && (u_last + u_first) > 0;
    int64_t inflicted = 0, transfer = INT64_MAX;
    nlohmann::json waits = nlohmann::json::object();
    std::vector<int64_t> starts_others, ends_prev_others;
    for (const auto& x : av) {
      int64_t st = a.start_ns[x.row], en = a.end_ns[x.row];
      int64_t w = std::clamp(smax - st, int64_t{0}, en - st);
      inflicted += w;
      agg[x.rank].suffered += w;
      waits[std::to_string(x.rank)] = us(w);
      transfer = std::min(transfer, en - smax);
      if (x.rank != last) starts_others.push_back(st);
      if (a.step[x.row] != kNoStep) agg[x.rank].steps[a.step[x.row]] = 1;
    }
    transfer = std::max<int64_t>(transfer, 0);
    int n = static_cast<int>(av.size());
    Cell busbw;
    if (in->msg_bytes > 0 && transfer > 0)
      busbw = static_cast<double>(in->msg_bytes) * busbw_factor(in->op, n) / static_cast<double>(transfer);
    int32_t step = a.step[av[0].row];

    // Root cause of the last arrival, against the peers' median over the same interval.
    Causes c;
    int64_t lateness = smax - median(starts_others);
    if (!noise && skew > 0) {
      const std::vector<Window>& wv = win[static_cast<size_t>(id)];
      size_t li = 0;
      for (size_t q = 0; q < av.size(); ++q)
        if (av[q].rank == last) li = q;
      if (wv[li].has_prev) {
        std::vector<int64_t> pe;
        for (size_t q = 0; q < av.size(); ++q)
          if (q != li) pe.push_back(wv[q].lo);
        c.inherited = std::clamp(wv[li].lo - median(pe), int64_t{0}, lateness);
      }
      auto kernel_ns = [](const Window& w, int32_t g) -> int64_t {
        auto it = std::lower_bound(w.kernels.begin(), w.kernels.end(), std::pair<int32_t, int64_t>{g, INT64_MIN});
        return it != w.kernels.end() && it->first == g ? it->second : 0;
      };
      std::vector<std::pair<int32_t, int64_t>> kex;  // (group, excess)
      int64_t kern = 0;
      for (auto& [g, t] : wv[li].kernels) {
        std::vector<int64_t> peers;
        for (size_t q = 0; q < av.size(); ++q)
          if (q != li) peers.push_back(kernel_ns(wv[q], g));
        int64_t ex = t - median(peers);
        if (ex > 0) kex.emplace_back(g, ex), kern += ex;
      }
      std::vector<int64_t> ph, po;
      for (size_t q = 0; q < av.size(); ++q)
        if (q != li) ph.push_back(wv[q].host), po.push_back(wv[q].other);
      int64_t host = std::max<int64_t>(0, wv[li].host - median(ph));
      int64_t oth = std::max<int64_t>(0, wv[li].other - median(po));
      int64_t rest = lateness - c.inherited, total = kern + host + oth;
      double scale = total > rest && total > 0 ? static_cast<double>(rest) / total : 1.0;
      c.kernels = std::llround(kern * scale);
      c.host = std::llround(host * scale);
      c.other = std::llround(oth * scale);
      c.unexplained = std::max<int64_t>(0, rest - c.kernels - c.host - c.other);
      for (auto& [g, ex] : kex) {
        auto& d = delay[{last, g}];
        d.first += std::llround(ex * scale);
        d.second += 1;
      }
      RankAgg& ra = agg[last];
      ra.times_last += 1;
      ra.inflicted += inflicted;
      ra.lateness += lateness;
      ra.causes.kernels += c.kernels;
      ra.causes.host += c.host;
      ra.causes.other += c.other;
      ra.causes.inherited += c.inherited;
      ra.causes.unexplained += c.unexplained;
    } else if (noise && skew > 0) {  // skew 0: no last arriver to charge
      agg[last].noise += 1;
    }

    jcoll.push_back({{"id", id},
                     {"op", in->op},
                     {"match", method},
                     {"ranks", n},
                     {"last_rank", skew > 0 ? nlohmann::json(last) : nlohmann::json(nullptr)},
                     {"skew_us", us(skew)},
                     {"wait_us", waits},
                     {"inflicted_us", us(inflicted)},
                     {"completion_skew_us", us(emax - emin)},
                     {"transfer_us", us(transfer)},
                     {"busbw_gbps", std::holds_alternative<double>(busbw)
                                        ? nlohmann::json(std::get<double>(busbw))
                                        : nlohmann::json(nullptr)},
                     {"msg_bytes", in->msg_bytes >= 0 ? nlohmann::json(in->msg_bytes) : nlohmann::json(nullptr)},
                     {"noise", noise},
                     {"step", step == kNoStep ? nlohmann::json(nullptr) : nlohmann::json(step)},
                     {"lateness_us", us(skew > 0 ? lateness : 0)},
                     {"causes", {{"kernels_us", us(c.kernels)}, {"host_delay_us", us(c.host)},
                                 {"other_idle_us", us(c.other)}, {"inherited_us", us(c.inherited)},
                                 {"unexplained_us", us(c.unexplained)}}}});
    crow.push_back({inflicted,
                    {id, in->op, int64_t{n}, skew > 0 ? Cell(int64_t{last}) : Cell{}, us(skew),
                     us(inflicted), us(emax - emin), us(transfer), busbw,
                     std::string(noise ? "noise" : ""),
                     step == kNoStep ? Cell{} : Cell(int64_t{step})}});
    ++id;
  }
  std::stable_sort(crow.begin(), crow.end(),
                   [](const auto& x, const auto& y) { return x.first > y.first; });
  for (size_t i = 0; i < crow.size() && (opt.top <= 0 || static_cast<int>(i) < opt.top); ++i)
    ct.rows.push_back(std::move(crow[i].second));

  Table rt;
  rt.key = "stragglers_ranks";
  rt.title = "Straggler ledger per rank (causes: share of lateness when it arrived last)";
  rt.columns = {"rank", "times_last", "inflicted_us", "suffered_us", "mean_lateness_us",
                "kernels_us", "host_delay_us", "other_idle_us", "inherited_us", "unexplained_us",
                "noise_skipped"};
  rt.in_json = false;
  nlohmann::json jranks = nlohmann::json::array();
  for (auto& [r, g] : agg) {
    Cell ml = g.times_last ? Cell(us(g.lateness) / static_cast<double>(g.times_last)) : Cell{};
    rt.rows.push_back({int64_t{r}, g.times_last, us(g.inflicted), us(g.suffered), ml,
                       us(g.causes.kernels), us(g.causes.host), us(g.causes.other),
                       us(g.causes.inherited), us(g.causes.unexplained), g.noise});
    jranks.push_back({{"rank", r},
                      {"times_last", g.times_last},
                      {"inflicted_us", us(g.inflicted)},
                      {"suffered_us", us(g.suffered)},
                      {"mean_lateness_us", g.times_last ? nlohmann::json(std::get<double>(ml)) : nlohmann::json(nullptr)},
                      {"noise_skipped", g.noise},
                      {"causes", {{"kernels_us", us(g.causes.kernels)},
                                  {"host_delay_us", us(g.causes.host)},
                                  {"other_idle_us", us(g.causes.other)},
                                  {"inherited_us", us(g.causes.inherited)},
                                  {"unexplained_us", us(g.causes.unexplained)}}}});
  }

  Table dt;
  dt.key = "delay_by_kernel";
  dt.title = "Delay caused per (rank, kernel): extra kernel time before collectives it arrived last at";
  dt.columns = {"rank", "kernel", "delay_us", "instances"};
  dt.max_text_width = opt.verbose ? 0 : 80;
  std::vector<std::tuple<int64_t, int32_t, int32_t, int64_t>> dv;
  for (auto& [k, v] : delay) dv.emplace_back(v.first, k.first, k.second, v.second);
  std::sort(dv.begin(), dv.end(), [](const auto& x, const auto& y) { return std::get<0>(x) > std::get<0>(y); });
  for (size_t i = 0; i < dv.size() && (opt.top <= 0 || static_cast<int>(i) < opt.top); ++i) {
    auto [d, r, g, n] = dv[i];
    dt.rows.push_back({int64_t{r}, g >= 0 ? groups.names[g] : std::string("?"), us(d), n});
  }

  // The sentence a user can act on.
  std::string headline;
  int32_t worst = -1;
  for (auto& [r, g] : agg)
    if (g.times_last > 0 && (worst < 0 || g.inflicted > agg[worst].inflicted)) worst = r;
  std::ostringstream h;
  h.setf(std::ios::fixed);
  if (all_ranks.size() < 2) {
    h << "only " << all_ranks.size() << " rank: no cross-rank straggler analysis";
  } else if (matched.empty()) {
    h << "no collective matched across ranks (" << ncomm << " communication kernels, method "
      << method << ")";
  } else if (worst < 0) {
    h << "no straggler: all " << matched.size() << " matched collectives started together"
      << " (within clock uncertainty)";
  } else {
    const RankAgg& g = agg[worst];
    std::map<std::string, int64_t> ops;
    for (const detail::LedgerInstance* in : matched) ops[in->op]++;
    std::string opname = ops.size() == 1 ? ops.begin()->first : "collective";
    size_t nsteps = g.steps.size();
    h.precision(1);
    h << "rank " << worst << " arrived last at " << g.times_last << " of " << matched.size() << " "
      << opname << (matched.size() == 1 ? "" : "s") << ", " << us(g.lateness) / 1000.0 / g.times_last
      << " ms late on average, inflicting ";
    if (nsteps > 0)
      h << us(g.inflicted) / 1000.0 / nsteps << " ms of waiting per step";
    else
      h << us(g.inflicted) / 1000.0 << " ms of waiting in total";
    int64_t tot = g.causes.kernels + g.causes.host + g.causes.other + g.causes.inherited +
                  g.causes.unexplained;
    if (tot > 0) {
      std::pair<int64_t, std::string> best{g.causes.kernels, "kernels"};
      for (auto p : {std::pair<int64_t, std::string>{g.causes.host, "host"},
                     {g.causes.other, "other"}, {g.causes.inherited, "inherited"},
                     {g.causes.unexplained, "unexplained"}})
        if (p.first > best.first) best = p;
      h.precision(0);
      h << "; " << 100.0 * best.first / tot << " % of its lateness is ";
      if (best.second == "kernels") {
        std::string top;
        for (auto& [d, r, gid, n] : dv)
          if (r == worst) {
            top = gid >= 0 ? groups.names[gid] : "";
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
  headline = h.str();
  out->headline.insert(out->headline.begin(), headline);

  nlohmann::json js = {{"clock_check", {{"nxn_instances", hb_checked},
                                        {"violations_aligned", hb_aligned},
                                        {"violations_unaligned", hb_unaligned}}},
                       {"match", method},
                       {"matched", matched.size()},
                       {"unmatched_count", unmatched_n},
                       {"unmatched", unmatched},
                       {"headline", headline},
                       {"collectives", jcoll},
                       {"ranks", jranks}};
  nlohmann::json jd = nlohmann::json::array();
  for (auto& [d, r, g, n] : dv)
    jd.push_back({{"rank", r}, {"kernel", g >= 0 ? groups.names[g] : ""}, {"delay_us", us(d)}, {"instances", n}});
  js["delay_by_kernel"] = jd;
  out->json["stragglers"] = js;
  out->headline.push_back("collective matching: " + method + "; " + std::to_string(matched.size()) +
                          " instances matched on all their ranks, " + std::to_string(unmatched_n) +
                          " unmatched");
  if (hb_checked > 0)
    out->headline.push_back("clock check: " + std::to_string(hb_aligned) + " of " +
                            std::to_string(hb_checked) +
                            " all-to-all collectives end on some rank before the last rank "
                            "started (happened-before violations); on the unaligned clocks: " +
                            std::to_string(hb_unaligned));
  out->tables.push_back(std::move(ct));
  out->tables.push_back(std::move(rt));
  out->tables.push_back(std::move(dt));
}

}  // namespace kernalyse
