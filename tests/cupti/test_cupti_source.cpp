// The CUPTI source without a GPU: hand-built activity buffers (the record structs of the installed
// CUPTI headers) go through the real cuptiActivityGetNextRecord and RecordParser into a capturing
// Sink; the injection entry point and the CUDA presence checks run against this driverless host.
#include <cupti.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "cuda_presence.h"
#include "cupti_source.h"
#include "kernalyse/spool_store.h"
#include "kernalyse/store_io.h"
#include "nccl_link.h"
#include "recorder.h"

using namespace kernalyse::collector;
using namespace kernalyse::collector::cupti;

namespace {

struct Act {
  int32_t kind, device, stream;
  int64_t start, end, corr;
  std::string name;
};
struct Launch {
  int64_t start, end, corr, thread;
  std::string name;
};
struct Range {
  int64_t start, end, thread;
  std::string name;
};

class CaptureSink : public Sink {
 public:
  std::vector<Act> acts;
  std::vector<Launch> launches;
  std::vector<Range> ranges;
  std::vector<kernalyse_emu_memory> mems;
  std::vector<std::string> statuses, device_names;
  LossCounts last_losses;
  int loss_reports = 0;
  bool any_emulated = false;

  void activity(const kernalyse_emu_activity& a, bool emulated) override {
    any_emulated |= emulated;
    acts.push_back({a.kind, a.device, a.stream, a.start_ns, a.end_ns, a.correlation, a.name});
  }
  void launch(const kernalyse_emu_launch& l) override {
    launches.push_back({l.start_ns, l.end_ns, l.correlation, l.thread, l.name});
  }
  void nccl(const kernalyse_emu_nccl&) override {}
  void range(const kernalyse_emu_range& r) override {
    ranges.push_back({r.start_ns, r.end_ns, r.thread, r.name});
  }
  void memory(const kernalyse_emu_memory& m) override { mems.push_back(m); }
  void counter(const kernalyse_emu_counter&, bool) override {}
  void losses(const LossCounts& c) override {
    last_losses = c;
    ++loss_reports;
  }
  std::vector<std::pair<int32_t, std::string>> devices_used;
  void gpu_device_used(int32_t ordinal, const char* uuid) override {
    devices_used.emplace_back(ordinal, uuid);
  }
  void status(const char* line, const char* device_name) override {
    statuses.push_back(line);
    device_names.push_back(device_name ? device_name : "");
  }
};

// An 8-byte-aligned activity buffer built record by record, as CUPTI lays them out.
class Buf {
 public:
  template <class T>
  Buf& add(const T& rec) {
    static_assert(sizeof(T) % 8 == 0);
    const size_t at = bytes_;
    bytes_ += sizeof(T);
    words_.resize((bytes_ + 7) / 8 + 8, 0);  // slack past the end: reads must not need it
    std::memcpy(reinterpret_cast<uint8_t*>(words_.data()) + at, &rec, sizeof(T));
    return *this;
  }
  Buf& zeros(size_t n) {
    bytes_ += n;
    words_.resize((bytes_ + 7) / 8 + 8, 0);
    return *this;
  }
  const uint8_t* data() const { return reinterpret_cast<const uint8_t*>(words_.data()); }
  uint8_t* data() { return reinterpret_cast<uint8_t*>(words_.data()); }
  size_t size() const { return bytes_; }

 private:
  std::vector<uint64_t> words_ = std::vector<uint64_t>(8, 0);
  size_t bytes_ = 0;
};

CUpti_ActivityKernel10 kernel(uint32_t corr, uint64_t start, uint64_t end, const char* name) {
  CUpti_ActivityKernel10 k{};
  k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
  k.start = start;
  k.end = end;
  k.deviceId = 1;
  k.contextId = 7;
  k.streamId = 13;
  k.correlationId = corr;
  k.name = name;
  k.gridX = 4;
  k.blockX = 256;
  return k;
}

CUpti_ActivityMemcpy6 memcpy_rec(uint32_t corr, uint8_t copy, uint8_t src, uint8_t dst) {
  CUpti_ActivityMemcpy6 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
  m.copyKind = copy;
  m.srcKind = src;
  m.dstKind = dst;
  m.bytes = 1 << 20;
  m.start = 5000;
  m.end = 6000;
  m.deviceId = 0;
  m.streamId = 7;
  m.correlationId = corr;
  return m;
}

CUpti_ActivityAPI api(CUpti_ActivityKind kind, uint32_t cbid, uint32_t corr) {
  CUpti_ActivityAPI a{};
  a.kind = kind;
  a.cbid = cbid;
  a.start = 100;
  a.end = 180;
  a.processId = 4242;
  a.threadId = 4243;
  a.correlationId = corr;
  return a;
}

CUpti_ActivityMarker2 marker(uint32_t flags, uint32_t id, uint64_t ts, const char* name) {
  CUpti_ActivityMarker2 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MARKER;
  m.flags = static_cast<CUpti_ActivityFlag>(flags);
  m.timestamp = ts;
  m.id = id;
  m.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
  m.objectId.pt.processId = 4242;
  m.objectId.pt.threadId = 4244;
  m.name = name;
  m.domain = nullptr;
  return m;
}

}  // namespace

// ---- record conversion, one kind at a time -----------------------------------------------------

TEST(CuptiRecords, ConcurrentKernelFieldByField) {
  CaptureSink sink;
  RecordParser p(sink);
  Buf b;
  b.add(kernel(77, 1'000'000'123, 1'000'004'567, "ncclDevKernel_SendRecv"));
  EXPECT_EQ(p.process_buffer(b.data(), b.size()), 1u);
  ASSERT_EQ(sink.acts.size(), 1u);
  const Act& a = sink.acts[0];
  EXPECT_EQ(a.kind, KERNALYSE_EMU_KERNEL);
  EXPECT_EQ(a.name, "ncclDevKernel_SendRecv");
  EXPECT_EQ(a.device, 1);
  EXPECT_EQ(a.stream, 13);
  EXPECT_EQ(a.corr, 77);
  EXPECT_EQ(a.start, 1'000'000'123);
  EXPECT_EQ(a.end, 1'000'004'567);
  EXPECT_FALSE(sink.any_emulated);  // real records are never labelled emulated
  EXPECT_EQ(p.stats().kernels, 1);
  EXPECT_EQ(p.stats().skipped, 0);
}

TEST(CuptiRecords, MemcpyNamedLikeKineto) {
  CaptureSink sink;
  RecordParser p(sink);
  Buf b;
  b.add(memcpy_rec(5, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
                   CUPTI_ACTIVITY_MEMORY_KIND_DEVICE));
  b.add(memcpy_rec(6, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                   CUPTI_ACTIVITY_MEMORY_KIND_PINNED));
  b.add(memcpy_rec(7, 200, 200, 200));  // out-of-range enums must not index past a table
  EXPECT_EQ(p.process_buffer(b.data(), b.size()), 3u);
  ASSERT_EQ(sink.acts.size(), 3u);
  EXPECT_EQ(sink.acts[0].kind, KERNALYSE_EMU_MEMCPY);
  EXPECT_EQ(sink.acts[0].name, "Memcpy HtoD (Pageable -> Device)");
  EXPECT_EQ(sink.acts[0].stream, 7);
  EXPECT_EQ(sink.acts[0].corr, 5);
  EXPECT_EQ(sink.acts[0].start, 5000);
  EXPECT_EQ(sink.acts[0].end, 6000);
  EXPECT_EQ(sink.acts[1].name, "Memcpy DtoH (Device -> Pinned)");
  EXPECT_EQ(sink.acts[2].name, "Memcpy Unknown (Unknown -> Unknown)");
}

TEST(CuptiRecords, Memcpy2PeerToPeer) {
  CaptureSink sink;
  RecordParser p(sink);
  CUpti_ActivityMemcpyPtoP4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
  m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
  m.srcKind = m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = 4096;
  m.start = 10;
  m.end = 30;
  m.deviceId = 2;
  m.streamId = 9;
  m.srcDeviceId = 2;
  m.dstDeviceId = 3;
  m.correlationId = 99;
  Buf b;
  b.add(m);
  EXPECT_EQ(p.process_buffer(b.data(), b.size()), 1u);
  ASSERT_EQ(sink.acts.size(), 1u);
  EXPECT_EQ(sink.acts[0].kind, KERNALYSE_EMU_MEMCPY);
  EXPECT_EQ(sink.acts[0].name, "Memcpy PtoP (Device -> Device)");
  EXPECT_EQ(sink.acts[0].device, 2);
  EXPECT_EQ(sink.acts[0].stream, 9);
  EXPECT_EQ(sink.acts[0].corr, 99);
  EXPECT_EQ(sink.acts[0].start, 10);
  EXPECT_EQ(sink.acts[0].end, 30);
}

TEST(CuptiRecords, Memset) {
  CaptureSink sink;
  RecordParser p(sink);
  CUpti_ActivityMemset4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMSET;
  m.value = 0;
  m.bytes = 512;
  m.start = 40;
  m.end = 45;
  m.deviceId = 0;
  m.streamId = 21;
  m.correlationId = 8;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  Buf b;
  b.add(m);
  EXPECT_EQ(p.process_buffer(b.data(), b.size()), 1u);
  ASSERT_EQ(sink.acts.size(), 1u);
  EXPECT_EQ(sink.acts[0].kind, KERNALYSE_EMU_MEMSET);
  EXPECT_EQ(sink.acts[0].name, "Memset (Device)");
  EXPECT_EQ(sink.acts[0].stream, 21);
  EXPECT_EQ(sink.acts[0].corr, 8);
  EXPECT_EQ(sink.acts[0].start, 40);
  EXPECT_EQ(sink.acts[0].end, 45);
}

TEST(CuptiRecords, Memory2AllocAndRelease) {
  CaptureSink sink;
  RecordParser p(sink);
  CUpti_ActivityMemory4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.address = 0x7f0000001000;
  m.bytes = 1 << 30;
  m.timestamp = 111;
  m.deviceId = 1;
  m.streamId = 5;
  m.isAsync = 0;
  Buf b;
  b.add(m);
  m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  m.timestamp = 222;
  m.isAsync = 1;  // stream-ordered (cudaFreeAsync): the stream counts
  b.add(m);
  EXPECT_EQ(p.process_buffer(b.data(), b.size()), 2u);
  ASSERT_EQ(sink.mems.size(), 2u);
  EXPECT_EQ(sink.mems[0].ts_ns, 111);
  EXPECT_EQ(sink.mems[0].bytes, int64_t{1} << 30);
  EXPECT_EQ(sink.mems[0].device, 1);
  EXPECT_EQ(sink.mems[0].stream, -1);
  EXPECT_EQ(sink.mems[0].address, 0x7f0000001000u);
  EXPECT_EQ(sink.mems[1].ts_ns, 222);
  EXPECT_EQ(sink.mems[1].bytes, -(int64_t{1} << 30));
  EXPECT_EQ(sink.mems[1].stream, 5);
}

TEST(CuptiRecords, Memory2KeepsDeviceMemoryOnly) {
  CaptureSink sink;
  RecordParser p(sink);
  CUpti_ActivityMemory4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  m.bytes = 4096;
  m.timestamp = 10;
  Buf b;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_PINNED;  // cudaMallocHost: host RAM
  b.add(m);
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
  b.add(m);
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  b.add(m);
  EXPECT_EQ(p.process_buffer(b.data(), b.size()), 3u);
  ASSERT_EQ(sink.mems.size(), 1u);
  EXPECT_EQ(p.stats().memory_not_device, 2);
  EXPECT_EQ(p.losses().skipped, 0);  // not a loss: not GPU memory
}

TEST(CuptiRecords, MarkerStartEndPairsById) {
  CaptureSink sink;
  RecordParser p(sink);
  Buf b;
  b.add(marker(CUPTI_ACTIVITY_FLAG_MARKER_START, 1, 1000, "ProfilerStep#3"));
  b.add(marker(CUPTI_ACTIVITY_FLAG_MARKER_START, 2, 1100, "forward"));
  b.add(marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 2, 1500, nullptr));  // END carries no name
  b.add(marker(CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS, 3, 1600, "checkpoint"));
  b.add(marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 1, 2000, nullptr));
  b.add(marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 9, 2100, nullptr));  // END without START
  EXPECT_EQ(p.process_buffer(b.data(), b.size()), 6u);
  ASSERT_EQ(sink.ranges.size(), 3u);
  EXPECT_EQ(sink.ranges[0].name, "forward");
  EXPECT_EQ(sink.ranges[0].start, 1100);
  EXPECT_EQ(sink.ranges[0].end, 1500);
  EXPECT_EQ(sink.ranges[0].thread, 4244);
  EXPECT_EQ(sink.ranges[1].name, "checkpoint");
  EXPECT_EQ(sink.ranges[1].start, 1600);
  EXPECT_EQ(sink.ranges[1].end, 1600);
  EXPECT_EQ(sink.ranges[2].name, "ProfilerStep#3");
  EXPECT_EQ(sink.ranges[2].start, 1000);
  EXPECT_EQ(sink.ranges[2].end, 2000);
  EXPECT_EQ(p.stats().skipped, 1);
}

TEST(CuptiRecords, MarkerPairAcrossBuffers) {
  CaptureSink sink;
  RecordParser p(sink);
  Buf b1, b2;
  b1.add(marker(CUPTI_ACTIVITY_FLAG_MARKER_START, 4, 10, "step"));
  b2.add(marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 4, 30, nullptr));
  p.process_buffer(b1.data(), b1.size());
  EXPECT_TRUE(sink.ranges.empty());
  p.process_buffer(b2.data(), b2.size());
  ASSERT_EQ(sink.ranges.size(), 1u);
  EXPECT_EQ(sink.ranges[0].name, "step");
  EXPECT_EQ(sink.ranges[0].end - sink.ranges[0].start, 20);
}

TEST(CuptiRecords, ExternalCorrelationKeptAndCounted) {
  CaptureSink sink;
  RecordParser p(sink);
  CUpti_ActivityExternalCorrelation e{};
  e.kind = CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION;
  e.externalKind = CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2;
  e.externalId = 0xabcdef0123ull;
  e.correlationId = 31;
  Buf b;
  b.add(e).add(api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 31));
  EXPECT_EQ(p.process_buffer(b.data(), b.size()), 2u);
  EXPECT_EQ(p.stats().external_correlations, 1);
  EXPECT_EQ(p.external_id(31), 0xabcdef0123ll);
  EXPECT_EQ(p.external_id(32), -1);
  EXPECT_EQ(sink.launches.size(), 1u);  // the API record itself still becomes a launch
  EXPECT_TRUE(sink.acts.empty());
}

TEST(CuptiRecords, DriverAndRuntimeApiBecomeLaunches) {
  CaptureSink sink;
  RecordParser p(sink);
  Buf b;
  b.add(api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 41));
  b.add(api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 42));
  b.add(api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 43));
  EXPECT_EQ(p.process_buffer(b.data(), b.size()), 3u);
  ASSERT_EQ(sink.launches.size(), 3u);
  // cuptiGetCallbackName works without a driver; its "_v7000" suffix is dropped.
  EXPECT_EQ(sink.launches[0].name, "cuLaunchKernelEx");
  EXPECT_EQ(sink.launches[1].name, "cudaLaunchKernel");
  EXPECT_EQ(sink.launches[2].name, "cuLaunchKernelEx");
  EXPECT_EQ(sink.launches[0].corr, 41);
  EXPECT_EQ(sink.launches[1].corr, 42);
  EXPECT_EQ(sink.launches[0].thread, 4243);
  EXPECT_EQ(sink.launches[0].start, 100);
  EXPECT_EQ(sink.launches[0].end, 180);
  EXPECT_EQ(p.stats().api_calls, 3);
}

TEST(CuptiRecords, DeviceRecordSetsStatus) {
  CaptureSink sink;
  RecordParser p(sink);
  CUpti_ActivityDevice5 d{};
  d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  d.id = 0;
  d.name = "NVIDIA H100 80GB HBM3";
  d.numMultiprocessors = 132;
  Buf b;
  b.add(d);
  EXPECT_EQ(p.process_buffer(b.data(), b.size()), 1u);
  ASSERT_EQ(sink.statuses.size(), 1u);
  EXPECT_EQ(sink.statuses[0], "cupti: 1 CUDA device (0: NVIDIA H100 80GB HBM3)");
  EXPECT_EQ(sink.device_names[0], "NVIDIA H100 80GB HBM3");
}

// The devices this process ran work on, once each, with the UUID NVML knows them by (from the
// DEVICE record): the Collector samples the power of exactly these.
TEST(CuptiRecords, DevicesUsedReportedOnceWithTheirUuid) {
  CaptureSink sink;
  RecordParser p(sink);
  CUpti_ActivityDevice5 d{};
  d.kind = CUPTI_ACTIVITY_KIND_DEVICE;
  d.id = 1;
  d.name = "NVIDIA H200";
  auto* u = reinterpret_cast<unsigned char*>(&d.uuid);
  for (int i = 0; i < 16; ++i) u[i] = static_cast<unsigned char>(i);
  Buf b;
  b.add(d);
  b.add(kernel(1, 100, 200, "a"));  // device 1
  b.add(kernel(2, 300, 400, "b"));  // device 1 again
  b.add(memcpy_rec(3, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
                   CUPTI_ACTIVITY_MEMORY_KIND_DEVICE));  // device 0, no DEVICE record for it
  p.process_buffer(b.data(), b.size());
  ASSERT_EQ(sink.devices_used.size(), 2u);
  EXPECT_EQ(sink.devices_used[0],
            std::make_pair(1, std::string("GPU-00010203-0405-0607-0809-0a0b0c0d0e0f")));
  EXPECT_EQ(sink.devices_used[1], std::make_pair(0, std::string("")));
}

TEST(CuptiRecords, MixedBufferKeepsOrder) {
  CaptureSink sink;
  RecordParser p(sink);
  Buf b;
  b.add(api(CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 1));
  b.add(kernel(1, 200, 300, "gemm"));
  b.add(memcpy_rec(2, CUPTI_ACTIVITY_MEMCPY_KIND_DTOD, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
                   CUPTI_ACTIVITY_MEMORY_KIND_DEVICE));
  b.add(kernel(3, 400, 500, "relu"));
  EXPECT_EQ(p.process_buffer(b.data(), b.size()), 4u);
  ASSERT_EQ(sink.acts.size(), 3u);
  EXPECT_EQ(sink.acts[0].name, "gemm");
  EXPECT_EQ(sink.acts[1].name, "Memcpy DtoD (Device -> Device)");
  EXPECT_EQ(sink.acts[2].name, "relu");
  EXPECT_EQ(sink.launches.size(), 1u);
}

// ---- buffer boundaries and bad records ---------------------------------------------------------

TEST(CuptiBuffers, EmptyAndNullBuffers) {
  CaptureSink sink;
  RecordParser p(sink);
  Buf b;
  b.add(kernel(1, 1, 2, "k"));
  EXPECT_EQ(p.process_buffer(b.data(), 0), 0u);
  EXPECT_EQ(p.process_buffer(nullptr, 0), 0u);
  EXPECT_EQ(p.process_buffer(nullptr, 4096), 0u);
  EXPECT_TRUE(sink.acts.empty());
  EXPECT_EQ(p.stats().skipped, 0);
}

TEST(CuptiBuffers, TruncatedRecordIsNotRead) {
  CaptureSink sink;
  RecordParser p(sink);
  Buf b;
  b.add(kernel(1, 10, 20, "first"));
  b.add(kernel(2, 30, 40, "second"));
  const size_t one = sizeof(CUpti_ActivityKernel10);
  for (size_t cut : {one + 8, one + one / 2, 2 * one - 8}) {
    CaptureSink s;
    RecordParser q(s);
    EXPECT_EQ(q.process_buffer(b.data(), cut), 1u) << "cut at " << cut;
    ASSERT_EQ(s.acts.size(), 1u);
    EXPECT_EQ(s.acts[0].name, "first");
    EXPECT_EQ(q.stats().skipped, 0);
  }
  // Shorter than one record: nothing.
  EXPECT_EQ(p.process_buffer(b.data(), one - 8), 0u);
  EXPECT_EQ(p.process_buffer(b.data(), 4), 0u);
  EXPECT_TRUE(sink.acts.empty());
}

TEST(CuptiBuffers, RecordEndingExactlyAtValidBytes) {
  CaptureSink sink;
  RecordParser p(sink);
  Buf b;
  b.add(memcpy_rec(1, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, 1, 3));
  b.add(kernel(2, 30, 40, "last"));
  ASSERT_EQ(b.size(), sizeof(CUpti_ActivityMemcpy6) + sizeof(CUpti_ActivityKernel10));
  EXPECT_EQ(p.process_buffer(b.data(), b.size()), 2u);
  ASSERT_EQ(sink.acts.size(), 2u);
  EXPECT_EQ(sink.acts[1].name, "last");
  EXPECT_EQ(sink.acts[1].end, 40);
}

TEST(CuptiBuffers, ZeroedBufferIsSkippedAndCounted) {
  CaptureSink sink;
  RecordParser p(sink);
  Buf b;
  b.zeros(4096);
  EXPECT_EQ(p.process_buffer(b.data(), b.size()), 0u);
  EXPECT_EQ(p.stats().skipped, 1);
  EXPECT_EQ(p.stats().unterminated_buffers, 1);
  EXPECT_EQ(sink.last_losses.skipped, 1);  // reported through the Sink
}

TEST(CuptiBuffers, GarbageAfterGoodRecordsStopsThatBufferOnly) {
  CaptureSink sink;
  RecordParser p(sink);
  Buf b;
  b.add(kernel(1, 10, 20, "good"));
  b.zeros(64);
  b.add(kernel(2, 30, 40, "unreachable"));  // after garbage: CUPTI cannot find it
  std::memset(b.data() + sizeof(CUpti_ActivityKernel10), 0x5a, 64);  // kind 0x5a5a5a5a
  EXPECT_EQ(p.process_buffer(b.data(), b.size()), 1u);
  ASSERT_EQ(sink.acts.size(), 1u);
  EXPECT_EQ(sink.acts[0].name, "good");
  EXPECT_EQ(p.stats().skipped, 1);
  // The parser is still usable for the next buffer.
  Buf c;
  c.add(kernel(3, 50, 60, "next"));
  EXPECT_EQ(p.process_buffer(c.data(), c.size()), 1u);
  EXPECT_EQ(sink.acts.back().name, "next");
}

TEST(CuptiBuffers, KnownButUnhandledKindIsSkipped) {
  CaptureSink sink;
  RecordParser p(sink);
  // A kind CUPTI can size but we never enable (SYNCHRONIZATION): skipped, the next one read.
  CUpti_ActivitySynchronization2 s{};
  s.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
  s.start = 1;
  s.end = 2;
  Buf b;
  b.add(s).add(kernel(5, 70, 80, "after"));
  EXPECT_EQ(p.process_buffer(b.data(), b.size()), 2u);
  ASSERT_EQ(sink.acts.size(), 1u);
  EXPECT_EQ(sink.acts[0].name, "after");
  EXPECT_EQ(p.stats().skipped, 1);
  EXPECT_EQ(p.losses().skipped, 1);
}

TEST(CuptiBuffers, UntimedRecordsDroppedAndCounted) {
  CaptureSink sink;
  RecordParser p(sink);
  Buf b;
  b.add(kernel(1, 0, 0, "untimed"));
  CUpti_ActivityMemcpy6 m = memcpy_rec(2, 1, 1, 3);
  m.start = m.end = 0;
  b.add(m);
  b.add(kernel(3, 10, 20, "timed"));
  b.add(kernel(4, 50, 40, "end before start"));  // corrupt: skipped
  EXPECT_EQ(p.process_buffer(b.data(), b.size()), 4u);
  ASSERT_EQ(sink.acts.size(), 1u);
  EXPECT_EQ(sink.acts[0].name, "timed");
  EXPECT_EQ(p.stats().no_timing, 2);
  EXPECT_EQ(p.stats().skipped, 1);
  EXPECT_EQ(sink.last_losses.dropped_cupti, 2);
  EXPECT_EQ(sink.last_losses.skipped, 1);
}

TEST(CuptiBuffers, LossesAreCumulative) {
  CaptureSink sink;
  RecordParser p(sink);
  p.add_dropped_cupti(5);
  p.add_dropped_ours(2);
  Buf b;
  b.add(kernel(1, 0, 0, "untimed"));
  p.process_buffer(b.data(), b.size());
  EXPECT_EQ(sink.last_losses.dropped_cupti, 6);
  EXPECT_EQ(sink.last_losses.dropped_ours, 2);
  EXPECT_EQ(sink.last_losses.skipped, 0);
  EXPECT_GE(sink.loss_reports, 3);
}

// ---- buffer pool and configuration -------------------------------------------------------------

TEST(CuptiPool, BoundedAlignedRecycled) {
  BufferPool pool(64 * 1024, 2);
  uint8_t* a = pool.get();
  uint8_t* b = pool.get();
  ASSERT_NE(a, nullptr);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 8, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(b) % 8, 0u);
  EXPECT_EQ(pool.get(), nullptr);  // exhausted: CUPTI gets no buffer, we count it
  EXPECT_EQ(pool.refused(), 1);
  pool.put(a);
  EXPECT_EQ(pool.get(), a);  // recycled, not a new allocation
  EXPECT_EQ(pool.allocated(), 2u);
  pool.put(a);
  pool.put(b);
  pool.put(nullptr);
  EXPECT_EQ(pool.buffer_bytes(), 64u * 1024);
}

TEST(CuptiPool, CallbacksConvertCountAndRecycle) {
  // What CUPTI's bufferRequested/bufferCompleted do: 2 buffers of 64 KiB at most.
  CaptureSink sink;
  ActivityBuffers ab(sink, 64 * 1024, 2);
  size_t size = 0;
  uint8_t* a = ab.request(&size);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(size, 64u * 1024);
  uint8_t* b = ab.request(&size);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(ab.request(&size), nullptr);  // pool exhausted: CUPTI gets nothing...
  EXPECT_EQ(size, 0u);
  EXPECT_EQ(sink.last_losses.dropped_ours, 1);  // ...and it is counted as our loss
  // CUPTI fills `a` and hands it back with 3 records it had to drop.
  Buf recs;
  recs.add(kernel(1, 10, 20, "k1")).add(kernel(2, 30, 40, "k2"));
  std::memcpy(a, recs.data(), recs.size());
  ab.complete(a, recs.size(), 3, true);
  ASSERT_EQ(sink.acts.size(), 2u);
  EXPECT_EQ(sink.acts[1].name, "k2");
  EXPECT_EQ(sink.last_losses.dropped_cupti, 3);
  EXPECT_EQ(ab.request(&size), a);  // recycled
  // A forked child: the buffer is recycled, nothing converted or counted.
  std::memcpy(b, recs.data(), recs.size());
  ab.complete(b, recs.size(), 5, false);
  EXPECT_EQ(sink.acts.size(), 2u);
  EXPECT_EQ(sink.last_losses.dropped_cupti, 3);
  EXPECT_EQ(ab.request(&size), b);
  EXPECT_EQ(ab.pool().allocated(), 2u);
  // Both are handed out again: give them back (as CUPTI does at flush) so that the pool frees
  // them; the test leaked them before (LeakSanitizer, issue 19).
  ab.complete(a, 0, 0, false);
  ab.complete(b, 0, 0, false);
}

TEST(CuptiConfig, DefaultsAndEnvironment) {
  unsetenv("KERNALYSE_CUPTI_BUFFER_KB");
  unsetenv("KERNALYSE_CUPTI_BUFFERS");
  unsetenv("KERNALYSE_CUPTI_FLUSH_MS");
  Config d = config_from_env();
  EXPECT_EQ(d.buffer_bytes, 4096u * 1024);
  EXPECT_EQ(d.buffers, 32u);
  EXPECT_EQ(d.flush_ms, 1000);
  setenv("KERNALYSE_CUPTI_BUFFER_KB", "1024", 1);
  setenv("KERNALYSE_CUPTI_BUFFERS", "8", 1);
  setenv("KERNALYSE_CUPTI_FLUSH_MS", "junk", 1);
  Config c = config_from_env();
  EXPECT_EQ(c.buffer_bytes, 1024u * 1024);
  EXPECT_EQ(c.buffers, 8u);
  EXPECT_EQ(c.flush_ms, 1000);                  // not a number: default
  setenv("KERNALYSE_CUPTI_BUFFER_KB", "1", 1);  // clamped to the 64 KB minimum
  EXPECT_EQ(config_from_env().buffer_bytes, 64u * 1024);
  unsetenv("KERNALYSE_CUPTI_BUFFER_KB");
  unsetenv("KERNALYSE_CUPTI_BUFFERS");
  unsetenv("KERNALYSE_CUPTI_FLUSH_MS");
}

TEST(CuptiMessages, FailureLines) {
  EXPECT_EQ(failure_line("cuptiSubscribe_v2", CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED,
                         "CUPTI for Nsight Systems"),
            "another CUPTI client (CUPTI for Nsight Systems) is already subscribed; GPU activity "
            "not recorded");
  EXPECT_NE(failure_line("cuptiSubscribe_v2", CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED, "")
                .find("another CUPTI client (Nsight"),
            std::string::npos);
  std::string nodev = failure_line("cuptiSubscribe_v2", CUPTI_ERROR_UNKNOWN, nullptr);
  EXPECT_EQ(nodev.rfind("no CUDA device (cuptiSubscribe_v2: ", 0), 0u) << nodev;
  EXPECT_NE(nodev.find("GPU activity not recorded"), std::string::npos);
  EXPECT_EQ(failure_line("cuptiActivityEnable", CUPTI_ERROR_INVALID_PARAMETER, nullptr)
                .rfind("CUPTI unusable (cuptiActivityEnable: ", 0),
            0u);
}

// ---- the whole record path: CUPTI buffer → RecordParser → Recorder → spool → store --------------

TEST(CuptiToStore, HandBuiltBufferBecomesStoreRows) {
  using namespace kernalyse;
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kl_cupti_store_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Recorder rec;
  RecordParser p(rec);
  Buf b;
  // An NCCL kernel launched by the driver (correlation 77), a GEMM, a copy, an allocation pair
  // and an NVTX range around them; then garbage the parser must skip.
  b.add(api(CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, 77));
  b.add(kernel(77, 1'000, 5'000, "ncclDevKernel_AllReduce_Sum_bf16_RING_LL"));
  b.add(kernel(78, 6'000, 9'000, "sm90_xmma_gemm_bf16bf16"));
  b.add(memcpy_rec(79, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
                   CUPTI_ACTIVITY_MEMORY_KIND_DEVICE));
  b.add(marker(CUPTI_ACTIVITY_FLAG_MARKER_START, 5, 500, "layer 0"));
  b.add(marker(CUPTI_ACTIVITY_FLAG_MARKER_END, 5, 9'500, nullptr));
  CUpti_ActivityMemory4 m{};
  m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
  m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION;
  m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
  m.bytes = 4096;
  m.timestamp = 700;
  m.deviceId = 1;
  b.add(m);
  m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
  m.timestamp = 9'900;
  b.add(m);
  CUpti_ActivityKernel10 untimed = kernel(80, 0, 0, "never_timed");
  b.add(untimed);
  b.zeros(64);  // corrupt tail
  p.process_buffer(b.data(), b.size());
  p.add_dropped_cupti(5);
  p.report_losses();
  // What the NCCL plugin reports for the same launch.
  kernalyse_emu_nccl n{};
  n.correlation = 77;
  n.comm_hash = 0x1234;
  n.collective = "AllReduce";
  n.seq = 3;
  n.count = 1024;
  n.dtype = "BFloat16";
  n.bytes = 2048;
  n.nranks = 2;
  n.peer = -1;
  n.algo = "RING";
  n.proto = "LL";
  n.n_channels = 2;
  n.comm_rank = 0;
  rec.nccl(n);
  spool::Writer w;
  ASSERT_TRUE(w.open((dir / "rank-0.kspool").string()));
  ASSERT_TRUE(rec.flush(w));
  w.close();
  SpoolMeta meta;
  Store s = spool_to_store(spool::read((dir / "rank-0.kspool").string()), meta, ClockModel{});
  write_store(s, (dir / "run.h5").string());
  Store r = read_store((dir / "run.h5").string());
  fs::remove_all(dir);

  ASSERT_EQ(r.activities.size(), 3u);  // the untimed kernel is not a row
  std::map<std::string, size_t> row;
  for (size_t i = 0; i < r.activities.size(); ++i) row[r.strings.at(r.activities.name_id[i])] = i;
  ASSERT_TRUE(row.count("ncclDevKernel_AllReduce_Sum_bf16_RING_LL"));
  const size_t k = row["ncclDevKernel_AllReduce_Sum_bf16_RING_LL"];
  EXPECT_EQ(r.activities.start_ns[k], 1'000);
  EXPECT_EQ(r.activities.end_ns[k], 5'000);
  EXPECT_EQ(r.activities.device[k], 1);
  EXPECT_EQ(r.activities.stream[k], 13);
  EXPECT_EQ(r.activities.category[k], uint8_t(Category::Communication));
  EXPECT_EQ(r.activities.category[row["sm90_xmma_gemm_bf16bf16"]], uint8_t(Category::Computation));
  EXPECT_EQ(r.activities.kind[row["Memcpy HtoD (Pageable -> Device)"]], uint8_t(Kind::Memcpy));
  ASSERT_EQ(r.nccl.size(), 1u);
  EXPECT_EQ(r.nccl.activity[0], k);
  EXPECT_EQ(r.strings.at(r.nccl.algo_id[0]), "RING");
  EXPECT_EQ(r.nccl.n_channels[0], 2);
  ASSERT_EQ(r.launches.size(), 1u);
  EXPECT_EQ(r.launches.correlation[0], 77);
  EXPECT_EQ(r.strings.at(r.launches.name_id[0]), "cuLaunchKernelEx");
  ASSERT_EQ(r.annotations.size(), 1u);
  EXPECT_EQ(r.strings.at(r.annotations.name_id[0]), "layer 0");
  EXPECT_EQ(r.annotations.end_ns[0] - r.annotations.start_ns[0], 9'000);
  EXPECT_EQ(r.counters.value, (std::vector<int64_t>{4096, 0}));
  EXPECT_EQ(r.counters.device, (std::vector<int32_t>{1, 1}));
  ASSERT_EQ(r.ranks.size(), 1u);
  EXPECT_FALSE(r.ranks[0].emulated);
  EXPECT_EQ(r.ranks[0].records_dropped_cupti, 5 + 1);  // CUPTI's count + the untimed kernel
  EXPECT_EQ(r.ranks[0].events_malformed, 1);           // the corrupt tail
}

// ---- the injection entry point on this driverless host ----------------------------------------

namespace {
CaptureSink* g_process_sink = nullptr;
}  // namespace

// What the Collector and the NCCL plugin provide in libkernalyse_collector.so (cupti_source.cpp
// refers to them weakly).
namespace kernalyse::collector {
Sink* process_sink() { return g_process_sink; }
int64_t now_ns() { return 42; }
bool nccl_on_driver_launch(uint64_t) { return false; }
}  // namespace kernalyse::collector

// InitializeInjection runs once per process: each case runs in a child process of its own
// (a gtest death test that exits 0 when every check held, else prints what failed).
#define CHILD_CHECK(cond)                                      \
  do {                                                         \
    if (!(cond)) {                                             \
      std::fprintf(stderr, "child check failed: %s\n", #cond); \
      std::_Exit(1);                                           \
    }                                                          \
  } while (0)

TEST(CuptiInjection, NotTheProfiledProcessDoesNothing) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        g_process_sink = nullptr;
        CHILD_CHECK(InitializeInjection() == 1);
        CHILD_CHECK(cuda_injection_seen());
        std::_Exit(0);
      },
      testing::ExitedWithCode(0), "^$");  // and not a word on stderr
}

TEST(CuptiInjection, NoDriverReportsNoCudaDeviceOnceAndRuns) {
  void* drv = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
  if (!drv) drv = dlopen("libcuda.so.1", RTLD_LAZY);
  if (drv) GTEST_SKIP() << "a CUDA driver is installed: this test is for driverless hosts";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        CaptureSink sink;
        g_process_sink = &sink;
        CHILD_CHECK(InitializeInjection() == 1);  // the application must still run
        CHILD_CHECK(InitializeInjection() == 1);  // once-guard: no second attempt or warning
        CHILD_CHECK(sink.statuses.size() == 1);
        CHILD_CHECK(sink.statuses[0].rfind("no CUDA device (cuptiSubscribe_v2: ", 0) == 0);
        CHILD_CHECK(sink.device_names[0].empty());
        CHILD_CHECK(cuda_injection_seen());
        cupti_flush_all(true);  // nothing registered to flush: a no-op, no crash
        cupti_flush_registered(true);
        CHILD_CHECK(sink.acts.empty() && sink.launches.empty());
        std::fprintf(stderr, "status=[%s]\n", sink.statuses[0].c_str());
        std::_Exit(0);
      },
      testing::ExitedWithCode(0),
      // exactly one warning line, the same text as the status
      "^kernalyse: rank 0: (no CUDA device \\(cuptiSubscribe_v2: [^\n]*; GPU activity not "
      "recorded)\nstatus=\\[no CUDA device");
}

// ---- CUDA presence (cuda_presence.cpp, CUDA-free) ----------------------------------------------

TEST(CudaPresence, AbsentReasonNamesLibcuda) {
  void* drv = dlopen("libcuda.so.1", RTLD_LAZY);
  std::string why = cuda_absent_reason();
  if (drv) {
    EXPECT_EQ(why, "");
  } else {
    EXPECT_EQ(why.rfind("no CUDA device: libcuda.so.1 not found (dlopen: ", 0), 0u) << why;
  }
}

TEST(CudaPresence, MappedLibrariesSeen) {
  // This binary links libcupti only, which does not count (the collector always links it).
  EXPECT_EQ(cuda_libraries_mapped(), "");
  void* rt = dlopen("libcudart.so.13", RTLD_LAZY | RTLD_LOCAL);
  if (!rt) GTEST_SKIP() << "libcudart.so.13 not on the library path";
  EXPECT_NE(cuda_libraries_mapped().find("libcudart.so"), std::string::npos);
}

TEST(CudaPresence, FlushHookRegistry) {
  static int calls = 0;
  static bool last = false;
  cupti_flush_registered(true);  // nothing registered: no-op
  register_cupti_flush([](bool forced) {
    ++calls;
    last = forced;
  });
  cupti_flush_registered(true);
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(last);
  register_cupti_flush(nullptr);
  cupti_flush_registered(false);
  EXPECT_EQ(calls, 1);
}

// The driver calls that keep an API record: launches (Triton's cuLaunchKernel, NCCL's
// cuLaunchKernelEx), graph launches, copies, syncs; not the context and attribute queries that
// CUPTI's own NVTX handling and the runtime make around every call (docs/gpu-validation.md).
TEST(CuptiRecords, DriverRecordsKeptForLaunchesCopiesAndSyncs) {
  // Every name CUPTI knows for the driver: the kept ones are the ones we meant.
  int kept = 0, left = 0;
  bool launch = false, launch_ex = false, graph = false, copy = false, sync = false;
  for (uint32_t id = 1; id < CUPTI_DRIVER_TRACE_CBID_SIZE; ++id) {
    const char* name = nullptr;
    if (cuptiGetCallbackName(CUPTI_CB_DOMAIN_DRIVER_API, id, &name) != CUPTI_SUCCESS || !name)
      continue;
    const std::string n = name;
    const bool k = driver_api_recorded(n);
    (k ? kept : left)++;
    launch = launch || (n == "cuLaunchKernel" && k);
    launch_ex = launch_ex || (n == "cuLaunchKernelEx" && k);
    graph = graph || (n == "cuGraphLaunch" && k);
    copy = copy || (n == "cuMemcpyHtoDAsync_v2" && k);
    sync = sync || (n == "cuStreamSynchronize" && k);
    EXPECT_FALSE(k && (n == "cuCtxGetCurrent" || n == "cuCtxGetDevice" || n == "cuGetProcAddress" ||
                       n == "cuKernelGetAttribute" || n == "cuPointerGetAttribute"))
        << n;
  }
  EXPECT_TRUE(launch && launch_ex && graph && copy && sync);
  EXPECT_GT(kept, 30);
  EXPECT_GT(left, kept);  // most of the driver API is queries and set-up
}
