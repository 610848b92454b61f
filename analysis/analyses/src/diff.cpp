// Trace diff (docs/analyses.md, "Trace diff"): kernels matched by full name; names found on one
// side only are grouped by the range that launched them into "replaced" groups; per step CPU time
// and GPU span; per rank the overlap/breakdown unions, the idle split and the straggler ledger,
// taken from those analyses' typed results. Each side is analysed a slice of ranks at a time
// (RankSlices for a store), so that memory holds one slice, not both whole runs (issue 17).
#include "kernalyse/diff.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_set>

#include "kernalyse/error.h"
#include "kernalyse/parallel.h"
#include "kernalyse/store_archive.h"
#include "kernalyse/timeline.h"

namespace kernalyse {

namespace {

// Per ProfilerStep#N: the longest rank's CPU step, the longest rank's GPU span, the kernels.
std::map<int32_t, StepSide> step_sides(const Store& s, const Filter& f,
                                       const std::vector<uint32_t>& rows) {
  std::map<int32_t, StepSide> out;
  const Annotations& an = s.annotations;
  std::map<int32_t, std::set<int32_t>> ranks;
  for (size_t i = 0; i < an.size(); ++i) {
    if (an.kind[i] != static_cast<uint8_t>(AnnotationKind::Step) || an.step[i] == kNoStep) continue;
    if ((f.rank && an.rank[i] != *f.rank) || (f.step && an.step[i] != *f.step)) continue;
    StepSide& st = out[an.step[i]];
    st.cpu_ns = std::max(st.cpu_ns, an.end_ns[i] - an.start_ns[i]);
    ranks[an.step[i]].insert(an.rank[i]);
  }
  // GPU span per (rank, step): first start and last end of the step's GPU work.
  std::map<std::pair<int32_t, int32_t>, std::pair<int64_t, int64_t>> span;
  const Activities& a = s.activities;
  const auto kernel = static_cast<uint8_t>(Kind::Kernel);
  std::pair<int32_t, int32_t> key{INT32_MIN, INT32_MIN};
  std::pair<int64_t, int64_t>* cur = nullptr;
  StepSide* cur_step = nullptr;
  for (uint32_t i : rows) {
    if (a.step[i] == kNoStep || !is_gpu_work(static_cast<Kind>(a.kind[i]))) continue;
    if (!cur || key.first != a.rank[i] || key.second != a.step[i]) {
      // Rows come in (rank, stream) runs, so the maps are consulted once per run.
      key = {a.rank[i], a.step[i]};
      cur = &span.try_emplace(key, INT64_MAX, INT64_MIN).first->second;
      cur_step = &out[a.step[i]];
      ranks[a.step[i]].insert(a.rank[i]);
    }
    cur->first = std::min(cur->first, a.start_ns[i]);
    cur->second = std::max(cur->second, a.end_ns[i]);
    cur_step->kernels += a.kind[i] == kernel;
  }
  for (const auto& [k, se] : span) {
    StepSide& st = out[k.second];
    st.gpu_span_ns = std::max(st.gpu_span_ns, se.second - se.first);
  }
  for (auto& [step, st] : out) st.ranks = static_cast<int32_t>(ranks[step].size());
  return out;
}

// What launched one kernel: the innermost NVTX / user range on the launch's CPU thread that
// contains the launch (ranges on one thread nest; the latest-starting one) and the ATen op that
// launched it (/ops, traces recorded with shapes). Name ids; 0 (the empty string) when none.
struct Launcher {
  uint32_t range = 0, op = 0;
  bool operator<(const Launcher& o) const { return std::tie(range, op) < std::tie(o.range, o.op); }
};
struct LaunchedKey {
  std::string range, op, kernel;
  bool operator<(const LaunchedKey& o) const {
    return std::tie(range, op, kernel) < std::tie(o.range, o.op, o.kernel);
  }
};

// For the kernels of the given names: count and time per (range, op, kernel name). Joined
// through the launch's correlation id, as --ranges and the roofline do; the range is "" when the
// launches' threads were not read.
std::map<LaunchedKey, KernelSide> by_launcher(const Store& s, const Filter& f,
                                              const std::set<std::string>& names) {
  std::map<LaunchedKey, KernelSide> out;
  const Activities& a = s.activities;
  std::vector<uint8_t> wanted(s.strings.size(), 0);
  bool any = false;
  for (size_t id = 0; id < s.strings.size(); ++id)
    if (names.count(s.strings.at(static_cast<uint32_t>(id)))) wanted[id] = 1, any = true;
  if (!any) return out;
  std::vector<uint32_t> rows;
  const auto kernel = static_cast<uint8_t>(Kind::Kernel);
  for (uint32_t i : select_activities(s, f))
    if (a.kind[i] == kernel && wanted[a.name_id[i]]) rows.push_back(i);
  if (rows.empty()) return out;  // the names are not kernels here (or filtered out)
  // The launch of kernel row i (its thread and start) through the one (rank, correlation) index;
  // tid -1 when unknown.
  const LaunchCalls& l = s.launches;
  const bool joinable = l.tid.size() == l.size() && a.correlation.size() == a.size();
  const detail::LaunchRows launch_rows(l);
  const detail::RangeFinder ranges(s.annotations);
  auto range_of = [&](uint32_t i) -> uint32_t {
    if (!joinable) return 0;
    const int64_t h = launch_rows.find(a.rank[i], a.correlation[i]);
    if (h < 0) return 0;
    const auto row = static_cast<size_t>(h);
    return ranges.find(a.rank[i], l.tid[row], l.start_ns[row]);
  };
  // The op of each (rank, correlation), for the few correlations asked about: sorted, searched.
  std::vector<std::tuple<int32_t, int64_t, uint32_t>> op_of;
  if (s.ops.size() != 0 && a.correlation.size() == a.size()) {
    std::vector<std::pair<int32_t, int64_t>> asked;
    for (uint32_t i : rows) asked.emplace_back(a.rank[i], a.correlation[i]);
    std::sort(asked.begin(), asked.end());
    const Ops& o = s.ops;
    for (size_t k = 0; k < o.size(); ++k)
      if (std::binary_search(asked.begin(), asked.end(),
                             std::make_pair(o.rank[k], o.correlation[k])))
        op_of.emplace_back(o.rank[k], o.correlation[k], o.name_id[k]);
    std::sort(op_of.begin(), op_of.end());
  }
  auto op = [&](uint32_t i) -> uint32_t {
    auto it = std::lower_bound(op_of.begin(), op_of.end(),
                               std::make_tuple(a.rank[i], a.correlation[i], uint32_t{0}));
    return it != op_of.end() && std::get<0>(*it) == a.rank[i] &&
                   std::get<1>(*it) == a.correlation[i]
               ? std::get<2>(*it)
               : 0;
  };
  std::map<std::pair<Launcher, uint32_t>, KernelSide> by_ids;  // (launcher, kernel) name ids
  for (uint32_t i : rows) {
    KernelSide& k = by_ids[{Launcher{range_of(i), op_of.empty() ? 0 : op(i)}, a.name_id[i]}];
    ++k.count;
    k.total_ns += std::max<int64_t>(0, a.end_ns[i] - a.start_ns[i]);
  }
  for (const auto& [key, k] : by_ids) {
    KernelSide& o =
        out[{s.strings.at(key.first.range), s.strings.at(key.first.op), s.strings.at(key.second)}];
    o.count += k.count, o.total_ns += k.total_ns;
  }
  return out;
}

// Moves what the replaced groups explain out of the only-lists.
void take(std::vector<KernelOnly>& only, const std::string& name, const KernelSide& k) {
  for (auto it = only.begin(); it != only.end(); ++it)
    if (it->name == name) {
      it->side.count -= k.count;
      it->side.total_ns -= k.total_ns;
      if (it->side.count <= 0) only.erase(it);
      return;
    }
}

// Forms the replaced groups of one matching rule: `key` names the launcher of an entry ("" if it
// has none under this rule); entries already in a group (`used`) are left out. A group needs
// one-sided kernels on both sides.
template <class Key>
void form_groups(const std::map<LaunchedKey, KernelSide>& rb,
                 const std::map<LaunchedKey, KernelSide>& rt, Key key, const char* by,
                 std::set<LaunchedKey>* used_b, std::set<LaunchedKey>* used_t, TraceDiff* d) {
  std::map<std::string, ReplacedGroup> groups;
  std::map<std::string, std::vector<LaunchedKey>> members_b, members_t;
  for (const auto& [k, side] : rb)
    if (!used_b->count(k) && !key(k).empty()) {
      groups[key(k)].before.push_back({k.kernel, side});
      members_b[key(k)].push_back(k);
    }
  for (const auto& [k, side] : rt)
    if (!used_t->count(k) && !key(k).empty()) {
      groups[key(k)].after.push_back({k.kernel, side});
      members_t[key(k)].push_back(k);
    }
  for (auto& [name, g] : groups) {
    if (g.before.empty() || g.after.empty()) continue;
    g.range = name;
    g.by = by;
    // One entry per kernel name (several ranges may share an op and the reverse).
    auto fold = [](std::vector<KernelOnly>& v) {
      std::map<std::string, KernelSide> m;
      for (const auto& k : v)
        m[k.name].count += k.side.count, m[k.name].total_ns += k.side.total_ns;
      v.clear();
      for (const auto& [n, side] : m) v.push_back({n, side});
    };
    fold(g.before), fold(g.after);
    for (const auto& k : g.before) {
      g.base.count += k.side.count, g.base.total_ns += k.side.total_ns;
      take(d->only_base, k.name, k.side);
    }
    for (const auto& k : g.after) {
      g.test.count += k.side.count, g.test.total_ns += k.side.total_ns;
      take(d->only_test, k.name, k.side);
    }
    used_b->insert(members_b[name].begin(), members_b[name].end());
    used_t->insert(members_t[name].begin(), members_t[name].end());
    d->replaced.push_back(std::move(g));
  }
}

// The rows the ledger reads when it charges no causes: every communication kernel of the
// selection and each rank's first GPU item in it (the matcher counts a rank with GPU work as
// present), with their /nccl rows; appended to `out`, whose strings are the slice's.
void add_ledger_rows(const Store& s, const std::vector<uint32_t>& rows, Store* out) {
  const Activities& a = s.activities;
  std::vector<uint32_t> keep;
  std::set<int32_t> present;
  int32_t last = INT32_MIN;  // rows come by rank: the set is consulted once per rank
  for (uint32_t i : rows) {
    if (!is_gpu_work(static_cast<Kind>(a.kind[i]))) continue;
    const bool comm = a.kind[i] == static_cast<uint8_t>(Kind::Kernel) &&
                      a.category[i] == static_cast<uint8_t>(Category::Communication);
    const bool first = a.rank[i] != last && present.insert(a.rank[i]).second;
    last = a.rank[i];
    if (comm || first) keep.push_back(i);
  }
  const size_t base = out->activities.size();
  for_each_column_pair(out->activities, a, [&](const auto&, auto& dst, const auto& src) {
    for (uint32_t i : keep) dst.push_back(src[i]);
  });
  std::vector<std::pair<uint32_t, size_t>> nccl;  // (kept row, /nccl row)
  for (size_t k = 0; k < s.nccl.size(); ++k) {
    auto it = std::lower_bound(keep.begin(), keep.end(), s.nccl.activity[k]);
    if (it != keep.end() && *it == s.nccl.activity[k])
      nccl.emplace_back(static_cast<uint32_t>(base + (it - keep.begin())), k);
  }
  for_each_column_pair(out->nccl, s.nccl, [&](const auto&, auto& dst, const auto& src) {
    for (auto [row, k] : nccl) dst.push_back(src[k]);
  });
  for (size_t k = out->nccl.size() - nccl.size(), j = 0; k < out->nccl.size(); ++k, ++j)
    out->nccl.activity[k] = nccl[j].first;
}

// One side's figures, added up slice by slice (each slice holds whole ranks).
struct Side {
  std::map<std::string, KernelSide> kernels;  // by full name
  std::map<int32_t, StepSide> steps;
  std::vector<RankUnion> unions;
  std::vector<StreamIdle> idle;
  StragglerResult ledger;
  std::map<LaunchedKey, KernelSide> launched;  // by_launcher of the names asked for
};

// Sums of slices' (or processes') counts and times, by key.
template <class K>
void add_sides(const std::map<K, KernelSide>& from, std::map<K, KernelSide>* to) {
  for (const auto& [k, v] : from) {
    KernelSide& o = (*to)[k];
    o.count += v.count, o.total_ns += v.total_ns;
  }
}

// Steps of disjoint ranks: the longest rank's times, the kernels and ranks summed.
void add_steps(const std::map<int32_t, StepSide>& from, std::map<int32_t, StepSide>* to) {
  for (const auto& [n, st] : from) {
    StepSide& o = (*to)[n];
    o.cpu_ns = std::max(o.cpu_ns, st.cpu_ns);
    o.gpu_span_ns = std::max(o.gpu_span_ns, st.gpu_span_ns);
    o.kernels += st.kernels, o.ranks += st.ranks;
  }
}

// The launchers' figures in an archive (their keys are three strings).
void put_launched(Archive& ar, const std::map<LaunchedKey, KernelSide>& m) {
  ar.put<uint64_t>(m.size());
  for (const auto& [k, v] : m) ar.put(k.range), ar.put(k.op), ar.put(k.kernel), ar.put(v);
}
std::map<LaunchedKey, KernelSide> get_launched(Archive& ar) {
  std::map<LaunchedKey, KernelSide> m;
  for (auto n = ar.get<uint64_t>(); n > 0; --n) {
    LaunchedKey k;
    ar.get(k.range), ar.get(k.op), ar.get(k.kernel);
    m[k] = ar.get<KernelSide>();
  }
  return m;
}

// Adds one slice: the parts only read it, so they run on the shared pool (parallel.h). Errors
// name the side: "BASE run.h5: no ProfilerStep#9 in ranks 0-7".
void add_slice(const Store& s, const DiffOptions& opt, const std::string& label,
               const std::set<std::string>& launcher_names, Side* side, Store* ledger_rows) {
  CrossRankOptions xo;
  xo.filter = opt.filter;
  xo.kernel_wait_ns = opt.kernel_wait_ns;
  std::vector<KernelStat> kernels;
  std::map<int32_t, StepSide> steps;
  std::vector<RankUnion> unions;
  std::vector<StreamIdle> idle;
  std::map<LaunchedKey, KernelSide> launched;
  const std::vector<uint32_t> rows = select_activities(s, opt.filter);
  std::vector<std::function<void()>> parts = {
      [&] { kernels = kernel_stats(s, opt.filter, /*verbose=*/true); },
      [&] { steps = step_sides(s, opt.filter, rows); },
      [&] { launched = by_launcher(s, opt.filter, launcher_names); }};
  if (opt.cross_rank) {
    parts.push_back([&] { unions = rank_unions(s, xo, /*per_step=*/false); });
    parts.push_back([&] { idle = stream_idle(s, xo); });
    parts.push_back([&] { add_ledger_rows(s, rows, ledger_rows); });
  }
  try {
    parallel_for(parts.size(), [&](size_t i) { parts[i](); });  // rethrows the first failure
  } catch (const Error& e) {
    throw Error(label + ": " + e.what());
  }
  for (const KernelStat& k : kernels) {
    KernelSide& o = side->kernels[k.name];
    o.count += k.count, o.total_ns += k.total_ns;
  }
  add_steps(steps, &side->steps);
  side->unions.insert(side->unions.end(), unions.begin(), unions.end());
  side->idle.insert(side->idle.end(), idle.begin(), idle.end());
  add_sides(launched, &side->launched);
}

// Under mpirun: every process's part (put) read on every process in process order, which is rank
// order (get, once per process), and the first process's error, if any, thrown on every process:
// nobody throws before the exchange, so no process is left waiting in it.
void exchange(const Spread& spread, std::string* error, const std::function<void(Archive&)>& put,
              const std::function<void(Archive&)>& get) {
  Archive mine;
  mine.put(*error);
  put(mine);
  Archive all(spread.all_gather(mine.bytes()));
  error->clear();
  for (int p = 0; p < spread.processes; ++p) {
    const auto e = all.get<std::string>();
    if (error->empty()) *error = e;
    get(all);
  }
  if (!error->empty()) throw Error(*error);
}

// One side's figures of every process, merged (the ledger's rows gathered too).
void share(const Spread& spread, Side* side, Store* ledger_rows, bool* any, std::string* error) {
  Side merged;
  bool any_process = false;
  exchange(
      spread, error,
      [&](Archive& ar) {
        ar.put(static_cast<uint8_t>(*any));
        ar.put(side->kernels);
        ar.put(side->steps);
        ar.put(side->unions);
        ar.put(side->idle);
        put_launched(ar, side->launched);
      },
      [&](Archive& ar) {
        any_process = ar.get<uint8_t>() || any_process;
        add_sides(ar.get<std::map<std::string, KernelSide>>(), &merged.kernels);
        add_steps(ar.get<std::map<int32_t, StepSide>>(), &merged.steps);
        const auto unions = ar.get<std::vector<RankUnion>>();
        merged.unions.insert(merged.unions.end(), unions.begin(), unions.end());
        const auto idle = ar.get<std::vector<StreamIdle>>();
        merged.idle.insert(merged.idle.end(), idle.begin(), idle.end());
        add_sides(get_launched(ar), &merged.launched);
      });
  all_gather_tables(*ledger_rows, spread);
  *side = std::move(merged);
  *any = any_process;
}

// One pass over a side's slices; `launcher_names`: the names whose launchers to gather.
Side analyse(const DiffInput& in, const DiffOptions& opt, const std::string& label,
             const std::set<std::string>& launcher_names) {
  Side side;
  Store ledger_rows;
  ledger_rows.attrs = in.header->attrs;
  ledger_rows.strings = in.header->strings;
  ledger_rows.ranks = in.header->ranks;
  bool any = false;
  std::string error;  // under mpirun: shared before anyone throws (no process left waiting)
  try {
    in.each_slice([&](const Store& s) {
      if (!filter_applies(s, opt.filter)) return;  // another rank, or no such step in this one
      any = true;
      add_slice(s, opt, label, launcher_names, &side, &ledger_rows);
    });
  } catch (const Error& e) {
    if (!in.spread) throw;
    error = e.what();
  }
  if (in.spread) share(*in.spread, &side, &ledger_rows, &any, &error);
  if (!any) {  // the whole run's message: "no ProfilerStep#9 in ranks 0-7"
    try {
      select_activities(*in.header, opt.filter);
    } catch (const Error& e) {
      throw Error(label + ": " + e.what());
    }
  }
  if (opt.cross_rank) {
    CrossRankOptions xo;  // no filter: the rows were selected when they were gathered
    xo.causes = false;    // the ledger: who was last and the waits; not why
    try {
      side.ledger = straggler_ledger(ledger_rows, xo);
    } catch (const Error& e) {
      throw Error(label + ": " + e.what());
    }
  }
  return side;
}

// The gathering pass again, for names the first one did not ask about.
// Collective under mpirun: every process calls it with the same names (the merged sides').
void add_launchers(const DiffInput& in, const DiffOptions& opt, const std::string& label,
                   const std::set<std::string>& names, std::map<LaunchedKey, KernelSide>* out) {
  if (names.empty()) return;
  std::map<LaunchedKey, KernelSide> mine;
  std::string error;
  try {
    in.each_slice([&](const Store& s) {
      if (!filter_applies(s, opt.filter)) return;
      try {
        add_sides(by_launcher(s, opt.filter, names), &mine);
      } catch (const Error& e) {
        throw Error(label + ": " + e.what());
      }
    });
  } catch (const Error& e) {
    if (!in.spread) throw;
    error = e.what();
  }
  if (in.spread) {
    std::map<LaunchedKey, KernelSide> all;
    exchange(
        *in.spread, &error, [&](Archive& ar) { put_launched(ar, mine); },
        [&](Archive& ar) { add_sides(get_launched(ar), &all); });
    mine = std::move(all);
  }
  add_sides(mine, out);
}

// Strings of `x` that `y` does not have: kernel names that cannot be in both runs, so their
// launchers are gathered during the first pass (a second pass only for what filters hide).
std::set<std::string> only_in(const Store& x, const Store& y) {
  std::unordered_set<std::string_view> in_y(y.strings.all().begin(), y.strings.all().end());
  std::set<std::string> out;
  for (const std::string& n : x.strings.all())
    if (!in_y.count(n)) out.insert(n);
  return out;
}

RankSide rank_side(int32_t rank, const Side& s) {
  RankSide r;
  for (const RankUnion& u : s.unions)
    if (u.rank == rank) r.unions = u.u;
  for (const StreamIdle& d : s.idle)
    if (d.rank == rank)
      r.host_wait_ns += d.host_ns, r.kernel_wait_ns += d.kernel_ns, r.other_idle_ns += d.other_ns;
  for (const StragglerRank& l : s.ledger.ranks)
    if (l.rank == rank)
      r.times_last = l.times_last, r.inflicted_ns = l.inflicted_ns, r.suffered_ns = l.suffered_ns;
  return r;
}

bool same(const UnionStats& x, const UnionStats& y) {
  return x.span_ns == y.span_ns && x.busy_ns == y.busy_ns && x.compute_ns == y.compute_ns &&
         x.comm_ns == y.comm_ns && x.overlap_ns == y.overlap_ns &&
         x.comm_excl_ns == y.comm_excl_ns && x.memory_excl_ns == y.memory_excl_ns &&
         x.other_excl_ns == y.other_excl_ns && x.count == y.count;
}
bool same(const RankSide& x, const RankSide& y) {
  return same(x.unions, y.unions) && x.host_wait_ns == y.host_wait_ns &&
         x.kernel_wait_ns == y.kernel_wait_ns && x.other_idle_ns == y.other_idle_ns &&
         x.times_last == y.times_last && x.inflicted_ns == y.inflicted_ns &&
         x.suffered_ns == y.suffered_ns;
}
bool same(const StepSide& x, const StepSide& y) {
  return x.cpu_ns == y.cpu_ns && x.gpu_span_ns == y.gpu_span_ns && x.kernels == y.kernels &&
         x.ranks == y.ranks;
}
template <class T>
bool same_opt(const std::optional<T>& x, const std::optional<T>& y) {
  return x.has_value() == y.has_value() && (!x || same(*x, *y));
}

}  // namespace

bool TraceDiff::identical() const {
  if (!only_base.empty() || !only_test.empty() || !replaced.empty()) return false;
  for (const auto& k : kernels)
    if (k.changed()) return false;
  for (const auto& s : steps)
    if (!same_opt(s.base, s.test)) return false;
  for (const auto& r : ranks)
    if (!same_opt(r.base, r.test)) return false;
  return base_straggler == test_straggler && base_collectives == test_collectives;
}

TraceDiff diff_stores(const Store& base, const Store& test, const DiffOptions& opt) {
  return diff_inputs({&base, [&](const auto& f) { f(base); }},
                     {&test, [&](const auto& f) { f(test); }}, opt);
}

TraceDiff diff_inputs(const DiffInput& base, const DiffInput& test, const DiffOptions& opt) {
  const std::set<std::string> cand_b = only_in(*base.header, *test.header);
  const std::set<std::string> cand_t = only_in(*test.header, *base.header);
  const Side b = analyse(base, opt, opt.base_label, cand_b);
  const Side t = analyse(test, opt, opt.test_label, cand_t);
  TraceDiff d;
  d.base_label = opt.base_label, d.test_label = opt.test_label;
  d.cross_rank = opt.cross_rank;
  d.base_emulated = base.header->attrs.emulated;
  d.test_emulated = test.header->attrs.emulated;
  for (const auto& [name, k] : b.kernels) {
    d.base_kernels.count += k.count, d.base_kernels.total_ns += k.total_ns;
    auto it = t.kernels.find(name);
    if (it == t.kernels.end())
      d.only_base.push_back({name, k});
    else
      d.kernels.push_back({name, k, it->second});
  }
  for (const auto& [name, k] : t.kernels) {
    d.test_kernels.count += k.count, d.test_kernels.total_ns += k.total_ns;
    if (!b.kernels.count(name)) d.only_test.push_back({name, k});
  }

  // Replaced groups: one-sided names under the same launching range on both sides; then, for
  // what no range explains, under the same ATen op (another vendor's or a compiler's kernels for
  // the same operator).
  if (!d.only_base.empty() && !d.only_test.empty()) {
    std::map<LaunchedKey, KernelSide> rb = b.launched, rt = t.launched;
    std::set<std::string> nb, nt;  // one-sided names the first pass did not gather
    for (const auto& k : d.only_base)
      if (!cand_b.count(k.name)) nb.insert(k.name);
    for (const auto& k : d.only_test)
      if (!cand_t.count(k.name)) nt.insert(k.name);
    add_launchers(base, opt, opt.base_label, nb, &rb);
    add_launchers(test, opt, opt.test_label, nt, &rt);
    std::set<LaunchedKey> used_b, used_t;
    form_groups(
        rb, rt, [](const LaunchedKey& k) -> const std::string& { return k.range; }, "range",
        &used_b, &used_t, &d);
    form_groups(
        rb, rt, [](const LaunchedKey& k) -> const std::string& { return k.op; }, "op", &used_b,
        &used_t, &d);
  }
  auto delta = [](const KernelDelta& k) { return std::abs(k.test.total_ns - k.base.total_ns); };
  std::stable_sort(d.kernels.begin(), d.kernels.end(),
                   [&](const KernelDelta& x, const KernelDelta& y) {
                     return delta(x) != delta(y) ? delta(x) > delta(y) : x.name < y.name;
                   });
  auto by_total = [](const KernelOnly& x, const KernelOnly& y) {
    return x.side.total_ns != y.side.total_ns ? x.side.total_ns > y.side.total_ns : x.name < y.name;
  };
  std::sort(d.only_base.begin(), d.only_base.end(), by_total);
  std::sort(d.only_test.begin(), d.only_test.end(), by_total);

  std::set<int32_t> steps;
  for (const auto& [n, st] : b.steps) steps.insert(n);
  for (const auto& [n, st] : t.steps) steps.insert(n);
  for (int32_t n : steps) {
    StepDelta sd;
    sd.step = n;
    if (b.steps.count(n)) sd.base = b.steps.at(n);
    if (t.steps.count(n)) sd.test = t.steps.at(n);
    d.steps.push_back(sd);
  }

  if (opt.cross_rank) {
    std::set<int32_t> ranks;
    for (const auto& u : b.unions) ranks.insert(u.rank);
    std::set<int32_t> tranks;
    for (const auto& u : t.unions) tranks.insert(u.rank);
    ranks.insert(tranks.begin(), tranks.end());
    std::set<int32_t> branks;
    for (const auto& u : b.unions) branks.insert(u.rank);
    for (int32_t r : ranks) {
      RankDelta rd;
      rd.rank = r;
      if (branks.count(r)) rd.base = rank_side(r, b);
      if (tranks.count(r)) rd.test = rank_side(r, t);
      d.ranks.push_back(rd);
    }
    d.base_straggler = worst_straggler(b.ledger), d.test_straggler = worst_straggler(t.ledger);
    d.base_collectives = static_cast<int64_t>(b.ledger.collectives.size());
    d.test_collectives = static_cast<int64_t>(t.ledger.collectives.size());
  }
  return d;
}

}  // namespace kernalyse
