// The numerical steps of infer_clocks (clock_infer.cpp), apart so that each has its own unit test
// on hand-made numbers (tests/unit/test_clock_infer.cpp). Method: docs/clocks.md ("Inferred from
// the collectives"). Internal to the analysis library: no stable API.
#pragma once

#include <cstdint>
#include <limits>
#include <utility>
#include <vector>

namespace kernalyse::clock_steps {

// "No bound" in a difference-constraint matrix (a quarter of the range: sums of two never
// overflow).
constexpr int64_t kInf = std::numeric_limits<int64_t>::max() / 4;

// The median; reorders v (callers pass their scratch vectors: no copy per call). 0 when empty.
double median_of(std::vector<double>& v);

// A host's clock correction θ + β·(t − t_ref).
struct Fit {
  double theta = 0, beta = 0;
};

// Tukey's resistant line through (t, y), sorted by t: slope from the medians of the outer thirds
// (O(n), robust to a third of the points), intercept the median of what the slope leaves. *lever:
// the distance between the outer thirds' median t (0 or less: no slope, the median of y).
Fit resistant_line(const std::vector<std::pair<double, double>>& ty_sorted, double t_ref,
                   double* lever);

// Solves M·x = rhs (M n×n, row-major) by Gaussian elimination with partial pivoting. A zero pivot
// leaves its unknown at 0 (a host no pair links: its row is empty).
std::vector<double> solve_linear(std::vector<double> M, std::vector<double> rhs, int n);

// The completion samples of one host pair, a < b: (t, m_b − m_a) per instance they meet in, in
// time order.
struct PairSamples {
  int a = 0, b = 0;
  std::vector<std::pair<double, double>> ty;
};
// Per host: its correction from the pairwise fits, and whether pairs with >= 3 instances link it
// to host 0 (the reference, fixed at 0).
struct NetworkFit {
  std::vector<Fit> fit;
  std::vector<char> linked;
};
// Every pair with >= 3 instances gives θ_a − θ_b = median of (m_b − m_a) (over a long run with
// >= 9 instances, Tukey's resistant line in t, which gives the drifts' difference too); the
// corrections then best agree with all pairs, weighted by their instances (least squares: a
// reduced graph Laplacian, one solve for θ and one for β).
NetworkFit fit_network(const std::vector<PairSamples>& pairs, int hosts, bool long_run,
                       double t_ref);

// Closes a matrix of difference constraints W[a·H + b] ≥ θ_b − θ_a (kInf: none) to the tightest
// bounds (Floyd–Warshall). False when they contradict each other (a negative diagonal).
bool close_bounds(std::vector<int64_t>& W, int hosts);

// The arrival-order check: per instance, each host's last start and completion statistic, both
// corrected. Completion that depends on arrival order reads as an offset for a host that is
// usually last: per host, |median residual when it arrived last − when it did not| (residual: its
// completion minus the instance's median completion over hosts), with >= 3 instances each; else 0.
struct ArrivalSample {
  std::vector<std::pair<int, double>> starts;  // (host, last start)
  std::vector<std::pair<int, double>> ends;    // (host, completion statistic)
};
std::vector<double> arrival_order_bias(const std::vector<ArrivalSample>& instances, int hosts);

// Where a host's correction goes: its estimate rounded into [lo, hi] kept a ns inside (the store's
// own rounding of the composed map may differ by 1); the middle when that leaves nothing.
int64_t clamp_into_bounds(double estimate, int64_t lo, int64_t hi);

}  // namespace kernalyse::clock_steps
