// kernalyse-merge: import per-rank traces into one store and/or analyse a store. Flags map onto
// the library's options; the analyses and their flags come from the registry (pipeline.h).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <map>

#include "kernalyse/atomic_file.h"
#include "kernalyse/export.h"
#include "kernalyse/hang.h"
#include "kernalyse/heap.h"
#include "kernalyse/html_report.h"
#include "kernalyse/load.h"
#include "kernalyse/parallel.h"
#include "kernalyse/pipeline.h"
#include "kernalyse/power_log.h"
#include "kernalyse/run_env.h"
#include "kernalyse/sliced.h"
#include "kernalyse/spool_store.h"
#include "kernalyse/utc.h"
#include "merge_flags.h"
#include "merge_mpi.h"
#include "merge_spool.h"

namespace fs = std::filesystem;
using namespace kernalyse;

namespace {

constexpr int kExitBadInput = 2;

// Under mpirun, while run() checks its arguments (the same on every process: flags, inputs,
// outputs), and while the processes do work whose errors reach all of them alike (an import,
// the exports a rank at a time), a process other than the first leaves their errors to the first
// to say once (main's handlers; exit 2 either way).
bool others_say_it = false;

// A KERNALYSE_* count from 1 to `max`, when set; anything else is one line naming it.
std::optional<uint64_t> env_count(RunEnv var, uint64_t max, const char* what) {
  const char* c = std::getenv(env_name(var));
  if (!c) return std::nullopt;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(c, &end, 10);
  if (!*c || *end || v == 0 || v > max)
    throw Error(std::string(env_name(var)) + "=" + c + ": not " + what + " from 1 to " +
                std::to_string(max));
  return v;
}

// The inputs' size on disk (compressed for gzip), what tells a small run; a pipe or anything
// else without a size counts as large.
int64_t on_disk_bytes(const std::vector<std::string>& files) {
  int64_t n = 0;
  for (const auto& f : files) {
    std::error_code ec;
    if (!fs::is_regular_file(f, ec)) return std::numeric_limits<int64_t>::max();
    const auto b = fs::file_size(f, ec);
    if (ec) return std::numeric_limits<int64_t>::max();
    n += static_cast<int64_t>(b);
  }
  return n;
}

LoadOptions load_options(const Options& o, const Classifier* cls) {
  LoadOptions lo;
  lo.import = {o.rank, o.step_range, cls, o.mode, {}, true};
  lo.align = o.align, lo.output = o.output, lo.force = o.force;
  lo.recorded_clocks = o.ao.compat == Compat::Hta;  // HTA's view: the recorded clocks
  lo.command_line = o.command_line;
  // Rows of each big table a streamed import holds before they go to disk (docs/limits.md);
  // the tests set it small to stream small traces through the same code.
  if (auto v = env_count(RunEnv::ImportChunkRows, uint64_t{1} << 32, "a row count"))
    lo.import.chunk_rows = static_cast<size_t>(*v);
  // The memory an import of several traces may hold before its files' rows go to disk.
  if (auto v = env_count(RunEnv::ImportMemoryMb, uint64_t{1} << 40, "a size in MB"))
    lo.import.memory_bytes = *v << 20;
  if (!o.quiet) lo.info = [](const std::string& l) { std::cerr << l << "\n"; };
  lo.warn = [](const std::string& l) { std::cerr << l << "\n"; };
  return lo;
}

void print(const Report& r, const Options& o) {
  if (!o.csv_dir.empty()) render_csv(r, o.csv_dir);
  if (o.json)
    render_json(r, std::cout);
  else
    render_text(r, std::cout);
  std::cout.flush();
}

// --diff BASE TEST: both loaded the same way, compared, rendered like the other analyses. Under
// mpirun the ranks of a store are spread over the processes (DiffSource), the first one writes.
int run_diff(const Options& o, const Spread* spread) {
  if (o.diff.size() != 2) throw Error("--diff takes two inputs: BASE TEST");
  if (!o.inputs.empty() || !o.output.empty())
    throw Error("--diff takes its two inputs only; give no other input or -o");
  if (o.ao.compat != Compat::Native || !o.perfetto.empty() || !o.export_kineto.empty() ||
      !o.spool.empty())
    throw Error(
        "--diff renders as text, --json, --csv or --html; --compat, exports and --spool do not "
        "apply");
  const Classifier cls(o.comm_regex);
  LoadOptions lo = load_options(o, &cls);
  const bool first_process = !spread || spread->process == 0;
  if (!first_process) lo.info = lo.warn = nullptr;
  DiffOptions opt;
  opt.base_label = o.diff[0], opt.test_label = o.diff[1];
  opt.filter = o.ao.filter;
  opt.kernel_wait_ns = o.ao.kernel_wait_ns;
  DiffSource base = load_diff_source(o.diff[0], lo, spread);
  DiffSource test = load_diff_source(o.diff[1], lo, spread);
  TraceDiff d = diff_inputs(base.input(), test.input(), opt);
  if (!first_process) return 0;
  if (!o.html.empty()) {
    int64_t bytes = write_diff_html(d, o.html, o.force);
    if (!o.quiet) std::cerr << "wrote " << o.html << " (" << (bytes + 999) / 1000 << " kB)\n";
  }
  print(diff_report(d, o.ao.top), o);
  return 0;
}

// --html, --perfetto, --export-kineto.
ExportOptions export_options(const Options& o) {
  ExportOptions eo;
  eo.rank = o.rank, eo.step = o.step, eo.force = o.force, eo.progress = o.mode;
  if (!o.from.empty()) eo.from_ns = parse_time_to_ns(o.from);
  if (!o.to.empty()) eo.to_ns = parse_time_to_ns(o.to);
  return eo;
}

void say_kineto_export(const ExportStats& es, const Options& o) {
  std::cerr << "wrote " << es.files << " Kineto trace(s) into " << o.export_kineto << " ("
            << es.events << " events)\n";
}

void say_perfetto(const ExportStats& es, const Options& o) {
  std::cerr << "wrote " << o.perfetto << " (" << es.events << " events, " << es.flows
            << " collective flows)\n";
}

// The Kineto export of a store alone: a rank's file at a time (sliced.h); under mpirun each
// process writes its ranks' files. Its errors reach every process: said once, by the first.
// The exit status, or none when the store is to be read whole (and the others are done).
std::optional<int> kineto_by_rank(const std::string& store, const Options& o, bool may_align,
                                  const LoadOptions& lo, const Spread* spread) {
  const bool first_process = !spread || spread->process == 0;
  others_say_it = !first_process;  // its errors are every process's: said once (main)
  const std::optional<ExportStats> es =
      export_kineto_by_rank(store, o.export_kineto, export_options(o), may_align, lo, spread);
  others_say_it = false;
  if (es && first_process && !o.quiet) say_kineto_export(*es, o);
  if (es || !first_process) return 0;
  return std::nullopt;
}

// Exports alone of a store, a rank at a time: the Kineto files first, then the Perfetto file,
// each by every process (each formats its ranks' events, the first writes the Perfetto file);
// their errors reach all of them, said once, by the first. Empty: the store is to be read whole
// (by the first process).
std::optional<int> exports_by_rank(const std::string& store, const Options& o, bool may_align,
                                   const LoadOptions& lo, const Spread* spread) {
  const bool first_process = !spread || spread->process == 0;
  if (!o.export_kineto.empty()) {
    const std::optional<int> rc = kineto_by_rank(store, o, may_align, lo, spread);
    if (!rc || *rc != 0 || o.perfetto.empty()) return rc;
  }
  if (o.perfetto.empty()) return 0;
  // Sliceable when the Kineto export was (the same store, the same reader): empty only alone.
  others_say_it = !first_process;
  const std::optional<ExportStats> es =
      export_perfetto_by_rank(store, o.perfetto, export_options(o), may_align, lo, spread);
  others_say_it = false;
  if (!first_process) return 0;
  if (!es) return std::nullopt;
  if (!o.quiet) say_perfetto(*es, o);
  return 0;
}

HtmlOptions html_options(const Options& o, std::shared_ptr<const CollectiveMatch> match) {
  const ExportOptions eo = export_options(o);
  HtmlOptions ho;
  ho.analysis = o.ao, ho.match = std::move(match);
  ho.from_ns = eo.from_ns, ho.to_ns = eo.to_ns, ho.force = o.force, ho.progress = o.mode;
  ho.title = o.inputs.size() == 1 ? fs::path(o.inputs[0]).filename().string() : "";
  return ho;
}

void say_html(const HtmlStats& hs, const Options& o, std::chrono::steady_clock::time_point t0) {
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  char took[64];
  std::snprintf(took, sizeof took, "%.2f s", secs);
  if (!o.quiet)
    std::cerr << "wrote " << o.html << " (" << (hs.bytes + 999) / 1000 << " kB, " << took << ")\n";
}

void write_exports(const Store& store, const Options& o, const LoadedRun& run) {
  const ExportOptions eo = export_options(o);
  if (!o.html.empty()) {
    auto t0 = std::chrono::steady_clock::now();
    say_html(write_html_report(store, o.html, html_options(o, run.match)), o, t0);
  }
  if (!o.perfetto.empty()) {
    ExportStats es = export_perfetto(store, o.perfetto, eo);
    if (!o.quiet) say_perfetto(es, o);
  }
  if (!o.export_kineto.empty()) {
    ExportStats es = export_kineto(store, o.export_kineto, eo);
    if (!o.quiet) say_kineto_export(es, o);
  }
}

// The report of analyse_by_rank's results: as run() makes it from the whole store.
int print_sliced(SlicedAnalysis& r, const Options& o) {
  Report report;
  store_overview(r.header, &report);
  if (r.inference) {
    report.json["clock_inference"] = clock_inference_json(*r.inference);
    report.headline.push_back(describe(*r.inference));
  }
  append_results(std::move(r.results), *r.ctx, &report);
  print(report, o);
  return 0;
}

// The report of a run held whole: the overview, the clock inference, the analyses.
int print_run(const LoadedRun& run, const Options& o, const std::vector<const Analysis*>& which) {
  Report report;
  store_overview(run.store, &report);
  if (run.inference) {
    report.json["clock_inference"] = clock_inference_json(*run.inference);
    report.headline.push_back(describe(*run.inference));
  }
  const AnalysisContext ctx(run.store, o.ao, run.match);
  append_results(run_analyses(ctx, which, /*render=*/true), ctx, &report);
  print(report, o);
  return 0;
}

// --html of a store a rank at a time (write_html_by_rank, sliced.h), then the analyses asked for
// with it: a rank at a time when they can, else read whole by the first process. Under mpirun the
// processes share the slices and the first one writes. Empty: the page is to be drawn from the
// store read whole (within the memory budget, a filter: write_html_by_rank says when).
std::optional<int> html_by_rank(const std::string& store, const Options& o,
                                const std::vector<const Analysis*>& which,
                                const ColumnSelection& sel, bool may_align, const LoadOptions& lo,
                                const Spread* spread) {
  const bool first_process = !spread || spread->process == 0;
  LoadOptions quiet = lo;
  if (!first_process) quiet.info = quiet.warn = nullptr;
  const auto t0 = std::chrono::steady_clock::now();
  const std::optional<HtmlStats> hs =
      write_html_by_rank(store, o.html, html_options(o, nullptr), sel, may_align, quiet, spread);
  if (!hs) return std::nullopt;
  if (first_process) say_html(*hs, o, t0);
  if (which.empty()) return 0;
  quiet.info = nullptr;  // the clock inference's line is said
  if (auto sliced = analyse_by_rank(store, which, o.ao, sel, may_align, quiet, spread))
    return sliced->writer ? print_sliced(*sliced, o) : 0;
  if (!first_process) return 0;
  return print_run(read_run(store, sel, may_align, quiet), o, which);
}

// The store every process wrote under mpirun (`run`: the import, its clock inference), analysed
// a rank at a time by all of them: the report the one-process import and analysis prints.
int analyse_written(const std::string& store, LoadedRun& run, const Options& o,
                    const std::vector<const Analysis*>& which, const LoadOptions& lo,
                    const Spread& spread) {
  // The clocks are the import's: not inferred again.
  const ColumnSelection sel = columns_for_store(store, which, o.ao.compat, false);
  std::optional<SlicedAnalysis> sliced =
      analyse_by_rank(store, which, o.ao, sel, false, lo, &spread);
  if (!sliced) throw Error(store + ": internal error: the store written cannot be read by rank");
  if (!sliced->inference) sliced->inference = std::move(run.inference);
  return sliced->writer ? print_sliced(*sliced, o) : 0;
}

// Traces imported (and, under mpirun with -o, written by every process and perhaps analysed by
// all of them): the exit status when that is all, else none with *run the import for the
// analyses and exports (on the first process; the others have returned 0).
std::optional<int> import_traces(const std::vector<std::string>& files, const Options& o,
                                 const std::vector<const Analysis*>& which, const LoadOptions& lo,
                                 const Spread* spread, LoadedRun* out) {
  const bool first_process = !spread || spread->process == 0;
  const bool exporting = !o.perfetto.empty() || !o.export_kineto.empty() || !o.html.empty();
  const bool analyse = !which.empty();
  LoadedRun& run = *out;
  // With no store, export or page to write, the cpu_ops (/ops: names and shapes) are kept only
  // for the analyses that read them (--roofline, --hints): a fifth of a small trace's import.
  LoadOptions alo = lo;
  if (o.output.empty() && !exporting)
    alo.import.ops = columns_for(which, o.ao.compat, false, nullptr).ops;
  // One large trace analysed, nothing written: through a temporary store, a rank at a time.
  if (files.size() == 1 && !spread && !exporting && o.power_logs.empty() && o.output.empty())
    if (auto sliced = analyse_trace_by_rank(files[0], which, o.ao, alo))
      return print_sliced(*sliced, o);
  LoadOptions spread_lo = alo;  // each process imports its share of the files (inputs.h)
  spread_lo.import.spread = spread;
  spread_lo.output_only = !analyse && !exporting && o.power_logs.empty();
  // Under mpirun, -o and analyses that all run a rank at a time: the store written by every
  // process, then analysed by all of them.
  const bool write_then_analyse = spread && !o.output.empty() && files.size() > 1 && analyse &&
                                  !exporting && o.power_logs.empty() &&
                                  sliceable_any_size(which, o.ao);
  spread_lo.output_only = spread_lo.output_only || write_then_analyse;
  if (!first_process) spread_lo.info = spread_lo.warn = nullptr;
  others_say_it = !first_process;  // an import's errors reach every process: said once (main)
  // Without -o: the same through a temporary store that every process reads.
  if (spread && o.output.empty() && analyse && !exporting && o.power_logs.empty())
    if (auto sliced = analyse_traces_spread(files, which, o.ao, spread_lo, *spread))
      return sliced->writer ? print_sliced(*sliced, o) : 0;
  run = import_run(files, spread_lo);
  others_say_it = false;
  if (run.written_by_all && write_then_analyse)
    return analyse_written(o.output, run, o, which, spread_lo, *spread);
  if (!first_process) return 0;
  return std::nullopt;
}

int run(Options& o) {
  for (const auto& w : o.what_if) o.ao.what_if.push_back(parse_what_if(w));  // before any input
  // Under mpirun: the first process writes; the others help with what can be spread (the
  // analyses of a store, a --diff of stores, an import), else they are done.
  const std::unique_ptr<Spread> spread = mpi_spread();
  const bool first_process = !spread || spread->process == 0;
  others_say_it = !first_process;
  if (!o.diff.empty()) {
    if (first_process) return run_diff(o, spread.get());
    // Its errors are every process's (diff.h): said once, by the first process.
    try {
      return run_diff(o, spread.get());
    } catch (const Error&) {
      return kExitBadInput;
    }
  }
  if (!o.spool.empty()) return first_process ? run_spool(o) : 0;
  if (o.inputs.empty())
    throw Error("no input: give trace files, a directory of traces, or a store");
  if (o.ao.hist_min_us >= o.ao.hist_max_us) throw Error("--hist-min must be below --hist-max");
  if (o.ao.bins < 1) throw Error("--bins must be at least 1");
  const Classifier cls(o.comm_regex);  // a bad --comm-regex fails before any input is read
  const LoadOptions lo = load_options(o, &cls);
  o.ao.memory_bytes = lo.import.memory_bytes;  // the same budget for the critical path's steps
  const std::vector<std::string> files = expand_inputs(o.inputs);
  const bool store_input = files.size() == 1 && is_hdf5_file(files[0]);
  const bool node_stores =
      files.size() > 1 && std::all_of(files.begin(), files.end(), is_hdf5_file);
  for (const auto& f : files)
    if (files.size() > 1 && is_hdf5_file(f) && !node_stores)
      throw Error(f + ": is a store; give either stores or trace files, not both");
  if (node_stores) {
    if (!first_process) return 0;
    const ClockInference inf = merge_node_stores(files, lo);
    if (o.json) std::cout << clock_inference_json(inf).dump(1) << "\n";
    return 0;
  }
  if (!o.peaks.empty()) o.ao.peaks = load_peaks_file(o.peaks);  // fails fast, before an import
  for (const auto* out : {&o.html, &o.perfetto})  // an unwritable output: refused before the work
    if (!out->empty()) check_output_path(*out, o.force);
  std::vector<const Analysis*> which;
  for (const Analysis* a : analyses())
    if (o.selected[a->name]) which.push_back(a);
  const bool exports = !o.perfetto.empty() || !o.export_kineto.empty();
  const bool exporting = exports || !o.html.empty();
  const bool analyse = !which.empty() || (o.output.empty() && !exporting);
  if (analyse && which.empty()) which.push_back(find_analysis("summary"));  // the default report
  others_say_it = false;  // from here each process reads and says its own errors
  LoadedRun run;
  if (store_input) {
    if (!o.output.empty()) throw Error(files[0] + ": already a store; -o is for importing traces");
    use_one_arena();  // before the first read starts threads (heap.h); imports keep glibc's
    // The inference matches collectives like the ledger: it runs on a store for the cross-rank
    // views (ledger, critical path, exports) or when asked.
    const bool may_align = o.align == "inferred" ||
                           (o.align == "auto" &&
                            (o.selected["stragglers"] || o.selected["critical-path"] || exporting));
    std::vector<const Analysis*> reads = which;
    if (!o.html.empty())
      for (const Analysis* a : analyses())
        if (a->in_page) reads.push_back(a);
    ColumnSelection sel = columns_for_store(files[0], reads, o.ao.compat, may_align);
    if (exports) sel = ColumnSelection::all();  // exports write every column
    if (exports && o.html.empty() && which.empty() && o.power_logs.empty())
      if (auto rc = exports_by_rank(files[0], o, may_align, lo, spread.get())) return *rc;
    // The analyses a rank at a time when they all can (kernalyse/sliced.h): same output. Under
    // mpirun the ranks are spread over the processes and the first one writes (merge_mpi.h); what
    // cannot be spread (--power-log, exports with analyses, ...) runs whole on it. --html past
    // the memory budget too (its critical path's rule: within it the whole read is faster).
    if (!o.html.empty() && !exports && o.power_logs.empty())
      if (auto rc = html_by_rank(files[0], o, which, sel, may_align, lo, spread.get())) return *rc;
    if (!exporting && o.power_logs.empty()) {
      LoadOptions quiet = lo;
      if (spread && spread->process != 0) quiet.info = quiet.warn = nullptr;
      if (auto sliced = analyse_by_rank(files[0], which, o.ao, sel, may_align, quiet, spread.get()))
        return sliced->writer ? print_sliced(*sliced, o) : 0;
    }
    if (!first_process) return 0;
    run = read_run(files[0], sel, may_align, lo);
  } else {
    if (on_disk_bytes(files) <= kSmallRunBytes) {
      use_huge_heap_for_small_run();  // heap.h
      keep_threads_for_small_run();   // parallel.h
    }
    if (auto rc = import_traces(files, o, which, lo, spread.get(), &run)) return *rc;
  }
  Store& store = run.store;
  for (const auto& spec : o.power_logs) {
    const PowerLog log = attach_power_log_spec(&store, spec);
    if (!o.quiet) std::cerr << describe(log) << "\n";
  }
  if (exporting) write_exports(store, o, run);
  return analyse ? print_run(run, o, which) : 0;
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
  add_flags(app, o);
  app.set_version_flag("--version", std::string("kernalyse-merge ") + KERNALYSE_VERSION);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitBadInput;
  }
  resolve(o);
  // stdout fully buffered, also on a terminal: under mpirun it is a pseudo-terminal (Open MPI's
  // I/O forwarding), which the C library line-buffers, and a write per line made the 256-rank
  // store's `--all --json` 192,000 writes and 0.5 s of its mpirun run (docs/benchmarks.md). The
  // reports are written at the end, so a terminal sees the same.
  static char stdout_buffer[size_t{1} << 16];  // glibc sizes its own by the device: 1 KB on a pty
  std::setvbuf(stdout, stdout_buffer, _IOFBF, sizeof stdout_buffer);
  for (int i = 0; i < argc; ++i) o.command_line += (i ? " " : "") + std::string(argv[i]);
  try {
    return run(o);
  } catch (const Error& e) {
    if (!others_say_it) std::cerr << "kernalyse-merge: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::regex_error& e) {
    if (!others_say_it) std::cerr << "kernalyse-merge: invalid --comm-regex: " << e.what() << "\n";
    return kExitBadInput;
  } catch (const std::bad_alloc&) {
    std::cerr << "kernalyse-merge: out of memory\n";
    return 1;
  } catch (const std::exception& e) {  // never an abort: one line and the bad-input status
    std::cerr << "kernalyse-merge: " << e.what() << "\n";
    return kExitBadInput;
  }
}
