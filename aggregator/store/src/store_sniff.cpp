// Telling a store from a trace by its first bytes, without libhdf5: kernalyse-merge asks this of
// every input, and loads libhdf5 only for a store (h5_on_demand.cpp).
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "kernalyse/store_io.h"

namespace kernalyse {

namespace {
constexpr unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
}  // namespace

bool is_hdf5_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  unsigned char buf[8];
  ssize_t got = ::pread(fd, buf, sizeof buf, 0);
  ::close(fd);
  return got == static_cast<ssize_t>(sizeof buf) && std::memcmp(buf, kSignature, sizeof buf) == 0;
}

}  // namespace kernalyse
