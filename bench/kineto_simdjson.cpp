// Measures Debian's simdjson (libsimdjson-dev 3.0, On-Demand API) on a Kineto trace against the
// hand-written cursor of aggregator/importers/src/kineto.cpp (issue 28, docs/benchmarks.md "Kineto
// JSON parser"): reads the whole file into memory (simdjson needs the document whole, at most 4 GB,
// padded) and pulls out of every event the fields the importer reads (ph, cat, name, pid, tid,
// ts and dur as raw number text, args.stream/device/correlation/External id), then prints MB/s
// of the parse alone, on the thread's CPU time (a loaded machine's wall time says little). The
// importer's own rate is kernalyse-merge's (bench/run.sh).
// Usage: kernalyse_kineto_simdjson FILE [REPEATS]
#include <simdjson.h>
#include <time.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

static double cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FILE [REPEATS]\n", argv[0]);
    return 2;
  }
  int repeats = argc > 2 ? std::atoi(argv[2]) : 3;
  simdjson::padded_string json;
  if (simdjson::padded_string::load(argv[1]).get(json)) {
    std::fprintf(stderr, "%s: cannot read\n", argv[1]);
    return 2;
  }
  simdjson::ondemand::parser parser(json.size() + 64);
  double best = 1e30;
  uint64_t check = 0;
  for (int r = 0; r < repeats; ++r) {
    double t0 = cpu_seconds();
    uint64_t events = 0, sum = 0;
    simdjson::ondemand::document doc = parser.iterate(json);
    for (auto top : doc.get_object()) {
      std::string_view key = top.unescaped_key().value();
      if (key != "traceEvents") continue;
      for (auto ev : top.value().get_array()) {
        ++events;
        for (auto field : ev.get_object()) {
          std::string_view k = field.unescaped_key().value();
          auto v = field.value();
          if (k == "ph" || k == "cat" || k == "name") {
            std::string_view s;
            if (!v.get_string().get(s)) sum += s.size();
          } else if (k == "ts" || k == "dur" || k == "pid" || k == "tid") {
            sum += v.raw_json_token().value().size();
          } else if (k == "args") {
            simdjson::ondemand::object args;
            if (v.get_object().get(args)) continue;
            for (auto a : args) {
              std::string_view ak = a.unescaped_key().value();
              if (ak == "stream" || ak == "device" || ak == "correlation" || ak == "External id") {
                int64_t x;
                if (!a.value().get_int64().get(x)) sum += static_cast<uint64_t>(x);
              }
            }
          }
        }
      }
    }
    double s = cpu_seconds() - t0;
    best = s < best ? s : best;
    check = events + sum;
    std::printf("run %d: %.3f s CPU, %llu events, %.0f MB/s\n", r, s,
                static_cast<unsigned long long>(events), json.size() / 1e6 / s);
  }
  std::printf("simdjson %s on-demand (%s): best %.0f MB/s (check %llu)\n",
              SIMDJSON_STRINGIFY(SIMDJSON_VERSION),
              simdjson::get_active_implementation()->name().c_str(), json.size() / 1e6 / best,
              static_cast<unsigned long long>(check));
  return 0;
}
