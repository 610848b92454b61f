// The cross-rank rows of a run gathered into one small store: what the collective match, the
// clock inference, the ledger and the overview read, so that a run read a rank at a time
// (sliced.cpp) or imported by several processes (load.cpp) infers and matches on them alone; and
// which slices a process takes.
// Internal to the pipeline.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernalyse/spread.h"
#include "kernalyse/store.h"

namespace kernalyse::detail {

// The cross-rank rows of every slice (or part), gathered in rank order into one store with the
// header: what the collective match, the clock inference, the ledger and the overview read.
//   activities: communication kernels and the rows /nccl describes (and a rank's first GPU row
//     when it has none of them: the match counts the ranks with GPU work);
//   nccl: their rows; annotations: NCCL's network marks (clock evidence, clock_evidence.cpp);
//   counters: the GPU memory and power samples (the overview's peaks).
// Also the name ids of every kernel (the ledger groups the delaying kernels' names).
class CrossRows {
 public:
  // Its header's attributes, strings and /ranks rows, and no rows yet.
  explicit CrossRows(const Store& header);
  // Appends the cross-rank rows of `s` (a slice or part with the header's strings).
  void add(const Store& s);

  Store store;
  std::vector<uint8_t> kernel_names;

 private:
  void activities(const Store& s);

  std::vector<uint8_t> mark;
  std::vector<uint32_t> counter_ids;
};

// The activity rows of `s` (a slice or part) that CrossRows::add keeps, in table order.
std::vector<uint32_t> cross_activity_rows(const Store& s);

// Process p's slices of n under mpirun: [n p / P, n (p + 1) / P) (all of them without one).
std::pair<size_t, size_t> own_slices(size_t n, const Spread* spread);

// Collective: every process's cross-rank rows, in rank order, on every process
// (all_gather_tables), and the kernels' name marks.
void exchange_cross(CrossRows& c, const Spread& spread);

}  // namespace kernalyse::detail
