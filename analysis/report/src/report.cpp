// Report renderers: aligned text, one JSON object, one CSV file per table.
#include "kernalyse/report.h"

#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "kernalyse/error.h"
#include "kernalyse/parallel.h"

namespace kernalyse {
namespace {

bool is_number(const Cell& c) {
  return std::holds_alternative<int64_t>(c) || std::holds_alternative<double>(c);
}

std::string format_double(double v, int precision) {
  // std::to_chars gives printf's "%.*f" digits (both exact, rounded half to even: 3 M random
  // values and the edge cases compared) in a quarter of its time (43 against 196 ns a value).
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed,
                               precision < 0 ? 0 : precision);
  if (r.ec == std::errc()) return std::string(buf, r.ptr);
  std::snprintf(buf, sizeof buf, "%.*f", precision < 0 ? 0 : precision, v);  // past 63 digits
  return buf;
}

// Text/CSV form of a cell; "" for missing or non-finite values.
std::string format_cell(const Cell& c, int precision) {
  if (const auto* i = std::get_if<int64_t>(&c)) return std::to_string(*i);
  if (const auto* d = std::get_if<double>(&c))
    return std::isfinite(*d) ? format_double(*d, precision) : std::string();
  if (const auto* s = std::get_if<std::string>(&c)) return *s;
  return {};
}

// Columns on a terminal: count UTF-8 lead bytes (continuation bytes are 10xxxxxx).
size_t display_width(const std::string& s) {
  size_t w = 0;
  for (unsigned char ch : s) w += (ch & 0xC0) != 0x80;
  return w;
}

// Keeps the first max-1 code points and appends "…"; never splits a UTF-8 sequence.
std::string truncate(const std::string& s, size_t max) {
  if (max == 0 || display_width(s) <= max) return s;
  size_t cps = 0, i = 0;
  for (; i < s.size(); ++i) {
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) {
      if (cps == max - 1) break;
      ++cps;
    }
  }
  return s.substr(0, i) + "…";
}

// Control characters (a newline in a name) would break the alignment.
std::string printable(std::string s) {
  for (char& ch : s)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7F) ch = ' ';
  return s;
}

void pad(std::ostream& out, const std::string& s, size_t width, bool right) {
  const size_t w = display_width(s);
  const std::string fill(width > w ? width - w : 0, ' ');
  if (right)
    out << fill << s;
  else
    out << s << fill;
}

void render_table_text(const Table& t, std::ostream& out) {
  std::vector<size_t> cols;
  for (size_t c = 0; c < t.columns.size(); ++c)
    if (c >= t.text_hidden.size() || !t.text_hidden[c]) cols.push_back(c);

  std::vector<std::vector<std::string>> cells(t.rows.size());
  std::vector<size_t> width(cols.size());
  std::vector<bool> numeric(cols.size(), true);
  for (size_t k = 0; k < cols.size(); ++k) width[k] = display_width(t.columns[cols[k]]);
  for (size_t r = 0; r < t.rows.size(); ++r) {
    cells[r].resize(cols.size());
    for (size_t k = 0; k < cols.size(); ++k) {
      const size_t c = cols[k];
      if (c >= t.rows[r].size()) {
        cells[r][k] = std::string(1, '-');  // not = "-": GCC 12 -O3 false -Wrestrict
        continue;
      }
      const Cell& cell = t.rows[r][c];
      if (std::holds_alternative<std::string>(cell)) numeric[k] = false;
      std::string s = format_cell(cell, t.precision);
      if (!is_number(cell)) s = truncate(printable(std::move(s)), t.max_text_width);
      cells[r][k] = s.empty() ? "-" : std::move(s);
      width[k] = std::max(width[k], display_width(cells[r][k]));
    }
  }

  out << t.title << '\n';
  auto line = [&](auto&& text_of) {
    for (size_t k = 0; k < cols.size(); ++k) {
      if (k) out << "  ";
      // The last left-aligned column needs no trailing padding.
      if (k + 1 == cols.size() && !numeric[k])
        out << text_of(k);
      else
        pad(out, text_of(k), width[k], numeric[k]);
    }
    out << '\n';
  };
  line([&](size_t k) { return t.columns[cols[k]]; });
  line([&](size_t k) { return std::string(width[k], '-'); });
  if (t.rows.empty()) out << "(no rows)\n";
  for (size_t r = 0; r < t.rows.size(); ++r) line([&](size_t k) { return cells[r][k]; });
}

using ojson = nlohmann::ordered_json;

ojson cell_json(const Cell& c) {
  if (const auto* i = std::get_if<int64_t>(&c)) return *i;
  if (const auto* d = std::get_if<double>(&c)) return std::isfinite(*d) ? ojson(*d) : ojson();
  if (const auto* s = std::get_if<std::string>(&c)) return *s;
  return nullptr;
}

// NaN/inf become null anywhere in the extras, so the output is always valid JSON.
std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string q = "\"";
  for (char ch : s) {
    if (ch == '"') q += '"';
    q += ch;
  }
  return q + '"';
}

}  // namespace

void append_report(Report* r, Report part) {
  for (auto& h : part.lead) r->lead.push_back(std::move(h));
  for (auto& h : part.headline) r->headline.push_back(std::move(h));
  for (auto& t : part.tables) r->tables.push_back(std::move(t));
  for (auto& b : part.text_blocks) r->text_blocks.push_back(std::move(b));
  for (auto& [k, v] : part.json.items()) r->json[k] = std::move(v);
  for (auto& f : part.json_later) r->json_later.push_back(std::move(f));
}

nlohmann::json json_of(const Report& r) {
  nlohmann::json j = r.json;
  for (const auto& f : r.json_later) f(j);
  return j;
}

void render_text(const Report& r, std::ostream& out) {
  for (const std::string& h : r.lead) out << h << '\n';
  for (const std::string& h : r.headline) out << h << '\n';
  bool first = r.lead.empty() && r.headline.empty();
  // Each table formatted on the pool, then all written in order: --all's 20-odd tables took
  // 0.5 ms on one thread, a 16th of the trace_filter pair's whole run (docs/benchmarks.md).
  std::vector<const Table*> shown;
  for (const Table& t : r.tables)
    if (t.in_text) shown.push_back(&t);
  std::vector<std::string> texts(shown.size());
  parallel_for(shown.size(), [&](size_t i) {
    std::ostringstream os;
    render_table_text(*shown[i], os);
    texts[i] = std::move(os).str();
  });
  for (const std::string& t : texts) {
    if (!first) out << '\n';
    first = false;
    out << t;
  }
  for (const std::string& b : r.text_blocks) {
    if (!first) out << '\n';
    first = false;
    out << b;
    if (!b.empty() && b.back() != '\n') out << '\n';
  }
}

// One top-level value of --json: a table's rows (ojson, columns in order) or a key of
// Report::json (nlohmann::json, keys sorted, as its std::map iterates).
using JsonValue = std::variant<ojson, const nlohmann::json*>;

// `v` as ojson::dump(2) writes it one level down. Written straight from each value's own type,
// not converted to one ojson document first: the copy (and a walk for non-finite numbers, which
// the serializer writes as null anyway) cost a third of --json on large ledgers.
template <class J>
void dump_member(const J& v, std::ostream& out) {
  nlohmann::detail::serializer<J> ser(nlohmann::detail::output_adapter<char>(out), ' ',
                                      nlohmann::json::error_handler_t::replace);
  ser.dump(v, /*pretty_print=*/true, /*ensure_ascii=*/false, 2, 2);
}

void render_json(const Report& r, std::ostream& out) {
  std::vector<std::pair<std::string, JsonValue>> doc;  // in ojson's order: a key set again stays
  auto set = [&](const std::string& k, JsonValue v) {  // where it was first set
    for (auto& [key, val] : doc)
      if (key == k) return void(val = std::move(v));
    doc.emplace_back(k, std::move(v));
  };
  std::vector<std::string> notes = r.lead;
  notes.insert(notes.end(), r.headline.begin(), r.headline.end());
  set("notes", ojson(notes));
  for (const Table& t : r.tables) {
    if (!t.in_json) continue;
    ojson rows = ojson::array();
    for (const auto& row : t.rows) {
      ojson o = ojson::object();
      for (size_t c = 0; c < t.columns.size(); ++c)
        o[t.columns[c]] = c < row.size() ? cell_json(row[c]) : ojson();
      rows.push_back(std::move(o));
    }
    set(t.key, std::move(rows));
  }
  for (const auto& [k, v] : r.json.items()) set(k, &v);
  nlohmann::json later = nlohmann::json::object();
  for (const auto& f : r.json_later) f(later);
  for (const auto& [k, v] : later.items()) set(k, &v);
  out << "{\n";
  for (size_t i = 0; i < doc.size(); ++i) {
    out << "  ";
    dump_member(ojson(doc[i].first), out);  // the key, escaped as the serializer escapes
    out << ": ";
    if (const auto* o = std::get_if<ojson>(&doc[i].second))
      dump_member(*o, out);
    else
      dump_member(*std::get<const nlohmann::json*>(doc[i].second), out);
    out << (i + 1 < doc.size() ? ",\n" : "\n");
  }
  out << "}\n";
}

void render_csv(const Report& r, const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir))
    throw Error("cannot create CSV directory " + dir + ": " +
                (ec ? ec.message() : std::string("not a directory")));
  for (const Table& t : r.tables) {
    const fs::path path = fs::path(dir) / (t.key + ".csv");
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    if (!f) throw Error("cannot write " + path.string() + ": " + std::strerror(errno));
    for (size_t c = 0; c < t.columns.size(); ++c) f << (c ? "," : "") << csv_field(t.columns[c]);
    f << '\n';
    for (const auto& row : t.rows) {
      for (size_t c = 0; c < t.columns.size(); ++c) {
        if (c) f << ',';
        if (c < row.size()) f << csv_field(format_cell(row[c], t.precision));
      }
      f << '\n';
    }
    f.close();
    if (!f) throw Error("cannot write " + path.string());
  }
}

}  // namespace kernalyse
