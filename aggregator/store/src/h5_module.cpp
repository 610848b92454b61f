// libkernalyse_h5.so's entry point (h5_module.h): the store functions of store_io.cpp behind one
// table.
#include "h5_module.h"

namespace kernalyse::detail {
namespace {

void* slices_open(const std::string& path, const ColumnSelection& sel, const Spread* spread) {
  return new RankSlices(path, sel, spread);
}
void slices_close(void* s) { delete static_cast<RankSlices*>(s); }
const Store& slices_header(const void* s) { return static_cast<const RankSlices*>(s)->header(); }
size_t slices_size(const void* s) { return static_cast<const RankSlices*>(s)->size(); }
int32_t slices_rank(const void* s, size_t k) { return static_cast<const RankSlices*>(s)->rank(k); }
void slices_read(void* s, size_t k, Store& into) { static_cast<RankSlices*>(s)->read(k, into); }
void slices_for_each(void* s, const std::function<void(const Store&)>& f) {
  static_cast<RankSlices*>(s)->for_each(f);
}
void slices_narrow(void* s, const ColumnSelection& sel) {
  static_cast<RankSlices*>(s)->narrow(sel);
}

void* stream_open(const std::string& path, const WriteOptions& opt) {
  return new StoreStream(path, opt);
}
void stream_close(void* s) { delete static_cast<StoreStream*>(s); }
void stream_begin(void* s, const std::string& table, size_t rows) {
  static_cast<StoreStream*>(s)->begin(table, rows);
}
void stream_append(void* s, const Store& batch) { static_cast<StoreStream*>(s)->append(batch); }
size_t stream_rows(const void* s, const std::string& table) {
  return static_cast<const StoreStream*>(s)->rows(table);
}
void stream_commit(void* s, const Store& header) { static_cast<StoreStream*>(s)->commit(header); }

constexpr H5Module kModule{kH5ModuleVersion, write_store,      read_store,    slices_open,
                           slices_close,     slices_header,    slices_size,   slices_rank,
                           slices_read,      slices_for_each,  slices_narrow, stream_open,
                           stream_close,     stream_begin,     stream_append, stream_rows,
                           stream_commit,    write_store_world};

}  // namespace
}  // namespace kernalyse::detail

extern "C" __attribute__((visibility("default"))) const kernalyse::detail::H5Module*
kernalyse_h5_module() {
  return &kernalyse::detail::kModule;
}
