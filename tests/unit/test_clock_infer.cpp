// Clock inference from collectives (analysis/clocks/src/clock_infer.cpp, docs/clocks.md
// "Inferred"): planted per-host offsets and drift on hand-built evidence, completion that is not
// the model's, too-little-evidence cases, and applying a result to a Store.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "kernalyse/clock_infer.h"

using namespace kernalyse;

namespace {

struct Planted {
  std::vector<int64_t> offset;  // per host: recorded = true + offset + drift · true
  std::vector<double> drift;
  int ranks_per_host = 2;
  int64_t rec(int rank, int64_t t) const {
    int h = rank / ranks_per_host;
    return t + offset[static_cast<size_t>(h)] +
           std::llround(drift[static_cast<size_t>(h)] * static_cast<double>(t));
  }
};

// n collectives over `span` ns: ranks start up to 300 µs apart, a ring collective ends on every
// rank within `jitter` ns of the others 50 µs after the last start; a tree one (tree: 1 every
// third, 2 all) lasts 5 ms, and one rank per host ends ~5 ms before the others, just after the
// last start.
ClockEvidence make(const Planted& p, int n, int64_t span, int64_t jitter, int tree, uint64_t seed) {
  std::mt19937_64 rng(seed);
  ClockEvidence ev;
  const int ranks = static_cast<int>(p.offset.size()) * p.ranks_per_host;
  for (int r = 0; r < ranks; ++r) {
    ev.ranks.push_back(r);
    ev.host[r] = "node" + std::to_string(r / p.ranks_per_host);
  }
  for (int c = 0; c < n; ++c) {
    ClockInstance in;
    const bool is_tree = tree == 2 || (tree == 1 && c % 3 == 2);
    in.op = "allreduce";
    in.algo = is_tree ? "TREE" : "RING";
    int64_t t0 = 1'000'000'000 + span * c / n;
    int64_t smax = 0;
    std::vector<int64_t> s(static_cast<size_t>(ranks));
    for (int r = 0; r < ranks; ++r)
      s[static_cast<size_t>(r)] = t0 + static_cast<int64_t>(rng() % 300'000),
      smax = std::max(smax, s[static_cast<size_t>(r)]);
    int64_t end = smax + (is_tree ? 5'000'000 : 50'000);
    for (int r = 0; r < ranks; ++r) {
      int64_t e = end + static_cast<int64_t>(rng() % static_cast<uint64_t>(jitter + 1));
      if (is_tree && r % p.ranks_per_host == c % p.ranks_per_host) e = smax + 1000;
      in.arrivals.push_back({r, p.rec(r, s[static_cast<size_t>(r)]), p.rec(r, e), -1});
    }
    ev.instances.push_back(in);
  }
  return ev;
}

// Error of host h's correction against the truth, at true time t (relative to host 0's clock).
double error_at(const ClockInference& inf, const Planted& p, int h, int64_t t) {
  const HostClock& hc = inf.hosts[static_cast<size_t>(h)];
  int r = hc.ranks[0];
  int64_t rec = p.rec(r, t);
  double corrected = static_cast<double>(rec) + static_cast<double>(hc.offset_ns) +
                     hc.drift * (static_cast<double>(rec) - static_cast<double>(inf.t_ref_ns));
  return corrected - static_cast<double>(p.rec(0, t));
}

}  // namespace

TEST(ClockInfer, PlantedOffsetsAndDriftPerHost) {
  Planted p{{0, 1'234'567, -2'500'000, 4'999'000}, {0, 12e-6, -20e-6, 3e-6}, 2};
  ClockEvidence ev = make(p, 120, 4'000'000'000, 2000, /*tree=*/1, 7);
  ClockInference inf = infer_clocks(ev);
  ASSERT_TRUE(inf.ok) << inf.why;
  ASSERT_EQ(inf.hosts.size(), 4u);
  EXPECT_TRUE(inf.drift_fitted);
  EXPECT_EQ(inf.violations_after, 0);
  EXPECT_GT(inf.violations_before, 0);
  EXPECT_EQ(inf.hosts[0].offset_ns, 0);
  for (int h = 1; h < 4; ++h) {
    EXPECT_EQ(inf.hosts[static_cast<size_t>(h)].ranks.size(), 2u);
    for (int64_t t : {1'000'000'000LL, 3'000'000'000LL, 5'000'000'000LL}) {
      double err = std::fabs(error_at(inf, p, h, t));
      EXPECT_LE(err, 2000) << "host " << h << " at " << t;
      EXPECT_LE(err, static_cast<double>(inf.hosts[static_cast<size_t>(h)].uncertainty_ns))
          << "host " << h;
    }
  }
  EXPECT_LT(inf.skew_after_ns, 10'000);
  EXPECT_GT(inf.skew_before_ns, 1'000'000);
}

TEST(ClockInfer, TreeOnlyUsesLastEndPerHost) {
  // Only tree all-reduces: one rank per host ends 3 ms early every time; the host's last end
  // still ends together with the other hosts'.
  Planted p{{0, 800'000}, {0, 0}, 3};
  ClockEvidence ev = make(p, 30, 300'000'000, 1000, /*tree=*/2, 3);
  ClockInference inf = infer_clocks(ev);
  ASSERT_TRUE(inf.ok) << inf.why;
  EXPECT_FALSE(inf.drift_fitted);  // 0.3 s: too short to show a drift
  double err = std::fabs(error_at(inf, p, 1, 1'100'000'000));
  EXPECT_LE(err, 2000);
  EXPECT_LE(err, static_cast<double>(inf.hosts[1].uncertainty_ns));
  EXPECT_EQ(inf.violations_after, 0);
}

TEST(ClockInfer, UnnamedRanksAreTheirOwnHosts) {
  Planted p{{0, 300'000}, {0, 0}, 1};
  ClockEvidence ev = make(p, 20, 100'000'000, 500, 0, 5);
  ev.host.clear();
  ClockInference inf = infer_clocks(ev);
  ASSERT_TRUE(inf.ok) << inf.why;
  EXPECT_EQ(inf.hosts.size(), 2u);
  EXPECT_FALSE(inf.notes.empty());
  EXPECT_NE(inf.notes[0].find("own host"), std::string::npos);
  EXPECT_LE(std::fabs(error_at(inf, p, 1, 1'050'000'000)),
            static_cast<double>(inf.hosts[1].uncertainty_ns));
}

TEST(ClockInfer, SendRecvGivesBoundsOnlyAndTheMiddle) {
  // Two ranks, exchanges only: no completion model; the feasible interval's middle, ± half of it.
  ClockEvidence ev;
  ev.ranks = {0, 1};
  ev.world_size = 2;
  const int64_t off = 5'000'000;  // rank 1's clock reads 5 ms ahead
  for (int c = 0; c < 6; ++c) {
    int64_t t = 1'000'000'000 + c * 10'000'000;
    ClockInstance in;
    in.op = "sendrecv";
    in.arrivals.push_back({0, t, t + 40'000, -1});
    in.arrivals.push_back({1, t + 15'000 + off, t + 60'000 + off, -1});
    ev.instances.push_back(in);
  }
  ClockInference inf = infer_clocks(ev);
  ASSERT_TRUE(inf.ok) << inf.why;
  const HostClock& h = inf.hosts[1];
  EXPECT_EQ(h.samples, 0);
  // Truth: correction −5 ms; the bounds: rank 0's end ≥ rank 1's start and vice versa.
  EXPECT_LE(std::llabs(h.offset_ns + off), h.uncertainty_ns);
  EXPECT_GE(h.offset_ns, h.bound_lo_ns);
  EXPECT_LE(h.offset_ns, h.bound_hi_ns);
  EXPECT_EQ(inf.violations_after, 0);
  EXPECT_EQ(inf.violations_before, 6);

  // Two ranks sampled from a world of 128: their SendRecvs may pair each with a third rank. One
  // group (stream) whose instances agree as exchanges is used, and the assumption said.
  ev.world_size = 128;
  for (auto& in : ev.instances) in.group = "stream 7/7";
  ClockInference sampled = infer_clocks(ev);
  ASSERT_TRUE(sampled.ok) << sampled.why;
  EXPECT_EQ(sampled.hosts[1].offset_ns, h.offset_ns);
  bool said = false;
  for (const auto& n : sampled.notes)
    said = said || n.find("taken as exchanges between") != std::string::npos;
  EXPECT_TRUE(said);
  // A group whose instances contradict each other as exchanges (one shifted by 30 ms: not the
  // same instance on both ranks) is left out whole, with the intervals that show it.
  ev.instances[2].arrivals[1].start_ns += 30'000'000,
      ev.instances[2].arrivals[1].end_ns += 30'000'000;
  ClockInference mixed = infer_clocks(ev);
  EXPECT_FALSE(mixed.ok);
  EXPECT_NE(mixed.why.find("peer is not recorded"), std::string::npos) << mixed.why;
  said = false;
  for (const auto& n : mixed.notes)
    said = said || n.find("contradict each other") != std::string::npos;
  EXPECT_TRUE(said);
  // With the peers recorded they pair again (and the contradiction is then an error in the data).
  ev.instances[2].arrivals[1].start_ns -= 30'000'000,
      ev.instances[2].arrivals[1].end_ns -= 30'000'000;
  for (auto& in : ev.instances) in.arrivals[0].peer = 1, in.arrivals[1].peer = 0;
  EXPECT_TRUE(infer_clocks(ev).ok);
}

TEST(ClockInfer, TooLittleEvidenceIsSaid) {
  ClockEvidence one;
  one.ranks = {0};
  ClockInference a = infer_clocks(one);
  EXPECT_FALSE(a.ok);
  EXPECT_EQ(a.why.rfind("too little evidence", 0), 0u);

  ClockEvidence none;
  none.ranks = {0, 1};
  ClockInference b = infer_clocks(none);
  EXPECT_FALSE(b.ok);
  EXPECT_NE(b.why.find("no matched collective"), std::string::npos);

  // A single ring collective whose kernels end 50 µs after the last start bounds the offset to a
  // few hundred µs: used, with the hard bound as its ± (one completion sample has no scatter).
  Planted p{{0, 100'000}, {0, 0}, 1};
  ClockEvidence single = make(p, 1, 1000, 100, 0, 1);
  ClockInference c1 = infer_clocks(single);
  ASSERT_TRUE(c1.ok) << c1.why;
  const HostClock& h1 = c1.hosts[1];
  EXPECT_LE(std::fabs(error_at(c1, p, 1, 1'000'000'000)), static_cast<double>(h1.uncertainty_ns));
  EXPECT_EQ(h1.uncertainty_ns,
            std::max(h1.offset_ns - h1.bound_lo_ns, h1.bound_hi_ns - h1.offset_ns));
  EXPECT_LT(h1.uncertainty_ns, 400'000);
  EXPECT_EQ(c1.violations_after, 0);

  // One with loose bounds (kernels of 30 ms: the offset anywhere within ±30 ms) says nothing.
  ClockEvidence loose;
  loose.ranks = {0, 1};
  ClockInstance in;
  in.op = "allreduce";
  in.algo = "RING";
  in.arrivals = {{0, 0, 30'000'000, -1}, {1, 1'000'000, 31'000'000, -1}};
  loose.instances.push_back(in);
  ClockInference c = infer_clocks(loose);
  EXPECT_FALSE(c.ok);
  EXPECT_NE(c.why.find("bounded only to [-31.000, +29.000] ms"), std::string::npos) << c.why;
  EXPECT_NE(describe(c).find("clocks kept as recorded"), std::string::npos);

  // A third host that never meets the others.
  ClockEvidence lone = make(p, 10, 10'000'000, 100, 0, 2);
  lone.ranks.push_back(9);
  ClockInference d = infer_clocks(lone);
  EXPECT_FALSE(d.ok);
  EXPECT_NE(d.why.find("rank 9"), std::string::npos);
}

// Point-to-point messages seen on both sides (NCCL's network NVTX marks): each direction bounds
// the offset from one side, as a ping-pong. Host 1 runs 2.5 ms ahead; one-way delays 5 to 60 µs.
TEST(ClockInfer, MessagesBoundTheOffsetFromBothSides) {
  const int64_t truth = -2'500'000;  // correction of host 1 (recorded = true + 2.5 ms)
  ClockEvidence ev;
  ev.ranks = {0, 1};
  ev.host = {{0, "a"}, {1, "b"}};
  std::mt19937_64 rng(3);
  int64_t lo = INT64_MIN, hi = INT64_MAX;
  for (int k = 0; k < 16; ++k) {
    const int64_t t = 1'000'000'000 + 100'000 * k,
                  delay = 5'000 + static_cast<int64_t>(rng() % 55'000);
    const bool up = k % 2 == 0;  // 0 → 1, else 1 → 0
    ClockMessage m{up ? 0 : 1, up ? 1 : 0, t, t + delay};
    (up ? m.received_ns : m.sent_ns) -= truth;  // host 1's clock
    if (up)
      lo = std::max(lo, m.sent_ns - m.received_ns);
    else
      hi = std::min(hi, m.received_ns - m.sent_ns);
    ev.messages.push_back(m);
  }
  ClockInference inf = infer_clocks(ev);
  ASSERT_TRUE(inf.ok) << inf.why;
  EXPECT_EQ(inf.messages, 16);
  EXPECT_EQ(inf.collectives, 0);
  const HostClock& h = inf.hosts[1];
  EXPECT_EQ(h.bound_lo_ns, lo);
  EXPECT_EQ(h.bound_hi_ns, hi);
  EXPECT_LE(std::llabs(h.offset_ns - truth), h.uncertainty_ns);
  EXPECT_LE(h.uncertainty_ns, (hi - lo) / 2 + 2);  // no completion: the middle, ± half the width
  EXPECT_LT(h.uncertainty_ns, 60'000);
  EXPECT_EQ(inf.violations_after, 0);
  EXPECT_NE(inf.method.find("0 collectives and 16 messages across 2 hosts"), std::string::npos);

  // With a collective whose completion lies outside the bounds: moved to the nearer bound, said.
  ClockInstance in;
  in.op = "allreduce";
  in.algo = "RING";
  in.arrivals = {{0, 2'000'000'000, 2'010'000'000, -1},
                 {1, 2'000'000'000 - truth, 2'010'000'000 - truth + 200'000, -1}};
  ev.instances.push_back(in);
  ClockInference both = infer_clocks(ev);
  ASSERT_TRUE(both.ok) << both.why;
  EXPECT_EQ(both.hosts[1].offset_ns, lo + 1);
  EXPECT_EQ(both.hosts[1].uncertainty_ns, hi - lo - 1);
  bool said = false;
  for (const auto& n : both.notes)
    said = said || n.find("outside the happened-before") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(ClockInfer, ContradictoryBoundsAreRefused) {
  // Rank 1 ends before rank 0 starts in one instance and the reverse in another: no offset fits.
  ClockEvidence ev;
  ev.ranks = {0, 1};
  for (int c = 0; c < 2; ++c) {
    ClockInstance in;
    in.op = "allreduce";
    in.algo = "RING";
    int64_t t = 1'000'000 * (c + 1);
    int64_t d = c == 0 ? 500'000 : -500'000;
    in.arrivals.push_back({0, t, t + 100'000, -1});
    in.arrivals.push_back({1, t + d, t + d + 100'000, -1});
    ev.instances.push_back(in);
  }
  ClockInference inf = infer_clocks(ev);
  EXPECT_FALSE(inf.ok);
  EXPECT_NE(inf.why.find("contradict"), std::string::npos);
}

TEST(ClockInfer, ApplyMovesTimesAndRecordsAnInvertibleMap) {
  Store s;
  s.strings = StringTable();
  for (int r = 0; r < 2; ++r) {
    RankInfo ri;
    ri.rank = r;
    ri.base_time_ns = 1'700'000'000'000'000'000;
    ri.clock_method = "none (recording host wall clock, not aligned across ranks)";
    s.ranks.push_back(ri);
  }
  const int64_t local = 2'000'000'000;  // a rank-1 local time (relative to base)
  auto& a = s.activities;
  for (int r = 0; r < 2; ++r) {
    a.rank.push_back(r), a.device.push_back(0), a.stream.push_back(7);
    a.kind.push_back(0), a.category.push_back(0), a.name_id.push_back(0),
        a.correlation.push_back(-1);
    a.step.push_back(-1);
    a.start_ns.push_back(s.ranks[static_cast<size_t>(r)].base_time_ns + local);
    a.end_ns.push_back(s.ranks[static_cast<size_t>(r)].base_time_ns + local + 1000);
  }
  ClockInference inf;
  inf.ok = true;
  inf.method = "inferred from 9 collectives across 2 hosts";
  inf.t_ref_ns = s.ranks[0].base_time_ns + 1'000'000'000;
  HostClock h0, h1;
  h0.ranks = {0}, h0.reference = true;
  h1.ranks = {1}, h1.offset_ns = -4'321'000, h1.drift = 15e-6, h1.uncertainty_ns = 900;
  inf.hosts = {h0, h1};
  const int64_t before = a.start_ns[1];
  apply_clock_inference(s, inf);
  EXPECT_EQ(a.start_ns[0], s.ranks[0].base_time_ns + local);
  int64_t want =
      before - 4'321'000 + std::llround(15e-6 * static_cast<double>(before - inf.t_ref_ns));
  EXPECT_EQ(a.start_ns[1], want);
  const RankInfo& r1 = s.ranks[1];
  EXPECT_EQ(r1.clock_uncertainty_ns, 900);
  EXPECT_EQ(r1.clock_method, inf.method);
  EXPECT_EQ(s.ranks[0].clock_method, inf.method + " (reference clock)");
  // The store's map gives the same time, and inverts back to the recorded local time.
  int64_t t_run = local + r1.clock_offset_ns +
                  std::llround(r1.clock_drift * static_cast<double>(local)) + r1.base_time_ns;
  EXPECT_LE(std::llabs(t_run - a.start_ns[1]), 1);
  double back = static_cast<double>(a.start_ns[1] - r1.base_time_ns - r1.clock_offset_ns) /
                (1.0 + r1.clock_drift);
  EXPECT_LE(std::fabs(back - static_cast<double>(local)), 2.0);
  EXPECT_NE(s.attrs.clock_domain.find("±0.9 µs"), std::string::npos);
}

// --align auto's rule (moves_clocks): the recorded clocks move only on evidence.
TEST(MovesClocks, OnlyOnViolationsOrACorrectionBeyondItsUncertainty) {
  ClockEvidence ev;  // the collectives span [0, 2 s] of recorded time
  ClockInstance in;
  in.op = "allreduce";
  in.arrivals = {{0, 0, 1000}, {1, 2'000'000'000, 2'000'001'000}};
  ev.instances = {in};
  ClockInference inf;
  inf.ok = true;
  inf.t_ref_ns = 1'000'000'000;
  HostClock h0, h1;
  h0.ranks = {0}, h0.reference = true;
  h1.ranks = {1}, h1.host = "node1", h1.offset_ns = 2'400, h1.uncertainty_ns = 5'100;
  inf.hosts = {h0, h1};
  std::string why;
  // 0 violations, 2.4 µs inside ±5.1 µs: kept, and the line says so with the numbers.
  EXPECT_FALSE(moves_clocks(inf, ev, &why));
  EXPECT_EQ(why.rfind("recorded clocks kept: 0 violations, corrections within ±5.100 µs", 0), 0u)
      << why;
  EXPECT_NE(why.find("largest 2.400 µs"), std::string::npos) << why;
  // A drift that takes the correction past its ± at an end of the span: moved.
  ClockInference drifting = inf;
  drifting.hosts[1].drift = 3e-6;  // 2.4 µs + 3 µs at the end (1 s after t_ref)
  EXPECT_TRUE(moves_clocks(drifting, ev, &why));
  EXPECT_NE(why.find("node1's correction 5.400 µs exceeds its ±5.100 µs"), std::string::npos)
      << why;
  // An offset beyond its ±: moved.
  ClockInference far = inf;
  far.hosts[1].offset_ns = 7'000;
  EXPECT_TRUE(moves_clocks(far, ev, &why));
  // A violation on the recorded times: moved, whatever the ±.
  ClockInference violated = inf;
  violated.violations_before = 3;
  EXPECT_TRUE(moves_clocks(violated, ev, &why));
  EXPECT_EQ(why, "recorded clocks moved: 3 happened-before violations on the recorded times");
  // Kept: applying does nothing, and describe() / the JSON say why.
  ClockInference kept = inf;
  EXPECT_FALSE(keep_recorded_clocks_unless_evidence(&kept, ev));
  EXPECT_EQ(describe(kept), kept.kept);
  EXPECT_FALSE(clock_inference_json(kept)["moved"].get<bool>());
  Store s;
  RankInfo r0, r1;
  r0.rank = 0, r1.rank = 1;
  s.ranks = {r0, r1};
  s.activities.rank = {0, 1};
  s.activities.start_ns = {10, 20};
  s.activities.end_ns = {11, 21};
  apply_clock_inference(s, kept);
  EXPECT_EQ(s.activities.start_ns[1], 20);
  EXPECT_EQ(s.ranks[1].clock_offset_ns, 0);
  // A failed inference moves nothing either.
  ClockInference failed;
  failed.why = "too little evidence: 1 rank";
  EXPECT_FALSE(moves_clocks(failed, ev, &why));
}
