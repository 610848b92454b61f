// Trace file bytes, plain or gzip, from a file or a pipe: the one reader of JSON trace inputs
// (the Kineto and rocprofv3 importers). Internal to aggregator/.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#if defined(KERNALYSE_HAVE_LIBDEFLATE)
#include <libdeflate.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kernalyse/error.h"

namespace kernalyse {

// An allocator whose vectors grow without zeroing their bytes (resize(n) leaves them as
// allocated): for read buffers, every byte of which is written before it is read.
template <class T>
struct UninitAllocator : std::allocator<T> {
  template <class U>
  struct rebind {
    using other = UninitAllocator<U>;
  };
  UninitAllocator() = default;
  template <class U>
  UninitAllocator(const UninitAllocator<U>&) noexcept {}
  template <class U>
  void construct(U* p) noexcept {
    ::new (static_cast<void*>(p)) U;
  }
  template <class U, class... A>
  void construct(U* p, A&&... a) {
    ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
  }
};

// gzip is decoded with zlib's inflate directly rather than gzread: gzread stops quietly at bytes
// after the last gzip member ("trailing garbage"), which would let a damaged file, or a gzip
// file with something else appended, import as if it were whole. Here concatenated members are read
// in turn (as gzip -d does) and anything else after a member is refused. The format is told by the
// first two bytes, read from the stream itself, so a pipe (/dev/stdin, <(zcat ...)) is recognised
// too (F18).
class Input {
 public:
  // buffer: the compressed (or plain) bytes read at a time; an importer's 1 MiB takes a small
  // gzip file whole at the first read, a format sniffer's few kB only what it looks at.
  explicit Input(const std::string& path, size_t buffer = size_t{1} << 20)
      : path_(path), raw_(buffer) {
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
    // The first read decides: a large one (an importer's buffer, not a format sniffer's look at
    // the first bytes) of a small gzip file inflates it whole.
    decide_whole(n >= kWholeMinRead);
    if (whole_) {  // inflated whole by libdeflate
      const size_t k = std::min(n, whole_data_.size() - whole_pos_);
      std::memcpy(dst, whole_data_.data() + whole_pos_, k);
      whole_pos_ += k;
      return k;
    }
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
  // A small gzip file inflated at once (see inflate_whole), before any read(): the whole text,
  // which the caller then parses in place, and nothing left for read(). False (and nothing
  // consumed) for any other input. Saves the copy into the caller's buffer and its pages: after
  // a fork (HTA's worker pool in the same process) each page first written costs a fault
  // (issue 27).
  bool take_whole(std::string_view* text) {
    decide_whole(true);
    if (!whole_ || whole_pos_ != 0) return false;
    *text = std::string_view(whole_data_.data(), whole_data_.size());
    whole_pos_ = whole_data_.size();
    return true;
  }
  // File bytes consumed so far: compressed bytes for gzip (what progress counts against size()).
  int64_t disk_pos() const {
    if (whole_)
      return whole_data_.empty() ? size_
                                 : static_cast<int64_t>(static_cast<double>(size_) * whole_pos_ /
                                                        static_cast<double>(whole_data_.size()));
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
  // A small gzip file (a regular file of at most kWholeMax inflated bytes, by its trailer) is
  // inflated at once by libdeflate, twice zlib's speed with its CRC (issue 27). Anything it does
  // not take whole (a damaged member, trailing bytes, a larger output) is read by zlib's stream
  // from the start instead, so the errors are the zlib path's.
  static constexpr size_t kWholeMax = size_t{32} << 20;
  // Decided once, at the first read or take_whole: a format sniffer's small look (allowed false)
  // leaves the file to zlib's stream.
  void decide_whole(bool allowed) {
    if (!gzip_ || tried_whole_) return;
    tried_whole_ = true;
    if (allowed) inflate_whole();
  }
  static constexpr size_t kWholeMinRead = size_t{64} << 10;
  bool inflate_whole() {
#if defined(KERNALYSE_HAVE_LIBDEFLATE)
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) || size_ < 18 ||
        static_cast<size_t>(size_) > kWholeMax)
      return false;
    // The compressed bytes: those the constructor read when they are the whole file (a file
    // below raw_'s 1 MiB), else read again from the start.
    std::vector<char, UninitAllocator<char>> again;
    std::string_view comp(raw_.data(), avail_);
    if (start_ != 0 || raw_pos_ != size_ || avail_ != static_cast<size_t>(size_)) {
      again.resize(static_cast<size_t>(size_));
      size_t have = 0;
      while (have < again.size()) {
        ssize_t r =
            ::pread(fd_, again.data() + have, again.size() - have, static_cast<off_t>(have));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        have += static_cast<size_t>(r);
      }
      comp = std::string_view(again.data(), again.size());
    }
    uint32_t isize = 0;  // the last member's inflated size, mod 2^32: the first guess
    std::memcpy(&isize, comp.data() + comp.size() - 4, 4);
    if (isize > kWholeMax) return false;
    libdeflate_decompressor* d = libdeflate_alloc_decompressor();
    if (!d) return false;
    std::vector<char, UninitAllocator<char>> out(std::max<size_t>(isize, 4096));
    size_t in_off = 0, out_len = 0;
    bool ok = true;
    while (ok && in_off < comp.size()) {
      if (comp.size() - in_off < 2 || static_cast<unsigned char>(comp[in_off]) != 0x1f ||
          static_cast<unsigned char>(comp[in_off + 1]) != 0x8b) {
        ok = false;  // trailing bytes: zlib's path says so
        break;
      }
      size_t in_used = 0, out_used = 0;
      libdeflate_result r = libdeflate_gzip_decompress_ex(
          d, comp.data() + in_off, comp.size() - in_off, out.data() + out_len, out.size() - out_len,
          &in_used, &out_used);
      if (r == LIBDEFLATE_INSUFFICIENT_SPACE && out.size() < kWholeMax) {
        out.resize(std::min(out.size() * 2, kWholeMax));
        continue;
      }
      ok = r == LIBDEFLATE_SUCCESS;
      in_off += in_used, out_len += out_used;
    }
    libdeflate_free_decompressor(d);
    if (!ok) return false;
    out.resize(out_len);
    whole_data_ = std::move(out);
    whole_ = true;
    raw_pos_ = size_;
    return true;
#else
    return false;
#endif
  }
  bool whole_ = false, tried_whole_ = false;
  std::vector<char, UninitAllocator<char>> whole_data_;
  size_t whole_pos_ = 0;
  std::string path_;
  std::vector<char, UninitAllocator<char>> raw_;  // compressed (or sniffed plain) bytes read
  size_t start_ = 0, avail_ = 0;                  // unconsumed bytes of raw_ (plain files, fill())
  int64_t raw_pos_ = 0, size_ = 0;
  int fd_ = -1;
  bool gzip_ = false, zinit_ = false, member_done_ = false;
  z_stream zs_{};
};

}  // namespace kernalyse
