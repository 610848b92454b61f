// How the C library's heap serves this process: set once, before the first thread starts.
#pragma once

#include <sys/mman.h>

#include <cstddef>
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

// The same for the calling thread's own arena (parallel_run's kept threads, before their first
// task): glibc makes a thread's heap readable and writable whole at once with the M_TOP_PAD set
// above, so its huge pages are there for the asking. Nothing outside a small run, or when the
// thread shares the main arena.
void use_huge_heap_for_this_thread();

// Asks for transparent huge pages on the whole 2 MB pages inside [p, p + bytes) of fresh,
// untouched memory (THP in "madvise" mode, Debian's default): its first touch then faults 512
// times less. Below 8 MB nothing is asked (a huge page filled for a few kB). Advisory: where
// the kernel refuses, nothing changes. Inline: the HDF5 module uses it too (h5_module.h).
inline void prefer_huge_pages(void* p, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;  // x86-64's and aarch64's (4 kB pages) THP size
  if (bytes < 4 * kHuge) return;
  const uintptr_t b = (reinterpret_cast<uintptr_t>(p) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t e = (reinterpret_cast<uintptr_t>(p) + bytes) & ~(kHuge - 1);
  if (e > b) madvise(reinterpret_cast<void*>(b), e - b, MADV_HUGEPAGE);
}

}  // namespace kernalyse
