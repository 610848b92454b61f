// The analyses' rank-at-a-time accumulators that need their file's own helpers (not a public
// header): each folds rank slices in rank order and makes the result that the whole-store
// function makes (the registry's SlicedRun forms, analysis/pipeline/src/registry/).
#pragma once

#include <memory>
#include <string>

#include "kernalyse/analysis.h"
#include "kernalyse/crossrank.h"
#include "kernalyse/roofline.h"
#include "kernalyse/store.h"

namespace kernalyse {

// kernel_summary, a rank at a time.
class SummaryFold {
 public:
  explicit SummaryFold(const SummaryOptions& opt);
  void add(const Store& slice);
  // header: attributes, strings and /ranks of the whole store (the scopes name its ranks).
  SummaryResult finish(const Store& header) const;
  std::string save() const;              // under MPI: the state as bytes
  void merge(const std::string& bytes);  // a later process's state

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// gap_analysis, a rank at a time.
class GapFold {
 public:
  explicit GapFold(const GapOptions& opt);
  void add(const Store& slice);
  GapResult finish(const Store& header) const;
  std::string save() const;
  void merge(const std::string& bytes);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// straggler_ledger from the cross-rank rows (kernalyse/sliced.h) and the slices: begin() matches
// the cross-rank rows (or takes opt.match) and bounds the root-cause windows; add() fills the
// windows of the slice's rank; finish() is the ledger.
class StragglerFold {
 public:
  explicit StragglerFold(const CrossRankOptions& opt);
  // kernel_names: the name ids of every slice's kernels (the delaying kernels' groups).
  void begin(const Store& cross, const std::vector<uint8_t>& kernel_names);
  void add(const Store& slice);
  StragglerResult finish(const Store& cross) const;
  std::string save() const;  // the windows of this process's ranks
  void merge(const std::string& bytes);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// roofline_analysis (and its hints), a rank at a time: per (op, shapes, types) and per kernel
// name the rows' totals, each name's FLOPs and bytes per rank (summed in rank order at the end);
// placed, classed and ordered at the end as the whole store's. roofline_analysis is this fold
// over the whole store.
class RooflineFold {
 public:
  explicit RooflineFold(const RooflineOptions& opt);
  void add(const Store& slice);
  // header: the strings and /ranks of the whole store (the device of the ranks with rows).
  RooflineResult finish(const Store& header) const;
  std::string save() const;
  void merge(const std::string& bytes);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace kernalyse
