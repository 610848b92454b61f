// kernalyse-merge's flags (merge_flags.h).
#include "merge_flags.h"

#include <cmath>

namespace kernalyse {

void add_flags(CLI::App& app, Options& o) {
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
  for (const Analysis* a : analyses()) app.add_flag("--" + a->name, o.selected[a->name], a->help);
  app.add_option("--power-log", o.power_logs,
                 "nvidia-smi CSV (--query-gpu=timestamp,index,power.draw) as RANK's power: "
                 "FILE[@RANK[:GPU]] (repeatable; timestamps in this process's TZ)");
  app.add_option("--tokens", o.ao.tokens, "--energy: also J per token over the selection")
      ->check(CLI::PositiveNumber);
  app.add_option("--units-per-step", o.ao.units_per_step,
                 "--energy: also J per unit (sample) per step")
      ->check(CLI::PositiveNumber);
  app.add_option("--what-if", o.what_if,
                 "predicted step time with changed durations (implies --critical-path; "
                 "repeatable): rank=R:median, kernel=REGEX:xF, comm=overlapped");
  app.add_option("--peaks", o.peaks,
                 "--roofline/--hints: device ceilings from FILE.json (kernalyse-scan's output) "
                 "instead of the built-in table");
  app.add_flag("--all", o.all, "every analysis");
  app.add_option("--diff", o.diff,
                 "compare two runs: --diff BASE TEST (each a store, trace file or directory)")
      ->expected(2);
  app.add_option("--compat", o.compat,
                 "reproduce another tool's numbers in its analyses (hta: overlap, breakdown, idle)")
      ->check(CLI::IsMember(kCompatWords.all()))
      ->capture_default_str();
  app.add_option("--kernel-wait-us", o.kernel_wait_us,
                 "idle gaps below this are kernel wait (idle breakdown)")
      ->capture_default_str();
  app.add_option("--hist-min", o.ao.hist_min_us, "gap histogram lower edge, µs")
      ->capture_default_str();
  app.add_option("--hist-max", o.ao.hist_max_us, "gap histogram upper edge, µs")
      ->capture_default_str();
  app.add_option("--bins", o.ao.bins, "gap histogram bins")->capture_default_str();
  app.add_option("--gap-sort", o.gap_sort, "sort transitions by")
      ->check(CLI::IsMember(kGapSortWords.all()))
      ->capture_default_str();
  app.add_option("--sort", o.sort, "sort the kernel summary by")
      ->check(CLI::IsMember(kSummarySortWords.all()))
      ->capture_default_str();
  app.add_option("--top", o.ao.top, "show only the top N rows");
  app.add_flag("--verbose", o.ao.verbose, "full kernel names instead of simplified ones");
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
                 "aligned, applied only on evidence (a happened-before violation, or a "
                 "correction beyond its ±); off: as recorded (always with --compat hta)")
      ->check(CLI::IsMember({"auto", "inferred", "off"}))
      ->capture_default_str();
  app.add_flag("-q,--quiet", o.quiet, "no progress or info lines on stderr");
  app.add_option("--progress", o.progress,
                 "progress on stderr: a redrawn bar (tty), plain log lines (lines), or none (off); "
                 "auto: tty on a terminal, lines otherwise")
      ->check(CLI::IsMember({"auto", "tty", "lines", "off"}))
      ->capture_default_str();
}

// The flags' words as the library's values, once parsed.
void resolve(Options& o) {
  for (const Analysis* a : analyses())
    o.selected[a->name] = o.selected[a->name] || (o.all && a->in_all);
  if (!o.what_if.empty()) o.selected["critical-path"] = true;
  o.ao.filter = Filter{o.rank, o.step};
  o.ao.compat = *kCompatWords.parse(o.compat);
  o.ao.kernel_wait_ns = std::llround(o.kernel_wait_us * 1000.0);
  o.ao.sort = *kSummarySortWords.parse(o.sort);  // checked by the flag
  o.ao.gap_sort = *kGapSortWords.parse(o.gap_sort);
  o.mode =
      o.quiet ? ProgressMode::Off : parse_progress_mode(o.progress).value_or(ProgressMode::Off);
}

}  // namespace kernalyse
