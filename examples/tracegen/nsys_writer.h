// kernalyse-tracegen --format nsys: writes one rank's store as an Nsight Systems SQLite export.
#pragma once

#include <string>

#include "kernalyse/store.h"

// Writes rank s.ranks[0] of a single-rank store to `path` (a new SQLite file). Throws
// std::runtime_error on an SQLite error.
void write_nsys_rank(const kernalyse::Store& s, const std::string& path);
