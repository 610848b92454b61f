#!/usr/bin/env bash
# Real traces through the CLI into a store, checked independently with h5py:
# - the trace_filter pair becomes one store with ranks 0 and 1 and the README's kernel counts;
# - the ns-resolution trace round-trips exactly: every GPU event's start/end in the store equals
#   baseTimeNanoseconds + the decimal text of ts (and ts+dur) × 1000, computed with Decimal.
source "$(dirname "$0")/lib.sh"
need_traces

"$BIN/kernalyse-merge" "$TRACES/hta/trace_filter" -o "$TMP/pair.h5" -q
expect_eq "trace_filter import" "$?" "0"
ns_file="$TRACES/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
"$BIN/kernalyse-merge" "$ns_file" -o "$TMP/ns.h5" -q
expect_eq "ns trace import" "$?" "0"

/usr/bin/python3 - "$TMP" "$ns_file" <<'PY'
import sys, gzip, json, decimal
import h5py, numpy as np
tmp, ns_file = sys.argv[1], sys.argv[2]
passed = failed = 0
def check(what, ok, detail=""):
    global passed, failed
    if ok: passed += 1
    else:
        failed += 1
        print("FAIL -", what, detail)

f = h5py.File(f"{tmp}/pair.h5", "r")
check("ranks table", list(f["ranks/rank"][:]) == [0, 1], f["ranks/rank"][:])
rank, kind = f["activities/rank"][:], f["activities/kind"][:]
check("rank 0 kernels", int(((rank == 0) & (kind == 0)).sum()) == 1154)
check("rank 1 kernels", int(((rank == 1) & (kind == 0)).sum()) == 1104)
check("start_ns is int64", f["activities/start_ns"].dtype == np.int64)

# Exact µs → ns: parse the JSON with Decimal, compare every GPU event.
d = json.load(gzip.open(ns_file), parse_float=decimal.Decimal)
base = int(d.get("baseTimeNanoseconds", 0))
want = sorted(
    (base + int(decimal.Decimal(e["ts"]) * 1000), base + int((decimal.Decimal(e["ts"]) + decimal.Decimal(e["dur"])) * 1000))
    for e in d["traceEvents"]
    if e.get("ph") == "X" and e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
g = h5py.File(f"{tmp}/ns.h5", "r")["activities"]
got = sorted(zip(g["start_ns"][:].tolist(), g["end_ns"][:].tolist()))
check("ns trace: same number of GPU events", len(got) == len(want), (len(got), len(want)))
bad = sum(1 for x, y in zip(got, want) if x != y)
check("ns trace: every start/end exact to the ns", bad == 0, f"{bad} differ")
frac = sum(1 for e in d["traceEvents"] if e.get("cat") == "kernel" and "." in str(e["ts"]))
check("ns trace really has fractional µs", frac > 1000, frac)
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
expect_eq "store contents" "$?" "0"
finish
