// Progress overhead: imports one trace (and exports the store to Perfetto JSON) alternately with
// progress off and on (Tty and Lines, drawn to stderr; run with 2>/dev/null), and prints the
// min and median process CPU time of each. Usage: kernalyse_progress_overhead TRACE [REPS] [OUT]
#include <algorithm>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <string>
#include <vector>

#include "kernalyse/export.h"
#include "kernalyse/kineto.h"
#include "kernalyse/progress.h"

using namespace kernalyse;

namespace {

double cpu_s() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

void report(const char* what, const char* mode, std::vector<double> v, double base_med) {
  std::sort(v.begin(), v.end());
  double med = v[v.size() / 2];
  std::printf("%-7s %-6s min %.3f s  median %.3f s  median vs off %+.2f %%\n", what, mode, v[0],
              med, base_med > 0 ? (med / base_med - 1) * 100 : 0.0);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return std::fprintf(stderr, "usage: %s TRACE [REPS] [OUT.json]\n", argv[0]), 2;
  std::string trace = argv[1];
  int reps = argc > 2 ? std::stoi(argv[2]) : 7;
  std::string out = argc > 3 ? argv[3] : "/tmp/kernalyse_progress_overhead.json";
  const ProgressMode modes[] = {ProgressMode::Off, ProgressMode::Tty, ProgressMode::Lines};
  const char* names[] = {"off", "tty", "lines"};
  std::vector<double> imp[3], exp[3];
  Store store;
  for (int r = 0; r < reps; ++r) {
    // The order rotates each rep: the first run after an import pays for page faults, not modes.
    for (int k = 0; k < 3; ++k) {
      int m = (k + r) % 3;
      Progress p("importing", input_bytes(trace), "bytes", modes[m]);
      ImportOptions o;
      o.progress = m == 0 ? nullptr : &p;  // off: the importer's own no-progress path
      double t = cpu_s();
      store = import_kineto_file(trace, o, nullptr);
      p.finish();
      imp[m].push_back(cpu_s() - t);
    }
    for (int k = 0; k < 3; ++k) {
      int m = (k + r) % 3;
      ExportOptions eo;
      eo.force = true;
      eo.progress = modes[m];
      double t = cpu_s();
      export_perfetto(store, out, eo);
      exp[m].push_back(cpu_s() - t);
    }
  }
  std::filesystem::remove(out);
  {  // the per-row cost the exports pay: one advance(1) per store row
    const int64_t n = 100'000'000;
    for (int m = 0; m < 2; ++m) {
      Progress p("rows", n, "events", m ? ProgressMode::Tty : ProgressMode::Off);
      double t = cpu_s();
      for (int64_t i = 0; i < n; ++i) p.advance(1);
      p.finish();
      std::printf("advance(1) %-4s %.2f ns/call\n", m ? "tty" : "off", (cpu_s() - t) / n * 1e9);
    }
    Progress p("rows", n, "events", ProgressMode::Tty);
    ProgressTicker ticker(p);
    double t = cpu_s();
    for (int64_t i = 0; i < n; ++i) ticker.tick();
    ticker.flush();
    p.finish();
    std::printf("ticker     tty  %.2f ns/call\n", (cpu_s() - t) / n * 1e9);
  }
  std::vector<double> s0 = imp[0], e0 = exp[0];
  std::sort(s0.begin(), s0.end());
  std::sort(e0.begin(), e0.end());
  for (int m = 0; m < 3; ++m) report("import", names[m], imp[m], s0[s0.size() / 2]);
  for (int m = 0; m < 3; ++m) report("export", names[m], exp[m], e0[e0.size() / 2]);
  return 0;
}
