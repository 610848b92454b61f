// HDF5 store writer/reader (serial sec2 driver). The layout is documented in docs/store.md:
// one group per table, one chunked 1-D dataset per struct member, interned strings in /strings.
#include "kernalyse/store_io.h"

#include <fcntl.h>
#include <hdf5.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <type_traits>
#include <utility>

#include "h5raw.h"
#include "h5util.h"
#include "kernalyse/archive.h"
#include "kernalyse/atomic_file.h"
#include "kernalyse/checked.h"
#include "kernalyse/heap.h"
#include "kernalyse/parallel.h"
#include "kernalyse/spread.h"

namespace kernalyse {
namespace {

using namespace detail;

// ---------------------------------------------------------------------------------------------
// Writing

// Bytes of a column as progress counts them (in memory; the file may compress them).
template <class Col>
int64_t col_bytes(const Col& c) {
  return static_cast<int64_t>(c.size() * sizeof(typename Col::value_type));
}

int64_t table_bytes(const Store& s) {
  int64_t n = 0;
  for_each_table(s, [&](const char*, const auto& t) {
    for_each_column(t, [&](const auto&, const auto& col) { n += col_bytes(col); });
  });
  return n;
}

void write_file(const Store& s, const std::string& tmp, Progress& progress) {
  Handle fapl = file_access();
  Handle file(h5(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "cannot create file"),
              H5Fclose);

  write_file_attrs(file, s.attrs);
  write_string_table(file, s.strings);
  for_each_table(s, [&](const char* table, const auto& t) {
    write_table(file, table, t, [&](int64_t bytes) { progress.advance(bytes); });
  });
  write_ranks_group(file, s.ranks);
  // Closing flushes metadata: a failure here (disk full) must fail the write.
  ok(file.close(), "cannot finish writing the file");
}

// ---------------------------------------------------------------------------------------------
// Reading

// The group's header is checked before libhdf5 loads it (h5raw.h).
Handle open_group(RawStrings& raw, hid_t loc, const char* name) {
  if (H5Lexists(loc, name, H5P_DEFAULT) <= 0)
    throw Failure(std::string("not a complete kernalyse store (no /") + name + ")");
  raw.check_link(loc, name, std::string("/") + name);
  return Handle(h5(H5Gopen2(loc, name, H5P_DEFAULT), std::string("cannot open /") + name),
                H5Gclose);
}

// Opens a 1-D dataset and returns its length.
Handle open_column(RawStrings& raw, hid_t group, const std::string& what, const char* name,
                   H5T_class_t cls, size_t* rows) {
  if (H5Lexists(group, name, H5P_DEFAULT) <= 0) throw Failure("missing dataset " + what);
  raw.check_link(group, name, what);  // before libhdf5 decodes its header (h5raw.h)
  Handle ds(h5(H5Dopen2(group, name, H5P_DEFAULT), "cannot open " + what), H5Dclose);
  Handle space(h5(H5Dget_space(ds), "cannot read " + what), H5Sclose);
  if (H5Sget_simple_extent_ndims(space) != 1) throw Failure(what + " is not a 1-D dataset");
  hsize_t dims[1] = {0};
  ok(H5Sget_simple_extent_dims(space, dims, nullptr), "cannot read " + what);
  Handle type(h5(H5Dget_type(ds), "cannot read " + what), H5Tclose);
  if (H5Tget_class(type) != cls) throw Failure(what + " has an unexpected type");
  // A corrupt file can claim any length: before anything is allocated, the rows must fit in
  // the bytes the dataset really stores (filters such as deflate: at most ~1000:1). Otherwise a
  // damaged dataspace means gigabytes allocated ("out of memory", length_error) or HDF5
  // reading past its buffers. String datasets are checked by RawStrings::dataset instead, which
  // must look at the fill value before H5Dget_create_plist converts it through the global heap.
  if (dims[0] > 0 && cls != H5T_STRING) {
    Handle dcpl(h5(H5Dget_create_plist(ds), "cannot read " + what), H5Pclose);
    const bool filtered = H5Pget_nfilters(dcpl) > 0;
    const uint64_t elem = cls == H5T_STRING ? 1 : H5Tget_size(type);
    const uint64_t stored = H5Dget_storage_size(ds);
    uint64_t need = 0, have = 0;
    if (!checked_mul(uint64_t{dims[0]}, elem, &need) ||
        !checked_mul(stored, uint64_t{filtered ? 1100u : 1u}, &have) || need > have)
      throw Failure("corrupt " + what + ": " + std::to_string(dims[0]) + " rows of " +
                    std::to_string(elem) + " bytes but " + std::to_string(stored) +
                    " bytes stored");
    // Nor can the chunks claim more bytes than the file has: libhdf5 allocates a chunk's
    // recorded size before reading it (a corrupt 3.8 GB record of a 96-byte chunk).
    Handle fid(h5(H5Iget_file_id(ds), "cannot read " + what), H5Fclose);
    hsize_t file_size = 0;
    ok(H5Fget_filesize(fid, &file_size), "cannot read " + what);
    if (stored > file_size)
      throw Failure("corrupt " + what + ": " + std::to_string(stored) +
                    " bytes stored, more than the whole file (" + std::to_string(file_size) +
                    " bytes)");
  }
  *rows = dims[0];
  return ds;
}

// Every column of a table must have one length; checked on the dataspaces alone, before any
// column is read (a corrupt store used to read 16 GB before noticing; F17).
void require_same_lengths(RawStrings& raw, hid_t group, const std::string& table,
                          const std::vector<const char*>& names) {
  hsize_t first = 0;
  bool have = false;
  for (const char* name : names) {
    if (H5Lexists(group, name, H5P_DEFAULT) <= 0) continue;  // missing: reported by the read
    const std::string what = "/" + table + "/" + name;
    raw.check_link(group, name, what);
    Handle ds(h5(H5Dopen2(group, name, H5P_DEFAULT), "cannot open " + what), H5Dclose);
    Handle space(h5(H5Dget_space(ds), "cannot read " + what), H5Sclose);
    if (H5Sget_simple_extent_ndims(space) != 1) throw Failure(what + " is not a 1-D dataset");
    hsize_t dims[1] = {0};
    ok(H5Sget_simple_extent_dims(space, dims, nullptr), "cannot read " + what);
    if (have && dims[0] != first)
      throw Failure("corrupt /" + table + ": columns have different lengths (" +
                    std::to_string(dims[0]) + " vs " + std::to_string(first) + ")");
    first = dims[0], have = true;
  }
}

// The same for a row table, whose column list names its columns.
template <class Tab>
void require_same_lengths(RawStrings& raw, hid_t group, const std::string& table) {
  std::vector<const char*> names;
  const Tab empty;
  for_each_column(empty, [&](const auto& def, const auto&) { names.push_back(def.name); });
  require_same_lengths(raw, group, table, names);
}

// Timestamps read from a store must be in the supported range (docs/limits.md): the analyses
// subtract them freely, which is only safe inside it.
void require_times(const std::string& what, const std::vector<int64_t>& ts, size_t first = 0) {
  for (size_t i = 0; i < ts.size(); ++i)
    if (!time_in_range(ts[i]))
      throw Failure("corrupt " + what + ": row " + std::to_string(first + i) + " holds " +
                    std::to_string(ts[i]) + ", outside the supported time range (|t| < 2^62 ns)");
}

// A column of millions of rows is fresh memory: with 4 KiB pages, the first touch of each page
// (the vector's zero-fill) costs a page fault, about half of a big store's read time; huge pages
// make that 512 times fewer faults (prefer_huge_pages, heap.h).
// A column opened and checked, its rows known, not yet read. allocate() sizes the vector (no
// HDF5 call: any thread may run it); read() then reads straight into the vector's storage (no
// staging copy, so peak memory is the column), on the thread that opened it: libhdf5 is not
// thread-safe.
struct PendingColumn {
  std::function<void()> allocate, read;
};

template <class T>
PendingColumn open_for_read(RawStrings& raw, hid_t group, const std::string& table,
                            const char* name, std::vector<T>& out) {
  auto what = std::make_shared<std::string>("/" + table + "/" + name);
  size_t rows = 0;
  auto ds = std::make_shared<Handle>(open_column(raw, group, *what, name, H5Traits<T>::cls, &rows));
  return {[&out, rows] {
            std::vector<T>().swap(out);
            out.reserve(rows);
            prefer_huge_pages(out.data(), rows * sizeof(T));
            out.resize(rows);
          },
          [&out, rows, ds, what] {
            if (rows)
              ok(H5Dread(*ds, H5Traits<T>::mem(), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data()),
                 "cannot read " + *what);
          }};
}

template <class T>
void read_column(RawStrings& raw, hid_t group, const std::string& table, const char* name,
                 std::vector<T>& out) {
  PendingColumn c = open_for_read(raw, group, table, name, out);
  c.allocate();
  c.read();
}

// Variable-length strings never go through libhdf5's conversion (h5raw.h, docs/fuzzing.md).
std::vector<std::string> read_strings(RawStrings& raw, hid_t loc, const std::string& what,
                                      const char* name) {
  size_t rows = 0;
  Handle ds = open_column(raw, loc, what, name, H5T_STRING, &rows);
  Handle ftype(h5(H5Dget_type(ds), "cannot read " + what), H5Tclose);
  if (H5Tis_variable_str(ftype) <= 0)
    throw Failure(what + " is not a variable-length string dataset");
  return raw.dataset(ds, what, rows);
}

std::string read_attr_str(RawStrings& raw, hid_t loc, const char* name) {
  if (H5Aexists(loc, name) <= 0) return {};  // optional metadata
  const std::string what = std::string("attribute ") + name;
  Handle attr(h5(H5Aopen(loc, name, H5P_DEFAULT), "cannot open " + what), H5Aclose);
  Handle ftype(h5(H5Aget_type(attr), "cannot read " + what), H5Tclose);
  if (H5Tget_class(ftype) != H5T_STRING) throw Failure(what + " is not a string");
  Handle space(h5(H5Aget_space(attr), "cannot read " + what), H5Sclose);
  if (H5Sget_simple_extent_npoints(space) != 1) throw Failure(what + " is not a scalar");
  // Variable-length: schema 1 and 2 stores, or set with h5py (`f.attrs[k] = "text"`).
  if (H5Tis_variable_str(ftype) > 0) return raw.attribute(loc, name, what);
  // Fixed-length (schema 3): read with the file's own type, no conversion. A string longer than
  // the file is a corrupt datatype, not an allocation to attempt.
  size_t size = H5Tget_size(ftype);
  if (size == 0 || size > raw.file_size())
    throw Failure("corrupt " + what + ": a string of " + std::to_string(size) + " bytes");
  std::string out(size, '\0');
  ok(H5Aread(attr, ftype, out.data()), "cannot read " + what);
  out.resize(std::strlen(out.c_str()));
  return out;
}

int32_t read_attr_int(hid_t loc, const char* name) {
  const std::string what = std::string("attribute ") + name;
  Handle attr(h5(H5Aopen(loc, name, H5P_DEFAULT), "cannot open " + what), H5Aclose);
  Handle ftype(h5(H5Aget_type(attr), "cannot read " + what), H5Tclose);
  if (H5Tget_class(ftype) != H5T_INTEGER) throw Failure(what + " is not an integer");
  int32_t v = 0;
  ok(H5Aread(attr, H5T_NATIVE_INT32, &v), "cannot read " + what);
  return v;
}

void require_rows(const std::string& table, size_t rows, std::initializer_list<size_t> sizes) {
  for (size_t n : sizes)
    if (n != rows)
      throw Failure("corrupt /" + table + ": columns have different lengths (" + std::to_string(n) +
                    " vs " + std::to_string(rows) + ")");
}

void require_ids(const std::string& what, const std::vector<uint32_t>& ids, size_t strings) {
  uint32_t mx = 0;
  for (uint32_t id : ids) mx = std::max(mx, id);
  if (!ids.empty() && mx >= strings)
    throw Failure("corrupt " + what + ": string id " + std::to_string(mx) + " but only " +
                  std::to_string(strings) + " strings");
}

// /ranks: one column per RankInfo field, transposed into rows. Fields added later may be
// absent (older stores): their defaults stay.
void read_ranks(RawStrings& raw, hid_t file, std::vector<RankInfo>& out) {
  Handle g = open_group(raw, file, "ranks");
  {
    std::vector<const char*> names;
    for_each_rank_field([&](const auto& def, auto) { names.push_back(def.name); });
    require_same_lengths(raw, g, "ranks", names);
  }
  for_each_rank_field([&](const auto& def, auto field) {
    using M = std::decay_t<decltype(def.unknown)>;
    if (def.rule == ColumnRule::Added && H5Lexists(g, def.name, H5P_DEFAULT) <= 0) return;
    std::vector<disk_type_t<M>> col;
    if constexpr (std::is_same_v<M, std::string>)
      col = read_strings(raw, g, std::string("/ranks/") + def.name, def.name);
    else
      read_column(raw, g, "ranks", def.name, col);
    if (std::string_view(def.name) == "rank") out.resize(col.size());  // the first field
    require_rows("ranks", out.size(), {col.size()});
    for (size_t i = 0; i < col.size(); ++i) {
      if constexpr (std::is_same_v<M, std::string>)
        out[i].*field = std::move(col[i]);
      else
        out[i].*field = static_cast<M>(col[i]);
    }
  });
}

// Rows [first, first + n) of the 1-D dataset `ds` into `buf` (a hyperslab read).
void read_range(hid_t ds, hid_t mem_type, size_t first, size_t n, void* buf,
                const std::string& what) {
  const hsize_t start[1] = {first}, count[1] = {n};
  Handle fspace(h5(H5Dget_space(ds), "cannot read " + what), H5Sclose);
  ok(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, nullptr, count, nullptr),
     "cannot read " + what);
  Handle mspace(h5(H5Screate_simple(1, count, nullptr), "cannot read " + what), H5Sclose);
  ok(H5Dread(ds, mem_type, mspace, fspace, H5P_DEFAULT, buf), "cannot read " + what);
}

// One table's wanted columns, opened and checked (open_column), ready to read any range of rows:
// the whole table (read_store) or one rank's rows at a time (RankSlices). A wanted column that
// is Added to the list after the file was written is absent from `cols` (then "unknown").
template <class Tab>
struct OpenTable {
  std::string table;
  size_t rows = 0;
  std::function<bool(std::string_view)> wanted;
  std::map<std::string, std::shared_ptr<Handle>, std::less<>> cols;
};

// Every column its list names must be there, but for Added ones a file may predate.
template <class Tab>
OpenTable<Tab> open_table(RawStrings& raw, hid_t file, const char* table,
                          std::function<bool(std::string_view)> wanted) {
  OpenTable<Tab> o;
  o.table = table;
  o.wanted = std::move(wanted);
  Handle g = open_group(raw, file, table);
  require_same_lengths<Tab>(raw, g, table);
  const Tab empty;
  for_each_column(empty, [&](const auto& def, const auto& col) {
    using T = typename std::decay_t<decltype(col)>::value_type;
    if (!o.wanted(def.name)) return;
    if (def.rule == ColumnRule::Added && H5Lexists(g, def.name, H5P_DEFAULT) <= 0) return;
    const std::string what = "/" + o.table + "/" + def.name;
    o.cols.emplace(def.name, std::make_shared<Handle>(
                                 open_column(raw, g, what, def.name, H5Traits<T>::cls, &o.rows)));
  });
  return o;
}

// Rows [first, first + n) of the wanted columns into `t`; string ids and times checked. With
// `rank`, the rank column is not read but filled with it (RankSlices checked it beforehand).
template <class Tab>
void read_rows(const OpenTable<Tab>& o, Tab& t, size_t first, size_t n, size_t nstr,
               const int32_t* rank = nullptr) {
  std::vector<PendingColumn> pending;
  for_each_column(t, [&](const auto& def, auto& col) {
    using T = typename std::decay_t<decltype(col)>::value_type;
    if (!o.wanted(def.name)) return;
    auto it = o.cols.find(def.name);
    if (it == o.cols.end()) return col.assign(n, def.unknown);  // Added after the file
    if constexpr (std::is_same_v<T, int32_t>)
      if (rank && std::string_view(def.name) == "rank") return col.assign(n, *rank);
    auto what = std::make_shared<std::string>("/" + o.table + "/" + def.name);
    pending.push_back(
        {[&col, n] {
           // A slice read into the previous slice's store reuses its memory (RankSlices).
           if (col.capacity() < n) {
             std::vector<T>().swap(col);
             col.reserve(n);
             prefer_huge_pages(col.data(), n * sizeof(T));
           }
           col.resize(n);
         },
         [&col, first, n, ds = it->second, what, whole = first == 0 && n == o.rows] {
           if (!n) return;
           if (whole) {
             ok(H5Dread(*ds, H5Traits<T>::mem(), H5S_ALL, H5S_ALL, H5P_DEFAULT, col.data()),
                "cannot read " + *what);
             return;
           }
           read_range(*ds, H5Traits<T>::mem(), first, n, col.data(), *what);
         }});
  });
  // The first touch of fresh memory (page faults, the kernel zeroing pages) is most of a big
  // store's read: the columns are allocated on parallel threads, then read one by one.
  parallel_for(pending.size(), [&](size_t i) { pending[i].allocate(); });
  for (auto& c : pending) c.read();
  for_each_column(t, [&](const auto& def, const auto& col) {
    using T = typename std::decay_t<decltype(col)>::value_type;
    if (!o.wanted(def.name)) return;
    const std::string what = "/" + o.table + "/" + def.name;
    if constexpr (std::is_same_v<T, uint32_t>)  // string ids (store.h)
      require_ids(what, col, nstr);
    if constexpr (std::is_same_v<T, int64_t>)  // times (store.h)
      if (std::string_view(def.name).ends_with("_ns")) require_times(what, col, first);
  });
}

// Reads the columns `wanted` of one whole table.
template <class Tab>
void read_table(RawStrings& raw, hid_t file, const char* table, Tab& t, size_t nstr,
                std::function<bool(std::string_view)> wanted) {
  const OpenTable<Tab> o = open_table<Tab>(raw, file, table, std::move(wanted));
  read_rows(o, t, 0, o.rows, nstr);
}

// What ColumnSelection asks of each table.
bool activity_wanted(const ColumnSelection& sel, std::string_view c) {
  return (c != "correlation" || sel.activity_correlation) && (c != "step" || sel.activity_step);
}
bool launch_wanted(const ColumnSelection& sel, std::string_view c) {
  return sel.launch_detail || c == "rank" || c == "start_ns" || c == "correlation";
}
bool op_wanted(const ColumnSelection& sel, std::string_view c) {
  const bool detail = c == "pid" || c == "tid" || c == "start_ns" || c == "end_ns";
  const bool shapes = c == "dims_id" || c == "types_id" || c == "concrete_id";
  return (!detail || sel.ops_detail) && (!shapes || sel.ops_shapes);
}
bool all_wanted(std::string_view) { return true; }

// The columns of a rank-sliced table that `sel` reads (RankSlices: opened, then narrowed).
std::function<bool(std::string_view)> slice_columns(std::string_view table,
                                                    const ColumnSelection& sel) {
  if (table == "activities") return [sel](std::string_view c) { return activity_wanted(sel, c); };
  if (table == "launches") return [sel](std::string_view c) { return launch_wanted(sel, c); };
  if (table == "ops") return [sel](std::string_view c) { return op_wanted(sel, c); };
  return all_wanted;
}

void require_nccl_rows(const NcclInfo& nccl, size_t activities) {
  for (uint64_t x : nccl.activity)
    if (x >= activities)
      throw Failure("corrupt /nccl/activity: row " + std::to_string(x) + " but only " +
                    std::to_string(activities) + " activities");
}

// The file-level part of a store: attributes, /strings and /ranks. RawStrings' constructor
// checked the root group's header (and its attribute messages, which H5Aexists decodes).
void read_header(RawStrings& raw, hid_t file, Store& s) {
  if (H5Aexists(file, "schema_version") <= 0)
    throw Failure("not a kernalyse store (no schema_version)");
  int32_t version = read_attr_int(file, "schema_version");
  if (version > kSchemaVersion)
    throw Failure("schema version " + std::to_string(version) + " is newer than this tool (" +
                  std::to_string(kSchemaVersion) + ")");
  if (version < 1) throw Failure("invalid schema version " + std::to_string(version));
  s.attrs.schema_version = version;
  s.attrs.tool_version = read_attr_str(raw, file, "tool_version");
  s.attrs.produced_by = read_attr_str(raw, file, "produced_by");
  s.attrs.command_line = read_attr_str(raw, file, "command_line");
  s.attrs.created_utc = read_attr_str(raw, file, "created_utc");
  s.attrs.clock_domain = read_attr_str(raw, file, "clock_domain");
  s.attrs.emulated = H5Aexists(file, "emulated") > 0 && read_attr_int(file, "emulated") != 0;
  {
    std::vector<std::string> strings = read_strings(raw, file, "/strings", "strings");
    if (!strings.empty() && !strings[0].empty())
      throw Failure("corrupt /strings: id 0 is not the empty string");
    s.strings.assign(std::move(strings));
  }
  read_ranks(raw, file, s.ranks);
}

Store read_file(const std::string& path, const ColumnSelection& sel) {
  // The superblock and the root group's header are checked before H5Fopen decodes them
  // (h5raw.h), and with them the root's attribute messages, which H5Aexists decodes.
  RawStrings raw(path);
  Handle fapl = file_access();
  Handle file(h5(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl), "cannot open"), H5Fclose);
  Store s;
  read_header(raw, file, s);
  const size_t nstr = s.strings.size();
  if (sel.activities)
    read_table(raw, file, "activities", s.activities, nstr,
               [&](std::string_view c) { return activity_wanted(sel, c); });
  if (sel.launches)
    read_table(raw, file, "launches", s.launches, nstr,
               [&](std::string_view c) { return launch_wanted(sel, c); });
  if (sel.annotations) read_table(raw, file, "annotations", s.annotations, nstr, all_wanted);
  if (sel.nccl) {
    read_table(raw, file, "nccl", s.nccl, nstr, all_wanted);
    if (sel.activities) require_nccl_rows(s.nccl, s.activities.size());
  }
  // Schema 2: absent in older stores (no counters then).
  if (sel.counters && H5Lexists(file, "counters", H5P_DEFAULT) > 0)
    read_table(raw, file, "counters", s.counters, nstr, all_wanted);
  // Optional (docs/store.md): absent when the source had no op shapes, and in older stores.
  if (sel.ops && H5Lexists(file, "ops", H5P_DEFAULT) > 0)
    read_table(raw, file, "ops", s.ops, nstr,
               [&](std::string_view c) { return op_wanted(sel, c); });
  return s;
}

// is_hdf5_file: store_sniff.cpp (no libhdf5: kernalyse-merge tells stores from traces without
// loading it, h5_on_demand.cpp).

// One line for a path that is no readable HDF5 file (before libhdf5 sees it).
void require_readable_hdf5(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) throw Error(path + ": no such file");
    throw Error(path + ": " + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) throw Error(path + ": is a directory");
  {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) throw Error(path + ": " + std::strerror(errno));
    ::close(fd);
  }
  if (!is_hdf5_file(path)) throw Error(path + ": not an HDF5 file");
}

// Failures name the file; so does whatever else a damaged file still provokes.
template <class F>
auto naming_the_file(const std::string& path, F&& f) {
  QuietErrors quiet;
  try {
    return f();
  } catch (const Failure& e) {
    throw Error(path + ": " + e.what());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw Error(path + ": cannot read the store (" + e.what() + ")");
  }
}

}  // namespace

void write_store(const Store& store, const std::string& path, const WriteOptions& opt) {
  QuietErrors quiet;
  // The temporary is created first: its open(2) errno names the real problem (missing or
  // read-only directory) where HDF5 would report a generic "unable to open file".
  AtomicFile out(path, opt.force);
  Progress progress("writing " + path, table_bytes(store), "bytes", opt.progress);
  try {
    write_file(store, out.tmp(), progress);
  } catch (const Failure& e) {
    throw Error(path + ": " + e.what());
  }
  out.commit();
  progress.finish();  // only once the store is in place
}

Store read_store(const std::string& path, const ColumnSelection& sel) {
  return naming_the_file(path, [&] {
    require_readable_hdf5(path);
    return read_file(path, sel);
  });
}

// ---------------------------------------------------------------------------------------------
// RankSlices

namespace {

// The rows of one rank in a table: [first, end).
struct RankRun {
  int32_t rank;
  size_t first, end;
};

// The runs of a rank column's blocks [b0, b1) (of kBlock rows), read a block at a time (a few MB,
// not the column). *descent: the first row whose rank is below the one before it within these
// blocks (the column is not grouped by rank), SIZE_MAX for none; the last run ends at the range's
// end.
constexpr size_t kBlock = size_t{1} << 20;
std::vector<RankRun> scan_rank_runs(hid_t ds, size_t rows, size_t b0, size_t b1,
                                    const std::string& table, size_t* descent) {
  std::vector<RankRun> runs;
  std::vector<int32_t> buf;
  *descent = SIZE_MAX;
  const size_t end = std::min(rows, b1 * kBlock);
  for (size_t first = b0 * kBlock; first < end; first += kBlock) {
    const size_t n = std::min(kBlock, end - first);
    buf.resize(n);
    read_range(ds, H5T_NATIVE_INT32, first, n, buf.data(), "/" + table + "/rank");
    for (size_t i = 0; i < n; ++i) {
      if (!runs.empty() && runs.back().rank == buf[i]) continue;
      if (!runs.empty() && buf[i] < runs.back().rank) {
        *descent = first + i;
        return runs;
      }
      if (!runs.empty()) runs.back().end = first + i;
      runs.push_back({buf[i], first + i, end});
    }
  }
  return runs;
}

Failure not_grouped(const std::string& table, size_t row) {
  return Failure("/" + table + " is not grouped by rank (row " + std::to_string(row) + ")");
}

// The runs of a rank column; Failure unless the ranks ascend, each in one run. Under mpirun
// (`spread`), each process scans its share of the blocks and the runs are exchanged and joined:
// every process has the same runs, or the same Failure (the first row out of order).
std::vector<RankRun> rank_runs(hid_t ds, size_t rows, const std::string& table,
                               const Spread* spread) {
  const size_t blocks = (rows + kBlock - 1) / kBlock;
  size_t descent = SIZE_MAX;
  if (!spread || spread->processes < 2) {
    std::vector<RankRun> runs = scan_rank_runs(ds, rows, 0, blocks, table, &descent);
    if (descent != SIZE_MAX) throw not_grouped(table, descent);
    return runs;
  }
  const auto p = static_cast<size_t>(spread->process),
             procs = static_cast<size_t>(spread->processes);
  std::string error;  // a failed read: every process throws it after the exchange, none waits
  std::vector<RankRun> mine;
  try {
    mine = scan_rank_runs(ds, rows, blocks * p / procs, blocks * (p + 1) / procs, table, &descent);
  } catch (const std::exception& e) {
    error = e.what();
  }
  Archive out;
  out.put(error);
  out.put(static_cast<uint64_t>(descent));
  out.put(static_cast<uint64_t>(mine.size()));
  for (const RankRun& r : mine)
    out.put(r.rank), out.put<uint64_t>(r.first), out.put<uint64_t>(r.end);
  Archive in(spread->all_gather(out.bytes()));
  std::vector<RankRun> runs;
  for (size_t q = 0; q < procs; ++q) {
    if (const auto e = in.get<std::string>(); !e.empty()) throw Failure(e);
    const auto d = in.get<uint64_t>();
    const auto n = in.get<uint64_t>();
    for (uint64_t k = 0; k < n; ++k) {
      RankRun r{in.get<int32_t>(), in.get<uint64_t>(), in.get<uint64_t>()};
      if (!runs.empty() && runs.back().rank == r.rank) {
        runs.back().end = r.end;  // a rank's rows go on past the block range
        continue;
      }
      if (!runs.empty() && r.rank < runs.back().rank) throw not_grouped(table, r.first);
      runs.push_back(r);
    }
    if (d != SIZE_MAX) throw not_grouped(table, d);
  }
  return runs;
}

// A table read a rank at a time: its open columns and each rank's rows.
template <class Tab>
struct SlicedTable {
  std::optional<OpenTable<Tab>> open;                 // absent: not selected, or not in the file
  std::map<int32_t, std::pair<size_t, size_t>> rows;  // rank -> [first, end)

  void init(RawStrings& raw, hid_t file, const char* table,
            std::function<bool(std::string_view)> wanted, const Spread* spread) {
    open = open_table<Tab>(raw, file, table, std::move(wanted));
    if (!open->rows) return;
    for (const RankRun& r : rank_runs(*open->cols.at("rank"), open->rows, table, spread))
      rows[r.rank] = {r.first, r.end};
  }
  // Rank `rank`'s rows into `out`; the first row's index in the table.
  size_t read(int32_t rank, Tab& out, size_t nstr) const {
    if (!open) return 0;
    auto it = rows.find(rank);
    const size_t first = it == rows.end() ? 0 : it->second.first;
    const size_t n = it == rows.end() ? 0 : it->second.second - it->second.first;
    read_rows(*open, out, first, n, nstr, &rank);
    return first;
  }
};

}  // namespace

struct RankSlices::Impl {
  std::string path;
  std::optional<Handle> file;
  std::optional<RawStrings> raw;
  Store header;
  SlicedTable<Activities> activities;
  SlicedTable<LaunchCalls> launches;
  SlicedTable<Annotations> annotations;
  SlicedTable<Counters> counters;
  SlicedTable<Ops> ops;
  bool nccl_read = false;
  NcclInfo nccl;                                 // whole: a few rows per collective
  std::vector<int32_t> ranks;                    // one per slice
  std::vector<std::vector<uint32_t>> nccl_rows;  // per slice, in table order

  void open(const ColumnSelection& sel, const Spread* spread) {
    raw.emplace(path);  // before H5Fopen, as in read_file
    Handle fapl = file_access();
    file.emplace(h5(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl), "cannot open"), H5Fclose);
    read_header(*raw, *file, header);
    const size_t nstr = header.strings.size();
    if (sel.activities)
      activities.init(*raw, *file, "activities", slice_columns("activities", sel), spread);
    if (sel.launches)
      launches.init(*raw, *file, "launches", slice_columns("launches", sel), spread);
    if (sel.annotations)
      annotations.init(*raw, *file, "annotations", slice_columns("annotations", sel), spread);
    if (sel.counters && H5Lexists(*file, "counters", H5P_DEFAULT) > 0)
      counters.init(*raw, *file, "counters", slice_columns("counters", sel), spread);
    if (sel.ops && H5Lexists(*file, "ops", H5P_DEFAULT) > 0)
      ops.init(*raw, *file, "ops", slice_columns("ops", sel), spread);
    std::set<int32_t> all;
    for (const auto* m :
         {&activities.rows, &launches.rows, &annotations.rows, &counters.rows, &ops.rows})
      for (const auto& [r, range] : *m) all.insert(r);
    ranks.assign(all.begin(), all.end());
    nccl_rows.resize(ranks.size());
    if (!sel.nccl) return;
    nccl_read = true;
    read_table(*raw, *file, "nccl", nccl, nstr, all_wanted);
    if (!sel.activities) return;
    require_nccl_rows(nccl, activities.open ? activities.open->rows : 0);
    // Each row goes with the rank whose activity it describes.
    std::vector<std::pair<size_t, size_t>> starts;  // (first activity row, slice)
    for (const auto& [r, range] : activities.rows)
      starts.emplace_back(range.first,
                          std::lower_bound(ranks.begin(), ranks.end(), r) - ranks.begin());
    for (size_t i = 0; i < nccl.size(); ++i) {
      auto it = std::upper_bound(starts.begin(), starts.end(),
                                 std::make_pair(static_cast<size_t>(nccl.activity[i]), SIZE_MAX));
      nccl_rows[std::prev(it)->second].push_back(static_cast<uint32_t>(i));
    }
  }

  void narrow(const ColumnSelection& sel) {
    auto keep = [&sel](auto& t, bool on, std::string_view table) {
      if (!on) t.open.reset();
      if (t.open) t.open->wanted = slice_columns(table, sel);  // the open columns, fewer read
    };
    keep(activities, sel.activities, "activities");
    keep(launches, sel.launches, "launches");
    keep(annotations, sel.annotations, "annotations");
    keep(counters, sel.counters, "counters");
    keep(ops, sel.ops, "ops");
    if (!sel.nccl) nccl_read = false, nccl = NcclInfo(), nccl_rows.assign(ranks.size(), {});
  }

  // Into `s`, whose columns' memory is reused (fresh memory is the expensive part).
  void read(size_t k, Store& s) const {
    s.attrs = header.attrs;
    s.strings = header.strings;
    const int32_t rank = ranks.at(k);
    s.ranks.clear();
    for (const RankInfo& r : header.ranks)
      if (r.rank == rank) s.ranks.push_back(r);
    const size_t nstr = header.strings.size();
    const size_t first = activities.read(rank, s.activities, nstr);
    launches.read(rank, s.launches, nstr);
    annotations.read(rank, s.annotations, nstr);
    counters.read(rank, s.counters, nstr);
    ops.read(rank, s.ops, nstr);
    if (nccl_read) {
      const std::vector<uint32_t>& rows = nccl_rows[k];
      for_each_column_pair(s.nccl, nccl, [&](const auto&, auto& dst, const auto& src) {
        dst.clear();
        for (uint32_t i : rows) dst.push_back(src[i]);
      });
      for (uint64_t& x : s.nccl.activity) x -= first;
    }
  }
};

RankSlices::RankSlices(const std::string& path, const ColumnSelection& sel, const Spread* spread)
    : impl_(std::make_unique<Impl>()) {
  impl_->path = path;
  naming_the_file(path, [&] {
    require_readable_hdf5(path);
    impl_->open(sel, spread);
    return 0;
  });
}

RankSlices::~RankSlices() = default;

const Store& RankSlices::header() const { return impl_->header; }

void RankSlices::narrow(const ColumnSelection& sel) { impl_->narrow(sel); }

size_t RankSlices::size() const { return impl_->ranks.size(); }

int32_t RankSlices::rank(size_t k) const { return impl_->ranks.at(k); }

Store RankSlices::read(size_t k) {
  Store s;
  read(k, s);
  return s;
}

void RankSlices::read(size_t k, Store& into) {
  naming_the_file(impl_->path, [&] {
    impl_->read(k, into);
    return 0;
  });
}

void RankSlices::for_each(const std::function<void(const Store&)>& f) {
  // Two stores in turn: slice k + 1 is read into one while f runs on the other.
  Store buf[2];
  std::future<void> next;
  if (size()) next = std::async(std::launch::async, [&] { read(0, buf[0]); });
  for (size_t k = 0; k < size(); ++k) {
    next.get();
    if (k + 1 < size())
      next = std::async(std::launch::async, [&, k] { read(k + 1, buf[(k + 1) % 2]); });
    f(buf[k % 2]);
  }
}

}  // namespace kernalyse
