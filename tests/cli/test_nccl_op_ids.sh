#!/usr/bin/env bash
# NCCL's own ids (docs/analyses.md, "Collective matching"): kernalyse-tracegen --nccl-ops writes a
# 4-rank job whose all-reduce of step s has rank s % 4 arriving last (planted), 6 steps, with
# NCCL's operation ids (Kineto "Comms Id", nsys NCCL_GPU_OPERATIONS.operationId), a send/receive
# ring (24 planted pairs) and all-to-alls. --nccl-late-rank 2 drops rank 2's first all-reduce (its
# capture started late): matching by order then pairs every later all-reduce with the wrong one,
# by operation id it does not. Checked: "matched by", every matched all-reduce's last rank against
# the plant, the pairs; with the ids removed the same job falls back to (pg, seq) (Kineto's Seq)
# or order (nsys), and without the late rank the order ledger equals the id ledger.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
cd "$TMP" || exit 1
gen() { kernalyse-tracegen --nccl-ops --ranks 4 --steps 6 "$@" 2>/dev/null; }
ledger() {  # ledger DIR -> matched_by, matched, unmatched, pairs, then "step:last" of all-reduces
  kernalyse-merge "$1" --stragglers --json -q 2>/dev/null | "$PY" -c '
import json, sys
d = json.load(sys.stdin)["stragglers"]
print(d["matched_by"], d["matched"], d["unmatched_count"], d["p2p_pairs"])
print(" ".join("%d:%d" % (c["step"], c["last_rank"]) for c in sorted(d["collectives"], key=lambda c: c["step"])
               if "reduce" in c["op"].lower()))
print(" ".join("%d:%s:%d:%.3f" % (c["step"], c["op"], c["last_rank"], c["skew_us"]) for c in d["collectives"]))'
}
planted() { "$PY" -c '
import json, sys
t = json.load(open(sys.argv[1]))
print(" ".join("%s:%d" % (s, r) for s, r in sorted(t["allreduce_last_rank"].items(), key=lambda x: int(x[0]))))
print(t["p2p_pairs"])' "$1"; }

for fmt in json nsys; do
  gen --format "$fmt" --nccl-late-rank 2 --out "late-$fmt" --truth "late-$fmt.truth"
  expect_eq "$fmt: tracegen --nccl-ops exit code" "$?" "0"
  got=$(ledger "late-$fmt")
  want=$(planted "late-$fmt.truth")
  expect_eq "$fmt, late rank: matched by operation id, 5 all-reduces + 6 all-to-alls, 1 unmatched, pairs" \
    "$(echo "$got" | sed -n 1p)" "operation id 11 1 $(echo "$want" | sed -n 2p)"
  expect_eq "$fmt, late rank: each all-reduce's last rank is the planted one" \
    "$(echo "$got" | sed -n 2p)" "$(echo "$want" | sed -n 1p)"
  gen --format "$fmt" --nccl-late-rank 2 --no-op-ids --out "late-$fmt-noid"
  got=$(ledger "late-$fmt-noid")
  if [ "$fmt" = json ]; then
    # Kineto's Seq still names the collectives; the ring's sends and receives do not pair.
    expect_eq "json without ids: matched by (pg, seq), same all-reduces" \
      "$(echo "$got" | sed -n 1p | cut -d' ' -f1-2) $(echo "$got" | sed -n 2p)" \
      "(pg, seq) $(echo "$want" | sed -n 1p)"
  else
    # Without ids order is all nsys has: it pairs wrongly here (what the ids are for).
    expect_eq "nsys without ids: matched by order" "$(echo "$got" | sed -n 1p | cut -d' ' -f1)" "order"
    if [ "$(echo "$got" | sed -n 2p)" != "$(echo "$want" | sed -n 1p)" ]; then
      pass "nsys without ids: order matching pairs the all-reduces wrongly (the plant tells them apart)"
    else
      fail "nsys without ids: order matching gave the planted last ranks (the test cannot tell)"
    fi
  fi
done

# No late rank: order and operation id name the same instances (nsys), same ledger.
gen --format nsys --out ids
gen --format nsys --no-op-ids --out noids
a=$(ledger ids)
b=$(ledger noids)
expect_eq "nsys, all ranks complete: ids say operation id" "$(echo "$a" | sed -n 1p | cut -d' ' -f1-2)" "operation id"
expect_eq "nsys, ids removed: order" "$(echo "$b" | sed -n 1p | cut -d' ' -f1)" "order"
expect_eq "nsys: the all-reduces' ledger (step, last rank) is the same either way" \
  "$(echo "$b" | sed -n 2p)" "$(echo "$a" | sed -n 2p)"
expect_contains "text output says how instances were matched" \
  "$(kernalyse-merge ids --stragglers 2>/dev/null)" "collective matching: matched by operation id"
finish
