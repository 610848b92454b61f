#!/usr/bin/env bash
# Exports (docs/exports.md): --export-kineto round trips (store → Kineto JSON per rank → import →
# the same columns) on a tracegen pair, the shared HTA trace_filter pair and an emulated
# kernalyse-run store; --perfetto validated against the trace-event format (required fields, one
# pid per rank, named tracks, paired flows, per-track order, ≤ 3 fraction digits) and loaded back
# by our importer; --rank/--step/--from/--to cuts; .gz; no overwrite without --force.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
if ! "$PY" -c 'import h5py, numpy' 2>/dev/null; then
  echo "SKIP: $PY lacks h5py/numpy (apt-get install python3-h5py)"
  exit 77
fi
cd "$TMP" || exit 1

# compare ORIG BACK [RANK]: every column the Kineto format carries, strings resolved. The rank's
# nccl comm_hash/peer are not Kineto arguments our importer reads; NVTX ranges come back as user
# annotations (Kineto has no NVTX category).
cat >compare.py <<'EOF'
import sys, h5py, numpy as np
a, b = h5py.File(sys.argv[1], "r"), h5py.File(sys.argv[2], "r")
only = int(sys.argv[3]) if len(sys.argv) > 3 else None
sa, sb = a["strings"].asstr()[:], b["strings"].asstr()[:]
bad = []
def rows(f, t):
    if only is None: return np.arange(len(f[t]["activity" if t == "nccl" else "rank"]))
    return np.nonzero(f[t]["rank"][:] == only)[0]
def cmp(t, cols, strs=()):
    ra, rb = rows(a, t), rows(b, t)
    if len(ra) != len(rb):
        bad.append(f"{t}: {len(ra)} vs {len(rb)} rows"); return
    for c in cols:
        x, y = a[t][c][:][ra], b[t][c][:][rb]
        if c in strs: x, y = sa[x], sb[y]
        if t == "annotations" and c == "kind": x = np.where(x == 3, 1, x)
        if not np.array_equal(x, y):
            i = int(np.nonzero(x != y)[0][0])
            bad.append(f"{t}/{c}: first difference at row {i}: {x[i]!r} vs {y[i]!r}")
cmp("activities", ["rank", "device", "stream", "kind", "category", "start_ns", "end_ns", "name_id",
                   "correlation", "step"], {"name_id"})
cmp("launches", ["rank", "pid", "tid", "start_ns", "end_ns", "name_id", "correlation", "step"], {"name_id"})
cmp("annotations", ["rank", "kind", "pid", "tid", "start_ns", "end_ns", "name_id", "step"], {"name_id"})
if only is None:
    n = [c for c in ["activity", "collective_id", "seq", "pg_name_id", "pg_desc_id", "pg_ranks_id",
                     "group_size", "in_nelems", "out_nelems", "msg_bytes", "dtype_id"]]
    cmp("nccl", n, {"collective_id", "pg_name_id", "pg_desc_id", "pg_ranks_id", "dtype_id"})
print("same" if not bad else "\n".join(bad))
print(len(a["activities"]["rank"]), "activities,", len(a["launches"]["rank"]), "launches,",
      len(a["annotations"]["rank"]), "annotations,", len(a["nccl"]["activity"]), "nccl", file=sys.stderr)
EOF

# validate FILE: the trace-event format checks; prints "valid" or the problems.
cat >validate.py <<'EOF'
import collections, decimal, gzip, json, re, sys
p = sys.argv[1]
raw = (gzip.open(p, "rt") if p.endswith(".gz") else open(p)).read()
j = json.loads(raw, parse_float=str, parse_int=str)
ev, bad = j["traceEvents"], []
need = {"X": ["name", "ts", "dur", "pid", "tid", "cat"], "M": ["name", "pid", "args"],
        "s": ["name", "ts", "pid", "tid", "id", "cat"], "f": ["name", "ts", "pid", "tid", "id", "cat", "bp"],
        "i": ["name", "ts", "pid", "tid", "s"], "C": ["name", "ts", "pid", "args"]}
for e in ev:
    ph = e.get("ph")
    if ph not in need: bad.append(f"unknown ph {ph!r}"); continue
    miss = [k for k in need[ph] if k not in e]
    if miss: bad.append(f"{ph} event lacks {miss}: {e}")
    for k in ("ts", "dur"):
        if k in e and not re.fullmatch(r"-?\d+(\.\d{1,3})?", e[k]): bad.append(f"{k} {e[k]!r} not ≤3 decimals")
pids = sorted({e["pid"] for e in ev}, key=int)
pname = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
psort = {e["pid"]: e["args"]["sort_index"] for e in ev if e["ph"] == "M" and e["name"] == "process_sort_index"}
tname = {(e["pid"], e["tid"]): e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "thread_name"}
for pid in pids:
    if not re.match(rf"rank {pid} ", pname.get(pid, "")): bad.append(f"pid {pid}: process_name {pname.get(pid)!r}")
    if psort.get(pid) != pid: bad.append(f"pid {pid}: process_sort_index {psort.get(pid)}")
last = {}
for e in ev:
    if e["ph"] in "Xsf" and (e["pid"], e["tid"]) not in tname: bad.append(f"track {e['pid']}/{e['tid']} unnamed")
    if e["ph"] == "X":
        k, t = (e["pid"], e["tid"]), decimal.Decimal(e["ts"])
        if k in last and t < last[k]: bad.append(f"track {k}: ts goes back at {e['ts']}")
        last[k] = t
flows = collections.defaultdict(lambda: collections.Counter())
for e in ev:
    if e["ph"] in "sf": flows[e["id"]][e["ph"]] += 1
    if e["ph"] == "f" and e.get("bp") != "e": bad.append(f"flow end without bp=e: {e}")
for i, c in flows.items():
    if c != collections.Counter({"s": 1, "f": 1}): bad.append(f"flow {i}: {dict(c)}")
gpu = sum(1 for e in ev if e["ph"] == "X" and e["cat"] in ("kernel", "gpu_memcpy", "gpu_memset"))
print("valid" if not bad else "\n".join(bad[:20]))
print(f"ranks={len(pids)} flows={len(flows)} gpu={gpu} waits={sum(1 for e in ev if e['ph'] == 'X' and e['cat'] == 'wait')}")
EOF

count() { "$PY" -c 'import h5py,sys; f=h5py.File(sys.argv[1]); r=f["activities"]["rank"][:]; print(len(r) if len(sys.argv)<3 else int((r==int(sys.argv[2])).sum()))' "$@"; }

# ---- 1. tracegen pair: store → Kineto → store
kernalyse-tracegen --ranks 2 --kernels 3000 --steps 3 --seed 5 --out tg >/dev/null 2>&1
kernalyse-merge tg -q -o tg.h5
expect_eq "tracegen store written" "$?" "0"
kernalyse-merge tg.h5 -q --export-kineto tgk
expect_eq "export-kineto exit code" "$?" "0"
expect_eq "one file per rank" "$(ls tgk | tr '\n' ' ')" "rank-0.json rank-1.json "
expect_eq "distributedInfo" "$("$PY" -c 'import json; d=json.load(open("tgk/rank-1.json")); print(d["distributedInfo"]["rank"], d["distributedInfo"]["world_size"], "baseTimeNanoseconds" in d)')" "1 2 True"
kernalyse-merge tgk -q -o tgk.h5
expect_eq "tracegen round trip" "$("$PY" compare.py tg.h5 tgk.h5)" "same"
kernalyse-merge tg.h5 -q --export-kineto tgk 2>err.txt
expect_eq "existing Kineto output refused" "$?" "2"
expect_contains "refusal names --force" "$(cat err.txt)" "--force"
kernalyse-merge tg.h5 -q --export-kineto tgk --force
expect_eq "--force replaces" "$?" "0"

# ---- 2. the shared HTA trace_filter pair (real Kineto traces)
TF="$TRACES/hta/trace_filter"
if [ -d "$TF" ]; then
  kernalyse-merge "$TF" -q -o tf.h5 && kernalyse-merge tf.h5 -q --export-kineto tfk &&
    kernalyse-merge tfk -q -o tfk.h5
  expect_eq "trace_filter round trip" "$("$PY" compare.py tf.h5 tfk.h5)" "same"
else
  echo "note: $TF absent; real-trace round trip not run"
fi

# ---- 3. emulated 4-rank run: Perfetto with flows and waits; Kineto round trip
use_mpi
mpirun -n 4 kernalyse-run -q -o run.h5 "$BIN/vicuna_tp" --layers 2 --steps 2 --slow-rank 2 \
  --slow-factor 1.3 >run.log 2>&1
expect_eq "kernalyse-run exit code" "$?" "0"
kernalyse-merge run.h5 -q --perfetto run.json
expect_eq "--perfetto exit code" "$?" "0"
v=$("$PY" validate.py run.json)
expect_eq "Perfetto JSON valid" "$(head -1 <<<"$v")" "valid"
expect_contains "4 ranks, flows, waits" "$(tail -1 <<<"$v")" "ranks=4 "
case "$(tail -1 <<<"$v")" in *"flows=0 "* | *"waits=0") fail "no flows or no waits: $v" ;; *) pass "flows and waits present: $(tail -1 <<<"$v")" ;; esac
expect_contains "process named rank · host · GPU" "$(grep -o '"rank 2 ·[^"]*"' run.json | head -1)" "GPU"
# Loaded back by our importer: the multi-rank file has no distributedInfo, so --rank names it.
kernalyse-merge run.json --rank 0 -q -o pall.h5
expect_eq "Perfetto JSON imports with --rank 0" "$?" "0"
expect_eq "all GPU activities back" "$(count pall.h5)" "$(count run.h5)"
# One rank's export carries distributedInfo and comes back exactly.
kernalyse-merge run.h5 -q --rank 2 --perfetto r2.json.gz
expect_eq "gz Perfetto valid" "$("$PY" validate.py r2.json.gz >v.txt 2>&1; head -1 v.txt)" "valid"
kernalyse-merge r2.json.gz -q -o r2.h5
"$PY" - run.h5 r2.h5 >r2cmp.txt <<'EOF'
import h5py, sys, numpy as np
a, b = h5py.File(sys.argv[1]), h5py.File(sys.argv[2])
m = a["activities"]["rank"][:] == 2
ok = all(np.array_equal(a["activities"][c][:][m], b["activities"][c][:]) for c in
         ["rank", "device", "stream", "kind", "start_ns", "end_ns", "correlation"])
print("same" if ok else "differ")
EOF
expect_eq "rank 2 Perfetto round trip (times, streams, correlation)" "$(cat r2cmp.txt)" "same"
kernalyse-merge run.h5 -q --perfetto run.json 2>err.txt
expect_eq "existing Perfetto output refused" "$?" "2"
# Cuts: --step and --from/--to keep fewer events, still valid.
kernalyse-merge run.h5 -q --step 1 --perfetto s1.json
expect_eq "--step cut valid" "$("$PY" validate.py s1.json >v.txt 2>&1; head -1 v.txt)" "valid"
kernalyse-merge run.h5 -q --from 0 --to 2ms --perfetto cut.json
expect_eq "--from/--to cut valid" "$("$PY" validate.py cut.json >v.txt 2>&1; head -1 v.txt)" "valid"
n_all=$(grep -c '"ph":"X"' run.json); n_cut=$(grep -c '"ph":"X"' cut.json); n_s1=$(grep -c '"ph":"X"' s1.json)
if [ "$n_cut" -lt "$n_all" ] && [ "$n_s1" -lt "$n_all" ] && [ "$n_s1" -gt 0 ]; then
  pass "cuts keep fewer events ($n_s1 step 1, $n_cut in [0, 2 ms), $n_all all)"
else fail "cuts: $n_s1 / $n_cut of $n_all"; fi
kernalyse-merge run.h5 -q --from 12xs --perfetto bad.json 2>err.txt
expect_eq "bad --from rejected" "$?" "2"
[ ! -e bad.json ] && pass "no output on error" || fail "bad.json written"
kernalyse-merge run.h5 -q --export-kineto runk && kernalyse-merge runk -q -o runk.h5
expect_eq "emulated run Kineto round trip" "$("$PY" compare.py run.h5 runk.h5)" "same"
finish
