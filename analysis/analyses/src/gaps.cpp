// Gap analysis: idle time between activities per stream, per device (union of its streams) and
// per rank (union of its devices), a histogram of stream gaps and the top A → B transitions.
#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernalyse/analysis.h"
#include "kernalyse/archive.h"
#include "kernalyse/checked.h"
#include "kernalyse/error.h"
#include "kernalyse/sliced_folds.h"

namespace kernalyse {
namespace {

using u128 = unsigned __int128;

// The one gap rule every scope uses: gap = start − latest end so far; > 0 idle, < 0 overlap.
struct GapCore {
  int64_t n = 0;
  int64_t first_start = 0;
  int64_t max_end = 0;
  int64_t count = 0, total = 0, overlaps = 0, touching = 0, max_gap = 0;
  std::vector<int64_t>* gaps = nullptr;  // positive gaps, when percentiles are wanted

  // Returns the gap before this interval (0 for the first one).
  int64_t add(int64_t st, int64_t en) {
    if (en < st) en = st;  // an inverted (corrupt) interval covers nothing
    if (n++ == 0) {
      first_start = st;
      max_end = en;
      return 0;
    }
    const int64_t g = st - max_end;
    if (g > 0) {
      ++count;
      total += g;
      if (g > max_gap) max_gap = g;
      if (gaps) gaps->push_back(g);
    } else if (g < 0) {
      ++overlaps;
    } else {
      ++touching;
    }
    if (en > max_end) max_end = en;
    return g;
  }
  int64_t span() const { return n ? max_end - first_start : 0; }
  // Sorted by start, the span is the union plus the positive gaps.
  int64_t busy() const { return span() - total; }
};

// Linear-interpolated percentile (numpy's default); reorders v.
double percentile(std::vector<int64_t>& v, double p) {
  if (v.empty()) return std::nan("");
  const double pos = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  std::nth_element(v.begin(), v.begin() + lo, v.end());
  const double a = static_cast<double>(v[lo]);
  const double frac = pos - static_cast<double>(lo);
  if (frac == 0.0 || lo + 1 >= v.size()) return a;
  const double b = static_cast<double>(*std::min_element(v.begin() + lo + 1, v.end()));
  return a + frac * (b - a);
}

double pct(int64_t part, int64_t whole) {
  return whole > 0 ? 100.0 * static_cast<double>(part) / static_cast<double>(whole) : 0.0;
}

// A scope's statistics from its GapCore and positive gaps (buf is reordered).
void finish(const GapCore& c, std::vector<int64_t>& buf, GapScope* r) {
  r->activities = c.n;
  r->span_ns = c.span();
  r->busy_ns = c.busy();
  r->idle_ns = c.total;
  r->gaps = c.count;
  r->overlaps = c.overlaps;
  r->touching = c.touching;
  r->max_gap_ns = c.max_gap;
  r->median_gap_ns = percentile(buf, 0.5);
  r->p95_gap_ns = percentile(buf, 0.95);
}

// Gap statistics cells shared by the three scope tables (mean/median/p95 null without gaps).
void gap_cells(std::vector<Cell>& row, const GapScope& r) {
  row.push_back(us(r.span_ns));
  row.push_back(us(r.busy_ns));
  row.push_back(us(r.idle_ns));
  row.push_back(pct(r.idle_ns, r.span_ns));
  row.push_back(r.gaps);
  const bool any = r.gaps > 0;
  row.push_back(any ? Cell(us(r.idle_ns) / static_cast<double>(r.gaps)) : Cell());
  row.push_back(any ? Cell(r.median_gap_ns / 1e3) : Cell());
  row.push_back(any ? Cell(r.p95_gap_ns / 1e3) : Cell());
  row.push_back(any ? Cell(us(r.max_gap_ns)) : Cell());
}
const std::vector<std::string> kGapColumns = {"span_us",       "busy_us",    "idle_us",
                                              "idle_pct",      "gaps",       "mean_gap_us",
                                              "median_gap_us", "p95_gap_us", "max_gap_us"};
const std::vector<std::string> kNsColumns = {"span_ns", "busy_ns", "idle_ns", "max_gap_ns"};
void ns_cells(std::vector<Cell>& row, const GapScope& r) {
  row.push_back(r.span_ns);
  row.push_back(r.busy_ns);
  row.push_back(r.idle_ns);
  row.push_back(r.gaps > 0 ? Cell(r.max_gap_ns) : Cell());
}

Table scope_table(std::string key, std::string title, std::vector<std::string> lead,
                  std::vector<std::string> extra = {}) {
  Table t;
  t.key = std::move(key);
  t.title = std::move(title);
  t.columns = std::move(lead);
  t.columns.insert(t.columns.end(), kGapColumns.begin(), kGapColumns.end());
  t.columns.insert(t.columns.end(), extra.begin(), extra.end());
  const size_t visible = t.columns.size();
  t.columns.insert(t.columns.end(), kNsColumns.begin(), kNsColumns.end());
  t.text_hidden.assign(t.columns.size(), false);
  for (size_t c = visible; c < t.columns.size(); ++c) t.text_hidden[c] = true;
  t.precision = 3;
  return t;
}

struct Run {  // one stream's rows: positions [begin, end) in the selection
  int32_t rank, device, stream;
  uint32_t begin, end;
};

// Feeds every row of runs[r0, r1) to core in start order: a k-way merge of the sorted streams.
void merge_runs(const std::vector<Run>& runs, size_t r0, size_t r1,
                const std::vector<uint32_t>& sel, const Activities& a, GapCore& core) {
  if (r1 - r0 == 1) {
    for (uint32_t p = runs[r0].begin; p < runs[r0].end; ++p)
      core.add(a.start_ns[sel[p]], a.end_ns[sel[p]]);
    return;
  }
  struct Head {
    int64_t start;
    uint32_t pos, end;
  };
  // Min-heap on start; the key is stored inline so the heap never chases indices.
  auto later = [](const Head& x, const Head& y) { return x.start > y.start; };
  std::vector<Head> heap;
  for (size_t r = r0; r < r1; ++r)
    if (runs[r].begin < runs[r].end)
      heap.push_back({a.start_ns[sel[runs[r].begin]], runs[r].begin, runs[r].end});
  std::make_heap(heap.begin(), heap.end(), later);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    Head& h = heap.back();
    core.add(h.start, a.end_ns[sel[h.pos]]);
    if (++h.pos < h.end) {
      h.start = a.start_ns[sel[h.pos]];
      std::push_heap(heap.begin(), heap.end(), later);
    } else {
      heap.pop_back();
    }
  }
}

// Transition stats keyed by (group A, group B): a dense matrix when small, else a hash map.
struct TAcc {
  int64_t count = 0, total = 0, max = 0, overlaps = 0;
  u128 sumsq = 0;
};
void merge_tacc(TAcc& t, const TAcc& x) {
  t.count += x.count;
  t.total = sat_add(t.total, x.total);
  t.max = std::max(t.max, x.max);
  t.overlaps += x.overlaps;
  t.sumsq += x.sumsq;
}
class Transitions {
 public:
  explicit Transitions(size_t groups) : g_(groups) {
    if (groups * groups <= (1u << 18)) dense_.resize(groups * groups);
  }
  void add(int32_t from, int32_t to, int64_t gap) {
    const uint64_t key = static_cast<uint64_t>(from) * g_ + static_cast<uint64_t>(to);
    TAcc& t = dense_.empty() ? sparse_[key] : dense_[key];
    if (gap < 0) {
      ++t.overlaps;
      return;
    }
    ++t.count;
    t.total = sat_add(t.total, gap);
    if (gap > t.max) t.max = gap;
    t.sumsq += static_cast<u128>(gap) * static_cast<u128>(gap);
  }
  void merge(int32_t from, int32_t to, const TAcc& x) {  // GapFold: another slice's pair
    const uint64_t key = static_cast<uint64_t>(from) * g_ + static_cast<uint64_t>(to);
    merge_tacc(dense_.empty() ? sparse_[key] : dense_[key], x);
  }
  template <class F>
  void for_each(F f) const {
    for (size_t k = 0; k < dense_.size(); ++k)
      if (dense_[k].count || dense_[k].overlaps) f(k / g_, k % g_, dense_[k]);
    for (const auto& [k, t] : sparse_) f(k / g_, k % g_, t);
  }

 private:
  uint64_t g_;
  std::vector<TAcc> dense_;
  std::unordered_map<uint64_t, TAcc> sparse_;
};

double transition_std(const TAcc& t) {
  if (t.count <= 0) return 0.0;
  const u128 n = static_cast<u128>(t.count), sum = static_cast<u128>(t.total);
  return std::sqrt(static_cast<long double>(n * t.sumsq - sum * sum)) /
         static_cast<long double>(t.count);
}

const char* gap_sort_label(GapSort s) { return kGapSortWords.name(s).data(); }

// "12.5" rather than "12.500" for histogram labels.
std::string short_num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f", v);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s;
}

std::string histogram_text(const std::vector<double>& edges, const std::vector<int64_t>& counts,
                           int64_t under, int64_t over) {
  std::vector<std::string> labels;
  std::vector<int64_t> values;
  labels.push_back("< " + short_num(edges.front()));
  values.push_back(under);
  for (size_t b = 0; b < counts.size(); ++b) {
    const bool last = b + 1 == counts.size();
    labels.push_back("[" + short_num(edges[b]) + ", " + short_num(edges[b + 1]) +
                     (last ? "]" : ")"));
    values.push_back(counts[b]);
  }
  labels.push_back("> " + short_num(edges.back()));
  values.push_back(over);
  size_t lw = 0;
  int64_t vmax = 0, total = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    lw = std::max(lw, labels[i].size());
    vmax = std::max(vmax, values[i]);
    total += values[i];
  }
  const int kBar = 50;
  std::string out =
      "Idle-gap histogram (per-stream gaps > 0, µs; " + std::to_string(total) + " gaps)\n";
  for (size_t i = 0; i < labels.size(); ++i) {
    std::string line(lw - labels[i].size(), ' ');
    line += labels[i] + " |";
    int len =
        vmax > 0
            ? static_cast<int>(static_cast<double>(values[i]) * kBar / static_cast<double>(vmax))
            : 0;
    if (values[i] > 0 && len == 0) len = 1;  // a non-empty bin is never invisible
    std::string bar;
    for (int k = 0; k < len; ++k) bar += "█";
    line +=
        bar + std::string(static_cast<size_t>(kBar - len), ' ') + " " + std::to_string(values[i]);
    out += line + '\n';
  }
  return out;
}

}  // namespace

GapStats stream_gaps(const std::vector<Interval>& sorted) {
  const auto by_start = [](const Interval& x, const Interval& y) {
    return x.start != y.start ? x.start < y.start : x.end < y.end;
  };
  std::vector<Interval> copy;
  const std::vector<Interval>* v = &sorted;
  if (!std::is_sorted(sorted.begin(), sorted.end(), by_start)) {
    copy = sorted;
    std::sort(copy.begin(), copy.end(), by_start);
    v = &copy;
  }
  GapStats out;
  GapCore core;
  core.gaps = &out.gaps;
  for (const Interval& iv : *v) core.add(iv.start, iv.end);
  out.count = core.count;
  out.total_ns = core.total;
  out.overlaps = core.overlaps;
  out.touching = core.touching;
  out.busy_ns = core.busy();
  out.span_ns = core.span();
  return out;
}

int64_t union_length(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(),
            [](const Interval& x, const Interval& y) { return x.start < y.start; });
  GapCore core;
  for (const Interval& iv : v) core.add(iv.start, iv.end);
  return core.busy();
}

namespace {

// The selection's GPU work in (rank, device, stream, start, end) order, and its stream runs.
std::vector<uint32_t> stream_order(const Store& s, const Filter& f, std::vector<Run>* runs) {
  const Activities& a = s.activities;
  std::vector<uint32_t> sel = select_activities(s, f);
  // Only GPU work fills a stream: syncs are CPU waits drawn on it, host-on-stream rows are CPU.
  std::erase_if(sel, [&](uint32_t i) { return !is_gpu_work(static_cast<Kind>(a.kind[i])); });

  // The store is sorted by (rank, device, stream, start, end); re-sort the selection if not.
  const auto before = [&](uint32_t i, uint32_t j) {
    if (a.rank[i] != a.rank[j]) return a.rank[i] < a.rank[j];
    if (a.device[i] != a.device[j]) return a.device[i] < a.device[j];
    if (a.stream[i] != a.stream[j]) return a.stream[i] < a.stream[j];
    if (a.start_ns[i] != a.start_ns[j]) return a.start_ns[i] < a.start_ns[j];
    if (a.end_ns[i] != a.end_ns[j]) return a.end_ns[i] < a.end_ns[j];
    return i < j;
  };
  if (!std::is_sorted(sel.begin(), sel.end(), before)) std::sort(sel.begin(), sel.end(), before);

  for (uint32_t p = 0; p < sel.size(); ++p) {
    const uint32_t i = sel[p];
    if (runs->empty() || runs->back().rank != a.rank[i] || runs->back().device != a.device[i] ||
        runs->back().stream != a.stream[i])
      runs->push_back({a.rank[i], a.device[i], a.stream[i], p, p});
    runs->back().end = p + 1;
  }

  return sel;
}

// Per device, then per rank: the unions of their streams (runs of one device/rank are adjacent).
void union_scopes(const std::vector<Run>& runs, const std::vector<uint32_t>& sel,
                  const Activities& a, GapResult* res) {
  GapResult& out = *res;
  std::vector<int64_t> buf;
  for (size_t r0 = 0; r0 < runs.size();) {
    size_t r1 = r0;
    while (r1 < runs.size() && runs[r1].rank == runs[r0].rank) ++r1;
    int64_t rank_devices = 0;
    GapScope rr;
    for (size_t d0 = r0; d0 < r1;) {
      size_t d1 = d0;
      while (d1 < r1 && runs[d1].device == runs[d0].device) ++d1;
      GapCore core;
      buf.clear();
      core.gaps = &buf;
      merge_runs(runs, d0, d1, sel, a, core);
      GapScope& dev = out.devices.emplace_back();
      dev.rank = runs[d0].rank, dev.device = runs[d0].device;
      dev.devices = 1, dev.streams = static_cast<int64_t>(d1 - d0);
      finish(core, buf, &dev);
      out.device_idle_ns = sat_add(out.device_idle_ns, dev.idle_ns);
      out.device_span_ns = sat_add(out.device_span_ns, dev.span_ns);
      rr = dev;  // one device: the rank is that device
      ++rank_devices;
      d0 = d1;
    }
    if (rank_devices > 1) {
      GapCore core;
      buf.clear();
      core.gaps = &buf;
      merge_runs(runs, r0, r1, sel, a, core);
      finish(core, buf, &rr);
    }
    rr.device = -1;
    rr.devices = rank_devices;
    rr.streams = static_cast<int64_t>(r1 - r0);
    out.ranks.push_back(rr);
    out.rank_idle_ns = sat_add(out.rank_idle_ns, rr.idle_ns);
    out.rank_span_ns = sat_add(out.rank_span_ns, rr.span_ns);
    r0 = r1;
  }
}

// Transitions: sorted by the chosen statistic, descending (count then names break ties), cut to
// opt.top.
void sorted_transitions(const Transitions& trans, const NameGroups& names, const GapOptions& opt,
                        GapResult* res) {
  GapResult& out = *res;
  struct TRow {
    int32_t from, to;
    TAcc t;
    double mean, std;
  };
  std::vector<TRow> trows;
  trans.for_each([&](uint64_t f, uint64_t t, const TAcc& acc) {
    const double mean = acc.count ? static_cast<double>(acc.total) / acc.count : 0.0;
    trows.push_back({static_cast<int32_t>(f), static_cast<int32_t>(t), acc, mean,
                     static_cast<double>(transition_std(acc))});
  });
  const auto key = [&](const TRow& r) -> double {
    switch (opt.sort) {
      case GapSort::Count:
        return static_cast<double>(r.t.count);
      case GapSort::Mean:
        return r.mean;
      case GapSort::Max:
        return static_cast<double>(r.t.max);
      case GapSort::Std:
        return r.std;
      case GapSort::Total:
        return static_cast<double>(r.t.total);
    }
    return 0;
  };
  std::sort(trows.begin(), trows.end(), [&](const TRow& x, const TRow& y) {
    // Pairs that only ever overlapped have no gap statistics; they go last.
    if ((x.t.count > 0) != (y.t.count > 0)) return x.t.count > 0;
    const double kx = key(x), ky = key(y);
    if (kx != ky) return kx > ky;
    if (x.t.count != y.t.count) return x.t.count > y.t.count;
    if (names.names[x.from] != names.names[y.from])
      return names.names[x.from] < names.names[y.from];
    return names.names[x.to] < names.names[y.to];
  });
  out.transition_pairs = trows.size();
  if (opt.top > 0 && trows.size() > static_cast<size_t>(opt.top)) trows.resize(opt.top);
  for (const TRow& r : trows)
    out.transitions.push_back({names.names[r.from], names.names[r.to], r.t.count, r.t.overlaps,
                               r.t.total, r.t.max, r.mean, r.std});
}

// Transition totals by display names (GapFold: merged across slices).
using TransitionsByName = std::map<std::pair<std::string, std::string>, TAcc>;

// gap_analysis; with by_name, the transitions go there instead of into the result.
GapResult gap_run(const Store& s, const GapOptions& opt, TransitionsByName* by_name) {
  if (!(opt.bins >= 1 && opt.bins <= 100000))
    throw Error("--bins must be between 1 and 100000, got " + std::to_string(opt.bins));
  if (!std::isfinite(opt.hist_min_us) || !std::isfinite(opt.hist_max_us) ||
      !(opt.hist_max_us > opt.hist_min_us))
    throw Error("--hist-max must be greater than --hist-min");

  std::vector<Run> runs;
  const std::vector<uint32_t> sel = stream_order(s, opt.filter, &runs);
  const Activities& a = s.activities;

  GapResult out;
  out.sort = opt.sort;
  out.verbose = opt.verbose;
  out.scope = describe_filter(s, opt.filter);
  out.activities = static_cast<int64_t>(sel.size());
  const NameGroups names = group_names(s, sel, opt.verbose, /*kernels_only=*/false);
  Transitions trans(names.names.size());
  const int bins = opt.bins;
  const double width = (opt.hist_max_us - opt.hist_min_us) / bins;
  out.counts.assign(static_cast<size_t>(bins), 0);
  std::vector<int64_t> buf;

  // Per stream: gaps, histogram and transitions in one pass over the selection.
  for (const Run& run : runs) {
    GapCore core;
    buf.clear();
    core.gaps = &buf;
    int32_t prev = -1;
    for (uint32_t p = run.begin; p < run.end; ++p) {
      const uint32_t i = sel[p];
      const int32_t g = names.group_of[a.name_id[i]];
      const int64_t gap = core.add(a.start_ns[i], a.end_ns[i]);
      if (p != run.begin) {
        trans.add(prev, g, gap);
        if (gap > 0) {
          const double v = (us(gap) - opt.hist_min_us) / width;
          if (v < 0)
            ++out.underflow;
          else if (v > bins)
            ++out.overflow;
          else
            ++out.counts[std::min(static_cast<size_t>(v), static_cast<size_t>(bins - 1))];
        }
      }
      prev = g;
    }
    GapScope& r = out.streams.emplace_back();
    r.rank = run.rank, r.device = run.device, r.stream = run.stream;
    finish(core, buf, &r);
    out.stream_idle_ns = sat_add(out.stream_idle_ns, r.idle_ns);
    out.stream_gaps += r.gaps;
    out.stream_overlaps += r.overlaps;
    out.stream_touching += r.touching;
  }

  union_scopes(runs, sel, a, &out);
  if (by_name)
    trans.for_each([&](uint64_t f, uint64_t t, const TAcc& acc) {
      merge_tacc((*by_name)[{names.names[f], names.names[t]}], acc);
    });
  else
    sorted_transitions(trans, names, opt, &out);
  out.edges_us.resize(static_cast<size_t>(bins) + 1);
  for (int b = 0; b <= bins; ++b) out.edges_us[b] = opt.hist_min_us + width * b;
  out.edges_us.back() = opt.hist_max_us;
  return out;
}

}  // namespace

GapResult gap_analysis(const Store& s, const GapOptions& opt) { return gap_run(s, opt, nullptr); }

void gap_report(const GapResult& g, Report* out) {
  Table streams = scope_table("gaps_per_stream", "Idle gaps per stream",
                              {"rank", "device", "stream", "activities"}, {"overlaps", "touching"});
  for (const GapScope& r : g.streams) {
    std::vector<Cell> row = {int64_t{r.rank}, int64_t{r.device}, int64_t{r.stream}, r.activities};
    gap_cells(row, r);
    row.push_back(r.overlaps);
    row.push_back(r.touching);
    ns_cells(row, r);
    streams.rows.push_back(std::move(row));
  }
  Table devices = scope_table("gaps_per_device", "GPU idle per device (no activity on any stream)",
                              {"rank", "device", "streams", "activities"});
  for (const GapScope& r : g.devices) {
    std::vector<Cell> row = {int64_t{r.rank}, int64_t{r.device}, r.streams, r.activities};
    gap_cells(row, r);
    ns_cells(row, r);
    devices.rows.push_back(std::move(row));
  }
  Table ranks = scope_table("gaps_per_rank", "Idle per rank (no activity on any device)",
                            {"rank", "devices", "streams", "activities"});
  for (const GapScope& r : g.ranks) {
    std::vector<Cell> row = {int64_t{r.rank}, r.devices, r.streams, r.activities};
    gap_cells(row, r);
    ns_cells(row, r);
    ranks.rows.push_back(std::move(row));
  }

  Table tt;
  tt.key = "gap_transitions";
  tt.title = std::string("Top transitions A → B on a stream, by ") + gap_sort_label(g.sort) +
             " of the gap";
  tt.columns = {"from",    "to",     "count",  "overlaps", "total_us",
                "mean_us", "std_us", "max_us", "total_ns", "max_ns"};
  tt.text_hidden = {false, false, false, false, false, false, false, false, true, true};
  tt.precision = 3;
  tt.max_text_width = g.verbose ? 0 : 50;
  for (const GapTransition& r : g.transitions) {
    const bool any = r.count > 0;
    tt.rows.push_back({r.from, r.to, r.count, r.overlaps, us(r.total_ns),
                       any ? Cell(r.mean_ns / 1e3) : Cell(), any ? Cell(r.std_ns / 1e3) : Cell(),
                       any ? Cell(us(r.max_ns)) : Cell(), r.total_ns,
                       any ? Cell(r.max_ns) : Cell()});
  }

  // Histogram: JSON gets one object, text gets bars, CSV gets a table.
  const std::vector<double>& edges = g.edges_us;
  Table ht;
  ht.key = "gap_histogram";
  ht.title = "Idle-gap histogram";
  ht.columns = {"lo_us", "hi_us", "count"};
  ht.precision = 3;
  ht.in_text = false;
  ht.in_json = false;
  ht.rows.push_back({Cell(), edges.front(), g.underflow});
  for (size_t b = 0; b < g.counts.size(); ++b)
    ht.rows.push_back({edges[b], edges[b + 1], g.counts[b]});
  ht.rows.push_back({edges.back(), Cell(), g.overflow});

  if (g.activities == 0) {
    out->headline.push_back("Gap analysis: no activities match (" + g.scope + ")");
  } else {
    out->headline.push_back("Gap analysis (" + g.scope + "): " + std::to_string(g.activities) +
                            " activities on " + std::to_string(g.streams.size()) + " streams, " +
                            std::to_string(g.devices.size()) + " devices, " +
                            std::to_string(g.ranks.size()) + " ranks");
    out->headline.push_back("Per-stream: " + std::to_string(g.stream_gaps) + " idle gaps, " +
                            format_duration(g.stream_idle_ns) + " in total; " +
                            std::to_string(g.stream_overlaps) + " overlaps (not idle), " +
                            std::to_string(g.stream_touching) + " touching");
    char p[32];
    std::snprintf(p, sizeof p, "%.2f%%", pct(g.device_idle_ns, g.device_span_ns));
    out->headline.push_back(
        "GPU idle (no activity on any stream of a device): " + format_duration(g.device_idle_ns) +
        " of " + format_duration(g.device_span_ns) + " device span (" + p + ")");
    std::snprintf(p, sizeof p, "%.2f%%", pct(g.rank_idle_ns, g.rank_span_ns));
    out->headline.push_back(
        "Rank idle (no activity on any device of a rank): " + format_duration(g.rank_idle_ns) +
        " of " + format_duration(g.rank_span_ns) + " rank span (" + p + ")");
  }
  if (g.transition_pairs > g.transitions.size())
    out->headline.push_back("Showing top " + std::to_string(g.transitions.size()) + " of " +
                            std::to_string(g.transition_pairs) + " transitions by " +
                            gap_sort_label(g.sort));

  out->tables.push_back(std::move(streams));
  out->tables.push_back(std::move(devices));
  out->tables.push_back(std::move(ranks));
  out->tables.push_back(std::move(tt));
  out->tables.push_back(std::move(ht));
  out->text_blocks.push_back(histogram_text(edges, g.counts, g.underflow, g.overflow));
  out->json["histogram"] = {{"edges_us", edges},
                            {"counts", g.counts},
                            {"underflow", g.underflow},
                            {"overflow", g.overflow}};
  out->json["gap_totals"] = {{"activities", g.activities},
                             {"streams", static_cast<int64_t>(g.streams.size())},
                             {"devices", static_cast<int64_t>(g.devices.size())},
                             {"ranks", static_cast<int64_t>(g.ranks.size())},
                             {"stream_gaps", g.stream_gaps},
                             {"stream_idle_ns", g.stream_idle_ns},
                             {"stream_idle_us", us(g.stream_idle_ns)},
                             {"stream_overlaps", g.stream_overlaps},
                             {"stream_touching", g.stream_touching},
                             {"device_idle_ns", g.device_idle_ns},
                             {"device_idle_us", us(g.device_idle_ns)},
                             {"device_span_ns", g.device_span_ns},
                             {"device_span_us", us(g.device_span_ns)},
                             {"device_idle_pct", pct(g.device_idle_ns, g.device_span_ns)},
                             {"rank_idle_ns", g.rank_idle_ns},
                             {"rank_idle_us", us(g.rank_idle_ns)},
                             {"rank_span_ns", g.rank_span_ns},
                             {"rank_span_us", us(g.rank_span_ns)},
                             {"rank_idle_pct", pct(g.rank_idle_ns, g.rank_span_ns)},
                             {"transition_pairs", static_cast<int64_t>(g.transition_pairs)},
                             {"gap_sort", gap_sort_label(g.sort)}};
}

void gap_analysis(const Store& s, const GapOptions& opt, Report* out) {
  gap_report(gap_analysis(s, opt), out);
}

// GapFold (sliced_folds.h): gap_run per slice; the scopes (rank, device, stream order: slices
// come by rank) and totals appended, the transitions merged by name and sorted at the end.
struct GapFold::Impl {
  GapOptions opt;
  GapResult out;
  TransitionsByName transitions;
};

GapFold::GapFold(const GapOptions& opt) : impl_(std::make_shared<Impl>()) { impl_->opt = opt; }

namespace {
// One slice's (or a process's) scopes and totals appended to `o`.
void absorb(GapResult& o, GapResult&& r) {
  o.activities += r.activities;
  for (std::vector<GapScope> GapResult::*v :
       {&GapResult::streams, &GapResult::devices, &GapResult::ranks})
    (o.*v).insert((o.*v).end(), (r.*v).begin(), (r.*v).end());
  for (int64_t GapResult::*x :
       {&GapResult::stream_idle_ns, &GapResult::device_idle_ns, &GapResult::device_span_ns,
        &GapResult::rank_idle_ns, &GapResult::rank_span_ns})
    o.*x = sat_add(o.*x, r.*x);
  for (int64_t GapResult::*x :
       {&GapResult::stream_gaps, &GapResult::stream_overlaps, &GapResult::stream_touching,
        &GapResult::underflow, &GapResult::overflow})
    o.*x += r.*x;
  if (o.counts.empty()) o.counts.assign(r.counts.size(), 0);
  for (size_t b = 0; b < r.counts.size(); ++b) o.counts[b] += r.counts[b];
  o.edges_us = std::move(r.edges_us);
}
}  // namespace

void GapFold::add(const Store& slice) {
  absorb(impl_->out, gap_run(slice, impl_->opt, &impl_->transitions));
}

std::string GapFold::save() const {
  const GapResult& o = impl_->out;
  Archive ar;
  ar.put(o.activities);
  ar.put(o.streams), ar.put(o.devices), ar.put(o.ranks);
  for (int64_t x :
       {o.stream_idle_ns, o.device_idle_ns, o.device_span_ns, o.rank_idle_ns, o.rank_span_ns,
        o.stream_gaps, o.stream_overlaps, o.stream_touching, o.underflow, o.overflow})
    ar.put(x);
  ar.put(o.counts), ar.put(o.edges_us);
  ar.put(impl_->transitions);
  return ar.bytes();
}

void GapFold::merge(const std::string& bytes) {
  Archive ar(bytes);
  GapResult r;
  ar.get(r.activities);
  ar.get(r.streams), ar.get(r.devices), ar.get(r.ranks);
  for (int64_t* x :
       {&r.stream_idle_ns, &r.device_idle_ns, &r.device_span_ns, &r.rank_idle_ns, &r.rank_span_ns,
        &r.stream_gaps, &r.stream_overlaps, &r.stream_touching, &r.underflow, &r.overflow})
    ar.get(*x);
  ar.get(r.counts), ar.get(r.edges_us);
  if (!r.counts.empty()) absorb(impl_->out, std::move(r));
  const auto t = ar.get<TransitionsByName>();
  for (const auto& [pair, acc] : t) merge_tacc(impl_->transitions[pair], acc);
}

GapResult GapFold::finish(const Store& header) const {
  const GapOptions& opt = impl_->opt;
  GapResult out = impl_->out;
  out.sort = opt.sort;
  out.verbose = opt.verbose;
  out.scope = describe_filter(header, opt.filter);
  if (out.counts.empty()) {  // no slice: what gap_run makes of an empty store
    const Store none = header;
    GapResult e = gap_run(none, opt, nullptr);
    out.counts = e.counts, out.edges_us = e.edges_us;
  }
  NameGroups names;
  std::map<std::string, int32_t> id;
  for (const auto& [pair, t] : impl_->transitions)
    for (const std::string* n : {&pair.first, &pair.second})
      if (id.emplace(*n, static_cast<int32_t>(names.names.size())).second)
        names.names.push_back(*n);
  Transitions trans(names.names.size());
  for (const auto& [pair, t] : impl_->transitions)
    trans.merge(id.at(pair.first), id.at(pair.second), t);
  sorted_transitions(trans, names, opt, &out);
  return out;
}

}  // namespace kernalyse
