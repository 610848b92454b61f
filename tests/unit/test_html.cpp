// HTML report data (analysis/html/src/html.cpp): the binned timeline lanes, the GPU memory series
// from a hand-built Counters table (and none without it), the straggler heatmap, and the writer's
// refusals (existing file, unwritable path: no file left).
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "kernalyse/classify.h"
#include "kernalyse/html_report.h"
#include "kernalyse/store_io.h"

namespace fs = std::filesystem;

namespace kernalyse {
namespace {

// Two ranks, one device each: rank r computes [0, 400) µs (rank 1 until 600 µs), then an
// allreduce until 1000 µs; rank 0 therefore waits 200 µs at the allreduce.
Store two_ranks() {
  Store s;
  Classifier cls;
  auto add = [&](int32_t rank, int32_t stream, int64_t st, int64_t en, const std::string& name) {
    auto& a = s.activities;
    a.rank.push_back(rank);
    a.device.push_back(rank);
    a.stream.push_back(stream);
    a.kind.push_back(static_cast<uint8_t>(Kind::Kernel));
    a.category.push_back(static_cast<uint8_t>(cls.classify(Kind::Kernel, name)));
    a.start_ns.push_back(st);
    a.end_ns.push_back(en);
    a.name_id.push_back(s.strings.intern(name));
    a.correlation.push_back(kNoCorrelation);
    a.step.push_back(kNoStep);
  };
  for (int32_t r = 0; r < 2; ++r) {
    int64_t work = r == 0 ? 400'000 : 600'000;
    add(r, 7, 0, work, "gemm");
    add(r, 13, work, 1'000'000, "ncclDevKernel_AllReduce_Sum_f32_RING_LL(x)");
    RankInfo ri;
    ri.rank = r;
    ri.devices = std::to_string(r);
    ri.host = "h";
    s.ranks.push_back(ri);
  }
  sort_activities(s);
  return s;
}

TEST(Html, TimelineLanesAreBusyFractionsPerBin) {
  HtmlOptions o;
  o.timeline_bins = 10;  // 100 µs bins over [0, 1000) µs
  auto d = html_report_data(two_ranks(), o);
  const auto& t = d["timeline"];
  ASSERT_FALSE(t.is_null());
  EXPECT_EQ(t["bins"], 10);
  EXPECT_EQ(t["bin_ns"], 100'000);
  EXPECT_EQ(t["ranks"], nlohmann::json::array({0, 1}));
  // Rank 0: compute in bins 0-3, communication in 4-9, never idle.
  for (int b = 0; b < 10; ++b) {
    EXPECT_EQ(t["compute"][0][b], b < 4 ? 1000 : 0) << b;
    EXPECT_EQ(t["comm"][0][b], b < 4 ? 0 : 1000) << b;
    EXPECT_EQ(t["idle"][0][b], 0) << b;
  }
  EXPECT_EQ(d["memory"].size(), 0u);  // no counters in this store
  EXPECT_FALSE(d["emulated"].get<bool>());
  // Heatmap: one collective, rank 0 waited 200 µs, rank 1 (the last) none.
  const auto& h = d["stragglers"];
  ASSERT_EQ(h["cols"].size(), 1u);
  EXPECT_EQ(h["cols"][0]["last"], 1);
  EXPECT_EQ(h["cells"][0], nlohmann::json::array({0, 0, 200'000}));
  EXPECT_EQ(h["cells"][1], nlohmann::json::array({0, 1, 0}));
  EXPECT_EQ(d["ranks"], 2);
  EXPECT_EQ(d["devices"], 2);
}

TEST(Html, MemorySeriesFromCountersAndWindow) {
  Store s = two_ranks();
  auto& c = s.counters;
  auto sample = [&](int32_t rank, int64_t ts, int64_t v, const char* name = kCounterGpuMemory) {
    c.rank.push_back(rank);
    c.device.push_back(rank);
    c.name_id.push_back(s.strings.intern(name));
    c.ts_ns.push_back(ts);
    c.value.push_back(v);
  };
  sample(0, 0, 100);
  sample(0, 250'000, 300);
  sample(0, 700'000, 200);
  sample(0, 700'000, 99, kCounterPower);  // another counter: not in the memory chart
  sample(1, 10'000, 50);
  HtmlOptions o;
  auto d = html_report_data(s, o);
  ASSERT_EQ(d["power"].size(), 1u);  // the power sample is its own chart
  EXPECT_EQ(d["power"][0]["points"], nlohmann::json::parse("[[700000,99]]"));
  ASSERT_EQ(d["memory"].size(), 2u);
  EXPECT_EQ(d["memory"][0]["name"], "rank 0 GPU 0");
  EXPECT_EQ(d["memory"][0]["points"], nlohmann::json::parse("[[0,100],[250000,300],[700000,200]]"));
  // --from 300 µs --to 800 µs: the value entering the window, then the samples inside it.
  o.from_ns = 300'000;
  o.to_ns = 800'000;
  o.analysis.filter.rank = 0;
  d = html_report_data(s, o);
  ASSERT_EQ(d["memory"].size(), 1u);
  EXPECT_EQ(d["memory"][0]["points"], nlohmann::json::parse("[[300000,300],[700000,200]]"));
  EXPECT_EQ(d["timeline"]["t0_ns"], 300'000);
}

TEST(Html, WriterRefusesExistingAndLeavesNothingOnError) {
  fs::path dir = fs::temp_directory_path() / ("kernalyse-html-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Store s = two_ranks();
  fs::path f = dir / "r.html";
  HtmlStats st = write_html_report(s, f.string(), {});
  EXPECT_EQ(st.bytes, static_cast<int64_t>(fs::file_size(f)));
  EXPECT_THROW(write_html_report(s, f.string(), {}), Error);
  HtmlOptions force;
  force.force = true;
  EXPECT_NO_THROW(write_html_report(s, f.string(), force));
  fs::path bad = dir / "missing-dir" / "r.html";
  try {
    write_html_report(s, bad.string(), {});
    ADD_FAILURE() << "no error for an unwritable path";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot create " + bad.string()), std::string::npos)
        << e.what();
  }
  size_t n = 0;
  for (auto& e : fs::directory_iterator(dir)) ++n, (void)e;
  EXPECT_EQ(n, 1u);  // r.html only: no temporary files
  fs::remove_all(dir);
}

// Names from the data (title, host) cannot end the page's script or inject markup: the data
// island escapes '<' and the HTML escapes its text.
TEST(Html, NamesCannotBreakOutOfThePage) {
  fs::path dir = fs::temp_directory_path() / ("kernalyse-html-esc-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Store s = two_ranks();
  const std::string evil = "evil</script><script>alert(1)</script><!--<blink>";
  s.ranks[0].host = evil;
  HtmlOptions o;
  o.title = evil;
  fs::path f = dir / "r.html";
  write_html_report(s, f.string(), o);
  std::ifstream in(f);
  std::string page((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  size_t scripts = 0, closes = 0;
  for (size_t p = 0; (p = page.find("<script", p)) != std::string::npos; ++p) ++scripts;
  for (size_t p = 0; (p = page.find("</script>", p)) != std::string::npos; ++p) ++closes;
  EXPECT_EQ(scripts, 4u);  // error hook, data, library, report script
  EXPECT_EQ(closes, 4u);
  EXPECT_EQ(page.find("<blink>"), std::string::npos);
  EXPECT_NE(page.find("evil&lt;/script&gt;"), std::string::npos);  // header and table, escaped
  EXPECT_NE(page.find("evil\\u003c/script>"), std::string::npos);  // the data island
  fs::remove_all(dir);
}

}  // namespace
}  // namespace kernalyse
