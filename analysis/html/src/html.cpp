// The self-contained HTML report (docs/report.md). The page is one file: the aggregates as a JSON
// island, the tables as HTML, and the charting library plus our small script inlined from assets
// embedded at build time (cmake/EmbedAsset.cmake). Only aggregates and a binned timeline go in,
// so the size does not grow with the number of events.
#include "kernalyse/html.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <string_view>

#include "kernalyse/alltoall.h"
#include "kernalyse/atomic_file.h"
#include "kernalyse/checked.h"
#include "kernalyse/critical_path.h"
#include "kernalyse/crossrank.h"
#include "kernalyse/energy.h"
#include "kernalyse/error.h"
#include "kernalyse/export.h"
#include "kernalyse/parallel.h"
#include "kernalyse/roofline.h"
#include "kernalyse/timeline.h"

namespace fs = std::filesystem;

// Generated from analysis/html/ at build time (one chunk array per asset).
namespace kernalyse::html_assets {
extern const std::string_view echarts[];
extern const size_t echarts_count;
extern const std::string_view report_js[];
extern const size_t report_js_count;
extern const std::string_view report_css[];
extern const size_t report_css_count;
}  // namespace kernalyse::html_assets

namespace kernalyse {
namespace {

using json = nlohmann::json;

std::string cell_text(const Cell& c, int precision) {
  if (std::holds_alternative<std::monostate>(c)) return "—";
  if (const auto* i = std::get_if<int64_t>(&c)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&c)) {
    char b[48];
    std::snprintf(b, sizeof b, "%.*f", precision, *d);
    return b;
  }
  return std::get<std::string>(c);
}

const Table* find_table(const Report& r, std::string_view key) {
  for (const auto& t : r.tables)
    if (t.key == key) return &t;
  return nullptr;
}

// Adds [s, e) ∩ window to per-bin busy ns.
void add_cover(std::vector<int64_t>& bins, int64_t t0, int64_t t1, int64_t bin_ns, int64_t s,
               int64_t e) {
  s = std::max(s, t0), e = std::min(e, t1);
  if (e <= s) return;
  for (size_t b = static_cast<size_t>((s - t0) / bin_ns); b < bins.size(); ++b) {
    int64_t lo = t0 + static_cast<int64_t>(b) * bin_ns, hi = lo + bin_ns;
    if (lo >= e) break;
    bins[b] += std::min(e, hi) - std::max(s, lo);
  }
}

// Union of intervals given in start order, merged as they come.
struct Window {
  int64_t t0 = 0, t1 = 0, bin_ns = 1;
  size_t bins = 0;
  bool valid() const { return t1 > t0 && bins > 0; }
};

// The timeline's lanes and their totals table, a rank at a time.
struct Lanes {
  json ranks = json::array(), comp = json::array(), comm = json::array(), idle = json::array();
  Table* totals = nullptr;
};

// One rank's lanes (compute, communication, idle): the busy fraction of each time bin, in
// permille, from the unions of the rank's GPU work; idle counts only inside the rank's own span.
// `rows`: the rank's selected rows in store order. No GPU work: no lane.
void timeline_lane(const Store& s, int32_t rank, std::span<const uint32_t> rows, const Window& w,
                   Lanes* out) {
  const auto& a = s.activities;
  const std::vector<uint32_t> order = detail::merge_streams_by_start(s, rows);
  std::vector<Interval> u_comp, u_comm, u_all;
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (uint32_t i : order) {
    if (!is_gpu_work(static_cast<Kind>(a.kind[i]))) continue;
    int64_t st = a.start_ns[i], en = a.end_ns[i];
    first = std::min(first, st), last = std::max(last, en);
    detail::push_merge(u_all, st, en);
    auto c = static_cast<Category>(a.category[i]);
    if (c == Category::Computation) detail::push_merge(u_comp, st, en);
    if (c == Category::Communication) detail::push_merge(u_comm, st, en);
  }
  if (first > last) return;
  std::vector<int64_t> bc(w.bins), bm(w.bins), ba(w.bins), span(w.bins);
  for (const auto& x : u_comp) add_cover(bc, w.t0, w.t1, w.bin_ns, x.start, x.end);
  for (const auto& x : u_comm) add_cover(bm, w.t0, w.t1, w.bin_ns, x.start, x.end);
  for (const auto& x : u_all) add_cover(ba, w.t0, w.t1, w.bin_ns, x.start, x.end);
  add_cover(span, w.t0, w.t1, w.bin_ns, first, last);
  auto permille = [&](const std::vector<int64_t>& v) {
    json o = json::array();
    for (int64_t x : v) o.push_back(static_cast<int>(std::llround(1000.0 * x / w.bin_ns)));
    return o;
  };
  std::vector<int64_t> bi(w.bins);
  int64_t tc = 0, tm = 0, ti = 0;
  for (size_t b = 0; b < w.bins; ++b) {
    bi[b] = std::max<int64_t>(0, span[b] - ba[b]);
    tc += bc[b], tm += bm[b], ti += bi[b];
  }
  out->ranks.push_back(rank);
  out->comp.push_back(permille(bc));
  out->comm.push_back(permille(bm));
  out->idle.push_back(permille(bi));
  out->totals->rows.push_back({int64_t{rank}, us(tc), us(tm), us(ti), us(w.t1 - w.t0),
                               static_cast<int64_t>(w.bins), us(w.bin_ns)});
}

// Per rank its lanes over the window, from the source's ranks in rank order.
json timeline(const PageSource& src, const Window& w, int64_t base, Table* totals) {
  totals->key = "timeline_lanes";
  totals->title = "Timeline lanes: busy time per rank inside the window";
  totals->columns = {"rank", "compute_us", "comm_us", "idle_us", "window_us", "bins", "bin_us"};
  totals->precision = 3;
  Lanes l;
  l.totals = totals;
  src.each_rank([&](const Store& s, int32_t rank, std::span<const uint32_t> rows) {
    timeline_lane(s, rank, rows, w, &l);
  });
  return {{"t0_ns", w.t0 - base}, {"bin_ns", w.bin_ns}, {"bins", w.bins}, {"ranks", l.ranks},
          {"compute", l.comp},    {"comm", l.comm},     {"idle", l.idle}};
}

// The critical path of the step with the median span as lanes per rank: segments
// [rank index, start, end (ns from the step's start), kind index, name].
json critical_path_lanes(const CriticalPathResult& cp) {
  if (cp.steps.empty()) return nullptr;
  std::vector<size_t> idx(cp.steps.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  auto span = [&](size_t i) { return cp.steps[i].span_end_ns - cp.steps[i].span_start_ns; };
  std::nth_element(idx.begin(), idx.begin() + static_cast<std::ptrdiff_t>(idx.size() / 2),
                   idx.end(), [&](size_t x, size_t y) { return span(x) < span(y); });
  const StepPath& p = cp.steps[idx[idx.size() / 2]];
  std::set<int32_t> ranks;
  for (const PathSegment& g : p.segments) ranks.insert(g.rank);
  const std::vector<int32_t> rv(ranks.begin(), ranks.end());
  json kinds = json::array(), segs = json::array();
  for (int k = 0; k < kPathKinds; ++k) kinds.push_back(to_string(static_cast<PathKind>(k)));
  for (const PathSegment& g : p.segments)
    segs.push_back({std::lower_bound(rv.begin(), rv.end(), g.rank) - rv.begin(),
                    g.start_ns - p.span_start_ns, g.end_ns - p.span_start_ns,
                    static_cast<int>(g.kind), g.name});
  return {{"step", p.step},
          {"path_ns", p.path_ns},
          {"span_ns", span(idx[idx.size() / 2])},
          {"ranks", rv},
          {"kinds", kinds},
          {"segments", segs},
          {"segments_total", p.segments_total}};
}

// Rank × collective wait from the straggler ledger; columns binned (max wait) beyond max_cols.
json straggler_heatmap(const StragglerResult& st, int max_cols) {
  json out = {
      {"ranks", json::array()}, {"cols", json::array()}, {"cells", json::array()}, {"max_ns", 0}};
  const auto& cs = st.collectives;
  size_t n = cs.size();
  if (n == 0) return out;
  std::set<int32_t> ranks;
  for (const auto& c : cs)
    for (auto [r, w] : c.wait_ns) ranks.insert(r);
  std::vector<int32_t> rv(ranks.begin(), ranks.end());
  std::map<int32_t, size_t> y_of;
  for (size_t i = 0; i < rv.size(); ++i) y_of[rv[i]] = i;
  size_t cols = static_cast<size_t>(std::max(1, max_cols));
  size_t group = (n + cols - 1) / cols;
  size_t ncol = (n + group - 1) / group;
  int64_t mx = 0;
  for (size_t x = 0; x < ncol; ++x) {
    size_t lo = x * group, hi = std::min(n, lo + group);
    std::vector<int64_t> w(rv.size(), 0);
    std::vector<bool> present(rv.size(), false);  // a rank outside these instances' group: no cell
    std::map<int32_t, int> last_count;
    for (size_t k = lo; k < hi; ++k) {
      for (auto [r, v] : cs[k].wait_ns) {
        size_t y = y_of[r];
        w[y] = std::max(w[y], v);
        present[y] = true;
      }
      if (cs[k].last_rank >= 0) last_count[cs[k].last_rank]++;
    }
    std::string label = "#" + std::to_string(cs[lo].id);
    if (hi - lo > 1)
      label += "–" + std::to_string(cs[hi - 1].id);
    else
      label += " " + cs[lo].op;
    int32_t last = -1;
    int best = 0;
    for (auto& [r, c] : last_count)
      if (c > best) best = c, last = r;
    out["cols"].push_back({{"label", label}, {"last", last}});
    for (size_t y = 0; y < rv.size(); ++y) {
      if (!present[y]) continue;
      out["cells"].push_back({static_cast<int64_t>(x), static_cast<int64_t>(y), w[y]});
      mx = std::max(mx, w[y]);
    }
  }
  out["ranks"] = rv;
  out["max_ns"] = mx;
  out["group"] = group;
  return out;
}

// One counter (GPU memory in use, power) per (rank, device) over the window: a step series, at
// most 2 points per timeline bin (the bin's maximum; the value entering the window first).
// `unit` names the table's value columns (peak_<unit>, last_<unit>).
json counter_series(const Store& s, const Filter& filter, const Window& w, int64_t base,
                    const char* counter, const char* key, const std::string& what,
                    const std::string& unit, Table* t) {
  json series = json::array();
  t->key = key;
  t->title = what + " per device (counter " + std::string(counter) + ")";
  t->columns = {"rank", "device", "samples", "peak_" + unit, "peak_at_us", "last_" + unit};
  const Counters& c = s.counters;
  int64_t id = -1;
  for (size_t i = 0; i < s.strings.size(); ++i)
    if (s.strings.at(static_cast<uint32_t>(i)) == counter) id = static_cast<int64_t>(i);
  if (id < 0 || c.size() == 0 || c.name_id.size() != c.size()) return series;
  std::map<std::pair<int32_t, int32_t>, std::vector<size_t>> by;
  for (size_t i = 0; i < c.size(); ++i)
    if (c.name_id[i] == static_cast<uint32_t>(id) && (!filter.rank || *filter.rank == c.rank[i]))
      by[{c.rank[i], c.device[i]}].push_back(i);
  for (auto& [key, idx] : by) {
    std::stable_sort(idx.begin(), idx.end(),
                     [&](size_t x, size_t y) { return c.ts_ns[x] < c.ts_ns[y]; });
    int64_t peak = INT64_MIN, peak_at = 0, last = 0, n = 0;
    json pts = json::array();
    bool have_entry = false;
    int64_t entry = 0;
    long long cur_bin = -1;
    int64_t bin_max = 0;
    auto emit = [&](int64_t ts, int64_t v) { pts.push_back({ts - base, v}); };
    bool binned = w.valid() && idx.size() > 2 * w.bins;
    for (size_t i : idx) {
      int64_t ts = c.ts_ns[i], v = c.value[i];
      if (w.valid() && ts < w.t0) {
        have_entry = true, entry = v;
        continue;
      }
      if (w.valid() && ts >= w.t1) break;
      if (have_entry) emit(w.t0, entry), have_entry = false;
      ++n, last = v;
      if (v > peak) peak = v, peak_at = ts;
      if (!binned) {
        emit(ts, v);
        continue;
      }
      long long b = (ts - w.t0) / w.bin_ns;
      if (b != cur_bin) {
        if (cur_bin >= 0) emit(w.t0 + cur_bin * w.bin_ns, bin_max);
        cur_bin = b, bin_max = v;
      } else {
        bin_max = std::max(bin_max, v);
      }
    }
    if (binned && cur_bin >= 0) emit(w.t0 + cur_bin * w.bin_ns, bin_max);
    if (have_entry) emit(w.t0, entry), last = entry;
    if (pts.empty()) continue;
    series.push_back(
        {{"name", "rank " + std::to_string(key.first) + " GPU " + std::to_string(key.second)},
         {"points", pts}});
    // Built cell by cell: a braced list of variants trips GCC 12's -Wmaybe-uninitialized.
    std::vector<Cell> row;
    row.emplace_back(int64_t{key.first});
    row.emplace_back(int64_t{key.second});
    row.emplace_back(n);
    row.emplace_back(n ? Cell(peak) : Cell{});
    row.emplace_back(n ? Cell(us(peak_at - base)) : Cell{});
    row.emplace_back(last);
    t->rows.push_back(std::move(row));
  }
  return series;
}

// What the page draws, plus the tables it links to (rendered as HTML by the writer).
struct Built {
  json data;
  std::vector<Table> tables;  // in page order
};

// The run summary's per-rank table, and the hosts and devices it names.
struct RanksSection {
  Table table;
  size_t hosts = 0, devices = 0;
  bool emulated = false;
};

RanksSection ranks_section(const Store& s, const Filter& filter,
                           const std::map<int32_t, int64_t>& acts) {
  RanksSection out;
  std::set<std::string> hosts;
  std::set<std::pair<std::string, std::string>> devices;
  out.emulated = s.attrs.emulated;
  Table& rt = out.table;
  rt.key = "ranks";
  rt.title = "Ranks";
  rt.columns = {"rank",
                "host",
                "devices",
                "device_name",
                "emulated",
                "clock_method",
                "clock_uncertainty_us",
                "activities",
                "source",
                "collector_status"};
  for (const auto& r : s.ranks) {
    if (filter.rank && *filter.rank != r.rank) continue;
    out.emulated = out.emulated || r.emulated;
    hosts.insert(r.host);
    size_t p = 0;
    while (p <= r.devices.size() && !r.devices.empty()) {
      size_t q = r.devices.find(',', p);
      devices.insert({r.host.empty() ? "rank " + std::to_string(r.rank) : r.host,
                      r.devices.substr(p, q == std::string::npos ? std::string::npos : q - p)});
      if (q == std::string::npos) break;
      p = q + 1;
    }
    rt.rows.push_back({int64_t{r.rank}, r.host, r.devices, r.device_name,
                       std::string(r.emulated ? "EMULATED" : "no"), r.clock_method,
                       us(r.clock_uncertainty_ns), acts.count(r.rank) ? acts.at(r.rank) : 0,
                       r.source, r.collector_status});
  }
  out.hosts = hosts.size();
  out.devices = devices.size();
  return out;
}

// The timeline's window: the run's GPU span unless --from/--to narrow it, in whole bins.
Window timeline_window(const PageOptions& opt, int64_t base, int64_t first, int64_t last,
                       size_t ranks) {
  Window w;
  // Store times and --from/--to are each within the time range (docs/limits.md); their sum is
  // clamped back into it so that the window's length, t1 - t0, cannot overflow.
  auto in_range = [](int64_t t) { return std::clamp(t, -kMaxAbsTimeNs, kMaxAbsTimeNs); };
  w.t0 = opt.from_ns ? in_range(base + *opt.from_ns) : first;
  w.t1 = opt.to_ns ? in_range(base + *opt.to_ns) : last;
  // Bins × ranks × 3 lanes bounds the page's size; past 200 ranks the bins get coarser.
  const int64_t nranks = std::max<int64_t>(1, static_cast<int64_t>(ranks));
  const int64_t nb =
      std::min<int64_t>(std::max(1, opt.timeline_bins), std::max<int64_t>(100, 200'000 / nranks));
  if (w.t1 > w.t0) {
    w.bin_ns = std::max<int64_t>(1, (w.t1 - w.t0 + nb - 1) / nb);
    w.bins = static_cast<size_t>((w.t1 - w.t0 + w.bin_ns - 1) / w.bin_ns);
    w.t1 = w.t0 + static_cast<int64_t>(w.bins) * w.bin_ns;  // whole bins
  }
  return w;
}

// Overlap and breakdown per rank, from the union statistics (exact ns).
void union_sections(const RankUnionTables& unions, json* d) {
  json ov = {{"ranks", json::array()},
             {"overlapped_ns", json::array()},
             {"exposed_ns", json::array()},
             {"exposed_pct", json::array()}};
  json br = {{"ranks", json::array()}};
  for (const char* p : {"compute_ns", "comm_ns", "memory_ns", "other_ns", "idle_ns"})
    br[p] = json::array();
  for (const RankUnion& r : unions.whole) {
    const UnionStats& u = r.u;
    const double exposed_pct =
        u.span_ns > 0 ? 100.0 * static_cast<double>(u.comm_excl_ns) / static_cast<double>(u.span_ns)
                      : 0.0;
    ov["ranks"].push_back(r.rank);
    ov["overlapped_ns"].push_back(u.overlap_ns);
    ov["exposed_ns"].push_back(u.comm_excl_ns);
    ov["exposed_pct"].push_back(std::llround(exposed_pct * 100) / 100.0);  // 2 decimals
    br["ranks"].push_back(r.rank);
    br["compute_ns"].push_back(u.compute_ns);
    br["comm_ns"].push_back(u.comm_excl_ns);
    br["memory_ns"].push_back(u.memory_excl_ns);
    br["other_ns"].push_back(u.other_excl_ns);
    br["idle_ns"].push_back(sat_sub(u.span_ns, u.busy_ns));
  }
  (*d)["overlap"] = ov;
  (*d)["breakdown"] = br;
}

// Gap histogram: "< lo", "lo–hi" per bin, "≥ hi" (edges in whole µs).
json gap_section(const GapResult& gaps) {
  json gh = {{"labels", json::array()}, {"counts", json::array()}};
  const auto edge = [](double v) { return cell_text(Cell(v), 0); };
  gh["labels"].push_back("< " + edge(gaps.edges_us.front()));
  gh["counts"].push_back(gaps.underflow);
  for (size_t b = 0; b < gaps.counts.size(); ++b) {
    gh["labels"].push_back(edge(gaps.edges_us[b]) + "–" + edge(gaps.edges_us[b + 1]));
    gh["counts"].push_back(gaps.counts[b]);
  }
  gh["labels"].push_back("≥ " + edge(gaps.edges_us.back()));
  gh["counts"].push_back(gaps.overflow);
  return gh;
}

json kernel_section(const SummaryResult& summary) {
  json kb = {{"names", json::array()},
             {"total_ns", json::array()},
             {"count", json::array()},
             {"category", json::array()}};
  for (const SummaryRow& r : summary.all.rows) {
    kb["names"].push_back(r.name);
    kb["category"].push_back(category_label(r.categories));
    kb["total_ns"].push_back(r.total_ns);
    kb["count"].push_back(r.count);
  }
  return kb;
}

json range_section(const RangeResult& ranges) {
  json rb = {{"names", json::array()},
             {"gpu_ns", json::array()},
             {"calls", json::array()},
             {"items", json::array()}};
  for (const RangeRow& r : ranges.rows) {
    rb["names"].push_back(r.name);
    rb["gpu_ns"].push_back(r.gpu_ns);
    rb["calls"].push_back(r.calls);
    rb["items"].push_back(r.gpu_items);
  }
  return rb;
}

// Ops with known FLOPs and bytes as points, the device's roofs as lines.
json roofline_section(const RooflineResult& roof) {
  json pts = json::array(), peaks = json::array();
  std::vector<const RooflineRow*> rs;
  for (const RooflineRow& r : roof.ops)
    if (r.has_work && r.flops > 0 && r.bytes > 0 && r.time_ns > 0) rs.push_back(&r);
  if (rs.size() > 300) rs.resize(300);  // rows come sorted by time: the 300 that matter most
  for (const RooflineRow* r : rs)
    pts.push_back({r->intensity, r->flops_per_s, r->time_ns, r->op + " " + r->shape, r->cls,
                   r->dtype, r->pct_of_bound});
  if (roof.peaks)
    for (const char* dt : {"fp32", "tf32", "bf16", "fp8"})
      if (peak_flops(*roof.peaks, dt) > 0)
        peaks.push_back({{"dtype", dt}, {"flops_per_s", peak_flops(*roof.peaks, dt)}});
  return {{"points", pts},
          {"peaks", peaks},
          {"bytes_per_s", roof.peaks ? json(roof.peaks->bytes_per_s) : json(nullptr)},
          {"device", roof.peaks ? roof.peaks->name : roof.device},
          {"why", !roof.store_has_ops ? "no operator shapes in this store (record_shapes=True)"
                                      : "no op with known FLOPs and bytes in the selection"}};
}

Built build(const PageSource& src, const PageResults& res, const PageOptions& opt) {
  Built out;
  json& d = out.data;
  const Store& s = *src.header;
  const int64_t base = export_base_of(src.rows.earliest);
  // The tables the page links to, rendered from the typed results.
  Report rep, rrep, erep, crep;
  summary_report(*res.summary, &rep);
  gap_report(*res.gaps, &rep);
  overlap_report(*res.unions, &rep);
  breakdown_report(*res.unions, &rep);
  range_report(*res.ranges, &rep);
  roofline_report(*res.roof, &rrep);
  energy_report(*res.energy, &erep);  // energy per step and range, next to the power chart
  critical_path_report(*res.cpath, &crep);

  // Run summary.
  RanksSection rs = ranks_section(s, res.filter, src.rows.per_rank);
  const int64_t first = src.rows.first_gpu, last = src.rows.last_gpu;
  const bool any = first <= last;
  d["title"] = opt.title;
  d["emulated"] = rs.emulated;
  d["scope"] = src.scope;
  d["produced_by"] = s.attrs.produced_by;
  d["created_utc"] = s.attrs.created_utc;
  d["tool_version"] = s.attrs.tool_version;
  d["clock_domain"] = s.attrs.clock_domain;
  d["origin_epoch_ns"] = base;
  d["ranks"] = static_cast<int64_t>(rs.table.rows.size());
  d["hosts"] = static_cast<int64_t>(rs.hosts);
  d["devices"] = static_cast<int64_t>(rs.devices);
  d["activities"] = src.rows.activities;
  d["span"] = any ? json{{"start_us", us(first - base)},
                         {"end_us", us(last - base)},
                         {"dur_us", us(last - first)}}
                  : json(nullptr);
  d["root_cause"] = straggler_headline(*res.ledger);
  json notes = json::array();
  for (const auto& h : rep.headline) notes.push_back(h);
  for (const auto& n : straggler_notes(*res.ledger)) notes.push_back(n);
  d["notes"] = notes;

  const Window w = any ? timeline_window(opt, base, first, last, rs.table.rows.size()) : Window{};
  Table lanes;
  d["timeline"] = w.valid() ? timeline(src, w, base, &lanes) : json(nullptr);
  d["stragglers"] = straggler_heatmap(*res.ledger, opt.max_collectives);
  d["critical_path"] = critical_path_lanes(*res.cpath);
  union_sections(*res.unions, &d);
  d["gaps"] = gap_section(*res.gaps);
  d["kernels"] = kernel_section(*res.summary);
  d["ranges"] = range_section(*res.ranges);
  Table mem, power;
  d["memory"] = counter_series(s, res.filter, w, base, kCounterGpuMemory, "gpu_memory",
                               "GPU memory in use", "bytes", &mem);
  d["power"] = counter_series(s, res.filter, w, base, kCounterPower, "gpu_power", "GPU board power",
                              "mw", &power);
  d["roofline"] = roofline_section(*res.roof);
  d["energy"] = {{"total_j", res.energy->total_j},
                 {"idle_j", res.energy->idle_j},
                 {"sampling_period_ns", res.energy->period_ns},
                 {"statistical", res.energy->statistical()},
                 {"devices", res.energy->devices.size()}};
  // Tables in page order; charts link to them by key.
  out.tables.push_back(std::move(rs.table));
  if (!lanes.key.empty()) out.tables.push_back(std::move(lanes));
  for (auto& t : straggler_tables(*res.ledger, res.cross_rank)) out.tables.push_back(std::move(t));
  for (const char* k : {"critical_path_steps", "critical_path_ranks"})
    if (const Table* t = find_table(crep, k)) out.tables.push_back(*t);
  for (const char* k : {"overlap", "breakdown", "gap_histogram", "gaps_per_rank", "gap_transitions",
                        "kernel_summary", "ranges"})
    if (const Table* t = find_table(rep, k)) out.tables.push_back(*t);
  if (const Table* t = find_table(rrep, "roofline")) out.tables.push_back(*t);
  if (!mem.key.empty()) out.tables.push_back(std::move(mem));
  if (!power.key.empty()) out.tables.push_back(std::move(power));
  for (const char* k : {"energy_steps", "energy_ranges"})
    if (const Table* t = find_table(erep, k)) out.tables.push_back(*t);
  if (const AllToAllResult* a2a = res.alltoall) {  // the all-to-all heat map
    d["alltoall"] = alltoall_page_data(*a2a);
    Report arep;
    alltoall_report(*a2a, &arep);
    for (auto& t : arep.tables) out.tables.push_back(std::move(t));
  }
  return out;
}

void append_table(std::string& h, const Table& t) {
  h += "<div class=\"tbl\" id=\"t-" + t.key + "\"><h3>" + escape_html(t.title) +
       " <a class=\"back\" href=\"#top\">↑ top</a></h3>";
  if (t.rows.empty()) {
    h += "<p class=\"empty\">no rows</p></div>\n";
    return;
  }
  h += "<table><thead><tr>";
  for (size_t c = 0; c < t.columns.size(); ++c)
    if (c >= t.text_hidden.size() || !t.text_hidden[c])
      h += "<th>" + escape_html(t.columns[c]) + "</th>";
  h += "</tr></thead><tbody>\n";
  for (const auto& r : t.rows) {
    h += "<tr>";
    for (size_t c = 0; c < t.columns.size() && c < r.size(); ++c) {
      if (c < t.text_hidden.size() && t.text_hidden[c]) continue;
      bool text = std::holds_alternative<std::string>(r[c]);
      h += text ? "<td>" : "<td class=\"n\">";
      h += escape_html(cell_text(r[c], t.precision));
      h += "</td>";
    }
    h += "</tr>\n";
  }
  h += "</tbody></table></div>\n";
}

void append_chunks(std::string& h, const std::string_view* chunks, size_t n) {
  for (size_t i = 0; i < n; ++i) h += chunks[i];
}

// A chart section: its container (the script fills it) and the links to its tables.
void section(std::string& h, const std::string& id, const std::string& title,
             const std::string& what,
             std::initializer_list<std::pair<const char*, const char*>> tables,
             const char* height) {
  h += "<section id=\"s-" + id + "\"><h2>" + title + "</h2><p class=\"what\">" + what + "</p>";
  h += "<div class=\"chart\" id=\"c-" + id + "\" style=\"height:" + height +
       "\"></div><p class=\"links\">";
  for (auto& [key, label] : tables)
    h += "<a href=\"#t-" + std::string(key) + "\">table: " + label + " ↓</a> ";
  h += "</p></section>\n";
}

// The document head (security policy, error recorder, style) and the page header.
void page_head(std::string& h, const std::string& title, bool emulated) {
  h += "<!DOCTYPE html>\n<html lang=\"en\" data-kx-ready=\"0\"><head><meta charset=\"utf-8\">\n";
  // The page may fetch nothing: inline script and style only, images from data: URIs.
  h += "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; script-src "
       "'unsafe-inline'; style-src 'unsafe-inline'; img-src data:\">\n";
  h += "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n";
  h += "<title>" + escape_html(title) + (emulated ? " (EMULATED)" : "") + "</title>\n";
  // First script on the page: record any error (ours or the library's) where a test can read it.
  h += "<script>(function(){var errs=[];function rec(m){errs.push(String(m));"
       "document.documentElement.setAttribute('data-kx-errors',JSON.stringify(errs));}"
       "window.addEventListener('error',function(e){rec('error: '+(e.message||e.type)+' at '+"
       "(e.filename||'')+':'+(e.lineno||0));});"
       "window.addEventListener('unhandledrejection',function(e){rec('unhandled rejection: "
       "'+e.reason);});"
       "var ce=console.error;console.error=function(){rec('console.error: '+"
       "Array.prototype.map.call(arguments,String).join(' '));return ce.apply(console,arguments);};"
       "document.documentElement.setAttribute('data-kx-errors','[]');})();</script>\n";
  h += "<style>\n";
  append_chunks(h, html_assets::report_css, html_assets::report_css_count);
  h += "</style></head><body>\n<a id=\"top\"></a>\n<header><h1>" + escape_html(title) + "</h1>";
  if (emulated)
    h += "<div class=\"emulated\" id=\"emulated\">EMULATED DATA: no real GPU recorded these events "
         "(synthetic / emulated device)</div>";
  h += "<nav><a href=\"#s-summary\">summary</a> <a href=\"#s-timeline\">timeline</a> "
       "<a href=\"#s-stragglers\">stragglers</a> <a href=\"#s-critpath\">critical path</a> "
       "<a href=\"#s-overlap\">overlap</a> "
       "<a href=\"#s-gaps\">gaps</a> <a href=\"#s-kernels\">top kernels</a> "
       "<a href=\"#s-ranges\">ranges</a> <a href=\"#s-memory\">GPU memory</a> <a "
       "href=\"#s-power\">GPU power</a> <a href=\"#tables\">tables</a></nav></header>\n";
}

void summary_section(std::string& h, const json& d, bool emulated) {
  // Summary (plain HTML: readable even without the script).
  auto fmt_us = [](const json& v) {
    char buf[48];
    std::snprintf(buf, sizeof buf, "%.3f ms", v.get<double>() / 1000.0);
    return std::string(buf);
  };
  h += "<section id=\"s-summary\"><h2>Run summary</h2><dl class=\"summary\">";
  auto item = [&](const std::string& k, const std::string& v) {
    h += "<dt>" + escape_html(k) + "</dt><dd>" + escape_html(v) + "</dd>";
  };
  item("scope", d["scope"].get<std::string>());
  item("ranks", std::to_string(d["ranks"].get<int64_t>()));
  item("hosts", std::to_string(d["hosts"].get<int64_t>()));
  item("devices", std::to_string(d["devices"].get<int64_t>()));
  item("GPU activities", std::to_string(d["activities"].get<int64_t>()));
  if (!d["span"].is_null())
    item("time span", fmt_us(d["span"]["dur_us"]) + " (from " + fmt_us(d["span"]["start_us"]) +
                          " to " + fmt_us(d["span"]["end_us"]) + " after the run's origin)");
  item("data", emulated ? "EMULATED (synthetic device data)" : "recorded");
  item("clocks", d["clock_domain"].get<std::string>());
  item("produced by",
       d["produced_by"].get<std::string>() + " " + d["created_utc"].get<std::string>());
  h += "</dl><p class=\"links\"><a href=\"#t-ranks\">table: ranks ↓</a></p>";
  h += "<p class=\"rootcause\" id=\"rootcause\"><b>Root cause:</b> " +
       escape_html(d["root_cause"].get<std::string>()) + "</p>";
  h += "<details><summary>analysis notes</summary><ul>";
  for (const auto& n : d["notes"]) h += "<li>" + escape_html(n.get<std::string>()) + "</li>";
  h += "</ul></details></section>\n";
}

// The chart sections, in page order; the script fills their containers.
void chart_sections(std::string& h, const Built& b) {
  const json& d = b.data;
  section(h, "timeline", "Timeline per rank",
          "Busy fraction of each time bin per rank: compute, communication, and idle (no GPU work "
          "on the rank inside its span). Drag the slider or scroll to zoom.",
          {{"timeline_lanes", "lanes per rank"}, {"breakdown", "temporal breakdown"}}, "420px");
  section(h, "stragglers", "Straggler heatmap",
          "Wait per rank at each matched collective (µs): how long the rank sat in the collective "
          "before the last rank arrived. A row that stays cool while the others are hot is the "
          "straggler.",
          {{"stragglers_collectives", "collectives"},
           {"stragglers_ranks", "per rank"},
           {"delay_by_kernel", "delay by kernel"}},
          "360px");
  section(h, "alltoall", "All-to-all traffic",
          "Bytes each rank sent (row) to each rank (column) in the matched all-to-all(v) "
          "collectives, from their split sizes; and every collective's GPU time within one host "
          "and across hosts.",
          {{"alltoall_matrix", "matrix"},
           {"alltoall_steps", "per step"},
           {"comm_host_split", "within / across hosts"}},
          "360px");
  section(h, "critpath", "Critical path",
          "The chain of work that sets the step time (the step with the median span), over the "
          "rank lanes: compute, communication after the last arrival, host time, launch latency "
          "and idle gaps on the path.",
          {{"critical_path_steps", "per step"}, {"critical_path_ranks", "by rank"}}, "260px");
  section(h, "overlap", "Overlap and exposed communication",
          "Communication time per rank split into the part overlapped by computation and the "
          "exposed part.",
          {{"overlap", "overlap"}, {"breakdown", "temporal breakdown"}}, "320px");
  section(h, "gaps", "Idle-gap histogram",
          "Idle gaps between consecutive GPU activities on each stream, by length (µs).",
          {{"gap_histogram", "histogram"},
           {"gaps_per_rank", "idle per rank"},
           {"gap_transitions", "transitions"}},
          "320px");
  section(h, "kernels", "Top kernels", "Kernels by total GPU time (all selected ranks).",
          {{"kernel_summary", "kernel summary"}}, "460px");
  section(h, "ranges", "GPU time by annotated range",
          "Kernels launched inside each NVTX / user-annotation range (layers, ops), inclusive.",
          {{"ranges", "ranges"}}, "400px");
  section(h, "roofline", "Roofline",
          "Each op and input shape with known FLOPs and bytes (recorded shapes) at its arithmetic "
          "intensity and achieved FLOP/s, log-log, sized by GPU time; dashed lines: the device's "
          "memory roof and compute roofs per dtype (peak table or --peaks).",
          {{"roofline", "roofline per op"}}, "420px");
  section(h, "memory", "GPU memory over time", "GPU memory in use per device (step series).",
          {{"gpu_memory", "GPU memory"}}, "320px");
  // Energy integrated from the same samples (docs/analyses.md, "Energy"), next to the chart.
  std::string energy = "Board power per device as NVML reports it (a 1 s average on recent GPUs).";
  const json& e = d["energy"];
  if (e["devices"].get<size_t>() > 0) {
    energy += " Energy: " + format_energy(e["total_j"].get<double>()) + " in total, " +
              format_energy(e["idle_j"].get<double>()) + " of it idle; sampling period " +
              format_duration(e["sampling_period_ns"].get<int64_t>()) +
              (e["statistical"].get<bool>()
                   ? " (longer than the median kernel: per-step and per-range figures are "
                     "statistical, valid in aggregate)."
                   : ".");
  }
  bool energy_ranges = false;
  for (const auto& t : b.tables) energy_ranges = energy_ranges || t.key == "energy_ranges";
  if (energy_ranges)
    section(h, "power", "GPU power over time", energy,
            {{"gpu_power", "GPU power"},
             {"energy_steps", "energy per step"},
             {"energy_ranges", "energy per range"}},
            "280px");
  else
    section(h, "power", "GPU power over time", energy,
            {{"gpu_power", "GPU power"}, {"energy_steps", "energy per step"}}, "280px");
}

// The data as JSON for the script, then the chart library and the report script.
void page_scripts(std::string& h, const json& d) {
  std::string js = d.dump(-1, ' ', false, json::error_handler_t::replace);
  // Inside a <script> element "</script" or "<!--" in a kernel name could end or confuse it;
  // '<' only occurs inside JSON strings, where \u003c is the same character.
  std::string safe;
  safe.reserve(js.size());
  for (char ch : js) {
    if (ch == '<')
      safe += "\\u003c";
    else
      safe += ch;
  }
  h += "<script type=\"application/json\" id=\"kx-data\">" + safe + "</script>\n<script>\n";
  append_chunks(h, html_assets::echarts, html_assets::echarts_count);
  h += "\n</script>\n<script>\n";
  append_chunks(h, html_assets::report_js, html_assets::report_js_count);
  h += "\n</script>\n</body></html>\n";
}

std::string page(const Built& b) {
  const json& d = b.data;
  std::string h;
  h.reserve(1'400'000);
  bool emulated = d["emulated"].get<bool>();
  std::string title = "kernalyse report" + (d["title"].get<std::string>().empty()
                                                ? std::string()
                                                : " — " + d["title"].get<std::string>());
  page_head(h, title, emulated);
  summary_section(h, d, emulated);
  chart_sections(h, b);
  h += "<section id=\"tables\"><h2>Tables</h2>\n";
  for (const auto& t : b.tables) append_table(h, t);
  h += "</section>\n";
  page_scripts(h, d);
  return h;
}

}  // namespace

void PageRows::add(const Store& s, const std::vector<uint32_t>& rows) {
  earliest = std::min(earliest, earliest_ns(s));
  activities += static_cast<int64_t>(rows.size());
  const Activities& a = s.activities;
  int64_t* count = nullptr;
  int32_t count_rank = 0;
  for (uint32_t i : rows) {
    if (!count || a.rank[i] != count_rank) count_rank = a.rank[i], count = &per_rank[count_rank];
    ++*count;
    if (is_gpu_work(static_cast<Kind>(a.kind[i])))
      first_gpu = std::min(first_gpu, a.start_ns[i]), last_gpu = std::max(last_gpu, a.end_ns[i]);
  }
}

PageSource page_source(const Store& s, const Filter& filter) {
  PageSource src;
  src.header = &s;
  auto rows = std::make_shared<const std::vector<uint32_t>>(select_activities(s, filter));
  src.rows.add(s, *rows);
  src.scope = describe_filter(s, filter);
  src.each_rank = [&s, rows](const RankRowsVisitor& f) {
    const detail::RowsByRank ranks(s, *rows);
    for (size_t k = 0; k < ranks.size(); ++k) f(s, ranks.rank(k), ranks.rows(k));
  };
  return src;
}

json html_page_data(const PageSource& src, const PageResults& r, const PageOptions& opt) {
  return build(src, r, opt).data;
}

std::string escape_html(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

void write_file_atomic(const std::string& path, std::string_view content, bool force) {
  // Temporary file next to the target, renamed when complete: no partial file is ever left.
  AtomicFile out(path, force);
  FILE* f = std::fopen(out.tmp().c_str(), "wb");
  if (!f) throw Error("cannot create " + path + ": " + std::strerror(errno));
  bool ok = std::fwrite(content.data(), 1, content.size(), f) == content.size();
  int err = errno;
  ok = (std::fclose(f) == 0) && ok;
  if (!ok) throw Error(path + ": write error: " + std::strerror(err));
  out.commit();
}

HtmlStats write_html_page(const PageSource& src, const PageResults& r, const std::string& path,
                          const PageOptions& opt, Progress* progress) {
  Built built = build(src, r, opt);
  if (progress) progress->advance(1);  // the timeline and memory series are built too
  std::string h = page(built);
  write_file_atomic(path, h, opt.force);
  if (progress) progress->advance(1);  // the page is written
  return {static_cast<int64_t>(h.size())};
}

}  // namespace kernalyse
