// All-to-all(v) traffic matrix and the intra/inter-host split (alltoall.h).
#include "kernalyse/alltoall.h"

#include <algorithm>
#include <cctype>
#include <map>

#include "kernalyse/checked.h"
#include "kernalyse/units.h"

namespace kernalyse {
namespace {

// "[2, 6, 1]" -> {2, 6, 1}; empty when any entry is not a non-negative integer.
std::vector<int64_t> parse_list(const std::string& s) {
  std::vector<int64_t> out;
  int64_t cur = -1;
  for (char c : s) {
    if (std::isdigit(static_cast<unsigned char>(c))) {
      if (cur > (INT64_MAX - 9) / 10) return {};
      cur = (cur < 0 ? 0 : cur * 10) + (c - '0');
    } else if (c == ',' || c == ']') {
      if (cur >= 0) out.push_back(cur);
      cur = -1;
    } else if (c != '[' && c != ' ') {
      return {};
    }
  }
  return out;
}

bool is_alltoall(const std::string& op) {
  return collective_op_key(op).find("alltoall") != std::string::npos;
}

// One arrival's bytes to each member of its group (in `dst` order); false when unknown.
bool arrival_bytes(const Store& s, int32_t n, const std::vector<int32_t>& dst,
                   std::vector<int64_t>* out, bool* even) {
  const NcclInfo& nc = s.nccl;
  if (n < 0) return false;
  const int64_t nel = nc.in_nelems[n], bytes = nc.msg_bytes[n];
  if (nel <= 0 || bytes < 0 || dst.empty()) return false;
  const double per_elem =
      static_cast<double>(bytes) / static_cast<double>(std::max(nel, nc.out_nelems[n]));
  const double total = per_elem * static_cast<double>(nel);  // what this rank sends
  std::vector<int64_t> split;
  if (static_cast<size_t>(n) < nc.in_splits_id.size())
    split = parse_list(s.strings.at(nc.in_splits_id[n]));
  int64_t sum = 0;
  for (int64_t x : split) sum += x;
  *even = split.size() != dst.size() || sum <= 0;
  out->assign(dst.size(), 0);
  for (size_t k = 0; k < dst.size(); ++k)
    (*out)[k] = static_cast<int64_t>(*even ? total / static_cast<double>(dst.size())
                                           : total * static_cast<double>(split[k]) /
                                                 static_cast<double>(sum));
  return true;
}

}  // namespace

AllToAllResult alltoall_analysis(const Store& s, const CollectiveMatch& m) {
  AllToAllResult r;
  const Activities& a = s.activities;
  r.matched_by = matched_by(m.method);
  r.ranks = m.ranks;
  std::map<int32_t, std::string> host_of;
  for (const RankInfo& ri : s.ranks) host_of[ri.rank] = ri.host;
  std::map<int32_t, size_t> idx;
  for (size_t i = 0; i < r.ranks.size(); ++i) {
    idx[r.ranks[i]] = i;
    r.hosts.push_back(host_of[r.ranks[i]]);
  }
  r.bytes.assign(r.ranks.size(), std::vector<int64_t>(r.ranks.size(), 0));
  std::map<std::string, HostSplit> split;
  std::map<int32_t, AllToAllStep> steps;
  auto account = [&](const Collective& c) {
    HostSplit& h = split[c.op];
    h.op = c.op;
    ++h.instances;
    bool known = true, one = true;
    int64_t t = 0;
    const std::string& h0 = host_of[c.arrivals.front().rank];
    for (const auto& x : c.arrivals) {
      const std::string& hx = host_of[x.rank];
      known = known && !hx.empty();
      one = one && hx == h0;
      t = sat_add(t, a.end_ns[x.row] - a.start_ns[x.row]);
    }
    if (!known)
      ++h.unknown_instances;
    else if (one)
      ++h.intra_instances, h.intra_ns = sat_add(h.intra_ns, t);
    else
      ++h.inter_instances, h.inter_ns = sat_add(h.inter_ns, t);
  };
  for (const Collective& c : m.matched) {
    account(c);
    if (!is_alltoall(c.op)) continue;
    // The group's members in its own rank order: the recorded process-group ranks, else the
    // ranks that took part.
    std::vector<int32_t> dst = c.expected;
    std::sort(dst.begin(), dst.end());
    bool any = false;
    int64_t first = INT64_MAX, last = INT64_MIN, moved = 0;
    for (const auto& x : c.arrivals) {
      first = std::min(first, a.start_ns[x.row]), last = std::max(last, a.end_ns[x.row]);
      std::vector<int64_t> b;
      bool even = false;
      if (!arrival_bytes(s, x.nccl, dst, &b, &even) || !idx.count(x.rank)) continue;
      any = true;
      r.even_instances += even && x.rank == c.arrivals.front().rank;
      for (size_t k = 0; k < dst.size(); ++k) {
        if (!idx.count(dst[k])) continue;
        r.bytes[idx[x.rank]][idx[dst[k]]] += b[k];
        moved += b[k];
        (host_of[x.rank] == host_of[dst[k]] && !host_of[x.rank].empty() ? r.intra_bytes
                                                                        : r.inter_bytes) += b[k];
      }
    }
    if (!any) {
      ++r.unknown_instances;
      continue;
    }
    ++r.instances;
    AllToAllStep& st = steps[a.step[c.arrivals.front().row]];
    st.step = a.step[c.arrivals.front().row];
    ++st.instances;
    st.bytes += moved;
    st.time_ns = sat_add(st.time_ns, last - first);
  }
  for (const Collective& c : m.p2p) account(c);
  for (auto& [k, v] : split) r.split.push_back(v);
  for (auto& [k, v] : steps) r.steps.push_back(v);
  return r;
}

void alltoall_report(const AllToAllResult& r, Report* out) {
  std::string h = "all-to-all: " + std::to_string(r.instances) + " instances matched by " +
                  r.matched_by + ", " + format_bytes(r.intra_bytes + r.inter_bytes) + " moved (" +
                  format_bytes(r.intra_bytes) + " within hosts, " + format_bytes(r.inter_bytes) +
                  " across hosts)";
  if (r.even_instances)
    h += "; " + std::to_string(r.even_instances) + " without split sizes (even split assumed)";
  if (r.unknown_instances)
    h += "; " + std::to_string(r.unknown_instances) + " without message size";
  out->headline.push_back(h);
  if (r.instances > 0) {
    Table t;
    t.key = "alltoall_matrix";
    t.title = "All-to-all bytes, sender (row) to receiver (column)";
    t.columns = {"from_rank", "host"};
    for (int32_t x : r.ranks) t.columns.push_back("to_" + std::to_string(x));
    for (size_t i = 0; i < r.ranks.size(); ++i) {
      std::vector<Cell> row{int64_t{r.ranks[i]}, r.hosts[i]};
      for (int64_t b : r.bytes[i]) row.push_back(b);
      t.rows.push_back(std::move(row));
    }
    t.in_json = false;  // the "alltoall" key below carries the matrix
    out->tables.push_back(std::move(t));
    Table st;
    st.key = "alltoall_steps";
    st.title = "All-to-all per step";
    st.columns = {"step", "instances", "bytes", "time_us"};
    for (const auto& x : r.steps)
      st.rows.push_back({x.step == kNoStep ? Cell{} : Cell{int64_t{x.step}}, x.instances, x.bytes,
                         us(x.time_ns)});
    out->tables.push_back(std::move(st));
  }
  Table sp;
  sp.key = "comm_host_split";
  sp.title = "Collective GPU time within one host and across hosts";
  sp.columns = {"op",           "instances", "intra_host", "inter_host",
                "unknown_host", "intra_us",  "inter_us",   "inter_pct"};
  for (const auto& x : r.split) {
    const int64_t tot = sat_add(x.intra_ns, x.inter_ns);
    sp.rows.push_back(
        {x.op, x.instances, x.intra_instances, x.inter_instances, x.unknown_instances,
         us(x.intra_ns), us(x.inter_ns),
         tot > 0 ? Cell{100.0 * static_cast<double>(x.inter_ns) / static_cast<double>(tot)}
                 : Cell{}});
  }
  out->tables.push_back(std::move(sp));
  out->json["alltoall"] = {{"ranks", r.ranks},
                           {"hosts", r.hosts},
                           {"bytes", r.bytes},
                           {"instances", r.instances},
                           {"even_split_instances", r.even_instances},
                           {"unknown_instances", r.unknown_instances},
                           {"intra_host_bytes", r.intra_bytes},
                           {"inter_host_bytes", r.inter_bytes},
                           {"matched_by", r.matched_by}};
}

nlohmann::json alltoall_page_data(const AllToAllResult& r) {
  nlohmann::json cells = nlohmann::json::array();
  int64_t mx = 0;
  for (size_t i = 0; i < r.bytes.size(); ++i)
    for (size_t j = 0; j < r.bytes[i].size(); ++j) {
      cells.push_back({static_cast<int64_t>(j), static_cast<int64_t>(i), r.bytes[i][j]});
      mx = std::max(mx, r.bytes[i][j]);
    }
  return {{"ranks", r.ranks},
          {"cells", r.instances ? cells : nlohmann::json::array()},
          {"max", mx},
          {"instances", r.instances}};
}

}  // namespace kernalyse
