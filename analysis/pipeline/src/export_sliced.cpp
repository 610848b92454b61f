// The Kineto export of a store a rank at a time (export_kineto_by_rank, kernalyse/sliced.h).
#include <algorithm>
#include <cstdint>

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
    ColumnSelection none;
    none.activities = none.launches = none.annotations = none.nccl = none.counters = none.ops =
        false;
    infer = may_align && infers_clocks(read_store(file, none), lo);
    slices = std::make_unique<RankSlices>(file, first_pass(infer), spread);
  } catch (const Error&) {
    return std::nullopt;  // the whole-store read says what is wrong, or reads it unsorted
  }
  kineto_files(slices->header(), dir, eo);  // refused before any work if a file exists
  const auto [first, last] = detail::own_slices(slices->size(), spread);
  // Pass 1: each rank's earliest time (the files' common origin is the whole store's) and, when
  // the clocks are to be inferred, the cross-rank rows.
  detail::CrossRows cross(slices->header());
  std::vector<int64_t> earliest;   // (rank, earliest time) pairs
  std::vector<int64_t> with_file;  // the ranks of the slices that have a /ranks row
  int64_t rows = 0;
  Store buf;
  for (size_t k = first; k < last; ++k) {
    slices->read(k, buf);
    const int64_t t = earliest_ns(buf);
    if (t != INT64_MAX) {  // a slice's rows are one rank's: its time columns' rank
      const std::vector<int32_t>* rank = nullptr;
      for (const auto* c :
           {&buf.activities.rank, &buf.launches.rank, &buf.annotations.rank, &buf.counters.rank})
        if (!rank && !c->empty()) rank = c;
      earliest.push_back(rank->front()), earliest.push_back(t);
    }
    if (!buf.ranks.empty()) with_file.push_back(buf.ranks[0].rank);
    rows +=
        static_cast<int64_t>(buf.activities.size() + buf.launches.size() + buf.annotations.size());
    if (infer) cross.add(buf);
  }
  std::optional<ClockInference> inf;
  if (infer) {  // on every process: the same rows, the same inference (sliced.cpp)
    if (spread && spread->processes > 1) exchange_cross(cross, *spread);
    const ClockEvidence ev = clock_evidence(cross.store, nullptr);
    inf = infer_clocks(ev);
    if (lo.align == "auto") keep_recorded_clocks_unless_evidence(&*inf, ev);
    apply_clock_inference(cross.store, *inf);
    if (first_process && lo.info) lo.info(describe(*inf));
  }
  const Store& header = cross.store;  // the store's header, its clocks as inferred
  const KinetoExport k = kineto_export(
      header, earliest_of(all_values(spread, std::move(earliest)), inf ? &*inf : nullptr));
  const std::vector<const RankInfo*> files = kineto_files(header, dir, eo);
  with_file = all_values(spread, std::move(with_file));
  // Pass 2: every column, a rank's file at a time; the files of ranks without rows (no slice)
  // by the first process.
  slices = std::make_unique<RankSlices>(file, ColumnSelection::all(), spread);
  Progress progress("writing " + dir + " (" + std::to_string(files.size()) + " rank files)", rows,
                    "events", first_process ? eo.progress : ProgressMode::Off);
  ExportStats st;
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
      if (std::find(with_file.begin(), with_file.end(), ri->rank) == with_file.end())
        export_kineto_rank(none, *ri, k, dir, eo, progress, &st);
  }
  progress.finish();
  std::vector<int64_t> totals = all_values(spread, {st.events, st.files});
  st = ExportStats();
  for (size_t i = 0; i + 1 < totals.size(); i += 2)
    st.events += totals[i], st.files += totals[i + 1];
  return st;
}

}  // namespace kernalyse
