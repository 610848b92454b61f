// Reading variable-length strings without libhdf5's vlen conversion (h5raw.h). Layouts follow
// the HDF5 file format specification 2.0/3.0: "Global Heap" (III.E), "Data Object Headers"
// (IV.A.1: version 1 and 2 prefixes, continuation blocks), the Attribute, Datatype, Dataspace
// and Fill Value messages (IV.A.2). Addresses are relative to the base address, which libhdf5
// sets to the superblock's position: 0 for every file is_hdf5_file accepts.
#include "h5raw.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <set>

#include "h5util.h"
#include "kernalyse/checked.h"

namespace kernalyse::detail {
namespace {

uint64_t le(const uint8_t* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = v << 8 | p[i];
  return v;
}

uint64_t align8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

constexpr unsigned kMsgDataspace = 0x1, kMsgLinkInfo = 0x2, kMsgDatatype = 0x3, kMsgFillOld = 0x4,
                   kMsgFill = 0x5, kMsgLink = 0x6, kMsgExternal = 0x7, kMsgLayout = 0x8,
                   kMsgPipeline = 0xB, kMsgAttribute = 0xC, kMsgContinuation = 0x10,
                   kMsgSymbolTable = 0x11, kMsgRefCount = 0x16;
constexpr unsigned kMsgShared = 0x02;  // message flag: the message lives elsewhere (SOHM)

}  // namespace

RawStrings::RawStrings(const std::string& path) {
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) throw Failure(std::string("cannot open: ") + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    ::close(fd_);
    throw Failure(std::string("cannot read: ") + std::strerror(errno));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  try {
    check_superblock();
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

// The superblock at offset 0 (is_hdf5_file): versions 0 and 1 (sizes at 13 and 14, the K values,
// then base, free-space, end-of-file and driver information addresses and the root group's
// symbol table entry) and 2 and 3 (sizes at 9 and 10, then base, extension, end-of-file and root
// object header addresses). H5Fopen reads the driver information block (16 bytes and as many
// more as its size field says: it allocated them first, 4 GB for a corrupt one), the extension's
// object header and the root group's header, whose continuation lengths it allocated unchecked
// (a 4 GB malloc for a corrupt root header, found by the fuzzer). All of it is checked here
// first; nothing here refuses what libhdf5 would read correctly.
void RawStrings::check_superblock() {
  const std::string what = "superblock";
  std::vector<uint8_t> sb = bytes(0, std::min<uint64_t>(size_, 256), what);
  if (sb.size() < 16) throw Failure("corrupt superblock: the file is too short");
  const unsigned version = sb[8];
  if (version > 3) throw Failure("unsupported HDF5 superblock version " + std::to_string(version));
  sizeof_addr_ = version <= 1 ? sb[13] : sb[9];
  sizeof_size_ = version <= 1 ? sb[14] : sb[10];
  for (size_t n : {sizeof_addr_, sizeof_size_})
    if (n != 2 && n != 4 && n != 8)
      throw Failure("unsupported HDF5 file: " + std::to_string(sizeof_addr_) + "-byte addresses, " +
                    std::to_string(sizeof_size_) + "-byte lengths");
  const uint64_t at = version == 0 ? 24 : version == 1 ? 28 : 12;  // the base address
  // Version 0/1: 4 addresses, then the root entry (name offset, header address, cache type, ...).
  const uint64_t need = at + (version <= 1 ? 6 * sizeof_addr_ + 24 : 4 * sizeof_addr_ + 4);
  if (sb.size() < need) throw Failure("corrupt superblock: the file is too short");
  const uint8_t* a = sb.data() + at;
  uint64_t root = 0;
  if (version <= 1) {
    const uint8_t* driver = a + 3 * sizeof_addr_;
    check_address(driver, true, "corrupt superblock: driver information block");
    if (const uint64_t d = address(driver); d < size_) {  // defined: version, 3 reserved, size
      std::vector<uint8_t> h = bytes(d, 16, what);
      uint64_t end = 0;
      if (!checked_add(d + 16, le(h.data() + 4, 4), &end) || end > size_)
        throw Failure("corrupt superblock: the driver information block at " + std::to_string(d) +
                      " claims " + std::to_string(le(h.data() + 4, 4)) +
                      " bytes, past the end of the file");
    }
    root = address(a + 5 * sizeof_addr_);
  } else {
    check_address(a + sizeof_addr_, true, "corrupt superblock: superblock extension");
    if (const uint64_t ext = address(a + sizeof_addr_); ext < size_)
      check_header(ext, "superblock extension");
    root = address(a + 3 * sizeof_addr_);
  }
  if (root >= size_)
    throw Failure("corrupt superblock: root group address " + std::to_string(root) +
                  " is outside the file");
  check_header(root, "root group");
}

RawStrings::~RawStrings() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<uint8_t> RawStrings::bytes(uint64_t addr, uint64_t len, const std::string& what) {
  uint64_t end = 0;
  if (!checked_add(addr, len, &end) || end > size_)
    throw Failure("corrupt " + what + ": " + std::to_string(len) + " bytes at offset " +
                  std::to_string(addr) + " are past the end of the file (" + std::to_string(size_) +
                  " bytes)");
  std::vector<uint8_t> out(len);
  size_t got = 0;
  while (got < len) {
    ssize_t n = ::pread(fd_, out.data() + got, len - got, static_cast<off_t>(addr + got));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Failure("cannot read " + what + ": " + std::strerror(n ? errno : EIO));
    got += static_cast<size_t>(n);
  }
  return out;
}

uint64_t RawStrings::address(const uint8_t* p) const { return le(p, sizeof_addr_); }
uint64_t RawStrings::length(const uint8_t* p) const { return le(p, sizeof_size_); }

// One global heap collection, read whole and checked: signature, version, size within the file,
// objects tiling it exactly (each object header plus its data padded to 8 bytes; index 0, the
// free space, last), no index twice. Collections may not overlap, so all of them together are
// at most the file: that bounds memory and time whatever the heap IDs say.
const RawStrings::Collection& RawStrings::collection(uint64_t addr, const std::string& what) {
  if (auto it = heap_.find(addr); it != heap_.end()) return it->second;
  const std::string where = "global heap collection at " + std::to_string(addr);
  const uint64_t hdr = 8 + sizeof_size_;      // "GCOL", version, 3 reserved, collection size
  const uint64_t obj_hdr = 8 + sizeof_size_;  // index (2), references (2), reserved (4), size
  std::vector<uint8_t> h = bytes(addr, hdr, what);
  if (std::memcmp(h.data(), "GCOL", 4) != 0)
    throw Failure("corrupt " + what + ": no " + where + " (bad signature)");
  if (h[4] != 1)
    throw Failure("corrupt " + what + ": " + where + " has version " + std::to_string(h[4]));
  const uint64_t size = length(h.data() + 8);
  uint64_t end = 0;
  if (size < hdr || !checked_add(addr, size, &end) || end > size_)
    throw Failure("corrupt " + what + ": " + where + " claims " + std::to_string(size) +
                  " bytes, past the end of the file");
  auto next = heap_.lower_bound(addr);
  if ((next != heap_.end() && next->first < end) ||
      (next != heap_.begin() && std::prev(next)->second.end > addr))
    throw Failure("corrupt " + what + ": " + where + " overlaps another collection");
  Collection c;
  c.end = end;
  c.data = bytes(addr, size, what);
  const uint8_t* d = c.data.data();
  bool free_seen = false;
  for (uint64_t p = hdr; p < size;) {
    if (size - p < obj_hdr) break;  // a tail too small for an object header: free space
    const uint32_t index = static_cast<uint32_t>(le(d + p, 2));
    const uint64_t osize = length(d + p + 8);
    if (index == 0) {  // free space: its size covers its own header and the rest
      if (free_seen || osize != size - p)
        throw Failure("corrupt " + what + ": " + where + ": free space of " +
                      std::to_string(osize) + " bytes at offset " + std::to_string(p) +
                      " does not end the collection");
      free_seen = true;
      p = size;
      continue;
    }
    if (osize > size - p - obj_hdr || align8(osize) > size - p - obj_hdr)
      throw Failure("corrupt " + what + ": " + where + ": object " + std::to_string(index) +
                    " of " + std::to_string(osize) + " bytes runs past the collection (" +
                    std::to_string(size) + " bytes)");
    c.objects.push_back({index, p + obj_hdr, osize});
    p += obj_hdr + align8(osize);
  }
  std::sort(c.objects.begin(), c.objects.end(),
            [](const Object& a, const Object& b) { return a.index < b.index; });
  for (size_t i = 1; i < c.objects.size(); ++i)
    if (c.objects[i].index == c.objects[i - 1].index)
      throw Failure("corrupt " + what + ": " + where + " holds object " +
                    std::to_string(c.objects[i].index) + " twice");
  return heap_.emplace(addr, std::move(c)).first->second;
}

// A heap ID as a variable-length string stores it: sequence length (4 bytes, here bytes),
// collection address, object index (4 bytes). Address 0 is the null string.
std::string RawStrings::heap_string(const uint8_t* id, const std::string& what) {
  const uint64_t len = le(id, 4);
  const uint64_t addr = address(id + 4);
  const uint32_t index = static_cast<uint32_t>(le(id + 4 + sizeof_addr_, 4));
  if (addr == 0) return {};
  const Collection& c = collection(addr, what);
  auto it = std::lower_bound(c.objects.begin(), c.objects.end(), index,
                             [](const Object& o, uint32_t i) { return o.index < i; });
  if (it == c.objects.end() || it->index != index)
    throw Failure("corrupt " + what + ": global heap collection at " + std::to_string(addr) +
                  " has no object " + std::to_string(index));
  if (it->size != len)
    throw Failure("corrupt " + what + ": a string of " + std::to_string(len) +
                  " bytes is global heap object " + std::to_string(index) + " of " +
                  std::to_string(it->size) + " bytes");
  const char* s = reinterpret_cast<const char*>(c.data.data() + it->begin);
  return std::string(s, strnlen(s, len));  // as a C string (libhdf5's reading stopped at a NUL)
}

std::vector<std::string> RawStrings::dataset(hid_t ds, const std::string& what, size_t rows) {
  if (!rows) return {};
  // H5Dget_create_plist converts a fill value to memory form: through the global heap for
  // strings. Refuse one before asking for the property list.
  require_no_fill_value(ds, what);
  Handle dcpl(h5(H5Dget_create_plist(ds), "cannot read " + what), H5Pclose);
  if (H5Pget_nfilters(dcpl) != 0)
    throw Failure(what + ": filters (compression) on a string dataset are not supported");
  const uint64_t elem = 4 + sizeof_addr_ + 4;  // one heap ID
  uint64_t need = 0;
  if (!checked_mul(uint64_t{rows}, elem, &need) || need > H5Dget_storage_size(ds))
    throw Failure("corrupt " + what + ": " + std::to_string(rows) + " rows of " +
                  std::to_string(elem) + " bytes but " + std::to_string(H5Dget_storage_size(ds)) +
                  " bytes stored");
  std::vector<std::string> out(rows);  // only now: `rows` is bounded by the file's size
  auto decode = [&](const std::vector<uint8_t>& raw, size_t first, size_t n) {
    for (size_t i = 0; i < n; ++i) out[first + i] = heap_string(raw.data() + i * elem, what);
  };
  switch (H5Pget_layout(dcpl)) {
    case H5D_CONTIGUOUS: {
      const haddr_t addr = H5Dget_offset(ds);
      if (addr == HADDR_UNDEF) throw Failure("corrupt " + what + ": no storage");
      decode(bytes(addr, need, what), 0, rows);
      break;
    }
    case H5D_CHUNKED: {
      hsize_t chunk[1] = {0};
      if (H5Pget_chunk(dcpl, 1, chunk) != 1 || chunk[0] == 0)
        throw Failure("corrupt " + what + ": bad chunk shape");
      uint64_t chunk_bytes = 0;
      if (!checked_mul(uint64_t{chunk[0]}, elem, &chunk_bytes) || chunk_bytes > size_)
        throw Failure("corrupt " + what + ": chunks of " + std::to_string(chunk[0]) +
                      " rows are larger than the file");
      // At most rows / chunk lookups, and rows * elem fits in the stored bytes (above).
      for (size_t first = 0; first < rows; first += std::min<uint64_t>(chunk[0], rows - first)) {
        hsize_t offset[1] = {first};
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        hsize_t size = 0;
        ok(H5Dget_chunk_info_by_coord(ds, offset, &mask, &addr, &size), "cannot read " + what);
        const size_t n = std::min<uint64_t>(chunk[0], rows - first);
        if (addr == HADDR_UNDEF) continue;  // never written: null strings (no fill value)
        if (size != chunk_bytes)
          throw Failure("corrupt " + what + ": the chunk at row " + std::to_string(first) +
                        " holds " + std::to_string(size) + " bytes, not " +
                        std::to_string(chunk_bytes));
        decode(bytes(addr, chunk_bytes, what), first, n);
      }
      break;
    }
    default:
      throw Failure(what + ": only contiguous and chunked string datasets are supported");
  }
  return out;
}

// The messages of an object header: version 1 (16-byte prefix, 8-byte message headers, data
// padded to 8) or version 2 ("OHDR", 4- or 6-byte message headers, checksummed chunks), following
// continuation messages ("OCHK" blocks in version 2). Each chunk is read once; all chunks together
// are at most the file.
std::vector<RawStrings::Message> RawStrings::messages(hid_t obj,
                                                      std::vector<std::vector<uint8_t>>& chunks,
                                                      const std::string& what) {
  H5O_info_t info{};
  ok(H5Oget_info2(obj, &info, H5O_INFO_BASIC), "cannot read " + what);
  return messages_at(info.addr, chunks, what);
}

std::vector<RawStrings::Message> RawStrings::messages_at(uint64_t addr,
                                                         std::vector<std::vector<uint8_t>>& chunks,
                                                         const std::string& what) {
  const std::string where = "the object header at " + std::to_string(addr);
  std::vector<uint8_t> prefix = bytes(addr, 16, what);
  const bool v2 = std::memcmp(prefix.data(), "OHDR", 4) == 0;
  unsigned hflags = 0;
  uint64_t begin = 0, len = 0;
  if (v2) {
    if (prefix[4] != 2) throw Failure("corrupt " + what + ": " + where + " has a bad version");
    hflags = prefix[5];
    uint64_t p = 6 + (hflags & 0x20 ? 16 : 0) + (hflags & 0x10 ? 4 : 0);
    const size_t width = size_t{1} << (hflags & 3);
    std::vector<uint8_t> field = bytes(addr + p, width, what);
    len = le(field.data(), width);
    begin = addr + p + width;
  } else {
    if (prefix[0] != 1) throw Failure("corrupt " + what + ": " + where + " has a bad version");
    len = le(prefix.data() + 8, 4);
    begin = addr + 16;
  }
  const size_t mh = v2 ? 4 + (hflags & 0x04 ? 2 : 0) : 8;  // message header size
  std::vector<Message> out;
  std::set<uint64_t> seen;
  uint64_t total = 0;
  std::vector<std::pair<uint64_t, uint64_t>> todo{{begin, len}};
  while (!todo.empty()) {
    auto [at, n] = todo.back();
    todo.pop_back();
    if (!seen.insert(at).second)
      throw Failure("corrupt " + what + ": " + where + " continues into itself");
    if (!checked_add(total, n, &total) || total > size_)
      throw Failure("corrupt " + what + ": " + where + " is larger than the file");
    chunks.push_back(bytes(at, n, what));
    const std::vector<uint8_t>& c = chunks.back();
    uint64_t p = 0, end = c.size();
    if (v2 && chunks.size() > 1) {  // "OCHK", messages, checksum
      if (end < 8 || std::memcmp(c.data(), "OCHK", 4) != 0)
        throw Failure("corrupt " + what + ": bad continuation block at " + std::to_string(at));
      p = 4, end -= 4;
    }
    while (end - p >= mh) {
      const unsigned type = v2 ? c[p] : static_cast<unsigned>(le(&c[p], 2));
      const uint64_t size = le(&c[p + (v2 ? 1 : 2)], 2);
      const unsigned flags = c[p + (v2 ? 3 : 4)];
      p += mh;
      if (size > end - p)
        throw Failure("corrupt " + what + ": a message of " + where + " runs past its chunk");
      out.push_back({type, flags, c.data() + p, static_cast<size_t>(size)});
      if (type == kMsgContinuation) {
        // libhdf5 decoded the address and length whatever the message's size, and allocated
        // the length before reading (4 GB for a corrupt root header, found by the fuzzer).
        if (size < sizeof_addr_ + sizeof_size_ || length(c.data() + p + sizeof_addr_) == 0)
          throw Failure("corrupt " + what + ": bad continuation message in " + where);
        todo.emplace_back(address(c.data() + p), length(c.data() + p + sizeof_addr_));
      }
      p += size;
    }
  }
  return out;
}

void RawStrings::require_no_fill_value(hid_t ds, const std::string& what) {
  std::vector<std::vector<uint8_t>> chunks;
  for (const Message& m : messages(ds, chunks, what)) {
    if (m.type != kMsgFill && m.type != kMsgFillOld) continue;
    if (m.flags & kMsgShared)
      throw Failure(what + ": a shared fill value message is not supported on a string dataset");
    const uint8_t* d = m.data;
    // Where the 4-byte size of the fill value is, when the message defines one (as libhdf5
    // decodes it: the old message always, versions 1 and 2 when "defined", 3 with flag bit 5).
    uint64_t at = 0;
    if (m.type == kMsgFillOld)
      at = 0;
    else if (m.size >= 4 && (d[0] == 1 || d[0] == 2)) {
      if (!d[3]) continue;
      at = 4;
    } else if (m.size >= 2 && d[0] == 3) {
      if (!(d[1] & 0x20)) continue;
      at = 2;
    } else
      throw Failure("corrupt " + what + ": bad fill value message");
    if (m.size < at + 4 ||
        (m.type == kMsgFillOld ? le(d + at, 4) != 0 : static_cast<int32_t>(le(d + at, 4)) > 0))
      throw Failure(what + ": a fill value is not supported on a string dataset");
  }
}

// A datatype as libhdf5 1.10's decoder (H5O_dtype_decode_helper) walks it, inside [p, end):
// version 1 to 3, class, 24 class bits, size, then per class: integer and bitfield 4 bytes, float
// 12, time 2, opaque a tag of (bits & 0xff) bytes; compound: (bits & 0xffff) members, each a
// NUL-terminated name (padded to 8 before version 3), an offset (4 bytes; version 3: as few as
// the size needs), in version 1 an array rank (at most 4) and 27 more bytes, then its type; enum:
// the base type, (bits & 0xffff) names as above, then as many values of the base type's size;
// variable-length: the base type; array: rank (at most 32), 3 reserved bytes before version 3,
// the dimensions (4 bytes each), permutations before version 3, then the base type. The decoder
// strdup()ed names wherever they ended (an enum of 257 members read past the object header's
// buffer: found by the fuzzer) and wrote array ranks above 32 past its fixed arrays. Returns the
// size field; `p` ends after the type.
uint64_t RawStrings::check_datatype(const uint8_t*& p, const uint8_t* end, unsigned depth,
                                    const std::string& bad) const {
  auto need = [&](uint64_t n) {
    if (static_cast<uint64_t>(end - p) < n) throw Failure(bad + "datatype runs past its message");
  };
  // A name: NUL-terminated inside the message, then padded to 8 before version 3.
  auto name = [&](unsigned version) {
    const uint8_t* nul = static_cast<const uint8_t*>(std::memchr(p, 0, end - p));
    if (!nul) throw Failure(bad + "datatype has an unterminated member name");
    const uint64_t len = nul - p;
    need(version >= 3 ? len + 1 : (len + 8) / 8 * 8);
    p += version >= 3 ? len + 1 : (len + 8) / 8 * 8;
  };
  if (depth > 16) throw Failure(bad + "datatype nested more than 16 levels deep");
  need(8);
  const unsigned version = (p[0] >> 4) & 0x0f, cls = p[0] & 0x0f;
  const uint64_t bits = le(p + 1, 3), size = le(p + 4, 4);
  p += 8;
  if (version < 1 || version > 3)
    throw Failure(bad + "datatype version " + std::to_string(version));
  switch (cls) {
    case 0:  // integer
    case 4:  // bitfield
      need(4), p += 4;
      break;
    case 1:  // float
      need(12), p += 12;
      break;
    case 2:  // time
      need(2), p += 2;
      break;
    case 3:  // string
    case 7:  // reference
      break;
    case 5:  // opaque
      need(bits & 0xff), p += bits & 0xff;
      break;
    case 6: {  // compound
      // H5VM_limit_enc_size: the bytes that hold any offset below the size.
      unsigned offset_bytes = 1;
      for (uint64_t v = size; v >= 256; v >>= 8) ++offset_bytes;
      for (uint64_t i = 0; i < (bits & 0xffff); ++i) {
        name(version);
        need(version >= 3 ? offset_bytes : 4), p += version >= 3 ? offset_bytes : 4;
        if (version == 1) {
          need(28);
          if (p[0] > 4)
            throw Failure(bad + "datatype has a member array of rank " + std::to_string(p[0]));
          p += 28;
        }
        check_datatype(p, end, depth + 1, bad);
      }
      break;
    }
    case 8: {  // enum
      const uint64_t base = check_datatype(p, end, depth + 1, bad);
      for (uint64_t i = 0; i < (bits & 0xffff); ++i) name(version);
      need((bits & 0xffff) * base), p += (bits & 0xffff) * base;  // at most 2^16 * 2^32
      break;
    }
    case 9:  // variable-length: on disk, a heap ID whatever the size field says
      check_datatype(p, end, depth + 1, bad);
      return std::max<uint64_t>(size, 4 + sizeof_addr_ + 4);
    case 10: {  // array
      need(1);
      const unsigned rank = *p++;
      if (rank > 32) throw Failure(bad + "datatype has an array of rank " + std::to_string(rank));
      const uint64_t n = (version < 3 ? 3 : 0) + 4 * rank + (version < 3 ? 4 * rank : 0);
      need(n), p += n;
      check_datatype(p, end, depth + 1, bad);
      break;
    }
    default:
      throw Failure(bad + "datatype class " + std::to_string(cls));
  }
  return size;
}

// A dataspace message: version 1 (rank, flags, 5 reserved bytes, then the dimensions) or 2
// (rank, flags, type: 0 scalar, 1 simple, 2 null; then the dimensions); maximum dimensions follow
// when flag bit 0 is set. libhdf5 1.10 decoded them all whatever the message's size. Returns the
// number of points.
uint64_t RawStrings::dataspace_points(const uint8_t* s, uint64_t size,
                                      const std::string& bad) const {
  if (size < 4 || (s[0] != 1 && s[0] != 2) || s[1] > 32) throw Failure(bad + "has a bad dataspace");
  const unsigned rank = s[1];
  const uint64_t dims_at = s[0] == 1 ? 8 : 4;
  if (size < dims_at + uint64_t{rank} * sizeof_size_ * (s[2] & 1 ? 2 : 1))
    throw Failure(bad + "has a bad dataspace");
  uint64_t points = s[0] == 2 && s[3] == 2 ? 0 : 1;
  for (unsigned i = 0; i < rank; ++i)
    if (!checked_mul(points, length(s + dims_at + i * sizeof_size_), &points))
      throw Failure(bad + "has a bad dataspace");
  return points;
}

// An attribute message (version 1: name, datatype and dataspace each padded to 8 bytes; 2 and 3
// unpadded, 3 with a character set byte), checked as far as libhdf5 1.10's decoder trusts it: the
// name NUL-terminated inside its field (H5MM_strdup), datatype (check_datatype) and dataspace
// inside their fields, the data (points x element size) inside what is left (the decoder compared
// it with the whole message, and copied past the header's buffer).
RawStrings::Attribute RawStrings::parse_attribute(const Message& m, const std::string& what) const {
  const uint8_t* d = m.data;
  const std::string bad = "corrupt " + what + ": attribute message ";
  if (m.size < 8) throw Failure(bad + "too short");
  const unsigned version = d[0];
  if (version < 1 || version > 3) throw Failure(bad + "version " + std::to_string(version));
  if (version > 1 && (d[1] & 3))
    throw Failure(what + ": an attribute with a shared datatype or dataspace is not supported");
  auto pad = [&](uint64_t n) { return version == 1 ? align8(n) : n; };
  const uint64_t name_size = le(d + 2, 2), type_size = le(d + 4, 2), space_size = le(d + 6, 2);
  uint64_t p = version == 3 ? 9 : 8;
  auto field = [&](uint64_t size, uint64_t min, const char* name) {
    if (size < min || m.size < p || pad(size) > m.size - p)
      throw Failure(bad + "has a bad " + name + " size (" + std::to_string(size) + ")");
    const uint8_t* f = d + p;
    p += pad(size);
    return f;
  };
  Attribute a;
  const char* n = reinterpret_cast<const char*>(field(name_size, 1, "name"));
  if (strnlen(n, name_size) != name_size - 1) throw Failure(bad + "has an unterminated name");
  a.name = std::string_view(n, name_size - 1);
  a.type = field(type_size, 8, "datatype");
  const uint8_t* type_end = a.type;
  uint64_t elem = check_datatype(type_end, a.type + type_size, 0, bad);
  const uint8_t* s = field(space_size, 4, "dataspace");
  a.points = dataspace_points(s, space_size, bad);
  uint64_t data_size = 0;
  if (!checked_mul(a.points, elem, &data_size) || data_size > m.size - std::min(p, m.size))
    throw Failure(bad + "holds less data than its type and dataspace need");
  a.data = d + p;
  return a;
}

void RawStrings::check_address(const uint8_t* p, bool may_be_undefined,
                               const std::string& what) const {
  const uint64_t a = address(p);
  const uint64_t undefined =
      sizeof_addr_ == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * sizeof_addr_)) - 1;
  if ((a == undefined && !may_be_undefined) || (a != undefined && a >= size_))
    throw Failure(what + " address " + std::to_string(a) + " is outside the file");
}

// The object header behind a hard link, through the link: H5Lget_info reads only the parent
// group's entry, so nothing of the object is decoded before check_header.
void RawStrings::check_link(hid_t loc, const char* name, const std::string& what) {
  H5L_info_t link{};
  ok(H5Lget_info(loc, name, &link, H5P_DEFAULT), "cannot open " + what);
  if (link.type != H5L_TYPE_HARD) throw Failure(what + " is a soft or external link");
  if (link.u.address >= size_)
    throw Failure("corrupt " + what + ": address " + std::to_string(link.u.address) +
                  " is outside the file");
  check_header(link.u.address, what);
}

// The messages libhdf5 1.10 decodes on the reader's path: opening the file (the root header),
// a group (its links: link info, link and symbol table messages), a dataset (datatype,
// dataspace, fill value, filter pipeline, layout, external files), H5Aexists (every attribute
// message) and each header's load (continuation and reference count messages). Its decoders
// trust the sizes inside a message, not the message's own size; what follows from an address
// (a heap, a B-tree) must be inside the file. Shared messages (the message lives in another
// object or the shared message heap) are refused: kernalyse and h5py's defaults never write them.
void RawStrings::check_header(uint64_t addr, const std::string& what) {
  if (headers_checked_.count(addr)) return;  // a table's length check and its column's read
  std::vector<std::vector<uint8_t>> chunks;
  for (const Message& m : messages_at(addr, chunks, what)) check_message(m, what);
  headers_checked_.insert(addr);
}

void RawStrings::check_message(const Message& m, const std::string& what) {
  const std::string bad = "corrupt " + what + ": ";
  const uint8_t* d = m.data;
  switch (m.type) {
    case kMsgDataspace:
    case kMsgDatatype:
    case kMsgFillOld:
    case kMsgFill:
    case kMsgPipeline:
    case kMsgAttribute:
      if (m.flags & kMsgShared)
        throw Failure(what + ": shared object header messages are not supported");
      break;
    default:
      break;
  }
  switch (m.type) {
    case kMsgDataspace:
      dataspace_points(d, m.size, bad);
      break;
    case kMsgDatatype: {
      const uint8_t* p = d;
      check_datatype(p, d + m.size, 0, bad);
      break;
    }
    case kMsgFillOld:  // size (4), value
      if (m.size < 4 || le(d, 4) > m.size - 4) throw Failure(bad + "bad fill value message");
      break;
    case kMsgFill: {  // versions 1-2: 3 bytes, defined, [size, value]; 3: flags, [size, value]
      uint64_t at = 0;
      if (m.size >= 4 && (d[0] == 1 || d[0] == 2))
        at = d[3] ? 4 : 0;
      else if (m.size >= 2 && d[0] == 3)
        at = d[1] & 0x20 ? 2 : 0;
      else
        throw Failure(bad + "bad fill value message");
      const int64_t n = at ? static_cast<int32_t>(le(d + at, 4)) : 0;
      if (at && (m.size < at + 4 || (n > 0 && static_cast<uint64_t>(n) > m.size - at - 4)))
        throw Failure(bad + "bad fill value message");
      break;
    }
    case kMsgExternal:
      throw Failure(what + ": external data files are not supported");
    case kMsgLayout:
      check_layout(m, what);
      break;
    case kMsgPipeline:
      check_pipeline(m, bad);
      break;
    case kMsgAttribute:
      parse_attribute(m, what);
      break;
    case kMsgLinkInfo: {  // version, flags, [max creation index], heap, name index, [order index]
      if (m.size < 2) throw Failure(bad + "short link info message");
      const uint64_t p = 2 + (d[1] & 1 ? 8 : 0);
      const unsigned n = d[1] & 2 ? 3 : 2;
      if (m.size < p + n * sizeof_addr_) throw Failure(bad + "short link info message");
      for (unsigned i = 0; i < n; ++i)
        check_address(d + p + i * sizeof_addr_, true, bad + "link storage");
      break;
    }
    case kMsgLink:
      check_link_message(m, bad);
      break;
    case kMsgSymbolTable:  // B-tree, local heap
      if (m.size < 2 * sizeof_addr_) throw Failure(bad + "short symbol table message");
      check_address(d, false, bad + "symbol table B-tree");
      check_address(d + sizeof_addr_, false, bad + "symbol table heap");
      check_local_heap(address(d + sizeof_addr_), bad);
      break;
    case kMsgRefCount:  // version, count
      if (m.size < 5) throw Failure(bad + "short reference count message");
      break;
    default:
      break;
  }
}

// A link message: version 1, flags, [type], [creation order (8)], [charset], name length
// (1 << (flags & 3) bytes), name; then a hard link's object address, or a soft or user-defined
// link's 2-byte length and value. libhdf5 1.10 copied the name and the value at their stated
// lengths. Addresses a group's header gives libhdf5 to follow must be inside the file: it added a
// size to an address near 2^64 without an overflow check (its metadata accumulator then copied to
// a wild pointer: a segfault, found by the fuzzer in a link info message's fractal heap address).
void RawStrings::check_link_message(const Message& m, const std::string& bad) const {
  const uint8_t* d = m.data;
  if (m.size < 2) throw Failure(bad + "short link message");
  const unsigned flags = d[1];
  uint64_t p = 2;
  unsigned type = 0;
  if (flags & 0x08) type = p < m.size ? d[p++] : 0;
  p += (flags & 0x04 ? 8 : 0) + (flags & 0x10 ? 1 : 0);
  const uint64_t width = uint64_t{1} << (flags & 3);
  if (m.size < p + width) throw Failure(bad + "short link message");
  const uint64_t name = le(d + p, width);
  p += width;
  if (name > m.size - p) throw Failure(bad + "short link message");
  p += name;
  if (type == 0) {
    if (m.size - p < sizeof_addr_) throw Failure(bad + "short link message");
    check_address(d + p, false, bad + "link");
  } else {
    if (m.size - p < 2 || le(d + p, 2) > m.size - p - 2) throw Failure(bad + "short link message");
  }
}

// The filter pipeline: version 1 (nfilters, 6 reserved bytes; each filter: id, name length, flags,
// value count, name padded to 8, values, padded to 8 bytes) or 2 (the name only for ids from 256).
// libhdf5 1.10 took the name's strlen() and read the values at their stated count.
void RawStrings::check_pipeline(const Message& m, const std::string& bad) const {
  const uint8_t* d = m.data;
  if (m.size < 2 || (d[0] != 1 && d[0] != 2) || d[1] > 32)
    throw Failure(bad + "bad filter pipeline message");
  const unsigned version = d[0];
  uint64_t p = version == 1 ? 8 : 2;
  for (unsigned i = 0; i < d[1]; ++i) {
    if (m.size < p + 2) throw Failure(bad + "bad filter pipeline message");
    const bool named = version == 1 || le(d + p, 2) >= 256;
    const uint64_t head = named ? 8 : 6;
    if (m.size < p + head) throw Failure(bad + "bad filter pipeline message");
    const uint64_t name = named ? le(d + p + 2, 2) : 0, values = le(d + p + head - 2, 2);
    p += head;
    if (name > m.size - p || (name && !std::memchr(d + p, 0, name)))
      throw Failure(bad + "bad filter pipeline message");
    p += name;
    const uint64_t value_bytes = 4 * values + (version == 1 && values % 2 ? 4 : 0);
    if (value_bytes > m.size - p) throw Failure(bad + "bad filter pipeline message");
    p += value_bytes;
  }
}

// A local heap (a symbol table group's link names): "HEAP", version 0, 3 reserved bytes, data
// segment size, offset of the first free block, data segment address. libhdf5 allocated the data
// segment's size before reading it (2^56 bytes, found by the fuzzer), and walked the free list
// (offset of the next block, block size: 2 lengths each) without looking for a cycle or for a
// block's header past the segment's end. 1 ends the list.
void RawStrings::check_local_heap(uint64_t addr, const std::string& bad) {
  const std::string where = "the local heap at " + std::to_string(addr);
  std::vector<uint8_t> h = bytes(addr, 8 + 2 * sizeof_size_ + sizeof_addr_, bad + where);
  if (std::memcmp(h.data(), "HEAP", 4) != 0 || h[4] != 0)
    throw Failure(bad + "no local heap at " + std::to_string(addr));
  const uint64_t size = length(h.data() + 8), data = address(h.data() + 8 + 2 * sizeof_size_);
  uint64_t end = 0;
  if (!checked_add(data, size, &end) || end > size_)
    throw Failure(bad + where + " claims " + std::to_string(size) + " bytes at offset " +
                  std::to_string(data) + ", past the end of the file");
  std::set<uint64_t> seen;
  for (uint64_t free = length(h.data() + 8 + sizeof_size_); free != 1;) {
    if (free >= size || size - free < 2 * sizeof_size_ || !seen.insert(free).second)
      throw Failure(bad + where + " has a bad free list");
    std::vector<uint8_t> block = bytes(data + free, 2 * sizeof_size_, bad + where);
    if (length(block.data() + sizeof_size_) > size - free)
      throw Failure(bad + where + " has a bad free list");
    free = length(block.data());
  }
}

// The layout message: version 1 and 2 (dimensionality, class, 5 reserved bytes, address unless
// compact), 3 (class; contiguous: address, size; chunked: dimensionality, address, ...; compact:
// size (2), data) and 4 (chunked: flags, dimensionality, dimension width, dimensions, index type
// and its parameters, then the index address). Undefined (all ones) means not allocated yet.
// Chunk dimensions must not be 0: H5Dopen2 divides by them (SIGFPE, found by the fuzzer). A
// virtual layout (data in other files, described in the global heap) is refused.
void RawStrings::check_layout(const Message& m, const std::string& what) const {
  const std::string bad = "corrupt " + what + ": ";
  // Chunk dimensions (`n` of `width` bytes at `at`): each at least 1.
  auto check_dims = [&](uint64_t at, uint64_t n, uint64_t width) {
    if (n == 0 || n > 33 || width == 0 || width > 8 || m.size < at + n * width)
      throw Failure(bad + "bad chunk dimensions in the layout message");
    for (uint64_t i = 0; i < n; ++i)
      if (le(m.data + at + i * width, width) == 0)
        throw Failure(bad + "chunk dimension " + std::to_string(i) + " is 0");
  };
  const uint8_t* d = m.data;
  if (m.size < 2) throw Failure(bad + "short layout message");
  const unsigned version = d[0];
  uint64_t p = 0;
  if (version == 1 || version == 2) {
    if (m.size < 8) throw Failure(bad + "short layout message");
    const uint64_t dims_end = 8 + (d[2] == 0 ? 0 : sizeof_addr_) + 4 * uint64_t{d[1]};
    if (d[1] > 33 || m.size < dims_end) throw Failure(bad + "bad layout message");
    if (d[2] == 0) {  // compact: dimensions, size (4), data
      if (m.size - dims_end < 4 || le(d + dims_end, 4) > m.size - dims_end - 4)
        throw Failure(bad + "bad compact layout message");
      return;
    }
    p = 8;
    if (d[2] == 2) check_dims(p + sizeof_addr_, d[1], 4);
  } else if (version == 3 || version == 4) {
    const unsigned cls = d[1];
    if (cls == 0) {  // compact: size (2), data
      if (m.size < 4 || le(d + 2, 2) > m.size - 4)
        throw Failure(bad + "bad compact layout message");
      return;
    } else if (cls == 1)
      p = 2;
    else if (cls == 2 && version == 3) {
      if (m.size < 3) throw Failure(bad + "short layout message");
      p = 3;
      check_dims(p + sizeof_addr_, d[2], 4);
    } else if (cls == 2) {
      if (m.size < 5) throw Failure(bad + "short layout message");
      const uint64_t width = d[4];
      check_dims(5, d[3], width);
      p = 5 + uint64_t{d[3]} * width;
      if (m.size < p + 1) throw Failure(bad + "short layout message");
      const unsigned index = d[p++];
      static constexpr uint64_t kIndexInfo[6] = {0, 0, 0, 1, 5, 6};  // by index type
      if (index == 1 && (d[2] & 2))
        p += sizeof_size_ + 4;  // single filtered chunk
      else if (index >= 2 && index <= 5)
        p += kIndexInfo[index];
      else if (index != 1)
        throw Failure(bad + "unknown chunk index type " + std::to_string(index));
    } else if (cls == 3)
      throw Failure(what + ": virtual datasets are not supported");
    else
      throw Failure(bad + "layout class " + std::to_string(cls));
  } else
    throw Failure(bad + "layout message version " + std::to_string(version));
  if (m.size < p + sizeof_addr_) throw Failure(bad + "short layout message");
  check_address(d + p, true, bad + "storage");
}

std::string RawStrings::attribute(hid_t loc, const char* name, const std::string& what) {
  std::vector<std::vector<uint8_t>> chunks;
  for (const Message& m : messages(loc, chunks, what)) {
    if (m.type != kMsgAttribute || (m.flags & kMsgShared)) continue;
    const Attribute a = parse_attribute(m, what);
    if (a.name != name) continue;
    if ((a.type[0] & 0x0f) != 9 || (a.type[1] & 0x0f) != 1)  // variable-length, of type string
      throw Failure(what + ": the object header does not hold a variable-length string");
    if (a.points != 1) throw Failure(what + " is not a scalar");
    return heap_string(a.data, what);
  }
  // Dense storage (a fractal heap, h5py's libver="latest" past 8 attributes): not parsed here,
  // so refused rather than read unchecked.
  throw Failure(what +
                ": a variable-length string in dense attribute storage, which kernalyse does not "
                "read (store it as a fixed-length string, docs/store.md)");
}

}  // namespace kernalyse::detail
