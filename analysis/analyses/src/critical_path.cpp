// Cross-rank critical path and what-if re-timing (docs/analyses.md, "Critical path").
//
// Per step, every rank's GPU work (kernels, copies, memsets) is a node. A node starts after all of:
// its stream predecessor, its launch call (joined through the correlation id), work on another
// stream of its device it is inferred to have waited for, and, for a collective kernel, it ends
// only after every rank arrived: end = max(own start, last arrival) + transfer. Host threads are
// not nodes: their calls keep their measured times shifted by what their synchronisations gained
// or lost (a sync returns when the work it waits for has ended). Each node keeps the measured gap
// between its latest dependency and its start (lambda), so a re-time with unchanged durations
// reproduces the measured times exactly; a changed duration moves everything after it.
//
// All passes run over one merged order (per-stream runs by start, collective completions at the
// last arrival, sync returns at their end), which is topological for a consistent trace; an edge
// that points backwards in it (clock trouble) reads the measured time of its source instead.
#include "kernalyse/critical_path.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <map>
#include <mutex>
#include <regex>
#include <tuple>
#include <unordered_map>

#include "kernalyse/classify.h"
#include "kernalyse/error.h"
#include "kernalyse/parallel.h"
#include "kernalyse/timeline.h"

namespace kernalyse {

const char* to_string(PathKind k) {
  switch (k) {
    case PathKind::Compute:
      return "compute";
    case PathKind::CommTransfer:
      return "comm_transfer";
    case PathKind::CommWait:
      return "comm_wait";
    case PathKind::Host:
      return "host";
    case PathKind::LaunchLatency:
      return "launch_latency";
    case PathKind::Idle:
      return "idle";
  }
  return "?";
}

WhatIf parse_what_if(const std::string& spec) {
  WhatIf w;
  w.text = spec;
  auto bad = [&] {
    return Error("--what-if " + spec +
                 ": expected rank=R:median, kernel=REGEX:xF (F > 0) or comm=overlapped");
  };
  if (spec == "comm=overlapped") {
    w.kind = WhatIf::Kind::CommOverlapped;
    return w;
  }
  if (spec.rfind("rank=", 0) == 0) {
    const size_t colon = spec.find(':');
    if (colon == std::string::npos || spec.substr(colon + 1) != "median") throw bad();
    const std::string r = spec.substr(5, colon - 5);
    if (r.empty() || r.size() > 9 || r.find_first_not_of("0123456789") != std::string::npos)
      throw bad();
    w.kind = WhatIf::Kind::RankMedian;
    w.rank = std::stoi(r);
    return w;
  }
  if (spec.rfind("kernel=", 0) == 0) {
    const size_t x = spec.rfind(":x");
    if (x == std::string::npos || x <= 7) throw bad();
    const std::string f = spec.substr(x + 2);
    char* end = nullptr;
    const double v = std::strtod(f.c_str(), &end);
    if (f.empty() || !end || *end || !(v > 0) || !std::isfinite(v)) throw bad();
    w.kind = WhatIf::Kind::KernelFaster;
    w.regex = spec.substr(7, x - 7);
    w.factor = v;
    try {
      std::regex check(w.regex);
    } catch (const std::regex_error& e) {
      throw Error("--what-if " + spec + ": invalid regex: " + e.what());
    }
    return w;
  }
  throw bad();
}

namespace {

constexpr int64_t kUnset = INT64_MIN;

// The dependency that set a node's start in the measured trace.
enum Bind : uint8_t {
  kSource = 0,       // nothing in the step: a fixed start
  kStream = 1,       // the previous work on its stream ended
  kStreamStart = 2,  // the previous work on its stream overlaps it: anchored at that one's start
  kExternal = 3,     // the previous work on its stream belongs to another step (fixed)
  kLaunch = 4,       // its launch call
  kEvent = 5,        // inferred: work on another stream of its device
};

int64_t median_of(std::vector<int64_t>& v) {  // reorders v; v not empty
  const size_t m = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m), v.end());
  const int64_t hi = v[m];
  if (v.size() % 2) return hi;
  const int64_t lo = *std::max_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(m));
  return lo + (hi - lo) / 2;
}

// An item of the merged order: time, class (0 work, 1 collective completion, 2 sync return), id.
struct OrderKey {
  int64_t t;
  uint32_t cls, item;
  bool operator<(const OrderKey& o) const {
    return t != o.t ? t < o.t : cls != o.cls ? cls < o.cls : item < o.item;
  }
};

struct SyncCall {
  uint32_t lrow = 0;
  int32_t thread = 0;
  int32_t prev = -1;             // previous sync of the thread in this step
  std::vector<int32_t> awaited;  // nodes: per stream the last work launched before the call
  int32_t bind = -1;             // the awaited node it waited for (latest end), -1: did not wait
  int64_t lambda = 0;            // end - max(start, awaited ends): the return from the call
};

struct CollInstance {
  int64_t id = -1;
  std::vector<int32_t> nodes;  // arrivals in this step
  int64_t ext_max = kUnset;    // arrivals outside the step (fixed)
  int64_t c = 0;               // measured last arrival
  int32_t bind = -1;           // node of the last arrival, -1 when it is outside the step
};

// Everything the analysis needs across steps.
struct Shared {
  const Store& s;
  const CriticalPathOptions& opt;
  detail::LaunchRows launch_rows;
  detail::RangeFinder ranges;
  std::vector<int64_t> coll_of_row;  // matcher id per activity row, -1
  const CollectiveMatch* match = nullptr;
  const Collective& collective(int64_t id) const {
    const size_t i = static_cast<size_t>(id), n = match->matched.size();
    return i < n ? match->matched[i] : match->p2p[i - n];
  }
  std::unordered_map<uint32_t, int32_t> sync_stream;  // launch row → stream of its Sync record
  std::map<int32_t, std::vector<uint32_t>> syncs_by_step;  // launch rows of sync calls
  std::map<uint32_t, std::string> names;                   // name id → display name
  std::vector<std::vector<uint8_t>> regex_hits;            // per scenario, per name id

  Shared(const Store& st, const CriticalPathOptions& o)
      : s(st), opt(o), launch_rows(st.launches), ranges(st.annotations) {}

  std::mutex names_mutex;  // steps run in parallel; map nodes stay put, so references stay valid
  const std::string& name(uint32_t id) {
    std::lock_guard<std::mutex> lock(names_mutex);
    auto it = names.find(id);
    if (it != names.end()) return it->second;
    return names[id] = opt.verbose ? s.strings.at(id) : simplify_kernel_name(s.strings.at(id));
  }
};

class StepGraph {
 public:
  // One graph object serves every step: its arrays keep their capacity from step to step (a big
  // store's steps have ~1 M nodes each; fresh arrays per step cost page faults, not work).
  StepGraph(Shared& sh, std::vector<int32_t>& node_of_row)
      : sh_(sh), s_(sh.s), a_(sh.s.activities), l_(sh.s.launches), node_of_row_(node_of_row) {}
  ~StepGraph() { unload(); }
  void load(int32_t step, std::vector<uint32_t>&& rows, const std::vector<int64_t>* colls) {
    unload();
    step_ = step;
    row_ = std::move(rows);
    runs_.clear(), groups_.clear(), group_of_run_.clear(), colls_.clear(), syncs_.clear();
    threads_.clear(), thread_syncs_.clear(), order_.clear();
    inferred_ = 0;
    build(colls);
  }
  void unload() {
    for (uint32_t r : row_) node_of_row_[r] = -1;
    row_.clear();
  }
  StepGraph(const StepGraph&) = delete;
  StepGraph& operator=(const StepGraph&) = delete;

  void measured_pass();
  StepPath walk();
  // A stretch of the path, without strings (millions of them on a big store).
  struct Raw {
    int64_t start, end, tid;
    int32_t node;   // GPU node, -1 host
    uint32_t lrow;  // host: the call's launch row
    PathKind kind;
  };
  // The path's roll-ups by kind, rank, kernel and range, and the first segments with names.
  void summarise(const std::vector<Raw>& segs, StepPath* p);
  // Re-times the graph with scenario w; returns the predicted span (last end - first start).
  int64_t retime(const WhatIf* w, size_t scenario);
  int64_t span() const { return span_end_ - span_start_; }

 private:
  int64_t s(int32_t v) const { return a_.start_ns[row_[static_cast<size_t>(v)]]; }
  int64_t e(int32_t v) const { return a_.end_ns[row_[static_cast<size_t>(v)]]; }
  bool is_comm(int32_t v) const {
    const uint32_t r = row_[static_cast<size_t>(v)];
    return (a_.kind[r] == static_cast<uint8_t>(Kind::Kernel) ||
            a_.kind[r] == static_cast<uint8_t>(Kind::Memcpy)) &&  // copy-engine collectives
           a_.category[r] == static_cast<uint8_t>(Category::Communication);
  }
  int64_t launch_start(int32_t v) const {
    const int32_t h = launch_[static_cast<size_t>(v)];
    return h >= 0 ? l_.start_ns[static_cast<size_t>(h)] : s(v);
  }
  void build(const std::vector<int64_t>* colls);
  void build_syncs();
  void build_order();
  std::vector<int64_t> durations(const WhatIf* w, size_t scenario);

  Shared& sh_;
  const Store& s_;
  const Activities& a_;
  const LaunchCalls& l_;
  int32_t step_ = kNoStep;
  std::vector<uint32_t> row_;
  std::vector<int32_t>& node_of_row_;
  // per node
  std::vector<int32_t> spred_, launch_, epred_, coll_, nsync_;
  std::vector<int64_t> ext_, lambda_, tail_;
  std::vector<uint8_t> bind_;
  // per stream run [begin, end) of nodes, and its (rank, device) group
  std::vector<std::pair<int32_t, int32_t>> runs_;
  std::vector<int32_t> run_of_;  // per node
  std::vector<std::vector<int32_t>> groups_;
  std::vector<int32_t> group_of_run_;
  std::vector<int64_t> pm_end_;  // prefix max of ends within the run
  std::vector<int32_t> pm_arg_;
  std::vector<CollInstance> colls_;
  std::vector<SyncCall> syncs_;
  std::vector<std::pair<int32_t, int64_t>> threads_;  // (rank, tid) of thread index
  std::vector<std::vector<int32_t>> thread_syncs_;    // per thread, by start
  std::vector<uint32_t> order_;  // nodes [0, N), collectives N + k, syncs N + K + j
  std::vector<OrderKey> keys_;   // build_order's merge buffer, kept across steps
  int64_t span_start_ = 0, span_end_ = 0, inferred_ = 0;
};

void StepGraph::build(const std::vector<int64_t>* colls) {
  const size_t n = row_.size();
  for (size_t v = 0; v < n; ++v) node_of_row_[row_[v]] = static_cast<int32_t>(v);
  spred_.assign(n, -1), launch_.assign(n, -1), epred_.assign(n, -1), coll_.assign(n, -1);
  nsync_.assign(n, -1), ext_.assign(n, kUnset), lambda_.assign(n, 0), tail_.resize(n);
  bind_.assign(n, kSource), run_of_.resize(n), pm_end_.resize(n), pm_arg_.resize(n);
  span_start_ = INT64_MAX, span_end_ = INT64_MIN;
  std::map<std::pair<int32_t, int32_t>, int32_t> group_ids;
  for (size_t v = 0; v < n; ++v) {
    const uint32_t r = row_[v];
    const int64_t sv = a_.start_ns[r], ev = a_.end_ns[r];
    span_start_ = std::min(span_start_, sv), span_end_ = std::max(span_end_, ev);
    tail_[v] = ev - sv;
    // The previous work on the stream: the store keeps each stream's rows together, by start.
    for (uint32_t p = r, hops = 0; p > 0 && hops < 8; ++hops) {
      --p;
      if (a_.rank[p] != a_.rank[r] || a_.device[p] != a_.device[r] || a_.stream[p] != a_.stream[r])
        break;
      if (!is_gpu_work(static_cast<Kind>(a_.kind[p])) || a_.end_ns[p] < a_.start_ns[p]) continue;
      if (node_of_row_[p] >= 0)
        spred_[v] = node_of_row_[p];
      else
        ext_[v] = std::min(a_.end_ns[p], sv);
      break;
    }
    // A new run when the stream changes.
    if (v == 0 || a_.rank[r] != a_.rank[row_[v - 1]] || a_.device[r] != a_.device[row_[v - 1]] ||
        a_.stream[r] != a_.stream[row_[v - 1]]) {
      auto [it, fresh] =
          group_ids.try_emplace({a_.rank[r], a_.device[r]}, static_cast<int32_t>(groups_.size()));
      if (fresh) groups_.emplace_back();
      groups_[static_cast<size_t>(it->second)].push_back(static_cast<int32_t>(runs_.size()));
      group_of_run_.push_back(it->second);
      runs_.push_back({static_cast<int32_t>(v), static_cast<int32_t>(v)});
    }
    runs_.back().second = static_cast<int32_t>(v) + 1;
    run_of_[v] = static_cast<int32_t>(runs_.size()) - 1;
    const int32_t b = runs_.back().first;
    if (static_cast<int32_t>(v) == b || ev > pm_end_[v - 1])
      pm_end_[v] = ev, pm_arg_[v] = static_cast<int32_t>(v);
    else
      pm_end_[v] = pm_end_[v - 1], pm_arg_[v] = pm_arg_[v - 1];
    if (a_.correlation.size() == a_.size()) {
      const int64_t h = sh_.launch_rows.find(a_.rank[r], a_.correlation[r]);
      // A kernel cannot start before its launch; one that does says the clocks disagree.
      if (h >= 0 && l_.start_ns[static_cast<size_t>(h)] <= sv) launch_[v] = static_cast<int32_t>(h);
    }
  }
  // Collectives with an arrival in this step.
  if (colls) {
    for (int64_t id : *colls) {
      const Collective& c = sh_.collective(id);
      CollInstance ci;
      ci.id = c.id;
      ci.c = kUnset;
      for (const auto& x : c.arrivals) {
        const int32_t v = node_of_row_[x.row];
        const int64_t sv = a_.start_ns[x.row];
        if (v >= 0 && coll_[static_cast<size_t>(v)] < 0) {
          coll_[static_cast<size_t>(v)] = static_cast<int32_t>(colls_.size());
          ci.nodes.push_back(v);
          if (sv > ci.c) ci.c = sv, ci.bind = v;
        } else {
          ci.ext_max = std::max(ci.ext_max, sv);
        }
      }
      if (ci.nodes.empty()) continue;
      if (ci.ext_max > ci.c) ci.c = ci.ext_max, ci.bind = -1;
      for (int32_t v : ci.nodes)  // transfer: after the last arrival (within the kernel)
        tail_[static_cast<size_t>(v)] = e(v) - std::clamp(ci.c, s(v), e(v));
      colls_.push_back(std::move(ci));
    }
  }
  build_syncs();
  build_order();
}

void StepGraph::build_syncs() {
  auto thread_of = [&](int32_t rank, int64_t tid) {
    for (size_t i = 0; i < threads_.size(); ++i)
      if (threads_[i].first == rank && threads_[i].second == tid) return static_cast<int32_t>(i);
    threads_.push_back({rank, tid});
    thread_syncs_.emplace_back();
    return static_cast<int32_t>(threads_.size()) - 1;
  };
  const bool have_threads = l_.tid.size() == l_.size() && l_.end_ns.size() == l_.size();
  auto it = sh_.syncs_by_step.find(step_);
  if (have_threads && it != sh_.syncs_by_step.end()) {
    for (uint32_t h : it->second) {
      if (sh_.opt.filter.rank && l_.rank[h] != *sh_.opt.filter.rank) continue;
      SyncCall sc;
      sc.lrow = h;
      sc.thread = thread_of(l_.rank[h], l_.tid[h]);
      const int64_t hs = l_.start_ns[h], he = std::max(l_.end_ns[h], hs);
      auto ss = sh_.sync_stream.find(h);
      const int32_t only = ss == sh_.sync_stream.end() ? -1 : ss->second;
      int64_t latest = kUnset;
      for (size_t q = 0; q < runs_.size(); ++q) {
        const auto [b, en] = runs_[q];
        const uint32_t r0 = row_[static_cast<size_t>(b)];
        if (a_.rank[r0] != l_.rank[h] || (only >= 0 && a_.stream[r0] != only)) continue;
        // The last work on the stream launched before the call (launches go in stream order).
        int32_t lo = b, hi = en;
        while (lo < hi) {
          const int32_t mid = lo + (hi - lo) / 2;
          if (launch_start(mid) < hs)
            lo = mid + 1;
          else
            hi = mid;
        }
        if (lo == b) continue;
        const int32_t u = lo - 1;
        if (e(u) > he) continue;  // still running when the call returned: not waited for
        sc.awaited.push_back(u);
        if (e(u) > latest) latest = e(u), sc.bind = u;
      }
      if (latest < hs) sc.bind = -1;  // everything had ended: the call did not wait
      sc.lambda = he - std::max(hs, latest);
      syncs_.push_back(std::move(sc));
    }
  }
  // Per thread its syncs by start; per node the last sync of its launch thread before the launch.
  for (size_t j = 0; j < syncs_.size(); ++j)
    thread_syncs_[static_cast<size_t>(syncs_[j].thread)].push_back(static_cast<int32_t>(j));
  for (auto& ts : thread_syncs_) {
    std::stable_sort(ts.begin(), ts.end(), [&](int32_t x, int32_t y) {
      return l_.start_ns[syncs_[static_cast<size_t>(x)].lrow] <
             l_.start_ns[syncs_[static_cast<size_t>(y)].lrow];
    });
    for (size_t i = 1; i < ts.size(); ++i) syncs_[static_cast<size_t>(ts[i])].prev = ts[i - 1];
  }
  if (syncs_.empty()) return;
  for (size_t v = 0; v < row_.size(); ++v) {
    const int32_t h = launch_[v];
    if (h < 0) continue;
    int32_t th = -1;
    for (size_t i = 0; i < threads_.size(); ++i)
      if (threads_[i].first == l_.rank[static_cast<size_t>(h)] &&
          threads_[i].second == l_.tid[static_cast<size_t>(h)])
        th = static_cast<int32_t>(i);
    if (th < 0) continue;
    const auto& ts = thread_syncs_[static_cast<size_t>(th)];
    const int64_t t = l_.start_ns[static_cast<size_t>(h)];
    auto p = std::partition_point(ts.begin(), ts.end(), [&](int32_t j) {
      return l_.start_ns[syncs_[static_cast<size_t>(j)].lrow] < t;
    });
    if (p != ts.begin()) nsync_[v] = *(p - 1);
  }
}

void StepGraph::build_order() {
  // The stream runs (each already by start, one after the other in node order) merged pairwise,
  // bottom-up, then the collective completions (at their last arrival) and the sync returns (at
  // their end) merged in. Ties: work, then completions, then syncs; within a class by index.
  using Key = OrderKey;
  const uint32_t n = static_cast<uint32_t>(row_.size());
  const uint32_t k = static_cast<uint32_t>(colls_.size());
  keys_.resize(n);
  for (uint32_t v = 0; v < n; ++v) keys_[v] = {s(static_cast<int32_t>(v)), 0, v};
  std::vector<size_t> bounds;
  for (const auto& r : runs_) bounds.push_back(static_cast<size_t>(r.first));
  bounds.push_back(n);
  while (bounds.size() > 2) {
    std::vector<size_t> next;
    for (size_t i = 0; i + 2 < bounds.size(); i += 2) {
      std::inplace_merge(keys_.begin() + static_cast<std::ptrdiff_t>(bounds[i]),
                         keys_.begin() + static_cast<std::ptrdiff_t>(bounds[i + 1]),
                         keys_.begin() + static_cast<std::ptrdiff_t>(bounds[i + 2]));
      next.push_back(bounds[i]);
    }
    if (bounds.size() % 2 == 0) next.push_back(bounds[bounds.size() - 2]);
    next.push_back(n);
    bounds = std::move(next);
  }
  std::vector<Key> events;
  for (uint32_t i = 0; i < k; ++i) events.push_back({colls_[i].c, 1, n + i});
  for (uint32_t j = 0; j < syncs_.size(); ++j) {
    const uint32_t h = syncs_[j].lrow;
    events.push_back({std::max(l_.end_ns[h], l_.start_ns[h]), 2, n + k + j});
  }
  std::sort(events.begin(), events.end());
  order_.resize(n + events.size());
  size_t out = 0, e = 0;
  for (uint32_t v = 0; v < n; ++v) {
    while (e < events.size() && events[e] < keys_[v]) order_[out++] = events[e++].item;
    order_[out++] = keys_[v].item;
  }
  while (e < events.size()) order_[out++] = events[e++].item;
}

void StepGraph::measured_pass() {
  const uint32_t n = static_cast<uint32_t>(row_.size());
  const int64_t tol = sh_.opt.event_tolerance_ns;
  std::vector<int32_t> ptr(runs_.size());
  for (size_t q = 0; q < runs_.size(); ++q) ptr[q] = runs_[q].first;
  for (uint32_t item : order_) {
    if (item >= n) continue;
    const int32_t v = static_cast<int32_t>(item);
    const size_t vi = item;
    const int64_t sv = s(v);
    int64_t best = kUnset;
    uint8_t bind = kSource;
    if (spred_[vi] >= 0) {
      const int32_t p = spred_[vi];
      if (e(p) <= sv)
        best = e(p), bind = kStream;
      else
        best = s(p), bind = kStreamStart;
    } else if (ext_[vi] != kUnset) {
      best = ext_[vi], bind = kExternal;
    }
    if (launch_[vi] >= 0) {
      const int64_t t = l_.start_ns[static_cast<size_t>(launch_[vi])];
      if (best == kUnset || t > best) best = t, bind = kLaunch;
    }
    // Work on another stream of the device that ended shortly before: an event wait.
    const int32_t run = run_of_[vi];
    int32_t cand = -1;
    for (int32_t q : groups_[static_cast<size_t>(group_of_run_[static_cast<size_t>(run)])]) {
      if (q == run) continue;
      int32_t& p = ptr[static_cast<size_t>(q)];
      const int32_t en = runs_[static_cast<size_t>(q)].second;
      while (p < en && pm_end_[static_cast<size_t>(p)] <= sv) ++p;
      if (p == runs_[static_cast<size_t>(q)].first) continue;
      const int32_t u = pm_arg_[static_cast<size_t>(p - 1)];
      if (cand < 0 || e(u) > e(cand)) cand = u;
    }
    if (cand >= 0 && (best == kUnset || e(cand) > best) && sv - e(cand) <= tol) {
      epred_[vi] = cand, best = e(cand), bind = kEvent;
      ++inferred_;
    }
    bind_[vi] = bind;
    lambda_[vi] = best == kUnset ? 0 : sv - best;
  }
}

std::vector<int64_t> StepGraph::durations(const WhatIf* w, size_t scenario) {
  std::vector<int64_t> d = tail_;  // collectives: their transfer
  if (!w) return d;
  const size_t n = row_.size();
  switch (w->kind) {
    case WhatIf::Kind::CommOverlapped:
      for (size_t v = 0; v < n; ++v)
        if (is_comm(static_cast<int32_t>(v))) d[v] = 0;
      break;
    case WhatIf::Kind::KernelFaster: {
      const auto& hit = sh_.regex_hits[scenario];
      for (size_t v = 0; v < n; ++v)
        if (hit[a_.name_id[row_[v]]]) d[v] = std::llround(static_cast<double>(d[v]) / w->factor);
      break;
    }
    case WhatIf::Kind::RankMedian: {
      // The k-th run of a kernel name on rank R takes the median of the other ranks' k-th run.
      struct Key {
        uint32_t name;
        uint32_t occ;
        int32_t rank;
        int32_t node;
      };
      std::vector<Key> keys;
      keys.reserve(n);
      std::unordered_map<uint64_t, uint32_t> occ;
      for (size_t v = 0; v < n; ++v) {
        if (is_comm(static_cast<int32_t>(v))) continue;
        const uint32_t r = row_[v];
        const uint64_t k =
            (static_cast<uint64_t>(static_cast<uint32_t>(a_.rank[r])) << 32) | a_.name_id[r];
        keys.push_back({a_.name_id[r], occ[k]++, a_.rank[r], static_cast<int32_t>(v)});
      }
      std::sort(keys.begin(), keys.end(), [](const Key& x, const Key& y) {
        return x.name != y.name ? x.name < y.name : x.occ < y.occ;
      });
      std::vector<int64_t> others;
      for (size_t b = 0; b < keys.size();) {
        size_t en = b;
        int32_t mine = -1;
        others.clear();
        while (en < keys.size() && keys[en].name == keys[b].name && keys[en].occ == keys[b].occ) {
          if (keys[en].rank == w->rank)
            mine = keys[en].node;
          else
            others.push_back(e(keys[en].node) - s(keys[en].node));
          ++en;
        }
        if (mine >= 0 && !others.empty()) d[static_cast<size_t>(mine)] = median_of(others);
        b = en;
      }
      break;
    }
  }
  return d;
}

int64_t StepGraph::retime(const WhatIf* w, size_t scenario) {
  const std::vector<int64_t> d = durations(w, scenario);
  const uint32_t n = static_cast<uint32_t>(row_.size());
  const uint32_t k = static_cast<uint32_t>(colls_.size());
  std::vector<int64_t> sp(n, kUnset), ep(n, kUnset), delta(syncs_.size(), 0);
  auto end_of = [&](int32_t u) {
    return ep[static_cast<size_t>(u)] != kUnset ? ep[static_cast<size_t>(u)] : e(u);
  };
  auto start_of = [&](int32_t u) {
    return sp[static_cast<size_t>(u)] != kUnset ? sp[static_cast<size_t>(u)] : s(u);
  };
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  for (uint32_t item : order_) {
    if (item < n) {
      const size_t v = item;
      int64_t t = kUnset;
      const int32_t p = spred_[v];
      if (p >= 0) t = e(p) > s(static_cast<int32_t>(v)) ? start_of(p) : end_of(p);
      if (ext_[v] != kUnset) t = std::max(t, ext_[v]);
      if (launch_[v] >= 0)
        t = std::max(t, l_.start_ns[static_cast<size_t>(launch_[v])] +
                            (nsync_[v] >= 0 ? delta[static_cast<size_t>(nsync_[v])] : 0));
      if (epred_[v] >= 0) t = std::max(t, end_of(epred_[v]));
      const int64_t st = t == kUnset ? s(static_cast<int32_t>(v)) : t + lambda_[v];
      sp[v] = st;
      if (coll_[v] < 0) ep[v] = st + d[v];
    } else if (item < n + k) {
      const CollInstance& c = colls_[item - n];
      int64_t last = c.ext_max;
      for (int32_t v : c.nodes) last = std::max(last, start_of(v));
      for (int32_t v : c.nodes)
        ep[static_cast<size_t>(v)] = std::max(start_of(v), last) + d[static_cast<size_t>(v)];
    } else {
      const size_t j = item - n - k;
      const SyncCall& sc = syncs_[j];
      int64_t t = l_.start_ns[sc.lrow] + (sc.prev >= 0 ? delta[static_cast<size_t>(sc.prev)] : 0);
      for (int32_t u : sc.awaited) t = std::max(t, end_of(u));
      delta[j] = t + sc.lambda - std::max(l_.end_ns[sc.lrow], l_.start_ns[sc.lrow]);
    }
  }
  for (uint32_t v = 0; v < n; ++v) {
    lo = std::min(lo, start_of(static_cast<int32_t>(v)));
    hi = std::max(hi, end_of(static_cast<int32_t>(v)));
  }
  return n ? hi - lo : 0;
}

StepPath StepGraph::walk() {
  StepPath p;
  p.step = step_;
  p.nodes = static_cast<int64_t>(row_.size());
  p.edges_inferred = inferred_;
  p.collectives = static_cast<int64_t>(colls_.size());
  if (row_.empty()) return p;
  p.span_start_ns = span_start_, p.span_end_ns = span_end_;
  int32_t sink = 0;
  for (int32_t v = 1; v < static_cast<int32_t>(row_.size()); ++v)
    if (e(v) > e(sink)) sink = v;
  p.sink_rank = a_.rank[row_[static_cast<size_t>(sink)]];
  // Raw segments (no strings: millions of them on a big store); names only for those kept.
  std::vector<Raw> segs;
  int64_t t = e(sink);
  // The path is reported within the step's GPU span: what precedes the step's first GPU work
  // (host time before it, the previous step) is not part of the step.
  auto add = [&](PathKind kind, int32_t node, int64_t from, int64_t tid, uint32_t lrow) {
    from = std::max(std::min(from, t), span_start_);
    if (t > from) segs.push_back({from, t, tid, node, lrow, kind});
    t = from;
  };
  int32_t v = sink;
  bool at_end = true;
  std::vector<uint8_t> coll_seen(colls_.size(), 0);
  const size_t guard = 4 * (row_.size() + syncs_.size()) + 16;
  for (size_t it = 0; it < guard && t > span_start_; ++it) {
    const size_t vi = static_cast<size_t>(v);
    if (at_end) {
      if (coll_[vi] >= 0) {
        const CollInstance& c = colls_[static_cast<size_t>(coll_[vi])];
        coll_seen[static_cast<size_t>(coll_[vi])] = 1;
        add(PathKind::CommTransfer, v, std::clamp(c.c, s(v), e(v)), -1, 0);
        if (c.c > s(v) && c.bind >= 0 && c.bind != v) {  // it waited: the last arrival sets it
          v = c.bind, t = std::min(t, s(v));
        } else if (c.c > s(v)) {
          add(PathKind::CommWait, v, s(v), -1, 0);  // the last arrival lies outside the step
        }
      } else {
        add(is_comm(v) ? PathKind::CommTransfer : PathKind::Compute, v, s(v), -1, 0);
      }
      at_end = false;
      continue;
    }
    const int32_t pv = spred_[vi];
    if (bind_[vi] == kStream) {
      add(PathKind::Idle, v, e(pv), -1, 0);
      v = pv, at_end = true;
    } else if (bind_[vi] == kStreamStart) {
      add(PathKind::Compute, pv, s(pv), -1, 0);  // the overlapping predecessor ran meanwhile
      v = pv, at_end = false;
    } else if (bind_[vi] == kEvent) {
      add(PathKind::Idle, v, e(epred_[vi]), -1, 0);
      v = epred_[vi], at_end = true;
    } else if (bind_[vi] == kLaunch) {
      const uint32_t h = static_cast<uint32_t>(launch_[vi]);
      add(PathKind::LaunchLatency, v, l_.start_ns[h], -1, 0);
      // The launching thread, back to the sync that held it (or the step's first call on it).
      const int64_t tid = l_.tid.size() == l_.size() ? l_.tid[h] : -1;
      int32_t j = nsync_[vi];
      bool to_gpu = false;
      while (j >= 0) {
        const SyncCall& sc = syncs_[static_cast<size_t>(j)];
        const int64_t je = std::max(l_.end_ns[sc.lrow], l_.start_ns[sc.lrow]);
        add(PathKind::Host, -1, je, tid, h);
        if (sc.bind >= 0) {
          add(PathKind::Host, -1, e(sc.bind), tid, sc.lrow);  // returning from the sync
          v = sc.bind, at_end = true, to_gpu = true;
          break;
        }
        add(PathKind::Host, -1, l_.start_ns[sc.lrow], tid, sc.lrow);
        j = sc.prev;
      }
      if (to_gpu) continue;
      // No sync before it in the step: host time back to the thread's first call of the step.
      int64_t first = t;
      if (l_.tid.size() == l_.size())
        for (int64_t q = static_cast<int64_t>(h);
             q >= 0 && l_.rank[static_cast<size_t>(q)] == l_.rank[h]; --q) {
          const size_t qi = static_cast<size_t>(q);
          if (l_.step[qi] != step_ && l_.step[qi] != kNoStep) break;  // an earlier step's calls
          if (l_.tid[qi] == tid && l_.step[qi] == step_) first = std::min(first, l_.start_ns[qi]);
        }
      add(PathKind::Host, -1, first, tid, h);
      break;
    } else {
      break;  // a source, or the stream's previous work lies in another step
    }
  }
  std::reverse(segs.begin(), segs.end());
  p.path_start_ns = t;
  p.path_ns = e(sink) - t;
  p.slack_ns = t - span_start_;
  for (uint8_t x : coll_seen) p.collectives_on_path += x;
  summarise(segs, &p);
  return p;
}

void StepGraph::summarise(const std::vector<Raw>& segs, StepPath* p) {
  std::map<int32_t, PathShare> ranks;
  std::unordered_map<uint32_t, PathShare> kernel_ids, range_ids;  // by name id
  const bool threads = l_.tid.size() == l_.size();
  auto rank_of = [&](const Raw& g) {
    return g.node >= 0 ? a_.rank[row_[static_cast<size_t>(g.node)]] : l_.rank[g.lrow];
  };
  for (const Raw& g : segs) {
    const int64_t len = g.end - g.start;
    p->by_kind[static_cast<int>(g.kind)] += len;
    const int32_t rank = rank_of(g);
    PathShare& rk = ranks[rank];
    rk.rank = rank, rk.ns += len, ++rk.count;
    if (g.node < 0) continue;
    const size_t node = static_cast<size_t>(g.node);
    if (g.kind == PathKind::Compute || g.kind == PathKind::CommTransfer ||
        g.kind == PathKind::CommWait) {
      PathShare& k = kernel_ids[a_.name_id[row_[node]]];
      k.ns += len, ++k.count;
    }
    const int32_t h = launch_[node];
    if (h >= 0 && threads) {
      const size_t hi = static_cast<size_t>(h);
      const uint32_t id = sh_.ranges.find(l_.rank[hi], l_.tid[hi], l_.start_ns[hi]);
      if (id) {
        PathShare& r = range_ids[id];
        r.ns += len, ++r.count;
      }
    }
  }
  // Display names can merge several ids (simplified kernel names).
  std::map<std::string, PathShare> kernels, ranges;
  for (const auto& [id, x] : kernel_ids) {
    PathShare& k = kernels[sh_.name(id)];
    k.name = sh_.name(id), k.ns += x.ns, k.count += x.count;
  }
  for (const auto& [id, x] : range_ids) {
    PathShare& r = ranges[s_.strings.at(id)];
    r.name = s_.strings.at(id), r.ns += x.ns, r.count += x.count;
  }
  auto by_ns = [](const PathShare& x, const PathShare& y) {
    return x.ns != y.ns ? x.ns > y.ns : x.name < y.name;
  };
  for (auto& [r, x] : ranks) p->by_rank.push_back(x);
  for (auto& [nm, x] : kernels) p->by_kernel.push_back(x);
  for (auto& [nm, x] : ranges) p->by_range.push_back(x);
  std::sort(p->by_kernel.begin(), p->by_kernel.end(), by_ns);
  std::sort(p->by_range.begin(), p->by_range.end(), by_ns);
  const size_t top = sh_.opt.top > 0 ? static_cast<size_t>(sh_.opt.top) : SIZE_MAX;
  if (p->by_kernel.size() > top) p->by_kernel.resize(top);
  if (p->by_range.size() > top) p->by_range.resize(top);
  p->segments_total = static_cast<int64_t>(segs.size());
  const size_t keep = std::min(segs.size(), sh_.opt.max_segments);
  p->segments.reserve(keep);
  for (size_t i = 0; i < keep; ++i) {
    const Raw& r = segs[i];
    PathSegment g;
    g.kind = r.kind;
    g.start_ns = r.start, g.end_ns = r.end;
    g.rank = rank_of(r);
    if (r.node >= 0) {
      const size_t node = static_cast<size_t>(r.node);
      g.stream = a_.stream[row_[node]];
      if (r.kind == PathKind::Compute || r.kind == PathKind::CommTransfer ||
          r.kind == PathKind::CommWait)
        g.name = sh_.name(a_.name_id[row_[node]]);
      if (coll_[node] >= 0) g.collective = colls_[static_cast<size_t>(coll_[node])].id;
    } else {
      g.tid = r.tid;
      if (l_.name_id.size() == l_.size()) g.name = s_.strings.at(l_.name_id[r.lrow]);
    }
    p->segments.push_back(std::move(g));
  }
}

// Host synchronisations, by the step of the call: calls whose name contains "Synchronize", and
// calls that a Sync record (Kineto's cuda_sync) joins, with that record's stream.
void find_syncs(const Store& s, Shared* shp) {
  Shared& sh = *shp;
  const Activities& a = s.activities;
  const LaunchCalls& l = s.launches;
  std::vector<uint8_t> sync_name(s.strings.size(), 0);
  for (uint32_t id = 1; id < s.strings.size(); ++id)
    sync_name[id] = s.strings.at(id).find("Synchronize") != std::string::npos;
  if (a.correlation.size() == a.size())
    for (size_t i = 0; i < a.size(); ++i)
      if (a.kind[i] == static_cast<uint8_t>(Kind::Sync)) {
        const int64_t h = sh.launch_rows.find(a.rank[i], a.correlation[i]);
        if (h >= 0) sh.sync_stream[static_cast<uint32_t>(h)] = a.stream[i];
      }
  for (const auto& [h, stream] : sh.sync_stream) sync_name[l.name_id[h]] |= 2;
  for (size_t i = 0; i < l.size(); ++i) {
    const uint8_t f = sync_name[l.name_id[i]];
    if ((f & 1) || ((f & 2) && sh.sync_stream.count(static_cast<uint32_t>(i))))
      sh.syncs_by_step[l.step[i]].push_back(static_cast<uint32_t>(i));
  }
}

}  // namespace

CriticalPathResult critical_path(const Store& s, const CriticalPathOptions& opt) {
  CriticalPathResult res;
  res.event_tolerance_ns = opt.event_tolerance_ns;
  const Activities& a = s.activities;
  const LaunchCalls& l = s.launches;
  Shared sh(s, opt);
  std::map<int32_t, std::vector<uint32_t>> by_step;
  std::vector<uint32_t> selected = select_activities(s, opt.filter);
  {
    int32_t cur = INT32_MIN;
    std::vector<uint32_t>* bucket = nullptr;
    for (uint32_t i : selected) {
      if (!is_gpu_work(static_cast<Kind>(a.kind[i])) || a.end_ns[i] < a.start_ns[i]) continue;
      if (a.step[i] != cur) cur = a.step[i], bucket = &by_step[cur];
      bucket->push_back(i);
    }
  }
  // Steps: the ProfilerStep#N of the work; work outside every step is analysed on its own only
  // when there are no steps at all.
  if (opt.step) {
    for (auto it = by_step.begin(); it != by_step.end();)
      it = it->first == *opt.step ? std::next(it) : by_step.erase(it);
  } else if (by_step.size() > 1) {
    by_step.erase(kNoStep);
  }

  // Collectives: the one matcher, over the selection (or the caller's whole-store matching).
  CollectiveMatch own;
  if (opt.match && ((!opt.filter.rank && !opt.filter.step) || opt.step)) {
    sh.match = opt.match.get();
  } else {
    own = match_collectives(s, selected);
    sh.match = &own;
  }
  res.method = sh.match->method;
  std::map<int32_t, std::vector<int64_t>> colls_by_step;
  auto by_step_of = [&](const Collective& c) {
    int32_t last_step = INT32_MIN;
    for (const auto& x : c.arrivals)
      if (a.step[x.row] != last_step) {
        last_step = a.step[x.row];
        auto& v = colls_by_step[last_step];
        if (v.empty() || v.back() != c.id) v.push_back(c.id);
      }
  };
  for (const Collective& c : sh.match->matched) by_step_of(c);
  for (const Collective& c : sh.match->p2p) by_step_of(c);
  selected.clear();
  selected.shrink_to_fit();

  // Host synchronisations: calls whose name says so, or that a Sync record joins.
  if (l.name_id.size() == l.size() && l.tid.size() == l.size()) {
    find_syncs(s, &sh);
  } else if (!l.size()) {
    res.notes.push_back("no launch calls: host launch delays and synchronisations not modelled");
  }
  for (const WhatIf& w : opt.what_if) {
    std::vector<uint8_t> hits;
    if (w.kind == WhatIf::Kind::KernelFaster) {
      const std::regex re(w.regex);
      hits.assign(s.strings.size(), 0);
      for (uint32_t id = 1; id < s.strings.size(); ++id)
        hits[id] = std::regex_search(s.strings.at(id), re);
    }
    sh.regex_hits.push_back(std::move(hits));
    if (w.kind == WhatIf::Kind::RankMedian &&
        std::none_of(s.ranks.begin(), s.ranks.end(),
                     [&](const RankInfo& r) { return r.rank == w.rank; }))
      throw Error("--what-if " + w.text + ": the store has no rank " + std::to_string(w.rank));
  }

  // Steps are independent: a few threads, each with its own graph and row → node map (memory:
  // ~4 B per activity row plus the graph of one step per thread, hence the cap).
  std::vector<std::pair<int32_t, std::vector<uint32_t>>> steps;
  for (auto& [step, rows] : by_step) steps.emplace_back(step, std::move(rows));
  by_step.clear();
  std::vector<StepPath> paths(steps.size());
  std::vector<std::vector<WhatIfStep>> whatifs(steps.size());
  std::atomic<size_t> next{0};
  auto worker = [&] {
    try {
      std::vector<int32_t> node_of_row(a.size(), -1);
      StepGraph g(sh, node_of_row);
      for (size_t i; (i = next++) < steps.size();) {
        const int32_t step = steps[i].first;
        auto c = colls_by_step.find(step);
        g.load(step, std::move(steps[i].second), c == colls_by_step.end() ? nullptr : &c->second);
        g.measured_pass();
        paths[i] = g.walk();
        const int64_t measured = g.span();
        for (size_t w = 0; w < opt.what_if.size(); ++w) {
          WhatIfStep x;
          x.scenario = opt.what_if[w].text;
          x.step = step;
          x.measured_step_ns = measured;
          x.predicted_step_ns = g.retime(&opt.what_if[w], w);
          x.saved_ns = measured - x.predicted_step_ns;
          whatifs[i].push_back(std::move(x));
        }
      }
    } catch (...) {
      next = steps.size();  // the others stop too; parallel_run rethrows the first failure
      throw;
    }
  };
  parallel_run(std::min<size_t>(steps.size(), 4), worker);
  res.steps = std::move(paths);
  for (auto& w : whatifs)
    for (auto& x : w) res.what_if.push_back(std::move(x));
  order_what_if(&res.what_if, opt.what_if);
  return res;
}

void order_what_if(std::vector<WhatIfStep>* rows, const std::vector<WhatIf>& given) {
  auto idx = [&](const std::string& t) {
    for (size_t i = 0; i < given.size(); ++i)
      if (given[i].text == t) return i;
    return given.size();
  };
  std::stable_sort(rows->begin(), rows->end(), [&](const WhatIfStep& x, const WhatIfStep& y) {
    return idx(x.scenario) < idx(y.scenario);
  });
}

}  // namespace kernalyse
