// The Kineto export of a store a rank at a time (export_kineto_by_rank, kernalyse/sliced.h).
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>

#include "cross_rows.h"
#include "kernalyse/archive.h"
#include "kernalyse/error.h"
#include "kernalyse/export.h"
#include "kernalyse/sliced.h"
#include "kernalyse/store_io.h"

namespace kernalyse {

namespace {

// Every process's values, concatenated in process order, on every process.
std::vector<int64_t> all_values(const Spread* spread, std::vector<int64_t> mine) {
  if (!spread || spread->processes < 2) return mine;
  Archive ar;
  ar.put(mine);
  Archive all(spread->all_gather(ar.bytes()));
  std::vector<int64_t> out;
  for (int p = 0; p < spread->processes; ++p) {
    const auto v = all.get<std::vector<int64_t>>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

// The first pass's columns: the rows' times and ranks (each rank's earliest time), and what the
// clock inference reads when there is one to make (the cross-rank rows: cross_rows.h).
ColumnSelection first_pass(bool infer) {
  ColumnSelection sel;
  sel.activity_correlation = sel.activity_step = false;
  sel.launch_detail = false;
  sel.nccl = infer;
  sel.ops = false;
  return sel;
}

// The whole store's earliest time from each rank's (rank, earliest) pairs, on the clocks `inf`
// moves them to: the maps are increasing, so a rank's earliest row stays its earliest.
int64_t earliest_of(const std::vector<int64_t>& pairs, const ClockInference* inf) {
  Store times;
  for (size_t i = 0; i + 1 < pairs.size(); i += 2) {
    if (pairs[i + 1] == INT64_MAX) continue;  // a slice with no timed rows
    times.activities.rank.push_back(static_cast<int32_t>(pairs[i]));
    times.activities.start_ns.push_back(pairs[i + 1]);
  }
  if (inf) apply_clock_inference(times, *inf);
  int64_t m = INT64_MAX;
  for (int64_t t : times.activities.start_ns) m = std::min(m, t);
  return m;
}

// Pass 1 of a sliced export over this process's slices: each rank's earliest time, the ranks
// with a /ranks row, the rows, and the cross-rank rows (when `cross_rows` or the clocks are to be
// inferred; cross_rows.h), exchanged; then the clock inference (on every process: the same rows,
// the same inference, as in sliced.cpp). `each` sees every slice as read (recorded clocks).
struct FirstPass {
  detail::CrossRows cross;  // its store: the header, its clocks as inferred
  std::vector<int64_t> with_file;
  int64_t rows = 0;              // this process's
  int64_t earliest = INT64_MAX;  // the whole store's, on the inferred clocks
  std::optional<ClockInference> inf;

  FirstPass(RankSlices& slices, bool infer, bool cross_rows, const LoadOptions& lo,
            const Spread* spread, const std::function<void(const Store&)>& each)
      : cross(slices.header()) {
    const auto [first, last] = detail::own_slices(slices.size(), spread);
    std::vector<int64_t> pairs;  // (rank, earliest time)
    Store buf;
    for (size_t k = first; k < last; ++k) {
      slices.read(k, buf);
      const int64_t t = earliest_ns(buf);
      if (t != INT64_MAX) {  // a slice's rows are one rank's: its time columns' rank
        const std::vector<int32_t>* rank = nullptr;
        for (const auto* c :
             {&buf.activities.rank, &buf.launches.rank, &buf.annotations.rank, &buf.counters.rank})
          if (!rank && !c->empty()) rank = c;
        pairs.push_back(rank->front()), pairs.push_back(t);
      }
      if (!buf.ranks.empty()) with_file.push_back(buf.ranks[0].rank);
      rows += static_cast<int64_t>(buf.activities.size() + buf.launches.size() +
                                   buf.annotations.size());
      if (infer || cross_rows) cross.add(buf);
      if (each) each(buf);
    }
    if (infer || cross_rows)
      if (spread && spread->processes > 1) exchange_cross(cross, *spread);
    if (infer) {  // said by the first process
      LoadOptions quiet = lo;
      if (spread && spread->process != 0) quiet.info = nullptr;
      inf = align_clocks(cross.store, quiet, nullptr);
    }
    earliest = earliest_of(all_values(spread, std::move(pairs)), inf ? &*inf : nullptr);
    with_file = all_values(spread, std::move(with_file));
  }
};

// Whether the clocks are to be inferred (may_align, per lo.align): the store's header tells.
bool header_infers(const std::string& file, bool may_align, const LoadOptions& lo) {
  if (!may_align) return false;
  ColumnSelection none;
  none.activities = none.launches = none.annotations = none.nccl = none.counters = none.ops = false;
  return infers_clocks(read_store(file, none), lo);
}

}  // namespace

std::optional<ExportStats> export_kineto_by_rank(const std::string& file, const std::string& dir,
                                                 const ExportOptions& eo, bool may_align,
                                                 const LoadOptions& lo, const Spread* spread) {
  if (whole_store_forced()) return std::nullopt;
  const bool first_process = !spread || spread->process == 0;
  // Pass 1's columns depend on whether the clocks are to be inferred: the header tells.
  std::unique_ptr<RankSlices> slices;
  bool infer = false;
  try {
    infer = header_infers(file, may_align, lo);
    slices = std::make_unique<RankSlices>(file, first_pass(infer), spread);
  } catch (const Error&) {
    return std::nullopt;  // the whole-store read says what is wrong, or reads it unsorted
  }
  kineto_files(slices->header(), dir, eo);  // refused before any work if a file exists
  const auto [first, last] = detail::own_slices(slices->size(), spread);
  // Pass 1: each rank's earliest time (the files' common origin is the whole store's) and, when
  // the clocks are to be inferred, the cross-rank rows.
  FirstPass p1(*slices, infer, false, lo, spread, nullptr);
  const std::optional<ClockInference>& inf = p1.inf;
  const Store& header = p1.cross.store;  // the store's header, its clocks as inferred
  const KinetoExport k = kineto_export(header, p1.earliest);
  const std::vector<const RankInfo*> files = kineto_files(header, dir, eo);
  // Pass 2: every column, a rank's file at a time; the files of ranks without rows (no slice)
  // by the first process.
  slices = std::make_unique<RankSlices>(file, ColumnSelection::all(), spread);
  Progress progress("writing " + dir + " (" + std::to_string(files.size()) + " rank files)",
                    p1.rows, "events", first_process ? eo.progress : ProgressMode::Off);
  ExportStats st;
  Store buf;
  for (size_t s = first; s < last; ++s) {
    slices->read(s, buf);
    if (inf) apply_clock_inference(buf, *inf);
    for (const RankInfo* ri : files)
      if (!buf.ranks.empty() && ri->rank == buf.ranks[0].rank)
        export_kineto_rank(buf, *ri, k, dir, eo, progress, &st);
  }
  if (first_process) {
    const Store none;
    for (const RankInfo* ri : files)
      if (std::find(p1.with_file.begin(), p1.with_file.end(), ri->rank) == p1.with_file.end())
        export_kineto_rank(none, *ri, k, dir, eo, progress, &st);
  }
  progress.finish();
  std::vector<int64_t> totals = all_values(spread, {st.events, st.files});
  st = ExportStats();
  for (size_t i = 0; i + 1 < totals.size(); i += 2)
    st.events += totals[i], st.files += totals[i + 1];
  return st;
}

std::optional<ExportStats> export_perfetto_by_rank(const std::string& file, const std::string& path,
                                                   const ExportOptions& eo, bool may_align,
                                                   const LoadOptions& lo) {
  if (whole_store_forced()) return std::nullopt;
  // Pass 1 reads what the tracks and the cross-rank rows need: all but the ops and the
  // activities' correlation ids.
  ColumnSelection tracks;
  tracks.ops = false;
  tracks.activity_correlation = false;
  std::unique_ptr<RankSlices> slices;
  bool infer = false;
  try {
    infer = header_infers(file, may_align, lo);
    slices = std::make_unique<RankSlices>(file, tracks, nullptr);
  } catch (const Error&) {
    return std::nullopt;  // the whole-store read says what is wrong, or reads it unsorted
  }
  PerfettoParts out(path, eo);  // an existing file: refused before any work
  // Pass 1: the origin, the cross-rank rows (the collective instances, their waits and flows)
  // and, when no time window needs the origin, each slice's tracks (they read no times then:
  // the recorded clocks do).
  const bool window = eo.from_ns || eo.to_ns;
  FirstPass p1(*slices, infer, true, lo, nullptr, [&](const Store& s) {
    if (!window) out.plan(s, 0);
  });
  const std::optional<ClockInference>& inf = p1.inf;
  Store buf;
  // Each slice of one section's table(s), on the clocks as exported.
  auto each = [&](RankSlices& from, const std::function<void(const Store&)>& f) {
    buf =
        Store();  // a section's slices hold only its tables (read() leaves the others as they are)
    for (size_t k = 0; k < from.size(); ++k) {
      from.read(k, buf);
      if (inf) apply_clock_inference(buf, *inf);
      f(buf);
    }
  };
  if (window) each(*slices, [&](const Store& s) { out.plan(s, p1.earliest); });
  slices.reset();
  const Store& cross = p1.cross.store;
  out.start(cross, p1.earliest, p1.rows);
  // Then each section: a pass over its table's slices, in the file's order. The activities'
  // collective ids come through their rows among the cross rows (the cross store holds each
  // rank's rows in its slice's order).
  auto only = [&](bool ColumnSelection::*table) {
    ColumnSelection sel;
    sel.activities = sel.launches = sel.annotations = sel.nccl = sel.counters = sel.ops = false;
    sel.*table = true;
    if (table == &ColumnSelection::activities) sel.nccl = true;
    return RankSlices(file, sel, nullptr);
  };
  const std::vector<int64_t>& cross_coll = out.cross_collectives();
  const std::vector<int32_t>& cross_rank = cross.activities.rank;
  std::vector<int64_t> coll_of;
  {
    RankSlices acts = only(&ColumnSelection::activities);
    each(acts, [&](const Store& s) {
      coll_of.assign(s.activities.size(), -1);
      if (s.activities.size()) {
        const size_t at = static_cast<size_t>(
            std::lower_bound(cross_rank.begin(), cross_rank.end(), s.activities.rank.front()) -
            cross_rank.begin());
        const std::vector<uint32_t> rows = detail::cross_activity_rows(s);
        for (size_t j = 0; j < rows.size() && at + j < cross_coll.size(); ++j)
          coll_of[rows[j]] = cross_coll[at + j];
      }
      out.activities(s, coll_of);
    });
  }
  {
    RankSlices ann = only(&ColumnSelection::annotations);
    each(ann, [&](const Store& s) { out.annotations(s); });
  }
  {
    RankSlices calls = only(&ColumnSelection::launches);
    each(calls, [&](const Store& s) { out.launches(s); });
  }
  out.waits();
  RankSlices samples = only(&ColumnSelection::counters);
  if (eo.from_ns && !eo.step) each(samples, [&](const Store& s) { out.counter_entries(s); });
  each(samples, [&](const Store& s) { out.counters(s); });
  return out.finish();
}

}  // namespace kernalyse
