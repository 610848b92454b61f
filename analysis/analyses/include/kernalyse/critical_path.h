// Cross-rank critical path and what-if re-timing (docs/analyses.md, "Critical path").
// Per step, a dependency graph over every rank's GPU work: stream order, launch → kernel through
// the correlation id (the host thread's launch order, shifted by its synchronisations), waits on
// other streams inferred from the timeline, and collectives (one matcher, collectives.h): an
// instance completes on every rank only after every rank arrived. The longest path through the
// measured graph is the critical path; the what-if scenarios re-time the same graph (a forward pass
// in topological order) with changed durations. Returns numbers only (int64 ns);
// critical_path_report() renders them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kernalyse/analysis.h"
#include "kernalyse/collectives.h"
#include "kernalyse/report.h"
#include "kernalyse/store.h"

namespace kernalyse {

// One --what-if scenario.
struct WhatIf {
  enum class Kind { RankMedian, KernelFaster, CommOverlapped };
  Kind kind = Kind::RankMedian;
  int32_t rank = -1;    // RankMedian: the rank whose kernels take the other ranks' median
  std::string regex;    // KernelFaster: kernels whose full name matches (std::regex search)
  double factor = 1.0;  // KernelFaster: F× faster (duration / F)
  std::string text;     // the scenario as given ("rank=2:median")
};
// Parses "rank=R:median", "kernel=REGEX:xF" or "comm=overlapped"; throws Error otherwise.
WhatIf parse_what_if(const std::string& spec);

struct CriticalPathOptions {
  Filter filter;
  bool verbose = false;  // full kernel names in the by-kernel roll-up
  int top = 20;          // rows of the by-kernel / by-range roll-ups per step
  // A kernel that starts within this much after work on another stream of its device ended, and
  // after everything else it depends on, is taken to have waited for it (an event wait that the
  // trace does not record).
  int64_t event_tolerance_ns = 10'000;
  std::vector<WhatIf> what_if;
  size_t max_segments = 5000;  // segments kept per step for JSON/CSV (the totals count all)
  // The whole store's collective matching, when the caller already has it (docs/clocks.md);
  // null: matched here over the selected rows.
  std::shared_ptr<const CollectiveMatch> match;
  // Set: the store is a step slice (critical_sliced.cpp) and only this step is analysed (work
  // outside every step is analysed when it is kNoStep: the caller knows whether the run has
  // steps). `match` then indexes the slice's rows.
  std::optional<int32_t> step;
};

// What a stretch of the path is.
enum class PathKind : uint8_t {
  Compute = 0,       // GPU work other than communication (kernels, copies, memsets)
  CommTransfer = 1,  // a collective after its last arrival (unmatched: the whole kernel)
  CommWait = 2,  // a collective kernel waiting for a later rank (only when nothing else explains)
  Host = 3,      // CPU time of the launching thread (calls, host work, return from a sync)
  LaunchLatency = 4,  // from the launch call's start to the kernel's start, when the launch binds
  Idle = 5,           // the GPU waited although its dependencies were done (unexplained gap)
};
inline constexpr int kPathKinds = 6;
const char* to_string(PathKind k);

struct PathSegment {
  PathKind kind = PathKind::Compute;
  int32_t rank = 0;
  int32_t stream = -1;  // GPU segments; -1 host
  int64_t tid = -1;     // host segments: the thread
  int64_t start_ns = 0, end_ns = 0;
  std::string name;         // kernel (simplified unless verbose) or API name; "" for gaps
  int64_t collective = -1;  // matcher id of the collective, -1 none
};

struct PathShare {
  std::string name;  // kernel or range name ("" for rank rows)
  int32_t rank = -1;
  int64_t ns = 0;
  int64_t count = 0;
};

struct StepPath {
  int32_t step = kNoStep;
  int64_t span_start_ns = 0, span_end_ns = 0;  // the step's GPU work, every rank
  int64_t path_start_ns = 0;                   // where the path starts (within the span)
  int64_t path_ns = 0;                         // path_end - path_start = the sum of its segments
  int64_t slack_ns = 0;  // span_start .. path_start: work there is off the path (has slack)
  int32_t sink_rank = -1;
  int64_t nodes = 0, edges_inferred = 0, collectives = 0, collectives_on_path = 0;
  int64_t by_kind[kPathKinds] = {};
  std::vector<PathShare> by_rank, by_kernel, by_range;
  std::vector<PathSegment> segments;  // in time order, the first max_segments
  int64_t segments_total = 0;
};

struct WhatIfStep {
  std::string scenario;
  int32_t step = kNoStep;
  int64_t measured_step_ns = 0, predicted_step_ns = 0, saved_ns = 0;
};

struct CriticalPathResult {
  std::string method;  // the collective matcher's method
  int64_t event_tolerance_ns = 0;
  std::vector<StepPath> steps;
  std::vector<WhatIfStep> what_if;  // per scenario, per step
  std::vector<std::string> notes;
};

CriticalPathResult critical_path(const Store& s, const CriticalPathOptions& opt);
// The what-if rows in the result's order: per scenario as given, each in step order (a stable
// sort of rows that come in step order).
void order_what_if(std::vector<WhatIfStep>* rows, const std::vector<WhatIf>& given);
// Headline lines, tables (critical_path_steps, _kinds, _ranks, _kernels, _ranges, _segments,
// what_if) and the JSON keys `critical_path`, `what_if`, `what_if_summary` (docs/json.md).
void critical_path_report(const CriticalPathResult& r, Report* out);

}  // namespace kernalyse
