// Collective (MPI-IO, parallel HDF5) write of one store from every rank's local part.
#pragma once

#include <mpi.h>

#include <string>

#include "kernalyse/store.h"

namespace kernalyse {

struct ParallelWriteOptions {
  std::string path;            // requested output
  bool force = false;          // replace an existing file
  bool pick_free_name = true;  // if it exists and !force: use "<stem>-1.h5", "-2", ...
};

// Collective over `comm`. `local` holds this rank's data only (its own string ids, one RankInfo);
// ranks with no records still call it. Every rank writes its own slice of each column with
// collective MPI-IO (no gather of records to rank 0); the string tables are merged by exchanging
// the (small) string sets; vlen metadata (strings, per-rank text, attributes) is written by rank 0
// afterwards. Written to a temporary name and renamed by rank 0 on success. Returns the path
// written (same on every rank). Throws kernalyse::Error (same message on every rank) on failure.
std::string write_store_parallel(const Store& local, MPI_Comm comm,
                                 const ParallelWriteOptions& opt);

}  // namespace kernalyse
