// --align auto's rule: an inferred clock correction is applied only on evidence that the recorded
// clocks are wrong (docs/clocks.md, "When"). Kept apart from infer_clocks on purpose: the method
// states what the collectives say, this decides whether that is reason enough to move anything.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

#include "kernalyse/clock_infer.h"
#include "kernalyse/units.h"

namespace kernalyse {
namespace {

// The recorded times the inference was fitted on: its correction is evaluated at both ends.
void evidence_span(const ClockEvidence& ev, int64_t* first, int64_t* last) {
  *first = std::numeric_limits<int64_t>::max();
  *last = std::numeric_limits<int64_t>::min();
  for (const auto& in : ev.instances)
    for (const auto& a : in.arrivals)
      *first = std::min(*first, a.start_ns), *last = std::max(*last, a.end_ns);
  for (const auto& m : ev.messages) {
    *first = std::min({*first, m.sent_ns, m.received_ns});
    *last = std::max({*last, m.sent_ns, m.received_ns});
  }
}

// |correction| at recorded time t.
int64_t correction_at(const HostClock& h, int64_t t, int64_t t_ref) {
  return std::llabs(h.offset_ns + std::llround(h.drift * static_cast<double>(t - t_ref)));
}

std::string host_name(const HostClock& h) {
  if (!h.host.empty()) return h.host;
  return h.ranks.empty() ? std::string("?") : "rank " + std::to_string(h.ranks.front()) + "'s host";
}

}  // namespace

bool moves_clocks(const ClockInference& inf, const ClockEvidence& ev, std::string* why) {
  if (!inf.ok) {
    *why = inf.why + "; clocks kept as recorded";
    return false;
  }
  int64_t first = inf.t_ref_ns, last = inf.t_ref_ns;
  evidence_span(ev, &first, &last);
  if (first > last) first = last = inf.t_ref_ns;
  // The host whose correction stands out most against its own ±, and the largest correction.
  const HostClock* worst = nullptr;
  int64_t worst_corr = 0, largest = 0, widest = 0;
  double worst_ratio = -1;
  for (const auto& h : inf.hosts) {
    const int64_t c =
        std::max(correction_at(h, first, inf.t_ref_ns), correction_at(h, last, inf.t_ref_ns));
    largest = std::max(largest, c);
    widest = std::max(widest, h.uncertainty_ns);
    const double ratio =
        static_cast<double>(c) / static_cast<double>(std::max<int64_t>(h.uncertainty_ns, 1));
    if (!h.reference && ratio > worst_ratio) worst = &h, worst_ratio = ratio, worst_corr = c;
  }
  const std::string violations = std::to_string(inf.violations_before) +
                                 " happened-before violation" +
                                 (inf.violations_before == 1 ? "" : "s");
  if (inf.violations_before > 0) {
    *why = "recorded clocks moved: " + violations + " on the recorded times";
    return true;
  }
  if (worst && worst_corr > worst->uncertainty_ns) {
    *why = "recorded clocks moved: 0 violations, but " + host_name(*worst) + "'s correction " +
           format_duration(worst_corr) + " exceeds its ±" + format_duration(worst->uncertainty_ns);
    return true;
  }
  *why = "recorded clocks kept: 0 violations, corrections within ±" + format_duration(widest) +
         " (largest " + format_duration(largest) +
         ", each within its host's ±); --align inferred applies them";
  return false;
}

bool keep_recorded_clocks_unless_evidence(ClockInference* inf, const ClockEvidence& ev) {
  std::string why;
  const bool move = moves_clocks(*inf, ev, &why);
  if (inf->ok && !move) inf->kept = why;
  return move;
}

}  // namespace kernalyse
