#include "kernalyse/heap.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

namespace kernalyse {

void use_one_arena() { mallopt(M_ARENA_MAX, 1); }

void use_huge_heap_for_small_run() {
  // Blocks below 32 MB (glibc's largest threshold) come from the heap, freed memory stays in it
  // for the next allocation, and the heap grows in steps of 64 MB: the one range advised below.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, 64 << 20);
  auto* lo = static_cast<char*>(sbrk(0));
  void* block = std::malloc(16 << 20);
  // Kept: a malloc/free pair whose block is never used may otherwise be removed by the compiler.
  asm volatile("" : : "r"(block) : "memory");
  auto* hi = static_cast<char*>(sbrk(0));
  if (block && hi > lo) prefer_huge_pages(lo, static_cast<size_t>(hi - lo));
  std::free(block);
}

}  // namespace kernalyse
