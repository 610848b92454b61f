// Internal HDF5 helpers shared by the serial store writer/reader (store_io.cpp) and the
// collective writer (store_mpi.cpp): error handling, handle ownership, column types and the
// dataset/attribute creation that defines the on-disk layout (docs/store.md; the columns come
// from store.h's lists). Not installed; include only from aggregator/src.
#pragma once

#include <hdf5.h>

#include <algorithm>
#include <cstdint>
#include <ctime>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernalyse/store.h"

#ifndef KERNALYSE_VERSION
#define KERNALYSE_VERSION "unknown"
#endif

namespace kernalyse::detail {

// Rows per chunk: big enough that whole-column reads are a few large I/Os, small enough to leave
// room for later compression or appends. Chunks larger than HDF5's 1 MiB chunk cache bypass it,
// so reads go straight into the caller's buffer.
inline constexpr size_t kChunkRows = size_t{1} << 20;
inline constexpr size_t kStringChunkRows = size_t{1} << 16;

// Internal failure carrying only the reason; the public entry points prefix the path.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The most specific message on HDF5's error stack. Must run right after the failing call:
// the next API call clears the stack.
inline std::string h5_reason() {
  std::string out;
  H5Ewalk2(
      H5E_DEFAULT, H5E_WALK_UPWARD,
      [](unsigned, const H5E_error2_t* e, void* data) -> herr_t {
        auto* s = static_cast<std::string*>(data);
        if (s->empty() && e->desc && *e->desc) *s = e->desc;
        return 0;
      },
      &out);
  std::replace(out.begin(), out.end(), '\n', ' ');  // errors are one line
  return out.empty() ? std::string("HDF5 error") : out;
}

[[noreturn]] inline void fail(const std::string& what) { throw Failure(what + ": " + h5_reason()); }

inline hid_t h5(hid_t id, const std::string& what) {
  if (id < 0) fail(what);
  return id;
}

inline void ok(herr_t rc, const std::string& what) {
  if (rc < 0) fail(what);
}

// Owns one HDF5 identifier.
class Handle {
 public:
  using Closer = herr_t (*)(hid_t);
  Handle(hid_t id, Closer close) : id_(id), close_(close) {}
  Handle(Handle&& o) noexcept : id_(std::exchange(o.id_, -1)), close_(o.close_) {}
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
  Handle& operator=(Handle&&) = delete;
  ~Handle() { close(); }
  operator hid_t() const { return id_; }
  herr_t close() {
    herr_t rc = id_ >= 0 ? close_(id_) : 0;
    id_ = -1;
    return rc;
  }

 private:
  hid_t id_;
  Closer close_;
};

// HDF5 prints its error stack to stderr by default; we turn failures into one-line Errors
// instead. Restored afterwards so other HDF5 users in the process keep their settings.
class QuietErrors {
 public:
  QuietErrors() {
    // No library cleanup at exit: after a failed write (disk full) HDF5 1.10's atexit handler
    // crashes on the file it could not close. We close every file ourselves. Only effective
    // when we are the first HDF5 user in the process; otherwise a harmless no-op.
    H5dont_atexit();
    H5Eget_auto2(H5E_DEFAULT, &func_, &data_);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  }
  ~QuietErrors() { H5Eset_auto2(H5E_DEFAULT, func_, data_); }
  QuietErrors(const QuietErrors&) = delete;
  QuietErrors& operator=(const QuietErrors&) = delete;

 private:
  H5E_auto2_t func_ = nullptr;
  void* data_ = nullptr;
};

// Memory (native) and file (explicit little-endian) types per column element type.
template <class T>
struct H5Traits;
template <>
struct H5Traits<uint8_t> {
  static hid_t mem() { return H5T_NATIVE_UINT8; }
  static hid_t file() { return H5T_STD_U8LE; }
  static constexpr H5T_class_t cls = H5T_INTEGER;
};
template <>
struct H5Traits<int32_t> {
  static hid_t mem() { return H5T_NATIVE_INT32; }
  static hid_t file() { return H5T_STD_I32LE; }
  static constexpr H5T_class_t cls = H5T_INTEGER;
};
template <>
struct H5Traits<uint32_t> {
  static hid_t mem() { return H5T_NATIVE_UINT32; }
  static hid_t file() { return H5T_STD_U32LE; }
  static constexpr H5T_class_t cls = H5T_INTEGER;
};
template <>
struct H5Traits<int64_t> {
  static hid_t mem() { return H5T_NATIVE_INT64; }
  static hid_t file() { return H5T_STD_I64LE; }
  static constexpr H5T_class_t cls = H5T_INTEGER;
};
template <>
struct H5Traits<uint64_t> {
  static hid_t mem() { return H5T_NATIVE_UINT64; }
  static hid_t file() { return H5T_STD_U64LE; }
  static constexpr H5T_class_t cls = H5T_INTEGER;
};
template <>
struct H5Traits<double> {
  static hid_t mem() { return H5T_NATIVE_DOUBLE; }
  static hid_t file() { return H5T_IEEE_F64LE; }
  static constexpr H5T_class_t cls = H5T_FLOAT;
};

// Variable-length UTF-8 string type (h5py reads it as str via .asstr()).
inline Handle vlen_string_type(H5T_cset_t cset = H5T_CSET_UTF8) {
  Handle t(h5(H5Tcopy(H5T_C_S1), "cannot create string type"), H5Tclose);
  ok(H5Tset_size(t, H5T_VARIABLE), "cannot create string type");
  ok(H5Tset_cset(t, cset), "cannot create string type");
  return t;
}

// Serial (sec2) file access, also in the parallel HDF5 build: no MPI_Init needed.
inline Handle file_access() {
  Handle fapl(h5(H5Pcreate(H5P_FILE_ACCESS), "cannot create property list"), H5Pclose);
  ok(H5Pset_fapl_sec2(fapl), "cannot select the sec2 driver");
  // Lock where the file system supports it, carry on where it does not (e.g. some Lustre mounts).
  ok(H5Pset_file_locking(fapl, true, true), "cannot set file locking");
  return fapl;
}

// ---------------------------------------------------------------------------------------------
// Layout: what every writer creates, in this order.

inline Handle create_group(hid_t loc, const char* name) {
  Handle gcpl(h5(H5Pcreate(H5P_GROUP_CREATE), "cannot create property list"), H5Pclose);
  // Track creation order so tools that honour it list columns in struct order.
  ok(H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED | H5P_CRT_ORDER_INDEXED),
     "cannot set link creation order");
  return Handle(h5(H5Gcreate2(loc, name, H5P_DEFAULT, gcpl, H5P_DEFAULT),
                   std::string("cannot create group /") + name),
                H5Gclose);
}

// Chunked, extendible (max size unlimited) so that empty tables are plain zero-length datasets.
inline Handle create_dataset(hid_t loc, const std::string& what, const char* name, hid_t ftype,
                             size_t rows, size_t chunk_cap) {
  hsize_t dims[1] = {rows};
  hsize_t maxdims[1] = {H5S_UNLIMITED};
  hsize_t chunk[1] = {std::clamp<hsize_t>(rows, 1, chunk_cap)};
  Handle space(h5(H5Screate_simple(1, dims, maxdims), "cannot create dataspace for " + what),
               H5Sclose);
  Handle dcpl(h5(H5Pcreate(H5P_DATASET_CREATE), "cannot create property list"), H5Pclose);
  ok(H5Pset_chunk(dcpl, 1, chunk), "cannot set chunking for " + what);
  // Every element is written; pre-filling chunks would only cost time. (HDF5 refuses
  // FILL_TIME_NEVER for variable-length types, whose fill value is a null pointer anyway.)
  if (H5Tis_variable_str(ftype) <= 0)
    ok(H5Pset_fill_time(dcpl, H5D_FILL_TIME_NEVER), "cannot set fill time for " + what);
  return Handle(h5(H5Dcreate2(loc, name, ftype, space, H5P_DEFAULT, dcpl, H5P_DEFAULT),
                   "cannot create dataset " + what),
                H5Dclose);
}

inline void write_attr_int(hid_t loc, const char* name, int32_t value) {
  Handle space(h5(H5Screate(H5S_SCALAR), "cannot create dataspace"), H5Sclose);
  Handle attr(h5(H5Acreate2(loc, name, H5T_STD_I32LE, space, H5P_DEFAULT, H5P_DEFAULT),
                 std::string("cannot create attribute ") + name),
              H5Aclose);
  ok(H5Awrite(attr, H5T_NATIVE_INT32, &value), std::string("cannot write attribute ") + name);
}

// Fixed-length, NUL-terminated UTF-8 (schema 3): the value lives in the object header itself, not
// in the global heap, which the reader could not screen for an attribute (docs/fuzzing.md).
inline void write_attr_str(hid_t loc, const char* name, const std::string& value) {
  Handle type(h5(H5Tcopy(H5T_C_S1), "cannot create string type"), H5Tclose);
  ok(H5Tset_size(type, value.size() + 1), "cannot create string type");
  ok(H5Tset_strpad(type, H5T_STR_NULLTERM), "cannot create string type");
  ok(H5Tset_cset(type, H5T_CSET_UTF8), "cannot create string type");
  Handle space(h5(H5Screate(H5S_SCALAR), "cannot create dataspace"), H5Sclose);
  Handle attr(h5(H5Acreate2(loc, name, type, space, H5P_DEFAULT, H5P_DEFAULT),
                 std::string("cannot create attribute ") + name),
              H5Aclose);
  ok(H5Awrite(attr, type, value.c_str()), std::string("cannot write attribute ") + name);
}

inline std::string utc_now() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

// The root group's attributes (docs/store.md "File attributes").
inline void write_file_attrs(hid_t file, const StoreAttrs& at) {
  write_attr_int(file, "schema_version", kSchemaVersion);
  write_attr_str(file, "tool_version",
                 at.tool_version.empty() ? KERNALYSE_VERSION : at.tool_version);
  write_attr_str(file, "produced_by", at.produced_by);
  write_attr_str(file, "command_line", at.command_line);
  write_attr_str(file, "created_utc", at.created_utc.empty() ? utc_now() : at.created_utc);
  write_attr_str(file, "clock_domain", at.clock_domain);
  write_attr_int(file, "emulated", at.emulated ? 1 : 0);
}

// ---------------------------------------------------------------------------------------------
// Serial (one process) writes of whole datasets

template <class T>
void write_column(hid_t group, const std::string& table, const char* name, const std::vector<T>& v,
                  size_t rows) {
  const std::string what = "/" + table + "/" + name;
  if (v.size() != rows)
    throw Failure("column " + what + " has " + std::to_string(v.size()) + " rows, expected " +
                  std::to_string(rows));
  Handle ds = create_dataset(group, what, name, H5Traits<T>::file(), rows, kChunkRows);
  if (rows)
    ok(H5Dwrite(ds, H5Traits<T>::mem(), H5S_ALL, H5S_ALL, H5P_DEFAULT, v.data()),
       "cannot write " + what);
}

// A variable-length string dataset. (Parallel HDF5 cannot write these, and allocates every
// dataset's storage early, so they are created and written by one process, serially.)
inline void write_strings(hid_t loc, const std::string& what, const char* name,
                          const std::vector<const char*>& ptrs) {
  Handle type = vlen_string_type();
  Handle ds = create_dataset(loc, what, name, type, ptrs.size(), kStringChunkRows);
  if (!ptrs.empty())
    ok(H5Dwrite(ds, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, ptrs.data()), "cannot write " + what);
}

// One whole table: its group and one dataset per column (none for an empty optional table).
// done(bytes) after each column, the bytes it holds in memory.
template <class Tab, class Done>
void write_table(hid_t file, const char* table, const Tab& t, Done&& done);

// The store's column lists (store.h: for_each_column, for_each_rank_field) define the datasets.
// /ops is written only when it has rows, by the serial writer (docs/store.md); the other tables
// always. Added columns and fields may be absent from older files.
inline bool table_optional(std::string_view table) { return table == "ops"; }

// The on-disk element type of a RankInfo field (bool → uint8).
template <class M>
using disk_type_t = std::conditional_t<std::is_same_v<M, bool>, uint8_t, M>;

template <class Tab, class Done>
void write_table(hid_t file, const char* table, const Tab& t, Done&& done) {
  const size_t n = t.size();
  // Optional tables are written only when there is something: stores without op shapes stay
  // exactly as before (and as the parallel writer, which never has ops, writes them).
  if (table_optional(table) && !n) return;
  Handle g = create_group(file, table);
  for_each_column(t, [&](const auto& def, const auto& col) {
    using T = typename std::decay_t<decltype(col)>::value_type;
    // A producer that does not know a column leaves it empty: store "unknown".
    if (col.empty() && n && !def.required())
      write_column(g, table, def.name, std::vector<T>(n, def.unknown), n);
    else
      write_column(g, table, def.name, col, n);
    done(static_cast<int64_t>(col.size() * sizeof(T)));
  });
}

// One numeric /ranks column extracted from RankInfo rows.
template <class M>
std::vector<disk_type_t<M>> rank_column(const std::vector<RankInfo>& r, M RankInfo::*field) {
  std::vector<disk_type_t<M>> col;
  col.reserve(r.size());
  for (const RankInfo& x : r) col.push_back(static_cast<disk_type_t<M>>(x.*field));
  return col;
}

// /strings: the interned strings, id = index.
inline void write_string_table(hid_t file, const StringTable& strings) {
  std::vector<const char*> ptrs;
  ptrs.reserve(strings.size());
  for (const std::string& str : strings.all()) ptrs.push_back(str.c_str());
  write_strings(file, "/strings", "strings", ptrs);
}

// /ranks: RankInfo is an array of structs in memory; transpose it into one column per field.
inline void write_ranks_group(hid_t file, const std::vector<RankInfo>& r) {
  const size_t n = r.size();
  Handle g = create_group(file, "ranks");
  for_each_rank_field([&](const auto& def, auto field) {
    if constexpr (std::is_same_v<std::decay_t<decltype(def.unknown)>, std::string>) {
      std::vector<const char*> col;
      col.reserve(n);
      for (const RankInfo& x : r) col.push_back((x.*field).c_str());
      write_strings(g, std::string("/ranks/") + def.name, def.name, col);
    } else {
      write_column(g, "ranks", def.name, rank_column(r, field), n);
    }
  });
}

}  // namespace kernalyse::detail
