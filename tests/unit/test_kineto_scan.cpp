// The Kineto cursor's string scan (issue 28: the first 32 bytes inline, then one SSE2 pass, 16
// bytes at a time, for a string's closing quote or a backslash): names of every length around
// those blocks, with an escape at every position, at every alignment, in memory and across the
// file reader's refills, decode to the same text as a plain reading of the JSON rules would.
// And its numbers: those read inline give what the general rules give.
#include <gtest/gtest.h>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "kernalyse/checked.h"
#include "kernalyse/error.h"
#include "kernalyse/kineto.h"

using namespace kernalyse;

namespace {

struct Escape {
  const char* json;     // as written in the trace
  const char* decoded;  // what the store must hold
};
const Escape kEscapes[] = {
    {R"(\")", "\""}, {R"(\\)", "\\"}, {R"(\n)", "\n"}, {R"(\u00e9)", "\xc3\xa9"}};

// One kernel event named `name` (JSON text), after `pad` spaces (shifts its alignment).
std::string kernel(const std::string& name, size_t pad, int64_t ts) {
  return std::string(pad, ' ') + R"({"ph": "X", "cat": "kernel", "name": ")" + name +
         R"(", "pid": 0, "tid": 7, "ts": )" + std::to_string(ts) +
         R"(, "dur": 1, "args": {"device": 0, "stream": 7}})";
}

std::string trace(const std::vector<std::string>& events) {
  std::string out = R"({"distributedInfo": {"rank": 0}, "traceEvents": [)";
  for (size_t i = 0; i < events.size(); ++i) out += (i ? "," : "") + events[i];
  return out + "]}";
}

std::vector<std::string> names_of(const Store& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.activities.size(); ++i)
    out.push_back(s.strings.at(s.activities.name_id[i]));
  return out;
}

}  // namespace

TEST(KinetoScan, EveryLengthEscapeAndAlignment) {
  std::vector<std::string> events, want;
  int64_t ts = 1;
  for (size_t len = 0; len <= 40; ++len) {
    for (size_t pad = 0; pad < 16; pad += 5) {
      events.push_back(kernel(std::string(len, 'a'), pad, ts++));  // no escape at all
      want.push_back(std::string(len, 'a'));
      for (const Escape& e : kEscapes) {
        for (size_t at = 0; at <= len; ++at) {
          std::string plain(len, 'a');
          events.push_back(kernel(plain.substr(0, at) + e.json + plain.substr(at), pad, ts++));
          want.push_back(plain.substr(0, at) + e.decoded + plain.substr(at));
        }
      }
    }
  }
  const std::string json = trace(events);
  ImportStats st;
  Store s = import_kineto_string(json, "scan.json", {}, &st);
  EXPECT_EQ(st.malformed, 0);
  EXPECT_EQ(names_of(s), want);  // activities sorted by start: ts follows the list

  // The same from a file larger than the reader's 4 MiB buffer: strings cut by every refill.
  std::vector<std::string> many;
  for (size_t copies = (size_t{9} << 20) / json.size() + 1; copies; --copies)
    many.insert(many.end(), events.begin(), events.end());
  auto path = std::filesystem::temp_directory_path() / "kernalyse_scan_test.json";
  {
    std::ofstream f(path, std::ios::binary);
    f << trace(many);
  }
  ASSERT_GT(std::filesystem::file_size(path), uintmax_t{8} << 20);
  ImportStats fst;
  Store big = import_kineto_file(path.string(), {}, &fst);
  std::filesystem::remove(path);
  EXPECT_EQ(fst.malformed, 0);
  ASSERT_EQ(big.activities.size(), many.size());
  // Every name of the big file is one of the wanted names, each as often as it was written.
  std::vector<std::string> got = names_of(big);
  std::vector<std::string> expect;
  for (size_t k = 0; k < many.size() / events.size(); ++k)
    expect.insert(expect.end(), want.begin(), want.end());
  std::sort(got.begin(), got.end());
  std::sort(expect.begin(), expect.end());
  EXPECT_EQ(got, expect);
}

TEST(KinetoScan, UnterminatedStringAtTheEndIsTruncationNotAnEscapeError) {
  // A string cut by the end of the input, with an invalid escape before the cut: the input is
  // truncated (the quote never comes), as before the one-pass scan.
  const std::string json = R"({"distributedInfo": {"rank": 0}, "traceEvents": [{"name": "ab\q)";
  auto path = std::filesystem::temp_directory_path() / "kernalyse_scan_trunc.json";
  {
    std::ofstream f(path, std::ios::binary);
    f << json;
  }
  try {
    import_kineto_file(path.string(), {}, nullptr);
    ADD_FAILURE() << "a truncated file imported";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("truncated JSON"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
}

// The numbers read inline (issue 28: plain integers, microseconds with up to three decimals)
// and those left to the general path (more digits, exponents, '+', the end of the input near)
// give what the general rules give: parse_us_to_ns for times, an integer or an integral time
// for ids. Each text is tried first in the trace, then again as the last event of the input,
// where the inline path has no room and hands over.
TEST(KinetoScan, NumbersReadInlineAsTheGeneralRulesDo) {
  const std::vector<std::string> times = {"0",
                                          "1",
                                          "7",
                                          "-3",
                                          "-0",
                                          "12.5",
                                          "12.50",
                                          "12.500",
                                          "12.5004",
                                          "12.5005",
                                          "12.9995",
                                          "0.001",
                                          "5.",
                                          "00.5",
                                          "007",
                                          "+5",
                                          "1e3",
                                          "1.5E2",
                                          "-2.25",
                                          "99999.999",
                                          "123456789012345",
                                          "1234567890123456",
                                          "123456789012.345",
                                          "1.0000",
                                          "0.0005",
                                          "-0.0015",
                                          "3.14159e2",
                                          "100000000000000.999",
                                          "4611686018427386",
                                          "4611686018427388",
                                          "9000000000000000",
                                          "9000000000000001",
                                          "9223372036854770",
                                          "12345678901234567"};
  const std::vector<std::string> ids = {
      "7",   "-1",  "0",   "007", "123456789012345678",  "1234567890123456789",
      "7.0", "7.5", "1e2", "-0",  "12345678901234567890"};
  std::vector<std::string> events;
  struct Want {
    std::string name;
    bool ok;
    int64_t start;
    int64_t corr;
  };
  std::vector<Want> want;
  auto add = [&](const std::string& t, const std::string& id, size_t k) {
    std::string name = "n";
    name += std::to_string(k);
    events.push_back(
        R"({"ph": "X", "cat": "kernel", "name": ")" + name + R"(", "pid": 0, "tid": 7, "ts": )" +
        t + R"(, "dur": 1, "args": {"device": 0, "stream": 7, "correlation": )" + id + "}}");
    int64_t ns = 0, corr = kNoCorrelation;
    // JSON has no '+': not a number; the event's end must lie in the supported range.
    bool ok =
        t[0] != '+' && parse_us_to_ns(t, &ns) && time_in_range(ns) && time_in_range(ns + 1000);
    int64_t v = 0;
    auto [p, ec] = std::from_chars(id.data(), id.data() + id.size(), v);
    int64_t idns = 0;
    if (ec == std::errc() && p == id.data() + id.size())
      corr = v;
    else if (parse_us_to_ns(id, &idns) && idns % 1000 == 0)
      corr = idns / 1000;
    want.push_back(Want{name, ok, ns, corr});
  };
  size_t k = 0;
  for (const std::string& t : times) add(t, ids[k % ids.size()], k), ++k;
  for (const std::string& id : ids) add(times[k % times.size()], id, k), ++k;
  for (size_t last = 0; last < times.size() + ids.size(); ++last) {
    std::vector<std::string> one = events;
    std::vector<Want> w = want;
    // The event `last` moved to the end of the input: its numbers lie within 24 bytes of it.
    one.push_back(one[last]);
    one.erase(one.begin() + static_cast<std::ptrdiff_t>(last));
    ImportStats st;
    Store s = import_kineto_string(trace(one), "numbers.json", {}, &st);
    size_t bad = 0;
    for (const Want& x : w) {
      bad += !x.ok;
      auto it = std::find_if(s.activities.name_id.begin(), s.activities.name_id.end(),
                             [&](uint32_t n) { return s.strings.at(n) == x.name; });
      if (!x.ok) {
        EXPECT_TRUE(it == s.activities.name_id.end()) << x.name;
        continue;
      }
      ASSERT_TRUE(it != s.activities.name_id.end()) << x.name << " (last " << last << ")";
      size_t i = static_cast<size_t>(it - s.activities.name_id.begin());
      EXPECT_EQ(s.activities.start_ns[i], x.start) << x.name << " (last " << last << ")";
      EXPECT_EQ(s.activities.end_ns[i] - s.activities.start_ns[i], 1000) << x.name;
      EXPECT_EQ(s.activities.correlation[i], x.corr) << x.name << " (last " << last << ")";
    }
    EXPECT_EQ(st.malformed, static_cast<int64_t>(bad)) << "last " << last;
  }
}
