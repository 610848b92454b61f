// Renderers of a TraceDiff: tables + the "diff" JSON object (text, --json, --csv through the
// Report renderers). Only presentation here; the numbers come from diff_stores. The side-by-side
// HTML page is analysis/html/src/diff_html.cpp.
#include <algorithm>
#include <cstdio>
#include <string>

#include "kernalyse/diff.h"
#include "kernalyse/units.h"

namespace kernalyse {
namespace {

using json = nlohmann::json;

Cell mean_us(const KernelSide& k) {
  return k.count ? Cell(static_cast<double>(k.total_ns) / static_cast<double>(k.count) / 1e3)
                 : Cell{};
}
json mean_ns(const KernelSide& k) {
  return k.count ? json(static_cast<double>(k.total_ns) / static_cast<double>(k.count))
                 : json(nullptr);
}
Cell pct_change(int64_t b, int64_t t) {
  return b > 0 ? Cell(100.0 * static_cast<double>(t - b) / static_cast<double>(b)) : Cell{};
}
json overlap_pct(const UnionStats& u) {
  return u.comm_ns > 0
             ? json(100.0 * static_cast<double>(u.overlap_ns) / static_cast<double>(u.comm_ns))
             : json(nullptr);
}

json side_json(const KernelSide& k) {
  return {{"count", k.count}, {"total_ns", k.total_ns}, {"mean_ns", mean_ns(k)}};
}
json only_json(const KernelOnly& k) {
  return {{"name", k.name},
          {"count", k.side.count},
          {"total_ns", k.side.total_ns},
          {"mean_ns", mean_ns(k.side)}};
}
json step_json(const std::optional<StepSide>& s) {
  if (!s) return nullptr;
  return {{"cpu_ns", s->cpu_ns},
          {"gpu_span_ns", s->gpu_span_ns},
          {"kernels", s->kernels},
          {"ranks", s->ranks}};
}
json rank_json(const std::optional<RankSide>& r) {
  if (!r) return nullptr;
  const UnionStats& u = r->unions;
  return {{"span_ns", u.span_ns},
          {"busy_ns", u.busy_ns},
          {"idle_ns", u.span_ns - u.busy_ns},
          {"compute_ns", u.compute_ns},
          {"comm_ns", u.comm_ns},
          {"overlap_ns", u.overlap_ns},
          {"overlap_pct", overlap_pct(u)},
          {"exposed_comm_ns", u.comm_excl_ns},
          {"host_wait_ns", r->host_wait_ns},
          {"kernel_wait_ns", r->kernel_wait_ns},
          {"other_idle_ns", r->other_idle_ns},
          {"times_last", r->times_last},
          {"inflicted_ns", r->inflicted_ns},
          {"suffered_ns", r->suffered_ns}};
}
json rank_or_null(int32_t r) { return r >= 0 ? json(r) : json(nullptr); }

std::string straggler_text(int32_t r) { return r >= 0 ? "rank " + std::to_string(r) : "none"; }

// Most rows a kernel table shows (top <= 0: all of them).
size_t limit(size_t n, int top) { return top > 0 ? std::min(n, static_cast<size_t>(top)) : n; }

// Tables (text and CSV); the JSON carries the typed object (diff_json) instead.
void hide_ns(Table& t) {
  t.text_hidden.assign(t.columns.size(), false);
  for (size_t c = 0; c < t.columns.size(); ++c)
    t.text_hidden[c] =
        t.columns[c].size() > 3 && t.columns[c].compare(t.columns[c].size() - 3, 3, "_ns") == 0;
  t.in_json = false;
  t.precision = 3;
}

template <class O, class F>
Cell opt_cell(const O& o, F f) {
  return o ? Cell(f(*o)) : Cell{};
}

void diff_headline(const TraceDiff& d, Report& rep) {
  size_t changed = 0;
  for (const auto& k : d.kernels) changed += k.changed();
  char line[512];
  std::snprintf(line, sizeof line, "diff %s → %s: %lld → %lld kernels, GPU kernel time %s → %s",
                d.base_label.c_str(), d.test_label.c_str(),
                static_cast<long long>(d.base_kernels.count),
                static_cast<long long>(d.test_kernels.count),
                format_duration(d.base_kernels.total_ns).c_str(),
                format_duration(d.test_kernels.total_ns).c_str());
  rep.headline.push_back(line);
  if (d.base_emulated || d.test_emulated)
    rep.headline.push_back("DATA IS SYNTHETIC/EMULATED in " +
                           std::string(d.base_emulated && d.test_emulated ? "both runs"
                                       : d.base_emulated                  ? d.base_label
                                                                          : d.test_label));
  if (d.identical()) {
    rep.headline.push_back(
        "no change: the same kernels, counts and times, steps and per-rank figures");
  } else {
    rep.headline.push_back(std::to_string(changed) + " of " + std::to_string(d.kernels.size()) +
                           " kernel names in both runs changed; " +
                           std::to_string(d.only_base.size()) + " only in " + d.base_label + ", " +
                           std::to_string(d.only_test.size()) + " only in " + d.test_label + ", " +
                           std::to_string(d.replaced.size()) + " replaced/fused group(s)");
  }
  if (d.cross_rank)
    rep.headline.push_back(
        "straggler (most wait inflicted while last): " + straggler_text(d.base_straggler) + " → " +
        straggler_text(d.test_straggler) + " (" + std::to_string(d.base_collectives) + " → " +
        std::to_string(d.test_collectives) + " matched collectives)");
}

Table steps_table(const TraceDiff& d) {
  Table st;
  st.key = "diff_steps";
  st.title = "Steps: CPU time and GPU span (longest rank), " + d.base_label + " → " + d.test_label;
  st.columns = {"step",
                "base_cpu_us",
                "test_cpu_us",
                "delta_cpu_us",
                "base_gpu_span_us",
                "test_gpu_span_us",
                "delta_gpu_span_us",
                "base_kernels",
                "test_kernels",
                "delta_cpu_ns",
                "delta_gpu_span_ns"};
  hide_ns(st);
  for (const auto& s : d.steps) {
    auto both = [&](auto f) -> Cell {
      return s.base && s.test ? Cell(f(*s.test) - f(*s.base)) : Cell{};
    };
    st.rows.push_back({int64_t{s.step}, opt_cell(s.base, [](auto& x) { return us(x.cpu_ns); }),
                       opt_cell(s.test, [](auto& x) { return us(x.cpu_ns); }),
                       both([](auto& x) { return us(x.cpu_ns); }),
                       opt_cell(s.base, [](auto& x) { return us(x.gpu_span_ns); }),
                       opt_cell(s.test, [](auto& x) { return us(x.gpu_span_ns); }),
                       both([](auto& x) { return us(x.gpu_span_ns); }),
                       opt_cell(s.base, [](auto& x) { return x.kernels; }),
                       opt_cell(s.test, [](auto& x) { return x.kernels; }),
                       both([](auto& x) { return x.cpu_ns; }),
                       both([](auto& x) { return x.gpu_span_ns; })});
  }
  return st;
}

Table changed_kernels_table(const TraceDiff& d, int top) {
  Table kt;
  kt.key = "diff_kernels";
  kt.title = "Kernels in both runs that changed (by |time delta|)";
  kt.columns = {"kernel",        "base_count",     "test_count",    "delta_count",  "base_total_us",
                "test_total_us", "delta_total_us", "base_mean_us",  "test_mean_us", "delta_pct",
                "base_total_ns", "test_total_ns",  "delta_total_ns"};
  hide_ns(kt);
  kt.max_text_width = 64;
  std::vector<const KernelDelta*> ch;
  for (const auto& k : d.kernels)
    if (k.changed()) ch.push_back(&k);
  for (size_t i = 0; i < limit(ch.size(), top); ++i) {
    const KernelDelta& k = *ch[i];
    kt.rows.push_back({k.name, k.base.count, k.test.count, k.test.count - k.base.count,
                       us(k.base.total_ns), us(k.test.total_ns),
                       us(k.test.total_ns - k.base.total_ns), mean_us(k.base), mean_us(k.test),
                       pct_change(k.base.total_ns, k.test.total_ns), k.base.total_ns,
                       k.test.total_ns, k.test.total_ns - k.base.total_ns});
  }
  return kt;
}

Table only_table(const std::vector<KernelOnly>& v, const std::string& key, const std::string& who,
                 int top) {
  Table t;
  t.key = key;
  t.title = "Kernels only in " + who;
  t.columns = {"kernel", "count", "total_us", "mean_us", "total_ns"};
  hide_ns(t);
  t.max_text_width = 80;
  for (size_t i = 0; i < limit(v.size(), top); ++i)
    t.rows.push_back({v[i].name, v[i].side.count, us(v[i].side.total_ns), mean_us(v[i].side),
                      v[i].side.total_ns});
  return t;
}

Table replaced_table(const TraceDiff& d) {
  Table rt;
  rt.key = "diff_replaced";
  rt.title = "Replaced/fused kernels, matched by the range (else the ATen op) that launched them";
  rt.columns = {"range", "by", "side", "kernel", "count", "total_us", "total_ns"};
  hide_ns(rt);
  rt.max_text_width = 64;
  for (const auto& g : d.replaced) {
    for (const auto& k : g.before)
      rt.rows.push_back({g.range, g.by, std::string("base"), k.name, k.side.count,
                         us(k.side.total_ns), k.side.total_ns});
    for (const auto& k : g.after)
      rt.rows.push_back({g.range, g.by, std::string("test"), k.name, k.side.count,
                         us(k.side.total_ns), k.side.total_ns});
  }
  return rt;
}

Table ranks_table(const TraceDiff& d) {
  Table ra;
  ra.key = "diff_ranks";
  ra.title = "Per rank: overlap, exposed communication, idle split, straggler ledger (base → test)";
  ra.columns = {"rank",
                "base_overlap_pct",
                "test_overlap_pct",
                "base_exposed_comm_us",
                "test_exposed_comm_us",
                "base_idle_us",
                "test_idle_us",
                "base_host_wait_us",
                "test_host_wait_us",
                "base_times_last",
                "test_times_last",
                "base_inflicted_us",
                "test_inflicted_us"};
  hide_ns(ra);
  auto pct = [](const RankSide& r) -> Cell {
    const json p = overlap_pct(r.unions);
    return p.is_null() ? Cell{} : Cell(p.get<double>());
  };
  for (const auto& r : d.ranks) {
    auto b = [&](auto f) -> Cell { return r.base ? Cell(f(*r.base)) : Cell{}; };
    auto t = [&](auto f) -> Cell { return r.test ? Cell(f(*r.test)) : Cell{}; };
    auto exposed = [](const RankSide& x) { return us(x.unions.comm_excl_ns); };
    auto idle = [](const RankSide& x) { return us(x.unions.span_ns - x.unions.busy_ns); };
    auto host = [](const RankSide& x) { return us(x.host_wait_ns); };
    auto last = [](const RankSide& x) { return x.times_last; };
    auto infl = [](const RankSide& x) { return us(x.inflicted_ns); };
    ra.rows.push_back({int64_t{r.rank}, r.base ? pct(*r.base) : Cell{},
                       r.test ? pct(*r.test) : Cell{}, b(exposed), t(exposed), b(idle), t(idle),
                       b(host), t(host), b(last), t(last), b(infl), t(infl)});
  }
  return ra;
}

// The typed object, for scripts: exact int ns, counts, names.
json diff_json(const TraceDiff& d) {
  json j;
  j["base"] = d.base_label;
  j["test"] = d.test_label;
  j["identical"] = d.identical();
  j["totals"] = {{"base", side_json(d.base_kernels)}, {"test", side_json(d.test_kernels)}};
  json steps = json::array();
  for (const auto& s : d.steps) {
    json o = {{"step", s.step}, {"base", step_json(s.base)}, {"test", step_json(s.test)}};
    o["delta_cpu_ns"] = s.base && s.test ? json(s.test->cpu_ns - s.base->cpu_ns) : json(nullptr);
    o["delta_gpu_span_ns"] =
        s.base && s.test ? json(s.test->gpu_span_ns - s.base->gpu_span_ns) : json(nullptr);
    steps.push_back(o);
  }
  j["steps"] = steps;
  json ks = json::array();
  for (const auto& k : d.kernels)
    ks.push_back({{"name", k.name},
                  {"changed", k.changed()},
                  {"base", side_json(k.base)},
                  {"test", side_json(k.test)},
                  {"delta_count", k.test.count - k.base.count},
                  {"delta_total_ns", k.test.total_ns - k.base.total_ns}});
  j["kernels"] = ks;
  j["only_base"] = json::array();
  for (const auto& k : d.only_base) j["only_base"].push_back(only_json(k));
  j["only_test"] = json::array();
  for (const auto& k : d.only_test) j["only_test"].push_back(only_json(k));
  json rp = json::array();
  for (const auto& g : d.replaced) {
    json before = json::array(), after = json::array();
    for (const auto& k : g.before) before.push_back(only_json(k));
    for (const auto& k : g.after) after.push_back(only_json(k));
    rp.push_back({{"range", g.range},
                  {"by", g.by},
                  {"before", before},
                  {"after", after},
                  {"base", side_json(g.base)},
                  {"test", side_json(g.test)},
                  {"delta_total_ns", g.test.total_ns - g.base.total_ns}});
  }
  j["replaced"] = rp;
  json rk = json::array();
  for (const auto& r : d.ranks)
    rk.push_back({{"rank", r.rank}, {"base", rank_json(r.base)}, {"test", rank_json(r.test)}});
  j["ranks"] = rk;
  j["straggler"] = d.cross_rank ? json{{"base", rank_or_null(d.base_straggler)},
                                       {"test", rank_or_null(d.test_straggler)},
                                       {"base_collectives", d.base_collectives},
                                       {"test_collectives", d.test_collectives}}
                                : json(nullptr);
  return j;
}

}  // namespace

Report diff_report(const TraceDiff& d, int top) {
  Report rep;
  diff_headline(d, rep);
  rep.tables.push_back(steps_table(d));
  rep.tables.push_back(changed_kernels_table(d, top));
  rep.tables.push_back(only_table(d.only_base, "diff_only_base", d.base_label, top));
  rep.tables.push_back(only_table(d.only_test, "diff_only_test", d.test_label, top));
  rep.tables.push_back(replaced_table(d));
  if (d.cross_rank) rep.tables.push_back(ranks_table(d));
  rep.json["diff"] = diff_json(d);
  return rep;
}

}  // namespace kernalyse
