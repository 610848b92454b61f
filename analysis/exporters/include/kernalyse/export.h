// Exports of a store: one Chrome trace-event JSON for Perfetto UI / chrome://tracing (all ranks,
// aligned), and one Kineto-style JSON per rank for HTA / TraceLens. Streaming writers: no JSON
// DOM of the events is built. Formats and conventions in docs/exports.md.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernalyse/progress.h"
#include "kernalyse/store.h"
#include "kernalyse/units.h"  // parse_time_to_ns, ns_to_us_text

namespace kernalyse {

// What to export. Times (from/to) are ns offsets from export_base_ns(store), the run's origin
// that the Perfetto output's ts count from; an event is kept if it overlaps [from, to).
struct ExportOptions {
  std::optional<int32_t> rank;
  std::optional<int32_t> step;
  std::optional<int64_t> from_ns, to_ns;
  bool force = false;                         // replace an existing output
  ProgressMode progress = ProgressMode::Off;  // "writing <path>", in store rows visited
};

struct ExportStats {
  int64_t events = 0;    // trace events written (all files)
  int64_t flows = 0;     // flow pairs (Perfetto)
  int64_t counters = 0;  // counter samples ("ph":"C", Perfetto)
  int64_t files = 0;
};

// The run's origin for exported ts: the earliest time in the store (activities, launches,
// annotations, counters), rounded down to a whole µs; 0 for an empty store.
int64_t export_base_ns(const Store& s);

// Whether every rank's clock is as recorded (clock_method "none ...": an import not aligned). The
// Kineto export then writes each rank's own recorded base time, so that its ts are the source's.
bool clocks_as_recorded(const Store& s);

// Chrome trace-event JSON (.json, or gzip when the name ends in .gz). Written to a temporary name
// and renamed; refuses an existing file without opt.force. Throws Error.
ExportStats export_perfetto(const Store& s, const std::string& path, const ExportOptions& opt);

// export_perfetto in steps, for a store read a rank at a time (export_perfetto_by_rank,
// sliced.h): plan() every part (its tracks), start() (the whole store's origin and collective
// instances; the file's header and metadata), then each section of events for every part in rank
// order before the next section (activities, annotations, launches, waits, counter_entries,
// counters), then finish() (the flows; the file committed). The constructor opens the file: an
// existing one is refused (Error) without opt.force, before any work.
// Under mpirun the sections' events are formatted by several processes and the file is one
// (export_perfetto_by_rank): each process plans its parts, and all of them add every process's
// tracks(); each formats its pieces (rows()) diverted (divert()), and the writer append()s their
// bytes in the file's order, or place()s them for their process to write into shared().
class PerfettoParts {
 public:
  PerfettoParts(const std::string& path, const ExportOptions& opt);
  // A process that formats parts for another that writes the file: no file; start() writes no
  // header, and its events go where divert() sends them (waits() and finish() are the writer's).
  explicit PerfettoParts(const ExportOptions& opt);
  ~PerfettoParts();
  PerfettoParts(const PerfettoParts&) = delete;
  PerfettoParts& operator=(const PerfettoParts&) = delete;
  // `earliest`: the whole store's earliest_ns (read only with opt.from_ns/to_ns).
  void plan(const Store& part, int64_t earliest);
  // `cross`: the header (attributes, strings, /ranks with the clocks as exported) and the rows
  // the collective match reads: the whole store, or its cross-rank rows (the same instances);
  // it must outlive finish(). `rows`: the parts' rows, for the progress.
  void start(const Store& cross, int64_t earliest, int64_t rows);
  // Per row of `cross`'s activities: the collective id the export writes, -1 none.
  const std::vector<int64_t>& cross_collectives() const;
  // `coll_of`: per activity row of `part`, its collective id (-1 none).
  void activities(const Store& part, const std::vector<int64_t>& coll_of);
  // From now on activities(), annotations() and launches() write only rows [lo, hi) of their
  // parts (a part's rows in pieces, each formatted where it may be: export_perfetto_by_rank);
  // activities() then leaves --step's spans to spans(), called with every part's activities
  // before the counters (on each process that writes some counters).
  void rows(size_t lo, size_t hi);
  void spans(const Store& part);
  void annotations(const Store& part);
  void launches(const Store& part);
  void waits();
  void counter_entries(const Store& part);  // with --from: each counter's level at the start
  void counters(const Store& part);
  ExportStats finish();

  // The tracks plan() found (and the ranks of the parts' activities), as bytes; add_tracks() adds
  // another process's, so that each one numbers every rank's tracks as one that planned every
  // part (before start()).
  std::string tracks() const;
  void add_tracks(const std::string& bytes);
  // The events from now on to `to` (buffered: a call per 1 MiB or so, and the rest at the next
  // divert()), each after its separator, as if the file had events before it; null: to the file
  // again.
  void divert(std::function<void(std::string_view)> to);
  // Events that divert() handed to another process, written to the file in order (the first event
  // of the file without its separator); `rows`: the store rows they come from (the progress).
  void append(std::string_view events, int64_t rows);
  // Or they are written into the file by the process that formatted them: shared() names the
  // file's temporary (a plain file's; "" for gzip), place() leaves room for `bytes` of them and
  // says where (the offset) and how many of their first bytes to leave out (the file's first
  // event: its separator).
  std::string shared() const;
  std::pair<int64_t, int64_t> place(int64_t bytes, int64_t rows);
  // The events and counter samples so far; add_stats() adds another process's to finish()'s.
  ExportStats stats() const;
  void add_stats(const ExportStats& other);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Kineto-style JSON per rank: DIR/rank-<r>.json (created if absent). Throws Error.
ExportStats export_kineto(const Store& s, const std::string& dir, const ExportOptions& opt);

// export_kineto in parts, for a store read a rank at a time (export_kineto_by_rank, sliced.h):
// what each rank's file takes from the whole store, then one file at a time from the rank's rows.
// The earliest time of a store's rows (INT64_MAX when none): the minimum over the slices is the
// whole store's, and export_base_of rounds it as export_base_ns does.
int64_t earliest_ns(const Store& s);
int64_t export_base_of(int64_t earliest);
struct KinetoExport {
  int64_t base = 0;       // export_base_ns of the whole store
  int32_t world = 0;      // the world size every file states
  bool recorded = false;  // clocks_as_recorded
};
KinetoExport kineto_export(const Store& header, int64_t earliest);
// The ranks whose files export_kineto writes (header's /ranks rows, opt.rank); creates `dir` and
// refuses (Error) an existing file among them without opt.force, before anything is written.
std::vector<const RankInfo*> kineto_files(const Store& header, const std::string& dir,
                                          const ExportOptions& opt);
// Rank ri's file from `s`, which holds the rank's rows (its slice, or the whole store).
void export_kineto_rank(const Store& s, const RankInfo& ri, const KinetoExport& k,
                        const std::string& dir, const ExportOptions& opt, Progress& progress,
                        ExportStats* st);

}  // namespace kernalyse
