#!/usr/bin/env bash
# --alltoall (docs/analyses.md, "All-to-all and host split"): kernalyse-tracegen --nccl-ops plants
# all-to-all(v) steps with uneven splits (rank i sends 4096 * (1 + (4i + j) % 5) BFloat16 elements
# to rank j) on 4 ranks, 2 per host. The JSON matrix equals the planted bytes, the intra-/inter-host
# bytes follow from the hosts, the per-step table has every step, the host split table names the
# all-reduce (crosses hosts); text, CSV and the HTML page carry it. Without split sizes (nsys) an
# even split is assumed and said.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
cd "$TMP" || exit 1
kernalyse-tracegen --nccl-ops --ranks 4 --steps 6 --ranks-per-host 2 --out k --truth k.truth 2>/dev/null
expect_eq "tracegen exit code" "$?" "0"
kernalyse-merge k --alltoall --json -q >a.json 2>err.txt
expect_eq "--alltoall --json exit code ($(head -c 200 err.txt))" "$?" "0"
got=$("$PY" - a.json k.truth <<'PY'
import json, sys
j, t = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
a = j["alltoall"]
h = t["hosts"]
intra = sum(t["alltoall_bytes"][i][k] for i in range(4) for k in range(4) if h[i] == h[k])
inter = sum(t["alltoall_bytes"][i][k] for i in range(4) for k in range(4) if h[i] != h[k])
print(a["bytes"] == t["alltoall_bytes"], a["ranks"], a["instances"], a["even_split_instances"])
print(a["intra_host_bytes"] == intra, a["inter_host_bytes"] == inter, intra > 0, inter > 0)
print(len(j["alltoall_steps"]), sorted(set(r["op"] for r in j["comm_host_split"])))
ar = [r for r in j["comm_host_split"] if r["op"] == "allreduce"][0]
print(ar["inter_host"], ar["intra_host"])
PY
)
expect_eq "matrix = planted bytes; ranks; 6 instances; none assumed even" "$(echo "$got" | sed -n 1p)" "True [0, 1, 2, 3] 6 0"
expect_eq "intra/inter-host bytes from the hosts" "$(echo "$got" | sed -n 2p)" "True True True True"
expect_eq "per-step rows; host split by op" "$(echo "$got" | sed -n 3p)" "6 ['all_to_allv', 'allreduce', 'send/recv']"
expect_eq "all-reduces on 2 hosts are inter-host" "$(echo "$got" | sed -n 4p)" "6 0"
txt=$(kernalyse-merge k --alltoall 2>/dev/null)
expect_contains "text: headline" "$txt" "all-to-all: 6 instances matched by operation id"
expect_contains "text: matrix" "$txt" "All-to-all bytes, sender (row) to receiver (column)"
kernalyse-merge k --alltoall --csv csv -q >/dev/null 2>&1
expect_eq "csv: matrix file" "$(head -1 csv/alltoall_matrix.csv)" "from_rank,host,to_0,to_1,to_2,to_3"
kernalyse-merge k --html page.html -q >/dev/null 2>&1
expect_eq "html exit code" "$?" "0"
expect_eq "html: heat map data equals the matrix" "$("$PY" - page.html k.truth <<'PY'
import json, re, sys
h = open(sys.argv[1], encoding="utf-8").read()
t = json.load(open(sys.argv[2]))
m = re.search(r'"alltoall":(\{"cells":.*?"ranks":\[[^\]]*\]\})', h)
d = json.loads(m.group(1)) if m else {"cells": []}
cells = {(c[1], c[0]): c[2] for c in d["cells"]}
print('id="s-alltoall"' in h, all(cells.get((i, k)) == t["alltoall_bytes"][i][k] for i in range(4) for k in range(4)))
PY
)" "True True"
kernalyse-tracegen --nccl-ops --ranks 4 --steps 6 --format nsys --out n 2>/dev/null
expect_contains "nsys (no split sizes): even split assumed, said" \
  "$(kernalyse-merge n --alltoall 2>/dev/null)" "6 without split sizes (even split assumed)"
finish
