// --overlap and --breakdown: one union pass per rank feeds both (HTA's analyses: under
// --compat hta they read HTA's view of the store).
#include "registry.h"

namespace kernalyse::registry {

namespace {
const RankUnionTables& unions(const AnalysisContext& ctx) {
  return ctx.shared<RankUnionTables>("rank unions", [&] {
    return rank_union_tables(ctx.store(View::Hta), ctx.cross_rank(View::Hta));
  });
}
// The result is the shared union pass, held by pointer (the context outlives the results).
const RankUnionTables& of(const std::any& r) { return *std::any_cast<const RankUnionTables*>(r); }

// A rank at a time: each slice's union pass (shared by overlap and breakdown on that slice),
// its rows appended (the slices come in rank order, as the whole store's ranks).
std::unique_ptr<SlicedRun> sliced_unions(const AnalysisContext&) {
  auto acc = std::make_shared<RankUnionTables>();
  auto append = [acc](const RankUnionTables& u) {
    acc->whole.insert(acc->whole.end(), u.whole.begin(), u.whole.end());
    acc->per_step.insert(acc->per_step.end(), u.per_step.begin(), u.per_step.end());
    acc->steps = acc->steps || u.steps;
  };
  auto run = std::make_unique<FoldRun>(
      [append](const AnalysisContext& slice) { append(unions(slice)); },
      [acc](const AnalysisContext& whole) -> std::any {
        return &whole.shared<RankUnionTables>("rank unions", [&] { return *acc; });
      });
  run->spread(
      [acc] {
        Archive ar;
        ar.put(acc->whole), ar.put(acc->per_step), ar.put(acc->steps);
        return ar.bytes();
      },
      [append](const std::string& bytes) {
        Archive ar(bytes);
        RankUnionTables u;
        ar.get(u.whole), ar.get(u.per_step), ar.get(u.steps);
        append(u);
      });
  return run;
}
}  // namespace

const Analysis& overlap() {
  static const Analysis a{
      "overlap",
      "communication/computation overlap and exposed communication",
      /*in_all=*/true,
      /*in_page=*/true,
      View::Hta,
      Reads{},
      [](const AnalysisContext& ctx) -> std::any { return &unions(ctx); },
      [](const std::any& r, const AnalysisContext&, Report* out) { overlap_report(of(r), out); },
      sliced_unions};
  return a;
}

const Analysis& breakdown() {
  static const Analysis a{
      "breakdown",
      "temporal breakdown: idle, compute, comm, memory, other",
      /*in_all=*/true,
      /*in_page=*/true,
      View::Hta,
      Reads{},
      [](const AnalysisContext& ctx) -> std::any { return &unions(ctx); },
      [](const std::any& r, const AnalysisContext&, Report* out) { breakdown_report(of(r), out); },
      sliced_unions};
  return a;
}

}  // namespace kernalyse::registry
