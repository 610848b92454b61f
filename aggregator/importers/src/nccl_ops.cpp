// Joining NCCL operation records to the activities that ran them (nccl_ops.h).
#include "nccl_ops.h"

#include <algorithm>
#include <cstdio>
#include <unordered_map>

#include "kernalyse/checked.h"
#include "kernalyse/nccl_dtypes.h"

namespace kernalyse {

int64_t nccl_dtype_bytes(const std::string& nccl, std::string* name) {
  const NcclDtype* d = find_nccl_dtype(nccl.c_str());
  if (name) *name = d ? d->name : nccl;
  return d ? d->size : -1;
}

namespace {

bool joinable(const Activities& a, size_t i) {
  const auto k = static_cast<Kind>(a.kind[i]);
  return (k == Kind::Kernel && a.category[i] == static_cast<uint8_t>(Category::Communication)) ||
         k == Kind::Memcpy;
}

// Appends a /nccl row of unknown values (every column, so that the table stays rectangular).
size_t add_row(NcclInfo& n) {
  for_each_column(n, [](const auto& def, auto& col) { col.push_back(def.unknown); });
  return n.size() - 1;
}

// The free candidate overlapping [s, e) most; kernels before copies. `cand` is sorted by start.
// An operation lies inside its kernel or copy, which starts shortly before it: the candidates
// starting by `e` are scanned nearest first, at most kMaxScan of them, so that a hostile file (one
// copy spanning the run beside a million operations) stays linear (docs/limits.md).
constexpr int kMaxScan = 256;
int64_t best_row(const Activities& a, const std::vector<uint32_t>& cand,
                 const std::vector<uint8_t>& taken, int64_t max_dur, int64_t s, int64_t e) {
  auto by_start = [&](uint32_t r, int64_t t) { return a.start_ns[r] < t; };
  const auto lo = std::lower_bound(cand.begin(), cand.end(), sat_sub(s, max_dur), by_start);
  auto it = std::upper_bound(cand.begin(), cand.end(), e,
                             [&](int64_t t, uint32_t r) { return t < a.start_ns[r]; });
  int64_t best = -1, best_ov = -1;
  bool best_kernel = false;
  for (int n = 0; it != lo && n < kMaxScan; ++n) {
    const uint32_t r = *--it;
    if (taken[r]) continue;
    const int64_t ov = std::min(e, a.end_ns[r]) - std::max(s, a.start_ns[r]);
    if (ov < 0 || (ov == 0 && s != e && a.start_ns[r] != a.end_ns[r])) continue;
    const bool kernel = a.kind[r] == static_cast<uint8_t>(Kind::Kernel);
    if (best < 0 || (kernel && !best_kernel) || (kernel == best_kernel && ov > best_ov))
      best = r, best_ov = ov, best_kernel = kernel;
  }
  return best;
}

}  // namespace

NcclOpJoin join_nccl_ops(Store& s, std::vector<NcclOpRecord> ops) {
  NcclOpJoin out;
  if (ops.empty()) return out;
  Activities& a = s.activities;
  NcclInfo& n = s.nccl;
  fill_unknown_columns(n);
  std::vector<uint32_t> cand;
  int64_t max_dur = 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (joinable(a, i)) {
      cand.push_back(static_cast<uint32_t>(i));
      max_dur = std::max(max_dur, sat_sub(a.end_ns[i], a.start_ns[i]));
    }
  std::stable_sort(cand.begin(), cand.end(),
                   [&](uint32_t x, uint32_t y) { return a.start_ns[x] < a.start_ns[y]; });
  std::unordered_map<uint64_t, size_t> row_of;  // activity → its /nccl row
  for (size_t i = 0; i < n.size(); ++i) row_of.emplace(n.activity[i], i);
  std::vector<uint8_t> taken(a.size(), 0);
  std::stable_sort(ops.begin(), ops.end(),
                   [](const NcclOpRecord& x, const NcclOpRecord& y) { return x.start < y.start; });
  for (const NcclOpRecord& op : ops) {
    const int64_t r = op.end >= op.start ? best_row(a, cand, taken, max_dur, op.start, op.end) : -1;
    if (r < 0) {
      ++out.unjoined;
      continue;
    }
    taken[static_cast<size_t>(r)] = 1;
    ++out.joined;
    auto it = row_of.find(static_cast<uint64_t>(r));
    const size_t k = it != row_of.end() ? it->second : add_row(n);
    n.activity[k] = static_cast<uint64_t>(r);
    if (a.kind[static_cast<size_t>(r)] == static_cast<uint8_t>(Kind::Memcpy)) {
      ++out.copies;
      a.category[static_cast<size_t>(r)] = static_cast<uint8_t>(Category::Communication);
    }
    if (!op.name.empty()) n.collective_id[k] = s.strings.intern(op.name);  // "Send", not "SendRecv"
    n.op_id[k] = op.op_id;
    n.seq[k] = op.seq;
    n.comm_hash[k] = op.comm_hash;
    n.comm_rank[k] = op.comm_rank;
    char pg[32];
    std::snprintf(pg, sizeof pg, "comm:%016llx", static_cast<unsigned long long>(op.comm_hash));
    n.pg_name_id[k] = s.strings.intern(pg);
    std::string dtype;
    const int64_t esize = nccl_dtype_bytes(op.dtype, &dtype);
    n.dtype_id[k] = s.strings.intern(dtype);
    n.in_nelems[k] = n.out_nelems[k] = op.count;
    int64_t bytes = -1;
    if (esize > 0 && op.count >= 0 && !checked_mul(op.count, esize, &bytes)) bytes = -1;
    n.msg_bytes[k] = bytes;
  }
  return out;
}

}  // namespace kernalyse
