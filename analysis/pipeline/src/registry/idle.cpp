// --idle: idle time per stream split into host wait, kernel wait and other (HTA's analysis:
// under --compat hta it reads HTA's view of the store).
#include "registry.h"

namespace kernalyse::registry {

const Analysis& idle() {
  static const Analysis a{"idle", "idle breakdown per stream: host wait, kernel wait, other",
                          /*in_all=*/true,
                          /*in_page=*/false, View::Hta, Reads{.launches = true},
                          [](const AnalysisContext& ctx) -> std::any {
                            return stream_idle(ctx.store(View::Hta), ctx.cross_rank(View::Hta));
                          },
                          [](const std::any& r, const AnalysisContext& ctx, Report* out) {
                            idle_report(std::any_cast<const std::vector<StreamIdle>&>(r),
                                        ctx.options().kernel_wait_ns, out);
                          },
                          // A rank at a time: the streams of each slice, appended.
                          [](const AnalysisContext&) -> std::unique_ptr<SlicedRun> {
                            auto acc = std::make_shared<std::vector<StreamIdle>>();
                            auto run = std::make_unique<FoldRun>(
                                [acc](const AnalysisContext& s) {
                                  const auto v =
                                      stream_idle(s.store(View::Hta), s.cross_rank(View::Hta));
                                  acc->insert(acc->end(), v.begin(), v.end());
                                },
                                [acc](const AnalysisContext&) -> std::any { return *acc; });
                            run->spread(
                                [acc] {
                                  Archive ar;
                                  ar.put(*acc);
                                  return ar.bytes();
                                },
                                [acc](const std::string& bytes) {
                                  Archive ar(bytes);
                                  const auto v = ar.get<std::vector<StreamIdle>>();
                                  acc->insert(acc->end(), v.begin(), v.end());
                                });
                            return run;
                          }};
  return a;
}

}  // namespace kernalyse::registry
