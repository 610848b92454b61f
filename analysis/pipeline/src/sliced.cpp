// The analyses run a rank at a time (kernalyse/sliced.h).
#include "kernalyse/sliced.h"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <tuple>

#include "cross_rows.h"
#include "kernalyse/error.h"
#include "kernalyse/parallel.h"
#include "kernalyse/store_archive.h"
#include "kernalyse/store_io.h"

namespace kernalyse {

using detail::CrossRows;
using detail::exchange_cross;

namespace {

// Slices [first, last) in rank order, the next one read on another thread while f runs on this one
// (RankSlices::for_each), with the clocks moved by `inf` when given. `buf`: the two slices'
// stores, whose columns' memory the next pass reuses (fresh memory is the expensive part).
// prefetch false: one store, each slice read before f runs (a slice's memory less, slower).
void for_each_slice(RankSlices& slices, size_t first, size_t last, const ClockInference* inf,
                    Store (&buf)[2], bool prefetch, const std::function<void(const Store&)>& f) {
  auto load = [&](size_t k) {
    Store& s = buf[prefetch ? k % 2 : 0];
    slices.read(k, s);
    if (inf) apply_clock_inference(s, *inf);
  };
  if (!prefetch) {
    for (size_t k = first; k < last; ++k) load(k), f(buf[0]);
    return;
  }
  std::future<void> next;
  if (first < last) next = std::async(std::launch::async, load, first);
  for (size_t k = first; k < last; ++k) {
    next.get();
    if (k + 1 < last) next = std::async(std::launch::async, load, k + 1);
    f(buf[k % 2]);
  }
}

// Whether applying the inference moves any time (not: clocks kept as recorded, or all zero).
bool moves_times(const ClockInference& inf) {
  if (!inf.ok || !inf.kept.empty()) return false;
  return std::any_of(inf.hosts.begin(), inf.hosts.end(),
                     [](const HostClock& h) { return h.offset_ns != 0 || h.drift != 0; });
}

size_t registry_position(const Analysis* a) {
  const auto& all = analyses();
  return static_cast<size_t>(std::find(all.begin(), all.end(), a) - all.begin());
}

}  // namespace

bool whole_store_forced() {
  const char* e = std::getenv("KERNALYSE_WHOLE_STORE");
  return e && *e && std::string(e) != "0";
}

bool sliceable(const std::vector<const Analysis*>& which, const AnalysisOptions& opt) {
  if (opt.filter.rank || opt.filter.step || opt.compat != Compat::Native) return false;
  return !which.empty() &&
         std::all_of(which.begin(), which.end(), [](const Analysis* a) { return a->sliced; });
}

bool sliceable_any_size(const std::vector<const Analysis*>& which, const AnalysisOptions& opt) {
  return sliceable(which, opt) && std::none_of(which.begin(), which.end(), [](const Analysis* a) {
           return a->sliced_when_large;
         });
}

namespace {

// One run of analyse_by_rank: the passes over this process's slices.
struct SlicedPipeline {
  const std::string& file;
  const std::vector<const Analysis*>& which;
  const AnalysisOptions& opt;
  const ColumnSelection& sel;
  const Spread* spread;
  bool page;  // the HTML page's variants of the analyses (AnalysisContext)
  std::unique_ptr<RankSlices> slices;
  std::vector<std::unique_ptr<SlicedRun>> runs;
  Store buf[2];
  size_t first = 0, last = 0;  // this process's slices

  std::vector<std::unique_ptr<SlicedRun>> make_runs(const AnalysisContext& ctx) const {
    std::vector<std::unique_ptr<SlicedRun>> out;
    for (const Analysis* a : which) out.push_back(a->sliced(ctx));
    return out;
  }
  void own_slices() { std::tie(first, last) = detail::own_slices(slices->size(), spread); }
  // Pass 1: the cross-rank rows, and the analyses that need no match (on the recorded clocks:
  // redone in pass 2 if the inference moves them).
  void pass1(CrossRows& cross) {
    for_each_slice(*slices, first, last, nullptr, buf, true, [&](const Store& s) {
      const AnalysisContext sc(s, opt, nullptr, page);
      parallel_for(runs.size() + 1, [&](size_t i) {
        if (i == runs.size())
          cross.add(s);
        else if (!runs[i]->after_match())
          runs[i]->add(sc);
      });
    });
    if (spread && spread->processes > 1) exchange_cross(cross, *spread);
  }
  // Pass 2: the analyses that need the match, and all of them when the clocks moved. Without
  // the latter, the ledger's windows need only the activities and the launches' starts: a
  // second reader with those columns (the first one's whole /nccl goes with it), one slice at a
  // time (the second store's memory goes to the ledger's windows).
  void pass2(const ClockInference* moved) {
    const bool all_columns = std::any_of(runs.begin(), runs.end(), [](const auto& r) {
      return r->after_match() && r->reads_all_columns();
    });
    // Moved clocks rerun every analysis, so each needs its columns again; unless all of them
    // wait for the match (--stragglers alone): then the narrow read serves as well, the
    // inference moving its times (issue 13's cost of --align inferred).
    const bool all_after_match =
        std::all_of(runs.begin(), runs.end(), [](const auto& r) { return r->after_match(); });
    const bool narrow = !all_columns && (!moved || all_after_match);
    if (narrow) {
      ColumnSelection less = sel;
      less.annotations = less.counters = less.ops = less.nccl = false;
      less.activity_step = less.launch_detail = false;
      slices->narrow(less);  // the same slices, the rank columns not scanned again
      buf[1] = Store();
    }
    for_each_slice(*slices, first, last, moved, buf, moved && !narrow, [&](const Store& s) {
      const AnalysisContext sc(s, opt, nullptr, page);
      parallel_for(runs.size(), [&](size_t i) {
        if (moved || runs[i]->after_match()) runs[i]->add(sc);
      });
    });
  }
  // Under MPI: every process's states to process 0, merged there in rank order. False on the
  // other processes (they write nothing).
  bool gather() {
    if (!spread || spread->processes < 2) return true;
    for (const auto& r : runs) r->share(*spread);
    Archive ar;  // each state in turn, so that one at a time is held twice
    ar.put(static_cast<uint64_t>(runs.size()));
    for (const auto& r : runs) ar.put(r->save());
    std::string all = spread->gather(ar.bytes());
    ar = Archive();
    if (spread->process != 0) return false;
    Archive in(std::move(all));
    for (int p = 0; p < spread->processes; ++p) {
      if (in.get<uint64_t>() != runs.size()) throw Error("MPI analysis: states of other analyses");
      for (const auto& r : runs) {
        const std::string state = in.get<std::string>();
        if (p > 0) r->merge(state);  // process 0's own states are in the runs already
      }
    }
    return true;
  }
  // The typed results and their parts, in registry order; an analysis that declined (energy
  // with power samples) runs on the store read whole.
  void finish(SlicedAnalysis& out) {
    out.results.items.resize(which.size());
    parallel_for(
        which.size(),
        [&](size_t i) {
          AnalysisResult& r = out.results.items[i];
          r.analysis = which[i];
          r.value = runs[i]->finish(*out.ctx);
          if (r.value.has_value()) which[i]->render(r.value, *out.ctx, &r.part);
        },
        0, /*reverse=*/true);
    std::vector<const Analysis*> declined;
    for (const auto& r : out.results.items)
      if (!r.value.has_value()) declined.push_back(r.analysis);
    if (declined.empty()) return;
    slices.reset();
    out.whole = std::make_unique<Store>(read_store(file, sel));
    if (out.inference) apply_clock_inference(*out.whole, *out.inference);
    out.whole_ctx = std::make_unique<AnalysisContext>(*out.whole, opt, nullptr, page);
    AnalysisResults more = run_analyses(*out.whole_ctx, declined, /*render=*/true);
    for (auto& m : more.items)
      for (auto& r : out.results.items)
        if (r.analysis == m.analysis) r = std::move(m);
  }
};

}  // namespace

std::optional<SlicedAnalysis> analyse_by_rank(const std::string& file,
                                              std::vector<const Analysis*> which,
                                              const AnalysisOptions& opt,
                                              const ColumnSelection& sel, bool may_align,
                                              const LoadOptions& lo, const Spread* spread,
                                              bool page) {
  if (!sliceable(which, opt)) return std::nullopt;
  if (whole_store_forced()) return std::nullopt;
  if (!sliceable_any_size(which, opt)) {  // a rank at a time only past the budget
    std::error_code ec;
    const uintmax_t bytes = std::filesystem::file_size(file, ec);
    if (ec || bytes <= memory_budget(opt.memory_bytes)) return std::nullopt;
  }
  std::sort(which.begin(), which.end(), [](const Analysis* x, const Analysis* y) {
    return registry_position(x) < registry_position(y);
  });
  which.erase(std::unique(which.begin(), which.end()), which.end());
  SlicedPipeline run{file, which, opt, sel, spread, page, nullptr, {}, {}, 0, 0};
  try {
    run.slices = std::make_unique<RankSlices>(file, sel, spread);
  } catch (const Error&) {
    return std::nullopt;  // the whole-store read says what is wrong, or reads it unsorted
  }
  run.own_slices();
  const Store header = run.slices->header();  // a copy: the reader is replaced for pass 2
  const bool infer = may_align && infers_clocks(header, lo);
  CrossRows cross(header);
  const AnalysisContext first_ctx(header, opt, nullptr, page);
  run.runs = run.make_runs(first_ctx);
  run.pass1(cross);
  SlicedAnalysis out;
  bool moved = false;
  if (infer) {  // on every process: the same rows, the same inference
    out.inference = align_clocks(cross.store, lo, &out.match);
    moved = out.inference && moves_times(*out.inference);
  }
  out.header = std::move(cross.store);
  out.ctx = std::make_unique<AnalysisContext>(out.header, opt, out.match, page);
  out.ctx->shared<std::vector<uint8_t>>("kernel names", [&] { return cross.kernel_names; });
  if (moved) {  // pass 1's per-rank results were on the recorded clocks
    std::vector<std::unique_ptr<SlicedRun>> fresh = run.make_runs(first_ctx);
    for (size_t i = 0; i < run.runs.size(); ++i)
      if (!run.runs[i]->after_match()) run.runs[i] = std::move(fresh[i]);
  }
  bool again = moved;
  for (auto& r : run.runs)
    if (r->after_match()) r->begin(*out.ctx), again = true;
  if (again) run.pass2(moved ? &*out.inference : nullptr);
  out.writer = run.gather();
  if (out.writer) run.finish(out);
  return out;
}

}  // namespace kernalyse
