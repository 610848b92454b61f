// Reading and writing the HDF5 store (layout in docs/store.md).
#pragma once

#include <string>

#include "kernalyse/error.h"
#include "kernalyse/progress.h"
#include "kernalyse/store.h"

namespace kernalyse {

struct WriteOptions {
  bool force = false;  // replace an existing file; otherwise an existing path is an error
  ProgressMode progress = ProgressMode::Off;  // "writing <path>", in column bytes written
};

// Writes to "<path>.tmp.<pid>" and renames on success; nothing is left behind on failure.
void write_store(const Store& store, const std::string& path, const WriteOptions& opt = {});

// Reads the selected columns. Throws Error on a missing, non-HDF5 or wrong-schema file.
Store read_store(const std::string& path, const ColumnSelection& sel = ColumnSelection::all());

// True if the file starts with the HDF5 signature (used to tell stores from traces).
bool is_hdf5_file(const std::string& path);

}  // namespace kernalyse
