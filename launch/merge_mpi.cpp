// kernalyse-merge under mpirun (merge_mpi.h): the launcher's variables read here, MPI itself in
// libkernalyse_mpi.so (mpi_module.h), loaded only when they say there are several processes.
#include "merge_mpi.h"

#include <dlfcn.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <string>

#include "kernalyse/error.h"
#include "mpi_module.h"

namespace kernalyse {

namespace {

int launched_processes() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* e = std::getenv(v); e && *e) return std::atoi(e);
  return 1;
}

// ../lib beside the tool's bin/, in the build tree and in an install alike (as the HDF5 module).
std::string module_path() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  std::string dir = n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
  auto slash = dir.rfind('/');
  dir = slash == std::string::npos ? std::string(".") : dir.substr(0, slash);
  return dir + "/../lib/" KERNALYSE_MPI_MODULE_FILE;
}

const detail::MpiModule& load() {
  const std::string path = module_path();
  void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::string why = ::dlerror();
    if (why.rfind(path + ": ", 0) == 0) why.erase(0, path.size() + 2);
    throw Error(path + ": cannot load kernalyse-merge's MPI module: " + why);
  }
  auto* entry =
      reinterpret_cast<decltype(&kernalyse_mpi_module)>(::dlsym(h, "kernalyse_mpi_module"));
  const detail::MpiModule* m = entry ? entry() : nullptr;
  if (!m || m->version != detail::kMpiModuleVersion)
    throw Error(path + ": not the MPI module of this build of kernalyse-merge");
  return *m;  // never unloaded: libmpi stays to MPI_Finalize at exit
}

}  // namespace

std::unique_ptr<Spread> mpi_spread() {
  if (launched_processes() <= 1) return nullptr;
  const detail::MpiModule& m = load();
  auto s = std::make_unique<Spread>();
  m.init(&s->process, &s->processes);
  s->all_gather = m.all_gather;
  s->gather = m.gather;
  return s;
}

}  // namespace kernalyse
