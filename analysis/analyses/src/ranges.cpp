// GPU time by annotated range ("model-aware mapping", docs/analyses.md): every CPU range (NVTX
// or user annotation, not ProfilerStep) gets the GPU work launched inside it on the same thread,
// joined through the launch's correlation id, as HTA and Nsight Systems' NVTX projection do.
#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

#include "kernalyse/analysis.h"
#include "kernalyse/checked.h"

namespace kernalyse {

namespace {

struct Gpu {
  int64_t ns = 0, items = 0;
};

struct PairHash {
  size_t operator()(const std::pair<int32_t, int64_t>& k) const noexcept {
    return std::hash<int64_t>()(k.second * 1000003 + k.first);
  }
};

struct Acc {
  int64_t calls = 0, items = 0, gpu_ns = 0, cpu_ns = 0;
  std::vector<int32_t> ranks;  // distinct, in arrival order (annotations are sorted by rank)
};

}  // namespace

std::vector<uint32_t> range_rows(const Store& s, const Filter& f) {
  const Annotations& an = s.annotations;
  std::vector<uint32_t> rows;
  for (size_t i = 0; i < an.size(); ++i) {
    const auto kind = static_cast<AnnotationKind>(an.kind[i]);
    if (kind != AnnotationKind::User && kind != AnnotationKind::Nvtx) continue;
    if (f.rank && an.rank[i] != *f.rank) continue;
    if (f.step && an.step[i] != *f.step) continue;
    rows.push_back(static_cast<uint32_t>(i));
  }
  return rows;
}

RangeLaunches::RangeLaunches(const Store& s, const Filter& f) : ranges(range_rows(s, f)), s_(&s) {
  const Annotations& an = s.annotations;
  const LaunchCalls& l = s.launches;
  // The threads the ranges are on.
  std::set<std::pair<int32_t, int64_t>> threads;
  for (uint32_t i : ranges) threads.insert({an.rank[i], an.tid[i]});
  // Launches on those threads only, in start order (the table is sorted by rank, then start).
  if (!ranges.empty() && l.tid.size() == l.size())
    for (size_t i = 0; i < l.size(); ++i)
      if (threads.count({l.rank[i], l.tid[i]}))
        by_thread_[{l.rank[i], l.tid[i]}].push_back(static_cast<uint32_t>(i));
  auto by_start = [&](uint32_t x, uint32_t y) { return l.start_ns[x] < l.start_ns[y]; };
  for (auto& [key, v] : by_thread_)
    if (!std::is_sorted(v.begin(), v.end(), by_start))
      std::stable_sort(v.begin(), v.end(), by_start);
}

std::pair<const uint32_t*, const uint32_t*> RangeLaunches::launches_in(uint32_t range) const {
  const Annotations& an = s_->annotations;
  const LaunchCalls& l = s_->launches;
  auto t = by_thread_.find({an.rank[range], an.tid[range]});
  if (t == by_thread_.end()) return {nullptr, nullptr};
  const auto& v = t->second;
  auto it = std::lower_bound(v.begin(), v.end(), an.start_ns[range],
                             [&](uint32_t x, int64_t ts) { return l.start_ns[x] < ts; });
  auto end = it;
  while (end != v.end() && l.start_ns[*end] <= an.end_ns[range]) ++end;
  return {v.data() + (it - v.begin()), v.data() + (end - v.begin())};
}

RangeResult range_analysis(const Store& s, const RangeOptions& opt) {
  const std::vector<uint32_t> rows = select_activities(s, opt.filter);
  const Activities& a = s.activities;
  const LaunchCalls& l = s.launches;
  const Annotations& an = s.annotations;

  const RangeLaunches join(s, opt.filter);
  const std::vector<uint32_t>& ranges = join.ranges;
  // Calls f(launch) for each launch of range i's thread that starts inside it.
  auto launches_in = [&](uint32_t i, auto&& f) {
    const auto [first, last] = join.launches_in(i);
    for (const uint32_t* x = first; x != last; ++x) f(*x);
  };
  // GPU time per (rank, correlation), only for launches inside some range: one pass over the
  // selected GPU work, hashing only those correlations.
  std::vector<char> covered(l.size(), 0);
  for (uint32_t i : ranges) launches_in(i, [&](uint32_t x) { covered[x] = 1; });
  std::unordered_map<std::pair<int32_t, int64_t>, Gpu, PairHash> gpu;
  for (size_t i = 0; i < l.size(); ++i)
    if (covered[i]) gpu.try_emplace({l.rank[i], l.correlation[i]});
  int64_t all_gpu_ns = 0;
  for (uint32_t i : rows) {
    if (!is_gpu_work(static_cast<Kind>(a.kind[i]))) continue;
    const int64_t d = a.end_ns[i] - a.start_ns[i];
    all_gpu_ns = sat_add(all_gpu_ns, d);
    if (gpu.empty() || a.correlation.empty() || a.correlation[i] == kNoCorrelation) continue;
    auto g = gpu.find({a.rank[i], a.correlation[i]});
    if (g == gpu.end()) continue;
    g->second.ns = sat_add(g->second.ns, d);
    ++g->second.items;
  }
  // GPU time launched inside at least one range (each launch once).
  int64_t covered_ns = 0;
  for (const auto& [key, g] : gpu) covered_ns = sat_add(covered_ns, g.ns);

  std::map<uint32_t, Acc> by_name;
  for (uint32_t i : ranges) {
    Acc& acc = by_name[an.name_id[i]];
    ++acc.calls;
    acc.cpu_ns = sat_add(acc.cpu_ns, an.end_ns[i] - an.start_ns[i]);
    if (acc.ranks.empty() || acc.ranks.back() != an.rank[i]) acc.ranks.push_back(an.rank[i]);
    launches_in(i, [&](uint32_t x) {
      auto g = gpu.find({l.rank[x], l.correlation[x]});
      if (g == gpu.end()) return;
      acc.items += g->second.items;
      acc.gpu_ns = sat_add(acc.gpu_ns, g->second.ns);
    });
  }
  std::vector<std::pair<uint32_t, const Acc*>> order;
  for (const auto& [name, acc] : by_name) order.emplace_back(name, &acc);
  std::sort(order.begin(), order.end(), [&](const auto& x, const auto& y) {
    if (x.second->gpu_ns != y.second->gpu_ns) return x.second->gpu_ns > y.second->gpu_ns;
    return s.strings.at(x.first) < s.strings.at(y.first);
  });
  RangeResult out;
  out.scope = describe_filter(s, opt.filter);
  out.instances = static_cast<int64_t>(ranges.size());
  out.distinct = order.size();
  out.gpu_ns = all_gpu_ns;
  out.covered_ns = covered_ns;
  if (opt.top > 0 && order.size() > static_cast<size_t>(opt.top)) order.resize(opt.top);
  for (const auto& [name, acc] : order)
    out.rows.push_back({s.strings.at(name), acc->calls, static_cast<int64_t>(acc->ranks.size()),
                        acc->items, acc->gpu_ns, acc->cpu_ns});
  return out;
}

void range_report(const RangeResult& r, Report* out) {
  const double all_gpu = static_cast<double>(r.gpu_ns);
  Table t;
  t.key = "ranges";
  t.title = "GPU time by annotated range (" + r.scope + ")";
  t.columns = {"range",       "calls",        "ranks",        "gpu_items",   "gpu_total_us",
               "gpu_mean_us", "cpu_total_us", "pct_gpu_time", "gpu_total_ns"};
  t.text_hidden.assign(t.columns.size(), false);
  t.text_hidden.back() = true;
  t.precision = 3;
  t.max_text_width = 48;
  for (const RangeRow& x : r.rows) {
    std::vector<Cell> row;
    row.emplace_back(x.name);
    row.emplace_back(x.calls);
    row.emplace_back(x.ranks);
    row.emplace_back(x.gpu_items);
    row.emplace_back(us(x.gpu_ns));
    row.emplace_back(x.calls ? us(x.gpu_ns) / static_cast<double>(x.calls) : 0.0);
    row.emplace_back(us(x.cpu_ns));
    row.emplace_back(r.gpu_ns > 0 ? 100.0 * static_cast<double>(x.gpu_ns) / all_gpu : 0.0);
    row.emplace_back(x.gpu_ns);
    t.rows.push_back(std::move(row));
  }
  const double coverage = r.gpu_ns > 0 ? 100.0 * static_cast<double>(r.covered_ns) / all_gpu : 0.0;
  char line[256];
  if (r.instances == 0) {
    std::snprintf(line, sizeof line, "GPU time by annotated range: no NVTX or user ranges in %s",
                  r.scope.c_str());
  } else {
    std::snprintf(line, sizeof line,
                  "GPU time by annotated range: %lld ranges, %zu distinct names; %.1f %% of the "
                  "GPU time was launched inside one (inclusive: nested ranges each count their "
                  "kernels)",
                  static_cast<long long>(r.instances), r.distinct, coverage);
  }
  out->headline.push_back(line);
  out->tables.push_back(std::move(t));
  out->json["ranges_coverage_pct"] = coverage;
}

void range_analysis(const Store& s, const RangeOptions& opt, Report* out) {
  range_report(range_analysis(s, opt), out);
}

}  // namespace kernalyse
