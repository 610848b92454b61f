// The one way analyses and tools run work on several threads. A process-wide budget keeps the
// threads at the core count even when parallel work nests (an analysis that runs its ranks in
// parallel, itself one task of kernalyse-merge's pool): an inner call gets only the cores the
// outer ones left, down to its own calling thread.
#pragma once

#include <cstddef>
#include <functional>

namespace kernalyse {

// The core count: the cores of this process's affinity mask (taskset, mpirun --bind-to core),
// else std::thread::hardware_concurrency; at least 1.
size_t core_count();

// Runs worker() on up to `threads` threads (0: the core count), the calling thread included, as
// many as the budget allows; each worker pulls its own items (say from an atomic counter). Returns
// after all have finished; the first exception a worker threw is rethrown then. Each lent thread
// starts on its own core of the process's mask, the next ones after the caller's (Linux queues a
// new thread behind its busy creator until the balancer moves it: 2-3 ms on a 2-core VM, most of
// a small run), and may then run on any; a kept thread (below) stays on its core.
void parallel_run(size_t threads, const std::function<void()>& worker);

// Runs f(i) for every i in [0, n), handing the items out in order (reverse: the last first) to up
// to max_threads threads (0: the core count). Every item runs even when one throws; then the
// exception of the lowest failing item is rethrown.
void parallel_for(size_t n, const std::function<void(size_t)>& f, size_t max_threads = 0,
                  bool reverse = false);

// A small run (heap.h's kSmallRunBytes of input or less), before its first thread: from here on
// the threads parallel_run starts are kept, waiting, for the next call. A run makes a dozen calls,
// and a fresh thread each time cost more than a small run's work in them (its stack, its malloc
// arena and cold caches: the clock inference of the trace_filter pair took 0.45-0.78 ms with a
// fresh thread, 0.17-0.20 ms with a kept one). Not for larger runs: a kept thread keeps its malloc
// arena, whose freed memory the read-ahead threads of the rank-at-a-time paths then cannot reuse
// (test_import_spilled's 8 files: peak RSS 72-75 MB with fresh threads, 64-100 MB with kept ones).
void keep_threads_for_small_run();

}  // namespace kernalyse
