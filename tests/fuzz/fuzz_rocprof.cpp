// libFuzzer target: the rocprofv3 JSON importer, through import_trace_file (the call
// kernalyse-merge makes per trace: the format sniff, then import_rocprof_file), plain and gzip
// input alike. The file is named rank-0.json, as rocprofv3 records no rank.
// kernalyse::Error is the importer's answer to bad input (one line, exit 2 in the CLI); anything
// else escaping it — another exception, a signal, a sanitizer report — is a finding.
#include <cstddef>
#include <cstdint>

#include "fuzz_input.h"
#include "kernalyse/import.h"
#include "kernalyse/store_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kernalyse::fuzz::write_input("rank-0.json", data, size);
  try {
    kernalyse::ImportStats stats;
    kernalyse::Store s = kernalyse::import_trace_file(path, kernalyse::ImportOptions{}, &stats);
    // Every stored interval is one, every row has its rank, and every /nccl row names an activity.
    for (size_t i = 0; i < s.activities.start_ns.size(); ++i)
      if (s.activities.end_ns[i] < s.activities.start_ns[i] || s.activities.rank[i] != 0)
        __builtin_trap();
    for (uint64_t row : s.nccl.activity)
      if (row >= s.activities.size()) __builtin_trap();
  } catch (const kernalyse::Error&) {
  }
  return 0;
}
