// The analyses of traces under mpirun without -o, a rank at a time on every process
// (analyse_traces_spread, kernalyse/sliced.h).
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>

#include "kernalyse/archive.h"
#include "kernalyse/error.h"
#include "kernalyse/sliced.h"
#include "temp_dir.h"

namespace fs = std::filesystem;

namespace kernalyse {

namespace {

// Every process's value, in process order.
template <class T>
std::vector<T> gathered(const Spread& spread, const T& mine) {
  Archive ar;
  ar.put(mine);
  Archive all(spread.all_gather(ar.bytes()));
  std::vector<T> out(static_cast<size_t>(spread.processes));
  for (T& v : out) all.get(v);
  return out;
}

// A directory that every process can read, made by process 0 (and removed by it, with `dir`): in
// its TMPDIR when all the processes run on one host, else beside the first input (every process
// reads the inputs: a file system they share), when every process sees it there. "" when there is
// none. Collective.
std::string shared_scratch(const std::string& input, const Spread& spread,
                           std::optional<detail::TempDir>* dir) {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  const std::vector<std::string> hosts = gathered(spread, std::string(host));
  const bool one_host =
      std::all_of(hosts.begin(), hosts.end(), [&](const std::string& h) { return h == hosts[0]; });
  std::string made;
  if (spread.process == 0) {
    std::error_code ec;
    const fs::path in = fs::absolute(input, ec);
    const std::string beside = (fs::is_directory(in, ec) ? in : in.parent_path()).string();
    try {
      dir->emplace(one_host ? std::string() : beside);
      made = (*dir)->path();
    } catch (const Error&) {  // a read-only input directory: no shared place
    }
  }
  std::string path = gathered(spread, made)[0];
  std::error_code ec;
  const std::vector<uint8_t> seen =
      gathered(spread, uint8_t{!path.empty() && fs::is_directory(path, ec)});
  if (std::find(seen.begin(), seen.end(), uint8_t{0}) != seen.end()) {
    path.clear();
    if (spread.process == 0) dir->reset();
  }
  return path;
}

}  // namespace

std::optional<SlicedAnalysis> analyse_traces_spread(const std::vector<std::string>& files,
                                                    const std::vector<const Analysis*>& which,
                                                    const AnalysisOptions& opt,
                                                    const LoadOptions& lo, const Spread& spread) {
  if (files.size() < 2 || spread.processes < 2 || !sliceable_any_size(which, opt) ||
      whole_store_forced())
    return std::nullopt;
  std::optional<detail::TempDir> dir;
  const std::string at = shared_scratch(files[0], spread, &dir);
  if (at.empty()) return std::nullopt;
  LoadOptions to_store = lo;
  to_store.output = (fs::path(at) / "run.h5").string();
  to_store.output_only = true;
  to_store.force = false;
  to_store.import.spread = &spread;
  if (lo.info)  // the import's lines, but not the temporary store's "wrote"
    to_store.info = [&lo, wrote = "wrote " + to_store.output](const std::string& line) {
      if (line.rfind(wrote, 0) != 0) lo.info(line);
    };
  // Every process waits for the store: where ranks repeat or interleave across files, process 0
  // alone merges and writes it (import_spread), and its error (two files of one rank) must reach
  // the others here, or they would wait for it.
  LoadedRun run;
  std::string error;
  try {
    run = import_run(files, to_store);
  } catch (const Error& e) {
    error = e.what();
  }
  for (const std::string& e : gathered(spread, error))
    if (!e.empty()) throw Error(e);
  if (lo.info)  // once the store is there (not before an import error)
    lo.info("imported by the " + std::to_string(spread.processes) +
            " processes into a temporary store in " + at +
            " (removed after), then analysed a rank at a time by each");
  // The clocks are the import's (aligned as the in-memory import aligns them): not again.
  const ColumnSelection sel = columns_for_store(to_store.output, which, opt.compat, false);
  std::optional<SlicedAnalysis> out =
      analyse_by_rank(to_store.output, which, opt, sel, false, lo, &spread);
  if (!out) throw Error(files[0] + ": internal error: the imported store cannot be read by rank");
  if (!out->inference) out->inference = std::move(run.inference);
  return out;
}

}  // namespace kernalyse
