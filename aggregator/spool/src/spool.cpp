#include "kernalyse/spool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cerrno>
#include <cstring>

namespace kernalyse::spool {

Writer::~Writer() { close(); }

bool Writer::open(const std::string& path) {
  close();
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  path_ = path;
  return fd_ >= 0;
}

bool Writer::write_block(BlockType type, uint32_t count, const void* payload, size_t bytes) {
  if (fd_ < 0) return false;
  BlockHeader h{kMagic,
                kVersion,
                static_cast<uint16_t>(type),
                count,
                static_cast<uint32_t>(bytes),
                static_cast<uint32_t>(
                    crc32(0L, static_cast<const Bytef*>(payload), static_cast<uInt>(bytes)))};
  // One buffer, one write(): a block is either wholly in the kernel's page cache or torn at
  // the tail, which the reader detects by length and CRC.
  std::vector<char> buf(sizeof h + bytes);
  std::memcpy(buf.data(), &h, sizeof h);
  if (bytes) std::memcpy(buf.data() + sizeof h, payload, bytes);
  size_t off = 0;
  while (off < buf.size()) {
    ssize_t w = ::write(fd_, buf.data() + off, buf.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    off += static_cast<size_t>(w);
  }
  return true;
}

bool Writer::write_meta(const Meta& m) {
  std::string blob(reinterpret_cast<const char*>(&m.fixed), sizeof m.fixed);
  blob.append(m.host).push_back('\0');
  blob.append(m.command).push_back('\0');
  if (!m.rank_origin.empty()) blob.append(m.rank_origin).push_back('\0');
  return write_block(BlockType::Meta, 1, blob.data(), blob.size());
}

bool Writer::write_status(const StatusFixed& f, const std::string& line,
                          const std::string& device_name) {
  std::string blob(reinterpret_cast<const char*>(&f), sizeof f);
  blob.append(line).push_back('\0');
  blob.append(device_name).push_back('\0');
  return write_block(BlockType::Status, 1, blob.data(), blob.size());
}

void Writer::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

namespace {
template <typename T>
void append(std::vector<T>& out, const char* p, uint32_t count) {
  if (count == 0) return;  // an empty block: data() may be null, and memcpy(nullptr, ..) is UB
  size_t n = out.size();
  out.resize(n + count);
  std::memcpy(out.data() + n, p, count * sizeof(T));
}
// The whole file into `out`; false with `why` set if it cannot be read. O_NONBLOCK and the
// regular-file check: a FIFO or device named rank-N.kspool must not block the recovery.
bool read_whole(const std::string& path, std::vector<char>& out, std::string& why) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    why = std::string("cannot open: ") + std::strerror(errno);
    return false;
  }
  struct stat st {};
  bool ok = ::fstat(fd, &st) == 0;
  if (!ok) why = std::string("cannot stat: ") + std::strerror(errno);
  if (ok && !S_ISREG(st.st_mode)) {
    why = S_ISDIR(st.st_mode) ? "a directory, not a spool file" : "not a regular file";
    ok = false;
  }
  if (ok) out.reserve(static_cast<size_t>(st.st_size));
  char buf[1 << 16];
  while (ok) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      why = std::string("read error: ") + std::strerror(errno);
      ok = false;
    }
    if (n <= 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  ::close(fd);
  return ok;
}
}  // namespace

Contents read(const std::string& path) {
  Contents c;
  std::vector<char> data;
  if (!read_whole(path, data, c.problem)) {  // the reason, per file (--spool reports it)
    c.unreadable = true;
    c.truncated = true;
    return c;
  }
  size_t off = 0;
  auto stop = [&](const std::string& why) {
    c.truncated = true;
    c.problem = why + " at byte " + std::to_string(off);
  };
  while (off < data.size()) {
    if (data.size() - off < sizeof(BlockHeader)) return stop("torn block header"), c;
    BlockHeader h;
    std::memcpy(&h, data.data() + off, sizeof h);
    if (h.magic != kMagic) return stop("bad block magic"), c;
    if (h.version < kOldestVersion || h.version > kVersion)
      return stop("spool format version " + std::to_string(h.version) + " (this tool reads " +
                  std::to_string(kVersion) + ")"),
             c;
    if (data.size() - off - sizeof h < h.payload_bytes) return stop("torn block"), c;
    const char* p = data.data() + off + sizeof h;
    if (crc32(0L, reinterpret_cast<const Bytef*>(p), h.payload_bytes) != h.crc)
      return stop("block checksum mismatch"), c;
    size_t want = 0;
    switch (static_cast<BlockType>(h.type)) {
      case BlockType::Activities:
        want = h.count * sizeof(Activity);
        break;
      case BlockType::Launches:
        want = h.count * sizeof(Launch);
        break;
      case BlockType::Nccl:
        want = h.count * sizeof(Nccl);
        break;
      case BlockType::Ranges:
        want = h.count * sizeof(Range);
        break;
      case BlockType::Memory:
        want = h.count * sizeof(Memory);
        break;
      case BlockType::Counter:
        want = h.count * sizeof(Counter);
        break;
      case BlockType::CollMark:
        want = h.count * sizeof(CollMark);
        break;
      case BlockType::Status:
        want = h.count == 1 && h.payload_bytes >= sizeof(StatusFixed) + 2
                   ? h.payload_bytes
                   : size_t{h.payload_bytes} + 1;
        break;
      case BlockType::Strings:
        want = h.payload_bytes;
        break;
      case BlockType::Meta:
        want = h.count == 1 && h.payload_bytes >= sizeof(MetaFixed) + 2
                   ? h.payload_bytes
                   : size_t{h.payload_bytes} + 1;
        break;
      default:
        return stop("unknown block type"), c;
    }
    if (want != h.payload_bytes) return stop("block size does not match its records"), c;
    switch (static_cast<BlockType>(h.type)) {
      case BlockType::Activities:
        append(c.activities, p, h.count);
        break;
      case BlockType::Launches:
        append(c.launches, p, h.count);
        break;
      case BlockType::Nccl:
        append(c.nccl, p, h.count);
        break;
      case BlockType::Ranges:
        append(c.ranges, p, h.count);
        break;
      case BlockType::Memory:
        append(c.memory, p, h.count);
        break;
      case BlockType::Counter:
        append(c.counters, p, h.count);
        break;
      case BlockType::CollMark:
        append(c.coll_marks, p, h.count);
        break;
      case BlockType::Status: {
        StatusFixed f;
        std::memcpy(&f, p, sizeof f);
        const char* q = p + sizeof f;
        const char* end = p + h.payload_bytes;
        const char* z1 =
            static_cast<const char*>(std::memchr(q, '\0', static_cast<size_t>(end - q)));
        const char* z2 = z1 ? static_cast<const char*>(
                                  std::memchr(z1 + 1, '\0', static_cast<size_t>(end - z1 - 1)))
                            : nullptr;
        if (!z2) return stop("bad status block"), c;
        c.status = f;
        c.status_line.assign(q, z1);
        c.device_name.assign(z1 + 1, z2);
        c.has_status = true;
        break;
      }
      case BlockType::Meta: {
        Meta m;
        std::memcpy(&m.fixed, p, sizeof m.fixed);
        const char* q = p + sizeof m.fixed;
        const char* end = p + h.payload_bytes;
        const char* z1 =
            static_cast<const char*>(std::memchr(q, '\0', static_cast<size_t>(end - q)));
        const char* z2 = z1 ? static_cast<const char*>(
                                  std::memchr(z1 + 1, '\0', static_cast<size_t>(end - z1 - 1)))
                            : nullptr;
        if (!z2) return stop("bad meta block"), c;
        m.host.assign(q, z1);
        m.command.assign(z1 + 1, z2);
        if (const char* z3 = static_cast<const char*>(
                std::memchr(z2 + 1, '\0', static_cast<size_t>(end - z2 - 1))))
          m.rank_origin.assign(z2 + 1, z3);
        c.meta = std::move(m);
        c.has_meta = true;
        break;
      }
      case BlockType::Strings: {
        // count strings, each NUL-terminated, continuing the id sequence.
        const char* q = p;
        const char* end = p + h.payload_bytes;
        for (uint32_t i = 0; i < h.count; ++i) {
          const char* z =
              static_cast<const char*>(std::memchr(q, '\0', static_cast<size_t>(end - q)));
          if (!z) return stop("bad string block"), c;
          c.strings.emplace_back(q, z);
          q = z + 1;
        }
        break;
      }
    }
    off += sizeof h + h.payload_bytes;
    c.bytes_valid = static_cast<int64_t>(off);
    ++c.blocks;
  }
  return c;
}

}  // namespace kernalyse::spool
