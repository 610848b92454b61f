// Trace file bytes, plain or gzip, from a file or a pipe: the one reader of JSON trace inputs
// (the Kineto and rocprofv3 importers). Internal to aggregator/.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernalyse/error.h"

namespace kernalyse {

// gzip is decoded with zlib's inflate directly rather than gzread: gzread stops quietly at bytes
// after the last gzip member ("trailing garbage"), which would let a damaged file, or a gzip
// file with something else appended, import as if it were whole. Here concatenated members are read
// in turn (as gzip -d does) and anything else after a member is refused. The format is told by the
// first two bytes, read from the stream itself, so a pipe (/dev/stdin, <(zcat ...)) is recognised
// too (F18).
class Input {
 public:
  explicit Input(const std::string& path) : path_(path), raw_(size_t{1} << 20) {
    fd_ = ::open(path.c_str(), O_RDONLY);
    if (fd_ < 0) throw Error(path + ": cannot open: " + std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) == 0) size_ = static_cast<int64_t>(st.st_size);
    while (avail_ < 2 && fill()) {
    }
    gzip_ = avail_ >= 2 && static_cast<unsigned char>(raw_[0]) == 0x1f &&
            static_cast<unsigned char>(raw_[1]) == 0x8b;
    if (gzip_) {
      zs_.next_in = reinterpret_cast<Bytef*>(raw_.data());
      zs_.avail_in = static_cast<uInt>(avail_);
      if (inflateInit2(&zs_, 16 + MAX_WBITS) != Z_OK) throw Error(path + ": cannot start zlib");
      zinit_ = true;
    }
  }
  Input(const Input&) = delete;
  Input& operator=(const Input&) = delete;
  ~Input() {
    if (zinit_) inflateEnd(&zs_);
    if (fd_ >= 0) ::close(fd_);
  }
  // Reads up to n bytes; 0 at end. Throws Error on I/O or gzip errors (corrupt or truncated
  // stream, trailing bytes that are not another gzip member).
  size_t read(char* dst, size_t n) {
    if (!gzip_) {
      if (avail_ > 0) {  // the bytes read to look for the gzip magic
        size_t k = std::min(n, avail_);
        std::memcpy(dst, raw_.data() + start_, k);
        start_ += k;
        avail_ -= k;
        return k;
      }
      return raw_read(dst, n);
    }
    zs_.next_out = reinterpret_cast<Bytef*>(dst);
    zs_.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    const uInt want = zs_.avail_out;
    while (zs_.avail_out == want) {
      if (member_done_) {
        // Between members: the end of the input, another member, or garbage.
        while (zs_.avail_in < 2 && refill_z()) {
        }
        if (zs_.avail_in == 0) return 0;
        // Not counted to the end: a pipe may never end.
        if (zs_.avail_in < 2 || zs_.next_in[0] != 0x1f || zs_.next_in[1] != 0x8b)
          throw Error(path_ + ": trailing garbage after the gzip stream at compressed byte " +
                      std::to_string(disk_pos()));
        inflateReset(&zs_);
        member_done_ = false;
      }
      if (zs_.avail_in == 0 && !refill_z()) {
        throw Error(path_ + ": corrupt or truncated gzip data near compressed byte " +
                    std::to_string(disk_pos()) + " (the stream ends inside a gzip member)");
      }
      int r = inflate(&zs_, Z_NO_FLUSH);
      if (r == Z_STREAM_END) {
        member_done_ = true;
      } else if (r != Z_OK && r != Z_BUF_ERROR) {
        throw Error(path_ + ": corrupt or truncated gzip data near compressed byte " +
                    std::to_string(disk_pos()) + " (" + (zs_.msg ? zs_.msg : "zlib error") + ")");
      }
    }
    return want - zs_.avail_out;
  }
  // File bytes consumed so far: compressed bytes for gzip (what progress counts against size()).
  int64_t disk_pos() const {
    return raw_pos_ - static_cast<int64_t>(gzip_ ? zs_.avail_in : avail_);
  }
  int64_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  // read(2) with EINTR retried; 0 at end of file.
  size_t raw_read(char* dst, size_t n) {
    ssize_t r;
    do r = ::read(fd_, dst, n);
    while (r < 0 && errno == EINTR);
    if (r < 0) throw Error(path_ + ": read error: " + std::strerror(errno));
    raw_pos_ += r;
    return static_cast<size_t>(r);
  }
  // Appends to raw_ after the unconsumed bytes [start_, start_ + avail_); false at end of file.
  bool fill() {
    if (start_ > 0) {
      std::memmove(raw_.data(), raw_.data() + start_, avail_);
      start_ = 0;
    }
    size_t r = raw_read(raw_.data() + avail_, raw_.size() - avail_);
    avail_ += r;
    return r > 0;
  }
  bool refill_z() {
    start_ = static_cast<size_t>(reinterpret_cast<char*>(zs_.next_in) - raw_.data());
    avail_ = zs_.avail_in;
    bool more = fill();
    zs_.next_in = reinterpret_cast<Bytef*>(raw_.data());
    zs_.avail_in = static_cast<uInt>(avail_);
    return more;
  }
  std::string path_;
  std::vector<char> raw_;         // compressed (or sniffed plain) bytes read from fd_
  size_t start_ = 0, avail_ = 0;  // unconsumed bytes of raw_ (plain files, fill())
  int64_t raw_pos_ = 0, size_ = 0;
  int fd_ = -1;
  bool gzip_ = false, zinit_ = false, member_done_ = false;
  z_stream zs_{};
};

}  // namespace kernalyse
