// Output files are never partial and never silently replaced: every writer (the store, the
// collective store writer, the exports, the HTML report) writes "<path>.tmp.<pid>" through an
// AtomicFile and commits it by one rename. This is the only place that logic lives.
#pragma once

#include <string>

namespace kernalyse {

// Checks an output path before any work is done (so a long import is not wasted): it must not
// be a directory, its directory must exist, and without `force` it must not exist. Throws Error
// ("<path>: is a directory", "<path>: exists (use --force to replace it)",
// "cannot create <path>: <reason>").
void check_output_path(const std::string& path, bool force);

// "<stem>-<k><ext>" for the first k ≥ 1 that names nothing (run.h5 → run-1.h5): where a tool
// writes instead of an existing output it must not overwrite (kernalyse-run).
std::string free_name(const std::string& path);

// The temporary file of one output. The constructor checks the path (check_output_path) and
// creates the temporary (its errno names the real problem: missing or read-only directory).
// Until commit() or destruction, SIGTERM and SIGINT remove it before the process dies (a job's
// time limit, Ctrl-C): no "<path>.tmp.<pid>" is ever left behind.
class AtomicFile {
 public:
  AtomicFile(std::string path, bool force);
  ~AtomicFile();  // removes the temporary unless committed
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;

  const std::string& path() const { return path_; }
  const std::string& tmp() const { return tmp_; }

  // Moves the complete temporary onto path: replaces an existing file only with `force`;
  // otherwise a file that appeared meanwhile is an error (renameat2 RENAME_NOREPLACE, or link()
  // where the file system lacks it). Throws Error ("<path>: ..."); the temporary is then removed.
  void commit();

 private:
  std::string path_, tmp_;
  bool force_ = false, committed_ = false;
  int slot_ = -1;  // in the signal handler's table
};

}  // namespace kernalyse
