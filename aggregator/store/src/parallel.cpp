// parallel_run / parallel_for (kernalyse/parallel.h): threads from one process-wide budget.
#include "kernalyse/parallel.h"

#include <sched.h>

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

namespace kernalyse {
namespace {

// Threads started by parallel_run and still running, all calls together. The calling threads are
// not counted: each call runs one worker itself, so nesting never waits for a thread.
std::atomic<size_t> g_started{0};

// Takes up to `want` threads from the budget of core_count() - 1 extra threads.
size_t reserve(size_t want) {
  const size_t cap = core_count() - 1;
  size_t cur = g_started.load();
  for (;;) {
    const size_t can = cur >= cap ? 0 : std::min(want, cap - cur);
    if (can == 0 || g_started.compare_exchange_weak(cur, cur + can)) return can;
  }
}

}  // namespace

size_t core_count() {
  // The cores this process may run on: its affinity mask (mpirun --bind-to core: one per
  // process), else the machine's (hardware_concurrency ignores the mask).
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
    return static_cast<size_t>(CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

void parallel_run(size_t threads, const std::function<void()>& worker) {
  if (threads == 0) threads = core_count();
  std::exception_ptr failure;
  std::mutex failure_mutex;
  auto guarded = [&] {
    try {
      worker();
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };
  const size_t extra = threads > 1 ? reserve(threads - 1) : 0;
  std::vector<std::thread> pool;
  pool.reserve(extra);
  for (size_t t = 0; t < extra; ++t) pool.emplace_back(guarded);
  guarded();
  for (auto& th : pool) th.join();
  g_started -= extra;
  if (failure) std::rethrow_exception(failure);
}

void parallel_for(size_t n, const std::function<void(size_t)>& f, size_t max_threads,
                  bool reverse) {
  if (n == 0) return;
  std::vector<std::exception_ptr> failed(n);
  std::atomic<size_t> next{0};
  parallel_run(std::min(n, max_threads == 0 ? core_count() : max_threads), [&] {
    for (size_t k; (k = next++) < n;) {
      const size_t i = reverse ? n - 1 - k : k;
      try {
        f(i);
      } catch (...) {
        failed[i] = std::current_exception();
      }
    }
  });
  for (auto& e : failed)
    if (e) std::rethrow_exception(e);
}

}  // namespace kernalyse
