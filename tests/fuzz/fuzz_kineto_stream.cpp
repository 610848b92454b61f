// libFuzzer target: the streamed Kineto import (import_file_streamed, what `kernalyse-merge TRACE
// -o OUT` runs: rows through temporary files, external sorts and joins) against the in-memory
// import of the same input (import_files), in runs of 1 row: past 64 rows the input streams, and
// every table writes and merges many runs. Both stores are written and read back; any difference
// between them, or an error from one path and not the same error from the other, is a finding.
// As in kernalyse-merge (import_run), only what the format sniffing calls Kineto is streamed.
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "fuzz_input.h"
#include "kernalyse/import.h"
#include "kernalyse/inputs.h"
#include "kernalyse/store_io.h"

namespace {

using namespace kernalyse;

bool same(const Store& a, const Store& b) {
  bool eq = a.strings.all() == b.strings.all() && a.ranks.size() == b.ranks.size();
  for_each_table_pair(a, b, [&](const char*, const auto& x, const auto& y) {
    for_each_column_pair(x, y,
                         [&](const auto&, const auto& c, const auto& d) { eq = eq && c == d; });
  });
  for (size_t i = 0; eq && i < a.ranks.size(); ++i)
    for_each_rank_field(
        [&](const auto&, auto field) { eq = eq && a.ranks[i].*field == b.ranks[i].*field; });
  return eq;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = fuzz::write_input("rank-0.json", data, size);
  if (trace_format(path) != TraceFormat::Kineto) return 0;
  const std::string mem_out = fuzz::input_dir() + "/mem.h5",
                    str_out = fuzz::input_dir() + "/str.h5";
  ImportFilesOptions opt;
  opt.chunk_rows = 1;
  std::string mem_err, str_err;
  Store mem, str;
  try {
    ImportStats stats;
    write_store(import_files({path}, opt, &stats), mem_out, WriteOptions{true});
    mem = read_store(mem_out);
  } catch (const Error& e) {
    mem_err = e.what();
  }
  try {
    ImportStats stats;
    StoreStream out(str_out, WriteOptions{true});
    out.commit(import_file_streamed(path, opt, &stats, out, fuzz::input_dir()));
    str = read_store(str_out);
  } catch (const Error& e) {
    str_err = e.what();
  }
  if (mem_err != str_err) __builtin_trap();
  if (mem_err.empty() && !same(mem, str)) __builtin_trap();
  return 0;
}
