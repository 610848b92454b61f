// libFuzzer target: the spool reader and the spool → store conversion, through
// recover_spool_dir (what kernalyse-merge --spool DIR runs): the input is the directory's one
// spool file, rank-0.kspool. Its Meta block may claim another rank and any world size.
// kernalyse::Error (no complete block, ...) is the expected answer to bad input; anything else is
// a finding.
// Every block carries a CRC32 of its payload, and a mutated payload almost never matches it: the
// reader would stop at the first mutated block and nothing behind it (Meta block values, record
// conversion) would be fuzzed. So the target recomputes the CRC of each block whose header and
// payload are complete before writing the file; the mismatch path itself is unit-tested
// (tests/unit/test_spool.cpp).
// An input of odd length gets a companion: rank-1.kspool, a well-formed process-tree spool whose
// rank came from RANK=1, so that the fuzzed spool's Meta block (its rank origin, its rank, its
// records) also meets the tree's rank settling (settle_tree_ranks: a launcher left out, a RANK
// taken back).
#include <unistd.h>
#include <zlib.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fuzz_input.h"
#include "kernalyse/spool.h"
#include "kernalyse/spool_store.h"
#include "kernalyse/store_io.h"

namespace {

// Walks the blocks as spool::read does and writes the right CRC into each complete one.
std::vector<uint8_t> with_valid_crcs(const uint8_t* data, size_t size) {
  using kernalyse::spool::BlockHeader;
  std::vector<uint8_t> out(data, data + size);
  size_t off = 0;
  while (size - off >= sizeof(BlockHeader)) {
    BlockHeader h;
    std::memcpy(&h, out.data() + off, sizeof h);
    if (h.magic != kernalyse::spool::kMagic || size - off - sizeof h < h.payload_bytes) break;
    h.crc = static_cast<uint32_t>(crc32(0L, out.data() + off + sizeof h, h.payload_bytes));
    std::memcpy(out.data() + off, &h, sizeof h);
    off += sizeof h + h.payload_bytes;
  }
  return out;
}

// rank-1.kspool: a tree rank with RANK=1 and nothing recorded, or no file at all.
void companion(bool present) {
  const std::string path = kernalyse::fuzz::input_dir() + "/rank-1.kspool";
  ::unlink(path.c_str());
  if (!present) return;
  kernalyse::spool::Writer w;
  if (!w.open(path)) return;
  kernalyse::spool::Meta m;
  m.fixed.rank = 1;
  m.fixed.pid = 2;
  m.fixed.has_start = 1;
  m.fixed.shared_clock = 1;
  m.command = "python3 worker.py";
  m.rank_origin = "RANK=1";
  w.write_meta(m);
  w.close();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<uint8_t> input = with_valid_crcs(data, size);
  kernalyse::fuzz::write_input("rank-0.kspool", input.data(), input.size());
  companion(size % 2 == 1);
  try {
    kernalyse::RecoveryReport rep;
    kernalyse::Store s = kernalyse::recover_spool_dir(kernalyse::fuzz::input_dir(), &rep);
    (void)rep.lines();  // the per-rank lines kernalyse-merge prints
  } catch (const kernalyse::Error&) {
  }
  return 0;
}
