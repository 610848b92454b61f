#!/usr/bin/env bash
# CUDA/HIP graphs (issue 29): on the shared vLLM decode trace that replays a captured graph
# (../shared/traces/kineto/inference/graph_execution.json.gz, MI300X), every kernel the graph runs
# has its launch: the one hipGraphLaunch call, joined by the correlation id the runtime gives all
# of the graph's kernels (counted independently here from the JSON), and the critical path runs
# through the graph's kernels.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
need_traces
"$PY" -c 'import h5py' 2>/dev/null || { echo "SKIP: $PY lacks h5py"; exit 77; }
F="$TRACES/kineto/inference/graph_execution.json.gz"
[ -f "$F" ] || { echo "SKIP: $F absent"; exit 77; }
cd "$TMP" || exit 1
kernalyse-merge "$F" -o g.h5 -q 2>err.txt
expect_eq "import: exit code" "$?" "0"
kernalyse-merge "$F" --critical-path --json --verbose -q >cp.json 2>err.txt
expect_eq "critical path: exit code" "$?" "0"
got=$("$PY" - "$F" <<'PY'
import collections, gzip, json, sys, h5py
ev = json.load(gzip.open(sys.argv[1]))["traceEvents"]
graph = {e["args"]["correlation"] for e in ev
         if e.get("cat") == "cuda_runtime" and e["name"] in ("hipGraphLaunch", "cudaGraphLaunch")}
want = collections.Counter(e["name"] for e in ev
                           if e.get("cat") == "kernel" and e["args"].get("correlation") in graph)
f = h5py.File("g.h5", "r")
s = f["strings"].asstr()[:]
launch = {int(c): s[n] for c, n in zip(f["launches"]["correlation"][:], f["launches"]["name_id"][:])}
a = f["activities"]
got = collections.Counter(s[n] for k, c, n in zip(a["kind"][:], a["correlation"][:], a["name_id"][:])
                          if k == 0 and launch.get(int(c), "").endswith("GraphLaunch"))
cp = json.load(open("cp.json"))["critical_path"]
on_path = {k["kernel"] for st in cp["steps"] for k in st["by_kernel"]}
graph_ns = sum(k["ns"] for st in cp["steps"] for k in st["by_kernel"] if k["kernel"] in want)
print(len(graph), sum(want.values()) > 400, got == want, len(on_path & set(want)) > 0,
      graph_ns > cp["path_ns"] // 2)
PY
)
# One graph launch; the 421 kernels replayed by it (more than 400), all joined to it; most of the path is theirs.
expect_eq "graph kernels have their launch; the critical path runs through them" "$got" \
  "1 True True True True"
finish
