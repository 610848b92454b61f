// Ranks of the processes in a set of Nsight Systems reports (kernalyse/nsys_ranks.h).
#include "kernalyse/nsys_ranks.h"

#include <algorithm>
#include <climits>
#include <map>
#include <tuple>

#include "kernalyse/error.h"

namespace kernalyse {

int rank_source_level(std::string_view source) {
  for (size_t i = 0; i < std::size(kRankSources); ++i)
    if (source == kRankSources[i]) return static_cast<int>(i);
  return -1;
}

std::string NsysProcess::name() const {
  return shared_file ? file + " (pid " + std::to_string(pid) + ")" : file;
}

namespace {

std::string where(const NsysProcess& p) {
  std::string w = p.name();
  if (p.shared_file) return w + (p.host.empty() ? "" : " on " + p.host);
  std::string at = p.host.empty() ? "" : "host " + p.host;
  if (p.pid >= 0) at += (at.empty() ? "" : ", ") + std::string("pid ") + std::to_string(p.pid);
  return at.empty() ? w : w + " (" + at + ")";
}

// Claims level by level; a rank claimed by two processes at one level, or already taken by a
// stronger claim, is not used (listed in *unused).
void take_claims(const std::vector<NsysProcess>& procs, RankAssignment* out,
                 std::vector<std::string>* unused) {
  std::map<int32_t, size_t> owner;
  for (int lv = 0; lv < static_cast<int>(std::size(kRankSources)); ++lv) {
    std::map<int32_t, std::vector<size_t>> want;
    for (size_t i = 0; i < procs.size(); ++i) {
      if (out->rank[i] >= 0) continue;
      for (const RankClaim& c : procs[i].claims)
        if (c.rank >= 0 && rank_source_level(c.source) == lv) want[c.rank].push_back(i);
    }
    for (const auto& [r, who] : want) {
      auto taken = owner.find(r);
      if (taken == owner.end() && who.size() == 1) {
        owner.emplace(r, who[0]);
        out->rank[who[0]] = r;
        out->source[who[0]] = kRankSources[lv];
        continue;
      }
      std::string line = "rank " + std::to_string(r) + " (" + kRankSources[lv] + ") of ";
      for (size_t k = 0; k < who.size(); ++k) line += (k ? " and " : "") + procs[who[k]].name();
      if (taken != owner.end())
        line += ": already the rank of " + procs[taken->second].name() + " (" +
                out->source[taken->second] + ")";
      unused->push_back(line);
    }
  }
}

// Two processes without a rank that have the same host and pid cannot be told apart.
void check_distinguishable(const std::vector<NsysProcess>& procs, const RankAssignment& a) {
  std::map<std::pair<std::string, int64_t>, std::vector<size_t>> by_key;
  for (size_t i = 0; i < procs.size(); ++i)
    if (procs[i].pid >= 0) by_key[{procs[i].host, procs[i].pid}].push_back(i);
  for (const auto& [key, who] : by_key) {
    if (who.size() < 2) continue;
    if (std::none_of(who.begin(), who.end(), [&](size_t i) { return a.rank[i] < 0; })) continue;
    std::string list;
    for (size_t k = 0; k < who.size(); ++k) list += (k ? " and " : "") + procs[who[k]].file;
    throw Error(list + ": the same process (host " + (key.first.empty() ? "unknown" : key.first) +
                ", pid " + std::to_string(key.second) +
                ") and no rank that tells them apart; give each process's report once");
  }
}

// Per host a block of consecutive ranks that holds the ranks already known there: hosts with
// known ranks in the order of their lowest, hosts without in name order where they fit. False
// when no such layout is found (then the free ranks are used in order).
bool host_blocks(const std::vector<NsysProcess>& procs, const RankAssignment& a,
                 std::map<std::string, int32_t>* start) {
  struct Host {
    int32_t count = 0, lo = INT32_MAX, hi = -1;
  };
  std::map<std::string, Host> hosts;
  const auto n = static_cast<int32_t>(procs.size());
  for (size_t i = 0; i < procs.size(); ++i) {
    Host& h = hosts[procs[i].host];
    ++h.count;
    if (a.rank[i] < 0) continue;
    if (a.rank[i] >= n) return false;
    h.lo = std::min(h.lo, a.rank[i]);
    h.hi = std::max(h.hi, a.rank[i]);
  }
  std::vector<std::pair<int32_t, std::string>> known;
  std::vector<std::string> free_hosts;
  for (const auto& [name, h] : hosts)
    if (h.hi >= 0)
      known.emplace_back(h.lo, name);
    else
      free_hosts.push_back(name);
  std::sort(known.begin(), known.end());
  int32_t cursor = 0;
  size_t f = 0;
  for (const auto& [lo, name] : known) {
    const Host& h = hosts[name];
    while (f < free_hosts.size() && cursor + hosts[free_hosts[f]].count <= lo) {
      (*start)[free_hosts[f]] = cursor;
      cursor += hosts[free_hosts[f++]].count;
    }
    if (cursor > h.lo || cursor + h.count - 1 < h.hi) return false;
    (*start)[name] = cursor;
    cursor += h.count;
  }
  for (; f < free_hosts.size(); ++f) {
    (*start)[free_hosts[f]] = cursor;
    cursor += hosts[free_hosts[f]].count;
  }
  return cursor == n;
}

// The free ranks for the processes without one: in (host, local rank, pid, file) order, from each
// host's block when host_blocks finds the layout, else from the free ranks in order.
void assume_ranks(const std::vector<NsysProcess>& procs, RankAssignment* a) {
  std::vector<size_t> todo;
  for (size_t i = 0; i < procs.size(); ++i)
    if (a->rank[i] < 0) todo.push_back(i);
  auto key = [&](size_t i) {
    const NsysProcess& p = procs[i];
    return std::make_tuple(p.host, p.local_rank < 0 ? INT64_MAX : p.local_rank, p.pid, p.file);
  };
  std::sort(todo.begin(), todo.end(), [&](size_t x, size_t y) { return key(x) < key(y); });
  std::vector<char> used(procs.size() + 1, 0);
  int32_t top = 0;
  for (int32_t r : a->rank) {
    if (r >= 0 && static_cast<size_t>(r) < used.size()) used[r] = 1;
    top = std::max(top, r + 1);
  }
  std::map<std::string, int32_t> start;
  const bool blocks = host_blocks(procs, *a, &start);
  std::map<std::string, int32_t> next;  // per host (blocks) or "" (in order): the next candidate
  for (size_t i : todo) {
    const std::string host = blocks ? procs[i].host : "";
    auto [it, fresh] = next.try_emplace(host, blocks ? start[host] : 0);
    int32_t& r = it->second;
    while (static_cast<size_t>(r) < used.size() && used[r]) ++r;
    const int32_t rank = static_cast<size_t>(r) < used.size() ? r : top++;
    if (static_cast<size_t>(rank) < used.size()) used[rank] = 1;
    a->rank[i] = rank;
    a->source[i] = "assumed";
  }
}

std::string join_ranks(const std::vector<NsysProcess>& procs, const RankAssignment& a,
                       const std::string& source) {
  std::vector<std::pair<int32_t, size_t>> who;
  for (size_t i = 0; i < procs.size(); ++i)
    if (a.source[i] == source) who.emplace_back(a.rank[i], i);
  std::sort(who.begin(), who.end());
  std::string list;
  for (const auto& [r, i] : who)
    list += (list.empty() ? "" : ", ") + std::string("rank ") + std::to_string(r) + " " +
            where(procs[i]);
  return list;
}

}  // namespace

RankAssignment assign_nsys_ranks(const std::vector<NsysProcess>& procs, bool only_input) {
  RankAssignment a;
  a.rank.assign(procs.size(), -1);
  a.source.assign(procs.size(), "");
  std::vector<std::string> unused;
  take_claims(procs, &a, &unused);
  if (!unused.empty()) {
    std::string line = "rank evidence not used (one rank claimed twice): ";
    for (size_t k = 0; k < unused.size(); ++k) line += (k ? "; " : "") + unused[k];
    a.warnings.push_back(line);
  }
  for (const char* weak : {"network marks", "file name"}) {
    std::string list = join_ranks(procs, a, weak);
    if (!list.empty())
      a.warnings.push_back(
          std::string("ranks taken from ") +
          (std::string(weak) == "file name" ? "the file names" : "NCCL's network NVTX marks") +
          ": " + list);
  }
  if (std::none_of(a.rank.begin(), a.rank.end(), [](int32_t r) { return r < 0; })) return a;
  if (only_input && procs.size() == 1) {
    a.rank[0] = 0;
    a.source[0] = "only input";
    a.notes.push_back(procs[0].file +
                      ": no rank in the report or its name; the only input, taken as rank 0");
    return a;
  }
  check_distinguishable(procs, a);
  assume_ranks(procs, &a);
  a.warnings.push_back(
      "ranks assumed (no MPI rank, launcher variable, NCCL payload or network mark, no rank in "
      "the file name), in (host, pid) order: " +
      join_ranks(procs, a, "assumed"));
  return a;
}

void renumber_ranks(Store& s, const std::vector<int32_t>& to) {
  auto map = [&](int32_t& r) {
    if (r >= 0 && static_cast<size_t>(r) < to.size()) r = to[r];
  };
  for_each_table(s, [&](const char*, auto& t) {
    for_each_column(t, [&](const auto& def, auto& col) {
      using T = typename std::decay_t<decltype(col)>::value_type;
      if constexpr (std::is_same_v<T, int32_t>)
        if (def.role == ColumnRole::Rank)
          for (int32_t& r : col) map(r);
    });
  });
  for (RankInfo& r : s.ranks) map(r.rank);
}

void rank_nsys_reports(std::vector<Store>& parts,
                       const std::vector<std::vector<NsysProcess>>& procs, bool only_input,
                       ImportStats* stats) {
  std::vector<NsysProcess> all;
  for (const auto& p : procs) all.insert(all.end(), p.begin(), p.end());
  RankAssignment a = assign_nsys_ranks(all, only_input);
  size_t k = 0;
  for (size_t i = 0; i < parts.size() && i < procs.size(); ++i) {
    std::vector<int32_t> to(procs[i].size());
    for (size_t j = 0; j < to.size(); ++j, ++k) to[j] = a.rank[k];
    for (RankInfo& r : parts[i].ranks)
      if (r.rank >= 0 && static_cast<size_t>(r.rank) < to.size())
        r.rank_source = a.source[k - to.size() + static_cast<size_t>(r.rank)];
    renumber_ranks(parts[i], to);
  }
  if (stats) {
    stats->warnings.insert(stats->warnings.end(), a.warnings.begin(), a.warnings.end());
    stats->notes.insert(stats->notes.end(), a.notes.begin(), a.notes.end());
  }
}

std::optional<std::string> env_list_value(std::string_view list, std::string_view name) {
  if (name.empty()) return std::nullopt;
  for (size_t at = 0; at < list.size();) {
    size_t end = list.find(';', at);
    if (end == std::string_view::npos) end = list.size();
    std::string_view item = list.substr(at, end - at);
    if (item.size() > name.size() && item.substr(0, name.size()) == name &&
        item[name.size()] == '=')
      return std::string(item.substr(name.size() + 1));
    at = end + 1;
  }
  return std::nullopt;
}

std::optional<std::string> env_assignment_value(std::string_view text, std::string_view name) {
  if (name.empty() || text.size() <= name.size() || text.substr(0, name.size()) != name ||
      text[name.size()] != '=')
    return std::nullopt;
  std::string_view v = text.substr(name.size() + 1);
  if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
  return std::string(v);
}

std::optional<int32_t> network_mark_rank(std::string_view text) {
  static constexpr std::pair<const char*, const char*> kMarks[] = {
      {"ncclNetIsend(): ", "Sender_Rank: "},
      {"ncclNetSendTest(): ", "Sender_Rank: "},
      {"ncclNetIrecv(): ", "Receiver_Rank: "},
      {"ncclNetRecvTest(): ", "Receiver_Rank: "}};
  for (const auto& [prefix, key] : kMarks) {
    if (text.rfind(prefix, 0) != 0) continue;
    size_t at = text.find(key);
    if (at == std::string_view::npos) return std::nullopt;
    int64_t v = 0;
    size_t i = at + std::char_traits<char>::length(key), digits = 0;
    for (; i < text.size() && digits < 10 && text[i] >= '0' && text[i] <= '9'; ++i, ++digits)
      v = v * 10 + (text[i] - '0');
    if (digits == 0 || digits == 10 || v > INT32_MAX) return std::nullopt;
    return static_cast<int32_t>(v);
  }
  return std::nullopt;
}

std::optional<int64_t> payload_field(std::string_view blob, int64_t type, int64_t offset) {
  size_t size = 0;
  bool is_signed = false;
  switch (type) {
    case 1:
    case 11:
      is_signed = true;
      [[fallthrough]];
    case 2:
    case 12:
      size = 1;
      break;
    case 3:
    case 13:
      is_signed = true;
      [[fallthrough]];
    case 4:
    case 14:
      size = 2;
      break;
    case 5:
    case 15:
      is_signed = true;
      [[fallthrough]];
    case 6:
    case 16:
      size = 4;
      break;
    case 7:
    case 9:
    case 17:
      is_signed = true;
      [[fallthrough]];
    case 8:
    case 10:
    case 18:
    case 22:
      size = 8;
      break;
    default:
      return std::nullopt;
  }
  auto u64 = [&](size_t at, size_t n) {
    uint64_t v = 0;
    for (size_t b = 0; b < n; ++b)
      v |= uint64_t(static_cast<unsigned char>(blob[at + b])) << (8 * b);
    return v;
  };
  size_t base = 0;
  if (blob.size() >= 32 && u64(16, 8) == blob.size() - 32) base = 32;  // nsys's header
  if (offset < 0 || static_cast<uint64_t>(offset) > blob.size() ||
      base + static_cast<size_t>(offset) + size > blob.size())
    return std::nullopt;
  uint64_t v = u64(base + static_cast<size_t>(offset), size);
  if (is_signed && size < 8 && (v >> (8 * size - 1)) & 1) v |= ~uint64_t(0) << (8 * size);
  return static_cast<int64_t>(v);
}

}  // namespace kernalyse
