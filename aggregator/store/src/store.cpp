// In-memory store operations: enum names, string interning, merging per-rank stores, sorting.
#include "kernalyse/store.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstring>
#include <exception>
#include <functional>
#include <limits>
#include <map>
#include <mutex>
#include <numeric>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "kernalyse/parallel.h"
#include "kernalyse/store_io.h"

namespace kernalyse {

const char* to_string(Kind k) {
  switch (k) {
    case Kind::Kernel:
      return "kernel";
    case Kind::Memcpy:
      return "memcpy";
    case Kind::Memset:
      return "memset";
    case Kind::Sync:
      return "sync";
    case Kind::Other:
      return "other";
    case Kind::HostOnStream:
      return "host_on_stream";
  }
  return "other";  // out-of-range values read from a file
}

const char* to_string(Category c) {
  switch (c) {
    case Category::Computation:
      return "computation";
    case Category::Communication:
      return "communication";
    case Category::Memory:
      return "memory";
    case Category::Other:
      return "other";
  }
  return "other";
}

const char* to_string(AnnotationKind k) {
  switch (k) {
    case AnnotationKind::Step:
      return "step";
    case AnnotationKind::User:
      return "user";
    case AnnotationKind::GpuUser:
      return "gpu_user";
    case AnnotationKind::Nvtx:
      return "nvtx";
  }
  return "user";
}

// ---------------------------------------------------------------------------------------------
// StringTable

namespace {
// 64-bit hash of a string, 8 bytes a step (multiply and rotate, then murmur3's finaliser for the
// low bits the table's mask takes). Not for untrusted adversaries: a trace full of strings made
// to collide costs probe time, never a wrong id (every hit is compared).
uint64_t hash_string(std::string_view s) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  uint64_t h = s.size() * kMul;
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (((h << 5) | (h >> 59)) ^ w) * kMul;
  }
  if (i < s.size()) {
    uint64_t w = 0;
    std::memcpy(&w, s.data() + i, s.size() - i);
    h = (((h << 5) | (h >> 59)) ^ w) * kMul;
  }
  h ^= h >> 33, h *= 0xff51afd7ed558ccdull, h ^= h >> 33, h *= 0xc4ceb9fe1a85ec53ull;
  return h ^ (h >> 33);
}
}  // namespace

StringTable::StringTable() { assign({}); }

uint32_t StringTable::find_or_add(std::string_view s, uint64_t h) {
  const size_t mask = slots_.size() - 1;
  for (size_t i = h & mask;; i = (i + 1) & mask) {
    const uint32_t slot = slots_[i];
    if (slot == 0) {
      if (strings_.size() >= std::numeric_limits<uint32_t>::max() - 1)
        throw Error("string table overflow (2^32 strings)");
      const auto id = static_cast<uint32_t>(strings_.size());
      strings_.emplace_back(s);
      hashes_.push_back(h);
      slots_[i] = id + 1;
      if (strings_.size() * 2 > slots_.size()) grow();  // at most half full
      return id;
    }
    const uint32_t id = slot - 1;
    if (hashes_[id] == h && strings_[id] == s) return id;
  }
}

// Indexes the ids in id order; of equal strings (a file may hold duplicates, a spool a million
// empty ones) only the first, so lookups give the first id, as before, and a run of duplicates
// is no probe chain.
void StringTable::rebuild(size_t slots) {
  std::vector<uint32_t>(slots).swap(slots_);
  const size_t mask = slots_.size() - 1;
  for (uint32_t id = 0; id < strings_.size(); ++id) {
    size_t i = hashes_[id] & mask;
    bool dup = false;
    for (; slots_[i] != 0 && !dup; i = (i + 1) & mask) {
      const uint32_t other = slots_[i] - 1;
      dup = hashes_[other] == hashes_[id] && strings_[other] == strings_[id];
    }
    if (!dup) slots_[i] = id + 1;
  }
}

void StringTable::grow() { rebuild(slots_.size() * 2); }

uint32_t StringTable::intern(std::string_view s) { return find_or_add(s, hash_string(s)); }

void StringTable::assign(std::vector<std::string> strings) {
  strings_ = std::move(strings);
  if (strings_.empty()) strings_.emplace_back();  // keep the "id 0 is empty" invariant
  hashes_.resize(strings_.size());
  for (size_t i = 0; i < strings_.size(); ++i) hashes_[i] = hash_string(strings_[i]);
  size_t slots = 64;
  while (slots < strings_.size() * 2) slots *= 2;
  rebuild(slots);
}

void Activities::reserve(size_t n) {
  for_each_column(*this, [n](const auto&, auto& col) { col.reserve(n); });
}

void fill_unknown_columns(Store& s) {
  for_each_table(s, [](const char*, auto& t) { fill_unknown_columns(t); });
}

// ---------------------------------------------------------------------------------------------
// Sorting
//
// A stable sort by (group, key, tie) in three steps: a counting sort by group (rank/device/
// stream, or rank), then, only for groups not already in order, an LSD radix sort by key
// (start_ns) followed by fixing up the rare runs of equal keys by tie (end_ns). Rows within a
// stream normally arrive in time order, so the common cases are O(n); even a fully shuffled
// table sorts in a few linear passes instead of an n log n comparison sort.

namespace {

struct Triple {
  int32_t r, d, s;
  auto operator<=>(const Triple&) const = default;
};

// Dense ids for distinct triples in first-seen order (open addressing; there are few keys).
class TripleIds {
 public:
  uint32_t id(const Triple& t) {
    if (2 * (keys_.size() + 1) > slots_.size()) grow();
    const size_t mask = slots_.size() - 1;
    for (size_t h = hash(t) & mask;; h = (h + 1) & mask) {
      uint32_t s = slots_[h];
      if (s == 0) {
        keys_.push_back(t);
        slots_[h] = static_cast<uint32_t>(keys_.size());
        return static_cast<uint32_t>(keys_.size() - 1);
      }
      if (keys_[s - 1] == t) return s - 1;
    }
  }
  const std::vector<Triple>& keys() const { return keys_; }

 private:
  static size_t hash(const Triple& t) {
    uint64_t h = uint64_t(uint32_t(t.r)) * 0x9E3779B97F4A7C15ull ^
                 uint64_t(uint32_t(t.d)) * 0xC2B2AE3D27D4EB4Full ^
                 uint64_t(uint32_t(t.s)) * 0x165667B19E3779F9ull;
    return size_t(h ^ (h >> 29));
  }
  void grow() {
    slots_.assign(std::max<size_t>(64, slots_.size() * 2), 0);
    const size_t mask = slots_.size() - 1;
    for (size_t i = 0; i < keys_.size(); ++i) {
      size_t h = hash(keys_[i]) & mask;
      while (slots_[h]) h = (h + 1) & mask;
      slots_[h] = static_cast<uint32_t>(i + 1);
    }
  }
  std::vector<Triple> keys_;
  std::vector<uint32_t> slots_;  // 1 + index into keys_, 0 = empty
};

// Group id per row, numbered so that id order is key order.
struct Grouping {
  std::vector<Triple> keys;
  std::vector<uint32_t> of_row;
};

template <class KeyOf>
Grouping group_rows(size_t n, KeyOf key_of) {
  Grouping g;
  g.of_row.resize(n);
  TripleIds ids;
  Triple last{};
  uint32_t last_id = 0;
  for (size_t i = 0; i < n; ++i) {
    Triple t = key_of(i);
    // Consecutive rows mostly share their group: skip the hash lookup then.
    if (i == 0 || !(t == last)) {
      last = t;
      last_id = ids.id(t);
    }
    g.of_row[i] = last_id;
  }
  g.keys = ids.keys();
  std::vector<uint32_t> by_key(g.keys.size());
  std::iota(by_key.begin(), by_key.end(), 0u);
  std::sort(by_key.begin(), by_key.end(),
            [&](uint32_t x, uint32_t y) { return g.keys[x] < g.keys[y]; });
  std::vector<uint32_t> remap(g.keys.size());
  std::vector<Triple> sorted(g.keys.size());
  for (size_t k = 0; k < by_key.size(); ++k) {
    remap[by_key[k]] = static_cast<uint32_t>(k);
    sorted[k] = g.keys[by_key[k]];
  }
  g.keys.swap(sorted);
  for (auto& x : g.of_row) x = remap[x];
  return g;
}

// Sort key mapped to unsigned so that radix order is signed order; idx is the original row.
struct Rec {
  uint64_t key;
  uint32_t idx;
  uint32_t pad;
};
static_assert(sizeof(Rec) == 16);

inline uint64_t ordered(int64_t v) { return uint64_t(v) ^ (uint64_t(1) << 63); }
inline int64_t unordered(uint64_t k) { return int64_t(k ^ (uint64_t(1) << 63)); }

// Stable LSD radix sort by key, 11-bit digits, only over the bits that vary.
void radix_sort(Rec* v, Rec* tmp, size_t n) {
  uint64_t diff = 0;
  for (size_t i = 1; i < n; ++i) diff |= v[i].key ^ v[0].key;
  if (!diff) return;
  const int bits = 64 - std::countl_zero(diff);
  constexpr int kDigit = 11;
  std::vector<size_t> count(size_t{1} << kDigit);
  Rec* src = v;
  Rec* dst = tmp;
  for (int shift = 0; shift < bits; shift += kDigit) {
    std::fill(count.begin(), count.end(), 0);
    const uint64_t mask = (uint64_t{1} << kDigit) - 1;
    for (size_t i = 0; i < n; ++i) ++count[(src[i].key >> shift) & mask];
    size_t sum = 0;
    for (auto& c : count) sum += std::exchange(c, sum);
    for (size_t i = 0; i < n; ++i) dst[count[(src[i].key >> shift) & mask]++] = src[i];
    std::swap(src, dst);
  }
  if (src != v) std::copy(src, src + n, v);
}

// Rows in stable (group, key, tie) order. `tie` may be null. bounds[g]..bounds[g+1] is group g.
std::vector<Rec> stable_order(const Grouping& g, const std::vector<int64_t>& key,
                              const std::vector<int64_t>* tie, std::vector<size_t>* bounds) {
  const size_t n = key.size();
  const size_t ng = g.keys.size();
  bounds->assign(ng + 1, 0);
  for (uint32_t x : g.of_row) ++(*bounds)[x + 1];
  for (size_t x = 0; x < ng; ++x) (*bounds)[x + 1] += (*bounds)[x];
  std::vector<Rec> order(n);
  {
    std::vector<size_t> next(bounds->begin(), bounds->end() - 1);
    for (size_t i = 0; i < n; ++i)
      order[next[g.of_row[i]]++] = {ordered(key[i]), static_cast<uint32_t>(i), 0};
  }
  auto tie_of = [&](const Rec& r) { return tie ? (*tie)[r.idx] : 0; };
  auto less = [&](const Rec& x, const Rec& y) {
    if (x.key != y.key) return x.key < y.key;
    int64_t tx = tie_of(x), ty = tie_of(y);
    if (tx != ty) return tx < ty;
    return x.idx < y.idx;
  };
  std::vector<Rec> tmp;  // radix scratch, allocated only if some group needs it
  auto sort_group = [&](size_t x) {
    Rec* b = order.data() + (*bounds)[x];
    const size_t len = (*bounds)[x + 1] - (*bounds)[x];
    if (std::is_sorted(b, b + len, less)) return;
    if (len < 4096) {
      std::sort(b, b + len, less);
      return;
    }
    radix_sort(b, tmp.data() + (*bounds)[x], len);
    if (!tie) return;
    // Radix order is stable (idx ascending within equal keys); order equal-key runs by tie.
    for (size_t i = 0; i < len;) {
      size_t j = i + 1;
      while (j < len && b[j].key == b[i].key) ++j;
      if (j - i > 1) std::sort(b + i, b + j, less);
      i = j;
    }
  };
  std::vector<size_t> todo;
  for (size_t x = 0; x < ng; ++x)
    if (!std::is_sorted(order.begin() + (*bounds)[x], order.begin() + (*bounds)[x + 1], less))
      todo.push_back(x);
  if (!todo.empty()) {
    tmp.resize(n);
    parallel_for(todo.size(), [&](size_t t) { sort_group(todo[t]); });
  }
  return order;
}

template <class T>
void gather(std::vector<T>& col, const std::vector<Rec>& order) {
  if (col.empty()) return;  // a column a reader skipped
  std::vector<T> out(order.size());
  for (size_t i = 0; i < order.size(); ++i) out[i] = col[order[i].idx];
  col.swap(out);
}

void decode_keys(std::vector<int64_t>& col, const std::vector<Rec>& order) {
  for (size_t i = 0; i < order.size(); ++i) col[i] = unordered(order[i].key);
}

// Every column of `t` has its rows, except that a non-key column may be empty (a column a
// reader skipped). `keys`: the columns the caller reads for every row.
template <class Tab>
void check_columns(const Tab& t, const char* table, std::initializer_list<std::string_view> keys) {
  const size_t n = t.size();
  for_each_column(t, [&](const auto& def, const auto& col) {
    const bool key = std::find(keys.begin(), keys.end(), def.name) != keys.end();
    if (col.size() != n && (key || !col.empty()))
      throw Error(std::string("inconsistent store: column ") + table + "." + def.name + " has " +
                  std::to_string(col.size()) + " rows, expected " + std::to_string(n));
  });
}

// Permutes every column of `t` but `skip` (the keys the caller rebuilt) into `order`, one
// column after the other: one column's copy at a time (peak memory), activities aside.
template <class Tab>
void gather_columns(Tab& t, const std::vector<Rec>& order,
                    std::initializer_list<std::string_view> skip) {
  for_each_column(t, [&](const auto& def, auto& col) {
    if (std::find(skip.begin(), skip.end(), def.name) == skip.end()) gather(col, order);
  });
}

bool activities_sorted(const Activities& a) {
  const size_t n = a.size();
  for (size_t i = 1; i < n; ++i) {
    auto prev = std::tie(a.rank[i - 1], a.device[i - 1], a.stream[i - 1], a.start_ns[i - 1],
                         a.end_ns[i - 1]);
    auto cur = std::tie(a.rank[i], a.device[i], a.stream[i], a.start_ns[i], a.end_ns[i]);
    if (cur < prev) return false;
  }
  return true;
}

void check_activity_columns(const Activities& a) {
  check_columns(a, "activities", {"rank", "device", "stream", "start_ns", "end_ns"});
}

// Stable sort of a table by (rank, start_ns); a no-op when already in order.
template <class Table>
void sort_by_rank_start(Table& t, const char* table) {
  check_columns(t, table, {"rank", "start_ns"});
  const size_t n = t.size();
  bool sorted = true;
  for (size_t i = 1; i < n && sorted; ++i)
    sorted = std::tie(t.rank[i - 1], t.start_ns[i - 1]) <= std::tie(t.rank[i], t.start_ns[i]);
  if (sorted) return;
  if (n > std::numeric_limits<uint32_t>::max()) throw Error("table too large to sort");
  Grouping g = group_rows(n, [&](size_t i) { return Triple{t.rank[i], 0, 0}; });
  std::vector<size_t> bounds;
  std::vector<Rec> order = stable_order(g, t.start_ns, nullptr, &bounds);
  for (size_t x = 0; x < g.keys.size(); ++x)
    std::fill(t.rank.begin() + bounds[x], t.rank.begin() + bounds[x + 1], g.keys[x].r);
  decode_keys(t.start_ns, order);
  gather_columns(t, order, {"rank", "start_ns"});
}

}  // namespace

StepMarks::StepMarks(const Annotations& an) {
  for (size_t i = 0; i < an.size(); ++i)
    if (an.kind[i] == static_cast<uint8_t>(AnnotationKind::Step))
      steps_[an.rank[i]].push_back({an.start_ns[i], an.end_ns[i], an.step[i]});
  for (auto& [r, v] : steps_)
    std::sort(v.begin(), v.end(), [](const Mark& x, const Mark& y) { return x.start < y.start; });
}

int32_t StepMarks::at(int32_t rank, int64_t t) const {
  auto it = steps_.find(rank);
  if (it == steps_.end()) return kNoStep;
  const auto& v = it->second;
  auto p =
      std::upper_bound(v.begin(), v.end(), t, [](int64_t x, const Mark& m) { return x < m.start; });
  if (p == v.begin()) return kNoStep;
  --p;
  return t < p->end ? p->step : kNoStep;
}

void assign_steps(Store& s) {
  fill_unknown_columns(s);
  const StepMarks marks(s.annotations);
  if (marks.empty()) return;
  auto step_at = [&](int32_t rank, int64_t t) { return marks.at(rank, t); };
  LaunchCalls& l = s.launches;
  std::map<int32_t, std::unordered_map<int64_t, int32_t>> step_of_corr;
  for (size_t i = 0; i < l.size(); ++i) {
    l.step[i] = step_at(l.rank[i], l.start_ns[i]);
    if (l.correlation[i] != kNoCorrelation) step_of_corr[l.rank[i]][l.correlation[i]] = l.step[i];
  }
  Annotations& am = s.annotations;
  for (size_t i = 0; i < am.size(); ++i)
    if (am.kind[i] != static_cast<uint8_t>(AnnotationKind::Step))
      am.step[i] = step_at(am.rank[i], am.start_ns[i]);
  Activities& a = s.activities;
  for (size_t i = 0; i < a.size(); ++i) {
    int32_t st = kNoStep;
    bool found = false;
    if (a.correlation[i] != kNoCorrelation) {
      auto rc = step_of_corr.find(a.rank[i]);
      if (rc != step_of_corr.end()) {
        auto it = rc->second.find(a.correlation[i]);
        if (it != rc->second.end()) st = it->second, found = true;
      }
    }
    a.step[i] = found ? st : step_at(a.rank[i], a.start_ns[i]);
  }
}

void sort_nccl_by_activity(NcclInfo& c) {
  fill_unknown_columns(c);
  check_columns(c, "nccl", {"activity"});
  if (std::is_sorted(c.activity.begin(), c.activity.end())) return;
  const size_t n = c.size();
  std::vector<Rec> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = {c.activity[i], static_cast<uint32_t>(i), 0};
  std::stable_sort(order.begin(), order.end(),
                   [](const Rec& x, const Rec& y) { return x.key < y.key; });
  gather_columns(c, order, {});
}

void sort_activities(Store& s) {
  Activities& a = s.activities;
  check_activity_columns(a);
  const size_t n = a.size();
  if (n > std::numeric_limits<uint32_t>::max())
    throw Error("too many activities to sort (" + std::to_string(n) + ")");
  // Merged per-rank stores are usually already in order: an O(n) check skips all the work.
  if (!activities_sorted(a)) {
    for (uint64_t x : s.nccl.activity)
      if (x >= n)
        throw Error("inconsistent store: nccl.activity " + std::to_string(x) +
                    " >= " + std::to_string(n) + " activities");
    Grouping g = group_rows(n, [&](size_t i) {
      return Triple{a.rank[i], a.device[i], a.stream[i]};
    });
    std::vector<size_t> bounds;
    std::vector<Rec> order = stable_order(g, a.start_ns, &a.end_ns, &bounds);
    std::vector<uint32_t>().swap(g.of_row);

    // Keys come back from the group table and the records (sequential writes); the other
    // columns need a random-access gather. Columns are independent: one task each.
    std::vector<std::function<void()>> tasks = {
        [&] {
          for (size_t x = 0; x < g.keys.size(); ++x) {
            auto b = bounds[x], e = bounds[x + 1];
            std::fill(a.rank.begin() + b, a.rank.begin() + e, g.keys[x].r);
            std::fill(a.device.begin() + b, a.device.begin() + e, g.keys[x].d);
            std::fill(a.stream.begin() + b, a.stream.begin() + e, g.keys[x].s);
          }
        },
        [&] { decode_keys(a.start_ns, order); },
        [&] {
          if (s.nccl.size() == 0) return;
          std::vector<uint32_t> new_pos(n);
          for (size_t i = 0; i < n; ++i) new_pos[order[i].idx] = static_cast<uint32_t>(i);
          for (auto& x : s.nccl.activity) x = new_pos[x];
        },
    };
    for_each_column(a, [&](const auto& def, auto& col) {
      const std::string_view name = def.name;
      if (name != "rank" && name != "device" && name != "stream" && name != "start_ns")
        tasks.emplace_back([&col, &order] { gather(col, order); });
    });
    parallel_for(tasks.size(), [&](size_t i) { tasks[i](); });
  }
  sort_nccl_by_activity(s.nccl);
}

// ---------------------------------------------------------------------------------------------
// merge_stores

namespace {

template <class T>
void append(std::vector<T>& dst, std::vector<T>& src) {
  // The only part (its rows fill the reservation): taken over, not copied (a one-file import).
  if (dst.empty() && src.size() >= dst.capacity()) {
    dst.swap(src);
  } else {
    dst.insert(dst.end(), src.begin(), src.end());
  }
  std::vector<T>().swap(src);  // release the part's memory as we go
}

struct Remapper {
  std::vector<uint32_t> map;
  const std::string* where;
  bool identity = false;  // map[i] == i: the part's ids are out's
  void operator()(std::vector<uint32_t>& dst, std::vector<uint32_t>& src) {
    if (identity && dst.empty() && src.size() >= dst.capacity()) {  // the only part: checked, kept
      uint32_t top = 0;
      for (uint32_t id : src) top = std::max(top, id);
      if (src.empty() || top < map.size()) {
        dst.swap(src);
        std::vector<uint32_t>().swap(src);
        return;
      }
    }
    size_t base = dst.size();
    dst.resize(base + src.size());
    for (size_t i = 0; i < src.size(); ++i) {
      uint32_t id = src[i];
      if (id >= map.size())
        throw Error(*where + ": string id " + std::to_string(id) + " out of range (" +
                    std::to_string(map.size()) + " strings)");
      dst[base + i] = map[id];
    }
    std::vector<uint32_t>().swap(src);
  }
};

// Appends every column of part `p` to `out`: string ids remapped into out's table, nccl
// activity rows shifted by out's activity count; the part's columns are released as they go.
void append_part(Store& out, Store& p, const std::string& where) {
  Remapper remap{{}, &where};
  remap.map.resize(p.strings.size());
  remap.identity = true;
  for (size_t i = 0; i < p.strings.size(); ++i) {
    remap.map[i] = out.strings.intern(p.strings.at(i));
    remap.identity = remap.identity && remap.map[i] == i;
  }
  fill_unknown_columns(p);  // columns the part's producer did not know
  try {
    check_activity_columns(p.activities);
    for_each_table(p, [](const char* table, const auto& t) { check_columns(t, table, {}); });
  } catch (const Error& e) {
    throw Error(where + ": " + e.what());
  }
  const uint64_t act_base = out.activities.size();
  const size_t act_n = p.activities.size();
  for (uint64_t x : p.nccl.activity)
    if (x >= act_n)
      throw Error(where + ": nccl.activity " + std::to_string(x) + " out of range (" +
                  std::to_string(act_n) + " activities)");
  for_each_table_pair(out, p, [&](const char*, auto& t, auto& u) {
    for_each_column_pair(t, u, [&](const auto& def, auto& dst, auto& src) {
      using T = typename std::decay_t<decltype(dst)>::value_type;
      if constexpr (std::is_same_v<T, uint32_t>) {
        if (def.role == ColumnRole::String) return remap(dst, src);
      }
      if constexpr (std::is_same_v<T, uint64_t>) {
        if (def.role == ColumnRole::Row)  // rows of the part's activities, now after out's
          for (auto& x : src) x += act_base;
      }
      append(dst, src);
    });
  });
}

std::string part_name(const Store& p, size_t i) {
  for (const RankInfo& r : p.ranks)
    if (!r.source.empty()) return r.source;
  return "part " + std::to_string(i);
}

}  // namespace

Store merge_stores(std::vector<Store> parts) {
  // Duplicate ranks are a user error (the same trace given twice, or two runs mixed).
  std::map<int32_t, std::string> owner;
  for (size_t i = 0; i < parts.size(); ++i)
    for (const RankInfo& r : parts[i].ranks) {
      std::string src = r.source.empty() ? part_name(parts[i], i) : r.source;
      auto [it, fresh] = owner.try_emplace(r.rank, src);
      if (!fresh)
        throw Error("duplicate rank " + std::to_string(r.rank) + ": " + it->second + " and " + src);
    }

  // Concatenate in rank order so that per-rank-sorted parts give an already sorted result.
  auto first_rank = [](const Store& p) {
    int64_t m = std::numeric_limits<int64_t>::max();
    for (const RankInfo& r : p.ranks) m = std::min<int64_t>(m, r.rank);
    if (m == std::numeric_limits<int64_t>::max() && !p.activities.rank.empty())
      m = *std::min_element(p.activities.rank.begin(), p.activities.rank.end());
    return m;
  };
  std::vector<size_t> order(parts.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::vector<int64_t> keys(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) keys[i] = first_rank(parts[i]);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t x, size_t y) { return keys[x] < keys[y]; });

  Store out;
  {
    // One allocation per column: the rows of all parts, table by table (file order).
    std::vector<size_t> rows;
    for (const Store& p : parts) {
      size_t t = 0;
      for_each_table(p, [&](const char*, const auto& u) {
        if (rows.size() <= t) rows.push_back(0);
        rows[t++] += u.size();
      });
    }
    size_t t = 0;
    for_each_table(out, [&](const char*, auto& tab) {
      const size_t n = t < rows.size() ? rows[t] : 0;
      ++t;
      for_each_column(tab, [n](const auto&, auto& col) { col.reserve(n); });
    });
  }
  bool first = true;
  for (size_t pi : order) {
    Store& p = parts[pi];
    const std::string where = part_name(p, pi);
    if (first) {
      out.attrs = p.attrs;
      out.attrs.schema_version = kSchemaVersion;
      first = false;
    }
    // The run counts as emulated if any part of it is.
    out.attrs.emulated = out.attrs.emulated || p.attrs.emulated;
    for (const RankInfo& r : p.ranks) out.attrs.emulated = out.attrs.emulated || r.emulated;
    append_part(out, p, where);
    for (RankInfo& r : p.ranks) out.ranks.push_back(std::move(r));
    p = Store();  // drop the part's string table too
  }
  std::stable_sort(out.ranks.begin(), out.ranks.end(),
                   [](const RankInfo& x, const RankInfo& y) { return x.rank < y.rank; });

  sort_activities(out);
  sort_launches(out.launches);
  sort_annotations(out.annotations);
  sort_counters(out.counters, out.strings);
  sort_ops(out.ops);
  return out;
}

void sort_ops(Ops& o) { sort_by_rank_start(o, "ops"); }

void sort_launches(LaunchCalls& l) { sort_by_rank_start(l, "launches"); }

void sort_annotations(Annotations& a) { sort_by_rank_start(a, "annotations"); }

void shift_ranks(Store& s, int32_t by) {
  for_each_table(s, [by](const char*, auto& t) {
    for_each_column(t, [by](const auto& def, auto& col) {
      using T = typename std::decay_t<decltype(col)>::value_type;
      if constexpr (std::is_same_v<T, int32_t>)
        if (def.role == ColumnRole::Rank)
          for (int32_t& r : col) r += by;
    });
  });
  for (RankInfo& r : s.ranks) r.rank += by;
}

void sort_counters(Counters& k, const StringTable& strings) {
  check_columns(k, "counters", {"rank", "device", "name_id", "ts_ns"});
  const size_t n = k.size();
  auto key = [&](size_t i) {
    return std::make_tuple(k.rank[i], k.device[i], std::string_view(strings.at(k.name_id[i])),
                           k.ts_ns[i]);
  };
  bool sorted = true;
  for (size_t i = 1; i < n && sorted; ++i) sorted = !(key(i) < key(i - 1));
  if (sorted) return;
  if (n > std::numeric_limits<uint32_t>::max()) throw Error("table too large to sort");
  std::vector<Rec> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = {0, static_cast<uint32_t>(i), 0};
  std::stable_sort(order.begin(), order.end(),
                   [&](const Rec& x, const Rec& y) { return key(x.idx) < key(y.idx); });
  gather_columns(k, order, {});
}

}  // namespace kernalyse
