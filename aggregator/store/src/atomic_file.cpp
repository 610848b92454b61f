// AtomicFile (kernalyse/atomic_file.h): temporary next to the output, one rename to commit, and
// removal of live temporaries on SIGTERM/SIGINT.
#include "kernalyse/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <utility>

#include "kernalyse/store_io.h"

namespace kernalyse {
namespace {

// Live temporaries, readable from a signal handler: fixed buffers (no allocation, nothing freed
// while the handler may read it) and a state per slot (0 free, 1 being filled, 2 live).
constexpr int kSlots = 16;
char g_paths[kSlots][4096];
std::atomic<int> g_state[kSlots];
struct sigaction g_old_term, g_old_int;

void on_signal(int sig) {
  for (int i = 0; i < kSlots; ++i)
    if (g_state[i].load() == 2) ::unlink(g_paths[i]);  // async-signal-safe
  // Then whatever was there before: the program's own handler, or the default (death by the
  // same signal, so the parent sees it).
  const struct sigaction& old = sig == SIGTERM ? g_old_term : g_old_int;
  if (old.sa_handler == SIG_IGN) return;
  if (old.sa_handler != SIG_DFL && !(old.sa_flags & SA_SIGINFO)) return old.sa_handler(sig);
  ::sigaction(sig, &old, nullptr);
  ::raise(sig);
}

void install_handler() {
  static std::once_flag once;
  std::call_once(once, [] {
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    // A signal the process ignores (SIGINT for a background job of a shell script) stays
    // ignored: handling it would remove the temporary of a run that goes on.
    for (auto [sig, old] : {std::pair{SIGTERM, &g_old_term}, std::pair{SIGINT, &g_old_int}}) {
      ::sigaction(sig, nullptr, old);
      if (old->sa_handler != SIG_IGN) ::sigaction(sig, &sa, nullptr);
    }
  });
}

int register_tmp(const std::string& tmp) {
  if (tmp.size() >= sizeof g_paths[0]) return -1;  // cannot be created anyway (PATH_MAX)
  install_handler();
  for (int i = 0; i < kSlots; ++i) {
    int expect = 0;
    if (!g_state[i].compare_exchange_strong(expect, 1)) continue;
    std::memcpy(g_paths[i], tmp.c_str(), tmp.size() + 1);
    g_state[i].store(2);
    return i;
  }
  return -1;  // more than kSlots outputs at once: still correct, only not cleaned on a signal
}

void unregister_tmp(int slot) {
  if (slot >= 0) g_state[slot].store(0);
}

}  // namespace

std::string free_name(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path p(path);
  const std::string stem = p.stem().string(), ext = p.extension().string();
  for (int k = 1; k < 1000000; ++k) {
    fs::path c = p.parent_path() / (stem + "-" + std::to_string(k) + ext);
    struct stat st {};
    if (::stat(c.c_str(), &st) != 0 && errno == ENOENT) return c.string();
  }
  throw Error(path + ": no free name of the form " + stem + "-<k>" + ext);
}

void check_output_path(const std::string& path, bool force) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) {
    if (S_ISDIR(st.st_mode)) throw Error(path + ": is a directory");
    if (!force) throw Error(path + ": exists (use --force to replace it)");
    return;
  }
  const size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  if (::stat(dir.c_str(), &st) != 0)
    throw Error("cannot create " + path + ": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) throw Error("cannot create " + path + ": " + std::strerror(ENOTDIR));
}

AtomicFile::AtomicFile(std::string path, bool force) : path_(std::move(path)), force_(force) {
  check_output_path(path_, force_);
  tmp_ = path_ + ".tmp." + std::to_string(::getpid());
  // Registered before it exists: a signal between creating the file and registering it would
  // otherwise leave it behind (seen: SIGTERM right as the temporary appears). Unlinking a name
  // not created yet is harmless.
  slot_ = register_tmp(tmp_);
  int fd = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) {
    const int err = errno;
    unregister_tmp(slot_);
    slot_ = -1;
    throw Error("cannot create " + path_ + ": " + std::strerror(err));
  }
  ::close(fd);
}

AtomicFile::~AtomicFile() {
  if (!committed_) ::unlink(tmp_.c_str());
  unregister_tmp(slot_);
}

void AtomicFile::commit() {
  int rc = force_ ? std::rename(tmp_.c_str(), path_.c_str())
                  : ::renameat2(AT_FDCWD, tmp_.c_str(), AT_FDCWD, path_.c_str(), RENAME_NOREPLACE);
  if (rc != 0 && !force_ && errno == EINVAL) {
    // File system without RENAME_NOREPLACE: link() also refuses an existing target.
    rc = ::link(tmp_.c_str(), path_.c_str());
    if (rc == 0) ::unlink(tmp_.c_str());
  }
  if (rc != 0) {
    const int err = errno;
    ::unlink(tmp_.c_str());
    unregister_tmp(slot_);
    slot_ = -1;
    committed_ = true;  // nothing left to remove
    if (err == EEXIST) throw Error(path_ + ": exists (use --force to replace it)");
    throw Error(path_ + ": cannot rename " + tmp_ + ": " + std::strerror(err));
  }
  committed_ = true;
  unregister_tmp(slot_);
  slot_ = -1;
}

}  // namespace kernalyse
