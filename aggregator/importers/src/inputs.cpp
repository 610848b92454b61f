// Inputs and the import of several trace files (kernalyse/inputs.h).
#include "kernalyse/inputs.h"

#include <algorithm>
#include <filesystem>

#include "kernalyse/error.h"
#include "kernalyse/import.h"
#include "kernalyse/nsys.h"
#include "kernalyse/nsys_ranks.h"
#include "kernalyse/parallel.h"

namespace fs = std::filesystem;

namespace kernalyse {

namespace {

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
  // One bar for all files, in on-disk bytes: parallel imports advance it together.
  int64_t total = 0;
  for (const auto& f : files) total += input_bytes(f);
  Progress progress(files.size() == 1 ? "importing " + fs::path(files[0]).filename().string()
                                      : "importing " + std::to_string(files.size()) + " files",
                    total, "bytes", opt.progress);
  ImportOptions iopt;
  iopt.classifier = opt.classifier;
  iopt.progress = &progress;
  if (files.size() == 1) iopt.rank = opt.rank;  // --rank names a single trace's rank
  iopt.only_input = files.size() == 1;          // one rankless file is rank 0
  iopt.step_range = opt.step_range;
  iopt.gpu_event = opt.gpu_event;
  iopt.ops = opt.ops;
  parallel_for(files.size(), [&](size_t i) {
    try {
      parts[i] = nsys[i] ? import_nsys_report(files[i], iopt, &st[i], &procs[i])
                         : import_trace_file(files[i], iopt, &st[i]);  // Kineto or rocprof
    } catch (const NoRankError& e) {
      errors[i] = e.what();
      rankless[i] = 1;
    } catch (const Error& e) {
      errors[i] = e.what();
    } catch (const std::bad_alloc&) {
      errors[i] = files[i] + ": out of memory while importing";
    } catch (const std::exception& e) {  // anything else: still one line naming the file
      errors[i] = files[i] + ": cannot import: " + e.what();
    }
  });
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

}  // namespace kernalyse
