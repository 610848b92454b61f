// kernalyse-merge: import per-rank traces into one store and/or analyse a store. Thin over the
// import, store and analysis libraries.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <map>
#include <mutex>
#include <sstream>
#include <thread>

#include "kernalyse/analysis.h"
#include "kernalyse/clock_infer.h"
#include "kernalyse/crossrank.h"
#include "kernalyse/export.h"
#include "kernalyse/html.h"
#include "kernalyse/kineto.h"
#include "kernalyse/progress.h"
#include "kernalyse/store_io.h"
#include "kernalyse/spool_store.h"

namespace fs = std::filesystem;
using namespace kernalyse;

namespace {

constexpr int kExitBadInput = 2;

struct Options {
  std::vector<std::string> inputs;
  std::string output;
  bool force = false;
  std::string spool;  // --spool DIR: crash recovery from the ranks' spool files
  std::optional<int32_t> rank, step;
  bool summary = false, gaps = false, overlap = false, breakdown = false, idle = false,
       stragglers = false, all = false, ranges = false;
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
  std::string align = "auto";                     // --align: clocks inferred from collectives
};

// --align: infers per-host clocks from the collectives (docs/clocks.md) when asked, or (auto) when
// the ranks' clocks are not aligned; applies it to every time column. Returns whether it ran.
bool align_clocks(Store& st, const Options& o, ClockInference* inf,
                  std::shared_ptr<const detail::LedgerMatch>* match) {
  if (o.align == "off" || (o.align == "auto" && clocks_aligned(st))) return false;
  *inf = infer_clocks(clock_evidence(st, match));
  apply_clock_inference(st, *inf);
  if (!o.quiet) std::cerr << describe(*inf) << "\n";
  return true;
}

nlohmann::json inference_json(const ClockInference& inf) {
  nlohmann::json hosts = nlohmann::json::array();
  for (const auto& h : inf.hosts)
    hosts.push_back({{"host", h.host}, {"ranks", h.ranks}, {"reference", h.reference},
                     {"offset_ns", h.offset_ns}, {"drift", h.drift},
                     {"uncertainty_ns", h.uncertainty_ns}, {"samples", h.samples},
                     {"bound_lo_ns", h.bound_lo_ns}, {"bound_hi_ns", h.bound_hi_ns}});
  return {{"ok", inf.ok}, {"why", inf.why}, {"method", inf.method}, {"t_ref_ns", inf.t_ref_ns},
          {"collectives", inf.collectives}, {"constrained", inf.constrained},
          {"violations_before", inf.violations_before}, {"violations_after", inf.violations_after},
          {"completion_skew_before_ns", inf.skew_before_ns},
          {"completion_skew_after_ns", inf.skew_after_ns}, {"drift_fitted", inf.drift_fitted},
          {"notes", inf.notes}, {"hosts", hosts}, {"summary", describe(inf)}};
}

bool is_trace_name(const fs::path& p) {
  std::string n = p.filename().string();
  auto ends = [&](std::string_view s) {
    return n.size() >= s.size() && n.compare(n.size() - s.size(), s.size(), s) == 0;
  };
  return ends(".json") || ends(".json.gz");
}

// Expands directories into their *.json / *.json.gz files (sorted); checks files exist.
std::vector<std::string> expand_inputs(const std::vector<std::string>& in) {
  std::vector<std::string> out;
  for (const auto& p : in) {
    std::error_code ec;
    if (fs::is_directory(p, ec)) {
      std::vector<std::string> found;
      for (const auto& e : fs::directory_iterator(p, ec))
        if (e.is_regular_file() && is_trace_name(e.path())) found.push_back(e.path().string());
      if (found.empty()) throw Error(p + ": no *.json or *.json.gz trace files in this directory");
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

std::string utc_now() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
  return buf;
}

// Imports trace files on all cores, one file per task.
Store import_all(const std::vector<std::string>& files, const Options& o, const Classifier& cls,
                 ImportStats* stats) {
  std::vector<Store> parts(files.size());
  std::vector<ImportStats> st(files.size());
  std::vector<std::string> errors(files.size());
  std::atomic<size_t> next{0};
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
  auto worker = [&] {
    for (size_t i; (i = next++) < files.size();) {
      try {
        parts[i] = import_kineto_file(files[i], iopt, &st[i]);
      } catch (const Error& e) {
        errors[i] = e.what();
      } catch (const std::bad_alloc&) {
        errors[i] = files[i] + ": out of memory while importing";
      }
    }
  };
  size_t nthreads = std::min<size_t>(files.size(), std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (size_t t = 1; t < nthreads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  for (const auto& e : errors)
    if (!e.empty()) throw Error(e);
  for (const auto& s : st) {
    stats->bytes += s.bytes;
    stats->events += s.events;
    stats->malformed += s.malformed;
    stats->warnings.insert(stats->warnings.end(), s.warnings.begin(), s.warnings.end());
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
int run_spool(const Options& o, const std::string& command_line) {
  if (!o.inputs.empty()) throw Error("--spool takes the spool directory; give no other input");
  if (!o.output.empty() && !o.force && fs::exists(o.output))
    throw Error(o.output + ": exists (use --force to replace it)");
  RecoveryReport rep;
  Store store = recover_spool_dir(o.spool, &rep, o.mode);
  store.attrs.tool_version = KERNALYSE_VERSION;
  store.attrs.command_line = command_line;
  store.attrs.created_utc = utc_now();
  int recovered = 0;
  for (const auto& r : rep.ranks) recovered += r.recovered;
  if (o.json) {  // the same, for scripts: per rank its status, record counts and data end
    nlohmann::json jr = nlohmann::json::array();
    for (const auto& r : rep.ranks)
      jr.push_back({{"rank", r.rank}, {"missing", r.missing}, {"recovered", r.recovered},
                    {"truncated", r.truncated}, {"problem", r.problem}, {"cut_byte", r.cut_byte},
                    {"file_bytes", r.file_bytes}, {"blocks", r.blocks}, {"records", r.records},
                    {"has_end_sample", r.has_end_sample}, {"data_end_ns", r.data_end_ns}});
    std::cout << nlohmann::json{{"spool", o.spool}, {"world_size", rep.world_size},
                                {"last_end_ns", rep.last_end_ns}, {"lines", rep.lines()},
                                {"ranks", jr}}.dump(1)
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

int run(const Options& o, const std::string& command_line) {
  if (!o.spool.empty()) return run_spool(o, command_line);
  if (o.inputs.empty()) throw Error("no input: give trace files, a directory of traces, or a store");
  if (o.hist_min >= o.hist_max) throw Error("--hist-min must be below --hist-max");
  if (o.bins < 1) throw Error("--bins must be at least 1");
  Classifier cls(o.comm_regex);

  std::vector<std::string> files = expand_inputs(o.inputs);
  bool store_input = files.size() == 1 && is_hdf5_file(files[0]);
  for (const auto& f : files)
    if (files.size() > 1 && is_hdf5_file(f))
      throw Error(f + ": is a store; give either one store or trace files, not both");

  Store store;
  ClockInference inference;
  std::shared_ptr<const detail::LedgerMatch> match;  // shared with the ledger
  bool inferred = false;
  bool cross = o.overlap || o.breakdown || o.idle || o.stragglers || o.ranges;
  bool exporting = !o.perfetto.empty() || !o.export_kineto.empty() || !o.html.empty();
  bool analyse = o.summary || o.gaps || cross || (o.output.empty() && !exporting);
  if (store_input) {
    if (!o.output.empty()) throw Error(files[0] + ": already a store; -o is for importing traces");
    // Read only what the chosen analyses use (peak RSS stays near the columns read).
    bool need_launches = o.idle || o.stragglers || o.ranges || o.compat == "hta";
    // Only --ranges needs the launches' threads, and only when the store has NVTX / user ranges
    // at all: a small read of the annotations tells (the 8 M-kernel benchmark store has none).
    auto has_ranges = [&] {
      ColumnSelection probe;
      probe.activities = probe.launches = probe.nccl = probe.counters = false;
      const Store a = read_store(files[0], probe);
      return std::any_of(a.annotations.kind.begin(), a.annotations.kind.end(), [](uint8_t k) {
        return k == static_cast<uint8_t>(AnnotationKind::User) || k == static_cast<uint8_t>(AnnotationKind::Nvtx);
      });
    };
    ColumnSelection sel;
    if (!o.perfetto.empty() || !o.export_kineto.empty()) {
      // exports write every column
    } else if (!o.html.empty()) {
      // The report runs summary, gaps, overlap, stragglers and ranges.
      sel.launch_detail = has_ranges();
    } else if (!exporting) {
      sel.launches = need_launches;
      // The analyses join launches by correlation and use their start; --ranges also their thread.
      sel.launch_detail = o.ranges && has_ranges();
      sel.nccl = o.stragglers;
      sel.activity_correlation = need_launches;
    }
    // The inference matches collectives like the ledger: it needs the /nccl columns. It runs on
    // a store for the cross-rank views (ledger, exports) or when asked.
    bool may_align = o.align == "inferred" || (o.align == "auto" && (o.stragglers || exporting));
    sel.nccl = sel.nccl || may_align;
    store = read_store(files[0], sel);
    if (may_align) inferred = align_clocks(store, o, &inference, &match);
  } else {
    // Refuse early, before a long import, if the output exists and --force is not given.
    if (!o.output.empty() && !o.force && fs::exists(o.output))
      throw Error(o.output + ": exists (use --force to replace it)");
    ImportStats stats;
    auto t0 = std::chrono::steady_clock::now();
    store = import_all(files, o, cls, &stats);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& w : stats.warnings) std::cerr << "warning: " << w << "\n";
    store.attrs.tool_version = KERNALYSE_VERSION;
    store.attrs.produced_by = "kernalyse-merge (Kineto JSON import)";
    store.attrs.command_line = command_line;
    store.attrs.created_utc = utc_now();
    store.attrs.clock_domain =
        clocks_aligned(store)
            ? "one timeline, as exported by kernalyse (Kineto import of a kernalyse export)"
            : "per-rank recording wall clock, epoch ns; ranks not aligned (Kineto import)";
    for (const auto& r : store.ranks) store.attrs.emulated = store.attrs.emulated || r.emulated;
    inferred = align_clocks(store, o, &inference, &match);
    if (!o.quiet) {
      std::cerr << "imported " << files.size() << " file(s), " << store.ranks.size()
                << " rank(s), " << store.activities.size() << " GPU activities, "
                << stats.malformed << " malformed events skipped, "
                << static_cast<int64_t>(stats.bytes / 1e6) << " MB JSON in "
                << std::fixed << std::setprecision(2) << secs << " s ("
                << std::setprecision(0) << stats.bytes / 1e6 / std::max(secs, 1e-9) << " MB/s)\n"
                << std::defaultfloat;
    }
    if (!o.output.empty()) {
      write_store(store, o.output, WriteOptions{o.force, o.mode});
      if (!o.quiet) std::cerr << "wrote " << o.output << "\n";
    }
  }
  if (exporting) {
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
                  << std::setprecision(2) << secs << " s)\n" << std::defaultfloat;
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
  if (!analyse) return 0;

  Report report;
  if (store.attrs.emulated)
    report.headline.push_back("DATA IS SYNTHETIC/EMULATED: no real GPU recorded these events");
  std::string ranks;
  for (const auto& r : store.ranks) ranks += (ranks.empty() ? "" : ",") + std::to_string(r.rank);
  report.headline.push_back("ranks: " + ranks + "; clocks: " + store.attrs.clock_domain);
  // What each rank's collector could record, and what it lost: said, never silent.
  std::map<std::pair<int32_t, int32_t>, int64_t> peak_mem, peak_power;  // (rank, device) → peak
  {
    const Counters& k = store.counters;
    for (size_t i = 0; i < k.size(); ++i) {
      const std::string& name = store.strings.at(k.name_id[i]);
      auto* peaks = name == kCounterGpuMemory ? &peak_mem : name == kCounterPower ? &peak_power : nullptr;
      if (!peaks) continue;
      int64_t& m = (*peaks)[{k.rank[i], k.device[i]}];
      m = std::max(m, k.value[i]);
    }
  }
  for (const auto& r : store.ranks) {
    const std::string& st = r.collector_status;
    if (!st.empty() && st.rfind("cupti:", 0) != 0 && !r.emulated)
      report.headline.push_back("rank " + std::to_string(r.rank) + ": " + st);
    if (r.records_dropped + r.records_dropped_cupti > 0)
      report.headline.push_back("rank " + std::to_string(r.rank) + ": " +
                                std::to_string(r.records_dropped + r.records_dropped_cupti) +
                                " records dropped (CUPTI " + std::to_string(r.records_dropped_cupti) +
                                ", kernalyse " + std::to_string(r.records_dropped) + ")");
  }
  if (!peak_mem.empty()) {
    std::string line = "peak GPU memory in use:";
    for (const auto& [rd, bytes] : peak_mem)
      line += " rank " + std::to_string(rd.first) + " GPU " + std::to_string(rd.second) + " " +
              format_bytes(bytes) + ";";
    line.pop_back();
    report.headline.push_back(line);
  }
  nlohmann::json jr = nlohmann::json::array();
  for (const auto& r : store.ranks) {
    nlohmann::json mem = nlohmann::json::object(), power = nlohmann::json::object();
    for (const auto& [rd, bytes] : peak_mem)
      if (rd.first == r.rank) mem[std::to_string(rd.second)] = bytes;
    for (const auto& [rd, mw] : peak_power)
      if (rd.first == r.rank) power[std::to_string(rd.second)] = mw;
    jr.push_back({{"rank", r.rank},
                  {"source", r.source},
                  {"devices", r.devices},
                  {"device_name", r.device_name},
                  {"emulated", r.emulated},
                  {"host", r.host},
                  {"clock_method", r.clock_method},
                  {"clock_offset_ns", r.clock_offset_ns},
                  {"clock_drift", r.clock_drift},
                  {"clock_uncertainty_ns", r.clock_uncertainty_ns},
                  {"events_malformed", r.events_malformed},
                  {"collector_status", r.collector_status},
                  {"records_dropped", r.records_dropped},
                  {"records_dropped_cupti", r.records_dropped_cupti},
                  {"peak_gpu_memory_bytes", mem},
                  {"peak_gpu_power_mw", power}});
  }
  report.json["ranks"] = jr;
  if (inferred) {
    report.json["clock_inference"] = inference_json(inference);
    report.headline.push_back(describe(inference));
  }
  report.json["emulated"] = store.attrs.emulated;

  if (o.compat == "hta") {
    store = hta_view(store);
    report.headline.push_back(
        "--compat hta: integer µs (start rounded up, end down), last ProfilerStep excluded when "
        "there are >= 2, HTA's name-based classification");
  }
  Filter filter{o.rank, o.step};
  if (o.summary || (!o.gaps && !cross)) {
    SummaryOptions so;
    so.filter = filter;
    so.sort = parse_summary_sort(o.sort);
    so.top = o.top;
    so.verbose = o.verbose;
    kernel_summary(store, so, &report);
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
    gap_analysis(store, go, &report);
  }
  CrossRankOptions xo;
  xo.filter = filter;
  xo.compat = o.compat == "hta" ? Compat::Hta : Compat::Native;
  xo.kernel_wait_ns = std::llround(o.kernel_wait_us * 1000.0);
  xo.top = o.top > 0 ? o.top : 20;
  xo.verbose = o.verbose;
  // The inference's matching, on the same rows: not with --compat hta (another view of the store).
  if (o.compat != "hta") xo.match = match;
  if (o.overlap) overlap_analysis(store, xo, &report);
  if (o.breakdown) breakdown_analysis(store, xo, &report);
  if (o.idle) idle_analysis(store, xo, &report);
  if (o.ranges) {
    RangeOptions ro;
    ro.filter = filter;
    ro.top = o.top > 0 ? o.top : 20;
    range_analysis(store, ro, &report);
  }
  if (o.stragglers) {
    straggler_analysis(store, xo, &report);
    // How far cross-rank times can be trusted: a stated error when the clocks were inferred.
    int64_t worst = 0, n_inferred = 0;
    std::string method;
    for (const auto& r : store.ranks)
      if (r.clock_method.rfind("inferred", 0) == 0) {
        ++n_inferred, worst = std::max(worst, r.clock_uncertainty_ns);
        method = r.clock_method.substr(0, r.clock_method.find(" (reference"));
      }
    if (!clocks_aligned(store) && store.ranks.size() > 1) {
      report.headline.push_back(
          "caution: these ranks' clocks were not aligned (per-host wall clocks); arrival skews "
          "include their offsets, typically 1 ms or more under NTP");
    } else if (n_inferred > 1) {
      std::ostringstream e;
      e << std::fixed << std::setprecision(1) << "clocks " << method << ", ±"
        << static_cast<double>(worst) / 1000.0 << " µs: skews below that are noise";
      report.headline.push_back(e.str());
    }
  }
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
      "kernalyse-merge: merge per-rank GPU traces (Kineto/PyTorch-profiler JSON) into one HDF5 "
      "store, and analyse a store or traces.\n"
      "  kernalyse-merge rank0.json.gz rank1.json.gz -o run.h5\n"
      "  kernalyse-merge run.h5 [--gaps] [--json]\n"
      "  kernalyse-merge traces/ --gaps --json"};
  Options o;
  app.add_option("inputs", o.inputs, "trace files (.json/.json.gz), directories of them, or a store");
  app.add_option("-o,--output", o.output, "write the merged store to FILE");
  app.add_flag("--force", o.force, "replace an existing output file");
  app.add_option("--spool", o.spool,
                 "crash recovery: build the store (-o) from a run's spool directory, offline");
  app.add_option("--rank", o.rank,
                 "analyse only rank R (also names the rank of a single trace that has none)");
  app.add_option("--step", o.step, "analyse only ProfilerStep#N");
  app.add_flag("--summary", o.summary, "kernel summary (the default report)");
  app.add_flag("--gaps", o.gaps, "idle-gap analysis per stream, device and rank");
  app.add_flag("--overlap", o.overlap, "communication/computation overlap and exposed communication");
  app.add_flag("--breakdown", o.breakdown, "temporal breakdown: idle, compute, comm, memory, other");
  app.add_flag("--idle", o.idle, "idle breakdown per stream: host wait, kernel wait, other");
  app.add_flag("--ranges", o.ranges,
               "GPU time by NVTX / user-annotation range (kernels launched inside each range)");
  app.add_flag("--stragglers", o.stragglers,
               "collective matching across ranks, straggler ledger and root cause");
  app.add_flag("--all", o.all, "every analysis");
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
  app.add_option("--perfetto", o.perfetto,
                 "write a Chrome trace-event JSON (.json or .json.gz) for Perfetto UI / chrome://tracing");
  app.add_option("--export-kineto", o.export_kineto,
                 "write one Kineto-style JSON per rank (DIR/rank-<r>.json) for HTA / TraceLens");
  app.add_option("--html", o.html,
                 "write a self-contained HTML report (charts and tables, opens offline)");
  app.add_option("--from", o.from, "exports and --html timeline: keep events ending after T (µs from the run's start; or 20ns, 1.5ms)");
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
  if (o.all) o.summary = o.gaps = o.overlap = o.breakdown = o.idle = o.stragglers = o.ranges = true;
  o.mode = o.quiet ? ProgressMode::Off : parse_progress_mode(o.progress).value_or(ProgressMode::Off);
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
  }
}
