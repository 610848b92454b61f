// Overlap, temporal breakdown and idle breakdown, per rank and per step; HTA-compatible view.
#include "kernalyse/crossrank.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <functional>
#include <limits>
#include <map>
#include <regex>
#include <set>

#include "kernalyse/checked.h"
#include "kernalyse/error.h"
#include "kernalyse/parallel.h"
#include "kernalyse/timeline.h"
#include "kernalyse/units.h"

namespace kernalyse {
namespace {

using detail::push_merge;
using Iv = Interval;

Cell pct(int64_t part, int64_t whole) {
  if (whole <= 0) return std::monostate{};  // never NaN: "not applicable" is null
  return 100.0 * static_cast<double>(part) / static_cast<double>(whole);
}

// Length of a union given intervals sorted by start. A group whose end lies before its start
// (only HTA's rounded sub-µs events) contributes negatively, as in HTA's merge. Each term fits
// (times are in the supported range, docs/limits.md); the sum saturates, since records that end
// before they start (a spool or nsys quirk) are not disjoint and may add up past int64.
int64_t length(const std::vector<Iv>& m) {
  int64_t t = 0;
  for (const auto& [s, e] : m) t = sat_add(t, e - s);
  return t;
}

// Kinds that are GPU work. Native mode leaves out syncs (CPU waits drawn on a stream) and host
// events that merely name a stream; the HTA view keeps them, as HTA does.
bool counts_as_gpu(const Store& s, size_t i, Compat c) {
  return c == Compat::Hta || is_gpu_work(static_cast<Kind>(s.activities.kind[i]));
}

// A union of intervals fed in start order, kept as its length and its current (open)
// interval only; closed(s, e) sees each merged interval once, in order. Same merge rule as
// push_merge.
struct RunningUnion {
  int64_t s = 0, e = 0, len = 0;
  bool open = false;
  template <class F>
  void add(int64_t a, int64_t b, F&& closed) {
    if (open && a <= e) {
      e = std::max(e, b);
      return;
    }
    close(closed);
    s = a, e = b, open = true;
  }
  template <class F>
  void close(F&& closed) {
    if (!open) return;
    len = sat_add(len, e - s);
    closed(s, e);
    open = false;
  }
};

// Union statistics of intervals in start order. each(f) calls f(start, end, category) for every
// interval, the same ones in the same order each time; it is called twice. Only the
// communication and memory unions are stored (few intervals); the whole and computation unions,
// which have about one interval per kernel, are streamed: this runs on every rank's million
// kernels without allocating for them. Same sums, in the same order, as intersecting and
// joining the stored unions would give.
template <class Each>
UnionStats union_sorted(const Each& each) {
  UnionStats u;
  std::vector<Iv> comm, mem;
  int64_t lo = 0, hi = 0;
  each([&](int64_t s, int64_t e, Category c) {
    if (u.count++ == 0) lo = s, hi = e;
    hi = std::max(hi, e);
    if (c == Category::Communication) push_merge(comm, s, e);
    if (c == Category::Memory) push_merge(mem, s, e);
  });
  if (u.count == 0) return u;
  RunningUnion all, comp, cc;     // cc: computation ∪ communication
  size_t jo = 0, jc = 0, im = 0;  // cursors into comm (overlap), comm (cc's merge), mem
  int64_t overlap = 0, mem_in_cc = 0;
  // |a ∩ b| with b streamed, two cursors: a's moves past its intervals ending before b's.
  auto meet = [](const std::vector<Iv>& a, size_t& i, int64_t s, int64_t e, int64_t& t) {
    for (; i < a.size(); ++i) {
      const int64_t x = std::max(a[i].start, s), y = std::min(a[i].end, e);
      if (y > x) t = sat_add(t, y - x);
      if (a[i].end >= e) break;
    }
  };
  auto cc_closed = [&](int64_t s, int64_t e) { meet(mem, im, s, e, mem_in_cc); };
  auto comp_closed = [&](int64_t s, int64_t e) {
    meet(comm, jo, s, e, overlap);
    // comp ∪ comm in start order: communication starting before this interval goes first.
    for (; jc < comm.size() && comm[jc].start < s; ++jc)
      cc.add(comm[jc].start, comm[jc].end, cc_closed);
    cc.add(s, e, cc_closed);
  };
  each([&](int64_t s, int64_t e, Category c) {
    all.add(s, e, [](int64_t, int64_t) {});
    if (c == Category::Computation) comp.add(s, e, comp_closed);
  });
  all.close([](int64_t, int64_t) {});
  comp.close(comp_closed);
  for (; jc < comm.size(); ++jc) cc.add(comm[jc].start, comm[jc].end, cc_closed);
  cc.close(cc_closed);
  u.span_ns = hi - lo;
  u.busy_ns = all.len;
  u.compute_ns = comp.len;
  u.comm_ns = length(comm);
  u.overlap_ns = overlap;
  // Differences of (possibly saturated) totals saturate too: never a wrapped sign.
  u.comm_excl_ns = sat_sub(u.comm_ns, u.overlap_ns);
  u.memory_excl_ns = sat_sub(length(mem), mem_in_cc);
  u.other_excl_ns =
      sat_sub(sat_sub(sat_sub(u.busy_ns, u.compute_ns), u.comm_excl_ns), u.memory_excl_ns);
  return u;
}

// Per rank: whole-selection stats (into whole) and, when per_step, per (rank, step) stats (into
// steps), both from one ordered pass over the rank's rows. Ranks run on parallel threads (each
// rank's rows are independent); results come back in rank order.
void add_rank_rows(const Store& s, const std::vector<uint32_t>& rows, const CrossRankOptions& opt,
                   bool whole_too, bool per_step, std::vector<RankUnion>* whole,
                   std::vector<RankUnion>* steps_out) {
  const auto& a = s.activities;
  const detail::RowsByRank ranks(s, rows);
  struct Out {
    std::vector<RankUnion> whole, steps;
  };
  std::vector<Out> out(ranks.size());
  parallel_for(ranks.size(), [&](size_t w) {
    const int32_t rank = ranks.rank(w);
    const std::vector<uint32_t> order = detail::merge_streams_by_start(s, ranks.rows(w));
    // Intervals straight from the columns, rows in start order.
    auto intervals = [&a](const std::vector<uint32_t>& rows_in_order, auto keep) {
      return [&a, &rows_in_order, keep](auto&& f) {
        for (uint32_t i : rows_in_order)
          if (keep(i)) f(a.start_ns[i], a.end_ns[i], static_cast<Category>(a.category[i]));
      };
    };
    auto gpu = [&](uint32_t i) { return counts_as_gpu(s, i, opt.compat); };
    if (whole_too) out[w].whole.push_back({rank, kNoStep, union_sorted(intervals(order, gpu))});
    if (!per_step) return;
    std::map<int32_t, std::vector<uint32_t>> steps;  // each stays in start order
    for (uint32_t i : order)
      if (a.step[i] != kNoStep && gpu(i)) steps[a.step[i]].push_back(i);
    for (auto& [step, v] : steps)
      out[w].steps.push_back(
          {rank, step, union_sorted(intervals(v, [](uint32_t) { return true; }))});
  });
  for (Out& o : out) {
    if (whole) whole->insert(whole->end(), o.whole.begin(), o.whole.end());
    if (steps_out) steps_out->insert(steps_out->end(), o.steps.begin(), o.steps.end());
  }
}

bool has_steps(const Store& s, const std::vector<uint32_t>& rows) {
  for (uint32_t i : rows)
    if (s.activities.step[i] != kNoStep) return true;
  return false;
}

}  // namespace

UnionStats union_stats(std::vector<CatInterval> v) {
  std::sort(v.begin(), v.end(), [](const CatInterval& x, const CatInterval& y) {
    return x.start < y.start || (x.start == y.start && x.end < y.end);
  });
  return union_sorted([&v](auto&& f) {
    for (const auto& x : v) f(x.start, x.end, x.cat);
  });
}

Category hta_category(std::string_view name) {
  // hta/common/types.py, first match wins, as std::regex_match of
  //   communication: (nccl.*)|(hip.*)|(hccl.*)|(.*ncclKernel.*)
  //   memory:        ((hip)?Memcpy.*)|((hip)?Memset.*)|(dma.*)
  //   not compute:   (nccl.*)|(.*Memcpy.*)|(.*Memset.*)|(.*dma.*)|(.*Sync.*)|
  //                  (Stream Wait Event.*)|(cuda.*LaunchKernel.*)|(runFunction.*)|(hip.*)
  // written out: ECMAScript's '.' matches no '\n' or '\r', so a name holding one matches none of
  // them (computation). The regexes cost a quarter of the Python module's HTA calls (perf).
  if (name.find_first_of("\n\r") != std::string_view::npos) return Category::Computation;
  auto starts = [&](std::string_view p) { return name.starts_with(p); };
  auto has = [&](std::string_view p) { return name.find(p) != std::string_view::npos; };
  if (starts("nccl") || starts("hip") || starts("hccl") || has("ncclKernel"))
    return Category::Communication;
  if (starts("Memcpy") || starts("hipMemcpy") || starts("Memset") || starts("hipMemset") ||
      starts("dma"))
    return Category::Memory;
  const bool not_comp = has("Memcpy") || has("Memset") || has("dma") || has("Sync") ||
                        starts("Stream Wait Event") || starts("runFunction") ||
                        (starts("cuda") && name.find("LaunchKernel", 4) != std::string_view::npos);
  return not_comp ? Category::Other : Category::Computation;
}

namespace {
// The double pandas holds for a raw JSON time of x_ns ns: the nearest double to the decimal µs
// text (Kineto writes at most 3 fraction digits), as HTA's JSON parser reads it. Epoch-µs times
// (~1.7e15) have a 0.25 µs step as doubles: HTA rounds those, not the exact times.
bool us_double(int64_t x_ns, double* out) {
  // Up to 2^53 the ns are exact as a double, and IEEE division rounds the exact quotient to
  // nearest: the same double from_chars makes of the exact decimal text, without the text (a
  // tenth of the view's time, issue 27).
  constexpr int64_t kExact = int64_t{1} << 53;
  if (x_ns > -kExact && x_ns < kExact) {
    *out = static_cast<double>(x_ns) / 1000.0;
    return true;
  }
  const std::string t = ns_to_us_text(x_ns);
  return std::from_chars(t.data(), t.data() + t.size(), *out).ec == std::errc();
}
}  // namespace

std::pair<int64_t, int64_t> hta_round(int64_t base_ns, int64_t start_ns, int64_t end_ns) {
  // hta/common/trace_parser.py, round_down_time_stamps: end = ts + dur in doubles, then
  // ts = ceil(ts), end = floor(end); times relative to baseTimeNanoseconds (the raw JSON value).
  // Where that arithmetic would leave the supported range (a damaged base time, extreme times)
  // the times stay unrounded (docs/limits.md).
  int64_t rel = 0, dur = 0;
  double x = 0, d = 0;
  if (!checked_sub(start_ns, base_ns, &rel) || !checked_sub(end_ns, start_ns, &dur) ||
      !us_double(rel, &x) || !us_double(dur, &d))
    return {start_ns, end_ns};
  const double lo = std::ceil(x), hi = std::floor(x + d);
  constexpr double kLimit = static_cast<double>(kMaxAbsTimeNs / 1000);
  int64_t s = 0, e = 0;
  if (!(std::fabs(lo) < kLimit && std::fabs(hi) < kLimit) ||
      !checked_add(base_ns, static_cast<int64_t>(lo) * 1000, &s) ||
      !checked_add(base_ns, static_cast<int64_t>(hi) * 1000, &e))
    return {start_ns, end_ns};
  return {std::clamp(s, -kMaxAbsTimeNs, kMaxAbsTimeNs),
          std::clamp(e, -kMaxAbsTimeNs, kMaxAbsTimeNs)};
}

namespace {
// HTA's ranks: one per file (a file that holds several ranks' events, as a merged Kineto trace
// does, is one rank to HTA, under the file's first rank), and no device: its idle breakdown is per
// stream of the rank, across devices. rank: each rank → the rank HTA shows it under; device: that
// rank → the one device its rows are shown on (the lowest).
struct HtaRanks {
  std::map<int32_t, int32_t> rank, device;
  explicit HtaRanks(const Store& in) {
    std::map<std::string, int32_t> of_file;
    for (const auto& r : in.ranks)
      rank[r.rank] = r.source.empty() ? r.rank : of_file.emplace(r.source, r.rank).first->second;
    const auto& a = in.activities;
    for (size_t i = 0; i < a.size(); ++i) {
      auto [it, fresh] = device.emplace(of(a.rank[i]), a.device[i]);
      if (!fresh) it->second = std::min(it->second, a.device[i]);
    }
  }
  int32_t of(int32_t r) const {
    auto it = rank.find(r);
    return it == rank.end() ? r : it->second;
  }
};
}  // namespace

Store hta_view(const Store& in) {
  Store s;
  s.attrs = in.attrs;
  s.strings = in.strings;
  const HtaRanks hr(in);
  for (const auto& r : in.ranks)
    if (hr.of(r.rank) == r.rank) s.ranks.push_back(r);
  s.annotations = in.annotations;
  for (int32_t& r : s.annotations.rank) r = hr.of(r);
  std::map<int32_t, int64_t> base, last_step;
  for (const auto& r : in.ranks) base[r.rank] = r.base_time_ns;
  auto up = [&](int32_t r, int64_t t) { return hta_round(base[r], t, t).first; };
  // HTA keeps only the work launched before the last ProfilerStep when its symbol table (all
  // ranks' names) holds at least two distinct "ProfilerStep#N" names (trace.py,
  // _filter_irrelevant_gpu_kernels): one step recorded on the CPU and again as a GPU annotation
  // is one name, no filter. HTA finds steps by name, so GPU-side "ProfilerStep#N" annotations
  // (which run later) count as step starts as well. A rank without a step then keeps no
  // launched work at all, as in HTA.
  static const std::regex step_name(R"(ProfilerStep#\d.*)");
  std::map<int32_t, std::vector<int64_t>> steps;
  std::set<uint32_t> step_names;
  const auto& an = in.annotations;
  for (size_t i = 0; i < an.size(); ++i) {
    auto k = static_cast<AnnotationKind>(an.kind[i]);
    if (k != AnnotationKind::Step && k != AnnotationKind::GpuUser) continue;
    if (!std::regex_match(in.strings.at(an.name_id[i]), step_name)) continue;
    step_names.insert(an.name_id[i]);
    steps[hr.of(an.rank[i])].push_back(up(an.rank[i], an.start_ns[i]));
  }
  if (step_names.size() >= 2)
    for (const auto& r : s.ranks) {
      const auto& v = steps[r.rank];
      last_step[r.rank] =
          v.empty() ? std::numeric_limits<int64_t>::min() : *std::max_element(v.begin(), v.end());
    }

  // CPU launches kept: those starting before the last step; GPU work kept through them.
  std::map<int32_t, std::vector<int64_t>> kept_corr;
  const auto& l = in.launches;
  for (size_t i = 0; i < l.size(); ++i) {
    const int32_t r = hr.of(l.rank[i]);
    // The launches' ends are absent when the reader skipped their detail: only starts matter then.
    const int64_t end = l.end_ns.empty() ? l.start_ns[i] : l.end_ns[i];
    const auto [st, en] = hta_round(base[l.rank[i]], l.start_ns[i], end);
    auto ls = last_step.find(r);
    if (ls != last_step.end() && st >= ls->second) continue;
    s.launches.rank.push_back(r);
    s.launches.start_ns.push_back(st);
    s.launches.correlation.push_back(l.correlation[i]);
    if (!l.pid.empty()) {  // detail columns are absent when the reader skipped them
      s.launches.pid.push_back(l.pid[i]);
      s.launches.tid.push_back(l.tid[i]);
      s.launches.end_ns.push_back(en);
      s.launches.name_id.push_back(l.name_id[i]);
      s.launches.step.push_back(l.step[i]);
    }
    if (ls != last_step.end()) kept_corr[r].push_back(l.correlation[i]);
  }
  for (auto& [r, v] : kept_corr) std::sort(v.begin(), v.end());

  std::vector<int8_t> cat_of(in.strings.size(), -1);
  const auto& a = in.activities;
  auto& o = s.activities;
  for (size_t i = 0; i < a.size(); ++i) {
    const int32_t r = hr.of(a.rank[i]);
    const auto [st, en] = hta_round(base[a.rank[i]], a.start_ns[i], a.end_ns[i]);
    auto ls = last_step.find(r);
    if (ls != last_step.end()) {
      // Work with a correlation is kept through its launch; HTA takes a row without one for a
      // CPU event, kept when it starts before the last step.
      const auto& v = kept_corr[r];
      if (a.correlation[i] == kNoCorrelation
              ? st >= ls->second
              : !std::binary_search(v.begin(), v.end(), a.correlation[i]))
        continue;
    }
    uint32_t n = a.name_id[i];
    if (cat_of[n] < 0) cat_of[n] = static_cast<int8_t>(hta_category(in.strings.at(n)));
    o.rank.push_back(r);
    o.device.push_back(hr.device.at(r));
    o.stream.push_back(a.stream[i]);
    o.kind.push_back(a.kind[i]);
    o.category.push_back(static_cast<uint8_t>(cat_of[n]));
    o.start_ns.push_back(st);
    o.end_ns.push_back(en);
    o.name_id.push_back(n);
    o.correlation.push_back(a.correlation[i]);
    o.step.push_back(a.step[i]);
  }
  sort_activities(s);
  return s;
}

namespace {
// One per-rank table over the union statistics, and its per-step twin (native mode, when steps
// exist): overlap and breakdown differ only in their columns.
void union_tables(const RankUnionTables& u, const std::string& key, const std::string& title,
                  const std::string& step_title, const std::vector<std::string>& columns,
                  const std::function<std::vector<Cell>(const UnionStats&)>& values, Report* out) {
  auto table = [&](bool per_step) {
    Table t;
    t.key = per_step ? key + "_steps" : key;
    t.title = per_step ? step_title : title;
    t.columns = {"rank"};
    if (per_step) t.columns.push_back("step");
    t.columns.insert(t.columns.end(), columns.begin(), columns.end());
    for (const RankUnion& r : per_step ? u.per_step : u.whole) {
      std::vector<Cell> row{int64_t{r.rank}};
      if (per_step) row.push_back(int64_t{r.step});
      for (Cell& c : values(r.u)) row.push_back(std::move(c));
      t.rows.push_back(std::move(row));
    }
    out->tables.push_back(std::move(t));
  };
  table(false);
  if (u.steps) table(true);
}
}  // namespace

RankUnionTables rank_union_tables(const Store& s, const CrossRankOptions& opt) {
  RankUnionTables u;
  const std::vector<uint32_t> rows = select_activities(s, opt.filter);
  u.steps = opt.compat == Compat::Native && has_steps(s, rows);
  add_rank_rows(s, rows, opt, true, u.steps, &u.whole, &u.per_step);
  return u;
}

void overlap_analysis(const Store& s, const CrossRankOptions& opt, Report* out) {
  overlap_report(rank_union_tables(s, opt), out);
}

void breakdown_analysis(const Store& s, const CrossRankOptions& opt, Report* out) {
  breakdown_report(rank_union_tables(s, opt), out);
}

void overlap_report(const RankUnionTables& u, Report* out) {
  union_tables(
      u, "overlap", "Communication/computation overlap per rank", "Overlap per rank and step",
      {"comm_us", "overlap_us", "overlap_pct", "exposed_comm_us", "exposed_comm_pct", "span_us",
       "note"},
      [](const UnionStats& u) {
        std::vector<Cell> v;
        for (int64_t x : {u.comm_ns, u.overlap_ns}) v.push_back(us(x));
        v.push_back(pct(u.overlap_ns, u.comm_ns));
        v.push_back(us(u.comm_excl_ns));
        v.push_back(pct(u.comm_excl_ns, u.span_ns));
        v.push_back(us(u.span_ns));
        v.push_back(std::string(u.comm_ns > 0 ? "" : "no communication kernels"));
        return v;
      },
      out);
}

void breakdown_report(const RankUnionTables& u, Report* out) {
  union_tables(
      u, "breakdown", "Temporal breakdown per rank (non-compute = comm + memory + other)",
      "Temporal breakdown per rank and step",
      {"span_us", "idle_us", "compute_us", "non_compute_us", "comm_us", "memory_us", "other_us",
       "idle_pct", "compute_pct", "non_compute_pct"},
      [](const UnionStats& u) {
        int64_t idle = sat_sub(u.span_ns, u.busy_ns);
        int64_t non_compute = sat_sub(sat_sub(u.span_ns, u.compute_ns), idle);
        std::vector<Cell> v;
        for (int64_t x : {u.span_ns, idle, u.compute_ns, non_compute, u.comm_excl_ns,
                          u.memory_excl_ns, u.other_excl_ns})
          v.push_back(us(x));
        for (int64_t x : {idle, u.compute_ns, non_compute}) v.push_back(pct(x, u.span_ns));
        return v;
      },
      out);
}

std::vector<RankUnion> rank_unions(const Store& s, const CrossRankOptions& opt, bool per_step) {
  std::vector<RankUnion> out;
  add_rank_rows(s, select_activities(s, opt.filter), opt, !per_step, per_step, &out, &out);
  return out;
}

std::vector<StreamIdle> stream_idle(const Store& s, const CrossRankOptions& opt) {
  std::vector<uint32_t> rows = select_activities(s, opt.filter);
  detail::LaunchIndex launches(s);
  const auto& a = s.activities;
  bool hta = opt.compat == Compat::Hta;
  std::vector<StreamIdle> out;
  size_t i = 0;
  while (i < rows.size()) {
    // One (rank, device, stream) run of rows, in start order.
    size_t j = i;
    uint32_t r0 = rows[i];
    std::vector<uint32_t> run;
    while (j < rows.size() && a.rank[rows[j]] == a.rank[r0] && a.device[rows[j]] == a.device[r0] &&
           a.stream[rows[j]] == a.stream[r0]) {
      if (is_gpu_work(static_cast<Kind>(a.kind[rows[j]]))) run.push_back(rows[j]);
      ++j;
    }
    i = j;
    if (run.empty()) continue;
    StreamIdle d{a.rank[r0], a.device[r0], a.stream[r0]};
    int64_t prev_end = a.end_ns[run[0]];
    for (size_t q = 1; q < run.size(); ++q) {
      uint32_t x = run[q];
      int64_t gap = a.start_ns[x] - prev_end;
      // HTA: previous row's end and every gap, negative ones included. Native: latest end so
      // far, and only real gaps (overlaps are counted apart, never as idle).
      if (!hta && gap <= 0) {
        d.overlaps += gap < 0;
        prev_end = std::max(prev_end, a.end_ns[x]);
        continue;
      }
      int64_t launch = launches.find(a.rank[x], a.correlation[x]);
      // HTA's negative gaps (rows overlapping the previous one) can sum past int64 on extreme
      // times: the totals saturate (docs/limits.md).
      if (launch != detail::LaunchIndex::kNone && launch > prev_end)
        d.host_ns = sat_add(d.host_ns, gap), ++d.host_gaps;
      else if (gap < opt.kernel_wait_ns)
        d.kernel_ns = sat_add(d.kernel_ns, gap), ++d.kernel_gaps;
      else
        d.other_ns = sat_add(d.other_ns, gap), ++d.other_gaps;
      ++d.gaps;
      d.max_gap_ns = std::max(d.max_gap_ns, gap);
      prev_end = hta ? a.end_ns[x] : std::max(prev_end, a.end_ns[x]);
    }
    out.push_back(d);
  }
  return out;
}

void idle_analysis(const Store& s, const CrossRankOptions& opt, Report* out) {
  idle_report(stream_idle(s, opt), opt.kernel_wait_ns, out);
}

void idle_report(const std::vector<StreamIdle>& streams, int64_t kernel_wait_ns, Report* out) {
  Table t;
  t.key = "idle";
  t.title =
      "Idle breakdown per stream (host wait: the launch came after the stream drained; "
      "kernel wait: gap < " +
      format_duration(kernel_wait_ns) + ")";
  t.columns = {"rank",     "stream",      "device",          "host_wait_us",      "kernel_wait_us",
               "other_us", "idle_us",     "host_wait_ratio", "kernel_wait_ratio", "other_ratio",
               "gaps",     "mean_gap_us", "max_gap_us",      "overlaps"};
  // The gaps per category: JSON and CSV only (HTA lists a stream's category when it has a gap).
  for (const char* c : {"host_wait_gaps", "kernel_wait_gaps", "other_gaps"}) t.columns.push_back(c);
  t.text_hidden.assign(t.columns.size(), false);
  for (size_t c = t.columns.size() - 3; c < t.columns.size(); ++c) t.text_hidden[c] = true;
  for (const StreamIdle& d : streams) {
    int64_t idle = sat_add(sat_add(d.host_ns, d.kernel_ns), d.other_ns);
    auto ratio = [&](int64_t x) { return idle ? Cell(static_cast<double>(x) / idle) : Cell{}; };
    t.rows.push_back({int64_t{d.rank}, int64_t{d.stream}, int64_t{d.device}, us(d.host_ns),
                      us(d.kernel_ns), us(d.other_ns), us(idle), ratio(d.host_ns),
                      ratio(d.kernel_ns), ratio(d.other_ns), d.gaps,
                      d.gaps ? Cell(us(idle) / static_cast<double>(d.gaps)) : Cell{},
                      us(d.max_gap_ns), d.overlaps, d.host_gaps, d.kernel_gaps, d.other_gaps});
  }
  out->tables.push_back(std::move(t));
}

}  // namespace kernalyse
