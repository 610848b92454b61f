// parallel_run / parallel_for (kernalyse/parallel.h): threads from one process-wide budget; on a
// small run kept between calls in a pool.
#include "kernalyse/parallel.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

#include "kernalyse/heap.h"

namespace kernalyse {
namespace {

// Threads lent by parallel_run and still working, all calls together. The calling threads are
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

// Where a new thread starts. Linux queues a new thread on its creator's CPU and leaves it to the
// load balancer to move: on the 2-core VM of docs/benchmarks.md a thread created by a busy thread
// first ran 2-3 ms later (60 us when placed on the other core), and a waiting thread woken by a
// busy one often waited as long again. So the k-th thread starts on the k-th core after the
// caller's, taken from the process's affinity mask; `pinned` keeps it there (the pool's threads,
// which wait and are woken), otherwise it may run on any core of the mask once it started.
struct Start {
  std::function<void()> fn;
  bool unpin = false;
  cpu_set_t mask;
};

void* thread_main(void* arg) {
  std::unique_ptr<Start> s(static_cast<Start*>(arg));
  if (s->unpin) pthread_setaffinity_np(pthread_self(), sizeof s->mask, &s->mask);
  s->fn();
  return nullptr;
}

pthread_t start_thread(std::function<void()> fn, size_t k, bool pinned) {
  auto s = std::make_unique<Start>();
  s->fn = std::move(fn);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  CPU_ZERO(&s->mask);
  const int here = sched_getcpu();
  if (here >= 0 && sched_getaffinity(0, sizeof s->mask, &s->mask) == 0 &&
      CPU_ISSET(here, &s->mask)) {
    std::vector<int> others;  // the mask's cores after the caller's, wrapping around
    for (int c = here + 1; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &s->mask)) others.push_back(c);
    for (int c = 0; c < here; ++c)
      if (CPU_ISSET(c, &s->mask)) others.push_back(c);
    if (!others.empty()) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(others[k % others.size()], &one);
      pthread_attr_setaffinity_np(&attr, sizeof one, &one);
      s->unpin = !pinned;
    }
  }
  pthread_t t;
  const int err = pthread_create(&t, &attr, thread_main, s.get());
  pthread_attr_destroy(&attr);
  if (err) throw std::system_error(err, std::generic_category(), "pthread_create");
  s.release();  // thread_main owns it now
  return t;
}

// One parallel_run: its worker, run by the caller and by `pending` pool threads.
struct Job {
  const std::function<void()>* worker;
  std::mutex mutex;
  std::condition_variable done;
  size_t pending = 0;
};

// The threads parallel_run lends after keep_threads_for_small_run, started the first time they are
// needed and kept, waiting, for the next call. Never destroyed: the threads are detached and wait
// at exit; a fork()ed child starts a pool of its own.
class Pool {
 public:
  // Hands `job` to n threads (waiting ones first, then new ones).
  void lend(Job* job, size_t n) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      for (size_t k = 0; k < n; ++k) queue_.push_back(job);
      while (idle_ < queue_.size()) {
        pthread_detach(start_thread([this] { serve(); }, started_++, /*pinned=*/true));
        ++idle_;
      }
    }
    if (n == 1)
      wake_.notify_one();
    else
      wake_.notify_all();
  }

 private:
  void serve() {
    use_huge_heap_for_this_thread();  // heap.h: a kept thread only lives in a small run
    for (;;) {
      Job* job;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return !queue_.empty(); });
        job = queue_.front();
        queue_.pop_front();
        --idle_;
      }
      (*job->worker)();  // guarded: it does not throw
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++idle_;
      }
      std::lock_guard<std::mutex> lock(job->mutex);
      if (--job->pending == 0) job->done.notify_one();
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job*> queue_;
  size_t idle_ = 0;     // threads waiting for a job, or about to
  size_t started_ = 0;  // threads started: the next one's core
};

Pool* g_pool = nullptr;
std::once_flag g_pool_once;
std::atomic<bool> g_keep{false};  // keep_threads_for_small_run

Pool& pool() {
  std::call_once(g_pool_once, [] {
    // The child of a fork() has none of the parent's threads: it starts a pool of its own (the
    // parent's, with its mutex in whatever state the fork found it, is left alone).
    pthread_atfork(nullptr, nullptr, [] { g_pool = new Pool; });
    g_pool = new Pool;
  });
  return *g_pool;
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

void keep_threads_for_small_run() { g_keep = true; }

void parallel_run(size_t threads, const std::function<void()>& worker) {
  if (threads == 0) threads = core_count();
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const std::function<void()> guarded = [&] {
    try {
      worker();
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mutex);
      if (!failure) failure = std::current_exception();
    }
  };
  const size_t extra = threads > 1 ? reserve(threads - 1) : 0;
  if (g_keep) {
    Job job;
    job.worker = &guarded;
    job.pending = extra;
    if (extra) pool().lend(&job, extra);
    guarded();
    if (extra) {
      std::unique_lock<std::mutex> lock(job.mutex);
      job.done.wait(lock, [&] { return job.pending == 0; });
    }
  } else {
    std::vector<pthread_t> started;
    started.reserve(extra);
    for (size_t t = 0; t < extra; ++t) started.push_back(start_thread(guarded, t, false));
    guarded();
    for (pthread_t th : started) pthread_join(th, nullptr);
  }
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
