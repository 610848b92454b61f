// --ranges: GPU time by NVTX / user-annotation range.
#include <map>

#include "kernalyse/checked.h"
#include "kernalyse/error.h"
#include "registry.h"

namespace kernalyse::registry {

namespace {
// A rank at a time: each slice's rows uncut, merged by range name (a slice is one rank: its
// names count one rank each), sorted and cut as range_analysis does.
std::unique_ptr<SlicedRun> sliced_ranges(const AnalysisContext& ctx) {
  struct Acc {
    RangeResult sum;
    std::map<std::string, RangeRow> rows;
  };
  auto acc = std::make_shared<Acc>();
  RangeOptions ro;
  ro.filter = ctx.options().filter;
  ro.top = 0;
  const int top = top_or(ctx, 20);
  // One slice's (or, under MPI, a process's) rows and totals added.
  auto absorb = [acc](const RangeResult& r) {
    acc->sum.instances += r.instances;
    acc->sum.gpu_ns = sat_add(acc->sum.gpu_ns, r.gpu_ns);
    acc->sum.covered_ns = sat_add(acc->sum.covered_ns, r.covered_ns);
    for (const RangeRow& x : r.rows) {
      RangeRow& into = acc->rows[x.name];
      into.name = x.name;
      into.calls += x.calls;
      into.ranks += x.ranks;
      into.gpu_items += x.gpu_items;
      into.gpu_ns = sat_add(into.gpu_ns, x.gpu_ns);
      into.cpu_ns = sat_add(into.cpu_ns, x.cpu_ns);
    }
  };
  auto run = std::make_unique<FoldRun>(
      [absorb, ro](const AnalysisContext& slice) { absorb(range_analysis(slice.store(), ro)); },
      [acc, ro, top](const AnalysisContext& whole) -> std::any {
        RangeResult out = acc->sum;
        out.scope = describe_filter(whole.store(), ro.filter);
        out.distinct = acc->rows.size();
        for (const auto& [name, row] : acc->rows) out.rows.push_back(row);
        std::stable_sort(out.rows.begin(), out.rows.end(),
                         [](const RangeRow& x, const RangeRow& y) { return x.gpu_ns > y.gpu_ns; });
        if (top > 0 && out.rows.size() > static_cast<size_t>(top)) out.rows.resize(top);
        return out;
      });
  run->spread(
      [acc] {
        Archive ar;
        ar.put(acc->sum.instances), ar.put(acc->sum.gpu_ns), ar.put(acc->sum.covered_ns);
        ar.put<uint64_t>(acc->rows.size());
        for (const auto& [name, x] : acc->rows)
          ar.put(name),
              ar.put(std::vector<int64_t>{x.calls, x.ranks, x.gpu_items, x.gpu_ns, x.cpu_ns});
        return ar.bytes();
      },
      [absorb](const std::string& bytes) {
        Archive ar(bytes);
        RangeResult r;
        ar.get(r.instances), ar.get(r.gpu_ns), ar.get(r.covered_ns);
        for (uint64_t n = ar.get<uint64_t>(); n > 0; --n) {
          RangeRow& x = r.rows.emplace_back();
          ar.get(x.name);
          const auto v = ar.get<std::vector<int64_t>>();
          if (v.size() != 5) throw Error("MPI analysis: bad range row");
          x.calls = v[0], x.ranks = v[1], x.gpu_items = v[2], x.gpu_ns = v[3], x.cpu_ns = v[4];
        }
        absorb(r);
      });
  return run;
}
}  // namespace

const Analysis& ranges() {
  static const Analysis a{
      "ranges",
      "GPU time by NVTX / user-annotation range (kernels launched inside each range)",
      /*in_all=*/true,
      /*in_page=*/true,
      View::Store,
      Reads{.launches = true, .launch_threads_ranges = true},
      [](const AnalysisContext& ctx) -> std::any {
        RangeOptions ro;
        ro.filter = ctx.options().filter;
        ro.top = top_or(ctx, 20);
        return range_analysis(ctx.store(), ro);
      },
      [](const std::any& r, const AnalysisContext&, Report* out) {
        range_report(std::any_cast<const RangeResult&>(r), out);
      },
      sliced_ranges};
  return a;
}

}  // namespace kernalyse::registry
