// kernalyse-merge under mpirun (issue 28): the analyses of a store spread over the processes
// (kernalyse/sliced.h, Spread), MPI started only when the launcher says there are several.
#pragma once

#include <memory>

#include "kernalyse/sliced.h"

namespace kernalyse {

// Under a launcher that started several processes (Open MPI's OMPI_COMM_WORLD_SIZE, PMI_SIZE or
// PMIX_SIZE above 1): MPI initialised (finalised at exit) and the Spread over MPI_COMM_WORLD.
// Null otherwise: one process, no MPI.
std::unique_ptr<Spread> mpi_spread();

}  // namespace kernalyse
