#!/usr/bin/env bash
# --compat hta reproduces HTA v0.6.1's per-rank overlap %, temporal breakdown and idle breakdown
# on every real trace in ../shared/traces, within 0.01 percentage points / 1 µs per figure.
# Reference figures: ../shared/traces/README.md (computed by HTA itself).
source "$(dirname "$0")/lib.sh"
need_traces

run() {  # run NAME ARGS...: JSON report into $TMP/NAME.json
  local name=$1
  shift
  "$BIN/kernalyse-merge" "$@" --compat hta --overlap --breakdown --idle --json -q >"$TMP/$name.json"
  expect_eq "$name: exit code" "$?" "0"
}
run trace_filter "$TRACES/hta/trace_filter"
run nccl_parser_config "$TRACES/hta/nccl_parser_config/nccl_data.json.gz"
run df_index_resolver "$TRACES/hta/df_index_resolver/df_index_resolver.json.gz"
run negative_queue "$TRACES/hta/negative_queue_length_values_check/rank0.json.gz"
run control "$TRACES/hta/trace_diff/control/control.json.gz"
run test "$TRACES/hta/trace_diff/test/test.json.gz"
run b200 "$TRACES/tracelens/b200/eager_trace.json.gz"
run mi300 "$TRACES/tracelens/mi300/resnet_act_checkpoint.json.gz"

/usr/bin/python3 - "$TMP" <<'PY'
import json, sys
tmp = sys.argv[1]
# (file, rank): idle, compute, non-compute, span (µs), overlap %  -- HTA reference tables
ref = {
    ("trace_filter", 0): (321378, 106252, 172428, 600058, 11.81),
    ("trace_filter", 1): (328671, 135548, 136455, 600674, 20.05),
    ("nccl_parser_config", 0): (338781, 75169, 21636, 435586, 14.31),
    ("df_index_resolver", 1): (643612, 496485, 256572, 1396669, 0.0),
    ("negative_queue", 0): (705853, 143836, 166865, 1016554, 1.37),
    ("control", 3): (62119, 234760, 86525, 383404, 47.03),
    ("test", 1): (46910, 429216, 152245, 628371, 68.80),
    ("b200", 0): (73669, 10153, 664, 84486, 0.0),
    ("mi300", 0): (1541, 17018, 37958, 56517, 22.45),
}
idle_ref = {  # trace_filter: (rank, stream): host_wait / kernel_wait / other, µs
    (0, 7): (213825, 1985, 261740), (0, 23): (596037, 70, 34), (0, 25): (0, 9, 47865),
    (0, 84): (148934, 6, 0), (1, 7): (156827, 1816, 281064), (1, 23): (596313, 100, 0),
    (1, 25): (0, 9, 53028), (1, 84): (251860, 0, 23247),
}
passed = failed = 0
def check(what, got, want, tol):
    global passed, failed
    if got is not None and abs(got - want) <= tol:
        passed += 1
    else:
        failed += 1
        print(f"FAIL - {what}: got {got}, want {want} (tolerance {tol})")
for (name, rank), (idle, comp, noncomp, span, ov) in ref.items():
    j = json.load(open(f"{tmp}/{name}.json"))
    b = [r for r in j["breakdown"] if r["rank"] == rank]
    o = [r for r in j["overlap"] if r["rank"] == rank]
    if len(b) != 1 or len(o) != 1:
        failed += 1
        print(f"FAIL - {name} rank {rank}: no breakdown/overlap row")
        continue
    b, o = b[0], o[0]
    check(f"{name} r{rank} idle_us", b["idle_us"], idle, 1)
    check(f"{name} r{rank} compute_us", b["compute_us"], comp, 1)
    check(f"{name} r{rank} non_compute_us", b["non_compute_us"], noncomp, 1)
    check(f"{name} r{rank} span_us", b["span_us"], span, 1)
    for key, val in (("idle_pct", idle), ("compute_pct", comp), ("non_compute_pct", noncomp)):
        check(f"{name} r{rank} {key}", b[key], round(100 * val / span, 2), 0.01)
    # HTA prints 0.0 for a rank whose communication never overlaps; we print the same, and
    # null only where there is no communication at all (HTA: NaN).
    got = o["overlap_pct"] if o["overlap_pct"] is not None else 0.0
    check(f"{name} r{rank} overlap_pct", got, ov, 0.01)
j = json.load(open(f"{tmp}/trace_filter.json"))
for (rank, stream), (hw, kw, ot) in idle_ref.items():
    r = [x for x in j["idle"] if x["rank"] == rank and x["stream"] == stream]
    if len(r) != 1:
        failed += 1
        print(f"FAIL - idle rank {rank} stream {stream}: missing")
        continue
    check(f"idle r{rank} s{stream} host_wait_us", r[0]["host_wait_us"], hw, 1)
    check(f"idle r{rank} s{stream} kernel_wait_us", r[0]["kernel_wait_us"], kw, 1)
    check(f"idle r{rank} s{stream} other_us", r[0]["other_us"], ot, 1)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
expect_eq "HTA reference figures" "$?" "0"
finish
