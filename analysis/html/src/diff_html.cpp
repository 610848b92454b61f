// The side-by-side HTML page of a TraceDiff (--diff --html), drawn from diff_report's tables
// (analysis/analyses/src/diff_render.cpp). Only presentation; the numbers come from diff_stores.
#include <cstdio>
#include <string>

#include "kernalyse/diff.h"
#include "kernalyse/html.h"
#include "kernalyse/units.h"

namespace kernalyse {

namespace {

// One labelled bar pair: BASE and TEST drawn side by side, scaled to the section's maximum.
std::string bar_row(const std::string& label, int64_t b, int64_t t, int64_t max, bool has_b,
                    bool has_t) {
  auto bar = [&](int64_t v, bool has, const char* cls) {
    if (!has) return std::string("<td class=\"side\"><span class=\"absent\">absent</span></td>");
    const double w = max > 0 ? 100.0 * static_cast<double>(v) / static_cast<double>(max) : 0.0;
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "<td class=\"side\"><div class=\"bar %s\" "
                  "style=\"width:%.2f%%\"></div><span>%s</span></td>",
                  cls, w, format_duration(v).c_str());
    return std::string(buf);
  };
  std::string delta = has_b && has_t ? format_duration(t - b) : "—";
  return "<tr><td class=\"lbl\">" + escape_html(label) + "</td>" + bar(b, has_b, "b") +
         bar(t, has_t, "t") + "<td class=\"n\">" + escape_html(delta) + "</td></tr>\n";
}

}  // namespace

int64_t write_diff_html(const TraceDiff& d, const std::string& path, bool force) {
  const Report rep = diff_report(d);
  std::string h;
  h += "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
       "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
       "'unsafe-inline'\">\n"
       "<title>kernalyse diff — " +
       escape_html(d.base_label) + " vs " + escape_html(d.test_label) +
       "</title>\n"
       "<style>body{font:14px "
       "system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;"
       "width:100%;margin-bottom:1.5em}td,th{padding:2px 6px;border-bottom:1px solid "
       "#eee;vertical-align:middle}"
       "th{text-align:left}td.lbl{max-width:28em;overflow:hidden;text-overflow:ellipsis;white-"
       "space:nowrap;"
       "font-family:monospace;font-size:12px}td.side{width:32%;position:relative}.bar{height:14px;"
       "display:inline-block;"
       "vertical-align:middle;margin-right:6px}.bar.b{background:#7a9cc6}.bar.t{background:#e39a4f}"
       "td.n{text-align:right;white-space:nowrap}.absent{color:#999}.emulated{background:#fde;"
       "padding:4px}"
       "ul.notes li{margin:2px 0}</style></head><body>\n";
  h += "<h1>Trace diff</h1><table><tr><th></th><th>BASE: " + escape_html(d.base_label) +
       "</th><th>TEST: " + escape_html(d.test_label) + "</th><th>delta</th></tr></table>\n";
  if (d.base_emulated || d.test_emulated)
    h += "<p class=\"emulated\">EMULATED DATA in at least one run: no real GPU recorded those "
         "events.</p>\n";
  h += "<ul class=\"notes\">";
  for (const auto& l : rep.headline) h += "<li>" + escape_html(l) + "</li>";
  h += "</ul>\n";
  auto section = [&](const std::string& title) {
    h += "<h2>" + escape_html(title) + "</h2><table><tr><th>name</th><th>" +
         escape_html(d.base_label) + "</th><th>" + escape_html(d.test_label) +
         "</th><th>delta</th></tr>\n";
  };

  section("Steps: GPU span (longest rank)");
  int64_t mx = 0;
  for (const auto& s : d.steps)
    mx = std::max({mx, s.base ? s.base->gpu_span_ns : 0, s.test ? s.test->gpu_span_ns : 0});
  for (const auto& s : d.steps)
    h += bar_row("ProfilerStep#" + std::to_string(s.step), s.base ? s.base->gpu_span_ns : 0,
                 s.test ? s.test->gpu_span_ns : 0, mx, s.base.has_value(), s.test.has_value());
  h += "</table>\n";

  section("Kernels that changed: total time");
  mx = 0;
  for (const auto& k : d.kernels)
    if (k.changed()) mx = std::max({mx, k.base.total_ns, k.test.total_ns});
  for (const auto& k : d.kernels)
    if (k.changed())
      h += bar_row(
          k.name + " (" + std::to_string(k.base.count) + " → " + std::to_string(k.test.count) + ")",
          k.base.total_ns, k.test.total_ns, mx, true, true);
  h += "</table>\n";

  section("Kernels in one run only, and replaced/fused groups");
  mx = 0;
  for (const auto& k : d.only_base) mx = std::max(mx, k.side.total_ns);
  for (const auto& k : d.only_test) mx = std::max(mx, k.side.total_ns);
  for (const auto& g : d.replaced) mx = std::max({mx, g.base.total_ns, g.test.total_ns});
  for (const auto& k : d.only_base) h += bar_row(k.name, k.side.total_ns, 0, mx, true, false);
  for (const auto& k : d.only_test) h += bar_row(k.name, 0, k.side.total_ns, mx, false, true);
  for (const auto& g : d.replaced) {
    std::string names;
    for (const auto& k : g.before) names += (names.empty() ? "" : ", ") + k.name;
    names += " → ";
    for (const auto& k : g.after) names += k.name + " ";
    h += bar_row(g.by + " " + g.range + ": " + names, g.base.total_ns, g.test.total_ns, mx, true,
                 true);
  }
  h += "</table>\n";

  if (d.cross_rank) {
    auto per_rank = [&](const std::string& title, auto f) {
      section(title);
      int64_t m = 0;
      for (const auto& r : d.ranks)
        m = std::max({m, r.base ? f(*r.base) : 0, r.test ? f(*r.test) : 0});
      for (const auto& r : d.ranks)
        h += bar_row("rank " + std::to_string(r.rank), r.base ? f(*r.base) : 0,
                     r.test ? f(*r.test) : 0, m, r.base.has_value(), r.test.has_value());
      h += "</table>\n";
    };
    per_rank("Exposed communication per rank",
             [](const RankSide& r) { return r.unions.comm_excl_ns; });
    per_rank("Idle time per rank (span − busy)",
             [](const RankSide& r) { return r.unions.span_ns - r.unions.busy_ns; });
    per_rank("Host wait per rank (idle split)", [](const RankSide& r) { return r.host_wait_ns; });
    per_rank("Wait inflicted while last (straggler ledger)",
             [](const RankSide& r) { return r.inflicted_ns; });
  }
  h += "</body></html>\n";
  write_file_atomic(path, h, force);
  return static_cast<int64_t>(h.size());
}

}  // namespace kernalyse
