// Temporary files for rows spilled by a large import (kernalyse/spill.h).
#include "kernalyse/spill.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "kernalyse/error.h"

namespace kernalyse {

SpillFile::SpillFile(std::string dir) : dir_(dir.empty() ? "." : std::move(dir)) {
#ifdef O_TMPFILE
  fd_ = ::open(dir_.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
#endif
  if (fd_ < 0) {  // a file system without O_TMPFILE: a named file, unlinked at once
    std::string name = dir_ + "/.kernalyse-spill.XXXXXX";
    fd_ = ::mkostemp(name.data(), O_CLOEXEC);
    if (fd_ >= 0) ::unlink(name.c_str());
  }
  if (fd_ < 0)
    throw Error("cannot create a temporary file in " + dir_ + ": " + std::strerror(errno));
}

SpillFile::~SpillFile() {
  if (fd_ >= 0) ::close(fd_);
}

uint64_t SpillFile::append(const void* p, size_t n) {
  const uint64_t at = size_;
  const char* c = static_cast<const char*>(p);
  for (size_t done = 0; done < n;) {
    const ssize_t w = ::pwrite(fd_, c + done, n - done, static_cast<off_t>(size_ + done));
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0)
      throw Error("cannot write a temporary file in " + dir_ + ": " +
                  std::strerror(w < 0 ? errno : ENOSPC));
    done += static_cast<size_t>(w);
  }
  size_ += n;
  return at;
}

void SpillFile::read(uint64_t offset, void* p, size_t n) const {
  char* c = static_cast<char*>(p);
  for (size_t done = 0; done < n;) {
    const ssize_t r = ::pread(fd_, c + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0)
      throw Error("cannot read back a temporary file in " + dir_ + ": " +
                  (r < 0 ? std::strerror(errno) : "it is shorter than written"));
    done += static_cast<size_t>(r);
  }
}

}  // namespace kernalyse
