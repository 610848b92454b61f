// One entry point for every trace format kernalyse reads: the format is told by the content, never
// by the file name, so `kernalyse-merge FILE` needs no format flag.
#pragma once

#include <string>

#include "kernalyse/kineto.h"  // ImportOptions, ImportStats
#include "kernalyse/store.h"

namespace kernalyse {

enum class TraceFormat {
  Kineto,   // Chrome-trace / PyTorch-profiler JSON (the default: anything else)
  Rocprof,  // rocprofv3 JSON (top-level "rocprofiler-sdk-tool")
  Nsys      // Nsight Systems SQLite export (SQLite header)
};
const char* to_string(TraceFormat f);

// The format of a trace file, from its first bytes (gzip decoded).
TraceFormat trace_format(const std::string& path);

// Imports one trace file with the importer its format needs (import_kineto_file,
// import_rocprof_file, import_nsys_file): one file, one rank's Store.
Store import_trace_file(const std::string& path, const ImportOptions& opt, ImportStats* stats);

}  // namespace kernalyse
