// Inputs and the import of several trace files (kernalyse/inputs.h).
#include "kernalyse/inputs.h"

#include <algorithm>
#include <filesystem>

#include "kernalyse/error.h"
#include "kernalyse/import.h"
#include "kernalyse/nsys.h"
#include "kernalyse/nsys_ranks.h"
#include "kernalyse/parallel.h"
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

// What the import of one file left (import_files' per-file vectors), as bytes and back: what a
// process sends to the first one.
struct FileResults {
  std::vector<Store>& parts;
  std::vector<ImportStats>& st;
  std::vector<std::string>& errors;
  std::vector<char>& rankless;
  std::vector<std::vector<NsysProcess>>& procs;

  void put(Archive& ar, size_t i) const {
    ar.put(static_cast<uint64_t>(i));
    put_store(ar, parts[i]);
    ar.put(st[i].bytes), ar.put(st[i].events), ar.put(st[i].malformed);
    ar.put(st[i].warnings), ar.put(st[i].notes), ar.put(errors[i]), ar.put(rankless[i]);
    ar.put(static_cast<uint64_t>(procs[i].size()));
    for (const NsysProcess& p : procs[i]) {
      ar.put(p.file), ar.put(p.host), ar.put(p.pid), ar.put(p.shared_file), ar.put(p.local_rank);
      ar.put(static_cast<uint64_t>(p.claims.size()));
      for (const RankClaim& c : p.claims) ar.put(c.rank), ar.put(c.source);
    }
  }
  void get(Archive& ar) {
    const auto i = ar.get<uint64_t>();
    if (i >= parts.size()) throw Error("MPI import: a file index out of range");
    get_store(ar, parts[i]);
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

// Every process's files to the first one. False on the others (they are done).
bool gather_files(const Spread& spread, const std::vector<int>& owner, FileResults& r) {
  Archive mine;
  const auto own = static_cast<uint64_t>(std::count(owner.begin(), owner.end(), spread.process));
  mine.put(own);
  for (size_t i = 0; i < owner.size(); ++i)
    if (owner[i] == spread.process) r.put(mine, i);
  std::string all = spread.gather(mine.bytes());
  mine = Archive();
  if (spread.process != 0) return false;
  Archive in(std::move(all));
  for (int p = 0; p < spread.processes; ++p)
    for (auto n = in.get<uint64_t>(); n > 0; --n) r.get(in);
  return true;
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
  std::vector<Store> parts(files.size());
  std::vector<ImportStats> st(files.size());
  std::vector<std::string> errors(files.size());
  std::vector<char> rankless(files.size(), 0);
  const std::vector<char> nsys = one_kind(files, opt.step_range);
  std::vector<std::vector<NsysProcess>> procs(files.size());  // Nsight Systems: ranked together
  std::vector<int64_t> bytes(files.size());
  for (size_t i = 0; i < files.size(); ++i) bytes[i] = input_bytes(files[i]);
  const Spread* spread = opt.spread && opt.spread->processes > 1 ? opt.spread : nullptr;
  const std::vector<int> owner = file_owners(bytes, spread);
  const int me = spread ? spread->process : 0;
  std::vector<size_t> mine;
  for (size_t i = 0; i < files.size(); ++i)
    if (owner[i] == me) mine.push_back(i);
  // One bar for this process's files, in on-disk bytes: parallel imports advance it together.
  int64_t total = 0;
  for (size_t i : mine) total += bytes[i];
  const std::string several =
      spread ? std::to_string(mine.size()) + " of " + std::to_string(files.size()) + " files"
             : std::to_string(files.size()) + " files";
  Progress progress(files.size() == 1 ? "importing " + fs::path(files[0]).filename().string()
                                      : "importing " + several,
                    total, "bytes", me == 0 ? opt.progress : ProgressMode::Off);
  const ImportOptions iopt = file_options(opt, files.size(), &progress);
  parallel_for(mine.size(), [&](size_t k) {
    const size_t i = mine[k];
    try {
      parts[i] = nsys[i] ? import_nsys_report(files[i], iopt, &st[i], &procs[i])
                         : import_trace_file(files[i], iopt, &st[i]);  // Kineto or rocprof
    } catch (const NoRankError& e) {
      errors[i] = e.what();
      rankless[i] = 1;
    } catch (const std::exception& e) {
      errors[i] = import_error(files[i], e);
    }
  });
  FileResults results{parts, st, errors, rankless, procs};
  if (spread && !gather_files(*spread, owner, results)) return Store();
  // Several files that do not say their rank: one error that lists them all.
  const auto n_rankless = std::count(rankless.begin(), rankless.end(), 1);
  if (n_rankless > 1) {
    std::string list;
    for (size_t i = 0; i < files.size(); ++i)
      if (rankless[i]) list += (list.empty() ? "" : ", ") + files[i];
    throw Error("cannot tell the ranks of " + std::to_string(n_rankless) +
                " traces (no distributedInfo.rank, no rank in the file names): " + list +
                "; name them rank-N.json or import them one by one with --rank N");
  }
  for (const auto& e : errors)
    if (!e.empty()) throw Error(e);
  if (!files.empty() && nsys[0]) rank_nsys_reports(parts, procs, iopt.only_input, &st[0]);
  for (const auto& s : st) {
    stats->bytes += s.bytes;
    stats->events += s.events;
    stats->malformed += s.malformed;
    stats->warnings.insert(stats->warnings.end(), s.warnings.begin(), s.warnings.end());
    stats->notes.insert(stats->notes.end(), s.notes.begin(), s.notes.end());
  }
  Store merged = merge_stores(std::move(parts));
  progress.finish();
  return merged;
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
