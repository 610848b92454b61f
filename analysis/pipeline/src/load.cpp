// Loading a run for the analyses (kernalyse/load.h).
#include "kernalyse/load.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <set>

#include "cross_rows.h"
#include "kernalyse/atomic_file.h"
#include "kernalyse/error.h"
#include "kernalyse/import.h"
#include "kernalyse/inputs.h"
#include "kernalyse/nsys.h"
#include "kernalyse/pipeline.h"
#include "kernalyse/store_archive.h"
#include "kernalyse/store_io.h"
#include "kernalyse/utc.h"

namespace fs = std::filesystem;

namespace kernalyse {

namespace {
void say(const std::function<void(const std::string&)>& to, const std::string& line) {
  if (to) to(line);
}
}  // namespace

bool infers_clocks(const Store& s, const LoadOptions& opt) {
  return !(opt.align == "off" || opt.recorded_clocks || (opt.align == "auto" && clocks_aligned(s)));
}

std::optional<ClockInference> align_clocks(Store& s, const LoadOptions& opt,
                                           std::shared_ptr<const CollectiveMatch>* match) {
  if (!infers_clocks(s, opt)) return std::nullopt;
  const ClockEvidence ev = clock_evidence(s, match);
  ClockInference inf = infer_clocks(ev);
  if (opt.align == "auto") keep_recorded_clocks_unless_evidence(&inf, ev);
  apply_clock_inference(s, inf);
  say(opt.info, describe(inf));
  return inf;
}

LoadedRun read_run(const std::string& file, const ColumnSelection& sel, bool may_align,
                   const LoadOptions& opt) {
  LoadedRun out;
  if (!may_align) {
    out.store = read_store(file, sel);
    return out;
  }
  ColumnSelection first = sel, rest = sel;
  first.launches = first.ops = first.counters = false;
  rest.activities = rest.annotations = rest.nccl = false;
  Store& st = out.store;
  st = read_store(file, first);
  const bool infer = infers_clocks(st, opt);
  ClockEvidence ev;  // before the future: a throwing read below waits for the task, which fills it
  std::future<ClockInference> inferring;
  if (infer)
    inferring = std::async(std::launch::async, [&] {
      ev = clock_evidence(st, &out.match);
      return infer_clocks(ev);
    });
  Store more;  // its own store: the inference reads `st` meanwhile
  if (rest.launches || rest.ops || rest.counters) more = read_store(file, rest);
  if (infer) out.inference = inferring.get();
  st.launches = std::move(more.launches);
  st.ops = std::move(more.ops);
  st.counters = std::move(more.counters);
  if (!infer) return out;
  if (opt.align == "auto") keep_recorded_clocks_unless_evidence(&*out.inference, ev);
  apply_clock_inference(st, *out.inference);
  say(opt.info, describe(*out.inference));
  return out;
}

namespace {

// The imported store's attributes: what made it, how its clocks relate.
void stamp(Store& store, TraceFormat format, const LoadOptions& opt) {
  store.attrs.tool_version = KERNALYSE_VERSION;
  store.attrs.produced_by = std::string("kernalyse-merge (") + to_string(format) + " import)";
  store.attrs.command_line = opt.command_line;
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
}

// The import's warnings and notes, then (after the alignment's line) its summary.
void say_stats(const ImportStats& stats, const LoadOptions& opt) {
  for (const auto& w : stats.warnings) say(opt.warn, "warning: " + w);
  for (const auto& n : stats.notes) say(opt.info, "info: " + n);
}
void say_imported(size_t files, size_t ranks, size_t activities, const ImportStats& stats,
                  bool from_nsys, double secs, const LoadOptions& opt) {
  char rate[160];
  std::snprintf(rate, sizeof rate, "%s in %.2f s (%.0f MB/s)",
                from_nsys ? " MB SQLite" : " MB JSON", secs,
                static_cast<double>(stats.bytes) / 1e6 / std::max(secs, 1e-9));
  say(opt.info, "imported " + std::to_string(files) + " file(s), " + std::to_string(ranks) +
                    " rank(s), " + std::to_string(activities) + " GPU activities, " +
                    std::to_string(stats.malformed) + " malformed events skipped, " +
                    std::to_string(static_cast<int64_t>(static_cast<double>(stats.bytes) / 1e6)) +
                    rate);
}

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

// `kernalyse-merge TRACE -o OUT` and nothing else, for one Kineto trace: imported straight into
// the store file in memory that does not grow with the trace (import_file_streamed, issue 28).
// The same lines and the same store as the in-memory import; returns only the store's header
// (and small tables) unless the trace had to be finished in memory.
LoadedRun import_streamed(const std::string& file, const LoadOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  StoreStream out(opt.output, WriteOptions{opt.force, opt.import.progress});
  std::string dir = fs::path(opt.output).parent_path().string();
  ImportStats stats;
  LoadedRun run;
  Store& store = run.store;
  store = import_file_streamed(file, opt.import, &stats, out, dir.empty() ? "." : dir);
  const double secs = seconds_since(t0);
  say_stats(stats, opt);
  stamp(store, TraceFormat::Kineto, opt);
  const size_t streamed = out.rows("activities") + out.rows("launches") + out.rows("ops");
  if (streamed && store.ranks.size() != 1)  // kineto.cpp streams single-rank files only
    throw Error(file + ": internal error: a streamed import of " +
                std::to_string(store.ranks.size()) + " ranks");
  // With its rows on disk, one rank: nothing to align, said as the in-memory import says it.
  Store ranks_only;
  ranks_only.ranks = store.ranks;
  ranks_only.attrs = store.attrs;
  run.inference = align_clocks(streamed ? ranks_only : store, opt, &run.match);
  if (streamed) store.ranks = std::move(ranks_only.ranks);
  say_imported(1, store.ranks.size(), out.rows("activities") + store.activities.size(), stats,
               false, secs, opt);
  out.commit(store);
  say(opt.info, "wrote " + opt.output);
  return run;
}

// What one process does after the import: the import's lines, the clocks aligned, the store
// written to -o (when given).
void finish_import(LoadedRun& out, size_t files, const ImportStats& stats, double secs,
                   TraceFormat format, const LoadOptions& opt) {
  Store& store = out.store;
  say_stats(stats, opt);
  stamp(store, format, opt);
  out.inference = align_clocks(store, opt, &out.match);
  say_imported(files, store.ranks.size(), store.activities.size(), stats,
               format == TraceFormat::Nsys, secs, opt);
  if (!opt.output.empty()) {
    write_store(store, opt.output, WriteOptions{opt.force, opt.import.progress});
    say(opt.info, "wrote " + opt.output);
  }
}

// Every process's cross-rank rows (cross_rows.h), merged on every process into one store: the
// whole run's /ranks rows and clock evidence. *activities: the run's activity rows.
Store all_cross_rows(const Store& part, const Spread& spread, uint64_t* activities) {
  detail::CrossRows c(part);
  c.add(part);
  Archive mine;
  mine.put(static_cast<uint64_t>(part.activities.size()));
  put_store(mine, c.store);
  c.store = Store();
  Archive all(spread.all_gather(mine.bytes()));
  mine = Archive();
  std::vector<Store> parts(static_cast<size_t>(spread.processes));
  *activities = 0;
  for (Store& p : parts) {
    *activities += all.get<uint64_t>();
    get_store(all, p);
  }
  return merge_stores(std::move(parts));
}

// `mpirun -n P kernalyse-merge TRACES -o OUT` and nothing else (issue 28): each process imports
// its share of the files, keeps a run of ranks (import_files_spread) and writes their rows of the
// store with the others (write_store_world: parallel HDF5); the clocks are aligned as one process
// aligns them, on every process from everyone's cross-rank rows. No process holds the whole
// store. The same lines (said by process 0) and the same store as one process's import.
LoadedRun import_spread(const std::vector<std::string>& files, const LoadOptions& opt) {
  const Spread& spread = *opt.import.spread;
  const auto t0 = std::chrono::steady_clock::now();
  ImportStats stats;
  bool whole = false;
  LoadedRun out;
  Store part = import_files_spread(files, opt.import, &stats, &whole);
  const TraceFormat format = trace_format(files[0]);
  if (whole) {  // ranks that repeat or interleave across files: process 0 holds the store
    if (spread.process != 0) return out;
    out.store = std::move(part);
    finish_import(out, files.size(), stats, seconds_since(t0), format, opt);
    return out;
  }
  const double secs = seconds_since(t0);
  say_stats(stats, opt);
  stamp(part, format, opt);
  uint64_t activities = 0;
  Store cross = all_cross_rows(part, spread, &activities);
  stamp(cross, format, opt);
  out.inference = align_clocks(cross, opt, nullptr);  // the same inference on every process
  if (out.inference) apply_clock_inference(part, *out.inference);
  part.attrs.clock_domain = cross.attrs.clock_domain;  // said of every rank, not this part's
  say_imported(files.size(), cross.ranks.size(), activities, stats, format == TraceFormat::Nsys,
               secs, opt);
  write_store_world(part, opt.output, WriteOptions{opt.force, opt.import.progress});
  out.written_by_all = true;
  say(opt.info, "wrote " + opt.output + " (" + std::to_string(spread.processes) +
                    " processes, each its ranks' rows: parallel HDF5)");
  return out;
}

// A store written part by part from `imp`'s parts in merge order: the same file as write_store of
// merge_stores of them all, with `header`'s strings (every part's, interned in merge order, as
// the merge interns them), /ranks and attributes, and its clocks moved by `inf`.
// `rows`: each table's rows in all, in for_each_table's order.
void write_parts(const SpilledImport& imp, const Store& header, const std::vector<size_t>& rows,
                 const ClockInference* inf, const LoadOptions& opt) {
  StoreStream out(opt.output, WriteOptions{opt.force, opt.import.progress});
  size_t t = 0;
  for_each_table(header, [&](const char* name, const auto&) {
    out.begin(name, t < rows.size() ? rows[t] : 0);
    ++t;
  });
  StringTable global = header.strings;  // every string is there: intern only looks up
  uint64_t activities = 0;              // the rows of the parts before
  // The next part read from the temporary file while this one is written.
  std::future<Store> next;
  if (imp.size()) next = std::async(std::launch::async, [&imp] { return imp.read(0); });
  for (size_t k = 0; k < imp.size(); ++k) {
    Store p = next.get();
    if (k + 1 < imp.size())
      next = std::async(std::launch::async, [&imp, k] { return imp.read(k + 1); });
    std::vector<uint32_t> id(p.strings.size());
    for (size_t i = 0; i < id.size(); ++i)
      id[i] = global.intern(p.strings.at(static_cast<uint32_t>(i)));
    for_each_table(p, [&](const char*, auto& tab) {
      for_each_column(tab, [&](const auto& def, auto& col) {
        using T = typename std::decay_t<decltype(col)>::value_type;
        if constexpr (std::is_same_v<T, uint32_t>) {
          if (def.role == ColumnRole::String)
            for (uint32_t& x : col) x = id[x];
        } else if constexpr (std::is_same_v<T, uint64_t>) {
          if (def.role == ColumnRole::Row)
            for (uint64_t& x : col) x += activities;
        }
      });
    });
    activities += p.activities.size();
    if (inf) apply_clock_inference(p, *inf);
    out.append(p);
  }
  Store head;
  head.attrs = header.attrs, head.strings = header.strings, head.ranks = header.ranks;
  out.commit(head);
}

// `kernalyse-merge TRACES -o OUT` and nothing else, one process, a large set (issue 28): each
// file's part goes to a temporary file once imported (SpilledImport), so that a few files' rows
// are in memory, not the run's; their cross-rank rows give the clocks, as they do under mpirun;
// the store is then written a part at a time. The same lines and the same store as the
// in-memory import (which ranks that repeat or interleave across files still take).
LoadedRun import_spilled(const std::vector<std::string>& files, const LoadOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  ImportStats stats;
  const std::string dir = fs::path(opt.output).parent_path().string();
  // Each part's cross-rank rows and table sizes, taken while it is in memory.
  std::vector<Store> cross_parts(files.size());
  std::vector<std::vector<size_t>> sizes(files.size());
  const SpilledImport imp(
      files, opt.import, &stats, dir.empty() ? "." : dir, [&](size_t i, const Store& p) {
        detail::CrossRows c(p);
        c.add(p);
        cross_parts[i] = std::move(c.store);
        for_each_table(p, [&](const char*, const auto& t) { sizes[i].push_back(t.size()); });
      });
  LoadedRun out;
  const TraceFormat format = trace_format(files[0]);
  if (!imp.in_rank_order()) {
    std::vector<Store> parts;
    for (size_t k = 0; k < imp.size(); ++k) parts.push_back(imp.read(k));
    out.store = merge_stores(std::move(parts));
    finish_import(out, files.size(), stats, seconds_since(t0), format, opt);
    return out;
  }
  const double secs = seconds_since(t0);
  say_stats(stats, opt);
  std::vector<size_t> rows;  // per table
  for (const auto& v : sizes)
    for (size_t t = 0; t < v.size(); ++t) {
      if (rows.size() <= t) rows.push_back(0);
      rows[t] += v[t];
    }
  // Every part's strings, in merge order (merge_stores orders the parts as it orders the files).
  Store cross = merge_stores(std::move(cross_parts));
  stamp(cross, format, opt);
  out.inference = align_clocks(cross, opt, nullptr);
  say_imported(files.size(), cross.ranks.size(), rows.empty() ? 0 : rows[0], stats, false, secs,
               opt);
  say(opt.info,
      "a large set: each file's rows were kept on disk between its import and the "
      "write (" +
          std::to_string((imp.disk_bytes() + (1 << 20) - 1) >> 20) +
          " MiB in a temporary file beside the output, removed)");
  write_parts(imp, cross, rows, out.inference ? &*out.inference : nullptr, opt);
  say(opt.info, "wrote " + opt.output);
  return out;
}

}  // namespace

LoadedRun import_run(const std::vector<std::string>& files, const LoadOptions& opt) {
  // Refuse early, before a long import: an existing output without --force, a directory, a
  // missing or unwritable directory.
  if (!opt.output.empty()) check_output_path(opt.output, opt.force);
  const bool one_process = !opt.import.spread || opt.import.spread->processes < 2;
  const bool output_only = opt.output_only && !opt.output.empty();
  if (output_only && files.size() == 1 && trace_format(files[0]) == TraceFormat::Kineto) {
    if (!one_process && opt.import.spread->process != 0) return LoadedRun();  // nothing to share
    return import_streamed(files[0], opt);
  }
  if (output_only && !one_process) return import_spread(files, opt);
  // A set of JSON traces too large for memory: a few files' rows in memory at a time. In memory
  // the import peaks at about a quarter of the JSON's bytes (the benchmark's 8 traces: 2.24 GB
  // for 9.4 GB); the budget is half the physical memory unless KERNALYSE_IMPORT_MEMORY_MB says.
  if (output_only && files.size() > 1 && trace_format(files[0]) != TraceFormat::Nsys) {
    uint64_t bytes = 0;
    for (const auto& f : files)
      bytes += static_cast<uint64_t>(std::max<int64_t>(input_bytes(f), 0));
    if (bytes / 4 > memory_budget(opt.import.memory_bytes)) return import_spilled(files, opt);
  }
  auto t0 = std::chrono::steady_clock::now();
  ImportStats stats;
  LoadedRun out;
  out.store = import_files(files, opt.import, &stats);
  if (opt.import.spread && opt.import.spread->process != 0) return out;  // process 0 goes on
  finish_import(out, files.size(), stats, seconds_since(t0), trace_format(files[0]), opt);
  return out;
}

uint64_t memory_budget(uint64_t asked) {
  if (asked) return asked;
  return static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
         static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 2;
}

ClockInference merge_node_stores(const std::vector<std::string>& files, const LoadOptions& opt) {
  if (opt.output.empty()) throw Error("several stores are merged into one: give -o FILE");
  check_output_path(opt.output, opt.force);
  std::vector<Store> parts;
  std::set<int32_t> taken;
  std::set<std::string> hosts;
  for (const auto& f : files) {
    Store s = read_store(f);
    bool overlap = false;
    for (const auto& r : s.ranks) overlap = overlap || taken.count(r.rank);
    if (overlap) {
      const int32_t shift = taken.empty() ? 0 : *taken.rbegin() + 1;
      shift_ranks(s, shift);  // every rank column (store.h's roles)
      say(opt.info, f + ": ranks " + std::to_string(s.ranks.front().rank - shift) + " to " +
                        std::to_string(s.ranks.back().rank - shift) +
                        " are taken by an earlier store: numbered " +
                        std::to_string(s.ranks.front().rank) + " to " +
                        std::to_string(s.ranks.back().rank));
    }
    for (const auto& r : s.ranks) taken.insert(r.rank), hosts.insert(r.host);
    parts.push_back(std::move(s));
  }
  Store store = merge_stores(std::move(parts));
  const auto world = static_cast<int32_t>(store.ranks.size());
  for (auto& r : store.ranks) r.world_size = std::max(r.world_size, world);
  store.attrs.tool_version = KERNALYSE_VERSION;
  store.attrs.produced_by =
      "kernalyse-merge (stores of " + std::to_string(files.size()) + " nodes)";
  store.attrs.command_line = opt.command_line;
  store.attrs.created_utc = utc_now();
  // Each store's clocks are aligned within its host only: across hosts, inferred.
  LoadOptions o = opt;
  if (o.align == "auto" && hosts.size() > 1) o.align = "inferred";
  std::optional<ClockInference> inference = align_clocks(store, o, nullptr);
  if (!inference && hosts.size() > 1)
    store.attrs.clock_domain += "; hosts not aligned to each other (--align off)";
  write_store(store, opt.output, WriteOptions{opt.force, opt.import.progress});
  say(opt.info, "wrote " + opt.output + ": " + std::to_string(store.ranks.size()) + " ranks on " +
                    std::to_string(hosts.size()) + " host(s) from " + std::to_string(files.size()) +
                    " stores");
  return inference.value_or(ClockInference{});
}

DiffInput DiffSource::input() {
  const Spread* s = spread && spread->processes > 1 ? spread : nullptr;
  if (slices && !s) return {&slices->header(), [this](const auto& f) { slices->for_each(f); }};
  if (slices) {  // this process's contiguous run of the slices (spread.h)
    return {&slices->header(),
            [this, s](const auto& f) {
              const size_t n = slices->size(), procs = static_cast<size_t>(s->processes),
                           p = static_cast<size_t>(s->process);
              for (size_t k = n * p / procs; k < n * (p + 1) / procs; ++k) f(slices->read(k));
            },
            s};
  }
  return {&whole,
          [this, s](const auto& f) {
            if (!s || s->process == 0) f(whole);
          },
          s};
}

DiffSource load_diff_source(const std::string& input, const LoadOptions& opt,
                            const Spread* spread) {
  DiffSource out;
  out.spread = spread;
  std::vector<std::string> files = expand_inputs({input});
  if (files.size() == 1 && is_hdf5_file(files[0])) {
    ColumnSelection sel;
    sel.counters = false;
    sel.ops_detail = sel.ops_shapes = false;  // the ATen-op groups need only each launch's op
    ColumnSelection probe;  // launch threads only when there are ranges to join them to
    probe.activities = probe.launches = probe.nccl = probe.counters = probe.ops = false;
    const Store a = read_store(files[0], probe);
    sel.launch_detail = store_has_ranges(a);
    // Inferring clocks needs every rank's collectives at once: then the store is read whole (a
    // single rank has no other clock to align to). So is a store whose rows are not grouped by
    // rank (RankSlices refuses it; read_store then reports whatever else may be wrong with it).
    if (opt.align == "off" || (opt.align == "auto" && (clocks_aligned(a) || a.ranks.size() < 2))) {
      try {
        out.slices = std::make_unique<RankSlices>(files[0], sel, spread);
        return out;
      } catch (const Error&) {
      }
    }
    out.whole = read_store(files[0], sel);
    align_clocks(out.whole, opt, nullptr);
    return out;
  }
  for (const auto& f : files)
    if (is_hdf5_file(f))
      throw Error(f + ": is a store; give either one store or trace files, not both");
  ImportStats stats;
  out.whole = import_files(files, opt.import, &stats);
  for (const auto& w : stats.warnings) say(opt.warn, "warning: " + w);
  for (const auto& r : out.whole.ranks)
    out.whole.attrs.emulated = out.whole.attrs.emulated || r.emulated;
  // The clocks as an analysis or -o of the same input would have them (--align), so that a store
  // and the traces it was merged from compare equal.
  align_clocks(out.whole, opt, nullptr);
  return out;
}

}  // namespace kernalyse
