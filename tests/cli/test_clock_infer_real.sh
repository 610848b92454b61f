#!/usr/bin/env bash
# Clock inference on real traces (../shared/traces): the HTA trace_filter pair (2 ranks sampled
# from a 128-rank job, SendRecv kernels only, no peers recorded). Its SendRecvs need not pair the
# two ranks with each other (each may exchange with a third rank), so they bound nothing between
# them: the inference must say "too little evidence", keep the clocks as recorded, and the ledger
# keep its caution. The Nsight Systems pair (two nodes, hosts named by the reports) holds a single
# all-reduce across its two hosts: one instance bounds an offset but cannot state a ± from
# completion, so the inference must decline with that reason and keep the recorded clocks, which
# already satisfy happened-before on that all-reduce; the same holds for a store written with -o.
source "$(dirname "$0")/lib.sh"
need_traces
PY=/usr/bin/python3
cd "$TMP"
TF="$TRACES/hta/trace_filter"
[ -d "$TF" ] || { echo "SKIP: $TF absent"; exit 77; }
kernalyse-merge "$TF" --stragglers --json -q >tf.json
expect_eq "trace_filter: exit code" "$?" "0"
"$PY" - tf.json <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ci = d["clock_inference"]
print("#", ci["summary"])
for n in ci["notes"]: print("#", n)
cc = d["stragglers"]["clock_check"]
print("# ledger clock check:", cc)
ok = not ci["ok"] and ci["why"].startswith("too little evidence")
ok = ok and "peer is not recorded" in ci["why"] and "128 ranks" in ci["why"]
ok = ok and all(r["clock_method"].startswith("none") and r["clock_offset_ns"] == 0 for r in d["ranks"])
ok = ok and cc["violations_aligned"] == 0
sys.exit(0 if ok else 1)
PY
expect_eq "trace_filter: too little evidence said, clocks kept as recorded" "$?" "0"
expect_contains "trace_filter: the ledger keeps its caution" "$(kernalyse-merge "$TF" --stragglers -q)" "clocks were not aligned"
NS="$TRACES/nsys/allreduce_2nodes_2gpus"
if [ -d "$NS" ]; then
  kernalyse-merge "$NS" --stragglers --json -q >ns.json 2>/dev/null
  expect_eq "nsys pair: exit code" "$?" "0"
  kernalyse-merge "$NS" -o ns.h5 -q 2>/dev/null && kernalyse-merge ns.h5 --stragglers --json -q >ns-store.json
  expect_eq "nsys pair via -o store: exit code" "$?" "0"
  for f in ns.json ns-store.json; do
    "$PY" - "$f" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
ci, st = d["clock_inference"], d["stragglers"]
c = st["collectives"]
print("#", sys.argv[1], ci["summary"], "| hosts", [h["host"] for h in ci["hosts"]],
      "| clock check", st["clock_check"], "| skew_us", c[0]["skew_us"] if c else None,
      "completion_skew_us", c[0]["completion_skew_us"] if c else None)
ok = not ci["ok"] and ci["why"] == "too little evidence: a single collective spans two hosts"
ok = ok and sorted(h["host"] for h in ci["hosts"]) == ["ault43.cscs.ch", "ault44.cscs.ch"]
ok = ok and ci["collectives"] == 1 and len(c) == 1
ok = ok and st["clock_check"]["nxn_instances"] == 1 and st["clock_check"]["violations_aligned"] == 0
ok = ok and all(r["clock_method"].startswith("none") for r in d["ranks"])
ok = ok and st["clock_caution"].startswith("caution: these ranks' clocks were not aligned")
sys.exit(0 if ok else 1)
PY
    expect_eq "nsys pair ($f): declines on one collective, 0 happened-before violations as recorded" "$?" "0"
  done
else
  echo "# SKIP nsys pair: $NS absent"
fi
finish
