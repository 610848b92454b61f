// The HTML report of a store a rank at a time (write_html_by_rank, kernalyse/sliced.h): the page
// analyses' rank-at-a-time forms (analyse_by_rank, spread under mpirun), then the page's own
// reads of the rows (its origin and span, the rows per rank, the timeline's lanes) in two passes
// over the slices, and the page drawn from them by the whole store's section builders (html.h).
#include "kernalyse/html_report.h"
#include "kernalyse/sliced.h"
#include "kernalyse/store_io.h"
#include "kernalyse/timeline.h"

namespace kernalyse {

namespace {

// Each slice of `file` with the columns `sel`, on the clocks the analyses used.
void each_slice(const std::string& file, const ColumnSelection& sel,
                const std::optional<ClockInference>& inf,
                const std::function<void(const Store&, const std::vector<uint32_t>&)>& f) {
  RankSlices slices(file, sel, nullptr);
  Store buf;
  for (size_t k = 0; k < slices.size(); ++k) {
    slices.read(k, buf);
    if (inf) apply_clock_inference(buf, *inf);
    f(buf, select_activities(buf, Filter{}));
  }
}

// The page's source from the slices: the rows' totals (pass 1: every time column the analyses
// read, for the origin), each rank's lanes (pass 2, the activities alone); the counters are the
// cross-rank rows' (every GPU memory and power sample).
PageSource sliced_source(const std::string& file, const SlicedAnalysis& a,
                         const ColumnSelection& sel) {
  PageSource src;
  src.header = &a.header;
  ColumnSelection times = sel;
  times.activity_correlation = times.activity_step = times.launch_detail = false;
  times.nccl = times.ops = false;
  each_slice(file, times, a.inference,
             [&](const Store& s, const std::vector<uint32_t>& rows) { src.rows.add(s, rows); });
  if (a.header.ranks.empty()) {  // the scope names the ranks with rows, as the whole store's
    Store ranks;
    for (const auto& [rank, n] : src.rows.per_rank) ranks.activities.rank.push_back(rank);
    src.scope = describe_filter(ranks, Filter{});
  } else {
    src.scope = describe_filter(a.header, Filter{});
  }
  src.each_rank = [&file, &a](const RankRowsVisitor& visit) {
    ColumnSelection acts;
    acts.activity_correlation = acts.activity_step = false;
    acts.launches = acts.annotations = acts.nccl = acts.counters = acts.ops = false;
    each_slice(file, acts, a.inference, [&](const Store& s, const std::vector<uint32_t>& rows) {
      const detail::RowsByRank ranks(s, rows);
      for (size_t k = 0; k < ranks.size(); ++k) visit(s, ranks.rank(k), ranks.rows(k));
    });
  };
  return src;
}

}  // namespace

std::optional<HtmlStats> write_html_by_rank(const std::string& file, const std::string& path,
                                            const HtmlOptions& opt, const ColumnSelection& sel,
                                            bool may_align, const LoadOptions& lo,
                                            const Spread* spread) {
  std::optional<SlicedAnalysis> a = analyse_by_rank(
      file, page_analyses(), page_analysis_options(opt), sel, may_align, lo, spread, /*page=*/true);
  if (!a) return std::nullopt;
  if (!a->writer) return HtmlStats{};
  Progress progress("writing " + path, kPageAnalysisSteps + kPageSteps, "sections", opt.progress);
  progress.advance(kPageAnalysisSteps);  // the analyses ran
  const PageResults page = page_results(a->results, *a->ctx);
  const PageSource src = sliced_source(file, *a, sel);
  HtmlStats st = write_html_page(src, page, path, opt, &progress);
  progress.finish();
  return st;
}

}  // namespace kernalyse
