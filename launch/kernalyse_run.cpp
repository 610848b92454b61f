// kernalyse-run: runs one rank's application under the collector.
//   mpirun -n 4 kernalyse-run [-o run.h5] [--force] ./app args...
// It injects libkernalyse_collector.so (LD_PRELOAD: PMPI interception and the emulated-device
// API; CUDA_INJECTION64_PATH for CUPTI, NCCL_PROFILER_PLUGIN for NCCL), runs the application as a
// child and exits with the application's exit code. The collector writes the store at MPI_Finalize.
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

pid_t g_child = -1;

void forward(int sig) {
  if (g_child > 0) kill(g_child, sig);
}

[[noreturn]] void usage(int rc) {
  std::fprintf(
      rc ? stderr : stdout,
      "usage: kernalyse-run [-o FILE] [--force] [--flush-records N] [--flush-ms T]\n"
      "                     [--spool-dir DIR] [--keep-spool] [--nvtx] [-q] [--] APP [ARGS...]\n"
      "Runs APP (one MPI rank) under the kernalyse collector; all ranks write one store\n"
      "(default run.h5; an existing file is never overwritten: the next free name is\n"
      "used and reported, unless --force). Exit code: APP's.\n");
  std::exit(rc);
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
  if (const char* e = std::getenv("KERNALYSE_COLLECTOR")) return e;
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

}  // namespace

int main(int argc, char** argv) {
  std::string output = "run.h5", spool_dir;
  bool force = false, quiet = false, keep_spool = false, nvtx = false;
  std::string flush_records, flush_ms;
  int i = 1;
  for (; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* opt) -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "kernalyse-run: %s needs a value\n", opt);
        std::exit(2);
      }
      return argv[++i];
    };
    if (a == "--") {
      ++i;
      break;
    }
    if (a == "-h" || a == "--help") usage(0);
    if (a == "-o" || a == "--output")
      output = value("-o");
    else if (a == "--force")
      force = true;
    else if (a == "-q" || a == "--quiet")
      quiet = true;
    else if (a == "--keep-spool")
      keep_spool = true;
    else if (a == "--nvtx")
      nvtx = true;
    else if (a == "--spool-dir")
      spool_dir = value("--spool-dir");
    else if (a == "--flush-records")
      flush_records = value("--flush-records");
    else if (a == "--flush-ms")
      flush_ms = value("--flush-ms");
    else if (!a.empty() && a[0] == '-') {
      std::fprintf(stderr, "kernalyse-run: unknown option %s\n", a.c_str());
      usage(2);
    } else {
      break;
    }
  }
  if (i >= argc) {
    std::fprintf(stderr, "kernalyse-run: no application given\n");
    usage(2);
  }
  std::string app = argv[i], path, why;
  if (int rc = resolve(app, &path, &why)) {
    std::fprintf(stderr, "kernalyse-run: %s: %s\n", app.c_str(), why.c_str());
    return rc;
  }
  std::string collector = find_collector();
  if (collector.empty()) {
    std::fprintf(stderr, "kernalyse-run: libkernalyse_collector.so not found next to %s\n",
                 self_dir().c_str());
    return 2;
  }
  // The collector runs inside the application, whose working directory may change: absolute.
  std::error_code ec;
  std::string out_abs = fs::absolute(output, ec).string();
  std::string dir = fs::path(out_abs).parent_path().string();
  if (access(dir.c_str(), W_OK) != 0) {
    std::fprintf(stderr, "kernalyse-run: cannot write %s: directory %s: %s\n", output.c_str(),
                 dir.c_str(), std::strerror(errno));
    return 2;
  }
  std::string cmd;
  for (int k = i; k < argc; ++k) {
    if (k > i) cmd += ' ';
    cmd += argv[k];
  }

  setenv("KERNALYSE_OUTPUT", out_abs.c_str(), 1);
  setenv("KERNALYSE_FORCE", force ? "1" : "0", 1);
  setenv("KERNALYSE_QUIET", quiet ? "1" : "0", 1);
  setenv("KERNALYSE_KEEP_SPOOL", keep_spool ? "1" : "0", 1);
  setenv("KERNALYSE_COMMAND", cmd.c_str(), 1);
  if (!spool_dir.empty()) setenv("KERNALYSE_SPOOL_DIR", fs::absolute(spool_dir, ec).c_str(), 1);
  if (!flush_records.empty()) setenv("KERNALYSE_FLUSH_RECORDS", flush_records.c_str(), 1);
  if (!flush_ms.empty()) setenv("KERNALYSE_FLUSH_MS", flush_ms.c_str(), 1);
  // CUDA loads the same library from cuInit (InitializeInjection: the CUPTI source) and NCCL as
  // its profiler plugin (ncclProfiler_v5). A CUDA_INJECTION64_PATH naming another tool (Nsight
  // Systems does this) wins: one CUPTI client per process.
  auto inject = [&](const char* var, bool wanted) {
    if (!wanted) return;
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
  inject("CUDA_INJECTION64_PATH", true);  // only if the collector exports InitializeInjection
  // NVTX ranges reach CUPTI (as MARKER records, then store annotations) only when NVTX loads
  // libcupti as its injection. Opt-in (--nvtx) until a GPU run has shown it safe: NVTX issue #125
  // reports a crash in libcupti's nvtxNameOsThreadA with CUDA 13.0. A user's own setting wins.
  if (nvtx) setenv("NVTX_INJECTION64_PATH", KERNALYSE_LIBCUPTI, 0);
#else
  (void)nvtx;
#endif
  inject("NCCL_PROFILER_PLUGIN", true);
  std::string preload = collector;
  if (const char* old = std::getenv("LD_PRELOAD"); old && *old) preload.append(":").append(old);
  setenv("LD_PRELOAD", preload.c_str(), 1);

  // A close-on-exec pipe tells the parent whether exec itself failed.
  int pfd[2];
  if (pipe2(pfd, O_CLOEXEC) != 0) {
    std::perror("kernalyse-run: pipe");
    return 2;
  }
  g_child = fork();
  if (g_child < 0) {
    std::perror("kernalyse-run: fork");
    return 2;
  }
  if (g_child == 0) {
    close(pfd[0]);
    // Only this pid activates the collector; the app's own children inherit LD_PRELOAD only.
    setenv("KERNALYSE_PID", std::to_string(getpid()).c_str(), 1);
    execv(path.c_str(), argv + i);
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
  if (read(pfd[0], &err, sizeof err) == static_cast<ssize_t>(sizeof err)) {
    std::fprintf(stderr, "kernalyse-run: %s: %s\n", app.c_str(), std::strerror(err));
  }
  close(pfd[0]);
  int status = 0;
  while (waitpid(g_child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) {
    std::fprintf(stderr, "kernalyse-run: %s killed by signal %d\n", app.c_str(), WTERMSIG(status));
    return 128 + WTERMSIG(status);
  }
  return 1;
}
