// Kernel summary: per kernel name count/total/mean/std/min/max and shares, all ranks and per rank.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <unordered_map>
#include <vector>

#include "kernalyse/analysis.h"
#include "kernalyse/archive.h"
#include "kernalyse/checked.h"
#include "kernalyse/sliced_folds.h"

namespace kernalyse {
namespace {

using u128 = unsigned __int128;

// Dense per-(rank, name group) accumulator; sums of squares in 128 bits keep std exact.
struct Acc {
  int64_t count = 0;
  int64_t total = 0;
  int64_t min = INT64_MAX;
  int64_t max = INT64_MIN;
  u128 sumsq = 0;
  uint8_t categories = 0;  // bit per Category seen
};

void merge(Acc& into, const Acc& a) {
  into.count += a.count;
  into.total = sat_add(into.total, a.total);
  into.min = std::min(into.min, a.min);
  into.max = std::max(into.max, a.max);
  into.sumsq += a.sumsq;
  into.categories |= a.categories;
}

// Population std from exact integer moments: var = (n·Σd² − (Σd)²) / n².
double population_std(const Acc& a) {
  if (a.count <= 0) return 0.0;
  const u128 n = static_cast<u128>(a.count);
  const u128 sum = static_cast<u128>(a.total);
  const u128 num = n * a.sumsq - sum * sum;
  return std::sqrt(static_cast<long double>(num)) / static_cast<long double>(a.count);
}

const char* sort_label(SummarySort s) { return kSummarySortWords.name(s).data(); }

void add_row(const Activities& a, uint32_t i, Acc& acc) {
  const int64_t d = std::max<int64_t>(0, a.end_ns[i] - a.start_ns[i]);  // clamp corrupt rows
  ++acc.count;
  acc.total = sat_add(acc.total, d);
  acc.min = std::min(acc.min, d);
  acc.max = std::max(acc.max, d);
  acc.sumsq += static_cast<u128>(d) * static_cast<u128>(d);
  acc.categories |= static_cast<uint8_t>(1u << (a.category[i] & 3));
}

// One scope's rows: sorted by the chosen metric, cut to opt.top.
SummaryTable make_table(const std::vector<Acc>& accs, const NameGroups& names,
                        const SummaryOptions& opt) {
  SummaryTable t;
  std::vector<int32_t> order;
  for (size_t g = 0; g < accs.size(); ++g) {
    if (accs[g].count == 0) continue;
    t.count += accs[g].count;
    t.total_ns = sat_add(t.total_ns, accs[g].total);
    order.push_back(static_cast<int32_t>(g));
  }
  // Descending by the chosen metric; name breaks ties so output is deterministic.
  // Within one table % of GPU time is proportional to total, so pct orders like total.
  auto metric = [&](int32_t g) -> long double {
    const Acc& a = accs[g];
    switch (opt.sort) {
      case SummarySort::Count:
        return static_cast<long double>(a.count);
      case SummarySort::Mean:
        return static_cast<long double>(a.total) / a.count;
      case SummarySort::Total:
      case SummarySort::Pct:
        return static_cast<long double>(a.total);
    }
    return 0;
  };
  std::sort(order.begin(), order.end(), [&](int32_t x, int32_t y) {
    const long double mx = metric(x), my = metric(y);
    if (mx != my) return mx > my;
    return names.names[x] < names.names[y];
  });
  t.distinct = order.size();
  if (opt.top > 0 && order.size() > static_cast<size_t>(opt.top)) order.resize(opt.top);
  for (int32_t g : order) {
    const Acc& a = accs[g];
    t.rows.push_back(
        {names.names[g], a.categories, a.count, a.total, a.min, a.max, population_std(a)});
  }
  return t;
}

Table render_table(const SummaryTable& st, const SummaryResult& r, std::string key) {
  Table t;
  t.key = std::move(key);
  t.title = "Kernel summary (" + st.scope + ")";
  t.columns = {"kernel", "category",     "count",    "total_us", "mean_us", "std_us", "min_us",
               "max_us", "pct_launches", "pct_time", "total_ns", "min_ns",  "max_ns"};
  t.text_hidden.assign(t.columns.size(), false);
  for (size_t c = 10; c < t.columns.size(); ++c) t.text_hidden[c] = true;
  t.precision = 3;
  t.max_text_width = r.verbose ? 0 : 64;  // the numbers need ~100 columns of their own
  for (const SummaryRow& a : st.rows) {
    const double mean = static_cast<double>(a.total_ns) / static_cast<double>(a.count) / 1e3;
    const double std_us = a.std_ns / 1e3;
    t.rows.push_back(
        {a.name, category_label(a.categories), a.count, us(a.total_ns), mean, std_us, us(a.min_ns),
         us(a.max_ns), 100.0 * static_cast<double>(a.count) / static_cast<double>(st.count),
         st.total_ns > 0
             ? 100.0 * static_cast<double>(a.total_ns) / static_cast<double>(st.total_ns)
             : 0.0,
         a.total_ns, a.min_ns, a.max_ns});
  }
  return t;
}

}  // namespace

std::string category_label(uint8_t mask) {
  std::string out;
  for (int c = 0; c < 4; ++c) {
    if (!(mask & (1u << c))) continue;
    if (!out.empty()) out += '+';
    out += to_string(static_cast<Category>(c));
  }
  return out.empty() ? "other" : out;
}

namespace {
SummaryResult summary_of(const Store& s, const SummaryOptions& opt, const NameGroups& names,
                         const std::vector<std::vector<Acc>>& per_rank, SummaryResult out);
}  // namespace

SummaryResult kernel_summary(const Store& s, const SummaryOptions& opt) {
  const Activities& a = s.activities;
  const std::vector<uint32_t> rows = select_activities(s, opt.filter);
  const NameGroups names = group_names(s, rows, opt.verbose, /*kernels_only=*/true);
  const size_t ngroups = names.names.size();

  SummaryResult out;
  out.sort = opt.sort;
  out.top = opt.top;
  out.verbose = opt.verbose;
  // Ranks in the selection, in order of first appearance (store order = rank order).
  std::vector<int32_t>& rank_values = out.ranks;
  std::unordered_map<int32_t, size_t> rank_index;
  std::vector<std::vector<Acc>> per_rank;  // [rank index][group]
  const auto kernel = static_cast<uint8_t>(Kind::Kernel);
  int32_t last_rank = 0;
  std::vector<Acc>* cur = nullptr;
  for (uint32_t i : rows) {
    if (a.kind[i] != kernel) continue;
    const int32_t r = a.rank[i];
    if (!cur || r != last_rank) {
      // Rows arrive in rank runs; the map is consulted once per run, not per row.
      auto [it, fresh] = rank_index.emplace(r, per_rank.size());
      if (fresh) {
        rank_values.push_back(r);
        per_rank.emplace_back(ngroups);
      }
      cur = &per_rank[it->second];
      last_rank = r;
    }
    add_row(a, i, (*cur)[names.group_of[a.name_id[i]]]);
  }
  return summary_of(s, opt, names, per_rank, std::move(out));
}

namespace {
// The result from the per-rank accumulators (out.ranks: their ranks; names: their groups).
SummaryResult summary_of(const Store& s, const SummaryOptions& opt, const NameGroups& names,
                         const std::vector<std::vector<Acc>>& per_rank, SummaryResult out) {
  const size_t ngroups = names.names.size();
  const std::vector<int32_t>& rank_values = out.ranks;
  std::vector<Acc> all(ngroups);
  for (const auto& pr : per_rank)
    for (size_t g = 0; g < ngroups; ++g) merge(all[g], pr[g]);
  out.all = make_table(all, names, opt);
  out.all.scope = describe_filter(s, opt.filter);

  // Per-rank tables only when there is more than one rank; with one they repeat the first table.
  if (opt.per_rank && rank_values.size() > 1) {
    std::vector<size_t> by_rank(rank_values.size());
    std::iota(by_rank.begin(), by_rank.end(), 0);
    std::sort(by_rank.begin(), by_rank.end(),
              [&](size_t x, size_t y) { return rank_values[x] < rank_values[y]; });
    for (size_t k : by_rank) {
      Filter fr = opt.filter;
      fr.rank = rank_values[k];
      SummaryTable t = make_table(per_rank[k], names, opt);
      t.rank = rank_values[k];
      t.scope = describe_filter(s, fr);
      out.by_rank.push_back(std::move(t));
    }
  }
  return out;
}
}  // namespace

void summary_report(const SummaryResult& r, Report* out) {
  const SummaryTable& all = r.all;
  out->tables.push_back(render_table(all, r, "kernel_summary"));
  if (all.count == 0) {
    out->headline.push_back("Kernel summary: no kernel activities match (" + all.scope + ")");
  } else {
    out->headline.push_back(
        "Kernel summary (" + all.scope + "): " + std::to_string(all.count) + " kernels, " +
        std::to_string(all.distinct) + " distinct " + (r.verbose ? "names" : "simplified names") +
        ", " + format_duration(all.total_ns) + " GPU kernel time, " +
        std::to_string(r.ranks.size()) + (r.ranks.size() == 1 ? " rank" : " ranks"));
    if (all.rows.size() < all.distinct)
      out->headline.push_back("Showing top " + std::to_string(all.rows.size()) + " of " +
                              std::to_string(all.distinct) + " by " + sort_label(r.sort));
  }
  for (const SummaryTable& t : r.by_rank)
    out->tables.push_back(render_table(t, r, "kernel_summary_rank" + std::to_string(t.rank)));
  out->json["kernel_summary_totals"] = {{"kernels", all.count},
                                        {"total_ns", all.total_ns},
                                        {"total_us", us(all.total_ns)},
                                        {"distinct_names", all.distinct},
                                        {"ranks", r.ranks},
                                        {"simplified_names", !r.verbose},
                                        {"sort", sort_label(r.sort)},
                                        {"top", r.top}};
}

void kernel_summary(const Store& s, const SummaryOptions& opt, Report* out) {
  summary_report(kernel_summary(s, opt), out);
}

std::vector<KernelStat> kernel_stats(const Store& s, const Filter& f, bool verbose) {
  const Activities& a = s.activities;
  const std::vector<uint32_t> rows = select_activities(s, f);
  const NameGroups names = group_names(s, rows, verbose, /*kernels_only=*/true);
  std::vector<Acc> accs(names.names.size());
  const auto kernel = static_cast<uint8_t>(Kind::Kernel);
  for (uint32_t i : rows)
    if (a.kind[i] == kernel) add_row(a, i, accs[names.group_of[a.name_id[i]]]);
  std::vector<KernelStat> out;
  for (size_t g = 0; g < accs.size(); ++g)
    if (accs[g].count > 0)
      out.push_back({names.names[g], accs[g].count, accs[g].total, accs[g].min, accs[g].max});
  return out;
}

// SummaryFold (sliced_folds.h): the per-rank accumulators of kernel_summary, a rank at a time;
// names grouped across the slices by their display name (the tables sort by name, not by id).
struct SummaryFold::Impl {
  SummaryOptions opt;
  NameGroups names;  // group_of unused: the slices' ids map through `index`
  std::unordered_map<std::string, int32_t> index;
  std::vector<int32_t> ranks;
  std::vector<std::vector<Acc>> per_rank;
};

SummaryFold::SummaryFold(const SummaryOptions& opt) : impl_(std::make_shared<Impl>()) {
  impl_->opt = opt;
}

void SummaryFold::add(const Store& s) {
  Impl& m = *impl_;
  const Activities& a = s.activities;
  const std::vector<uint32_t> rows = select_activities(s, m.opt.filter);
  const NameGroups local = group_names(s, rows, m.opt.verbose, /*kernels_only=*/true);
  std::vector<int32_t> global(local.names.size());
  for (size_t g = 0; g < local.names.size(); ++g) {
    auto [it, fresh] = m.index.emplace(local.names[g], static_cast<int32_t>(m.names.names.size()));
    if (fresh) m.names.names.push_back(local.names[g]);
    global[g] = it->second;
  }
  const auto kernel = static_cast<uint8_t>(Kind::Kernel);
  std::unordered_map<int32_t, size_t> at;  // the slice's ranks (one, unless hand-built)
  for (uint32_t i : rows) {
    if (a.kind[i] != kernel) continue;
    auto [it, fresh] = at.emplace(a.rank[i], m.per_rank.size());
    if (fresh) {
      auto old = std::find(m.ranks.begin(), m.ranks.end(), a.rank[i]);
      if (old != m.ranks.end()) {
        it->second = static_cast<size_t>(old - m.ranks.begin());
      } else {
        m.ranks.push_back(a.rank[i]);
        m.per_rank.emplace_back();
      }
    }
    std::vector<Acc>& accs = m.per_rank[it->second];
    const auto g = static_cast<size_t>(global[static_cast<size_t>(local.group_of[a.name_id[i]])]);
    if (accs.size() <= g) accs.resize(m.names.names.size());
    add_row(a, i, accs[g]);
  }
}

SummaryResult SummaryFold::finish(const Store& header) const {
  const Impl& m = *impl_;
  std::vector<std::vector<Acc>> per_rank = m.per_rank;
  for (auto& accs : per_rank) accs.resize(m.names.names.size());
  SummaryResult out;
  out.sort = m.opt.sort;
  out.top = m.opt.top;
  out.verbose = m.opt.verbose;
  out.ranks = m.ranks;
  return summary_of(header, m.opt, m.names, per_rank, std::move(out));
}

std::string SummaryFold::save() const {
  Archive ar;
  ar.put(impl_->names.names);
  ar.put(impl_->ranks);
  ar.put(impl_->per_rank);
  return ar.bytes();
}

void SummaryFold::merge(const std::string& bytes) {
  Impl& m = *impl_;
  Archive ar(bytes);
  const auto names = ar.get<std::vector<std::string>>();
  const auto ranks = ar.get<std::vector<int32_t>>();
  const auto per_rank = ar.get<std::vector<std::vector<Acc>>>();
  std::vector<size_t> global(names.size());
  for (size_t g = 0; g < names.size(); ++g) {
    auto [it, fresh] = m.index.emplace(names[g], static_cast<int32_t>(m.names.names.size()));
    if (fresh) m.names.names.push_back(names[g]);
    global[g] = static_cast<size_t>(it->second);
  }
  for (size_t k = 0; k < ranks.size() && k < per_rank.size(); ++k) {
    auto old = std::find(m.ranks.begin(), m.ranks.end(), ranks[k]);
    if (old == m.ranks.end()) {
      m.ranks.push_back(ranks[k]);
      m.per_rank.emplace_back();
      old = m.ranks.end() - 1;
    }
    std::vector<Acc>& accs = m.per_rank[static_cast<size_t>(old - m.ranks.begin())];
    accs.resize(m.names.names.size());
    for (size_t g = 0; g < per_rank[k].size() && g < global.size(); ++g)
      kernalyse::merge(accs[global[g]], per_rank[k][g]);
  }
}

}  // namespace kernalyse
