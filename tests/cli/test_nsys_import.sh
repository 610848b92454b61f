#!/usr/bin/env bash
# Nsight Systems SQLite import on every report under ../shared/traces/nsys (README "More real
# traces"): each imports, or fails with its one-line reason (the report recorded without CUDA
# tracing); kernel, memcpy, memset, runtime-call, NVTX-range and NCCL-kernel counts equal the ones
# computed here with SQLite queries (python3's sqlite3, independent of the importer); the
# two-node allreduce pair becomes one store with 2 ranks on 2 hosts. Also: reports mixed with
# JSON, a truncated report, a directory of reports.
source "$(dirname "$0")/lib.sh"
need_traces
N="$TRACES/nsys"
if [ ! -d "$N" ]; then echo "SKIP: $N absent"; exit 77; fi
PY=/usr/bin/python3

# expected FILE: counts by SQL. NVTX: push/pop (59) and start/end (60) ranges that ended.
expected() {
  "$PY" - "$1" <<'PY'
import sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
tables = {r[0] for r in db.execute("select name from sqlite_master where type='table'")}
def n(sql, t):
    return db.execute(sql).fetchone()[0] if t in tables else 0
k = n("select count(*) from CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_KERNEL")
cp = n("select count(*) from CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMCPY")
ms = n("select count(*) from CUPTI_ACTIVITY_KIND_MEMSET", "CUPTI_ACTIVITY_KIND_MEMSET")
rt = n("select count(*) from CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_RUNTIME")
# Ranges, and the marks of NCCL's network plugin (kept as instants for the clock inference).
marks = ("select count(*) from NVTX_EVENTS n left join StringIds s on s.id = n.textId "
         "where n.eventType = 34 and coalesce(n.text, s.value) like 'ncclNet%'"
         if "StringIds" in tables else
         "select count(*) from NVTX_EVENTS where eventType = 34 and text like 'ncclNet%'")
nv = n("select count(*) from NVTX_EVENTS where eventType in (59, 60) and end is not null", "NVTX_EVENTS")
nv += n(marks, "NVTX_EVENTS")
nc = n("""select count(*) from CUPTI_ACTIVITY_KIND_KERNEL k join StringIds s on s.id = k.demangledName
          where s.value like 'nccl%' or s.value like 'rccl%' or s.value like '%ncclKernel%'
             or s.value like '%ncclDevKernel%'""", "CUPTI_ACTIVITY_KIND_KERNEL")
print(k, cp, ms, rt, nv, nc)
PY
}
# stored FILE.h5: the same counts from the store.
stored() {
  "$PY" - "$1" <<'PY'
import h5py, sys
f = h5py.File(sys.argv[1], "r")
k = f["activities"]["kind"][:]
print(int((k == 0).sum()), int((k == 1).sum()), int((k == 2).sum()), len(f["launches"]["rank"]),
      len(f["annotations"]["rank"]), len(f["nccl"]["activity"]))
PY
}

n=0
for f in "$N"/*.sqlite; do
  n=$((n + 1))
  name=$(basename "$f")
  err=$(kernalyse-merge "$f" -o "$TMP/n$n.h5" --progress off 2>&1)
  rc=$?
  if [ "$name" = llama3_no_cuda_trace.sqlite ]; then
    expect_eq "$name: no kernel table: exit code" "$rc" "2"
    expect_eq "$name: one clear line" "$err" "kernalyse-merge: $f: no CUDA kernel table (CUPTI_ACTIVITY_KIND_KERNEL): the report was recorded without CUDA tracing (nsys profile --trace=cuda)"
    expect_eq "$name: no output" "$([ -e "$TMP/n$n.h5" ] && echo yes || echo no)" "no"
    continue
  fi
  expect_eq "$name: imports (exit code) ${err:0:300}" "$rc" "0"
  [ "$rc" -eq 0 ] || continue
  expect_eq "$name: kernels memcpy memset runtime nvtx nccl" "$(stored "$TMP/n$n.h5")" "$(expected "$f")"
done
expect_eq "reports found" "$n" "7"

# The saxpy report names its MPI rank; times become epoch ns (session start + relative ns).
s=$(kernalyse-merge "$TMP/n7.h5" --json -q 2>/dev/null | "$PY" -c 'import json,sys; r=json.load(sys.stdin)["ranks"][0]; print(r["rank"], r["host"], r["device_name"])')
expect_eq "saxpy: rank, host, device" "$s" "0 nid001608 NVIDIA A100-SXM4-40GB"

# The two-node allreduce pair (a directory): 2 ranks on 2 hosts; times already epoch ns there.
A="$N/allreduce_2nodes_2gpus"
kernalyse-merge "$A" -o "$TMP/ar.h5" -q --align off  # as recorded: the epoch check below
expect_eq "allreduce pair: exit code" "$?" "0"
got=$("$PY" - "$TMP/ar.h5" "$A" <<'PY'
import h5py, sqlite3, sys, os
f = h5py.File(sys.argv[1], "r")
ranks = list(f["ranks"]["rank"][:]); hosts = list(f["ranks"]["host"].asstr()[:])
# Epoch detection: the first kernel start in the store equals the file's own start, untouched.
starts = []
for p in sorted(os.listdir(sys.argv[2])):
    db = sqlite3.connect(os.path.join(sys.argv[2], p))
    starts.append(db.execute("select min(start) from CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0])
a = f["activities"]; k = a["kind"][:] == 0
st = sorted(int(x) for x in a["start_ns"][:][k])
print(len(ranks), len(set(hosts)), sorted(hosts), st == sorted(starts), len(f["nccl"]["activity"]))
PY
)
expect_eq "allreduce pair: 2 ranks, 2 hosts, epoch times kept, 2 NCCL kernels" "$got" "2 2 ['ault43.cscs.ch', 'ault44.cscs.ch'] True 2"
out=$(kernalyse-merge "$TMP/ar.h5" --stragglers --json -q | "$PY" -c 'import json,sys; c=json.load(sys.stdin)["stragglers"]["collectives"]; print(len(c), c[0]["op"], c[0]["ranks"])')
expect_eq "allreduce pair: the AllReduce matched across the 2 ranks" "$out" "1 allreduce 2"

# Mixed with JSON: one error, no output.
err=$(kernalyse-merge "$A/$(ls "$A" | head -1)" "$TRACES/kineto/single_gpu/a100_gemm.json" -o "$TMP/mix.h5" 2>&1)
expect_eq "sqlite + json: exit code" "$?" "2"
expect_contains "sqlite + json: says why" "$err" "mixed with JSON"
# Truncated report: one line, exit 2 (the header still says SQLite).
head -c 300000 "$N/perlmutter-cloverleaf-cuda.sqlite" >"$TMP/cut.sqlite"
err=$(kernalyse-merge "$TMP/cut.sqlite" -o "$TMP/cut.h5" 2>&1)
expect_eq "truncated report: exit code" "$?" "2"
expect_eq "truncated report: one line" "$(printf '%s\n' "$err" | wc -l)" "1"
expect_contains "truncated report: names the file" "$err" "$TMP/cut.sqlite"
finish
