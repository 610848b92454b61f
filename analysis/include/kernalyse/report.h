// A report is a list of named tables (plus free-form JSON extras); one renderer per format.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <variant>
#include <vector>

#include <nlohmann/json.hpp>

namespace kernalyse {

using Cell = std::variant<std::monostate, int64_t, double, std::string>;

struct Table {
  std::string key;    // JSON key and CSV file stem, e.g. "kernel_summary"
  std::string title;  // text heading
  std::vector<std::string> columns;
  std::vector<std::vector<Cell>> rows;
  int precision = 2;  // digits after the point for doubles in text/CSV
};

struct Report {
  std::vector<std::string> headline;  // lines printed before the tables (text) / "notes" (JSON)
  std::vector<Table> tables;
  std::vector<std::string> text_blocks;  // pre-rendered text (e.g. histograms), text output only
  nlohmann::json json = nlohmann::json::object();  // extra keys merged into --json output
};

void render_text(const Report& r, std::ostream& out);
void render_json(const Report& r, std::ostream& out);
// One CSV per table, "<dir>/<key>.csv"; creates dir. Throws kernalyse::Error on failure.
void render_csv(const Report& r, const std::string& dir);

}  // namespace kernalyse
