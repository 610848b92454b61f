// Per-rank spool: records are appended in self-checking blocks (header + CRC32), so memory stays
// bounded while running and a torn tail is detected, never misread (docs/collector.md).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kernalyse::spool {

inline constexpr uint32_t kMagic = 0x4C50534B;  // "KSPL"
// 2: NCCL algo/proto/channels, Memory, Status, Counter; 3: CollMark blocks (version 2 files are
// still read: they simply have none).
inline constexpr uint16_t kVersion = 3;
inline constexpr uint16_t kOldestVersion = 2;

enum class BlockType : uint16_t {
  Strings = 1,
  Activities = 2,
  Launches = 3,
  Nccl = 4,
  Ranges = 5,
  Meta = 6,
  Memory = 7,
  Status = 8,
  Counter = 9,
  CollMark = 10
};

#pragma pack(push, 1)
struct BlockHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t type;
  uint32_t count;          // records (or strings) in the block
  uint32_t payload_bytes;  // bytes after the header
  uint32_t crc;            // CRC32 of the payload
};
struct Activity {
  int64_t start_ns, end_ns, correlation;
  int32_t device, stream;
  uint32_t name;
  uint8_t kind;
};
struct Launch {
  int64_t start_ns, end_ns, correlation, thread;
  uint32_t name;
};
struct Nccl {
  int64_t correlation, seq, count, bytes;
  uint64_t comm_hash;
  uint32_t collective, dtype;
  int32_t nranks, peer;
  uint32_t algo, proto;  // string ids, 0 = unknown
  int32_t n_channels, comm_rank;
};
struct Memory {
  int64_t ts_ns, bytes;  // bytes > 0: allocation, < 0: release
  uint64_t address;
  int32_t device, stream;
};
struct Counter {
  int64_t ts_ns, value;
  int32_t device;
  uint32_t name;  // string id
};
// A rank entered (state 0) or completed (state 1) collective `seq` of a communicator: what the
// hang and desync report (kernalyse-merge --spool DIR --hang) reads.
struct CollMark {
  int64_t ts_ns, seq, bytes;
  uint64_t comm_hash;
  uint32_t collective;  // string id
  int32_t nranks, comm_rank;
  uint8_t state;
};
// Fixed part of a Status block; the status line and the device name follow, NUL-terminated.
// Cumulative counts: the last complete Status block wins.
struct StatusFixed {
  int64_t dropped_cupti, dropped_ours, skipped;
};
struct Range {
  int64_t start_ns, end_ns, thread;
  uint32_t name;
};
// Fixed part of a Meta block's payload; the host name and the command follow, each
// NUL-terminated, then (process trees, optional) where the rank number came from. Meta blocks are
// small and may repeat: the last complete one wins.
struct MetaFixed {
  int32_t rank, world_size;
  int64_t pid;
  int64_t start_local_ns, start_offset_ns, start_rtt_ns;  // start clock sample (to rank 0)
  int64_t end_local_ns, end_offset_ns, end_rtt_ns;        // end sample, if has_end
  int64_t anchor_ns;   // rank 0's CLOCK_REALTIME − CLOCK_MONOTONIC_RAW at the start sync
  int64_t written_ns;  // this rank's raw clock when the block was written
  int32_t exchanges;   // ping-pong exchanges per sample (method string only)
  uint8_t has_start, has_end, emulated;
  // 1: a rank of a process tree (kernalyse-run without MPI): its clock is the host's
  // CLOCK_MONOTONIC_RAW, shared with every rank of the tree, so the alignment is exact.
  uint8_t shared_clock;
};
#pragma pack(pop)

// What a rank knows about itself and its clock: written by the collector after the start clock
// sync and again at finish (with the end sample), so that the offline recovery
// (kernalyse-merge --spool) needs no MPI.
struct Meta {
  MetaFixed fixed{};
  std::string host, command;
  std::string rank_origin;  // "RANK=2", "start order"; "" for MPI ranks
};

// Everything read back from a spool file (string ids index `strings`).
struct Contents {
  std::vector<std::string> strings;
  std::vector<Activity> activities;
  std::vector<Launch> launches;
  std::vector<Nccl> nccl;
  std::vector<Range> ranges;
  std::vector<Memory> memory;
  std::vector<Counter> counters;
  std::vector<CollMark> coll_marks;
  bool has_status = false;
  StatusFixed status{};  // the last Status block, if has_status
  std::string status_line, device_name;
  bool has_meta = false;
  Meta meta;  // the last Meta block, if has_meta
  int64_t blocks = 0;
  int64_t bytes_valid = 0;  // up to the end of the last complete, checked block
  bool truncated = false;   // a torn or corrupt tail was dropped
  std::string problem;      // what was wrong with the tail, if anything
  bool unreadable = false;  // the file could not be read at all (problem says why)
};

class Writer {
 public:
  Writer() = default;
  Writer(const Writer&) = delete;
  Writer& operator=(const Writer&) = delete;
  ~Writer();
  // Opens (truncates) the file; false with errno set on failure.
  bool open(const std::string& path);
  // Appends one block; false on a write error (disk full, ...).
  bool write_block(BlockType type, uint32_t count, const void* payload, size_t bytes);
  // Appends one Meta block.
  bool write_meta(const Meta& m);
  // Appends one Status block.
  bool write_status(const StatusFixed& f, const std::string& line, const std::string& device_name);
  void close();
  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

 private:
  int fd_ = -1;
  std::string path_;
};

// Reads every complete, checked block; stops at the first bad one (reported, not fatal).
Contents read(const std::string& path);

}  // namespace kernalyse::spool
