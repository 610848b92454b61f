// Collective write of one store from every rank's local part (store_mpi.h).
//
// Every process validates and orders its part exactly as merge_stores() would (without a copy
// when it already is in that form, the normal case); rank 0 meanwhile picks the output name and
// creates the temporary file. One exchange (MPI_Allgather of counts, MPI_Allgatherv of the
// string tables, RankInfo rows, attributes and rank 0's choice of name) gives every process the
// same plan: the process order (by first rank, like merge_stores), each one's row offsets and
// the global string table (each part's strings interned in that order, like merge_stores). Then:
//   phase 1, collective (MPI-IO driver): create the file and the table groups and datasets in
//            the serial writer's order; each process writes its slice of every column with one
//            collective H5Dwrite (selecting nothing when it has no rows);
//   phase 2, rank 0 (sec2 driver): /strings and /ranks, written with the serial writer's own
//            code (variable-length strings cannot be written in parallel, and parallel HDF5
//            allocates and fills datasets early, which makes overwriting vlen data slow), and
//            the file attributes; then the rename.
// The result reads back exactly as write_store(merge_stores(parts)) (same layout, same string
// ids, same row order). Every failure is agreed on, so all processes throw the same Error.
#include "kernalyse/store_mpi.h"

#include <fcntl.h>
#include <hdf5.h>
#include <mpi.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <tuple>
#include <type_traits>
#include <utility>

#include "h5util.h"
#include "kernalyse/atomic_file.h"
#include "kernalyse/store_io.h"

namespace kernalyse {
namespace {

using namespace detail;

// ---------------------------------------------------------------------------------------------
// Small MPI helpers

// Collective: `s` from `root`. One broadcast of a small fixed buffer (length + the first bytes);
// a second one only for a long string.
std::string bcast_string(MPI_Comm comm, int root, std::string s) {
  constexpr size_t kBuf = 1024, kHead = kBuf - sizeof(uint64_t);
  char buf[kBuf] = {};
  uint64_t n = s.size();
  std::memcpy(buf, &n, sizeof n);
  std::memcpy(buf + sizeof n, s.data(), std::min<size_t>(n, kHead));
  MPI_Bcast(buf, static_cast<int>(kBuf), MPI_CHAR, root, comm);
  std::memcpy(&n, buf, sizeof n);
  std::string head(buf + sizeof n, std::min<size_t>(n, kHead));
  s.resize(n);
  std::memcpy(s.data(), head.data(), head.size());
  if (n > kHead) MPI_Bcast(s.data() + kHead, static_cast<int>(n - kHead), MPI_CHAR, root, comm);
  return s;
}

// Collective: the error message of the lowest process that has one ("" if none), the same on
// every process. `mine` is this process's message, "" for success.
std::string agree(MPI_Comm comm, const std::string& mine) {
  int me = 0, np = 0;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &np);
  int flag = mine.empty() ? np : me, root = np;
  MPI_Allreduce(&flag, &root, 1, MPI_INT, MPI_MIN, comm);
  if (root == np) return {};
  return bcast_string(comm, root, mine);
}

// Runs fn, turning any exception into its message (so that no process leaves a collective
// sequence early).
template <class Fn>
std::string capture(Fn&& fn) {
  try {
    fn();
    return {};
  } catch (const std::exception& e) {
    std::string m = e.what();
    return m.empty() ? std::string("unknown error") : m;
  } catch (...) {
    return "unknown error";
  }
}

// ---------------------------------------------------------------------------------------------
// Serialisation of the small per-process metadata (strings, attributes, RankInfo rows)

struct Out {
  std::string buf;
  template <class T>
  void pod(T v) {
    static_assert(std::is_trivially_copyable_v<T>);
    buf.append(reinterpret_cast<const char*>(&v), sizeof v);
  }
  void str(const std::string& s) {
    pod<uint64_t>(s.size());
    buf.append(s);
  }
};

struct In {
  const char* p;
  const char* end;
  template <class T>
  T pod() {
    T v{};
    if (end - p < static_cast<ptrdiff_t>(sizeof v)) throw Failure("corrupt metadata exchange");
    std::memcpy(&v, p, sizeof v);
    p += sizeof v;
    return v;
  }
  std::string str() {
    auto n = pod<uint64_t>();
    if (static_cast<uint64_t>(end - p) < n) throw Failure("corrupt metadata exchange");
    std::string s(p, n);
    p += n;
    return s;
  }
};

void put_rank(Out& o, const RankInfo& r) {
  for_each_rank_field([&](const auto& def, auto field) {
    if constexpr (std::is_same_v<std::decay_t<decltype(def.unknown)>, std::string>)
      o.str(r.*field);
    else
      o.pod(r.*field);
  });
}

RankInfo get_rank(In& in) {
  RankInfo r;
  for_each_rank_field([&](const auto& def, auto field) {
    using M = std::decay_t<decltype(def.unknown)>;
    if constexpr (std::is_same_v<M, std::string>)
      r.*field = in.str();
    else
      r.*field = in.pod<M>();
  });
  return r;
}

void put_attrs(Out& o, const StoreAttrs& a) {
  o.str(a.tool_version);
  o.str(a.produced_by);
  o.str(a.command_line);
  o.str(a.created_utc);
  o.str(a.clock_domain);
  o.pod<uint8_t>(a.emulated ? 1 : 0);
}

StoreAttrs get_attrs(In& in) {
  StoreAttrs a;
  a.tool_version = in.str();
  a.produced_by = in.str();
  a.command_line = in.str();
  a.created_utc = in.str();
  a.clock_domain = in.str();
  a.emulated = in.pod<uint8_t>() != 0;
  return a;
}

// The tables the collective writer writes: every row table, in file order. An optional one
// (/ops, which collector stores do not have) gets no group when no process has rows for it, as
// write_store writes it.
constexpr size_t kTables = 6;

// What one process holds; exchanged with MPI_Allgather. Row counts (per table, in file order),
// the merge order key and the range of rank numbers its rows use.
struct Summary {
  int64_t rows[kTables];
  int64_t key;     // first rank, as merge_stores orders its parts
  int64_t lo, hi;  // min/max rank number over its RankInfo rows and every table's rows
  int64_t blob;    // bytes of its serialised metadata
  int64_t failed;  // 1: its preparation failed, 2: rank 0 could not set up the output
};
constexpr int kSummaryWords = sizeof(Summary) / sizeof(int64_t);
static_assert(sizeof(Summary) == kSummaryWords * sizeof(int64_t));

// f(index, name, table) for the tables the collective writer writes, in file order.
template <class S, class F>
void written_tables(S& s, F&& f) {
  size_t i = 0;
  for_each_table(s, [&](const char* table, auto& t) { f(i++, table, t); });
}

template <class T>
void require_len(const std::vector<T>& col, size_t n, const std::string& what) {
  if (col.size() != n)
    throw Failure("column " + what + " has " + std::to_string(col.size()) + " rows, expected " +
                  std::to_string(n));
}

// Columns of `t`, each with its on-disk name ("/activities/rank", ...): f(what, column).
template <class Tab, class F>
void named(const char* table, Tab& t, F&& f) {
  for_each_column(
      t, [&](const auto& def, auto& col) { f(std::string("/") + table + "/" + def.name, col); });
}

// Every written column of `s`: f(what, column, rows of its table).
template <class F>
void all_columns(const Store& s, F&& f) {
  written_tables(s, [&](size_t, const char* table, const auto& t) {
    named(table, t, [&](const std::string& what, const auto& col) { f(what, col, t.size()); });
  });
}

template <class Tab>
bool sorted_by_rank_start(const Tab& t) {
  for (size_t i = 1; i < t.size(); ++i)
    if (std::tie(t.rank[i], t.start_ns[i]) < std::tie(t.rank[i - 1], t.start_ns[i - 1]))
      return false;
  return true;
}

// True if merge_stores() would leave this store's rows as they are (every column complete,
// every id in range, every table already in order, no duplicate rank), which is what a collector
// or importer normally hands over. Then its columns are written without a copy.
bool ready_as_is(const Store& s) {
  bool ok = true;
  const size_t nstr = s.strings.size();
  all_columns(s, [&](const std::string&, const auto& col, size_t rows) {
    if (!ok || col.size() != rows) {
      ok = false;
      return;
    }
    if constexpr (std::is_same_v<std::decay_t<decltype(col)>, std::vector<uint32_t>>) {
      uint32_t mx = 0;  // branch-free, so the compiler vectorises it
      for (uint32_t id : col) mx = std::max(mx, id);
      ok = col.empty() || mx < nstr;
    }
  });
  if (!ok) return false;
  const Activities& a = s.activities;
  if (a.size() > std::numeric_limits<uint32_t>::max()) return false;
  for (size_t i = 1; i < a.size(); ++i) {
    // Consecutive rows are nearly always on the same stream: test that first.
    if (a.rank[i] == a.rank[i - 1] && a.device[i] == a.device[i - 1] &&
        a.stream[i] == a.stream[i - 1]) {
      if (a.start_ns[i] > a.start_ns[i - 1]) continue;
      if (a.start_ns[i] < a.start_ns[i - 1] || a.end_ns[i] < a.end_ns[i - 1]) return false;
    } else if (std::tie(a.rank[i], a.device[i], a.stream[i]) <
               std::tie(a.rank[i - 1], a.device[i - 1], a.stream[i - 1])) {
      return false;
    }
  }
  const auto& na = s.nccl.activity;
  if (!std::is_sorted(na.begin(), na.end()) || (!na.empty() && na.back() >= a.size())) return false;
  if (!sorted_by_rank_start(s.launches) || !sorted_by_rank_start(s.annotations) ||
      !sorted_by_rank_start(s.ops))
    return false;
  const Counters& k = s.counters;  // ordered by name text, as sort_counters orders them
  auto ckey = [&](size_t i) {
    return std::make_tuple(k.rank[i], k.device[i], std::string_view(s.strings.at(k.name_id[i])),
                           k.ts_ns[i]);
  };
  for (size_t i = 1; i < k.size(); ++i)
    if (ckey(i) < ckey(i - 1)) return false;
  std::vector<int32_t> ranks;
  for (const RankInfo& r : s.ranks) ranks.push_back(r.rank);
  std::sort(ranks.begin(), ranks.end());
  return std::adjacent_find(ranks.begin(), ranks.end()) == ranks.end();
}

// This process's rows as merge_stores() would make them, plus (after the exchange) the columns
// that change on the way into the global file: string ids and nccl activity rows.
struct Part {
  Store owned;                  // a one-part merge_stores() result, when the input needed one
  const Store* src = nullptr;   // the columns to write: the caller's store or `owned`
  StoreAttrs attrs;             // as merge_stores sets them
  std::vector<RankInfo> ranks;  // sorted by rank
  std::map<std::string, std::vector<uint32_t>> ids;  // remapped id columns, by dataset path
  std::vector<uint64_t> nccl_activity;               // global rows, if the offset is not 0

  // The column to write for dataset `what`.
  template <class T>
  const std::vector<T>& column(const std::string& what, const std::vector<T>& col) const {
    if constexpr (std::is_same_v<T, uint32_t>) {
      if (auto it = ids.find(what); it != ids.end()) return it->second;
    }
    if constexpr (std::is_same_v<T, uint64_t>) {
      if (what == "/nccl/activity" && !nccl_activity.empty()) return nccl_activity;
    }
    return col;
  }
};

// Validates and orders this process's data exactly as merge_stores() does (the same checks,
// the same errors), copying it only if something needs to change.
void prepare(const Store& local, Part& part) {
  if (ready_as_is(local)) {
    part.src = &local;
    part.attrs = local.attrs;
    part.attrs.schema_version = kSchemaVersion;
    for (const RankInfo& r : local.ranks) part.attrs.emulated = part.attrs.emulated || r.emulated;
    part.ranks = local.ranks;
    std::stable_sort(part.ranks.begin(), part.ranks.end(),
                     [](const RankInfo& x, const RankInfo& y) { return x.rank < y.rank; });
    return;
  }
  std::vector<Store> one;
  one.push_back(local);
  part.owned = merge_stores(std::move(one));
  part.src = &part.owned;
  part.attrs = part.owned.attrs;
  part.ranks = part.owned.ranks;
  // merge_stores accepts some columns short (it only sorts by them); the file needs them whole.
  all_columns(part.owned, [&](const std::string& what, const auto& col, size_t rows) {
    require_len(col, rows, what);
  });
}

Summary summarise(const Part& part) {
  const Store& s = *part.src;
  Summary m{};
  written_tables(
      s, [&](size_t i, const char*, const auto& t) { m.rows[i] = static_cast<int64_t>(t.size()); });
  m.lo = std::numeric_limits<int64_t>::max();
  m.hi = std::numeric_limits<int64_t>::min();
  auto see = [&](int64_t r) {
    m.lo = std::min(m.lo, r);
    m.hi = std::max(m.hi, r);
  };
  // Every table is sorted by rank first: its extremes are its first and last rows.
  for (const auto* col :
       {&s.activities.rank, &s.launches.rank, &s.annotations.rank, &s.counters.rank, &s.ops.rank})
    if (!col->empty()) {
      see(col->front());
      see(col->back());
    }
  for (const RankInfo& r : part.ranks) see(r.rank);
  // merge_stores' order: first RankInfo rank, else first activity rank, else last.
  m.key = part.ranks.empty() ? std::numeric_limits<int64_t>::max() : part.ranks.front().rank;
  if (part.ranks.empty() && !s.activities.rank.empty()) m.key = s.activities.rank.front();
  return m;
}

// Everything every process knows after the exchange.
struct Plan {
  std::vector<Summary> all;      // by communicator rank
  std::vector<int> order;        // processes in merge (rank) order
  std::vector<uint32_t> my_map;  // this process's string ids → global ids
  StringTable strings;           // the global table (identical everywhere)
  std::vector<RankInfo> ranks;   // global /ranks rows, sorted
  StoreAttrs attrs;              // global file attributes
  Summary offset{};              // where this process's rows go (rows[] per table)
  std::string path, tmp;         // output and temporary file, as rank 0 chose them
};

// Every process's metadata (`everything`, process p's at displs[p], counts[p] bytes) → the plan:
// merge order, global string table, attributes, offsets, /ranks rows. The same on every process;
// throws Failure for a store the merge would refuse (duplicate or interleaved ranks).
void decode_plan(const std::string& everything, const std::vector<int>& counts,
                 const std::vector<int>& displs, int me, Plan& plan) {
  const int np = static_cast<int>(counts.size());
  std::vector<StoreAttrs> attrs(np);
  std::vector<std::vector<RankInfo>> ranks(np);
  std::vector<In> strings_at(np, In{nullptr, nullptr});
  for (int p = 0; p < np; ++p) {
    In in{everything.data() + displs[p], everything.data() + displs[p] + counts[p]};
    in.str();  // path and temporary name, read above from rank 0's
    in.str();
    attrs[p] = get_attrs(in);
    auto nr = in.pod<uint64_t>();
    for (uint64_t i = 0; i < nr; ++i) ranks[p].push_back(get_rank(in));
    strings_at[p] = in;
  }

  // Duplicate ranks, reported as merge_stores does (parts in communicator order).
  std::map<int32_t, std::string> owner;
  for (int p = 0; p < np; ++p)
    for (const RankInfo& r : ranks[p]) {
      std::string src = r.source.empty() ? "process " + std::to_string(p) : r.source;
      auto [it, fresh] = owner.try_emplace(r.rank, src);
      if (!fresh)
        throw Failure("duplicate rank " + std::to_string(r.rank) + ": " + it->second + " and " +
                      src);
    }

  plan.order.resize(np);
  std::iota(plan.order.begin(), plan.order.end(), 0);
  std::stable_sort(plan.order.begin(), plan.order.end(),
                   [&](int x, int y) { return plan.all[x].key < plan.all[y].key; });
  // Each process writes one contiguous slice per table, so the processes' rank ranges must
  // not interleave (then the slices in order are the globally sorted tables).
  int prev = -1;
  for (int p : plan.order) {
    const Summary& s = plan.all[p];
    if (s.lo > s.hi) continue;  // no rows at all
    if (prev >= 0 && plan.all[prev].hi >= s.lo)
      throw Failure("processes " + std::to_string(prev) + " and " + std::to_string(p) +
                    " hold overlapping rank numbers (" + std::to_string(plan.all[prev].lo) + ".." +
                    std::to_string(plan.all[prev].hi) + " and " + std::to_string(s.lo) + ".." +
                    std::to_string(s.hi) + "); each process must hold its own ranks");
    prev = p;
  }

  // Global string table: each part's strings interned in merge order, as merge_stores does.
  for (int p : plan.order) {
    In& in = strings_at[p];
    auto n = in.pod<uint64_t>();
    if (p == me) plan.my_map.resize(n);
    for (uint64_t i = 0; i < n; ++i) {
      uint32_t id = plan.strings.intern(in.str());
      if (p == me) plan.my_map[i] = id;
    }
  }

  plan.attrs = attrs[plan.order.front()];
  plan.attrs.schema_version = kSchemaVersion;
  for (int p = 0; p < np; ++p) plan.attrs.emulated = plan.attrs.emulated || attrs[p].emulated;

  Summary off{};
  for (int p : plan.order) {
    if (p == me) plan.offset = off;
    const Summary& s = plan.all[p];
    for (size_t t = 0; t < kTables; ++t) off.rows[t] += s.rows[t];
    for (RankInfo& r : ranks[p]) plan.ranks.push_back(std::move(r));
  }
}

// Collective. Exchanges summaries and metadata (rank 0's includes the output name it chose);
// every process computes the same plan, or returns the same complete error message.
// `failure`: 0, or 1 if this process's preparation failed (`local_error`), or 2 if rank 0
// could not set up the output (`local_error` is then the whole message).
std::string exchange(MPI_Comm comm, const Part* part, const std::string& local_error, int failure,
                     Plan& plan) {
  int me = 0, np = 0;
  MPI_Comm_rank(comm, &me);
  MPI_Comm_size(comm, &np);

  Out blob;
  Summary mine{};
  mine.failed = failure;
  if (!failure) {
    mine = summarise(*part);
    blob.str(plan.path);  // meaningful from rank 0 only
    blob.str(plan.tmp);
    put_attrs(blob, part->attrs);
    blob.pod<uint64_t>(part->ranks.size());
    for (const RankInfo& r : part->ranks) put_rank(blob, r);
    const StringTable& st = part->src->strings;
    blob.pod<uint64_t>(st.size());
    for (const std::string& s : st.all()) blob.str(s);
    mine.blob = static_cast<int64_t>(blob.buf.size());
  }

  plan.all.resize(np);
  MPI_Allgather(&mine, kSummaryWords, MPI_INT64_T, plan.all.data(), kSummaryWords, MPI_INT64_T,
                comm);
  if (plan.all[0].failed == 2) return bcast_string(comm, 0, local_error);
  // A process whose preparation failed: everybody reports the first such process's error.
  for (int p = 0; p < np; ++p)
    if (plan.all[p].failed) {
      std::string path = bcast_string(comm, 0, plan.path);
      return path + ": " + bcast_string(comm, p, local_error);
    }
  int64_t total = 0;
  for (const Summary& s : plan.all) total += s.blob;
  std::vector<int> counts(np), displs(np);
  for (int p = 0; p < np; ++p) {
    counts[p] = static_cast<int>(plan.all[p].blob);
    displs[p] = p ? displs[p - 1] + counts[p - 1] : 0;
  }
  if (total > INT_MAX) {
    std::string path = bcast_string(comm, 0, plan.path);
    return path + ": string tables and rank metadata too large to exchange (" +
           std::to_string(total) + " bytes)";
  }
  std::string everything(static_cast<size_t>(total), '\0');
  MPI_Allgatherv(blob.buf.data(), counts[me], MPI_CHAR, everything.data(), counts.data(),
                 displs.data(), MPI_CHAR, comm);
  {
    In in{everything.data(), everything.data() + counts[0]};
    plan.path = in.str();
    plan.tmp = in.str();
  }

  // From here on every process computes the same thing from the same bytes: no more messages.
  std::string err = capture([&] { decode_plan(everything, counts, displs, me, plan); });
  return err.empty() ? err : plan.path + ": " + err;
}

// After the exchange: the id columns in global string ids, nccl.activity in global rows. Only
// what changes is copied (process 0 in rank order usually keeps its ids and rows).
void globalise(Part& part, const Plan& plan) {
  const std::vector<uint32_t>& map = plan.my_map;
  bool identity = true;
  for (size_t i = 0; i < map.size() && identity; ++i) identity = map[i] == i;
  if (!identity)
    all_columns(*part.src, [&](const std::string& what, const auto& col, size_t) {
      if constexpr (std::is_same_v<std::decay_t<decltype(col)>, std::vector<uint32_t>>) {
        std::vector<uint32_t>& out = part.ids[what];
        out.resize(col.size());
        // In range: checked by ready_as_is() or merge_stores().
        for (size_t i = 0; i < col.size(); ++i) out[i] = map[col[i]];
      }
    });
  if (const auto base = static_cast<uint64_t>(plan.offset.rows[0]); base) {  // activities
    const auto& a = part.src->nccl.activity;
    part.nccl_activity.resize(a.size());
    for (size_t i = 0; i < a.size(); ++i) part.nccl_activity[i] = a[i] + base;
  }
}

// ---------------------------------------------------------------------------------------------
// Phase 1: the collective part

class Phase1 {
 public:
  Phase1(MPI_Comm comm, const std::string& tmp) {
    Handle fapl(h5(H5Pcreate(H5P_FILE_ACCESS), "cannot create property list"), H5Pclose);
    ok(H5Pset_fapl_mpio(fapl, comm, MPI_INFO_NULL), "cannot select the MPI-IO driver");
    // Metadata written collectively: fewer, larger writes, and no rank-0 bottleneck.
    ok(H5Pset_coll_metadata_write(fapl, true), "cannot set collective metadata writes");
    ok(H5Pset_all_coll_metadata_ops(fapl, true), "cannot set collective metadata reads");
    file_ = std::make_unique<Handle>(
        h5(H5Fcreate(tmp.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, fapl), "cannot create file"),
        H5Fclose);
    dxpl_ = std::make_unique<Handle>(h5(H5Pcreate(H5P_DATASET_XFER), "cannot create property list"),
                                     H5Pclose);
    ok(H5Pset_dxpl_mpio(*dxpl_, H5FD_MPIO_COLLECTIVE), "cannot select collective transfers");
  }

  hid_t file() const { return *file_; }

  // Creates the dataset with `rows` rows in all and writes `col` at [offset, offset + size)
  // with one collective write, in which every process takes part.
  template <class T>
  void column(hid_t group, const char* name, const std::string& what, const std::vector<T>& col,
              size_t rows, size_t offset) {
    Handle ds = create_dataset(group, what, name, H5Traits<T>::file(), rows, kChunkRows);
    if (!rows) return;  // every process knows: nobody writes
    Handle fspace(h5(H5Dget_space(ds), "cannot write " + what), H5Sclose);
    const hsize_t n = col.size();
    hsize_t mdims[1] = {std::max<hsize_t>(n, 1)};
    Handle mspace(h5(H5Screate_simple(1, mdims, nullptr), "cannot write " + what), H5Sclose);
    if (n) {
      hsize_t start[1] = {offset}, count[1] = {n};
      ok(H5Sselect_hyperslab(fspace, H5S_SELECT_SET, start, nullptr, count, nullptr),
         "cannot select rows of " + what);
    } else {
      // Collective: a process with nothing to write still takes part, selecting nothing.
      ok(H5Sselect_none(fspace), "cannot select rows of " + what);
      ok(H5Sselect_none(mspace), "cannot select rows of " + what);
    }
    static const T dummy{};
    ok(H5Dwrite(ds, H5Traits<T>::mem(), mspace, fspace, *dxpl_, n ? col.data() : &dummy),
       "cannot write " + what);
  }

  void finish() {
    dxpl_.reset();
    // Closing flushes metadata: a failure here (disk full) must fail the write.
    ok(file_->close(), "cannot finish writing the file");
  }

 private:
  std::unique_ptr<Handle> file_;
  std::unique_ptr<Handle> dxpl_;
};

void write_phase1(MPI_Comm comm, const std::string& tmp, const Part& part, const Plan& plan) {
  Phase1 w(comm, tmp);
  // The tables in the serial writer's order; /strings and /ranks follow in phase 2.
  written_tables(*part.src, [&](size_t i, const char* name, const auto& tab) {
    size_t rows = 0;
    for (const Summary& x : plan.all) rows += static_cast<size_t>(x.rows[i]);
    if (table_optional(name) && !rows) return;  // as write_store: no group at all
    const auto off = static_cast<size_t>(plan.offset.rows[i]);
    Handle g = create_group(w.file(), name);
    named(name, tab, [&](const std::string& what, const auto& col) {
      w.column(g, what.substr(what.rfind('/') + 1).c_str(), what, part.column(what, col), rows,
               off);
    });
  });
  w.finish();
}

// ---------------------------------------------------------------------------------------------
// Phase 2: rank 0 alone

// /strings and /ranks (variable-length data, which parallel HDF5 cannot write, and /ranks whole
// so that its columns keep their creation order) and the file attributes, written exactly as
// write_store writes them.
void write_phase2(const std::string& tmp, const Plan& plan) {
  Handle fapl = file_access();
  Handle file(h5(H5Fopen(tmp.c_str(), H5F_ACC_RDWR, fapl), "cannot reopen file"), H5Fclose);
  write_file_attrs(file, plan.attrs);
  write_string_table(file, plan.strings);
  write_ranks_group(file, plan.ranks);
  ok(file.close(), "cannot finish writing the file");
}

// Rank 0: the output name (a free one when asked) and its temporary file, created already.
// Errors are final messages (already naming the path).
std::unique_ptr<AtomicFile> decide_names(const ParallelWriteOptions& opt, std::string& path,
                                         std::string& tmp) {
  path = opt.path;
  if (path.empty()) throw Error("no output path given");
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && !S_ISDIR(st.st_mode) && !opt.force && opt.pick_free_name)
    path = free_name(path);
  auto out = std::make_unique<AtomicFile>(path, opt.force);
  tmp = out->tmp();
  return out;
}

}  // namespace

std::string write_store_parallel(const Store& local, MPI_Comm comm,
                                 const ParallelWriteOptions& opt) {
  QuietErrors quiet;
  int me = 0;
  MPI_Comm_rank(comm, &me);

  // 1. Rank 0 chooses the output name and creates the temporary file; every process prepares
  // its part. Nobody waits for anybody until the exchange, which also carries rank 0's choice.
  Plan plan;
  std::string err;
  std::unique_ptr<AtomicFile> out;  // rank 0: removes the temporary unless committed
  int failure = 0;
  if (me == 0) {
    err = capture([&] { out = decide_names(opt, plan.path, plan.tmp); });
    if (!err.empty()) failure = 2;
  }
  Part part;
  if (!failure) {
    err = capture([&] { prepare(local, part); });
    if (!err.empty()) failure = 1;
  }

  // 2. The exchange of counts, strings and rank metadata; ids and rows made global.
  err = exchange(comm, &part, err, failure, plan);
  if (err.empty()) {
    err = capture([&] { globalise(part, plan); });
    if (!err.empty()) err = plan.path + ": " + err;
  }
  if (std::string e = agree(comm, err); !e.empty()) throw Error(e);
  const std::string& path = plan.path;
  const std::string& tmp = plan.tmp;
  auto fail_all = [&](const std::string& why) -> Error { return Error(path + ": " + why); };

  // 3. Phase 1, collective: every dataset, every numeric slice.
  err = capture([&] { write_phase1(comm, tmp, part, plan); });
  part = Part();
  if (std::string e = agree(comm, err); !e.empty()) throw fail_all(e);

  // 4. Phase 2, rank 0: strings, attributes, rename.
  if (me == 0) {
    err = capture([&] { write_phase2(tmp, plan); });
    if (!err.empty())
      err = path + ": " + err;
    else
      err = capture([&] { out->commit(); });  // its message names the path already
  }
  if (std::string e = agree(comm, err); !e.empty()) throw Error(e);
  return path;
}

void write_store_world(const Store& local, const std::string& path, const WriteOptions& opt) {
  ParallelWriteOptions p;
  p.path = path;
  p.force = opt.force;
  p.pick_free_name = false;  // kernalyse-merge -o: an existing output is refused, never renamed
  write_store_parallel(local, MPI_COMM_WORLD, p);
}

}  // namespace kernalyse
