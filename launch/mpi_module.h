// The entry points of libkernalyse_mpi.so (mpi_module.cpp): the MPI side of `mpirun -n P
// kernalyse-merge STORE`, loaded by merge_mpi.cpp only under a launcher of several processes.
#pragma once

#include <cstddef>
#include <string>

namespace kernalyse::detail {

// The module and kernalyse-merge are built together; the version guards against a module left
// over from another build.
inline constexpr int kMpiModuleVersion = 5;

struct MpiModule {
  int version;
  // MPI initialised (finalised at exit), this process's number and the number of processes.
  void (*init)(int* process, int* processes);
  // Every process's bytes, concatenated in process order: on every process / on process 0.
  std::string (*all_gather)(const std::string&);
  std::string (*gather)(const std::string&);
  // Spread::all_gather_into: counts[0 .. processes) bytes, this process's at `mine`.
  void (*all_gather_into)(const void* mine, void* all, const size_t* counts);
  // Spread::all_to_all: to[0 .. processes), the bytes for each process.
  std::string (*all_to_all)(const std::string* to);
  // Spread::send, post, sent, recv, waiting: point to point.
  void (*send)(int to, int tag, const char* data, size_t n);
  std::string (*post)(int to, int tag, std::string* bytes);
  void (*sent)();
  void (*recv)(int from, int tag, std::string* into);
  bool (*waiting)(int from, int tag);
};

}  // namespace kernalyse::detail

extern "C" const kernalyse::detail::MpiModule* kernalyse_mpi_module();
