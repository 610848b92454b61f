// The Kineto and Perfetto exports of a store a rank at a time (export_kineto_by_rank,
// export_perfetto_by_rank, kernalyse/sliced.h), under mpirun spread over the processes.
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <utility>

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

namespace {

// The Perfetto file's sections of events, in its order (PerfettoParts, export.h); the collective
// waits go between the launches and the counters' levels at the window's start.
enum PerfettoSection : int { kActivities, kAnnotations, kLaunches, kEntries, kCounters, kSections };

// How the sections' events are dealt out: in pieces, numbered in the file's order, of at most
// `rows` rows of a slice's activities, annotations or launches (a slice's counters: one piece).
// mine(c): piece c is formatted here (out.rows() set to its rows before, done(c) after); else
// elsewhere(c, its rows).
struct Deal {
  size_t rows = SIZE_MAX;
  std::function<bool(int64_t)> mine = [](int64_t) { return true; };
  std::function<void(int64_t)> done = [](int64_t) {};
  std::function<void(int64_t, int64_t)> elsewhere = [](int64_t, int64_t) {};
};

// Each section's pieces (Deal), a pass over its table's slices (rank order) before the next
// section's; `at(section)` before each and at(kSections) after the last. Every slice is read
// (its rows tell the pieces; --step's spans are every slice's).
void perfetto_sections(const std::string& file, PerfettoParts& out, const Store& cross,
                       const ExportOptions& eo, const std::optional<ClockInference>& inf,
                       const Deal& deal, const std::function<void(int)>& at) {
  Store buf;
  int64_t piece = 0;
  // Each slice of one section's table(s), on the clocks as exported: prep(slice) once, then its
  // pieces of count(slice) rows (none: one piece).
  auto each = [&](RankSlices& from, size_t (*count)(const Store&),
                  const std::function<void(const Store&)>& prep,
                  const std::function<void(const Store&)>& f) {
    buf =
        Store();  // a section's slices hold only its tables (read() leaves the others as they are)
    for (size_t k = 0; k < from.size(); ++k) {
      from.read(k, buf);
      if (inf) apply_clock_inference(buf, *inf);
      if (prep) prep(buf);
      const size_t n = count ? count(buf) : 0;
      size_t lo = 0;
      do {
        const size_t hi = n - lo > deal.rows ? lo + deal.rows : n;
        const int64_t c = piece++;
        if (deal.mine(c)) {
          out.rows(lo, hi);
          f(buf);
          deal.done(c);
        } else {
          deal.elsewhere(c, static_cast<int64_t>(hi - lo));
        }
        lo = hi;
      } while (lo < n);
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
    each(
        acts, [](const Store& s) { return s.activities.size(); },
        [&](const Store& s) {
          out.spans(s);
          coll_of.assign(s.activities.size(), -1);
          if (s.activities.size()) {
            const size_t at = static_cast<size_t>(
                std::lower_bound(cross_rank.begin(), cross_rank.end(), s.activities.rank.front()) -
                cross_rank.begin());
            const std::vector<uint32_t> rows = detail::cross_activity_rows(s);
            for (size_t j = 0; j < rows.size() && at + j < cross_coll.size(); ++j)
              coll_of[rows[j]] = cross_coll[at + j];
          }
        },
        [&](const Store& s) { out.activities(s, coll_of); });
  }
  at(kAnnotations);
  {
    RankSlices ann = only(&ColumnSelection::annotations);
    each(
        ann, [](const Store& s) { return s.annotations.size(); }, nullptr,
        [&](const Store& s) { out.annotations(s); });
  }
  at(kLaunches);
  {
    RankSlices calls = only(&ColumnSelection::launches);
    each(
        calls, [](const Store& s) { return s.launches.size(); }, nullptr,
        [&](const Store& s) { out.launches(s); });
  }
  RankSlices samples = only(&ColumnSelection::counters);
  at(kEntries);
  if (eo.from_ns && !eo.step)
    each(samples, nullptr, nullptr, [&](const Store& s) { out.counter_entries(s); });
  at(kCounters);
  each(samples, nullptr, nullptr, [&](const Store& s) { out.counters(s); });
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

// Under mpirun the writer (process 0) writes the file's header, waits and flows, and pieces of
// events formatted here and on the other processes, in turn (Deal). All on one host and a plain
// file: each process writes its own pieces into the file (the writer's temporary), where the
// writer places them (kData: 'S' and a piece's size; kControl: its offset), and formats as many
// as the writer. Else their events come to the writer in messages (kData: 'D' and events, a
// piece's last one 'C' and events) of about kMessage bytes, a few posted at a time, and the
// writer (writing, compressing every piece) formats one of each 1 + kRun (P - 1). At the end
// each other process sends 'Z' and its stats, or 'E' and its failure; the writer's last message
// to each (kControl: kEnd, or kAbort when it stopped) ends the exchange. Pieces of kPieceRows
// rows: formatted in a few ms each, so that no process waits long for another; a process keeps
// at most kPending pieces that wait for their places.
constexpr int kControl = 7101, kData = 7102;
constexpr int kEnd = -1, kAbort = -2, kPlace = 1;
constexpr size_t kMessage = size_t{8} << 20;
constexpr size_t kPieceRows = 16384;
constexpr size_t kPending = 4;
constexpr size_t kWriteSlice = size_t{256} << 10;
constexpr size_t kPieceBytes = size_t{8} << 20;  // reserved for a piece (a kernel's ~400 bytes)
constexpr int64_t kRun = 3;

// Piece c's process: of each run of 1 + run (P - 1) pieces the writer formats the first and each
// other process `run` in turn.
int piece_owner(int64_t c, int processes, int64_t run) {
  const int64_t at = c % (1 + run * (processes - 1));
  return at == 0 ? 0 : 1 + static_cast<int>((at - 1) / run);
}

// Thrown on a process that formats for the writer when the writer stopped (its failure is said).
struct Stopped {};

// A process but the writer: its pieces' events (diverted to add()) into the writer's temporary
// `shared` at their places, or (none) to the writer.
class Sender {
 public:
  Sender(const Spread& spread, PerfettoParts& out, std::string shared)
      : spread_(spread), out_(out), path_(std::move(shared)), msg_("D") {}
  ~Sender() {
    if (fd_ >= 0) ::close(fd_);
  }
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;
  int64_t run() const { return path_.empty() ? kRun : 1; }
  // The shared file opened (Error when it cannot be).
  void open() {
    if (path_.empty()) return;
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd_ < 0) throw Error(path_ + ": cannot open: " + std::strerror(errno));
  }
  void add(std::string_view b) {
    if (!path_.empty()) {
      piece_.append(b);
      return;
    }
    msg_.append(b);
    if (msg_.size() >= kMessage) post('D');
  }
  // Whether piece c is this process's; before each of them, the writer's messages so far.
  bool mine(int64_t c) {
    if (piece_owner(c, spread_.processes, run()) != spread_.process) return false;
    while (!controlled_ && from_writer(false)) {
    }
    if (stopped_) throw Stopped();
    return true;
  }
  // The piece formatted: the rest of its events (those the part buffers too), and its size to
  // the writer (it waits for its place), or its last message.
  void done() {
    out_.divert([this](std::string_view b) { add(b); });
    if (path_.empty()) {
      post('C');
      return;
    }
    Archive ar;
    ar.put<int64_t>(static_cast<int64_t>(piece_.size()));
    spread_.send(0, kData, "S" + ar.bytes());
    pending_.push_back(std::move(piece_));
    piece_.clear();
    if (!spare_.empty()) piece_ = std::move(spare_.back()), spare_.pop_back();
    piece_.reserve(kPieceBytes);
    while (pending_.size() > kPending && !controlled_) from_writer(true);
    if (stopped_) throw Stopped();
  }
  // After the pieces (or a failure, or the writer's stop): the pending pieces written, the end
  // of the stream, every message taken, and the writer's last message.
  void end(std::string failure) {
    try {
      while (failure.empty() && !pending_.empty() && !controlled_) from_writer(true);
      if (fd_ >= 0 && ::close(std::exchange(fd_, -1)) != 0 && failure.empty())
        throw Error(path_ + ": write error: " + std::strerror(errno));
    } catch (const std::exception& e) {
      failure = e.what();
    }
    failed_ = !failure.empty();  // places from now on: not written
    if (failure.empty()) {
      Archive ar;
      const ExportStats st = out_.stats();
      ar.put(st.events), ar.put(st.counters);
      msg_ = "Z" + ar.bytes();
    } else {
      msg_ = "E" + failure;
    }
    spread_.post(0, kData, std::move(msg_));
    spread_.sent();
    while (!controlled_) from_writer(true);
  }

 private:
  void post(char kind) {
    msg_[0] = kind;
    msg_ = spread_.post(0, kData, std::move(msg_));
    msg_.assign(1, 'D');
  }
  // The writer's next message (waiting for it with `wait`; false when there is none): the oldest
  // pending piece's place (the piece written there), or the last one (kEnd, kAbort).
  bool from_writer(bool wait) {
    if (!wait && !spread_.waiting(0, kControl)) return false;
    spread_.recv(0, kControl, ctl_);
    Archive ar(ctl_);
    const int kind = ar.get<int>();
    if (kind != kPlace) {
      controlled_ = true;
      stopped_ = kind == kAbort;
      return true;
    }
    const auto at = ar.get<int64_t>();
    const auto skip = static_cast<size_t>(ar.get<int64_t>());
    if (pending_.empty()) {
      if (failed_) return true;
      throw Error("internal error: MPI export: a place without a piece");
    }
    std::string p = std::move(pending_.front());
    pending_.pop_front();
    if (!failed_) write_at(std::string_view(p).substr(std::min(skip, p.size())), at);
    p.clear();
    spare_.push_back(std::move(p));
    return true;
  }
  // In slices of kWriteSlice: a write holds the file's lock throughout (the writer spins on it
  // meanwhile).
  void write_at(std::string_view b, int64_t at) {
    while (!b.empty()) {
      const ssize_t n =
          ::pwrite(fd_, b.data(), std::min(b.size(), kWriteSlice), static_cast<off_t>(at));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw Error(path_ + ": write error: " + std::strerror(n < 0 ? errno : EIO));
      b.remove_prefix(static_cast<size_t>(n)), at += n;
    }
  }

  const Spread& spread_;
  PerfettoParts& out_;
  const std::string path_;  // the shared file ("": none)
  int fd_ = -1;
  std::string msg_;    // without a shared file: the message being filled (kind, events)
  std::string piece_;  // with one: the piece being formatted
  std::vector<std::string> spare_;   // the memory of written ones
  std::deque<std::string> pending_;  // formatted pieces waiting for their places, oldest first
  std::string ctl_;
  bool controlled_ = false, stopped_ = false, failed_ = false;
};

// The writer's side: the others' pieces written or placed in the file in turn, their streams'
// ends.
class Receiver {
 public:
  Receiver(const Spread& spread, PerfettoParts& out)
      : spread_(spread), out_(out), ended_(spread.processes), controlled_(spread.processes) {}
  // Piece c (of `rows` rows) from process q: its events into the file, or its place to q. Throws
  // Error (a sender's failure).
  void piece(int q, int64_t rows) {
    for (;;) {
      spread_.recv(q, kData, msg_);
      const char kind = msg_.empty() ? '?' : msg_[0];
      if (kind == 'S') {
        Archive ar(msg_.substr(1));
        const auto [at, skip] = out_.place(ar.get<int64_t>(), rows);
        Archive place;
        place.put<int>(kPlace), place.put(at), place.put(skip);
        spread_.send(q, kControl, place.bytes());
        return;
      }
      if (kind == 'D' || kind == 'C') {
        out_.append(std::string_view(msg_).substr(1), kind == 'C' ? rows : 0);
        if (kind == 'C') return;
        continue;
      }
      ended_[q] = true;
      throw Error(kind == 'E' ? msg_.substr(1) : "internal error: MPI export: a piece missing");
    }
  }
  // After the pieces (`err`: the first failure so far, "" when none): each other process's stream
  // to its end (stopped first if there was a failure), their stats added when none; a failure
  // said there becomes `err`.
  void drain(std::string& err) {
    for (int q = 1; q < spread_.processes; ++q) {
      if (!err.empty() && !controlled_[q]) control(q, kAbort);
      while (!ended_[q]) {
        spread_.recv(q, kData, msg_);
        const char kind = msg_.empty() ? '?' : msg_[0];
        if (kind != 'Z' && kind != 'E') continue;  // a stopped process's rest
        ended_[q] = true;
        if (!err.empty()) break;
        if (kind == 'E') {
          err = msg_.substr(1);
          break;
        }
        Archive ar(msg_.substr(1));
        ExportStats st;
        st.events = ar.get<int64_t>(), st.counters = ar.get<int64_t>();
        out_.add_stats(st);
      }
    }
  }
  // The last control message: kEnd when all went well.
  void end(bool ok) {
    for (int q = 1; q < spread_.processes; ++q)
      if (!controlled_[q]) control(q, ok ? kEnd : kAbort);
  }

 private:
  void control(int q, int what) {
    Archive ar;
    ar.put<int>(what);
    spread_.send(q, kControl, ar.bytes());
    controlled_[q] = true;
  }

  const Spread& spread_;
  PerfettoParts& out_;
  std::string msg_;
  std::vector<char> ended_, controlled_;
};

// Every piece (Deal): the writer's formatted into the file, the others' formatted on their
// processes, written or placed in turn (Receiver, Sender; `shared`: the file they write into,
// "" none). Every process then knows the first failure (collective). The writer's stats.
ExportStats spread_sections(const std::string& file, PerfettoParts& out, const Store& cross,
                            const ExportOptions& eo, const std::optional<ClockInference>& inf,
                            const std::string& shared, const Spread& spread) {
  std::string err;
  ExportStats st;
  Deal deal;
  deal.rows = kPieceRows;
  const int64_t run = shared.empty() ? kRun : 1;
  if (spread.process == 0) {
    Receiver in(spread, out);
    deal.mine = [&](int64_t c) { return piece_owner(c, spread.processes, run) == 0; };
    deal.elsewhere = [&](int64_t c, int64_t rows) {
      in.piece(piece_owner(c, spread.processes, run), rows);
    };
    try {
      perfetto_sections(file, out, cross, eo, inf, deal, [&](int s) {
        if (s == kEntries) out.waits();
      });
    } catch (const std::exception& e) {
      err = e.what();
    }
    in.drain(err);
    try {
      if (err.empty()) st = out.finish();
    } catch (const std::exception& e) {
      err = e.what();
    }
    in.end(err.empty());
  } else {
    Sender sender(spread, out, shared);
    deal.mine = [&](int64_t c) { return sender.mine(c); };
    deal.done = [&](int64_t) { sender.done(); };
    std::string failure;
    try {
      sender.open();
      out.divert([&](std::string_view b) { sender.add(b); });
      perfetto_sections(file, out, cross, eo, inf, deal, [](int) {});
    } catch (const Stopped&) {
      // the writer stopped: its failure is said below
    } catch (const std::exception& e) {
      failure = e.what();
    }
    sender.end(failure);
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
  std::string err;
  try {
    out = writer ? std::make_unique<PerfettoParts>(path, eo) : std::make_unique<PerfettoParts>(eo);
  } catch (const Error& e) {
    err = e.what();
  }
  // The first failure; the writer's temporary, shared when every process runs on its host (a
  // plain file: gzip is the writer's alone).
  std::string shared;
  {
    char host[256] = {};
    ::gethostname(host, sizeof host - 1);
    Archive ar;
    ar.put(err), ar.put(std::string(host)), ar.put(out ? out->shared() : std::string());
    Archive all(spread.all_gather(ar.bytes()));
    std::string first_host;
    bool one_host = true;
    for (int p = 0; p < spread.processes; ++p) {
      const auto e = all.get<std::string>();
      const auto h = all.get<std::string>();
      const auto t = all.get<std::string>();
      if (err.empty()) err = e;
      if (p == 0) first_host = h, shared = t;
      one_host = one_host && h == first_host;
    }
    if (!err.empty()) throw Error(err);
    if (!one_host) shared.clear();
  }
  // Pass 1 (FirstPass, sliced like the Kineto export's) and, with a time window, a second pass
  // over the own slices for the tracks; every process's tracks then go to every process.
  const bool window = eo.from_ns || eo.to_ns;
  FirstPass p1(*slices, infer, true, lo, &spread, [&](const Store& s) {
    if (!window) out->plan(s, 0);
  });
  const std::optional<ClockInference>& inf = p1.inf;
  const auto [first, last] = detail::own_slices(slices->size(), &spread);
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
  return spread_sections(file, *out, p1.cross.store, eo, inf, shared, spread);
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
  perfetto_sections(file, out, cross, eo, inf, Deal(), [&](int s) {
    if (s == kEntries) out.waits();
  });
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
