// Variable-length strings read by kernalyse itself, never by libhdf5's conversion
// (docs/fuzzing.md "The store reader and libhdf5's global heap"). libhdf5 1.10 trusts a string's
// global-heap entry (H5HG_read: unchecked object index, object size larger than the buffer
// H5T__conv_vlen allocated from the ID's length, multi-GB lengths, loops over corrupt collections),
// so a corrupt store overflowed or hung inside the library. Here the raw 16-byte heap IDs are
// taken from the dataset's chunks (or, for an attribute, from the object header's attribute
// message) and the global heap collections ("GCOL", HDF5 file format spec "Global Heap") are
// read with pread and validated before a byte of them is used. Every failure is a Failure; memory
// and time are bounded by the file's size. Not installed; include only from aggregator/src.
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
  // `path` is opened a second time, read-only, beside libhdf5's handle `file`.
  RawStrings(const std::string& path, hid_t file);
  ~RawStrings();
  RawStrings(const RawStrings&) = delete;
  RawStrings& operator=(const RawStrings&) = delete;

  // The `rows` strings of the 1-D variable-length string dataset `ds` (`what`: "/strings").
  std::vector<std::string> dataset(hid_t ds, const std::string& what, size_t rows);
  // The scalar variable-length string attribute `name` of the object `loc`, found in its object
  // header (compact attribute storage; dense storage is refused).
  std::string attribute(hid_t loc, const char* name, const std::string& what);

  // Checks every attribute message in the object header of `obj` as far as libhdf5's decoder
  // trusts it; run before the first H5A call on `obj` (H5Aexists decodes them all).
  void check_attributes(hid_t obj, const std::string& what);
  // Checks the addresses a group's object header holds (link info, symbol table, hard links);
  // run before the first H5L or H5G call that looks into `g`.
  void check_group(hid_t g, const std::string& what);
  // The same for the dataset `name` in `group`, through its link, before H5Dopen2: the storage
  // address and the chunk dimensions of its layout message.
  void check_dataset(hid_t group, const char* name, const std::string& what);

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
  std::set<uint64_t> datasets_checked_;  // object header addresses check_dataset passed
};

}  // namespace kernalyse::detail
