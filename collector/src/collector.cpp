// libkernalyse_collector.so: injected by kernalyse-run (LD_PRELOAD) into the unmodified
// application of every rank. It buffers records (today from the emulated device; the CUPTI/NCCL
// sources of the collector issue feed the same buffers), spools them per rank in self-checking
// blocks, aligns the rank's clock to rank 0 over MPI, and at MPI_Finalize (or at exit for
// applications that never call MPI) writes one store collectively with parallel HDF5.
// Design and limits: docs/collector.md.
#include <dlfcn.h>
#include <fcntl.h>
#include <link.h>
#include <mpi.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernalyse/classify.h"
#include "kernalyse/clocksync.h"
#include "kernalyse/emu.h"
#include "kernalyse/store_io.h"
#include "kernalyse/store_mpi.h"
#include "spool.h"

namespace {

using namespace kernalyse;

std::string env(const char* k, const char* dflt = "") {
  const char* v = std::getenv(k);
  return v ? v : dflt;
}

// Rank and size from the launcher's environment, without calling MPI (we may be inside cuInit).
int env_rank() {
  for (const char* k : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID", "RANK"}) {
    std::string v = env(k);
    if (!v.empty()) return std::atoi(v.c_str());
  }
  return 0;
}

class Collector {
 public:
  static Collector& get() {
    static Collector* c = new Collector();  // never destroyed: used from atexit handlers
    return *c;
  }

  bool active() const { return active_; }

  void activate() {
    // Only the process kernalyse-run exec'd: children inherit LD_PRELOAD but not this pid.
    std::string pid = env("KERNALYSE_PID");
    if (pid.empty() || std::atol(pid.c_str()) != static_cast<long>(getpid())) return;
    active_ = true;
    // Our own handle on stderr: applications may close theirs before our exit-time merge
    // (coreutils closes stdout and stderr in an atexit handler).
    int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    err_ = fd >= 0 ? fdopen(fd, "w") : nullptr;
    if (!err_) err_ = stderr;
    output_ = env("KERNALYSE_OUTPUT", "run.h5");
    force_ = env("KERNALYSE_FORCE") == "1";
    quiet_ = env("KERNALYSE_QUIET") == "1";
    keep_spool_ = env("KERNALYSE_KEEP_SPOOL") == "1";
    flush_records_ = std::max<int64_t>(1, std::atoll(env("KERNALYSE_FLUSH_RECORDS", "100000").c_str()));
    flush_ns_ = std::max<int64_t>(1, std::atoll(env("KERNALYSE_FLUSH_MS", "1000").c_str())) * 1'000'000;
    command_ = env("KERNALYSE_COMMAND");
    rank_hint_ = env_rank();
    strings_.push_back("");
    string_ids_[""] = 0;
    open_spool();
    last_flush_ns_ = now_raw_ns();
  }

  // --- record intake (any thread) ---
  uint32_t intern(const char* s) {  // caller holds mu_
    std::string k = s ? s : "";
    auto it = string_ids_.find(k);
    if (it != string_ids_.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(strings_.size());
    strings_.push_back(k);
    string_ids_.emplace(std::move(k), id);
    return id;
  }
  void add(const kernalyse_emu_activity* a) {
    std::lock_guard<std::mutex> g(mu_);
    acts_.push_back({a->start_ns, a->end_ns, a->correlation, a->device, a->stream, intern(a->name),
                     static_cast<uint8_t>(a->kind)});
    emulated_ = true;
    after_add();
  }
  void add(const kernalyse_emu_launch* l) {
    std::lock_guard<std::mutex> g(mu_);
    launches_.push_back({l->start_ns, l->end_ns, l->correlation, l->thread, intern(l->name)});
    after_add();
  }
  void add(const kernalyse_emu_nccl* n) {
    std::lock_guard<std::mutex> g(mu_);
    nccl_.push_back({n->correlation, n->seq, n->count, n->bytes, n->comm_hash, intern(n->collective),
                     intern(n->dtype), n->nranks, n->peer});
    after_add();
  }
  void add(const kernalyse_emu_range* r) {
    std::lock_guard<std::mutex> g(mu_);
    ranges_.push_back({r->start_ns, r->end_ns, r->thread, intern(r->name)});
    after_add();
  }

  // --- MPI lifecycle ---
  void on_mpi_initialized() {
    if (!active_ || synced_start_) return;
    synced_start_ = true;
    start_ = measure_offset_to_root(MPI_COMM_WORLD);
    // The run's absolute anchor: rank 0's wall clock at the start sync.
    int64_t anchor = 0;
    int r = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    if (r == 0) {
      timespec rt{};
      clock_gettime(CLOCK_REALTIME, &rt);
      anchor = static_cast<int64_t>(rt.tv_sec) * 1'000'000'000 + rt.tv_nsec - now_raw_ns();
    }
    MPI_Bcast(&anchor, 1, MPI_INT64_T, 0, MPI_COMM_WORLD);
    anchor_ = anchor;
  }

  // Collective: end sync, then the parallel write. Returns with MPI still initialised.
  void finish() {
    if (!active_ || finished_) return;
    finished_ = true;
    if (!synced_start_) on_mpi_initialized();
    ClockSample end = measure_offset_to_root(MPI_COMM_WORLD);
    ClockModel clock = fit_clock(start_, &end);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    {
      std::lock_guard<std::mutex> g(mu_);
      flush_locked();
      spool_.close();
    }
    spool::Contents c = spool::read(spool_.path());
    Store local = build_store(c, clock, rank, size);
    std::string written;
    std::string error;
    try {
      ParallelWriteOptions opt;
      opt.path = output_;
      opt.force = force_;
      opt.pick_free_name = true;
      written = write_store_parallel(local, MPI_COMM_WORLD, opt);
    } catch (const std::exception& e) {
      error = e.what();
    }
    int64_t records = static_cast<int64_t>(c.activities.size() + c.launches.size() + c.nccl.size());
    int64_t total = 0, max_unc = 0;
    MPI_Reduce(&records, &total, 1, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(&clock.uncertainty_ns, &max_unc, 1, MPI_INT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
    if (error.empty() && !keep_spool_) {
      ::unlink(spool_.path().c_str());
      MPI_Barrier(MPI_COMM_WORLD);
      if (rank == 0) ::rmdir(spool_dir_.c_str());  // fails harmlessly if others remain
    }
    if (rank == 0) {
      if (!error.empty()) {
        std::fprintf(err_, "kernalyse-run: %s (spool files kept in %s)\n", error.c_str(),
                     spool_dir_.c_str());
      } else if (!quiet_) {
        if (written != output_)
          std::fprintf(err_, "kernalyse-run: %s exists; writing %s instead\n", output_.c_str(),
                       written.c_str());
        std::fprintf(err_,
                     "kernalyse-run: wrote %s: %d ranks, %lld records%s; clocks aligned to rank 0 "
                     "within ±%.3f µs\n",
                     written.c_str(), size, static_cast<long long>(total),
                     emulated_any(local) ? " (EMULATED device)" : "",
                     static_cast<double>(max_unc) / 1000.0);
      }
      std::fflush(err_);
    }
  }

  bool app_links_mpi() const { return app_links_mpi_; }
  void set_app_links_mpi(bool v) { app_links_mpi_ = v; }
  bool we_initialised_mpi = false;

 private:
  Collector() = default;

  static bool emulated_any(const Store& s) { return s.attrs.emulated; }

  void open_spool() {
    // One directory per job next to the output; one file per rank.
    std::string job = env("PMIX_NAMESPACE");
    if (job.empty()) job = env("SLURM_JOB_ID");
    if (job.empty()) job = "pid" + std::to_string(getppid());
    for (char& ch : job)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    std::string dir = env("KERNALYSE_SPOOL_DIR");
    if (dir.empty()) dir = output_ + ".spool-" + job;
    ::mkdir(dir.c_str(), 0755);
    spool_dir_ = dir;
    std::string path = dir + "/rank-" + std::to_string(rank_hint_) + ".kspool";
    if (!spool_.open(path)) {
      std::fprintf(err_, "kernalyse-run: cannot create spool file %s: %s; not profiling\n",
                   path.c_str(), std::strerror(errno));
      active_ = false;
    }
  }

  void after_add() {
    ++pending_;
    if (pending_ >= flush_records_) {
      flush_locked();
    } else if ((pending_ & 1023) == 0 && now_raw_ns() - last_flush_ns_ >= flush_ns_) {
      flush_locked();
    }
  }

  void flush_locked() {
    bool ok = true;
    if (strings_.size() > strings_flushed_) {
      std::string blob;
      for (size_t i = strings_flushed_; i < strings_.size(); ++i) blob.append(strings_[i]).push_back('\0');
      ok = ok && spool_.write_block(spool::BlockType::Strings,
                                    static_cast<uint32_t>(strings_.size() - strings_flushed_),
                                    blob.data(), blob.size());
      strings_flushed_ = strings_.size();
    }
    auto put = [&](spool::BlockType t, auto& v) {
      if (v.empty()) return;
      ok = ok && spool_.write_block(t, static_cast<uint32_t>(v.size()), v.data(),
                                    v.size() * sizeof(v[0]));
      v.clear();
    };
    put(spool::BlockType::Activities, acts_);
    put(spool::BlockType::Launches, launches_);
    put(spool::BlockType::Nccl, nccl_);
    put(spool::BlockType::Ranges, ranges_);
    if (!ok && !spool_failed_) {
      spool_failed_ = true;
      std::fprintf(err_, "kernalyse-run: writing spool %s failed: %s; records are being lost\n",
                   spool_.path().c_str(), std::strerror(errno));
    }
    pending_ = 0;
    last_flush_ns_ = now_raw_ns();
  }

  Store build_store(const spool::Contents& c, const ClockModel& clock, int rank, int size) {
    Store s;
    s.strings.assign(c.strings.empty() ? std::vector<std::string>{""} : c.strings);
    auto t = [&](int64_t local) { return clock.to_root(local) + anchor_; };
    Classifier cls;
    std::vector<int8_t> cat(s.strings.size(), -1);
    std::unordered_map<int64_t, uint64_t> act_of_corr;
    auto& a = s.activities;
    a.reserve(c.activities.size());
    for (const auto& r : c.activities) {
      Kind kind = r.kind == KERNALYSE_EMU_MEMCPY   ? Kind::Memcpy
                  : r.kind == KERNALYSE_EMU_MEMSET ? Kind::Memset
                                                   : Kind::Kernel;
      if (cat[r.name] < 0) cat[r.name] = static_cast<int8_t>(cls.classify(kind, s.strings.at(r.name)));
      if (kind == Kind::Kernel) act_of_corr[r.correlation] = a.size();
      a.rank.push_back(rank);
      a.device.push_back(r.device);
      a.stream.push_back(r.stream);
      a.kind.push_back(static_cast<uint8_t>(kind));
      a.category.push_back(static_cast<uint8_t>(cat[r.name]));
      a.start_ns.push_back(t(r.start_ns));
      a.end_ns.push_back(t(r.end_ns));
      a.name_id.push_back(r.name);
      a.correlation.push_back(r.correlation);
      a.step.push_back(kNoStep);
    }
    for (const auto& r : c.launches) {
      auto& l = s.launches;
      l.rank.push_back(rank);
      l.pid.push_back(getpid());
      l.tid.push_back(r.thread);
      l.start_ns.push_back(t(r.start_ns));
      l.end_ns.push_back(t(r.end_ns));
      l.name_id.push_back(r.name);
      l.correlation.push_back(r.correlation);
      l.step.push_back(kNoStep);
    }
    // Ranges: "ProfilerStep#N" are steps (which then tag launches and GPU work); others NVTX.
    for (const auto& r : c.ranges) {
      auto& an = s.annotations;
      const std::string& name = s.strings.at(r.name);
      int32_t step = kNoStep;
      if (name.rfind("ProfilerStep#", 0) == 0) step = std::atoi(name.c_str() + 13);
      an.rank.push_back(rank);
      an.kind.push_back(static_cast<uint8_t>(step != kNoStep ? AnnotationKind::Step : AnnotationKind::Nvtx));
      an.pid.push_back(getpid());
      an.tid.push_back(r.thread);
      an.start_ns.push_back(t(r.start_ns));
      an.end_ns.push_back(t(r.end_ns));
      an.name_id.push_back(r.name);
      an.step.push_back(step);
    }
    assign_steps(s);
    for (const auto& r : c.nccl) {
      auto it = act_of_corr.find(r.correlation);
      if (it == act_of_corr.end()) continue;  // tag without its kernel (kernel dropped)
      auto& n = s.nccl;
      n.activity.push_back(it->second);
      n.collective_id.push_back(r.collective);
      n.seq.push_back(r.seq);
      // The collector knows the communicator, not PyTorch's process-group name: the hash
      // stands in for it (matching uses (communicator, collective, seq)).
      char pg[32];
      std::snprintf(pg, sizeof pg, "comm:%016llx", static_cast<unsigned long long>(r.comm_hash));
      n.pg_name_id.push_back(s.strings.intern(pg));
      n.pg_desc_id.push_back(0);
      n.pg_ranks_id.push_back(0);
      n.group_size.push_back(r.nranks);
      n.in_nelems.push_back(r.count);
      n.out_nelems.push_back(r.count);
      n.msg_bytes.push_back(r.bytes);
      n.dtype_id.push_back(r.dtype);
      n.comm_hash.push_back(r.comm_hash);
      n.peer.push_back(r.peer);
    }
    sort_activities(s);

    RankInfo info;
    info.rank = rank;
    info.world_size = size;
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    info.host = host;
    std::vector<int32_t> devs(a.device.begin(), a.device.end());
    std::sort(devs.begin(), devs.end());
    devs.erase(std::unique(devs.begin(), devs.end()), devs.end());
    for (size_t i = 0; i < devs.size(); ++i) info.devices += (i ? "," : "") + std::to_string(devs[i]);
    info.device_name = emulated_ ? "kernalyse emulated device (no GPU)" : "";
    info.source = "kernalyse-run: " + command_;
    info.base_time_ns = anchor_;
    // Stored in intercept form, so readers can invert it: t_run = t_local + offset +
    // drift·t_local + base_time_ns (docs/store.md).
    info.clock_offset_ns = clock.offset0_ns - std::llround(clock.drift * static_cast<double>(clock.t0_local));
    info.clock_drift = clock.drift;
    info.clock_uncertainty_ns = clock.uncertainty_ns;
    info.clock_method = clock.method;
    info.emulated = emulated_;
    info.events_total = static_cast<int64_t>(c.activities.size() + c.launches.size() + c.nccl.size() + c.ranges.size());
    info.records_dropped = c.truncated ? 1 : 0;
    s.ranks = {info};
    s.attrs.tool_version = KERNALYSE_VERSION;
    s.attrs.produced_by = "kernalyse-run (collector)";
    s.attrs.command_line = "kernalyse-run " + command_;
    timespec rt{};
    clock_gettime(CLOCK_REALTIME, &rt);
    char buf[32];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&rt.tv_sec));
    s.attrs.created_utc = buf;
    s.attrs.clock_domain =
        "rank 0 CLOCK_MONOTONIC_RAW anchored to its CLOCK_REALTIME at start (epoch ns); other "
        "ranks aligned by MPI ping-pong (offset + linear drift)";
    s.attrs.emulated = emulated_;
    return s;
  }

  bool active_ = false;
  std::FILE* err_ = stderr;
  bool app_links_mpi_ = false;
  bool synced_start_ = false, finished_ = false;
  std::string output_, command_, spool_dir_;
  bool force_ = false, quiet_ = false, keep_spool_ = false, spool_failed_ = false;
  int rank_hint_ = 0;
  int64_t flush_records_ = 100000, flush_ns_ = 1'000'000'000, last_flush_ns_ = 0, pending_ = 0;
  int64_t anchor_ = 0;
  ClockSample start_;
  std::atomic<bool> emulated_{false};
  std::mutex mu_;
  std::vector<std::string> strings_;
  size_t strings_flushed_ = 0;
  std::unordered_map<std::string, uint32_t> string_ids_;
  std::vector<spool::Activity> acts_;
  std::vector<spool::Launch> launches_;
  std::vector<spool::Nccl> nccl_;
  std::vector<spool::Range> ranges_;
  spool::Writer spool_;
};

// Does the main executable itself need libmpi (an MPI application)?
bool main_program_needs_mpi() {
  bool needs = false;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        // The first object is the main program.
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
          auto* dyn = reinterpret_cast<const ElfW(Dyn)*>(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
          const char* strtab = nullptr;
          for (auto* d = dyn; d->d_tag != DT_NULL; ++d)
            if (d->d_tag == DT_STRTAB) strtab = reinterpret_cast<const char*>(d->d_un.d_ptr);
          if (!strtab) break;
          for (auto* d = dyn; d->d_tag != DT_NULL; ++d)
            if (d->d_tag == DT_NEEDED && std::strstr(strtab + d->d_un.d_val, "libmpi"))
              *static_cast<bool*>(data) = true;
        }
        return 1;  // stop after the main program
      },
      &needs);
  return needs;
}

void finish_at_exit() {
  Collector& c = Collector::get();
  if (!c.active()) return;
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (!init || fin) return;
  c.finish();
  if (c.we_initialised_mpi) PMPI_Finalize();
}

__attribute__((constructor)) void kernalyse_collector_init() {
  Collector& c = Collector::get();
  c.activate();
  if (!c.active()) return;
  std::atexit(finish_at_exit);
  // An application that never calls MPI gets MPI from us, at start (so the clock has two sync
  // points) and finalised at exit. MPI applications bring it up themselves (intercepted below).
  if (!main_program_needs_mpi()) {
    int provided = 0;
    if (PMPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) == MPI_SUCCESS) {
      c.we_initialised_mpi = true;
      c.on_mpi_initialized();
    }
  }
}

}  // namespace

extern "C" {

// PMPI interception, as Score-P does: the application's MPI_Init/MPI_Finalize land here.
int MPI_Init(int* argc, char*** argv) {
  Collector& c = Collector::get();
  int init = 0;
  MPI_Initialized(&init);
  if (init) return MPI_SUCCESS;  // we brought MPI up already
  int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) c.on_mpi_initialized();
  return rc;
}

int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  Collector& c = Collector::get();
  int init = 0;
  MPI_Initialized(&init);
  if (init) return MPI_Query_thread(provided);
  int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) c.on_mpi_initialized();
  return rc;
}

int MPI_Finalize(void) {
  Collector& c = Collector::get();
  c.finish();
  if (c.we_initialised_mpi) return MPI_SUCCESS;  // finalised by us at exit
  return PMPI_Finalize();
}

int64_t kernalyse_emu_now_ns(void) { return kernalyse::now_raw_ns(); }

void kernalyse_emu_record_activity(const kernalyse_emu_activity* a) {
  Collector& c = Collector::get();
  if (c.active() && a) c.add(a);
}
void kernalyse_emu_record_launch(const kernalyse_emu_launch* l) {
  Collector& c = Collector::get();
  if (c.active() && l) c.add(l);
}
void kernalyse_emu_record_nccl(const kernalyse_emu_nccl* n) {
  Collector& c = Collector::get();
  if (c.active() && n) c.add(n);
}
void kernalyse_emu_record_range(const kernalyse_emu_range* r) {
  Collector& c = Collector::get();
  if (c.active() && r) c.add(r);
}

}  // extern "C"
