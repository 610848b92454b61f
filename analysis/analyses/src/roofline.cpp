// Roofline placement, bottleneck classes and hints (roofline.h; definitions in
// docs/analyses.md, "Performance model").
#include "kernalyse/roofline.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <cmath>
#include <map>
#include <set>
#include <sstream>
#include <tuple>
#include <unordered_map>

#include "kernalyse/archive.h"
#include "kernalyse/crossrank.h"
#include "kernalyse/sliced_folds.h"
#include "kernalyse/timeline.h"

namespace kernalyse {
namespace {

using RankCorr = std::pair<int32_t, int64_t>;

std::string pct_text(double p) {
  char b[32];
  std::snprintf(b, sizeof b, p < 10 ? "%.1f %%" : "%.0f %%", p);
  return b;
}

bool contains_ci(std::string_view s, std::string_view w) {
  auto it = std::search(s.begin(), s.end(), w.begin(), w.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) ==
           std::tolower(static_cast<unsigned char>(b));
  });
  return it != s.end();
}

// Bound, % of bound and class of one row (docs/analyses.md, "Classes").
void place(RooflineRow& r, bool comm, bool copy_kind, const std::optional<DevicePeaks>& peaks,
           int64_t latency_ns) {
  const double secs = static_cast<double>(r.work_time_ns) * 1e-9;
  if (r.has_work && secs > 0) {
    r.flops_per_s = r.flops / secs;
    r.bytes_per_s = r.bytes / secs;
    r.intensity = r.bytes > 0 ? r.flops / r.bytes : 0;
  }
  if (r.has_work && peaks && secs > 0 && peaks->bytes_per_s > 0) {
    if (r.flops > 0) {
      std::string dt = r.dtype;
      double p = peak_flops(*peaks, dt);
      // A fp32 GEMM faster than the fp32 peak ran on TF32 tensor cores: judge it against those.
      if (dt == "fp32" && r.flops_per_s > p && peaks->tf32 > 0) dt = "tf32", p = peaks->tf32;
      for (const char* fb : {"bf16", "fp16", "fp32"})  // no unit for the dtype (bf16 on V100)
        if (p <= 0 && peak_flops(*peaks, fb) > 0) dt = fb, p = peak_flops(*peaks, fb);
      if (p > 0) {
        r.dtype = dt;
        r.bound_flops_per_s = std::min(p, r.intensity * peaks->bytes_per_s);
        r.pct_of_bound = r.bound_flops_per_s > 0 ? 100.0 * r.flops_per_s / r.bound_flops_per_s : 0;
        r.has_bound = true;
      }
    } else if (r.bytes > 0) {  // bytes only: against the memory bandwidth
      r.bound_flops_per_s = 0;
      r.pct_of_bound = 100.0 * r.bytes_per_s / peaks->bytes_per_s;
      r.has_bound = true;
    }
  }
  const double mean = r.count ? static_cast<double>(r.time_ns) / static_cast<double>(r.count) : 0;
  if (comm) {
    r.cls = "communication";
    r.reason = "communication kernels";
  } else if (r.host_wait_ns > 0 && r.host_wait_ns >= r.time_ns) {
    r.cls = "host-launch-bound";
    r.reason = "GPU idle waiting for these launches " + format_duration(r.host_wait_ns) +
               " >= their GPU time " + format_duration(r.time_ns);
  } else if (r.count && mean < static_cast<double>(latency_ns)) {
    r.cls = "latency-bound";
    r.reason = "mean " + format_duration(std::llround(mean)) + " per call < " +
               format_duration(latency_ns);
  } else if (r.has_bound && r.flops > 0) {
    const double ridge = peak_flops(*peaks, r.dtype) / peaks->bytes_per_s;
    r.cls = r.intensity >= ridge ? "compute-bound" : "memory-bound";
    char b[160];
    std::snprintf(b, sizeof b, "intensity %.1f FLOP/B %s ridge %.1f FLOP/B (%s)", r.intensity,
                  r.intensity >= ridge ? ">=" : "<", ridge, r.dtype.c_str());
    r.reason = b;
  } else if (r.has_bound) {
    r.cls = "memory-bound";
    r.reason = "moves bytes, no FLOPs counted";
  } else if (copy_kind) {
    r.cls = "memory-bound";
    r.reason = "memory copies / sets";
  } else {
    r.cls = "unknown";
    r.reason = !r.has_work ? "FLOPs and bytes unknown (no shapes or no formula)"
                           : "no peak figures for this device";
  }
}

// The fold's state (sliced_folds.h): what the rows add up to, before the rows are placed.
using OpKey = std::array<uint32_t, 4>;  // name, dims, types, concrete

// One (op, shapes, types) group's totals, groups in first-seen row order.
struct OpGroup {
  OpKey key{};
  int64_t time_ns = 0, host_wait_ns = 0;
  int64_t calls = 0;  // distinct op calls (rank, external id) with kernels in the selection
  bool comm = false;
  std::optional<OpWork> work;  // from the strings, on first use (a merged group's: at the end)
};

// A kernel name's FLOPs and bytes from one rank's rows, summed in row order; the ranks' sums are
// added in rank order, so one process, a rank at a time and MPI give the same doubles.
struct KernelPart {
  int32_t rank = 0;
  double flops = 0, bytes = 0;
  std::map<std::string, double> flops_by_dtype;
};

struct KernelAcc {
  std::string name;
  int64_t count = 0, time_ns = 0, work_time_ns = 0, host_wait_ns = 0;
  bool comm = false, copy = true, all_work = true, any_work = false;
  std::vector<KernelPart> parts;
};

// The row sums the hint rules read besides the placed op rows.
struct HintSums {
  int64_t short_elem_n = 0, short_elem_t = 0;  // short elementwise / normalization kernels
  bool correlated = true, launches = false;    // the activities' correlation read; any launch
  int64_t host = 0, idle = 0, span = 0, busy = 0, exposed = 0;
};

// A kernel shorter than this counts for the fusion hint.
constexpr int64_t kShortNs = 10000;

// The hint rules (docs/analyses.md, "Hints") over the placed rows; each fires only on its
// measured facts and carries them.
void add_hints(const HintSums& hs, RooflineResult& res) {
  // ---- hints: each rule fires only on its measured facts (docs/analyses.md, "Hints").
  const double gpu = static_cast<double>(std::max<int64_t>(res.gpu_time_ns, 1));
  auto share = [&](int64_t t) { return 100.0 * static_cast<double>(t) / gpu; };
  {
    int64_t bmm_t = 0, sm_t = 0, bmm_n = 0, sm_n = 0, attn_n = 0;
    double bmm_f = 0;
    std::string dt;
    for (const RooflineRow& r : res.ops) {
      const std::string_view n = r.op;
      const bool batched = n == "aten::bmm" || n == "aten::baddbmm" || n == "aten::matmul";
      if (batched) {
        bmm_t += r.time_ns, bmm_n += r.count;
        if (r.has_work) bmm_f += r.flops, dt = r.dtype;
      }
      if (r.family == "softmax") sm_t += r.time_ns, sm_n += r.count;
      if (r.family == "attention") attn_n += r.count;
    }
    const double sh = share(bmm_t + sm_t);
    if (bmm_n >= 2 && sm_n >= 1 && attn_n == 0 && sh >= 5.0 && res.peaks && bmm_f > 0) {
      const double p = peak_flops(*res.peaks, dt);
      const double rate = bmm_f / (static_cast<double>(bmm_t + sm_t) * 1e-9);
      if (p > 0) {
        Hint h;
        h.id = "fused-attention";
        h.numbers = {{"gpu_time_pct", sh},      {"pct_of_peak", 100 * rate / p},
                     {"bmm_calls", bmm_n},      {"softmax_calls", sm_n},
                     {"time_ns", bmm_t + sm_t}, {"flops_per_s", rate},
                     {"peak_flops_per_s", p},   {"dtype", dt}};
        h.text = "attention runs as separate bmm + softmax kernels (" + std::to_string(bmm_n) +
                 " bmm, " + std::to_string(sm_n) + " softmax calls): " + pct_text(sh) +
                 " of GPU time at " + pct_text(100 * rate / p) + " of the " + dt +
                 " peak -> a fused attention kernel (scaled_dot_product_attention / "
                 "FlashAttention)";
        res.hints.push_back(std::move(h));
      }
    }
  }
  {
    int64_t t = 0, n = 0;
    double f = 0;
    for (const RooflineRow& r : res.ops)
      if (r.family == "gemm" && r.has_work && (r.dtype == "fp32" || r.dtype == "tf32"))
        t += r.time_ns, n += r.count, f += r.flops;
    const double sh = share(t);
    if (res.peaks && res.peaks->bf16 > 0 && t > 0 && sh >= 5.0) {
      const double rate = f / (static_cast<double>(t) * 1e-9);
      const double pct = 100 * rate / res.peaks->bf16;
      if (pct < 50) {
        Hint h;
        h.id = "fp32-gemm";
        h.numbers = {{"gpu_time_pct", sh},  {"pct_of_bf16_peak", pct},
                     {"calls", n},          {"time_ns", t},
                     {"flops_per_s", rate}, {"bf16_peak_flops_per_s", res.peaks->bf16}};
        h.text = "fp32 GEMMs (" + std::to_string(n) + " calls, " + pct_text(sh) +
                 " of GPU time) run at " + format_flop_rate(rate) + ", " + pct_text(pct) +
                 " of the " + res.peaks->name +
                 "'s bf16 peak -> bf16 autocast or TF32 "
                 "(torch.backends.cuda.matmul.allow_tf32)";
        res.hints.push_back(std::move(h));
      }
    }
  }
  {
    const int64_t n = hs.short_elem_n, t = hs.short_elem_t;
    const double sh = share(t);
    if (n >= 100 && sh >= 10.0) {
      Hint h;
      h.id = "fusion";
      h.numbers = {{"kernels", n}, {"gpu_time_pct", sh}, {"time_ns", t}, {"under_ns", kShortNs}};
      h.text = std::to_string(n) + " elementwise / normalization kernels under " +
               format_duration(kShortNs) + ", " + pct_text(sh) +
               " of GPU time -> fuse them (torch.compile, fused kernels)";
      res.hints.push_back(std::move(h));
    }
  }
  if (hs.correlated && hs.launches) {
    const int64_t host = hs.host, idle = hs.idle, span = hs.span, busy = hs.busy,
                  exposed = hs.exposed;
    const double idle_pct =
        span ? 100.0 * static_cast<double>(span - busy) / static_cast<double>(span) : 0;
    const double host_pct =
        idle ? 100.0 * static_cast<double>(host) / static_cast<double>(idle) : 0;
    if (host_pct >= 30 && idle_pct >= 10) {
      Hint h;
      h.id = "cuda-graphs";
      h.numbers = {{"host_wait_pct_of_idle", host_pct},
                   {"idle_pct_of_span", idle_pct},
                   {"host_wait_ns", host},
                   {"stream_idle_ns", idle}};
      h.text = "host launch gaps are " + pct_text(host_pct) + " of stream idle time (" +
               format_duration(host) + "), and the GPU is idle " + pct_text(idle_pct) +
               " of the span -> CUDA graphs (torch.compile mode=\"reduce-overhead\")";
      res.hints.push_back(std::move(h));
    }
    const double exp_pct =
        span ? 100.0 * static_cast<double>(exposed) / static_cast<double>(span) : 0;
    if (exp_pct >= 10) {
      Hint h;
      h.id = "overlap-communication";
      h.numbers = {
          {"exposed_comm_pct_of_span", exp_pct}, {"exposed_comm_ns", exposed}, {"span_ns", span}};
      h.text = "exposed communication (no computation running) is " + pct_text(exp_pct) +
               " of the span (" + format_duration(exposed) +
               ") -> overlap it with computation (bucketing, async collectives)";
      res.hints.push_back(std::move(h));
    }
  }
}

// Device and its peaks: the first selected rank's device name; a note on where the peaks came
// from and whether the store has operator shapes at all.
void choose_peaks(const Store& s, const std::set<int32_t>& sel_ranks, const RooflineOptions& opt,
                  RooflineResult& res) {
  std::set<std::string> names;
  for (const RankInfo& r : s.ranks)
    if (sel_ranks.count(r.rank) && !r.device_name.empty()) names.insert(r.device_name);
  res.device = names.empty() ? "" : *names.begin();
  if (names.size() > 1)
    res.notes.push_back(std::to_string(names.size()) + " device names among the ranks; peaks of " +
                        res.device + " used for all");
  if (opt.peaks) {
    res.peaks = opt.peaks;
    res.notes.push_back("peaks from " + opt.peaks->source);
  } else {
    res.peaks = find_peaks(res.device);
    if (res.peaks)
      res.notes.push_back("peaks of " + res.peaks->name + " (" + res.peaks->source + ")");
    else
      res.notes.push_back("device \"" + res.device +
                          "\" is not in the peak table: no bounds or compute/memory classes; "
                          "give its ceilings with --peaks FILE.json (kernalyse-scan writes one)");
  }
  if (!res.store_has_ops)
    res.notes.push_back(
        "the store has no operator shapes (/ops: cpu_op events with External id, recorded with "
        "record_shapes=True): kernels are placed by time and name only");
}

// Joins: (rank, correlation) → op row, and op row → op call.
// Sorted key tables, not hash maps: stores hold millions of op rows (one per op call and launch),
// and a node per row made this the slowest analysis.
struct OpJoin {
  const Ops& ops;
  std::vector<std::pair<RankCorr, uint32_t>> op_by_corr;
  std::vector<uint32_t> call_of;  // op row → dense call number over (rank, external id)
  size_t n_calls = 0;

  std::vector<std::pair<RankCorr, uint32_t>> sorted_keys(const std::vector<int64_t>& col) const {
    std::vector<std::pair<RankCorr, uint32_t>> v(ops.size());
    for (size_t i = 0; i < ops.size(); ++i)
      v[i] = {RankCorr{ops.rank[i], col[i]}, static_cast<uint32_t>(i)};
    std::sort(v.begin(), v.end());
    return v;
  }
  explicit OpJoin(const Ops& o) : ops(o), call_of(o.size(), 0) {
    op_by_corr = sorted_keys(ops.correlation);
    // Op call of each op row: dense call numbers over the distinct (rank, external id).
    const std::vector<std::pair<RankCorr, uint32_t>> by_call = sorted_keys(ops.external_id);
    for (size_t q = 0; q < by_call.size(); ++q) {
      if (q > 0 && by_call[q].first != by_call[q - 1].first) ++n_calls;
      call_of[by_call[q].second] = static_cast<uint32_t>(n_calls);
    }
    if (!by_call.empty()) ++n_calls;
  }
  int64_t op_of(int32_t rank, int64_t corr) const {  // first op row, -1 if none
    auto it = std::lower_bound(op_by_corr.begin(), op_by_corr.end(),
                               std::make_pair(RankCorr{rank, corr}, uint32_t{0}));
    return it != op_by_corr.end() && it->first == RankCorr{rank, corr}
               ? static_cast<int64_t>(it->second)
               : -1;  // int64: a uint32 branch would make -1 unsigned
  }
};

// Host wait before each selected activity (the --idle rule: its launch started after the
// stream's latest end so far).
std::vector<int64_t> host_waits(const Store& s, const std::vector<uint32_t>& rows) {
  const Activities& a = s.activities;
  const detail::LaunchIndex launch_start(s);  // dense per rank: no hash over every launch
  std::vector<int64_t> host_wait(rows.size(), 0);
  int64_t prev_end = 0;
  std::tuple<int32_t, int32_t, int32_t> key{-1, -1, -1};
  bool have = false;
  for (size_t k = 0; k < rows.size(); ++k) {
    uint32_t i = rows[k];
    std::tuple<int32_t, int32_t, int32_t> kk{a.rank[i], a.device[i], a.stream[i]};
    if (!have || kk != key) {
      key = kk, have = true, prev_end = a.end_ns[i];
      continue;
    }
    int64_t gap = a.start_ns[i] - prev_end;
    if (gap > 0 && a.correlation.size() == a.size()) {
      const int64_t launch = launch_start.find(a.rank[i], a.correlation[i]);
      if (launch != detail::LaunchIndex::kNone && launch > prev_end) host_wait[k] = gap;
    }
    prev_end = std::max(prev_end, a.end_ns[i]);
  }
  return host_wait;
}

// What one (op, shapes, types) call does, from the strings.
OpWork work_of(const Store& s, const OpKey& key) {
  const auto [name, dims, types, concrete] = key;
  std::vector<OpInput> inputs;
  parse_op_inputs(s.strings.at(dims), s.strings.at(types), s.strings.at(concrete), &inputs);
  OpWork w = op_work(s.strings.at(name), inputs);
  if (dims == 0) w.why = "no shapes recorded";
  return w;
}

}  // namespace

struct RooflineFold::Impl {
  RooflineOptions opt;
  bool has_ops = false;
  int64_t gpu_time_ns = 0;  // Σ selected GPU work time
  std::set<int32_t> ranks;  // with selected rows (the device they name)
  std::map<OpKey, size_t> group_of;
  std::vector<OpGroup> groups;
  std::unordered_map<std::string, size_t> kernel_of;
  std::vector<KernelAcc> kernels;
  std::vector<uint8_t> used;  // the selected rows' name ids: the kernel rows' order
  HintSums hints;

  // Per selected row its op group (-1: no op), and per op call its kernels' GPU time.
  struct Grouping {
    std::vector<int32_t> row_group;
    std::vector<int64_t> call_time;
  };
  Grouping group_ops(const Store& s, const std::vector<uint32_t>& rows, const OpJoin& join,
                     const std::vector<int64_t>& host_wait);
  void kernel_rows(const Store& s, const std::vector<uint32_t>& rows, const OpJoin& join,
                   const std::vector<int64_t>& host_wait, const Grouping& og);
  void hint_rows(const Store& s, const std::vector<uint32_t>& rows, const Grouping& og);
};

// Op calls: (rank, external id) → total GPU time; op groups by (name, dims, types, concrete).
RooflineFold::Impl::Grouping RooflineFold::Impl::group_ops(const Store& s,
                                                           const std::vector<uint32_t>& rows,
                                                           const OpJoin& join,
                                                           const std::vector<int64_t>& host_wait) {
  const Activities& a = s.activities;
  const Ops& ops = s.ops;
  Grouping out;
  out.row_group.assign(rows.size(), -1);
  out.call_time.assign(join.n_calls, 0);
  std::vector<uint8_t> call_seen(join.n_calls, 0);
  for (size_t k = 0; k < rows.size(); ++k) {
    uint32_t i = rows[k];
    const int64_t dur = a.end_ns[i] - a.start_ns[i];
    gpu_time_ns += dur;
    if (a.correlation.size() != a.size()) continue;
    const int64_t found = join.op_of(a.rank[i], a.correlation[i]);
    if (found < 0) continue;
    const auto o = static_cast<uint32_t>(found);
    const OpKey key{ops.name_id[o], ops.dims_id[o], ops.types_id[o], ops.concrete_id[o]};
    auto [g, fresh] = group_of.try_emplace(key, groups.size());
    if (fresh) groups.push_back(OpGroup{key, 0, 0, 0, false, std::nullopt});
    OpGroup& G = groups[g->second];
    if (!G.work) G.work = work_of(s, key);
    out.row_group[k] = static_cast<int32_t>(g->second);
    const uint32_t call = join.call_of[o];
    if (!call_seen[call]) call_seen[call] = 1, ++G.calls;  // a call has one group
    G.time_ns += dur;
    G.host_wait_ns += host_wait[k];
    G.comm = G.comm || a.category[i] == static_cast<uint8_t>(Category::Communication);
    out.call_time[call] += dur;
  }
  return out;
}

// Kernel names: each kernel gets its op call's work in proportion to its share of the call's
// GPU time; a name is modelled only when every one of its kernels is.
void RooflineFold::Impl::kernel_rows(const Store& s, const std::vector<uint32_t>& rows,
                                     const OpJoin& join, const std::vector<int64_t>& host_wait,
                                     const Grouping& og) {
  const Activities& a = s.activities;
  const NameGroups ng = group_names(s, rows, opt.verbose, false);
  if (used.size() < ng.group_of.size()) used.resize(ng.group_of.size(), 0);
  for (size_t id = 0; id < ng.group_of.size(); ++id)
    if (ng.group_of[id] >= 0) used[id] = 1;
  std::vector<size_t> global(ng.names.size());
  for (size_t g = 0; g < ng.names.size(); ++g) {
    auto [it, fresh] = kernel_of.try_emplace(ng.names[g], kernels.size());
    if (fresh) kernels.push_back(KernelAcc{ng.names[g], 0, 0, 0, 0, false, true, true, false, {}});
    global[g] = it->second;
  }
  for (size_t k = 0; k < rows.size(); ++k) {
    uint32_t i = rows[k];
    const int32_t gi = ng.group_of[a.name_id[i]];
    if (gi < 0) continue;
    KernelAcc& K = kernels[global[static_cast<size_t>(gi)]];
    const int64_t dur = a.end_ns[i] - a.start_ns[i];
    K.count += 1;
    K.time_ns += dur;
    K.host_wait_ns += host_wait[k];
    K.comm = K.comm || a.category[i] == static_cast<uint8_t>(Category::Communication);
    K.copy = K.copy && a.kind[i] != static_cast<uint8_t>(Kind::Kernel);
    if (og.row_group[k] < 0 || !groups[static_cast<size_t>(og.row_group[k])].work->known) {
      K.all_work = false;
      continue;
    }
    const OpWork& w = *groups[static_cast<size_t>(og.row_group[k])].work;
    K.any_work = true;
    K.work_time_ns += dur;
    const auto o = static_cast<uint32_t>(join.op_of(a.rank[i], a.correlation[i]));
    const int64_t ct = og.call_time[join.call_of[o]];
    const double share = ct > 0 ? static_cast<double>(dur) / static_cast<double>(ct) : 1.0;
    if (K.parts.empty() || K.parts.back().rank != a.rank[i])
      K.parts.push_back(KernelPart{a.rank[i], 0, 0, {}});
    KernelPart& p = K.parts.back();
    p.flops += w.flops * share;
    p.bytes += w.bytes * share;
    p.flops_by_dtype[w.dtype] += w.flops * share + 1e-300;
  }
}

// The hint rules' sums over the rows: short elementwise kernels, the streams' idle time and the
// ranks' unions (each per stream or per rank: a slice's sums add up to the store's).
void RooflineFold::Impl::hint_rows(const Store& s, const std::vector<uint32_t>& rows,
                                   const Grouping& og) {
  const Activities& a = s.activities;
  for (size_t k = 0; k < rows.size(); ++k) {
    const uint32_t i = rows[k];
    if (a.kind[i] != static_cast<uint8_t>(Kind::Kernel)) continue;
    const int64_t dur = a.end_ns[i] - a.start_ns[i];
    if (dur >= kShortNs) continue;
    bool elem;
    if (og.row_group[k] >= 0) {
      const OpKey& key = groups[static_cast<size_t>(og.row_group[k])].key;
      const OpFamily f = op_family(s.strings.at(std::get<0>(key)));
      elem = f == OpFamily::Elementwise || f == OpFamily::Norm || f == OpFamily::Softmax ||
             f == OpFamily::Copy;
    } else {
      elem = contains_ci(s.strings.at(a.name_id[i]), "elementwise");
    }
    if (elem) ++hints.short_elem_n, hints.short_elem_t += dur;
  }
  hints.launches = hints.launches || s.launches.size() > 0;
  hints.correlated = hints.correlated && a.correlation.size() == a.size();
  if (!hints.correlated) return;
  CrossRankOptions xo;
  xo.filter = opt.filter;
  for (const StreamIdle& si : stream_idle(s, xo)) {
    hints.host += si.host_ns;
    hints.idle += si.host_ns + si.kernel_ns + si.other_ns;
  }
  for (const RankUnion& ru : rank_unions(s, xo, false)) {
    hints.span += ru.u.span_ns;
    hints.busy += ru.u.busy_ns;
    hints.exposed += ru.u.comm_excl_ns;
  }
}

RooflineFold::RooflineFold(const RooflineOptions& opt) : impl_(std::make_shared<Impl>()) {
  impl_->opt = opt;
}

void RooflineFold::add(const Store& s) {
  Impl& m = *impl_;
  const Activities& a = s.activities;
  m.has_ops = m.has_ops || s.ops.size() > 0;
  std::vector<uint32_t> rows = select_activities(s, m.opt.filter);
  rows.erase(std::remove_if(rows.begin(), rows.end(),
                            [&](uint32_t i) { return !is_gpu_work(static_cast<Kind>(a.kind[i])); }),
             rows.end());
  for (size_t k = 0; k < rows.size(); ++k)
    if (k == 0 || a.rank[rows[k]] != a.rank[rows[k - 1]]) m.ranks.insert(a.rank[rows[k]]);
  const OpJoin join(s.ops);
  const std::vector<int64_t> host_wait = host_waits(s, rows);
  const Impl::Grouping og = m.group_ops(s, rows, join, host_wait);
  m.kernel_rows(s, rows, join, host_wait, og);
  m.hint_rows(s, rows, og);
}

RooflineResult RooflineFold::finish(const Store& s) const {
  const Impl& m = *impl_;
  RooflineResult res;
  res.store_has_ops = m.has_ops;
  res.gpu_time_ns = m.gpu_time_ns;
  choose_peaks(s, m.ranks, m.opt, res);
  std::map<std::pair<std::string, std::string>, RooflineResult::Missing> missing;
  for (const OpGroup& G : m.groups) {
    const OpWork w = G.work ? *G.work : work_of(s, G.key);
    RooflineRow r;
    r.op = s.strings.at(std::get<0>(G.key));
    r.shape = s.strings.at(std::get<1>(G.key));
    r.family = to_string(w.family);
    r.dtype = w.dtype;
    r.time_ns = G.time_ns;
    r.host_wait_ns = G.host_wait_ns;
    r.count = G.calls;
    r.has_work = w.known;
    r.flops = w.flops * static_cast<double>(r.count);
    r.bytes = w.bytes * static_cast<double>(r.count);
    if (r.has_work) res.attributed_ns += r.time_ns, r.work_time_ns = r.time_ns;
    place(r, G.comm, false, res.peaks, m.opt.latency_ns);
    if (!w.known) {  // ops without work, by op name and reason
      auto& x = missing[{r.op, w.why}];
      x.op = r.op, x.why = w.why;
      x.count += r.count;
      x.time_ns += r.time_ns;
    }
    res.ops.push_back(std::move(r));
  }
  // The kernel names in the order the whole store's rows name them.
  for (const std::string& name : group_used_names(s, m.used, m.opt.verbose).names) {
    const auto it = m.kernel_of.find(name);
    if (it == m.kernel_of.end() || m.kernels[it->second].count == 0) continue;
    const KernelAcc& K = m.kernels[it->second];
    RooflineRow r;
    r.op = name;
    r.count = K.count;
    r.time_ns = K.time_ns;
    r.host_wait_ns = K.host_wait_ns;
    r.work_time_ns = K.work_time_ns;
    std::map<std::string, double> by_dtype;
    for (const KernelPart& p : K.parts) {
      r.flops += p.flops;
      r.bytes += p.bytes;
      for (const auto& [dt, f] : p.flops_by_dtype) by_dtype[dt] += f;
    }
    // Kernels of unmodelled ops (or launched outside the profiled ops) are left out of the
    // rates: the rates are over work_time_ns, the kernels whose work is known.
    r.has_work = K.any_work;
    double best = -1;
    for (const auto& [dt, f] : by_dtype)
      if (f > best) best = f, r.dtype = dt;
    r.family = K.comm ? "communication" : K.copy ? "memory" : "";
    place(r, K.comm, K.copy, res.peaks, m.opt.latency_ns);
    res.kernels.push_back(std::move(r));
  }
  for (auto& [k, x] : missing) res.unmodelled.push_back(x);
  std::sort(res.unmodelled.begin(), res.unmodelled.end(),
            [](const auto& x, const auto& y) { return x.time_ns > y.time_ns; });
  // The op rows and the kernel rows, longest first.
  auto by_time = [](const RooflineRow& x, const RooflineRow& y) {
    return std::tie(y.time_ns, x.op, x.shape) < std::tie(x.time_ns, y.op, y.shape);
  };
  std::sort(res.ops.begin(), res.ops.end(), by_time);
  std::sort(res.kernels.begin(), res.kernels.end(), by_time);
  add_hints(m.hints, res);
  return res;
}

std::string RooflineFold::save() const {
  const Impl& m = *impl_;
  Archive ar;
  ar.put(m.has_ops);
  ar.put(m.gpu_time_ns);
  ar.put(std::vector<int32_t>(m.ranks.begin(), m.ranks.end()));
  ar.put(static_cast<uint64_t>(m.groups.size()));
  for (const OpGroup& G : m.groups) {
    ar.put(G.key);
    ar.put(G.time_ns), ar.put(G.host_wait_ns), ar.put(G.calls), ar.put(G.comm);
  }
  ar.put(static_cast<uint64_t>(m.kernels.size()));
  for (const KernelAcc& K : m.kernels) {
    ar.put(K.name);
    ar.put(K.count), ar.put(K.time_ns), ar.put(K.work_time_ns), ar.put(K.host_wait_ns);
    ar.put(K.comm), ar.put(K.copy), ar.put(K.all_work), ar.put(K.any_work);
    ar.put(static_cast<uint64_t>(K.parts.size()));
    for (const KernelPart& p : K.parts)
      ar.put(p.rank), ar.put(p.flops), ar.put(p.bytes), ar.put(p.flops_by_dtype);
  }
  ar.put(m.used);
  ar.put(m.hints);
  return ar.bytes();
}

void RooflineFold::merge(const std::string& bytes) {
  Impl& m = *impl_;
  Archive ar(bytes);
  m.has_ops = ar.get<bool>() || m.has_ops;
  m.gpu_time_ns += ar.get<int64_t>();
  for (int32_t r : ar.get<std::vector<int32_t>>()) m.ranks.insert(r);
  for (uint64_t n = ar.get<uint64_t>(); n > 0; --n) {
    const auto key = ar.get<OpKey>();
    auto [g, fresh] = m.group_of.try_emplace(key, m.groups.size());
    if (fresh) m.groups.push_back(OpGroup{key, 0, 0, 0, false, std::nullopt});
    OpGroup& G = m.groups[g->second];
    G.time_ns += ar.get<int64_t>(), G.host_wait_ns += ar.get<int64_t>();
    G.calls += ar.get<int64_t>();
    G.comm = ar.get<bool>() || G.comm;
  }
  for (uint64_t n = ar.get<uint64_t>(); n > 0; --n) {
    const auto name = ar.get<std::string>();
    auto [it, fresh] = m.kernel_of.try_emplace(name, m.kernels.size());
    if (fresh) m.kernels.push_back(KernelAcc{name, 0, 0, 0, 0, false, true, true, false, {}});
    KernelAcc& K = m.kernels[it->second];
    K.count += ar.get<int64_t>(), K.time_ns += ar.get<int64_t>();
    K.work_time_ns += ar.get<int64_t>(), K.host_wait_ns += ar.get<int64_t>();
    K.comm = ar.get<bool>() || K.comm;
    K.copy = ar.get<bool>() && K.copy;
    K.all_work = ar.get<bool>() && K.all_work;
    K.any_work = ar.get<bool>() || K.any_work;
    for (uint64_t q = ar.get<uint64_t>(); q > 0; --q) {
      KernelPart p;
      ar.get(p.rank), ar.get(p.flops), ar.get(p.bytes), ar.get(p.flops_by_dtype);
      K.parts.push_back(std::move(p));
    }
  }
  const auto used = ar.get<std::vector<uint8_t>>();
  if (m.used.size() < used.size()) m.used.resize(used.size(), 0);
  for (size_t i = 0; i < used.size(); ++i) m.used[i] |= used[i];
  const auto h = ar.get<HintSums>();
  m.hints.short_elem_n += h.short_elem_n, m.hints.short_elem_t += h.short_elem_t;
  m.hints.correlated = m.hints.correlated && h.correlated;
  m.hints.launches = m.hints.launches || h.launches;
  m.hints.host += h.host, m.hints.idle += h.idle, m.hints.span += h.span;
  m.hints.busy += h.busy, m.hints.exposed += h.exposed;
}

RooflineResult roofline_analysis(const Store& s, const RooflineOptions& opt) {
  RooflineFold fold(opt);  // the whole store as one slice
  fold.add(s);
  return fold.finish(s);
}

namespace {

Cell num_or_null(bool ok, double v) { return ok ? Cell(v) : Cell(); }

Table rows_table(const std::vector<RooflineRow>& v, const char* key, const char* title,
                 bool with_shape) {
  Table t;
  t.key = key;
  t.title = title;
  t.columns = {"op",           "count",       "flops",       "bytes",     "time_ns",
               "work_time_ns", "flops_per_s", "bytes_per_s", "intensity", "bound_flops_per_s",
               "pct_of_bound", "class",       "dtype",       "family",    "host_wait_ns",
               "reason"};
  if (with_shape) t.columns.insert(t.columns.begin() + 1, "shape");
  t.in_text = false;  // the text block below renders it with units
  for (const RooflineRow& r : v) {
    std::vector<Cell> row;
    row.emplace_back(r.op);
    if (with_shape) row.emplace_back(r.shape);
    row.emplace_back(r.count);
    row.push_back(num_or_null(r.has_work, r.flops));
    row.push_back(num_or_null(r.has_work, r.bytes));
    row.emplace_back(r.time_ns);
    row.emplace_back(r.work_time_ns);
    row.push_back(num_or_null(r.has_work && r.work_time_ns > 0, r.flops_per_s));
    row.push_back(num_or_null(r.has_work && r.work_time_ns > 0, r.bytes_per_s));
    row.push_back(num_or_null(r.has_work && r.bytes > 0, r.intensity));
    row.push_back(num_or_null(r.has_bound && r.flops > 0, r.bound_flops_per_s));
    row.push_back(num_or_null(r.has_bound, r.pct_of_bound));
    row.emplace_back(r.cls);
    row.emplace_back(r.dtype);
    row.emplace_back(r.family);
    row.emplace_back(r.host_wait_ns);
    row.emplace_back(r.reason);
    t.rows.push_back(std::move(row));
  }
  return t;
}

std::string text_rows(const std::vector<RooflineRow>& v, bool ops, size_t top) {
  std::ostringstream o;
  char line[512];
  std::snprintf(line, sizeof line, "%-40s %7s %11s %13s %12s %10s %7s  %s\n",
                ops ? "op [input dims]" : "kernel", "count", "time", "FLOP/s", "B/s", "FLOP/B",
                "%bound", "class");
  o << line;
  size_t n = 0;
  for (const RooflineRow& r : v) {
    if (top && n++ >= top) break;
    std::string name = r.op;
    if (ops && !r.shape.empty()) name += " " + r.shape;
    if (name.size() > 40) name = name.substr(0, 39) + "~";
    char pb[16] = "-";
    if (r.has_bound) std::snprintf(pb, sizeof pb, "%.1f", r.pct_of_bound);
    char ib[24] = "-";
    if (r.has_work && r.bytes > 0) std::snprintf(ib, sizeof ib, "%.1f", r.intensity);
    std::snprintf(line, sizeof line, "%-40s %7lld %11s %13s %12s %10s %7s  %s\n", name.c_str(),
                  static_cast<long long>(r.count), format_duration(r.time_ns).c_str(),
                  r.has_work ? format_flop_rate(r.flops_per_s).c_str() : "-",
                  r.has_work ? format_bandwidth(r.bytes_per_s).c_str() : "-", ib, pb,
                  r.cls.c_str());
    o << line;
  }
  if (top && v.size() > top) o << "  ... " << v.size() - top << " more rows in --json / --csv\n";
  return o.str();
}

}  // namespace

void roofline_report(const RooflineResult& r, Report* out) {
  const double gpu = static_cast<double>(std::max<int64_t>(r.gpu_time_ns, 1));
  out->headline.push_back(
      "roofline: " + (r.device.empty() ? std::string("device unknown") : r.device) + "; " +
      pct_text(100.0 * static_cast<double>(r.attributed_ns) / gpu) + " of " +
      format_duration(r.gpu_time_ns) + " GPU time in ops with known FLOPs/bytes");
  for (const std::string& n : r.notes) out->headline.push_back(n);
  out->tables.push_back(rows_table(r.ops, "roofline", "Roofline per op and input shape", true));
  out->tables.push_back(
      rows_table(r.kernels, "roofline_kernels", "Roofline per kernel name", false));
  Table m;
  m.key = "roofline_unmodelled";
  m.title = "Ops with GPU time but no FLOPs/bytes (nothing invented)";
  m.columns = {"op", "why", "count", "time_ns"};
  m.in_text = false;
  for (const auto& x : r.unmodelled) m.rows.push_back({x.op, x.why, x.count, x.time_ns});
  out->tables.push_back(std::move(m));
  nlohmann::json peaks = nullptr;
  if (r.peaks)
    peaks = {{"name", r.peaks->name},
             {"source", r.peaks->source},
             {"bytes_per_s", r.peaks->bytes_per_s},
             {"flops_per_s",
              {{"fp64", r.peaks->fp64},
               {"fp32", r.peaks->fp32},
               {"tf32", r.peaks->tf32},
               {"bf16", r.peaks->bf16},
               {"fp16", r.peaks->fp16},
               {"fp8", r.peaks->fp8},
               {"int8", r.peaks->int8}}}};
  out->json["roofline_device"] = {{"device_name", r.device},
                                  {"peaks", peaks},
                                  {"gpu_time_ns", r.gpu_time_ns},
                                  {"modelled_time_ns", r.attributed_ns},
                                  {"store_has_ops", r.store_has_ops}};
  std::ostringstream o;
  o << "Roofline per op and input shape\n" << text_rows(r.ops, true, 30);
  o << "\nRoofline per kernel name\n" << text_rows(r.kernels, false, 30);
  if (!r.unmodelled.empty()) {
    o << "\nOps with GPU time but no FLOPs/bytes (nothing invented):\n";
    for (const auto& x : r.unmodelled)
      o << "  " << x.op << ": " << x.count << " calls, " << format_duration(x.time_ns) << " ("
        << x.why << ")\n";
  }
  out->text_blocks.push_back(o.str());
}

void hints_report(const RooflineResult& r, Report* out) {
  nlohmann::json arr = nlohmann::json::array();
  std::ostringstream o;
  o << "Hints (" << r.hints.size() << ")\n";
  if (r.hints.empty()) o << "  none: no rule's measured condition holds\n";
  for (const Hint& h : r.hints) {
    arr.push_back({{"id", h.id}, {"text", h.text}, {"numbers", h.numbers}});
    o << "  [" << h.id << "] " << h.text << "\n";
  }
  out->json["hints"] = arr;
  out->text_blocks.push_back(o.str());
}

}  // namespace kernalyse
