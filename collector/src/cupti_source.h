// The CUPTI activity source: turns CUPTI activity buffers into Sink records, and the injection
// glue CUDA calls (InitializeInjection, exported by libkernalyse_collector.so). Only
// cupti_source.cpp includes CUPTI headers; this header exposes no CUPTI type, so the Collector
// and the tests can include it without them. Built only when the CUDA toolkit is found
// (KERNALYSE_HAVE_CUPTI); the Collector reaches it through cuda_presence.h's hooks instead
// (register_cupti_flush / cupti_flush_registered), which exist in every build.
// docs/collector.md, "CUPTI source".
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "sink.h"

namespace kernalyse::collector::cupti {

// What the parser saw, cumulative (tests and the end-of-run status line).
struct ParseStats {
  int64_t records = 0;  // records cuptiActivityGetNextRecord returned
  int64_t kernels = 0, memcpys = 0, memsets = 0, api_calls = 0, memory = 0, ranges = 0;
  int64_t external_correlations = 0;
  int64_t memory_not_device = 0;  // MEMORY2 records of pinned host / managed memory: not kept
  int64_t devices = 0, contexts = 0, streams = 0;
  int64_t no_timing = 0;             // start == end == 0 (CUPTI could not time it): dropped
  int64_t skipped = 0;               // unknown kinds, corrupt or unusable records
  int64_t unterminated_buffers = 0;  // INVALID_KIND mid-buffer: the rest of that buffer lost
};

// Converts activity records into Sink calls. Thread-safe (CUPTI may complete buffers on
// several threads); keeps the state that spans records: open NVTX ranges by marker id, the
// external-correlation map, device names, CUPTI's drop count.
class RecordParser {
 public:
  explicit RecordParser(Sink& sink) : sink_(sink) {}

  // Reads every complete record of buf[0, valid_bytes) with cuptiActivityGetNextRecord (the
  // buffer must be 8-byte aligned, as CUPTI's are). A record cut by valid_bytes is not read.
  // If CUPTI cannot identify a record (INVALID_KIND: zeroed or corrupt memory) it cannot tell
  // its size either, so the rest of the buffer is abandoned and counted as one skipped record.
  // Returns the number of records read. Losses are reported to the Sink after each buffer.
  size_t process_buffer(const uint8_t* buf, size_t valid_bytes);

  // CUPTI's own drop count for a completed buffer, and our refused buffer requests.
  void add_dropped_cupti(int64_t n);
  void add_dropped_ours(int64_t n);

  ParseStats stats() const;
  LossCounts losses() const;
  // The external id pushed for a CUPTI correlation id (EXTERNAL_CORRELATION), -1 if none.
  int64_t external_id(uint32_t correlation) const;
  // Reports the current LossCounts to the Sink.
  void report_losses();
  // Appended to every status line (a diagnostic run's "; DIAGNOSTIC: ..."); set before records.
  void set_status_suffix(std::string s) { status_suffix_ = std::move(s); }

 private:
  // Record handlers; `rec` is a CUpti_Activity* (kept opaque here).
  void on_record(const void* rec);
  const char* api_name(bool driver, uint32_t cbid);
  void device_seen(uint32_t id, const char* name);
  void device_used(uint32_t id);

  Sink& sink_;
  // Never held while calling into CUPTI except cuptiActivityGetNextRecord and
  // cuptiGetCallbackName (lookups in a record buffer and a static table).
  mutable std::mutex mu_;
  ParseStats stats_;
  LossCounts losses_;
  struct OpenRange {
    int64_t start_ns;
    int64_t thread;
    std::string name;
  };
  std::unordered_map<uint32_t, OpenRange> open_ranges_;     // NVTX marker id → START
  std::unordered_map<uint32_t, uint64_t> external_;         // correlation id → external id
  std::unordered_map<uint32_t, std::string> api_names_[2];  // runtime, driver: cbid → name
  std::vector<std::string> device_names_;                   // by CUPTI device id
  std::string status_suffix_;
  std::vector<std::string> device_uuids_;  // "GPU-…" (NVML's form), by device id
  std::vector<char> devices_used_;         // GPU work seen, by device id
};

// Bounded pool of 8-byte-aligned activity buffers: at most `max_buffers` of `bytes` each exist
// at once. get() hands out a recycled or new buffer, or null when all are out (CUPTI then drops
// records, and CUPTI ≥ 12.9 accepts a null buffer); put() returns one.
class BufferPool {
 public:
  BufferPool(size_t bytes, size_t max_buffers) : bytes_(bytes), max_(max_buffers) {}
  ~BufferPool();
  BufferPool(const BufferPool&) = delete;
  BufferPool& operator=(const BufferPool&) = delete;
  uint8_t* get();
  void put(uint8_t* buf);
  size_t buffer_bytes() const { return bytes_; }
  size_t allocated() const;
  int64_t refused() const;

 private:
  size_t bytes_, max_;
  mutable std::mutex mu_;
  std::vector<uint8_t*> free_;
  size_t allocated_ = 0;
  int64_t refused_ = 0;
};

// What CUPTI's two buffer callbacks do, without CUPTI types (the callbacks forward here).
class ActivityBuffers {
 public:
  ActivityBuffers(Sink& sink, size_t buffer_bytes, size_t buffers)
      : pool_(buffer_bytes, buffers), parser_(sink) {}
  // bufferRequested: a pooled buffer and its size, or null and 0 when the pool is exhausted
  // (counted in dropped_ours and reported).
  uint8_t* request(size_t* size);
  // bufferCompleted: convert the records (unless `convert` is false: a forked child, after
  // disable), add CUPTI's drop count for the buffer, recycle it.
  void complete(uint8_t* buf, size_t valid_bytes, int64_t dropped_cupti, bool convert);
  RecordParser& parser() { return parser_; }
  BufferPool& pool() { return pool_; }

 private:
  BufferPool pool_;
  RecordParser parser_;
};

// Settings from the environment: KERNALYSE_CUPTI_BUFFER_KB (default 4096),
// KERNALYSE_CUPTI_BUFFERS (default 32), KERNALYSE_CUPTI_FLUSH_MS (periodic flush, default 1000).
struct Config {
  size_t buffer_bytes = size_t{4096} * 1024;
  size_t buffers = 32;
  int64_t flush_ms = 1000;
  std::string skip;  // KERNALYSE_CUPTI_SKIP as ",a,b,": parts left off (diagnostic)
  bool skips(const char* part) const {
    return skip.find(std::string(",") + part + ",") != std::string::npos;
  }
};
Config config_from_env();

// Whether a driver API call gets an API record (and so a launch row): launches, graph launches,
// copies, memsets, allocations, synchronisations, event records and waits, module loads. The
// rest is left off at CUPTI (cuptiActivityEnableDriverApi): on the first GPU run, the driver
// records of everything else cost 11 % of a launch-bound decode loop under --nvtx, and 1.3 %
// without them (docs/gpu-validation.md).
bool driver_api_recorded(const std::string& name);

// The one-line warning/status for a failed CUPTI call during injection: what went wrong in
// words ("another CUPTI client (...) is already subscribed", "no CUDA device (...)").
// `result` is the CUptiResult, `other` the name CUPTI gave of the other subscriber, if any.
std::string failure_line(const char* call, int result, const char* other);

// Forced (or periodic, forced=false) flush of CUPTI's buffers into the Sink; what
// InitializeInjection registers with register_cupti_flush. No-op before a successful
// injection, in a forked child, or after disable.
void cupti_flush_all(bool forced);

}  // namespace kernalyse::collector::cupti

// CUDA's injection entry point (CUDA_INJECTION64_PATH): returns 1 whether or not CUPTI could
// record, so the application always runs.
extern "C" int InitializeInjection(void);
