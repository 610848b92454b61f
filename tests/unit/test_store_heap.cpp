// Variable-length strings of corrupt stores (issue 19, docs/fuzzing.md): the reader takes the
// global heap IDs itself and checks each collection, so a damaged heap is one clean Error, never
// libhdf5's overflow, multi-GB allocation or endless loop. Each test writes a real store and
// patches bytes it finds in the file; old-style (schema 2) variable-length attributes are written
// with the HDF5 API as earlier kernalyse versions and h5py do.
#include <gtest/gtest.h>
#include <hdf5.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>

#include "kernalyse/store.h"
#include "kernalyse/store_io.h"

namespace fs = std::filesystem;
using namespace kernalyse;

namespace {

constexpr const char* kMarker = "MARKER_kernel_name_0123";  // 23 bytes, once in the file

class StoreHeap : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "kernalyse-heap-XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    Store s;
    s.attrs.produced_by = "test";
    RankInfo r;
    r.rank = 0;
    r.host = "host-a";
    s.ranks.push_back(r);
    s.activities.rank = {0, 0};
    s.activities.device = {0, 0};
    s.activities.stream = {7, 7};
    s.activities.kind = {0, 0};
    s.activities.category = {0, 0};
    s.activities.start_ns = {100, 300};
    s.activities.end_ns = {200, 400};
    s.activities.name_id = {s.strings.intern(kMarker), s.strings.intern("other_kernel")};
    s.activities.correlation = {1, 2};
    s.activities.step = {-1, -1};
    write_store(s, path("run.h5"));
    bytes_ = slurp(path("run.h5"));
    // The marker's heap object: its 16-byte header (index, references, reserved, size) precedes
    // the data; the collection ("GCOL") starts before it; the heap ID (length, collection
    // address, index) is in /strings' chunk.
    marker_ = bytes_.find(kMarker);
    ASSERT_NE(marker_, std::string::npos);
    ASSERT_EQ(bytes_.find(kMarker, marker_ + 1), std::string::npos);
    gcol_ = bytes_.rfind("GCOL", marker_);
    ASSERT_NE(gcol_, std::string::npos);
    ASSERT_EQ(le(marker_ - 8, 8), std::strlen(kMarker));
    index_ = le(marker_ - 16, 2);
    gcol_size_ = le(gcol_ + 8, 8);
    std::string id = put(std::strlen(kMarker), 4) + put(gcol_, 8) + put(index_, 4);
    id_ = bytes_.find(id);
    ASSERT_NE(id_, std::string::npos);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static std::string slurp(const std::string& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream ss;
    ss << in.rdbuf();
    return ss.str();
  }
  uint64_t le(size_t at, size_t n) const {
    uint64_t v = 0;
    for (size_t i = n; i-- > 0;) v = v << 8 | static_cast<uint8_t>(bytes_[at + i]);
    return v;
  }
  static std::string put(uint64_t v, size_t n) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n && i < 8; ++i) s[i] = static_cast<char>(v >> (8 * i));  // rest 0
    return s;
  }
  // Where the layout message (version 3, chunked, 2 dimensions: rows and the element) of a
  // 2-row int64 column starts: its chunk B-tree address at +3, the chunk shape (2 rows, 8 bytes)
  // at +11. npos if absent.
  size_t layout_message_at() const {
    const std::string head = put(3, 1) + put(2, 1) + put(2, 1);
    const std::string shape = put(2, 4) + put(8, 4);
    size_t at = 0;
    for (at = bytes_.find(head); at != std::string::npos; at = bytes_.find(head, at + 1))
      if (bytes_.compare(at + 11, 8, shape) == 0) break;
    return at;
  }
  // The store with `n` bytes at `at` replaced by `v` (little-endian); its read error.
  std::string patched_error(size_t at, uint64_t v, size_t n) {
    std::string b = bytes_;
    b.replace(at, n, put(v, n));
    const std::string p = path("bad.h5");
    std::ofstream(p, std::ios::binary | std::ios::trunc) << b;
    try {
      read_store(p);
    } catch (const Error& e) {
      std::string msg = e.what();
      EXPECT_EQ(msg.rfind(p + ": ", 0), 0u) << msg;
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      return msg.substr(p.size() + 2);
    }
    return "(no error)";
  }

  fs::path dir_;
  std::string bytes_;
  size_t marker_ = 0, gcol_ = 0, id_ = 0;
  uint64_t index_ = 0, gcol_size_ = 0;
};

TEST_F(StoreHeap, IntactStoreReads) {
  Store s = read_store(path("run.h5"));
  ASSERT_EQ(s.strings.size(), 3u);
  EXPECT_EQ(s.strings.all()[s.activities.name_id[0]], kMarker);
  EXPECT_EQ(s.ranks.at(0).host, "host-a");
  EXPECT_EQ(s.attrs.schema_version, 3);
  EXPECT_EQ(s.attrs.produced_by, "test");
}

TEST_F(StoreHeap, ObjectSizePastTheCollection) {
  // libhdf5 copied the object's size into a buffer sized from the heap ID: heap overflow.
  EXPECT_EQ(patched_error(marker_ - 8, uint64_t{1} << 40, 8),
            "corrupt /strings: global heap collection at " + std::to_string(gcol_) + ": object " +
                std::to_string(index_) + " of 1099511627776 bytes runs past the collection (" +
                std::to_string(gcol_size_) + " bytes)");
}

TEST_F(StoreHeap, SequenceLengthNotTheObjectSize) {
  // 0xffffffff: libhdf5 allocated 4 GB before reading.
  for (uint64_t len : {uint64_t{24}, uint64_t{0xffffffff}})
    EXPECT_EQ(patched_error(id_, len, 4), "corrupt /strings: a string of " + std::to_string(len) +
                                              " bytes is global heap object " +
                                              std::to_string(index_) + " of 23 bytes");
}

TEST_F(StoreHeap, MissingObjectIndex) {
  // libhdf5 checked the index with an assert only: read past its object table.
  EXPECT_EQ(patched_error(id_ + 12, 999, 4), "corrupt /strings: global heap collection at " +
                                                 std::to_string(gcol_) + " has no object 999");
}

TEST_F(StoreHeap, CollectionSizeOrAddressWrong) {
  std::string err = patched_error(gcol_ + 8, uint64_t{1} << 50, 8);
  EXPECT_NE(err.find("corrupt /strings: global heap collection at " + std::to_string(gcol_) +
                     " claims 1125899906842624 bytes, past the end of the file"),
            std::string::npos)
      << err;
  EXPECT_EQ(patched_error(id_ + 4, gcol_ + 8, 8),
            "corrupt /strings: no global heap collection at " + std::to_string(gcol_ + 8) +
                " (bad signature)");
  err = patched_error(id_ + 4, uint64_t{1} << 60, 8);
  EXPECT_NE(err.find("past the end of the file"), std::string::npos) << err;
}

TEST_F(StoreHeap, ObjectsMustTileTheCollection) {
  // Index 0 is the free space, which must end the collection; a zero-sized one made libhdf5 loop
  // for ever (the fuzzer's timeouts).
  std::string err = patched_error(marker_ - 16, 0, 2);
  EXPECT_NE(err.find("free space of 23 bytes"), std::string::npos) << err;
  EXPECT_NE(err.find("does not end the collection"), std::string::npos) << err;
  err = patched_error(marker_ - 8, 16, 8);  // the next object header is then misplaced
  EXPECT_EQ(err.rfind("corrupt /strings: global heap collection at ", 0), 0u) << err;
}

TEST_F(StoreHeap, RowCountBoundedByStoredBytes) {
  // A corrupt dataspace: 2^40 rows would have been allocated before a byte was read.
  const std::string p = path("run.h5");
  hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t ds = H5Dopen2(f, "strings", H5P_DEFAULT);
  const hsize_t rows[1] = {hsize_t{1} << 40};
  ASSERT_GE(H5Dset_extent(ds, rows), 0);
  H5Dclose(ds);
  ASSERT_GE(H5Fclose(f), 0);
  try {
    read_store(p);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(p + ": corrupt /strings: 1099511627776 rows of 16 bytes "
                                              "but ",
                                          0),
              0u)
        << e.what();
  }
}

TEST_F(StoreHeap, AttributeMessagesCheckedBeforeLibhdf5DecodesThem) {
  // H5Aexists decodes every attribute message of the root group; libhdf5 1.10 copied an
  // attribute's data past the object header's buffer when its type said more than the message
  // held. Version 1 attribute message: version, reserved, name size, datatype size, dataspace
  // size (2 bytes each), then the name padded to 8 bytes, then the datatype (size at +4).
  const size_t name = bytes_.find("produced_by");
  ASSERT_NE(name, std::string::npos);
  ASSERT_EQ(le(name - 6, 2), 12u);  // "produced_by" and its NUL
  EXPECT_EQ(patched_error(name - 4, 0xffff, 2),
            "corrupt root group: attribute message has a bad datatype size (65535)");
  EXPECT_EQ(patched_error(name + 16 + 4, 100000, 4),
            "corrupt root group: attribute message holds less data than its type and dataspace "
            "need");
  EXPECT_EQ(patched_error(name + 11, 'x', 1),
            "corrupt root group: attribute message has an unterminated name");
}

TEST_F(StoreHeap, ChunkLargerThanTheFile) {
  // A numeric column's chunk record (B-tree version 1: chunk size, filter mask, offsets, address)
  // claiming 3.8 GB: libhdf5 allocated that much before reading (found by the fuzzer).
  hid_t f = H5Fopen(path("run.h5").c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  hid_t ds = H5Dopen2(f, "activities/start_ns", H5P_DEFAULT);
  const hsize_t origin[1] = {0};
  unsigned mask = 0;
  haddr_t addr = 0;
  hsize_t size = 0;
  ASSERT_GE(H5Dget_chunk_info_by_coord(ds, origin, &mask, &addr, &size), 0);
  H5Dclose(ds), H5Fclose(f);
  ASSERT_EQ(size, 16u);  // 2 rows of int64
  const size_t rec = bytes_.find(put(16, 4) + put(0, 4) + put(0, 16) + put(addr, 8));
  ASSERT_NE(rec, std::string::npos);
  EXPECT_EQ(patched_error(rec, 3825205344u, 4),
            "corrupt /activities/start_ns: 3825205344 bytes stored, more than the whole file (" +
                std::to_string(bytes_.size()) + " bytes)");
}

TEST_F(StoreHeap, GroupAddressOutsideTheFile) {
  // A compact group's link info message (version 1 header: type 2, size 40; then version 0,
  // flags 3, the maximum creation index, and three undefined addresses: fractal heap, name index,
  // creation order index). An address near 2^64 made libhdf5's metadata accumulator copy to a
  // wild pointer (a segfault, found by the fuzzer).
  const std::string msg = put(2, 2) + put(40, 2) + put(0, 4) + put(0, 1) + put(3, 1);
  size_t at = 0;
  for (at = bytes_.find(msg); at != std::string::npos; at = bytes_.find(msg, at + 1))
    if (bytes_.compare(at + 18, 24, std::string(24, '\xff')) == 0) break;
  ASSERT_NE(at, std::string::npos);
  const std::string err = patched_error(at + 18, 0xffff000000000001u, 8);
  EXPECT_EQ(err.rfind("corrupt /", 0), 0u) << err;
  EXPECT_NE(err.find(": link storage address 18446462598732840961 is outside the file"),
            std::string::npos)
      << err;
}

TEST_F(StoreHeap, DatasetStorageAddressOutsideTheFile) {
  // A 2-row int64 column's layout message: its chunk B-tree address.
  const size_t at = layout_message_at();
  ASSERT_NE(at, std::string::npos);
  const std::string err = patched_error(at + 3, 0xffff000000000001u, 8);
  EXPECT_EQ(err.rfind("corrupt /", 0), 0u) << err;
  EXPECT_NE(err.find(": storage address 18446462598732840961 is outside the file"),
            std::string::npos)
      << err;
}

TEST_F(StoreHeap, ZeroChunkDimension) {
  // The same layout message with its first chunk dimension 0: H5Dopen2 divided by it (SIGFPE,
  // found by the fuzzer); the header is checked through the link before the dataset is opened.
  const size_t at = layout_message_at();
  ASSERT_NE(at, std::string::npos);
  const std::string err = patched_error(at + 11, 0, 4);
  EXPECT_EQ(err.rfind("corrupt /", 0), 0u) << err;
  EXPECT_NE(err.find(": chunk dimension 0 is 0"), std::string::npos) << err;
}

// The address of the object header of `name` in the store `file`.
uint64_t header_address(const std::string& file, const char* name) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  H5O_info_t info{};
  const herr_t rc = H5Oget_info_by_name2(f, name, &info, H5O_INFO_BASIC, H5P_DEFAULT);
  H5Fclose(f);
  return rc < 0 ? 0 : info.addr;
}

TEST_F(StoreHeap, AttributeDatatypesCheckedBeforeLibhdf5DecodesThem) {
  // libhdf5 1.10 decoded a datatype's member names with strdup() wherever they ended and an
  // array's rank into a fixed array of 32: an enum attribute on the root group whose member
  // count said 257 read past the object header's buffer inside H5Aexists (found by the fuzzer).
  // A valid enum (h5py's bool) and array attribute are read past; patched, each is one error.
  const std::string p = path("run.h5");
  {
    hid_t f = H5Fopen(p.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    ASSERT_GE(f, 0);
    hid_t e = H5Tenum_create(H5T_STD_I8LE);
    const int8_t no = 0, yes = 1;
    H5Tenum_insert(e, "FALSE", &no), H5Tenum_insert(e, "TRUE", &yes);
    const hsize_t three[1] = {3};
    hid_t arr = H5Tarray_create2(H5T_STD_I32LE, 1, three);
    hid_t sp = H5Screate(H5S_SCALAR);
    for (auto [name, type] : {std::pair{"flag", e}, std::pair{"triple", arr}}) {
      hid_t a = H5Acreate2(f, name, type, sp, H5P_DEFAULT, H5P_DEFAULT);
      const int32_t v[3] = {1, 2, 3};
      EXPECT_GE(H5Awrite(a, type, v), 0);
      H5Aclose(a);
    }
    H5Sclose(sp), H5Tclose(arr), H5Tclose(e);
    ASSERT_GE(H5Fclose(f), 0);
  }
  EXPECT_EQ(read_store(p).attrs.produced_by, "test");
  bytes_ = slurp(p);
  // The enum's datatype: version 1, class 8, 2 members (24 bits), size 1, then its base type.
  const size_t e = bytes_.find(put(0x18, 1) + put(2, 3) + put(1, 4) + put(0x10, 1));
  ASSERT_NE(e, std::string::npos);
  std::string err = patched_error(e + 1, 257, 2);
  EXPECT_EQ(err.rfind("corrupt root group: attribute message datatype ", 0), 0u) << err;
  // The array's: version 2, class 10, size 12, rank 1, 3 reserved bytes, dimension 3.
  const size_t a = bytes_.find(put(0x2a, 4) + put(12, 4) + put(1, 4) + put(3, 4));
  ASSERT_NE(a, std::string::npos);
  EXPECT_EQ(patched_error(a + 8, 200, 1),
            "corrupt root group: attribute message datatype has an array of rank 200");
}

TEST_F(StoreHeap, RootHeaderCheckedBeforeOpen) {
  // H5Fopen loads the root group's object header and its continuation blocks, allocating each
  // block's length as the continuation message gives it, whatever the message's size (4 GB for a
  // corrupt one, found by the fuzzer). The superblock (version 0: the root entry's header address
  // at 64) and that header are read before libhdf5 opens the file.
  ASSERT_EQ(bytes_[8], 0);  // superblock version 0, 8-byte addresses and lengths
  const size_t root = le(64, 8);
  ASSERT_EQ(bytes_[root], 1);  // object header version 1; its first message a continuation
  ASSERT_EQ(le(root + 16, 2), 0x10u);
  ASSERT_EQ(le(root + 18, 2), 16u);
  EXPECT_EQ(patched_error(root + 32, 4295491589u, 8), "corrupt root group: the object header at " +
                                                          std::to_string(root) +
                                                          " is larger than the file");
  EXPECT_EQ(patched_error(root + 24, bytes_.size() - 8, 8),
            "corrupt root group: " + std::to_string(le(root + 32, 8)) + " bytes at offset " +
                std::to_string(bytes_.size() - 8) + " are past the end of the file (" +
                std::to_string(bytes_.size()) + " bytes)");
  EXPECT_EQ(patched_error(root + 18, 0, 2),
            "corrupt root group: bad continuation message in the object header at " +
                std::to_string(root));
  EXPECT_EQ(patched_error(64, bytes_.size() + 8, 8), "corrupt superblock: root group address " +
                                                         std::to_string(bytes_.size() + 8) +
                                                         " is outside the file");
}

TEST_F(StoreHeap, LocalHeapCheckedBeforeLibhdf5LoadsIt) {
  // A symbol table group's link names live in a local heap ("HEAP", version, 3 reserved bytes,
  // data size, free list offset, data address). libhdf5 allocated the data size before reading
  // (2^56 bytes, found by the fuzzer) and walked the free list without looking for a cycle.
  const size_t heap = bytes_.find("HEAP");
  ASSERT_NE(heap, std::string::npos);
  const uint64_t data = le(heap + 24, 8), first = le(heap + 16, 8);
  ASSERT_NE(first, 1u);  // a free block: its next offset, then its size
  std::string err = patched_error(heap + 8, uint64_t{1} << 56, 8);
  EXPECT_NE(err.find(": the local heap at " + std::to_string(heap) +
                     " claims 72057594037927936 bytes at offset " + std::to_string(data) +
                     ", past the end of the file"),
            std::string::npos)
      << err;
  err = patched_error(data + first, first, 8);  // the block's next is itself
  EXPECT_NE(err.find(": the local heap at " + std::to_string(heap) + " has a bad free list"),
            std::string::npos)
      << err;
}

TEST_F(StoreHeap, DatasetMessagesCheckedBeforeOpen) {
  // H5Dopen2 decodes the dataset's datatype, dataspace, fill value and layout messages; libhdf5
  // 1.10 copied a fill value at its stated size and an array datatype's rank into a fixed array.
  // Version 1 header: 16-byte prefix (chunk size at 8), then 8-byte message headers.
  const size_t at = header_address(path("run.h5"), "activities/start_ns");
  ASSERT_GT(at, 0u);
  ASSERT_EQ(bytes_[at], 1);
  size_t fill = 0, type = 0;
  for (size_t p = at + 16; p + 8 <= at + 16 + le(at + 8, 4); p += 8 + le(p + 2, 2)) {
    if (le(p, 2) == 5) fill = p + 8;
    if (le(p, 2) == 3) type = p + 8;
  }
  ASSERT_NE(fill, 0u);
  ASSERT_NE(type, 0u);
  ASSERT_EQ(bytes_[fill], 2);  // fill value message version 2, a value defined: size at 4
  ASSERT_EQ(bytes_[fill + 3], 1);
  EXPECT_EQ(patched_error(fill + 4, 100000, 4),
            "corrupt /activities/start_ns: bad fill value message");
  ASSERT_EQ(le(type, 1), 0x10u);  // version 1 integer; made an array (class 10) of rank 200
  bytes_[type + 8] = static_cast<char>(200);  // the rank, where the integer's offset was
  EXPECT_EQ(patched_error(type, 0x2a, 1),
            "corrupt /activities/start_ns: datatype has an array of rank 200");
}

// Schema 1 and 2 stores (and h5py's `f.attrs[k] = "text"`) hold variable-length attributes.
void set_vlen_attr(const std::string& file, const char* name, const std::string& value) {
  hid_t f = H5Fopen(file.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
  ASSERT_GE(f, 0);
  if (H5Aexists(f, name) > 0) H5Adelete(f, name);
  hid_t t = H5Tcopy(H5T_C_S1);
  H5Tset_size(t, H5T_VARIABLE);
  H5Tset_cset(t, H5T_CSET_UTF8);
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, name, t, sp, H5P_DEFAULT, H5P_DEFAULT);
  const char* p = value.c_str();
  EXPECT_GE(H5Awrite(a, t, &p), 0);
  H5Aclose(a), H5Sclose(sp), H5Tclose(t);
  ASSERT_GE(H5Fclose(f), 0);
}

TEST_F(StoreHeap, VariableLengthAttributesOfOlderStores) {
  const std::string p = path("run.h5");
  const std::string long_value(5000, 'x');
  set_vlen_attr(p, "clock_domain", "ATTRMARK one clock \xc2\xb1 1 us");
  set_vlen_attr(p, "command_line", long_value);
  Store s = read_store(p);
  EXPECT_EQ(s.attrs.clock_domain, "ATTRMARK one clock \xc2\xb1 1 us");
  EXPECT_EQ(s.attrs.command_line, long_value);
  EXPECT_EQ(s.attrs.produced_by, "test");  // fixed-length beside them

  // Its heap object damaged: one error naming the attribute.
  bytes_ = slurp(p);
  const size_t at = bytes_.find("ATTRMARK");
  ASSERT_NE(at, std::string::npos);
  std::string err = patched_error(at - 8, 1000000, 8);
  EXPECT_EQ(err.rfind("corrupt attribute clock_domain: global heap collection at ", 0), 0u) << err;
  EXPECT_NE(err.find("runs past the collection"), std::string::npos) << err;
  err = patched_error(at - 16, 77, 2);
  EXPECT_EQ(err.rfind("corrupt attribute clock_domain: ", 0), 0u) << err;
  EXPECT_NE(err.find("has no object"), std::string::npos) << err;
}

TEST_F(StoreHeap, DenseAttributeStorageIsRefused) {
  // Attributes in a fractal heap (latest format, no compact attributes): their heap IDs are not
  // in the object header, so a variable-length one is refused rather than read unchecked.
  const std::string p = path("dense.h5");
  hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
  H5Pset_libver_bounds(fapl, H5F_LIBVER_LATEST, H5F_LIBVER_LATEST);
  hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
  H5Pset_attr_phase_change(fcpl, 0, 0);
  hid_t f = H5Fcreate(p.c_str(), H5F_ACC_TRUNC, fcpl, fapl);
  ASSERT_GE(f, 0);
  hid_t sp = H5Screate(H5S_SCALAR);
  hid_t a = H5Acreate2(f, "schema_version", H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
  const int32_t v = 2;
  H5Awrite(a, H5T_NATIVE_INT32, &v);
  H5Aclose(a), H5Sclose(sp), H5Fclose(f), H5Pclose(fcpl), H5Pclose(fapl);
  set_vlen_attr(p, "tool_version", "1.0");
  EXPECT_EQ(
      [&] {
        try {
          read_store(p);
        } catch (const Error& e) {
          return std::string(e.what());
        }
        return std::string("(no error)");
      }(),
      p + ": attribute tool_version: a variable-length string in dense attribute storage, which "
          "kernalyse does not read (store it as a fixed-length string, docs/store.md)");
}

}  // namespace
