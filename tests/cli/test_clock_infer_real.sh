#!/usr/bin/env bash
# Clock inference on real traces (../shared/traces): the HTA trace_filter pair (2 ranks sampled
# from a 128-rank job, SendRecv kernels only, no peers recorded). Its SendRecvs need not pair the
# two ranks with each other (each may exchange with a third rank), so they bound nothing between
# them: the inference must say "too little evidence", keep the clocks as recorded, and the ledger
# keep its caution. (The Nsight Systems pair needs the nsys importer: not on this branch.)
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
finish
