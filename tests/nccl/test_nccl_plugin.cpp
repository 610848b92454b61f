// The NCCL profiler plugin (collector/src/nccl_plugin.cpp) driven through its exported v5
// function table with the event sequences NCCL 2.28 fires (src/enqueue.cc, src/plugin/profiler.cc),
// the CUPTI driver callback simulated by calling nccl_on_driver_launch on the launching thread.
// This binary supplies process_sink()/now_ns() (collector.cpp does in the real library).
#include <gtest/gtest.h>

#include <cstdarg>
#include <cstdio>
#include <ctime>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "nccl_link.h"
#include "nccl_plugin.h"
#include "nccl_profiler_v5.h"
#include "sink.h"

using namespace kernalyse::ncclabi;
namespace kc = kernalyse::collector;

extern "C" ncclProfiler_v5_t ncclProfiler_v5;

namespace {

struct Rec {
  kernalyse_emu_nccl r;
  std::string collective, dtype, algo, proto;  // copies: the record's pointers are not ours
  bool has_algo, has_proto;
};

class CaptureSink : public kc::Sink {
 public:
  void activity(const kernalyse_emu_activity&, bool) override {}
  void launch(const kernalyse_emu_launch&) override {}
  void nccl(const kernalyse_emu_nccl& n) override {
    std::lock_guard lk(mu);
    recs.push_back({n, n.collective ? n.collective : "", n.dtype ? n.dtype : "",
                    n.algo ? n.algo : "", n.proto ? n.proto : "", n.algo != nullptr,
                    n.proto != nullptr});
  }
  void range(const kernalyse_emu_range&) override {}
  void memory(const kernalyse_emu_memory&) override {}
  void counter(const kernalyse_emu_counter&, bool) override {}
  void losses(const kc::LossCounts&) override {}
  void status(const char*, const char*) override {}
  void coll_mark(const kernalyse_emu_coll_mark& m) override {
    std::lock_guard lk(mu);
    marks.push_back({m.comm_hash, m.seq, m.state, m.collective ? m.collective : "", m.bytes});
  }
  struct Mark {
    uint64_t comm;
    int64_t seq;
    int32_t state;
    std::string op;
    int64_t bytes;
  };
  std::vector<Mark> take_marks() {
    std::lock_guard lk(mu);
    return std::exchange(marks, {});
  }
  std::vector<Mark> marks;

  std::vector<Rec> take() {
    std::lock_guard lk(mu);
    return std::exchange(recs, {});
  }

  std::mutex mu;
  std::vector<Rec> recs;
};

CaptureSink g_sink;
bool g_recording = true;

std::mutex g_log_mu;
std::vector<std::pair<int, std::string>> g_log;

void test_logger(ncclDebugLogLevel level, unsigned long, const char*, int, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  std::lock_guard lk(g_log_mu);
  g_log.emplace_back(level, buf);
}

}  // namespace

namespace kernalyse::collector {
Sink* process_sink() { return g_recording ? &g_sink : nullptr; }
int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}
}  // namespace kernalyse::collector

namespace {

constexpr int kExpectedMask = ncclProfileGroup | ncclProfileColl | ncclProfileP2p |
                              ncclProfileGroupApi | ncclProfileCollApi | ncclProfileP2pApi |
                              ncclProfileKernelLaunch;

ncclProfilerEventDescr_v5_t descr(uint64_t type, void* parent, int rank = 0) {
  ncclProfilerEventDescr_v5_t d{};
  d.type = type;
  d.parentObj = parent;
  d.rank = rank;
  return d;
}

// One communicator as NCCL sees the plugin: init in the constructor, finalize in the destructor.
class Comm {
 public:
  Comm(uint64_t hash, int rank, int nranks, const char* name = "test") : rank_(rank) {
    EXPECT_EQ(ncclProfiler_v5.init(&ctx_, hash, &mask_, name, 1, nranks, rank, test_logger),
              ncclSuccess);
    EXPECT_NE(ctx_, nullptr);
  }
  ~Comm() { finalize(); }
  void finalize() {
    if (ctx_) {
      EXPECT_EQ(ncclProfiler_v5.finalize(ctx_), ncclSuccess);
    }
    ctx_ = nullptr;
  }
  int mask() const { return mask_; }

  void* start(ncclProfilerEventDescr_v5_t d) {
    void* h = reinterpret_cast<void*>(0x1);  // the plugin must overwrite it
    EXPECT_EQ(ncclProfiler_v5.startEvent(ctx_, &h, &d), ncclSuccess);
    return h;
  }
  static void stop(void* h) { EXPECT_EQ(ncclProfiler_v5.stopEvent(h), ncclSuccess); }

  void* group_api() {
    auto d = descr(ncclProfileGroupApi, nullptr, rank_);
    d.groupApi.groupDepth = 1;
    return start(d);
  }
  void* coll_api(void* group, const char* func, size_t count, const char* dtype,
                 bool captured = false) {
    auto d = descr(ncclProfileCollApi, group, rank_);
    d.collApi.func = func;
    d.collApi.count = count;
    d.collApi.datatype = dtype;
    d.collApi.root = 0;
    d.collApi.graphCaptured = captured;
    return start(d);
  }
  void* p2p_api(void* group, const char* func, size_t count, const char* dtype) {
    auto d = descr(ncclProfileP2pApi, group, rank_);
    d.p2pApi.func = func;
    d.p2pApi.count = count;
    d.p2pApi.datatype = dtype;
    return start(d);
  }
  void* kernel_launch(void* group) { return start(descr(ncclProfileKernelLaunch, group, rank_)); }
  void* plan() { return start(descr(ncclProfileGroup, nullptr)); }
  void* coll(void* api, void* plan, uint64_t seq, const char* func, size_t count, const char* dtype,
             const char* algo, const char* proto, uint8_t nch) {
    auto d = descr(ncclProfileColl, api, rank_);
    d.coll.seqNumber = seq;
    d.coll.func = func;
    d.coll.count = count;
    d.coll.datatype = dtype;
    d.coll.nChannels = nch;
    d.coll.nWarps = 16;
    d.coll.algo = algo;
    d.coll.proto = proto;
    d.coll.parentGroup = plan;
    return start(d);
  }
  void* p2p(void* api, void* plan, const char* func, size_t count, const char* dtype, int peer,
            uint8_t nch) {
    auto d = descr(ncclProfileP2p, api, rank_);
    d.p2p.func = func;
    d.p2p.count = count;
    d.p2p.datatype = dtype;
    d.p2p.peer = peer;
    d.p2p.nChannels = nch;
    d.p2p.parentGroup = plan;
    return start(d);
  }

  // KernelLaunch start → cuLaunchKernelEx (CUPTI callback with `corr`, or none if corr < 0) → stop.
  void launch(void* group, int64_t corr) {
    void* kl = kernel_launch(group);
    EXPECT_NE(kl, nullptr);
    if (corr >= 0) {
      EXPECT_TRUE(kc::nccl_on_driver_launch(uint64_t(corr)));
    }
    stop(kl);
  }

 private:
  void* ctx_ = nullptr;
  int mask_ = 0;
  int rank_;
};

class NcclPlugin : public ::testing::Test {
 protected:
  void SetUp() override {
    g_recording = true;
    g_sink.take();
    before_ = kc::nccl_plugin_counts();
  }
  void TearDown() override { kc::nccl_plugin_set_pool_limit(0); }
  kc::NcclPluginCounts delta() const {
    auto c = kc::nccl_plugin_counts();
    return {c.comms - before_.comms,           c.refused - before_.refused,
            c.records - before_.records,       c.unlinked - before_.unlinked,
            c.ignored - before_.ignored,       c.unknown_type - before_.unknown_type,
            c.bad_handle - before_.bad_handle, c.pool_exhausted - before_.pool_exhausted};
  }
  kc::NcclPluginCounts before_;
};

void expect_coll(const Rec& x, int64_t corr, uint64_t hash, const char* func, int64_t seq,
                 int64_t count, const char* dtype, int64_t bytes, const char* algo,
                 const char* proto, int nch, int rank, int nranks) {
  EXPECT_EQ(x.r.correlation, corr);
  EXPECT_EQ(x.r.comm_hash, hash);
  EXPECT_EQ(x.collective, func);
  EXPECT_EQ(x.r.seq, seq);
  EXPECT_EQ(x.r.count, count);
  EXPECT_EQ(x.dtype, dtype);
  EXPECT_EQ(x.r.bytes, bytes);
  EXPECT_EQ(x.r.peer, -1);
  EXPECT_EQ(x.algo, algo);
  EXPECT_EQ(x.proto, proto);
  EXPECT_EQ(x.r.n_channels, nch);
  EXPECT_EQ(x.r.comm_rank, rank);
  EXPECT_EQ(x.r.nranks, nranks);
}

TEST(NcclPluginAbi, ExportsV5TableNamedKernalyse) {
  ASSERT_NE(ncclProfiler_v5.name, nullptr);
  EXPECT_STREQ(ncclProfiler_v5.name, "kernalyse");
  EXPECT_NE(ncclProfiler_v5.init, nullptr);
  EXPECT_NE(ncclProfiler_v5.startEvent, nullptr);
  EXPECT_NE(ncclProfiler_v5.stopEvent, nullptr);
  EXPECT_NE(ncclProfiler_v5.recordEventState, nullptr);
  EXPECT_NE(ncclProfiler_v5.finalize, nullptr);
}

TEST_F(NcclPlugin, InitRequestsApiLaunchAndTaskEvents) {
  Comm c(0xabc, 0, 2);
  EXPECT_EQ(c.mask(), kExpectedMask);
  EXPECT_EQ(delta().comms, 1);
}

// The brief's canonical order: the group ends before the task events (host-callback path).
TEST_F(NcclPlugin, AllReduceLinkedToItsLaunch) {
  {
    Comm c(0x1234567890abcdefULL, 1, 4);
    void* g = c.group_api();
    ASSERT_NE(g, nullptr);
    void* ca = c.coll_api(g, "AllReduce", 1024, "ncclBfloat16");
    ASSERT_NE(ca, nullptr);
    Comm::stop(ca);
    void* kl = c.kernel_launch(g);
    ASSERT_NE(kl, nullptr);
    EXPECT_TRUE(kc::nccl_on_driver_launch(4242));
    Comm::stop(kl);
    EXPECT_FALSE(kc::nccl_on_driver_launch(4243));  // an ordinary launch after the bracket
    Comm::stop(g);
    void* p = c.plan();
    g_sink.take_marks();
    void* coll = c.coll(ca, p, 7, "AllReduce", 1024, "ncclBfloat16", "RING", "LL128", 4);
    ASSERT_NE(coll, nullptr);
    EXPECT_TRUE(g_sink.take().empty());  // emitted at stop
    // Entered at the task's start (the hang report's record), completed at its stop.
    auto entered = g_sink.take_marks();
    ASSERT_EQ(entered.size(), 1u);
    EXPECT_EQ(entered[0].comm, 0x1234567890abcdefULL);
    EXPECT_EQ(entered[0].seq, 7);
    EXPECT_EQ(entered[0].state, 0);
    EXPECT_EQ(entered[0].op, "AllReduce");
    EXPECT_EQ(entered[0].bytes, 2048);
    Comm::stop(coll);
    auto completed = g_sink.take_marks();
    ASSERT_EQ(completed.size(), 1u);
    EXPECT_EQ(completed[0].seq, 7);
    EXPECT_EQ(completed[0].state, 1);
    Comm::stop(p);
  }
  auto recs = g_sink.take();
  ASSERT_EQ(recs.size(), 1u);
  expect_coll(recs[0], 4242, 0x1234567890abcdefULL, "AllReduce", 7, 1024, "BFloat16", 2048, "RING",
              "LL128", 4, 1, 4);
  auto d = delta();
  EXPECT_EQ(d.records, 1);
  EXPECT_EQ(d.unlinked, 0);
  EXPECT_EQ(d.bad_handle, 0);
  EXPECT_EQ(d.pool_exhausted, 0);
}

// NCCL's eager path: tasks start and stop right after the launch, before the group ends.
TEST_F(NcclPlugin, EagerOrderTwoCollectivesInOneGroup) {
  {
    Comm c(77, 0, 8);
    void* g = c.group_api();
    void* a1 = c.coll_api(g, "AllGather", 100, "ncclFloat32");
    Comm::stop(a1);
    void* a2 = c.coll_api(g, "ReduceScatter", 50, "ncclFloat16");
    Comm::stop(a2);
    c.launch(g, 900);
    void* p = c.plan();
    void* t1 = c.coll(a1, p, 3, "AllGather", 100, "ncclFloat32", "RING", "SIMPLE", 2);
    void* t2 = c.coll(a2, p, 5, "ReduceScatter", 50, "ncclFloat16", "PAT", "SIMPLE", 1);
    Comm::stop(t1);
    Comm::stop(t2);
    Comm::stop(p);
    Comm::stop(g);
  }
  auto recs = g_sink.take();
  ASSERT_EQ(recs.size(), 2u);
  expect_coll(recs[0], 900, 77, "AllGather", 3, 100, "Float", 400, "RING", "SIMPLE", 2, 0, 8);
  expect_coll(recs[1], 900, 77, "ReduceScatter", 5, 50, "Half", 100, "PAT", "SIMPLE", 1, 0, 8);
}

TEST_F(NcclPlugin, SendRecvPairShareOneLaunch) {
  {
    Comm c(0x55, 0, 2);
    void* g = c.group_api();
    void* s = c.p2p_api(g, "Send", 256, "ncclInt32");
    Comm::stop(s);
    void* r = c.p2p_api(g, "Recv", 256, "ncclInt32");
    Comm::stop(r);
    c.launch(g, 31);
    void* p = c.plan();
    void* ts = c.p2p(s, p, "Send", 256, "ncclInt32", 1, 2);
    void* tr = c.p2p(r, p, "Recv", 256, "ncclInt32", 1, 2);
    ASSERT_NE(ts, nullptr);
    ASSERT_NE(tr, nullptr);
    Comm::stop(ts);
    Comm::stop(tr);
    Comm::stop(p);
    Comm::stop(g);
  }
  auto recs = g_sink.take();
  ASSERT_EQ(recs.size(), 2u);
  for (const auto& x : recs) {
    EXPECT_EQ(x.r.correlation, 31);
    EXPECT_EQ(x.r.comm_hash, 0x55u);
    EXPECT_EQ(x.r.seq, -1);
    EXPECT_EQ(x.r.count, 256);
    EXPECT_EQ(x.dtype, "Int");
    EXPECT_EQ(x.r.bytes, 1024);
    EXPECT_EQ(x.r.peer, 1);
    EXPECT_FALSE(x.has_algo);
    EXPECT_FALSE(x.has_proto);
    EXPECT_EQ(x.r.n_channels, 2);
    EXPECT_EQ(x.r.comm_rank, 0);
    EXPECT_EQ(x.r.nranks, 2);
  }
  EXPECT_EQ(recs[0].collective, "Send");
  EXPECT_EQ(recs[1].collective, "Recv");
}

// A group over two communicators launches one plan each; a large group may launch two plans on one
// communicator, whose tasks NCCL then reports plan by plan (host-callback path): per-comm FIFO.
TEST_F(NcclPlugin, SeveralPlansInOneGroupBindPerCommFifo) {
  {
    Comm a(0xA, 0, 2, "a");
    Comm b(0xB, 0, 2, "b");
    void* g = a.group_api();  // NCCL starts the GroupApi on the first communicator's context
    void* a1 = a.coll_api(g, "AllReduce", 10, "ncclFloat64");
    void* a2 = a.coll_api(g, "AllReduce", 20, "ncclFloat64");
    void* b1 = b.coll_api(g, "AllReduce", 30, "ncclInt64");
    for (void* h : {a1, a2, b1}) Comm::stop(h);
    a.launch(g, 100);
    a.launch(g, 101);
    b.launch(g, 200);
    Comm::stop(g);
    void* pa1 = a.plan();
    Comm::stop(a.coll(a1, pa1, 0, "AllReduce", 10, "ncclFloat64", "TREE", "LL", 1));
    Comm::stop(pa1);
    void* pa2 = a.plan();
    Comm::stop(a.coll(a2, pa2, 1, "AllReduce", 20, "ncclFloat64", "TREE", "LL", 1));
    Comm::stop(pa2);
    void* pb = b.plan();
    Comm::stop(b.coll(b1, pb, 0, "AllReduce", 30, "ncclInt64", "RING", "LL", 1));
    Comm::stop(pb);
  }
  auto recs = g_sink.take();
  ASSERT_EQ(recs.size(), 3u);
  expect_coll(recs[0], 100, 0xA, "AllReduce", 0, 10, "Double", 80, "TREE", "LL", 1, 0, 2);
  expect_coll(recs[1], 101, 0xA, "AllReduce", 1, 20, "Double", 160, "TREE", "LL", 1, 0, 2);
  expect_coll(recs[2], 200, 0xB, "AllReduce", 0, 30, "Long", 240, "RING", "LL", 1, 0, 2);
  EXPECT_EQ(delta().unlinked, 0);
}

TEST_F(NcclPlugin, LaunchWithoutCuptiCorrelationIsUnlinked) {
  {
    Comm c(9, 0, 2);
    void* g = c.group_api();
    void* a = c.coll_api(g, "Broadcast", 8, "ncclUint8");
    Comm::stop(a);
    c.launch(g, -1);  // CUPTI off or its callback missed: no correlation
    void* p = c.plan();
    Comm::stop(c.coll(a, p, 0, "Broadcast", 8, "ncclUint8", "RING", "SIMPLE", 1));
    Comm::stop(p);
    Comm::stop(g);
  }
  auto recs = g_sink.take();
  ASSERT_EQ(recs.size(), 1u);
  expect_coll(recs[0], -1, 9, "Broadcast", 0, 8, "Byte", 8, "RING", "SIMPLE", 1, 0, 2);
  EXPECT_EQ(delta().unlinked, 1);
}

TEST_F(NcclPlugin, UnknownDatatypePassesThroughWithUnknownBytes) {
  {
    Comm c(10, 0, 2);
    void* g = c.group_api();
    void* a = c.coll_api(g, "AllReduce", 8, "ncclFloat4x");
    Comm::stop(a);
    c.launch(g, 5);
    Comm::stop(c.coll(a, nullptr, 0, "AllReduce", 8, "ncclFloat4x", "RING", "SIMPLE", 1));
    Comm::stop(g);
  }
  auto recs = g_sink.take();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].dtype, "ncclFloat4x");
  EXPECT_EQ(recs[0].r.bytes, -1);
  EXPECT_EQ(recs[0].r.correlation, 5);  // no plan handle: the comm's latest launch in the group
}

TEST_F(NcclPlugin, AlgoAndProtoSpellingsNormalised) {
  {
    Comm c(16, 0, 2);
    void* g = c.group_api();
    void* a1 = c.coll_api(g, "AllReduce", 1, "ncclFloat32");
    void* a2 = c.coll_api(g, "AllReduce", 1, "ncclFloat32");
    Comm::stop(a1);
    Comm::stop(a2);
    c.launch(g, 1);
    void* p = c.plan();
    Comm::stop(c.coll(a1, p, 0, "AllReduce", 1, "ncclFloat32", "Ring", "Simple", 1));
    Comm::stop(c.coll(a2, p, 1, "AllReduce", 1, "ncclFloat32", "", "Unknown", 1));
    Comm::stop(g);
  }
  auto recs = g_sink.take();
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].algo, "RING");
  EXPECT_EQ(recs[0].proto, "SIMPLE");
  EXPECT_FALSE(recs[1].has_algo);
  EXPECT_FALSE(recs[1].has_proto);
}

// Graph capture: the launch seen during capture runs no kernel; replays reuse the CollApi handle.
TEST_F(NcclPlugin, GraphCapturedCollectivesAreUnlinkedAndReplaysAreSafe) {
  {
    Comm c(11, 0, 2);
    void* g = c.group_api();
    void* a = c.coll_api(g, "AllReduce", 4, "ncclFloat32", /*captured=*/true);
    Comm::stop(a);
    c.launch(g, 600);
    Comm::stop(g);
    for (uint64_t replay = 0; replay < 3; ++replay) {
      void* p = c.plan();
      Comm::stop(c.coll(a, p, 0, "AllReduce", 4, "ncclFloat32", "RING", "LL", 1));
      Comm::stop(p);
    }
  }
  auto recs = g_sink.take();
  ASSERT_EQ(recs.size(), 3u);
  for (const auto& x : recs) EXPECT_EQ(x.r.correlation, -1);
  auto d = delta();
  EXPECT_EQ(d.unlinked, 3);
  EXPECT_EQ(d.bad_handle, 0);
}

TEST_F(NcclPlugin, OpenTaskIsFlushedAtFinalize) {
  {
    Comm c(12, 3, 4);
    void* g = c.group_api();
    void* a = c.coll_api(g, "AllReduce", 2, "ncclInt8");
    Comm::stop(a);
    c.launch(g, 70);
    void* p = c.plan();
    EXPECT_NE(c.coll(a, p, 9, "AllReduce", 2, "ncclInt8", "RING", "LL", 1), nullptr);
    EXPECT_TRUE(g_sink.take().empty());
  }  // finalize without stops
  auto recs = g_sink.take();
  ASSERT_EQ(recs.size(), 1u);
  expect_coll(recs[0], 70, 12, "AllReduce", 9, 2, "Char", 2, "RING", "LL", 1, 3, 4);
}

TEST_F(NcclPlugin, DriverLaunchOnAnotherThreadIsNotBound) {
  Comm c(13, 0, 2);
  void* g = c.group_api();
  void* kl = c.kernel_launch(g);
  bool other = true;
  std::thread([&] { other = kc::nccl_on_driver_launch(1); }).join();
  EXPECT_FALSE(other);
  EXPECT_TRUE(kc::nccl_on_driver_launch(2));
  Comm::stop(kl);
  Comm::stop(g);
}

TEST_F(NcclPlugin, GarbageIsCountedNotFatal) {
  Comm c(14, 0, 2);
  int not_ours = 0;
  // Unknown type bits: a future event, several bits at once, none.
  for (uint64_t t : {uint64_t(1) << 12, uint64_t(1) << 40,
                     uint64_t(ncclProfileColl | ncclProfileP2p), uint64_t(0)})
    EXPECT_EQ(c.start(descr(t, nullptr)), nullptr);
  // Known but not requested: a PXN proxy op whose parent lives in another process.
  auto px = descr(ncclProfileProxyOp, &not_ours);
  px.proxyOp.pid = 1;
  EXPECT_EQ(c.start(px), nullptr);
  EXPECT_EQ(c.start(descr(ncclProfileKernelCh, nullptr)), nullptr);
  // A null descriptor, a null handle pointer.
  void* h = &not_ours;
  EXPECT_EQ(ncclProfiler_v5.startEvent(nullptr, &h, nullptr), ncclSuccess);
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(ncclProfiler_v5.startEvent(nullptr, nullptr, nullptr), ncclSuccess);
  // Parents that are not our handles: a task still gets a record (correlation -1).
  void* g = c.group_api();
  void* bad_api = c.coll_api(&not_ours, "AllReduce", 1, "ncclInt8");  // parent not ours
  EXPECT_NE(bad_api, nullptr);
  Comm::stop(bad_api);
  void* t = c.coll(reinterpret_cast<char*>(g) + 1, nullptr, 0, "AllReduce", 1, "ncclInt8", "RING",
                   "LL", 1);
  ASSERT_NE(t, nullptr);
  Comm::stop(t);
  void* t2 =
      c.coll(nullptr, nullptr, 1, "AllReduce", 1, "ncclInt8", "RING", "LL", 1);  // null parentObj
  Comm::stop(t2);
  // Stops on nothing, on garbage, twice; state records on garbage.
  Comm::stop(nullptr);
  Comm::stop(&not_ours);
  Comm::stop(g);
  Comm::stop(g);
  EXPECT_EQ(ncclProfiler_v5.recordEventState(&not_ours, ncclProfilerKernelChStop, nullptr),
            ncclSuccess);
  EXPECT_EQ(ncclProfiler_v5.recordEventState(nullptr, ncclProfilerGroupEndApiStart, nullptr),
            ncclSuccess);
  EXPECT_EQ(ncclProfiler_v5.finalize(nullptr), ncclSuccess);

  auto recs = g_sink.take();
  ASSERT_EQ(recs.size(), 2u);
  EXPECT_EQ(recs[0].r.correlation, -1);
  EXPECT_EQ(recs[1].r.correlation, -1);
  auto d = delta();
  EXPECT_EQ(d.unknown_type, 5);  // four bad types + the null descriptor
  EXPECT_EQ(d.ignored, 2);       // ProxyOp, KernelCh
  EXPECT_EQ(d.bad_handle, 4);    // api parent, task parent (g+1), garbage stop, double stop
  EXPECT_EQ(d.unlinked, 2);
}

TEST_F(NcclPlugin, PoolExhaustionReturnsNullHandles) {
  {
    Comm c(15, 0, 2);
    kc::nccl_plugin_set_pool_limit(2);
    void* g = c.group_api();
    void* a = c.coll_api(g, "AllReduce", 1, "ncclInt8");
    ASSERT_NE(g, nullptr);
    ASSERT_NE(a, nullptr);
    Comm::stop(a);
    void* kl = c.kernel_launch(g);
    EXPECT_EQ(kl, nullptr);
    EXPECT_FALSE(kc::nccl_on_driver_launch(8));  // no launch tracked
    Comm::stop(kl);
    EXPECT_EQ(c.coll(a, nullptr, 0, "AllReduce", 1, "ncclInt8", "RING", "LL", 1), nullptr);
    Comm::stop(g);
    EXPECT_EQ(delta().pool_exhausted, 2);
    kc::nccl_plugin_set_pool_limit(0);
    // Room again: a full sequence works.
    void* g2 = c.group_api();
    void* a2 = c.coll_api(g2, "AllReduce", 1, "ncclInt8");
    Comm::stop(a2);
    c.launch(g2, 44);
    Comm::stop(c.coll(a2, c.plan(), 1, "AllReduce", 1, "ncclInt8", "RING", "LL", 1));
    Comm::stop(g2);
  }
  auto recs = g_sink.take();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].r.correlation, 44);
}

// NCCL completes some calls without a task (a one-rank communicator's all-reduce is a plain copy;
// a zero count does nothing): their API events must not pile up until the pool is full and NCCL
// recording stops for everyone else.
TEST_F(NcclPlugin, CallsWithoutTasksDoNotLeakThePool) {
  {
    Comm solo(16, 0, 1, "dp-of-one");
    Comm tp(17, 0, 2, "tp");
    kc::nccl_plugin_set_pool_limit(64);
    for (int i = 0; i < 1000; ++i) {
      void* g = solo.group_api();
      Comm::stop(solo.coll_api(g, "AllReduce", 1024, "ncclFloat32"));
      Comm::stop(g);
      void* g0 = tp.group_api();  // a zero-count call on a real communicator
      Comm::stop(tp.coll_api(g0, "AllReduce", 0, "ncclFloat32"));
      Comm::stop(g0);
    }
    EXPECT_EQ(delta().pool_exhausted, 0);
    void* g = tp.group_api();
    void* a = tp.coll_api(g, "AllReduce", 8, "ncclFloat32");
    Comm::stop(a);
    tp.launch(g, 77);
    Comm::stop(tp.coll(a, tp.plan(), 3, "AllReduce", 8, "ncclFloat32", "RING", "LL", 2));
    Comm::stop(g);
    kc::nccl_plugin_set_pool_limit(0);
  }
  auto recs = g_sink.take();
  ASSERT_EQ(recs.size(), 1u);
  EXPECT_EQ(recs[0].r.correlation, 77);
}

// A KernelLaunch whose stop never came (an NCCL error path) does not capture the thread's next
// group's launches: a new GroupApi clears it.
TEST_F(NcclPlugin, StaleLaunchIsClearedByTheNextGroup) {
  {
    Comm c(18, 0, 2);
    void* g = c.group_api();
    void* kl = c.kernel_launch(g);  // never stopped
    ASSERT_NE(kl, nullptr);
    Comm::stop(g);
    void* g2 = c.group_api();
    EXPECT_FALSE(kc::nccl_on_driver_launch(5));  // an ordinary kernel launch after it
    Comm::stop(g2);
  }
  g_sink.take();
}

TEST_F(NcclPlugin, InitRefusedWhenCollectorNotRecording) {
  g_recording = false;
  {
    std::lock_guard lk(g_log_mu);
    g_log.clear();
  }
  void* ctx = reinterpret_cast<void*>(0x1);
  int mask = 12345;
  testing::internal::CaptureStderr();
  ncclResult_t rc = ncclProfiler_v5.init(&ctx, 1, &mask, "refused", 1, 2, 0, test_logger);
  std::string err = testing::internal::GetCapturedStderr();
  g_recording = true;
  EXPECT_NE(rc, ncclSuccess);
  EXPECT_EQ(ctx, nullptr);
  EXPECT_EQ(mask, 12345);  // NCCL's mask is process-wide: left alone
  EXPECT_EQ(delta().refused, 1);
  {
    std::lock_guard lk(g_log_mu);
    ASSERT_EQ(g_log.size(), 1u);
    EXPECT_EQ(g_log[0].first, NCCL_LOG_WARN);
    EXPECT_NE(g_log[0].second.find("not recording"), std::string::npos);
  }
  // Events NCCL still sends for that communicator (context NULL) are ignored.
  auto d = descr(ncclProfileGroupApi, nullptr);
  void* h = &mask;
  EXPECT_EQ(ncclProfiler_v5.startEvent(nullptr, &h, &d), ncclSuccess);
  EXPECT_EQ(h, nullptr);
  EXPECT_EQ(delta().ignored, 1);
  EXPECT_EQ(ncclProfiler_v5.finalize(nullptr), ncclSuccess);
  (void)err;  // one line the first time in the process (this may not be the first refusal)
}

TEST_F(NcclPlugin, ConcurrentCommunicatorsOnSeveralThreads) {
  constexpr int kThreads = 4, kIters = 200;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t)
    ts.emplace_back([t] {
      Comm c(1000 + uint64_t(t), t, kThreads);
      for (int i = 0; i < kIters; ++i) {
        void* g = c.group_api();
        void* a = c.coll_api(g, "AllReduce", 16, "ncclFloat32");
        Comm::stop(a);
        c.launch(g, int64_t(t) * 100000 + i);
        void* p = c.plan();
        Comm::stop(c.coll(a, p, uint64_t(i), "AllReduce", 16, "ncclFloat32", "RING", "LL", 2));
        Comm::stop(p);
        Comm::stop(g);
      }
    });
  for (auto& th : ts) th.join();
  auto recs = g_sink.take();
  ASSERT_EQ(recs.size(), size_t(kThreads * kIters));
  for (const auto& x : recs) {
    int t = int(x.r.comm_hash - 1000);
    EXPECT_EQ(x.r.correlation, int64_t(t) * 100000 + x.r.seq);
    EXPECT_EQ(x.r.comm_rank, t);
  }
  auto d = delta();
  EXPECT_EQ(d.unlinked, 0);
  EXPECT_EQ(d.pool_exhausted, 0);
  EXPECT_EQ(d.bad_handle, 0);
}

}  // namespace
