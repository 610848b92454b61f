// Spool → store without MPI (kernalyse/spool_store.h): the collector's per-rank conversion and
// the offline crash recovery (kernalyse-merge --spool).
#include "kernalyse/spool_store.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <map>
#include <set>
#include <string_view>
#include <tuple>
#include <unordered_map>

#include "kernalyse/checked.h"
#include "kernalyse/classify.h"
#include "kernalyse/emu.h"
#include "kernalyse/spool.h"
#include "kernalyse/store_io.h"
#include "kernalyse/utc.h"

namespace fs = std::filesystem;

namespace kernalyse {

namespace {

// Ranks one spool directory may hold (docs/limits.md): bounds the per-rank rows of a recovery.
constexpr int64_t kMaxSpoolRanks = 65536;

}  // namespace

namespace {

// One rank's spool records → store tables. Local times are mapped to epoch ns, checked: a record
// whose times leave the supported range (corrupt clock or anchor values) is dropped and counted,
// never stored wrapped (docs/limits.md). The records are #pragma pack(1): their fields are copied
// into aligned locals first, since push_back(const T&) on a packed member binds a misaligned
// reference (UB; F10). Columns a spool does not know are left empty: assign_steps and
// sort_activities fill them with their "unknown" values (store.h).
class SpoolConverter {
 public:
  SpoolConverter(Store& s, const SpoolMeta& meta, const ClockModel& clock)
      : s_(s), meta_(meta), clock_(clock), nstr_(static_cast<uint32_t>(s.strings.size())) {}

  int64_t dropped = 0;   // records whose times or string ids were unusable
  int64_t unlinked = 0;  // NCCL tags without their kernel

  bool time(int64_t local, int64_t* out) const {
    int64_t r;
    return clock_.try_to_root(local, &r) && checked_add(r, meta_.anchor_ns, out) &&
           time_in_range(*out);
  }

  void activities(const std::vector<spool::Activity>& recs) {
    Classifier cls;
    std::vector<int8_t> cat(s_.strings.size(), -1);
    auto& a = s_.activities;
    a.reserve(recs.size());
    for (const spool::Activity& r : recs) {
      const uint32_t name = r.name;
      const int32_t device = r.device, stream = r.stream;
      const int64_t correlation = r.correlation;
      int64_t start = 0, end = 0;
      if (name >= nstr_ || !time(r.start_ns, &start) || !time(r.end_ns, &end)) {
        ++dropped;
        continue;
      }
      Kind kind = r.kind == KERNALYSE_EMU_MEMCPY   ? Kind::Memcpy
                  : r.kind == KERNALYSE_EMU_MEMSET ? Kind::Memset
                                                   : Kind::Kernel;
      if (cat[name] < 0) cat[name] = static_cast<int8_t>(cls.classify(kind, s_.strings.at(name)));
      if (kind == Kind::Kernel) act_of_corr_[correlation] = a.size();
      a.rank.push_back(meta_.rank);
      a.device.push_back(device);
      a.stream.push_back(stream);
      a.kind.push_back(static_cast<uint8_t>(kind));
      a.category.push_back(static_cast<uint8_t>(cat[name]));
      a.start_ns.push_back(start);
      a.end_ns.push_back(end);
      a.name_id.push_back(name);
      a.correlation.push_back(correlation);
    }
  }

  void launches(const std::vector<spool::Launch>& recs) {
    auto& l = s_.launches;
    for (const spool::Launch& r : recs) {
      const uint32_t name = r.name;
      const int64_t thread = r.thread, correlation = r.correlation;
      int64_t start = 0, end = 0;
      if (name >= nstr_ || !time(r.start_ns, &start) || !time(r.end_ns, &end)) {
        ++dropped;
        continue;
      }
      l.rank.push_back(meta_.rank);
      l.pid.push_back(meta_.pid);
      l.tid.push_back(thread);
      l.start_ns.push_back(start);
      l.end_ns.push_back(end);
      l.name_id.push_back(name);
      l.correlation.push_back(correlation);
    }
  }

  // Ranges: "ProfilerStep#N" are steps (which then tag launches and GPU work); others NVTX.
  void ranges(const std::vector<spool::Range>& recs) {
    auto& an = s_.annotations;
    for (const spool::Range& r : recs) {
      const uint32_t name_id = r.name;
      const int64_t thread = r.thread;
      int64_t start = 0, end = 0;
      if (name_id >= nstr_ || !time(r.start_ns, &start) || !time(r.end_ns, &end)) {
        ++dropped;
        continue;
      }
      const std::string& name = s_.strings.at(name_id);
      int32_t step = kNoStep;
      if (name.rfind("ProfilerStep#", 0) == 0) step = std::atoi(name.c_str() + 13);
      an.rank.push_back(meta_.rank);
      an.kind.push_back(
          static_cast<uint8_t>(step != kNoStep ? AnnotationKind::Step : AnnotationKind::Nvtx));
      an.pid.push_back(meta_.pid);
      an.tid.push_back(thread);
      an.start_ns.push_back(start);
      an.end_ns.push_back(end);
      an.name_id.push_back(name_id);
      an.step.push_back(step);
    }
  }

  // NCCL tags, joined to their kernel by correlation id (after activities()).
  void nccl(const std::vector<spool::Nccl>& recs) {
    auto& n = s_.nccl;
    for (const spool::Nccl& rec : recs) {
      const struct {
        int64_t correlation, seq, count, bytes;
        uint64_t comm_hash;
        uint32_t collective, dtype;
        int32_t nranks, peer;
        uint32_t algo, proto;
        int32_t n_channels, comm_rank;
      } r = {rec.correlation, rec.seq,        rec.count,    rec.bytes, rec.comm_hash,
             rec.collective,  rec.dtype,      rec.nranks,   rec.peer,  rec.algo,
             rec.proto,       rec.n_channels, rec.comm_rank};
      auto it = act_of_corr_.find(r.correlation);
      if (it == act_of_corr_.end()) {  // tag without its kernel (kernel dropped, launch not seen)
        ++unlinked;
        continue;
      }
      if (r.collective >= nstr_ || r.dtype >= nstr_ || r.algo >= nstr_ || r.proto >= nstr_) {
        ++dropped;
        continue;
      }
      n.activity.push_back(it->second);
      n.collective_id.push_back(r.collective);
      n.seq.push_back(r.seq);
      // The collector knows the communicator, not PyTorch's process-group name: the hash
      // stands in for it (matching uses (communicator, collective, seq)).
      char pg[32];
      std::snprintf(pg, sizeof pg, "comm:%016llx", static_cast<unsigned long long>(r.comm_hash));
      n.pg_name_id.push_back(s_.strings.intern(pg));
      n.group_size.push_back(r.nranks);
      n.in_nelems.push_back(r.count);
      n.out_nelems.push_back(r.count);
      n.msg_bytes.push_back(r.bytes);
      n.dtype_id.push_back(r.dtype);
      n.comm_hash.push_back(r.comm_hash);
      n.peer.push_back(r.peer);
      n.comm_rank.push_back(r.comm_rank);
      n.algo_id.push_back(r.algo);
      n.proto_id.push_back(r.proto);
      n.n_channels.push_back(r.n_channels);
    }
  }

  // Allocations and releases → memory in use per device, a step function from the first record
  // (memory allocated before profiling started is not known); sampled counters (NVML power,
  // ...) as they came.
  void counters(const std::vector<spool::Memory>& memory,
                const std::vector<spool::Counter>& sampled) {
    struct Mem {
      int32_t device;
      int64_t ts_ns, bytes;
    };
    std::vector<Mem> mem;
    mem.reserve(memory.size());
    for (const spool::Memory& r : memory) mem.push_back({r.device, r.ts_ns, r.bytes});
    std::stable_sort(mem.begin(), mem.end(), [](const Mem& x, const Mem& y) {
      return std::tie(x.device, x.ts_ns) < std::tie(y.device, y.ts_ns);
    });
    const uint32_t name = s_.strings.intern(kCounterGpuMemory);
    const int32_t rank = meta_.rank;
    auto& k = s_.counters;
    int64_t in_use = 0;
    for (size_t i = 0; i < mem.size(); ++i) {
      if (i == 0 || mem[i].device != mem[i - 1].device) in_use = 0;
      int64_t ts = 0, sum = 0;
      if (!time(mem[i].ts_ns, &ts) || !checked_add(in_use, mem[i].bytes, &sum)) {
        ++dropped;
        continue;
      }
      in_use = std::max<int64_t>(0, sum);
      // Several changes at one instant: keep the last value only.
      if (!k.ts_ns.empty() && k.ts_ns.back() == ts && k.device.back() == mem[i].device &&
          k.rank.back() == rank) {
        k.value.back() = in_use;
        continue;
      }
      k.rank.push_back(rank);
      k.device.push_back(mem[i].device);
      k.name_id.push_back(name);
      k.ts_ns.push_back(ts);
      k.value.push_back(in_use);
    }
    for (const spool::Counter& r : sampled) {
      const uint32_t name_id = r.name;
      const int32_t device = r.device;
      const int64_t value = r.value;
      int64_t ts = 0;
      if (name_id >= nstr_ || !time(r.ts_ns, &ts)) {
        ++dropped;
        continue;
      }
      k.rank.push_back(rank);
      k.device.push_back(device);
      k.name_id.push_back(name_id);
      k.ts_ns.push_back(ts);
      k.value.push_back(value);
    }
    sort_counters(k, s_.strings);
  }

 private:
  Store& s_;
  const SpoolMeta& meta_;
  const ClockModel& clock_;
  const uint32_t nstr_;
  std::unordered_map<int64_t, uint64_t> act_of_corr_;  // kernel row by correlation id
};

// The rank's /ranks row: identity, clock mapping and the record counts.
RankInfo spool_rank_info(const spool::Contents& c, const SpoolMeta& meta, const ClockModel& clock,
                         const Store& s, const SpoolConverter& conv) {
  RankInfo info;
  info.rank = meta.rank;
  info.world_size = meta.world_size;
  info.host = meta.host;
  std::vector<int32_t> devs(s.activities.device.begin(), s.activities.device.end());
  std::sort(devs.begin(), devs.end());
  devs.erase(std::unique(devs.begin(), devs.end()), devs.end());
  for (size_t i = 0; i < devs.size(); ++i) info.devices += (i ? "," : "") + std::to_string(devs[i]);
  info.device_name = meta.emulated ? "kernalyse emulated device (no GPU)" : c.device_name;
  info.source = meta.source.empty() ? "kernalyse-run: " + meta.command : meta.source;
  info.base_time_ns = meta.anchor_ns;
  // Stored in intercept form, so readers can invert it: t_run = t_local + offset +
  // drift·t_local + base_time_ns (docs/store.md).
  // Checked: a corrupt spool's clock values give 0 (the method line says the clock is unusable
  // through the dropped records) rather than a wrapped number.
  {
    const double corr = clock.drift * static_cast<double>(clock.t0_local);
    int64_t off = 0;
    if (std::fabs(corr) < 0x1p62 && checked_sub(clock.offset0_ns, std::llround(corr), &off))
      info.clock_offset_ns = off;
  }
  info.clock_drift = clock.drift;
  info.clock_uncertainty_ns = clock.uncertainty_ns;
  info.clock_method = clock.method;
  info.emulated = meta.emulated;
  info.events_total = static_cast<int64_t>(c.activities.size() + c.launches.size() + c.nccl.size() +
                                           c.ranges.size());
  info.records_dropped = conv.dropped + (c.truncated ? 1 : 0) + c.status.dropped_ours;
  info.records_dropped_cupti = c.status.dropped_cupti;
  info.events_malformed = c.status.skipped;
  info.events_ignored = conv.unlinked;
  info.events_total += static_cast<int64_t>(c.memory.size() + c.counters.size());
  info.collector_status = c.status_line;
  if (info.collector_status.empty())
    info.collector_status = meta.emulated ? "emulated device (no GPU)" : "no GPU activity recorded";
  return info;
}

}  // namespace

Store spool_to_store(const spool::Contents& c, const SpoolMeta& meta, const ClockModel& clock) {
  Store s;
  s.strings.assign(c.strings.empty() ? std::vector<std::string>{""} : c.strings);
  SpoolConverter conv(s, meta, clock);
  conv.activities(c.activities);
  conv.launches(c.launches);
  conv.ranges(c.ranges);
  assign_steps(s);
  conv.nccl(c.nccl);
  sort_activities(s);
  conv.counters(c.memory, c.counters);

  s.ranks = {spool_rank_info(c, meta, clock, s, conv)};
  s.attrs.tool_version = meta.tool_version;
  s.attrs.produced_by = meta.produced_by;
  s.attrs.command_line = "kernalyse-run " + meta.command;
  s.attrs.created_utc = utc_now();
  s.attrs.clock_domain =
      meta.shared_clock
          ? "one host's CLOCK_MONOTONIC_RAW, shared by every rank (process tree), anchored to its "
            "CLOCK_REALTIME at start (epoch ns); alignment exact"
          : "rank 0 CLOCK_MONOTONIC_RAW anchored to its CLOCK_REALTIME at start (epoch ns); other "
            "ranks aligned by MPI ping-pong (offset + linear drift)";
  s.attrs.emulated = meta.emulated;
  return s;
}

std::string RankRecovery::why_nothing() const {
  if (unreadable) return problem;
  if (problem.empty()) return file_bytes == 0 ? "empty file" : "no complete block";
  return problem + " at byte " + std::to_string(cut_byte);
}

std::vector<std::string> RecoveryReport::lines() const {
  std::vector<std::string> out;
  for (const auto& r : ranks) {
    std::string l = "rank " + std::to_string(r.rank) + ": ";
    if (r.missing) {
      out.push_back(l + "missing (no spool file)");
      continue;
    }
    if (!r.recovered) {
      out.push_back(l + "nothing recovered from " + r.path + " (" + r.why_nothing() + ")");
      continue;
    }
    if (r.truncated)
      l += "truncated at byte " + std::to_string(r.cut_byte) + " of " +
           std::to_string(r.file_bytes) + " (" + r.problem + ")";
    else
      l +=
          r.has_end_sample ? "complete" : "complete blocks only, stopped before its end clock sync";
    l += "; " + std::to_string(r.blocks) + " blocks, " + std::to_string(r.records) + " records";
    if (r.records > 0) {
      l += "; data ends at " + utc_ms(r.data_end_ns);
      const int64_t before = last_end_ns - r.data_end_ns;
      if (before > 0) {
        char ms[48];
        std::snprintf(ms, sizeof ms, " (%.1f ms before the last rank)",
                      static_cast<double>(before) / 1e6);
        l += ms;
      } else {
        l += " (the last rank)";
      }
    }
    if (!r.has_clock) l += "; no clock sample in the spool (times not aligned)";
    out.push_back(l);
  }
  out.insert(out.end(), not_ranks.begin(), not_ranks.end());
  return out;
}

std::map<int32_t, std::string> list_spool_files(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error(dir + ": not a spool directory");
  std::map<int32_t, std::string> files;  // rank (from the name) → path
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("rank-", 0) != 0 || n.size() <= 12 || n.compare(n.size() - 7, 7, ".kspool") != 0)
      continue;
    const std::string num = n.substr(5, n.size() - 12);
    if (num.empty() || num.find_first_not_of("0123456789") != std::string::npos) continue;
    int64_t r = 0;
    auto [ptr, err] = std::from_chars(num.data(), num.data() + num.size(), r);
    if (err != std::errc() || ptr != num.data() + num.size() || r >= kMaxSpoolRanks)
      throw Error(e.path().string() + ": rank " + num + " in the file name is past the limit of " +
                  std::to_string(kMaxSpoolRanks) + " ranks per spool (docs/limits.md)");
    files[static_cast<int32_t>(r)] = e.path().string();
  }
  if (files.empty()) throw Error(dir + ": no rank-<r>.kspool spool files in this directory");
  return files;
}

namespace {

// One recovered spool file → its rank's store: the clock from the spool's samples (or the
// shared host clock of a process tree), the source line saying how the file ended.
Store recovered_store(const spool::Contents& c, const RankRecovery& rr, int32_t world,
                      int64_t anchor) {
  const std::string& path = rr.path;
  SpoolMeta m;
  m.rank = rr.rank;
  m.world_size = world;
  m.anchor_ns = anchor;
  ClockModel clock;
  clock.method = "none (no clock sample in the spool)";
  if (c.has_meta) {
    const auto& f = c.meta.fixed;
    m.pid = f.pid;
    m.host = c.meta.host;
    m.command = c.meta.command;
    m.emulated = f.emulated != 0;
    m.shared_clock = rr.tree;
    if (rr.tree) {
      // The host's CLOCK_MONOTONIC_RAW, which every rank of the tree reads: nothing to map.
      clock.method = "shared host clock (process tree: one CLOCK_MONOTONIC_RAW), exact";
    } else if (f.has_start) {
      const ClockSample start{f.start_local_ns, f.start_offset_ns, f.start_rtt_ns};
      const ClockSample end{f.end_local_ns, f.end_offset_ns, f.end_rtt_ns};
      clock = fit_clock_samples(start, f.has_end ? &end : nullptr, f.exchanges);
    }
  }
  std::string note = "spool: " + path;
  if (rr.tree)
    note = "process tree: pid " + std::to_string(m.pid) + ", " + m.command + " (rank from " +
           rr.rank_origin + ")" + (c.truncated || !rr.has_end_sample ? "; " + note : "");
  if (c.truncated)
    note += " (truncated at byte " + std::to_string(rr.cut_byte) + ": " + rr.problem + ")";
  else if (!rr.has_end_sample)
    note += " (stopped before its end clock sync)";
  m.source = note;
  m.produced_by = "kernalyse-merge --spool (crash recovery)";
  return spool_to_store(c, m, clock);
}

// The error when no file gave anything: each file's own reason (unreadable, empty, corrupt from
// byte 0), the first few on the line.
Error nothing_recovered(const std::string& dir, const RecoveryReport& rep) {
  std::string why;
  size_t listed = 0;
  for (const auto& r : rep.ranks) {
    if (listed == 4) {
      why += "; and " + std::to_string(rep.ranks.size() - listed) + " more";
      break;
    }
    why += (listed++ ? "; " : "") + fs::path(r.path).filename().string() + ": " + r.why_nothing();
  }
  return Error(dir + ": no rank could be recovered (" + why + ")");
}

// The number a tree rank wanted but found taken: "start order (RANK=3 was taken by another
// process)" → 3 (collector.cpp's claim() writes that text); -1 otherwise.
constexpr std::string_view kStartOrder = "start order (";

int32_t wanted_rank(const std::string& origin) {
  static const std::string kTaken = " was taken by another process)";
  const size_t eq = origin.find('=');
  if (origin.rfind(kStartOrder, 0) != 0 || eq == std::string::npos ||
      origin.find(kTaken) == std::string::npos)
    return -1;
  int32_t r = -1;
  const char* b = origin.data() + eq + 1;
  auto [p, err] = std::from_chars(b, origin.data() + origin.size(), r);
  return err == std::errc() && p != b && *p == ' ' ? r : -1;
}

// A process tree's launcher can bring up CUDA without running anything on it (torchrun's agent
// imports torch): it then claims a rank in start order before its workers start, and the worker
// with RANK=0 becomes rank 1 (seen on the first GPU run, docs/gpu-validation.md). A tree spool
// whose process had no RANK or LOCAL_RANK and recorded no GPU work, in a tree whose other
// processes took their number from RANK/LOCAL_RANK, is that launcher: it is left out (one report
// line), and each worker gets back the RANK it wanted if no kept rank holds it.
void settle_tree_ranks(std::vector<std::pair<int32_t, std::string>>& files,
                       std::vector<spool::Contents>& contents, RecoveryReport& rep) {
  auto origin = [&](size_t i) -> const std::string& { return contents[i].meta.rank_origin; };
  auto tree = [&](size_t i) { return contents[i].has_meta && contents[i].meta.fixed.shared_clock; };
  bool env_numbered = false;
  for (size_t i = 0; i < files.size(); ++i)
    env_numbered = env_numbered || (tree(i) && (origin(i).rfind("RANK=", 0) == 0 ||
                                                origin(i).rfind("LOCAL_RANK=", 0) == 0 ||
                                                wanted_rank(origin(i)) >= 0));
  if (!env_numbered) return;
  std::vector<char> keep(files.size(), 1);
  for (size_t i = 0; i < files.size(); ++i) {
    const spool::Contents& c = contents[i];
    if (!tree(i) || origin(i).rfind("start order (no RANK", 0) != 0 || !c.activities.empty())
      continue;
    keep[i] = 0;
    rep.not_ranks.push_back(files[i].second + ": pid " + std::to_string(c.meta.fixed.pid) + " (" +
                            c.meta.command +
                            ") is not a rank: it brought up CUDA but ran no GPU work and had no "
                            "RANK, while the tree's other processes had one (a launcher)");
  }
  std::set<int32_t> held;
  for (size_t i = 0; i < files.size(); ++i)
    if (keep[i]) held.insert(contents[i].has_meta ? contents[i].meta.fixed.rank : files[i].first);
  for (size_t i = 0; i < files.size(); ++i) {
    const int32_t want = keep[i] && tree(i) ? wanted_rank(origin(i)) : -1;
    if (want < 0 || want >= kMaxSpoolRanks || held.count(want)) continue;  // F8's limit
    held.erase(contents[i].meta.fixed.rank);
    held.insert(want);
    const size_t b = kStartOrder.size();
    const std::string env = origin(i).substr(b, origin(i).find(' ', b) - b);  // "RANK=3"
    contents[i].meta.rank_origin = env + " (after the launcher that held it was left out)";
    contents[i].meta.fixed.rank = want;
    files[i].first = want;
  }
  size_t w = 0;
  for (size_t i = 0; i < files.size(); ++i)
    if (keep[i] && w++ != i) {  // never a self-move: it would empty the strings
      files[w - 1] = std::move(files[i]);
      contents[w - 1] = std::move(contents[i]);
    }
  files.resize(w);
  contents.resize(w);
}

}  // namespace

Store recover_spool_dir(const std::string& dir, RecoveryReport* report, ProgressMode mode) {
  RecoveryReport local;
  RecoveryReport& rep = report ? *report : local;
  rep = RecoveryReport{};
  rep.dir = dir;
  std::error_code ec;
  const std::map<int32_t, std::string> listed = list_spool_files(dir);
  std::vector<std::pair<int32_t, std::string>> files(listed.begin(), listed.end());

  // A file that vanished or cannot be stat'ed counts 0 bytes (file_size then returns -1).
  auto bytes_of = [&](const std::string& path) {
    const auto n = fs::file_size(path, ec);
    return ec ? int64_t{0} : static_cast<int64_t>(n);
  };
  int64_t total = 0;
  for (const auto& [rank, path] : files) total += bytes_of(path);
  Progress progress("recovering " + dir, total, "bytes", mode);
  std::vector<spool::Contents> contents;
  contents.reserve(files.size());
  int64_t anchor = 0;
  int32_t world = 0;
  for (const auto& [rank, path] : files) {
    contents.push_back(spool::read(path));
    progress.advance(bytes_of(path));
  }
  settle_tree_ranks(files, contents, rep);
  for (size_t k = 0; k < files.size(); ++k) {
    const int32_t rank = files[k].first;
    const std::string& path = files[k].second;
    const auto& c = contents[k];
    if (c.has_meta) {
      if (c.meta.fixed.has_start && c.meta.fixed.anchor_ns != 0) anchor = c.meta.fixed.anchor_ns;
      const int32_t meta_world = c.meta.fixed.world_size;
      // The missing-rank rows below are one per rank: a corrupt world size must not make
      // millions of them (F8).
      if (meta_world > kMaxSpoolRanks)
        throw Error(path + ": world size " + std::to_string(meta_world) +
                    " in its Meta block is past the limit of " + std::to_string(kMaxSpoolRanks) +
                    " ranks per spool (docs/limits.md)");
      world = std::max(world, meta_world);
    }
    world = std::max(world, rank + 1);  // rank < kMaxSpoolRanks: no overflow
  }
  rep.world_size = world;

  std::vector<Store> parts;
  size_t i = 0;
  for (const auto& [file_rank, path] : files) {
    const spool::Contents& c = contents[i++];
    RankRecovery rr;
    rr.rank = c.has_meta ? c.meta.fixed.rank : file_rank;
    rr.path = path;
    rr.file_bytes = bytes_of(path);
    rr.blocks = c.blocks;
    rr.cut_byte = c.bytes_valid;
    rr.truncated = c.truncated;
    rr.unreadable = c.unreadable;
    rr.problem = c.problem.substr(0, c.problem.find(" at byte "));
    rr.recovered = c.blocks > 0;
    rr.records = static_cast<int64_t>(c.activities.size() + c.launches.size() + c.nccl.size() +
                                      c.ranges.size());
    rr.has_clock = c.has_meta && c.meta.fixed.has_start;
    rr.has_end_sample = rr.has_clock && c.meta.fixed.has_end;
    rr.tree = c.has_meta && c.meta.fixed.shared_clock != 0;
    if (rr.tree) rr.rank_origin = c.meta.rank_origin;
    if (rr.recovered) {
      Store s = recovered_store(c, rr, world, anchor);
      int64_t end = 0;
      for (int64_t e : s.activities.end_ns) end = std::max(end, e);
      for (int64_t e : s.launches.end_ns) end = std::max(end, e);
      for (int64_t e : s.annotations.end_ns) end = std::max(end, e);
      rr.data_end_ns = end;
      rep.last_end_ns = std::max(rep.last_end_ns, end);
      parts.push_back(std::move(s));
    }
    rep.ranks.push_back(rr);
  }
  if (parts.empty()) throw nothing_recovered(dir, rep);
  // Linear, not O(world²): the ranks seen, marked once.
  std::vector<char> seen(static_cast<size_t>(world), 0);
  for (const auto& x : rep.ranks)
    if (x.rank >= 0 && x.rank < world) seen[static_cast<size_t>(x.rank)] = 1;
  const bool tree =
      std::all_of(rep.ranks.begin(), rep.ranks.end(), [](const RankRecovery& x) { return x.tree; });
  for (int32_t r = 0; r < world && !tree; ++r) {
    if (seen[static_cast<size_t>(r)]) continue;
    RankRecovery rr;
    rr.rank = r;
    rr.missing = true;
    rep.ranks.push_back(rr);
  }
  std::sort(rep.ranks.begin(), rep.ranks.end(),
            [](const RankRecovery& a, const RankRecovery& b) { return a.rank < b.rank; });

  Store merged = merge_stores(std::move(parts));
  progress.finish();
  // Ranks with a spool file but nothing readable, and ranks without one, still get a row.
  for (const auto& rr : rep.ranks) {
    if (rr.recovered) continue;
    RankInfo info;
    info.rank = rr.rank;
    info.world_size = world;
    info.base_time_ns = anchor;
    info.clock_method = "none (rank not recovered)";
    info.source = rr.missing
                      ? "missing: no spool file in " + dir
                      : "spool: " + rr.path + " (nothing recovered: " + rr.why_nothing() + ")";
    info.records_dropped = rr.missing ? 0 : 1;
    merged.ranks.push_back(info);
  }
  std::sort(merged.ranks.begin(), merged.ranks.end(),
            [](const RankInfo& a, const RankInfo& b) { return a.rank < b.rank; });
  merged.attrs.produced_by = "kernalyse-merge --spool (crash recovery)";
  for (const auto& r : merged.ranks) merged.attrs.emulated = merged.attrs.emulated || r.emulated;
  return merged;
}

nlohmann::json recovery_json(const RecoveryReport& rep) {
  nlohmann::json jr = nlohmann::json::array();
  for (const auto& r : rep.ranks)
    jr.push_back({{"rank", r.rank},
                  {"missing", r.missing},
                  {"recovered", r.recovered},
                  {"truncated", r.truncated},
                  {"problem", r.problem},
                  {"cut_byte", r.cut_byte},
                  {"file_bytes", r.file_bytes},
                  {"blocks", r.blocks},
                  {"records", r.records},
                  {"has_end_sample", r.has_end_sample},
                  {"data_end_ns", r.data_end_ns}});
  return {{"spool", rep.dir},     {"world_size", rep.world_size}, {"last_end_ns", rep.last_end_ns},
          {"lines", rep.lines()}, {"not_ranks", rep.not_ranks},   {"ranks", jr}};
}

}  // namespace kernalyse
