// parallel_for / parallel_run (kernalyse/parallel.h): every item once, the lowest failing item's
// exception, and nested calls held to the core count.
#include <gtest/gtest.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
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

// How many cores the calling thread may run on.
int cores_of_this_thread() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : -1;
}

// A fresh thread starts on one core (the next after its creator's: Linux would queue it behind
// its busy creator) and then may run on every core of the process again.
TEST(Parallel, FreshThreadsMayRunAnywhereOnceStarted) {
  const int all = cores_of_this_thread();
  ASSERT_GE(all, 1);
  const auto caller = std::this_thread::get_id();
  std::mutex m;
  std::vector<int> others;
  parallel_run(2, [&] {
    if (std::this_thread::get_id() == caller) return;
    std::lock_guard<std::mutex> lock(m);
    others.push_back(cores_of_this_thread());
  });
  if (core_count() < 2) {
    EXPECT_TRUE(others.empty());  // no thread to lend on one core
    return;
  }
  ASSERT_EQ(others.size(), 1U);
  EXPECT_EQ(others[0], all);
}

// A small run's kept threads (keep_threads_for_small_run): the same contract, many calls in a row
// (each reusing the kept threads), nesting, failures; the threads really are reused (a call after
// the first starts no new one) and the work runs on more than the calling thread where it can.
// Last in this file: the setting is process-wide.
TEST(Parallel, KeptThreadsKeepTheContract) {
  keep_threads_for_small_run();
  std::vector<long> seen_first;  // kernel thread ids: not reused as pthread ids are
  std::mutex m;
  for (int call = 0; call < 200; ++call) {
    std::vector<std::atomic<int>> hits(64);
    parallel_for(hits.size(), [&](size_t i) {
      ++hits[i];
      if (call == 0 || call == 199) {  // long enough items that every thread takes some
        std::this_thread::sleep_for(std::chrono::microseconds(200));
        std::lock_guard<std::mutex> lock(m);
        seen_first.push_back(syscall(SYS_gettid));
      }
    });
    for (const auto& h : hits) ASSERT_EQ(h.load(), 1) << "call " << call;
  }
  std::sort(seen_first.begin(), seen_first.end());
  seen_first.erase(std::unique(seen_first.begin(), seen_first.end()), seen_first.end());
  // The calling thread and, with two cores or more, the one kept thread: the same in call 0 and
  // call 199 (fresh threads per call would make three ids).
  EXPECT_LE(seen_first.size(), std::min<size_t>(core_count(), 2));
  // A kept thread stays on its one core: woken by a busy thread it would otherwise often wait on
  // the waker's core (2-4 ms on the 2-core VM).
  if (core_count() >= 2) {
    const auto caller = std::this_thread::get_id();
    std::vector<int> kept;
    parallel_run(2, [&] {
      if (std::this_thread::get_id() == caller) return;
      std::lock_guard<std::mutex> lock(m);
      kept.push_back(cores_of_this_thread());
    });
    ASSERT_EQ(kept.size(), 1U);
    EXPECT_EQ(kept[0], 1);
  }
  try {
    parallel_for(20, [&](size_t i) {
      if (i == 11 || i == 5) throw std::runtime_error("item " + std::to_string(i));
    });
    FAIL() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "item 5");
  }
  std::atomic<int> active{0}, peak{0}, inner{0};
  parallel_for(8, [&](size_t) {
    parallel_for(8, [&](size_t) {
      const int now = ++active;
      int p = peak.load();
      while (now > p && !peak.compare_exchange_weak(p, now)) {
      }
      ++inner;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      --active;
    });
  });
  EXPECT_EQ(inner.load(), 64);
  EXPECT_LE(static_cast<size_t>(peak.load()), core_count());
}

}  // namespace
}  // namespace kernalyse
