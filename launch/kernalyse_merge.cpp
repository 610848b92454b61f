// kernalyse-merge: import per-rank traces into one store and/or analyse a store. Thin over the
// import, store and analysis libraries.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <functional>
#include <future>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>

#include "kernalyse/analysis.h"
#include "kernalyse/atomic_file.h"
#include "kernalyse/clock_infer.h"
#include "kernalyse/critical_path.h"
#include "kernalyse/crossrank.h"
#include "kernalyse/diff.h"
#include "kernalyse/energy.h"
#include "kernalyse/export.h"
#include "kernalyse/hang.h"
#include "kernalyse/html.h"
#include "kernalyse/import.h"
#include "kernalyse/kineto.h"
#include "kernalyse/nsys.h"
#include "kernalyse/parallel.h"
#include "kernalyse/power_log.h"
#include "kernalyse/progress.h"
#include "kernalyse/roofline.h"
#include "kernalyse/spool_store.h"
#include "kernalyse/store_io.h"
#include "kernalyse/utc.h"

namespace fs = std::filesystem;
using namespace kernalyse;

namespace {

constexpr int kExitBadInput = 2;

struct Options {
  std::vector<std::string> inputs;
  std::string output;
  bool force = false;
  std::string spool;      // --spool DIR: crash recovery from the ranks' spool files
  bool hang = false;      // --hang (with --spool): per-communicator collective progress
  bool from_run = false;  // --from-run (with --spool): kernalyse-run's end-of-run merge
  std::optional<int32_t> rank, step;
  bool summary = false, gaps = false, overlap = false, breakdown = false, idle = false,
       stragglers = false, all = false, ranges = false, energy = false;
  std::vector<std::string> power_logs;  // --power-log FILE[@RANK[:GPU]]
  int64_t tokens = 0, units_per_step = 0;
  std::string compat = "native";
  double kernel_wait_us = 30;
  double hist_min = 0, hist_max = 1000;
  int bins = 20;
  std::string gap_sort = "total", sort = "total";
  int top = 0;
  bool verbose = false, json = false, quiet = false;
  std::string progress = "auto";  // --progress; resolved once into `mode` (Off with --quiet)
  ProgressMode mode = ProgressMode::Off;
  std::string csv_dir;
  std::vector<std::string> comm_regex;
  std::string perfetto, export_kineto, from, to;  // exports (docs/exports.md)
  std::string html;                               // --html FILE (docs/report.md)
  std::string step_range;                         // --step-range REGEX (nsys import)
  std::vector<std::string> diff;                  // --diff BASE TEST (docs/analyses.md)
  std::string align = "auto";                     // --align: clocks inferred from collectives
  bool critical_path = false;                     // --critical-path (docs/analyses.md)
  std::vector<std::string> what_if;               // --what-if SPEC (implies --critical-path)
  bool roofline = false, hints = false;           // performance model (docs/analyses.md)
  std::string peaks;                              // --peaks FILE.json
};

bool is_trace_name(const fs::path& p) {
  std::string n = p.filename().string();
  auto ends = [&](std::string_view s) {
    return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".json") || ends(".json.gz") || ends(".sqlite");
}

// Expands directories into their *.json / *.json.gz / *.sqlite files (sorted); checks files exist.
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

// Imports trace files on all cores, one file per task.
Store import_all(const std::vector<std::string>& files, const Options& o, const Classifier& cls,
                 ImportStats* stats) {
  std::vector<Store> parts(files.size());
  std::vector<ImportStats> st(files.size());
  std::vector<std::string> errors(files.size());
  std::vector<char> rankless(files.size(), 0);
  // One bar for all files, in on-disk bytes: parallel imports advance it together.
  int64_t total = 0;
  for (const auto& f : files) total += input_bytes(f);
  Progress progress(files.size() == 1 ? "importing " + fs::path(files[0]).filename().string()
                                      : "importing " + std::to_string(files.size()) + " files",
                    total, "bytes", o.mode);
  ImportOptions iopt;
  iopt.classifier = &cls;
  iopt.progress = &progress;
  // --rank names the rank of a single trace that carries none.
  if (files.size() == 1) iopt.rank = o.rank;
  iopt.only_input = files.size() == 1;  // one rankless file is rank 0
  iopt.step_range = o.step_range;
  // Nsight Systems reports (SQLite, told by the file header) or Kineto JSON: one kind per run.
  std::vector<char> nsys(files.size());
  for (size_t i = 0; i < files.size(); ++i) nsys[i] = is_sqlite_file(files[i]);
  for (size_t i = 1; i < files.size(); ++i)
    if (nsys[i] != nsys[0])
      throw Error(files[nsys[i] ? i : 0] + ": an Nsight Systems report mixed with JSON traces (" +
                  files[nsys[i] ? 0 : i] + "); import one kind at a time");
  if (!o.step_range.empty() && (files.empty() || !nsys[0]))
    throw Error("--step-range applies to Nsight Systems reports (.sqlite) only");
  parallel_for(files.size(), [&](size_t i) {
    try {
      parts[i] = import_trace_file(files[i], iopt, &st[i]);
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
  if (std::count(rankless.begin(), rankless.end(), 1) > 1) {
    std::string list;
    for (size_t i = 0; i < files.size(); ++i)
      if (rankless[i]) list += (list.empty() ? "" : ", ") + files[i];
    throw Error("cannot tell the ranks of " +
                std::to_string(std::count(rankless.begin(), rankless.end(), 1)) +
                " traces (no distributedInfo.rank, no rank in the file names): " + list +
                "; name them rank-N.json or import them one by one with --rank N");
  }
  for (const auto& e : errors)
    if (!e.empty()) throw Error(e);
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

SummarySort parse_summary_sort(const std::string& s) {
  if (s == "count") return SummarySort::Count;
  if (s == "mean") return SummarySort::Mean;
  if (s == "pct") return SummarySort::Pct;
  return SummarySort::Total;
}

GapSort parse_gap_sort(const std::string& s) {
  if (s == "count") return GapSort::Count;
  if (s == "mean") return GapSort::Mean;
  if (s == "max") return GapSort::Max;
  if (s == "std") return GapSort::Std;
  return GapSort::Total;
}

// --spool DIR: builds a store from whatever the ranks' spool files hold, offline, without MPI
// (docs/collector.md, "Crash recovery"); one line per rank names the missing and truncated ones.
// --hang: which rank the others wait for, per communicator, and desynced collectives
// (kernalyse/hang.h). Text on stdout, or one JSON object.
void print_hang(const HangReport& h, bool json) {
  if (!json) {
    for (const auto& line : h.lines()) std::cout << line << "\n";
    return;
  }
  std::cout << hang_json(h).dump(1) << "\n";
}

int run_spool(const Options& o, const std::string& command_line) {
  if (!o.inputs.empty()) throw Error("--spool takes the spool directory; give no other input");
  if (o.hang) {
    print_hang(hang_report_dir(o.spool), o.json);
    if (o.output.empty()) return 0;
  }
  // kernalyse-run's merge of a process tree: like its MPI merge, never over an existing store.
  std::string output = o.output;
  if (o.from_run && !o.force && !output.empty() && fs::exists(output)) {
    output = free_name(o.output);
    std::cerr << "kernalyse-run: " << o.output << " exists; writing " << output << " instead\n";
  }
  if (!output.empty()) check_output_path(output, o.force);
  RecoveryReport rep;
  Store store = recover_spool_dir(o.spool, &rep, o.mode);
  store.attrs.tool_version = KERNALYSE_VERSION;
  store.attrs.command_line = command_line;
  store.attrs.created_utc = utc_now();
  int recovered = 0;
  bool complete = true;
  for (const auto& r : rep.ranks) {
    recovered += r.recovered;
    complete = complete && r.recovered && !r.truncated && r.has_end_sample;
  }
  if (o.from_run) {
    if (complete) store.attrs.produced_by = "kernalyse-run (process tree, one host)";
    write_store(store, output, WriteOptions{o.force, o.mode});
    if (!complete || !o.quiet) {
      int64_t records = 0;
      for (const auto& r : rep.ranks) records += r.records;
      std::cerr << "kernalyse-run: wrote " << output << ": " << recovered << " ranks, " << records
                << " records" << (store.attrs.emulated ? " (EMULATED device)" : "")
                << "; clocks: one host's CLOCK_MONOTONIC_RAW, shared by every rank (exact)\n";
      const std::vector<std::string> lines = rep.lines();  // one per rank, in rep.ranks' order
      for (size_t i = 0; i < lines.size() && i < rep.ranks.size(); ++i)
        std::cerr << "kernalyse-run: " << lines[i]
                  << (rep.ranks[i].rank_origin.empty() ? ""
                                                       : "; rank from " + rep.ranks[i].rank_origin)
                  << "\n";
    }
    return 0;
  }
  if (o.json) {  // the same, for scripts: per rank its status, record counts and data end
    nlohmann::json jr = nlohmann::json::array();
    for (const auto& r : rep.ranks)
      jr.push_back({{"rank", r.rank},
                    {"missing", r.missing},
                    {"recovered", r.recovered},
                    {"truncated", r.truncated},
                    {"problem", r.problem},
                    {"cut_byte", r.cut_byte},
                    {"file_bytes", r.file_bytes},
                    {"blocks", r.blocks},
                    {"records", r.records},
                    {"has_end_sample", r.has_end_sample},
                    {"data_end_ns", r.data_end_ns}});
    std::cout << nlohmann::json{{"spool", o.spool},
                                {"world_size", rep.world_size},
                                {"last_end_ns", rep.last_end_ns},
                                {"lines", rep.lines()},
                                {"ranks", jr}}
                     .dump(1)
              << "\n";
  } else {
    std::cout << "recovered " << recovered << " of " << rep.world_size << " rank(s) from "
              << o.spool << "\n";
    for (const auto& line : rep.lines()) std::cout << line << "\n";
  }
  if (!o.output.empty()) {
    write_store(store, o.output, WriteOptions{o.force, o.mode});
    if (!o.quiet) std::cerr << "wrote " << o.output << "\n";
  }
  return 0;
}

// --align: infers per-host clocks from the collectives (docs/clocks.md) when asked, or (auto) when
// the ranks' clocks are not aligned; applies it to every time column. Returns whether it ran.
bool infers_clocks(const Store& st, const Options& o) {
  return !(o.align == "off" || (o.align == "auto" && clocks_aligned(st)));
}

bool align_clocks(Store& st, const Options& o, ClockInference* inf,
                  std::shared_ptr<const CollectiveMatch>* match) {
  if (!infers_clocks(st, o)) return false;
  *inf = infer_clocks(clock_evidence(st, match));
  apply_clock_inference(st, *inf);
  if (!o.quiet) std::cerr << describe(*inf) << "\n";
  return true;
}

// A store read for analyses whose clocks --align may infer. The inference reads the activities,
// /nccl, the annotations and the ranks only: it runs on a second thread while this one reads the
// launches, ops and counters (libhdf5 stays on one thread), which hides most of its cost
// (docs/clocks.md). Returns whether it ran.
bool read_and_align(const std::string& file, const ColumnSelection& sel, const Options& o,
                    Store* st, ClockInference* inf, std::shared_ptr<const CollectiveMatch>* match) {
  ColumnSelection first = sel, rest = sel;
  first.launches = first.ops = first.counters = false;
  rest.activities = rest.annotations = rest.nccl = false;
  *st = read_store(file, first);
  const bool infer = infers_clocks(*st, o);
  std::future<ClockInference> inferring;
  if (infer)
    inferring =
        std::async(std::launch::async, [&] { return infer_clocks(clock_evidence(*st, match)); });
  Store more;  // its own store: the inference reads *st meanwhile
  if (rest.launches || rest.ops || rest.counters) more = read_store(file, rest);
  if (infer) *inf = inferring.get();
  st->launches = std::move(more.launches);
  st->ops = std::move(more.ops);
  st->counters = std::move(more.counters);
  if (!infer) return false;
  apply_clock_inference(*st, *inf);
  if (!o.quiet) std::cerr << describe(*inf) << "\n";
  return true;
}

// One side of --diff: a store (the columns the diff reads, a rank at a time), a trace file or a
// directory of traces (imported in memory), with the same rules as the analyses' input.
struct DiffSource {
  std::unique_ptr<RankSlices> slices;  // a store whose clocks stay as recorded
  Store whole;                         // otherwise
  DiffInput input() {
    if (slices) return {&slices->header(), [this](const auto& f) { slices->for_each(f); }};
    return {&whole, [this](const auto& f) { f(whole); }};
  }
};

DiffSource load_diff_input(const std::string& input, const Options& o, const Classifier& cls) {
  ClockInference inf;
  DiffSource out;
  std::vector<std::string> files = expand_inputs({input});
  if (files.size() == 1 && is_hdf5_file(files[0])) {
    ColumnSelection sel;
    sel.counters = false;
    sel.ops_detail = sel.ops_shapes = false;  // the ATen-op groups need only each launch's op
    ColumnSelection probe;  // launch threads only when there are ranges to join them to
    probe.activities = probe.launches = probe.nccl = probe.counters = false;
    const Store a = read_store(files[0], probe);
    sel.launch_detail =
        std::any_of(a.annotations.kind.begin(), a.annotations.kind.end(), [](uint8_t k) {
          return k == static_cast<uint8_t>(AnnotationKind::User) ||
                 k == static_cast<uint8_t>(AnnotationKind::Nvtx);
        });
    // Inferring clocks needs every rank's collectives at once: then the store is read whole (a
    // single rank has no other clock to align to). So is a store whose rows are not grouped by
    // rank (RankSlices refuses it; read_store then reports whatever else may be wrong with it).
    if (o.align == "off" || (o.align == "auto" && (clocks_aligned(a) || a.ranks.size() < 2))) {
      try {
        out.slices = std::make_unique<RankSlices>(files[0], sel);
        return out;
      } catch (const Error&) {
      }
    }
    out.whole = read_store(files[0], sel);
    align_clocks(out.whole, o, &inf, nullptr);
    return out;
  }
  for (const auto& f : files)
    if (is_hdf5_file(f))
      throw Error(f + ": is a store; give either one store or trace files, not both");
  ImportStats stats;
  out.whole = import_all(files, o, cls, &stats);
  for (const auto& w : stats.warnings) std::cerr << "warning: " << w << "\n";
  for (const auto& r : out.whole.ranks)
    out.whole.attrs.emulated = out.whole.attrs.emulated || r.emulated;
  // The clocks as an analysis or -o of the same input would have them (--align), so that a store
  // and the traces it was merged from compare equal.
  align_clocks(out.whole, o, &inf, nullptr);
  return out;
}

// --diff BASE TEST: both loaded the same way, compared, rendered like the other analyses.
int run_diff(const Options& o) {
  if (o.diff.size() != 2) throw Error("--diff takes two inputs: BASE TEST");
  if (!o.inputs.empty() || !o.output.empty())
    throw Error("--diff takes its two inputs only; give no other input or -o");
  if (o.compat != "native" || !o.perfetto.empty() || !o.export_kineto.empty() || !o.spool.empty())
    throw Error(
        "--diff renders as text, --json, --csv or --html; --compat, exports and --spool do not "
        "apply");
  Classifier cls(o.comm_regex);
  DiffOptions opt;
  opt.base_label = o.diff[0], opt.test_label = o.diff[1];
  opt.filter = Filter{o.rank, o.step};
  opt.kernel_wait_ns = std::llround(o.kernel_wait_us * 1000.0);
  DiffSource base = load_diff_input(o.diff[0], o, cls);
  DiffSource test = load_diff_input(o.diff[1], o, cls);
  TraceDiff d = diff_inputs(base.input(), test.input(), opt);
  Report report = diff_report(d, o.top);
  if (!o.html.empty()) {
    int64_t bytes = write_diff_html(d, o.html, o.force);
    if (!o.quiet) std::cerr << "wrote " << o.html << " (" << (bytes + 999) / 1000 << " kB)\n";
  }
  if (!o.csv_dir.empty()) render_csv(report, o.csv_dir);
  if (o.json)
    render_json(report, std::cout);
  else
    render_text(report, std::cout);
  return 0;
}

// --power-log FILE[@RANK[:GPU]]: an nvidia-smi CSV becomes RANK's power samples (in memory only).
void attach_power_log_spec(Store* store, const std::string& spec, bool quiet) {
  std::string file = spec;
  std::optional<int32_t> rank, gpu;
  const size_t at = spec.rfind('@');
  if (at != std::string::npos) {
    const std::string tail = spec.substr(at + 1);
    const size_t colon = tail.find(':');
    auto num = [&](const std::string& t) -> std::optional<int32_t> {
      if (t.empty() || t.size() > 6 || t.find_first_not_of("0123456789") != std::string::npos)
        return std::nullopt;
      return std::stoi(t);
    };
    rank = num(tail.substr(0, colon));
    if (colon != std::string::npos) gpu = num(tail.substr(colon + 1));
    if (!rank || (colon != std::string::npos && !gpu))
      throw Error("--power-log " + spec + ": expected FILE, FILE@RANK or FILE@RANK:GPU");
    file = spec.substr(0, at);
  } else if (store->ranks.size() != 1) {
    throw Error(file + ": the store has " + std::to_string(store->ranks.size()) +
                " ranks; say which one this power log belongs to: --power-log " + file + "@RANK");
  }
  const PowerLog log = read_nvsmi_power_csv(file);
  attach_power_log(store, log, rank ? *rank : store->ranks.front().rank, gpu);
  if (!quiet)
    std::cerr << "power log " << file << ": " << log.samples.size() << " samples"
              << (log.malformed
                      ? ", " + std::to_string(log.malformed) +
                            " malformed line(s) skipped (first: line " +
                            std::to_string(log.first_bad_line) + ", " + log.first_bad_reason + ")"
                      : std::string())
              << "\n";
}

// Runs the analyses' tasks on as many threads as there are cores, the last task first (the
// longest ones, the ledger and the critical path, are queued last so they start at once), and
// appends their Reports to `report` in task order. The first failing task's exception (in task
// order) is rethrown after all have stopped.
void run_in_parallel(const std::vector<std::function<void(Report*)>>& tasks, Report* report) {
  std::vector<Report> parts(tasks.size());
  parallel_for(
      tasks.size(), [&](size_t t) { tasks[t](&parts[t]); }, 0, /*reverse=*/true);
  for (size_t t = 0; t < tasks.size(); ++t) append_report(report, std::move(parts[t]));
}

// Several stores (one kernalyse-run per node): one store, the later ones' ranks moved past the
// earlier ones' when they overlap (start-order ranks of two nodes), the hosts' clocks aligned by
// the inferred-clock method (--align; within a host the recorded alignment stays).
int run_node_stores(const Options& o, const std::vector<std::string>& files,
                    const std::string& command_line) {
  if (o.output.empty()) throw Error("several stores are merged into one: give -o FILE");
  check_output_path(o.output, o.force);
  std::vector<Store> parts;
  std::set<int32_t> taken;
  std::set<std::string> hosts;
  for (const auto& f : files) {
    Store s = read_store(f);
    int32_t shift = 0;
    bool overlap = false;
    for (const auto& r : s.ranks) overlap = overlap || taken.count(r.rank);
    if (overlap) {
      shift = taken.empty() ? 0 : *taken.rbegin() + 1;
      for (auto* col :
           {&s.activities.rank, &s.launches.rank, &s.annotations.rank, &s.counters.rank})
        for (int32_t& r : *col) r += shift;
      for (auto& r : s.ranks) r.rank += shift;
      if (!o.quiet)
        std::cerr << f << ": ranks " << s.ranks.front().rank - shift << " to "
                  << s.ranks.back().rank - shift << " are taken by an earlier store: numbered "
                  << s.ranks.front().rank << " to " << s.ranks.back().rank << "\n";
    }
    for (const auto& r : s.ranks) taken.insert(r.rank), hosts.insert(r.host);
    parts.push_back(std::move(s));
  }
  Store store = merge_stores(std::move(parts));
  int32_t world = static_cast<int32_t>(store.ranks.size());
  for (auto& r : store.ranks) r.world_size = std::max(r.world_size, world);
  store.attrs.tool_version = KERNALYSE_VERSION;
  store.attrs.produced_by =
      "kernalyse-merge (stores of " + std::to_string(files.size()) + " nodes)";
  store.attrs.command_line = command_line;
  store.attrs.created_utc = utc_now();
  // Each store's clocks are aligned within its host only: across hosts, inferred.
  Options oo = o;
  if (oo.align == "auto" && hosts.size() > 1) oo.align = "inferred";
  ClockInference inference;
  if (!align_clocks(store, oo, &inference, nullptr) && hosts.size() > 1)
    store.attrs.clock_domain += "; hosts not aligned to each other (--align off)";
  write_store(store, o.output, WriteOptions{o.force, o.mode});
  if (!o.quiet)
    std::cerr << "wrote " << o.output << ": " << store.ranks.size() << " ranks on " << hosts.size()
              << " host(s) from " << files.size() << " stores\n";
  if (o.json) std::cout << clock_inference_json(inference).dump(1) << "\n";
  return 0;
}

// The columns a store input is read with: only what the chosen analyses use (peak RSS stays near
// the columns read). may_align: the clock inference may run (it needs the /nccl columns).
ColumnSelection store_columns(const Options& o, const std::string& file, bool exporting,
                              bool may_align) {
  // Read only what the chosen analyses use (peak RSS stays near the columns read).
  bool need_launches = o.idle || o.stragglers || o.ranges || o.critical_path || o.roofline ||
                       o.hints || o.compat == "hta";
  // Only --ranges needs the launches' threads, and only when the store has NVTX / user ranges
  // at all: a small read of the annotations tells (the 8 M-kernel benchmark store has none).
  auto has_ranges = [&] {
    ColumnSelection probe;
    probe.activities = probe.launches = probe.nccl = probe.counters = false;
    const Store a = read_store(file, probe);
    return std::any_of(a.annotations.kind.begin(), a.annotations.kind.end(), [](uint8_t k) {
      return k == static_cast<uint8_t>(AnnotationKind::User) ||
             k == static_cast<uint8_t>(AnnotationKind::Nvtx);
    });
  };
  ColumnSelection sel;
  if (!o.perfetto.empty() || !o.export_kineto.empty()) {
    // exports write every column
  } else if (!o.html.empty()) {
    // The report runs summary, gaps, overlap, stragglers, ranges and the roofline.
    sel.launch_detail = has_ranges();
    sel.ops_detail = false;  // the roofline joins ops by correlation and call; no op times
  } else if (!exporting) {
    sel.launches = need_launches;
    // The analyses join launches by correlation and use their start; --ranges also their thread.
    // --energy joins ranges the same way, for its per-range rows.
    sel.launch_detail = (o.ranges || o.energy) && has_ranges();
    // The critical path follows the launching threads and their synchronisations.
    sel.launch_detail = sel.launch_detail || o.critical_path;
    sel.nccl = o.stragglers || o.critical_path;
    sel.ops = o.roofline || o.hints;
    sel.ops_detail = false;
    sel.activity_correlation = need_launches || sel.launch_detail;
    sel.launches = sel.launches || sel.launch_detail;
  }
  sel.nccl = sel.nccl || may_align;
  return sel;
}

// Trace files → one store: imported on parallel threads, clocks aligned (or inferred), written
// with -o.
Store import_traces(const std::vector<std::string>& files, const Options& o, const Classifier& cls,
                    const std::string& command_line, ClockInference* inference,
                    std::shared_ptr<const CollectiveMatch>* match, bool* inferred) {
  // Refuse early, before a long import: an existing output without --force, a directory, a
  // missing or unwritable directory.
  if (!o.output.empty()) check_output_path(o.output, o.force);
  ImportStats stats;
  auto t0 = std::chrono::steady_clock::now();
  Store store = import_all(files, o, cls, &stats);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  for (const auto& w : stats.warnings) std::cerr << "warning: " << w << "\n";
  if (!o.quiet)
    for (const auto& n : stats.notes) std::cerr << "info: " << n << "\n";
  store.attrs.tool_version = KERNALYSE_VERSION;
  const TraceFormat format = trace_format(files[0]);
  store.attrs.produced_by = std::string("kernalyse-merge (") + to_string(format) + " import)";
  store.attrs.command_line = command_line;
  store.attrs.created_utc = utc_now();
  store.attrs.clock_domain =
      clocks_aligned(store)
          ? "one timeline, as exported by kernalyse (Kineto import of a kernalyse export)"
      : format == TraceFormat::Nsys
          ? "per-rank recording wall clock, epoch ns; ranks not aligned (Nsight Systems import)"
      : format == TraceFormat::Rocprof
          ? "per-rank host clock, rocprofiler-sdk ns (not epoch); ranks not aligned (rocprofv3 "
            "import)"
          : "per-rank recording wall clock, epoch ns; ranks not aligned (Kineto import)";
  for (const auto& r : store.ranks) store.attrs.emulated = store.attrs.emulated || r.emulated;
  *inferred = align_clocks(store, o, inference, match);
  if (!o.quiet) {
    std::cerr << "imported " << files.size() << " file(s), " << store.ranks.size() << " rank(s), "
              << store.activities.size() << " GPU activities, " << stats.malformed
              << " malformed events skipped, " << static_cast<int64_t>(stats.bytes / 1e6)
              << (format == TraceFormat::Nsys ? " MB SQLite in " : " MB JSON in ") << std::fixed
              << std::setprecision(2) << secs << " s (" << std::setprecision(0)
              << stats.bytes / 1e6 / std::max(secs, 1e-9) << " MB/s)\n"
              << std::defaultfloat;
  }
  if (!o.output.empty()) {
    write_store(store, o.output, WriteOptions{o.force, o.mode});
    if (!o.quiet) std::cerr << "wrote " << o.output << "\n";
  }
  return store;
}

// --html, --perfetto, --export-kineto.
void write_exports(const Store& store, const Options& o) {
  ExportOptions eo;
  eo.rank = o.rank, eo.step = o.step, eo.force = o.force, eo.progress = o.mode;
  if (!o.from.empty()) eo.from_ns = parse_time_to_ns(o.from);
  if (!o.to.empty()) eo.to_ns = parse_time_to_ns(o.to);
  if (!o.html.empty()) {
    HtmlOptions ho;
    ho.filter = Filter{o.rank, o.step};
    ho.from_ns = eo.from_ns, ho.to_ns = eo.to_ns;
    ho.top = o.top > 0 ? o.top : 20;
    ho.hist_min_us = o.hist_min, ho.hist_max_us = o.hist_max, ho.hist_bins = o.bins;
    ho.kernel_wait_ns = std::llround(o.kernel_wait_us * 1000.0);
    ho.force = o.force;
    ho.progress = o.mode;
    ho.title = o.inputs.size() == 1 ? fs::path(o.inputs[0]).filename().string() : "";
    auto t0 = std::chrono::steady_clock::now();
    HtmlStats hs = write_html_report(store, o.html, ho);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (!o.quiet)
      std::cerr << "wrote " << o.html << " (" << (hs.bytes + 999) / 1000 << " kB, " << std::fixed
                << std::setprecision(2) << secs << " s)\n"
                << std::defaultfloat;
  }
  if (!o.perfetto.empty()) {
    ExportStats es = export_perfetto(store, o.perfetto, eo);
    if (!o.quiet)
      std::cerr << "wrote " << o.perfetto << " (" << es.events << " events, " << es.flows
                << " collective flows)\n";
  }
  if (!o.export_kineto.empty()) {
    ExportStats es = export_kineto(store, o.export_kineto, eo);
    if (!o.quiet)
      std::cerr << "wrote " << es.files << " Kineto trace(s) into " << o.export_kineto << " ("
                << es.events << " events)\n";
  }
}

// One task per analysis the flags ask for, in output order; each fills its own Report.
std::vector<std::function<void(Report*)>> analysis_tasks(
    const Store& store, const Options& o, bool cross,
    const std::shared_ptr<const CollectiveMatch>& match, const std::optional<DevicePeaks>& peaks,
    const std::vector<WhatIf>& what_if) {
  Filter filter{o.rank, o.step};
  std::vector<std::function<void(Report*)>> tasks;
  auto task = [&tasks](std::function<void(Report*)> f) { tasks.push_back(std::move(f)); };
  if (o.summary || (!o.gaps && !cross)) {
    SummaryOptions so;
    so.filter = filter;
    so.sort = parse_summary_sort(o.sort);
    so.top = o.top;
    so.verbose = o.verbose;
    task([&store, so](Report* r) { kernel_summary(store, so, r); });
  }
  if (o.gaps) {
    GapOptions go;
    go.filter = filter;
    go.hist_min_us = o.hist_min;
    go.hist_max_us = o.hist_max;
    go.bins = o.bins;
    go.sort = parse_gap_sort(o.gap_sort);
    if (o.top > 0) go.top = o.top;
    go.verbose = o.verbose;
    task([&store, go](Report* r) { gap_analysis(store, go, r); });
  }
  CrossRankOptions xo;
  xo.filter = filter;
  xo.compat = o.compat == "hta" ? Compat::Hta : Compat::Native;
  xo.kernel_wait_ns = std::llround(o.kernel_wait_us * 1000.0);
  xo.top = o.top > 0 ? o.top : 20;
  xo.verbose = o.verbose;
  // The inference's matching, on the same rows: not with --compat hta (another view of the store).
  if (o.compat != "hta") xo.match = match;
  if (o.overlap || o.breakdown)  // one union pass feeds both tables
    task([&store, xo, overlap = o.overlap, breakdown = o.breakdown](Report* r) {
      const RankUnionTables u = rank_union_tables(store, xo);
      if (overlap) overlap_report(u, r);
      if (breakdown) breakdown_report(u, r);
    });
  if (o.idle) task([&store, xo](Report* r) { idle_analysis(store, xo, r); });
  if (o.ranges) {
    RangeOptions ro;
    ro.filter = filter;
    ro.top = o.top > 0 ? o.top : 20;
    task([&store, ro](Report* r) { range_analysis(store, ro, r); });
  }
  if (o.energy) {
    EnergyOptions eo;
    eo.filter = filter;
    eo.verbose = o.verbose;
    eo.tokens = o.tokens;
    eo.units_per_step = o.units_per_step;
    task([&store, eo, top = o.top](Report* r) {
      energy_report(energy_analysis(store, eo), r, top);
    });
  }
  if (o.stragglers) task([&store, xo](Report* r) { straggler_analysis(store, xo, r); });
  if (o.roofline || o.hints) {
    RooflineOptions ro;
    ro.filter = filter;
    ro.peaks = peaks;
    ro.verbose = o.verbose;
    task([&store, ro, roofline = o.roofline, hints = o.hints](Report* r) {
      const RooflineResult rr = roofline_analysis(store, ro);
      if (roofline) roofline_report(rr, r);
      if (hints) hints_report(rr, r);
    });
  }
  if (o.critical_path) {
    CriticalPathOptions co;
    co.filter = filter;
    co.verbose = o.verbose;
    co.top = o.top > 0 ? o.top : 20;
    co.match = xo.match;
    co.what_if = what_if;
    task([&store, co](Report* r) { critical_path_report(critical_path(store, co), r); });
  }
  return tasks;
}

int run(const Options& o, const std::string& command_line) {
  std::vector<WhatIf> what_if;  // checked before any input is read
  for (const auto& w : o.what_if) what_if.push_back(parse_what_if(w));
  if (!o.diff.empty()) return run_diff(o);
  if (!o.spool.empty()) return run_spool(o, command_line);
  if (o.inputs.empty())
    throw Error("no input: give trace files, a directory of traces, or a store");
  if (o.hist_min >= o.hist_max) throw Error("--hist-min must be below --hist-max");
  if (o.bins < 1) throw Error("--bins must be at least 1");
  const Classifier cls(o.comm_regex);  // a bad --comm-regex fails before any input is read

  std::vector<std::string> files = expand_inputs(o.inputs);
  bool store_input = files.size() == 1 && is_hdf5_file(files[0]);
  const bool node_stores =
      files.size() > 1 && std::all_of(files.begin(), files.end(), is_hdf5_file);
  for (const auto& f : files)
    if (files.size() > 1 && is_hdf5_file(f) && !node_stores)
      throw Error(f + ": is a store; give either stores or trace files, not both");
  if (node_stores) return run_node_stores(o, files, command_line);

  Store store;
  ClockInference inference;
  std::shared_ptr<const CollectiveMatch> match;  // shared with the ledger
  bool inferred = false;
  bool cross = o.overlap || o.breakdown || o.idle || o.stragglers || o.ranges || o.energy ||
               o.critical_path || o.roofline || o.hints;
  // Read before any import, so that a bad peaks file fails fast (one line, exit 2).
  std::optional<DevicePeaks> peaks;
  if (!o.peaks.empty()) peaks = load_peaks_file(o.peaks);
  bool exporting = !o.perfetto.empty() || !o.export_kineto.empty() || !o.html.empty();
  bool analyse = o.summary || o.gaps || cross || (o.output.empty() && !exporting);
  if (store_input) {
    if (!o.output.empty()) throw Error(files[0] + ": already a store; -o is for importing traces");
    // The inference matches collectives like the ledger: it needs the /nccl columns. It runs on
    // a store for the cross-rank views (ledger, exports) or when asked.
    bool may_align = o.align == "inferred" ||
                     (o.align == "auto" && (o.stragglers || o.critical_path || exporting));
    const ColumnSelection sel = store_columns(o, files[0], exporting, may_align);
    if (may_align)
      inferred = read_and_align(files[0], sel, o, &store, &inference, &match);
    else
      store = read_store(files[0], sel);
  } else {
    store = import_traces(files, o, cls, command_line, &inference, &match, &inferred);
  }
  for (const auto& spec : o.power_logs) attach_power_log_spec(&store, spec, o.quiet);
  if (exporting) write_exports(store, o);
  if (!analyse) return 0;

  Report report;
  store_overview(store, &report);
  if (inferred) {
    report.json["clock_inference"] = clock_inference_json(inference);
    report.headline.push_back(describe(inference));
  }

  if (o.compat == "hta") {
    store = hta_view(store);
    report.headline.push_back(
        "--compat hta: integer µs (start rounded up, end down), last ProfilerStep excluded when "
        "there are >= 2, HTA's name-based classification");
  }
  // The analyses only read the store: they run on as many threads as there are cores (not more:
  // each holds its own working set), each into its own Report, and the parts are appended in this
  // fixed order, so the output does not depend on timing.
  const auto tasks = analysis_tasks(store, o, cross, match, peaks, what_if);
  run_in_parallel(tasks, &report);
  if (!o.csv_dir.empty()) render_csv(report, o.csv_dir);
  if (o.json)
    render_json(report, std::cout);
  else
    render_text(report, std::cout);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "kernalyse-merge: merge per-rank GPU traces (Kineto/PyTorch-profiler JSON, or Nsight "
      "Systems SQLite exports) into one HDF5 store, and analyse a store or traces.\n"
      "  kernalyse-merge rank0.json.gz rank1.json.gz -o run.h5\n"
      "  kernalyse-merge run.h5 [--gaps] [--json]\n"
      "  kernalyse-merge traces/ --gaps --json"};
  Options o;
  app.add_option("inputs", o.inputs,
                 "trace files (.json/.json.gz, or nsys .sqlite), directories of them, or a store");
  app.add_option("-o,--output", o.output, "write the merged store to FILE");
  app.add_flag("--force", o.force, "replace an existing output file");
  app.add_option("--spool", o.spool,
                 "crash recovery: build the store (-o) from a run's spool directory, offline");
  app.add_flag("--hang", o.hang,
               "with --spool: per communicator, the last collective each rank entered and "
               "completed, the ranks the others wait for, and mismatched collectives");
  app.add_flag("--from-run", o.from_run,
               "with --spool: kernalyse-run's own merge of a process tree's spool (a free name "
               "instead of an existing -o, its summary line)");
  app.add_option("--rank", o.rank,
                 "analyse only rank R (also names the rank of a single trace that has none)");
  app.add_option("--step", o.step, "analyse only ProfilerStep#N");
  app.add_option("--step-range", o.step_range,
                 "Nsight Systems import: NVTX ranges whose whole name matches REGEX are steps, its "
                 "one capture group the step number (default ProfilerStep#(\\d+))");
  app.add_flag("--summary", o.summary, "kernel summary (the default report)");
  app.add_flag("--gaps", o.gaps, "idle-gap analysis per stream, device and rank");
  app.add_flag("--overlap", o.overlap,
               "communication/computation overlap and exposed communication");
  app.add_flag("--breakdown", o.breakdown,
               "temporal breakdown: idle, compute, comm, memory, other");
  app.add_flag("--idle", o.idle, "idle breakdown per stream: host wait, kernel wait, other");
  app.add_flag("--ranges", o.ranges,
               "GPU time by NVTX / user-annotation range (kernels launched inside each range)");
  app.add_flag("--stragglers", o.stragglers,
               "collective matching across ranks, straggler ledger and root cause");
  app.add_flag("--energy", o.energy,
               "energy (J) per kernel, rank and step from gpu_power_mw samples or --power-log");
  app.add_option("--power-log", o.power_logs,
                 "nvidia-smi CSV (--query-gpu=timestamp,index,power.draw) as RANK's power: "
                 "FILE[@RANK[:GPU]] (repeatable; timestamps in this process's TZ)");
  app.add_option("--tokens", o.tokens, "--energy: also J per token over the selection")
      ->check(CLI::PositiveNumber);
  app.add_option("--units-per-step", o.units_per_step,
                 "--energy: also J per unit (sample) per step")
      ->check(CLI::PositiveNumber);
  app.add_flag("--critical-path", o.critical_path,
               "cross-rank critical path per step: by rank, kind, kernel and range");
  app.add_option("--what-if", o.what_if,
                 "predicted step time with changed durations (implies --critical-path; "
                 "repeatable): rank=R:median, kernel=REGEX:xF, comm=overlapped");
  app.add_flag("--roofline", o.roofline,
               "performance model: FLOPs/bytes per op from recorded shapes, achieved FLOP/s and "
               "B/s against the device's roofline, bottleneck class per op and kernel");
  app.add_flag("--hints", o.hints,
               "optimisation hints, each from a rule whose measured condition holds, with its "
               "numbers");
  app.add_option("--peaks", o.peaks,
                 "--roofline/--hints: device ceilings from FILE.json (kernalyse-scan's output) "
                 "instead of the built-in table");
  app.add_flag("--all", o.all, "every analysis");
  app.add_option("--diff", o.diff,
                 "compare two runs: --diff BASE TEST (each a store, trace file or directory)")
      ->expected(2);
  app.add_option("--compat", o.compat, "reproduce another tool's numbers")
      ->check(CLI::IsMember({"native", "hta"}))
      ->capture_default_str();
  app.add_option("--kernel-wait-us", o.kernel_wait_us,
                 "idle gaps below this are kernel wait (idle breakdown)")
      ->capture_default_str();
  app.add_option("--hist-min", o.hist_min, "gap histogram lower edge, µs")->capture_default_str();
  app.add_option("--hist-max", o.hist_max, "gap histogram upper edge, µs")->capture_default_str();
  app.add_option("--bins", o.bins, "gap histogram bins")->capture_default_str();
  app.add_option("--gap-sort", o.gap_sort, "sort transitions by")
      ->check(CLI::IsMember({"count", "mean", "max", "std", "total"}))
      ->capture_default_str();
  app.add_option("--sort", o.sort, "sort the kernel summary by")
      ->check(CLI::IsMember({"count", "total", "mean", "pct"}))
      ->capture_default_str();
  app.add_option("--top", o.top, "show only the top N rows");
  app.add_flag("--verbose", o.verbose, "full kernel names instead of simplified ones");
  app.add_flag("--json", o.json, "print one JSON object instead of text tables");
  app.add_option("--csv", o.csv_dir, "also write one CSV per table into DIR");
  app.add_option("--comm-regex", o.comm_regex,
                 "extra regex for communication kernels (repeatable)");
  app.add_option(
      "--perfetto", o.perfetto,
      "write a Chrome trace-event JSON (.json or .json.gz) for Perfetto UI / chrome://tracing");
  app.add_option("--export-kineto", o.export_kineto,
                 "write one Kineto-style JSON per rank (DIR/rank-<r>.json) for HTA / TraceLens");
  app.add_option("--html", o.html,
                 "write a self-contained HTML report (charts and tables, opens offline)");
  app.add_option("--from", o.from,
                 "exports and --html timeline: keep events ending after T (µs from the run's "
                 "start; or 20ns, 1.5ms)");
  app.add_option("--to", o.to, "exports: keep events starting before T (same units as --from)");
  app.add_option("--align", o.align,
                 "clocks of traces recorded without alignment: inferred from the collectives "
                 "(per host offset and drift, stated ±); auto: when the ranks' clocks are not "
                 "aligned; off: as recorded")
      ->check(CLI::IsMember({"auto", "inferred", "off"}))
      ->capture_default_str();
  app.add_flag("-q,--quiet", o.quiet, "no progress or info lines on stderr");
  app.add_option("--progress", o.progress,
                 "progress on stderr: a redrawn bar (tty), plain log lines (lines), or none (off); "
                 "auto: tty on a terminal, lines otherwise")
      ->check(CLI::IsMember({"auto", "tty", "lines", "off"}))
      ->capture_default_str();
  app.set_version_flag("--version", std::string("kernalyse-merge ") + KERNALYSE_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitBadInput;
  }
  if (o.all)
    o.summary = o.gaps = o.overlap = o.breakdown = o.idle = o.stragglers = o.ranges = o.energy =
        true;
  if (!o.what_if.empty()) o.critical_path = true;
  o.mode =
      o.quiet ? ProgressMode::Off : parse_progress_mode(o.progress).value_or(ProgressMode::Off);
  std::string cmd;
  for (int i = 0; i < argc; ++i) cmd += (i ? " " : "") + std::string(argv[i]);
  try {
    return run(o, cmd);
  } catch (const Error& e) {
    std::cerr << "kernalyse-merge: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::regex_error& e) {
    std::cerr << "kernalyse-merge: invalid --comm-regex: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    std::cerr << "kernalyse-merge: out of memory\n";
    return 1;
  } catch (const std::exception& e) {  // never an abort: one line and the bad-input status
    std::cerr << "kernalyse-merge: " << e.what() << "\n";
    return kExitBadInput;
  }
}
