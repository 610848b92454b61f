// How the C library's heap serves this process: set once, before the first thread starts.
#pragma once

#include <cstdint>

namespace kernalyse {

// One malloc arena for every thread instead of glibc's default (8 per core). For the analyses of
// a store, whose threads allocate rarely (columns, result rows) and whose freed temporaries would
// otherwise stay in each thread's own arena (docs/benchmarks.md: ~100 MB more peak RSS on the
// benchmark store's --all).
void use_one_arena();

// A small run (inputs of at most kSmallRunBytes on disk): the main heap reserved ahead and backed
// by transparent huge pages where the kernel offers them (madvise mode). Such a run is over in
// milliseconds, and much of its CPU time went to faulting in fresh 4 kB pages (1,640 faults
// importing the two 1.7 MB trace_filter traces). glibc has no call for this (its
// glibc.malloc.hugetlb tunable is read from the environment at start-up only), so the heap is
// grown once by a block freed again and the grown range advised. The pool threads keep arenas of
// their own: one shared arena saved more faults but cost more in lock waits (docs/benchmarks.md).
// Costs a few MB of peak RSS (huge pages are filled whole).
constexpr int64_t kSmallRunBytes = int64_t{16} << 20;
void use_huge_heap_for_small_run();

}  // namespace kernalyse
