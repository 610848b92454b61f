// Streaming Kineto importer. One pass over a refillable buffer: each top-level member and each
// trace event is parsed from a mark; when the buffer runs dry mid-unit the parser throws
// NeedMore, the buffer is refilled keeping bytes from the mark, and the unit is parsed again.
// Memory therefore grows with the events kept, never with the file size.
#include "kernalyse/kineto.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "kernalyse/kineto_args.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <numeric>
#include <regex>
#include <set>
#include <tuple>
#include <unordered_map>

#include "kernalyse/checked.h"
#include "kernalyse/store_io.h"
#include "kineto_spill.h"
#include "trace_input.h"

namespace kernalyse {
namespace arg = kineto_arg;  // the argument names (kineto_args.h)
namespace {

struct NeedMore {};
struct NotATrace {
  const char* what;
};
struct SyntaxError {
  const char* what;
  const char* at;
};

// ---------------------------------------------------------------- buffer + JSON cursor
// Largest single JSON unit kept in memory at once (docs/limits.md); the buffer is at most twice.
constexpr size_t kMaxJsonUnitBytes = size_t{64} << 20;

class Buffer {
 public:
  virtual ~Buffer() = default;
  char* begin = nullptr;
  char* end = nullptr;
  bool eof = false;
  int64_t consumed = 0;  // bytes discarded before `begin` (for error offsets)
  // Keeps [keep, end) and appends more input; returns the new position of `keep`.
  virtual char* refill(char* keep) = 0;
};

class StreamBuffer : public Buffer {
 public:
  StreamBuffer(Input* in, Progress* progress) : in_(in), progress_(progress) {}
  char* refill(char* keep) override {
    if (!started_) {
      started_ = true;
      std::string_view whole;
      // A small gzip file inflated at once is parsed where it lies: no 4 MiB buffer, no copy.
      if (in_->take_whole(&whole)) {
        begin = end = const_cast<char*>(whole.data());
        end += whole.size();
        eof = true;
        total_read = static_cast<int64_t>(whole.size());
        report();
        return begin;
      }
      store_.resize(4 << 20);
      begin = end = keep = store_.data();
    }
    if (store_.empty()) return keep;  // the whole text is in place: nothing more to read
    size_t kept = static_cast<size_t>(end - keep);
    // One JSON unit (a trace event, a top-level member) must fit in kMaxJsonUnitBytes: memory
    // stays bounded whatever the input (a 2 GB string, F16); docs/limits.md.
    if (kept >= kMaxJsonUnitBytes)
      throw Error(in_->path() + ": a single JSON value at byte " +
                  std::to_string(consumed + (keep - store_.data())) + " is larger than " +
                  std::to_string(kMaxJsonUnitBytes >> 20) + " MiB (the limit, docs/limits.md)");
    consumed += keep - store_.data();
    std::memmove(store_.data(), keep, kept);
    if (kept > store_.size() / 2) store_.resize(store_.size() * 2);  // a unit larger than half
    // Fills the whole buffer: a unit cut short is parsed again from its start after the refill,
    // so with a pipe's 64 KiB reads a 64 MiB unit was parsed 1,024 times (docs/limits.md).
    size_t n = 0;
    while (size_t r = kept + n < store_.size()
                          ? in_->read(store_.data() + kept + n, store_.size() - kept - n)
                          : 0)
      n += r;
    begin = store_.data();
    end = begin + kept + n;
    if (n == 0) eof = true;
    total_read += static_cast<int64_t>(n);
    report();
    return begin;
  }
  // Accounts the rest of the file (gzip trailer, buffered input) once the import is done.
  void progress_done() {
    if (progress_) progress_->advance(in_->size() - reported_);
    reported_ = in_->size();
  }
  int64_t total_read = 0;

 private:
  void report() {
    if (progress_) {  // once per refill (MBs), never per event
      int64_t pos = std::min(in_->disk_pos(), in_->size());
      progress_->advance(pos - reported_);
      reported_ = pos;
    }
  }
  bool started_ = false;
  Input* in_;
  Progress* progress_;
  int64_t reported_ = 0;
  std::vector<char, UninitAllocator<char>> store_;  // not zeroed: 4 MiB a file (issue 27)
};

class StringBuffer : public Buffer {
 public:
  explicit StringBuffer(std::string_view s) : data_(s) {
    begin = data_.data();
    end = begin + data_.size();
    eof = true;
  }
  char* refill(char* keep) override { return keep; }

 private:
  std::string data_;
};

inline bool is_ws(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }

// The first '"' or '\\' in [p, e), or e: 16 bytes at a time.
inline char* find_quote_or_backslash(char* p, char* e) {
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
  while (e - p >= 16) {
    __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
    int m = _mm_movemask_epi8(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)));
    if (m) return p + __builtin_ctz(static_cast<unsigned>(m));
    p += 16;
  }
#endif
  while (p < e && *p != '"' && *p != '\\') ++p;
  return p;
}

class Cursor {
 public:
  char* p = nullptr;
  char* e = nullptr;

  void ws() {
    while (true) {
      if (p == e) throw NeedMore{};
      if (!is_ws(*p)) return;
      ++p;
    }
  }
  // Inline: most tokens follow no whitespace; the loop for the rest.
  __attribute__((always_inline)) char peek() {
    if (p != e && static_cast<unsigned char>(*p) > ' ') return *p;
    ws();
    return *p;
  }
  void expect(char c, const char* what) {
    if (peek() != c) throw SyntaxError{what, p};
    ++p;
  }
  // String at p (must be '"'). Returns a view into the buffer, or into `scratch` if escaped.
  // Inline for a string whose end lies in the 32 bytes after its quote (every key and most
  // values, issue 28); str_long for the rest.
  __attribute__((always_inline)) std::string_view str(std::string& scratch) {
    if (peek() != '"') throw SyntaxError{"expected a string", p};
#if defined(__SSE2__)
    if (e - p > 32) {
      char* s = p + 1;
      const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\');
      __m128i x0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
      __m128i x1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
      uint32_t q = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(x0, quote))) |
                   static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(x1, quote))) << 16;
      uint32_t b = static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(x0, backslash))) |
                   static_cast<uint32_t>(_mm_movemask_epi8(_mm_cmpeq_epi8(x1, backslash))) << 16;
      // The first quote, with no backslash before it: bits below the quote's are (q & -q) - 1.
      if (q && (b & ((q & -q) - 1)) == 0) {
        char* end = s + __builtin_ctz(q);
        p = end + 1;
        return {s, static_cast<size_t>(end - s)};
      }
    }
#endif
    return str_long(scratch);
  }
  // str's general case: p at the opening quote.
  __attribute__((noinline)) std::string_view str_long(std::string& scratch) {
    char* s = ++p;
    // One pass for the closing quote and a backslash before it (issue 28: two memchr calls per
    // key were a tenth of the import).
    char* q = find_quote_or_backslash(s, e);
    if (q != e && *q == '"') {
      p = q + 1;
      return {s, static_cast<size_t>(q - s)};
    }
    // No closing quote in the buffer: more input, whatever the escapes before the end say.
    if (q == e || !std::memchr(q, '"', static_cast<size_t>(e - q))) throw NeedMore{};
    scratch.clear();
    char* r = s;
    while (true) {
      if (r == e) throw NeedMore{};
      char c = *r++;
      if (c == '"') break;
      if (c != '\\') {
        scratch += c;
        continue;
      }
      if (r == e) throw NeedMore{};
      char x = *r++;
      switch (x) {
        case '"':
          scratch += '"';
          break;
        case '\\':
          scratch += '\\';
          break;
        case '/':
          scratch += '/';
          break;
        case 'b':
          scratch += '\b';
          break;
        case 'f':
          scratch += '\f';
          break;
        case 'n':
          scratch += '\n';
          break;
        case 'r':
          scratch += '\r';
          break;
        case 't':
          scratch += '\t';
          break;
        case 'u': {
          uint32_t cp = hex4(r);
          r += 4;
          if (cp >= 0xD800 && cp < 0xDC00) {  // surrogate pair
            // Only a following "\u" needs more bytes: a lone high surrogate may end the string
            // (valid JSON; F11), and must not read as truncated input at the end of the file.
            if (e - r < 2) throw NeedMore{};
            if (r[0] == '\\' && r[1] == 'u') {
              if (e - r < 6) throw NeedMore{};
              uint32_t lo = hex4(r + 2);
              if (lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                r += 6;
              }
            }
          }
          if (cp >= 0xD800 && cp < 0xE000) cp = 0xFFFD;  // lone surrogate: keep strings UTF-8
          utf8(cp, scratch);
          break;
        }
        default:
          throw SyntaxError{"invalid escape in string", r - 1};
      }
    }
    p = r;
    return scratch;
  }
  // Raw number token.
  std::string_view number() {
    ws();
    char* s = p;
    while (true) {
      if (p == e) throw NeedMore{};
      char c = *p;
      if ((c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E')
        ++p;
      else
        break;
    }
    if (p == s) throw SyntaxError{"expected a value", s};
    return {s, static_cast<size_t>(p - s)};
  }
  // Fast paths for the numbers of nearly every event (issue 28): a plain integer, or microseconds
  // with at most three decimals, read in the one pass that finds the token's end. Each returns
  // false, p unmoved, for anything else (more digits, an exponent, a sign '+', the buffer's end
  // near), which number() with parse_int / parse_us_to_ns then reads: the same token, the same
  // value, as the token ends at the same byte (the first not in [0-9+-.eE]).
  bool int_fast(int64_t* v) {
    if (e - p < 24) return false;
    bool neg;
    int64_t x;
    char* q = leading_digits(p, 18, &neg, &x);
    if (!q || is_number_char(*q)) return false;
    *v = neg ? -x : x;
    p = q;
    return true;
  }
  bool us_fast(int64_t* ns) {
    if (e - p < 24) return false;
    bool neg;
    int64_t ip;
    // Up to 16 digits: epoch microseconds (1.7e15) are common. Past 9e15 us the general path
    // decides (its overflow rule is per digit).
    char* q = leading_digits(p, 16, &neg, &ip);
    if (!q || ip > 9'000'000'000'000'000 / 1000) return false;
    int64_t frac = 0;
    int fd = 0;
    if (*q == '.') {
      for (++q; is_digit(*q) && fd < 3; ++fd) frac = frac * 10 + (*q++ - '0');
      if (fd == 0) return false;
    }
    if (is_number_char(*q)) return false;
    for (; fd < 3; ++fd) frac *= 10;
    int64_t x = ip * 1000 + frac;
    *ns = neg ? -x : x;
    p = q;
    return true;
  }
  // An optional '-' and at most `max` digits at q: their value and the byte after them, or
  // nullptr when there is no digit.
  static char* leading_digits(char* q, int max, bool* neg, int64_t* value) {
    *neg = *q == '-';
    q += *neg;
    int64_t x = 0;
    char* d0 = q;
    while (is_digit(*q) && q - d0 < max) x = x * 10 + (*q++ - '0');
    *value = x;
    return q == d0 ? nullptr : q;
  }
  static bool is_digit(char c) { return c >= '0' && c <= '9'; }
  static bool is_number_char(char c) {
    return is_digit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
  }
  void literal() {
    ws();
    auto match = [&](std::string_view w) {
      if (static_cast<size_t>(e - p) < w.size()) throw NeedMore{};
      if (std::string_view(p, w.size()) != w) throw SyntaxError{"invalid literal", p};
      p += w.size();
    };
    switch (*p) {
      case 't':
        match("true");
        break;
      case 'f':
        match("false");
        break;
      case 'n':
        match("null");
        break;
      default:
        throw SyntaxError{"expected a value", p};
    }
  }
  void skip_string() {
    // p at '"'; find the closing quote that is not escaped.
    char* q = p + 1;
    while (true) {
      q = static_cast<char*>(std::memchr(q, '"', static_cast<size_t>(e - q)));
      if (!q) throw NeedMore{};
      char* b = q;
      while (b[-1] == '\\') --b;
      if (((q - b) & 1) == 0) break;
      ++q;
    }
    p = q + 1;
  }
  void skip_value() {
    char c = peek();
    if (c == '"') return skip_string();
    if (c == '{' || c == '[') {
      // The closers still expected, innermost last: "[1}" and "{]" are errors, not skipped.
      closers_.clear();
      while (true) {
        if (p == e) throw NeedMore{};
        char x = *p;
        if (x == '"') {
          skip_string();
          continue;
        }
        if (x == '{' || x == '[') closers_.push_back(x == '{' ? '}' : ']');
        if (x == '}' || x == ']') {
          if (closers_.back() != x) throw SyntaxError{"mismatched bracket", p};
          closers_.pop_back();
          if (closers_.empty()) {
            ++p;
            return;
          }
        }
        ++p;
      }
    }
    if (c == 't' || c == 'f' || c == 'n') return literal();
    number();
  }
  // Separator after a member/element: returns false at the closing bracket.
  bool next(char close) {
    char c = peek();
    if (c == ',') {
      ++p;
      return true;
    }
    if (c == close) {
      ++p;
      return false;
    }
    throw SyntaxError{close == '}' ? "expected ',' or '}'" : "expected ',' or ']'", p};
  }

 private:
  std::string closers_;  // skip_value's bracket stack (a member: no allocation per value)
  uint32_t hex4(char* r) {
    if (e - r < 4) throw NeedMore{};
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char h = r[i];
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= static_cast<uint32_t>(h - '0');
      else if (h >= 'a' && h <= 'f')
        v |= static_cast<uint32_t>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        v |= static_cast<uint32_t>(h - 'A' + 10);
      else
        throw SyntaxError{"invalid \\u escape", r};
    }
    return v;
  }
  static void utf8(uint32_t cp, std::string& out) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
};

bool parse_int(std::string_view t, int64_t* v) {
  if (t.size() > 2 && t[0] == '0' && (t[1] == 'x' || t[1] == 'X')) {
    auto r = std::from_chars(t.data() + 2, t.data() + t.size(), *v, 16);
    return r.ec == std::errc() && r.ptr == t.data() + t.size();
  }
  auto r = std::from_chars(t.data(), t.data() + t.size(), *v);
  if (r.ec == std::errc() && r.ptr == t.data() + t.size()) return true;
  // Integral values written as floats ("7.0") still count.
  int64_t ns;
  if (parse_us_to_ns(t, &ns) && ns % 1000 == 0) {
    *v = ns / 1000;
    return true;
  }
  return false;
}

// ---------------------------------------------------------------- one trace event
enum Field : uint8_t {
  kPh,
  kCat,
  kName,
  kPidStr,
  kTidStr,
  kColl,
  kDtype,
  kPgName,
  kPgDesc,
  kPgRanks,
  kArgName,
  kInputDims,  // cpu_op shapes (record_shapes), raw JSON text
  kInputType,
  kConcrete,
  kInSplits,  // all-to-all(v) "In split size" / "Out split size", raw text
  kOutSplits,
  kNumFields
};

// Its scalars apart from its strings: resetting both per event is ~30 stores, not a 376-byte
// temporary zeroed and copied with rep stos/movs (6 % of an import, issue 28).
struct RawEventScalars {
  int64_t ts = 0, dur = 0, pid = -1, tid = -1;
  bool has_ts = false, has_dur = false, has_pid = false;
  bool has_stream = false, has_device = false;
  int64_t stream = -1, device = -1, correlation = kNoCorrelation;
  int64_t external_id = -1;  // "External id": a cpu_op's call id, on launches the enclosing op's
  int64_t in_nelems = -1, out_nelems = -1, group_size = -1, seq = -1;
  int64_t in_bytes = -1, out_bytes = -1;
  bool has_nccl = false;
  uint64_t comms_id = 0;  // "Comms Id": PyTorch's cross-rank id of one collective (0: none)
  int64_t mem_device_type = -1, mem_device_id = -1, mem_total_allocated = -1;  // "[memory]"
  bool bad = false;  // a field had the wrong type
};

struct RawEvent : RawEventScalars {
  std::string_view s[kNumFields];
  void reset() {
    for (auto& x : s) x = {};
    static_cast<RawEventScalars&>(*this) = RawEventScalars{};
  }
};

// The length is a constant: the compiler compares inline, no call to memcmp per key (issue 28).
template <size_t N>
inline bool key_is(std::string_view k, const char (&w)[N]) {
  return k.size() == N - 1 && std::memcmp(k.data(), w, N - 1) == 0;
}

// The (length, first byte) pairs of the argument names EventParser::arg reads (kineto_arg::kAll
// and "name"): a key with none of them is skipped without that chain of comparisons. Most of a
// kernel's or an op's args ("queued", "grid", "Sequence number", ...) are such keys (issue 28).
struct ArgFilter {
  uint64_t by_length[32] = {};  // bit (first byte & 63) of the names of that length
  constexpr void add(std::string_view n) {
    if (n.empty() || n.size() >= 32) throw "an argument name outside the filter's lengths";
    by_length[n.size()] |= uint64_t{1} << (static_cast<unsigned char>(n[0]) & 63);
  }
  constexpr bool may_match(std::string_view k) const {
    return !k.empty() && k.size() < 32 &&
           (by_length[k.size()] >> (static_cast<unsigned char>(k[0]) & 63) & 1);
  }
};
constexpr ArgFilter make_arg_filter() {
  ArgFilter f;
  for (std::string_view n : arg::kAll) f.add(n);
  f.add("name");
  return f;
}
constexpr ArgFilter kArgFilter = make_arg_filter();
inline bool maybe_arg(std::string_view k) { return kArgFilter.may_match(k); }

class EventParser {
 public:
  explicit EventParser(Cursor* c) : c_(c) {}

  // Parses one event object at the cursor into ev. Non-object elements set ev.bad.
  void parse(RawEvent& ev) {
    ev.reset();
    char first = c_->peek();
    if (first != '{') {
      c_->skip_value();
      ev.bad = true;
      return;
    }
    ++c_->p;
    if (c_->peek() == '}') {
      ++c_->p;
      ev.bad = true;
      return;
    }
    do {
      std::string_view k = c_->str(key_scratch_);
      c_->expect(':', "expected ':'");
      member(ev, k);
    } while (c_->next('}'));
  }

 private:
  void string_field(RawEvent& ev, Field f) {
    if (c_->peek() == '"') {
      ev.s[f] = c_->str(scratch_[f]);
    } else {
      c_->skip_value();
      ev.bad = true;
    }
  }
  bool int_value(int64_t* v) {
    char c = c_->peek();
    if (c == '"') {
      std::string_view t = c_->str(key_scratch_);
      return parse_int(t, v);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return c_->int_fast(v) || parse_int(c_->number(), v);
    c_->skip_value();
    return false;
  }
  // An unsigned 64-bit id, as a number or a string of digits; anything else leaves *v alone.
  void uint64_value(uint64_t* v) {
    std::string_view t;
    if (c_->peek() == '"')
      t = c_->str(key_scratch_);
    else if (c_->peek() >= '0' && c_->peek() <= '9')
      t = c_->number();
    else
      return c_->skip_value();
    uint64_t x = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), x);
    if (ec == std::errc() && p == t.data() + t.size()) *v = x;
  }
  bool time_value(int64_t* ns) {
    char c = c_->peek();
    if (c == '-' || (c >= '0' && c <= '9'))
      return c_->us_fast(ns) || parse_us_to_ns(c_->number(), ns);
    c_->skip_value();
    return false;
  }
  // Raw text of any value (for "Process Group Ranks" given as a list).
  void raw_field(RawEvent& ev, Field f) {
    if (c_->peek() == '"') return string_field(ev, f);
    char* s = c_->p;
    c_->skip_value();
    ev.s[f] = std::string_view(s, static_cast<size_t>(c_->p - s));
  }

  void member(RawEvent& ev, std::string_view k) {
    switch (k.size()) {
      case 2:
        if (key_is(k, "ph")) return string_field(ev, kPh);
        if (key_is(k, "ts")) {
          ev.has_ts = time_value(&ev.ts);
          if (!ev.has_ts) ev.bad = true;
          return;
        }
        break;
      case 3:
        if (key_is(k, "cat")) return string_field(ev, kCat);
        if (key_is(k, "dur")) {
          ev.has_dur = time_value(&ev.dur);
          if (!ev.has_dur) ev.bad = true;
          return;
        }
        if (key_is(k, "pid")) return id_field(ev.pid, ev.s[kPidStr], kPidStr, &ev.has_pid);
        if (key_is(k, "tid")) return id_field(ev.tid, ev.s[kTidStr], kTidStr, nullptr);
        break;
      case 4:
        if (key_is(k, "name")) return string_field(ev, kName);
        if (key_is(k, "args")) return args(ev);
        break;
      default:
        break;
    }
    c_->skip_value();
  }
  // pid/tid are numbers in GPU/CPU events but strings such as "Spans" elsewhere.
  void id_field(int64_t& v, std::string_view& s, Field f, bool* has) {
    if (c_->peek() == '"') {
      s = c_->str(scratch_[f]);
      if (parse_int(s, &v) && has) *has = true;
      return;
    }
    bool ok = int_value(&v);
    if (has) *has = ok;
  }

  void args(RawEvent& ev) {
    if (c_->peek() != '{') {
      c_->skip_value();
      return;
    }
    ++c_->p;
    if (c_->peek() == '}') {
      ++c_->p;
      return;
    }
    do {
      std::string_view k = c_->str(key_scratch_);
      c_->expect(':', "expected ':'");
      arg(ev, k);
    } while (c_->next('}'));
  }

  // A name read here must be in kineto_arg::kAll (or "name"): kArgFilter is made of them.
  void arg(RawEvent& ev, std::string_view k) {
    if (!maybe_arg(k)) return c_->skip_value();
    int64_t v;
    if (key_is(k, arg::kStream)) {
      ev.has_stream = int_value(&v);
      if (ev.has_stream) ev.stream = v;
    } else if (key_is(k, arg::kDevice)) {
      ev.has_device = int_value(&v);
      if (ev.has_device) ev.device = v;
    } else if (key_is(k, arg::kCorrelation)) {
      if (int_value(&v)) ev.correlation = v;
    } else if (key_is(k, arg::kExternalId)) {
      if (int_value(&v)) ev.external_id = v;
    } else if (key_is(k, arg::kInputDims)) {
      raw_field(ev, kInputDims);
    } else if (key_is(k, arg::kInputType)) {
      raw_field(ev, kInputType);
    } else if (key_is(k, arg::kConcreteInputs)) {
      raw_field(ev, kConcrete);
    } else if (key_is(k, arg::kCollectiveName)) {
      ev.has_nccl = true;
      string_field(ev, kColl);
    } else if (key_is(k, arg::kInMsgNelems)) {
      if (int_value(&v)) ev.in_nelems = v;
    } else if (key_is(k, arg::kOutMsgNelems)) {
      if (int_value(&v)) ev.out_nelems = v;
    } else if (key_is(k, arg::kInMsgSize)) {
      if (int_value(&v)) ev.in_bytes = v;
    } else if (key_is(k, arg::kOutMsgSize)) {
      if (int_value(&v)) ev.out_bytes = v;
    } else if (key_is(k, arg::kGroupSize)) {
      if (int_value(&v)) ev.group_size = v;
    } else if (key_is(k, arg::kSeq) || key_is(k, arg::kSeqOld)) {
      if (int_value(&v)) ev.seq = v;
    } else if (key_is(k, arg::kCommsId)) {
      uint64_value(&ev.comms_id);
    } else if (key_is(k, arg::kInSplitSize)) {
      raw_field(ev, kInSplits);
    } else if (key_is(k, arg::kOutSplitSize)) {
      raw_field(ev, kOutSplits);
    } else if (key_is(k, arg::kDtype)) {
      string_field(ev, kDtype);
    } else if (key_is(k, arg::kPgName)) {
      ev.has_nccl = true;
      raw_field(ev, kPgName);
    } else if (key_is(k, arg::kPgDesc)) {
      raw_field(ev, kPgDesc);
    } else if (key_is(k, arg::kPgRanks)) {
      raw_field(ev, kPgRanks);
    } else if (key_is(k, "name")) {  // metadata: process_name's value ("RANK 1 - GPU")
      if (c_->peek() == '"')
        ev.s[kArgName] = c_->str(scratch_[kArgName]);
      else
        c_->skip_value();
    } else if (key_is(k, arg::kDeviceType)) {  // profile_memory "[memory]" events
      if (int_value(&v)) ev.mem_device_type = v;
    } else if (key_is(k, arg::kDeviceId)) {
      if (int_value(&v)) ev.mem_device_id = v;
    } else if (key_is(k, arg::kTotalAllocated)) {
      if (int_value(&v)) ev.mem_total_allocated = v;
    } else {
      c_->skip_value();
    }
  }

  Cursor* c_;
  std::string key_scratch_;
  std::string scratch_[kNumFields];
};

// ---------------------------------------------------------------- event → tables
// JSON text without the whitespace outside strings: pretty-printed and compact traces give the
// same interned shape text ("[[768],[788,768]]"), so equal shapes group together.
// Returns t itself when it has no whitespace (most shapes: compact traces), else the compacted
// text written into `scratch`: no string made per op.
std::string_view compact_json(std::string_view t, std::string& scratch) {
  if (std::none_of(t.begin(), t.end(), is_ws)) return t;
  std::string& o = scratch;
  o.assign(t.size(), '\0');  // written in place: no append per character
  char* w = o.data();
  bool in_str = false, esc = false;
  for (char c : t) {
    if (in_str) {
      *w++ = c;
      if (esc)
        esc = false;
      else if (c == '\\')
        esc = true;
      else if (c == '"')
        in_str = false;
    } else if (!is_ws(c)) {
      *w++ = c;
      in_str = c == '"';
    }
  }
  o.resize(static_cast<size_t>(w - o.data()));
  return o;
}

int64_t dtype_bytes(std::string_view d) {
  static const std::pair<std::string_view, int64_t> kSizes[] = {
      {"Float", 4}, {"float", 4},   {"Float32", 4},       {"BFloat16", 2},
      {"Half", 2},  {"Float16", 2}, {"Double", 8},        {"Int", 4},
      {"Long", 8},  {"Short", 2},   {"Byte", 1},          {"Char", 1},
      {"Bool", 1},  {"int8_t", 1},  {"Float8_e4m3fn", 1}, {"Float8_e5m2", 1}};
  for (const auto& [n, sz] : kSizes)
    if (d == n) return sz;
  return -1;
}

// Keeps the rows i of a table where keep[i]; returns how many were dropped. Columns that are
// empty (optional ones not filled by this importer) are left alone.
template <class Tab>
size_t keep_rows(Tab& t, const std::vector<char>& keep) {
  const size_t n = keep.size();
  size_t kept = 0;
  for_each_column(t, [&](const auto&, auto& col) {
    if (col.size() != n) return;
    size_t w = 0;
    for (size_t i = 0; i < n; ++i)
      if (keep[i]) col[w++] = col[i];
    col.resize(w);
    kept = w;
  });
  return n - kept;
}

// keep_rows for activities, with the NCCL rows that point at them dropped or renumbered.
size_t drop_activities(Store& s, const std::vector<char>& keep) {
  if (std::all_of(keep.begin(), keep.end(), [](char k) { return k != 0; })) return 0;
  std::vector<uint64_t> new_index(keep.size());
  uint64_t w = 0;
  for (size_t i = 0; i < keep.size(); ++i) new_index[i] = keep[i] ? w++ : UINT64_MAX;
  std::vector<char> keep_nccl(s.nccl.size());
  for (size_t i = 0; i < s.nccl.size(); ++i) {
    s.nccl.activity[i] = new_index[s.nccl.activity[i]];
    keep_nccl[i] = s.nccl.activity[i] != UINT64_MAX;
  }
  keep_rows(s.nccl, keep_nccl);
  return keep_rows(s.activities, keep);
}

class Importer {
 public:
  Importer(const std::string& name, const ImportOptions& opt)
      : name_(name), opt_(opt), classifier_(opt.classifier ? opt.classifier : &default_cls_) {}

  void run(Buffer& buf, ImportStats* stats);
  Store take() { return std::move(store_); }
  // Rows to the spill's sorters (which go to temporary files in `dir` every `chunk` rows); the
  // big tables are then written to `out` at the end (import_kineto_streamed). *whole: set when
  // the import is finished in memory after all (a smaller or a merged multi-rank trace).
  void stream_to(StoreStream* out, const std::string& dir, size_t chunk, bool* whole) {
    out_ = out;
    spill_ = std::make_unique<KinetoSpill>(dir, chunk);
    whole_ = whole;
    *whole_ = false;
  }

 private:
  enum class State { Start, TopMember, TopNext, EventsFirst, Event, EventsNext, Done };

  bool top_member(Cursor& c);  // true when it opened the traceEvents list
  void add_event(const RawEvent& ev);
  void add_nccl(const RawEvent& ev, size_t row);
  void add_memory(const RawEvent& ev);
  void add_process_name(const RawEvent& ev);
  bool split_ranks(const std::optional<int32_t>& fallback, ImportStats* stats);
  void finish(ImportStats* stats);
  void finish_streamed(ImportStats* stats);
  int64_t checked_base() const;
  void report(ImportStats* stats) const;
  // Rows stay in memory, as import_kineto_file keeps them, up to 64 runs' worth (256 Ki rows with
  // the default runs: a trace of up to about 100 MB, which then needs no temporary file); past
  // that they all move to the spill's sorters, and from then on every run's worth (at most 64 Ki
  // rows), so that the parser's columns stay small whatever the sorters hold.
  void maybe_spill() {
    if (!spilling_) {
      const size_t rows = store_.activities.size() + store_.launches.size() + pending_ops_.size();
      if (rows < 64 * spill_->chunk()) return;
      spilling_ = true;
    }
    const size_t chunk = std::min<size_t>(spill_->chunk(), size_t{1} << 16);  // 64 Ki rows
    if (store_.activities.size() >= chunk || store_.launches.size() >= chunk ||
        pending_ops_.size() >= chunk) {
      act_taken_ += store_.activities.size();
      spill_->take(parsed());
    }
  }
  ParsedRows parsed() {
    return ParsedRows{store_.activities, act_pid_,    store_.nccl,
                      store_.launches,   launch_ext_, pending_ops_};
  }
  std::optional<int32_t> file_rank(ImportStats* stats, int32_t* world) const;
  void add_base_time(int64_t base);
  // devices: the file's (rank, device) pairs when its activities are not in store_ (streamed).
  void rank_infos(const std::optional<int32_t>& rank, int32_t world, int64_t base,
                  const std::set<std::pair<int32_t, int32_t>>* devices = nullptr);
  std::string where(const Buffer& b, const char* at) const {
    return std::to_string(b.consumed + (at - b.begin));
  }

  std::string name_;
  ImportOptions opt_;
  Classifier default_cls_;
  const Classifier* classifier_;
  Store store_;
  std::vector<int8_t> category_of_;  // per name id; -1 = not classified yet
  uint32_t gpu_memory_name_ = 0;     // interned on the first counter (0: not yet)
  // Merged multi-rank files (TraceLens "fusion": each rank's events under its own pids, named
  // by process_name "RANK n - GPU/CPU"): pid → rank, and each row's pid until finish() maps it.
  std::unordered_map<int64_t, int32_t> rank_of_pid_;
  std::vector<int64_t> act_pid_, ann_pid_, cnt_pid_;
  // cpu_op calls by External id, and each launch's External id: joined in finish() into /ops
  // (only ops that launched GPU work are kept, with their shapes as raw JSON text).
  // Their texts are ids into op_strings_, a table of the pending ops' own (PendingOp). The join
  // interns the kept ops' texts into the store's table in the order it did before, so the store
  // is the same.
  PendingOps pending_ops_;
  StringTable op_strings_;
  uint32_t intern_shape(std::string_view t) { return op_strings_.intern(compact_json(t, shape_)); }
  std::string shape_;  // compact_json's scratch
  std::vector<int64_t> launch_ext_;
  void join_ops();
  bool have_events_key_ = false;
  bool top_is_array_ = false;
  std::string distributed_info_, device_properties_;
  int64_t base_time_ns_ = 0;
  bool has_base_time_ = false;
  bool synthetic_ = false;
  std::string kernalyse_clock_;  // a kernalyse export's clock record (docs/exports.md), raw JSON
  int64_t events_ = 0, malformed_ = 0, ignored_ = 0;
  std::string key_scratch_;
  // Streamed (import_kineto_streamed): the rows on disk, the activities moved there so far (an
  // NCCL row names its activity by its number in the file), and the store written at the end.
  std::unique_ptr<KinetoSpill> spill_;
  uint64_t act_taken_ = 0;
  bool spilling_ = false;  // rows have gone to the spill (the trace is past the in-memory budget)
  bool* whole_ = nullptr;  // stream_to's
  StoreStream* out_ = nullptr;
};

bool Importer::top_member(Cursor& c) {
  std::string_view k = c.str(key_scratch_);
  c.expect(':', "expected ':'");
  if (k == "traceEvents") {
    // Valid JSON with a non-list traceEvents is not a trace; say so, not "invalid JSON".
    if (c.peek() != '[') throw NotATrace{"traceEvents is not a list"};
    ++c.p;
    have_events_key_ = true;
    return true;
  }
  char* s = c.p;
  c.skip_value();
  std::string_view raw(s, static_cast<size_t>(c.p - s));
  if (k == "distributedInfo") {
    distributed_info_.assign(raw);
  } else if (k == "deviceProperties") {
    device_properties_.assign(raw);
  } else if (k == "baseTimeNanoseconds") {
    std::string_view t = raw;
    while (!t.empty() && is_ws(t.front())) t.remove_prefix(1);
    int64_t v;
    if (parse_int(t, &v)) {
      base_time_ns_ = v;
      has_base_time_ = true;
    }
  } else if (k == "kernalyseSynthetic") {
    synthetic_ = raw.find("true") != std::string_view::npos;
  } else if (k == "kernalyseClock") {
    kernalyse_clock_.assign(raw);
  }
  return false;
}

void Importer::run(Buffer& buf, ImportStats* stats) {
  Cursor c;
  RawEvent ev;
  EventParser ep(&c);
  State st = State::Start;
  c.p = buf.begin;
  c.e = buf.end;
  if (buf.begin == buf.end && !buf.eof) {
    c.p = buf.refill(buf.begin);
    c.e = buf.end;
  }
  if (buf.begin == buf.end) throw Error(name_ + ": empty file");
  // Skip a UTF-8 byte-order mark.
  if (c.e - c.p >= 3 && std::memcmp(c.p, "\xEF\xBB\xBF", 3) == 0) c.p += 3;

  while (st != State::Done) {
    // Whitespace between units is dropped here, refill by refill, so a long run of it never
    // accumulates in the buffer as part of the next unit (F16).
    // That run counts against the unit limit too: a gigabyte of gzip-compressed spaces is
    // refused after kMaxJsonUnitBytes, not decompressed for seconds.
    for (size_t run = 0;;) {
      char* s = c.p;
      while (c.p < c.e && is_ws(*c.p)) ++c.p;
      run += static_cast<size_t>(c.p - s);
      if (run >= kMaxJsonUnitBytes)
        throw Error(name_ + ": more than " + std::to_string(kMaxJsonUnitBytes >> 20) +
                    " MiB of whitespace before byte " + where(buf, c.p) +
                    " (the JSON unit limit, docs/limits.md)");
      if (c.p < c.e || buf.eof) break;
      c.p = buf.refill(c.p);
      c.e = buf.end;
    }
    char* mark = c.p;
    try {
      switch (st) {
        case State::Start: {
          char ch = c.peek();
          if (ch == '[') {  // bare JSON-array trace format
            ++c.p;
            top_is_array_ = have_events_key_ = true;
            st = State::EventsFirst;
          } else if (ch == '{') {
            ++c.p;
            st = c.peek() == '}' ? (++c.p, State::Done) : State::TopMember;
          } else {
            throw SyntaxError{"not a JSON object or array", c.p};
          }
          break;
        }
        case State::TopMember:
          st = top_member(c) ? State::EventsFirst : State::TopNext;
          break;
        case State::TopNext:
          st = c.next('}') ? State::TopMember : State::Done;
          break;
        case State::EventsFirst:
          if (c.peek() == ']') {
            ++c.p;
            st = top_is_array_ ? State::Done : State::TopNext;
          } else {
            st = State::Event;
          }
          break;
        case State::Event:
          ep.parse(ev);
          ++events_;
          add_event(ev);
          if (spill_) maybe_spill();
          st = State::EventsNext;
          break;
        case State::EventsNext:
          if (c.next(']')) {
            st = State::Event;
          } else {
            st = top_is_array_ ? State::Done : State::TopNext;
          }
          break;
        case State::Done:
          break;
      }
    } catch (const NeedMore&) {
      // The unit was incomplete; nothing was committed (add_event runs only after a complete
      // parse), so it is simply parsed again from the mark after the refill.
      if (buf.eof) {
        throw Error(name_ + ": truncated JSON: input ends at byte " + where(buf, buf.end) +
                    " inside " + (st == State::Event ? "a trace event" : "the top-level object"));
      }
      c.p = buf.refill(mark);
      c.e = buf.end;
      if (buf.eof && c.p == c.e) {
        throw Error(name_ + ": truncated JSON: input ends at byte " + where(buf, buf.end));
      }
    } catch (const SyntaxError& se) {
      throw Error(name_ + ": invalid JSON at byte " + where(buf, se.at) + ": " + se.what);
    } catch (const NotATrace& nt) {
      throw Error(name_ + ": not a Chrome/Kineto trace (" + nt.what + ")");
    }
  }
  // Only whitespace may follow the top-level value.
  while (true) {
    while (c.p < c.e && is_ws(*c.p)) ++c.p;
    if (c.p < c.e) {
      throw Error(name_ + ": invalid JSON at byte " + where(buf, c.p) +
                  ": unexpected data after the top-level value");
    }
    if (buf.eof) break;
    c.p = buf.refill(c.p);
    c.e = buf.end;
  }
  if (!have_events_key_) throw Error(name_ + ": not a Chrome/Kineto trace (no traceEvents list)");
  if (spill_)
    finish_streamed(stats);
  else
    finish(stats);
}

inline bool starts_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && std::memcmp(s.data(), p.data(), p.size()) == 0;
}

// The /nccl row of activity `row` from the event's NCCL args.
void Importer::add_nccl(const RawEvent& ev, size_t row) {
  NcclInfo& n = store_.nccl;
  n.op_id.push_back(ev.comms_id);
  n.in_splits_id.push_back(store_.strings.intern(ev.s[kInSplits]));
  n.out_splits_id.push_back(store_.strings.intern(ev.s[kOutSplits]));
  n.activity.push_back(row);
  n.collective_id.push_back(store_.strings.intern(ev.s[kColl]));
  n.seq.push_back(ev.seq);
  n.pg_name_id.push_back(store_.strings.intern(ev.s[kPgName]));
  n.pg_desc_id.push_back(store_.strings.intern(ev.s[kPgDesc]));
  n.pg_ranks_id.push_back(store_.strings.intern(ev.s[kPgRanks]));
  n.group_size.push_back(narrow<int32_t>(ev.group_size).value_or(-1));
  n.in_nelems.push_back(ev.in_nelems);
  n.out_nelems.push_back(ev.out_nelems);
  int64_t bytes = std::max(ev.in_bytes, ev.out_bytes);
  int64_t esize = dtype_bytes(ev.s[kDtype]);
  // nelems × element size; a product past int64 is "unknown" (-1), never a wrapped value.
  if (bytes < 0 && esize > 0 && std::max(ev.in_nelems, ev.out_nelems) >= 0 &&
      !checked_mul(std::max(ev.in_nelems, ev.out_nelems), esize, &bytes))
    bytes = -1;
  n.msg_bytes.push_back(bytes);
  n.dtype_id.push_back(store_.strings.intern(ev.s[kDtype]));
}

void Importer::add_event(const RawEvent& ev) {
  if (ev.bad) {
    ++malformed_;
    return;
  }
  std::string_view ph = ev.s[kPh], cat = ev.s[kCat];
  if ((ph == "i" || ph == "I") && ev.s[kName] == "[memory]") return add_memory(ev);
  if (ph == "M" && ev.s[kName] == "process_name" && ev.has_pid) return add_process_name(ev);
  if (ph != "X") {  // metadata, flows, instants, counters: not needed for analysis
    ++ignored_;
    return;
  }
  // ts + dur must not wrap: an event past the supported time range is malformed (limits.md).
  const std::optional<int64_t> end =
      ev.has_ts && ev.has_dur && ev.dur >= 0 ? time_end(ev.ts, ev.dur) : std::nullopt;
  if (!end) {
    ++malformed_;
    return;
  }
  // key_is: comparisons of constant length inline, no memcmp call per category (most events
  // are cpu_op, which used to be compared against every name below by memcmp).
  int kind = -1;
  if (key_is(cat, "kernel") || key_is(cat, "Kernel"))
    kind = static_cast<int>(Kind::Kernel);
  else if (key_is(cat, "gpu_memcpy") || key_is(cat, "Memcpy"))
    kind = static_cast<int>(Kind::Memcpy);
  else if (key_is(cat, "gpu_memset") || key_is(cat, "Memset"))
    kind = static_cast<int>(Kind::Memset);
  else if (key_is(cat, "cuda_sync"))
    kind = static_cast<int>(Kind::Sync);

  // HTA counts any complete event with an integer stream arg as GPU work; keep such host
  // events as HostOnStream (ignored by the native analyses) so --compat hta can reproduce it.
  // The Kineto of 2021 wrote launches as "Runtime" (and steps as "Operator", below).
  const bool launch =
      key_is(cat, "cuda_runtime") || key_is(cat, "cuda_driver") || key_is(cat, "Runtime");
  bool host_on_stream = kind < 0 && ev.has_stream && ev.stream >= 0 && !launch;
  if (host_on_stream) kind = static_cast<int>(Kind::HostOnStream);
  if (kind >= 0) {
    int64_t device = ev.has_device ? ev.device : (ev.has_pid && !host_on_stream ? ev.pid : -1);
    int64_t stream = ev.has_stream ? ev.stream : -1;
    // CUPTI's context-wide synchronisation ("Context Sync") names no stream: 4294967295, the
    // uint32 -1. Kept as stream -1 (the same 32 bits; exports write it back), since HTA counts it
    // as GPU time and --compat hta must see it.
    const bool context_sync = kind == static_cast<int>(Kind::Sync) && stream == 4294967295;
    if (context_sync) stream = -1;
    // A GPU event must say where it ran, in int32 (4294967296 is not device 0).
    if ((device < 0 && !host_on_stream) || (stream < 0 && !context_sync) ||
        !narrow<int32_t>(device) || !narrow<int32_t>(stream)) {
      ++malformed_;
      return;
    }
    Activities& a = store_.activities;
    uint32_t name = store_.strings.intern(ev.s[kName]);
    if (name >= category_of_.size()) category_of_.resize(name + 1, -1);
    if (category_of_[name] < 0) {
      category_of_[name] =
          static_cast<int8_t>(classifier_->classify(static_cast<Kind>(kind), ev.s[kName]));
    }
    // NCCL metadata on a kernel, or on a copy (a copy-engine collective: NCCL >= 2.29 runs some
    // collectives as copies, no kernel at all); such a copy is communication.
    if (ev.has_nccl &&
        (kind == static_cast<int>(Kind::Kernel) || kind == static_cast<int>(Kind::Memcpy)))
      add_nccl(ev, act_taken_ + a.size());
    a.rank.push_back(0);
    act_pid_.push_back(ev.pid);
    a.device.push_back(static_cast<int32_t>(device));
    a.stream.push_back(static_cast<int32_t>(stream));
    a.kind.push_back(static_cast<uint8_t>(kind));
    const bool ce_collective = ev.has_nccl && kind == static_cast<int>(Kind::Memcpy);
    a.category.push_back(ce_collective ? static_cast<uint8_t>(Category::Communication)
                                       : static_cast<uint8_t>(category_of_[name]));
    a.start_ns.push_back(ev.ts);
    a.end_ns.push_back(*end);
    a.name_id.push_back(name);
    a.correlation.push_back(ev.correlation);
    if (opt_.gpu_event) opt_.gpu_event(name_, static_cast<int32_t>(stream), ev.correlation);
    return;
  }
  if (launch) {
    LaunchCalls& l = store_.launches;
    l.rank.push_back(0);
    l.pid.push_back(ev.pid);
    l.tid.push_back(ev.tid);
    l.start_ns.push_back(ev.ts);
    l.end_ns.push_back(*end);
    l.name_id.push_back(store_.strings.intern(ev.s[kName]));
    l.correlation.push_back(ev.correlation);
    launch_ext_.push_back(ev.external_id);
    return;
  }
  if (key_is(cat, "cpu_op") && ev.external_id >= 0 && opt_.ops) {
    // Counted as ignored like any other event the store does not keep as a row of its own;
    // what the performance model needs of it goes to /ops when it launched GPU work.
    pending_ops_.insert_or_assign(
        ev.external_id, PendingOp{ev.pid, ev.tid, ev.ts, *end, op_strings_.intern(ev.s[kName]),
                                  intern_shape(ev.s[kInputDims]), intern_shape(ev.s[kInputType]),
                                  intern_shape(ev.s[kConcrete])});
  }
  AnnotationKind ak;
  int32_t step = kNoStep;
  if (key_is(cat, "user_annotation") ||
      (key_is(cat, "Operator") && starts_with(ev.s[kName], "ProfilerStep#"))) {
    ak = AnnotationKind::User;
    if (starts_with(ev.s[kName], "ProfilerStep#")) {
      int64_t n;
      if (parse_int(ev.s[kName].substr(13), &n) && narrow<int32_t>(n) && n != kNoStep) {
        ak = AnnotationKind::Step;
        step = static_cast<int32_t>(n);
      }
    }
  } else if (key_is(cat, "gpu_user_annotation")) {
    ak = AnnotationKind::GpuUser;
  } else {
    ++ignored_;  // cpu_op, python_function, Trace, ...: well-formed but not kept
    return;
  }
  Annotations& an = store_.annotations;
  an.rank.push_back(0);
  ann_pid_.push_back(ev.pid);
  an.kind.push_back(static_cast<uint8_t>(ak));
  bool gpu = ak == AnnotationKind::GpuUser;
  an.pid.push_back(gpu && ev.has_device ? ev.device : ev.pid);
  an.tid.push_back(gpu && ev.has_stream ? ev.stream : ev.tid);
  an.start_ns.push_back(ev.ts);
  an.end_ns.push_back(*end);
  an.name_id.push_back(store_.strings.intern(ev.s[kName]));
  an.step.push_back(step);
}

// PyTorch's profile_memory instant: one per allocation or free, args "Device Type" (c10
// DeviceType: 1 = CUDA, also HIP on ROCm builds), "Device Id", "Bytes" (negative for a free) and,
// since PyTorch 1.10, "Total Allocated" / "Total Reserved" after the change. "Total Allocated" is
// the step function we keep; events without it (older PyTorch) cannot give absolute values.
void Importer::add_memory(const RawEvent& ev) {
  if (ev.mem_device_type != 1 || ev.mem_total_allocated < 0) {  // CPU memory, or no total
    ++ignored_;
    return;
  }
  if (!ev.has_ts || !time_in_range(ev.ts) || ev.mem_device_id < 0 || ev.mem_device_id > INT32_MAX) {
    ++malformed_;
    return;
  }
  if (gpu_memory_name_ == 0) gpu_memory_name_ = store_.strings.intern(kCounterGpuMemory);
  Counters& c = store_.counters;
  c.rank.push_back(0);
  cnt_pid_.push_back(ev.pid);
  c.device.push_back(static_cast<int32_t>(ev.mem_device_id));
  c.name_id.push_back(gpu_memory_name_);
  c.ts_ns.push_back(ev.ts);
  c.value.push_back(ev.mem_total_allocated);
}

void Importer::add_process_name(const RawEvent& ev) {
  ++ignored_;
  std::string_view n = ev.s[kArgName];
  if (!starts_with(n, "RANK ")) return;
  n.remove_prefix(5);
  size_t d = 0;
  while (d < n.size() && n[d] >= '0' && n[d] <= '9') ++d;
  int64_t r;
  if (d == 0 || d > 9 || (d < n.size() && n[d] != ' ') || !parse_int(n.substr(0, d), &r)) return;
  rank_of_pid_[ev.pid] = static_cast<int32_t>(r);
}

// A merged multi-rank file: every row takes the rank its pid's process_name gives (rows of other
// pids the file-level rank, if any). Returns false when the file names no ranks this way.
bool Importer::split_ranks(const std::optional<int32_t>& fallback, ImportStats* stats) {
  if (rank_of_pid_.empty()) return false;
  std::set<int64_t> unmapped;
  auto rank_of = [&](int64_t pid) {
    auto it = rank_of_pid_.find(pid);
    if (it != rank_of_pid_.end()) return it->second;
    unmapped.insert(pid);
    return fallback.value_or(-1);
  };
  Activities& a = store_.activities;
  for (size_t i = 0; i < a.size(); ++i) a.rank[i] = rank_of(act_pid_[i]);
  LaunchCalls& l = store_.launches;
  for (size_t i = 0; i < l.size(); ++i) l.rank[i] = rank_of(l.pid[i]);
  Annotations& an = store_.annotations;
  for (size_t i = 0; i < an.size(); ++i) an.rank[i] = rank_of(ann_pid_[i]);
  Counters& cn = store_.counters;
  for (size_t i = 0; i < cn.size(); ++i) cn.rank[i] = rank_of(cnt_pid_[i]);
  Ops& op = store_.ops;
  for (size_t i = 0; i < op.size(); ++i) op.rank[i] = rank_of(op.pid[i]);
  if (!unmapped.empty() && !fallback)
    throw NoRankError(
        name_ + ": events of pid " + std::to_string(*unmapped.begin()) +
        " are under no \"RANK n\" process of this merged multi-rank file; pass --rank N "
        "for them");
  if (stats)
    stats->notes.push_back(name_ +
                           ": a merged multi-rank trace: " + std::to_string(rank_of_pid_.size()) +
                           " processes named \"RANK n\", imported as separate ranks");
  return true;
}

// One /ops row per launch whose External id names a cpu_op of the trace (the innermost op
// enclosing the launch: PyTorch pushes each op's id as CUPTI's external correlation).
void Importer::join_ops() {
  const LaunchCalls& l = store_.launches;
  Ops& o = store_.ops;
  for (size_t i = 0; i < l.size() && i < launch_ext_.size(); ++i) {
    if (launch_ext_[i] < 0 || l.correlation[i] == kNoCorrelation) continue;
    auto it = pending_ops_.find(launch_ext_[i]);
    if (it == pending_ops_.end()) continue;
    const PendingOp& p = it->second;
    o.rank.push_back(0);
    o.pid.push_back(p.pid);
    o.tid.push_back(p.tid);
    o.start_ns.push_back(p.start);
    o.end_ns.push_back(p.end);
    o.name_id.push_back(store_.strings.intern(op_strings_.at(p.name)));
    o.external_id.push_back(launch_ext_[i]);
    o.correlation.push_back(l.correlation[i]);
    o.dims_id.push_back(store_.strings.intern(op_strings_.at(p.dims)));
    o.types_id.push_back(store_.strings.intern(op_strings_.at(p.types)));
    o.concrete_id.push_back(store_.strings.intern(op_strings_.at(p.concrete)));
  }
  std::unordered_map<int64_t, PendingOp>().swap(pending_ops_);
  op_strings_ = StringTable();
  std::vector<int64_t>().swap(launch_ext_);
}

// Rank: distributedInfo, then --rank, then the file name (with a warning); none for a merged
// multi-rank file (split_ranks names them). *world: distributedInfo.world_size, else -1.
std::optional<int32_t> Importer::file_rank(ImportStats* stats, int32_t* world_out) const {
  std::optional<int32_t> rank;
  int32_t world = -1;
  if (!distributed_info_.empty()) {
    auto j = nlohmann::json::parse(distributed_info_, nullptr, false);
    // An integer that does not fit int32 is an error, not its low 32 bits (4294967296 ≠ rank 0).
    auto int32_member = [&](const char* key) -> std::optional<int32_t> {
      if (!j.contains(key) || !j[key].is_number_integer()) return std::nullopt;
      std::optional<int32_t> v;
      if (!j[key].is_number_unsigned() || j[key].get<uint64_t>() <= INT32_MAX)
        v = narrow<int32_t>(j[key].get<int64_t>());
      if (!v)
        throw Error(name_ + ": distributedInfo." + key + " " + j[key].dump() +
                    " is out of range (largest 2147483647)");
      return v;
    };
    if (j.is_object()) {
      rank = int32_member("rank");
      world = int32_member("world_size").value_or(-1);
    }
  }
  if (!rank && opt_.rank) rank = opt_.rank;
  if (!rank) {
    rank = rank_from_filename(name_);
    if (rank && stats) {
      stats->warnings.push_back(name_ + ": no distributedInfo.rank; rank " + std::to_string(*rank) +
                                " taken from the file name");
    }
  }
  const bool merged = !rank_of_pid_.empty();  // ranks named per process (split_ranks)
  if (!rank && opt_.only_input && !merged) {
    rank = 0;
    if (stats)
      stats->notes.push_back(name_ +
                             ": no rank in the trace or its name; the only input, taken "
                             "as rank 0");
  }
  if (!rank && !merged) {
    throw NoRankError(name_ +
                      ": cannot tell the rank (no distributedInfo.rank, none in the file "
                      "name); pass --rank N");
  }
  if (rank && *rank < 0) throw Error(name_ + ": negative rank " + std::to_string(*rank));
  *world_out = world;
  return rank;
}

// Kineto's ts relative to baseTimeNanoseconds, moved to the epoch.
void Importer::add_base_time(int64_t base) {
  Activities& a = store_.activities;
  LaunchCalls& l = store_.launches;
  Annotations& an = store_.annotations;
  Counters& cn = store_.counters;
  Ops& op = store_.ops;
  // Both terms are in range, so the sum cannot overflow; a shifted time past the range makes
  // its row malformed (dropped and counted), never wrapped.
  auto shift = [base](std::vector<int64_t>& v, std::vector<char>& keep) {
    keep.resize(v.size(), 1);
    for (size_t i = 0; i < v.size(); ++i) {
      v[i] += base;
      if (!time_in_range(v[i])) keep[i] = 0;
    }
  };
  std::vector<char> ka, kl, kn, kc, ko;
  shift(a.start_ns, ka), shift(a.end_ns, ka), shift(l.start_ns, kl), shift(l.end_ns, kl),
      shift(an.start_ns, kn), shift(an.end_ns, kn), shift(cn.ts_ns, kc);
  shift(op.start_ns, ko), shift(op.end_ns, ko);
  malformed_ += static_cast<int64_t>(drop_activities(store_, ka) + keep_rows(l, kl) +
                                     keep_rows(an, kn) + keep_rows(cn, kc));
  keep_rows(op, ko);  // derived rows: their cpu_op events were counted already
}

void Importer::rank_infos(const std::optional<int32_t>& rank, int32_t world, int64_t base,
                          const std::set<std::pair<int32_t, int32_t>>* devices) {
  const Activities& a = store_.activities;
  const LaunchCalls& l = store_.launches;
  const Annotations& an = store_.annotations;
  const Counters& cn = store_.counters;
  const bool merged = !rank_of_pid_.empty();  // ranks named per process (split_ranks)
  // One RankInfo per rank (a merged multi-rank file has several); the file-level event counts
  // go to the first, since events are not attributed to ranks before they are parsed.
  std::set<int32_t> ranks;
  if (rank && !merged) ranks.insert(*rank);
  for (auto* col : {&a.rank, &l.rank, &an.rank, &cn.rank}) ranks.insert(col->begin(), col->end());
  for (const auto& [pid, r] : rank_of_pid_) ranks.insert(r);
  std::string device_name;
  if (!device_properties_.empty()) {
    auto j = nlohmann::json::parse(device_properties_, nullptr, false);
    if (j.is_array() && !j.empty() && j[0].is_object() && j[0].contains("name") &&
        j[0]["name"].is_string())
      device_name = j[0]["name"].get<std::string>();
  }
  const nlohmann::json clock = kernalyse_clock_.empty()
                                   ? nlohmann::json()
                                   : nlohmann::json::parse(kernalyse_clock_, nullptr, false);
  store_.ranks.clear();
  for (int32_t r : ranks) {
    RankInfo info;
    info.rank = r;
    info.world_size = merged ? static_cast<int32_t>(ranks.size()) : world;
    info.source = name_;
    info.host = host_from_filename(name_);
    std::vector<int32_t> devs;
    for (size_t i = 0; i < a.size(); ++i)
      if (a.rank[i] == r) devs.push_back(a.device[i]);
    if (devices)
      for (const auto& [dr, d] : *devices)
        if (dr == r) devs.push_back(d);
    std::sort(devs.begin(), devs.end());
    devs.erase(std::unique(devs.begin(), devs.end()), devs.end());
    for (size_t i = 0; i < devs.size(); ++i) {
      if (i) info.devices += ',';
      info.devices += std::to_string(devs[i]);
    }
    info.device_name = device_name;
    info.base_time_ns = base;
    info.clock_method = "none (recording host wall clock, not aligned across ranks)";
    // A kernalyse export carries times already on one timeline: keep saying so (and its ±, host),
    // so that --align auto does not infer again on top of an alignment.
    if (clock.is_object() && clock.contains("clock_method") && clock["clock_method"].is_string()) {
      std::string m = clock["clock_method"].get<std::string>();
      if (!m.empty() && m.rfind("none", 0) != 0) {
        info.clock_method = m + " (times as exported by kernalyse)";
        if (clock.contains("clock_uncertainty_ns") &&
            clock["clock_uncertainty_ns"].is_number_integer())
          info.clock_uncertainty_ns = clock["clock_uncertainty_ns"].get<int64_t>();
      }
      if (clock.contains("host") && clock["host"].is_string())
        info.host = clock["host"].get<std::string>();
    }
    info.emulated = synthetic_;
    if (store_.ranks.empty()) {
      info.events_total = events_;
      info.events_malformed = malformed_;
      info.events_ignored = ignored_;
    }
    store_.ranks.push_back(info);
  }
}

// Kineto's ts is relative to baseTimeNanoseconds when present, else absolute epoch µs.
int64_t Importer::checked_base() const {
  const int64_t base = has_base_time_ ? base_time_ns_ : 0;
  if (!time_in_range(base))
    throw Error(name_ + ": baseTimeNanoseconds " + std::to_string(base) +
                " is outside the supported time range (|t| < 2^62 ns, docs/limits.md)");
  return base;
}

void Importer::report(ImportStats* stats) const {
  if (!stats) return;
  stats->events += events_;
  stats->malformed += malformed_;
  if (malformed_ > 0) {
    stats->warnings.push_back(name_ + ": " + std::to_string(malformed_) + " of " +
                              std::to_string(events_) + " events malformed and skipped");
  }
}

void Importer::finish(ImportStats* stats) {
  int32_t world = -1;
  const std::optional<int32_t> rank = file_rank(stats, &world);
  const int64_t base = checked_base();
  join_ops();
  Activities& a = store_.activities;
  LaunchCalls& l = store_.launches;
  Annotations& an = store_.annotations;
  Counters& cn = store_.counters;
  Ops& op = store_.ops;
  if (base != 0) add_base_time(base);

  if (!split_ranks(rank, stats))
    for (auto* col : {&a.rank, &l.rank, &an.rank, &cn.rank, &op.rank})
      std::fill(col->begin(), col->end(), *rank);
  sort_counters(cn, store_.strings);  // stable: same-ts events keep their file order
  sort_ops(op);
  // merge_stores' order, here while the files import side by side: the merge of parts so sorted
  // only checks it (the stable sort of a run of sorted parts in rank order is that run).
  sort_launches(l);
  sort_annotations(an);

  assign_steps(store_);
  rank_infos(rank, world, base);
  store_.attrs.emulated = synthetic_;
  sort_activities(store_);
  report(stats);
}

// finish() for a streamed import: the small tables (annotations, counters, NCCL metadata) made
// as finish() makes them, in store_; activities, launches and ops written to out_ from the spill
// with the same shift, ranks, steps and order.
void Importer::finish_streamed(ImportStats* stats) {
  // A trace that stayed within the budget, or a merged multi-rank one (back in memory), is
  // finished whole, in memory.
  if (!spilling_ || !rank_of_pid_.empty()) {
    if (spilling_) spill_->restore(parsed());
    spill_.reset();
    *whole_ = true;
    return finish(stats);
  }
  act_taken_ += store_.activities.size();
  spill_->take(parsed());  // from here store_ holds only the small tables
  int32_t world = -1;
  const std::optional<int32_t> rank = file_rank(stats, &world);
  const int64_t base = checked_base();
  if (base != 0) add_base_time(base);
  for (auto* col : {&store_.annotations.rank, &store_.counters.rank})
    std::fill(col->begin(), col->end(), *rank);
  sort_counters(store_.counters, store_.strings);
  assign_steps(store_);  // the annotations' steps
  const StepMarks steps(store_.annotations);
  const SpillWritten w =
      spill_->write(*out_, parsed(), SpillContext{*rank, base, steps, store_.strings, op_strings_});
  spill_.reset();
  malformed_ += w.dropped;
  std::set<std::pair<int32_t, int32_t>> devices;
  for (int32_t d : w.devices) devices.insert({*rank, d});
  rank_infos(rank, world, base, &devices);
  store_.attrs.emulated = synthetic_;
  if (stats)
    stats->notes.push_back(name_ + ": a large trace: its rows were sorted on disk (" +
                           std::to_string(w.runs) + " runs, " + std::to_string(w.disk_bytes >> 20) +
                           " MiB in temporary files beside the output, removed)");
  report(stats);
}

}  // namespace

bool parse_us_to_ns(std::string_view t, int64_t* ns) {
  size_t i = 0, n = t.size();
  bool neg = false;
  if (i < n && (t[i] == '-' || t[i] == '+')) neg = t[i++] == '-';
  if (i == n) return false;
  int64_t ip = 0;
  size_t digits = 0;
  for (; i < n && t[i] >= '0' && t[i] <= '9'; ++i, ++digits) {
    if (ip > (INT64_MAX / 1000 - 9) / 10) return false;  // would overflow in ns
    ip = ip * 10 + (t[i] - '0');
  }
  int64_t frac = 0;
  int fd = 0;
  bool round_up = false;
  if (i < n && t[i] == '.') {
    ++i;
    for (; i < n && t[i] >= '0' && t[i] <= '9'; ++i, ++digits) {
      if (fd < 3) {
        frac = frac * 10 + (t[i] - '0');
        ++fd;
      } else if (fd == 3) {  // sub-ns digits: round half away from zero
        round_up = t[i] >= '5';
        ++fd;
      }
    }
  }
  if (digits == 0) return false;
  if (i < n && (t[i] == 'e' || t[i] == 'E')) {
    // Exponent notation is rare in traces; decimal text is the exact path, this the fallback.
    std::string s(t);
    char* endp = nullptr;
    long double v = std::strtold(s.c_str(), &endp);
    if (endp != s.c_str() + s.size() || !std::isfinite(v)) return false;
    long double x = v * 1000.0L;
    if (std::fabs(x) > 9.2e18L) return false;
    *ns = std::llroundl(x);
    return true;
  }
  if (i != n) return false;
  for (; fd < 3; ++fd) frac *= 10;
  int64_t v = ip * 1000 + frac + (round_up ? 1 : 0);
  *ns = neg ? -v : v;
  return true;
}

int64_t input_bytes(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : 0;
}

std::optional<int32_t> rank_from_filename(const std::string& path) {
  static const std::regex re(R"((?:rank|worker)[-_]?(\d+))", std::regex::icase);
  std::string base =
      path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  std::smatch m;
  if (!std::regex_search(base, m, re)) return std::nullopt;
  // Digits only (the regex), so from_chars fails only on a value past int32: say so.
  int32_t r = 0;
  const std::string digits = m[1].str();
  auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), r);
  if (ec != std::errc() || ptr != digits.data() + digits.size())
    throw Error(path + ": rank " + digits +
                " in the file name is out of range (largest 2147483647)");
  return r;
}

std::string host_from_filename(const std::string& path) {
  static const std::regex re(R"(^(.+)_(\d+)\.(\d+)\.pt\.trace\.json(?:\.gz)?$)");
  std::string base =
      path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  std::smatch m;
  if (!std::regex_match(base, m, re)) return "";
  std::string worker = m[1].str() + "_" + m[2].str();
  if (rank_from_filename(worker)) return "";  // a custom worker name such as "rank_0"
  return m[1].str();
}

namespace {

// One file through an Importer that `prepare` has set up (nothing, or a streamed import's spill).
template <class Prepare>
Store import_path(const std::string& path, const ImportOptions& opt, ImportStats* stats,
                  Prepare&& prepare) {
  Input in(path);
  StreamBuffer buf(&in, opt.progress);
  Importer imp(path, opt);
  prepare(imp);
  imp.run(buf, stats);
  buf.progress_done();
  if (stats) stats->bytes += buf.total_read;
  return imp.take();
}

}  // namespace

Store import_kineto_file(const std::string& path, const ImportOptions& opt, ImportStats* stats) {
  return import_path(path, opt, stats, [](Importer&) {});
}

Store import_kineto_streamed(const std::string& path, const ImportOptions& opt, ImportStats* stats,
                             StoreStream& out, const std::string& spill_dir, bool* whole) {
  try {
    return import_path(path, opt, stats, [&](Importer& imp) {
      imp.stream_to(&out, spill_dir, opt.chunk_rows, whole);
    });
  } catch (const Error& e) {  // the spill's and the store's errors name their files, not the trace
    const std::string m = e.what();
    if (m.rfind(path + ": ", 0) == 0) throw;
    throw Error(path + ": " + m);
  }
}

Store import_kineto_string(std::string_view json, const std::string& name, const ImportOptions& opt,
                           ImportStats* stats) {
  StringBuffer buf(json);
  Importer imp(name, opt);
  imp.run(buf, stats);
  if (stats) stats->bytes += static_cast<int64_t>(json.size());
  return imp.take();
}

}  // namespace kernalyse
