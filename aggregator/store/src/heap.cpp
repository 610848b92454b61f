#include "kernalyse/heap.h"

#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>

namespace kernalyse {
namespace {
char* g_main_heap_lo = nullptr;  // where the main heap began when use_huge_heap_for_small_run ran
}  // namespace

void use_one_arena() { mallopt(M_ARENA_MAX, 1); }

void use_huge_heap_for_small_run() {
  // Blocks below 32 MB (glibc's largest threshold) come from the heap, freed memory stays in it
  // for the next allocation, and the heap grows in steps of 64 MB: the one range advised below.
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, 64 << 20);
  auto* lo = static_cast<char*>(sbrk(0));
  g_main_heap_lo = lo;
  void* block = std::malloc(16 << 20);
  // Kept: a malloc/free pair whose block is never used may otherwise be removed by the compiler.
  asm volatile("" : : "r"(block) : "memory");
  auto* hi = static_cast<char*>(sbrk(0));
  if (block && hi > lo) prefer_huge_pages(lo, static_cast<size_t>(hi - lo));
  std::free(block);
}

void use_huge_heap_for_this_thread() {
  if (!g_main_heap_lo) return;  // not a small run
  // glibc's heap for a thread's own arena: 64 MB (HEAP_MAX_SIZE on 64-bit), aligned to its size,
  // readable and writable whole from its start since M_TOP_PAD covers it (above).
  constexpr uintptr_t kHeap = uintptr_t{64} << 20;
  void* p = std::malloc(64);
  asm volatile("" : : "r"(p) : "memory");
  auto* c = static_cast<char*>(p);
  const bool main_heap = c >= g_main_heap_lo && c < static_cast<char*>(sbrk(0));
  if (p && !main_heap)
    madvise(reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(p) & ~(kHeap - 1)), kHeap,
            MADV_HUGEPAGE);
  std::free(p);
}

}  // namespace kernalyse
