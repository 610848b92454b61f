// Renderers: aligned text, JSON without NaN, RFC 4180 CSV.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "kernalyse/report.h"
#include "kernalyse/store_io.h"

namespace kernalyse {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

size_t width(const std::string& s) {
  size_t w = 0;
  for (unsigned char c : s) w += (c & 0xC0) != 0x80;
  return w;
}

Report sample() {
  Report r;
  r.headline = {"first note", "second note"};
  Table t;
  t.key = "things";
  t.title = "Things";
  t.columns = {"name", "count", "value_us", "value_ns"};
  t.text_hidden = {false, false, false, true};
  t.precision = 3;
  t.rows.push_back({std::string("alpha"), int64_t{5}, 1.5, int64_t{1500}});
  t.rows.push_back({std::string("b"), int64_t{12345}, 123.4567, int64_t{123457}});
  t.rows.push_back({std::string("gamma"), Cell(), std::nan(""), Cell()});
  r.tables.push_back(t);
  return r;
}

fs::path temp_dir(const std::string& stem) {
  fs::path p = fs::temp_directory_path() / (stem + "." + std::to_string(::getpid()));
  fs::remove_all(p);
  return p;
}

TEST(RenderText, HeadlineTitleAndAlignment) {
  std::ostringstream out;
  render_text(sample(), out);
  const auto ls = lines(out.str());
  ASSERT_GE(ls.size(), 8u);
  EXPECT_EQ(ls[0], "first note");
  EXPECT_EQ(ls[1], "second note");
  EXPECT_EQ(ls[2], "");
  EXPECT_EQ(ls[3], "Things");
  EXPECT_EQ(ls[4], "name   count  value_us");
  EXPECT_EQ(ls[5], "-----  -----  --------");
  EXPECT_EQ(ls[6], "alpha      5     1.500");
  EXPECT_EQ(ls[7], "b      12345   123.457");
  EXPECT_EQ(ls[8], "gamma      -         -");  // null and NaN print as "-"
  // Hidden columns stay out of text.
  EXPECT_EQ(out.str().find("value_ns"), std::string::npos);
  EXPECT_EQ(out.str().find("1500"), std::string::npos);
}

TEST(RenderText, NumbersRightAlignedEveryRowSameWidth) {
  Report r;
  Table t;
  t.key = "k";
  t.title = "T";
  t.columns = {"a", "b"};
  for (int64_t v : {1, 22, 333333}) t.rows.push_back({v, static_cast<double>(v) / 7});
  r.tables.push_back(t);
  std::ostringstream out;
  render_text(r, out);
  const auto ls = lines(out.str());
  ASSERT_EQ(ls.size(), 6u);
  for (size_t i = 2; i < ls.size(); ++i) EXPECT_EQ(ls[i].size(), ls[1].size()) << ls[i];
  EXPECT_EQ(ls[3].substr(0, 6), "     1");
}

TEST(RenderText, TruncatesWithEllipsisAndCountsUtf8AsOneColumn) {
  Report r;
  Table t;
  t.key = "k";
  t.title = "T";
  t.columns = {"name", "n"};
  t.max_text_width = 10;
  t.rows.push_back({std::string("abcdefghijklmnop"), int64_t{1}});
  t.rows.push_back({std::string("µs→x"), int64_t{2}});
  r.tables.push_back(t);
  std::ostringstream out;
  render_text(r, out);
  const auto ls = lines(out.str());
  ASSERT_EQ(ls.size(), 5u);
  EXPECT_EQ(ls[3], "abcdefghi…  1");
  EXPECT_EQ(width(ls[4]), width(ls[3]));
  EXPECT_EQ(ls[4], "µs→x        2");
}

TEST(RenderText, EmptyTableAndTextBlocksAndHiddenTables) {
  Report r;
  Table t;
  t.key = "empty";
  t.title = "Empty";
  t.columns = {"x"};
  r.tables.push_back(t);
  Table h = t;
  h.key = "hidden";
  h.title = "Hidden table";
  h.in_text = false;
  r.tables.push_back(h);
  r.text_blocks.push_back("bars here\n");
  std::ostringstream out;
  render_text(r, out);
  EXPECT_NE(out.str().find("(no rows)"), std::string::npos);
  EXPECT_NE(out.str().find("bars here"), std::string::npos);
  EXPECT_EQ(out.str().find("Hidden table"), std::string::npos);
}

TEST(RenderJson, OneObjectNotesTablesExtrasNoNaN) {
  Report r = sample();
  r.json["extra"] = {
      {"inf", std::numeric_limits<double>::infinity()}, {"nan", std::nan("")}, {"ok", 1.25}};
  Table hidden;
  hidden.key = "not_in_json";
  hidden.in_json = false;
  r.tables.push_back(hidden);
  std::ostringstream out;
  render_json(r, out);
  const std::string s = out.str();
  EXPECT_EQ(s.find("NaN"), std::string::npos);
  EXPECT_EQ(s.find("Infinity"), std::string::npos);
  const auto doc = nlohmann::json::parse(s);
  ASSERT_TRUE(doc.is_object());
  EXPECT_EQ(doc["notes"], (std::vector<std::string>{"first note", "second note"}));
  ASSERT_EQ(doc["things"].size(), 3u);
  EXPECT_EQ(doc["things"][0]["name"], "alpha");
  EXPECT_EQ(doc["things"][0]["count"], 5);
  EXPECT_EQ(doc["things"][0]["value_ns"], 1500);  // hidden in text, present in JSON
  EXPECT_DOUBLE_EQ(doc["things"][1]["value_us"].get<double>(), 123.4567);
  EXPECT_TRUE(doc["things"][2]["count"].is_null());
  EXPECT_TRUE(doc["things"][2]["value_us"].is_null());
  EXPECT_TRUE(doc["extra"]["inf"].is_null());
  EXPECT_TRUE(doc["extra"]["nan"].is_null());
  EXPECT_EQ(doc["extra"]["ok"], 1.25);
  EXPECT_FALSE(doc.contains("not_in_json"));
  // "notes" comes first.
  EXPECT_EQ(s.find("\"notes\""), s.find('"'));
}

// render_json writes each top-level value from its own type; the bytes must be those of one
// ordered_json document dumped with indent 2 (what it built before): a table key set again by
// Report::json keeps its place, deferred keys come last in key order, non-finite numbers are null.
TEST(RenderJson, BytesEqualOneOrderedDocument) {
  Report r = sample();
  r.json["zeta"] = {{"b", 1}, {"a", std::nan("")}};
  r.json["things"] = {{"replaced", true}};  // a table's key: replaced where the table was
  r.json["alpha"] = nlohmann::json::array({1, "x\xff", 2.5});
  r.json_later.push_back([](nlohmann::json& j) { j["later_b"] = {{"y", 2}, {"x", 1}}; });
  r.json_later.push_back([](nlohmann::json& j) { j["later_a"] = nlohmann::json::array(); });
  std::ostringstream out;
  render_json(r, out);
  nlohmann::ordered_json doc = nlohmann::ordered_json::object();
  doc["notes"] = std::vector<std::string>{"first note", "second note"};
  doc["things"] = nullptr;  // its place, as the table set it; then Report::json in key order
  doc["alpha"] = nlohmann::ordered_json(r.json["alpha"]);
  doc["things"] = nlohmann::ordered_json(r.json["things"]);
  doc["zeta"] = nlohmann::ordered_json(r.json["zeta"]);
  doc["later_a"] = nlohmann::ordered_json::array();
  doc["later_b"] = nlohmann::ordered_json(nlohmann::json{{"y", 2}, {"x", 1}});
  doc["zeta"]["a"] = nullptr;
  EXPECT_EQ(out.str(), doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

TEST(RenderJson, InvalidUtf8DoesNotThrow) {
  Report r;
  Table t;
  t.key = "k";
  t.columns = {"name"};
  t.rows.push_back({std::string("bad\xff\xfe")});
  r.tables.push_back(t);
  std::ostringstream out;
  EXPECT_NO_THROW(render_json(r, out));
  EXPECT_TRUE(nlohmann::json::accept(out.str()));
}

TEST(RenderCsv, QuotingAndOneFilePerTable) {
  Report r = sample();
  Table q;
  q.key = "quoted";
  q.columns = {"text", "n"};
  q.rows.push_back({std::string("plain"), int64_t{1}});
  q.rows.push_back({std::string("a,b"), int64_t{2}});
  q.rows.push_back({std::string("say \"hi\""), int64_t{3}});
  q.rows.push_back({std::string("two\nlines"), int64_t{4}});
  q.in_text = false;
  q.in_json = false;  // CSV writes every table regardless
  r.tables.push_back(q);
  const fs::path dir = temp_dir("kernalyse-csv") / "nested" / "dir";
  render_csv(r, dir.string());
  std::ifstream f(dir / "quoted.csv", std::ios::binary);
  const std::string got((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(got, "text,n\nplain,1\n\"a,b\",2\n\"say \"\"hi\"\"\",3\n\"two\nlines\",4\n");
  std::ifstream g(dir / "things.csv", std::ios::binary);
  const std::string things((std::istreambuf_iterator<char>(g)), std::istreambuf_iterator<char>());
  // All columns (hidden ones too), nulls and NaN empty.
  EXPECT_EQ(things,
            "name,count,value_us,value_ns\nalpha,5,1.500,1500\nb,12345,123.457,123457\n"
            "gamma,,,\n");
  fs::remove_all(dir.parent_path().parent_path());
}

TEST(RenderCsv, UnwritableDirectoryThrows) {
  const fs::path base = temp_dir("kernalyse-csv-file");
  fs::create_directories(base);
  const fs::path file = base / "plain_file";
  std::ofstream(file) << "x";
  EXPECT_THROW(render_csv(sample(), (file / "sub").string()), Error);
  EXPECT_THROW(render_csv(sample(), file.string()), Error);
  fs::remove_all(base);
}

}  // namespace
}  // namespace kernalyse
