// libkernalyse_collector.so: injected by kernalyse-run (LD_PRELOAD) into the unmodified
// application of every rank. It buffers records (today from the emulated device; the CUPTI/NCCL
// sources of the collector issue feed the same buffers), spools them per rank in self-checking
// blocks, aligns the rank's clock to rank 0 over MPI, and at MPI_Finalize (or at exit for
// applications that never call MPI) writes one store collectively with parallel HDF5.
// Design and limits: docs/collector.md.
#include <dlfcn.h>
#include <fcntl.h>
#include <mpi.h>
#include <poll.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <fstream>
#include <iterator>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_presence.h"  // CUPTI source hooks (see finish())
#include "kernalyse/clocksync.h"
#include "kernalyse/emu.h"
#include "kernalyse/run_env.h"
#include "kernalyse/spool.h"
#include "kernalyse/spool_store.h"
#include "kernalyse/store_io.h"
#include "kernalyse/store_mpi.h"
#include "nvml_power.h"
#include "recorder.h"
#include "sink.h"

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

// Set while this thread holds the collector's mutex in record intake: a SIGTERM handler running
// on such a thread must not wait for the flush thread (which needs that mutex). It defers the
// signal instead, and the intake re-raises it once the mutex is released (the guard is declared
// before the lock, so its destructor runs after the unlock).
__attribute__((tls_model("initial-exec"))) thread_local bool t_in_intake = false;
volatile std::sig_atomic_t g_term_deferred = 0;
struct IntakeGuard {
  IntakeGuard() { t_in_intake = true; }
  ~IntakeGuard() {
    t_in_intake = false;
    if (g_term_deferred) {
      g_term_deferred = 0;
      raise(SIGTERM);  // handled on this thread, now able to wait for the flush
    }
  }
};

void on_sigterm(int sig);
void on_fork_child();

class Collector;
// Never destroyed (used from atexit handlers); a fork()ed child gets a fresh one (on_fork_child).
Collector* g_collector = nullptr;

// This process's command line as it was exec'd (a process-tree rank's own command).
std::string own_command() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  while (!s.empty() && s.back() == '\0') s.pop_back();
  for (char& ch : s)
    if (ch == '\0') ch = ' ';
  return s;
}

class Collector final : public collector::Sink {
 public:
  static Collector& get() {
    if (!g_collector) g_collector = new Collector();
    return *g_collector;
  }
  // In a fork()ed child (pthread_atfork): a fresh collector; the parent's is left as it is.
  static void renew_in_child() {
    if (g_collector) g_collector->drop_inherited();
    Collector* parent = g_collector;
    g_collector = new Collector();
    g_collector->inherited_ = parent;
    g_collector->activate();
  }

  // Active only in the process kernalyse-run started: a fork()ed child keeps a copy of this
  // state (and of the atexit handler) but is not the rank.
  bool active() const { return active_ && static_cast<long>(getpid()) == pid_; }
  // The per-record check: no getpid() syscall on the hot path.
  bool recording() const { return active_; }

  // Process trees (kernalyse-run without an MPI launcher sets KERNALYSE_TREE to the run's spool
  // directory): every process of the tree loads us, and the ones that bring up CUDA or the
  // emulated device become ranks, each on first use (claim()). Nothing here until then.
  bool tree() const { return tree_; }
  bool claimable() const { return tree_ && !active_ && !claim_failed_; }

  void activate() {
    if (std::string dir = env(env_name(RunEnv::Tree)); !dir.empty()) {
      tree_ = true;
      spool_dir_ = dir;
      configure();
      return;
    }
    // Only the process kernalyse-run exec'd: children inherit LD_PRELOAD but not this pid.
    std::string pid = env(env_name(RunEnv::Pid));
    if (pid.empty() || std::atol(pid.c_str()) != static_cast<long>(getpid())) return;
    active_ = true;
    configure();
    rank_hint_ = env_rank();
    open_spool();
    last_flush_ns_ = now_raw_ns();
    if (!active_) return;
    pid_ = getpid();
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    host_ = host;
    start_flusher();
    install_sigterm();
  }

  // A process of a tree brings up CUDA or the emulated device: it becomes a rank. Its number is
  // RANK (torchrun, vicuna_tp --spawn), else LOCAL_RANK, else the first free one in start order
  // (each rank creates its spool file exclusively, so two never share a number). Its clock is
  // this host's CLOCK_MONOTONIC_RAW, shared by every rank of the tree: start and end samples
  // with offset 0 and round trip 0, marked exact (shared_clock). No MPI anywhere.
  bool claim() {
    std::lock_guard<std::mutex> g(claim_mu_);
    if (active_) return true;
    if (!tree_ || claim_failed_) return false;
    std::string origin;
    int want = -1;
    for (const char* k : {"RANK", "LOCAL_RANK"}) {
      const std::string v = env(k);
      if (!v.empty() && v.find_first_not_of("0123456789") == std::string::npos && v.size() < 7) {
        want = std::atoi(v.c_str());
        origin = std::string(k) + "=" + v;
        break;
      }
    }
    auto take = [&](int r) {
      const std::string path = spool_dir_ + "/rank-" + std::to_string(r) + ".kspool";
      int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0) return errno == EEXIST ? 0 : -1;
      ::close(fd);
      return spool_.open(path) ? 1 : -1;
    };
    int got = want >= 0 ? take(want) : 0;
    if (got == 1) {
      rank_ = want;
    } else if (got == 0) {
      origin = want >= 0 ? "start order (" + origin + " was taken by another process)"
                         : "start order (no RANK or LOCAL_RANK in its environment)";
      for (int r = 0; r < 65536 && got == 0; ++r)
        if ((got = take(r)) == 1) rank_ = r;
    }
    if (got != 1) {
      claim_failed_ = true;
      std::fprintf(err_, "kernalyse: cannot create a spool file in %s: %s; not profiling pid %ld\n",
                   spool_dir_.c_str(), std::strerror(errno), static_cast<long>(getpid()));
      std::fflush(err_);
      return false;
    }
    // Held until this process ends: kernalyse-run merges once every rank's lock is released.
    // (A fork()ed child closes its copy of the descriptor: on_fork_child.)
    ::flock(spool_.fd(), LOCK_EX | LOCK_NB);
    rank_origin_ = origin;
    const std::string ws = env("WORLD_SIZE");
    size_ = ws.empty() ? 0 : std::atoi(ws.c_str());
    command_ = own_command();
    anchor_ = std::atoll(env(env_name(RunEnv::AnchorNs), "0").c_str());
    pid_ = getpid();
    char host[256] = {0};
    gethostname(host, sizeof host - 1);
    host_ = host;
    start_ = ClockSample{now_raw_ns(), 0, 0};
    last_flush_ns_ = now_raw_ns();
    {
      std::lock_guard<std::mutex> m(mu_);
      meta_ready_ = meta_dirty_ = true;
      flush_locked();  // the Meta block first: the rank is known even if it dies at once
    }
    active_ = true;
    start_flusher();
    install_sigterm();
    return true;
  }

  // A tree rank's end: flush and close its spool (the top kernalyse-run merges the ranks).
  void finish_tree() {
    if (!active() || finished_) return;
    finished_ = true;
    power_.stop();
    if (!power_.problem().empty() && !quiet_)
      std::fprintf(err_, "kernalyse: rank %d: no GPU power samples (%s)\n", rank_,
                   power_.problem().c_str());
    collector::cupti_flush_registered(true);
    stop_flusher();
    std::lock_guard<std::mutex> g(mu_);
    end_ = ClockSample{now_raw_ns(), 0, 0};
    has_end_ = true;
    meta_dirty_ = true;
    flush_locked();
    spool_.close();
    closed_ = true;
  }

  // The application used CUDA, but CUDA never loaded our injection (no driver): say so once, and
  // store it as the rank's status. True if it did.
  bool note_cuda_without_driver(int rank) {
    if (collector::cuda_injection_seen() || collector::cuda_libraries_mapped().empty())
      return false;
    std::string why = collector::cuda_absent_reason();  // "no CUDA device: ..."
    if (why.empty()) return false;
    std::string detail = why.substr(why.find(':') + 1);
    while (!detail.empty() && detail[0] == ' ') detail.erase(0, 1);
    std::fprintf(err_,
                 "kernalyse: rank %d: no CUDA device (%s); GPU activity not recorded, the "
                 "application ran unprofiled\n",
                 rank, detail.c_str());
    std::fflush(err_);
    status(why.c_str(), nullptr);
    return true;
  }

  // Settings from kernalyse-run's environment (both modes).
  void configure() {
    // Our own handle on stderr: applications may close theirs before our exit-time merge
    // (coreutils closes stdout and stderr in an atexit handler).
    int fd = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
    err_ = fd >= 0 ? fdopen(fd, "w") : nullptr;
    if (!err_) err_ = stderr;
    output_ = env(env_name(RunEnv::Output), "run.h5");
    force_ = env(env_name(RunEnv::Force)) == "1";
    quiet_ = env(env_name(RunEnv::Quiet)) == "1";
    keep_spool_ = env(env_name(RunEnv::KeepSpool)) == "1";
    flush_records_ =
        std::max<int64_t>(1, std::atoll(env(env_name(RunEnv::FlushRecords), "100000").c_str()));
    flush_ns_ = std::max<int64_t>(1, std::atoll(env(env_name(RunEnv::FlushMs), "1000").c_str())) *
                1'000'000;
    command_ = env(env_name(RunEnv::Command));
  }

  // In a fork()ed child: the parent's spool descriptor (and its lock) and wake-up pipe are not
  // ours. The child starts over with a fresh Collector (claimable again in a tree).
  void drop_inherited() {
    if (spool_.fd() >= 0) ::close(spool_.fd());
    if (flusher_wake_r_ >= 0) ::close(flusher_wake_r_);
    if (flusher_wake_w_ >= 0) ::close(flusher_wake_w_);
  }

  // --- record intake (any thread): the Sink every source delivers to ---
  void activity(const kernalyse_emu_activity& a, bool emulated) override {
    intake([&] { rec_.activity(a, emulated); });
  }
  void launch(const kernalyse_emu_launch& l) override {
    intake([&] { rec_.launch(l); });
  }
  void nccl(const kernalyse_emu_nccl& n) override {
    intake([&] { rec_.nccl(n); });
  }
  void range(const kernalyse_emu_range& r) override {
    intake([&] { rec_.range(r); });
  }
  void memory(const kernalyse_emu_memory& m) override {
    intake([&] { rec_.memory(m); });
  }
  void counter(const kernalyse_emu_counter& c, bool emulated) override {
    intake([&] { rec_.counter(c, emulated); });
  }
  // CUPTI saw GPU work on this device: sample its power too (NVML is opened on the sampler's
  // thread, never on CUDA's).
  void gpu_device_used(int32_t ordinal, const char* nvml_uuid) override {
    power_.add_device(ordinal, nvml_uuid ? nvml_uuid : "");
    power_.start(*this, std::atoll(env(env_name(RunEnv::PowerMs), "100").c_str()));  // once
  }
  void losses(const collector::LossCounts& c) override {
    intake([&] { rec_.losses(c); }, false);
  }
  void status(const char* line, const char* device_name) override {
    intake([&] { rec_.status(line, device_name); }, false);
  }
  void coll_mark(const kernalyse_emu_coll_mark& m) override {
    intake([&] { rec_.coll_mark(m); });
  }

  // --- MPI lifecycle ---
  void on_mpi_initialized() {
    // A tree rank's clock is the host's (shared); an application's own MPI is none of our business.
    if (!active() || tree_ || synced_start_) return;
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
    int size = 1;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    std::lock_guard<std::mutex> g(mu_);
    anchor_ = anchor;
    rank_ = r;
    size_ = size;
    meta_ready_ = meta_dirty_ = true;  // the Meta block (rank, size, start sample, anchor) now
    flush_locked();
  }

  // Collective: end sync, then the parallel write. Returns with MPI still initialised.
  void finish() {
    if (!active() || tree_ || finished_) return;
    finished_ = true;
    // MPI brought up only now (an application that never calls MPI): one sample, offset only.
    const bool one_point = !synced_start_;
    if (!synced_start_) on_mpi_initialized();
    ClockSample end = one_point ? start_ : measure_offset_to_root(MPI_COMM_WORLD);
    ClockModel clock = one_point ? fit_clock(start_, nullptr) : fit_clock(start_, &end);
    int rank = 0, size = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    // ---- CUPTI source hooks (collector/src/cuda_presence.h) ----------------------------------
    // What CUPTI still holds goes through the Sink before the spool closes (not under mu_: the
    // flush delivers records on this thread). Then: the application used CUDA, but CUDA never
    // loaded our injection because there is no driver: say so once, and store it per rank.
    power_.stop();
    if (!power_.problem().empty() && !quiet_)
      std::fprintf(err_, "kernalyse: rank %d: no GPU power samples (%s)\n", rank,
                   power_.problem().c_str());
    collector::cupti_flush_registered(true);
    note_cuda_without_driver(rank);
    // ---- end CUPTI source hooks ----------------------------------------------------------
    stop_flusher();
    {
      std::lock_guard<std::mutex> g(mu_);
      end_ = end;
      has_end_ = true;
      meta_dirty_ = true;  // the Meta block again, with the end sample
      flush_locked();
      spool_.close();
      closed_ = true;
    }
    // Everything is on disk: from here a SIGTERM just ends the process.
    if (sigterm_installed_) std::signal(SIGTERM, SIG_DFL);
    spool::Contents c = spool::read(spool_.path());
    SpoolMeta meta;
    meta.rank = rank;
    meta.world_size = size;
    meta.pid = pid_;
    meta.host = host_;
    meta.command = command_;
    meta.anchor_ns = anchor_;
    meta.emulated = rec_.emulated();
    meta.tool_version = KERNALYSE_VERSION;
    Store local = spool_to_store(c, meta, clock);
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
    // Lost records are never silent: summed over ranks and named on stderr (and in /ranks).
    int64_t lost[2] = {local.ranks.empty() ? 0 : local.ranks[0].records_dropped_cupti,
                       local.ranks.empty() ? 0 : local.ranks[0].records_dropped};
    int64_t lost_all[2] = {0, 0};
    MPI_Reduce(lost, lost_all, 2, MPI_INT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
    int emulated = local.attrs.emulated ? 1 : 0, any_emulated = 0;  // any rank: the label
    MPI_Reduce(&emulated, &any_emulated, 1, MPI_INT, MPI_MAX, 0, MPI_COMM_WORLD);
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
                     any_emulated ? " (EMULATED device)" : "",
                     static_cast<double>(max_unc) / 1000.0);
      }
      if (lost_all[0] + lost_all[1] > 0)
        std::fprintf(err_,
                     "kernalyse-run: warning: %lld records lost (CUPTI: %lld, dropped or still "
                     "running at the final flush; kernalyse: %lld); per rank in /ranks "
                     "records_dropped*; docs/collector.md says how to enlarge the buffers\n",
                     static_cast<long long>(lost_all[0] + lost_all[1]),
                     static_cast<long long>(lost_all[0]), static_cast<long long>(lost_all[1]));
      std::fflush(err_);
    }
  }

  bool we_initialised_mpi = false;
  int rank() const { return rank_; }

  // One line saying what this rank could record (RankInfo::collector_status); latest wins.
  // SIGTERM (async-signal-safe part): ask the flush thread for a flush through the pipe and wait
  // for it, at most 2 s, with nanosleep; then the caller re-raises with the default action.
  void flush_for_signal() {
    if (getpid() != pid_ || flusher_wake_w_ < 0 || t_in_intake) return;
    term_requested_.store(true);
    char b = 't';
    if (::write(flusher_wake_w_, &b, 1) < 0) return;
    const timespec nap{0, 5'000'000};
    for (int i = 0; i < 400 && !term_flushed_.load(); ++i) nanosleep(&nap, nullptr);
  }

 private:
  Collector() = default;

  // The parent's collector this fork()ed child's one replaced: its memory copy is never freed
  // (its destructor would touch the parent's threads and files) but stays reachable, so that a
  // leak checker does not report it (LSan did, in every spawned rank).
  Collector* inherited_ = nullptr;

  // One record into the buffers: under the mutex (a SIGTERM meanwhile is deferred, see
  // IntakeGuard), nothing after finish() closed the spool, and a flush when enough are pending.
  template <class F>
  void intake(F&& take, bool is_record = true) {
    IntakeGuard in;
    std::lock_guard<std::mutex> g(mu_);
    if (closed_) return;
    take();
    if (is_record) after_add();
  }

  // The time-based flush for quiet ranks: a thread that wakes when the oldest pending record is
  // --flush-ms old (or when SIGTERM asks, through a pipe) and flushes.
  void start_flusher() {
    int p[2];
    if (::pipe2(p, O_CLOEXEC | O_NONBLOCK) != 0) return;
    flusher_wake_r_ = p[0];
    flusher_wake_w_ = p[1];
    // The thread must not take SIGTERM itself (the handler waits for it): block it while
    // creating the thread, which inherits the mask.
    sigset_t term, old;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &term, &old);
    // pthread_create on `this`, not std::thread: std::thread hands the new thread a heap
    // object only that thread references, and in a fork()ed child of the application (a shell
    // rank's subshells), where the thread does not exist, LeakSanitizer reports it as leaked.
    // The collector itself stays reachable (a global that is never destroyed).
    flusher_started_ = pthread_create(
                           &flusher_, nullptr,
                           [](void* self) -> void* {
                             static_cast<Collector*>(self)->flusher_loop();
                             return nullptr;
                           },
                           this) == 0;
    pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }

  void stop_flusher() {
    if (!flusher_started_) return;
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_flusher_ = true;
    }
    char b = 'q';
    if (::write(flusher_wake_w_, &b, 1) < 0) {
    }
    pthread_join(flusher_, nullptr);
    flusher_started_ = false;
  }

  void flusher_loop() {
    for (;;) {
      int timeout_ms;
      {
        std::lock_guard<std::mutex> g(mu_);
        if (stop_flusher_) return;
        const int64_t due = pending_ > 0 ? last_flush_ns_ + flush_ns_ - now_raw_ns() : flush_ns_;
        timeout_ms = static_cast<int>(std::max<int64_t>(0, due) / 1'000'000 + 1);
      }
      pollfd pf{flusher_wake_r_, POLLIN, 0};
      ::poll(&pf, 1, timeout_ms);
      char buf[64];
      while (::read(flusher_wake_r_, buf, sizeof buf) > 0) {
      }
      std::lock_guard<std::mutex> g(mu_);
      if (stop_flusher_) return;
      const bool term = term_requested_.load();
      if (!closed_ && (term || (pending_ > 0 && now_raw_ns() - last_flush_ns_ >= flush_ns_)))
        flush_locked();
      if (term) term_flushed_.store(true);
    }
  }

  void install_sigterm() {
    struct sigaction old {};
    if (sigaction(SIGTERM, nullptr, &old) != 0) return;
    // Leave an inherited "ignore" or a handler someone else installed alone.
    if ((old.sa_flags & SA_SIGINFO) || old.sa_handler != SIG_DFL) return;
    struct sigaction sa {};
    sa.sa_handler = on_sigterm;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigterm_installed_ = sigaction(SIGTERM, &sa, nullptr) == 0;
  }

  void write_meta_locked() {
    spool::Meta m;
    auto& f = m.fixed;
    f.rank = rank_;
    f.world_size = size_;
    f.pid = pid_;
    f.start_local_ns = start_.local_ns;
    f.start_offset_ns = start_.offset_ns;
    f.start_rtt_ns = start_.rtt_ns;
    f.has_start = meta_ready_ ? 1 : 0;
    f.end_local_ns = end_.local_ns;
    f.end_offset_ns = end_.offset_ns;
    f.end_rtt_ns = end_.rtt_ns;
    f.has_end = has_end_ ? 1 : 0;
    f.anchor_ns = anchor_;
    f.written_ns = now_raw_ns();
    f.exchanges = 20;  // measure_offset_to_root's default, as the collector calls it
    f.emulated = rec_.emulated() ? 1 : 0;
    f.shared_clock = tree_ ? 1 : 0;
    m.host = host_;
    m.command = command_;
    m.rank_origin = rank_origin_;
    meta_emulated_ = rec_.emulated();
    if (!spool_.write_meta(m)) spool_write_failed();
    meta_dirty_ = false;
  }

  void spool_write_failed() {
    if (spool_failed_) return;
    spool_failed_ = true;
    std::fprintf(err_, "kernalyse-run: writing spool %s failed: %s; records are being lost\n",
                 spool_.path().c_str(), std::strerror(errno));
    std::fflush(err_);
  }

  void open_spool() {
    // One directory per job next to the output; one file per rank.
    std::string job = env("PMIX_NAMESPACE");
    if (job.empty()) job = env("SLURM_JOB_ID");
    if (job.empty()) job = "pid" + std::to_string(getppid());
    for (char& ch : job)
      if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
    std::string dir = env(env_name(RunEnv::SpoolDir));
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
    if (closed_) return;
    if (!rec_.flush(spool_)) spool_write_failed();
    // Meta after the records it describes: rank, size and clock once MPI is up; again when the
    // emulated flag turns on, and at finish with the end sample.
    if (meta_ready_ && (meta_dirty_ || meta_emulated_ != rec_.emulated())) write_meta_locked();
    pending_ = 0;
    last_flush_ns_ = now_raw_ns();
  }

  // Atomic: a tree rank turns active on its first record, while other threads may be checking.
  std::atomic<bool> active_{false}, claim_failed_{false};
  bool tree_ = false;
  std::string rank_origin_;
  std::mutex claim_mu_;
  std::FILE* err_ = stderr;
  bool synced_start_ = false, finished_ = false;
  std::string output_, command_, spool_dir_;
  bool force_ = false, quiet_ = false, keep_spool_ = false, spool_failed_ = false;
  int rank_hint_ = 0;
  int64_t flush_records_ = 100000, flush_ns_ = 1'000'000'000, last_flush_ns_ = 0, pending_ = 0;
  int64_t anchor_ = 0;
  ClockSample start_, end_;
  bool has_end_ = false, closed_ = false, meta_ready_ = false, meta_dirty_ = false,
       meta_emulated_ = false;
  bool sigterm_installed_ = false;
  int rank_ = 0, size_ = 1;
  long pid_ = 0;
  std::string host_;
  pthread_t flusher_{};
  bool flusher_started_ = false;
  bool stop_flusher_ = false;
  int flusher_wake_r_ = -1, flusher_wake_w_ = -1;
  std::atomic<bool> term_requested_{false}, term_flushed_{false};
  std::mutex mu_;
  collector::Recorder rec_;
  collector::PowerSampler power_;
  spool::Writer spool_;
};

// SIGTERM in the profiled process: flush the spool (through the flush thread; see
// flush_for_signal), then die of SIGTERM as if we had not been here.
void on_sigterm(int sig) {
  const int saved = errno;
  if (t_in_intake) {  // this thread holds the record mutex: finish the intake first
    g_term_deferred = 1;
    errno = saved;
    return;
  }
  Collector::get().flush_for_signal();
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, nullptr);
  raise(sig);  // pending until the handler returns (the signal is blocked in its handler)
  errno = saved;
}

void on_fork_child() { Collector::renew_in_child(); }

void finish_at_exit() {
  Collector& c = Collector::get();
  if (c.tree()) {
    // A process that linked CUDA but found no driver still becomes a rank, to say so.
    if (c.claimable() && collector::cuda_injection_seen() == false &&
        !collector::cuda_libraries_mapped().empty() && !collector::cuda_absent_reason().empty() &&
        c.claim())
      c.note_cuda_without_driver(c.rank());
    c.finish_tree();
    return;
  }
  if (!c.active()) return;
  int init = 0, fin = 0;
  MPI_Initialized(&init);
  MPI_Finalized(&fin);
  if (fin) return;
  if (!init) {
    // An application that never called MPI: bring MPI up now, merge, finalise.
    int provided = 0;
    if (PMPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return;
    c.we_initialised_mpi = true;
  }
  c.finish();
  if (c.we_initialised_mpi) PMPI_Finalize();
}

__attribute__((constructor)) void kernalyse_collector_init() {
  Collector& c = Collector::get();
  c.activate();
  // Every fork()ed child starts with a fresh collector: inert, or claimable in a process tree.
  if (c.tree() || c.active()) pthread_atfork(nullptr, nullptr, on_fork_child);
  if (c.tree()) {
    std::atexit(finish_at_exit);  // the atexit entry is inherited by forked children
    return;
  }
  if (!c.active()) return;
  // MPI applications bring MPI up themselves (intercepted below). One that never calls MPI
  // gets it from us at exit, not at start: a shell wrapper (`bash -c 'python train.py'`) often
  // exec()s its last command in the same process, and the program it becomes activates the
  // collector again; an MPI_Init before that exec would register this rank twice.
  std::atexit(finish_at_exit);
}

}  // namespace

// The collector to record into, or null: in a process tree the first record makes this process a
// rank (claim()); otherwise only the process kernalyse-run started records.
Collector* recording_collector() {
  Collector& c = Collector::get();
  if (c.recording()) return &c;
  if (c.claimable() && c.claim()) return &c;
  return nullptr;
}

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

// A process-tree rank that ends with _exit() skips the atexit handlers: Python's multiprocessing
// workers (os._exit after the target returns), forked servers. Interposed (LD_PRELOAD) so such a
// rank still flushes and closes its spool; any other process goes straight to the system call.
// exit() reaches the real _exit inside libc, not through here.
[[noreturn]] void _exit(int status) {
  if (g_collector && g_collector->tree() && g_collector->active()) g_collector->finish_tree();
  syscall(SYS_exit_group, status);
  for (;;) {
  }
}
[[noreturn]] void _Exit(int status) { _exit(status); }

int64_t kernalyse_emu_now_ns(void) { return kernalyse::now_raw_ns(); }

void kernalyse_emu_record_activity(const kernalyse_emu_activity* a) {
  Collector* c = recording_collector();
  if (c && a) c->activity(*a, /*emulated=*/true);
}
void kernalyse_emu_record_launch(const kernalyse_emu_launch* l) {
  Collector* c = recording_collector();
  if (c && l) c->launch(*l);
}
void kernalyse_emu_record_nccl(const kernalyse_emu_nccl* n) {
  Collector* c = recording_collector();
  if (c && n) c->nccl(*n);
}
void kernalyse_emu_record_range(const kernalyse_emu_range* r) {
  Collector* c = recording_collector();
  if (c && r) c->range(*r);
}
void kernalyse_emu_record_memory(const kernalyse_emu_memory* m) {
  Collector* c = recording_collector();
  if (c && m) c->memory(*m);
}
void kernalyse_emu_record_coll_mark(const kernalyse_emu_coll_mark* m) {
  Collector* c = recording_collector();
  if (c && m) c->coll_mark(*m);
}
void kernalyse_emu_record_counter(const kernalyse_emu_counter* k) {
  Collector* c = recording_collector();
  if (c && k && k->name) c->counter(*k, /*emulated=*/true);
}

}  // extern "C"

namespace kernalyse::collector {

// CUDA (InitializeInjection, from cuInit) and NCCL (profiler init) ask here: in a process tree
// that makes this process a rank.
Sink* process_sink() {
  Collector* c = recording_collector();
  return c && c->active() ? c : nullptr;
}

int64_t now_ns() { return kernalyse::now_raw_ns(); }

}  // namespace kernalyse::collector
