// The analysis registry and the pipeline that runs it (kernalyse/pipeline.h).
#include "kernalyse/pipeline.h"

#include <algorithm>

#include "kernalyse/parallel.h"
#include "kernalyse/store_io.h"
#include "registry/registry.h"

namespace kernalyse {

// The registry, in output order: one line per analysis.
const std::vector<const Analysis*>& analyses() {
  static const std::vector<const Analysis*> all = {
      &registry::summary(),   &registry::gaps(),          &registry::overlap(),
      &registry::breakdown(), &registry::idle(),          &registry::ranges(),
      &registry::energy(),    &registry::stragglers(),    &registry::roofline(),
      &registry::hints(),     &registry::critical_path(), &registry::alltoall(),
  };
  return all;
}

const Analysis* find_analysis(std::string_view name) {
  for (const Analysis* a : analyses())
    if (a->name == name) return a;
  return nullptr;
}

AnalysisContext::AnalysisContext(const Store& s, const AnalysisOptions& o,
                                 std::shared_ptr<const CollectiveMatch> match, bool page)
    : store_(s), opt_(o), match_(std::move(match)), page_(page) {}

View AnalysisContext::view_of(View declared) const {
  return declared == View::Hta && opt_.compat == Compat::Hta ? View::Hta : View::Store;
}

const Store& AnalysisContext::store(View v) const {
  if (view_of(v) == View::Store) return store_;
  return shared<Store>("hta view", [this] { return hta_view(store_); });
}

CrossRankOptions AnalysisContext::cross_rank(View v) const {
  CrossRankOptions xo;
  xo.filter = opt_.filter;
  xo.compat = view_of(v) == View::Hta ? Compat::Hta : Compat::Native;
  xo.kernel_wait_ns = opt_.kernel_wait_ns;
  xo.top = opt_.top > 0 ? opt_.top : 20;
  xo.verbose = !page_ && opt_.verbose;  // the page's tables use simplified names
  // The clock inference's matching is of the store's own rows, not of another view's.
  if (view_of(v) == View::Store) xo.match = match_;
  return xo;
}

AnalysisContext::Slot& AnalysisContext::slot_of(const std::string& key) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto& slot = slots_[key];
  if (!slot) slot = std::make_unique<Slot>();
  return *slot;
}

namespace {
size_t registry_index(const Analysis* a) {
  const auto& all = analyses();
  return static_cast<size_t>(std::find(all.begin(), all.end(), a) - all.begin());
}
}  // namespace

AnalysisResults run_analyses(const AnalysisContext& ctx, std::vector<const Analysis*> which,
                             bool render) {
  std::sort(which.begin(), which.end(), [](const Analysis* x, const Analysis* y) {
    return registry_index(x) < registry_index(y);
  });
  which.erase(std::unique(which.begin(), which.end()), which.end());
  AnalysisResults out;
  out.items.resize(which.size());
  // Each analysis only reads the store: one task each, on as many threads as there are cores
  // (not more: each holds its own working set). The last ones (the ledger, the critical path:
  // the longest) are queued first.
  parallel_for(
      which.size(),
      [&](size_t i) {
        AnalysisResult& r = out.items[i];
        r.analysis = which[i];
        r.value = which[i]->run(ctx);
        if (render) which[i]->render(r.value, ctx, &r.part);
      },
      0, /*reverse=*/true);
  return out;
}

void append_results(AnalysisResults&& results, const AnalysisContext& ctx, Report* report) {
  const bool hta = std::any_of(results.items.begin(), results.items.end(), [&](const auto& r) {
    return ctx.view_of(r.analysis->view) == View::Hta;
  });
  if (hta)
    report->headline.push_back(
        "--compat hta: integer µs (start rounded up, end down), last ProfilerStep excluded when "
        "there are >= 2, HTA's name-based classification");
  for (auto& r : results.items) append_report(report, std::move(r.part));
}

ColumnSelection columns_for(const std::vector<const Analysis*>& which, Compat compat,
                            bool may_align, const std::function<bool()>& has_ranges) {
  Reads need;
  for (const Analysis* a : which) {
    need.launches = need.launches || a->reads.launches ||
                    (compat == Compat::Hta && a->view == View::Hta);  // HTA's last-step cut
    need.launch_threads = need.launch_threads || a->reads.launch_threads;
    need.launch_threads_ranges = need.launch_threads_ranges || a->reads.launch_threads_ranges;
    need.nccl = need.nccl || a->reads.nccl;
    need.ops = need.ops || a->reads.ops;
  }
  ColumnSelection sel;
  // The analyses join launches by correlation and use their start; --ranges also their thread,
  // and only when the store has NVTX / user ranges at all (the 8 M-kernel benchmark store has
  // none).
  sel.launch_detail =
      need.launch_threads || (need.launch_threads_ranges && has_ranges && has_ranges());
  sel.launches = need.launches || sel.launch_detail;
  sel.activity_correlation = sel.launches;
  sel.nccl = need.nccl || may_align;  // the inference matches collectives
  sel.ops = need.ops;
  sel.ops_detail = false;
  return sel;
}

ColumnSelection columns_for_store(const std::string& store,
                                  const std::vector<const Analysis*>& which, Compat compat,
                                  bool may_align) {
  return columns_for(which, compat, may_align, [&] {
    ColumnSelection probe;
    probe.activities = probe.launches = probe.nccl = probe.counters = probe.ops = false;
    return store_has_ranges(read_store(store, probe));
  });
}

bool store_has_ranges(const Store& s) {
  return std::any_of(s.annotations.kind.begin(), s.annotations.kind.end(), [](uint8_t k) {
    return k == static_cast<uint8_t>(AnnotationKind::User) ||
           k == static_cast<uint8_t>(AnnotationKind::Nvtx);
  });
}

}  // namespace kernalyse
