// A directory of its own, removed with everything in it when the object goes: where a store that
// only this run reads is written. Internal to the pipeline.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "kernalyse/error.h"

namespace kernalyse::detail {

// TMPDIR, or /tmp.
inline std::string tmp_dir() {
  const char* t = std::getenv("TMPDIR");
  return t && *t ? t : "/tmp";
}

class TempDir {
 public:
  // In `base`; in TMPDIR (or /tmp) when empty. Throws Error naming `base` when it cannot.
  explicit TempDir(std::string base = {}) {
    if (base.empty()) base = tmp_dir();
    std::string tmpl = (std::filesystem::path(base) / "kernalyse-XXXXXX").string();
    if (!mkdtemp(tmpl.data()))
      throw Error("cannot create a temporary directory in " + base + ": " +
                  std::generic_category().message(errno));
    path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace kernalyse::detail
