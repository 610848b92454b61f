// libFuzzer target: the HDF5 store reader, through read_store on a file (what kernalyse-merge
// does with a store argument), every column selected, and through RankSlices (--diff reads a
// store a rank at a time: the rank runs, /nccl split by activity, hyperslab reads; then narrowed
// to pass 2's columns). HDF5 itself is
// not instrumented for coverage, so the fuzzer steers by what our reader does with what HDF5
// returns; ASan still sees HDF5's heap use. kernalyse::Error ("wrong schema", "cannot open", ...)
// is the expected answer to a corrupt store; anything else is a finding.
#include <cstddef>
#include <cstdint>

#include "fuzz_input.h"
#include "kernalyse/store_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = kernalyse::fuzz::write_input("store.h5", data, size);
  try {
    if (!kernalyse::is_hdf5_file(path)) return 0;  // kernalyse-merge would import it as a trace
    kernalyse::Store s = kernalyse::read_store(path, kernalyse::ColumnSelection::all());
  } catch (const kernalyse::Error&) {
  }
  try {
    kernalyse::RankSlices slices(path, kernalyse::ColumnSelection::all());
    size_t rows = 0;
    slices.for_each([&](const kernalyse::Store& s) { rows += s.activities.size(); });
    // The second pass's narrower read of the same slices (sliced.cpp's pass 2).
    kernalyse::ColumnSelection less = kernalyse::ColumnSelection::all();
    less.annotations = less.counters = less.ops = less.nccl = false;
    less.activity_step = less.launch_detail = false;
    slices.narrow(less);
    kernalyse::Store into;
    for (size_t k = 0; k < slices.size(); ++k) slices.read(k, into);
  } catch (const kernalyse::Error&) {
  }
  return 0;
}
