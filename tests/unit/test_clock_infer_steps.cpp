// The numerical steps of the clock inference (analysis/clocks/src/clock_infer_steps.h) on hand-made
// numbers: the median, Tukey's resistant line, the linear solve, the network of pairwise fits,
// the closure of happened-before bounds, the arrival-order bias and the clamp into the bounds.
#include <gtest/gtest.h>

#include "../../analysis/clocks/src/clock_infer_steps.h"

using namespace kernalyse::clock_steps;

TEST(ClockInferSteps, MedianOddEvenEmpty) {
  std::vector<double> odd{5, 1, 3}, even{4, 1, 3, 2}, none;
  EXPECT_EQ(median_of(odd), 3);
  EXPECT_EQ(median_of(even), 2.5);  // the two middle values' mean
  EXPECT_EQ(median_of(none), 0);
}

TEST(ClockInferSteps, ResistantLineIgnoresAnOutlierPerThird) {
  // y = 7 + 2·(t − 10) at t = 0..8, the middle point of each third moved far away.
  std::vector<std::pair<double, double>> ty;
  for (int t = 0; t < 9; ++t) ty.emplace_back(t, 7 + 2.0 * (t - 10));
  ty[1].second += 1000, ty[4].second -= 1000, ty[7].second += 1000;
  double lever = 0;
  Fit f = resistant_line(ty, 10, &lever);
  // Outer thirds t 0..2 and 6..8: medians t 1 and 7 (lever 6); their y medians are the unmoved
  // outer points' larger y, y(2) = −9 and y(8) = 3: slope 12 / 6.
  EXPECT_DOUBLE_EQ(lever, 6);
  EXPECT_DOUBLE_EQ(f.beta, 2);
  EXPECT_DOUBLE_EQ(f.theta, 7);
}

TEST(ClockInferSteps, ResistantLineWithoutLeverIsTheMedian) {
  std::vector<std::pair<double, double>> ty{{5, 1}, {5, 9}, {5, 4}};  // one t: no slope
  double lever = -1;
  Fit f = resistant_line(ty, 0, &lever);
  EXPECT_EQ(lever, 0);
  EXPECT_EQ(f.beta, 0);
  EXPECT_EQ(f.theta, 4);
}

TEST(ClockInferSteps, SolveLinearPivotsAndSkipsEmptyRows) {
  // 0·x + 2y = 4, 3x + y = 5 needs a row swap: x = 1, y = 2.
  std::vector<double> x = solve_linear({0, 2, 3, 1}, {4, 5}, 2);
  ASSERT_EQ(x.size(), 2u);
  EXPECT_DOUBLE_EQ(x[0], 1);
  EXPECT_DOUBLE_EQ(x[1], 2);
  // An unknown no equation touches stays 0 instead of dividing by 0.
  x = solve_linear({2, 0, 0, 0}, {6, 0}, 2);
  EXPECT_DOUBLE_EQ(x[0], 3);
  EXPECT_DOUBLE_EQ(x[1], 0);
  EXPECT_TRUE(solve_linear({}, {}, 0).empty());
}

TEST(ClockInferSteps, NetworkFitWeighsPairsByTheirInstances) {
  // Pairs say θ_1 = 100 (3 instances with host 0: m_1 − m_0 = −100), θ_2 = 30 (6 with host 0)
  // and θ_1 − θ_2 = 10 (3 between them), which disagree. Least squares weighted by instances:
  // 6θ_1 − 3θ_2 = 3·100 + 3·10 and −3θ_1 + 9θ_2 = 6·30 − 3·10, so θ_1 = 76, θ_2 = 42. Host 3
  // meets host 0 in only 2 instances: not linked, left at 0.
  auto pair = [](int a, int b, double y, int n) {
    PairSamples p;
    p.a = a, p.b = b;
    for (int i = 0; i < n; ++i) p.ty.emplace_back(i, y);
    return p;
  };
  NetworkFit nf = fit_network(
      {pair(0, 1, -100, 3), pair(0, 2, -30, 6), pair(1, 2, 10, 3), pair(0, 3, -5, 2)}, 4, false, 0);
  ASSERT_EQ(nf.fit.size(), 4u);
  EXPECT_EQ(nf.linked, (std::vector<char>{1, 1, 1, 0}));
  EXPECT_NEAR(nf.fit[1].theta, 76, 1e-9);
  EXPECT_NEAR(nf.fit[2].theta, 42, 1e-9);
  EXPECT_EQ(nf.fit[3].theta, 0);
  EXPECT_EQ(nf.fit[0].theta, 0);
  for (const Fit& f : nf.fit) EXPECT_EQ(f.beta, 0);  // not a long run: offsets only
}

TEST(ClockInferSteps, NetworkFitDriftOnALongRun) {
  // Host 1's completion reads 50 + 1e-3·(t − 1000) behind host 0 over 9 instances.
  PairSamples p;
  p.a = 0, p.b = 1;
  for (int i = 0; i < 9; ++i) {
    const double t = 1000.0 * i;
    p.ty.emplace_back(t, -(50 + 1e-3 * (t - 1000)));
  }
  NetworkFit nf = fit_network({p}, 2, true, 1000);
  EXPECT_NEAR(nf.fit[1].theta, 50, 1e-9);
  EXPECT_NEAR(nf.fit[1].beta, 1e-3, 1e-12);
}

TEST(ClockInferSteps, CloseBoundsTightensAndFindsContradictions) {
  // 3 hosts: θ_1 − θ_0 ≤ 10, θ_2 − θ_1 ≤ 5, no direct 0→2 bound: closure gives θ_2 − θ_0 ≤ 15.
  std::vector<int64_t> W{0, 10, kInf, kInf, 0, 5, kInf, kInf, 0};
  ASSERT_TRUE(close_bounds(W, 3));
  EXPECT_EQ(W[0 * 3 + 2], 15);
  EXPECT_EQ(W[2 * 3 + 0], kInf);  // nothing bounds θ_0 − θ_2 from above
  // θ_0 − θ_1 ≤ −11 as well: θ_1 − θ_0 ≥ 11 > 10, a negative cycle.
  W = {0, 10, kInf, -11, 0, 5, kInf, kInf, 0};
  EXPECT_FALSE(close_bounds(W, 3));
}

TEST(ClockInferSteps, ArrivalOrderBiasSeparatesLastArrivals) {
  // Host 1 arrives last in 3 instances and then completes 40 after the median, 0 otherwise.
  std::vector<ArrivalSample> in;
  for (int i = 0; i < 6; ++i) {
    const bool last = i % 2 == 0;
    ArrivalSample s;
    s.starts = {{0, 100}, {1, last ? 200.0 : 50.0}, {2, 90}};
    s.ends = {{0, 1000}, {1, last ? 1040.0 : 1000.0}, {2, 1000}};
    in.push_back(s);
  }
  std::vector<double> bias = arrival_order_bias(in, 3);
  ASSERT_EQ(bias.size(), 3u);
  EXPECT_DOUBLE_EQ(bias[1], 40);
  // Host 0 is last in the other 3 (start 100 > 50 and 90): its completion does not depend on it.
  EXPECT_DOUBLE_EQ(bias[0], 0);
  // Host 2 never arrives last: fewer than 3 instances on one side, no bias measured.
  EXPECT_DOUBLE_EQ(bias[2], 0);
  EXPECT_EQ(arrival_order_bias({}, 2), (std::vector<double>{0, 0}));
}

TEST(ClockInferSteps, ClampStaysANanosecondInside) {
  EXPECT_EQ(clamp_into_bounds(55.4, 0, 100), 55);
  EXPECT_EQ(clamp_into_bounds(-7, 0, 100), 1);
  EXPECT_EQ(clamp_into_bounds(1e6, 0, 100), 99);
  EXPECT_EQ(clamp_into_bounds(1e6, -kInf, kInf), 1'000'000);  // unbounded: no change
  EXPECT_EQ(clamp_into_bounds(9, 4, 5), 4);                   // nothing a ns inside: the middle
}
