// kernalyse-merge under mpirun (merge_mpi.h): the launcher's variables read here, MPI itself in
// libkernalyse_mpi.so (mpi_module.h), loaded only when they say there are several processes.
#include "merge_mpi.h"

#include <cstdlib>
#include <string>

#include "kernalyse/beside_tool.h"
#include "kernalyse/error.h"
#include "mpi_module.h"

namespace kernalyse {

namespace {

int launched_processes() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE"})
    if (const char* e = std::getenv(v); e && *e) return std::atoi(e);
  return 1;
}

const detail::MpiModule& load() {
  std::string path;
  auto* entry = reinterpret_cast<decltype(&kernalyse_mpi_module)>(module_entry_beside_tool(
      KERNALYSE_MPI_MODULE_FILE, "kernalyse_mpi_module", "kernalyse-merge's MPI module", &path));
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
  s->all_gather_into = [f = m.all_gather_into](const void* mine, void* all,
                                               const std::vector<size_t>& counts) {
    f(mine, all, counts.data());
  };
  s->all_to_all = [f = m.all_to_all, n = s->processes](const std::vector<std::string>& to) {
    if (to.size() != static_cast<size_t>(n))
      throw Error("MPI: all_to_all needs one part a process");
    return f(to.data());
  };
  s->send = [f = m.send](int to, int tag, std::string_view b) { f(to, tag, b.data(), b.size()); };
  s->post = [f = m.post](int to, int tag, std::string bytes) { return f(to, tag, &bytes); };
  s->sent = m.sent;
  s->recv = [f = m.recv](int from, int tag, std::string& into) { f(from, tag, &into); };
  s->waiting = m.waiting;
  return s;
}

}  // namespace kernalyse
