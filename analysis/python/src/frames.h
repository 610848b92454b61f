// The Python module's conversions (docs/python.md): a store table's columns as numpy arrays that
// view the store's own vectors (no copy; a capsule keeps the store alive), and a Report table's
// cells as typed columns. Only these functions touch numpy; the module's other code is wiring.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <memory>
#include <string>

#include "kernalyse/report.h"
#include "kernalyse/store.h"

namespace kernalyse::python {

namespace py = pybind11;

// The store's row table `name` (activities, launches, annotations, nccl, counters, ops) as a
// list of (column name, read-only numpy array viewing the store's vector, decode): the array's
// base owns a reference to the store, so it outlives the run object. decode is None for plain
// values; "strings" for a string-id column (`name_id` comes as `name`, `dims_id` as `dims`: the
// ids as an int32 view, codes into the store's string table); a list of words for the enum
// columns (activities' kind and category, annotations' kind: an int8 view of the uint8 codes).
// Columns the table was read without are left out. Throws Error for an unknown table name.
py::list store_table(const std::shared_ptr<const Store>& store, const std::string& name);

// /ranks as a dict of lists (one per field).
py::dict rank_table(const Store& s);

// A Report table as (key, title, columns, values): one value per column, either a numpy array
// (int64 without missing cells, float64 with NaN for missing), a (int64 values, bool mask) pair
// for integers with missing cells, or a list of str/None.
py::tuple report_table(const Table& t);

}  // namespace kernalyse::python
