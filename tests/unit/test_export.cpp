// Exports (analysis/exporters/src/export.cpp): exact µs text, time parsing, Kineto export → import
// round trip of a hand-made store, Perfetto export of one rank loaded back by our importer, refusal
// to overwrite, gzip output.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "kernalyse/classify.h"
#include "kernalyse/export.h"
#include "kernalyse/kineto.h"
#include "kernalyse/store.h"
#include "kernalyse/store_io.h"

namespace fs = std::filesystem;

namespace kernalyse {
namespace {

struct TmpDir {
  fs::path p;
  TmpDir() {
    p = fs::temp_directory_path() /
        ("kernalyse-export-" + std::to_string(::getpid()) + "-" + std::to_string(counter()++));
    fs::remove_all(p);
    fs::create_directories(p);
  }
  ~TmpDir() {
    std::error_code ec;
    fs::remove_all(p, ec);
  }
  static int& counter() {
    static int c = 0;
    return c;
  }
};

// One rank: two streams of kernels (one NCCL allreduce with metadata), a memcpy, launches with
// correlation ids, two ProfilerSteps, a user annotation, a GPU annotation. Epoch-ns times with
// sub-µs parts that a double would not keep.
Store make_store(int32_t rank, int64_t t0) {
  Store s;
  Classifier cls;
  auto& a = s.activities;
  auto add = [&](int32_t stream, Kind k, int64_t st, int64_t en, const std::string& name,
                 int64_t corr) {
    a.rank.push_back(rank);
    a.device.push_back(rank % 2);
    a.stream.push_back(stream);
    a.kind.push_back(static_cast<uint8_t>(k));
    a.category.push_back(static_cast<uint8_t>(cls.classify(k, name)));
    a.start_ns.push_back(t0 + st);
    a.end_ns.push_back(t0 + en);
    a.name_id.push_back(s.strings.intern(name));
    a.correlation.push_back(corr);
    a.step.push_back(kNoStep);
  };
  auto launch = [&](int64_t st, int64_t corr, const std::string& name) {
    auto& l = s.launches;
    l.rank.push_back(rank);
    l.pid.push_back(4242);
    l.tid.push_back(4243);
    l.start_ns.push_back(t0 + st);
    l.end_ns.push_back(t0 + st + 3'001);
    l.name_id.push_back(s.strings.intern(name));
    l.correlation.push_back(corr);
    l.step.push_back(kNoStep);
  };
  auto annot = [&](AnnotationKind k, int64_t pid, int64_t tid, int64_t st, int64_t en,
                   const std::string& name) {
    auto& n = s.annotations;
    n.rank.push_back(rank);
    n.kind.push_back(static_cast<uint8_t>(k));
    n.pid.push_back(pid);
    n.tid.push_back(tid);
    n.start_ns.push_back(t0 + st);
    n.end_ns.push_back(t0 + en);
    n.name_id.push_back(s.strings.intern(name));
    n.step.push_back(k == AnnotationKind::Step ? std::stoi(name.substr(13)) : kNoStep);
  };
  annot(AnnotationKind::Step, 4242, 4243, 0, 100'000, "ProfilerStep#5");
  annot(AnnotationKind::User, 4242, 4243, 1'000, 9'999, "forward \"quoted\"\\path");
  annot(AnnotationKind::Step, 4242, 4243, 100'000, 200'000, "ProfilerStep#6");
  annot(AnnotationKind::GpuUser, rank % 2, 7, 20'000, 60'001, "gpu range");
  launch(2'001, 11, "cudaLaunchKernel");
  launch(10'123, 12, "cudaLaunchKernel");
  launch(30'007, 13, "cudaMemcpyAsync");
  launch(101'009, 14, "cudaLaunchKernel");
  add(7, Kind::Kernel, 20'001, 40'003, "void gemm_kernel<128>(float*)", 11);
  add(7, Kind::Kernel, 40'003, 41'500, "elementwise", 12);
  add(7, Kind::Memcpy, 45'000, 46'999, "Memcpy HtoD (Pinned -> Device)", 13);
  add(13, Kind::Kernel, 110'001, 150'123, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)", 14);
  add(13, Kind::Kernel, 160'000, 160'000, "zero-length", kNoCorrelation);
  auto& n = s.nccl;
  n.activity.push_back(3);
  n.collective_id.push_back(s.strings.intern("allreduce"));
  n.seq.push_back(17);
  n.pg_name_id.push_back(s.strings.intern("0"));
  n.pg_desc_id.push_back(s.strings.intern("default_pg"));
  n.pg_ranks_id.push_back(s.strings.intern("[0, 1]"));
  n.group_size.push_back(2);
  n.in_nelems.push_back(1024);
  n.out_nelems.push_back(1024);
  n.msg_bytes.push_back(4096);
  n.dtype_id.push_back(s.strings.intern("Float"));
  n.comm_hash.push_back(0);
  n.peer.push_back(-1);
  RankInfo ri;
  ri.rank = rank;
  ri.world_size = 2;
  ri.devices = std::to_string(rank % 2);
  ri.host = "node" + std::to_string(rank);
  s.ranks.push_back(ri);
  sort_activities(s);
  assign_steps(s);
  // GPU memory in use on the rank's device (schema 2 counters): up, up, down.
  for (auto [ts, v] :
       {std::pair<int64_t, int64_t>{500, 1 << 20}, {1'500, 3 << 20}, {2'500, 1 << 19}}) {
    s.counters.rank.push_back(rank);
    s.counters.device.push_back(rank % 2);
    s.counters.name_id.push_back(s.strings.intern(kCounterGpuMemory));
    s.counters.ts_ns.push_back(t0 + ts);
    s.counters.value.push_back(v);
  }
  return s;
}

// Column-by-column equality of everything the Kineto format carries.
void expect_same_content(const Store& x, const Store& y) {
  const auto &a = x.activities, &b = y.activities;
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    SCOPED_TRACE("activity " + std::to_string(i));
    EXPECT_EQ(a.rank[i], b.rank[i]);
    EXPECT_EQ(a.device[i], b.device[i]);
    EXPECT_EQ(a.stream[i], b.stream[i]);
    EXPECT_EQ(a.kind[i], b.kind[i]);
    EXPECT_EQ(a.category[i], b.category[i]);
    EXPECT_EQ(a.start_ns[i], b.start_ns[i]);
    EXPECT_EQ(a.end_ns[i], b.end_ns[i]);
    EXPECT_EQ(x.strings.at(a.name_id[i]), y.strings.at(b.name_id[i]));
    EXPECT_EQ(a.correlation[i], b.correlation[i]);
    EXPECT_EQ(a.step[i], b.step[i]);
  }
  const auto &l = x.launches, &m = y.launches;
  ASSERT_EQ(l.size(), m.size());
  for (size_t i = 0; i < l.size(); ++i) {
    EXPECT_EQ(l.rank[i], m.rank[i]);
    EXPECT_EQ(l.pid[i], m.pid[i]);
    EXPECT_EQ(l.tid[i], m.tid[i]);
    EXPECT_EQ(l.start_ns[i], m.start_ns[i]);
    EXPECT_EQ(l.end_ns[i], m.end_ns[i]);
    EXPECT_EQ(x.strings.at(l.name_id[i]), y.strings.at(m.name_id[i]));
    EXPECT_EQ(l.correlation[i], m.correlation[i]);
    EXPECT_EQ(l.step[i], m.step[i]);
  }
  const auto &p = x.annotations, &q = y.annotations;
  ASSERT_EQ(p.size(), q.size());
  for (size_t i = 0; i < p.size(); ++i) {
    EXPECT_EQ(p.rank[i], q.rank[i]);
    EXPECT_EQ(p.kind[i], q.kind[i]);
    EXPECT_EQ(p.pid[i], q.pid[i]);
    EXPECT_EQ(p.tid[i], q.tid[i]);
    EXPECT_EQ(p.start_ns[i], q.start_ns[i]);
    EXPECT_EQ(p.end_ns[i], q.end_ns[i]);
    EXPECT_EQ(x.strings.at(p.name_id[i]), y.strings.at(q.name_id[i]));
    EXPECT_EQ(p.step[i], q.step[i]);
  }
  const auto &k = x.counters, &kk = y.counters;  // GPU memory: the Kineto export's [memory] events
  ASSERT_EQ(k.size(), kk.size());
  for (size_t i = 0; i < k.size(); ++i) {
    EXPECT_EQ(k.rank[i], kk.rank[i]);
    EXPECT_EQ(k.device[i], kk.device[i]);
    EXPECT_EQ(x.strings.at(k.name_id[i]), y.strings.at(kk.name_id[i]));
    EXPECT_EQ(k.ts_ns[i], kk.ts_ns[i]);
    EXPECT_EQ(k.value[i], kk.value[i]);
  }
  const auto &n = x.nccl, &o = y.nccl;
  ASSERT_EQ(n.size(), o.size());
  for (size_t i = 0; i < n.size(); ++i) {
    EXPECT_EQ(n.activity[i], o.activity[i]);
    EXPECT_EQ(x.strings.at(n.collective_id[i]), y.strings.at(o.collective_id[i]));
    EXPECT_EQ(n.seq[i], o.seq[i]);
    EXPECT_EQ(x.strings.at(n.pg_name_id[i]), y.strings.at(o.pg_name_id[i]));
    EXPECT_EQ(x.strings.at(n.pg_desc_id[i]), y.strings.at(o.pg_desc_id[i]));
    EXPECT_EQ(x.strings.at(n.pg_ranks_id[i]), y.strings.at(o.pg_ranks_id[i]));
    EXPECT_EQ(n.group_size[i], o.group_size[i]);
    EXPECT_EQ(n.in_nelems[i], o.in_nelems[i]);
    EXPECT_EQ(n.out_nelems[i], o.out_nelems[i]);
    EXPECT_EQ(n.msg_bytes[i], o.msg_bytes[i]);
    EXPECT_EQ(x.strings.at(n.dtype_id[i]), y.strings.at(o.dtype_id[i]));
  }
}

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(Export, MicrosecondTextIsExact) {
  EXPECT_EQ(ns_to_us_text(0), "0.000");
  EXPECT_EQ(ns_to_us_text(1), "0.001");
  EXPECT_EQ(ns_to_us_text(1712195495519689047), "1712195495519689.047");
  EXPECT_EQ(ns_to_us_text(-1), "-0.001");
  EXPECT_EQ(ns_to_us_text(-1500), "-1.500");
  for (int64_t v : {int64_t{0}, int64_t{999}, int64_t{4458676983543183}, int64_t{-123456789}}) {
    int64_t back = 0;
    ASSERT_TRUE(parse_us_to_ns(ns_to_us_text(v), &back));
    EXPECT_EQ(back, v);
  }
}

TEST(Export, ParsesTimes) {
  EXPECT_EQ(parse_time_to_ns("1500"), 1'500'000);
  EXPECT_EQ(parse_time_to_ns("1.5"), 1'500);
  EXPECT_EQ(parse_time_to_ns("0.001"), 1);
  EXPECT_EQ(parse_time_to_ns("20ns"), 20);
  EXPECT_EQ(parse_time_to_ns("12.5us"), 12'500);
  EXPECT_EQ(parse_time_to_ns("12.5\xC2\xB5s"), 12'500);
  EXPECT_EQ(parse_time_to_ns("1.5ms"), 1'500'000);
  EXPECT_EQ(parse_time_to_ns("2s"), 2'000'000'000);
  EXPECT_THROW(parse_time_to_ns("abc"), Error);
  EXPECT_THROW(parse_time_to_ns("12xs"), Error);
  EXPECT_THROW(parse_time_to_ns(""), Error);
}

TEST(Export, BaseIsEarliestTimeRoundedDownToMicroseconds) {
  Store s = make_store(0, 1'700'000'000'000'000'123);
  EXPECT_EQ(export_base_ns(s), 1'700'000'000'000'000'000);
  EXPECT_EQ(export_base_ns(Store{}), 0);
}

TEST(Export, KinetoRoundTripGivesTheSameStore) {
  TmpDir d;
  Store s = merge_stores(
      {make_store(0, 1'700'000'000'000'000'123), make_store(1, 1'700'000'000'000'050'007)});
  ExportStats st = export_kineto(s, d.p.string(), {});
  EXPECT_EQ(st.files, 2);
  std::vector<Store> parts;
  for (int r : {0, 1}) {
    fs::path f = d.p / ("rank-" + std::to_string(r) + ".json");
    ASSERT_TRUE(fs::exists(f));
    auto j = nlohmann::json::parse(slurp(f));
    EXPECT_EQ(j["distributedInfo"]["rank"], r);
    EXPECT_EQ(j["distributedInfo"]["world_size"], 2);
    EXPECT_EQ(j["baseTimeNanoseconds"], 1'700'000'000'000'000'000);
    ImportStats is;
    parts.push_back(import_kineto_file(f.string(), {}, &is));
    EXPECT_EQ(is.malformed, 0);
  }
  Store back = merge_stores(std::move(parts));
  expect_same_content(s, back);
  // Existing files are refused without force, replaced with it.
  EXPECT_THROW(export_kineto(s, d.p.string(), {}), Error);
  ExportOptions force;
  force.force = true;
  EXPECT_NO_THROW(export_kineto(s, d.p.string(), force));
}

TEST(Export, PerfettoOfOneRankLoadsBack) {
  TmpDir d;
  Store s = merge_stores(
      {make_store(0, 1'700'000'000'000'000'123), make_store(1, 1'700'000'000'000'050'007)});
  ExportOptions o;
  o.rank = 1;
  fs::path f = d.p / "r1.json";
  export_perfetto(s, f.string(), o);
  auto j = nlohmann::json::parse(slurp(f));
  EXPECT_EQ(j["distributedInfo"]["rank"], 1);
  int procs = 0;
  for (const auto& e : j["traceEvents"]) {
    EXPECT_EQ(e["pid"], 1);
    if (e["ph"] == "M" && e["name"] == "process_name") {
      ++procs;
      EXPECT_EQ(e["args"]["name"], "rank 1 \xC2\xB7 node1 \xC2\xB7 GPU 1");
    }
  }
  EXPECT_EQ(procs, 1);
  Store back = import_kineto_file(f.string(), {}, nullptr);
  ASSERT_EQ(back.activities.size(), 5u);
  Store one = make_store(1, 1'700'000'000'000'050'007);
  for (size_t i = 0; i < one.activities.size(); ++i) {
    EXPECT_EQ(back.activities.start_ns[i], one.activities.start_ns[i]);
    EXPECT_EQ(back.activities.end_ns[i], one.activities.end_ns[i]);
    EXPECT_EQ(back.activities.stream[i], one.activities.stream[i]);
    EXPECT_EQ(back.activities.correlation[i], one.activities.correlation[i]);
  }
  EXPECT_EQ(back.nccl.size(), 1u);
  EXPECT_EQ(back.annotations.size(), one.annotations.size());
  EXPECT_THROW(export_perfetto(s, f.string(), o), Error);  // exists
}

TEST(Export, PerfettoFlowsWaitsAndCuts) {
  TmpDir d;
  // Rank 1 starts the allreduce 49.884 µs after rank 0 (their t0 differ by that much).
  Store s = merge_stores(
      {make_store(0, 1'700'000'000'000'000'123), make_store(1, 1'700'000'000'000'050'007)});
  fs::path f = d.p / "all.json.gz";
  ExportStats st = export_perfetto(s, f.string(), {});
  EXPECT_EQ(st.flows, 1);
  gzFile g = gzopen(f.string().c_str(), "rb");
  ASSERT_NE(g, nullptr);
  std::string text;
  char buf[65536];
  for (int n; (n = gzread(g, buf, sizeof buf)) > 0;) text.append(buf, static_cast<size_t>(n));
  gzclose(g);
  auto j = nlohmann::json::parse(text);
  EXPECT_FALSE(j.contains("distributedInfo"));
  int s_ev = 0, f_ev = 0, waits = 0;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "s") {
      ++s_ev;
      EXPECT_EQ(e["pid"], 1);
    }
    if (e["ph"] == "f") {
      ++f_ev;
      EXPECT_EQ(e["pid"], 0);
      EXPECT_EQ(e["bp"], "e");
    }
    if (e["ph"] == "X" && e["cat"] == "wait") {
      ++waits;
      EXPECT_EQ(e["pid"], 0);
      EXPECT_EQ(e["args"]["wait_ns"], 40'122);  // clamped to its kernel (40.122 µs)
    }
  }
  EXPECT_EQ(s_ev, 1);
  EXPECT_EQ(f_ev, 1);
  EXPECT_EQ(waits, 1);
  // --from/--to: only events overlapping [100 µs, 105 µs) of rank 0's timeline.
  ExportOptions o;
  o.rank = 0;
  o.from_ns = 100'000;
  o.to_ns = 105'000;
  fs::path cut = d.p / "cut.json";
  export_perfetto(s, cut.string(), o);
  Store back = import_kineto_file(cut.string(), {}, nullptr);
  EXPECT_EQ(back.activities.size(), 0u);
  EXPECT_EQ(back.annotations.size(), 2u);  // the two steps (100 µs boundary: #6 starts there)
}

std::string file_bytes(const fs::path& f) {
  std::ifstream in(f, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// PerfettoParts as mpirun spreads it (export_perfetto_by_rank): the writer holds rank 0, another
// process rank 1; each plans its part, both add each other's tracks; the other formats every
// section diverted, the writer its activities into the file and the rest diverted, then appends
// each section's bytes in the file's order. The file is export_perfetto's byte for byte (plain
// and gzip, with a window's counter levels), and so are the stats.
TEST(Export, PerfettoPartsFormattedElsewhereMakeTheWholeFile) {
  TmpDir d;
  const int64_t t0 = 1'700'000'000'000'000'123;
  const Store s = merge_stores({make_store(0, t0), make_store(1, t0 + 50'007)});
  const std::string store = (d.p / "run.h5").string();
  write_store(s, store);
  RankSlices slices(store, ColumnSelection::all());
  ASSERT_EQ(slices.size(), 2u);
  const Store part[2] = {slices.read(0), slices.read(1)};
  ExportOptions window;
  window.from_ns = 30'000;
  for (const auto& [name, opt] : {std::pair<std::string, ExportOptions>{"all.json", {}},
                                  std::pair<std::string, ExportOptions>{"win.json.gz", window}}) {
    const fs::path whole = d.p / ("whole-" + name), split = d.p / ("split-" + name);
    const ExportStats want = export_perfetto(s, whole.string(), opt);
    PerfettoParts w(split.string(), opt), o(opt);
    const int64_t earliest = earliest_ns(s);
    w.plan(part[0], earliest), o.plan(part[1], earliest);
    const std::string wt = w.tracks(), ot = o.tracks();
    w.add_tracks(ot), o.add_tracks(wt);
    const auto rows =
        static_cast<int64_t>(s.activities.size() + s.annotations.size() + s.launches.size());
    w.start(s, earliest, rows), o.start(s, earliest, rows);
    // Each part's collective ids: its rows among the whole store's (rank 0's first).
    const std::vector<int64_t>& coll = w.cross_collectives();
    const size_t n0 = part[0].activities.size();
    const std::vector<int64_t> coll0(coll.begin(), coll.begin() + static_cast<ptrdiff_t>(n0)),
        coll1(coll.begin() + static_cast<ptrdiff_t>(n0), coll.end());
    std::string mine[5], theirs[5];
    int at = 0;
    auto sections = [&](PerfettoParts& x, const Store& p, const std::vector<int64_t>& c,
                        std::string* to, bool direct_activities) {
      auto next = [&](int k) {
        if (k > 0 || !direct_activities)
          x.divert([&, to](std::string_view b) { to[at].append(b); });
        at = k;
      };
      next(0), x.activities(p, c);
      next(1), x.annotations(p);
      next(2), x.launches(p);
      next(3), x.counter_entries(p);
      next(4), x.counters(p);
      x.divert(nullptr);
    };
    sections(o, part[1], coll1, theirs, false);
    sections(w, part[0], coll0, mine, true);
    EXPECT_TRUE(mine[0].empty());
    EXPECT_EQ(theirs[0].substr(0, 2), ",\n");
    w.append(theirs[0], 0);
    for (int k = 1; k < 5; ++k) {
      if (k == 3) w.waits();
      w.append(mine[k], 0);
      w.append(theirs[k], 0);
    }
    w.add_stats(o.stats());
    const ExportStats got = w.finish();
    EXPECT_EQ(got.events, want.events) << name;
    EXPECT_EQ(got.counters, want.counters) << name;
    EXPECT_EQ(got.flows, want.flows) << name;
    EXPECT_GT(want.counters, 0) << name;
    EXPECT_EQ(file_bytes(split), file_bytes(whole)) << name;
  }
}

// Pieces of a few rows (PerfettoParts::rows) formatted in turn by the writer and by another part
// whose events are appended, or written by "their process" into the file where place() says:
// export_perfetto's file (all, and with a window).
TEST(Export, PerfettoPiecesOfRowsPlacedOrAppendedMakeTheWholeFile) {
  TmpDir d;
  const int64_t t0 = 1'700'000'000'000'000'123;
  const Store s = merge_stores({make_store(0, t0), make_store(1, t0 + 50'007)});
  ExportOptions window;
  window.from_ns = 30'000;
  for (const auto& [name, opt] : {std::pair<std::string, ExportOptions>{"all", {}},
                                  std::pair<std::string, ExportOptions>{"win", window}}) {
    const fs::path whole = d.p / (name + "-whole.json"), split = d.p / (name + "-split.json");
    const ExportStats want = export_perfetto(s, whole.string(), opt);
    PerfettoParts w(split.string(), opt), o(opt);
    const int64_t earliest = earliest_ns(s);
    w.plan(s, earliest), o.plan(s, earliest);
    const auto rows =
        static_cast<int64_t>(s.activities.size() + s.annotations.size() + s.launches.size());
    w.start(s, earliest, rows), o.start(s, earliest, rows);
    ASSERT_FALSE(w.shared().empty());
    const int fd = ::open(w.shared().c_str(), O_WRONLY);
    ASSERT_GE(fd, 0);
    std::string theirs;
    o.divert([&](std::string_view b) { theirs.append(b); });
    int piece = 0;
    auto pieces = [&](size_t n, const std::function<void(PerfettoParts&)>& f) {
      for (size_t lo = 0; lo < n; lo += 2, ++piece) {
        const size_t hi = std::min(n, lo + 2);
        if (piece % 3 == 0) {
          w.rows(lo, hi), f(w);
          continue;
        }
        theirs.clear();
        o.rows(lo, hi), f(o);
        o.divert([&](std::string_view b) { theirs.append(b); });  // the rest buffered
        if (piece % 3 == 1) {
          w.append(theirs, 0);
        } else {
          const auto [at, skip] = w.place(static_cast<int64_t>(theirs.size()), 0);
          const std::string_view b = std::string_view(theirs).substr(static_cast<size_t>(skip));
          ASSERT_EQ(::pwrite(fd, b.data(), b.size(), at), static_cast<ssize_t>(b.size()));
        }
      }
    };
    const std::vector<int64_t>& coll = w.cross_collectives();
    w.spans(s), o.spans(s);
    pieces(s.activities.size(), [&](PerfettoParts& x) { x.activities(s, coll); });
    pieces(s.annotations.size(), [&](PerfettoParts& x) { x.annotations(s); });
    pieces(s.launches.size(), [&](PerfettoParts& x) { x.launches(s); });
    w.waits();
    w.counter_entries(s);
    w.counters(s);
    ::close(fd);
    w.add_stats(o.stats());
    const ExportStats got = w.finish();
    EXPECT_GT(piece, 6) << name;
    EXPECT_EQ(got.events, want.events) << name;
    EXPECT_EQ(got.flows, want.flows) << name;
    EXPECT_EQ(file_bytes(split), file_bytes(whole)) << name;
  }
}

// Counters: "ph":"C" events on the rank's process, one track per device and counter, values in
// args under their unit; --rank and --from/--to cut them like other events.
TEST(Export, PerfettoWritesCounters) {
  TmpDir d;
  const int64_t t0 = 1'700'000'000'000'000'123;
  Store s = merge_stores({make_store(0, t0), make_store(1, t0 + 50'007)});
  s.counters = Counters{};   // make_store's own memory series: replaced by these
  Counters& c = s.counters;  // hand-built: GPU memory on both ranks, power on rank 1
  auto sample = [&](int32_t rank, int32_t dev, const char* name, int64_t ts, int64_t v) {
    c.rank.push_back(rank);
    c.device.push_back(dev);
    c.name_id.push_back(s.strings.intern(name));
    c.ts_ns.push_back(t0 + ts);
    c.value.push_back(v);
  };
  sample(0, 0, kCounterGpuMemory, 1'000, 1'048'576);
  sample(0, 0, kCounterGpuMemory, 30'500, 3'145'728);
  sample(0, 0, kCounterGpuMemory, 150'000, 0);
  sample(1, 1, kCounterGpuMemory, 60'000, 2'097'152);
  sample(1, 1, kCounterPower, 60'000, 251'000);
  fs::path f = d.p / "counters.json";
  ExportStats st = export_perfetto(s, f.string(), {});
  EXPECT_EQ(st.counters, 5);
  auto j = nlohmann::json::parse(slurp(f));
  const int64_t base = j["baseTimeNanoseconds"];
  std::vector<nlohmann::json> cs;
  for (const auto& e : j["traceEvents"])
    if (e["ph"] == "C") cs.push_back(e);
  ASSERT_EQ(cs.size(), 5u);
  EXPECT_EQ(cs[0]["pid"], 0);
  EXPECT_EQ(cs[0]["name"], "GPU 0 memory allocated");
  EXPECT_EQ(cs[0]["args"]["bytes"], 1'048'576);
  // ts in exact µs from the origin: t0 + 30.5 µs.
  EXPECT_EQ(std::llround(cs[1]["ts"].get<double>() * 1000), t0 + 30'500 - base);
  EXPECT_EQ(cs[4]["pid"], 1);
  EXPECT_EQ(cs[4]["name"], "GPU 1 power");
  EXPECT_EQ(cs[4]["args"]["mW"], 251'000);
  // --rank 0 --from 20 µs --to 100 µs: the level in effect at 20 µs (the 1 µs sample's), written
  // at the window's start, then the 30.5 µs sample.
  ExportOptions o;
  o.rank = 0;
  o.from_ns = t0 + 20'000 - base;
  o.to_ns = t0 + 100'000 - base;
  fs::path cut = d.p / "cut.json";
  EXPECT_EQ(export_perfetto(s, cut.string(), o).counters, 2);
  std::vector<nlohmann::json> cut_cs;
  const auto cj = nlohmann::json::parse(slurp(cut));
  for (const auto& e : cj["traceEvents"])
    if (e["ph"] == "C") cut_cs.push_back(e);
  ASSERT_EQ(cut_cs.size(), 2u);
  const int64_t cut_base = cj["baseTimeNanoseconds"];
  EXPECT_EQ(std::llround(cut_cs[0]["ts"].get<double>() * 1000), *o.from_ns + base - cut_base);
  EXPECT_EQ(cut_cs[0]["args"]["bytes"], 1'048'576);
  EXPECT_EQ(cut_cs[1]["args"]["bytes"], 3'145'728);
  // An empty counters table writes none.
  Store plain = make_store(0, t0);
  plain.counters = Counters{};
  fs::path p2 = d.p / "plain.json";
  EXPECT_EQ(export_perfetto(plain, p2.string(), {}).counters, 0);
}

}  // namespace
}  // namespace kernalyse
