// libFuzzer target: the Kineto / PyTorch-profiler JSON importer, through import_kineto_file (the
// call kernalyse-merge makes per trace), so plain and gzip input both go through the stream
// reader. The file is named rank-0.json, as a trace without distributedInfo needs a rank.
// kernalyse::Error is the importer's answer to bad input (one line, exit 2 in the CLI); anything
// else escaping it — another exception, a signal, a sanitizer report — is a finding.
#include <cstddef>
#include <cstdint>

#include "fuzz_input.h"
#include "kernalyse/kineto.h"
#include "kernalyse/store_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kernalyse::fuzz::write_input("rank-0.json", data, size);
  try {
    kernalyse::ImportStats stats;
    kernalyse::Store s = kernalyse::import_kineto_file(path, kernalyse::ImportOptions{}, &stats);
    // Every stored interval must be one: the importer counts a bad event as malformed, it never
    // stores end < start (issue 19, F1).
    for (size_t i = 0; i < s.activities.start_ns.size(); ++i)
      if (s.activities.end_ns[i] < s.activities.start_ns[i]) __builtin_trap();
  } catch (const kernalyse::Error&) {
  }
  return 0;
}
