// Inputs and the import of several trace files (kernalyse/inputs.h).
#include "kernalyse/inputs.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>

#include "kernalyse/error.h"
#include "kernalyse/import.h"
#include "kernalyse/nsys.h"
#include "kernalyse/nsys_ranks.h"
#include "kernalyse/parallel.h"
#include "kernalyse/spill.h"
#include "kernalyse/store_archive.h"

namespace fs = std::filesystem;

namespace kernalyse {

namespace {

// What the importer of one of `files` files is told.
ImportOptions file_options(const ImportFilesOptions& opt, size_t files, Progress* progress) {
  ImportOptions iopt;
  iopt.classifier = opt.classifier;
  iopt.progress = progress;
  if (files == 1) iopt.rank = opt.rank;  // --rank names a single trace's rank
  iopt.only_input = files == 1;          // one rankless file is rank 0
  iopt.step_range = opt.step_range;
  iopt.gpu_event = opt.gpu_event;
  iopt.ops = opt.ops;
  iopt.chunk_rows = opt.chunk_rows;
  return iopt;
}

// The one line an import's failure becomes, naming the file.
std::string import_error(const std::string& file, const std::exception& e) {
  if (dynamic_cast<const Error*>(&e)) return e.what();
  if (dynamic_cast<const std::bad_alloc*>(&e)) return file + ": out of memory while importing";
  return file + ": cannot import: " + e.what();  // anything else: still one line naming the file
}

bool is_trace_name(const fs::path& p) {
  const std::string n = p.filename().string();
  auto ends = [&](std::string_view s) {
    return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".json") || ends(".json.gz") || ends(".sqlite");
}

// Nsight Systems reports (SQLite, told by the file header) or Kineto JSON: one kind per run.
std::vector<char> one_kind(const std::vector<std::string>& files, const std::string& step_range) {
  std::vector<char> nsys(files.size());
  for (size_t i = 0; i < files.size(); ++i) nsys[i] = is_sqlite_file(files[i]);
  for (size_t i = 1; i < files.size(); ++i)
    if (nsys[i] != nsys[0])
      throw Error(files[nsys[i] ? i : 0] + ": an Nsight Systems report mixed with JSON traces (" +
                  files[nsys[i] ? 0 : i] + "); import one kind at a time");
  if (!step_range.empty() && (files.empty() || !nsys[0]))
    throw Error("--step-range applies to Nsight Systems reports (.sqlite) only");
  return nsys;
}

// Under mpirun (opt.spread): which process imports each file. Contiguous runs of files of about
// equal bytes: file i goes to the process whose share of the total holds the middle of its bytes.
std::vector<int> file_owners(const std::vector<int64_t>& bytes, const Spread* spread) {
  std::vector<int> owner(bytes.size(), 0);
  if (!spread || spread->processes < 2) return owner;
  int64_t total = 0;
  for (int64_t b : bytes) total += std::max<int64_t>(b, 1);
  int64_t before = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const int64_t b = std::max<int64_t>(bytes[i], 1);
    const double middle = static_cast<double>(before) + static_cast<double>(b) / 2;
    owner[i] = std::min(spread->processes - 1,
                        static_cast<int>(middle * spread->processes / static_cast<double>(total)));
    before += b;
  }
  return owner;
}

// What the import of each file left, by file index; under mpirun a process fills its own files'
// entries and receives the others' (their outcome always, their rows when they come to it).
struct FileSet {
  explicit FileSet(size_t n) : parts(n), st(n), errors(n), rankless(n, 0), procs(n) {}
  std::vector<Store> parts;
  std::vector<ImportStats> st;
  std::vector<std::string> errors;
  std::vector<char> rankless;
  std::vector<std::vector<NsysProcess>> procs;  // Nsight Systems: ranked together
  // When set, each imported part is handed over here (on the pool's thread) instead of kept.
  std::function<void(size_t file, Store& part)> keep;

  // File i's outcome, and its rows when `rows`.
  void put(Archive& ar, size_t i, bool rows) const {
    ar.put(static_cast<uint64_t>(i));
    if (rows) put_store(ar, parts[i]);
    ar.put(st[i].bytes), ar.put(st[i].events), ar.put(st[i].malformed);
    ar.put(st[i].warnings), ar.put(st[i].notes), ar.put(errors[i]), ar.put(rankless[i]);
    ar.put(static_cast<uint64_t>(procs[i].size()));
    for (const NsysProcess& p : procs[i]) {
      ar.put(p.file), ar.put(p.host), ar.put(p.pid), ar.put(p.shared_file), ar.put(p.local_rank);
      ar.put(static_cast<uint64_t>(p.claims.size()));
      for (const RankClaim& c : p.claims) ar.put(c.rank), ar.put(c.source);
    }
  }
  void get(Archive& ar, bool rows) {
    const auto i = ar.get<uint64_t>();
    if (i >= parts.size()) throw Error("MPI import: a file index out of range");
    if (rows) get_store(ar, parts[i]);
    ar.get(st[i].bytes), ar.get(st[i].events), ar.get(st[i].malformed);
    ar.get(st[i].warnings), ar.get(st[i].notes), ar.get(errors[i]), ar.get(rankless[i]);
    procs[i].resize(ar.get<uint64_t>());
    for (NsysProcess& p : procs[i]) {
      ar.get(p.file), ar.get(p.host), ar.get(p.pid), ar.get(p.shared_file), ar.get(p.local_rank);
      p.claims.resize(ar.get<uint64_t>());
      for (RankClaim& c : p.claims) ar.get(c.rank), ar.get(c.source);
    }
  }
};

// This process's files (`mine`), one per task on the pool; a failure is kept with its file.
void import_each(const std::vector<std::string>& files, const std::vector<size_t>& mine,
                 const std::vector<char>& nsys, const ImportOptions& iopt, FileSet& fs) {
  parallel_for(mine.size(), [&](size_t k) {
    const size_t i = mine[k];
    try {
      fs.parts[i] = nsys[i] ? import_nsys_report(files[i], iopt, &fs.st[i], &fs.procs[i])
                            : import_trace_file(files[i], iopt, &fs.st[i]);  // Kineto or rocprof
      if (fs.keep) {
        fs.keep(i, fs.parts[i]);
        fs.parts[i] = Store();
      }
    } catch (const NoRankError& e) {
      fs.errors[i] = e.what();
      fs.rankless[i] = 1;
    } catch (const std::exception& e) {
      fs.errors[i] = import_error(files[i], e);
    }
  });
}

// Every process's files (`rows`: with their rows) to the first one (`to_all`: to every one).
// False on the processes that get nothing.
bool share_files(const Spread& spread, const std::vector<int>& owner, FileSet& fs, bool rows,
                 bool to_all) {
  Archive mine;
  const auto own = static_cast<uint64_t>(std::count(owner.begin(), owner.end(), spread.process));
  mine.put(own);
  for (size_t i = 0; i < owner.size(); ++i)
    if (owner[i] == spread.process) fs.put(mine, i, rows);
  std::string all = to_all ? spread.all_gather(mine.bytes()) : spread.gather(mine.bytes());
  mine = Archive();
  if (!to_all && spread.process != 0) return false;
  Archive in(std::move(all));
  for (int p = 0; p < spread.processes; ++p)
    for (auto n = in.get<uint64_t>(); n > 0; --n) fs.get(in, rows);
  return true;
}

// The run's failure, as one process says it: several files that do not say their rank in one
// line that lists them all, else the first failing file's line.
void check_failures(const std::vector<std::string>& files, const FileSet& fs) {
  const auto n_rankless = std::count(fs.rankless.begin(), fs.rankless.end(), 1);
  if (n_rankless > 1) {
    std::string list;
    for (size_t i = 0; i < files.size(); ++i)
      if (fs.rankless[i]) list += (list.empty() ? "" : ", ") + files[i];
    throw Error("cannot tell the ranks of " + std::to_string(n_rankless) +
                " traces (no distributedInfo.rank, no rank in the file names): " + list +
                "; name them rank-N.json or import them one by one with --rank N");
  }
  for (const auto& e : fs.errors)
    if (!e.empty()) throw Error(e);
}

void add_stats(const FileSet& fs, ImportStats* stats) {
  for (const auto& s : fs.st) {
    stats->bytes += s.bytes;
    stats->events += s.events;
    stats->malformed += s.malformed;
    stats->warnings.insert(stats->warnings.end(), s.warnings.begin(), s.warnings.end());
    stats->notes.insert(stats->notes.end(), s.notes.begin(), s.notes.end());
  }
}

// What one run of import_files sets up: the files' kind, size and owner, this process's share
// and its progress bar (in on-disk bytes: parallel imports advance it together).
struct ImportRun {
  const std::vector<std::string>& files;
  std::vector<char> nsys;
  std::vector<int64_t> bytes;
  const Spread* spread;
  std::vector<int> owner;
  std::vector<size_t> mine;
  std::unique_ptr<Progress> progress;
  ImportOptions iopt;
  FileSet fs;

  ImportRun(const std::vector<std::string>& f, const ImportFilesOptions& opt,
            std::function<void(size_t, Store&)> keep = nullptr)
      : files(f),
        nsys(one_kind(f, opt.step_range)),
        bytes(f.size()),
        spread(opt.spread && opt.spread->processes > 1 ? opt.spread : nullptr),
        fs(f.size()) {
    for (size_t i = 0; i < files.size(); ++i) bytes[i] = input_bytes(files[i]);
    owner = file_owners(bytes, spread);
    const int me = spread ? spread->process : 0;
    int64_t total = 0;
    for (size_t i = 0; i < files.size(); ++i)
      if (owner[i] == me) mine.push_back(i), total += bytes[i];
    const std::string several =
        spread ? std::to_string(mine.size()) + " of " + std::to_string(files.size()) + " files"
               : std::to_string(files.size()) + " files";
    progress = std::make_unique<Progress>(
        files.size() == 1 ? "importing " + fs::path(files[0]).filename().string()
                          : "importing " + several,
        total, "bytes", me == 0 ? opt.progress : ProgressMode::Off);
    iopt = file_options(opt, files.size(), progress.get());
    fs.keep = std::move(keep);
    import_each(files, mine, nsys, iopt, fs);
  }
  // After every file's outcome is known here: the errors, the Nsight Systems ranks, the stats.
  void conclude(ImportStats* stats) {
    check_failures(files, fs);
    if (!files.empty() && nsys[0])
      rank_nsys_reports(fs.parts, fs.procs, iopt.only_input, &fs.st[0]);
    add_stats(fs, stats);
  }
};

// A file's ranks as merge_stores orders and write_store_world places them: its merge key (the
// first rank), the range of rank numbers its rows and /ranks rows use, and its /ranks rows.
struct FileRanks {
  int64_t key = INT64_MAX, lo = INT64_MAX, hi = INT64_MIN;
  std::vector<int32_t> ranks;
  explicit FileRanks(const Store& s) {
    for (const RankInfo& r : s.ranks) ranks.push_back(r.rank), see(r.rank);
    if (!ranks.empty()) key = *std::min_element(ranks.begin(), ranks.end());
    const auto& a = s.activities.rank;
    if (ranks.empty() && !a.empty()) key = *std::min_element(a.begin(), a.end());
    for (const auto* col :
         {&a, &s.launches.rank, &s.annotations.rank, &s.counters.rank, &s.ops.rank})
      if (!col->empty()) {
        auto [lo_it, hi_it] = std::minmax_element(col->begin(), col->end());
        see(*lo_it), see(*hi_it);
      }
  }
  FileRanks() = default;
  void see(int64_t r) { lo = std::min(lo, r), hi = std::max(hi, r); }
};

// The files in merge order (by first rank, as merge_stores orders its parts) into *order; false
// when two files share a rank number or their ranks interleave (a file's rows are then not one
// run of the merged tables).
bool merge_order(const std::vector<FileRanks>& all, std::vector<size_t>* order) {
  order->resize(all.size());
  for (size_t i = 0; i < all.size(); ++i) (*order)[i] = i;
  std::stable_sort(order->begin(), order->end(),
                   [&](size_t x, size_t y) { return all[x].key < all[y].key; });
  std::vector<int32_t> seen;
  for (const FileRanks& f : all) seen.insert(seen.end(), f.ranks.begin(), f.ranks.end());
  std::sort(seen.begin(), seen.end());
  if (std::adjacent_find(seen.begin(), seen.end()) != seen.end()) return false;
  int64_t before = INT64_MIN;  // the highest rank of the files before, in merge order
  for (size_t i : *order) {
    if (all[i].lo > all[i].hi) continue;  // no rows, no ranks
    if (all[i].lo <= before) return false;
    before = all[i].hi;
  }
  return true;
}

// Under mpirun, -o alone: the process each file goes to so that every process holds a run of
// files in merge order (by first rank) whose ranks lie between the runs before and after it, of
// about equal bytes; then each writes its rows of the store (write_store_world). When two files
// share a rank number or their ranks interleave (a merged multi-rank trace, say), every file goes
// to process 0 (*whole), which goes on as one process would.
std::vector<int> place_files(const Spread& spread, const std::vector<int>& owner, const FileSet& fs,
                             const std::vector<int64_t>& bytes, bool* whole) {
  const size_t n = owner.size();
  Archive mine;
  for (size_t i = 0; i < n; ++i)
    if (owner[i] == spread.process) {
      const FileRanks f(fs.parts[i]);
      mine.put(static_cast<uint64_t>(i)), mine.put(f.key), mine.put(f.lo), mine.put(f.hi);
      mine.put(f.ranks);
    }
  mine.put(UINT64_MAX);
  std::vector<FileRanks> all(n);
  Archive in(spread.all_gather(mine.bytes()));
  for (int p = 0; p < spread.processes; ++p)
    for (auto i = in.get<uint64_t>(); i != UINT64_MAX; i = in.get<uint64_t>()) {
      if (i >= n) throw Error("MPI import: a file index out of range");
      FileRanks& f = all[i];
      in.get(f.key), in.get(f.lo), in.get(f.hi), in.get(f.ranks);
    }
  std::vector<size_t> order;
  *whole = !merge_order(all, &order);
  if (*whole) return std::vector<int>(n, 0);
  std::vector<int64_t> in_order(n);
  for (size_t k = 0; k < n; ++k) in_order[k] = bytes[order[k]];
  const std::vector<int> by_order = file_owners(in_order, &spread);
  std::vector<int> target(n);
  for (size_t k = 0; k < n; ++k) target[order[k]] = by_order[k];
  return target;
}

// Sends each file this process imported to the process `target` names (one all-to-all).
void move_files(const Spread& spread, const std::vector<int>& owner, const std::vector<int>& target,
                FileSet& fs) {
  std::vector<Archive> out(static_cast<size_t>(spread.processes));
  for (size_t i = 0; i < owner.size(); ++i)
    if (owner[i] == spread.process && target[i] != spread.process) {
      Archive& ar = out[static_cast<size_t>(target[i])];
      ar.put(static_cast<uint64_t>(i));
      put_store(ar, fs.parts[i]);
      fs.parts[i] = Store();
    }
  std::vector<std::string> to;
  for (Archive& ar : out) {
    ar.put(UINT64_MAX);
    to.push_back(ar.bytes());
    ar = Archive();
  }
  Archive in(spread.all_to_all(to));
  to.clear();
  for (int p = 0; p < spread.processes; ++p)
    for (auto i = in.get<uint64_t>(); i != UINT64_MAX; i = in.get<uint64_t>()) {
      if (i >= fs.parts.size()) throw Error("MPI import: a file index out of range");
      get_store(in, fs.parts[i]);
    }
}

// Collective: the first process's error, if any has one, thrown on every process.
void agree_error(const Spread& spread, const std::string& mine) {
  Archive ar;
  ar.put(mine);
  Archive all(spread.all_gather(ar.bytes()));
  for (int p = 0; p < spread.processes; ++p) {
    const auto e = all.get<std::string>();
    if (!e.empty()) throw Error(e);
  }
}

}  // namespace

std::vector<std::string> expand_inputs(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  for (const auto& p : in) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(p, ec))
        if (e.is_regular_file() && is_trace_name(e.path())) found.push_back(e.path().string());
      if (found.empty())
        throw Error(p + ": no *.json, *.json.gz or *.sqlite trace files in this directory");
      std::sort(found.begin(), found.end());
      out.insert(out.end(), found.begin(), found.end());
    } else if (fs::exists(p, ec)) {
      out.push_back(p);
    } else {
      throw Error(p + ": no such file or directory");
    }
  }
  return out;
}

Store import_files(const std::vector<std::string>& files, const ImportFilesOptions& opt,
                   ImportStats* stats) {
  ImportRun run(files, opt);
  if (run.spread && !share_files(*run.spread, run.owner, run.fs, true, false)) return Store();
  run.conclude(stats);
  Store merged = merge_stores(std::move(run.fs.parts));
  run.progress->finish();
  return merged;
}

Store import_files_spread(const std::vector<std::string>& files, const ImportFilesOptions& opt,
                          ImportStats* stats, bool* whole) {
  *whole = true;
  if (!opt.spread || opt.spread->processes < 2) return import_files(files, opt, stats);
  ImportRun run(files, opt);
  const Spread& spread = *run.spread;
  share_files(spread, run.owner, run.fs, false, true);  // every file's outcome, everywhere
  run.conclude(stats);  // the same errors, ranks and stats on every process
  const std::vector<int> target = place_files(spread, run.owner, run.fs, run.bytes, whole);
  move_files(spread, run.owner, target, run.fs);
  if (*whole && spread.process != 0) return Store();
  std::vector<Store> keep;
  for (size_t i = 0; i < files.size(); ++i)
    if (target[i] == spread.process) keep.push_back(std::move(run.fs.parts[i]));
  Store merged;
  std::string err;
  try {
    merged = merge_stores(std::move(keep));
  } catch (const std::exception& e) {
    if (*whole) throw;
    err = e.what();
  }
  if (!*whole) agree_error(spread, err);  // the others are writing with this one next
  run.progress->finish();
  return merged;
}

struct SpilledImport::Impl {
  explicit Impl(const std::string& dir) : file(dir) {}
  SpillFile file;
  std::mutex mutex;                 // the pool's threads append to one file
  std::vector<uint64_t> at, bytes;  // by file: where its part is in `file`
  std::vector<FileRanks> ranks;     // by file
  std::vector<size_t> order;        // merge order
  bool ordered = false;
};

SpilledImport::SpilledImport(const std::vector<std::string>& files, const ImportFilesOptions& opt,
                             ImportStats* stats, const std::string& dir,
                             const std::function<void(size_t, const Store&)>& seen)
    : impl_(std::make_unique<Impl>(dir)) {
  Impl& m = *impl_;
  m.at.assign(files.size(), 0), m.bytes.assign(files.size(), 0), m.ranks.resize(files.size());
  ImportRun run(files, opt, [&m, &files, &seen](size_t i, Store& part) {
    std::vector<Store> one;  // in the form merge_stores gives it: sorted, every column whole
    one.push_back(std::move(part));
    Store ready = merge_stores(std::move(one));
    m.ranks[i] = FileRanks(ready);
    if (seen) seen(i, ready);
    Archive ar;
    put_store(ar, ready);
    ready = Store();
    std::lock_guard<std::mutex> lock(m.mutex);
    m.bytes[i] = ar.bytes().size();
    try {
      m.at[i] = m.file.append(ar.bytes().data(), ar.bytes().size());
    } catch (const Error& e) {  // a full disk: the file it was for, and the directory
      throw Error(files[i] + ": " + e.what());
    }
  });
  if (!files.empty() && run.nsys[0])
    throw Error("internal error: Nsight Systems reports are ranked together, not kept on disk");
  run.conclude(stats);
  m.ordered = merge_order(m.ranks, &m.order);
  run.progress->finish();
}

SpilledImport::~SpilledImport() = default;

bool SpilledImport::in_rank_order() const { return impl_->ordered; }

size_t SpilledImport::size() const { return impl_->order.size(); }

uint64_t SpilledImport::disk_bytes() const {
  uint64_t n = 0;
  for (uint64_t b : impl_->bytes) n += b;
  return n;
}

Store SpilledImport::read(size_t k) const {
  const size_t i = impl_->order.at(k);
  std::string bytes(impl_->bytes[i], '\0');
  impl_->file.read(impl_->at[i], bytes.data(), bytes.size());
  Archive ar(std::move(bytes));
  Store s;
  get_store(ar, s);
  return s;
}

Store import_file_streamed(const std::string& file, const ImportFilesOptions& opt,
                           ImportStats* stats, StoreStream& out, const std::string& spill_dir) {
  Progress progress("importing " + fs::path(file).filename().string(), input_bytes(file), "bytes",
                    opt.progress);
  const ImportOptions iopt = file_options(opt, 1, &progress);
  Store s;
  bool whole = false;
  try {
    s = import_kineto_streamed(file, iopt, stats, out, spill_dir, &whole);
  } catch (const std::exception& e) {
    throw Error(import_error(file, e));
  }
  // What import_files' merge of the one part does: the rows in the store's order.
  if (whole) {
    std::vector<Store> one;
    one.push_back(std::move(s));
    s = merge_stores(std::move(one));
  } else {
    sort_annotations(s.annotations);
  }
  progress.finish();
  return s;
}

}  // namespace kernalyse
