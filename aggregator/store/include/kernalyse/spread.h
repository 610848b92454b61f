// How `mpirun -n P kernalyse-merge` spreads its work over the processes (launch/merge_mpi.cpp
// makes it from MPI_COMM_WORLD; the launcher's variables decide whether there is one).
//   Analysing a store (kernalyse/sliced.h): process p of P takes slices [n p / P, n (p + 1) / P)
//   of the n ranks, reading them from the store itself (each process opens it read-only); the
//   processes exchange the cross-rank rows (every process gets them all: each then infers the
//   same clocks and makes the same match) and send their analyses' states to process 0, which
//   merges them in rank order and writes the output.
//   Importing traces (import_files, kernalyse/inputs.h): each process imports its share of the
//   files and sends them to process 0, which ranks, merges, aligns and writes as one process does;
//   with -o alone (import_files_spread) the files are moved so that each process holds a run of
//   ranks, and all of them write the store together (write_store_world, store_io.h).
//   Exporting a store (export_sliced.cpp): each process writes its ranks' Kineto files, and
//   formats pieces of the Perfetto events in turn, written into process 0's one file where it
//   places them (or sent to process 0 to write).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace kernalyse {

struct Spread {
  int process = 0, processes = 1;
  // Every process's bytes concatenated in process order, on every process (each process's
  // bytes are self-delimiting archives: the reader walks them without the lengths).
  std::function<std::string(const std::string&)> all_gather;
  // The same on process 0 (anything on the others).
  std::function<std::string(const std::string&)> gather;
  // This process's bytes at `mine` into `all` on every process, after the bytes of the processes
  // before it: `counts` holds every process's byte count (the same on every process), `all` has
  // room for their sum. Straight into the caller's memory (a column), no string in between.
  std::function<void(const void* mine, void* all, const std::vector<size_t>& counts)>
      all_gather_into;
  // to[p]: the bytes for process p (one string per process). Returns what every process sent
  // to this one, concatenated in process order (self-delimiting archives, as all_gather's).
  std::function<std::string(const std::vector<std::string>& to)> all_to_all;
  // Point to point (the Perfetto file's events on their way to process 0, export_sliced.cpp),
  // none of them busy-polling while it waits: send() returns once process `to` took the bytes
  // (or they are buffered); post() sends without waiting (at most a few messages at a time: it
  // waits for the oldest beyond them) and returns an empty string with the memory of a message
  // already taken (to fill with the next); sent() waits until every posted message is taken;
  // recv() puts the next bytes from process `from` under `tag` in `into` (waits for them);
  // waiting() tells whether some wait to be received.
  std::function<void(int to, int tag, std::string_view bytes)> send;
  std::function<std::string(int to, int tag, std::string bytes)> post;
  std::function<void()> sent;
  std::function<void(int from, int tag, std::string& into)> recv;
  std::function<bool(int from, int tag)> waiting;
};

}  // namespace kernalyse
