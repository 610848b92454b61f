// Writes an HTML report of a small hand-built store that has everything the report can draw,
// GPU memory counters included (stores from the importer and the collector may carry none yet):
// 2 ranks, compute and NCCL kernels on two streams, rank 1 late at every allreduce, a memcpy, and
// a GPU memory step series per device. Used by tests/cli/test_html_browser.sh.
// Usage: kernalyse_html_fixture OUT.html
#include <cstdio>
#include <string>

#include "kernalyse/classify.h"
#include "kernalyse/html_report.h"
#include "kernalyse/store_io.h"

using namespace kernalyse;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUT.html\n", argv[0]);
    return 2;
  }
  Store s;
  Classifier cls;
  const int64_t t0 = 1'700'000'000'000'000'000;
  auto add = [&](int32_t rank, int32_t stream, Kind k, int64_t st, int64_t en,
                 const std::string& name) {
    auto& a = s.activities;
    a.rank.push_back(rank);
    a.device.push_back(rank);
    a.stream.push_back(stream);
    a.kind.push_back(static_cast<uint8_t>(k));
    a.category.push_back(static_cast<uint8_t>(cls.classify(k, name)));
    a.start_ns.push_back(t0 + st);
    a.end_ns.push_back(t0 + en);
    a.name_id.push_back(s.strings.intern(name));
    a.correlation.push_back(kNoCorrelation);
    a.step.push_back(kNoStep);
  };
  auto counter = [&](int32_t rank, int64_t ts, int64_t v, const char* name = kCounterGpuMemory) {
    auto& c = s.counters;
    c.rank.push_back(rank);
    c.device.push_back(rank);
    c.name_id.push_back(s.strings.intern(name));
    c.ts_ns.push_back(t0 + ts);
    c.value.push_back(v);
  };
  for (int32_t r = 0; r < 2; ++r) {
    int64_t t = 0, mem = 1LL << 30;
    for (int step = 0; step < 20; ++step) {
      int64_t gemm = r == 1 ? 130'000 : 100'000;  // rank 1: 1.3x slower GEMMs, the straggler
      add(r, 7, Kind::Kernel, t, t + gemm, "void gemm_kernel<128>(float const*, float*)");
      add(r, 7, Kind::Kernel, t + gemm + 5'000, t + gemm + 25'000, "elementwise_add");
      add(r, 7, Kind::Memcpy, t + gemm + 30'000, t + gemm + 34'000,
          "Memcpy DtoD (Device -> Device)");
      // Each rank enters the allreduce after its own work; all leave together, 60 µs after the
      // last (rank 1) arrives: rank 0 waits 30 µs every step.
      add(r, 13, Kind::Kernel, t + gemm + 40'000, t + 130'000 + 40'000 + 60'000,
          "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)");
      counter(r, t + 1'000, mem += (64LL << 20));
      counter(r, t + 2'000, 450'000 + 100'000 * r, kCounterPower);  // mW: rank 1 busier
      counter(r, t + gemm, mem -= (32LL << 20));
      t = (step + 1) * 300'000;
    }
    RankInfo ri;
    ri.rank = r;
    ri.world_size = 2;
    ri.host = "fixture-node";
    ri.devices = std::to_string(r);
    ri.device_name = "hand-built fixture";
    ri.clock_method = "fixture (one clock)";
    ri.emulated = true;
    ri.collector_status = "html fixture";
    s.ranks.push_back(ri);
  }
  s.attrs.emulated = true;
  s.attrs.produced_by = "kernalyse_html_fixture";
  s.attrs.clock_domain = "one clock (hand-built)";
  sort_activities(s);
  try {
    HtmlOptions o;
    o.force = true;
    o.title = "fixture with GPU memory counters";
    write_html_report(s, argv[1], o);
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  return 0;
}
