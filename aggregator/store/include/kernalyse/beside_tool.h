// Where a tool's on-demand modules live: ../lib beside its bin/, in the build tree and in an
// install alike (where kernalyse-run finds the collector too). One rule for kernalyse-merge's HDF5
// module (h5_on_demand.cpp) and its MPI module (launch/merge_mpi.cpp).
#pragma once

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <string>

#include "kernalyse/error.h"

namespace kernalyse {

// "<directory of /proc/self/exe>/../lib/<file>".
inline std::string module_beside_tool(const char* file) {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string dir = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  auto slash = dir.rfind('/');
  dir = slash == std::string::npos ? std::string(".") : dir.substr(0, slash);
  return dir + "/../lib/" + file;
}

// The entry point `symbol` of the module `file` beside the tool, loaded (never unloaded) with
// RTLD_NOW: a missing symbol is this one error, not a crash later. Throws Error naming the file
// and `what` (e.g. "the store's HDF5 module").
inline void* module_entry_beside_tool(const char* file, const char* symbol, const char* what,
                                      std::string* path_out) {
  const std::string path = module_beside_tool(file);
  if (path_out) *path_out = path;
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::string why = ::dlerror();  // "PATH: reason" mostly: keep the reason
    if (why.rfind(path + ": ", 0) == 0) why.erase(0, path.size() + 2);
    throw Error(path + ": cannot load " + what + ": " + why);
  }
  return ::dlsym(h, symbol);
}

}  // namespace kernalyse
