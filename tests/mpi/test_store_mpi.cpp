// write_store_parallel on real Open MPI ranks (ctest runs this binary under mpirun -n 4).
// The core check: the collectively written file reads back exactly like
// write_store(merge_stores(parts)) of the same parts.
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernalyse/store.h"
#include "kernalyse/store_io.h"
#include "kernalyse/store_mpi.h"

namespace fs = std::filesystem;
using namespace kernalyse;

namespace {

int world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}

int world_size() {
  int n = 0;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

std::string bcast(std::string s, int root = 0) {
  unsigned long long n = s.size();
  MPI_Bcast(&n, 1, MPI_UNSIGNED_LONG_LONG, root, MPI_COMM_WORLD);
  s.resize(n);
  MPI_Bcast(s.data(), static_cast<int>(n), MPI_CHAR, root, MPI_COMM_WORLD);
  return s;
}

// Global rank held by process p: a permutation, so that rank order != communicator order.
int32_t rank_of(int p, int np) { return 2 * ((p + 1) % np); }

// Process p's part: its own RankInfo, activities on three streams in shuffled order (so the
// writer must sort), strings shared with other processes and strings of its own, NCCL rows
// (collectives and p2p) with comm_hash/peer. Process 1 has no activities (and so no NCCL rows).
Store make_part(int p, int np) {
  const int32_t rank = rank_of(p, np);
  Store s;
  s.attrs.tool_version = "0.1.0-test";
  s.attrs.produced_by = "test part of process " + std::to_string(p);
  s.attrs.command_line = "mpirun -n " + std::to_string(np);
  s.attrs.created_utc = "2024-04-04T12:00:00Z";
  s.attrs.clock_domain = "mpi-aligned";
  RankInfo ri;
  ri.rank = rank;
  ri.world_size = np;
  ri.host = "node" + std::to_string(p / 2);
  ri.devices = std::to_string(p % 2);
  ri.device_name = p == 2 ? "" : "NVIDIA H100";
  ri.source = "spool/rank" + std::to_string(rank);
  ri.base_time_ns = 1712195495519689047 + p;
  ri.clock_offset_ns = -1000 * p;
  ri.clock_drift = 1e-7 * p;
  ri.clock_uncertainty_ns = 100 + p;
  ri.clock_method = "mpi-pingpong";
  ri.emulated = p == np - 1;
  ri.events_total = 1000 + p;
  ri.events_malformed = p;
  ri.events_ignored = 2 * p;
  ri.records_dropped = 3 * p;
  s.ranks.push_back(ri);
  // Strings of its own before the shared ones, so that local ids differ between processes.
  s.strings.intern("only-on-process-" + std::to_string(p) + " ü");

  const size_t n = p == 1 ? 0 : 500 + 137 * size_t(p);
  std::mt19937 rng(1234 + p);
  std::vector<size_t> perm(n);
  for (size_t i = 0; i < n; ++i) perm[i] = i;
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<size_t> row_of(n);  // where logical activity i ends up in the unsorted input
  for (size_t k = 0; k < n; ++k) row_of[perm[k]] = k;
  Activities& a = s.activities;
  a.rank.resize(n);
  a.device.resize(n);
  a.stream.resize(n);
  a.kind.resize(n);
  a.category.resize(n);
  a.start_ns.resize(n);
  a.end_ns.resize(n);
  a.name_id.resize(n);
  a.correlation.resize(n);
  a.step.resize(n);
  for (size_t i = 0; i < n; ++i) {
    size_t k = row_of[i];
    a.rank[k] = rank;
    a.device[k] = p % 2;
    a.stream[k] = int32_t(7 + i % 3);
    a.kind[k] = uint8_t(i % 4 == 0 ? Kind::Kernel : Kind::Memcpy);
    a.category[k] = uint8_t(i % 4 == 0 ? Category::Communication : Category::Memory);
    a.start_ns[k] = 1000 * int64_t(i / 3) + (i % 5 == 0 ? 0 : 1);  // ties on start_ns
    a.end_ns[k] = a.start_ns[k] + 400 + int64_t(i % 7);
    a.name_id[k] =
        s.strings.intern(i % 3 ? "shared_kernel_" + std::to_string(i % 11)
                               : "p" + std::to_string(p) + "_kernel_" + std::to_string(i % 4));
    a.correlation[k] = int64_t(rank) * 1000000 + int64_t(i);
    a.step[k] = int32_t(i / 100);
    if (i % 4 == 0) {
      NcclInfo& c = s.nccl;
      bool p2p = i % 8 == 0;
      c.activity.push_back(k);
      c.collective_id.push_back(s.strings.intern(p2p ? "send" : "allreduce"));
      c.seq.push_back(int64_t(i / 4));
      c.pg_name_id.push_back(s.strings.intern("0"));
      c.pg_desc_id.push_back(s.strings.intern("default_pg"));
      c.pg_ranks_id.push_back(s.strings.intern("[0, 2, 4, 6]"));
      c.group_size.push_back(np);
      c.in_nelems.push_back(int64_t(i));
      c.out_nelems.push_back(int64_t(i));
      c.msg_bytes.push_back(4 * int64_t(i));
      c.dtype_id.push_back(s.strings.intern(p % 2 ? "BFloat16" : "Float"));
      c.comm_hash.push_back(0x9e3779b97f4a7c15ull ^ uint64_t(p2p ? 77 : 1));
      c.peer.push_back(p2p ? rank_of((p + 1) % np, np) : -1);
      c.comm_rank.push_back(p);
      c.algo_id.push_back(s.strings.intern(p2p ? "" : "RING"));
      c.proto_id.push_back(s.strings.intern(p % 2 ? "LL" : "SIMPLE"));
      c.n_channels.push_back(int32_t(i % 4));
    }
  }
  // GPU memory in use (schema 2): a few steps per device, out of order (must be sorted).
  for (int i = 5; i >= 0; --i) {
    Counters& k = s.counters;
    k.rank.push_back(rank);
    k.device.push_back(i % 2);
    k.name_id.push_back(s.strings.intern("gpu_memory_allocated_bytes"));
    k.ts_ns.push_back(1000 * i + p);
    k.value.push_back(int64_t(i) << 20);
  }
  const size_t nl = p == 1 ? 3 : n;  // the rank without activities still launched something
  for (size_t i = 0; i < nl; ++i) {
    LaunchCalls& l = s.launches;
    l.rank.push_back(rank);
    l.pid.push_back(4000 + p);
    l.tid.push_back(5000 + int64_t(i % 2));
    l.start_ns.push_back(int64_t(nl - i) * 100);  // reverse order: must be sorted
    l.end_ns.push_back(int64_t(nl - i) * 100 + 30);
    l.name_id.push_back(s.strings.intern(i % 2 ? "cudaLaunchKernel" : "cudaMemcpyAsync"));
    l.correlation.push_back(int64_t(rank) * 1000000 + int64_t(i));
    l.step.push_back(0);
  }
  for (int k = 0; k < 2 + p; ++k) {
    Annotations& an = s.annotations;
    an.rank.push_back(rank);
    an.kind.push_back(uint8_t(k == 0 ? AnnotationKind::Step : AnnotationKind::Nvtx));
    an.pid.push_back(4000 + p);
    an.tid.push_back(5000);
    an.start_ns.push_back(10 * (5 - k));
    an.end_ns.push_back(100000);
    an.name_id.push_back(
        s.strings.intern(k == 0 ? "ProfilerStep#0" : "nvtx_range_" + std::to_string(k)));
    an.step.push_back(k == 0 ? 0 : kNoStep);
  }
  // PyTorch ops (/ops, an optional table): out of order, none on process 1.
  for (int k = p == 1 ? 0 : 3 + p; k > 0; --k) {
    Ops& o = s.ops;
    o.rank.push_back(rank);
    o.pid.push_back(4000 + p);
    o.tid.push_back(5000);
    o.start_ns.push_back(100 * k);
    o.end_ns.push_back(100 * k + 50);
    o.name_id.push_back(s.strings.intern(k % 2 ? "aten::mm" : "aten::op_of_" + std::to_string(p)));
    o.external_id.push_back(k);
    o.correlation.push_back(int64_t(rank) * 1000000 + k);
    o.dims_id.push_back(s.strings.intern("[[" + std::to_string(k) + ", 4]]"));
    o.types_id.push_back(s.strings.intern("['float']"));
    o.concrete_id.push_back(0);
  }
  return s;
}

std::vector<Store> all_parts(int np) {
  std::vector<Store> v;
  for (int p = 0; p < np; ++p) v.push_back(make_part(p, np));
  return v;
}

template <class T>
void expect_col(const std::vector<T>& x, const std::vector<T>& y, const char* what) {
  ASSERT_EQ(x.size(), y.size()) << what;
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], y[i]) << what << " row " << i;
}

// Id columns compared by the strings they name.
void expect_names(const Store& x, const std::vector<uint32_t>& ix, const Store& y,
                  const std::vector<uint32_t>& iy, const char* what) {
  ASSERT_EQ(ix.size(), iy.size()) << what;
  for (size_t i = 0; i < ix.size(); ++i)
    ASSERT_EQ(x.strings.at(ix[i]), y.strings.at(iy[i])) << what << " row " << i;
}

void expect_same(const Store& x, const Store& y) {
  EXPECT_EQ(x.attrs.schema_version, y.attrs.schema_version);
  EXPECT_EQ(x.attrs.tool_version, y.attrs.tool_version);
  EXPECT_EQ(x.attrs.produced_by, y.attrs.produced_by);
  EXPECT_EQ(x.attrs.command_line, y.attrs.command_line);
  EXPECT_EQ(x.attrs.created_utc, y.attrs.created_utc);
  EXPECT_EQ(x.attrs.clock_domain, y.attrs.clock_domain);
  EXPECT_EQ(x.attrs.emulated, y.attrs.emulated);
  // Strings by value (the id columns below) and, stronger, the same table in the same order.
  EXPECT_EQ(x.strings.all(), y.strings.all());

  const Activities &a = x.activities, &b = y.activities;
  expect_col(a.rank, b.rank, "activities.rank");
  expect_col(a.device, b.device, "activities.device");
  expect_col(a.stream, b.stream, "activities.stream");
  expect_col(a.kind, b.kind, "activities.kind");
  expect_col(a.category, b.category, "activities.category");
  expect_col(a.start_ns, b.start_ns, "activities.start_ns");
  expect_col(a.end_ns, b.end_ns, "activities.end_ns");
  expect_names(x, a.name_id, y, b.name_id, "activities.name_id");
  expect_col(a.correlation, b.correlation, "activities.correlation");
  expect_col(a.step, b.step, "activities.step");

  const LaunchCalls &l = x.launches, &m = y.launches;
  expect_col(l.rank, m.rank, "launches.rank");
  expect_col(l.pid, m.pid, "launches.pid");
  expect_col(l.tid, m.tid, "launches.tid");
  expect_col(l.start_ns, m.start_ns, "launches.start_ns");
  expect_col(l.end_ns, m.end_ns, "launches.end_ns");
  expect_names(x, l.name_id, y, m.name_id, "launches.name_id");
  expect_col(l.correlation, m.correlation, "launches.correlation");
  expect_col(l.step, m.step, "launches.step");

  const Annotations &n = x.annotations, &o = y.annotations;
  expect_col(n.rank, o.rank, "annotations.rank");
  expect_col(n.kind, o.kind, "annotations.kind");
  expect_col(n.pid, o.pid, "annotations.pid");
  expect_col(n.tid, o.tid, "annotations.tid");
  expect_col(n.start_ns, o.start_ns, "annotations.start_ns");
  expect_col(n.end_ns, o.end_ns, "annotations.end_ns");
  expect_names(x, n.name_id, y, o.name_id, "annotations.name_id");
  expect_col(n.step, o.step, "annotations.step");

  const NcclInfo &c = x.nccl, &d = y.nccl;
  expect_col(c.activity, d.activity, "nccl.activity");
  expect_names(x, c.collective_id, y, d.collective_id, "nccl.collective_id");
  expect_col(c.seq, d.seq, "nccl.seq");
  expect_names(x, c.pg_name_id, y, d.pg_name_id, "nccl.pg_name_id");
  expect_names(x, c.pg_desc_id, y, d.pg_desc_id, "nccl.pg_desc_id");
  expect_names(x, c.pg_ranks_id, y, d.pg_ranks_id, "nccl.pg_ranks_id");
  expect_col(c.group_size, d.group_size, "nccl.group_size");
  expect_col(c.in_nelems, d.in_nelems, "nccl.in_nelems");
  expect_col(c.out_nelems, d.out_nelems, "nccl.out_nelems");
  expect_col(c.msg_bytes, d.msg_bytes, "nccl.msg_bytes");
  expect_names(x, c.dtype_id, y, d.dtype_id, "nccl.dtype_id");
  expect_col(c.comm_hash, d.comm_hash, "nccl.comm_hash");
  expect_col(c.peer, d.peer, "nccl.peer");
  expect_col(c.comm_rank, d.comm_rank, "nccl.comm_rank");
  expect_names(x, c.algo_id, y, d.algo_id, "nccl.algo_id");
  expect_names(x, c.proto_id, y, d.proto_id, "nccl.proto_id");
  expect_col(c.n_channels, d.n_channels, "nccl.n_channels");

  const Counters &kx = x.counters, &ky = y.counters;
  EXPECT_EQ(kx.size(), ky.size());
  expect_col(kx.rank, ky.rank, "counters.rank");
  expect_col(kx.device, ky.device, "counters.device");
  expect_names(x, kx.name_id, y, ky.name_id, "counters.name_id");
  expect_col(kx.ts_ns, ky.ts_ns, "counters.ts_ns");
  expect_col(kx.value, ky.value, "counters.value");

  const Ops &ox = x.ops, &oy = y.ops;
  expect_col(ox.rank, oy.rank, "ops.rank");
  expect_col(ox.pid, oy.pid, "ops.pid");
  expect_col(ox.tid, oy.tid, "ops.tid");
  expect_col(ox.start_ns, oy.start_ns, "ops.start_ns");
  expect_col(ox.end_ns, oy.end_ns, "ops.end_ns");
  expect_names(x, ox.name_id, y, oy.name_id, "ops.name_id");
  expect_col(ox.external_id, oy.external_id, "ops.external_id");
  expect_col(ox.correlation, oy.correlation, "ops.correlation");
  expect_names(x, ox.dims_id, y, oy.dims_id, "ops.dims_id");
  expect_names(x, ox.types_id, y, oy.types_id, "ops.types_id");
  expect_names(x, ox.concrete_id, y, oy.concrete_id, "ops.concrete_id");

  ASSERT_EQ(x.ranks.size(), y.ranks.size());
  for (size_t i = 0; i < x.ranks.size(); ++i) {
    const RankInfo &r = x.ranks[i], &q = y.ranks[i];
    EXPECT_EQ(r.rank, q.rank);
    EXPECT_EQ(r.world_size, q.world_size);
    EXPECT_EQ(r.host, q.host);
    EXPECT_EQ(r.devices, q.devices);
    EXPECT_EQ(r.device_name, q.device_name);
    EXPECT_EQ(r.source, q.source);
    EXPECT_EQ(r.base_time_ns, q.base_time_ns);
    EXPECT_EQ(r.clock_offset_ns, q.clock_offset_ns);
    EXPECT_EQ(r.clock_drift, q.clock_drift);
    EXPECT_EQ(r.clock_uncertainty_ns, q.clock_uncertainty_ns);
    EXPECT_EQ(r.clock_method, q.clock_method);
    EXPECT_EQ(r.emulated, q.emulated);
    EXPECT_EQ(r.events_total, q.events_total);
    EXPECT_EQ(r.events_malformed, q.events_malformed);
    EXPECT_EQ(r.events_ignored, q.events_ignored);
    EXPECT_EQ(r.records_dropped, q.records_dropped);
  }
}

// The error message write_store_parallel threw here ("(no error)" if none).
std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// Checks that every process saw the same string as rank 0.
void expect_same_everywhere(const std::string& mine, const char* what) {
  std::string root = bcast(mine);
  EXPECT_EQ(mine, root) << what << " differs on process " << world_rank();
}

std::vector<std::string> listing(const fs::path& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir)) v.push_back(e.path().filename().string());
  std::sort(v.begin(), v.end());
  return v;
}

// A scratch directory shared by all processes, made by rank 0.
class StoreMpi : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string d;
    if (world_rank() == 0) {
      std::string tmpl = (fs::temp_directory_path() / "kernalyse-mpi-XXXXXX").string();
      if (mkdtemp(tmpl.data())) d = tmpl;
    }
    d = bcast(d);
    ASSERT_FALSE(d.empty());
    dir_ = d;
  }
  void TearDown() override {
    MPI_Barrier(MPI_COMM_WORLD);
    if (world_rank() == 0) fs::remove_all(dir_);
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

}  // namespace

TEST_F(StoreMpi, MatchesSerialWriteOfMergedParts) {
  const int me = world_rank(), np = world_size();
  ParallelWriteOptions opt;
  opt.path = path("run.h5");
  std::string got = write_store_parallel(make_part(me, np), MPI_COMM_WORLD, opt);
  EXPECT_EQ(got, opt.path);
  expect_same_everywhere(got, "returned path");
  if (me == 0) {
    write_store(merge_stores(all_parts(np)), path("serial.h5"));
    Store par = read_store(got), ser = read_store(path("serial.h5"));
    // The data the test means to exercise is really there.
    EXPECT_EQ(par.ranks.size(), size_t(np));
    EXPECT_GT(par.nccl.size(), 0u);
    EXPECT_EQ(par.counters.size(), size_t(6 * np));
    EXPECT_GT(par.ops.size(), 0u);  // /ops, written by the processes that have rows for it
    EXPECT_NE(std::find(par.nccl.peer.begin(), par.nccl.peer.end(), -1), par.nccl.peer.end());
    EXPECT_NE(
        std::find_if(par.nccl.peer.begin(), par.nccl.peer.end(), [](int32_t x) { return x >= 0; }),
        par.nccl.peer.end());
    EXPECT_TRUE(par.attrs.emulated);
    EXPECT_EQ(par.attrs.produced_by, "test part of process " + std::to_string(np - 1));  // rank 0
    expect_same(par, ser);
    EXPECT_EQ(listing(dir_), (std::vector<std::string>{"run.h5", "serial.h5"}));  // no temp file
    // The serial tools read it; h5py too, columns listed in the serial writer's order.
    const std::string dump = "h5dump -H '" + got + "' > '" + path("dump.txt") + "' 2>&1";
    EXPECT_EQ(std::system(dump.c_str()), 0);
    std::ifstream in(path("dump.txt"));
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    EXPECT_NE(text.find("DATASET \"comm_hash\""), std::string::npos) << text.substr(0, 2000);
    EXPECT_NE(text.find("H5T_STRING"), std::string::npos);
    if (std::system("/usr/bin/python3 -c 'import h5py' >/dev/null 2>&1") == 0) {
      std::string hosts;  // in rank order: rank 0 is process np - 1, then processes 0, 1, ...
      for (int q = -1; q < np - 1; ++q)
        hosts += "'node" + std::to_string((q < 0 ? np - 1 : q) / 2) + "', ";
      const std::string py =
          "/usr/bin/python3 -c \"import h5py, sys\n"
          "a, b = (h5py.File(p, 'r') for p in sys.argv[1:])\n"
          "for g in ('activities', 'launches', 'annotations', 'nccl', 'counters', 'ops', "
          "'ranks'):\n"
          "    assert list(a[g]) == list(b[g]), (g, list(a[g]), list(b[g]))\n"
          "assert list(a['strings'].asstr()[:]) == list(b['strings'].asstr()[:])\n"
          "assert list(a['ranks']['host'].asstr()[:]) == [" +
          hosts +
          "]\n"
          "\" '" +
          got + "' '" + path("serial.h5") + "'";
      EXPECT_EQ(std::system(py.c_str()), 0);
    }
  }
}

// Parts already in merge_stores form (sorted, complete: what a collector hands over) take the
// writer's no-copy path; the file must be the same.
TEST_F(StoreMpi, MatchesSerialWriteOfSortedParts) {
  const int me = world_rank(), np = world_size();
  auto sorted_part = [&](int p) {
    std::vector<Store> one;
    one.push_back(make_part(p, np));
    return merge_stores(std::move(one));
  };
  ParallelWriteOptions opt;
  opt.path = path("run.h5");
  write_store_parallel(sorted_part(me), MPI_COMM_WORLD, opt);
  if (me == 0) {
    std::vector<Store> parts;
    for (int p = 0; p < np; ++p) parts.push_back(sorted_part(p));
    write_store(merge_stores(std::move(parts)), path("serial.h5"));
    Store par = read_store(opt.path);
    EXPECT_GT(par.nccl.size(), 0u);
    expect_same(par, read_store(path("serial.h5")));
  }
}

TEST_F(StoreMpi, AllPartsEmpty) {
  const int me = world_rank(), np = world_size();
  Store s;
  s.attrs.created_utc = "2024-01-01T00:00:00Z";
  RankInfo ri;
  ri.rank = 10 * (np - me);  // descending: rank order is the reverse of communicator order
  ri.host = me % 2 ? "" : "h";
  s.ranks.push_back(ri);
  ParallelWriteOptions opt;
  opt.path = path("empty.h5");
  write_store_parallel(s, MPI_COMM_WORLD, opt);
  if (me == 0) {
    std::vector<Store> parts;
    for (int p = 0; p < np; ++p) {
      Store q = s;
      q.ranks[0].rank = 10 * (np - p);
      q.ranks[0].host = p % 2 ? "" : "h";
      parts.push_back(std::move(q));
    }
    write_store(merge_stores(std::move(parts)), path("serial.h5"));
    Store par = read_store(opt.path);
    EXPECT_EQ(par.activities.size(), 0u);
    ASSERT_EQ(par.ranks.size(), size_t(np));
    EXPECT_EQ(par.ranks.front().rank, 10);
    expect_same(par, read_store(path("serial.h5")));
    // No process has /ops rows: no /ops group, as the serial writer (a collector's store).
    for (const char* f : {"empty.h5", "serial.h5"}) {
      const std::string ls = "h5ls '" + path(f) + "' > '" + path("ls.txt") + "' 2>&1";
      EXPECT_EQ(std::system(ls.c_str()), 0);
      std::ifstream in(path("ls.txt"));
      std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      EXPECT_NE(text.find("activities"), std::string::npos) << f << ": " << text;
      EXPECT_EQ(text.find("ops"), std::string::npos) << f << ": " << text;
    }
  }
}

TEST_F(StoreMpi, ExistingFileGetsTheNextFreeNameOrIsReplacedWithForce) {
  const int me = world_rank(), np = world_size();
  const std::string p = path("run.h5");
  if (me == 0) std::ofstream(p) << "not a store";
  MPI_Barrier(MPI_COMM_WORLD);
  ParallelWriteOptions opt;
  opt.path = p;
  std::string first = write_store_parallel(make_part(me, np), MPI_COMM_WORLD, opt);
  EXPECT_EQ(first, path("run-1.h5"));
  std::string second = write_store_parallel(make_part(me, np), MPI_COMM_WORLD, opt);
  EXPECT_EQ(second, path("run-2.h5"));

  opt.pick_free_name = false;
  std::string err = error_of([&] { write_store_parallel(make_part(me, np), MPI_COMM_WORLD, opt); });
  EXPECT_EQ(err, p + ": exists (use --force to replace it)");
  expect_same_everywhere(err, "error");

  opt.force = true;
  EXPECT_EQ(write_store_parallel(make_part(me, np), MPI_COMM_WORLD, opt), p);
  if (me == 0) {
    EXPECT_TRUE(is_hdf5_file(p));
    EXPECT_EQ(read_store(p).activities.size(), read_store(first).activities.size());
    EXPECT_EQ(listing(dir_), (std::vector<std::string>{"run-1.h5", "run-2.h5", "run.h5"}));
  }
  // A name without an extension.
  opt.force = false;
  opt.pick_free_name = true;
  opt.path = path("plain");
  EXPECT_EQ(write_store_parallel(Store(), MPI_COMM_WORLD, opt), path("plain"));
  EXPECT_EQ(write_store_parallel(Store(), MPI_COMM_WORLD, opt), path("plain-1"));
}

TEST_F(StoreMpi, UnwritableDirectoryFailsEverywhereAndLeavesNothing) {
  const int me = world_rank(), np = world_size();
  ParallelWriteOptions opt;
  opt.path = path("missing/run.h5");
  std::string err = error_of([&] { write_store_parallel(make_part(me, np), MPI_COMM_WORLD, opt); });
  EXPECT_EQ(err, "cannot create " + opt.path + ": No such file or directory");
  expect_same_everywhere(err, "error");

  // A message longer than one broadcast buffer still arrives whole everywhere.
  std::string deep = path("missing");
  while (deep.size() < 3000) deep += "/deeper";
  opt.path = deep + "/run.h5";
  err = error_of([&] { write_store_parallel(make_part(me, np), MPI_COMM_WORLD, opt); });
  EXPECT_EQ(err, "cannot create " + opt.path + ": No such file or directory");
  expect_same_everywhere(err, "error");

  if (me == 0) std::ofstream(path("file")) << "x";
  MPI_Barrier(MPI_COMM_WORLD);
  opt.path = path("file/run.h5");
  err = error_of([&] { write_store_parallel(make_part(me, np), MPI_COMM_WORLD, opt); });
  EXPECT_EQ(err, "cannot create " + opt.path + ": Not a directory");
  expect_same_everywhere(err, "error");

  // Permission bits only stop non-root users (root bypasses them).
  if (me == 0) fs::create_directory(path("ro"));
  int root = geteuid() == 0;
  MPI_Bcast(&root, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (!root) {
    if (me == 0) fs::permissions(path("ro"), fs::perms::owner_read | fs::perms::owner_exec);
    MPI_Barrier(MPI_COMM_WORLD);
    opt.path = path("ro/run.h5");
    err = error_of([&] { write_store_parallel(make_part(me, np), MPI_COMM_WORLD, opt); });
    EXPECT_EQ(err, "cannot create " + opt.path + ": Permission denied");
    expect_same_everywhere(err, "error");
    if (me == 0) fs::permissions(path("ro"), fs::perms::owner_all);
  }
  // A directory in the way, even with force.
  MPI_Barrier(MPI_COMM_WORLD);
  opt.path = path("ro");
  opt.force = true;
  err = error_of([&] { write_store_parallel(make_part(me, np), MPI_COMM_WORLD, opt); });
  EXPECT_EQ(err, opt.path + ": is a directory");
  expect_same_everywhere(err, "error");

  MPI_Barrier(MPI_COMM_WORLD);
  if (me == 0) {
    EXPECT_EQ(listing(dir_), (std::vector<std::string>{"file", "ro"}));
    EXPECT_TRUE(fs::is_empty(path("ro")));
  }
}

TEST_F(StoreMpi, BadPartOnOneProcessFailsEverywhereAndLeavesNothing) {
  const int me = world_rank(), np = world_size();
  const int bad = np - 1;
  Store s = make_part(me, np);
  if (me == bad) s.launches.name_id[0] = 99999;
  ParallelWriteOptions opt;
  opt.path = path("run.h5");
  std::string err = error_of([&] { write_store_parallel(s, MPI_COMM_WORLD, opt); });
  EXPECT_EQ(err, opt.path + ": spool/rank" + std::to_string(rank_of(bad, np)) +
                     ": string id 99999 out of range (" +
                     std::to_string(make_part(bad, np).strings.size()) + " strings)");
  expect_same_everywhere(err, "error");

  // Inconsistent column lengths (a process whose store lost a column's tail).
  s = make_part(me, np);
  if (me == 0) s.nccl.msg_bytes.pop_back();  // process 0 always has NCCL rows
  err = error_of([&] { write_store_parallel(s, MPI_COMM_WORLD, opt); });
  EXPECT_NE(err.find("nccl.msg_bytes has"), std::string::npos) << err;
  expect_same_everywhere(err, "error");

  // Two processes claiming the same rank.
  if (np < 2) return;
  s = make_part(me, np);
  if (me == 1) {
    s.ranks[0].rank = rank_of(0, np);
    s.launches.rank.assign(s.launches.size(), rank_of(0, np));
    s.annotations.rank.assign(s.annotations.size(), rank_of(0, np));
  }
  err = error_of([&] { write_store_parallel(s, MPI_COMM_WORLD, opt); });
  EXPECT_EQ(err, opt.path + ": duplicate rank " + std::to_string(rank_of(0, np)) + ": spool/rank" +
                     std::to_string(rank_of(0, np)) + " and spool/rank" +
                     std::to_string(rank_of(1, np)));
  expect_same_everywhere(err, "error");
  MPI_Barrier(MPI_COMM_WORLD);
  if (me == 0) {
    EXPECT_TRUE(listing(dir_).empty());
  }
}

// A listener for ranks other than 0: prints failures only, prefixed with the rank.
class FailurePrinter : public ::testing::EmptyTestEventListener {
  void OnTestPartResult(const ::testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[process %d] %s:%d: %s\n", world_rank(),
                   r.file_name() ? r.file_name() : "?", r.line_number(), r.summary());
  }
};

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (world_rank() != 0) {
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter);
  }
  int rc = RUN_ALL_TESTS(), worst = 0;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
