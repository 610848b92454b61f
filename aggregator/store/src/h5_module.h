// The table of entry points of libkernalyse_h5.so, the store's HDF5 and MPI code (store_io.cpp,
// h5raw.cpp, store_mpi.cpp) built as a module that kernalyse-merge loads on demand
// (h5_on_demand.cpp): Debian's parallel libhdf5 brings libmpi, libcurl and ~40 other shared
// libraries, ~15 ms of start-up, which a run that reads and writes no store does not pay
// (docs/benchmarks.md, "Start-up"). Every other program links store_io.cpp itself.
// kernalyse-merge code that needs MPI (an mpirun run's MPI_Init, communicators, collectives) goes
// behind this table too, as a new entry with the version raised: referring to an MPI symbol from
// the tool itself links libmpi back into every start (cli.test_startup fails then).
// Not installed; include only from aggregator/src.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include "kernalyse/store.h"
#include "kernalyse/store_io.h"

namespace kernalyse::detail {

// The module and kernalyse-merge are built together; the version guards against a module left
// over from another build.
inline constexpr int kH5ModuleVersion = 6;

struct H5Module {
  int version;
  void (*write_store)(const Store&, const std::string&, const WriteOptions&);
  Store (*read_store)(const std::string&, const ColumnSelection&);
  // RankSlices: the module's object, opaque to kernalyse-merge.
  void* (*slices_open)(const std::string&, const ColumnSelection&, const Spread*);
  void (*slices_close)(void*);
  const Store& (*slices_header)(const void*);
  size_t (*slices_size)(const void*);
  int32_t (*slices_rank)(const void*, size_t);
  void (*slices_read)(void*, size_t, Store&);
  void (*slices_for_each)(void*, const std::function<void(const Store&)>&);
  void (*slices_narrow)(void*, const ColumnSelection&);
  // StoreStream: likewise.
  void* (*stream_open)(const std::string&, const WriteOptions&);
  void (*stream_close)(void*);
  void (*stream_begin)(void*, const std::string&, size_t);
  void (*stream_append)(void*, const Store&);
  size_t (*stream_rows)(const void*, const std::string&);
  void (*stream_commit)(void*, const Store&);
  // write_store_world (store_mpi.cpp).
  void (*write_world)(const Store&, const std::string&, const WriteOptions&);
};

}  // namespace kernalyse::detail

// The module's one exported entry point (extern "C": found by name with dlsym).
extern "C" const kernalyse::detail::H5Module* kernalyse_h5_module();
