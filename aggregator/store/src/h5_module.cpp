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
void slices_read(void* s, size_t k, Store& into) { static_cast<RankSlices*>(s)->read(k, into); }
void slices_for_each(void* s, const std::function<void(const Store&)>& f) {
  static_cast<RankSlices*>(s)->for_each(f);
}
void slices_narrow(void* s, const ColumnSelection& sel) {
  static_cast<RankSlices*>(s)->narrow(sel);
}

constexpr H5Module kModule{kH5ModuleVersion, write_store,   read_store,  slices_open,
                           slices_close,     slices_header, slices_size, slices_read,
                           slices_for_each,  slices_narrow};

}  // namespace
}  // namespace kernalyse::detail

extern "C" __attribute__((visibility("default"))) const kernalyse::detail::H5Module*
kernalyse_h5_module() {
  return &kernalyse::detail::kModule;
}
