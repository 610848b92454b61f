#!/usr/bin/env bash
# One collective matcher: on the emulated 4-rank job (the demo's), the Perfetto export's
# `collective id`s, its waits and flows, and the HTML heatmap name the same instances as the
# straggler ledger (docs/analyses.md, "Collective matching").
source "$(dirname "$0")/lib.sh"
use_mpi
cd "$TMP"

mpirun -n 4 "$BIN/kernalyse-run" -q -o tp.h5 "$BIN/vicuna_tp" --layers 2 --steps 4 --slow-rank 2 \
  --slow-factor 1.3 2>run.err
expect_eq "emulated 4-rank run: exit code ($(head -c 300 run.err))" "$?" "0"
kernalyse-merge tp.h5 --stragglers --json -q >ledger.json
expect_eq "ledger: exit code" "$?" "0"
kernalyse-merge tp.h5 --perfetto trace.json -q >/dev/null
expect_eq "perfetto export: exit code" "$?" "0"
kernalyse-merge tp.h5 --html report.html -q >/dev/null
expect_eq "html report: exit code" "$?" "0"

/usr/bin/python3 - ledger.json trace.json report.html >check.out <<'PY'
import json, re, sys
led = json.load(open(sys.argv[1]))["stragglers"]
trace = json.load(open(sys.argv[2]))["traceEvents"]
html = open(sys.argv[3], encoding="utf-8").read()
coll = led["collectives"]
def check(what, ok, detail=""):
    print(("ok" if ok else "FAIL"), what, "" if ok else detail)

check("ledger matched collectives on 4 ranks", len(coll) > 0 and all(c["ranks"] == 4 for c in coll),
      str(len(coll)))
check("ledger ids are 0..n-1 in order", [c["id"] for c in coll] == list(range(len(coll))))
# Export: every matched communication kernel carries its instance's id; per id one kernel per rank.
kern = {}
for e in trace:
    if e.get("ph") == "X" and e.get("cat") == "kernel" and "collective id" in e.get("args", {}):
        kern.setdefault(e["args"]["collective id"], []).append(e["pid"])
check("export: the same set of collective ids as the ledger", sorted(kern) == [c["id"] for c in coll],
      f"{len(kern)} vs {len(coll)}")
check("export: each id on each of the 4 ranks once", all(sorted(v) == [0, 1, 2, 3] for v in kern.values()))
# Waits: the export's wait of rank r at id k equals the ledger's wait_us[r] at id k, and names
# the ledger's last rank and op.
waits = [e for e in trace if e.get("ph") == "X" and e.get("cat") == "wait"]
bad = [w for w in waits
       if abs(coll[w["args"]["collective id"]]["wait_us"][str(w["pid"])] * 1000 - w["args"]["wait_ns"]) > 0.5
       or coll[w["args"]["collective id"]]["last_rank"] != w["args"]["last rank"]
       or w["name"] != f'wait for rank {w["args"]["last rank"]} ({coll[w["args"]["collective id"]]["op"]})']
nonzero = sum(1 for c in coll for v in c["wait_us"].values() if v > 0)
check("export: waits equal the ledger's (rank, id) waits", len(waits) > 0 and not bad, str(bad[:2]))
check("export: one wait per non-zero ledger wait", len(waits) == nonzero, f"{len(waits)} vs {nonzero}")
# Flows start at the ledger's last arriver.
flows = [e for e in trace if e.get("ph") == "s"]
check("export: flows start on the ledger's last rank",
      len(flows) > 0 and all(coll[f["args"]["collective id"]]["last_rank"] in (None, f["pid"]) for f in flows))
# HTML heatmap: columns are the ledger's ids (not binned below 400), cells its waits in ns.
m = re.search(r'<script type="application/json" id="kx-data">(.*?)</script>', html, re.S)
d = json.loads(m.group(1)) if m else {}
hm = d.get("stragglers", {})
check("html: one heatmap column per ledger id", hm.get("group") == 1 and len(hm.get("cols", [])) == len(coll))
cells = {(x, hm["ranks"][y]): v for x, y, v in hm.get("cells", [])}
want = {(c["id"], int(r)): round(v * 1000) for c in coll for r, v in c["wait_us"].items()}
check("html: heatmap cells equal the ledger's waits", cells == want and len(want) > 0)
check("html: column labels carry the ledger's id and op",
      all(col["label"] == f'#{c["id"]} {c["op"]}' for col, c in zip(hm.get("cols", []), coll)))
PY
while read -r st what; do
  if [ "$st" = ok ]; then pass "$what"; else fail "$what"; fi
done <check.out
expect_eq "checks ran" "$(grep -c . check.out)" "10"
finish
