#include "kernalyse/heap.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

namespace kernalyse {

void use_one_arena() { mallopt(M_ARENA_MAX, 1); }

void use_huge_heap_for_small_run() {
  constexpr uintptr_t kHuge = uintptr_t{2} << 20;  // x86-64's and aarch64's (4 kB pages) THP size
  // Blocks below 32 MB (glibc's largest threshold) come from the heap, freed memory stays in it
  // for the next allocation, and the heap grows in steps of 64 MB: the one range advised below.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, 64 << 20);
  void* lo = sbrk(0);
  void* block = std::malloc(16 << 20);
  // Kept: a malloc/free pair whose block is never used may otherwise be removed by the compiler.
  asm volatile("" : : "r"(block) : "memory");
  void* hi = sbrk(0);
  const uintptr_t a = (reinterpret_cast<uintptr_t>(lo) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t b = reinterpret_cast<uintptr_t>(hi) & ~(kHuge - 1);
  // No huge pages (THP off, another kernel): madvise fails and the heap is glibc's as before.
  if (block && b > a) madvise(reinterpret_cast<void*>(a), b - a, MADV_HUGEPAGE);
  std::free(block);
}

}  // namespace kernalyse
