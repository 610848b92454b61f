// Perfetto (Chrome trace-event) and Kineto-style JSON exports of a store. Streaming: events are
// written as they are visited through a buffered (optionally gzip) writer; no JSON DOM of events.
// Conventions in docs/exports.md.
#include "kernalyse/export.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "kernalyse/analysis.h"
#include "kernalyse/archive.h"
#include "kernalyse/atomic_file.h"
#include "kernalyse/checked.h"
#include "kernalyse/collectives.h"
#include "kernalyse/error.h"
#include "kernalyse/kineto_args.h"

namespace fs = std::filesystem;

namespace kernalyse {
namespace arg = kineto_arg;  // the Kineto argument names (kineto_args.h)
namespace {

bool ends_with(std::string_view s, std::string_view e) {
  return s.size() >= e.size() && s.compare(s.size() - e.size(), e.size(), e) == 0;
}

// Buffered writer to a temporary file (plain or gzip), renamed onto the target by commit(); or,
// diverted (or made without a file), to a function that takes each buffer's bytes.
class Writer {
 public:
  using Sink = std::function<void(std::string_view)>;
  explicit Writer(Sink sink) : sink_(std::move(sink)) { buf_.reserve(kCap + 4096); }
  Writer(const std::string& path, bool force) : path_(path) {
    const std::string& tmp_ = file_.emplace(path, force).tmp();
    gz_mode_ = ends_with(path, ".gz");
    if (gz_mode_) {
      gz_ = gzopen(tmp_.c_str(), "wb6");
      if (!gz_) throw Error(path + ": cannot create: " + std::strerror(errno));
    } else {
      f_ = std::fopen(tmp_.c_str(), "wb");
      if (!f_) throw Error(path + ": cannot create: " + std::strerror(errno));
    }
    buf_.reserve(kCap + 4096);
  }
  ~Writer() {
    if (f_) std::fclose(f_);
    if (gz_) gzclose(gz_);
  }
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  Writer& operator<<(std::string_view s) {
    buf_.append(s);
    if (buf_.size() >= kCap) flush();
    return *this;
  }
  Writer& operator<<(char c) {
    buf_.push_back(c);
    return *this;
  }
  Writer& num(int64_t v) {
    char b[24];
    int n = std::snprintf(b, sizeof b, "%lld", static_cast<long long>(v));
    buf_.append(b, static_cast<size_t>(n));
    return *this;
  }
  Writer& us(int64_t ns) { return *this << ns_to_us_text(ns); }
  // A JSON string literal (quotes included), escaped.
  Writer& str(std::string_view s) {
    buf_.push_back('"');
    for (char ch : s) {
      auto c = static_cast<unsigned char>(ch);
      if (c == '"' || c == '\\') {
        buf_.push_back('\\');
        buf_.push_back(ch);
      } else if (c < 0x20) {
        char b[8];
        std::snprintf(b, sizeof b, "\\u%04x", c);
        buf_.append(b);
      } else {
        buf_.push_back(ch);
      }
    }
    buf_.push_back('"');
    return *this;
  }
  void flush() {
    if (buf_.empty()) return;
    if (sink_)
      sink_(buf_);
    else
      write(buf_);
    buf_.clear();
  }
  // The bytes from now on to `to` (none: to the file again); those buffered go where they were
  // meant first.
  void divert(Sink to) {
    flush();
    sink_ = std::move(to);
  }
  // Bytes straight to the file, after those buffered.
  void raw(std::string_view s) {
    flush();
    write(s);
  }
  // The plain file's temporary ("" for gzip).
  std::string shared() const { return file_ && !gz_mode_ ? file_->tmp() : std::string(); }
  // Room for `n` bytes that another process writes (the plain file): where it starts.
  int64_t hole(int64_t n) {
    flush();
    if (!f_) throw Error("internal error: a Perfetto part without a plain file left a hole");
    const off_t at = ftello(f_);
    if (at < 0 || fseeko(f_, static_cast<off_t>(n), SEEK_CUR) != 0)
      throw Error(path_ + ": seek error: " + std::strerror(errno));
    return static_cast<int64_t>(at);
  }
  void commit() {
    divert(nullptr);
    if (gz_mode_) {
      int rc = gzclose(gz_);
      gz_ = nullptr;
      if (rc != Z_OK) throw Error(path_ + ": write error (gzip close)");
    } else {
      int rc = std::fclose(f_);
      f_ = nullptr;
      if (rc != 0) throw Error(path_ + ": write error: " + std::strerror(errno));
    }
    file_->commit();
  }

 private:
  void write(std::string_view s) {
    if (s.empty()) return;
    if (!file_) throw Error("internal error: a Perfetto part without a file written to");
    if (gz_mode_) {
      if (gzwrite(gz_, s.data(), static_cast<unsigned>(s.size())) != static_cast<int>(s.size()))
        throw Error(path_ + ": write error (gzip)");
    } else {
      // In slices: other processes may write into the file too (hole()), and a write holds the
      // file's lock throughout (the others spin on it meanwhile).
      for (size_t at = 0; at < s.size(); at += kSlice) {
        const size_t n = std::min(kSlice, s.size() - at);
        if (std::fwrite(s.data() + at, 1, n, f_) != n)
          throw Error(path_ + ": write error: " + std::strerror(errno));
      }
    }
  }
  static constexpr size_t kCap = 1 << 20;
  static constexpr size_t kSlice = 256 << 10;
  std::string path_;
  std::optional<AtomicFile> file_;  // the temporary, removed unless committed
  Sink sink_;
  bool gz_mode_ = false;
  FILE* f_ = nullptr;
  gzFile gz_ = nullptr;
  std::string buf_;
};

const char* kineto_cat(Kind k) {
  switch (k) {
    case Kind::Kernel:
      return "kernel";
    case Kind::Memcpy:
      return "gpu_memcpy";
    case Kind::Memset:
      return "gpu_memset";
    case Kind::Sync:
      return "cuda_sync";
    case Kind::HostOnStream:
      return "host_on_stream";
    default:
      return "gpu_other";
  }
}

// Row selection shared by both exports.
struct Selection {
  const Store& s;
  const ExportOptions& o;
  int64_t base;
  bool rank_ok(int32_t r) const { return !o.rank || *o.rank == r; }
  bool time_ok(int64_t st, int64_t en) const {
    if (o.from_ns && en - base < *o.from_ns) return false;
    if (o.from_ns && en - base == *o.from_ns && st != en) return false;
    if (o.to_ns && st - base >= *o.to_ns) return false;
    return true;
  }
  bool activity(size_t i) const {
    const auto& a = s.activities;
    return rank_ok(a.rank[i]) && (!o.step || a.step[i] == *o.step) &&
           time_ok(a.start_ns[i], a.end_ns[i]);
  }
  bool launch(size_t i) const {
    const auto& l = s.launches;
    return rank_ok(l.rank[i]) && (!o.step || l.step[i] == *o.step) &&
           time_ok(l.start_ns[i], l.end_ns[i]);
  }
  bool annotation(size_t i) const {
    const auto& n = s.annotations;
    return rank_ok(n.rank[i]) && (!o.step || n.step[i] == *o.step) &&
           time_ok(n.start_ns[i], n.end_ns[i]);
  }
};

std::vector<int32_t> nccl_index(const Store& s) {
  std::vector<int32_t> v(s.activities.size(), -1);
  for (size_t i = 0; i < s.nccl.size(); ++i)
    if (s.nccl.activity[i] < v.size()) v[s.nccl.activity[i]] = static_cast<int32_t>(i);
  return v;
}

// NCCL arguments in Kineto's spelling (what our importer, HTA and TraceLens read).
void write_nccl_args(Writer& w, const Store& s, int32_t n) {
  const NcclInfo& c = s.nccl;
  w << ",\"" << arg::kCollectiveName << "\":";
  w.str(s.strings.at(c.collective_id[n]));
  if (c.seq[n] >= 0) w << ",\"" << arg::kSeq << "\":", w.num(c.seq[n]);
  if (c.in_nelems[n] >= 0) w << ",\"" << arg::kInMsgNelems << "\":", w.num(c.in_nelems[n]);
  if (c.out_nelems[n] >= 0) w << ",\"" << arg::kOutMsgNelems << "\":", w.num(c.out_nelems[n]);
  if (c.msg_bytes[n] >= 0) w << ",\"" << arg::kInMsgSize << "\":", w.num(c.msg_bytes[n]);
  if (c.group_size[n] >= 0) w << ",\"" << arg::kGroupSize << "\":", w.num(c.group_size[n]);
  if (c.dtype_id[n]) w << ",\"" << arg::kDtype << "\":", w.str(s.strings.at(c.dtype_id[n]));
  w << ",\"" << arg::kPgName << "\":";
  w.str(s.strings.at(c.pg_name_id[n]));
  if (c.pg_desc_id[n]) w << ",\"" << arg::kPgDesc << "\":", w.str(s.strings.at(c.pg_desc_id[n]));
  if (c.pg_ranks_id[n]) w << ",\"" << arg::kPgRanks << "\":", w.str(s.strings.at(c.pg_ranks_id[n]));
  if (n < static_cast<int32_t>(c.comm_hash.size()) && c.comm_hash[n])
    w << ",\"comm hash\":" << std::to_string(c.comm_hash[n]);
  if (n < static_cast<int32_t>(c.peer.size()) && c.peer[n] >= 0)
    w << ",\"peer\":", w.num(c.peer[n]);
  // From the NCCL profiler plugin (schema 2); absent for imports.
  if (n < static_cast<int32_t>(c.comm_rank.size()) && c.comm_rank[n] >= 0)
    w << ",\"comm rank\":", w.num(c.comm_rank[n]);
  if (n < static_cast<int32_t>(c.algo_id.size()) && c.algo_id[n])
    w << ",\"algorithm\":", w.str(s.strings.at(c.algo_id[n]));
  if (n < static_cast<int32_t>(c.proto_id.size()) && c.proto_id[n])
    w << ",\"protocol\":", w.str(s.strings.at(c.proto_id[n]));
  if (n < static_cast<int32_t>(c.n_channels.size()) && c.n_channels[n] >= 0)
    w << ",\"channels\":", w.num(c.n_channels[n]);
}

// Rows [lo, hi) of rank r in a table sorted by rank (the store's order); all rows otherwise.
// The activity columns the exports render in their own way (track, times, name, category and
// the args above). Every other column of the store's list (store.h) is written as an arg named
// after it (string ids: the string, under the name without "_id"), when its value is known: a
// new column reaches the exports without a change here.
class ExtraActivityArgs {
 public:
  explicit ExtraActivityArgs(const Store& s) {
    static constexpr std::string_view kRendered[] = {"rank",        "device",   "stream", "kind",
                                                     "category",    "start_ns", "end_ns", "name_id",
                                                     "correlation", "step"};
    for_each_column(s.activities, [&](const auto& def, const auto& col) {
      const std::string_view name = def.name;
      if (col.empty() ||
          std::find(std::begin(kRendered), std::end(kRendered), name) != std::end(kRendered))
        return;
      using T = typename std::decay_t<decltype(col)>::value_type;
      const auto unknown = def.unknown;
      if constexpr (std::is_same_v<T, uint32_t>) {
        const std::string key =
            ",\"" + std::string(name.substr(0, name.size() - (name.ends_with("_id") ? 3 : 0))) +
            "\":";
        args_.push_back([&col, &s, key, unknown](Writer& w, size_t i) {
          if (col[i] != unknown) w << key, w.str(s.strings.at(col[i]));
        });
      } else {
        const std::string key = ",\"" + std::string(name) + "\":";
        args_.push_back([&col, key, unknown](Writer& w, size_t i) {
          if (col[i] != unknown) w << key, w.num(static_cast<int64_t>(col[i]));
        });
      }
    });
  }
  void write(Writer& w, size_t row) const {
    for (const auto& f : args_) f(w, row);
  }

 private:
  std::vector<std::function<void(Writer&, size_t)>> args_;
};

std::pair<size_t, size_t> rank_rows(const std::vector<int32_t>& col, int32_t r, bool sorted) {
  if (!sorted) return {0, col.size()};
  auto lo = std::lower_bound(col.begin(), col.end(), r);
  auto hi = std::upper_bound(lo, col.end(), r);
  return {static_cast<size_t>(lo - col.begin()), static_cast<size_t>(hi - col.begin())};
}

std::string rank_label(const RankInfo* ri, int32_t rank) {
  std::string s = "rank " + std::to_string(rank);
  if (ri && !ri->host.empty()) s += " \xC2\xB7 " + ri->host;
  if (ri && !ri->devices.empty())
    s += std::string(" \xC2\xB7 GPU") + (ri->devices.find(',') != std::string::npos ? "s " : " ") +
         ri->devices;
  if (ri && ri->emulated) s += " (EMULATED)";
  return s;
}

}  // namespace

int64_t export_base_ns(const Store& s) { return export_base_of(earliest_ns(s)); }

bool clocks_as_recorded(const Store& s) {
  if (s.ranks.empty()) return false;
  for (const auto& r : s.ranks)
    if (r.clock_method.rfind("none", 0) != 0) return false;
  return true;
}

namespace {
// A rank's clock as exported: the store's map from its recorded clock (docs/store.md), and
// whether that moved it at all, so that a reader can tell an export of the recorded clocks from
// an aligned one (docs/exports.md, "Time").
void clock_record(Writer& w, const RankInfo& ri) {
  w << "\"clock_method\":";
  w.str(ri.clock_method);
  w << ",\"clock_uncertainty_ns\":";
  w.num(ri.clock_uncertainty_ns);
  w << ",\"moved\":" << (ri.clock_offset_ns != 0 || ri.clock_drift != 0 ? "true" : "false");
  w << ",\"clock_offset_ns\":";
  w.num(ri.clock_offset_ns);
  char b[40];
  std::snprintf(b, sizeof b, "%.17g", ri.clock_drift);
  w << ",\"clock_drift\":" << std::string_view(b);
}

// All of a store's activity rows, matched into collective instances: the ledger's ids
// (--rank/--step/--from cut events only).
CollectiveMatch match_all(const Store& s) {
  std::vector<uint32_t> all_rows(s.activities.size());
  for (uint32_t i = 0; i < all_rows.size(); ++i) all_rows[i] = i;
  return match_collectives(s, all_rows);
}

}  // namespace

// The Perfetto export in its steps (PerfettoParts, export.h): tracks planned from every part, then
// the file's header and metadata, then each section of events for every part in turn, then the
// flows.
struct PerfettoParts::Impl {
  // Tracks (tid) per rank: 1 steps, 2 collective waits, 10+ streams by (device, stream), then
  // GPU annotation tracks, CPU annotation/NVTX threads and CPU launch threads.
  using TrackKey = std::tuple<int32_t, int, int64_t, int64_t>;  // rank, group, a, b
  struct Wait {
    int32_t rank;
    int64_t start, end, coll;
    int32_t last;
  };
  const std::string path;
  const ExportOptions opt;
  Writer out;
  // Known at start(): the header with the rows the match reads, the origin, the instances.
  const Store* cross = nullptr;
  int64_t base = 0;
  CollectiveMatch cm;
  std::vector<int64_t> coll_of_cross;
  std::set<int32_t> activity_ranks;  // ranks of selected activities (some may lack /ranks rows)
  std::map<int32_t, const RankInfo*> rinfo;
  std::vector<int32_t> ranks;
  std::set<int32_t> rank_set;
  std::map<TrackKey, int64_t> tid_of;
  std::map<TrackKey, std::string> tname;
  std::vector<Wait> waits;
  std::map<int32_t, std::pair<int64_t, int64_t>> step_span;  // --step: a rank's selected work
  std::optional<Progress> progress;
  std::optional<ProgressTicker> ticker;
  ExportStats st;
  bool first = true;  // no event written yet (before its separator)
  // Under mpirun (export_perfetto_by_rank): whether this process writes the file, whether its
  // events go elsewhere for now (divert) and then whether the file had an event yet.
  const bool writer = true;
  bool diverted = false, file_first = true;
  // rows(): the rows of its parts' activities, annotations and launches written, [lo, hi).
  size_t lo = 0, hi = SIZE_MAX;

  Impl(const std::string& p, const ExportOptions& o) : path(p), opt(o), out(p, o.force) {}
  explicit Impl(const ExportOptions& o) : opt(o), out(Writer::Sink()), writer(false) {}

  template <class F>
  void track(int32_t r, int g, int64_t x, int64_t y, F&& name) {
    TrackKey k{r, g, x, y};
    if (tid_of.count(k)) return;
    tname[k] = name();
    tid_of[k] = 0;  // numbered by start()
  }

  void plan(const Store& s, int64_t at) {
    const Selection sel{s, opt, at};
    const Activities& a = s.activities;
    const Annotations& an = s.annotations;
    const LaunchCalls& l = s.launches;
    for (size_t i = 0; i < a.size(); ++i) {
      if (sel.rank_ok(a.rank[i])) activity_ranks.insert(a.rank[i]);
      if (sel.activity(i))
        track(a.rank[i], 10, a.device[i], a.stream[i], [&] {
          return "GPU " + std::to_string(a.device[i]) + " stream " + std::to_string(a.stream[i]);
        });
    }
    for (size_t i = 0; i < an.size(); ++i) {
      if (!sel.annotation(i)) continue;
      auto k = static_cast<AnnotationKind>(an.kind[i]);
      if (k == AnnotationKind::Step)
        track(an.rank[i], 1, 0, 0, [] { return std::string("steps"); });
      else if (k == AnnotationKind::GpuUser)
        track(an.rank[i], 20, an.pid[i], an.tid[i], [&] {
          return "GPU " + std::to_string(an.pid[i]) + " stream " + std::to_string(an.tid[i]) +
                 " annotations";
        });
      else
        track(an.rank[i], 30, an.pid[i], an.tid[i] * 2 + (k == AnnotationKind::Nvtx), [&] {
          return std::string(k == AnnotationKind::Nvtx ? "NVTX" : "annotations") + " thread " +
                 std::to_string(an.tid[i]);
        });
    }
    for (size_t i = 0; i < l.size(); ++i)
      if (sel.launch(i))
        track(l.rank[i], 40, l.pid[i], l.tid[i],
              [&] { return "CPU thread " + std::to_string(l.tid[i]) + " (CUDA API)"; });
  }

  void plan_ranks() {
    for (const auto& r : cross->ranks) rinfo[r.rank] = &r;
    for (const auto& r : cross->ranks)
      if (!opt.rank || *opt.rank == r.rank) ranks.push_back(r.rank);
    for (int32_t r : activity_ranks)
      if (!rinfo.count(r)) rinfo[r] = nullptr, ranks.push_back(r);
    std::sort(ranks.begin(), ranks.end());
    ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
    rank_set.insert(ranks.begin(), ranks.end());
  }

  // Waits at matched collectives: each rank waits from its own arrival until the last arrival
  // (clamped to its kernel), on the rank's "collective wait" track.
  void plan_waits() {
    const Activities& a = cross->activities;
    const Selection sel{*cross, opt, base};
    for (const auto& m : cm.matched) {
      int64_t smax = INT64_MIN;
      int32_t last = -1;
      for (auto& [r, i, nccl_row] : m.arrivals)
        if (a.start_ns[i] > smax) smax = a.start_ns[i], last = r;
      for (auto& [r, i, nccl_row] : m.arrivals) {
        int64_t w = std::clamp(smax - a.start_ns[i], int64_t{0}, a.end_ns[i] - a.start_ns[i]);
        if (w > 0 && sel.activity(i)) {
          waits.push_back({r, a.start_ns[i], a.start_ns[i] + w, m.id, last});
          track(r, 2, 0, 0, [] { return std::string("collective wait"); });
        }
      }
    }
    std::stable_sort(waits.begin(), waits.end(), [](const Wait& x, const Wait& y) {
      return std::tie(x.rank, x.start) < std::tie(y.rank, y.start);
    });
  }

  // Track ids per rank from 1, in key order.
  void number_tracks() {
    int32_t cur = INT32_MIN;
    int64_t next = 0;
    for (auto& [k, tid] : tid_of) {
      if (std::get<0>(k) != cur) cur = std::get<0>(k), next = 1;
      tid = next++;
    }
  }

  void begin(Writer& w, std::string_view ph, int32_t pid, int64_t tid) {
    w << (first ? "" : ",\n") << "{\"ph\":\"" << ph << "\",\"pid\":";
    first = false;
    w.num(pid);
    w << ",\"tid\":";
    w.num(tid);
    ++st.events;
  }

  void xev(Writer& w, int32_t pid, int64_t tid, int64_t start, int64_t end, std::string_view name,
           std::string_view cat) {
    begin(w, "X", pid, tid);
    w << ",\"ts\":";
    w.us(start - base);
    w << ",\"dur\":";
    w.us(end - start);
    w << ",\"name\":";
    w.str(name);
    w << ",\"cat\":\"" << cat << "\",\"args\":{";
  }

  void header() {
    Writer& w = out;
    w << "{\"displayTimeUnit\":\"ns\",\"baseTimeNanoseconds\":";
    w.num(base);
    if (ranks.size() == 1) {
      const RankInfo* ri = rinfo[ranks[0]];
      w << ",\"distributedInfo\":{\"rank\": ";  // the space: HTA's rank regex, see export_kineto
      w.num(ranks[0]);
      w << ",\"world_size\":";
      w.num(ri ? ri->world_size : -1);
      w << "}";
    }
    if (cross->attrs.emulated) w << ",\"kernalyseSynthetic\":true";
    w << ",\"otherData\":{\"producer\":\"kernalyse export\",\"clock_domain\":";
    w.str(cross->attrs.clock_domain);
    w << ",\"ts_origin_epoch_ns\":";
    w.num(base);
    w << ",\"clocks\":[";
    for (size_t k = 0; k < ranks.size(); ++k) {
      w << (k ? ",{\"rank\":" : "{\"rank\":");
      w.num(ranks[k]);
      if (const RankInfo* ri = rinfo[ranks[k]]) {
        w << ',';
        clock_record(w, *ri);
      }
      w << '}';
    }
    w << "]},\n\"traceEvents\":[\n";
  }

  void metadata() {
    Writer& w = out;
    // Metadata: one process per rank, one thread per track, sorted by rank and track.
    for (int32_t r : ranks) {
      begin(w, "M", r, 0);
      w << ",\"name\":\"process_name\",\"args\":{\"name\":";
      w.str(rank_label(rinfo[r], r));
      w << "}}";
      begin(w, "M", r, 0);
      w << ",\"name\":\"process_sort_index\",\"args\":{\"sort_index\":";
      w.num(r);
      w << "}}";
    }
    for (auto& [k, tid] : tid_of) {
      begin(w, "M", std::get<0>(k), tid);
      w << ",\"name\":\"thread_name\",\"args\":{\"name\":";
      w.str(tname[k]);
      w << "}}";
      begin(w, "M", std::get<0>(k), tid);
      w << ",\"name\":\"thread_sort_index\",\"args\":{\"sort_index\":";
      w.num(tid);
      w << "}}";
    }
  }

  // GPU activities, per (rank, device, stream) in time order (the store's sort order).
  void activities(Writer& w, const Store& s, const std::vector<int64_t>& coll_of) {
    const Activities& a = s.activities;
    const Selection sel{s, opt, base};
    const size_t end = std::min(hi, a.size());
    std::vector<int32_t> nccl_of(end > lo ? end - lo : 0, -1);  // rows lo.. : their NCCL row
    for (size_t n = 0; n < s.nccl.size(); ++n)
      if (s.nccl.activity[n] >= lo && s.nccl.activity[n] < end)
        nccl_of[s.nccl.activity[n] - lo] = static_cast<int32_t>(n);
    const ExtraActivityArgs extra(s);
    for (size_t i = lo; i < end; ++i) {
      ticker->tick();
      if (!sel.activity(i)) continue;
      int64_t tid = tid_of[{a.rank[i], 10, a.device[i], a.stream[i]}];
      auto kind = static_cast<Kind>(a.kind[i]);
      xev(w, a.rank[i], tid, a.start_ns[i], a.end_ns[i], s.strings.at(a.name_id[i]),
          kineto_cat(kind));
      w << "\"" << arg::kDevice << "\":";
      w.num(a.device[i]);
      w << ",\"" << arg::kStream << "\":";
      w.num(a.stream[i]);
      if (a.correlation[i] != kNoCorrelation)
        w << ",\"" << arg::kCorrelation << "\":", w.num(a.correlation[i]);
      w << ",\"category\":\"" << to_string(static_cast<Category>(a.category[i])) << "\"";
      if (a.step[i] != kNoStep) w << ",\"step\":", w.num(a.step[i]);
      extra.write(w, i);
      if (nccl_of[i - lo] >= 0 && kind == Kind::Kernel) write_nccl_args(w, s, nccl_of[i - lo]);
      if (coll_of[i] >= 0) w << ",\"collective id\":", w.num(coll_of[i]);
      w << "}}";
    }
  }

  // Annotations (steps, user ranges, GPU annotations, NVTX), per rank in start order.
  void annotations(Writer& w, const Store& s) {
    const Annotations& an = s.annotations;
    const Selection sel{s, opt, base};
    for (size_t i = lo; i < std::min(hi, an.size()); ++i) {
      ticker->tick();
      if (!sel.annotation(i)) continue;
      auto k = static_cast<AnnotationKind>(an.kind[i]);
      int64_t tid =
          k == AnnotationKind::Step ? tid_of[{an.rank[i], 1, 0, 0}]
          : k == AnnotationKind::GpuUser
              ? tid_of[{an.rank[i], 20, an.pid[i], an.tid[i]}]
              : tid_of[{an.rank[i], 30, an.pid[i], an.tid[i] * 2 + (k == AnnotationKind::Nvtx)}];
      const char* cat = k == AnnotationKind::GpuUser ? "gpu_user_annotation"
                        : k == AnnotationKind::Nvtx  ? "nvtx"
                                                     : "user_annotation";
      xev(w, an.rank[i], tid, an.start_ns[i], an.end_ns[i], s.strings.at(an.name_id[i]), cat);
      // GPU annotations carry no device/stream args: with a stream arg the importer (like HTA)
      // would take them for GPU work; the track name says where they ran.
      if (k != AnnotationKind::GpuUser) {
        w << "\"os pid\":";
        w.num(an.pid[i]);
        w << ",\"os tid\":";
        w.num(an.tid[i]);
      }
      w << "}}";
    }
  }

  // CUDA API calls (launches), per CPU thread in start order.
  void launches(Writer& w, const Store& s) {
    const LaunchCalls& l = s.launches;
    const Selection sel{s, opt, base};
    for (size_t i = lo; i < std::min(hi, l.size()); ++i) {
      ticker->tick();
      if (!sel.launch(i)) continue;
      xev(w, l.rank[i], tid_of[{l.rank[i], 40, l.pid[i], l.tid[i]}], l.start_ns[i], l.end_ns[i],
          s.strings.at(l.name_id[i]), "cuda_runtime");
      w << "\"os pid\":";
      w.num(l.pid[i]);
      w << ",\"os tid\":";
      w.num(l.tid[i]);
      if (l.correlation[i] != kNoCorrelation)
        w << ",\"" << arg::kCorrelation << "\":", w.num(l.correlation[i]);
      w << "}}";
    }
  }

  void collective_waits() {
    Writer& w = out;
    for (const auto& x : waits) {
      ticker->tick();
      const Collective& m = cm.matched[static_cast<size_t>(x.coll)];
      xev(w, x.rank, tid_of[{x.rank, 2, 0, 0}], x.start, x.end,
          "wait for rank " + std::to_string(x.last) + " (" + m.op + ")", "wait");
      w << "\"collective id\":";
      w.num(x.coll);
      w << ",\"last rank\":";
      w.num(x.last);
      w << ",\"wait_ns\":";
      w.num(x.end - x.start);
      w << "}}";
    }
  }

  // --step: each rank's selected GPU work's span (its counter samples outside it are left out).
  void add_step_spans(const Store& s) {
    const Activities& a = s.activities;
    const Selection sel{s, opt, base};
    for (size_t i = 0; i < a.size(); ++i)
      if (sel.activity(i)) {
        auto [it, fresh] = step_span.try_emplace(a.rank[i], a.start_ns[i], a.end_ns[i]);
        if (!fresh)
          it->second = {std::min(it->second.first, a.start_ns[i]),
                        std::max(it->second.second, a.end_ns[i])};
      }
  }

  // Counters (GPU memory in use, power) on the rank's process: one counter track per device
  // and name. With --step only samples inside the rank's selected GPU work count. A counter is a
  // step function: with --from, the value in effect when the window opens is written at its
  // start (the last sample before it), so every track starts with its level: `entries` writes
  // those (every part's before any part's samples), else the samples.
  void counters(Writer& w, const Store& s, bool entries) {
    const Counters& c = s.counters;
    const bool complete = c.rank.size() == c.size() && c.device.size() == c.size() &&
                          c.name_id.size() == c.size() && c.value.size() == c.size();
    if (!complete) return;
    struct Row {
      size_t i;
      int64_t ts;  // when to write it: its own time, or the window's start for an entry value
    };
    std::vector<Row> rows;
    if (entries) {
      if (!opt.from_ns || opt.step) return;
      std::map<std::tuple<int32_t, int32_t, uint32_t>, size_t> entry;  // track → last row before
      for (size_t i = 0; i < c.size(); ++i)
        if (rank_set.count(c.rank[i]) && c.ts_ns[i] - base < *opt.from_ns) {
          auto [it, fresh] = entry.try_emplace({c.rank[i], c.device[i], c.name_id[i]}, i);
          if (!fresh && c.ts_ns[i] >= c.ts_ns[it->second]) it->second = i;
        }
      for (const auto& [track, i] : entry) rows.push_back({i, base + *opt.from_ns});
    } else {
      for (size_t i = 0; i < c.size(); ++i) rows.push_back({i, c.ts_ns[i]});
    }
    const Selection sel{s, opt, base};
    for (const auto& [i, ts] : rows) {
      int32_t r = c.rank[i];
      if (!rank_set.count(r) || (!entries && !sel.time_ok(ts, ts))) continue;
      if (opt.step) {
        auto it = step_span.find(r);
        if (it == step_span.end() || c.ts_ns[i] < it->second.first ||
            c.ts_ns[i] > it->second.second)
          continue;
      }
      const std::string& name = s.strings.at(c.name_id[i]);
      std::string dev = "GPU " + std::to_string(c.device[i]);
      const char* unit = "value";
      std::string track = dev + " " + name;
      if (name == kCounterGpuMemory)
        track = dev + " memory allocated", unit = "bytes";
      else if (name == kCounterPower)
        track = dev + " power", unit = "mW";
      begin(w, "C", r, 0);
      w << ",\"ts\":";
      w.us(ts - base);
      w << ",\"name\":";
      w.str(track);
      w << ",\"cat\":\"counter\",\"args\":{\"" << unit << "\":";
      w.num(c.value[i]);
      w << "}}";
      ++st.counters;
    }
  }

  // Flows: from the last arriver's kernel to each other rank's kernel of the same instance.
  void flows() {
    Writer& w = out;
    const Activities& a = cross->activities;
    const Selection sel{*cross, opt, base};
    int64_t flow_id = 0;
    for (const auto& m : cm.matched) {
      uint32_t li = m.arrivals[0].row;
      int32_t lr = m.arrivals[0].rank;
      for (auto& [r, i, nccl_row] : m.arrivals)
        if (a.start_ns[i] > a.start_ns[li]) li = i, lr = r;
      if (!sel.activity(li)) continue;
      const std::string& name = m.op;
      for (auto& [r, i, nccl_row] : m.arrivals) {
        if (i == li || !sel.activity(i)) continue;
        ++flow_id;
        begin(w, "s", lr, tid_of[{lr, 10, a.device[li], a.stream[li]}]);
        w << ",\"ts\":";
        w.us(a.start_ns[li] - base);
        w << ",\"id\":";
        w.num(flow_id);
        w << ",\"name\":";
        w.str(name);
        w << ",\"cat\":\"collective\",\"args\":{\"collective id\":";
        w.num(m.id);
        w << "}}";
        begin(w, "f", r, tid_of[{r, 10, a.device[i], a.stream[i]}]);
        w << ",\"ts\":";
        w.us(a.start_ns[i] - base);
        w << ",\"id\":";
        w.num(flow_id);
        w << ",\"bp\":\"e\",\"name\":";
        w.str(name);
        w << ",\"cat\":\"collective\",\"args\":{\"collective id\":";
        w.num(m.id);
        w << "}}";
        ++st.flows;
      }
    }
  }
};

PerfettoParts::PerfettoParts(const std::string& path, const ExportOptions& opt)
    : impl_(std::make_unique<Impl>(path, opt)) {}

PerfettoParts::PerfettoParts(const ExportOptions& opt) : impl_(std::make_unique<Impl>(opt)) {}

PerfettoParts::~PerfettoParts() = default;

void PerfettoParts::plan(const Store& part, int64_t earliest) {
  impl_->plan(part, export_base_of(earliest));
}

void PerfettoParts::start(const Store& cross, int64_t earliest, int64_t rows) {
  Impl& x = *impl_;
  x.cross = &cross;
  x.base = export_base_of(earliest);
  x.cm = match_all(cross);
  x.coll_of_cross = collective_of_row(cross, x.cm);
  x.plan_ranks();
  x.plan_waits();
  x.number_tracks();
  // Rows visited (kept or filtered out), known up front; flows are few and not counted.
  x.progress.emplace("writing " + x.path, rows + static_cast<int64_t>(x.waits.size()), "events",
                     x.opt.progress);
  x.ticker.emplace(*x.progress);
  if (x.writer) {
    x.st.files = 1;
    x.header();
    x.metadata();
  } else {
    x.first = false;  // its events follow some in the file: each after its separator
  }
}

std::string PerfettoParts::tracks() const {
  const Impl& x = *impl_;
  Archive ar;
  ar.put(std::vector<int32_t>(x.activity_ranks.begin(), x.activity_ranks.end()));
  ar.put<uint64_t>(x.tname.size());
  for (const auto& [k, name] : x.tname) {
    ar.put(std::get<0>(k)), ar.put(std::get<1>(k)), ar.put(std::get<2>(k)), ar.put(std::get<3>(k));
    ar.put(name);
  }
  return ar.bytes();
}

void PerfettoParts::add_tracks(const std::string& bytes) {
  Impl& x = *impl_;
  Archive ar(bytes);
  for (int32_t r : ar.get<std::vector<int32_t>>()) x.activity_ranks.insert(r);
  for (auto n = ar.get<uint64_t>(); n > 0; --n) {
    const auto r = ar.get<int32_t>();
    const auto g = ar.get<int>();
    const auto a = ar.get<int64_t>(), b = ar.get<int64_t>();
    const auto name = ar.get<std::string>();
    x.track(r, g, a, b, [&] { return name; });
  }
}

void PerfettoParts::divert(std::function<void(std::string_view)> to) {
  Impl& x = *impl_;
  if (to && !x.diverted)
    x.file_first = x.first, x.first = false;  // each diverted event after its separator
  else if (!to && x.diverted)
    x.first = x.file_first;
  x.diverted = static_cast<bool>(to);
  x.out.divert(std::move(to));
}

void PerfettoParts::append(std::string_view events, int64_t rows) {
  Impl& x = *impl_;
  if (x.diverted || !x.writer)
    throw Error("internal error: Perfetto events appended where the file is not written");
  if (x.first && !events.empty()) {  // the file's first event: without its separator
    if (events.substr(0, 2) != ",\n")
      throw Error("internal error: Perfetto events appended without their separator");
    events.remove_prefix(2);
    x.first = false;
  }
  x.out.raw(events);
  x.progress->advance(rows);
}

std::string PerfettoParts::shared() const {
  return impl_->writer ? impl_->out.shared() : std::string();
}

std::pair<int64_t, int64_t> PerfettoParts::place(int64_t bytes, int64_t rows) {
  Impl& x = *impl_;
  if (x.diverted || !x.writer)
    throw Error("internal error: Perfetto events placed where the file is not written");
  int64_t skip = 0;
  if (x.first && bytes > 0) skip = 2, x.first = false;  // the file's first event: no separator
  const int64_t at = x.out.hole(bytes - skip);
  x.progress->advance(rows);
  return {at, skip};
}

ExportStats PerfettoParts::stats() const { return impl_->st; }

void PerfettoParts::add_stats(const ExportStats& other) {
  impl_->st.events += other.events;
  impl_->st.counters += other.counters;
}

const std::vector<int64_t>& PerfettoParts::cross_collectives() const {
  return impl_->coll_of_cross;
}

void PerfettoParts::activities(const Store& part, const std::vector<int64_t>& coll_of) {
  if (impl_->opt.step && impl_->lo == 0 && impl_->hi == SIZE_MAX) impl_->add_step_spans(part);
  impl_->activities(impl_->out, part, coll_of);
}

void PerfettoParts::rows(size_t lo, size_t hi) { impl_->lo = lo, impl_->hi = hi; }

void PerfettoParts::spans(const Store& part) {
  if (impl_->opt.step) impl_->add_step_spans(part);
}

void PerfettoParts::annotations(const Store& part) { impl_->annotations(impl_->out, part); }

void PerfettoParts::launches(const Store& part) { impl_->launches(impl_->out, part); }

void PerfettoParts::waits() { impl_->collective_waits(); }

void PerfettoParts::counter_entries(const Store& part) { impl_->counters(impl_->out, part, true); }

void PerfettoParts::counters(const Store& part) { impl_->counters(impl_->out, part, false); }

ExportStats PerfettoParts::finish() {
  Impl& x = *impl_;
  x.flows();
  x.out << "\n]}\n";
  x.out.commit();
  x.ticker->flush();
  x.progress->finish();
  return x.st;
}

// ------------------------------------------------------------------------------- Perfetto
ExportStats export_perfetto(const Store& s, const std::string& path, const ExportOptions& opt) {
  PerfettoParts x(path, opt);
  const int64_t earliest = earliest_ns(s);
  x.plan(s, earliest);
  x.start(s, earliest,
          static_cast<int64_t>(s.activities.size() + s.annotations.size() + s.launches.size()));
  x.activities(s, x.cross_collectives());
  x.annotations(s);
  x.launches(s);
  x.waits();
  x.counter_entries(s);
  x.counters(s);
  return x.finish();
}

namespace {

// One rank's Kineto file: its header, then its GPU work, launches, annotations and GPU memory
// counter, written through one event writer.
struct KinetoRankFile {
  const Store& s;
  const Selection& sel;
  const ExtraActivityArgs& extra;
  const std::vector<int32_t>& nccl_of;
  const RankInfo* ri;
  int32_t r;
  int64_t base;
  Writer& w;
  ProgressTicker& ticker;
  ExportStats& st;
  bool first = true;                  // the next event is the list's first
  std::unordered_set<int64_t> ran{};  // correlations of the exported launch → GPU work pairs

  void header(int32_t world) {
    w << "{\"schemaVersion\":1,\"deviceProperties\":[";
    {
      std::string d = ri->devices;
      bool firstd = true;
      size_t pos = 0;
      while (!d.empty() && pos <= d.size()) {
        size_t c = d.find(',', pos);
        std::string id = d.substr(pos, c == std::string::npos ? std::string::npos : c - pos);
        if (!id.empty()) {
          w << (firstd ? "" : ",") << "{\"id\":" << id << ",\"name\":";
          w.str(ri->device_name);
          w << "}";
          firstd = false;
        }
        if (c == std::string::npos) break;
        pos = c + 1;
      }
    }
    // "rank": N with a space: HTA v0.6.1 finds a file's rank with the regex "rank":\s+(\d+) on
    // the raw text (hta/common/trace_file.py, create_rank_to_trace_dict); "rank":N gives none.
    w << "],\"distributedInfo\":{\"backend\":\"nccl\",\"rank\": ";
    w.num(r);
    w << ",\"world_size\":";
    w.num(ri->world_size >= 0 ? ri->world_size : world);
    w << "},\"baseTimeNanoseconds\":";
    w.num(base);
    if (ri->emulated) w << ",\"kernalyseSynthetic\":true";
    w << ",\"displayTimeUnit\":\"ms\",\"traceName\":";
    w.str(ri->source);
    w << ",\"kernalyseClock\":{";
    clock_record(w, *ri);
    w << ",\"host\":";
    w.str(ri->host);
    w << "},\n\"traceEvents\":[\n";
  }

  void xev(int64_t pid, int64_t tid, int64_t start, int64_t end, std::string_view name,
           std::string_view cat) {
    w << (first ? "" : ",\n") << "{\"ph\":\"X\",\"cat\":\"" << cat << "\",\"name\":";
    first = false;
    w.str(name);
    w << ",\"pid\":";
    w.num(pid);
    w << ",\"tid\":";
    w.num(tid);
    w << ",\"ts\":";
    w.us(start - base);
    w << ",\"dur\":";
    w.us(end - start);
    w << ",\"args\":{";
    ++st.events;
  }

  void link_launches(size_t a_lo, size_t a_hi, size_t l_lo, size_t l_hi) {
    const auto& a = s.activities;
    const auto& l = s.launches;
    // The launch → GPU work arrows ("ac2g" flows, id = correlation) as Kineto writes them: HTA
    // and TraceLens read them; only pairs whose both ends are exported.
    std::unordered_set<int64_t> launched;
    for (size_t i = l_lo; i < l_hi; ++i)
      if (l.rank[i] == r && sel.launch(i) && l.correlation[i] != kNoCorrelation)
        launched.insert(l.correlation[i]);
    for (size_t i = a_lo; i < a_hi; ++i)
      if (a.rank[i] == r && sel.activity(i) && a.correlation[i] != kNoCorrelation &&
          is_gpu_work(static_cast<Kind>(a.kind[i])) && launched.count(a.correlation[i]))
        ran.insert(a.correlation[i]);
  }

  void flow(char ph, int64_t id, int64_t pid, int64_t tid, int64_t ts) {
    w << ",\n{\"ph\":\"" << std::string_view(&ph, 1) << "\",\"id\":";
    w.num(id);
    w << ",\"pid\":";
    w.num(pid);
    w << ",\"tid\":";
    w.num(tid);
    w << ",\"ts\":";
    w.us(ts - base);
    w << ",\"cat\":\"ac2g\",\"name\":\"ac2g\"" << (ph == 'f' ? ",\"bp\":\"e\"}" : "}");
  }

  void activities(size_t a_lo, size_t a_hi) {
    const auto& a = s.activities;
    for (size_t i = a_lo; i < a_hi; ++i) {
      ticker.tick();
      if (a.rank[i] != r || !sel.activity(i)) continue;
      auto kind = static_cast<Kind>(a.kind[i]);
      xev(a.device[i], a.stream[i], a.start_ns[i], a.end_ns[i], s.strings.at(a.name_id[i]),
          kineto_cat(kind));
      w << "\"" << arg::kDevice << "\":";
      w.num(a.device[i]);
      w << ",\"" << arg::kStream << "\":";
      // A context-wide sync (stream -1) as CUPTI and Kineto write it: stream 4294967295, tid -1.
      w.num(kind == Kind::Sync && a.stream[i] == -1 ? int64_t{4294967295} : int64_t{a.stream[i]});
      if (a.correlation[i] != kNoCorrelation)
        w << ",\"" << arg::kCorrelation << "\":", w.num(a.correlation[i]);
      extra.write(w, i);
      if (nccl_of[i] >= 0 && kind == Kind::Kernel) write_nccl_args(w, s, nccl_of[i]);
      w << "}}";
      if (is_gpu_work(kind) && a.correlation[i] != kNoCorrelation && ran.count(a.correlation[i]))
        flow('f', a.correlation[i], a.device[i], a.stream[i], a.start_ns[i]);
    }
  }

  void launches(size_t l_lo, size_t l_hi) {
    const auto& l = s.launches;
    for (size_t i = l_lo; i < l_hi; ++i) {
      ticker.tick();
      if (l.rank[i] != r || !sel.launch(i)) continue;
      xev(l.pid[i], l.tid[i], l.start_ns[i], l.end_ns[i], s.strings.at(l.name_id[i]),
          "cuda_runtime");
      if (l.correlation[i] != kNoCorrelation)
        w << "\"" << arg::kCorrelation << "\":", w.num(l.correlation[i]);
      w << "}}";
      if (l.correlation[i] != kNoCorrelation && ran.count(l.correlation[i]))
        flow('s', l.correlation[i], l.pid[i], l.tid[i], l.start_ns[i]);
    }
  }

  void annotations(size_t n_lo, size_t n_hi) {
    const auto& an = s.annotations;
    for (size_t i = n_lo; i < n_hi; ++i) {
      ticker.tick();
      if (an.rank[i] != r || !sel.annotation(i)) continue;
      auto k = static_cast<AnnotationKind>(an.kind[i]);
      // Kineto has no NVTX category: NVTX ranges become user annotations. GPU annotations: pid
      // device, tid stream, no stream arg (with one, importers take them for GPU work).
      bool gpu = k == AnnotationKind::GpuUser;
      xev(an.pid[i], an.tid[i], an.start_ns[i], an.end_ns[i], s.strings.at(an.name_id[i]),
          gpu ? "gpu_user_annotation" : "user_annotation");
      w << "}}";
    }
  }

  void memory(bool c_sorted) {
    // GPU memory in use as the PyTorch profiler writes it (profile_memory=True): a "[memory]"
    // instant per change, which our importer (and HTA's memory views) read back.
    const Counters& c = s.counters;
    int64_t mem_id = -1;
    for (size_t i = 0; i < s.strings.size() && mem_id < 0; ++i)
      if (s.strings.at(static_cast<uint32_t>(i)) == kCounterGpuMemory)
        mem_id = static_cast<int64_t>(i);
    std::map<int32_t, int64_t> prev;  // device → last value, for "Bytes" (the change)
    auto [k_lo, k_hi] = rank_rows(c.rank, r, c_sorted);
    for (size_t i = k_lo; mem_id >= 0 && i < k_hi; ++i) {
      if (c.rank[i] != r || c.name_id[i] != static_cast<uint32_t>(mem_id)) continue;
      const int64_t delta = c.value[i] - prev[c.device[i]];
      prev[c.device[i]] = c.value[i];
      if (!sel.time_ok(c.ts_ns[i], c.ts_ns[i])) continue;
      w << (first ? "" : ",\n") << "{\"ph\":\"i\",\"s\":\"t\",\"cat\":\"cpu_instant_event\",";
      first = false;
      w << "\"name\":\"[memory]\",\"pid\":0,\"tid\":0,\"ts\":";
      w.us(c.ts_ns[i] - base);
      w << ",\"args\":{\"" << arg::kDeviceType << "\":1,\"" << arg::kDeviceId << "\":";
      w.num(c.device[i]);
      w << ",\"" << arg::kBytes << "\":";
      w.num(delta);
      w << ",\"" << arg::kTotalAllocated << "\":";
      w.num(c.value[i]);
      w << "}}";
      ++st.events;
    }
  }
};

// What a store's rows are to the Kineto export, worked out once per store: each table sorted by
// rank (the store's order: a rank's rows found by bisection), the activities' /nccl rows, the
// activity columns written as args.
struct KinetoRows {
  explicit KinetoRows(const Store& s)
      : a_sorted(sorted(s.activities.rank)),
        l_sorted(sorted(s.launches.rank)),
        n_sorted(sorted(s.annotations.rank)),
        c_sorted(sorted(s.counters.rank)),
        nccl_of(nccl_index(s)),
        extra(s) {}
  static bool sorted(const std::vector<int32_t>& v) { return std::is_sorted(v.begin(), v.end()); }
  bool a_sorted, l_sorted, n_sorted, c_sorted;
  std::vector<int32_t> nccl_of;
  ExtraActivityArgs extra;
};

// One rank's file: what export_kineto and export_kineto_rank write, from a store holding the
// rank's rows (the whole store or its slice); `rows` is s's.
void write_rank_file(const Store& s, const RankInfo& ri, const KinetoExport& k,
                     const std::string& dir, const ExportOptions& opt, const KinetoRows& rows,
                     ProgressTicker& ticker, ExportStats* st) {
  const auto& a = s.activities;
  const auto& l = s.launches;
  const auto& an = s.annotations;
  const Selection sel{s, opt, k.base};
  const int32_t r = ri.rank;
  std::string p = (fs::path(dir) / ("rank-" + std::to_string(r) + ".json")).string();
  Writer w(p, opt.force);
  ++st->files;
  // Clocks as recorded (an import not aligned): each file keeps its source's own base time, so
  // that its ts are the source's, digit for digit (HTA reads ts and ignores the base).
  // Otherwise one origin for all: the alignment is baked into ts.
  const int64_t rbase = k.recorded ? ri.base_time_ns : k.base;
  KinetoRankFile f{s, sel, rows.extra, rows.nccl_of, &ri, r, rbase, w, ticker, *st};
  f.header(k.world);
  auto [a_lo, a_hi] = rank_rows(a.rank, r, rows.a_sorted);
  auto [l_lo, l_hi] = rank_rows(l.rank, r, rows.l_sorted);
  f.link_launches(a_lo, a_hi, l_lo, l_hi);
  f.activities(a_lo, a_hi);
  f.launches(l_lo, l_hi);
  auto [n_lo, n_hi] = rank_rows(an.rank, r, rows.n_sorted);
  f.annotations(n_lo, n_hi);
  f.memory(rows.c_sorted);
  w << "\n]}\n";
  w.commit();
}

}  // namespace

int64_t earliest_ns(const Store& s) {
  int64_t m = INT64_MAX;
  for (int64_t t : s.activities.start_ns) m = std::min(m, t);
  for (int64_t t : s.launches.start_ns) m = std::min(m, t);
  for (int64_t t : s.annotations.start_ns) m = std::min(m, t);
  for (int64_t t : s.counters.ts_ns) m = std::min(m, t);
  return m;
}

int64_t export_base_of(int64_t earliest) {
  if (earliest == INT64_MAX) return 0;
  int64_t f = earliest / 1000 * 1000;
  if (f > earliest) f -= 1000;  // negative times: round down
  return f;
}

KinetoExport kineto_export(const Store& header, int64_t earliest) {
  KinetoExport k;
  k.base = export_base_of(earliest);
  for (const auto& r : header.ranks)
    k.world = std::max(k.world, std::max(r.world_size, r.rank + 1));
  k.recorded = clocks_as_recorded(header);
  return k;
}

std::vector<const RankInfo*> kineto_files(const Store& header, const std::string& dir,
                                          const ExportOptions& opt) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw Error(dir + ": cannot create directory: " + ec.message());
  std::vector<const RankInfo*> ranks;
  for (const auto& r : header.ranks)
    if (!opt.rank || *opt.rank == r.rank) ranks.push_back(&r);
  // Refuse before writing anything if any output exists.
  if (!opt.force)
    for (const RankInfo* ri : ranks) {
      std::string p = (fs::path(dir) / ("rank-" + std::to_string(ri->rank) + ".json")).string();
      if (fs::exists(p, ec)) throw Error(p + ": exists (use --force to replace it)");
    }
  return ranks;
}

void export_kineto_rank(const Store& s, const RankInfo& ri, const KinetoExport& k,
                        const std::string& dir, const ExportOptions& opt, Progress& progress,
                        ExportStats* st) {
  ProgressTicker ticker(progress);
  write_rank_file(s, ri, k, dir, opt, KinetoRows(s), ticker, st);
}

// --------------------------------------------------------------------------------- Kineto
ExportStats export_kineto(const Store& s, const std::string& dir, const ExportOptions& opt) {
  const KinetoExport k = kineto_export(s, earliest_ns(s));
  const KinetoRows rows(s);
  const std::vector<const RankInfo*> ranks = kineto_files(s, dir, opt);
  int64_t total = 0;  // progress total: the selected ranks' rows, visited once each
  for (const RankInfo* ri : ranks) {
    auto [a0, a1] = rank_rows(s.activities.rank, ri->rank, rows.a_sorted);
    auto [l0, l1] = rank_rows(s.launches.rank, ri->rank, rows.l_sorted);
    auto [n0, n1] = rank_rows(s.annotations.rank, ri->rank, rows.n_sorted);
    total += static_cast<int64_t>((a1 - a0) + (l1 - l0) + (n1 - n0));
  }
  Progress progress("writing " + dir + " (" + std::to_string(ranks.size()) + " rank files)", total,
                    "events", opt.progress);
  ProgressTicker ticker(progress);
  ExportStats st;
  for (const RankInfo* ri : ranks) write_rank_file(s, *ri, k, dir, opt, rows, ticker, &st);
  ticker.flush();
  progress.finish();
  return st;
}

}  // namespace kernalyse
