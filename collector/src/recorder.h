// The collector's record buffers: interned names and one vector per record type, flushed to a
// per-rank spool in small self-checking blocks. The Collector wraps one in its mutex; tests use
// one directly (source → Recorder → spool → spool_to_store: the collector's own path, no MPI).
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernalyse/spool.h"
#include "sink.h"

namespace kernalyse::collector {

class Recorder : public Sink {
 public:
  Recorder();
  // Sink (not thread-safe: the caller serialises).
  void activity(const kernalyse_emu_activity& a, bool emulated) override;
  void launch(const kernalyse_emu_launch& l) override;
  void nccl(const kernalyse_emu_nccl& n) override;
  void range(const kernalyse_emu_range& r) override;
  void memory(const kernalyse_emu_memory& m) override;
  void counter(const kernalyse_emu_counter& c, bool emulated) override;
  void losses(const LossCounts& c) override;
  void status(const char* line, const char* device_name) override;
  void coll_mark(const kernalyse_emu_coll_mark& m) override;

  // Records taken since the last flush.
  int64_t pending() const { return pending_; }
  bool emulated() const { return emulated_; }
  const std::string& status_line() const { return status_line_; }
  // Writes new strings, then every buffered record, then the status if it changed; clears the
  // buffers. False on a write error (the records are gone either way: memory stays bounded).
  bool flush(spool::Writer& w);

 private:
  uint32_t intern(const char* s);

  std::vector<std::string> strings_;
  size_t strings_flushed_ = 0;
  std::unordered_map<std::string, uint32_t> string_ids_;
  // Sources pass the same few name pointers again and again: a pointer-keyed cache, checked
  // with strcmp (the text behind a pointer may change), skips the allocation and hash.
  struct PtrSlot {
    const char* ptr = nullptr;
    uint32_t id = 0;
  };
  static constexpr size_t kPtrCache = 64;
  PtrSlot ptr_cache_[kPtrCache];
  std::vector<spool::Activity> acts_;
  std::vector<spool::Launch> launches_;
  std::vector<spool::Nccl> nccl_;
  std::vector<spool::Range> ranges_;
  std::vector<spool::Memory> memory_;
  std::vector<spool::Counter> counters_;
  std::vector<spool::CollMark> marks_;
  LossCounts losses_;
  std::string status_line_, device_name_;
  bool status_dirty_ = false;
  bool emulated_ = false;
  int64_t pending_ = 0;
};

}  // namespace kernalyse::collector
