// Clock offsets (and drift) per host inferred from matched collectives. Method in docs/clocks.md
// ("Inferred from the collectives"): happened-before bounds as difference constraints between
// hosts (closed by all-pairs shortest paths), a robust alternating median fit of simultaneous
// completion, then each host fixed in turn inside the bounds left by those fixed before it
// (decomposable once closed), so the result violates no bound by construction.
#include "kernalyse/clock_infer.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <numeric>
#include <tuple>

namespace kernalyse {
namespace {

constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;
// Hosts under NTP are 0.1 to 10 ms apart: a stated ± wider than this adds nothing to "not aligned".
constexpr double kLooseNs = 10e6;

// The median; reorders v (callers pass their scratch vectors: no copy per call).
double median_of(std::vector<double>& v) {
  if (v.empty()) return 0;
  size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m), v.end());
  double hi = v[m];
  if (v.size() % 2) return hi;
  double lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m));
  return (lo + hi) / 2;
}

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

struct Fit {
  double theta = 0, beta = 0;
};

// Tukey's resistant line through (t, y): slope from the medians of the outer thirds (O(n), robust
// to a third of the points), intercept the median of what the slope leaves.
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

}  // namespace

ClockInference infer_clocks(const ClockEvidence& ev, const InferOptions& opt) {
  ClockInference out;
  auto fail = [&](const std::string& why) {
    out.ok = false;
    out.why = "too little evidence: " + why;
    return out;
  };
  // Hosts: named ones shared, unnamed ranks alone. Ordered by their lowest rank; the host of the
  // lowest rank is the reference (its clock is the run's, as rank 0's is for kernalyse-run).
  std::vector<int32_t> ranks = ev.ranks;
  for (const auto& in : ev.instances)
    for (const auto& a : in.arrivals) ranks.push_back(a.rank);
  for (const auto& m : ev.messages) ranks.push_back(m.from_rank), ranks.push_back(m.to_rank);
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  if (ranks.size() < 2) return fail(std::to_string(ranks.size()) + " rank: nothing to align");
  std::map<std::string, int> host_idx;
  std::map<int32_t, int> host_of;
  bool unnamed = false;
  for (int32_t r : ranks) {
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
    host_of[r] = hi->second;
  }
  const int H = static_cast<int>(out.hosts.size());
  out.hosts[0].reference = true;
  if (unnamed)
    out.notes.push_back("ranks without a host name are each taken as alone on their own host");
  if (H < 2) return fail("all ranks share one host clock: nothing to align");

  // Per instance and host: earliest end, latest start, and the completion statistics (median
  // and last end, as doubles relative to `origin`: an epoch-sized ns value as a double is
  // quantised to 256 ns). Flat buffers: this runs once per matched instance (30 k on the
  // 8 M-kernel benchmark store).
  struct PerHost {
    int host;
    int64_t min_e, max_s, max_e, spread;
    double med;
  };
  int64_t origin = 0;
  for (const auto& in : ev.instances)
    if (!in.arrivals.empty()) {
      origin = in.arrivals[0].end_ns;
      break;
    }
  if (origin == 0 && !ev.messages.empty()) origin = ev.messages[0].sent_ns;
  std::vector<int> host_vec(static_cast<size_t>(ranks.back()) + 1, -1);
  for (auto& [r, h] : host_of)
    if (r >= 0) host_vec[static_cast<size_t>(r)] = h;
  auto host_at = [&](int32_t r) {
    return r >= 0 && static_cast<size_t>(r) < host_vec.size() ? host_vec[static_cast<size_t>(r)]
                                                              : host_of.at(r);
  };
  std::vector<std::vector<PerHost>> inst_hosts(ev.instances.size());
  std::vector<uint8_t> cls(ev.instances.size(), 255);  // 0 simultaneous, 1 tree, 2 p2p, 255 unused
  int64_t n_cls[2] = {0, 0};
  int64_t ref_lo = kInf, ref_hi = -kInf, p2p_unpaired = 0;
  // SendRecvs whose peers are not recorded, in a world larger than these ranks, may each exchange
  // with a third rank. Taken as exchanges between the two ranks they hold, the instances of one
  // group (their kernels' streams) either agree, and are used with that assumption said, or
  // contradict each other (not the same instances on both ranks: two files sampled from a larger
  // job can hold different subsets of its collectives), and the whole group is left out, with
  // the numbers that show it.
  std::vector<char> sampled_pair(ev.instances.size(), 0);
  {
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
      if ((x->peer == y->rank && y->peer == x->rank) || (ev.world_size == 2 && ranks.size() == 2))
        continue;  // peers known: used below anyway
      int a = host_at(x->rank), b = host_at(y->rank);
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
    auto name = [&](int h) {
      const HostClock& hc = out.hosts[static_cast<size_t>(h)];
      return hc.host.empty() ? "rank " + std::to_string(hc.ranks[0]) : "host " + hc.host;
    };
    for (auto& [key, g] : groups) {
      const std::string& grp = std::get<0>(key);
      char buf[400];
      if (g.lo <= g.hi) {
        for (size_t c : g.inst) sampled_pair[c] = 1;
        std::snprintf(buf, sizeof buf,
                      "%zu SendRecv instances%s%s, peers not recorded: taken as exchanges between "
                      "%s and %s (their bounds agree: %s's correction in [%+.3f, %+.3f] ms)",
                      g.inst.size(), grp.empty() ? "" : " on ", grp.c_str(), name(g.a).c_str(),
                      name(g.b).c_str(), name(g.b).c_str(), static_cast<double>(g.lo) / 1e6,
                      static_cast<double>(g.hi) / 1e6);
      } else {
        std::snprintf(
            buf, sizeof buf,
            "%zu SendRecv instances%s%s not used: taken as exchanges between %s and %s they "
            "contradict each other (%s's correction in [%+.3f, %+.3f] ms for one, [%+.3f, %+.3f] "
            "ms for another): not the same instances on both ranks",
            g.inst.size(), grp.empty() ? "" : " on ", grp.c_str(), name(g.a).c_str(),
            name(g.b).c_str(), name(g.b).c_str(), static_cast<double>(g.at_lo.first) / 1e6,
            static_cast<double>(g.at_lo.second) / 1e6, static_cast<double>(g.at_hi.first) / 1e6,
            static_cast<double>(g.at_hi.second) / 1e6);
      }
      out.notes.push_back(buf);
    }
  }
  std::vector<std::tuple<int, int64_t, int64_t>> buf;  // (host, start, end) of one instance
  std::vector<double> ends;
  for (size_t c = 0; c < ev.instances.size(); ++c) {
    const ClockInstance& in = ev.instances[c];
    buf.clear();
    for (const auto& a : in.arrivals) {
      int h = host_at(a.rank);
      buf.emplace_back(h, a.start_ns, a.end_ns);
      if (h == 0) ref_lo = std::min(ref_lo, a.end_ns), ref_hi = std::max(ref_hi, a.end_ns);
    }
    std::sort(buf.begin(), buf.end());
    if (buf.empty() || std::get<0>(buf.front()) == std::get<0>(buf.back())) continue;  // one host
    if (is_n_by_n(in.op)) {
      cls[c] = in.algo == "TREE" ? 1 : 0;
      ++n_cls[cls[c]];
    } else if (is_p2p(in.op)) {
      // Usable only as a pair of peers: recorded, or the only two ranks of the world.
      bool peers =
          in.arrivals.size() == 2 && ((in.arrivals[0].peer == in.arrivals[1].rank &&
                                       in.arrivals[1].peer == in.arrivals[0].rank) ||
                                      (ev.world_size == 2 && ranks.size() == 2) || sampled_pair[c]);
      if (!peers) {
        ++p2p_unpaired;
        continue;
      }
      cls[c] = 2;
    } else {
      continue;  // broadcast / reduce: the root is not known here
    }
    auto& ph = inst_hosts[c];
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
    ++out.collectives;
  }
  if (p2p_unpaired > 0)
    out.notes.push_back(std::to_string(p2p_unpaired) +
                        " SendRecv instances not used in all: their peer is not recorded" +
                        (ev.world_size > 2
                             ? " and the world has " + std::to_string(ev.world_size) + " ranks"
                             : ""));
  // Messages between two hosts: bounds only (a receive completes after its send started).
  for (const auto& m : ev.messages)
    if (host_at(m.from_rank) != host_at(m.to_rank)) {
      ++out.messages;
      if (out.collectives > 0) continue;  // t_ref: the reference host's collectives if any
      for (auto [r, t] : {std::pair{m.from_rank, m.sent_ns}, std::pair{m.to_rank, m.received_ns}})
        if (host_at(r) == 0) ref_lo = std::min(ref_lo, t), ref_hi = std::max(ref_hi, t);
    }
  if (out.collectives == 0 && out.messages == 0)
    return fail("no matched collective spans two hosts" +
                (p2p_unpaired > 0 ? " (" + out.notes.back() + ")" : std::string()));
  if (out.messages > 0)
    out.notes.push_back(std::to_string(out.messages) +
                        " point-to-point messages between hosts bound the clocks (a receive "
                        "completes after its send started)");
  out.t_ref_ns = ref_lo <= ref_hi ? ref_lo + (ref_hi - ref_lo) / 2 : 0;
  const double t_ref = static_cast<double>(out.t_ref_ns - origin);

  // Completion model by algorithm: ring-like kernels end together on every rank (the host's
  // median end stands for it); tree kernels can end ms apart even on one host, so only the
  // host's last end is used, and only when there are too few ring-like instances.
  const uint8_t use = n_cls[0] >= 3 || n_cls[1] == 0 ? 0 : 1;
  if (use == 1 && n_cls[1] > 0)
    out.notes.push_back(
        "completion from tree collectives (last end per host): fewer than 3 ring-like ones");
  else if (n_cls[1] > 0)
    out.notes.push_back(
        std::to_string(n_cls[1]) +
        " tree collectives give bounds only (their completion is not simultaneous)");
  std::vector<Sample> samples;
  std::vector<double> t_of(ev.instances.size(), 0);
  std::vector<double> intra;  // spread of ends within one host (same clock) in ring-like instances
  std::vector<double> ms;
  const size_t eligible = static_cast<size_t>(std::count(cls.begin(), cls.end(), use));
  const size_t stride =
      std::max<size_t>(1, (eligible + opt.max_fit_instances - 1) / opt.max_fit_instances);
  if (stride > 1)
    out.notes.push_back("completion fitted on every " + std::to_string(stride) + "th of " +
                        std::to_string(eligible) +
                        " instances (in time order); the bounds use all of them");
  for (size_t c = 0, seen = 0; c < ev.instances.size(); ++c) {
    if (cls[c] != use || seen++ % stride != 0) continue;
    ms.clear();
    for (const PerHost& p : inst_hosts[c]) {
      const int h = p.host;
      double m;
      if (use == 0) {
        m = p.med;
        if (p.spread >= 0) intra.push_back(static_cast<double>(p.spread));
      } else {
        m = static_cast<double>(p.max_e - origin);
      }
      samples.push_back({c, h, m});
      ms.push_back(m);
    }
    t_of[c] = median_of(ms);
  }

  // Pairwise robust fits, then one least-squares network solve. For every host pair that meets in
  // >= 3 instances: the median (or, over a long run, Tukey's resistant line in time) of the
  // difference of their completion statistics, robust to a third of outlying instances. The
  // corrections θ_h + β_h·(t − t_ref) then best agree with all pair estimates (weighted by the
  // instances they rest on; reference host fixed at 0): a small dense linear system per term.
  std::vector<std::vector<size_t>> by_host(static_cast<size_t>(H));
  for (size_t i = 0; i < samples.size(); ++i)
    by_host[static_cast<size_t>(samples[i].host)].push_back(i);
  double span = 0;
  {
    double lo = 1e300, hi = -1e300;
    for (const auto& s : samples) lo = std::min(lo, t_of[s.inst]), hi = std::max(hi, t_of[s.inst]);
    span = samples.empty() ? 0 : hi - lo;
  }
  const bool long_run = span >= opt.min_drift_span_s * 1e9;
  // Per instance, the sample of each host (instances in time order).
  std::vector<size_t> inst_order;
  std::vector<std::vector<std::pair<int, double>>> per_inst(ev.instances.size());
  for (const auto& s : samples) per_inst[s.inst].emplace_back(s.host, s.m);
  for (size_t c = 0; c < ev.instances.size(); ++c)
    if (!per_inst[c].empty()) inst_order.push_back(c);
  std::sort(inst_order.begin(), inst_order.end(),
            [&](size_t x, size_t y) { return t_of[x] < t_of[y]; });
  struct Pair {
    std::vector<std::pair<double, double>> ty;  // (t, m_b − m_a)
  };
  std::vector<Pair> pairs(static_cast<size_t>(H) * static_cast<size_t>(H));  // a * H + b, a < b
  for (size_t c : inst_order) {
    const auto& v = per_inst[c];
    for (size_t i = 0; i < v.size(); ++i)
      for (size_t j = i + 1; j < v.size(); ++j) {
        auto [a, ma] = v[i];
        auto [b, mb] = v[j];
        if (a > b) std::swap(a, b), std::swap(ma, mb);
        pairs[static_cast<size_t>(a) * static_cast<size_t>(H) + static_cast<size_t>(b)]
            .ty.emplace_back(t_of[c], mb - ma);
      }
  }
  // Connected to the reference through pairs with enough instances.
  std::vector<char> linked(static_cast<size_t>(H), 0);
  linked[0] = 1;
  for (bool grew = true; grew;) {
    grew = false;
    for (size_t i = 0; i < pairs.size(); ++i) {
      const size_t a = i / static_cast<size_t>(H), b = i % static_cast<size_t>(H);
      if (pairs[i].ty.size() >= 3 && linked[a] != linked[b]) linked[a] = linked[b] = 1, grew = true;
    }
  }
  // Unknowns: linked hosts other than the reference.
  std::vector<int> var_of(static_cast<size_t>(H), -1);
  int nv = 0;
  for (int h = 1; h < H; ++h)
    if (linked[static_cast<size_t>(h)]) var_of[static_cast<size_t>(h)] = nv++;
  std::vector<double> L(static_cast<size_t>(nv * nv), 0), b_theta(static_cast<size_t>(nv), 0),
      b_beta(static_cast<size_t>(nv), 0);
  for (size_t i = 0; i < pairs.size(); ++i) {
    const Pair& pr = pairs[i];
    if (pr.ty.size() < 3) continue;
    const int a = static_cast<int>(i / static_cast<size_t>(H)),
              b = static_cast<int>(i % static_cast<size_t>(H));
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
    int va = var_of[static_cast<size_t>(a)], vb = var_of[static_cast<size_t>(b)];
    auto at = [&](int i, int j) -> double& { return L[static_cast<size_t>(i * nv + j)]; };
    if (va >= 0)
      at(va, va) += w, b_theta[static_cast<size_t>(va)] += w * f.theta,
          b_beta[static_cast<size_t>(va)] += w * f.beta;
    if (vb >= 0)
      at(vb, vb) += w, b_theta[static_cast<size_t>(vb)] -= w * f.theta,
          b_beta[static_cast<size_t>(vb)] -= w * f.beta;
    if (va >= 0 && vb >= 0) at(va, vb) -= w, at(vb, va) -= w;
  }
  // Gaussian elimination with partial pivoting (the system is a reduced graph Laplacian: SPD).
  auto solve_lin = [&](std::vector<double> M, std::vector<double> rhs) {
    const int n = nv;
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
  };
  std::vector<double> xt = solve_lin(L, b_theta),
                      xb = long_run ? solve_lin(L, b_beta)
                                    : std::vector<double>(static_cast<size_t>(nv), 0);
  std::vector<Fit> fit(static_cast<size_t>(H));
  for (int h = 1; h < H; ++h)
    if (var_of[static_cast<size_t>(h)] >= 0)
      fit[static_cast<size_t>(h)] = {xt[static_cast<size_t>(var_of[static_cast<size_t>(h)])],
                                     xb[static_cast<size_t>(var_of[static_cast<size_t>(h)])]};
  auto corr = [&](int h, double t) {
    return fit[static_cast<size_t>(h)].theta + fit[static_cast<size_t>(h)].beta * (t - t_ref);
  };
  // Residuals: each host's corrected completion against the instance's median over hosts. Their
  // robust scale gives the noise; the drift's standard error follows Tukey's line (outer thirds).
  std::vector<double> sigma(static_cast<size_t>(H), 0), se_beta(static_cast<size_t>(H), 0);
  auto residuals = [&] {
    std::vector<std::vector<std::pair<double, double>>> res(static_cast<size_t>(H));
    std::vector<double> v;
    for (size_t c : inst_order) {
      v.clear();
      for (auto& [h, m] : per_inst[c]) v.push_back(m + corr(h, t_of[c]));
      double T = median_of(v);
      for (auto& [h, m] : per_inst[c])
        res[static_cast<size_t>(h)].emplace_back(t_of[c], m + corr(h, t_of[c]) - T);
    }
    for (int h = 1; h < H; ++h) {
      auto& r = res[static_cast<size_t>(h)];
      std::vector<double> a;
      for (auto& q : r) a.push_back(std::fabs(q.second));
      sigma[static_cast<size_t>(h)] = 1.4826 * median_of(a);
      double k = std::floor(static_cast<double>(r.size()) / 3), lever = 0;
      if (k > 0) {
        std::vector<double> t1, t3;
        for (size_t i = 0; i < static_cast<size_t>(k); ++i)
          t1.push_back(r[i].first), t3.push_back(r[r.size() - 1 - i].first);
        lever = median_of(t3) - median_of(t1);
      }
      se_beta[static_cast<size_t>(h)] =
          long_run && lever > 0
              ? 1.2533 * sigma[static_cast<size_t>(h)] * std::sqrt(2.0 / k) / lever
              : 0;
    }
  };
  residuals();
  // Keep a drift only where it stands out of its own noise (3 standard errors).
  for (int h = 1; h < H; ++h) {
    Fit& f = fit[static_cast<size_t>(h)];
    if (long_run && f.beta != 0 && std::fabs(f.beta) > 3 * se_beta[static_cast<size_t>(h)])
      out.drift_fitted = true;
    else
      f.beta = 0, se_beta[static_cast<size_t>(h)] = 0;
  }
  residuals();
  for (int h = 1; h < H; ++h)
    if (fit[static_cast<size_t>(h)].beta == 0) se_beta[static_cast<size_t>(h)] = 0;

  // Happened-before bounds on the drift-corrected times. W[a][b] bounds θ_b − θ_a from above:
  // a kernel of host a that ends at e needed a kernel of host b that started at s (e_a ≥ s_b).
  auto drifted = [&](int h, int64_t t) {
    return t + static_cast<int64_t>(std::llround(fit[static_cast<size_t>(h)].beta *
                                                 static_cast<double>(t - out.t_ref_ns)));
  };
  auto bounds = [&](bool with_p2p, std::vector<int64_t>* W, int64_t* constrained) {
    W->assign(static_cast<size_t>(H * H), kInf);
    for (int h = 0; h < H; ++h) (*W)[static_cast<size_t>(h * H + h)] = 0;
    *constrained = 0;
    auto add = [&](int a, int b, int64_t w) {
      int64_t& x = (*W)[static_cast<size_t>(a * H + b)];
      x = std::min(x, w);
    };
    for (size_t c = 0; c < ev.instances.size(); ++c) {
      if (cls[c] == 255) continue;
      const ClockInstance& in = ev.instances[c];
      if (cls[c] <= 1) {
        // No rank ends an N×N collective before every rank has started it.
        std::vector<std::pair<int, std::pair<int64_t, int64_t>>> hs;
        for (const PerHost& p : inst_hosts[c])
          hs.push_back({p.host, {drifted(p.host, p.min_e), drifted(p.host, p.max_s)}});
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
            int a = host_at(x.rank), b = host_at(y.rank);
            if (a == b) continue;
            add(a, b, drifted(a, x.end_ns) - drifted(b, y.start_ns));
            any = true;
          }
        *constrained += any;
      }
    }
    for (const auto& m : ev.messages) {
      const int a = host_at(m.to_rank), b = host_at(m.from_rank);
      if (a != b) add(a, b, drifted(a, m.received_ns) - drifted(b, m.sent_ns));
    }
    // Closure (Floyd–Warshall): tightest bounds; a negative diagonal = contradiction.
    for (int k = 0; k < H; ++k)
      for (int i = 0; i < H; ++i) {
        int64_t ik = (*W)[static_cast<size_t>(i * H + k)];
        if (ik >= kInf) continue;
        for (int j = 0; j < H; ++j) {
          int64_t kj = (*W)[static_cast<size_t>(k * H + j)];
          if (kj >= kInf) continue;
          int64_t& ij = (*W)[static_cast<size_t>(i * H + j)];
          ij = std::min(ij, ik + kj);
        }
      }
    for (int h = 0; h < H; ++h)
      if ((*W)[static_cast<size_t>(h * H + h)] < 0) return false;
    return true;
  };
  std::vector<int64_t> D;
  bool have_p2p = std::find(cls.begin(), cls.end(), 2) != cls.end();
  if (have_p2p)
    out.notes.push_back(
        "point-to-point kernels without a recorded direction are taken as exchanges (their kernels "
        "overlap)");
  if (!bounds(true, &D, &out.constrained)) {
    if (!have_p2p || !bounds(false, &D, &out.constrained))
      return fail("the happened-before bounds contradict each other (mismatched collectives?)");
    out.notes.push_back("point-to-point bounds dropped: they contradicted the collectives'");
  }
  auto d = [&](int a, int b) { return D[static_cast<size_t>(a * H + b)]; };

  // Fix hosts one at a time, each inside the interval the fixed ones leave (never empty once
  // the constraints are closed): the reference first, then by evidence.
  std::vector<int> order(static_cast<size_t>(H));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin() + 1, order.end(), [&](int x, int y) {
    return by_host[static_cast<size_t>(x)].size() > by_host[static_cast<size_t>(y)].size();
  });
  std::vector<int64_t> theta(static_cast<size_t>(H), 0);
  std::vector<char> fixed(static_cast<size_t>(H), 0);
  const double completion_floor = intra.empty() ? 0 : median_of(intra) / 2;
  // Completion that depends on arrival order (the last arriver's kernel ending earlier or later
  // than the others', as MPI-emulated collectives on busy cores do) reads as an offset for a host
  // that is usually last. Seen in the data as the gap between the host's median residual when it
  // arrived last and when it did not (>= 3 instances each); added to that host's ±.
  std::vector<double> order_bias(static_cast<size_t>(H), 0);
  {
    std::vector<std::vector<double>> res_last(static_cast<size_t>(H)),
        res_other(static_cast<size_t>(H));
    for (size_t c : inst_order) {
      const auto& ph = inst_hosts[c];
      int last = -1;
      double last_s = -1e300;
      std::vector<double> v;
      for (const PerHost& p : ph) {
        double st = static_cast<double>(p.max_s - origin) + corr(p.host, t_of[c]);
        if (st > last_s) last_s = st, last = p.host;
      }
      for (auto& [h, m] : per_inst[c]) v.push_back(m + corr(h, t_of[c]));
      const double T = median_of(v);
      for (auto& [h, m] : per_inst[c])
        (h == last ? res_last : res_other)[static_cast<size_t>(h)].push_back(m + corr(h, t_of[c]) -
                                                                             T);
    }
    for (int h = 0; h < H; ++h)
      if (res_last[static_cast<size_t>(h)].size() >= 3 &&
          res_other[static_cast<size_t>(h)].size() >= 3)
        order_bias[static_cast<size_t>(h)] =
            std::fabs(median_of(res_last[static_cast<size_t>(h)]) -
                      median_of(res_other[static_cast<size_t>(h)]));
  }
  if (!intra.empty())
    out.notes.push_back("ranks sharing a host end ring-like collectives within " +
                        std::to_string(static_cast<int64_t>(median_of(intra))) +
                        " ns of each other (median): half of it is added to every ±");
  for (int h : order) {
    HostClock& hc = out.hosts[static_cast<size_t>(h)];
    int64_t lo = -kInf, hi = kInf;
    for (int f = 0; f < H; ++f)
      if (fixed[static_cast<size_t>(f)]) {
        if (d(h, f) < kInf) lo = std::max(lo, theta[static_cast<size_t>(f)] - d(h, f));
        if (d(f, h) < kInf) hi = std::min(hi, theta[static_cast<size_t>(f)] + d(f, h));
      }
    hc.bound_lo_ns = d(h, 0) < kInf ? -d(h, 0) : -kInf;
    hc.bound_hi_ns = d(0, h) < kInf ? d(0, h) : kInf;
    const auto& idx = by_host[static_cast<size_t>(h)];
    hc.samples = static_cast<int64_t>(idx.size());
    double est;
    if (h == 0) {
      est = 0;
    } else if (linked[static_cast<size_t>(h)] && idx.size() >= 3) {
      est = fit[static_cast<size_t>(h)].theta;
    } else if (lo > -kInf && hi < kInf) {
      // Bounds, and perhaps one or two completion samples against hosts fixed already: the median
      // of what they say (clamped into the bounds below), else the middle. Their error cannot be
      // measured from so few: the ± is then the hard bound (the farther end of the interval).
      std::vector<double> say;
      for (size_t c : inst_order) {
        const auto& v = per_inst[c];
        auto me = std::find_if(v.begin(), v.end(), [&](const auto& x) { return x.first == h; });
        if (me == v.end()) continue;
        for (const auto& [f, mf] : v)
          if (f != h && fixed[static_cast<size_t>(f)])
            say.push_back(mf + static_cast<double>(theta[static_cast<size_t>(f)]) - me->second);
      }
      est =
          say.empty() ? static_cast<double>(lo) + static_cast<double>(hi - lo) / 2 : median_of(say);
      fit[static_cast<size_t>(h)].beta = 0;
    } else {
      return fail("host " + (hc.host.empty() ? "of rank " + std::to_string(hc.ranks[0]) : hc.host) +
                  ": no collective ties its clock to the others");
    }
    // Stay a ns inside the bounds: the store's own rounding of the composed map may differ by 1.
    int64_t l = lo > -kInf ? lo + 1 : lo, u = hi < kInf ? hi - 1 : hi;
    if (l > u) l = u = lo + (hi - lo) / 2;
    int64_t v = std::clamp(static_cast<int64_t>(std::llround(est)), l, u);
    if (h != 0 && std::fabs(static_cast<double>(v) - est) > 1000) {
      char buf[240];
      std::snprintf(buf, sizeof buf,
                    "%s: completion puts its correction at %+.1f µs, outside the happened-before "
                    "bounds [%+.1f, %+.1f] µs: moved to %+.1f µs (completion there is not "
                    "simultaneous)",
                    hc.host.empty() ? ("rank " + std::to_string(hc.ranks[0])).c_str()
                                    : ("host " + hc.host).c_str(),
                    est / 1e3, static_cast<double>(lo) / 1e3, static_cast<double>(hi) / 1e3,
                    static_cast<double>(v) / 1e3);
      out.notes.push_back(buf);
    }
    theta[static_cast<size_t>(h)] = v;
    fixed[static_cast<size_t>(h)] = 1;
    hc.offset_ns = v;
    hc.drift = fit[static_cast<size_t>(h)].beta;
    if (h == 0) continue;
    // Uncertainty: the completion scatter (a host's constant completion bias cannot be told from
    // its offset; assumed no larger than that scatter), the median's own error, the drift's error
    // at the ends of the run, the same-host completion spread; never more than the hard bound.
    // The drift's error reaches the ends of the run, up to half the span from t_ref; counted over
    // the whole span, since the standard error assumes Gaussian scatter and completion is not
    // (uniform jitter, outliers): on planted truth the half-span term left 1 rank in 16 outside.
    const double lever_arm = span;
    double u_stat =
        linked[static_cast<size_t>(h)] && idx.size() >= 3
            ? sigma[static_cast<size_t>(h)] * (1 + 3 / std::sqrt(static_cast<double>(idx.size()))) +
                  3 * se_beta[static_cast<size_t>(h)] * lever_arm + completion_floor +
                  order_bias[static_cast<size_t>(h)] + std::fabs(static_cast<double>(v) - est)
            : 1e300;
    double u_hard = std::max(static_cast<double>(v - lo), static_cast<double>(hi - v));
    if (lo <= -kInf || hi >= kInf) u_hard = 1e300;
    double unc = std::min(u_stat, u_hard);
    if (unc >= 1e299) return fail("host " + hc.host + ": no bound on its clock");
    hc.uncertainty_ns = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(unc)));
  }
  // Loose bounds alone (a single collective, or a few that each rank waited long in) can leave a
  // host anywhere within many ms: a ± beyond what NTP keeps hosts within says nothing, so the
  // clocks are kept as recorded, with the numbers.
  for (const HostClock& hc : out.hosts)
    if (hc.uncertainty_ns > kLooseNs) {
      char buf[200];
      std::snprintf(
          buf, sizeof buf,
          "%s's clock is bounded only to [%+.3f, %+.3f] ms of the reference by %lld "
          "collectives%s (±%.1f ms, more than the %.0f ms NTP keeps hosts within)",
          hc.host.empty() ? ("rank " + std::to_string(hc.ranks[0])).c_str()
                          : ("host " + hc.host).c_str(),
          static_cast<double>(hc.bound_lo_ns) / 1e6, static_cast<double>(hc.bound_hi_ns) / 1e6,
          static_cast<long long>(out.collectives),
          out.messages > 0 ? (" and " + std::to_string(out.messages) + " messages").c_str() : "",
          static_cast<double>(hc.uncertainty_ns) / 1e6, kLooseNs / 1e6);
      return fail(buf);
    }

  // Violations and completion skew before and after, on the same instances.
  auto corrected = [&](int32_t r, int64_t t) {
    int h = host_at(r);
    return drifted(h, t) + theta[static_cast<size_t>(h)];
  };
  auto check = [&](bool after, int64_t* viol, int64_t* skew) {
    *viol = 0;
    std::vector<double> sk;
    for (size_t c = 0; c < ev.instances.size(); ++c) {
      if (cls[c] == 255) continue;
      const ClockInstance& in = ev.instances[c];
      auto T = [&](int32_t r, int64_t t) { return after ? corrected(r, t) : t; };
      bool bad = false;
      if (cls[c] <= 1) {
        int64_t smax = -kInf, emin = kInf, emax = -kInf;
        for (const auto& a : in.arrivals) {
          smax = std::max(smax, T(a.rank, a.start_ns));
          emin = std::min(emin, T(a.rank, a.end_ns));
          emax = std::max(emax, T(a.rank, a.end_ns));
        }
        bad = emin < smax;
        if (cls[c] == 0) sk.push_back(static_cast<double>(emax - emin));
      } else {
        const auto& x = in.arrivals[0];
        const auto& y = in.arrivals[1];
        if (host_at(x.rank) != host_at(y.rank))
          bad = T(x.rank, x.end_ns) < T(y.rank, y.start_ns) ||
                T(y.rank, y.end_ns) < T(x.rank, x.start_ns);
      }
      *viol += bad;
    }
    for (const auto& m : ev.messages)  // a receive seen complete before its send started
      if (host_at(m.from_rank) != host_at(m.to_rank))
        *viol += (after ? corrected(m.to_rank, m.received_ns) : m.received_ns) <
                 (after ? corrected(m.from_rank, m.sent_ns) : m.sent_ns);
    *skew = static_cast<int64_t>(std::llround(median_of(sk)));
  };
  check(false, &out.violations_before, &out.skew_before_ns);
  check(true, &out.violations_after, &out.skew_after_ns);
  out.ok = true;
  out.method = "inferred from " + std::to_string(out.collectives) + " collectives" +
               (out.messages > 0 ? " and " + std::to_string(out.messages) + " messages" : "") +
               " across " + std::to_string(H) + " hosts";
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
