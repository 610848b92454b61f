// Clock offsets (and drift) per host inferred from matched collectives. Method in docs/clocks.md
// ("Inferred from the collectives"): happened-before bounds as difference constraints between
// hosts (closed by all-pairs shortest paths), a robust alternating median fit of simultaneous
// completion, then each host fixed in turn inside the bounds left by those fixed before it
// (decomposable once closed), so the result violates no bound by construction. infer_clocks runs
// the steps below in order; the numerical ones are in clock_infer_steps.h, each unit-tested.
#include "kernalyse/clock_infer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

#include "clock_infer_steps.h"

namespace kernalyse {

namespace clock_steps {

double median_of(std::vector<double>& v) {
  if (v.empty()) return 0;
  size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m), v.end());
  double hi = v[m];
  if (v.size() % 2) return hi;
  double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m));
  return (lo + hi) / 2;
}

Fit resistant_line(const std::vector<std::pair<double, double>>& ty_sorted, double t_ref,
                   double* lever) {
  size_t n = ty_sorted.size(), k = n / 3;
  std::vector<double> t1, y1, t3, y3;
  for (size_t i = 0; i < k; ++i)
    t1.push_back(ty_sorted[i].first), y1.push_back(ty_sorted[i].second);
  for (size_t i = n - k; i < n; ++i)
    t3.push_back(ty_sorted[i].first), y3.push_back(ty_sorted[i].second);
  Fit f;
  double dt = median_of(t3) - median_of(t1);
  *lever = dt;
  if (k == 0 || dt <= 0) {
    std::vector<double> y;
    for (auto& p : ty_sorted) y.push_back(p.second);
    f.theta = median_of(y);
    return f;
  }
  f.beta = (median_of(y3) - median_of(y1)) / dt;
  std::vector<double> r;
  for (auto& p : ty_sorted) r.push_back(p.second - f.beta * (p.first - t_ref));
  f.theta = median_of(r);
  return f;
}

std::vector<double> solve_linear(std::vector<double> M, std::vector<double> rhs, int n) {
  for (int k = 0; k < n; ++k) {
    int piv = k;
    for (int i = k + 1; i < n; ++i)
      if (std::fabs(M[static_cast<size_t>(i * n + k)]) >
          std::fabs(M[static_cast<size_t>(piv * n + k)]))
        piv = i;
    if (piv != k) {
      for (int j = 0; j < n; ++j)
        std::swap(M[static_cast<size_t>(k * n + j)], M[static_cast<size_t>(piv * n + j)]);
      std::swap(rhs[static_cast<size_t>(k)], rhs[static_cast<size_t>(piv)]);
    }
    double d = M[static_cast<size_t>(k * n + k)];
    if (d == 0) continue;
    for (int i = k + 1; i < n; ++i) {
      double f = M[static_cast<size_t>(i * n + k)] / d;
      if (f == 0) continue;
      for (int j = k; j < n; ++j)
        M[static_cast<size_t>(i * n + j)] -= f * M[static_cast<size_t>(k * n + j)];
      rhs[static_cast<size_t>(i)] -= f * rhs[static_cast<size_t>(k)];
    }
  }
  std::vector<double> x(static_cast<size_t>(n), 0);
  for (int k = n - 1; k >= 0; --k) {
    double acc = rhs[static_cast<size_t>(k)];
    for (int j = k + 1; j < n; ++j)
      acc -= M[static_cast<size_t>(k * n + j)] * x[static_cast<size_t>(j)];
    double d = M[static_cast<size_t>(k * n + k)];
    x[static_cast<size_t>(k)] = d != 0 ? acc / d : 0;
  }
  return x;
}

NetworkFit fit_network(const std::vector<PairSamples>& pairs, int H, bool long_run, double t_ref) {
  NetworkFit out;
  // Connected to the reference through pairs with enough instances.
  out.linked.assign(static_cast<size_t>(H), 0);
  out.linked[0] = 1;
  for (bool grew = true; grew;) {
    grew = false;
    for (const PairSamples& p : pairs)
      if (p.ty.size() >= 3 &&
          out.linked[static_cast<size_t>(p.a)] != out.linked[static_cast<size_t>(p.b)])
        out.linked[static_cast<size_t>(p.a)] = out.linked[static_cast<size_t>(p.b)] = 1,
        grew = true;
  }
  // Unknowns: linked hosts other than the reference.
  std::vector<int> var_of(static_cast<size_t>(H), -1);
  int nv = 0;
  for (int h = 1; h < H; ++h)
    if (out.linked[static_cast<size_t>(h)]) var_of[static_cast<size_t>(h)] = nv++;
  std::vector<double> L(static_cast<size_t>(nv * nv), 0), b_theta(static_cast<size_t>(nv), 0),
      b_beta(static_cast<size_t>(nv), 0);
  auto at = [&](int i, int j) -> double& { return L[static_cast<size_t>(i * nv + j)]; };
  for (const PairSamples& pr : pairs) {
    if (pr.ty.size() < 3) continue;
    double lever = 0;
    Fit f;
    if (long_run && pr.ty.size() >= 9) {
      f = resistant_line(pr.ty, t_ref, &lever);
    } else {
      std::vector<double> y;
      for (auto& q : pr.ty) y.push_back(q.second);
      f.theta = median_of(y);
    }
    // θ_a − θ_b = m_b − m_a (both ends then read the same instant).
    double w = static_cast<double>(pr.ty.size());
    int va = var_of[static_cast<size_t>(pr.a)], vb = var_of[static_cast<size_t>(pr.b)];
    if (va >= 0)
      at(va, va) += w, b_theta[static_cast<size_t>(va)] += w * f.theta,
          b_beta[static_cast<size_t>(va)] += w * f.beta;
    if (vb >= 0)
      at(vb, vb) += w, b_theta[static_cast<size_t>(vb)] -= w * f.theta,
          b_beta[static_cast<size_t>(vb)] -= w * f.beta;
    if (va >= 0 && vb >= 0) at(va, vb) -= w, at(vb, va) -= w;
  }
  std::vector<double> xt = solve_linear(L, b_theta, nv),
                      xb = long_run ? solve_linear(L, b_beta, nv)
                                    : std::vector<double>(static_cast<size_t>(nv), 0);
  out.fit.assign(static_cast<size_t>(H), Fit{});
  for (int h = 1; h < H; ++h)
    if (var_of[static_cast<size_t>(h)] >= 0)
      out.fit[static_cast<size_t>(h)] = {xt[static_cast<size_t>(var_of[static_cast<size_t>(h)])],
                                         xb[static_cast<size_t>(var_of[static_cast<size_t>(h)])]};
  return out;
}

bool close_bounds(std::vector<int64_t>& W, int H) {
  for (int k = 0; k < H; ++k)
    for (int i = 0; i < H; ++i) {
      int64_t ik = W[static_cast<size_t>(i * H + k)];
      if (ik >= kInf) continue;
      for (int j = 0; j < H; ++j) {
        int64_t kj = W[static_cast<size_t>(k * H + j)];
        if (kj >= kInf) continue;
        int64_t& ij = W[static_cast<size_t>(i * H + j)];
        ij = std::min(ij, ik + kj);
      }
    }
  for (int h = 0; h < H; ++h)
    if (W[static_cast<size_t>(h * H + h)] < 0) return false;
  return true;
}

std::vector<double> arrival_order_bias(const std::vector<ArrivalSample>& instances, int H) {
  std::vector<std::vector<double>> res_last(static_cast<size_t>(H)),
      res_other(static_cast<size_t>(H));
  std::vector<double> v;
  for (const ArrivalSample& in : instances) {
    int last = -1;
    double last_s = -1e300;
    for (const auto& [h, st] : in.starts)
      if (st > last_s) last_s = st, last = h;
    v.clear();
    for (const auto& [h, m] : in.ends) v.push_back(m);
    const double T = median_of(v);
    for (const auto& [h, m] : in.ends)
      (h == last ? res_last : res_other)[static_cast<size_t>(h)].push_back(m - T);
  }
  std::vector<double> bias(static_cast<size_t>(H), 0);
  for (int h = 0; h < H; ++h)
    if (res_last[static_cast<size_t>(h)].size() >= 3 &&
        res_other[static_cast<size_t>(h)].size() >= 3)
      bias[static_cast<size_t>(h)] = std::fabs(median_of(res_last[static_cast<size_t>(h)]) -
                                               median_of(res_other[static_cast<size_t>(h)]));
  return bias;
}

int64_t clamp_into_bounds(double est, int64_t lo, int64_t hi) {
  int64_t l = lo > -kInf ? lo + 1 : lo, u = hi < kInf ? hi - 1 : hi;
  if (l > u) l = u = lo + (hi - lo) / 2;
  return std::clamp(static_cast<int64_t>(std::llround(est)), l, u);
}

}  // namespace clock_steps

namespace {

using clock_steps::Fit;
using clock_steps::kInf;
using clock_steps::median_of;

// Hosts under NTP are 0.1 to 10 ms apart: a stated ± wider than this adds nothing to "not aligned".
constexpr double kLooseNs = 10e6;

bool is_n_by_n(const std::string& op) {
  for (const char* k : {"allreduce", "allgather", "reducescatter", "alltoall", "barrier"})
    if (op.find(k) != std::string::npos) return true;
  return false;
}
// A fused NCCL SendRecv kernel matched between two ranks. (Separate send / recv kernels would
// need their direction; the matcher keys them apart, so they never form one instance here.)
bool is_p2p(const std::string& op) { return op == "sendrecv"; }

// One completion sample: host h's statistic of its ranks' kernel ends in instance c.
struct Sample {
  size_t inst;
  int host;
  double m;  // recorded end statistic (host clock)
};
// One host's part of one instance: earliest end, latest start, last end, the spread of its ranks'
// ends (-1 for one rank), and their median as a double relative to Work::origin.
struct PerHost {
  int host;
  int64_t min_e, max_s, max_e, spread;
  double med;
};
// Instance classes: 0 simultaneous (ring-like N×N), 1 tree N×N, 2 point-to-point, 255 unused.
constexpr uint8_t kUnused = 255;

// What infer_clocks works out, step by step (each step below fills its part, in order).
struct Work {
  const ClockEvidence& ev;
  const InferOptions& opt;
  ClockInference& out;
  std::vector<int32_t> ranks;  // every rank, sorted
  std::map<int32_t, int> host_of;
  std::vector<int> host_vec;  // rank → host for ranks >= 0 (host_of for the others)
  int H = 0;
  // Times as doubles are relative to origin: an epoch-sized ns value as a double is quantised to
  // 256 ns.
  int64_t origin = 0;
  std::vector<std::vector<PerHost>> inst_hosts;  // per instance (flat: 30 k on the benchmark)
  std::vector<uint8_t> cls;
  int64_t n_cls[2] = {0, 0};
  int64_t ref_lo = kInf, ref_hi = -kInf, p2p_unpaired = 0;
  std::vector<char> sampled_pair;  // SendRecvs taken as exchanges between the two ranks they hold
  double t_ref = 0;
  uint8_t use = 0;  // the class whose completion is fitted
  std::vector<Sample> samples;
  std::vector<double> t_of;   // per instance: its median completion (fitted instances)
  std::vector<double> intra;  // spread of ends within one host (same clock), ring-like instances
  std::vector<std::vector<size_t>> by_host;  // host → its samples
  double span = 0;
  bool long_run = false;
  std::vector<size_t> inst_order;                             // fitted instances in time order
  std::vector<std::vector<std::pair<int, double>>> per_inst;  // per instance: (host, sample)
  std::vector<Fit> fit;
  std::vector<char> linked;
  std::vector<double> sigma, se_beta;  // per host: completion noise, drift's standard error
  std::vector<int64_t> D;  // closed happened-before bounds, D[a·H + b] ≥ θ_b − θ_a
  std::vector<int64_t> theta;

  Work(const ClockEvidence& e, const InferOptions& o, ClockInference& r) : ev(e), opt(o), out(r) {}
  int host_at(int32_t r) const {
    return r >= 0 && static_cast<size_t>(r) < host_vec.size() ? host_vec[static_cast<size_t>(r)]
                                                              : host_of.at(r);
  }
  double corr(int h, double t) const {
    return fit[static_cast<size_t>(h)].theta + fit[static_cast<size_t>(h)].beta * (t - t_ref);
  }
  int64_t drifted(int h, int64_t t) const {
    return t + static_cast<int64_t>(std::llround(fit[static_cast<size_t>(h)].beta *
                                                 static_cast<double>(t - out.t_ref_ns)));
  }
  int64_t corrected(int32_t r, int64_t t) const {
    int h = host_at(r);
    return drifted(h, t) + theta[static_cast<size_t>(h)];
  }
  int64_t d(int a, int b) const { return D[static_cast<size_t>(a * H + b)]; }
  std::string name(int h) const {
    const HostClock& hc = out.hosts[static_cast<size_t>(h)];
    return hc.host.empty() ? "rank " + std::to_string(hc.ranks[0]) : "host " + hc.host;
  }
};

bool fail(ClockInference& out, const std::string& why) {
  out.ok = false;
  out.why = "too little evidence: " + why;
  return false;
}

// Hosts: named ones shared, unnamed ranks alone. Ordered by their lowest rank; the host of the
// lowest rank is the reference (its clock is the run's, as rank 0's is for kernalyse-run).
bool assign_hosts(Work& w) {
  const ClockEvidence& ev = w.ev;
  ClockInference& out = w.out;
  w.ranks = ev.ranks;
  for (const auto& in : ev.instances)
    for (const auto& a : in.arrivals) w.ranks.push_back(a.rank);
  for (const auto& m : ev.messages) w.ranks.push_back(m.from_rank), w.ranks.push_back(m.to_rank);
  std::sort(w.ranks.begin(), w.ranks.end());
  w.ranks.erase(std::unique(w.ranks.begin(), w.ranks.end()), w.ranks.end());
  if (w.ranks.size() < 2)
    return fail(out, std::to_string(w.ranks.size()) + " rank: nothing to align");
  std::map<std::string, int> host_idx;
  bool unnamed = false;
  for (int32_t r : w.ranks) {
    auto it = ev.host.find(r);
    std::string key = it != ev.host.end() && !it->second.empty() ? it->second : "";
    unnamed = unnamed || key.empty();
    // Unnamed host: one per rank ("\x01" + rank; appended, not operator+ on a temporary, which
    // trips GCC 12's -Wrestrict false positive).
    std::string k = key;
    if (k.empty()) k.append(1, '\x01').append(std::to_string(r));
    auto [hi, fresh] = host_idx.try_emplace(k, static_cast<int>(out.hosts.size()));
    if (fresh) {
      HostClock h;
      h.host = key;
      out.hosts.push_back(h);
    }
    out.hosts[static_cast<size_t>(hi->second)].ranks.push_back(r);
    w.host_of[r] = hi->second;
  }
  w.H = static_cast<int>(out.hosts.size());
  out.hosts[0].reference = true;
  if (unnamed)
    out.notes.push_back("ranks without a host name are each taken as alone on their own host");
  if (w.H < 2) return fail(out, "all ranks share one host clock: nothing to align");
  for (const auto& in : ev.instances)
    if (!in.arrivals.empty()) {
      w.origin = in.arrivals[0].end_ns;
      break;
    }
  if (w.origin == 0 && !ev.messages.empty()) w.origin = ev.messages[0].sent_ns;
  w.host_vec.assign(static_cast<size_t>(w.ranks.back()) + 1, -1);
  for (auto& [r, h] : w.host_of)
    if (r >= 0) w.host_vec[static_cast<size_t>(r)] = h;
  return true;
}

// SendRecvs whose peers are not recorded, in a world larger than these ranks, may each exchange
// with a third rank. Taken as exchanges between the two ranks they hold, the instances of one
// group (their kernels' streams) either agree, and are used with that assumption said, or
// contradict each other (not the same instances on both ranks: two files sampled from a larger
// job can hold different subsets of its collectives), and the whole group is left out, with the
// numbers that show it.
void sampled_sendrecv_groups(Work& w) {
  const ClockEvidence& ev = w.ev;
  w.sampled_pair.assign(ev.instances.size(), 0);
  struct Group {
    int64_t lo = -kInf, hi = kInf, n = 0;
    std::pair<int64_t, int64_t> at_lo, at_hi;  // the instances' intervals that set lo and hi
    int a = 0, b = 0;
    std::vector<size_t> inst;
  };
  std::map<std::tuple<std::string, int, int>, Group> groups;
  for (size_t c = 0; c < ev.instances.size(); ++c) {
    const ClockInstance& in = ev.instances[c];
    if (!is_p2p(in.op) || in.arrivals.size() != 2) continue;
    const ClockArrival *x = &in.arrivals[0], *y = &in.arrivals[1];
    if ((x->peer == y->rank && y->peer == x->rank) || (ev.world_size == 2 && w.ranks.size() == 2))
      continue;  // peers known: used below anyway
    int a = w.host_at(x->rank), b = w.host_at(y->rank);
    if (a == b) continue;
    if (a > b) std::swap(a, b), std::swap(x, y);
    // θ_b − θ_a within [s_x − e_y, e_x − s_y]: each kernel ends after the other started.
    Group& g = groups[{in.group, a, b}];
    g.a = a, g.b = b;
    const int64_t lo = x->start_ns - y->end_ns, hi = x->end_ns - y->start_ns;
    if (lo > g.lo) g.lo = lo, g.at_lo = {lo, hi};
    if (hi < g.hi) g.hi = hi, g.at_hi = {lo, hi};
    g.inst.push_back(c);
  }
  for (auto& [key, g] : groups) {
    const std::string& grp = std::get<0>(key);
    char buf[400];
    if (g.lo <= g.hi) {
      for (size_t c : g.inst) w.sampled_pair[c] = 1;
      std::snprintf(buf, sizeof buf,
                    "%zu SendRecv instances%s%s, peers not recorded: taken as exchanges between "
                    "%s and %s (their bounds agree: %s's correction in [%+.3f, %+.3f] ms)",
                    g.inst.size(), grp.empty() ? "" : " on ", grp.c_str(), w.name(g.a).c_str(),
                    w.name(g.b).c_str(), w.name(g.b).c_str(), static_cast<double>(g.lo) / 1e6,
                    static_cast<double>(g.hi) / 1e6);
    } else {
      std::snprintf(
          buf, sizeof buf,
          "%zu SendRecv instances%s%s not used: taken as exchanges between %s and %s they "
          "contradict each other (%s's correction in [%+.3f, %+.3f] ms for one, [%+.3f, %+.3f] "
          "ms for another): not the same instances on both ranks",
          g.inst.size(), grp.empty() ? "" : " on ", grp.c_str(), w.name(g.a).c_str(),
          w.name(g.b).c_str(), w.name(g.b).c_str(), static_cast<double>(g.at_lo.first) / 1e6,
          static_cast<double>(g.at_lo.second) / 1e6, static_cast<double>(g.at_hi.first) / 1e6,
          static_cast<double>(g.at_hi.second) / 1e6);
    }
    w.out.notes.push_back(buf);
  }
}

// One instance's hosts, from its arrivals sorted by host: the PerHost statistics of each.
void per_host_stats(const std::vector<std::tuple<int, int64_t, int64_t>>& buf, int64_t origin,
                    std::vector<double>& ends, std::vector<PerHost>& ph) {
  for (size_t i = 0; i < buf.size();) {
    size_t j = i;
    PerHost p{std::get<0>(buf[i]), kInf, -kInf, -kInf, 0, 0};
    int64_t min_e = kInf;
    ends.clear();
    for (; j < buf.size() && std::get<0>(buf[j]) == p.host; ++j) {
      auto [h, st, en] = buf[j];
      p.min_e = std::min(p.min_e, en), p.max_s = std::max(p.max_s, st),
      p.max_e = std::max(p.max_e, en);
      min_e = std::min(min_e, en);
      ends.push_back(static_cast<double>(en - origin));
    }
    p.spread = j - i >= 2 ? p.max_e - min_e : -1;
    p.med = median_of(ends);
    ph.push_back(p);
    i = j;
  }
}

// Per instance spanning >= 2 hosts: its class and each host's statistics; the reference host's
// completion range (t_ref's).
void classify_instances(Work& w) {
  const ClockEvidence& ev = w.ev;
  w.inst_hosts.assign(ev.instances.size(), {});
  w.cls.assign(ev.instances.size(), kUnused);
  std::vector<std::tuple<int, int64_t, int64_t>> buf;  // (host, start, end) of one instance
  std::vector<double> ends;
  for (size_t c = 0; c < ev.instances.size(); ++c) {
    const ClockInstance& in = ev.instances[c];
    buf.clear();
    for (const auto& a : in.arrivals) {
      int h = w.host_at(a.rank);
      buf.emplace_back(h, a.start_ns, a.end_ns);
      if (h == 0) w.ref_lo = std::min(w.ref_lo, a.end_ns), w.ref_hi = std::max(w.ref_hi, a.end_ns);
    }
    std::sort(buf.begin(), buf.end());
    if (buf.empty() || std::get<0>(buf.front()) == std::get<0>(buf.back())) continue;  // one host
    if (is_n_by_n(in.op)) {
      w.cls[c] = in.algo == "TREE" ? 1 : 0;
      ++w.n_cls[w.cls[c]];
    } else if (is_p2p(in.op)) {
      // Usable only as a pair of peers: recorded, or the only two ranks of the world.
      bool peers = in.arrivals.size() == 2 &&
                   ((in.arrivals[0].peer == in.arrivals[1].rank &&
                     in.arrivals[1].peer == in.arrivals[0].rank) ||
                    (ev.world_size == 2 && w.ranks.size() == 2) || w.sampled_pair[c]);
      if (!peers) {
        ++w.p2p_unpaired;
        continue;
      }
      w.cls[c] = 2;
    } else {
      continue;  // broadcast / reduce: the root is not known here
    }
    per_host_stats(buf, w.origin, ends, w.inst_hosts[c]);
    ++w.out.collectives;
  }
  if (w.p2p_unpaired > 0)
    w.out.notes.push_back(std::to_string(w.p2p_unpaired) +
                          " SendRecv instances not used in all: their peer is not recorded" +
                          (ev.world_size > 2
                               ? " and the world has " + std::to_string(ev.world_size) + " ranks"
                               : ""));
}

// Messages between two hosts: bounds only (a receive completes after its send started). Then
// t_ref: the middle of the reference host's collectives (else its messages).
bool count_messages(Work& w) {
  ClockInference& out = w.out;
  for (const auto& m : w.ev.messages)
    if (w.host_at(m.from_rank) != w.host_at(m.to_rank)) {
      ++out.messages;
      if (out.collectives > 0) continue;  // t_ref: the reference host's collectives if any
      for (auto [r, t] : {std::pair{m.from_rank, m.sent_ns}, std::pair{m.to_rank, m.received_ns}})
        if (w.host_at(r) == 0) w.ref_lo = std::min(w.ref_lo, t), w.ref_hi = std::max(w.ref_hi, t);
    }
  if (out.collectives == 0 && out.messages == 0)
    return fail(out, "no matched collective spans two hosts" +
                         (w.p2p_unpaired > 0 ? " (" + out.notes.back() + ")" : std::string()));
  if (out.messages > 0)
    out.notes.push_back(std::to_string(out.messages) +
                        " point-to-point messages between hosts bound the clocks (a receive "
                        "completes after its send started)");
  out.t_ref_ns = w.ref_lo <= w.ref_hi ? w.ref_lo + (w.ref_hi - w.ref_lo) / 2 : 0;
  w.t_ref = static_cast<double>(out.t_ref_ns - w.origin);
  return true;
}

// Completion model by algorithm: ring-like kernels end together on every rank (the host's median
// end stands for it); tree kernels can end ms apart even on one host, so only the host's last end
// is used, and only when there are too few ring-like instances. At most max_fit_instances
// instances, every stride-th.
void completion_samples(Work& w) {
  ClockInference& out = w.out;
  w.use = w.n_cls[0] >= 3 || w.n_cls[1] == 0 ? 0 : 1;
  if (w.use == 1 && w.n_cls[1] > 0)
    out.notes.push_back(
        "completion from tree collectives (last end per host): fewer than 3 ring-like ones");
  else if (w.n_cls[1] > 0)
    out.notes.push_back(
        std::to_string(w.n_cls[1]) +
        " tree collectives give bounds only (their completion is not simultaneous)");
  w.t_of.assign(w.ev.instances.size(), 0);
  std::vector<double> ms;
  const size_t eligible = static_cast<size_t>(std::count(w.cls.begin(), w.cls.end(), w.use));
  const size_t stride =
      std::max<size_t>(1, (eligible + w.opt.max_fit_instances - 1) / w.opt.max_fit_instances);
  if (stride > 1)
    out.notes.push_back("completion fitted on every " + std::to_string(stride) + "th of " +
                        std::to_string(eligible) +
                        " instances (in time order); the bounds use all of them");
  for (size_t c = 0, seen = 0; c < w.ev.instances.size(); ++c) {
    if (w.cls[c] != w.use || seen++ % stride != 0) continue;
    ms.clear();
    for (const PerHost& p : w.inst_hosts[c]) {
      double m;
      if (w.use == 0) {
        m = p.med;
        if (p.spread >= 0) w.intra.push_back(static_cast<double>(p.spread));
      } else {
        m = static_cast<double>(p.max_e - w.origin);
      }
      w.samples.push_back({c, p.host, m});
      ms.push_back(m);
    }
    w.t_of[c] = median_of(ms);
  }
}

// The samples per host and per instance, the instances in time order, and the run's span (a
// long one fits drifts).
void order_samples(Work& w) {
  w.by_host.assign(static_cast<size_t>(w.H), {});
  for (size_t i = 0; i < w.samples.size(); ++i)
    w.by_host[static_cast<size_t>(w.samples[i].host)].push_back(i);
  double lo = 1e300, hi = -1e300;
  for (const auto& s : w.samples)
    lo = std::min(lo, w.t_of[s.inst]), hi = std::max(hi, w.t_of[s.inst]);
  w.span = w.samples.empty() ? 0 : hi - lo;
  w.long_run = w.span >= w.opt.min_drift_span_s * 1e9;
  w.per_inst.assign(w.ev.instances.size(), {});
  for (const auto& s : w.samples) w.per_inst[s.inst].emplace_back(s.host, s.m);
  for (size_t c = 0; c < w.ev.instances.size(); ++c)
    if (!w.per_inst[c].empty()) w.inst_order.push_back(c);
  std::sort(w.inst_order.begin(), w.inst_order.end(),
            [&](size_t x, size_t y) { return w.t_of[x] < w.t_of[y]; });
}

// Per host pair that meets, the difference of their completion statistics per instance (in time
// order): fit_network's input, pairs in (a, b) order.
std::vector<clock_steps::PairSamples> pair_samples(const Work& w) {
  const size_t H = static_cast<size_t>(w.H);
  std::vector<clock_steps::PairSamples> pairs(H * H);  // a * H + b, a < b
  for (size_t i = 0; i < pairs.size(); ++i)
    pairs[i].a = static_cast<int>(i / H), pairs[i].b = static_cast<int>(i % H);
  for (size_t c : w.inst_order) {
    const auto& v = w.per_inst[c];
    for (size_t i = 0; i < v.size(); ++i)
      for (size_t j = i + 1; j < v.size(); ++j) {
        auto [a, ma] = v[i];
        auto [b, mb] = v[j];
        if (a > b) std::swap(a, b), std::swap(ma, mb);
        pairs[static_cast<size_t>(a) * H + static_cast<size_t>(b)].ty.emplace_back(w.t_of[c],
                                                                                   mb - ma);
      }
  }
  pairs.erase(
      std::remove_if(pairs.begin(), pairs.end(), [](const auto& p) { return p.ty.empty(); }),
      pairs.end());
  return pairs;
}

// Residuals: each host's corrected completion against the instance's median over hosts. Their
// robust scale gives the noise; the drift's standard error follows Tukey's line (outer thirds).
void residual_scale(Work& w) {
  const size_t H = static_cast<size_t>(w.H);
  std::vector<std::vector<std::pair<double, double>>> res(H);
  std::vector<double> v;
  for (size_t c : w.inst_order) {
    v.clear();
    for (auto& [h, m] : w.per_inst[c]) v.push_back(m + w.corr(h, w.t_of[c]));
    double T = median_of(v);
    for (auto& [h, m] : w.per_inst[c])
      res[static_cast<size_t>(h)].emplace_back(w.t_of[c], m + w.corr(h, w.t_of[c]) - T);
  }
  for (size_t h = 1; h < H; ++h) {
    auto& r = res[h];
    std::vector<double> a;
    for (auto& q : r) a.push_back(std::fabs(q.second));
    w.sigma[h] = 1.4826 * median_of(a);
    double k = std::floor(static_cast<double>(r.size()) / 3), lever = 0;
    if (k > 0) {
      std::vector<double> t1, t3;
      for (size_t i = 0; i < static_cast<size_t>(k); ++i)
        t1.push_back(r[i].first), t3.push_back(r[r.size() - 1 - i].first);
      lever = median_of(t3) - median_of(t1);
    }
    w.se_beta[h] = w.long_run && lever > 0 ? 1.2533 * w.sigma[h] * std::sqrt(2.0 / k) / lever : 0;
  }
}

// The completion fit: pairwise robust fits, one network solve, the noise; a drift is kept only
// where it stands out of its own noise (3 standard errors).
void fit_completion(Work& w) {
  clock_steps::NetworkFit nf = clock_steps::fit_network(pair_samples(w), w.H, w.long_run, w.t_ref);
  w.fit = std::move(nf.fit);
  w.linked = std::move(nf.linked);
  w.sigma.assign(static_cast<size_t>(w.H), 0);
  w.se_beta.assign(static_cast<size_t>(w.H), 0);
  residual_scale(w);
  for (size_t h = 1; h < static_cast<size_t>(w.H); ++h) {
    Fit& f = w.fit[h];
    if (w.long_run && f.beta != 0 && std::fabs(f.beta) > 3 * w.se_beta[h])
      w.out.drift_fitted = true;
    else
      f.beta = 0, w.se_beta[h] = 0;
  }
  residual_scale(w);
  for (size_t h = 1; h < static_cast<size_t>(w.H); ++h)
    if (w.fit[h].beta == 0) w.se_beta[h] = 0;
}

// Happened-before bounds on the drift-corrected times, closed. W[a][b] bounds θ_b − θ_a from
// above: a kernel of host a that ends at e needed a kernel of host b that started at s (e_a ≥ s_b).
bool happened_before_bounds(const Work& w, bool with_p2p, std::vector<int64_t>* W,
                            int64_t* constrained) {
  const int H = w.H;
  W->assign(static_cast<size_t>(H * H), kInf);
  for (int h = 0; h < H; ++h) (*W)[static_cast<size_t>(h * H + h)] = 0;
  *constrained = 0;
  auto add = [&](int a, int b, int64_t x) {
    int64_t& y = (*W)[static_cast<size_t>(a * H + b)];
    y = std::min(y, x);
  };
  for (size_t c = 0; c < w.ev.instances.size(); ++c) {
    if (w.cls[c] == kUnused) continue;
    const ClockInstance& in = w.ev.instances[c];
    if (w.cls[c] <= 1) {
      // No rank ends an N×N collective before every rank has started it.
      std::vector<std::pair<int, std::pair<int64_t, int64_t>>> hs;
      for (const PerHost& p : w.inst_hosts[c])
        hs.push_back({p.host, {w.drifted(p.host, p.min_e), w.drifted(p.host, p.max_s)}});
      for (auto& [a, pa] : hs)
        for (auto& [b, pb] : hs)
          if (a != b) add(a, b, pa.first - pb.second);
      ++*constrained;
    } else if (with_p2p) {
      // A receive cannot end before its send started. A fused SendRecv kernel whose direction
      // is not recorded is taken as an exchange (both directions): its two kernels overlap.
      bool any = false;
      for (const auto& x : in.arrivals)
        for (const auto& y : in.arrivals) {
          int a = w.host_at(x.rank), b = w.host_at(y.rank);
          if (a == b) continue;
          add(a, b, w.drifted(a, x.end_ns) - w.drifted(b, y.start_ns));
          any = true;
        }
      *constrained += any;
    }
  }
  for (const auto& m : w.ev.messages) {
    const int a = w.host_at(m.to_rank), b = w.host_at(m.from_rank);
    if (a != b) add(a, b, w.drifted(a, m.received_ns) - w.drifted(b, m.sent_ns));
  }
  return clock_steps::close_bounds(*W, H);
}

// The closed bounds into w.D; point-to-point ones dropped when they contradict the collectives'.
bool bound_clocks(Work& w) {
  ClockInference& out = w.out;
  bool have_p2p = std::find(w.cls.begin(), w.cls.end(), 2) != w.cls.end();
  if (have_p2p)
    out.notes.push_back(
        "point-to-point kernels without a recorded direction are taken as exchanges (their kernels "
        "overlap)");
  if (!happened_before_bounds(w, true, &w.D, &out.constrained)) {
    if (!have_p2p || !happened_before_bounds(w, false, &w.D, &out.constrained))
      return fail(out,
                  "the happened-before bounds contradict each other (mismatched collectives?)");
    out.notes.push_back("point-to-point bounds dropped: they contradicted the collectives'");
  }
  return true;
}

// Completion that depends on arrival order (the last arriver's kernel ending earlier or later
// than the others', as MPI-emulated collectives on busy cores do) reads as an offset for a host
// that is usually last: clock_steps::arrival_order_bias on the corrected times, added to its ±.
std::vector<double> order_bias(const Work& w) {
  std::vector<clock_steps::ArrivalSample> in(w.inst_order.size());
  for (size_t i = 0; i < w.inst_order.size(); ++i) {
    const size_t c = w.inst_order[i];
    for (const PerHost& p : w.inst_hosts[c])
      in[i].starts.emplace_back(
          p.host, static_cast<double>(p.max_s - w.origin) + w.corr(p.host, w.t_of[c]));
    for (auto& [h, m] : w.per_inst[c]) in[i].ends.emplace_back(h, m + w.corr(h, w.t_of[c]));
  }
  return clock_steps::arrival_order_bias(in, w.H);
}

// A host's completion estimate of its correction, inside [lo, hi] left by the hosts fixed before
// it: its fit when pairs link it, else the median of what its few samples against fixed hosts say
// (the middle of the bounds without any). False: nothing ties it to the others.
bool host_estimate(Work& w, int h, const std::vector<char>& fixed, int64_t lo, int64_t hi,
                   double* est) {
  const auto& idx = w.by_host[static_cast<size_t>(h)];
  if (h == 0) {
    *est = 0;
  } else if (w.linked[static_cast<size_t>(h)] && idx.size() >= 3) {
    *est = w.fit[static_cast<size_t>(h)].theta;
  } else if (lo > -kInf && hi < kInf) {
    // Bounds, and perhaps one or two completion samples against hosts fixed already: the median
    // of what they say (clamped into the bounds later), else the middle. Their error cannot be
    // measured from so few: the ± is then the hard bound (the farther end of the interval).
    std::vector<double> say;
    for (size_t c : w.inst_order) {
      const auto& v = w.per_inst[c];
      auto me = std::find_if(v.begin(), v.end(), [&](const auto& x) { return x.first == h; });
      if (me == v.end()) continue;
      for (const auto& [f, mf] : v)
        if (f != h && fixed[static_cast<size_t>(f)])
          say.push_back(mf + static_cast<double>(w.theta[static_cast<size_t>(f)]) - me->second);
    }
    *est =
        say.empty() ? static_cast<double>(lo) + static_cast<double>(hi - lo) / 2 : median_of(say);
    w.fit[static_cast<size_t>(h)].beta = 0;
  } else {
    const HostClock& hc = w.out.hosts[static_cast<size_t>(h)];
    return fail(w.out, "host " +
                           (hc.host.empty() ? "of rank " + std::to_string(hc.ranks[0]) : hc.host) +
                           ": no collective ties its clock to the others");
  }
  return true;
}

// Uncertainty: the completion scatter (a host's constant completion bias cannot be told from its
// offset; assumed no larger than that scatter), the median's own error, the drift's error at the
// ends of the run, the same-host completion spread, the arrival-order bias; never more than the
// hard bound. The drift's error reaches the ends of the run, up to half the span from t_ref;
// counted over the whole span, since the standard error assumes Gaussian scatter and completion
// is not (uniform jitter, outliers): on planted truth the half-span term left 1 rank in 16
// outside. 1e300: none.
double host_uncertainty(const Work& w, int h, int64_t v, double est, int64_t lo, int64_t hi,
                        double floor, double bias) {
  const size_t n = w.by_host[static_cast<size_t>(h)].size();
  const double lever_arm = w.span;
  double u_stat =
      w.linked[static_cast<size_t>(h)] && n >= 3
          ? w.sigma[static_cast<size_t>(h)] * (1 + 3 / std::sqrt(static_cast<double>(n))) +
                3 * w.se_beta[static_cast<size_t>(h)] * lever_arm + floor + bias +
                std::fabs(static_cast<double>(v) - est)
          : 1e300;
  double u_hard = std::max(static_cast<double>(v - lo), static_cast<double>(hi - v));
  if (lo <= -kInf || hi >= kInf) u_hard = 1e300;
  return std::min(u_stat, u_hard);
}

// Fix hosts one at a time, each inside the interval the fixed ones leave (never empty once the
// constraints are closed): the reference first, then by evidence.
bool fix_hosts(Work& w) {
  const int H = w.H;
  ClockInference& out = w.out;
  std::vector<int> order(static_cast<size_t>(H));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin() + 1, order.end(), [&](int x, int y) {
    return w.by_host[static_cast<size_t>(x)].size() > w.by_host[static_cast<size_t>(y)].size();
  });
  w.theta.assign(static_cast<size_t>(H), 0);
  std::vector<char> fixed(static_cast<size_t>(H), 0);
  const double completion_floor = w.intra.empty() ? 0 : median_of(w.intra) / 2;
  const std::vector<double> bias = order_bias(w);
  if (!w.intra.empty())
    out.notes.push_back("ranks sharing a host end ring-like collectives within " +
                        std::to_string(static_cast<int64_t>(median_of(w.intra))) +
                        " ns of each other (median): half of it is added to every ±");
  for (int h : order) {
    HostClock& hc = out.hosts[static_cast<size_t>(h)];
    int64_t lo = -kInf, hi = kInf;
    for (int f = 0; f < H; ++f)
      if (fixed[static_cast<size_t>(f)]) {
        if (w.d(h, f) < kInf) lo = std::max(lo, w.theta[static_cast<size_t>(f)] - w.d(h, f));
        if (w.d(f, h) < kInf) hi = std::min(hi, w.theta[static_cast<size_t>(f)] + w.d(f, h));
      }
    hc.bound_lo_ns = w.d(h, 0) < kInf ? -w.d(h, 0) : -kInf;
    hc.bound_hi_ns = w.d(0, h) < kInf ? w.d(0, h) : kInf;
    hc.samples = static_cast<int64_t>(w.by_host[static_cast<size_t>(h)].size());
    double est = 0;
    if (!host_estimate(w, h, fixed, lo, hi, &est)) return false;
    int64_t v = clock_steps::clamp_into_bounds(est, lo, hi);
    if (h != 0 && std::fabs(static_cast<double>(v) - est) > 1000) {
      char buf[240];
      std::snprintf(buf, sizeof buf,
                    "%s: completion puts its correction at %+.1f µs, outside the happened-before "
                    "bounds [%+.1f, %+.1f] µs: moved to %+.1f µs (completion there is not "
                    "simultaneous)",
                    w.name(h).c_str(), est / 1e3, static_cast<double>(lo) / 1e3,
                    static_cast<double>(hi) / 1e3, static_cast<double>(v) / 1e3);
      out.notes.push_back(buf);
    }
    w.theta[static_cast<size_t>(h)] = v;
    fixed[static_cast<size_t>(h)] = 1;
    hc.offset_ns = v;
    hc.drift = w.fit[static_cast<size_t>(h)].beta;
    if (h == 0) continue;
    double unc =
        host_uncertainty(w, h, v, est, lo, hi, completion_floor, bias[static_cast<size_t>(h)]);
    if (unc >= 1e299) return fail(out, "host " + hc.host + ": no bound on its clock");
    hc.uncertainty_ns = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(unc)));
  }
  return true;
}

// Loose bounds alone (a single collective, or a few that each rank waited long in) can leave a
// host anywhere within many ms: a ± beyond what NTP keeps hosts within says nothing, so the
// clocks are kept as recorded, with the numbers.
bool tight_enough(Work& w) {
  const ClockInference& out = w.out;
  for (size_t h = 0; h < out.hosts.size(); ++h) {
    const HostClock& hc = out.hosts[h];
    if (hc.uncertainty_ns <= kLooseNs) continue;
    char buf[200];
    std::snprintf(
        buf, sizeof buf,
        "%s's clock is bounded only to [%+.3f, %+.3f] ms of the reference by %lld "
        "collectives%s (±%.1f ms, more than the %.0f ms NTP keeps hosts within)",
        w.name(static_cast<int>(h)).c_str(), static_cast<double>(hc.bound_lo_ns) / 1e6,
        static_cast<double>(hc.bound_hi_ns) / 1e6, static_cast<long long>(out.collectives),
        out.messages > 0 ? (" and " + std::to_string(out.messages) + " messages").c_str() : "",
        static_cast<double>(hc.uncertainty_ns) / 1e6, kLooseNs / 1e6);
    return fail(w.out, buf);
  }
  return true;
}

// Happened-before violations and the median completion skew of the ring-like instances, on the
// recorded times or (after) the corrected ones.
void count_violations(const Work& w, bool after, int64_t* viol, int64_t* skew) {
  *viol = 0;
  std::vector<double> sk;
  auto T = [&](int32_t r, int64_t t) { return after ? w.corrected(r, t) : t; };
  for (size_t c = 0; c < w.ev.instances.size(); ++c) {
    if (w.cls[c] == kUnused) continue;
    const ClockInstance& in = w.ev.instances[c];
    bool bad = false;
    if (w.cls[c] <= 1) {
      int64_t smax = -kInf, emin = kInf, emax = -kInf;
      for (const auto& a : in.arrivals) {
        smax = std::max(smax, T(a.rank, a.start_ns));
        emin = std::min(emin, T(a.rank, a.end_ns));
        emax = std::max(emax, T(a.rank, a.end_ns));
      }
      bad = emin < smax;
      if (w.cls[c] == 0) sk.push_back(static_cast<double>(emax - emin));
    } else {
      const auto& x = in.arrivals[0];
      const auto& y = in.arrivals[1];
      if (w.host_at(x.rank) != w.host_at(y.rank))
        bad = T(x.rank, x.end_ns) < T(y.rank, y.start_ns) ||
              T(y.rank, y.end_ns) < T(x.rank, x.start_ns);
    }
    *viol += bad;
  }
  for (const auto& m : w.ev.messages)  // a receive seen complete before its send started
    if (w.host_at(m.from_rank) != w.host_at(m.to_rank))
      *viol += T(m.to_rank, m.received_ns) < T(m.from_rank, m.sent_ns);
  *skew = static_cast<int64_t>(std::llround(median_of(sk)));
}

}  // namespace

ClockInference infer_clocks(const ClockEvidence& ev, const InferOptions& opt) {
  ClockInference out;
  Work w(ev, opt, out);
  if (!assign_hosts(w)) return out;
  sampled_sendrecv_groups(w);
  classify_instances(w);
  if (!count_messages(w)) return out;
  completion_samples(w);
  order_samples(w);
  fit_completion(w);
  if (!bound_clocks(w) || !fix_hosts(w) || !tight_enough(w)) return out;
  count_violations(w, false, &out.violations_before, &out.skew_before_ns);
  count_violations(w, true, &out.violations_after, &out.skew_after_ns);
  out.ok = true;
  out.method = "inferred from " + std::to_string(out.collectives) + " collectives" +
               (out.messages > 0 ? " and " + std::to_string(out.messages) + " messages" : "") +
               " across " + std::to_string(w.H) + " hosts";
  return out;
}

std::string describe(const ClockInference& inf) {
  if (!inf.ok) return inf.why + "; clocks kept as recorded";
  if (!inf.kept.empty()) return inf.kept;
  int64_t worst = 0;
  for (const auto& h : inf.hosts) worst = std::max(worst, h.uncertainty_ns);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(worst) / 1000.0);
  return "clocks " + inf.method + ", ±" + buf +
         " µs (largest per-host uncertainty); happened-before violations " +
         std::to_string(inf.violations_before) + " before, " +
         std::to_string(inf.violations_after) + " after";
}

nlohmann::json clock_inference_json(const ClockInference& inf) {
  nlohmann::json hosts = nlohmann::json::array();
  for (const auto& h : inf.hosts)
    hosts.push_back({{"host", h.host},
                     {"ranks", h.ranks},
                     {"reference", h.reference},
                     {"offset_ns", h.offset_ns},
                     {"drift", h.drift},
                     {"uncertainty_ns", h.uncertainty_ns},
                     {"samples", h.samples},
                     {"bound_lo_ns", h.bound_lo_ns},
                     {"bound_hi_ns", h.bound_hi_ns}});
  return {{"ok", inf.ok},
          {"why", inf.why},
          {"method", inf.method},
          {"t_ref_ns", inf.t_ref_ns},
          {"collectives", inf.collectives},
          {"messages", inf.messages},
          {"constrained", inf.constrained},
          {"violations_before", inf.violations_before},
          {"violations_after", inf.violations_after},
          {"completion_skew_before_ns", inf.skew_before_ns},
          {"completion_skew_after_ns", inf.skew_after_ns},
          {"drift_fitted", inf.drift_fitted},
          {"moved", inf.ok && inf.kept.empty()},
          {"notes", inf.notes},
          {"hosts", hosts},
          {"summary", describe(inf)}};
}

}  // namespace kernalyse
