// The Kineto importer's rows on disk (kineto_spill.h).
#include "kineto_spill.h"

#include <algorithm>
#include <limits>
#include <tuple>

#include "kernalyse/checked.h"
#include "kernalyse/error.h"
#include "kernalyse/spill.h"

namespace kernalyse {
namespace {

// The order of rows by the tuple `key` makes of each. Every key ends in a number that is the
// row's own (its place in the file, its chunk), so the order is total and the merged runs come
// out the same whatever the run size.
template <auto key>
struct By {
  template <class Row>
  bool operator()(const Row& x, const Row& y) const {
    return less(key(x), key(y));
  }
  // Lexicographic, written out: tuple's operator< went through an out-of-line <=> per
  // comparison (__tuple_cmp, 2 % of a large import, issue 28).
  template <size_t I = 0, class Tuple>
  static bool less(const Tuple& a, const Tuple& b) {
    if constexpr (I == std::tuple_size_v<Tuple>) {
      return false;
    } else {
      if (std::get<I>(a) < std::get<I>(b)) return true;
      if (std::get<I>(b) < std::get<I>(a)) return false;
      return less<I + 1>(a, b);
    }
  }
};

// An activity on disk. seq: its number in the file (the in-memory sort is stable, so ties keep
// the file's order); nccl: 1 + its /nccl row, 0 for none; step: set once the launches' are known.
struct ActRow {
  int64_t start, end, corr, pid;
  uint64_t seq;
  int32_t device, stream, step;
  uint32_t name, nccl;
  uint8_t kind, category;
};
// First by correlation, to take their launches' steps (a merge with the launches' CorrSteps).
using ActCorrLess = By<[](const ActRow& r) { return std::tie(r.corr, r.seq); }>;
// Then in the store's order of one rank's activities (store.h: sort_activities).
using ActLess =
    By<[](const ActRow& r) { return std::tie(r.device, r.stream, r.start, r.end, r.seq); }>;

// A launch on disk; seq: its number in the file.
struct LaunchRow {
  int64_t start, end, pid, tid, corr, ext;
  uint64_t seq;
  uint32_t name;
};
// The store's order of one rank's launches (merge_stores: by rank and start, stably).
using LaunchLess = By<[](const LaunchRow& r) { return std::tie(r.start, r.seq); }>;

// A pending cpu_op on disk. A later op with the same External id replaces an earlier one (as
// the in-memory map's insert_or_assign does): `chunk` orders them, since one chunk's map holds
// an id once.
struct OpRow {
  int64_t ext;
  uint64_t chunk;
  PendingOp op;
};
using OpLess = By<[](const OpRow& r) { return std::tie(r.ext, r.chunk); }>;

// A launch's side of the join: its External id, number in the file and correlation.
struct KeyRow {
  int64_t ext;
  uint64_t launch;
  int64_t corr;
};
using KeyLess = By<[](const KeyRow& r) { return std::tie(r.ext, r.launch); }>;

// An /ops row: the op of a launch, in the store's order (rank, start; stable: launch order).
struct JoinedRow {
  int64_t start;
  uint64_t launch;
  int64_t pid, tid, end, ext, corr;
  uint32_t name, dims, types, concrete;  // ids into the pending ops' string table
};
using JoinedLess = By<[](const JoinedRow& r) { return std::tie(r.start, r.launch); }>;

// A launch's correlation and step: the activities take their launch's step (assign_steps).
struct CorrStep {
  int64_t corr;
  int32_t step;
  uint32_t seq;  // the launch's number in the file: of equal correlations the last one wins
};
using CorrLess = By<[](const CorrStep& r) { return std::tie(r.corr, r.seq); }>;

constexpr size_t kBatchRows = size_t{1} << 16;  // rows per append to the store

// Shifts a row's times by `base`; false when that takes one out of the supported range.
bool shift(int64_t base, int64_t* start, int64_t* end) {
  if (!base) return true;
  *start += base;  // both in range before: the sums cannot overflow
  *end += base;
  return time_in_range(*start) && time_in_range(*end);
}

}  // namespace

struct KinetoSpill::Impl {
  Impl(const std::string& dir, size_t chunk)
      : by_corr(dir, chunk),
        acts(dir, chunk),
        launches(dir, chunk),
        corr_steps(dir, chunk),
        ops(dir, chunk),
        keys(dir, chunk),
        joined(dir, chunk) {}
  RowSorter<ActRow, ActCorrLess> by_corr;  // as parsed
  RowSorter<ActRow, ActLess> acts;         // shifted, with their steps
  RowSorter<LaunchRow, LaunchLess> launches;
  RowSorter<CorrStep, CorrLess> corr_steps;
  RowSorter<OpRow, OpLess> ops;
  RowSorter<KeyRow, KeyLess> keys;
  RowSorter<JoinedRow, JoinedLess> joined;
  uint64_t act_seq = 0, launch_seq = 0, op_chunks = 0;
  size_t nccl_at = 0;  // the first /nccl row of an activity not yet taken
  // The earliest and latest time of the launches and ops: whether the base shift can drop any.
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  void saw(int64_t start, int64_t end) {
    lo = std::min(lo, std::min(start, end));
    hi = std::max(hi, std::max(start, end));
  }
  // Rows of `sorter` the base shift keeps: all of them unless it can take some out of range (a
  // second pass over them then counts). The tables are announced with the rows they will have,
  // so their chunking is write_store's.
  template <class Row, class Less>
  uint64_t kept(RowSorter<Row, Less>& sorter, int64_t base) const {
    if (!base || lo > hi || (time_in_range(lo + base) && time_in_range(hi + base)))
      return sorter.size();
    uint64_t n = 0;
    auto rows = sorter.open();
    for (Row x; rows.next(&x);) n += shift(base, &x.start, &x.end);
    return n;
  }

  void join(const StringTable& op_strings, std::vector<uint64_t>* first_use);
  std::vector<uint32_t> intern_op_strings(const SpillContext& ctx,
                                          const std::vector<uint64_t>& first_use);
  void write_launches(StoreStream& out, const SpillContext& ctx, SpillWritten* w);
  void step_activities(const SpillContext& ctx, SpillWritten* w);
  void write_activities(StoreStream& out, NcclInfo& nccl, const SpillContext& ctx, SpillWritten* w);
  void write_ops(StoreStream& out, const SpillContext& ctx, const std::vector<uint32_t>& id_of);
};

KinetoSpill::KinetoSpill(std::string dir, size_t chunk)
    : impl_(std::make_unique<Impl>(dir, chunk)), chunk_(std::max<size_t>(chunk, 1)) {}

KinetoSpill::~KinetoSpill() = default;

void KinetoSpill::take(ParsedRows r) {
  Impl& m = *impl_;
  const Activities& a = r.activities;
  for (size_t i = 0; i < a.size(); ++i, ++m.act_seq) {
    uint32_t nccl = 0;
    if (m.nccl_at < r.nccl.size() && r.nccl.activity[m.nccl_at] == m.act_seq) {
      if (m.nccl_at >= std::numeric_limits<uint32_t>::max() - 1)
        throw Error("too many NCCL activities in one trace (" + std::to_string(m.nccl_at) + ")");
      nccl = static_cast<uint32_t>(++m.nccl_at);
    }
    m.by_corr.add(ActRow{a.start_ns[i], a.end_ns[i], a.correlation[i], r.activity_pid[i], m.act_seq,
                         a.device[i], a.stream[i], kNoStep, a.name_id[i], nccl, a.kind[i],
                         a.category[i]});
  }
  r.activities = Activities();
  r.activity_pid.clear();
  const LaunchCalls& l = r.launches;
  for (size_t i = 0; i < l.size(); ++i, ++m.launch_seq) {
    if (m.launch_seq >= std::numeric_limits<uint32_t>::max())
      throw Error("too many launches in one trace (" + std::to_string(m.launch_seq) + ")");
    m.launches.add(LaunchRow{l.start_ns[i], l.end_ns[i], l.pid[i], l.tid[i], l.correlation[i],
                             r.launch_ext[i], m.launch_seq, l.name_id[i]});
    m.saw(l.start_ns[i], l.end_ns[i]);
    if (r.launch_ext[i] >= 0 && l.correlation[i] != kNoCorrelation)
      m.keys.add(KeyRow{r.launch_ext[i], m.launch_seq, l.correlation[i]});
  }
  r.launches = LaunchCalls();
  r.launch_ext.clear();
  if (!r.ops.empty()) {
    for (const auto& [ext, op] : r.ops) {
      m.ops.add(OpRow{ext, m.op_chunks, op});
      m.saw(op.start, op.end);
    }
    ++m.op_chunks;
    PendingOps().swap(r.ops);
  }
}

void KinetoSpill::restore(ParsedRows r) {
  take(r);
  Impl& m = *impl_;
  // Activities (and launches below) in file order, as parsed: nccl.activity stays right.
  std::vector<ActRow> acts;
  acts.reserve(m.by_corr.size());
  auto by_corr = m.by_corr.open();
  for (ActRow x; by_corr.next(&x);) acts.push_back(x);
  std::sort(acts.begin(), acts.end(),
            [](const ActRow& x, const ActRow& y) { return x.seq < y.seq; });
  Activities& a = r.activities;
  for (const ActRow& x : acts) {
    a.rank.push_back(0);
    a.device.push_back(x.device);
    a.stream.push_back(x.stream);
    a.kind.push_back(x.kind);
    a.category.push_back(x.category);
    a.start_ns.push_back(x.start);
    a.end_ns.push_back(x.end);
    a.name_id.push_back(x.name);
    a.correlation.push_back(x.corr);
    r.activity_pid.push_back(x.pid);
  }
  std::vector<LaunchRow> by_seq;
  by_seq.reserve(m.launches.size());
  auto launches = m.launches.open();
  for (LaunchRow x; launches.next(&x);) by_seq.push_back(x);
  std::sort(by_seq.begin(), by_seq.end(),
            [](const LaunchRow& x, const LaunchRow& y) { return x.seq < y.seq; });
  LaunchCalls& l = r.launches;
  for (const LaunchRow& x : by_seq) {
    l.rank.push_back(0);
    l.pid.push_back(x.pid);
    l.tid.push_back(x.tid);
    l.start_ns.push_back(x.start);
    l.end_ns.push_back(x.end);
    l.name_id.push_back(x.name);
    l.correlation.push_back(x.corr);
    r.launch_ext.push_back(x.ext);
  }
  auto ops = m.ops.open();
  for (OpRow x; ops.next(&x);) r.ops.insert_or_assign(x.ext, x.op);  // the later chunk wins
}

// /ops rows into `joined`: each launch with the op its External id names (the last such op of
// the file). first_use[id]: the first (launch, field) that uses op string `id`, as 4 × launch +
// field, for interning the texts in the order the in-memory join does.
void KinetoSpill::Impl::join(const StringTable& op_strings, std::vector<uint64_t>* first_use) {
  first_use->assign(op_strings.size(), UINT64_MAX);
  auto key_rows = keys.open();
  auto op_rows = ops.open();
  OpRow next{};
  bool more = op_rows.next(&next);
  int64_t ext = 0;
  bool have = false, found = false;
  PendingOp op{};
  for (KeyRow k; key_rows.next(&k);) {
    if (!have || k.ext != ext) {  // the op of this External id: the last of its rows
      ext = k.ext;
      have = true;
      found = false;
      while (more && next.ext < ext) more = op_rows.next(&next);
      while (more && next.ext == ext) {
        op = next.op;
        found = true;
        more = op_rows.next(&next);
      }
    }
    if (!found) continue;
    joined.add(JoinedRow{op.start, k.launch, op.pid, op.tid, op.end, k.ext, k.corr, op.name,
                         op.dims, op.types, op.concrete});
    const uint32_t ids[4] = {op.name, op.dims, op.types, op.concrete};
    for (uint64_t f = 0; f < 4; ++f)
      (*first_use)[ids[f]] = std::min((*first_use)[ids[f]], 4 * k.launch + f);
  }
}

// The ops' texts interned into the store's table in the order of their first use; returns the
// store id of each pending-op string id.
std::vector<uint32_t> KinetoSpill::Impl::intern_op_strings(const SpillContext& ctx,
                                                           const std::vector<uint64_t>& first_use) {
  std::vector<std::pair<uint64_t, uint32_t>> used;
  for (uint32_t id = 0; id < first_use.size(); ++id)
    if (first_use[id] != UINT64_MAX) used.emplace_back(first_use[id], id);
  std::sort(used.begin(), used.end());
  std::vector<uint32_t> id_of(first_use.size(), 0);
  for (const auto& [when, id] : used) id_of[id] = ctx.strings.intern(ctx.op_strings.at(id));
  return id_of;
}

// /launches, shifted, with their steps; their correlations and steps to corr_steps.
void KinetoSpill::Impl::write_launches(StoreStream& out, const SpillContext& ctx, SpillWritten* w) {
  out.begin("launches", kept(launches, ctx.base));
  Store batch;
  auto flush = [&] {
    out.append(batch);
    batch.launches = LaunchCalls();
  };
  auto rows = launches.open();
  for (LaunchRow x; rows.next(&x);) {
    if (!shift(ctx.base, &x.start, &x.end)) {
      ++w->dropped;
      continue;
    }
    const int32_t step = ctx.steps.empty() ? kNoStep : ctx.steps.at(ctx.rank, x.start);
    LaunchCalls& l = batch.launches;
    l.rank.push_back(ctx.rank);
    l.pid.push_back(x.pid);
    l.tid.push_back(x.tid);
    l.start_ns.push_back(x.start);
    l.end_ns.push_back(x.end);
    l.name_id.push_back(x.name);
    l.correlation.push_back(x.corr);
    l.step.push_back(step);
    if (!ctx.steps.empty() && x.corr != kNoCorrelation)
      corr_steps.add(CorrStep{x.corr, step, static_cast<uint32_t>(x.seq)});
    if (l.size() >= kBatchRows) flush();
  }
  flush();
}

// The activities shifted (those out of range dropped) and given their steps, into `acts`: by
// correlation against the launches' steps (of equal correlations the last launch's in the file:
// assign_steps' map keeps the last), else by their own start.
void KinetoSpill::Impl::step_activities(const SpillContext& ctx, SpillWritten* w) {
  auto steps = corr_steps.open();
  CorrStep next{};
  bool more = steps.next(&next);
  int64_t corr = kNoCorrelation;
  bool have = false, found = false;
  int32_t launch_step = kNoStep;
  auto rows = by_corr.open();
  for (ActRow x; rows.next(&x);) {
    if (!shift(ctx.base, &x.start, &x.end)) {
      ++w->dropped;
      continue;
    }
    if (!ctx.steps.empty() && x.corr != kNoCorrelation && (!have || x.corr != corr)) {
      corr = x.corr;
      have = true;
      found = false;
      while (more && next.corr < corr) more = steps.next(&next);
      while (more && next.corr == corr) {
        launch_step = next.step;
        found = true;
        more = steps.next(&next);
      }
    }
    if (ctx.steps.empty())
      x.step = kNoStep;
    else if (x.corr != kNoCorrelation && found)
      x.step = launch_step;
    else
      x.step = ctx.steps.at(ctx.rank, x.start);
    acts.add(x);
  }
}

// /activities in the store's order; /nccl rows then name their places.
void KinetoSpill::Impl::write_activities(StoreStream& out, NcclInfo& nccl, const SpillContext& ctx,
                                         SpillWritten* w) {
  out.begin("activities", acts.size());
  std::vector<uint64_t> nccl_pos(nccl.size(), UINT64_MAX);
  uint64_t written = 0;
  Store batch;
  auto flush = [&] {
    out.append(batch);
    batch.activities = Activities();
  };
  auto rows = acts.open();
  for (ActRow x; rows.next(&x);) {
    if (x.nccl) nccl_pos[x.nccl - 1] = written;
    ++written;
    w->devices.insert(x.device);
    Activities& a = batch.activities;
    a.rank.push_back(ctx.rank);
    a.device.push_back(x.device);
    a.stream.push_back(x.stream);
    a.kind.push_back(x.kind);
    a.category.push_back(x.category);
    a.start_ns.push_back(x.start);
    a.end_ns.push_back(x.end);
    a.name_id.push_back(x.name);
    a.correlation.push_back(x.corr);
    a.step.push_back(x.step);
    if (a.size() >= kBatchRows) flush();
  }
  flush();
  // /nccl rows name the activities' places in the store, and the rows of dropped activities go;
  // then they are in the store's order (sort_activities').
  size_t n = 0;
  for (size_t i = 0; i < nccl.size(); ++i) {
    if (nccl_pos[i] == UINT64_MAX) continue;
    nccl.activity[i] = nccl_pos[i];
    for_each_column(nccl, [&](const auto&, auto& col) {
      if (i < col.size()) col[n] = col[i];
    });
    ++n;
  }
  for_each_column(nccl, [&](const auto&, auto& col) {
    if (col.size() > n) col.resize(n);
  });
  sort_nccl_by_activity(nccl);
}

void KinetoSpill::Impl::write_ops(StoreStream& out, const SpillContext& ctx,
                                  const std::vector<uint32_t>& id_of) {
  out.begin("ops", kept(joined, ctx.base));
  Store batch;
  auto flush = [&] {
    out.append(batch);
    batch.ops = Ops();
  };
  auto rows = joined.open();
  for (JoinedRow x; rows.next(&x);) {
    if (!shift(ctx.base, &x.start, &x.end)) continue;  // derived rows: their events were counted
    Ops& o = batch.ops;
    o.rank.push_back(ctx.rank);
    o.pid.push_back(x.pid);
    o.tid.push_back(x.tid);
    o.start_ns.push_back(x.start);
    o.end_ns.push_back(x.end);
    o.name_id.push_back(id_of[x.name]);
    o.external_id.push_back(x.ext);
    o.correlation.push_back(x.corr);
    o.dims_id.push_back(id_of[x.dims]);
    o.types_id.push_back(id_of[x.types]);
    o.concrete_id.push_back(id_of[x.concrete]);
    if (o.size() >= kBatchRows) flush();
  }
  flush();
}

SpillWritten KinetoSpill::write(StoreStream& out, ParsedRows rows, const SpillContext& ctx) {
  take(rows);
  Impl& m = *impl_;
  SpillWritten w;
  std::vector<uint64_t> first_use;
  m.join(ctx.op_strings, &first_use);
  const std::vector<uint32_t> id_of = m.intern_op_strings(ctx, first_use);
  m.write_launches(out, ctx, &w);
  m.step_activities(ctx, &w);
  m.write_activities(out, rows.nccl, ctx, &w);
  m.write_ops(out, ctx, id_of);
  auto count = [&w](const auto& sorter) {
    w.runs += sorter.runs();
    w.disk_bytes += sorter.disk_bytes();
  };
  count(m.by_corr), count(m.acts), count(m.launches), count(m.corr_steps), count(m.ops),
      count(m.keys), count(m.joined);
  return w;
}

}  // namespace kernalyse
