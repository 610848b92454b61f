// The KERNALYSE_* environment variables: one table for the launcher (kernalyse-run, which sets
// most of them), the collector (libkernalyse_collector.so inside each rank, which reads them)
// and the docs. Header-only: kernalyse-run links nothing of ours. An enum names each variable and
// the table is checked against it at compile time (as kineto keeps its ActivityType table), so a
// name is spelt once: tests/unit/test_run_env.cpp fails on a "KERNALYSE_..." literal elsewhere
// in the launcher or collector sources. docs/collector.md explains what each does.
#pragma once

#include <cstddef>
#include <iterator>

namespace kernalyse {

enum class RunEnv {
  Output,           // the store's absolute path (-o)
  Force,            // "1": overwrite an existing store (--force)
  Quiet,            // "1": no progress or summary on stderr (-q)
  KeepSpool,        // "1": keep the spool files after the merge (--keep-spool)
  Command,          // the application's command line, recorded in the store
  SpoolDir,         // the spool directory (--spool-dir), absolute
  FlushRecords,     // records per spool block (--flush-records)
  FlushMs,          // spool flush interval in ms (--flush-ms)
  Pid,              // the pid kernalyse-run exec'd: only it is the rank (MPI runs)
  Tree,             // a process tree's spool directory: every process may become a rank
  AnchorNs,         // a process tree's CLOCK_REALTIME − CLOCK_MONOTONIC_RAW, shared by its ranks
  Collector,        // the collector library to inject, instead of the one next to kernalyse-run
  PowerMs,          // NVML power sampling interval in ms (0: off)
  CuptiBufferKb,    // CUPTI activity buffer size in KiB
  CuptiBuffers,     // CUPTI activity buffers at most
  CuptiFlushMs,     // CUPTI periodic flush interval in ms
  CuptiSkip,        // diagnostic: CUPTI parts left off, to attribute the collection overhead
  ImportChunkRows,  // kernalyse-merge TRACE -o OUT: rows of each sorted run on disk
  ImportMemoryMb,   // kernalyse-merge: the memory an import of traces, or the critical path of a
                    // store read a rank at a time, may hold before rows go to disk
  Count
};

struct RunEnvVar {
  RunEnv id;
  const char* name;
  const char* set_by;  // "kernalyse-run", or "user" for the tuning knobs a user may set
};

inline constexpr RunEnvVar kRunEnvVars[] = {
    {RunEnv::Output, "KERNALYSE_OUTPUT", "kernalyse-run"},
    {RunEnv::Force, "KERNALYSE_FORCE", "kernalyse-run"},
    {RunEnv::Quiet, "KERNALYSE_QUIET", "kernalyse-run"},
    {RunEnv::KeepSpool, "KERNALYSE_KEEP_SPOOL", "kernalyse-run"},
    {RunEnv::Command, "KERNALYSE_COMMAND", "kernalyse-run"},
    {RunEnv::SpoolDir, "KERNALYSE_SPOOL_DIR", "kernalyse-run"},
    {RunEnv::FlushRecords, "KERNALYSE_FLUSH_RECORDS", "kernalyse-run"},
    {RunEnv::FlushMs, "KERNALYSE_FLUSH_MS", "kernalyse-run"},
    {RunEnv::Pid, "KERNALYSE_PID", "kernalyse-run"},
    {RunEnv::Tree, "KERNALYSE_TREE", "kernalyse-run"},
    {RunEnv::AnchorNs, "KERNALYSE_ANCHOR_NS", "kernalyse-run"},
    {RunEnv::Collector, "KERNALYSE_COLLECTOR", "user"},
    {RunEnv::PowerMs, "KERNALYSE_POWER_MS", "user"},
    {RunEnv::CuptiBufferKb, "KERNALYSE_CUPTI_BUFFER_KB", "user"},
    {RunEnv::CuptiBuffers, "KERNALYSE_CUPTI_BUFFERS", "user"},
    {RunEnv::CuptiFlushMs, "KERNALYSE_CUPTI_FLUSH_MS", "user"},
    {RunEnv::CuptiSkip, "KERNALYSE_CUPTI_SKIP", "user"},
    {RunEnv::ImportChunkRows, "KERNALYSE_IMPORT_CHUNK_ROWS", "user"},
    {RunEnv::ImportMemoryMb, "KERNALYSE_IMPORT_MEMORY_MB", "user"},
};

namespace detail {
constexpr bool run_env_in_enum_order() {
  for (size_t i = 0; i < std::size(kRunEnvVars); ++i)
    if (static_cast<size_t>(kRunEnvVars[i].id) != i) return false;
  return true;
}
}  // namespace detail
static_assert(std::size(kRunEnvVars) == static_cast<size_t>(RunEnv::Count),
              "kRunEnvVars: one row per RunEnv");
static_assert(detail::run_env_in_enum_order(), "kRunEnvVars: rows in RunEnv's order");

// The variable's name, e.g. env_name(RunEnv::Tree) == "KERNALYSE_TREE".
constexpr const char* env_name(RunEnv v) { return kRunEnvVars[static_cast<size_t>(v)].name; }

}  // namespace kernalyse
