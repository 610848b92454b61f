// Variable-length strings read by kernalyse itself, never by libhdf5's conversion
// (docs/fuzzing.md "The store reader and libhdf5's global heap"). libhdf5 1.10 trusts a string's
// global-heap entry (H5HG_read: unchecked object index, object size larger than the buffer
// H5T__conv_vlen allocated from the ID's length, multi-GB lengths, loops over corrupt collections),
// so a corrupt store overflowed or hung inside the library. Here the raw 16-byte heap IDs are
// taken from the dataset's chunks (or, for an attribute, from the object header's attribute
// message) and the global heap collections ("GCOL", HDF5 file format spec "Global Heap") are
// read with pread and validated before a byte of them is used. The same reader screens the rest
// of the metadata libhdf5 decodes on the store reader's path (superblock, object headers and
// their messages, local heaps) before libhdf5 sees it, since 1.10 trusts the sizes inside them
// too. Every failure is a Failure; memory and time are bounded by the file's size. Not
// installed; include only from aggregator/src.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace kernalyse::detail {

class RawStrings {
 public:
  // Opens `path` read-only and checks what H5Fopen decodes before libhdf5 opens it: the
  // superblock (version 0 to 3), the driver information block or the superblock extension it
  // points to, and the root group's object header (check_header). Run before H5Fopen.
  explicit RawStrings(const std::string& path);
  ~RawStrings();
  RawStrings(const RawStrings&) = delete;
  RawStrings& operator=(const RawStrings&) = delete;

  // The `rows` strings of the 1-D variable-length string dataset `ds` (`what`: "/strings").
  std::vector<std::string> dataset(hid_t ds, const std::string& what, size_t rows);
  // The scalar variable-length string attribute `name` of the object `loc`, found in its object
  // header (compact attribute storage; dense storage is refused).
  std::string attribute(hid_t loc, const char* name, const std::string& what);

  // Checks the object header that the hard link `name` in `loc` points to, through the link,
  // before libhdf5 loads it (H5Gopen2, H5Dopen2 and the H5L calls into a group): check_header.
  void check_link(hid_t loc, const char* name, const std::string& what);

  uint64_t file_size() const { return size_; }

 private:
  struct Object {
    uint32_t index;
    uint64_t begin, size;  // within Collection::data
  };
  struct Collection {
    uint64_t end;
    std::vector<uint8_t> data;
    std::vector<Object> objects;  // sorted by index
  };
  struct Message {
    unsigned type, flags;
    const uint8_t* data;
    size_t size;
  };

  struct Attribute {
    std::string_view name;
    const uint8_t* type = nullptr;  // the datatype message
    uint64_t points = 0;
    const uint8_t* data = nullptr;  // points elements
  };

  void check_superblock();
  // Every message of the object header at `addr` that libhdf5 1.10 decodes on the reader's path,
  // checked against the message's size (h5raw.cpp); each header once.
  void check_header(uint64_t addr, const std::string& what);
  void check_message(const Message& m, const std::string& what);
  void check_layout(const Message& m, const std::string& what) const;
  void check_link_message(const Message& m, const std::string& bad) const;
  void check_pipeline(const Message& m, const std::string& bad) const;
  void check_local_heap(uint64_t addr, const std::string& bad);
  uint64_t check_datatype(const uint8_t*& p, const uint8_t* end, unsigned depth,
                          const std::string& bad) const;
  uint64_t dataspace_points(const uint8_t* s, uint64_t size, const std::string& bad) const;
  Attribute parse_attribute(const Message& m, const std::string& what) const;
  void check_address(const uint8_t* p, bool may_be_undefined, const std::string& what) const;
  std::vector<uint8_t> bytes(uint64_t addr, uint64_t len, const std::string& what);
  uint64_t address(const uint8_t* p) const;
  uint64_t length(const uint8_t* p) const;
  const Collection& collection(uint64_t addr, const std::string& what);
  std::string heap_string(const uint8_t* id, const std::string& what);
  std::vector<Message> messages_at(uint64_t addr, std::vector<std::vector<uint8_t>>& chunks,
                                   const std::string& what);
  std::vector<Message> messages(hid_t obj, std::vector<std::vector<uint8_t>>& chunks,
                                const std::string& what);
  void require_no_fill_value(hid_t ds, const std::string& what);

  int fd_ = -1;
  uint64_t size_ = 0;
  size_t sizeof_addr_ = 8, sizeof_size_ = 8;
  std::map<uint64_t, Collection> heap_;  // by address; never overlapping
  std::set<uint64_t> headers_checked_;   // object header addresses check_header passed
};

}  // namespace kernalyse::detail
