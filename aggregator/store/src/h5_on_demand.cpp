// kernalyse-merge's store I/O: the functions of store_io.h forwarded to libkernalyse_h5.so
// (h5_module.h), loaded the first time a store is read or written. Linked instead of store_io.cpp
// into the targets that set KERNALYSE_H5_ON_DEMAND (aggregator/CMakeLists.txt); a run that only
// imports traces and analyses them loads neither libhdf5 nor libmpi (docs/benchmarks.md).

#include <string>

#include "h5_module.h"
#include "kernalyse/beside_tool.h"
#include "kernalyse/error.h"

namespace kernalyse {

namespace {

const detail::H5Module& load() {
  std::string path;
  auto* entry = reinterpret_cast<decltype(&kernalyse_h5_module)>(module_entry_beside_tool(
      KERNALYSE_H5_MODULE_FILE, "kernalyse_h5_module", "the store's HDF5 module", &path));
  const detail::H5Module* m = entry ? entry() : nullptr;
  if (!m || m->version != detail::kH5ModuleVersion)
    throw Error(path + ": not the HDF5 module of this build of kernalyse-merge");
  return *m;  // never unloaded: libhdf5 and libmpi stay loaded to the end of the process
}

const detail::H5Module& h5() {
  static const detail::H5Module& m = load();  // once, thread-safe; retried after a failure
  return m;
}

}  // namespace

void write_store(const Store& store, const std::string& path, const WriteOptions& opt) {
  h5().write_store(store, path, opt);
}

void write_store_world(const Store& local, const std::string& path, const WriteOptions& opt) {
  h5().write_world(local, path, opt);
}

Store read_store(const std::string& path, const ColumnSelection& sel) {
  return h5().read_store(path, sel);
}

struct RankSlices::Impl {
  void* slices = nullptr;  // the module's RankSlices
};

RankSlices::RankSlices(const std::string& path, const ColumnSelection& sel, const Spread* spread)
    : impl_(std::make_unique<Impl>()) {
  impl_->slices = h5().slices_open(path, sel, spread);
}

RankSlices::~RankSlices() {
  if (impl_->slices) h5().slices_close(impl_->slices);
}

const Store& RankSlices::header() const { return h5().slices_header(impl_->slices); }

size_t RankSlices::size() const { return h5().slices_size(impl_->slices); }

int32_t RankSlices::rank(size_t k) const { return h5().slices_rank(impl_->slices, k); }

Store RankSlices::read(size_t k) {
  Store s;
  read(k, s);
  return s;
}

void RankSlices::read(size_t k, Store& into) { h5().slices_read(impl_->slices, k, into); }

void RankSlices::for_each(const std::function<void(const Store&)>& f) {
  h5().slices_for_each(impl_->slices, f);
}

void RankSlices::narrow(const ColumnSelection& sel) { h5().slices_narrow(impl_->slices, sel); }

struct StoreStream::Impl {
  void* stream = nullptr;  // the module's StoreStream
};

StoreStream::StoreStream(const std::string& path, const WriteOptions& opt)
    : impl_(std::make_unique<Impl>()) {
  impl_->stream = h5().stream_open(path, opt);
}

StoreStream::~StoreStream() {
  if (impl_->stream) h5().stream_close(impl_->stream);
}

void StoreStream::begin(const std::string& table, size_t rows) {
  h5().stream_begin(impl_->stream, table, rows);
}

void StoreStream::append(const Store& batch) { h5().stream_append(impl_->stream, batch); }

size_t StoreStream::rows(const std::string& table) const {
  return h5().stream_rows(impl_->stream, table);
}

void StoreStream::commit(const Store& header) { h5().stream_commit(impl_->stream, header); }

}  // namespace kernalyse
