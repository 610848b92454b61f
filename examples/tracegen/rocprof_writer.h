// kernalyse-tracegen --format rocprof: writes one rank's store as rocprofv3 JSON.
#pragma once

#include <string>

#include "kernalyse/store.h"

// Writes rank s.ranks[0] of a single-rank store to `path` (gzip when gz). Throws
// std::runtime_error when the file cannot be written.
void write_rocprof_rank(const kernalyse::Store& s, const std::string& path, bool gz);
