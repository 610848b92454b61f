// Renders a CriticalPathResult: headline, tables (text / CSV) and the JSON keys `critical_path`,
// `what_if` and `what_if_summary` (docs/json.md).
#include <algorithm>
#include <cstdio>
#include <map>

#include "kernalyse/critical_path.h"
#include "kernalyse/units.h"

namespace kernalyse {
namespace {

int64_t median(std::vector<int64_t> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t m = v.size() / 2;
  return v.size() % 2 ? v[m] : v[m - 1] + (v[m] - v[m - 1]) / 2;
}

std::string pct(int64_t part, int64_t whole) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f %%", whole > 0 ? 100.0 * part / whole : 0.0);
  return b;
}

Cell pct_cell(int64_t part, int64_t whole) {
  return whole > 0 ? Cell(100.0 * static_cast<double>(part) / static_cast<double>(whole)) : Cell{};
}

nlohmann::json shares_json(const std::vector<PathShare>& v, const char* key) {
  nlohmann::json out = nlohmann::json::array();
  for (const PathShare& x : v) {
    nlohmann::json j = {{"ns", x.ns}, {"segments", x.count}};
    if (std::string(key) == "rank")
      j["rank"] = x.rank;
    else
      j[key] = x.name;
    out.push_back(std::move(j));
  }
  return out;
}

struct ScenarioSummary {
  std::string scenario;
  int64_t steps = 0, measured_median = 0, predicted_median = 0, saved_total = 0;
};

std::vector<ScenarioSummary> summarise(const std::vector<WhatIfStep>& w) {
  std::vector<ScenarioSummary> out;
  std::map<std::string, size_t> idx;
  std::vector<std::vector<int64_t>> meas, pred;
  for (const WhatIfStep& x : w) {
    auto [it, fresh] = idx.try_emplace(x.scenario, out.size());
    if (fresh) out.push_back({x.scenario}), meas.emplace_back(), pred.emplace_back();
    ScenarioSummary& s = out[it->second];
    ++s.steps, s.saved_total += x.saved_ns;
    meas[it->second].push_back(x.measured_step_ns), pred[it->second].push_back(x.predicted_step_ns);
  }
  for (size_t i = 0; i < out.size(); ++i)
    out[i].measured_median = median(meas[i]), out[i].predicted_median = median(pred[i]);
  return out;
}

// The `what_if` and `what_if_summary` tables and JSON keys (only when scenarios were given).
void what_if_report(const CriticalPathResult& r, const std::vector<ScenarioSummary>& sums,
                    Report* out) {
  if (r.what_if.empty()) return;
  Table wt;
  wt.key = "what_if";
  wt.title = "What-if: predicted step time (the graph re-timed with the scenario's durations)";
  wt.columns = {"scenario", "step", "measured_us", "predicted_us", "saved_us", "saved_pct"};
  wt.in_json = false;
  nlohmann::json wj = nlohmann::json::array();
  for (const WhatIfStep& x : r.what_if) {
    wt.rows.push_back({x.scenario, int64_t{x.step}, us(x.measured_step_ns), us(x.predicted_step_ns),
                       us(x.saved_ns), pct_cell(x.saved_ns, x.measured_step_ns)});
    wj.push_back({{"scenario", x.scenario},
                  {"step", x.step},
                  {"measured_step_ns", x.measured_step_ns},
                  {"predicted_step_ns", x.predicted_step_ns},
                  {"saved_ns", x.saved_ns}});
  }
  Table ws;
  ws.key = "what_if_summary";
  ws.title = "What-if summary (median over steps)";
  ws.columns = {"scenario", "steps", "measured_median_us", "predicted_median_us", "saved_total_us"};
  ws.in_json = false;
  nlohmann::json wsj = nlohmann::json::array();
  for (const ScenarioSummary& s : sums) {
    ws.rows.push_back(
        {s.scenario, s.steps, us(s.measured_median), us(s.predicted_median), us(s.saved_total)});
    wsj.push_back({{"scenario", s.scenario},
                   {"steps", s.steps},
                   {"measured_median_ns", s.measured_median},
                   {"predicted_median_ns", s.predicted_median},
                   {"saved_total_ns", s.saved_total}});
  }
  out->json["what_if"] = std::move(wj);
  out->json["what_if_summary"] = std::move(wsj);
  out->tables.push_back(std::move(wt));
  out->tables.push_back(std::move(ws));
}

// The path over all steps: by kind and by rank.
struct Totals {
  int64_t path = 0, span = 0, kinds[kPathKinds] = {};
  std::map<int32_t, int64_t> by_rank;
  std::vector<int64_t> spans;
};

Totals totals(const CriticalPathResult& r) {
  Totals t;
  for (const StepPath& p : r.steps) {
    t.path += p.path_ns, t.span += p.span_end_ns - p.span_start_ns;
    t.spans.push_back(p.span_end_ns - p.span_start_ns);
    for (int k = 0; k < kPathKinds; ++k) t.kinds[k] += p.by_kind[k];
    for (const PathShare& x : p.by_rank) t.by_rank[x.rank] += x.ns;
  }
  return t;
}

std::string headline(const CriticalPathResult& r, const Totals& t) {
  if (r.steps.empty()) return "critical path: no GPU work in the selection";
  std::string line = "critical path over " + std::to_string(r.steps.size()) +
                     " step(s): " + format_duration(t.path) + " of " + format_duration(t.span) +
                     " GPU span (median step " + format_duration(median(t.spans)) + "):";
  for (int k = 0; k < kPathKinds; ++k)
    if (t.kinds[k] > 0)
      line += std::string(" ") + to_string(static_cast<PathKind>(k)) + " " +
              pct(t.kinds[k], t.path) + ",";
  line.pop_back();
  auto top = std::max_element(t.by_rank.begin(), t.by_rank.end(),
                              [](const auto& x, const auto& y) { return x.second < y.second; });
  if (top != t.by_rank.end())
    line += "; rank " + std::to_string(top->first) + " holds " + pct(top->second, t.path);
  return line;
}

}  // namespace

void critical_path_report(const CriticalPathResult& r, Report* out) {
  const Totals tot = totals(r);
  const int64_t path = tot.path, span = tot.span;
  const int64_t* kinds = tot.kinds;
  const std::map<int32_t, int64_t>& by_rank = tot.by_rank;
  out->headline.push_back(headline(r, tot));
  const std::vector<ScenarioSummary> sums = summarise(r.what_if);
  for (const ScenarioSummary& s : sums)
    out->headline.push_back("what-if " + s.scenario + ": median step " +
                            format_duration(s.measured_median) + " -> " +
                            format_duration(s.predicted_median) + " predicted (" +
                            pct(s.measured_median - s.predicted_median, s.measured_median) +
                            " saved; " + std::to_string(s.steps) + " step(s))");
  for (const std::string& n : r.notes) out->headline.push_back("critical path: " + n);

  Table st;
  st.key = "critical_path_steps";
  st.title = "Critical path per step (µs; the path's time by kind)";
  st.columns = {"step",         "span_us",       "path_us",
                "slack_us",     "compute_us",    "comm_transfer_us",
                "comm_wait_us", "host_us",       "launch_latency_us",
                "idle_us",      "sink_rank",     "collectives_on_path",
                "collectives",  "edges_inferred"};
  st.in_json = false;
  Table rt;
  rt.key = "critical_path_ranks";
  rt.title = "Critical path by rank";
  rt.columns = {"step", "rank", "path_us", "pct_of_path"};
  rt.in_json = false;
  Table kt;
  kt.key = "critical_path_kernels";
  kt.title = "Critical path by kernel";
  kt.columns = {"step", "kernel", "segments", "path_us", "pct_of_path"};
  kt.max_text_width = 60;
  kt.in_json = false;
  Table gt;
  gt.key = "critical_path_ranges";
  gt.title = "Critical path by annotated range (innermost NVTX / user range of the launch)";
  gt.columns = {"step", "range", "segments", "path_us", "pct_of_path"};
  gt.max_text_width = 48;
  gt.in_json = false;
  Table sg;
  sg.key = "critical_path_segments";
  sg.title = "Critical path segments";
  sg.columns = {"step", "start_ns", "end_ns", "dur_us", "kind",
                "rank", "stream",   "tid",    "name",   "collective"};
  sg.in_json = false;
  sg.in_text = false;  // long: CSV and JSON only
  nlohmann::json steps = nlohmann::json::array();
  for (const StepPath& p : r.steps) {
    const int64_t sp = p.span_end_ns - p.span_start_ns;
    std::vector<Cell> row = {int64_t{p.step}, us(sp), us(p.path_ns), us(p.slack_ns)};
    for (int k = 0; k < kPathKinds; ++k) row.push_back(us(p.by_kind[k]));
    row.insert(row.end(),
               {int64_t{p.sink_rank}, p.collectives_on_path, p.collectives, p.edges_inferred});
    st.rows.push_back(std::move(row));
    for (const PathShare& x : p.by_rank)
      rt.rows.push_back({int64_t{p.step}, int64_t{x.rank}, us(x.ns), pct_cell(x.ns, p.path_ns)});
    for (const PathShare& x : p.by_kernel)
      kt.rows.push_back({int64_t{p.step}, x.name, x.count, us(x.ns), pct_cell(x.ns, p.path_ns)});
    for (const PathShare& x : p.by_range)
      gt.rows.push_back({int64_t{p.step}, x.name, x.count, us(x.ns), pct_cell(x.ns, p.path_ns)});
    nlohmann::json kinds_j = nlohmann::json::object(), segs = nlohmann::json::array();
    for (int k = 0; k < kPathKinds; ++k)
      kinds_j[std::string(to_string(static_cast<PathKind>(k))) + "_ns"] = p.by_kind[k];
    for (const PathSegment& g : p.segments) {
      sg.rows.push_back({int64_t{p.step}, g.start_ns, g.end_ns, us(g.end_ns - g.start_ns),
                         std::string(to_string(g.kind)), int64_t{g.rank}, int64_t{g.stream}, g.tid,
                         g.name, g.collective});
      segs.push_back({{"kind", to_string(g.kind)},
                      {"rank", g.rank},
                      {"stream", g.stream},
                      {"tid", g.tid},
                      {"start_ns", g.start_ns},
                      {"end_ns", g.end_ns},
                      {"name", g.name},
                      {"collective", g.collective}});
    }
    steps.push_back({{"step", p.step},
                     {"span_start_ns", p.span_start_ns},
                     {"span_end_ns", p.span_end_ns},
                     {"span_ns", sp},
                     {"path_start_ns", p.path_start_ns},
                     {"path_ns", p.path_ns},
                     {"slack_ns", p.slack_ns},
                     {"sink_rank", p.sink_rank},
                     {"nodes", p.nodes},
                     {"edges_inferred", p.edges_inferred},
                     {"collectives", p.collectives},
                     {"collectives_on_path", p.collectives_on_path},
                     {"by_kind", kinds_j},
                     {"by_rank", shares_json(p.by_rank, "rank")},
                     {"by_kernel", shares_json(p.by_kernel, "kernel")},
                     {"by_range", shares_json(p.by_range, "range")},
                     {"segments_total", p.segments_total}});
    steps.back()["segments"] = std::move(segs);  // large: moved, not copied
  }
  nlohmann::json total_kinds = nlohmann::json::object(), total_ranks = nlohmann::json::array();
  for (int k = 0; k < kPathKinds; ++k)
    total_kinds[std::string(to_string(static_cast<PathKind>(k))) + "_ns"] = kinds[k];
  for (const auto& [rank, ns] : by_rank) total_ranks.push_back({{"rank", rank}, {"ns", ns}});
  out->json["critical_path"] = {
      {"method", r.method},     {"event_tolerance_ns", r.event_tolerance_ns},
      {"path_ns", path},        {"span_ns", span},
      {"by_kind", total_kinds}, {"by_rank", total_ranks},
      {"notes", r.notes}};
  out->json["critical_path"]["steps"] = std::move(steps);  // large: moved, not copied

  out->tables.push_back(std::move(st));
  out->tables.push_back(std::move(rt));
  out->tables.push_back(std::move(kt));
  if (!gt.rows.empty()) out->tables.push_back(std::move(gt));
  out->tables.push_back(std::move(sg));
  what_if_report(r, sums, out);
}

}  // namespace kernalyse
