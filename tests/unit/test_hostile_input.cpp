// Hostile input (issue 19): each test rebuilds one fuzzing reproducer (F1..F20) in miniature and
// checks that kernalyse refuses it with a message naming the problem, or imports it correctly,
// but never crashes, wraps a number or leaves a temporary file behind. docs/limits.md.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>

#include "kernalyse/atomic_file.h"
#include "kernalyse/checked.h"
#include "kernalyse/classify.h"
#include "kernalyse/kineto.h"
#include "kernalyse/spool.h"
#include "kernalyse/spool_store.h"
#include "kernalyse/store_io.h"

using namespace kernalyse;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path dir;
  TempDir() {
    char tmpl[] = "/tmp/kernalyse-hostile.XXXXXX";
    dir = ::mkdtemp(tmpl);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(dir, ec);
  }
  std::string operator/(const std::string& f) const { return (dir / f).string(); }
};

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

Store import(const std::string& json, ImportStats* st = nullptr) {
  ImportStats local;
  return import_kineto_string(json, "t.json", {}, st ? st : &local);
}

const std::string kKernel =
    R"({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,"args":{"device":0,"stream":7}})";

}  // namespace

TEST(Checked, ArithmeticAndRange) {
  int64_t r = 7;
  EXPECT_FALSE(checked_add(INT64_MAX, 1, &r));
  EXPECT_EQ(r, 7);
  EXPECT_TRUE(checked_mul(int64_t{3}, int64_t{4}, &r));
  EXPECT_EQ(r, 12);
  EXPECT_FALSE(checked_mul(int64_t{1} << 62, int64_t{8}, &r));
  EXPECT_TRUE(time_in_range(kMaxAbsTimeNs));
  EXPECT_FALSE(time_in_range(kMaxAbsTimeNs + 1));
  EXPECT_FALSE(time_end(kMaxAbsTimeNs, 1).has_value());
  EXPECT_EQ(narrow<int32_t>(4294967297), std::nullopt);
}

// F1: ts + dur past int64 / past the range: malformed, never end < start.
TEST(HostileKineto, TsPlusDurOverflowIsMalformed) {
  ImportStats st;
  Store s = import(
      R"({"distributedInfo":{"rank":0},"traceEvents":[)"
      R"({"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":9200000000000000,"dur":9200000000000000,"args":{"device":0,"stream":7}},)"
      R"({"ph":"X","cat":"cuda_runtime","name":"cudaLaunchKernel","pid":1,"tid":1,"ts":9200000000000000,"dur":9200000000000000},)"
      R"({"ph":"X","cat":"user_annotation","name":"a","pid":1,"tid":1,"ts":9200000000000000,"dur":9200000000000000},)" +
          kKernel + "]}",
      &st);
  EXPECT_EQ(st.malformed, 3);
  ASSERT_EQ(s.activities.size(), 1u);
  EXPECT_EQ(s.launches.size(), 0u);
  EXPECT_EQ(s.activities.end_ns[0], 3000);
}

// F2: a base time outside the range is refused; one that pushes a row out drops that row.
TEST(HostileKineto, BaseTimeShift) {
  EXPECT_NE(
      error_of([] {
        import(
            R"({"distributedInfo":{"rank":0},"baseTimeNanoseconds":9223372036854775807,"traceEvents":[)" +
            kKernel + "]}");
      }).find("baseTimeNanoseconds 9223372036854775807 is outside the supported time range"),
      std::string::npos);
  ImportStats st;
  Store s = import(
      R"({"distributedInfo":{"rank":0},"baseTimeNanoseconds":4611686018427300000,"traceEvents":[)" +
          kKernel +
          R"(,{"ph":"X","cat":"kernel","name":"late","pid":0,"tid":7,"ts":100,"dur":2,"args":{"device":0,"stream":7}}]})",
      &st);
  ASSERT_EQ(s.activities.size(), 1u);  // base + 100 µs is past 2^62 - 1 ns
  EXPECT_EQ(s.activities.start_ns[0], 4611686018427300000 + 1000);
  EXPECT_EQ(st.malformed, 1);
  EXPECT_EQ(s.ranks.at(0).events_malformed, 1);
}

// F3: nelems × sizeof(dtype) past int64 is unknown (-1), not a wrapped 0.
TEST(HostileKineto, NcclBytesOverflow) {
  Store s = import(
      R"({"distributedInfo":{"rank":0},"traceEvents":[{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce","pid":0,"ts":100,"dur":5,"args":{"device":0,"stream":7,"Collective name":"allreduce","In msg nelems":4611686018427387904,"dtype":"Double","Group size":4294967298}}]})");
  ASSERT_EQ(s.nccl.size(), 1u);
  EXPECT_EQ(s.nccl.msg_bytes[0], -1);
  EXPECT_EQ(s.nccl.group_size[0], -1);
}

// F4, F5: ranks past int32 are errors, not their low bits.
TEST(HostileKineto, RankOverflow) {
  EXPECT_NE(error_of([] {
              rank_from_filename("/d/rank99999999999999999999.json");
            }).find("rank 99999999999999999999 in the file name is out of range"),
            std::string::npos);
  EXPECT_NE(error_of([] { rank_from_filename("rank4294967297.json"); }).find("out of range"),
            std::string::npos);
  EXPECT_EQ(rank_from_filename("rank2147483647.json"), 2147483647);
  EXPECT_NE(error_of([] {
              import(R"({"distributedInfo":{"rank":4294967296},"traceEvents":[]})");
            }).find("distributedInfo.rank 4294967296 is out of range"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              import(R"({"distributedInfo":{"rank":18446744073709551615},"traceEvents":[]})");
            }).find("out of range"),
            std::string::npos);
  // A device id past int32 is malformed, not device 0.
  ImportStats st;
  Store s = import(
      R"({"distributedInfo":{"rank":0},"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"ts":1,"dur":1,"args":{"device":4294967296,"stream":7}}]})",
      &st);
  EXPECT_EQ(s.activities.size(), 0u);
  EXPECT_EQ(st.malformed, 1);
}

// F11: a lone high surrogate at the end of a key is valid JSON.
TEST(HostileKineto, LoneSurrogateKeyIsValid) {
  ImportOptions o;
  o.rank = 0;
  ImportStats st;
  EXPECT_NO_THROW(import_kineto_string(R"({"traceEvents":[],"\ud800":1})", "t.json", o, &st));
  EXPECT_NO_THROW(import_kineto_string(R"({"traceEvents":[],"x\ud800y":1})", "t.json", o, &st));
}

// F12: mismatched brackets inside skipped values are errors; "traceEvents": 5 is not a trace.
TEST(HostileKineto, BracketMismatchAndNonListEvents) {
  EXPECT_NE(
      error_of([] {
        import(
            R"({"distributedInfo":{"rank":0},"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"ts":1,"dur":2,"args":{"device":0,"stream":7,"x":[1}}}]})");
      }).find("mismatched bracket"),
      std::string::npos);
  EXPECT_NE(error_of([] {
              import(R"({"distributedInfo":{"rank":0},"y":{],"traceEvents":[]})");
            }).find("mismatched bracket"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              import(R"({"traceEvents": 5})");
            }).find("not a Chrome/Kineto trace (traceEvents is not a list)"),
            std::string::npos);
  EXPECT_NO_THROW(
      import(R"({"distributedInfo":{"rank":0},"x":[{"a":[1,{"b":[]}]}],"traceEvents":[]})"));
}

// F14: a user regex on a 100,000-character name, in a thread (8 MiB stack, like the import
// threads): no stack overflow; the pattern sees the first kMaxRegexInput bytes.
TEST(HostileClassify, LongNameRegex) {
  Classifier c({".*allreduce"});
  std::string tail(100000, 'a');
  std::string head = "my_allreduce_kernel" + tail;
  bool long_tail = true, long_head = false;
  std::thread t([&] {
    long_tail = c.is_communication(tail + "allreduce");
    long_head = c.is_communication(head);
  });
  t.join();
  EXPECT_FALSE(long_tail);  // past the bound: documented in docs/limits.md
  EXPECT_TRUE(long_head);
}

// F16: one JSON unit larger than the limit, and a long whitespace run (gzip), are refused
// quickly, with bounded memory.
TEST(HostileKineto, JsonUnitLimit) {
  TempDir d;
  const std::string big = d / "rank-0.json";
  {
    std::ofstream f(big);
    f << R"({"distributedInfo":{"rank":0},"traceEvents":[],"pad":")";
    f << std::string((size_t{64} << 20) + 10, 'x') << "\"}";
  }
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(error_of([&] { import_kineto_file(big, {}, nullptr); }).find("larger than 64 MiB"),
            std::string::npos);
  const std::string ws = d / "rank-1.json.gz";
  {
    gzFile g = gzopen(ws.c_str(), "wb9");
    ASSERT_NE(g, nullptr);
    std::string head = R"({"distributedInfo":{"rank":1},"traceEvents":[)" + kKernel;
    gzwrite(g, head.data(), static_cast<unsigned>(head.size()));
    std::string spaces(size_t{8} << 20, ' ');
    for (int i = 0; i < 10; ++i) gzwrite(g, spaces.data(), static_cast<unsigned>(spaces.size()));
    std::string rest = "," + kKernel + "]}";
    gzwrite(g, rest.data(), static_cast<unsigned>(rest.size()));
    gzclose(g);
  }
  EXPECT_NE(error_of([&] { import_kineto_file(ws, {}, nullptr); }).find("MiB of whitespace"),
            std::string::npos);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 20.0);
}

// F18: gzip through a pipe (no pread) is recognised.
TEST(HostileKineto, GzipThroughPipe) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const std::string json = R"({"distributedInfo":{"rank":0},"traceEvents":[)" + kKernel + "]}";
  std::thread writer([&] {
    gzFile g = gzdopen(fds[1], "wb");
    gzwrite(g, json.data(), static_cast<unsigned>(json.size()));
    gzclose(g);  // closes fds[1]
  });
  Store s;
  std::string err = error_of(
      [&] { s = import_kineto_file("/proc/self/fd/" + std::to_string(fds[0]), {}, nullptr); });
  writer.join();
  ::close(fds[0]);
  EXPECT_EQ(err, "");
  EXPECT_EQ(s.activities.size(), 1u);
}

// Bytes after the gzip stream are refused, naming where they start; a second gzip member
// (what `cat a.gz b.gz` makes) is read as gzip -d does.
TEST(HostileKineto, GzipTrailingGarbage) {
  TempDir d;
  const std::string json = R"({"distributedInfo":{"rank":0},"traceEvents":[)" + kKernel + "]}";
  auto gz = [&](const std::string& path, const std::string& text, bool append) {
    gzFile g = gzopen(path.c_str(), append ? "ab" : "wb");
    ASSERT_NE(g, nullptr);
    gzwrite(g, text.data(), static_cast<unsigned>(text.size()));
    gzclose(g);
  };
  const std::string bad = d / "rank-0.json.gz";
  gz(bad, json, false);
  const auto stream_bytes = fs::file_size(bad);
  std::ofstream(bad, std::ios::app) << "garbage!";
  EXPECT_EQ(error_of([&] { import_kineto_file(bad, {}, nullptr); }),
            bad + ": trailing garbage after the gzip stream at compressed byte " +
                std::to_string(stream_bytes));
  const std::string one = d / "rank-1.json.gz";  // a single stray byte too
  gz(one, json, false);
  std::ofstream(one, std::ios::app) << '\0';
  EXPECT_NE(error_of([&] { import_kineto_file(one, {}, nullptr); }).find("trailing garbage"),
            std::string::npos);
  const std::string two = d / "rank-2.json.gz";  // two members: one JSON text split in two
  gz(two, json.substr(0, 40), false);
  gz(two, json.substr(40), true);
  Store s;
  EXPECT_EQ(error_of([&] { s = import_kineto_file(two, {}, nullptr); }), "");
  EXPECT_EQ(s.activities.size(), 1u);
  const std::string cut = d / "rank-3.json.gz";  // and a member cut short is still truncated
  gz(cut, json, false);
  fs::resize_file(cut, fs::file_size(cut) - 4);
  EXPECT_NE(error_of([&] {
              import_kineto_file(cut, {}, nullptr);
            }).find(cut + ": corrupt or truncated gzip data"),
            std::string::npos);
}

namespace {

// A one-rank spool: strings, Meta (world size `world`), optionally an empty block, 2 kernels.
void write_spool(const std::string& path, int32_t world, spool::MetaFixed f = {},
                 bool empty_block = false) {
  spool::Writer w;
  ASSERT_TRUE(w.open(path));
  std::string names = std::string("") + '\0' + "gemm" + '\0';
  ASSERT_TRUE(w.write_block(spool::BlockType::Strings, 2, names.data(), names.size()));
  spool::Meta m;
  m.fixed = f;
  m.fixed.world_size = world;
  m.fixed.has_start = 1;
  ASSERT_TRUE(w.write_meta(m));
  if (empty_block) {
    ASSERT_TRUE(w.write_block(spool::BlockType::Activities, 0, nullptr, 0));
  }
  std::vector<spool::Activity> acts = {{1000, 2000, 1, 0, 7, 1, 0}, {3000, 4000, 2, 0, 7, 1, 0}};
  ASSERT_TRUE(w.write_block(spool::BlockType::Activities, 2, acts.data(), sizeof(acts[0]) * 2));
}

}  // namespace

// F6, F7, F8: ranks in file names and Meta world sizes are bounded; the missing-rank pass is
// linear.
TEST(HostileSpool, RankLimits) {
  {
    TempDir d;
    write_spool(d / "rank-99999999999.kspool", 1);
    EXPECT_NE(error_of([&] {
                recover_spool_dir(d.dir.string(), nullptr);
              }).find("rank 99999999999 in the file name is past the limit of 65536 ranks"),
              std::string::npos);
  }
  {
    TempDir d;
    write_spool(d / "rank-2147483647.kspool", 1);
    EXPECT_NE(error_of([&] { recover_spool_dir(d.dir.string(), nullptr); }).find("past the limit"),
              std::string::npos);
  }
  {
    TempDir d;
    write_spool(d / "rank-0.kspool", 50'000'000);
    EXPECT_NE(error_of([&] {
                recover_spool_dir(d.dir.string(), nullptr);
              }).find("world size 50000000 in its Meta block is past the limit"),
              std::string::npos);
  }
  {
    TempDir d;  // the largest accepted: 65,536 rank rows, quickly (was O(world²))
    spool::MetaFixed f{};
    f.rank = 65535;
    write_spool(d / "rank-65535.kspool", 1, f);
    auto t0 = std::chrono::steady_clock::now();
    RecoveryReport rep;
    Store s = recover_spool_dir(d.dir.string(), &rep);
    EXPECT_EQ(rep.world_size, 65536);
    EXPECT_EQ(rep.ranks.size(), 65536u);
    EXPECT_EQ(s.ranks.size(), 65536u);
    EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  }
}

// F9: clock and anchor values that overflow drop the records (counted), never wrap them.
// F19: an empty record block reads as nothing.
TEST(HostileSpool, ClockOverflowAndEmptyBlock) {
  TempDir d;
  spool::MetaFixed f{};
  f.rank = 0;
  f.start_local_ns = INT64_MIN;
  f.start_offset_ns = INT64_MAX;
  f.start_rtt_ns = INT64_MAX;
  f.end_local_ns = INT64_MAX;
  f.end_offset_ns = INT64_MIN;
  f.has_end = 1;
  f.anchor_ns = INT64_MAX;
  write_spool(d / "rank-0.kspool", 1, f, true);
  const spool::Contents c = spool::read(d / "rank-0.kspool");
  EXPECT_FALSE(c.truncated) << c.problem;
  EXPECT_EQ(c.activities.size(), 2u);
  RecoveryReport rep;
  Store s = recover_spool_dir(d.dir.string(), &rep);
  for (size_t i = 0; i < s.activities.size(); ++i) {
    EXPECT_TRUE(time_in_range(s.activities.start_ns[i]));
    EXPECT_LE(s.activities.start_ns[i], s.activities.end_ns[i]);
  }
  ASSERT_EQ(s.ranks.size(), 1u);
  EXPECT_EQ(s.activities.size() + static_cast<size_t>(s.ranks[0].records_dropped), 2u);
  EXPECT_GE(s.ranks[0].clock_uncertainty_ns, 0);
}

// --spool: a file that cannot be read gets its own reason, in the report and in the error when
// no rank is left; a FIFO named like a spool file does not block the recovery.
TEST(HostileSpool, UnreadableFilesGiveReasons) {
  TempDir d;
  fs::create_directory(d / "rank-0.kspool");
  ASSERT_EQ(::mkfifo((d / "rank-1.kspool").c_str(), 0600), 0);
  fs::create_symlink(d / "nowhere", d / "rank-2.kspool");
  std::ofstream(d / "rank-3.kspool").flush();  // empty
  auto t0 = std::chrono::steady_clock::now();
  const std::string e = error_of([&] { recover_spool_dir(d.dir.string(), nullptr); });
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);
  EXPECT_EQ(e, d.dir.string() +
                   ": no rank could be recovered (rank-0.kspool: a directory, not a spool file; "
                   "rank-1.kspool: not a regular file; rank-2.kspool: cannot open: No such file "
                   "or directory; rank-3.kspool: empty file)");
  spool::MetaFixed f{};  // one good rank: the others are reported per file
  f.rank = 4;
  write_spool(d / "rank-4.kspool", 5, f);
  RecoveryReport rep;
  Store s = recover_spool_dir(d.dir.string(), &rep);
  EXPECT_EQ(s.activities.size(), 2u);
  const std::vector<std::string> lines = rep.lines();
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], "rank 0: nothing recovered from " + (d / "rank-0.kspool") +
                          " (a directory, not a spool file)");
  EXPECT_EQ(lines[2], "rank 2: nothing recovered from " + (d / "rank-2.kspool") +
                          " (cannot open: No such file or directory)");
  EXPECT_EQ(lines[3], "rank 3: nothing recovered from " + (d / "rank-3.kspool") + " (empty file)");
}

namespace {

// A real store (1 rank, 2 activities), as kernalyse writes it.
Store small_store() {
  ImportOptions o;
  return import_kineto_string(
      R"({"distributedInfo":{"rank":0},"traceEvents":[)" + kKernel + "," + kKernel + "]}", "t.json",
      o, nullptr);
}

// Sets the length of datasets of an existing store (chunked, unlimited: HDF5 allows it) without
// writing their data: what the mutated stores F15/F17 look like.
void set_extent(const std::string& path, const std::vector<std::string>& datasets, hsize_t rows) {
  hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  for (const auto& name : datasets) {
    hid_t ds = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
    ASSERT_GE(ds, 0) << name;
    hsize_t dims[1] = {rows};
    ASSERT_GE(H5Dset_extent(ds, dims), 0) << name;
    H5Dclose(ds);
  }
  H5Fclose(f);
}

}  // namespace

// F15, F17: a column claiming 2^42 rows is refused from its dataspace, before anything is read
// or allocated: lengths compared first, then rows against the bytes stored.
TEST(HostileStore, CorruptLengthsRefusedBeforeReading) {
  TempDir d;
  const std::string p = d / "s.h5";
  write_store(small_store(), p);
  set_extent(p, {"/ranks/host"}, hsize_t{1} << 42);
  auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(error_of([&] { read_store(p); }).find("corrupt /ranks: columns have different lengths"),
            std::string::npos);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 5.0);

  const std::string q = d / "t.h5";
  write_store(small_store(), q);
  std::vector<std::string> every_activity_column;  // all of them, so that lengths agree
  const Activities none;
  for_each_column(none, [&](const auto& def, const auto&) {
    every_activity_column.push_back(std::string("/activities/") + def.name);
  });
  set_extent(q, every_activity_column, hsize_t{1} << 40);
  const std::string e = error_of([&] { read_store(q); });
  EXPECT_NE(e.find(q + ": corrupt /activities/"), std::string::npos) << e;
  EXPECT_NE(e.find("rows of"), std::string::npos) << e;
}

// F13: a store holding a timestamp outside the range is corrupt (the analyses subtract freely).
TEST(HostileStore, TimestampOutsideRange) {
  TempDir d;
  Store s = small_store();
  s.activities.start_ns[0] = INT64_MIN;
  const std::string p = d / "s.h5";
  write_store(s, p);
  EXPECT_NE(error_of([&] { read_store(p); }).find("corrupt /activities/start_ns: row 0"),
            std::string::npos);
}

// Output paths are checked before any work; F20: SIGTERM removes the temporary.
TEST(AtomicFile, ChecksAndSignalCleanup) {
  TempDir d;
  EXPECT_EQ(error_of([&] { check_output_path(d.dir.string(), false); }),
            d.dir.string() + ": is a directory");
  EXPECT_EQ(error_of([&] { check_output_path(d / "no/x.h5", false); }),
            "cannot create " + (d / "no/x.h5") + ": No such file or directory");
  const std::string out = d / "out.h5";
  {
    AtomicFile f(out, false);
    EXPECT_TRUE(fs::exists(f.tmp()));
  }
  EXPECT_TRUE(fs::is_empty(d.dir));  // not committed: removed
  {
    AtomicFile f(out, false);
    std::ofstream(out) << "appeared meanwhile";
    EXPECT_EQ(error_of([&] { f.commit(); }), out + ": exists (use --force to replace it)");
  }
  fs::remove(out);
  EXPECT_TRUE(fs::is_empty(d.dir));
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {  // the child: a temporary, then SIGTERM as from a job's time limit
    AtomicFile f(out, false);
    std::ofstream(f.tmp()) << "partial";
    ::raise(SIGTERM);
    ::_exit(0);  // not reached
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);  // still dies by SIGTERM
  EXPECT_TRUE(fs::is_empty(d.dir)) << "temporary left after SIGTERM";
}
