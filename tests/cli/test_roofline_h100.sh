#!/usr/bin/env bash
# Performance model on the five real H100 traces recorded with record_shapes (TraceLens
# tests/traces/h100): for every aten::mm / addmm / bmm, the roofline's FLOPs equal 2·M·N·K (plus
# M·N for addmm's bias add) computed here from "Input Dims", summed over the op's calls (op calls
# with GPU work, joined kernel → launch correlation → "External id" → cpu_op, independently of the
# importer), its time is the sum of those kernels' durations, and its FLOP/s is FLOPs / that
# time. The same trace with the shapes removed: every op is listed as lacking shapes, and no row
# carries FLOPs or bytes (nothing invented). A store written with -o gives the same roofline.
source "$(dirname "$0")/lib.sh"
need_traces
D="$TRACES/kineto/tracelens_h100_hf"
if [ ! -d "$D" ]; then echo "SKIP: $D absent"; exit 77; fi
PY=/usr/bin/python3

n=0
for f in "$D"/*.json.gz; do
  n=$((n + 1))
  b=$(basename "$f" .json.gz)
  if ! kernalyse-merge -q "$f" --roofline --json > "$TMP/$b.json" 2> "$TMP/$b.err"; then
    fail "$b: kernalyse-merge --roofline failed: $(cat "$TMP/$b.err")"
    continue
  fi
  out=$("$PY" - "$f" "$TMP/$b.json" <<'PY'
import gzip, json, sys
from collections import defaultdict
trace = json.load(gzip.open(sys.argv[1], "rt"))
rep = json.load(open(sys.argv[2]))
ev = [e for e in trace["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
ops = {e["args"]["External id"]: e for e in ev
       if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
ext_of = {}
for e in ev:
    if e.get("cat") in ("cuda_runtime", "cuda_driver"):
        a = e.get("args", {})
        if "correlation" in a and "External id" in a:
            ext_of[a["correlation"]] = a["External id"]
def ns(us):  # the importer parses the decimal µs text exactly; float µs rounds to the same ns
    return round(us * 1000)
want = defaultdict(lambda: [0.0, 0, set()])  # (op, dims) -> flops, time_ns, calls
for e in ev:
    if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
        continue
    x = ext_of.get(e.get("args", {}).get("correlation"))
    op = ops.get(x)
    if op is None or op["name"] not in ("aten::mm", "aten::addmm", "aten::bmm"):
        continue
    d = op["args"]["Input Dims"]
    key = (op["name"], json.dumps(d, separators=(",", ":")))
    w = want[key]
    if x not in w[2]:
        w[2].add(x)
        if op["name"] == "aten::mm":
            (M, K), (_, N) = d[0], d[1]
            w[0] += 2 * M * N * K
        elif op["name"] == "aten::addmm":
            (M, K), (_, N) = d[1], d[2]
            w[0] += 2 * M * N * K + M * N
        else:
            (B, M, K), (_, _, N) = d[0], d[1]
            w[0] += 2 * B * M * N * K
    w[1] += ns(e["ts"] + e["dur"]) - ns(e["ts"])  # end − start as the importer stores them
got = defaultdict(lambda: [0.0, 0, 0, 0.0])
for r in rep["roofline"]:
    if r["op"] in ("aten::mm", "aten::addmm", "aten::bmm"):
        g = got[(r["op"], r["shape"])]
        g[0] += r["flops"]; g[1] += r["time_ns"]; g[2] += r["count"]
        # Each row's own rate is its FLOPs over its own kernel time.
        if abs(r["flops_per_s"] - r["flops"] / (r["time_ns"] * 1e-9)) > 1e-9 * r["flops_per_s"]:
            print("BAD rate", r["op"], r["shape"], r["flops_per_s"])
bad = 0
for k, (f, t, calls) in want.items():
    g = got.get(k)
    if g is None:
        print("MISSING", k); bad += 1; continue
    # Kineto's float µs: each end/start may round to the neighbouring ns (≤ 1 ns per kernel).
    if g[0] != f or g[2] != len(calls) or abs(g[1] - t) > 2 * len(calls) * 4:
        print("DIFF", k, "flops", g[0], f, "calls", g[2], len(calls), "time", g[1], t); bad += 1
extra = set(got) - set(want)
for k in extra:
    print("EXTRA", k); bad += 1
print("CHECKED", len(want), "BAD", bad, "TFLOPS", " ".join(
    "%s=%.1f" % (k[0].split("::")[1], want[k][0] / want[k][1] / 1e3) for k in sorted(want)[:3]))
PY
)
  case "$out" in
    *"BAD 0"*) if [ "$(echo "$out" | grep -c 'BAD rate')" = 0 ]; then
                 pass "$b: $(echo "$out" | tail -1)"
               else fail "$b: $out"; fi ;;
    *) fail "$b: $out" ;;
  esac
done
expect_eq "five H100 traces checked" "$n" 5

# At least one trace has GEMMs to check (a trace set without any would pass vacuously).
f="$D/Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz"
rows=$("$PY" -c 'import json,sys; r=json.load(open(sys.argv[1]))["roofline"]; print(sum(1 for x in r if x["op"] in ("aten::mm","aten::addmm")))' "$TMP/Qwen_Qwen1.5-0.5B-Chat__1016005.json")
if [ "$rows" -ge 3 ]; then pass "Qwen: $rows mm/addmm shape rows"; else fail "Qwen: only $rows mm/addmm rows"; fi

# Store round trip: the roofline read from a store equals the one computed on import.
kernalyse-merge -q "$f" -o "$TMP/q.h5" 2>/dev/null
kernalyse-merge -q "$TMP/q.h5" --roofline --json > "$TMP/q_store.json"
same=$("$PY" -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); print(a["roofline"]==b["roofline"] and a["roofline_kernels"]==b["roofline_kernels"])' "$TMP/Qwen_Qwen1.5-0.5B-Chat__1016005.json" "$TMP/q_store.json")
expect_eq "roofline from the store equals the import's" "$same" True

# Without shapes: the same trace with Input Dims / Input type / Concrete Inputs removed.
"$PY" - "$f" "$TMP/noshapes.json" <<'PY'
import gzip, json, sys
t = json.load(gzip.open(sys.argv[1], "rt"))
for e in t["traceEvents"]:
    a = e.get("args") if isinstance(e, dict) else None
    if isinstance(a, dict):
        for k in ("Input Dims", "Input type", "Concrete Inputs", "Input Strides"):
            a.pop(k, None)
json.dump(t, open(sys.argv[2], "w"))
PY
kernalyse-merge -q "$TMP/noshapes.json" --roofline --hints --json > "$TMP/noshapes_out.json"
res=$("$PY" - "$TMP/noshapes.json" "$TMP/noshapes_out.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1])); r = json.load(open(sys.argv[2]))
ev = [e for e in t["traceEvents"] if isinstance(e, dict) and e.get("ph") == "X"]
ops = {e["args"]["External id"]: e["name"] for e in ev
       if e.get("cat") == "cpu_op" and "External id" in e.get("args", {})}
ext = {e["args"]["correlation"]: e["args"].get("External id") for e in ev
       if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
gpu = {ops[ext[e["args"]["correlation"]]] for e in ev
       if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")
       and ext.get(e["args"].get("correlation")) in ops}
listed = {m["op"] for m in r["roofline_unmodelled"] if m["why"] == "no shapes recorded"}
invented = [x for x in r["roofline"] + r["roofline_kernels"]
            if x["flops"] is not None or x["bytes"] is not None or x["pct_of_bound"] is not None]
cls = {x["class"] for x in r["roofline"]}
print(listed == gpu, len(gpu), len(invented), sorted(cls - {"latency-bound", "host-launch-bound",
      "communication", "unknown"}), len(r["hints"]))
PY
)
read -r same_ops n_ops n_invented odd nh <<< "$res"
expect_eq "no shapes: every op with GPU work listed as lacking shapes ($n_ops ops)" "$same_ops" True
expect_eq "no shapes: no row carries FLOPs, bytes or % of bound" "$n_invented" 0
expect_eq "no shapes: no compute/memory class from invented work" "$odd" "[]"
finish
