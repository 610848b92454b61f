// Collective store write vs a plain parallel-HDF5 write of the same column bytes.
//
//   mpirun --allow-run-as-root --oversubscribe -n 4 build/bin/kernalyse_merge_bench
//       [--rows 2000000] [--reps 5] [--dir /tmp/kernalyse-merge-bench]
//
// Every process holds `rows` activity records (10 columns, 45 B/row) of its own rank, plus a
// RankInfo and ~1000 strings. Per repetition, in alternating order:
//   store: kernalyse::write_store_parallel (local prepare, string exchange, phase 1 collective
//          column writes, phase 2 strings/attributes on rank 0, rename);
//   raw:   H5Fcreate with the MPI-IO driver, the same 10 /activities columns as contiguous
//          datasets, one collective H5Dwrite each, H5Fclose; no strings, no metadata phase.
//   raw-chunked: the same with the store's chunk layout (1 Mi rows, fill time never).
// Times are the slowest process's, from a barrier to return; dirty pages are flushed (sync)
// and the previous files deleted before each write. Prints every repetition and the medians.
#include <hdf5.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "kernalyse/store.h"
#include "kernalyse/store_mpi.h"

using namespace kernalyse;

namespace {

double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

Store make_part(int me, int np, size_t rows) {
  Store s;
  s.attrs.produced_by = "kernalyse_merge_bench";
  s.attrs.created_utc = "2024-01-01T00:00:00Z";
  RankInfo ri;
  ri.rank = me;
  ri.world_size = np;
  ri.host = "bench-host";
  ri.source = "bench/rank" + std::to_string(me);
  s.ranks.push_back(ri);
  std::vector<uint32_t> names;
  for (int k = 0; k < 1000; ++k)  // half shared between ranks, half per rank
    names.push_back(
        s.strings.intern(k % 2 ? "kernel_shared_" + std::to_string(k)
                               : "kernel_r" + std::to_string(me) + "_" + std::to_string(k)));
  Activities& a = s.activities;
  a.reserve(rows);
  const size_t per_stream = rows / 4 + 1;
  for (size_t i = 0; i < rows; ++i) {
    // Sorted input, as a collector produces it: 4 streams, each in time order.
    const size_t st = i / per_stream, j = i % per_stream;
    a.rank.push_back(me);
    a.device.push_back(0);
    a.stream.push_back(int32_t(7 + st));
    a.kind.push_back(uint8_t(j % 3 ? Kind::Kernel : Kind::Memcpy));
    a.category.push_back(uint8_t(Category::Computation));
    a.start_ns.push_back(int64_t(1000 * j));
    a.end_ns.push_back(int64_t(1000 * j + 600));
    a.name_id.push_back(names[j % names.size()]);
    a.correlation.push_back(int64_t(i));
    a.step.push_back(int32_t(j / 100000));
  }
  return s;
}

void check(herr_t rc, const char* what) {
  if (rc < 0) {
    std::fprintf(stderr, "raw write: %s failed\n", what);
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
}

template <class T>
hid_t mem_type();
template <>
hid_t mem_type<uint8_t>() {
  return H5T_NATIVE_UINT8;
}
template <>
hid_t mem_type<int32_t>() {
  return H5T_NATIVE_INT32;
}
template <>
hid_t mem_type<uint32_t>() {
  return H5T_NATIVE_UINT32;
}
template <>
hid_t mem_type<int64_t>() {
  return H5T_NATIVE_INT64;
}

// The baseline: the activity columns, raw, one collective H5Dwrite each.
void raw_write(const Activities& a, const std::string& path, size_t offset, size_t total,
               bool chunked) {
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  check(H5Pset_fapl_mpio(fapl, MPI_COMM_WORLD, MPI_INFO_NULL), "fapl");
  hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl);
  check(file, "H5Fcreate");
  hid_t g = H5Gcreate2(file, "activities", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
  hid_t dxpl = H5Pcreate(H5P_DATASET_XFER);
  check(H5Pset_dxpl_mpio(dxpl, H5FD_MPIO_COLLECTIVE), "dxpl");
  auto column = [&](const char* name, const auto& col) {
    using T = typename std::decay_t<decltype(col)>::value_type;
    hsize_t dims[1] = {total}, maxdims[1] = {chunked ? H5S_UNLIMITED : total};
    hid_t space = H5Screate_simple(1, dims, maxdims);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    if (chunked) {
      hsize_t chunk[1] = {std::clamp<hsize_t>(total, 1, hsize_t{1} << 20)};
      check(H5Pset_chunk(dcpl, 1, chunk), "chunk");
    }
    check(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), "fill time");
    hid_t ds = H5Dcreate2(g, name, mem_type<T>(), space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    check(ds, "H5Dcreate2");
    hsize_t start[1] = {offset}, count[1] = {col.size()};
    check(H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr), "select");
    hid_t mspace = H5Screate_simple(1, count, nullptr);
    check(H5Dwrite(ds, mem_type<T>(), mspace, space, dxpl, col.data()), "H5Dwrite");
    H5Sclose(mspace);
    H5Dclose(ds);
    H5Pclose(dcpl);
    H5Sclose(space);
  };
  column("rank", a.rank);
  column("device", a.device);
  column("stream", a.stream);
  column("kind", a.kind);
  column("category", a.category);
  column("start_ns", a.start_ns);
  column("end_ns", a.end_ns);
  column("name_id", a.name_id);
  column("correlation", a.correlation);
  column("step", a.step);
  H5Pclose(dxpl);
  H5Gclose(g);
  check(H5Fclose(file), "H5Fclose");
  H5Pclose(fapl);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int me = 0, np = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &me);
  MPI_Comm_size(MPI_COMM_WORLD, &np);
  size_t rows = 2000000;
  int reps = 5;
  std::string dir = "/tmp/kernalyse-merge-bench";
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rows"))
      rows = std::stoull(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--reps"))
      reps = std::stoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--dir"))
      dir = argv[i + 1];
  }
  if (me == 0) std::filesystem::create_directories(dir);
  const Store part = make_part(me, np, rows);
  const std::string store_path = dir + "/store.h5", raw_path = dir + "/raw.h5";

  auto timed = [&](const char* which) {
    if (me == 0) {
      std::filesystem::remove(store_path);
      std::filesystem::remove(raw_path);
      ::sync();  // start every write with no dirty pages from the previous one
    }
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = now();
    if (!std::strcmp(which, "store")) {
      ParallelWriteOptions opt;
      opt.path = store_path;
      opt.force = true;
      write_store_parallel(part, MPI_COMM_WORLD, opt);
    } else {
      raw_write(part.activities, raw_path, size_t(me) * rows, size_t(np) * rows,
                !std::strcmp(which, "raw-chunked"));
    }
    double dt = now() - t0, worst = 0;
    MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return worst;
  };

  if (me == 0)
    std::printf("%d processes x %zu activity rows (%.0f MB of columns in all), %d repetitions\n",
                np, rows, double(np) * double(rows) * 45 / 1e6, reps);
  std::vector<double> t_store, t_raw, t_chunked;
  timed("raw");  // warm-up: MPI-IO and HDF5 initialisation, file system metadata
  for (int r = 0; r < reps; ++r) {
    double s, w, c;
    if (r % 2 == 0) {
      s = timed("store");
      w = timed("raw");
      c = timed("raw-chunked");
    } else {
      c = timed("raw-chunked");
      w = timed("raw");
      s = timed("store");
    }
    t_store.push_back(s);
    t_raw.push_back(w);
    t_chunked.push_back(c);
    if (me == 0)
      std::printf("rep %d: store %.3f s, raw %.3f s, raw-chunked %.3f s, store/raw %.2f\n", r, s, w,
                  c, s / w);
  }
  if (me == 0) {
    double ms = median(t_store), mw = median(t_raw), mc = median(t_chunked);
    std::printf(
        "median: store %.3f s, raw %.3f s, raw-chunked %.3f s; store/raw %.2f, "
        "store/raw-chunked %.2f\n",
        ms, mw, mc, ms / mw, ms / mc);
    std::filesystem::remove(store_path);
    std::filesystem::remove(raw_path);
  }
  MPI_Finalize();
  return 0;
}
