// Reading and writing the HDF5 store (layout in docs/store.md).
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "kernalyse/error.h"
#include "kernalyse/progress.h"
#include "kernalyse/store.h"

namespace kernalyse {

struct Spread;  // kernalyse/spread.h

struct WriteOptions {
  bool force = false;  // replace an existing file; otherwise an existing path is an error
  ProgressMode progress = ProgressMode::Off;  // "writing <path>", in column bytes written
};

// Writes to "<path>.tmp.<pid>" and renames on success; nothing is left behind on failure.
void write_store(const Store& store, const std::string& path, const WriteOptions& opt = {});

// Under mpirun (MPI initialised, as kernalyse-merge's MPI module does): one store written by every
// process of MPI_COMM_WORLD together, each its own ranks' rows (write_store_parallel, store_mpi.h:
// parallel HDF5). `local` is this process's part, merged (merge_stores) and holding only ranks that
// no other process holds and none between two of another's. Collective: every process calls it,
// and a failure is the same Error on every one. The file reads back as write_store of
// merge_stores of the parts. opt.progress is not drawn.
void write_store_world(const Store& local, const std::string& path, const WriteOptions& opt = {});

// A store written a batch of rows at a time, for an import whose rows never all sit in memory
// (one huge trace, issue 28). The same file as write_store of the whole store: tables begun
// here are appended to in batches; commit() writes the attributes, strings and /ranks of
// `header`, and every table not begun here from header's own rows. Like write_store it writes
// "<path>.tmp.<pid>" and renames on commit; destroyed before that, it leaves nothing behind.
class StoreStream {
 public:
  StoreStream(const std::string& path, const WriteOptions& opt = {});
  ~StoreStream();
  StoreStream(const StoreStream&) = delete;
  StoreStream& operator=(const StoreStream&) = delete;

  // Creates table `table`'s datasets for about `rows` rows (their chunking, as write_store's for
  // that many); fewer may be appended, never more.
  void begin(const std::string& table, size_t rows);
  // Appends each begun table's rows in `batch` (its strings are the header's ids).
  void append(const Store& batch);
  // Rows appended to `table` so far.
  size_t rows(const std::string& table) const;
  void commit(const Store& header);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Reads the selected columns. Throws Error on a missing, non-HDF5 or wrong-schema file.
Store read_store(const std::string& path, const ColumnSelection& sel = ColumnSelection::all());

// A store read a rank at a time, for analyses whose figures are per rank or add up across ranks
// (--diff): peak memory is a rank's rows, not the whole store's. On this VM the first touch of
// fresh memory costs ~3 ms per MB once the host has reclaimed it, so the whole store's columns
// cost seconds that one rank's reused buffers do not (issue 17, docs/benchmarks.md).
// Every table with a rank column must hold its rows grouped by rank, ascending (what every
// writer does: store.h's sort orders); the constructor checks the rank columns and throws Error
// otherwise (a caller then reads the store whole). /nccl is read whole and split by activity.
// libhdf5 is not thread-safe: one thread at a time in a RankSlices, and none elsewhere meanwhile.
class RankSlices {
 public:
  // Under mpirun (`spread`, kernalyse/spread.h): the processes share the scan of the rank
  // columns (each reads its part of every block list; all of them construct it together).
  RankSlices(const std::string& path, const ColumnSelection& sel, const Spread* spread = nullptr);
  ~RankSlices();
  RankSlices(const RankSlices&) = delete;
  RankSlices& operator=(const RankSlices&) = delete;

  // Attributes, strings and every /ranks row; no table rows.
  const Store& header() const;
  // Slices: one per rank that has rows in some table, ascending.
  size_t size() const;
  // Slice k's rank.
  int32_t rank(size_t k) const;
  // Slice k: the header's attributes and strings (same ids), the rank's /ranks row, every
  // selected table's rows of that rank (nccl.activity indexes the slice's activities).
  Store read(size_t k);
  // The same into `into`, reusing its columns' memory.
  void read(size_t k, Store& into);
  // From now on only `sel`'s columns are read, a subset of the constructor's: the slices stay the
  // same and the rank columns are not scanned again (a second pass with fewer columns).
  void narrow(const ColumnSelection& sel);
  // read(0), read(1), ... handed to f in turn; the next slice is read on another thread while
  // f runs (f may use the parallel pool; it must not use HDF5).
  void for_each(const std::function<void(const Store&)>& f);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// True if the file starts with the HDF5 signature (used to tell stores from traces).
bool is_hdf5_file(const std::string& path);

}  // namespace kernalyse
