// The Store side of the clock inference: evidence from the ledger's matched collectives, and
// applying a result to every time column with /ranks recording what was done (docs/store.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <string>

#include "kernalyse/clock_infer.h"
#include "kernalyse/error.h"
#include "kernalyse/parallel.h"
#include "kernalyse/units.h"

namespace kernalyse {
namespace {

// NCCL algorithm from a kernel name: ncclKernel_AllReduce_RING_LL_Sum_float,
// ncclDevKernel_AllReduce_Sum_bf16_TREE_LL(...), ncclDevKernel_AllGather_RING_LL.
std::string algo_from_kernel(const std::string& name) {
  static const std::regex re(
      R"(_(RING|TREE|NVLS_TREE|NVLS|COLLNET_DIRECT|COLLNET_CHAIN|PAT)(?:_|\(|$))");
  std::smatch m;
  return std::regex_search(name, m, re) ? m[1].str() : std::string();
}

// "…Sender_Rank: 0, Receiver_Rank: 1, …" → the value after `key`, -1 if absent or malformed.
int32_t field(const std::string& text, const char* key) {
  size_t at = text.find(key);
  if (at == std::string::npos) return -1;
  int64_t v = 0;
  size_t i = at + std::char_traits<char>::length(key), n = 0;
  for (; i < text.size() && n < 9 && text[i] >= '0' && text[i] <= '9'; ++i, ++n)
    v = v * 10 + (text[i] - '0');
  return n > 0 ? static_cast<int32_t>(v) : -1;
}

// Point-to-point messages from NCCL's network plugin NVTX annotations: the sender's
// "ncclNetIsend(): <message>" range and the receiver's "ncclNetRecvTest(): <message>" mark (the
// receive seen complete), <message> naming size, sender and receiver rank, channel and sequence.
// Paired per message text in time order; a message is used only when each side is on the rank the
// text names (NCCL ranks in the communicator: they must be the store's ranks) and both sides
// occur equally often (else which send a receive belongs to is not known).
void add_messages(const Store& s, ClockEvidence* ev) {
  const Annotations& an = s.annotations;
  static constexpr const char* kSend = "ncclNetIsend(): ";
  static constexpr const char* kRecv = "ncclNetRecvTest(): ";
  std::map<uint32_t, int> kind_of;  // name id → 1 send, 2 receive, 0 neither (each name once)
  struct Side {
    std::vector<std::pair<int64_t, int32_t>> send, recv;  // (time, rank)
  };
  std::map<std::string, Side> msgs;
  for (size_t i = 0; i < an.size(); ++i) {
    if (static_cast<AnnotationKind>(an.kind[i]) != AnnotationKind::Nvtx) continue;
    auto [it, fresh] = kind_of.try_emplace(an.name_id[i], 0);
    const std::string& name = s.strings.at(an.name_id[i]);
    if (fresh) it->second = name.rfind(kSend, 0) == 0 ? 1 : name.rfind(kRecv, 0) == 0 ? 2 : 0;
    if (it->second == 0) continue;
    const bool send = it->second == 1;
    Side& side = msgs[name.substr(std::char_traits<char>::length(send ? kSend : kRecv))];
    (send ? side.send : side.recv).emplace_back(an.start_ns[i], an.rank[i]);
  }
  for (auto& [text, side] : msgs) {
    const int32_t from = field(text, "Sender_Rank: "), to = field(text, "Receiver_Rank: ");
    if (from < 0 || to < 0 || from == to || side.send.size() != side.recv.size()) continue;
    std::sort(side.send.begin(), side.send.end());
    std::sort(side.recv.begin(), side.recv.end());
    for (size_t k = 0; k < side.send.size(); ++k)
      if (side.send[k].second == from && side.recv[k].second == to)
        ev->messages.push_back({from, to, side.send[k].first, side.recv[k].first});
  }
}

}  // namespace

bool clocks_aligned(const Store& s) {
  return std::none_of(s.ranks.begin(), s.ranks.end(),
                      [](const RankInfo& r) { return r.clock_method.rfind("none", 0) == 0; });
}

ClockEvidence clock_evidence(const Store& s, std::shared_ptr<const CollectiveMatch>* match) {
  ClockEvidence ev;
  const auto& a = s.activities;
  for (const auto& r : s.ranks) {
    ev.ranks.push_back(r.rank);
    ev.host[r.rank] = r.host;
    ev.world_size = std::max(ev.world_size, r.world_size);
  }
  // The one matcher, on every row: exactly the instances the ledger and the exports use.
  std::vector<uint32_t> rows(a.size());
  for (uint32_t i = 0; i < a.size(); ++i) rows[i] = i;
  auto shared = std::make_shared<CollectiveMatch>(match_collectives(s, rows));
  const CollectiveMatch& cm = *shared;
  if (match) *match = shared;
  // Per instance its arrivals' times: reads scattered over the time columns (cache misses, most
  // of this), so instances are built on the pool, each range with its own cache of the names'
  // algorithm (the regex runs once per distinct name id and range). Op keys: once per distinct op.
  std::map<std::string, std::string, std::less<>> op_key;
  for (const Collective& in : cm.matched)
    if (!op_key.count(in.op)) op_key.emplace(in.op, collective_op_key(in.op));
  ev.instances.resize(cm.matched.size());
  const size_t n_inst = cm.matched.size(), chunk = 2048;
  parallel_for((n_inst + chunk - 1) / chunk, [&](size_t k) {
    std::map<uint32_t, std::string> algo_of_name;
    for (size_t c = k * chunk; c < std::min(n_inst, (k + 1) * chunk); ++c) {
      const Collective& in = cm.matched[c];
      ClockInstance& ci = ev.instances[c];
      ci.op = op_key.find(in.op)->second;
      ci.arrivals.reserve(in.arrivals.size());
      for (const auto& x : in.arrivals) {
        const int32_t n = x.nccl;
        ClockArrival ca;
        ca.rank = x.rank;
        ca.start_ns = a.start_ns[x.row];
        ca.end_ns = a.end_ns[x.row];
        if (n >= 0 && static_cast<size_t>(n) < s.nccl.peer.size()) ca.peer = s.nccl.peer[n];
        if (ci.algo.empty()) {
          if (n >= 0 && static_cast<size_t>(n) < s.nccl.algo_id.size() && s.nccl.algo_id[n] != 0) {
            ci.algo = s.strings.at(s.nccl.algo_id[n]);
          } else {
            auto it = algo_of_name.find(a.name_id[x.row]);
            if (it == algo_of_name.end())
              it = algo_of_name
                       .emplace(a.name_id[x.row], algo_from_kernel(s.strings.at(a.name_id[x.row])))
                       .first;
            ci.algo = it->second;
          }
        }
        ci.arrivals.push_back(ca);
        if (ci.op == "sendrecv")
          ci.group += (ci.group.empty() ? "stream " : "/") + std::to_string(a.stream[x.row]);
      }
    }
  });
  add_messages(s, &ev);
  return ev;
}

void apply_clock_inference(Store& s, const ClockInference& inf) {
  if (!inf.ok) return;
  if (!inf.kept.empty()) {
    // The recorded clocks stay, but how far they agree with the collectives is now known: each
    // rank's ± is its host's, so that skews within it read as noise (the ledger).
    int64_t worst = 0;
    for (const auto& h : inf.hosts)
      for (int32_t r : h.ranks)
        for (auto& ri : s.ranks)
          if (ri.rank == r) ri.clock_uncertainty_ns = h.uncertainty_ns;
    for (const auto& h : inf.hosts) worst = std::max(worst, h.uncertainty_ns);
    s.attrs.clock_domain +=
        "; recorded clocks agree with the collectives within ±" + format_duration(worst);
    return;
  }
  struct Map {
    bool on = false;
    int64_t theta = 0;
    double beta = 0;
  };
  int32_t max_rank = 0;
  for (const auto& h : inf.hosts)
    for (int32_t r : h.ranks) max_rank = std::max(max_rank, r);
  std::vector<Map> m(static_cast<size_t>(max_rank) + 1);
  std::vector<const HostClock*> host_of(static_cast<size_t>(max_rank) + 1, nullptr);
  for (const auto& h : inf.hosts)
    for (int32_t r : h.ranks)
      if (r >= 0) {
        m[static_cast<size_t>(r)] = {h.offset_ns != 0 || h.drift != 0, h.offset_ns, h.drift};
        host_of[static_cast<size_t>(r)] = &h;
      }
  // Rows of one rank are contiguous in every table (sorted by rank): one map per run of rows.
  auto move = [&](const std::vector<int32_t>& rank, std::vector<int64_t>& col) {
    for (size_t i = 0; i < col.size();) {
      const int32_t r = rank[i];
      size_t j = i;
      while (j < col.size() && rank[j] == r) ++j;
      if (r >= 0 && r <= max_rank && m[static_cast<size_t>(r)].on) {
        const Map x = m[static_cast<size_t>(r)];
        if (x.beta == 0) {
          for (size_t k = i; k < j; ++k) col[k] += x.theta;
        } else {
          for (size_t k = i; k < j; ++k) {
            const double d = x.beta * static_cast<double>(col[k] - inf.t_ref_ns);
            col[k] +=
                x.theta + static_cast<int64_t>(d < 0 ? d - 0.5 : d + 0.5);  // llround, inlined
          }
        }
      }
      i = j;
    }
  };
  // Every time column of every table (store.h's roles), by its table's rank column.
  for_each_table(s, [&](const char* table, auto& t) {
    const std::vector<int32_t>* rank = rank_column(t);
    for_each_column(t, [&](const auto& def, auto& col) {
      if constexpr (std::is_same_v<std::decay_t<decltype(col)>, std::vector<int64_t>>) {
        if (!is_time(def.role) || col.empty()) return;  // empty: a column the reader skipped
        if (!rank)  // store.h: a table with times has a rank column (tested)
          throw Error(std::string("store table ") + table + " has times but no rank column");
        if (col.size() != rank->size())
          throw Error(std::string("inconsistent store: ") + table + "." + def.name + " has " +
                      std::to_string(col.size()) + " rows, its rank column " +
                      std::to_string(rank->size()));
        move(*rank, col);
      }
    });
  });
  // The store's map from a rank's own clock: t_run = t + offset + round(drift·t) + base. The
  // correction above acts on t_run; composed, the map stays of the same form (docs/store.md).
  int64_t worst = 0;
  for (auto& ri : s.ranks) {
    if (ri.rank < 0 || ri.rank > max_rank || !host_of[static_cast<size_t>(ri.rank)]) continue;
    const HostClock& h = *host_of[static_cast<size_t>(ri.rank)];
    // In int64 before the double: offset + base is epoch-sized.
    const int64_t ob = ri.clock_offset_ns + ri.base_time_ns - inf.t_ref_ns;
    ri.clock_offset_ns += h.offset_ns + std::llround(h.drift * static_cast<double>(ob));
    ri.clock_drift = ri.clock_drift + h.drift + h.drift * ri.clock_drift;
    ri.clock_uncertainty_ns = h.uncertainty_ns;
    ri.clock_method = inf.method + (h.reference ? " (reference clock)" : "");
    worst = std::max(worst, h.uncertainty_ns);
  }
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f", static_cast<double>(worst) / 1000.0);
  s.attrs.clock_domain =
      "one timeline: per-host clocks " + inf.method + " (reference: the host of rank " +
      std::to_string(inf.hosts.empty() || inf.hosts[0].ranks.empty() ? 0 : inf.hosts[0].ranks[0]) +
      "), ±" + buf + " µs";
}

}  // namespace kernalyse
