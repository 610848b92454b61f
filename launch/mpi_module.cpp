// libkernalyse_mpi.so: kernalyse-merge's MPI code for `mpirun -n P kernalyse-merge STORE`
// (merge_mpi.h), built as a module that kernalyse-merge loads only under a launcher of several
// processes, so that a run of one process maps no libmpi (cli.test_startup; docs/benchmarks.md,
// "Start-up"). The entry points are mpi_module.h's table.
#include "mpi_module.h"

// Only the MPI C API (as aggregator/'s store_mpi.cpp): not Open MPI's C++ bindings (libmpi_cxx).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#include <time.h>

#include <climits>
#include <cstdlib>
#include <deque>
#include <string>
#include <vector>

#include "kernalyse/error.h"

namespace kernalyse {

namespace {

int byte_count(size_t n) {
  if (n > static_cast<size_t>(INT_MAX))
    throw Error("MPI analysis: a process's part is over 2 GB (too few processes for the store)");
  return static_cast<int>(n);
}

std::vector<int> displacements(const std::vector<int>& counts, size_t* total) {
  std::vector<int> d(counts.size());
  size_t at = 0;
  for (size_t p = 0; p < counts.size(); ++p) {
    d[p] = byte_count(at);
    at += static_cast<size_t>(counts[p]);
  }
  byte_count(at);
  *total = at;
  return d;
}

std::string all_gather(const std::string& mine) {
  int procs = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &procs);
  const int n = byte_count(mine.size());
  std::vector<int> counts(static_cast<size_t>(procs));
  MPI_Allgather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, MPI_COMM_WORLD);
  size_t total = 0;
  const std::vector<int> at = displacements(counts, &total);
  std::string all(total, '\0');
  MPI_Allgatherv(mine.data(), n, MPI_BYTE, all.data(), counts.data(), at.data(), MPI_BYTE,
                 MPI_COMM_WORLD);
  return all;
}

std::string gather(const std::string& mine) {
  int procs = 1, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &procs);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  const int n = byte_count(mine.size());
  std::vector<int> counts(static_cast<size_t>(procs));
  MPI_Gather(&n, 1, MPI_INT, counts.data(), 1, MPI_INT, 0, MPI_COMM_WORLD);
  size_t total = 0;
  const std::vector<int> at = me == 0 ? displacements(counts, &total) : std::vector<int>();
  std::string all(total, '\0');
  MPI_Gatherv(mine.data(), n, MPI_BYTE, all.data(), counts.data(), at.data(), MPI_BYTE, 0,
              MPI_COMM_WORLD);
  return all;
}

void all_gather_into(const void* mine, void* all, const size_t* counts) {
  int procs = 1, me = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &procs);
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  std::vector<int> n(static_cast<size_t>(procs));
  for (size_t p = 0; p < n.size(); ++p) n[p] = byte_count(counts[p]);
  size_t total = 0;
  const std::vector<int> at = displacements(n, &total);
  MPI_Allgatherv(mine, n[static_cast<size_t>(me)], MPI_BYTE, all, n.data(), at.data(), MPI_BYTE,
                 MPI_COMM_WORLD);
}

std::string all_to_all(const std::string* to) {
  int procs = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &procs);
  std::vector<int> out(static_cast<size_t>(procs)), in(static_cast<size_t>(procs));
  for (size_t p = 0; p < out.size(); ++p) out[p] = byte_count(to[p].size());
  MPI_Alltoall(out.data(), 1, MPI_INT, in.data(), 1, MPI_INT, MPI_COMM_WORLD);
  size_t sent = 0, total = 0;
  const std::vector<int> out_at = displacements(out, &sent), in_at = displacements(in, &total);
  std::string send;
  send.reserve(sent);
  for (size_t p = 0; p < out.size(); ++p) send += to[p];
  std::string all(total, '\0');
  MPI_Alltoallv(send.data(), out.data(), out_at.data(), MPI_BYTE, all.data(), in.data(),
                in_at.data(), MPI_BYTE, MPI_COMM_WORLD);
  return all;
}

// Waits for `ready` without busy-polling (MPI_Iprobe / MPI_Test, then a nap of ~20 µs): a
// process that waits for another must leave it the cores (the Perfetto export under mpirun runs
// as many processes as cores, and the writer waits between messages).
template <class F>
void wait_idle(F ready) {
  const timespec nap{0, 20'000};
  for (int spins = 0; !ready(); ++spins)
    if (spins >= 16) nanosleep(&nap, nullptr);
}

void send(int to, int tag, const char* data, size_t n) {
  MPI_Request req;
  MPI_Isend(data, byte_count(n), MPI_BYTE, to, tag, MPI_COMM_WORLD, &req);
  wait_idle([&] {
    int done = 0;
    MPI_Test(&req, &done, MPI_STATUS_IGNORE);
    return done != 0;
  });
}

// Messages posted and not yet taken, oldest first; `spare`: the memory of taken ones, for reuse.
struct Posted {
  MPI_Request req;
  std::string bytes;
};
std::deque<Posted> g_posted;
std::vector<std::string> g_spare;
constexpr size_t kMaxPosted = 4;

void retire_oldest() {
  Posted& p = g_posted.front();
  wait_idle([&] {
    int done = 0;
    MPI_Test(&p.req, &done, MPI_STATUS_IGNORE);
    return done != 0;
  });
  p.bytes.clear();
  g_spare.push_back(std::move(p.bytes));
  g_posted.pop_front();
}

std::string post(int to, int tag, std::string* bytes) {
  if (g_posted.size() >= kMaxPosted) retire_oldest();
  g_posted.push_back({MPI_REQUEST_NULL, std::move(*bytes)});
  Posted& p = g_posted.back();
  MPI_Isend(p.bytes.data(), byte_count(p.bytes.size()), MPI_BYTE, to, tag, MPI_COMM_WORLD, &p.req);
  std::string next;
  if (!g_spare.empty()) next = std::move(g_spare.back()), g_spare.pop_back();
  return next;
}

void sent() {
  while (!g_posted.empty()) retire_oldest();
  g_spare.clear();
  g_spare.shrink_to_fit();
}

void recv(int from, int tag, std::string* into) {
  MPI_Status st;
  wait_idle([&] {
    int flag = 0;
    MPI_Iprobe(from, tag, MPI_COMM_WORLD, &flag, &st);
    return flag != 0;
  });
  int n = 0;
  MPI_Get_count(&st, MPI_BYTE, &n);
  into->resize(static_cast<size_t>(n));
  MPI_Recv(into->data(), n, MPI_BYTE, from, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
}

bool waiting(int from, int tag) {
  int flag = 0;
  MPI_Iprobe(from, tag, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
  return flag != 0;
}

void init(int* process, int* processes) {
  int ready = 0;
  MPI_Initialized(&ready);
  if (!ready) {
    int provided = 0;  // only this thread calls MPI (the pool's threads never do)
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
    std::atexit([] {
      int done = 0;
      MPI_Finalized(&done);
      if (!done) MPI_Finalize();
    });
  }
  MPI_Comm_rank(MPI_COMM_WORLD, process);
  MPI_Comm_size(MPI_COMM_WORLD, processes);
}

const detail::MpiModule kModule = {detail::kMpiModuleVersion,
                                   init,
                                   all_gather,
                                   gather,
                                   all_gather_into,
                                   all_to_all,
                                   send,
                                   post,
                                   sent,
                                   recv,
                                   waiting};

}  // namespace

}  // namespace kernalyse

extern "C" const kernalyse::detail::MpiModule* kernalyse_mpi_module() {
  return &kernalyse::kModule;
}
