// Importer tests on string literals: parsing, exact µs → ns, rank discovery, classification of
// event categories, malformed events vs malformed files.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "kernalyse/kineto.h"
#include "kernalyse/store_io.h"

using namespace kernalyse;

namespace {

Store import(const std::string& json, ImportStats* st = nullptr, std::optional<int32_t> rank = {},
             const std::string& name = "t.json") {
  ImportOptions o;
  o.rank = rank;
  return import_kineto_string(json, name, o, st);
}

std::string wrap(const std::string& events, const std::string& extra = "") {
  return R"J({"schemaVersion": 1, "distributedInfo": {"backend": "nccl", "rank": 3, "world_size": 4},)J" +
         extra + R"J( "traceEvents": [)J" + events + "]}";
}

const char* kKernel =
    R"J({"ph": "X", "cat": "kernel", "name": "void foo<int>(int)", "pid": 0, "tid": 7,
        "ts": 5.1, "dur": 2.25, "args": {"device": 0, "stream": 7, "correlation": 42,
        "grid": [1, 1, 1]}})J";
const char* kLaunch =
    R"J({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 100, "tid": 101,
        "ts": 4.0, "dur": 1.0, "args": {"cbid": 211, "correlation": 42}})J";
const char* kStep =
    R"J({"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#12", "pid": 100, "tid": 101,
        "ts": 3.0, "dur": 100.0, "args": {}})J";

}  // namespace

TEST(UsToNs, ExactDecimalConversion) {
  int64_t ns = 0;
  ASSERT_TRUE(parse_us_to_ns("5.1", &ns));
  EXPECT_EQ(ns, 5100);
  ASSERT_TRUE(parse_us_to_ns("1712195495519689.047", &ns));
  EXPECT_EQ(ns, 1712195495519689047LL);  // a double would give ...688960
  ASSERT_TRUE(parse_us_to_ns("4458676983543.183", &ns));
  EXPECT_EQ(ns, 4458676983543183LL);
  ASSERT_TRUE(parse_us_to_ns("1682725898082228", &ns));
  EXPECT_EQ(ns, 1682725898082228000LL);
  ASSERT_TRUE(parse_us_to_ns("0.001", &ns));
  EXPECT_EQ(ns, 1);
  ASSERT_TRUE(parse_us_to_ns("-2.5", &ns));
  EXPECT_EQ(ns, -2500);
  ASSERT_TRUE(parse_us_to_ns("7", &ns));
  EXPECT_EQ(ns, 7000);
  ASSERT_TRUE(parse_us_to_ns("1.0005", &ns));  // sub-ns digit rounds half away from zero
  EXPECT_EQ(ns, 1001);
  ASSERT_TRUE(parse_us_to_ns("1.0004", &ns));
  EXPECT_EQ(ns, 1000);
  ASSERT_TRUE(parse_us_to_ns("1.5e3", &ns));
  EXPECT_EQ(ns, 1500000);
  EXPECT_FALSE(parse_us_to_ns("", &ns));
  EXPECT_FALSE(parse_us_to_ns("abc", &ns));
  EXPECT_FALSE(parse_us_to_ns("1.2.3", &ns));
  EXPECT_FALSE(parse_us_to_ns("99999999999999999999", &ns));  // would overflow int64 ns
}

TEST(Kineto, KernelLaunchAndStep) {
  ImportStats st;
  Store s = import(wrap(std::string(kStep) + "," + kLaunch + "," + kKernel), &st);
  ASSERT_EQ(s.activities.size(), 1u);
  EXPECT_EQ(s.activities.rank[0], 3);
  EXPECT_EQ(s.activities.device[0], 0);
  EXPECT_EQ(s.activities.stream[0], 7);
  EXPECT_EQ(s.activities.kind[0], static_cast<uint8_t>(Kind::Kernel));
  EXPECT_EQ(s.activities.category[0], static_cast<uint8_t>(Category::Computation));
  EXPECT_EQ(s.activities.start_ns[0], 5100);
  EXPECT_EQ(s.activities.end_ns[0], 7350);
  EXPECT_EQ(s.strings.at(s.activities.name_id[0]), "void foo<int>(int)");
  EXPECT_EQ(s.activities.correlation[0], 42);
  EXPECT_EQ(s.activities.step[0], 12);
  ASSERT_EQ(s.launches.size(), 1u);
  EXPECT_EQ(s.launches.correlation[0], 42);
  EXPECT_EQ(s.launches.tid[0], 101);
  EXPECT_EQ(s.launches.step[0], 12);
  ASSERT_EQ(s.annotations.size(), 1u);
  EXPECT_EQ(s.annotations.kind[0], static_cast<uint8_t>(AnnotationKind::Step));
  EXPECT_EQ(s.annotations.step[0], 12);
  ASSERT_EQ(s.ranks.size(), 1u);
  EXPECT_EQ(s.ranks[0].rank, 3);
  EXPECT_EQ(s.ranks[0].world_size, 4);
  EXPECT_EQ(s.ranks[0].devices, "0");
  EXPECT_EQ(st.events, 3);
  EXPECT_EQ(st.malformed, 0);
}

TEST(Kineto, RuntimeCallsAreNeverKernels) {
  // A launch named like a kernel and a cuda_runtime event with a stream arg stay launches.
  std::string ev =
      R"J({"ph": "X", "cat": "cuda_runtime", "name": "ncclKernel_AllReduce", "pid": 1, "tid": 1,
          "ts": 1, "dur": 1, "args": {"stream": 7, "device": 0, "correlation": 5}})J";
  Store s = import(wrap(ev));
  EXPECT_EQ(s.activities.size(), 0u);
  EXPECT_EQ(s.launches.size(), 1u);
}

TEST(Kineto, MemcpyMemsetSyncAndNccl) {
  std::string ev = R"J(
    {"ph": "X", "cat": "gpu_memcpy", "name": "Memcpy HtoD (Pinned -> Device)", "pid": 1, "tid": 9,
     "ts": 10, "dur": 1, "args": {"device": 1, "stream": 9, "correlation": 1, "bytes": 64}},
    {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 1, "tid": 9,
     "ts": 12, "dur": 1, "args": {"device": 1, "stream": 9, "correlation": 2}},
    {"ph": "X", "cat": "cuda_sync", "name": "Stream Sync", "pid": 1, "tid": 9,
     "ts": 14, "dur": 1, "args": {"device": 1, "stream": 9}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
     "pid": 1, "tid": 20, "ts": 16, "dur": 5, "args": {"device": 1, "stream": 20, "correlation": 3,
     "Collective name": "_allgather_base", "In msg nelems": 1024, "Out msg nelems": 4096,
     "Group size": 4, "dtype": "BFloat16", "Process Group Name": "0",
     "Process Group Description": "default_pg", "Process Group Ranks": "[0, 1, 2, 3]", "Seq": 17}})J";
  Store s = import(wrap(ev));
  ASSERT_EQ(s.activities.size(), 4u);
  // Sorted by (device, stream, start): the three stream-9 rows, then stream 20.
  EXPECT_EQ(s.activities.kind[0], static_cast<uint8_t>(Kind::Memcpy));
  EXPECT_EQ(s.activities.category[0], static_cast<uint8_t>(Category::Memory));
  EXPECT_EQ(s.activities.kind[1], static_cast<uint8_t>(Kind::Memset));
  EXPECT_EQ(s.activities.kind[2], static_cast<uint8_t>(Kind::Sync));
  EXPECT_EQ(s.activities.category[2], static_cast<uint8_t>(Category::Other));
  EXPECT_EQ(s.activities.kind[3], static_cast<uint8_t>(Kind::Kernel));
  EXPECT_EQ(s.activities.category[3], static_cast<uint8_t>(Category::Communication));
  ASSERT_EQ(s.nccl.size(), 1u);
  EXPECT_EQ(s.nccl.activity[0], 3u);
  EXPECT_EQ(s.strings.at(s.nccl.collective_id[0]), "_allgather_base");
  EXPECT_EQ(s.nccl.seq[0], 17);
  EXPECT_EQ(s.nccl.group_size[0], 4);
  EXPECT_EQ(s.nccl.in_nelems[0], 1024);
  EXPECT_EQ(s.nccl.out_nelems[0], 4096);
  EXPECT_EQ(s.nccl.msg_bytes[0], 4096 * 2);
  EXPECT_EQ(s.strings.at(s.nccl.pg_ranks_id[0]), "[0, 1, 2, 3]");
  EXPECT_EQ(s.strings.at(s.nccl.dtype_id[0]), "BFloat16");
}

TEST(Kineto, BaseTimeNanosecondsAnywhereInTheFile) {
  // Kineto writes baseTimeNanoseconds after traceEvents: ts is relative to it.
  std::string j = R"J({"distributedInfo": {"rank": 0}, "traceEvents": [)J" + std::string(kKernel) +
                  R"J(], "baseTimeNanoseconds": 1700000000000000000})J";
  Store s = import(j);
  ASSERT_EQ(s.activities.size(), 1u);
  EXPECT_EQ(s.activities.start_ns[0], 1700000000000005100LL);
  EXPECT_EQ(s.ranks[0].base_time_ns, 1700000000000000000LL);
}

TEST(Kineto, MinifiedAndEscapedAndBareArray) {
  std::string j =
      R"J({"distributedInfo":{"rank":5},"traceEvents":[{"ph":"X","cat":"kernel","name":"k\"q\u00e9\\","pid":0,"tid":3,"ts":1,"dur":2,"args":{"device":0,"stream":3}}]})J";
  Store s = import(j);
  ASSERT_EQ(s.activities.size(), 1u);
  EXPECT_EQ(s.ranks[0].rank, 5);
  EXPECT_EQ(s.strings.at(s.activities.name_id[0]), "k\"q\xC3\xA9\\");
  // The JSON-array form of the trace-event format has no distributedInfo: rank from --rank.
  Store a = import(std::string("[") + kKernel + "]", nullptr, 2);
  EXPECT_EQ(a.ranks[0].rank, 2);
  EXPECT_EQ(a.activities.size(), 1u);
}

TEST(Kineto, MalformedEventsAreCountedNotFatal) {
  std::string ev = std::string(kKernel) + R"J(,
    42,
    {"ph": "X", "cat": "kernel", "name": "no_stream", "pid": "x", "tid": 7, "ts": 1, "dur": 1},
    {"ph": "X", "cat": "kernel", "name": "bad_ts", "ts": "soon", "dur": 1, "args": {"stream": 1, "device": 0}},
    {"ph": "X", "cat": "kernel", "name": "neg", "ts": 5, "dur": -3, "args": {"stream": 1, "device": 0}},
    {"ph": "M", "name": "process_name", "pid": 0, "args": {"name": "GPU 0"}},
    {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": 1, "dur": 1})J";
  ImportStats st;
  Store s = import(wrap(ev), &st);
  EXPECT_EQ(s.activities.size(), 1u);
  EXPECT_EQ(st.events, 7);
  EXPECT_EQ(st.malformed, 4);
  EXPECT_EQ(s.ranks[0].events_malformed, 4);
  EXPECT_EQ(s.ranks[0].events_ignored, 2);
  ASSERT_FALSE(st.warnings.empty());
}

TEST(Kineto, MalformedFilesAreFatalWithOffset) {
  auto err = [](const std::string& json) {
    try {
      import(json, nullptr, {}, "bad.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(err("").find("bad.json: empty file"), std::string::npos);
  EXPECT_NE(err(wrap(kKernel).substr(0, 120)).find("truncated JSON"), std::string::npos);
  EXPECT_NE(err(R"J({"traceEvents": [ {"ph": "X"} xx ]})J").find("invalid JSON at byte 30"),
            std::string::npos);
  EXPECT_NE(err(R"J({"foo": 1})J").find("not a Chrome/Kineto trace"), std::string::npos);
  EXPECT_NE(err("42").find("not a JSON object or array"), std::string::npos);
  EXPECT_NE(err(wrap("") + " trailing").find("unexpected data after"), std::string::npos);
  EXPECT_NE(err(R"J({"traceEvents": [)J" + std::string(kKernel) + "]}").find("pass --rank"),
            std::string::npos);
}

TEST(Kineto, RankFromFileName) {
  EXPECT_EQ(rank_from_filename("/x/sampled_rank-1.json.gz"), 1);
  EXPECT_EQ(rank_from_filename("rank3.json"), 3);
  EXPECT_EQ(rank_from_filename("trace_rank_12.json"), 12);
  EXPECT_EQ(rank_from_filename("dir_rank9/worker7.pt.trace.json"), 7);
  EXPECT_EQ(rank_from_filename("RANK-4.json"), 4);
  EXPECT_FALSE(rank_from_filename("mi250_minitoy.json.gz").has_value());
  ImportStats st;
  Store s =
      import(R"J({"traceEvents": [)J" + std::string(kKernel) + "]}", &st, {}, "w/worker6.json");
  EXPECT_EQ(s.ranks[0].rank, 6);
  ASSERT_EQ(st.warnings.size(), 1u);
  EXPECT_NE(st.warnings[0].find("taken from the file name"), std::string::npos);
}

TEST(Kineto, OnlyInputWithoutRankIsRankZeroWithANote) {
  const std::string json = R"J({"traceEvents": [)J" + std::string(kKernel) + "]}";
  ImportOptions o;
  EXPECT_THROW(import_kineto_string(json, "one.json", o, nullptr), NoRankError);
  o.only_input = true;
  ImportStats st;
  Store s = import_kineto_string(json, "one.json", o, &st);
  EXPECT_EQ(s.ranks[0].rank, 0);
  ASSERT_EQ(st.notes.size(), 1u);
  EXPECT_NE(st.notes[0].find("taken as rank 0"), std::string::npos);
  EXPECT_TRUE(st.warnings.empty());
  // A rank in the data still wins over the default.
  Store r = import_kineto_string(wrap(kKernel), "one.json", o, &st);
  EXPECT_EQ(r.ranks[0].rank, 3);
}

TEST(Kineto, HostFromTensorboardTraceHandlerName) {
  EXPECT_EQ(host_from_filename("/d/node-a17.cluster_4242.1712195495519689047.pt.trace.json"),
            "node-a17.cluster");
  EXPECT_EQ(host_from_filename("gpu_host_7_99.1700000000.pt.trace.json.gz"), "gpu_host_7");
  EXPECT_EQ(host_from_filename("graph_capture_rank_0.1773709742341309550.pt.trace.json.gz"), "");
  EXPECT_EQ(host_from_filename("trace.json"), "");
  EXPECT_EQ(host_from_filename("host_12.json"), "");
  ImportStats st;
  Store s = import(wrap(kKernel), &st, {}, "/tmp/ault43_483927.1700000000000.pt.trace.json");
  EXPECT_EQ(s.ranks[0].host, "ault43");
}

// TraceLens "fusion" files: one JSON, each rank under its own pids, process_name "RANK n - GPU".
TEST(Kineto, MergedMultiRankFileSplitsByProcessName) {
  const std::string json = R"J({"traceEvents": [
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_Generic", "pid": 2, "tid": 4, "ts": 10.0,
     "dur": 5.0, "args": {"device": 2, "stream": 4, "correlation": 7}},
    {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_Generic", "pid": 100000003, "tid": 4,
     "ts": 11.0, "dur": 4.0, "args": {"device": 3, "stream": 4, "correlation": 7}},
    {"ph": "X", "cat": "cuda_runtime", "name": "hipLaunchKernel", "pid": 100000001, "tid": 9,
     "ts": 9.0, "dur": 1.0, "args": {"correlation": 7}},
    {"name": "process_name", "ph": "M", "pid": 2, "tid": 0, "args": {"name": "RANK 0 - GPU"}},
    {"name": "process_name", "ph": "M", "pid": 100000003, "tid": 0, "args": {"name": "RANK 1 - GPU"}},
    {"name": "process_name", "ph": "M", "pid": 100000001, "tid": 0, "args": {"name": "RANK 1 - CPU"}},
    {"name": "process_name", "ph": "M", "pid": 5, "tid": 0, "args": {"name": "rank 7 · host"}}]})J";
  ImportOptions o;
  ImportStats st;
  Store s = import_kineto_string(json, "fused.json", o, &st);
  ASSERT_EQ(s.ranks.size(), 2u);
  EXPECT_EQ(s.ranks[0].rank, 0);
  EXPECT_EQ(s.ranks[1].rank, 1);
  EXPECT_EQ(s.ranks[0].devices, "2");
  EXPECT_EQ(s.ranks[1].devices, "3");
  ASSERT_EQ(s.activities.size(), 2u);
  EXPECT_EQ(s.activities.rank[0], 0);
  EXPECT_EQ(s.activities.rank[1], 1);
  EXPECT_EQ(s.activities.device[1], 3);
  ASSERT_EQ(s.launches.size(), 1u);
  EXPECT_EQ(s.launches.rank[0], 1);
  ASSERT_EQ(st.notes.size(), 1u);
  EXPECT_NE(st.notes[0].find("imported as separate ranks"), std::string::npos);
  // Events of a pid under no "RANK n" process, and no file-level rank: an error naming the pid.
  const std::string stray = json.substr(0, json.size() - 2) +
                            R"J(, {"ph": "X", "cat": "kernel", "name": "k", "pid": 42, "tid": 1,
                            "ts": 1.0, "dur": 1.0, "args": {"device": 0, "stream": 1}}]})J";
  try {
    import_kineto_string(stray, "fused.json", o, nullptr);
    FAIL() << "no error";
  } catch (const NoRankError& e) {
    EXPECT_NE(std::string(e.what()).find("pid 42"), std::string::npos);
  }
}

TEST(Kineto, StreamingAcrossBufferRefillsMatchesInMemory) {
  // A file much larger than the 4 MiB read buffer, written to disk and gzipped-or-not, imports
  // identically to the in-memory parse (events straddle refill boundaries).
  std::string events;
  for (int i = 0; i < 40000; ++i) {
    if (i) events += ",";
    events += R"J({"ph": "X", "cat": "kernel", "name": "k)J" + std::to_string(i % 13) +
              R"J(", "pid": 0, "tid": 7, "ts": )J" + std::to_string(i * 10) + "." +
              std::to_string(i % 1000) +
              R"J(, "dur": 3.5, "args": {"device": 0, "stream": 7, "pad": ")J" +
              std::string(static_cast<size_t>(60 + i % 97), 'x') + R"J("}})J";
  }
  std::string json = wrap(events);
  auto path = std::filesystem::temp_directory_path() / "kernalyse_stream_test.json";
  {
    std::ofstream f(path, std::ios::binary);
    f << json;
  }
  ASSERT_GT(json.size(), 6u << 20);
  ImportStats st;
  Store a = import_kineto_file(path.string(), {}, &st);
  Store b = import(json);
  std::filesystem::remove(path);
  EXPECT_EQ(st.bytes, static_cast<int64_t>(json.size()));
  ASSERT_EQ(a.activities.size(), 40000u);
  EXPECT_EQ(a.activities.start_ns, b.activities.start_ns);
  EXPECT_EQ(a.activities.end_ns, b.activities.end_ns);
  EXPECT_EQ(a.strings.size(), b.strings.size());
}

TEST(Kineto, MemoryEventsBecomeGpuMemoryCounters) {
  // profile_memory=True instants, as PyTorch writes them: CUDA ones (Device Type 1) carry the
  // new "Total Allocated"; CPU ones (Device Type 0, Device Id -1) and pre-1.10 events without a
  // total are skipped. Out of order on purpose: counters come out sorted by (device, ts).
  const char* mem = R"J(
    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 100, "tid": 101,
     "ts": 20.5, "args": {"Device Type": 1, "Device Id": 1, "Addr": 139926520725504,
     "Bytes": 4096, "Total Allocated": 8192, "Total Reserved": 2097152}},
    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 100, "tid": 101,
     "ts": 10.001, "args": {"Device Type": 1, "Device Id": 1, "Addr": 139926520725504,
     "Bytes": 4096, "Total Allocated": 4096, "Total Reserved": 2097152}},
    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 100, "tid": 101,
     "ts": 15, "args": {"Device Type": 1, "Device Id": 0, "Addr": 1, "Bytes": -512,
     "Total Allocated": 1000000000000, "Total Reserved": 2000000000000}},
    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 100, "tid": 101,
     "ts": 11, "args": {"Device Type": 0, "Device Id": -1, "Addr": 2, "Bytes": 64,
     "Total Allocated": 64, "Total Reserved": 0}},
    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 100, "tid": 101,
     "ts": 12, "args": {"Device Type": 1, "Device Id": 0, "Bytes": 64}},
    {"ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]", "pid": 100, "tid": 101,
     "args": {"Device Type": 1, "Device Id": 0, "Bytes": 64, "Total Allocated": 64}})J";
  ImportStats st;
  Store s = import(
      wrap(std::string(kKernel) + "," + mem, R"J( "baseTimeNanoseconds": 1000000000,)J"), &st);
  const Counters& c = s.counters;
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c.rank, (std::vector<int32_t>{3, 3, 3}));
  EXPECT_EQ(c.device, (std::vector<int32_t>{0, 1, 1}));
  // Exact decimal µs → ns, relative to baseTimeNanoseconds like every other time.
  EXPECT_EQ(c.ts_ns, (std::vector<int64_t>{1'000'015'000, 1'000'010'001, 1'000'020'500}));
  EXPECT_EQ(c.value, (std::vector<int64_t>{1'000'000'000'000, 4096, 8192}));
  for (uint32_t id : c.name_id) EXPECT_EQ(s.strings.at(id), kCounterGpuMemory);
  EXPECT_EQ(s.activities.size(), 1u);
  EXPECT_EQ(s.ranks[0].events_malformed, 1);  // the one without ts
  EXPECT_EQ(s.ranks[0].events_ignored, 2);    // CPU memory, no total
}

TEST(Kineto, NoMemoryEventsNoCountersNoString) {
  Store s = import(wrap(kKernel));
  EXPECT_EQ(s.counters.size(), 0u);
  for (const auto& str : s.strings.all()) EXPECT_NE(str, kCounterGpuMemory);
}

TEST(Kineto, ImportProgressCountsFileBytes) {
  // Plain and gzip: the shared Progress ends at the files' on-disk sizes (what its total is).
  std::string json = wrap(kKernel);
  auto dir = std::filesystem::temp_directory_path();
  auto plain = dir / "kernalyse_progress_rank-0.json",
       gz = dir / "kernalyse_progress_rank-1.json.gz";
  {
    std::ofstream f(plain, std::ios::binary);
    f << json;
  }
  ASSERT_EQ(std::system(("gzip -c " + plain.string() + " > " + gz.string()).c_str()), 0);
  int64_t total = input_bytes(plain.string()) + input_bytes(gz.string());
  std::ostringstream out;
  Progress p("importing 2 files", total, "bytes", ProgressMode::Lines, &out);
  ImportOptions o;
  o.progress = &p;
  import_kineto_file(plain.string(), o, nullptr);
  import_kineto_file(gz.string(), o, nullptr);
  std::filesystem::remove(plain);
  std::filesystem::remove(gz);
  EXPECT_EQ(p.done(), total);
  p.finish();
  EXPECT_NE(out.str().find("importing 2 files: "), std::string::npos);
}

TEST(Kineto, SmallGzipParsedInPlaceMatchesPlain) {
  // A gzip file small enough to be inflated at once is parsed where it lies (trace_input.h's
  // take_whole, no copy into the 4 MiB buffer): the same store, byte count and truncation message
  // as the plain file read through the buffer. The cpu_ops' shapes (with and without spaces) go
  // through the pending ops' own string table and are joined into /ops.
  std::string events;
  for (int i = 0; i < 3000; ++i) {
    const std::string ext = std::to_string(100 + i), corr = std::to_string(i + 1);
    if (i) events += ",";
    events += R"J({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 2, "ts": )J" +
              std::to_string(i * 10) + R"J(, "dur": 5, "args": {"External id": )J" + ext +
              R"J(, "Input Dims": )J" + (i % 2 ? "[[" : "[[ ") + std::to_string(i % 7) +
              R"J(, 3], [3]], "Input type": ["float", "float"]}},)J";
    events +=
        R"J({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 2, "ts": )J" +
        std::to_string(i * 10 + 1) + R"J(, "dur": 2, "args": {"correlation": )J" + corr +
        R"J(, "External id": )J" + ext + "}},";
    events += R"J({"ph": "X", "cat": "kernel", "name": "k)J" + std::to_string(i % 5) +
              R"J(", "pid": 0, "tid": 7, "ts": )J" + std::to_string(i * 10 + 3) +
              R"J(, "dur": 4, "args": {"device": 0, "stream": 7, "correlation": )J" + corr + "}}";
  }
  const std::string json = wrap(events);
  const auto dir = std::filesystem::temp_directory_path();
  auto write = [&](const std::string& text, const std::string& name) {
    const auto plain = dir / (name + ".json");
    std::ofstream(plain, std::ios::binary) << text;
    EXPECT_EQ(std::system(("gzip -kf " + plain.string()).c_str()), 0);
    return plain.string();
  };
  const std::string plain = write(json, "kernalyse_inplace_rank-3");
  ImportStats sp, sg;
  Store a = import_kineto_file(plain, {}, &sp);
  Store b = import_kineto_file(plain + ".gz", {}, &sg);
  EXPECT_EQ(sp.bytes, static_cast<int64_t>(json.size()));
  EXPECT_EQ(sg.bytes, sp.bytes);
  ASSERT_EQ(a.activities.size(), 3000u);
  EXPECT_EQ(b.activities.start_ns, a.activities.start_ns);
  EXPECT_EQ(b.activities.name_id, a.activities.name_id);
  EXPECT_EQ(b.launches.correlation, a.launches.correlation);
  ASSERT_EQ(a.ops.size(), 3000u);
  EXPECT_EQ(b.ops.dims_id, a.ops.dims_id);
  EXPECT_EQ(b.ops.types_id, a.ops.types_id);
  EXPECT_EQ(b.strings.all(), a.strings.all());
  EXPECT_EQ(a.strings.at(a.ops.dims_id[0]), "[[0,3],[3]]");  // compacted, spaces or not
  EXPECT_EQ(a.strings.at(a.ops.dims_id[1]), "[[1,3],[3]]");
  EXPECT_EQ(a.strings.at(a.ops.types_id[0]), R"(["float","float"])");

  const std::string cut = write(json.substr(0, json.size() / 2), "kernalyse_inplace_cut_rank-3");
  auto message = [](const std::string& path) {
    try {
      import_kineto_file(path, {}, nullptr);
    } catch (const Error& e) {
      std::string m = e.what();
      return m.substr(m.find(": ") + 2);  // the problem, without the file name
    }
    return std::string("no error");
  };
  const std::string m = message(cut);
  EXPECT_NE(m.find("truncated JSON: input ends at byte " + std::to_string(json.size() / 2)),
            std::string::npos)
      << m;
  EXPECT_EQ(message(cut + ".gz"), m);
  for (const auto& p : {plain, plain + ".gz", cut, cut + ".gz"}) std::filesystem::remove(p);
}
