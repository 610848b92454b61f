// libFuzzer target: the Nsight Systems SQLite importer, through import_nsys_file (the call
// kernalyse-merge makes per .sqlite input). SQLite itself checks the file's structure; what this
// target exercises is our side: row counts, string ids, cell types and times taken from a file
// we did not write. The file is named rank-0.sqlite so a rank is always found.
// kernalyse::Error is the importer's answer to bad input; anything else is a finding.
#include <cstddef>
#include <cstdint>

#include "fuzz_input.h"
#include "kernalyse/nsys.h"
#include "kernalyse/store_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kernalyse::fuzz::write_input("rank-0.sqlite", data, size);
  try {
    kernalyse::ImportOptions opt;
    opt.only_input = true;
    kernalyse::ImportStats stats;
    kernalyse::Store s = kernalyse::import_nsys_file(path, opt, &stats);
    // Intervals are intervals: a bad row is counted as malformed, never stored backwards.
    for (size_t i = 0; i < s.activities.start_ns.size(); ++i)
      if (s.activities.end_ns[i] < s.activities.start_ns[i]) __builtin_trap();
  } catch (const kernalyse::Error&) {
  }
  return 0;
}
