// The registered analyses (kernalyse/pipeline.h): one file each, one line each in pipeline.cpp's
// registry list. Each descriptor is built once, on first use.
#pragma once

#include "kernalyse/archive.h"
#include "kernalyse/pipeline.h"

namespace kernalyse::registry {

const Analysis& summary();
const Analysis& gaps();
const Analysis& overlap();
const Analysis& breakdown();
const Analysis& idle();
const Analysis& ranges();
const Analysis& energy();
const Analysis& stragglers();
const Analysis& roofline();
const Analysis& hints();
const Analysis& critical_path();
const Analysis& alltoall();

// A SlicedRun from its two steps (and whether its slices need the collective match first).
class FoldRun : public SlicedRun {
 public:
  using Step = std::function<void(const AnalysisContext&)>;
  // begin: null, or the step before the slices (then they come after the match).
  FoldRun(Step add, std::function<std::any(const AnalysisContext&)> finish, Step begin = nullptr)
      : add_(std::move(add)), finish_(std::move(finish)), begin_(std::move(begin)) {}
  void add(const AnalysisContext& slice) override { add_(slice); }
  std::any finish(const AnalysisContext& whole) override { return finish_(whole); }
  bool after_match() const override { return static_cast<bool>(begin_); }
  void begin(const AnalysisContext& whole) override {
    if (begin_) begin_(whole);
  }
  // Under MPI: the state as bytes, and a later process's state merged in.
  FoldRun& spread(std::function<std::string()> save,
                  std::function<void(const std::string&)> merge) {
    save_ = std::move(save), merge_ = std::move(merge);
    return *this;
  }
  std::string save() const override { return save_(); }
  void merge(const std::string& bytes) override { merge_(bytes); }

 private:
  Step add_;
  std::function<std::any(const AnalysisContext&)> finish_;
  Step begin_;
  std::function<std::string()> save_;
  std::function<void(const std::string&)> merge_;
};

// --critical-path a rank at a time (critical_sliced.cpp): each step from its rows alone.
std::unique_ptr<SlicedRun> sliced_critical_path(const AnalysisContext& ctx);

// The top-N cut an analysis uses when --top is not given.
inline int top_or(const AnalysisContext& ctx, int fallback) {
  return ctx.options().top > 0 ? ctx.options().top : fallback;
}

}  // namespace kernalyse::registry
