// Puts a fuzzer input where the normal readers look for it: a file in a private temporary
// directory (one per process, removed at exit), so each target goes through the same entry point
// as kernalyse-merge (file open, gzip detection, HDF5 open, directory scan) and not a test-only
// in-memory path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace kernalyse::fuzz {

// The directory, created on first use under $TMPDIR (default /tmp).
inline const std::string& input_dir() {
  static const std::string dir = [] {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/kernalyse-fuzz-XXXXXX";
    if (!::mkdtemp(tmpl.data())) {
      std::perror("kernalyse fuzz: mkdtemp");
      std::abort();
    }
    static const std::string keep = tmpl;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(keep, ec);
    });
    return tmpl;
  }();
  return dir;
}

// Writes the input to input_dir()/name (replacing the previous one) and returns its path.
inline std::string write_input(const std::string& name, const uint8_t* data, size_t size) {
  const std::string path = input_dir() + "/" + name;
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  f.close();
  if (!f) {
    std::perror(("kernalyse fuzz: writing " + path).c_str());
    std::abort();
  }
  return path;
}

}  // namespace kernalyse::fuzz
