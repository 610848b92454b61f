// kernalyse-run: runs an application under the collector.
//   mpirun -n 4 kernalyse-run [-o run.h5] [--force] ./app args...     (one MPI rank each)
//   kernalyse-run [-o run.h5] torchrun --nproc-per-node 2 train.py     (a process tree)
//   torchrun --no-python --nproc-per-node 2 kernalyse-run python train.py
// It injects libkernalyse_collector.so (LD_PRELOAD: PMPI interception and the emulated-device
// API; CUDA_INJECTION64_PATH for CUPTI, NCCL_PROFILER_PLUGIN for NCCL), runs the application as a
// child and exits with the application's exit code. Under an MPI launcher the collector writes the
// store at MPI_Finalize; otherwise every process of the tree that brings up CUDA or the emulated
// device becomes a rank with its own spool, and this process merges the spools at the end
// (kernalyse-merge --spool DIR --from-run). docs/collector.md, "Process trees".
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernalyse/run_env.h"  // header-only: kernalyse-run links nothing of ours

namespace fs = std::filesystem;
using kernalyse::env_name;
using kernalyse::RunEnv;

namespace {

pid_t g_child = -1;
volatile sig_atomic_t g_got_signal = 0;  // a forwarded signal (the run was killed)

void forward(int sig) {
  g_got_signal = sig;
  if (g_child > 0) kill(g_child, sig);
}

// The processes below `root` (not `root` itself), from /proc: the process tree to signal on
// --timeout. As a child subreaper we also adopt the tree's orphans, so they are found too.
std::vector<pid_t> descendants(pid_t root) {
  std::vector<std::pair<pid_t, pid_t>> pp;  // (pid, ppid)
  std::error_code ec;
  for (const auto& e : fs::directory_iterator("/proc", ec)) {
    const std::string n = e.path().filename().string();
    if (n.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(e.path() / "stat");
    std::string line;
    if (!std::getline(f, line)) continue;
    const size_t close = line.rfind(')');  // the command may hold spaces and parentheses
    if (close == std::string::npos) continue;
    char state = 0;
    long ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %ld", &state, &ppid) != 2) continue;
    pp.push_back({static_cast<pid_t>(std::atol(n.c_str())), static_cast<pid_t>(ppid)});
  }
  std::vector<pid_t> out{root};
  for (size_t i = 0; i < out.size(); ++i)
    for (const auto& [pid, ppid] : pp)
      if (ppid == out[i]) out.push_back(pid);
  out.erase(out.begin());
  return out;
}

void signal_tree(pid_t root, int sig) {
  for (pid_t p : descendants(root)) kill(p, sig);
  kill(root, sig);
}

int64_t now_ns(clockid_t id) {
  timespec ts{};
  clock_gettime(id, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1'000'000'000 + ts.tv_nsec;
}

bool has_env(const char* k) {
  const char* v = std::getenv(k);
  return v && *v;
}

// The spool files in `dir` whose writers are still alive (each rank holds an exclusive flock on
// its spool file until it exits).
int busy_spools(const std::string& dir) {
  int busy = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".kspool") continue;
    int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) continue;
    if (flock(fd, LOCK_SH | LOCK_NB) != 0) ++busy;
    ::close(fd);
  }
  return busy;
}

bool any_spool(const std::string& dir) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".kspool") return true;
  return false;
}

// Runs a command (no shell) and returns its exit status (-1 if it could not run); its stdout
// goes to our stderr if asked (a report beside our own messages, not into the application's
// output).
int run_command(const std::vector<std::string>& args, bool stdout_to_stderr) {
  pid_t p = fork();
  if (p < 0) return -1;
  if (p == 0) {
    if (stdout_to_stderr) dup2(STDERR_FILENO, STDOUT_FILENO);
    unsetenv("LD_PRELOAD");  // the merge is not part of the recorded tree
    unsetenv(env_name(RunEnv::Tree));
    std::vector<char*> av;
    for (const auto& a : args) av.push_back(const_cast<char*>(a.c_str()));
    av.push_back(nullptr);
    execv(av[0], av.data());
    _exit(127);
  }
  int st = 0;
  while (waitpid(p, &st, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

std::string self_dir() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return ".";
  buf[n] = 0;
  return fs::path(buf).parent_path().string();
}

// The collector library: next to us in lib/ (build tree and install tree alike).
std::string find_collector() {
  if (const char* e = std::getenv(env_name(RunEnv::Collector))) return e;
  fs::path bin = self_dir();
  for (const fs::path& p :
       {bin / "../lib/libkernalyse_collector.so", bin / "libkernalyse_collector.so"}) {
    std::error_code ec;
    if (fs::exists(p, ec)) return fs::weakly_canonical(p, ec).string();
  }
  return "";
}

// Like a shell: the program path as executed, or an error code 127 (not found) / 126 (not
// executable).
int resolve(const std::string& app, std::string* path, std::string* why) {
  auto check = [&](const std::string& p) -> int {
    struct stat st;
    if (stat(p.c_str(), &st) != 0) return 127;
    if (S_ISDIR(st.st_mode) || access(p.c_str(), X_OK) != 0) return 126;
    *path = p;
    return 0;
  };
  if (app.find('/') != std::string::npos) {
    int rc = check(app);
    *why = rc == 127   ? "no such file"
           : rc == 126 ? "not an executable file (permission denied)"
                       : "";
    return rc;
  }
  const char* pathenv = std::getenv("PATH");
  std::string dirs = pathenv ? pathenv : "/usr/bin:/bin";
  int best = 127;
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string d = dirs.substr(start, end - start);
    int rc = check((d.empty() ? "." : d) + "/" + app);
    if (rc == 0) return 0;
    if (rc == 126) best = 126;
    start = end + 1;
  }
  *why = best == 127 ? "command not found" : "not an executable file (permission denied)";
  return best;
}

// After the application of a process tree ended: wait for the ranks' spools (each rank holds a
// lock on its file while alive), print the hang report if the run was killed or timed out, and
// merge the spools into one store with kernalyse-merge (found next to us). A torchrun worker
// marks itself done; the one with LOCAL_RANK 0 waits for the others and merges. False if the
// merge failed.
bool finish_tree(const std::string& dir, const std::string& out, bool worker, bool killed,
                 bool force, bool quiet, bool keep_spool, const std::string& app, bool timed_out) {
  auto wait_until = [](auto&& done, double seconds) {
    for (int k = 0; k < seconds * 50 && !done(); ++k) usleep(20000);
    return done();
  };
  if (worker) {
    const std::string lr = std::getenv("LOCAL_RANK");
    std::ofstream(dir + "/done-" + lr) << "done\n";
    if (lr != "0") return true;
    const int n = std::atoi(std::getenv("LOCAL_WORLD_SIZE"));
    auto all_done = [&] {
      int k = 0;
      std::error_code ec;
      for (const auto& e : fs::directory_iterator(dir, ec))
        k += e.path().filename().string().rfind("done-", 0) == 0;
      return k >= n;
    };
    // A killed job's workers may never report (SIGKILL): then only a short wait.
    const int patience = killed ? 10 : 600;
    if (!wait_until(all_done, patience))
      std::fprintf(stderr, "kernalyse-run: not every worker finished within %d s; merging\n",
                   patience);
  }
  if (!wait_until([&] { return busy_spools(dir) == 0; }, 10))
    std::fprintf(stderr,
                 "kernalyse-run: %d rank(s) still running 10 s after %s ended; merging what they "
                 "have flushed\n",
                 busy_spools(dir), app.c_str());
  if (!any_spool(dir)) {
    if (!quiet)
      std::fprintf(stderr,
                   "kernalyse-run: no process of %s brought up CUDA or the emulated device: "
                   "nothing recorded, no store written\n",
                   app.c_str());
    std::error_code ec;
    fs::remove_all(dir, ec);
    return true;
  }
  const std::string merge = self_dir() + "/kernalyse-merge";
  if (killed) {
    std::fprintf(stderr, "kernalyse-run: the run was %s; collective progress per rank:\n",
                 timed_out ? "stopped at its --timeout" : "killed");
    std::fflush(stderr);
    run_command({merge, "--spool", dir, "--hang"}, true);
  }
  std::vector<std::string> args{merge, "--spool",    dir,          "-o",
                                out,   "--from-run", "--progress", "off"};
  if (force) args.push_back("--force");
  if (quiet) args.push_back("-q");
  if (run_command(args, false) != 0) {
    std::fprintf(stderr, "kernalyse-run: merging the spool failed (spool files kept in %s)\n",
                 dir.c_str());
    return false;
  }
  std::error_code ec;
  if (!keep_spool) fs::remove_all(dir, ec);
  return true;
}

// The command line: kernalyse-run's own options, then the application and its arguments (never
// parsed: everything from the first word that is not one of our options belongs to it).
struct RunOptions {
  std::string output = "run.h5", spool_dir, flush_records, flush_ms;
  bool force = false, quiet = false, keep_spool = false, nvtx = false;
  double timeout_s = 0;
  std::vector<std::string> command;  // the application and its arguments
};

// -1: parsed; otherwise the exit code (0 after --help, 2 for a bad command line).
int parse_args(int argc, char** argv, RunOptions* o) {
  CLI::App app{
      "kernalyse-run [OPTIONS] [--] APP [ARGS...]\n"
      "Runs APP under the kernalyse collector and writes one store (default run.h5; an existing\n"
      "file is never overwritten: the next free name is used and reported, unless --force).\n"
      "Under mpirun/srun APP is one MPI rank. Otherwise every process of APP's tree that brings\n"
      "up CUDA or the emulated device is a rank (RANK, else LOCAL_RANK, else start order);\n"
      "--timeout S ends the tree after S seconds (SIGTERM, then SIGKILL 5 s later) and, like a\n"
      "killed run, prints the hang report. Exit code: APP's. Options end at APP: its own\n"
      "arguments are passed on untouched.",
      "kernalyse-run"};
  std::string timeout;
  app.add_option("-o,--output", o->output, "write the store to FILE")
      ->type_name("FILE")
      ->capture_default_str();
  app.add_flag("--force", o->force, "replace an existing store");
  app.add_option("--flush-records", o->flush_records, "records per spool block (default 100000)")
      ->type_name("N");
  app.add_option("--flush-ms", o->flush_ms, "spool flush interval (default 1000 ms)")
      ->type_name("T");
  app.add_option("--spool-dir", o->spool_dir, "the ranks' spool files go here")->type_name("DIR");
  app.add_flag("--keep-spool", o->keep_spool, "keep the spool files after the merge");
  app.add_flag("--nvtx", o->nvtx, "record NVTX ranges through CUPTI (CUDA builds)");
  app.add_option("--timeout", timeout, "end the process tree after S seconds")->type_name("S");
  app.add_flag("-q,--quiet", o->quiet, "no progress or summary on stderr");
  app.prefix_command();  // APP and everything after it: app.remaining()
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "kernalyse-run: %s (kernalyse-run --help)\n", e.what());
    return 2;
  }
  o->command = app.remaining();
  if (!o->command.empty() && o->command[0] == "--") {
    o->command.erase(o->command.begin());
  } else if (!o->command.empty() && o->command[0][0] == '-') {
    std::fprintf(stderr, "kernalyse-run: unknown option %s (kernalyse-run --help)\n",
                 o->command[0].c_str());
    return 2;
  }
  if (o->command.empty()) {
    std::fprintf(stderr, "kernalyse-run: no application given (kernalyse-run --help)\n");
    return 2;
  }
  if (!timeout.empty() || app.count("--timeout")) {
    char* end = nullptr;
    o->timeout_s = std::strtod(timeout.c_str(), &end);
    if (timeout.empty() || *end || !(o->timeout_s > 0)) {
      std::fprintf(stderr, "kernalyse-run: --timeout needs a positive number of seconds\n");
      return 2;
    }
  }
  return -1;
}

// The collector's settings (run_env.h) and its injection: LD_PRELOAD (PMPI interception and the
// emulated-device API), and the collector as CUDA's injection library and NCCL's profiler plugin.
void export_collector_env(const RunOptions& o, const std::string& out_abs,
                          const std::string& collector) {
  std::string cmd;
  for (const std::string& a : o.command) cmd += (cmd.empty() ? "" : " ") + a;
  std::error_code ec;
  setenv(env_name(RunEnv::Output), out_abs.c_str(), 1);
  setenv(env_name(RunEnv::Force), o.force ? "1" : "0", 1);
  setenv(env_name(RunEnv::Quiet), o.quiet ? "1" : "0", 1);
  setenv(env_name(RunEnv::KeepSpool), o.keep_spool ? "1" : "0", 1);
  setenv(env_name(RunEnv::Command), cmd.c_str(), 1);
  if (!o.spool_dir.empty())
    setenv(env_name(RunEnv::SpoolDir), fs::absolute(o.spool_dir, ec).c_str(), 1);
  if (!o.flush_records.empty()) setenv(env_name(RunEnv::FlushRecords), o.flush_records.c_str(), 1);
  if (!o.flush_ms.empty()) setenv(env_name(RunEnv::FlushMs), o.flush_ms.c_str(), 1);
  // CUDA loads the same library from cuInit (InitializeInjection: the CUPTI source) and NCCL as
  // its profiler plugin (ncclProfiler_v5). A CUDA_INJECTION64_PATH naming another tool (Nsight
  // Systems does this) wins: one CUPTI client per process.
  auto inject = [&](const char* var) {
    const char* old = std::getenv(var);
    std::error_code e2;
    if (old && *old && fs::weakly_canonical(old, e2) != fs::weakly_canonical(collector, e2)) {
      std::fprintf(stderr, "kernalyse-run: %s is already set (%s); leaving it alone: %s\n", var,
                   old,
                   std::strcmp(var, "CUDA_INJECTION64_PATH") == 0 ? "GPU activity not recorded"
                                                                  : "NCCL events not recorded");
      return;
    }
    setenv(var, collector.c_str(), 1);
  };
#ifdef KERNALYSE_HAVE_CUPTI
  inject("CUDA_INJECTION64_PATH");  // only if the collector exports InitializeInjection
  // NVTX ranges reach CUPTI (as MARKER records, then store annotations) only when NVTX loads
  // libcupti as its injection. Opt-in (--nvtx) until a GPU run has shown it safe: NVTX issue #125
  // reports a crash in libcupti's nvtxNameOsThreadA with CUDA 13.0. A user's own setting wins.
  if (o.nvtx) setenv("NVTX_INJECTION64_PATH", KERNALYSE_LIBCUPTI, 0);
#endif
  inject("NCCL_PROFILER_PLUGIN");
  std::string preload = collector;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload.append(":").append(old);
  setenv("LD_PRELOAD", preload.c_str(), 1);
}

// A process tree's spool directory (named by host and pid: nodes sharing a file system, and the
// same -o, never meet there; a torchrun worker's is its launcher's) and the one clock anchor
// (CLOCK_REALTIME − CLOCK_MONOTONIC_RAW) of every rank: ours, or, for torchrun workers, the first
// worker's (a file in the spool directory; the others read it). 0, or the exit code.
int prepare_tree(const RunOptions& o, const std::string& out_abs, bool worker,
                 std::string* tree_dir) {
  std::error_code ec;
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  *tree_dir = !o.spool_dir.empty() ? fs::absolute(o.spool_dir, ec).string()
                                   : out_abs + ".spool-tree-" + host + "-" +
                                         std::to_string(worker ? getppid() : getpid());
  if (::mkdir(tree_dir->c_str(), 0755) != 0 && !(errno == EEXIST && fs::is_directory(*tree_dir))) {
    std::fprintf(stderr, "kernalyse-run: cannot create spool directory %s: %s\n", tree_dir->c_str(),
                 std::strerror(errno));
    return 2;
  }
  if (!worker && any_spool(*tree_dir)) {
    std::fprintf(stderr, "kernalyse-run: %s already holds spool files of another run\n",
                 tree_dir->c_str());
    return 2;
  }
  int64_t anchor = now_ns(CLOCK_REALTIME) - now_ns(CLOCK_MONOTONIC_RAW);
  if (worker) {
    const std::string af = *tree_dir + "/anchor";
    int fd = ::open(af.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd >= 0) {
      const std::string tmp = std::to_string(anchor) + "\n";
      ssize_t w = ::write(fd, tmp.data(), tmp.size());
      (void)w;
      ::close(fd);
    } else {
      for (int k = 0; k < 200; ++k) {  // written by the first worker just now: at most 2 s
        std::ifstream f(af);
        long long v = 0;
        if (f >> v) {
          anchor = v;
          break;
        }
        usleep(10000);
      }
    }
  }
  setenv(env_name(RunEnv::Tree), tree_dir->c_str(), 1);
  setenv(env_name(RunEnv::AnchorNs), std::to_string(anchor).c_str(), 1);
  // Orphans of the tree (a worker whose parent died) are re-parented to us: we can signal them
  // on --timeout and wait for their spools.
  if (!worker) prctl(PR_SET_CHILD_SUBREAPER, 1UL, 0UL, 0UL, 0UL);
  return 0;
}

// argv for execv, pointing into `command`.
std::vector<char*> exec_argv(const std::vector<std::string>& command) {
  std::vector<char*> av;
  for (const std::string& a : command) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  return av;
}

// Forks and execs the application (g_child) with our signals forwarded to it. A close-on-exec
// pipe tells us whether exec itself failed (said on stderr). False if it could not start.
bool start_app(const std::string& path, const std::vector<std::string>& command) {
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) {
    std::perror("kernalyse-run: pipe");
    return false;
  }
  std::vector<char*> av = exec_argv(command);
  g_child = fork();
  if (g_child < 0) {
    std::perror("kernalyse-run: fork");
    return false;
  }
  if (g_child == 0) {
    close(pfd[0]);
    // Only this pid activates the collector; the app's own children inherit LD_PRELOAD only.
    setenv(env_name(RunEnv::Pid), std::to_string(getpid()).c_str(), 1);
    execv(path.c_str(), av.data());
    int err = errno;
    ssize_t w = write(pfd[1], &err, sizeof err);
    (void)w;
    _exit(err == ENOENT ? 127 : 126);
  }
  close(pfd[1]);
  struct sigaction sa {};
  sa.sa_handler = forward;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2}) sigaction(sig, &sa, nullptr);
  int err = 0;
  if (read(pfd[0], &err, sizeof err) == static_cast<ssize_t>(sizeof err))
    std::fprintf(stderr, "kernalyse-run: %s: %s\n", command[0].c_str(), std::strerror(err));
  close(pfd[0]);
  return true;
}

// Waits for the application; returns its wait status. Polling (20 ms) where there is a deadline
// or a tree: the tree's orphans adopted as subreaper are reaped too, a forwarded signal goes to
// the whole tree, and --timeout sends SIGTERM to it, SIGKILL 5 s later.
int wait_app(const RunOptions& o, bool mpi, bool worker, bool* timed_out) {
  int status = 0;
  if (o.timeout_s <= 0 && mpi) {
    while (waitpid(g_child, &status, 0) < 0 && errno == EINTR) {
    }
    return status;
  }
  const int64_t deadline =
      o.timeout_s > 0 ? now_ns(CLOCK_MONOTONIC) + static_cast<int64_t>(o.timeout_s * 1e9) : 0;
  int64_t kill_at = 0;
  bool signalled_tree = false;
  for (;;) {
    int st = 0;
    pid_t w = waitpid(mpi || worker ? g_child : -1, &st, WNOHANG);
    if (w == g_child) return st;
    if (w < 0 && errno == ECHILD) return status;
    if (w > 0) continue;  // an adopted orphan
    const int64_t t = now_ns(CLOCK_MONOTONIC);
    // A signal we forwarded to the application goes to the rest of its tree too (here, not in
    // the handler: walking /proc is not async-signal-safe).
    if (const int sig = g_got_signal; sig != 0 && !mpi && !worker && !signalled_tree) {
      signalled_tree = true;
      signal_tree(g_child, sig);
    }
    if (deadline > 0 && !*timed_out && t >= deadline) {
      *timed_out = true;
      std::fprintf(stderr,
                   "kernalyse-run: %s still running after --timeout %g s: stopping it "
                   "(SIGTERM, SIGKILL 5 s later)\n",
                   o.command[0].c_str(), o.timeout_s);
      signal_tree(g_child, SIGTERM);
      kill_at = t + 5'000'000'000;
    }
    if (kill_at > 0 && t >= kill_at) {
      signal_tree(g_child, SIGKILL);
      kill_at = 0;
    }
    usleep(20000);
  }
}

}  // namespace

int main(int argc, char** argv) {
  RunOptions o;
  if (int rc = parse_args(argc, argv, &o); rc >= 0) return rc;
  const std::string& app = o.command[0];
  std::string path, why;
  if (int rc = resolve(app, &path, &why)) {
    std::fprintf(stderr, "kernalyse-run: %s: %s\n", app.c_str(), why.c_str());
    return rc;
  }
  // Inside a process tree that an outer kernalyse-run records (kernalyse-run torchrun
  // --no-python kernalyse-run ...): the outer one does everything; just become the application.
  if (has_env(env_name(RunEnv::Tree))) {
    execv(path.c_str(), exec_argv(o.command).data());
    std::fprintf(stderr, "kernalyse-run: %s: %s\n", app.c_str(), std::strerror(errno));
    return errno == ENOENT ? 127 : 126;
  }
  std::string collector = find_collector();
  if (collector.empty()) {
    std::fprintf(stderr, "kernalyse-run: libkernalyse_collector.so not found next to %s\n",
                 self_dir().c_str());
    return 2;
  }
  // The collector runs inside the application, whose working directory may change: absolute.
  std::error_code ec;
  std::string out_abs = fs::absolute(o.output, ec).string();
  std::string dir = fs::path(out_abs).parent_path().string();
  if (access(dir.c_str(), W_OK) != 0) {
    std::fprintf(stderr, "kernalyse-run: cannot write %s: directory %s: %s\n", o.output.c_str(),
                 dir.c_str(), std::strerror(errno));
    return 2;
  }
  export_collector_env(o, out_abs, collector);

  // Which kind of run. Under an MPI launcher: one MPI rank (the collector merges over MPI).
  // Otherwise a process tree: the collector makes a rank of every process that brings up CUDA or
  // the emulated device, and we merge their spools at the end. A torchrun worker (torchrun
  // --no-python kernalyse-run ...: LOCAL_RANK and LOCAL_WORLD_SIZE set) is one of several
  // kernalyse-runs of one tree: they share the spool directory (named after torchrun's pid) and
  // the one with LOCAL_RANK 0 merges once all have finished.
  const bool mpi = has_env("OMPI_COMM_WORLD_RANK") || has_env("PMIX_RANK") || has_env("PMI_RANK");
  const bool worker = !mpi && has_env("LOCAL_RANK") && has_env("LOCAL_WORLD_SIZE");
  std::string tree_dir;
  if (!mpi)
    if (int rc = prepare_tree(o, out_abs, worker, &tree_dir)) return rc;
  if (!start_app(path, o.command)) return 2;
  bool timed_out = false;
  const int status = wait_app(o, mpi, worker, &timed_out);
  int rc = 1;
  if (WIFEXITED(status)) rc = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "kernalyse-run: %s killed by signal %d\n", app.c_str(), WTERMSIG(status));
    rc = 128 + WTERMSIG(status);
  }
  if (mpi) return rc;
  const bool killed = timed_out || g_got_signal != 0 || WIFSIGNALED(status);
  return finish_tree(tree_dir, out_abs, worker, killed, o.force, o.quiet, o.keep_spool, app,
                     timed_out)
             ? rc
             : (rc == 0 ? 2 : rc);
}
