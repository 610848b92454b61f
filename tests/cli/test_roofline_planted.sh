#!/usr/bin/env bash
# Performance model against planted truth (kernalyse-tracegen --shapes): in hints.json every op
# row (op, input shape) has the planted call count, FLOPs over its calls and class, and exactly
# the planted hints fire, each with its rule id and numbers; in clean.json the same holds and no
# hint fires. A bad --peaks file is one line and exit 2; a --peaks file replaces the table (a
# device with 10x the bandwidth moves the planted memory-bound bmm to compute-bound).
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
kernalyse-tracegen --shapes "$TMP/sh" 2> /dev/null || fail "tracegen --shapes"

check() {  # check FILE: compares the roofline and hints of FILE with planted.json
  kernalyse-merge -q "$TMP/sh/$1" --roofline --hints --json > "$TMP/$1.out" 2> "$TMP/$1.err" ||
    { fail "$1: kernalyse-merge failed: $(cat "$TMP/$1.err")"; return; }
  "$PY" - "$TMP/sh/planted.json" "$1" "$TMP/$1.out" <<'PY'
import json, sys
planted = json.load(open(sys.argv[1]))[sys.argv[2]]
r = json.load(open(sys.argv[3]))
rows = {(x["op"], x["shape"]): x for x in r["roofline"]}
bad = []
for p in planted["ops"]:
    x = rows.pop((p["op"], p["shape"]), None)
    if x is None:
        bad.append("missing " + p["op"] + " " + p["shape"]); continue
    if x["count"] != p["count"]:
        bad.append("%s count %s != %s" % (p["op"], x["count"], p["count"]))
    if x["class"] != p["class"]:
        bad.append("%s %s class %s != %s (%s)" % (p["op"], p["shape"], x["class"], p["class"], x["reason"]))
    if p["flops"] is None:
        if x["flops"] is not None: bad.append("%s flops invented: %s" % (p["op"], x["flops"]))
    elif x["flops"] is None or abs(x["flops"] - p["flops"]) > 1e-9 * max(1.0, p["flops"]):
        bad.append("%s flops %s != %s" % (p["op"], x["flops"], p["flops"]))
for k in rows: bad.append("unplanted row %s" % (k,))
ids = [h["id"] for h in r["hints"]]
if sorted(ids) != sorted(planted["hints"]):
    bad.append("hints %s != planted %s" % (ids, planted["hints"]))
for h in r["hints"]:
    if not h["numbers"] or not any(ch.isdigit() for ch in h["text"]):
        bad.append("hint %s without numbers" % h["id"])
print("OK %d rows, hints %s" % (len(planted["ops"]), ids) if not bad else "BAD " + "; ".join(bad))
PY
}
for f in hints.json clean.json; do
  out=$(check "$f")
  case "$out" in OK*) pass "$f: $out" ;; *) fail "$f: $out" ;; esac
done
nh=$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["hints"]))' "$TMP/clean.json.out")
expect_eq "clean workload: no hint" "$nh" 0
nh=$("$PY" -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["hints"]))' "$TMP/hints.json.out")
expect_eq "hints workload: the five planted hints" "$nh" 5

# --peaks: bad files, then a file that replaces the table.
echo '{"flops_per_s": {"bf16": 1e15}}' > "$TMP/nobw.json"
err=$(kernalyse-merge -q "$TMP/sh/hints.json" --roofline --peaks "$TMP/nobw.json" 2>&1 >/dev/null); rc=$?
expect_eq "--peaks without bytes_per_s: exit 2" "$rc" 2
expect_eq "--peaks without bytes_per_s: one line" "$(echo "$err" | wc -l)" 1
expect_contains "--peaks error names the file" "$err" "$TMP/nobw.json"
err=$(kernalyse-merge -q "$TMP/sh/hints.json" --roofline --peaks "$TMP/missing.json" 2>&1 >/dev/null); rc=$?
expect_eq "--peaks missing file: exit 2" "$rc" 2
printf '{"name": "fast", "bytes_per_s": 33.5e12, "flops_per_s": {"bf16": 989.5e12, "fp32": 67e12}}' > "$TMP/fast.json"
kernalyse-merge -q "$TMP/sh/hints.json" --roofline --json --peaks "$TMP/fast.json" > "$TMP/fast.out"
cls=$("$PY" -c 'import json,sys; print([x["class"] for x in json.load(open(sys.argv[1]))["roofline"] if x["op"]=="aten::bmm"])' "$TMP/fast.out")
expect_eq "--peaks with 10x bandwidth: bmm now compute-bound" "$cls" "['compute-bound', 'compute-bound']"
finish
