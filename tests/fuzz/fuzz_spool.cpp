// libFuzzer target: the spool reader and the spool → store conversion, through
// recover_spool_dir (what kernalyse-merge --spool DIR runs): the input is the directory's one
// spool file, rank-0.kspool. Its Meta block may claim another rank and any world size.
// kernalyse::Error (no complete block, ...) is the expected answer to bad input; anything else is
// a finding.
#include <cstddef>
#include <cstdint>

#include "fuzz_input.h"
#include "kernalyse/spool_store.h"
#include "kernalyse/store_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kernalyse::fuzz::write_input("rank-0.kspool", data, size);
  try {
    kernalyse::RecoveryReport rep;
    kernalyse::Store s = kernalyse::recover_spool_dir(kernalyse::fuzz::input_dir(), &rep);
    (void)rep.lines();  // the per-rank lines kernalyse-merge prints
  } catch (const kernalyse::Error&) {
  }
  return 0;
}
