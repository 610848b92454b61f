#include "recorder.h"

#include <algorithm>
#include <cstring>

namespace kernalyse::collector {

Recorder::Recorder() {
  strings_.push_back("");
  string_ids_[""] = 0;
}

uint32_t Recorder::intern(const char* s) {
  if (!s) s = "";
  PtrSlot& slot = ptr_cache_[(reinterpret_cast<uintptr_t>(s) >> 3) % kPtrCache];
  if (slot.ptr == s && std::strcmp(strings_[slot.id].c_str(), s) == 0) return slot.id;
  std::string k = s;
  auto it = string_ids_.find(k);
  uint32_t id;
  if (it != string_ids_.end()) {
    id = it->second;
  } else {
    id = static_cast<uint32_t>(strings_.size());
    strings_.push_back(k);
    string_ids_.emplace(std::move(k), id);
  }
  slot = {s, id};
  return id;
}

void Recorder::activity(const kernalyse_emu_activity& a, bool emulated) {
  acts_.push_back({a.start_ns, a.end_ns, a.correlation, a.device, a.stream, intern(a.name),
                   static_cast<uint8_t>(a.kind)});
  emulated_ = emulated_ || emulated;
  ++pending_;
}

void Recorder::launch(const kernalyse_emu_launch& l) {
  launches_.push_back({l.start_ns, l.end_ns, l.correlation, l.thread, intern(l.name)});
  ++pending_;
}

void Recorder::nccl(const kernalyse_emu_nccl& n) {
  nccl_.push_back({n.correlation, n.seq, n.count, n.bytes, n.comm_hash, intern(n.collective),
                   intern(n.dtype), n.nranks, n.peer, n.algo ? intern(n.algo) : 0u,
                   n.proto ? intern(n.proto) : 0u, n.n_channels, n.comm_rank});
  ++pending_;
}

void Recorder::range(const kernalyse_emu_range& r) {
  ranges_.push_back({r.start_ns, r.end_ns, r.thread, intern(r.name)});
  ++pending_;
}

void Recorder::memory(const kernalyse_emu_memory& m) {
  memory_.push_back({m.ts_ns, m.bytes, m.address, m.device, m.stream});
  ++pending_;
}

void Recorder::counter(const kernalyse_emu_counter& c, bool emulated) {
  counters_.push_back({c.ts_ns, c.value, c.device, intern(c.name)});
  emulated_ = emulated_ || emulated;
  ++pending_;
}

void Recorder::coll_mark(const kernalyse_emu_coll_mark& m) {
  marks_.push_back({m.ts_ns, m.seq, m.bytes, m.comm_hash, intern(m.collective), m.nranks,
                    m.comm_rank, static_cast<uint8_t>(m.state)});
  ++pending_;
}

void Recorder::losses(const LossCounts& c) {
  if (c.dropped_cupti == losses_.dropped_cupti && c.dropped_ours == losses_.dropped_ours &&
      c.skipped == losses_.skipped)
    return;
  losses_ = c;
  status_dirty_ = true;
}

void Recorder::status(const char* line, const char* device_name) {
  status_line_ = line ? line : "";
  if (device_name) device_name_ = device_name;
  status_dirty_ = true;
}

bool Recorder::flush(spool::Writer& w) {
  bool ok = true;
  if (strings_.size() > strings_flushed_) {
    std::string blob;
    for (size_t i = strings_flushed_; i < strings_.size(); ++i)
      blob.append(strings_[i]).push_back('\0');
    ok = w.write_block(spool::BlockType::Strings,
                       static_cast<uint32_t>(strings_.size() - strings_flushed_), blob.data(),
                       blob.size());
    strings_flushed_ = strings_.size();
  }
  // Small blocks (<= kBlockRecords): a process killed mid-flush (mpirun sends SIGKILL
  // odls_base_sigkill_timeout after SIGTERM) loses at most one of them, never the whole flush.
  constexpr size_t kBlockRecords = 1024;
  auto put = [&](spool::BlockType t, auto& v) {
    for (size_t i = 0; i < v.size() && ok; i += kBlockRecords) {
      const size_t n = std::min(kBlockRecords, v.size() - i);
      ok = w.write_block(t, static_cast<uint32_t>(n), v.data() + i, n * sizeof(v[0]));
    }
    v.clear();
  };
  put(spool::BlockType::Activities, acts_);
  put(spool::BlockType::Launches, launches_);
  put(spool::BlockType::Nccl, nccl_);
  put(spool::BlockType::Ranges, ranges_);
  put(spool::BlockType::Memory, memory_);
  put(spool::BlockType::Counter, counters_);
  put(spool::BlockType::CollMark, marks_);
  if (ok && status_dirty_) {
    ok = w.write_status({losses_.dropped_cupti, losses_.dropped_ours, losses_.skipped},
                        status_line_, device_name_);
    status_dirty_ = false;
  }
  pending_ = 0;
  return ok;
}

}  // namespace kernalyse::collector
