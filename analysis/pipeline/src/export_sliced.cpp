// The Kineto and Perfetto exports of a store a rank at a time (export_kineto_by_rank,
// export_perfetto_by_rank, kernalyse/sliced.h), under mpirun spread over the processes.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>

#include "cross_rows.h"
#include "kernalyse/archive.h"
#include "kernalyse/error.h"
#include "kernalyse/export.h"
#include "kernalyse/sliced.h"
#include "kernalyse/spill.h"
#include "kernalyse/store_io.h"
#include "temp_dir.h"

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

namespace {

// The Perfetto file's sections of events, in its order (PerfettoParts, export.h); the collective
// waits go between the launches and the counters' levels at the window's start.
enum PerfettoSection : int { kActivities, kAnnotations, kLaunches, kEntries, kCounters, kSections };

// Each section's events of the slices whose rank is `owned`, a pass over its table's slices (rank
// order) before the next section's; `at(section)` before each and at(kSections) after the last.
// rows[section]: the rows visited.
void perfetto_sections(const std::string& file, PerfettoParts& out, const Store& cross,
                       const ExportOptions& eo, const std::optional<ClockInference>& inf,
                       const std::function<bool(int32_t)>& owned,
                       const std::function<void(int)>& at, int64_t* rows) {
  Store buf;
  // Each owned slice of one section's table(s), on the clocks as exported.
  auto each = [&](RankSlices& from, const std::function<void(const Store&)>& f) {
    buf =
        Store();  // a section's slices hold only its tables (read() leaves the others as they are)
    for (size_t k = 0; k < from.size(); ++k) {
      if (!owned(from.rank(k))) continue;
      from.read(k, buf);
      if (inf) apply_clock_inference(buf, *inf);
      f(buf);
    }
  };
  auto only = [&](bool ColumnSelection::*table) {
    ColumnSelection sel;
    sel.activities = sel.launches = sel.annotations = sel.nccl = sel.counters = sel.ops = false;
    sel.*table = true;
    if (table == &ColumnSelection::activities) sel.nccl = true;
    return RankSlices(file, sel, nullptr);
  };
  // The activities' collective ids come through their rows among the cross rows (the cross store
  // holds each rank's rows in its slice's order).
  const std::vector<int64_t>& cross_coll = out.cross_collectives();
  const std::vector<int32_t>& cross_rank = cross.activities.rank;
  std::vector<int64_t> coll_of;
  at(kActivities);
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
      rows[kActivities] += static_cast<int64_t>(s.activities.size());
    });
  }
  at(kAnnotations);
  {
    RankSlices ann = only(&ColumnSelection::annotations);
    each(ann, [&](const Store& s) {
      out.annotations(s);
      rows[kAnnotations] += static_cast<int64_t>(s.annotations.size());
    });
  }
  at(kLaunches);
  {
    RankSlices calls = only(&ColumnSelection::launches);
    each(calls, [&](const Store& s) {
      out.launches(s);
      rows[kLaunches] += static_cast<int64_t>(s.launches.size());
    });
  }
  RankSlices samples = only(&ColumnSelection::counters);
  at(kEntries);
  if (eo.from_ns && !eo.step) each(samples, [&](const Store& s) { out.counter_entries(s); });
  at(kCounters);
  each(samples, [&](const Store& s) { out.counters(s); });
  at(kSections);
}

// The first error among the processes' (each one's "" when none), thrown on every process.
// Collective.
void agree(const Spread& spread, const std::string& mine) {
  Archive ar;
  ar.put(mine);
  Archive all(spread.all_gather(ar.bytes()));
  for (int p = 0; p < spread.processes; ++p)
    if (auto e = all.get<std::string>(); !e.empty()) throw Error(e);
}

// The point-to-point messages of the Perfetto file's events: the writer's requests (a section,
// kEnd or kAbort) and the answers (kData: 'D' and events, 'F' and the section's end, 'E' and the
// sender's failure). A message holds at most kChunk bytes of events.
constexpr int kAsk = 7101, kAnswer = 7102;
constexpr int kEnd = -1, kAbort = -2;
constexpr uint64_t kChunk = uint64_t{4} << 20;

// Thrown on a process that formats for the writer when the writer stopped (its failure is said).
struct Stopped {};

// A process but the writer: its sections' events go to its spill file as they are formatted,
// and to the writer when it asks for them (each section of each process in the file's order):
// at each buffer of events and each section's start it looks for the writer's request and sends
// what it has of that section, then the rest as it comes, then the section's end.
class Sender {
 public:
  Sender(const Spread& spread, SpillFile& spill, const int64_t* rows, const PerfettoParts& out)
      : spread_(spread), spill_(spill), rows_(rows), out_(out) {}
  // Events of the section being formatted.
  void add(std::string_view b) {
    spill_.append(b.data(), b.size());
    spilled_ += b.size(), bytes_[current_] += b.size();
    serve(false);
  }
  // Section s begins (kSections: all are formatted).
  void begin(int s) {
    current_ = s;
    if (s < kSections) at_[s] = spilled_;
    serve(false);
  }
  // The formatting failed: the answer to the writer's requests.
  void failed(const std::string& e) { error_ = e; }
  // After the formatting (or its failure): the writer's requests answered until it is done.
  void serve_to_end() {
    while (!done_) serve(true);
  }

 private:
  void serve(bool wait) {
    for (;;) {
      if (asked_ < 0) {  // the writer's next request, if it has sent one (or when waiting for it)
        if (done_ || (!wait && !spread_.waiting(0, kAsk))) return;
        Archive ask(spread_.recv(0, kAsk));
        asked_ = ask.get<int>(), sent_ = 0;
        if (asked_ == kAbort && !wait) throw Stopped();
        if (asked_ < 0) {
          done_ = true;
          return;
        }
      }
      if (!error_.empty()) {
        spread_.send(0, kAnswer, "E" + error_);
        asked_ = -1;
        continue;
      }
      const auto s = static_cast<size_t>(asked_);
      while (sent_ < bytes_[s]) {
        chunk_.assign(1 + std::min(kChunk, bytes_[s] - sent_), 'D');
        spill_.read(at_[s] + sent_, chunk_.data() + 1, chunk_.size() - 1);
        spread_.send(0, kAnswer, chunk_);
        sent_ += chunk_.size() - 1;
      }
      if (current_ <= asked_) return;  // the rest as it is formatted
      Archive end;
      const ExportStats st = out_.stats();
      end.put(rows_[s]), end.put(st.events), end.put(st.counters);
      spread_.send(0, kAnswer, "F" + end.bytes());
      asked_ = -1;
    }
  }

  const Spread& spread_;
  SpillFile& spill_;
  const int64_t* rows_;  // per section, the rows visited
  const PerfettoParts& out_;
  std::string error_, chunk_;
  int current_ = kActivities, asked_ = -1;
  bool done_ = false;
  uint64_t spilled_ = 0, sent_ = 0, at_[kSections] = {}, bytes_[kSections] = {};
};

// The writer: section s of every other process, in process order, asked for and written as it
// comes; the others' stats with their last section. Throws Error (the first failure, a sender's
// or the writer's) once the sender has answered in full.
void pull(PerfettoParts& out, int s, const Spread& spread) {
  for (int q = 1; q < spread.processes; ++q) {
    Archive ask;
    ask.put<int>(s);
    spread.send(q, kAsk, ask.bytes());
    std::string err;
    for (;;) {
      const std::string m = spread.recv(q, kAnswer);
      if (m.empty() || m[0] == 'E') {
        if (err.empty()) err = m.empty() ? "MPI export: an empty message" : m.substr(1);
        break;
      }
      try {
        if (m[0] == 'D' && err.empty()) out.append(std::string_view(m).substr(1), 0);
        if (m[0] != 'F') continue;
        Archive end(m.substr(1));
        const auto rows = end.get<int64_t>();
        ExportStats st;
        st.events = end.get<int64_t>(), st.counters = end.get<int64_t>();
        if (err.empty()) out.append({}, rows);
        if (s == kCounters) out.add_stats(st);
      } catch (const std::exception& e) {
        if (err.empty()) err = e.what();  // the rest of the answer received all the same
      }
      if (m[0] == 'F') break;
    }
    if (!err.empty()) throw Error(err);
  }
}

// Each section of this process's slices: the writer's into the file, each followed by the
// others' (pull); the others' into their spill files and to the writer (Sender). Every process
// then knows the first failure (collective). The writer's stats.
ExportStats spread_sections(const std::string& file, PerfettoParts& out, const Store& cross,
                            const ExportOptions& eo, const std::optional<ClockInference>& inf,
                            const std::function<bool(int32_t)>& owned, SpillFile* spill,
                            const Spread& spread) {
  int64_t rows[kSections] = {};
  std::string err;
  ExportStats st;
  if (spread.process == 0) {
    try {
      perfetto_sections(
          file, out, cross, eo, inf, owned,
          [&](int s) {
            if (s > kActivities) pull(out, s - 1, spread);
            if (s == kEntries) out.waits();
          },
          rows);
      st = out.finish();
    } catch (const std::exception& e) {
      err = e.what();
    }
    Archive end;
    end.put<int>(err.empty() ? kEnd : kAbort);
    for (int q = 1; q < spread.processes; ++q) spread.send(q, kAsk, end.bytes());
  } else {
    Sender sender(spread, *spill, rows, out);
    bool stopped = false;
    try {
      out.divert([&](std::string_view b) { sender.add(b); });
      perfetto_sections(
          file, out, cross, eo, inf, owned,
          [&](int s) {
            out.divert([&](std::string_view b) { sender.add(b); });  // the last section's rest
            sender.begin(s);
          },
          rows);
    } catch (const Stopped&) {
      stopped = true;  // the writer stopped: its failure is said below
    } catch (const std::exception& e) {
      sender.failed(e.what());
    }
    if (!stopped) sender.serve_to_end();
  }
  agree(spread, err);  // the writer's failure (the file then removed) is every process's
  return st;
}

// Under mpirun: the processes plan, format and send their slices' parts (the Kineto export's split:
// each process its run of ranks), the first one writes the file (spread_sections). Collective; a
// failure on any process is every process's Error.
ExportStats perfetto_spread(const std::string& file, const std::string& path, ExportOptions eo,
                            bool infer, const LoadOptions& lo, std::unique_ptr<RankSlices> slices,
                            const Spread& spread) {
  const bool writer = spread.process == 0;
  if (!writer) eo.progress = ProgressMode::Off;
  std::unique_ptr<PerfettoParts> out;
  std::unique_ptr<SpillFile> spill;  // a sender's sections until the writer asks for them
  std::string err;
  try {
    out = writer ? std::make_unique<PerfettoParts>(path, eo) : std::make_unique<PerfettoParts>(eo);
    if (!writer) spill = std::make_unique<SpillFile>(detail::tmp_dir());
  } catch (const Error& e) {
    err = e.what();
  }
  agree(spread, err);
  // Pass 1 (FirstPass, sliced like the Kineto export's) and, with a time window, a second pass
  // over the own slices for the tracks; every process's tracks then go to every process.
  const bool window = eo.from_ns || eo.to_ns;
  FirstPass p1(*slices, infer, true, lo, &spread, [&](const Store& s) {
    if (!window) out->plan(s, 0);
  });
  const std::optional<ClockInference>& inf = p1.inf;
  const auto [first, last] = detail::own_slices(slices->size(), &spread);
  // This process's ranks: from its first slice's to the next process's first.
  const bool any = first < last;
  const int32_t lo_rank = any ? slices->rank(first) : 0;
  const std::optional<int32_t> hi_rank =
      last < slices->size() ? std::optional<int32_t>(slices->rank(last)) : std::nullopt;
  auto owned = [&](int32_t r) {
    return (writer || (any && r >= lo_rank)) && (!hi_rank || r < *hi_rank);
  };
  try {
    Store buf;
    for (size_t k = first; window && k < last; ++k) {
      slices->read(k, buf);
      if (inf) apply_clock_inference(buf, *inf);
      out->plan(buf, p1.earliest);
    }
  } catch (const Error& e) {
    err = e.what();
  }
  slices.reset();
  int64_t rows = 0;
  {
    Archive ar;
    ar.put(err), ar.put(out->tracks()), ar.put(p1.rows);
    Archive all(spread.all_gather(ar.bytes()));
    for (int p = 0; p < spread.processes; ++p) {
      const auto e = all.get<std::string>();
      const auto t = all.get<std::string>();
      if (err.empty()) err = e;
      if (e.empty()) out->add_tracks(t);
      rows += all.get<int64_t>();
    }
    if (!err.empty()) throw Error(err);
  }
  out->start(p1.cross.store, p1.earliest, rows);
  return spread_sections(file, *out, p1.cross.store, eo, inf, owned, spill.get(), spread);
}

// One process: each section of every slice into the file, the waits between the launches and
// the counters.
ExportStats perfetto_alone(const std::string& file, const std::string& path,
                           const ExportOptions& eo, bool infer, const LoadOptions& lo,
                           std::unique_ptr<RankSlices> slices) {
  PerfettoParts out(path, eo);  // an existing file: refused before any work
  // Pass 1: the origin, the cross-rank rows (the collective instances, their waits and flows)
  // and, when no time window needs the origin, each slice's tracks (they read no times then:
  // the recorded clocks do).
  const bool window = eo.from_ns || eo.to_ns;
  FirstPass p1(*slices, infer, true, lo, nullptr, [&](const Store& s) {
    if (!window) out.plan(s, 0);
  });
  const std::optional<ClockInference>& inf = p1.inf;
  if (window) {
    Store buf;
    for (size_t k = 0; k < slices->size(); ++k) {
      slices->read(k, buf);
      if (inf) apply_clock_inference(buf, *inf);
      out.plan(buf, p1.earliest);
    }
  }
  slices.reset();
  const Store& cross = p1.cross.store;
  out.start(cross, p1.earliest, p1.rows);
  int64_t rows[kSections] = {};
  perfetto_sections(
      file, out, cross, eo, inf, [](int32_t) { return true; },
      [&](int s) {
        if (s == kEntries) out.waits();
      },
      rows);
  return out.finish();
}

}  // namespace

std::optional<ExportStats> export_perfetto_by_rank(const std::string& file, const std::string& path,
                                                   const ExportOptions& eo, bool may_align,
                                                   const LoadOptions& lo, const Spread* spread) {
  if (whole_store_forced()) return std::nullopt;
  const bool spreads = spread && spread->processes > 1;
  // Pass 1 reads what the tracks and the cross-rank rows need: all but the ops and the
  // activities' correlation ids.
  ColumnSelection tracks;
  tracks.ops = false;
  tracks.activity_correlation = false;
  std::unique_ptr<RankSlices> slices;
  bool infer = false;
  try {
    infer = header_infers(file, may_align, lo);
    slices = std::make_unique<RankSlices>(file, tracks, spreads ? spread : nullptr);
  } catch (const Error&) {
    return std::nullopt;  // the whole-store read says what is wrong, or reads it unsorted
  }
  if (spreads) return perfetto_spread(file, path, eo, infer, lo, std::move(slices), *spread);
  return perfetto_alone(file, path, eo, infer, lo, std::move(slices));
}

}  // namespace kernalyse
