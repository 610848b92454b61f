// parallel_for / parallel_run (kernalyse/parallel.h): every item once, the lowest failing item's
// exception, and nested calls held to the core count.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "kernalyse/parallel.h"

namespace kernalyse {
namespace {

TEST(Parallel, EveryItemOnce) {
  for (bool reverse : {false, true}) {
    std::vector<std::atomic<int>> hits(1000);
    parallel_for(
        hits.size(), [&](size_t i) { ++hits[i]; }, 0, reverse);
    for (const auto& h : hits) EXPECT_EQ(h.load(), 1);
  }
  parallel_for(0, [](size_t) { FAIL(); });
}

TEST(Parallel, LowestFailingItemIsRethrownAfterAllRan) {
  std::atomic<int> ran{0};
  try {
    parallel_for(20, [&](size_t i) {
      ++ran;
      if (i == 7 || i == 3) throw std::runtime_error("item " + std::to_string(i));
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "item 3");
  }
  EXPECT_EQ(ran.load(), 20);
  EXPECT_THROW(parallel_run(2, [] { throw std::runtime_error("x"); }), std::runtime_error);
}

// An analysis running its ranks in parallel inside a task of the tool's pool: never more bodies
// at once than cores (the old per-call pools ran cores × cores threads).
TEST(Parallel, NestedCallsStayWithinTheCoreCount) {
  std::atomic<int> active{0}, peak{0};
  parallel_for(8, [&](size_t) {
    parallel_for(8, [&](size_t) {
      const int now = ++active;
      int p = peak.load();
      while (now > p && !peak.compare_exchange_weak(p, now)) {
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
      --active;
    });
  });
  EXPECT_GE(peak.load(), 1);
  EXPECT_LE(static_cast<size_t>(peak.load()), core_count());
}

}  // namespace
}  // namespace kernalyse
