#include "kernalyse/import.h"

#include "kernalyse/nsys.h"
#include "kernalyse/rocprof.h"

namespace kernalyse {

const char* to_string(TraceFormat f) {
  switch (f) {
    case TraceFormat::Kineto:
      return "Kineto JSON";
    case TraceFormat::Rocprof:
      return "rocprofv3 JSON";
    case TraceFormat::Nsys:
      return "Nsight Systems SQLite";
  }
  return "unknown";
}

TraceFormat trace_format(const std::string& path) {
  if (is_sqlite_file(path)) return TraceFormat::Nsys;
  if (is_rocprof_file(path)) return TraceFormat::Rocprof;
  return TraceFormat::Kineto;
}

Store import_trace_file(const std::string& path, const ImportOptions& opt, ImportStats* stats) {
  switch (trace_format(path)) {
    case TraceFormat::Nsys:
      return import_nsys_file(path, opt, stats);
    case TraceFormat::Rocprof:
      return import_rocprof_file(path, opt, stats);
    case TraceFormat::Kineto:
      break;
  }
  return import_kineto_file(path, opt, stats);
}

}  // namespace kernalyse
