// kernalyse-merge --spool (merge_spool.h).
#include "merge_spool.h"

#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "kernalyse/atomic_file.h"
#include "kernalyse/error.h"
#include "kernalyse/hang.h"
#include "kernalyse/spool_store.h"
#include "kernalyse/store_io.h"
#include "kernalyse/utc.h"

namespace fs = std::filesystem;

namespace kernalyse {

// --spool DIR: a store from whatever the ranks' spool files hold, offline, without MPI
// (docs/collector.md, "Crash recovery"); --hang: which rank the others wait for, per communicator.
int run_spool(const Options& o) {
  if (!o.inputs.empty()) throw Error("--spool takes the spool directory; give no other input");
  if (o.hang) {
    const HangReport h = hang_report_dir(o.spool);
    if (o.json) std::cout << hang_json(h).dump(1) << "\n";
    if (!o.json)
      for (const auto& line : h.lines()) std::cout << line << "\n";
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
  store.attrs.command_line = o.command_line;
  store.attrs.created_utc = utc_now();
  int recovered = 0;
  int64_t records = 0;
  bool complete = true;
  for (const auto& r : rep.ranks) {
    recovered += r.recovered, records += r.records;
    complete = complete && r.recovered && !r.truncated && r.has_end_sample;
  }
  if (o.from_run) {
    if (complete) store.attrs.produced_by = "kernalyse-run (process tree, one host)";
    write_store(store, output, WriteOptions{o.force, o.mode});
    if (complete && o.quiet) return 0;
    std::cerr << "kernalyse-run: wrote " << output << ": " << recovered << " ranks, " << records
              << " records" << (store.attrs.emulated ? " (EMULATED device)" : "")
              << "; clocks: one host's CLOCK_MONOTONIC_RAW, shared by every rank (exact)\n";
    const std::vector<std::string> lines = rep.lines();  // one per rank, in rep.ranks' order
    for (size_t i = 0; i < lines.size() && i < rep.ranks.size(); ++i)
      std::cerr << "kernalyse-run: " << lines[i]
                << (rep.ranks[i].rank_origin.empty() ? ""
                                                     : "; rank from " + rep.ranks[i].rank_origin)
                << "\n";
    for (size_t i = rep.ranks.size(); i < lines.size(); ++i)  // launchers left out
      std::cerr << "kernalyse-run: " << lines[i] << "\n";
    return 0;
  }
  if (o.json) {
    std::cout << recovery_json(rep).dump(1) << "\n";
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

}  // namespace kernalyse
