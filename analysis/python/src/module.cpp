// The Python module's native part, `kernalyse._kernalyse` (docs/python.md): a run loaded the way
// kernalyse-merge loads its input (load.h), its tables handed to numpy without copying, and the
// registry's analyses (pipeline.h) run on it. Options are kernalyse-merge's own flags, parsed by
// its own definitions (launch/merge_flags.cpp): a bad value raises kernalyse.Error with the line
// the CLI prints. The GIL is released while the library works.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include "frames.h"
#include "kernalyse/crossrank.h"
#include "kernalyse/error.h"
#include "kernalyse/export.h"
#include "kernalyse/html_report.h"
#include "kernalyse/load.h"
#include "kernalyse/pipeline.h"
#include "kernalyse/power_log.h"
#include "kernalyse/store_io.h"
#include "merge_flags.h"

namespace fs = std::filesystem;
namespace py = pybind11;

namespace kernalyse::python {
namespace {

// kernalyse-merge's flags parsed by its own definitions and resolved into the library's values.
Options parse_flags_uncached(const std::vector<std::string>& args) {
  CLI::App app{"kernalyse"};
  Options o;
  add_flags(app, o);
  std::vector<const char*> argv = {"kernalyse"};
  for (const auto& a : args) argv.push_back(a.c_str());
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    throw Error(e.what());
  }
  resolve(o);
  return o;
}

// The same flags parsed once: building CLI11's parser takes longer than a small run's analysis
// (kernalyse.hta's four calls on the trace_filter pair, issue 27). Only flags whose meaning cannot
// change (the progress mode given, not "auto", which asks the terminal) are kept; errors never.
Options parse_flags(const std::vector<std::string>& args) {
  static std::mutex mu;
  static std::map<std::vector<std::string>, Options> cache;
  const bool keep = std::any_of(args.begin(), args.end(), [](const std::string& a) {
    return a == "--quiet" || a == "--progress=off";
  });
  if (keep) {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = cache.find(args); it != cache.end()) return it->second;
  }
  Options o = parse_flags_uncached(args);
  if (keep) {
    std::lock_guard<std::mutex> lock(mu);
    if (cache.size() >= 64) cache.clear();
    cache.emplace(args, o);
  }
  return o;
}

// The checks kernalyse-merge makes of the analyses' options before it reads any input (the same
// lines; tests/python/test_args.py holds them equal to the CLI's).
void check_analysis_flags(Options& o) {
  for (const auto& w : o.what_if) o.ao.what_if.push_back(parse_what_if(w));
  if (o.ao.hist_min_us >= o.ao.hist_max_us) throw Error("--hist-min must be below --hist-max");
  if (o.ao.bins < 1) throw Error("--bins must be at least 1");
  if (!o.peaks.empty()) o.ao.peaks = load_peaks_file(o.peaks);
}

// What the loading said: info lines (shown unless quiet) and warnings (always shown).
struct Messages {
  std::mutex mu;
  std::vector<std::string> info, warn;
};

LoadOptions load_options(const Options& o, const Classifier* cls,
                         const std::shared_ptr<Messages>& m) {
  LoadOptions lo;
  lo.import = {o.rank, o.step_range, cls, o.mode, {}, true};
  lo.align = o.align, lo.output = o.output, lo.force = o.force;
  lo.recorded_clocks = o.ao.compat == Compat::Hta;  // HTA's view: the recorded clocks
  lo.command_line = o.command_line;
  lo.info = [m](const std::string& l) {
    std::lock_guard<std::mutex> lock(m->mu);
    m->info.push_back(l);
  };
  lo.warn = [m](const std::string& l) {
    std::lock_guard<std::mutex> lock(m->mu);
    m->warn.push_back(l);
  };
  return lo;
}

// Each Kineto file's GPU activity rows in file order (stream, correlation), kept when the run is
// opened with compat="hta": HTA lists a rank's idle streams in its trace's event order.
struct GpuOrder {
  std::mutex mu;
  std::map<std::string, std::vector<std::pair<int32_t, int64_t>>> rows;
};

// One opened run: the store (clocks as aligned), what the loading found, and the analysis
// contexts of its recent calls: calls with the same options share one context, hence what it
// computes once (HTA's view, the unions overlap and breakdown share, the performance model).
struct Run {
  std::shared_ptr<LoadedRun> loaded;
  std::shared_ptr<const Store> store;  // aliases loaded->store
  std::vector<std::string> args;       // open()'s flags
  std::vector<std::string> info, warn;
  std::string title;
  std::shared_ptr<GpuOrder> gpu_order;  // compat="hta" only

  // The context for these options (its key: the call's flags), made on first use; the last
  // kContexts are kept.
  std::shared_ptr<const AnalysisContext> context(const std::string& key, const AnalysisOptions& o) {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& [k, c] : contexts_)
      if (k == key) return c;
    auto c = std::make_shared<const AnalysisContext>(*store, o, loaded->match);
    contexts_.emplace_back(key, c);
    if (contexts_.size() > kContexts) contexts_.erase(contexts_.begin());
    return c;
  }

  // A store to read tables from: the store, or HTA's view of it (a --compat hta context's).
  std::shared_ptr<const Store> view(const std::string& v) {
    if (v == "store") return store;
    if (v != "hta") throw Error("view must be 'store' or 'hta', not '" + v + "'");
    std::shared_ptr<const AnalysisContext> c;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (const auto& [k, x] : contexts_)
        if (x->options().compat == Compat::Hta) c = x;
    }
    if (!c) {
      AnalysisOptions o;
      o.compat = Compat::Hta;
      c = context("--compat=hta", o);
    }
    return std::shared_ptr<const Store>(c, &c->store(View::Hta));
  }

 private:
  static constexpr size_t kContexts = 4;
  std::mutex mu_;
  std::vector<std::pair<std::string, std::shared_ptr<const AnalysisContext>>> contexts_;
};

// kernalyse-merge's input rules (kernalyse_merge.cpp, run()): one store, or trace files.
LoadedRun load(const Options& o, const LoadOptions& lo) {
  if (o.inputs.empty())
    throw Error("no input: give trace files, a directory of traces, or a store");
  const std::vector<std::string> files = expand_inputs(o.inputs);
  const bool store_input = files.size() == 1 && is_hdf5_file(files[0]);
  for (const auto& f : files)
    if (files.size() > 1 && is_hdf5_file(f))
      throw Error(f +
                  ": is a store; open one store, or trace files (kernalyse-merge STORES -o "
                  "run.h5 merges node stores)");
  if (!store_input) return import_run(files, lo);
  if (!o.output.empty()) throw Error(files[0] + ": already a store; -o is for importing traces");
  // Any analysis may follow: --align auto infers the clocks on evidence, as the CLI does for its
  // cross-rank views (never under --compat hta, whose view is the recorded clocks).
  const bool may_align = o.align != "off";
  return read_run(files[0], ColumnSelection::all(), may_align, lo);
}

std::shared_ptr<Run> open_run(const std::vector<std::string>& inputs,
                              const std::vector<std::string>& args, bool ops) {
  Options o = parse_flags(args);
  o.inputs = inputs;
  o.command_line = "kernalyse.open";
  auto run = std::make_shared<Run>();
  run->args = args;
  run->title = inputs.size() == 1 ? fs::path(inputs[0]).filename().string() : "";
  auto messages = std::make_shared<Messages>();
  {
    py::gil_scoped_release release;
    const Classifier cls(o.comm_regex);  // a bad regex fails before any input is read
    LoadOptions lo = load_options(o, &cls, messages);
    lo.import.ops = ops;
    if (o.ao.compat == Compat::Hta) {
      auto g = std::make_shared<GpuOrder>();
      lo.import.gpu_event = [g](const std::string& path, int32_t stream, int64_t corr) {
        std::lock_guard<std::mutex> lock(g->mu);
        g->rows[path].emplace_back(stream, corr);
      };
      run->gpu_order = g;
    }
    run->loaded = std::make_shared<LoadedRun>(load(o, lo));
    for (const auto& spec : o.power_logs)
      messages->info.push_back(describe(attach_power_log_spec(&run->loaded->store, spec)));
  }
  run->store = std::shared_ptr<const Store>(run->loaded, &run->loaded->store);
  if (!o.quiet) run->info = messages->info;
  run->warn = messages->warn;
  return run;
}

// Flags for one call (the package merges open()'s defaults with the call's own).
Options call_flags(const Run& r, const std::vector<std::string>& args) {
  Options o = parse_flags(args);
  check_analysis_flags(o);
  if (o.ao.compat == Compat::Hta && r.loaded->inference)
    throw Error(
        "--compat hta reads the recorded clocks, and this run's were aligned: open it with "
        "compat='hta' (or align='off')");
  return o;
}

// One analysis's rendered result: tables, notes, and the JSON keys built on demand.
struct Result {
  // What the report's deferred keys may read: the store and the context the analysis ran in.
  std::shared_ptr<const Store> store;
  std::shared_ptr<const AnalysisContext> context;
  Report report;
  py::list tables() const {
    py::list out;
    for (const Table& t : report.tables) {
      py::tuple k = report_table(t);
      out.append(py::make_tuple(k[0], k[1], k[2], k[3], t.in_json));
    }
    return out;
  }
  std::vector<std::string> notes() const {
    std::vector<std::string> n = report.lead;
    n.insert(n.end(), report.headline.begin(), report.headline.end());
    return n;
  }
  std::string json() const {
    nlohmann::json j;
    {
      py::gil_scoped_release release;
      j = json_of(report);
    }
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  }
};

std::shared_ptr<Result> analyse(Run& r, const std::string& name,
                                const std::vector<std::string>& args) {
  const Analysis* a = find_analysis(name);
  if (!a) throw Error("no analysis '" + name + "'");
  const Options o = call_flags(r, args);
  auto out = std::make_shared<Result>();
  out->store = r.store;
  py::gil_scoped_release release;
  std::string key;
  for (const auto& x : args) key += x + '\n';
  out->context = r.context(key, o.ao);
  const AnalysisContext& ctx = *out->context;
  append_results(run_analyses(ctx, {a}, /*render=*/true), ctx, &out->report);
  return out;
}

ExportOptions export_options(const Options& o) {
  ExportOptions eo;
  eo.rank = o.rank, eo.step = o.step, eo.force = o.force, eo.progress = o.mode;
  if (!o.from.empty()) eo.from_ns = parse_time_to_ns(o.from);
  if (!o.to.empty()) eo.to_ns = parse_time_to_ns(o.to);
  return eo;
}

int64_t write_html(Run& r, const std::string& path, const std::vector<std::string>& args) {
  const Options o = call_flags(r, args);
  const ExportOptions eo = export_options(o);
  HtmlOptions ho;
  ho.analysis = o.ao, ho.match = r.loaded->match;
  ho.from_ns = eo.from_ns, ho.to_ns = eo.to_ns, ho.force = o.force, ho.progress = o.mode;
  ho.title = r.title;
  py::gil_scoped_release release;
  return write_html_report(*r.store, path, ho).bytes;
}

py::dict export_stats(const ExportStats& s) {
  py::dict d;
  d["events"] = s.events, d["flows"] = s.flows, d["counters"] = s.counters, d["files"] = s.files;
  return d;
}

py::dict export_to(Run& r, const std::string& kind, const std::string& path,
                   const std::vector<std::string>& args) {
  const ExportOptions eo = export_options(call_flags(r, args));
  ExportStats s;
  {
    py::gil_scoped_release release;
    if (kind == "perfetto")
      s = export_perfetto(*r.store, path, eo);
    else
      s = export_kineto(*r.store, path, eo);
  }
  return export_stats(s);
}

void save(Run& r, const std::string& path, bool force) {
  py::gil_scoped_release release;
  write_store(*r.store, path, WriteOptions{force, ProgressMode::Off});
}

py::list registry() {
  py::list out;
  for (const Analysis* a : analyses())
    out.append(py::make_tuple(a->name, a->help, a->in_all, a->in_page, a->view == View::Hta));
  return out;
}

py::list string_list(const Store& s) {
  py::list out;
  for (const std::string& x : s.strings.all()) {
    PyObject* o = PyUnicode_DecodeUTF8(x.data(), static_cast<py::ssize_t>(x.size()), "replace");
    if (!o) throw py::error_already_set();
    out.append(py::reinterpret_steal<py::str>(o));
  }
  return out;
}

py::list strings(Run& r, const std::string& view) {
  std::shared_ptr<const Store> v;
  {
    py::gil_scoped_release release;  // HTA's view is made on first use
    v = r.view(view);
  }
  return string_list(*v);
}

py::list table(Run& r, const std::string& name, const std::string& view) {
  std::shared_ptr<const Store> s;
  {
    py::gil_scoped_release release;  // HTA's view is made on first use
    s = r.view(view);
  }
  return store_table(s, name);
}

// One row table of a store file, read alone (the other tables' columns are not read): the
// quickest way from a large store to one DataFrame. The arrays own the store read for them.
py::tuple read_table(const std::string& path, const std::string& name) {
  ColumnSelection sel;
  sel.activities = name == "activities", sel.launches = name == "launches";
  sel.annotations = name == "annotations", sel.nccl = name == "nccl";
  sel.counters = name == "counters", sel.ops = name == "ops";
  if (!(sel.activities || sel.launches || sel.annotations || sel.nccl || sel.counters || sel.ops))
    throw Error("no table '" + name +
                "': the tables are activities, launches, annotations, nccl, counters, ops");
  if (sel.nccl) sel.activities = true;  // the reader checks nccl's rows against the activities
  std::shared_ptr<const Store> s;
  {
    py::gil_scoped_release release;
    if (!is_hdf5_file(path)) throw Error(path + ": not a kernalyse store (HDF5)");
    s = std::make_shared<const Store>(read_store(path, sel));
  }
  return py::make_tuple(store_table(s, name), string_list(*s));
}

// HTA's order of each rank's streams in its idle breakdown: per (rank, stream) of HTA's view, the
// position in its file of the first GPU kernel, copy or set kept by the view (HTA takes the
// streams in its trace's event order, among the work it kept). (rank, stream, position) each;
// a stream none of whose rows is found in its file has no entry.
py::list hta_stream_order(Run& r) {
  std::vector<std::tuple<int32_t, int32_t, int64_t>> out;
  {
    py::gil_scoped_release release;
    std::shared_ptr<const Store> v = r.view("hta");
    if (r.gpu_order) {
      std::map<int32_t, const std::vector<std::pair<int32_t, int64_t>>*> file_of;
      for (const RankInfo& ri : v->ranks) {
        auto it = r.gpu_order->rows.find(ri.source);
        if (it != r.gpu_order->rows.end()) file_of[ri.rank] = &it->second;
      }
      std::map<int32_t, std::map<std::pair<int32_t, int64_t>, int64_t>> first;  // by rank
      std::map<std::pair<int32_t, int32_t>, int64_t> best;
      const Activities& a = v->activities;
      for (size_t i = 0; i < a.size(); ++i) {
        const auto k = static_cast<Kind>(a.kind[i]);
        if (k != Kind::Kernel && k != Kind::Memcpy && k != Kind::Memset) continue;
        auto f = file_of.find(a.rank[i]);
        if (f == file_of.end()) continue;
        auto [m, fresh] = first.try_emplace(a.rank[i]);
        if (fresh)
          for (size_t j = 0; j < f->second->size(); ++j) m->second.try_emplace((*f->second)[j], j);
        auto pos = m->second.find({a.stream[i], a.correlation[i]});
        if (pos == m->second.end()) continue;
        auto [b, added] = best.try_emplace({a.rank[i], a.stream[i]}, pos->second);
        if (!added) b->second = std::min(b->second, pos->second);
      }
      for (const auto& [k, p] : best) out.emplace_back(k.first, k.second, p);
    }
  }
  py::list l;
  for (const auto& [rank, stream, pos] : out) l.append(py::make_tuple(rank, stream, pos));
  return l;
}

py::dict attrs(const Run& r) {
  const StoreAttrs& a = r.store->attrs;
  py::dict d;
  d["schema_version"] = a.schema_version, d["tool_version"] = a.tool_version;
  d["produced_by"] = a.produced_by, d["command_line"] = a.command_line;
  d["created_utc"] = a.created_utc, d["clock_domain"] = a.clock_domain;
  d["emulated"] = a.emulated;
  return d;
}

}  // namespace

void bind(py::module_& m) {
  static py::exception<Error> error(m, "Error", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const Error& e) {
      error(e.what());
    } catch (const py::error_already_set&) {
      throw;  // Python's own, and pybind11's: their translators
    } catch (const py::builtin_exception&) {
      throw;
    } catch (const std::bad_alloc&) {
      throw;                               // MemoryError
    } catch (const std::regex_error& e) {  // kernalyse-merge's line for a bad --comm-regex
      error((std::string("invalid --comm-regex: ") + e.what()).c_str());
    } catch (const std::exception& e) {  // as kernalyse-merge: one line, never a crash
      error(e.what());
    }
  });
  m.def("analyses", &registry, "The registry: (name, help, in_all, in_page, hta_view) each.");
  m.def("open_run", &open_run, py::arg("inputs"), py::arg("args"), py::arg("ops") = true);
  m.def("read_table", &read_table, py::arg("path"), py::arg("name"));
  py::class_<Result, std::shared_ptr<Result>>(m, "Result")
      .def("tables", &Result::tables)
      .def("notes", &Result::notes)
      .def("json", &Result::json);
  py::class_<Run, std::shared_ptr<Run>>(m, "Run")
      .def("analyse", &analyse, py::arg("name"), py::arg("args"))
      .def("table", &table, py::arg("name"), py::arg("view") = "store")
      .def("strings", &strings, py::arg("view") = "store")
      .def("ranks", [](const Run& r) { return rank_table(*r.store); })
      .def("attrs", &attrs)
      .def("hta_stream_order", &hta_stream_order)
      .def("html", &write_html, py::arg("path"), py::arg("args"))
      .def("export", &export_to, py::arg("kind"), py::arg("path"), py::arg("args"))
      .def("save", &save, py::arg("path"), py::arg("force") = false)
      .def_readonly("info", &Run::info)
      .def_readonly("warnings", &Run::warn)
      .def_readonly("args", &Run::args);
}

}  // namespace kernalyse::python

PYBIND11_MODULE(_kernalyse, m) {
  m.doc() = "kernalyse's native part (docs/python.md); use the kernalyse package";
  kernalyse::python::bind(m);
}
