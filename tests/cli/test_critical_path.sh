#!/usr/bin/env bash
# Critical path and what-if (docs/analyses.md, "Critical path"):
# 1. Validation against reality: emulated 4- and 8-rank vicuna_tp jobs with rank 2 slowed 1.3x
#    predict (--what-if rank=2:median) the step time that the same job without --slow-rank
#    measures, within 5 % (medians over steps); the two runs do the same work (rank 0's kernel
#    durations are identical to the ns).
# 2. Planted truth (tracegen): with rank 2 slowed, the path is rank 2's chain, and it passes through
#    exactly the collectives that the next compute kernel on rank 2 waited for (computed from the
#    trace file, not from the store); a planted host launch delay shows up as host time.
# 3. HTA's single-rank fixtures: path = span - slack, the kinds sum to the path, and speeding up a
#    kernel off the path saves nothing (the graph proves its slack).
# 4. Bad --what-if specs: one line, exit 2.
source "$(dirname "$0")/lib.sh"
use_mpi
cd "$TMP"
py() { /usr/bin/python3 -c "$@"; }

# ---- 1. vicuna_tp: predicted vs measured -------------------------------------------------------
# --modelled-collectives: a collective ends its transfer after the last modelled arrival, so the
# loaded machine's MPI scheduling delays do not differ between the two runs.
# Both run at time scale 6, so that scheduling stalls stay small against the modelled kernels.
# At 3, with a fuzzer on one core, the 8-rank prediction missed by 7 % and rank 2 held 84 % of the
# slowed path (1 of 5 clean-clone suite runs, 2026-11-26); with a sanitizer build on one core the
# 4-rank one missed by 19.5 %, rank 2 holding 54.6 % (1 of 2, 2026-11-28).
for n in 4 8; do
  EMU="--layers 2 --steps 6 --time-scale 6 --modelled-collectives --seed 7"
  mpirun -n $n "$BIN/kernalyse-run" -q -o slow$n.h5 "$BIN/vicuna_tp" $EMU --slow-rank 2 \
    --slow-factor 1.3 2>/dev/null
  expect_eq "$n ranks, slowed run: exit code" "$?" "0"
  mpirun -n $n "$BIN/kernalyse-run" -q -o even$n.h5 "$BIN/vicuna_tp" $EMU 2>/dev/null
  expect_eq "$n ranks, unslowed run: exit code" "$?" "0"
  "$BIN/kernalyse-merge" slow$n.h5 --what-if rank=2:median --json -q > slow$n.json
  expect_eq "$n ranks: --what-if exit code" "$?" "0"
  "$BIN/kernalyse-merge" even$n.h5 --critical-path --json -q > even$n.json
  out=$(py '
import json, statistics, sys
s = json.load(open(sys.argv[1])); e = json.load(open(sys.argv[2]))
w = [x for x in s["what_if"] if x["scenario"] == "rank=2:median"]
pred = statistics.median(x["predicted_step_ns"] for x in w)
slow = statistics.median(x["measured_step_ns"] for x in w)
meas = statistics.median(st["span_ns"] for st in e["critical_path"]["steps"])
dev = 100.0 * (pred / meas - 1)
# The slowed run: rank 2 holds the path (its compute sets every collective).
cp = s["critical_path"]; r2 = sum(r["ns"] for r in cp["by_rank"] if r["rank"] == 2)
print("slowed %.3f ms, predicted %.3f ms, unslowed measured %.3f ms: %+.2f %%; rank 2 holds %.1f %% of the path"
      % (slow / 1e6, pred / 1e6, meas / 1e6, dev, 100.0 * r2 / cp["path_ns"]), file=sys.stderr)
print("within5" if abs(dev) <= 5 else "off", "slowed" if slow > 1.05 * meas else "notslowed",
      "r2path" if r2 >= 0.9 * cp["path_ns"] else "other")
' slow$n.json even$n.json)
  expect_eq "$n ranks: predicted (rank=2:median) within 5 % of the unslowed run's measured step; slowed run >5 % slower; rank 2 holds >= 90 % of its path" "$out" "within5 slowed r2path"
  # Same seed, same work: rank 0's kernels last exactly as long in both runs.
  same=$(py '
import h5py, sys
def durs(f):
    a = h5py.File(f)["activities"]
    r = a["rank"][:]; c = a["category"][:]
    d = (a["end_ns"][:] - a["start_ns"][:])[(r == 0) & (c == 0)]
    return list(d)
x, y = durs(sys.argv[1]), durs(sys.argv[2])
print("same" if x == y and len(x) > 0 else "differ %d %d" % (len(x), len(y)))
' slow$n.h5 even$n.h5)
  expect_eq "$n ranks: rank 0's compute kernel durations identical with and without --slow-rank" "$same" "same"
done

# ---- 2. tracegen: planted chain and planted host delay ------------------------------------------
"$BIN/kernalyse-tracegen" --ranks 4 --kernels 1200 --steps 4 --slow-rank 2 --slow-factor 1.5 \
  --out slow >/dev/null 2>&1
"$BIN/kernalyse-merge" slow --critical-path --align off --json -q > tslow.json
expect_eq "tracegen slow rank: exit code" "$?" "0"
out=$(py '
import json, sys
d = json.load(open(sys.argv[1])); tr = json.load(open(sys.argv[2] + "/rank-2.json"))
base = tr["baseTimeNanoseconds"]
ns = lambda us: base + round(us * 1000)
ev = tr["traceEvents"]
launch = {e["args"]["correlation"]: ns(e["ts"]) for e in ev if e.get("cat") == "cuda_runtime"}
steps = [(int(e["name"].split("#")[1]), ns(e["ts"]), ns(e["ts"] + e["dur"])) for e in ev
         if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#")]
def step_of(e):
    t = launch.get(e["args"].get("correlation"))
    for n, a, b in steps:
        if t is not None and a <= t < b: return n
    return None
gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
bad = []
for st in d["critical_path"]["steps"]:
    n = st["step"]
    mine = [e for e in gpu if step_of(e) == n]
    comp = sorted((ns(e["ts"]), ns(e["ts"] + e["dur"])) for e in mine if e["args"]["stream"] == 7)
    coll = sorted((ns(e["ts"]), ns(e["ts"] + e["dur"])) for e in mine if e["args"]["stream"] != 7)
    p0 = st["path_start_ns"]
    starts = {s for s, _ in comp}
    # A collective is on the chain when the next compute kernel started exactly at its end.
    want_c = {c for c in coll if c[0] >= p0 and c[1] in starts}
    want_k = {s for s, e in comp if s >= p0 and not any(c[0] - 5000 <= s and e <= c[1] for c in want_c)}
    segs = st["segments"]
    if st["segments_total"] != len(segs): bad.append("segments cut")
    got_c = {(g["start_ns"], g["end_ns"]) for g in segs if g["kind"] == "comm_transfer"}
    got_c = {c for c in coll if c[1] in {e for _, e in got_c}}
    got_k = {g["start_ns"] for g in segs if g["kind"] == "compute"}
    gpu_ranks = {g["rank"] for g in segs if g["kind"] in ("compute", "comm_transfer", "idle")}
    if gpu_ranks != {2}: bad.append("step %d ranks %s" % (n, gpu_ranks))
    if got_c != want_c: bad.append("step %d collectives %d vs %d" % (n, len(got_c), len(want_c)))
    if got_k != want_k: bad.append("step %d kernels %d vs %d (%d extra, %d missing)" % (n, len(got_k), len(want_k), len(got_k - want_k), len(want_k - got_k)))
    if sum(st["by_kind"].values()) != st["path_ns"]: bad.append("kinds do not sum")
    print("step %d: %d collectives and %d kernels on the path, as planted" % (n, len(want_c), len(want_k)), file=sys.stderr)
print(" ".join(bad) if bad else "planted")
' tslow.json slow)
expect_eq "tracegen --slow-rank 2: the path is rank 2's planted chain (collectives and kernels, from the trace file)" "$out" "planted"

D=200
"$BIN/kernalyse-tracegen" --ranks 4 --kernels 1200 --steps 4 --launch-delay-rank 1 \
  --launch-delay-us $D --out late >/dev/null 2>&1
"$BIN/kernalyse-merge" late --critical-path --align off --json -q > tlate.json
out=$(py '
import json, sys
d = json.load(open(sys.argv[1])); D = int(sys.argv[2]) * 1000
tr = json.load(open(sys.argv[3] + "/rank-1.json")); base = tr["baseTimeNanoseconds"]
ns = lambda us: base + round(us * 1000)
planted = [(ns(e["ts"]), ns(e["ts"] + e["dur"])) for e in tr["traceEvents"]
           if e.get("name") == "kernalyse::injected_launch_delay"]
bad = []
for st in d["critical_path"]["steps"]:
    segs = st["segments"]
    host = [g for g in segs if g["kind"] == "host"]
    delays = [g for g in host if g["end_ns"] - g["start_ns"] >= D]
    # Each long host stretch on the path holds exactly one planted delay, on rank 1.
    for g in delays:
        inside = [p for p in planted if g["start_ns"] <= p[0] and p[1] <= g["end_ns"]]
        if len(inside) != 1: bad.append("step %d: host stretch with %d planted delays" % (st["step"], len(inside)))
    if {g["rank"] for g in host} != {1}: bad.append("host ranks %s" % {g["rank"] for g in host})
    # Every collective on the path was reached through the delayed launch of its gate kernel.
    if not st["collectives_on_path"] <= len(delays) <= st["collectives"]:
        bad.append("step %d: %d delays, %d of %d collectives" % (st["step"], len(delays), st["collectives_on_path"], st["collectives"]))
    if st["by_kind"]["host_ns"] < D * len(delays): bad.append("host time short")
    print("step %d: host %.1f us on the path, %d planted delays of %d us on it, %d collectives on the path" % (st["step"], st["by_kind"]["host_ns"] / 1e3, len(delays), D // 1000, st["collectives_on_path"]), file=sys.stderr)
print(" ".join(bad) if bad else "host")
' tlate.json $D late)
expect_eq "tracegen --launch-delay-rank 1: planted host delays on the path are host time on rank 1, one per long host stretch, one per collective on the path" "$out" "host"

# ---- 3. HTA's critical-path fixtures (single rank) ----------------------------------------------
HTA="$TRACES/kineto/hta_critical_path"
if [ ! -d "$HTA" ]; then
  echo "SKIP part 3: $HTA absent"
else
  for dir in "$HTA"/*/; do
    name=$(basename "$dir")
    "$BIN/kernalyse-merge" "$dir" -q -o $name.h5
    "$BIN/kernalyse-merge" $name.h5 --critical-path --verbose --json -q > $name.json
    expect_eq "$name: exit code" "$?" "0"
    # Kernels off the path (full names); each sped up 1000x must save nothing.
    py '
import json, re, sys, h5py
d = json.load(open(sys.argv[1]))
on = {g["name"] for st in d["critical_path"]["steps"] for g in st["segments"] if g["kind"] == "compute"}
f = h5py.File(sys.argv[2]); names = f["strings"].asstr()[:]; a = f["activities"]
allk = {names[i] for i, k in zip(a["name_id"][:], a["kind"][:]) if k == 0}
for k in sorted(allk - on)[:6]:
    print("--what-if=kernel=^%s$:x1000" % re.escape(k).replace("\\ ", "\\x20"))
' $name.json $name.h5 > args.txt
    mapfile -t A < args.txt
    "$BIN/kernalyse-merge" $name.h5 --json -q "${A[@]}" > $name.wi.json
    out=$(py '
import json, sys
d = json.load(open(sys.argv[1])); w = json.load(open(sys.argv[2]))
bad = []
for st in d["critical_path"]["steps"]:
    if st["path_ns"] != st["span_ns"] - st["slack_ns"] or st["slack_ns"] < 0: bad.append("span")
    if sum(st["by_kind"].values()) != st["path_ns"]: bad.append("kinds")
    segs = st["segments"]
    if segs and (segs[-1]["end_ns"] != st["span_end_ns"] or segs[0]["start_ns"] != st["path_start_ns"]): bad.append("ends")
    if any(a["end_ns"] != b["start_ns"] for a, b in zip(segs, segs[1:])): bad.append("gaps")
saved = [x["saved_ns"] for x in w.get("what_if", [])]
if any(saved): bad.append("off-path kernels saved %s" % saved)
st = d["critical_path"]["steps"][0]
print("path %.1f us = span %.1f us - slack %.1f us; %d off-path kernel names sped up 1000x save %s" % (st["path_ns"]/1e3, st["span_ns"]/1e3, st["slack_ns"]/1e3, len(saved), set(saved)), file=sys.stderr)
print(" ".join(bad) if bad else "ok")
' $name.json $name.wi.json)
    expect_eq "$name: path = span - slack, contiguous segments, kinds sum to the path, off-path kernels have slack" "$out" "ok"
  done
fi

# ---- 4. bad input -------------------------------------------------------------------------------
for spec in "rank=x:median" "kernel=(:x2" "kernel=gemm:x0" "comm=sometimes" "rank=99:median"; do
  "$BIN/kernalyse-merge" even4.h5 --what-if "$spec" -q > /dev/null 2> err.txt
  rc=$?
  expect_eq "--what-if $spec: exit 2 with one line" "$rc $(wc -l < err.txt)" "2 1"
done
# Kernels whose correlation id has no launch (HTA's trace_compare files): the launch lookup said
# "none" as an unsigned -1 and the path read past the launches (SIGSEGV).
for f in "$TRACES/kineto/hta_trace_compare/base/base.json.gz" "$TRACES/hta/trace_diff/test/test.json.gz"; do
  if [ -f "$f" ]; then
    "$BIN/kernalyse-merge" "$f" --critical-path -q > /dev/null 2> err.txt
    expect_eq "--critical-path on $(basename "$f"): exit 0" "$?" "0"
  else
    echo "# skip: $f absent"
  fi
done
finish
