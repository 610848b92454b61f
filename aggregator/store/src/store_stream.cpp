// StoreStream (store_io.h): a store written in batches of rows, table by table, with the
// datasets, chunking and header that write_store gives the whole store.
#include <hdf5.h>

#include <map>
#include <memory>
#include <string>

#include "h5util.h"
#include "kernalyse/atomic_file.h"
#include "kernalyse/progress.h"
#include "kernalyse/store_io.h"

namespace kernalyse {

using namespace detail;

namespace {
// "/table" or "/table/column", appended piece by piece: GCC 12 warns (-Wrestrict, a false
// positive of its string insert) on "/" + std::string(table).
std::string dataset_path(const char* table, const char* column) {
  std::string p = "/";
  p += table;
  if (column) p += '/', p += column;
  return p;
}
}  // namespace

struct StoreStream::Impl {
  struct Table {
    std::unique_ptr<Handle> group;
    std::map<std::string, std::unique_ptr<Handle>> columns;
    size_t expected = 0, rows = 0;
  };
  QuietErrors quiet;
  AtomicFile out;
  // "writing <path>", in column bytes (the total is not known ahead); from the first write on.
  std::string label;
  ProgressMode mode;
  std::unique_ptr<Progress> progress;
  std::unique_ptr<Handle> file;
  std::map<std::string, Table> tables;  // the begun ones

  Impl(const std::string& path, const WriteOptions& opt)
      : out(path, opt.force), label("writing " + path), mode(opt.progress) {
    Handle fapl = file_access();
    file = std::make_unique<Handle>(
        h5(H5Fcreate(out.tmp().c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "cannot create file"),
        H5Fclose);
  }

  Progress& bar() {
    if (!progress) progress = std::make_unique<Progress>(label, 0, "bytes", mode);
    return *progress;
  }

  template <class Tab>
  void begin(const char* name, const Tab& shape, size_t rows) {
    Table& t = tables[name];
    t.expected = rows;
    if (table_optional(name) && !rows) return;  // as write_store: no group at all
    t.group = std::make_unique<Handle>(create_group(*file, name));
    for_each_column(shape, [&](const auto& def, const auto& col) {
      using T = typename std::decay_t<decltype(col)>::value_type;
      t.columns[def.name] = std::make_unique<Handle>(create_dataset(
          *t.group, dataset_path(name, def.name), def.name, H5Traits<T>::file(), rows, kChunkRows));
    });
  }

  // Rows [t.rows, t.rows + n) of each column; a column the batch left empty is "unknown".
  template <class Tab>
  void append(const char* name, Table& t, const Tab& batch) {
    const size_t n = batch.size();
    if (t.rows + n > t.expected)
      throw Failure(dataset_path(name, nullptr) + ": more rows than announced (" +
                    std::to_string(t.rows + n) + " > " + std::to_string(t.expected) + ")");
    for_each_column(batch, [&](const auto& def, const auto& col) {
      using T = typename std::decay_t<decltype(col)>::value_type;
      const std::string what = dataset_path(name, def.name);
      std::vector<T> unknown;
      const std::vector<T>* v = &col;
      if (col.empty() && !def.required()) v = &(unknown = std::vector<T>(n, def.unknown));
      if (v->size() != n)
        throw Failure("column " + what + " has " + std::to_string(v->size()) + " rows, expected " +
                      std::to_string(n));
      const hid_t ds = *t.columns.at(def.name);
      const hsize_t start[1] = {t.rows}, count[1] = {n};
      Handle fspace(h5(H5Dget_space(ds), "cannot write " + what), H5Sclose);
      ok(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, nullptr, count, nullptr),
         "cannot write " + what);
      Handle mspace(h5(H5Screate_simple(1, count, nullptr), "cannot write " + what), H5Sclose);
      ok(H5Dwrite(ds, H5Traits<T>::mem(), mspace, fspace, H5P_DEFAULT, v->data()),
         "cannot write " + what);
      bar().advance(static_cast<int64_t>(n * sizeof(T)));
    });
    t.rows += n;
  }

  // A begun table that got fewer rows than announced is cut to what it got.
  void finish_table(const std::string& name, Table& t) {
    if (t.rows == t.expected) return;
    const hsize_t dims[1] = {t.rows};
    for (auto& [col, ds] : t.columns)
      ok(H5Dset_extent(*ds, dims), "cannot resize /" + name + "/" + col);
  }
};

StoreStream::StoreStream(const std::string& path, const WriteOptions& opt) {
  try {
    impl_ = std::make_unique<Impl>(path, opt);
  } catch (const Failure& e) {
    throw Error(path + ": " + e.what());
  }
}

StoreStream::~StoreStream() = default;

void StoreStream::begin(const std::string& table, size_t rows) {
  const Store shape;
  try {
    for_each_table(shape, [&](const char* name, const auto& t) {
      if (table == name) impl_->begin(name, t, rows);
    });
  } catch (const Failure& e) {
    throw Error(impl_->out.path() + ": " + e.what());
  }
}

void StoreStream::append(const Store& batch) {
  QuietErrors quiet;
  try {
    for_each_table(batch, [&](const char* name, const auto& t) {
      auto it = impl_->tables.find(name);
      if (t.size() && it != impl_->tables.end()) impl_->append(name, it->second, t);
    });
  } catch (const Failure& e) {
    throw Error(impl_->out.path() + ": " + e.what());
  }
}

size_t StoreStream::rows(const std::string& table) const {
  auto it = impl_->tables.find(table);
  return it == impl_->tables.end() ? 0 : it->second.rows;
}

void StoreStream::commit(const Store& header) {
  QuietErrors quiet;
  Impl& m = *impl_;
  try {
    write_file_attrs(*m.file, header.attrs);
    write_string_table(*m.file, header.strings);
    for_each_table(header, [&](const char* name, const auto& t) {
      auto it = m.tables.find(name);
      if (it == m.tables.end())
        write_table(*m.file, name, t, [&](int64_t bytes) { m.bar().advance(bytes); });
      else
        m.finish_table(name, it->second);
    });
    write_ranks_group(*m.file, header.ranks);
    m.tables.clear();  // their handles close before the file
    ok(m.file->close(), "cannot finish writing the file");
  } catch (const Failure& e) {
    throw Error(m.out.path() + ": " + e.what());
  }
  m.out.commit();
  m.bar().finish();  // only once the store is in place
}

}  // namespace kernalyse
