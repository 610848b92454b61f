// The Python module's conversions (frames.h).
#include "frames.h"

#include <cmath>
#include <string_view>
#include <variant>

#include "kernalyse/error.h"

namespace kernalyse::python {
namespace {

// A capsule holding one reference to the store: the base of every array that views it, so that
// the arrays (and the DataFrames over them) keep the columns alive after the run is gone.
py::capsule owner_of(const std::shared_ptr<const Store>& s) {
  auto* keep = new std::shared_ptr<const Store>(s);
  return py::capsule(keep, [](void* p) { delete static_cast<std::shared_ptr<const Store>*>(p); });
}

// A read-only array of `n` elements of type T at `data`, owned by `owner` (no copy).
template <class T>
py::array view(const void* data, size_t n, const py::capsule& owner) {
  py::array a(py::dtype::of<T>(), {static_cast<py::ssize_t>(n)},
              {static_cast<py::ssize_t>(sizeof(T))}, n ? data : nullptr, owner);
  py::detail::array_proxy(a.ptr())->flags &= ~py::detail::npy_api::NPY_ARRAY_WRITEABLE_;
  return a;
}

// Text as Python str; bytes that are not UTF-8 (a name from a hostile trace) become U+FFFD.
py::str text(std::string_view s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<py::ssize_t>(s.size()), "replace");
  if (!o) throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

template <class E>
py::list words(int n, const char* (*name)(E)) {
  py::list out;
  for (int i = 0; i < n; ++i) out.append(text(name(static_cast<E>(i))));
  return out;
}

// The enum columns' words, by (table, column); none for the other columns.
py::object enum_words(const std::string& table, std::string_view column) {
  if (table == "activities" && column == "kind") return words<Kind>(6, to_string);
  if (table == "activities" && column == "category") return words<Category>(4, to_string);
  if (table == "annotations" && column == "kind") return words<AnnotationKind>(4, to_string);
  return py::none();
}

template <class Tab>
py::list columns_of(const Tab& t, const std::string& table, const py::capsule& owner) {
  py::list out;
  const size_t n = t.size();
  for_each_column(t, [&](const auto& def, const auto& col) {
    using T = typename std::decay_t<decltype(col)>::value_type;
    if (n && col.size() != n) return;  // the table was read without this column
    std::string name = def.name;
    if (def.role == ColumnRole::String) {
      if (name.size() > 3 && name.ends_with("_id")) name.resize(name.size() - 3);
      if constexpr (std::is_same_v<T, uint32_t>)  // ids < 2^31: the int32 view is the same
        out.append(py::make_tuple(name, view<int32_t>(col.data(), col.size(), owner), "strings"));
      return;
    }
    py::object decode = enum_words(table, def.name);
    if constexpr (std::is_same_v<T, uint8_t>) {
      if (!decode.is_none()) {
        out.append(py::make_tuple(name, view<int8_t>(col.data(), col.size(), owner), decode));
        return;
      }
    }
    out.append(py::make_tuple(name, view<T>(col.data(), col.size(), owner), py::none()));
  });
  return out;
}

}  // namespace

py::list store_table(const std::shared_ptr<const Store>& store, const std::string& name) {
  const py::capsule owner = owner_of(store);
  py::list out;
  bool found = false;
  for_each_table(*store, [&](const char* table, const auto& t) {
    if (name != table) return;
    found = true;
    out = columns_of(t, name, owner);
  });
  if (!found)
    throw Error("no table '" + name +
                "': the tables are activities, launches, annotations, nccl, counters, ops, ranks");
  return out;
}

py::dict rank_table(const Store& s) {
  py::dict out;
  for_each_rank_field([&](const auto& def, auto member) {
    py::list col;
    for (const RankInfo& r : s.ranks) {
      const auto& v = r.*member;
      if constexpr (std::is_same_v<std::decay_t<decltype(v)>, std::string>)
        col.append(text(v));
      else
        col.append(py::cast(v));
    }
    out[py::str(def.name)] = col;
  });
  return out;
}

namespace {

// One Report column as Python values (frames.h, report_table).
py::object report_column(const Table& t, size_t c) {
  bool has_str = false, has_double = false, has_int = false, missing = false;
  const size_t n = t.rows.size();
  auto cell = [&](size_t r) -> const Cell& {
    static const Cell none;
    return c < t.rows[r].size() ? t.rows[r][c] : none;
  };
  for (size_t r = 0; r < n; ++r) {
    const Cell& x = cell(r);
    has_str |= std::holds_alternative<std::string>(x);
    has_double |= std::holds_alternative<double>(x);
    has_int |= std::holds_alternative<int64_t>(x);
    missing |= std::holds_alternative<std::monostate>(x);
  }
  if (has_str) {  // text (a number among text stays a number; missing cells are None)
    py::list out;
    for (size_t r = 0; r < n; ++r) {
      const Cell& x = cell(r);
      if (const auto* s = std::get_if<std::string>(&x))
        out.append(text(*s));
      else if (const auto* i = std::get_if<int64_t>(&x))
        out.append(py::int_(*i));
      else if (const auto* d = std::get_if<double>(&x); d && std::isfinite(*d))
        out.append(py::float_(*d));
      else
        out.append(py::none());
    }
    return out;
  }
  if (has_double || !has_int) {  // float64; a missing or non-finite cell (JSON null) is NaN
    py::array_t<double> a(static_cast<py::ssize_t>(n));
    double* p = a.mutable_data();
    for (size_t r = 0; r < n; ++r) {
      const Cell& x = cell(r);
      if (const auto* d = std::get_if<double>(&x))
        p[r] = std::isfinite(*d) ? *d : NAN;
      else if (const auto* i = std::get_if<int64_t>(&x))
        p[r] = static_cast<double>(*i);
      else
        p[r] = NAN;
    }
    return a;
  }
  py::array_t<int64_t> v(static_cast<py::ssize_t>(n));
  py::array_t<bool> m(static_cast<py::ssize_t>(n));
  int64_t* pv = v.mutable_data();
  bool* pm = m.mutable_data();
  for (size_t r = 0; r < n; ++r) {
    const auto* i = std::get_if<int64_t>(&cell(r));
    pv[r] = i ? *i : 0;
    pm[r] = !i;
  }
  if (!missing) return v;
  return py::make_tuple(v, m);  // nullable integers (pandas Int64)
}

}  // namespace

py::tuple report_table(const Table& t) {
  py::list columns, values;
  for (size_t c = 0; c < t.columns.size(); ++c) {
    columns.append(text(t.columns[c]));
    values.append(report_column(t, c));
  }
  return py::make_tuple(text(t.key), text(t.title), columns, values);
}

}  // namespace kernalyse::python
