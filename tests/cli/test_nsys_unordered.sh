#!/usr/bin/env bash
# Nsight Systems 2025.6 on may export rows out of time order. The same reports with every activity,
# runtime and NVTX table rewritten in a shuffled row order (rowids too) must import to the same
# store: the same analyses (summary, gaps, overlap, breakdown, idle, stragglers) in JSON, and the
# same rows once written with -o (compared column by column with h5py).
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
cd "$TMP"
kernalyse-tracegen --ranks 2 --kernels 300 --steps 3 --seed 5 --format nsys --out ordered >/dev/null
expect_eq "tracegen --format nsys" "$?" "0"
cp -r ordered shuffled
"$PY" - shuffled <<'PY'
import glob, random, sqlite3, sys
random.seed(7)
for path in glob.glob(sys.argv[1] + "/*.sqlite"):
    db = sqlite3.connect(path)
    tables = [r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    for t in tables:
        if not (t.startswith("CUPTI_ACTIVITY_KIND_") or t == "NVTX_EVENTS"):
            continue
        rows = db.execute(f"SELECT * FROM {t}").fetchall()
        random.shuffle(rows)
        sql = db.execute("SELECT sql FROM sqlite_master WHERE name = ?", (t,)).fetchone()[0]
        db.execute(f"DROP TABLE {t}")
        db.execute(sql)
        if rows:
            db.executemany(f"INSERT INTO {t} VALUES ({','.join('?' * len(rows[0]))})", rows)
    db.commit()
    # The first rows are no longer the earliest (else the shuffle tested nothing).
    first = db.execute("SELECT start FROM CUPTI_ACTIVITY_KIND_KERNEL LIMIT 1").fetchone()[0]
    assert first > db.execute("SELECT min(start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()[0]
PY
expect_eq "rows shuffled" "$?" "0"
flags="--summary --gaps --overlap --breakdown --idle --stragglers --json -q"
kernalyse-merge ordered $flags >ordered.json && kernalyse-merge shuffled $flags >shuffled.json
expect_eq "both import (exit code)" "$?" "0"
expect_eq "the same analyses" "$("$PY" - <<'PY'
import json
a, b = json.load(open("ordered.json")), json.load(open("shuffled.json"))
for d in (a, b):
    for r in d.get("ranks", []):
        r.pop("source", None)
print("same" if a == b and a.get("kernel_summary") else "different")
PY
)" "same"
kernalyse-merge ordered -o ordered.h5 -q && kernalyse-merge shuffled -o shuffled.h5 -q
expect_eq "both written with -o" "$?" "0"
expect_eq "the same rows in every table" "$("$PY" - <<'PY'
import h5py, numpy as np
a, b = h5py.File("ordered.h5", "r"), h5py.File("shuffled.h5", "r")
bad = []
for t in ("activities", "launches", "annotations"):
    for c in a[t]:
        x, y = a[t][c][:], b[t][c][:]
        if c == "name_id":  # string ids follow the order names were met: compare the names
            x, y = a["strings"][:][x], b["strings"][:][y]
        if not np.array_equal(x, y):
            bad.append(f"{t}/{c}")
print("same" if not bad and len(a["activities/start_ns"]) > 0 else "different: " + ", ".join(bad))
PY
)" "same"
finish
