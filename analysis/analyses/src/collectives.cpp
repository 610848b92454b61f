// The one collective matcher (docs/analyses.md, "Collective matching").
#include "kernalyse/collectives.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <regex>
#include <tuple>
#include <unordered_map>

#include "kernalyse/analysis.h"
#include "kernalyse/classify.h"
#include "kernalyse/parallel.h"
#include "kernalyse/timeline.h"

namespace kernalyse {
namespace {

std::string op_from_kernel(const std::string& simplified) {
  static const std::regex re(R"(nccl(?:Dev|SymkDev)?Kernel_([A-Za-z]+))");
  std::smatch m;
  if (std::regex_search(simplified, m, re)) return m[1].str();
  return simplified;
}

// "[0, 1, 2]" -> {0, 1, 2}; empty when it does not parse. Digit runs are bounded so that a
// malformed string cannot overflow.
std::vector<int32_t> parse_ranks(const std::string& s) {
  std::vector<int32_t> out;
  int64_t cur = -1;
  for (char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      cur = std::min<int64_t>((cur < 0 ? 0 : cur) * 10 + (c - '0'), INT32_MAX);
    } else if (cur >= 0) {
      out.push_back(static_cast<int32_t>(cur));
      cur = -1;
    }
  }
  if (cur >= 0) out.push_back(static_cast<int32_t>(cur));
  return out;
}

struct Instance {
  std::string op;
  std::vector<CollectiveArrival> arrivals;
  std::vector<int32_t> expected;
  int64_t msg_bytes = -1;
  uint32_t pg = 0;  // process group name id (metadata keys only)
};

// Which side of a point-to-point pair a collective name is: 1 a send, 0 a receive, -1 neither (a
// collective, or a fused SendRecv).
int8_t p2p_side(const std::string& op) {
  const std::string k = collective_op_key(op);
  const bool send = k.find("send") != std::string::npos;
  if (send == (k.find("recv") != std::string::npos)) return -1;
  return send ? 1 : 0;
}

// Point-to-point: a send and its recv complete together (NCCL's pair). Keyed by their collective
// name, each side stays unmatched as a collective; they pair within their process group by Seq,
// else by occurrence (the k-th send of a rank with the k-th recv of another). Only the selected
// rows, and none the collectives took.
void pair_point_to_point(const Store& s, const std::vector<uint32_t>& rows, CollectiveMatch* m) {
  const Activities& a = s.activities;
  const NcclInfo& nc = s.nccl;
  if (!nc.size()) return;
  std::vector<uint8_t> open(a.size(), 0);
  for (uint32_t i : rows) open[i] = 1;
  for (const Collective& c : m->matched)
    for (const auto& x : c.arrivals) open[x.row] = 0;
  struct Side {
    uint32_t row;
    bool send;
    int32_t nccl;
  };
  // Key: (0, operation id) where NCCL gave one (a send and its receive share it), else (1, process
  // group, Seq or occurrence). Sorted by key, a key's sides in table order (stable), as a map of
  // them was; each collective name is classified once (a lower-cased copy per row was 0.14 s of
  // the 256-rank benchmark store's match).
  using Key = std::tuple<int, uint32_t, uint64_t>;
  std::vector<std::pair<Key, Side>> sides;
  const bool ids = nc.op_id.size() == nc.size();
  std::map<std::tuple<int32_t, uint32_t, bool>, int64_t> occurrence;
  std::unordered_map<uint32_t, int8_t> side_of;  // collective name id -> 1 send, 0 recv, -1 neither
  for (size_t i = 0; i < nc.size(); ++i) {
    const uint64_t row = nc.activity[i];
    if (row >= a.size() || !open[row]) continue;
    auto [known, fresh] = side_of.try_emplace(nc.collective_id[i]);
    if (fresh) known->second = p2p_side(s.strings.at(nc.collective_id[i]));
    if (known->second < 0) continue;
    const bool send = known->second == 1;
    open[row] = 0;
    const Side side{static_cast<uint32_t>(row), send, static_cast<int32_t>(i)};
    if (ids && nc.op_id[i] != 0) {
      sides.push_back({{0, 0u, nc.op_id[i]}, side});
      continue;
    }
    const int64_t k =
        nc.seq[i] >= 0 ? nc.seq[i] : occurrence[{a.rank[row], nc.pg_name_id[i], send}]++;
    sides.push_back({{1, nc.pg_name_id[i], static_cast<uint64_t>(k)}, side});
  }
  std::stable_sort(sides.begin(), sides.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  for (size_t at = 0; at < sides.size();) {
    size_t end = at;
    while (end < sides.size() && sides[end].first == sides[at].first) ++end;
    const size_t first = at, count = end - at;
    at = end;
    auto v = [&](size_t k) -> const Side& { return sides[first + k].second; };
    if (count != 2 || v(0).send == v(1).send || a.rank[v(0).row] == a.rank[v(1).row]) continue;
    Collective c;
    c.id = static_cast<int64_t>(m->matched.size() + m->p2p.size());
    c.op = "send/recv";
    for (size_t k = 0; k < count; ++k)
      c.arrivals.push_back({a.rank[v(k).row], v(k).row, v(k).nccl});
    m->p2p.push_back(std::move(c));
  }
}

// Per rank its communication kernels in start order (parallel threads); the ranks with any GPU
// work go to m->ranks, every communication kernel (selection order) to *all.
std::map<int32_t, std::vector<uint32_t>> comm_kernels_by_rank(const Store& s,
                                                              const std::vector<uint32_t>& rows,
                                                              CollectiveMatch* m,
                                                              std::vector<uint32_t>* all) {
  const auto& a = s.activities;
  const detail::RowsByRank by_rank(s, rows);
  struct RankComm {
    bool gpu = false;
    std::vector<uint32_t> rows, in_order;
  };
  std::vector<RankComm> per(by_rank.size());
  parallel_for(by_rank.size(), [&](size_t k) {
    for (uint32_t i : by_rank.rows(k)) {
      if (!is_gpu_work(static_cast<Kind>(a.kind[i]))) continue;
      per[k].gpu = true;
      if ((a.kind[i] == static_cast<uint8_t>(Kind::Kernel) ||
           a.kind[i] == static_cast<uint8_t>(Kind::Memcpy)) &&
          a.category[i] == static_cast<uint8_t>(Category::Communication))
        per[k].rows.push_back(i);
    }
    per[k].in_order = detail::merge_streams_by_start(s, per[k].rows);
  });
  std::map<int32_t, std::vector<uint32_t>> comm;
  for (size_t k = 0; k < per.size(); ++k) {
    if (!per[k].gpu) continue;
    m->ranks.push_back(by_rank.rank(k));
    all->insert(all->end(), per[k].rows.begin(), per[k].rows.end());
    comm[by_rank.rank(k)] = std::move(per[k].in_order);
  }
  return comm;
}

// Counts and lists the incomplete instances as unmatched, but for the sends and recvs that
// paired (m->p2p).
void list_unmatched(const Store& s, const std::vector<const Instance*>& incomplete,
                    CollectiveMatch* m) {
  std::vector<uint8_t> paired(m->p2p.empty() ? 0 : s.activities.size(), 0);
  for (const Collective& c : m->p2p)
    for (const auto& x : c.arrivals) paired[x.row] = 1;
  for (const Instance* in : incomplete) {
    if (!paired.empty() && std::all_of(in->arrivals.begin(), in->arrivals.end(),
                                       [&](const CollectiveArrival& x) { return paired[x.row]; }))
      continue;
    ++m->unmatched_count;
    if (m->unmatched.size() < CollectiveMatch::kMaxUnmatchedListed) {
      UnmatchedCollective u{in->op, {}, in->expected.size()};
      for (const auto& x : in->arrivals) u.ranks_present.push_back(x.rank);
      m->unmatched.push_back(std::move(u));
    }
  }
}

// Per activity row its /nccl row, -1 for none; empty when the store has no /nccl rows.
std::vector<int32_t> nccl_row_of(const Store& s) {
  std::vector<int32_t> of;
  if (!s.nccl.size()) return of;
  of.assign(s.activities.size(), -1);
  for (size_t i = 0; i < s.nccl.size(); ++i)
    if (s.nccl.activity[i] < s.activities.size()) of[s.nccl.activity[i]] = static_cast<int32_t>(i);
  return of;
}

// Which identities every communication kernel has: NCCL metadata, an operation id, a sequence
// number, the collector's communicator hash.
struct Identity {
  bool meta = true, ids = true, seq = true, comm = true;
};
template <class RowOf>
Identity identity_of(const NcclInfo& nc, const std::vector<uint32_t>& comm_rows,
                     const RowOf& nccl_row) {
  Identity id;
  id.ids = !comm_rows.empty() && nc.op_id.size() == nc.size();
  for (uint32_t i : comm_rows) {
    const int32_t n = nccl_row(i);
    id.meta = id.meta && n >= 0;
    id.ids = id.ids && n >= 0 && nc.op_id[n] != 0;
    id.seq = id.seq && n >= 0 && nc.seq[n] >= 0;
    // The collector tags kernels with the communicator's hash (its pg name is "comm:<hash>").
    id.comm =
        id.comm && n >= 0 && n < static_cast<int32_t>(nc.comm_hash.size()) && nc.comm_hash[n] != 0;
  }
  return id;
}

// The instances in order of discovery, found by their key (a text, or MetaKey).
template <class Key, class Hash = std::hash<Key>>
struct InstanceTable {
  std::vector<Instance> list;
  std::unordered_map<Key, uint32_t, Hash> index;
  // The instance of `key`; a new one is first given to `init`.
  template <class Init>
  Instance& at(Key&& key, Init&& init) {
    auto [it, fresh] = index.try_emplace(std::move(key), static_cast<uint32_t>(list.size()));
    if (fresh) init(list.emplace_back());
    return list[it->second];
  }
};

// A rank's first kernel of the instance arrives; a second one of the same rank is not an arrival.
// The ranks are walked in ascending order, each one's kernels together, so a rank already there
// is the last arrival (a search of all of them was quadratic in the ranks: 256-rank store).
void add_arrival(Instance& in, int32_t r, uint32_t i, int32_t n, const NcclInfo& nc) {
  if (in.arrivals.empty() || in.arrivals.back().rank != r) in.arrivals.push_back({r, i, n});
  if (n >= 0) in.msg_bytes = std::max(in.msg_bytes, nc.msg_bytes[n]);
}

// An instance's identity from NCCL's metadata, as ids: (operation id, collective op key) or
// (process group, collective, Seq or occurrence); a send's or a receive's rank (each side is an
// instance of its own, paired later). The texts' ids are canonical (one per distinct text), so
// two keys are equal exactly when the texts they name are.
struct MetaKey {
  uint64_t a = 0, b = 0;
  int64_t c = -1;
  int32_t side_rank = -1;
  bool operator==(const MetaKey& o) const {
    return a == o.a && b == o.b && c == o.c && side_rank == o.side_rank;
  }
};
struct MetaKeyHash {
  size_t operator()(const MetaKey& k) const {
    uint64_t h = k.a * 0x9E3779B97F4A7C15ULL;
    h = (h ^ (h >> 29) ^ k.b) * 0xBF58476D1CE4E5B9ULL;
    h = (h ^ (h >> 31) ^ static_cast<uint64_t>(k.c)) * 0x94D049BB133111EBULL;
    return static_cast<size_t>(h ^ (h >> 32) ^ static_cast<uint32_t>(k.side_rank));
  }
};

// One id per distinct text of the store's table (a table read from a file may hold a text twice).
class CanonicalIds {
 public:
  explicit CanonicalIds(const StringTable& t) : t_(t) {}
  uint32_t operator()(uint32_t id) {
    if (id >= of_.size()) of_.resize(id + 1, UINT32_MAX);
    if (of_[id] == UINT32_MAX) of_[id] = first_.try_emplace(t_.at(id), id).first->second;
    return of_[id];
  }

 private:
  const StringTable& t_;
  std::vector<uint32_t> of_;
  std::unordered_map<std::string_view, uint32_t> first_;
};

// Every communication kernel has NCCL metadata: instances by MetaKey. This was a text key per
// kernel (pg, collective and Seq formatted and hashed): 0.6 s of the 256-rank benchmark store's
// clock inference (docs/benchmarks.md); the same instances in the same order.
std::vector<Instance> instances_by_metadata(const Store& s,
                                            const std::map<int32_t, std::vector<uint32_t>>& comm,
                                            const std::vector<int32_t>& nccl_of, bool all_ids,
                                            bool all_seq) {
  const NcclInfo& nc = s.nccl;
  CanonicalIds text(s.strings);
  struct Op {
    uint32_t key = 0;   // collective_op_key's text, canonical
    bool side = false;  // a send or a receive
  };
  std::unordered_map<uint32_t, Op> op_of;  // per collective name id
  std::unordered_map<std::string, uint32_t> op_keys;
  std::unordered_map<uint32_t, std::vector<int32_t>> ranks_of;  // per pg_ranks_id, parsed
  InstanceTable<MetaKey, MetaKeyHash> t;
  for (const auto& [rank, v] : comm) {
    const int32_t r = rank;
    std::unordered_map<uint64_t, int64_t> occurrence;  // per (process group, collective)
    for (uint32_t i : v) {
      const int32_t n = nccl_of[i];
      const uint32_t coll = nc.collective_id[n];
      auto [op, fresh] = op_of.try_emplace(coll);
      if (fresh) {
        const std::string& name = s.strings.at(coll);
        const std::string k = collective_op_key(name);
        op->second = {op_keys.try_emplace(k, static_cast<uint32_t>(op_keys.size())).first->second,
                      p2p_side(name) >= 0};
      }
      MetaKey key;
      if (all_ids) {
        key.a = nc.op_id[n], key.b = op->second.key;
      } else {
        key.a = text(nc.pg_name_id[n]), key.b = text(coll);
        key.c = all_seq ? nc.seq[n] : occurrence[key.a << 32 | key.b]++;
      }
      if (op->second.side) key.side_rank = r;
      Instance& in = t.at(std::move(key), [&](Instance& x) {
        x.op = s.strings.at(coll);
        x.pg = nc.pg_name_id[n];
        auto [ranks, parse] = ranks_of.try_emplace(nc.pg_ranks_id[n]);
        if (parse) ranks->second = parse_ranks(s.strings.at(nc.pg_ranks_id[n]));
        x.expected = ranks->second;
      });
      add_arrival(in, r, i, n, nc);
    }
  }
  return std::move(t.list);
}

// No metadata on some kernel: instances by the kernel's simplified name (and stream), the k-th
// occurrence on each rank.
std::vector<Instance> instances_by_name(const Store& s,
                                        const std::map<int32_t, std::vector<uint32_t>>& comm,
                                        const std::vector<int32_t>& nccl_of,
                                        const NameGroups& groups, bool with_stream) {
  const Activities& a = s.activities;
  auto group_name = [&](uint32_t i) -> const std::string& {
    int32_t g = groups.group_of[a.name_id[i]];
    return g >= 0 ? groups.names[g] : s.strings.at(a.name_id[i]);
  };
  InstanceTable<std::string> t;
  for (const auto& [rank, v] : comm) {
    std::unordered_map<std::string, int64_t> occurrence;
    for (uint32_t i : v) {
      const int32_t n = nccl_of.empty() ? -1 : nccl_of[i];
      std::string base = group_name(i) + (with_stream ? "\x1f" + std::to_string(a.stream[i]) : "");
      std::string key = base + "\x1f" + std::to_string(occurrence[base]++);
      Instance& in =
          t.at(std::move(key), [&](Instance& x) { x.op = op_from_kernel(group_name(i)); });
      add_arrival(in, rank, i, n, s.nccl);
    }
  }
  return std::move(t.list);
}

}  // namespace

std::string matched_by(const std::string& method) {
  if (method == "none") return "none";
  if (method == "nccl operation id") return "operation id";
  if (method.find("seq") != std::string::npos || method.find("Seq") != std::string::npos)
    return "(pg, seq)";
  return "order";
}

std::string collective_op_key(const std::string& op) {
  std::string o;
  for (char c : op)
    if (std::isalpha(static_cast<unsigned char>(c))) o += static_cast<char>(std::tolower(c));
  return o;
}

CollectiveMatch match_collectives(const Store& s, const std::vector<uint32_t>& rows) {
  const auto& a = s.activities;
  const NcclInfo& nc = s.nccl;
  CollectiveMatch out;

  const std::vector<int32_t> nccl_of = nccl_row_of(s);
  auto nccl_row = [&](uint32_t r) { return nccl_of.empty() ? -1 : nccl_of[r]; };

  std::vector<uint32_t> comm_rows;
  std::map<int32_t, std::vector<uint32_t>> comm = comm_kernels_by_rank(s, rows, &out, &comm_rows);
  out.comm_kernels = comm_rows.size();

  // Method: the best identity every communication kernel has.
  const Identity id = identity_of(nc, comm_rows, nccl_row);
  const bool all_ids = id.ids, all_seq = id.seq, all_meta = id.meta;
  out.method = comm_rows.empty()    ? "none"
               : all_ids            ? "nccl operation id"
               : all_seq && id.comm ? "collector (communicator, collective, seq)"
               : all_seq            ? "nccl (process group, collective, Seq)"
               : all_meta           ? "nccl (process group, collective, occurrence)"
                                    : "kernel (name, stream, occurrence)";

  // Kernel names are matched simplified (never the --verbose full names), so that an instance's
  // identity does not depend on display options.
  NameGroups groups;
  if (!all_meta) groups = group_names(s, comm_rows, /*verbose=*/false, /*kernels_only=*/true);
  // The ranks seen using each process group: who an instance expects when the group's rank list
  // was not recorded (the collector's communicators, older PyTorch). Without it, every rank would
  // be expected, and sub-communicators (tensor-parallel groups inside a pipeline) never match.
  std::unordered_map<uint32_t, std::vector<int32_t>> members;
  if (all_meta)
    for (const auto& [rank, v] : comm)
      for (uint32_t i : v) {
        auto& m = members[nc.pg_name_id[nccl_row(i)]];
        if (m.empty() || m.back() != rank) m.push_back(rank);  // comm is in rank order
      }
  auto build = [&](bool with_stream) {
    std::vector<Instance> inst = all_meta
                                     ? instances_by_metadata(s, comm, nccl_of, all_ids, all_seq)
                                     : instances_by_name(s, comm, nccl_of, groups, with_stream);
    // Expected ranks: the process group's recorded ranks present in the rows; else the ranks seen
    // using the group; else (no metadata) every rank.
    for (Instance& in : inst) {
      std::vector<int32_t> exp;
      for (int32_t r : in.expected)
        if (std::binary_search(out.ranks.begin(), out.ranks.end(), r)) exp.push_back(r);
      in.expected = !exp.empty() ? exp : all_meta ? members[in.pg] : out.ranks;
    }
    return inst;
  };
  auto complete = [](const Instance& in) {
    return in.arrivals.size() == in.expected.size() && in.expected.size() >= 2;
  };
  auto count_complete = [&](const std::vector<Instance>& v) {
    return static_cast<size_t>(std::count_if(v.begin(), v.end(), complete));
  };
  std::vector<Instance> inst = build(true);
  size_t matched_n = count_complete(inst);
  if (!all_meta && matched_n * 2 < inst.size()) {
    // Streams are numbered per process; ranks may use different ones for NCCL. Retry without.
    std::vector<Instance> alt = build(false);
    if (count_complete(alt) > matched_n) {
      inst = std::move(alt);
      out.method = "kernel (name, occurrence)";
    }
  }
  std::vector<std::pair<int64_t, Collective>> found;  // (first arrival, instance)
  std::vector<const Instance*> incomplete;            // in key order
  for (Instance& in : inst) {
    std::sort(
        in.arrivals.begin(), in.arrivals.end(),
        [](const CollectiveArrival& x, const CollectiveArrival& y) { return x.rank < y.rank; });
    if (complete(in)) {
      int64_t first = INT64_MAX;
      for (const auto& x : in.arrivals) first = std::min(first, a.start_ns[x.row]);
      found.push_back({first, Collective{0, std::move(in.op), std::move(in.arrivals),
                                         std::move(in.expected), in.msg_bytes}});
    } else {
      incomplete.push_back(&in);
    }
  }
  // Ids in time order of the first arrival; ties keep the discovery order (deterministic).
  std::stable_sort(found.begin(), found.end(),
                   [](const auto& x, const auto& y) { return x.first < y.first; });
  out.matched.reserve(found.size());
  for (auto& [t, c] : found) {
    c.id = static_cast<int64_t>(out.matched.size());
    out.matched.push_back(std::move(c));
  }
  pair_point_to_point(s, rows, &out);
  list_unmatched(s, incomplete, &out);
  return out;
}

std::vector<int64_t> collective_of_row(const Store& s, const CollectiveMatch& m) {
  std::vector<int64_t> v(s.activities.size(), -1);
  for (const auto& c : m.matched)
    for (const auto& x : c.arrivals) v[x.row] = c.id;
  return v;
}

}  // namespace kernalyse
