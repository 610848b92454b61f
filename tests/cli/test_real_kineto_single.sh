#!/usr/bin/env bash
# Every PyTorch-profiler trace under ../shared/traces/kineto (README "More real traces") imports
# with no flags: a single file that does not say its rank is rank 0 with one info line, and its
# kernel and copy counts equal the ones a plain JSON reader finds. Several rankless files without
# distinguishing names are one error that lists them. A tensorboard_trace_handler file name
# (<host>_<pid>.<ts>.pt.trace.json) gives the rank's host, in /ranks/host and JSON ranks[].host.
# The merged 4-rank file (TraceLens fusion) imports as four ranks.
source "$(dirname "$0")/lib.sh"
need_traces
K="$TRACES/kineto"
if [ ! -d "$K" ]; then echo "SKIP: $K absent"; exit 77; fi
PY=/usr/bin/python3

# count FILE: "kernels copies" as torch.profiler wrote them (cat kernel / gpu_memcpy+gpu_memset).
count() {
  "$PY" - "$1" <<'PY'
import gzip, json, sys
p = sys.argv[1]
j = json.load(gzip.open(p, "rt") if p.endswith(".gz") else open(p))
ev = j["traceEvents"] if isinstance(j, dict) else j
x = [e for e in ev if isinstance(e, dict) and e.get("ph") == "X" and "dur" in e]
k = sum(1 for e in x if e.get("cat") in ("kernel", "Kernel"))
m = sum(1 for e in x if e.get("cat") in ("gpu_memcpy", "Memcpy", "gpu_memset", "Memset"))
print(k, m)
PY
}
# stored FILE.h5: "kernels copies ranks" in the store.
stored() {
  "$PY" - "$1" <<'PY'
import h5py, sys
f = h5py.File(sys.argv[1], "r")
k = f["activities"]["kind"][:]
print(int((k == 0).sum()), int(((k == 1) | (k == 2)).sum()), len(f["ranks"]["rank"]))
PY
}

n=0
while IFS= read -r f; do
  case "$f" in */merged_4rank_rocm/*) continue ;; esac  # four ranks in one file (below)
  n=$((n + 1))
  name=${f#"$K"/}
  out="$TMP/t$n.h5"
  err=$(kernalyse-merge "$f" -o "$out" --progress off 2>&1)
  rc=$?
  expect_eq "$name: imports with no flags (exit code) ${err:0:300}" "$rc" "0"
  [ "$rc" -eq 0 ] || continue
  want=$(count "$f")
  got=$(stored "$out")
  expect_eq "$name: kernels, copies and 1 rank" "$got" "$want 1"
  if ! "$PY" -c 'import gzip,json,sys; p=sys.argv[1]; j=json.load(gzip.open(p,"rt") if p.endswith(".gz") else open(p)); sys.exit(0 if isinstance(j,dict) and "rank" in j.get("distributedInfo",{}) else 1)' "$f" &&
    [[ "$(basename "$f")" != *rank* ]]; then
    expect_contains "$name: one info line says rank 0" "$err" "info: $f: no rank in the trace or its name; the only input, taken as rank 0"
  fi
done < <(find "$K" -type f \( -name '*.json' -o -name '*.json.gz' \) | sort)
expect_eq "files found" "$([ "$n" -ge 15 ] && echo yes)" "yes"

# Several rankless files, no names to tell them apart: one error naming both, no output.
a="$K/single_gpu/a100_gemm.json" b="$K/single_gpu/linear_kineto.json.gz"
err=$(kernalyse-merge "$a" "$b" -o "$TMP/two.h5" 2>&1)
expect_eq "two rankless files: exit code" "$?" "2"
expect_contains "two rankless files: lists the first" "$err" "$a"
expect_contains "two rankless files: lists the second" "$err" "$b"
expect_eq "two rankless files: one line" "$(printf '%s\n' "$err" | wc -l)" "1"
expect_eq "two rankless files: no output" "$([ -e "$TMP/two.h5" ] && echo yes || echo no)" "no"

# The merged 4-rank ROCm file (TraceLens fusion: pid offsets, process_name "RANK n - GPU"):
# four ranks, each with the kernels under its pids, and its collectives matched across all four.
m="$K/merged_4rank_rocm/merged_nccl_only.json.gz"
if [ -f "$m" ]; then
  err=$(kernalyse-merge "$m" -o "$TMP/m.h5" --progress off 2>&1)
  expect_eq "merged 4-rank file: exit code" "$?" "0"
  expect_contains "merged 4-rank file: says so" "$err" "4 processes named \"RANK n\", imported as separate ranks"
  want=$("$PY" - "$m" <<'PY'
import gzip, json, sys
ev = json.load(gzip.open(sys.argv[1], "rt"))["traceEvents"]
rank = {e["pid"]: int(e["args"]["name"].split()[1]) for e in ev
        if e.get("ph") == "M" and e.get("name") == "process_name" and e["args"]["name"].startswith("RANK ")}
n = {}
for e in ev:
    if e.get("ph") == "X" and e.get("cat") == "kernel": n[rank[e["pid"]]] = n.get(rank[e["pid"]], 0) + 1
print(sorted(n.items()))
PY
)
  got=$("$PY" -c 'import h5py,sys,collections; f=h5py.File(sys.argv[1],"r"); a=f["activities"]; k=a["kind"][:]==0; print(sorted(collections.Counter(a["rank"][:][k].tolist()).items()))' "$TMP/m.h5")
  expect_eq "merged 4-rank file: kernels per rank" "$got" "$want"
  got=$(kernalyse-merge "$TMP/m.h5" --stragglers --json -q | "$PY" -c 'import json,sys; c=json.load(sys.stdin)["stragglers"]["collectives"]; print(len(c), sorted({x["ranks"] for x in c}))')
  expect_eq "merged 4-rank file: 21 collectives matched on 4 ranks" "$got" "21 [4]"
fi

# Host from a tensorboard_trace_handler name, stored per rank.
cp "$a" "$TMP/node-a17.example_4242.1712195495519689047.pt.trace.json"
kernalyse-merge "$TMP/node-a17.example_4242.1712195495519689047.pt.trace.json" -o "$TMP/h.h5" -q
expect_eq "host: import exit code" "$?" "0"
expect_eq "host: /ranks/host" "$("$PY" -c 'import h5py,sys; print(h5py.File(sys.argv[1],"r")["ranks"]["host"].asstr()[0])' "$TMP/h.h5")" "node-a17.example"
expect_eq "host: JSON ranks[].host" "$(kernalyse-merge "$TMP/h.h5" --json -q | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["ranks"][0]["host"])')" "node-a17.example"
finish
