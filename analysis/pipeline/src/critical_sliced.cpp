// --critical-path (and --what-if) of a store read a rank at a time (sliced_critical_path,
// registry.h): each rank's rows of each step are set aside as the slices come, and the steps are
// then analysed one at a time from their rows alone, so that memory holds a step of every rank,
// not the store.
//
// The steps' rows stay in memory up to a budget (AnalysisOptions::memory_bytes: half the
// physical memory by default, KERNALYSE_IMPORT_MEMORY_MB) and go to an unlinked scratch file in
// TMPDIR past it; each step's rows are freed once it is analysed. Under mpirun the steps go
// round the processes: each step's rows, from every process, to the one that analyses it.
//
// A step slice holds, per rank, each stream's rows from 8 before the step's first to its last
// (the graph looks back up to 8 rows on a stream for the work before), the launches of the step
// (a kernel's step is its launch's), the annotations that overlap the step's launches (the
// ranges the path's launches ran in) and, after them, the other arrivals of the step's
// collectives (their times bind the step's). The whole run's collective match (the cross-rank
// rows', the ledger's) is rewritten to the slice's rows; its ids stay the run's.
#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "cross_rows.h"
#include "kernalyse/archive.h"
#include "kernalyse/critical_path.h"
#include "kernalyse/error.h"
#include "kernalyse/load.h"
#include "kernalyse/spill.h"
#include "kernalyse/spread.h"
#include "kernalyse/store_archive.h"
#include "registry/registry.h"
#include "temp_dir.h"

namespace kernalyse::registry {

namespace {

// Every row of `src`'s columns appended to `dst` (a column the reader skipped stays empty).
template <class Tab>
void append_all(Tab& dst, const Tab& src) {
  for_each_column_pair(dst, src, [&](const auto&, auto& d, const auto& c) {
    if (c.size() == src.size()) d.insert(d.end(), c.begin(), c.end());
  });
}

// Rows [lo, hi) of `src` appended to `dst`.
template <class Tab>
void append_range(Tab& dst, const Tab& src, size_t lo, size_t hi) {
  for_each_column_pair(dst, src, [&](const auto&, auto& d, const auto& c) {
    if (c.size() == src.size())
      d.insert(d.end(), c.begin() + static_cast<std::ptrdiff_t>(lo),
               c.begin() + static_cast<std::ptrdiff_t>(hi));
  });
}

// Rows `rows` of `src` appended to `dst`.
template <class Tab>
void append_rows(Tab& dst, const Tab& src, const std::vector<uint32_t>& rows) {
  for_each_column_pair(dst, src, [&](const auto&, auto& d, const auto& c) {
    if (c.size() == src.size())
      for (uint32_t i : rows) d.push_back(c[i]);
  });
}

// Row `row` of `src` appended to `dst`.
template <class Tab>
void append_row(Tab& dst, const Tab& src, size_t row) {
  append_range(dst, src, row, row + 1);
}

// The bytes of a table's columns.
template <class Tab>
uint64_t bytes_of(const Tab& t) {
  uint64_t n = 0;
  for_each_column(t, [&](const auto&, const auto& c) {
    n += c.size() * sizeof(typename std::decay_t<decltype(c)>::value_type);
  });
  return n;
}

using Range = std::pair<uint32_t, uint32_t>;  // a slice's activity rows [first, end)

class CriticalPathSlices : public SlicedRun {
 public:
  explicit CriticalPathSlices(const AnalysisContext& ctx) {
    budget_ = memory_budget(ctx.options().memory_bytes);
    co_.filter = ctx.options().filter;
    co_.top = top_or(ctx, 20);
    if (!ctx.page()) co_.verbose = ctx.options().verbose, co_.what_if = ctx.options().what_if;
  }
  bool after_match() const override { return true; }
  bool reads_all_columns() const override { return true; }
  void begin(const AnalysisContext& whole) override {
    cross_ = &whole.store();
    match_ = whole.cross_rank(View::Store).match;
    if (!match_) {  // matched here as critical_path matches the whole store: every row
      std::vector<uint32_t> rows(cross_->activities.size());
      for (uint32_t i = 0; i < rows.size(); ++i) rows[i] = i;
      match_ = std::make_shared<const CollectiveMatch>(match_collectives(*cross_, rows));
    }
    const std::vector<int32_t>& r = cross_->activities.rank;
    for (size_t i = 0; i < r.size(); ++i)
      if (!i || r[i] != r[i - 1]) first_cross_[r[i]] = i;
  }
  void add(const AnalysisContext& slice) override;
  std::any finish(const AnalysisContext& whole) override;
  // Under MPI: the steps go round the processes, each step's rows to its process (one
  // all-to-all per step, so that a process holds a step's rows at a time), which analyses it;
  // the results go to the first process (save, merge).
  void share(const Spread& spread) override;
  std::string save() const override;
  void merge(const std::string& bytes) override;

 private:
  // A rank's rows of a step: in memory (`rows`), or in the scratch file at [at, at + bytes).
  struct Chunk {
    int32_t rank;
    std::vector<Range> ranges;
    std::unique_ptr<Store> rows;
    uint64_t at = 0, bytes = 0;
  };
  struct Placed {  // a rank's activity ranges in a step slice, from row `base` of the slice
    std::vector<Range> ranges;
    size_t base = 0;
  };
  // Position in the step slice of the rank's slice row `row`, or -1.
  // A spilled chunk's bytes.
  std::string spilled(const Chunk& c) const {
    std::string bytes(c.bytes, '\0');
    scratch_->read(c.at, bytes.data(), bytes.size());
    return bytes;
  }
  static int64_t position(const Placed& p, uint32_t row) {
    size_t at = p.base;
    for (const Range& r : p.ranges) {
      if (row >= r.first && row < r.second) return static_cast<int64_t>(at + (row - r.first));
      at += r.second - r.first;
    }
    return -1;
  }
  void keep(int32_t step, int32_t rank, std::vector<Range> ranges, std::unique_ptr<Store> rows);
  std::set<int32_t> steps_to_run(std::set<int32_t> steps) const;
  CriticalPathResult run_step(int32_t step);
  std::string pack(int32_t step);
  void load(int32_t step, Store& slice, std::map<int32_t, Placed>& placed);
  std::shared_ptr<const CollectiveMatch> rewrite(int32_t step, Store& slice,
                                                 const std::map<int32_t, Placed>& placed) const;

  CriticalPathOptions co_;
  const Store* cross_ = nullptr;
  std::shared_ptr<const CollectiveMatch> match_;
  std::map<int32_t, size_t> first_cross_;                // rank → its first cross row
  std::map<int32_t, std::vector<uint32_t>> cross_rows_;  // rank → its cross rows' slice rows
  std::map<int32_t, std::vector<Chunk>> chunks_;         // step → its chunks, in rank order
  std::set<int32_t> gpu_steps_;                          // steps with GPU work
  uint64_t budget_ = 0, held_ = 0;                       // bytes of the chunks in memory
  std::optional<SpillFile> scratch_;                     // in TMPDIR, once the budget is spent
  Store slice_;                                          // a step's rows, the header's strings
  std::map<int32_t, CriticalPathResult> done_;           // per step analysed (here, or merged)
  bool shared_ = false;
};

void CriticalPathSlices::add(const AnalysisContext& ctx) {
  const Store& s = ctx.store();
  const Activities& a = s.activities;
  const LaunchCalls& l = s.launches;
  const Annotations& an = s.annotations;
  if (!a.size() && !l.size()) return;
  const int32_t rank = a.size() ? a.rank[0] : l.rank[0];
  cross_rows_[rank] = detail::cross_activity_rows(s);
  // Per step: each stream's rows from 8 before its first of the step to its last.
  std::map<int32_t, std::vector<Range>> ranges;
  const bool stepped = a.step.size() == a.size();
  for (uint32_t g = 0; g < a.size();) {
    uint32_t e = g + 1;
    while (e < a.size() && a.device[e] == a.device[g] && a.stream[e] == a.stream[g]) ++e;
    std::map<int32_t, Range> in;  // step → [first, last] of its rows on this stream
    for (uint32_t i = g; i < e; ++i) {
      const int32_t st = stepped ? a.step[i] : kNoStep;
      auto [it, fresh] = in.try_emplace(st, i, i);
      if (!fresh) it->second.second = i;
      if (is_gpu_work(static_cast<Kind>(a.kind[i])) && a.end_ns[i] >= a.start_ns[i])
        gpu_steps_.insert(st);
    }
    for (const auto& [st, r] : in)
      ranges[st].push_back({std::max(g, r.first >= 8 ? r.first - 8 : 0), r.second + 1});
    g = e;
  }
  std::map<int32_t, std::vector<uint32_t>> calls;  // step → its launch rows
  for (uint32_t i = 0; i < l.size(); ++i)
    calls[l.step.size() == l.size() ? l.step[i] : kNoStep].push_back(i);
  std::set<int32_t> steps;
  for (const auto& [st, r] : ranges) steps.insert(st);
  for (const auto& [st, r] : calls) steps.insert(st);
  for (int32_t st : steps) {
    auto chunk = std::make_unique<Store>();
    std::vector<Range>& rr = ranges[st];
    for (const Range& r : rr) append_range(chunk->activities, a, r.first, r.second);
    const std::vector<uint32_t>& cl = calls[st];
    append_rows(chunk->launches, l, cl);
    int64_t lo = INT64_MAX, hi = INT64_MIN;
    for (uint32_t i : cl) lo = std::min(lo, l.start_ns[i]), hi = std::max(hi, l.start_ns[i]);
    std::vector<uint32_t> around;  // the annotations over the step's launches
    for (uint32_t i = 0; lo <= hi && i < an.size(); ++i)
      if (an.start_ns[i] <= hi && an.end_ns[i] >= lo) around.push_back(i);
    append_rows(chunk->annotations, an, around);
    keep(st, rank, std::move(rr), std::move(chunk));
  }
}

// A chunk kept: in memory within the budget, else in the scratch file.
void CriticalPathSlices::keep(int32_t step, int32_t rank, std::vector<Range> ranges,
                              std::unique_ptr<Store> rows) {
  Chunk c{rank, std::move(ranges), nullptr, 0, 0};
  const uint64_t n =
      bytes_of(rows->activities) + bytes_of(rows->launches) + bytes_of(rows->annotations);
  if (held_ + n <= budget_) {
    held_ += n;
    c.rows = std::move(rows);
  } else {
    if (!scratch_) scratch_.emplace(detail::tmp_dir());
    Archive ar;
    put_tables(ar, *rows);
    rows.reset();
    c.bytes = ar.bytes().size();
    c.at = scratch_->append(ar.bytes().data(), c.bytes);
  }
  chunks_[step].push_back(std::move(c));
}

// The step's chunks, in rank order, into `slice` (its header kept), and freed; where each rank's
// ranges went.
void CriticalPathSlices::load(int32_t step, Store& slice, std::map<int32_t, Placed>& placed) {
  slice.activities = Activities();
  slice.launches = LaunchCalls();
  slice.annotations = Annotations();
  auto it = chunks_.find(step);
  if (it == chunks_.end()) return;
  Store part;
  for (Chunk& c : it->second) {
    Placed& p = placed[c.rank];
    p.ranges = std::move(c.ranges);
    p.base = slice.activities.size();
    if (!c.rows) {
      Archive ar(spilled(c));
      get_tables(ar, part);
    }
    const Store& rows = c.rows ? *c.rows : part;
    append_all(slice.activities, rows.activities);
    append_all(slice.launches, rows.launches);
    append_all(slice.annotations, rows.annotations);
    if (c.rows)
      held_ -= bytes_of(rows.activities) + bytes_of(rows.launches) + bytes_of(rows.annotations);
    c.rows.reset();
  }
  chunks_.erase(it);
}

// The run's match with the step's collectives' arrivals at the slice's rows (an arrival outside
// the slice's ranges appended after them); every other collective keeps its id, no arrivals.
std::shared_ptr<const CollectiveMatch> CriticalPathSlices::rewrite(
    int32_t step, Store& slice, const std::map<int32_t, Placed>& placed) const {
  auto m = std::make_shared<CollectiveMatch>();
  m->method = match_->method;
  const Activities& ca = cross_->activities;
  auto move = [&](const Collective& c, Collective& out) {
    out.id = c.id, out.op = c.op;
    if (std::none_of(c.arrivals.begin(), c.arrivals.end(), [&](const CollectiveArrival& x) {
          return ca.step.size() == ca.size() ? ca.step[x.row] == step : step == kNoStep;
        }))
      return;
    for (const CollectiveArrival& x : c.arrivals) {
      int64_t at = -1;
      auto p = placed.find(x.rank);
      auto f = first_cross_.find(x.rank);
      auto rows = cross_rows_.find(x.rank);
      if (p != placed.end() && f != first_cross_.end() && rows != cross_rows_.end() &&
          x.row - f->second < rows->second.size())
        at = position(p->second, rows->second[x.row - f->second]);
      if (at < 0) {
        at = static_cast<int64_t>(slice.activities.size());
        append_row(slice.activities, ca, x.row);
      }
      out.arrivals.push_back({x.rank, static_cast<uint32_t>(at), x.nccl});
    }
  };
  m->matched.resize(match_->matched.size());
  for (size_t i = 0; i < m->matched.size(); ++i) move(match_->matched[i], m->matched[i]);
  m->p2p.resize(match_->p2p.size());
  for (size_t i = 0; i < m->p2p.size(); ++i) move(match_->p2p[i], m->p2p[i]);
  return m;
}

// As critical_path: the steps with GPU work, work outside every step only when there is no
// step; none at all: the run's empty result (one call on no rows).
std::set<int32_t> CriticalPathSlices::steps_to_run(std::set<int32_t> steps) const {
  if (steps.size() > 1) steps.erase(kNoStep);
  if (steps.empty()) steps.insert(kNoStep);
  return steps;
}

CriticalPathResult CriticalPathSlices::run_step(int32_t step) {
  if (slice_.strings.size() != cross_->strings.size()) {
    slice_.attrs = cross_->attrs;
    slice_.strings = cross_->strings;
    slice_.ranks = cross_->ranks;
  }
  std::map<int32_t, Placed> placed;
  load(step, slice_, placed);
  CriticalPathOptions o = co_;
  o.step = step;
  o.match = rewrite(step, slice_, placed);
  return critical_path(slice_, o);
}

// This process's chunks of `step` as bytes (rank, ranges, tables each), freed.
std::string CriticalPathSlices::pack(int32_t step) {
  Archive ar;
  auto it = chunks_.find(step);
  const uint64_t n = it == chunks_.end() ? 0 : it->second.size();
  ar.put(n);
  if (!n) return ar.bytes();
  for (Chunk& c : it->second) {
    ar.put(c.rank);
    ar.put(c.ranges);
    if (c.rows) {
      Archive t;
      put_tables(t, *c.rows);
      ar.put(t.bytes());
      held_ -=
          bytes_of(c.rows->activities) + bytes_of(c.rows->launches) + bytes_of(c.rows->annotations);
    } else {
      ar.put(spilled(c));
    }
  }
  chunks_.erase(it);
  return ar.bytes();
}

void CriticalPathSlices::share(const Spread& spread) {
  shared_ = true;
  // Every process's steps, and its ranks' cross rows (where their arrivals are in the slices).
  Archive mine;
  mine.put(std::vector<int32_t>(gpu_steps_.begin(), gpu_steps_.end()));
  mine.put(cross_rows_);
  Archive all(spread.all_gather(mine.bytes()));
  std::set<int32_t> steps;
  for (int p = 0; p < spread.processes; ++p) {
    for (int32_t st : all.get<std::vector<int32_t>>()) steps.insert(st);
    for (auto& [rank, rows] : all.get<std::map<int32_t, std::vector<uint32_t>>>())
      cross_rows_[rank] = std::move(rows);
  }
  size_t k = 0;
  for (int32_t st : steps_to_run(steps)) {
    const int owner = static_cast<int>(k++ % static_cast<size_t>(spread.processes));
    std::vector<std::string> to(static_cast<size_t>(spread.processes));
    to[static_cast<size_t>(owner)] = pack(st);
    Archive in(spread.all_to_all(to));
    if (spread.process != owner) continue;
    for (int p = 0; p < spread.processes; ++p) {  // in process order: rank order
      const auto n = in.get<uint64_t>();
      for (uint64_t j = 0; j < n; ++j) {
        const auto rank = in.get<int32_t>();
        auto ranges = in.get<std::vector<Range>>();
        Archive t(in.get<std::string>());
        auto rows = std::make_unique<Store>();
        get_tables(t, *rows);
        keep(st, rank, std::move(ranges), std::move(rows));
      }
    }
    done_[st] = run_step(st);
  }
}

namespace {

void put_shares(Archive& ar, const std::vector<PathShare>& v) {
  ar.put<uint64_t>(v.size());
  for (const PathShare& x : v) ar.put(x.name), ar.put(x.rank), ar.put(x.ns), ar.put(x.count);
}

void get_shares(Archive& ar, std::vector<PathShare>& v) {
  v.resize(ar.get<uint64_t>());
  for (PathShare& x : v) ar.get(x.name), ar.get(x.rank), ar.get(x.ns), ar.get(x.count);
}

// A step's result as bytes: its path (every field), its what-if rows, its notes.
void put_result(Archive& ar, const CriticalPathResult& r) {
  ar.put<uint64_t>(r.steps.size());
  for (const StepPath& p : r.steps) {
    ar.put(p.step), ar.put(p.span_start_ns), ar.put(p.span_end_ns), ar.put(p.path_start_ns);
    ar.put(p.path_ns), ar.put(p.slack_ns), ar.put(p.sink_rank), ar.put(p.nodes);
    ar.put(p.edges_inferred), ar.put(p.collectives), ar.put(p.collectives_on_path);
    for (int64_t v : p.by_kind) ar.put(v);
    put_shares(ar, p.by_rank), put_shares(ar, p.by_kernel), put_shares(ar, p.by_range);
    ar.put<uint64_t>(p.segments.size());
    for (const PathSegment& g : p.segments) {
      ar.put(g.kind), ar.put(g.rank), ar.put(g.stream), ar.put(g.tid), ar.put(g.start_ns);
      ar.put(g.end_ns), ar.put(g.name), ar.put(g.collective);
    }
    ar.put(p.segments_total);
  }
  ar.put<uint64_t>(r.what_if.size());
  for (const WhatIfStep& w : r.what_if) {
    ar.put(w.scenario), ar.put(w.step), ar.put(w.measured_step_ns);
    ar.put(w.predicted_step_ns), ar.put(w.saved_ns);
  }
  ar.put(r.notes);
}

void get_result(Archive& ar, CriticalPathResult& r) {
  r.steps.resize(ar.get<uint64_t>());
  for (StepPath& p : r.steps) {
    ar.get(p.step), ar.get(p.span_start_ns), ar.get(p.span_end_ns), ar.get(p.path_start_ns);
    ar.get(p.path_ns), ar.get(p.slack_ns), ar.get(p.sink_rank), ar.get(p.nodes);
    ar.get(p.edges_inferred), ar.get(p.collectives), ar.get(p.collectives_on_path);
    for (int64_t& v : p.by_kind) ar.get(v);
    get_shares(ar, p.by_rank), get_shares(ar, p.by_kernel), get_shares(ar, p.by_range);
    p.segments.resize(ar.get<uint64_t>());
    for (PathSegment& g : p.segments) {
      ar.get(g.kind), ar.get(g.rank), ar.get(g.stream), ar.get(g.tid), ar.get(g.start_ns);
      ar.get(g.end_ns), ar.get(g.name), ar.get(g.collective);
    }
    ar.get(p.segments_total);
  }
  r.what_if.resize(ar.get<uint64_t>());
  for (WhatIfStep& w : r.what_if) {
    ar.get(w.scenario), ar.get(w.step), ar.get(w.measured_step_ns);
    ar.get(w.predicted_step_ns), ar.get(w.saved_ns);
  }
  ar.get(r.notes);
}

}  // namespace

std::string CriticalPathSlices::save() const {
  Archive ar;
  ar.put<uint64_t>(done_.size());
  for (const auto& [st, r] : done_) ar.put(st), put_result(ar, r);
  return ar.bytes();
}

void CriticalPathSlices::merge(const std::string& bytes) {
  Archive ar(bytes);
  for (auto n = ar.get<uint64_t>(); n > 0; --n) {
    const auto st = ar.get<int32_t>();
    get_result(ar, done_[st]);
  }
}

std::any CriticalPathSlices::finish(const AnalysisContext&) {
  if (!shared_)  // one process: every step here
    for (int32_t st : steps_to_run(gpu_steps_)) done_[st] = run_step(st);
  CriticalPathResult res;
  res.event_tolerance_ns = co_.event_tolerance_ns;
  res.method = match_->method;
  for (auto& [st, r] : done_) {  // in step order
    for (auto& p : r.steps) res.steps.push_back(std::move(p));
    for (auto& w : r.what_if) res.what_if.push_back(std::move(w));
    for (auto& n : r.notes)
      if (std::find(res.notes.begin(), res.notes.end(), n) == res.notes.end())
        res.notes.push_back(std::move(n));
  }
  order_what_if(&res.what_if, co_.what_if);  // critical_path's order
  return res;
}

}  // namespace

std::unique_ptr<SlicedRun> sliced_critical_path(const AnalysisContext& ctx) {
  return std::make_unique<CriticalPathSlices>(ctx);
}

}  // namespace kernalyse::registry
