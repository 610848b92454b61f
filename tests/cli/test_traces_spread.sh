#!/usr/bin/env bash
# `mpirun -n P kernalyse-merge TRACES --all` without -o (issue 28; analyse_traces_spread,
# sliced.h): the processes import the traces into a temporary store that all of them read (in
# TMPDIR: one host here), analyse it a rank at a time, and the report is the one-process run's
# byte for byte (text and JSON), its lines the same but the temporary store's, which is removed
# after; a Nsight Systems set and ranks that interleave across files (process 0 writes the
# store) too; analyses without a rank-at-a-time form keep the old route (the same report); two
# files of one rank and a truncated file are the one-process line, once, exit 2, no hang, and
# nothing is left in TMPDIR.
source "$(dirname "$0")/lib.sh"
use_mpi
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
export TMPDIR=$TMP/scratch
mkdir -p "$TMPDIR"

kernalyse-tracegen --ranks 6 --kernels 2000 --steps 4 --seed 41 --ranks-per-host 3 \
  --host-skew-us 1:2500 --out "$TMP/tg" >/dev/null 2>&1

# same NAME N INPUT ARGS...: mpirun -n N gives the one-process report and lines.
same() {
  local name=$1 n=$2 input=$3
  shift 3
  kernalyse-merge "$input" "$@" >"$TMP/one.out" 2>"$TMP/one.err"
  local r1=$?
  "${MPIRUN[@]}" -n "$n" "$BIN/kernalyse-merge" "$input" "$@" >"$TMP/m.out" 2>"$TMP/m.err"
  local r2=$?
  # Lines with a time or a speed, and the temporary store's, are not compared.
  local keep='^(importing|imported by the|writing|reading)'
  if [ "$r1" = 0 ] && [ "$r2" = 0 ] && [ -s "$TMP/one.out" ] && cmp -s "$TMP/one.out" "$TMP/m.out" &&
    [ "$(grep -Ev "$keep" "$TMP/one.err" | sed 's/ in [0-9.]* s (.*)$//')" = \
      "$(grep -Ev "$keep" "$TMP/m.err" | sed 's/ in [0-9.]* s (.*)$//')" ]; then
    pass "$name: -n $n: the one-process report ($(wc -c <"$TMP/m.out") bytes) and lines"
  else
    fail "$name: -n $n: exit $r1 / $r2; $(diff "$TMP/one.out" "$TMP/m.out" | head -3; diff "$TMP/one.err" "$TMP/m.err" | head -6)"
  fi
  expect_eq "$name: -n $n: nothing left in TMPDIR" "$(ls -A "$TMPDIR")" ""
}
same "tracegen, 2 hosts" 2 "$TMP/tg" --all
expect_contains "tracegen: said how" "$(cat "$TMP/m.err")" \
  "imported by the 2 processes into a temporary store in $TMPDIR/kernalyse-"
same "tracegen, 2 hosts, JSON" 3 "$TMP/tg" --all --json
same "tracegen, --rank 2 --step 2" 4 "$TMP/tg" --rank 2 --step 2 --gaps --json
same "tracegen, clocks inferred" 2 "$TMP/tg" --stragglers --align inferred
same "critical path (not by rank: process 0 holds the store)" 2 "$TMP/tg" --critical-path
expect_eq "critical path: no temporary store" "$(grep -c 'temporary store' "$TMP/m.err")" "0"

if [ -d "$TRACES" ]; then
  same "shared hta/trace_filter" 2 "$TRACES/hta/trace_filter" --all --json
  NSYS=$TRACES/nsys/multi_rank
  [ -d "$NSYS" ] || NSYS=$(find "$TRACES/nsys" -mindepth 1 -maxdepth 1 -type d | head -1)
  [ -n "$NSYS" ] && same "shared Nsight Systems set $(basename "$NSYS")" 2 "$NSYS" --all &&
    expect_contains "Nsight Systems set: through the temporary store" "$(cat "$TMP/m.err")" \
      "temporary store"
  MERGED=$TRACES/kineto/merged_4rank_rocm/merged_nccl_only.json.gz
  mkdir -p "$TMP/interleaved"
  /usr/bin/python3 "$(dirname "$0")/split_merged.py" "$MERGED" "$TMP/interleaved"
  same "ranks interleaved across files (process 0 writes the store)" 2 "$TMP/interleaved" --all
  expect_contains "interleaved: through the temporary store" "$(cat "$TMP/m.err")" "temporary store"
else
  echo "SKIP (not counted): $TRACES absent, the shared sets"
fi

# Two files of one rank: found where process 0 merges them (the others wait for the store): the
# one-process line, once, exit 2, no hang (timeout 120 s), nothing left. The shared inference set
# (a capture and an execution trace, both rank 0) hung here before the error was shared.
dup_case() {
  local name=$1 input=$2
  timeout 120 "${MPIRUN[@]}" -n 2 "$BIN/kernalyse-merge" "$input" --all </dev/null \
    >"$TMP/dup.out" 2>"$TMP/dup.err"
  expect_eq "$name: exit 2" "$?" "2"
  expect_eq "$name: the one-process line, once" "$(grep '^kernalyse-merge: ' "$TMP/dup.err")" \
    "$(kernalyse-merge "$input" --all 2>&1 >/dev/null | grep '^kernalyse-merge: ')"
  expect_eq "$name: nothing left in TMPDIR" "$(ls -A "$TMPDIR")" ""
}
mkdir -p "$TMP/dup"
cp "$TMP"/tg/rank-{0,1,2}.json "$TMP/dup/"
cp "$TMP/tg/rank-1.json" "$TMP/dup/rank-1-again.json"
dup_case "two files of rank 1" "$TMP/dup"
if [ -d "$TRACES/kineto/inference" ]; then
  dup_case "shared kineto/inference (two of rank 0)" "$TRACES/kineto/inference"
fi

# A truncated file: the one-process line, once; exit 2; nothing left.
mkdir -p "$TMP/bad"
cp "$TMP"/tg/rank-{0,1,2}.json "$TMP/bad/"
head -c 5000 "$TMP/tg/rank-3.json" >"$TMP/bad/rank-3.json"
"${MPIRUN[@]}" -n 2 "$BIN/kernalyse-merge" "$TMP/bad" --all >"$TMP/bad.out" 2>"$TMP/bad.err"
expect_eq "truncated file: exit 2" "$?" "2"
expect_eq "truncated file: the one-process line, once" "$(grep '^kernalyse-merge: ' "$TMP/bad.err")" \
  "$(kernalyse-merge "$TMP/bad" --all 2>&1 >/dev/null | grep '^kernalyse-merge: ')"
expect_eq "truncated file: no report" "$(wc -c <"$TMP/bad.out")" "0"
expect_eq "truncated file: nothing left in TMPDIR" "$(ls -A "$TMPDIR")" ""
finish
