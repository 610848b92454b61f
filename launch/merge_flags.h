// kernalyse-merge's flags: the options they set, their definitions (the analyses' flags come
// from the registry, pipeline.h) and their words turned into the library's values.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kernalyse/pipeline.h"
#include "kernalyse/progress.h"

namespace kernalyse {

struct Options {  // kernalyse-merge's flags, as parsed
  std::vector<std::string> inputs;
  std::string output;
  bool force = false;
  std::string spool;      // --spool DIR: crash recovery from the ranks' spool files
  bool hang = false;      // --hang (with --spool): per-communicator collective progress
  bool from_run = false;  // --from-run (with --spool): kernalyse-run's end-of-run merge
  std::optional<int32_t> rank, step;
  std::map<std::string, bool> selected;  // --NAME of every registered analysis
  bool all = false;
  std::vector<std::string> power_logs;  // --power-log FILE[@RANK[:GPU]]
  AnalysisOptions ao;                   // the analyses' options
  std::string compat = "native", sort = "total", gap_sort = "total", peaks;
  double kernel_wait_us = 30;
  std::vector<std::string> what_if;
  bool json = false, quiet = false;
  std::string progress = "auto";  // --progress; resolved once into `mode` (Off with --quiet)
  ProgressMode mode = ProgressMode::Off;
  std::string csv_dir;
  std::vector<std::string> comm_regex;
  std::string perfetto, export_kineto, html, from, to;  // exports (docs/exports.md, report.md)
  std::string step_range;                               // --step-range REGEX (nsys import)
  std::vector<std::string> diff;                        // --diff BASE TEST
  std::string align = "auto";                           // --align (docs/clocks.md)
  std::string command_line;
};

// Defines every flag on `app`, writing into `o`.
void add_flags(CLI::App& app, Options& o);
// After parsing: --all and --what-if select their analyses; the words become the library's
// values (filter, compat, sorts, kernel wait in ns, progress mode).
void resolve(Options& o);

}  // namespace kernalyse
