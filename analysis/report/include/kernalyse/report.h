// A report is a list of named tables (plus free-form JSON extras); one renderer per format.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

namespace kernalyse {

using Cell = std::variant<std::monostate, int64_t, double, std::string>;

struct Table {
  std::string key;    // JSON key and CSV file stem, e.g. "kernel_summary"
  std::string title;  // text heading
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
  int precision = 2;  // digits after the point for doubles in text/CSV
  // Per column; true = left out of text output (e.g. exact *_ns twins of *_us columns).
  std::vector<bool> text_hidden;
  size_t max_text_width = 0;  // text: longer string cells are cut with "…" (0 = no limit)
  bool in_text = true;        // false when a text block renders it instead (histogram bars)
  bool in_json = true;        // false when Report::json carries it in another shape
};

struct Report {
  std::vector<std::string> lead;      // verdict lines printed before every headline line
  std::vector<std::string> headline;  // lines printed before the tables (text) / "notes" (JSON)
  std::vector<Table> tables;
  std::vector<std::string> text_blocks;  // pre-rendered text (e.g. histograms), text output only
  nlohmann::json json = nlohmann::json::object();  // extra keys merged into --json output
  // Keys built only when JSON is rendered (render_json, json_of): a large key (the ledger's
  // per-collective list) costs more to build than its analysis, and text output never reads it.
  // Each adds its keys to the object it is given; the typed result it renders is captured.
  std::vector<std::function<void(nlohmann::json&)>> json_later;
};

// Report::json with every deferred key built: what --json prints besides the tables.
nlohmann::json json_of(const Report& r);

// Appends `part` to `r`: its lead, headline lines, tables and text blocks after r's, its JSON keys
// merged (a key already in r is replaced). Analyses run apart fill one Report each; this joins
// them.
void append_report(Report* r, Report part);

void render_text(const Report& r, std::ostream& out);
void render_json(const Report& r, std::ostream& out);
// One CSV per table, "<dir>/<key>.csv"; creates dir. Throws kernalyse::Error on failure.
void render_csv(const Report& r, const std::string& dir);

}  // namespace kernalyse
