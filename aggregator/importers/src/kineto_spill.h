// The Kineto importer's rows on disk (issue 28: one 10 GB trace imported in bounded memory).
// While the file is parsed, activities, launches and pending cpu_ops move to external sorters
// (kernalyse/spill.h), which write a sorted run to a temporary file every `chunk` rows; at the
// end the store's big tables are written from them in batches: activities and launches in the
// store's order, their steps and /ops by merge joins on the correlation and the External id.
// The result is the store the in-memory import makes (same rows, order, string ids;
// tests/cli/test_import_stream.sh). Internal to the importer; not installed.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernalyse/store.h"
#include "kernalyse/store_io.h"

namespace kernalyse {

// A cpu_op kept until the join with its launches; its texts are ids into the pending ops' own
// string table (four std::strings an op were most of a large file's import memory).
struct PendingOp {
  int64_t pid, tid, start, end;
  uint32_t name, dims, types, concrete;
};
using PendingOps = std::unordered_map<int64_t, PendingOp>;  // by External id

// The rows parsed so far, as the importer holds them (kineto.cpp).
struct ParsedRows {
  Activities& activities;
  std::vector<int64_t>& activity_pid;
  NcclInfo& nccl;  // stays in memory; nccl.activity is the activity's number in the file
  LaunchCalls& launches;
  std::vector<int64_t>& launch_ext;  // each launch's External id
  PendingOps& ops;
};

// What the streamed write needs to know of the whole file.
struct SpillContext {
  int32_t rank;
  int64_t base;  // added to every time; rows it takes out of range are dropped (malformed)
  const StepMarks& steps;
  StringTable& strings;           // the store's: the ops' texts are interned into it
  const StringTable& op_strings;  // the pending ops' own
};

struct SpillWritten {
  int64_t dropped = 0;                // activities and launches out of range after the base shift
  std::set<int32_t> devices;          // of the activities written
  uint64_t runs = 0, disk_bytes = 0;  // the sorted runs written to temporary files, in all
};

class KinetoSpill {
 public:
  KinetoSpill(std::string dir, size_t chunk);
  ~KinetoSpill();
  size_t chunk() const { return chunk_; }
  // Moves the rows parsed since the last call to disk (the vectors are emptied; nccl stays).
  void take(ParsedRows rows);
  // Everything back in memory, for the in-memory finish (a merged multi-rank file): activities
  // in (device, stream, start, end, file) order with nccl.activity following them (the finish
  // sorts them stably by the same keys with the rank first: the same store), launches in file
  // order, the pending ops as parsed.
  void restore(ParsedRows rows);
  // The rest taken, writes /activities, /launches and /ops to `out`; `nccl` gets the written
  // activities' rows and loses those of dropped ones. Call once.
  SpillWritten write(StoreStream& out, ParsedRows rows, const SpillContext& ctx);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  size_t chunk_;
};

}  // namespace kernalyse
