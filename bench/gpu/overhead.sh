#!/usr/bin/env bash
# Where the collection overhead of check (a) goes, on the lent GPU machine, after validate.sh has
# built kernalyse (it reuses $KERNALYSE_GPU_WORK/build and the prefix). The decode loop of check
# (a) runs bare and under kernalyse-run with parts of the collection left off
# (KERNALYSE_CUPTI_SKIP, docs/collector.md), all configurations round-robin, RUNS rounds; the
# median decode loop of each against the bare median. Also: the cost of the clock reads the
# collector makes per record (CLOCK_MONOTONIC_RAW vs CLOCK_MONOTONIC, this machine's clock
# source), and NVML's power reading as nvidia-smi sees it.
# Usage (device tool): bench/gpu/validate.sh; bench/gpu/overhead.sh   → $OUT/overhead.json
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
WORK=${KERNALYSE_GPU_WORK:-/tmp/kernalyse-gpu}
RUNS=${OVERHEAD_RUNS:-5}
res=${OUT:-$root/gpu-results}
bin=$WORK/build/bin
mkdir -p "$res" "$WORK/overhead"
R=$WORK/overhead
# shellcheck disable=SC1091
source "$WORK/prefix/env.sh" || exit 2
[ -x "$bin/vicuna_tp_cuda" ] || { echo "overhead.sh: run validate.sh first (no $bin/vicuna_tp_cuda)"; exit 2; }

echo "== clock source: $(cat /sys/devices/system/clocksource/clocksource0/current_clocksource 2>/dev/null)"
cat > "$R/clk.c" <<'C'
#include <stdio.h>
#include <time.h>
static long long ns(clockid_t c) { struct timespec t; clock_gettime(c, &t); return t.tv_sec * 1000000000LL + t.tv_nsec; }
int main(void) {
  const clockid_t ids[] = {CLOCK_MONOTONIC_RAW, CLOCK_MONOTONIC};
  const char* names[] = {"CLOCK_MONOTONIC_RAW", "CLOCK_MONOTONIC"};
  for (int k = 0; k < 2; ++k) {
    long long t0 = ns(CLOCK_MONOTONIC), s = 0;
    for (int i = 0; i < 1000000; ++i) s += ns(ids[k]) & 1;
    printf("%s: %.1f ns per read (%lld)\n", names[k], (ns(CLOCK_MONOTONIC) - t0) / 1e6, s & 0);
  }
  return 0;
}
C
gcc -O2 -o "$R/clk" "$R/clk.c" && "$R/clk" | sed 's/^/== /'
echo "== nvidia-smi power: $(nvidia-smi --query-gpu=power.draw,power.draw.instant,power.limit --format=csv,noheader 2>&1 | head -1)"

A="--layers 8 --hidden 4096 --batch 8 --steps 100 --warmup 5"
# OVERHEAD_MPIRUN_ARGS: added to every mpirun (e.g. --bind-to none: Open MPI 4 binds a job of
# one or two processes to one core each, so the app's launch thread, CUPTI's threads and the
# collector's flush share that core).
read -r -a mpi_extra <<< "${OVERHEAD_MPIRUN_ARGS:-}"
run1() { timeout 300 mpirun -n 1 "${mpi_extra[@]}" "$@" < /dev/null; }
echo "== mpirun -n 1 ${OVERHEAD_MPIRUN_ARGS:-}: $(run1 grep Cpus_allowed_list /proc/self/status)"
quick=0
[ "${OVERHEAD_CONFIGS:-}" = binding ] && quick=1
if [ "$quick" = 0 ]; then
# One profiled run that is not quiet: what the collector says about itself (power samples).
run1 "$bin/kernalyse-run" --force --nvtx -o "$R/loud.h5" "$bin/vicuna_tp_cuda" --layers 1 --steps 5 > "$R/loud.log" 2>&1
grep -i "kernalyse" "$R/loud.log" | head -8 | sed 's/^/== loud run: /'
"$bin/kernalyse-merge" "$R/loud.h5" --summary --verbose --json 2> /dev/null | python3 -c '
import json, sys
r = json.load(sys.stdin)["ranks"]
print("== loud run (a run shorter than the flush period): peak power per rank and GPU, mW:", [x.get("peak_gpu_power_mw") for x in r])'
fi

# name|env|kernalyse-run flags ("-" = bare)|app flags added to $A. The graph_ pair runs the same
# decode loop with its layers replayed from a CUDA graph (vicuna_tp_cuda --cuda-graph): fewer
# launches, so the collection's cost per kernel record shows alone. Set OVERHEAD_CONFIGS=all for
# the attribution of the first GPU run (every part of the collection left off in turn).
configs=(
  "bare||-|"
  "default|||"
  "nvtx||--nvtx|"
  "graph_bare||-|--cuda-graph"
  "graph_nvtx||--nvtx|--cuda-graph"
)
[ "${OVERHEAD_CONFIGS:-}" = all ] && configs+=(
  "nvtx_all_driver_records|KERNALYSE_CUPTI_SKIP=driverfilter|--nvtx"
  "nvtx_no_driver_records|KERNALYSE_CUPTI_SKIP=driver|--nvtx"
  "power_off|KERNALYSE_POWER_MS=0|--nvtx"
  "skip_callbacks|KERNALYSE_CUPTI_SKIP=callbacks|--nvtx"
  "skip_clock|KERNALYSE_CUPTI_SKIP=clock|--nvtx"
  "skip_runtime_driver|KERNALYSE_CUPTI_SKIP=runtime,driver|--nvtx"
  "kernels_only|KERNALYSE_CUPTI_SKIP=driver,runtime,callbacks,memory,marker,clock KERNALYSE_POWER_MS=0|"
)
# OVERHEAD_CONFIGS=graph: where the cost under CUDA graphs goes (the second GPU run of
# 2026-11-28: graph_nvtx +7.5 % against graph_bare, steady over 5 rounds).
[ "${OVERHEAD_CONFIGS:-}" = graph ] && configs+=(
  "graph_default|||--cuda-graph"
  "graph_no_runtime_driver|KERNALYSE_CUPTI_SKIP=runtime,driver|--nvtx|--cuda-graph"
  "graph_no_callbacks|KERNALYSE_CUPTI_SKIP=callbacks|--nvtx|--cuda-graph"
  "graph_kernels_only|KERNALYSE_CUPTI_SKIP=driver,runtime,callbacks,memory,marker,clock KERNALYSE_POWER_MS=0||--cuda-graph"
)
# OVERHEAD_CONFIGS=binding: the decode loop's bimodal runs (a run either near bare or 6-10 %
# above it): the collector's periodic flush, moved past the run, against the default.
[ "$quick" = 1 ] && configs=("bare||-|" "default|||" "nvtx||--nvtx|"
  "default_flush_60s|KERNALYSE_CUPTI_FLUSH_MS=60000||")
# Which API records a step makes, with and without the driver filter (--export-kineto).
[ "$quick" = 0 ] && for v in "api_filtered|" "api_all|driverfilter"; do
  IFS='|' read -r name skip <<< "$v"
  KERNALYSE_CUPTI_SKIP=$skip run1 "$bin/kernalyse-run" -q --force --nvtx -o "$R/$name.h5" \
    "$bin/vicuna_tp_cuda" --layers 8 --steps 10 --warmup 0 > /dev/null 2>&1
  rm -rf "$R/$name-kineto"
  "$bin/kernalyse-merge" "$R/$name.h5" --export-kineto "$R/$name-kineto" > /dev/null 2>&1
  python3 - "$R/$name-kineto/rank-0.json" "$name" <<'PY'
import collections, json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
c = collections.Counter((e["cat"], e["name"]) for e in ev if e.get("cat") in ("cuda_runtime", "cuda_driver"))
print(f"== {sys.argv[2]}: {sum(c.values())} API records (10 steps of 8 layers); most frequent: " +
      ", ".join(f"{n} {k}" for (cat, n), k in c.most_common(8)))
PY
done

for i in $(seq "$RUNS"); do
  for c in "${configs[@]}"; do
    IFS='|' read -r name envs flags extra <<< "$c"
    out="$R/$name-$i.json"
    if [ "$flags" = "-" ]; then
      # shellcheck disable=SC2086
      run1 "$bin/vicuna_tp_cuda" $A $extra --report-json "$out" > "$R/$name-$i.log" 2>&1
    else
      # shellcheck disable=SC2086
      env $envs timeout 300 mpirun -n 1 "${mpi_extra[@]}" \
        "$bin/kernalyse-run" -q --force $flags -o "$R/$name.h5" "$bin/vicuna_tp_cuda" $A $extra \
        --report-json "$out" < /dev/null > "$R/$name-$i.log" 2>&1
    fi
  done
done
python3 - "$R" "$RUNS" "$res/overhead.json" "${configs[@]}" <<'PY'
import json, statistics, sys
R, runs, dest, configs = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
rows, bases = [], {}  # each against its own bare run: graph_* against graph_bare
for c in configs:
    name = c.split("|")[0]
    loops = []
    for i in range(1, runs + 1):
        try:
            loops.append(json.load(open(f"{R}/{name}-{i}.json"))["decode_loop_ns_max"])
        except Exception:
            pass
    med = statistics.median(loops) if loops else None
    group = "graph" if name.startswith("graph_") else ""
    if name.endswith("bare"):
        bases[group] = med
    base = bases.get(group)
    rows.append({"config": name, "setting": " ".join(x for x in c.split("|")[1:] if x not in ("", "-")), "runs_ns": loops, "median_ns": med,
                 "overhead_pct": round(100 * (med / base - 1), 2) if med and base else None})
json.dump({"rows": rows}, open(dest, "w"), indent=1)
print("| configuration | setting | median decode loop | vs bare |\n|---|---|---|---|")
for r in rows:
    m = f"{r['median_ns'] / 1e6:.2f} ms" if r["median_ns"] else "failed"
    print(f"| {r['config']} | `{r['setting']}` | {m} | {r['overhead_pct']} % |")
PY
