#!/usr/bin/env bash
# `mpirun -n P kernalyse-merge TRACES -o run.h5` (issue 28): each process imports its share of the
# files and sends them to the first, which ranks, merges, aligns and writes as one process does:
# the store holds the one-process import's data (bench/h5_compare.py: every dataset and attribute
# but the run's wall clock and command line), for Kineto and Nsight Systems sets, 2 and 3
# processes and more processes than files; an import + analysis prints the one-process bytes; a
# bad file on another process than the first is one line naming it, exit 2, no output; an existing
# output is refused by every process.
source "$(dirname "$0")/lib.sh"
use_mpi
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
compare() { /usr/bin/python3 "$SRC/bench/h5_compare.py" "$@" >"$TMP/cmp.txt" 2>&1; }

kernalyse-tracegen --ranks 4 --kernels 3000 --steps 4 --seed 5 --ranks-per-host 2 \
  --host-skew-us 1:2500 --out "$TMP/kineto" >/dev/null 2>&1
kernalyse-tracegen --ranks 3 --kernels 2000 --steps 3 --seed 6 --format nsys \
  --out "$TMP/nsys" >/dev/null 2>&1
expect_eq "tracegen made 4 Kineto files and 3 reports" \
  "$(ls "$TMP"/kineto/*.json "$TMP"/nsys/*.sqlite | wc -l)" "7"

# same_store N DIR: mpirun -n N's store has the one-process import's data.
same_store() {
  local n=$1 dir=$2
  kernalyse-merge "$dir" -o "$TMP/one.h5" --force -q
  "${MPIRUN[@]}" -n "$n" "$BIN/kernalyse-merge" "$dir" -o "$TMP/mpi.h5" --force >"$TMP/mpi.out" \
    2>"$TMP/mpi.err"
  local rc=$?
  if [ "$rc" = 0 ] && compare "$TMP/one.h5" "$TMP/mpi.h5"; then
    pass "-n $n $(basename "$dir"): the one-process store ($(stat -c %s "$TMP/mpi.h5") bytes)"
  else
    fail "-n $n $(basename "$dir"): exit $rc; $(head -3 "$TMP/cmp.txt"; tail -3 "$TMP/mpi.err")"
  fi
}
same_store 2 "$TMP/kineto"
same_store 3 "$TMP/kineto"
same_store 6 "$TMP/kineto" # more processes than files: some import nothing
same_store 2 "$TMP/nsys"   # Nsight Systems: the ranks from every report's evidence, together
expect_eq "one 'wrote' line (the first process)" "$(grep -c '^wrote' "$TMP/mpi.err")" "1"
expect_contains "process 0's share in its progress line" "$(cat "$TMP/mpi.err")" "of 3 files"

# Import and analyse in one command: the first process analyses the merged store.
kernalyse-merge "$TMP/kineto" --all --json -q >"$TMP/one.json"
"${MPIRUN[@]}" -n 2 "$BIN/kernalyse-merge" "$TMP/kineto" --all --json -q >"$TMP/mpi.json"
expect_eq "-n 2 import + --all --json: the one-process bytes" \
  "$(cmp -s "$TMP/one.json" "$TMP/mpi.json" && echo identical)" "identical"

# A truncated file in the second process's share: one line naming it, exit 2, no store.
mkdir -p "$TMP/bad"
cp "$TMP"/kineto/rank-{0,1,2}.json "$TMP/bad/"
head -c 20000 "$TMP/kineto/rank-3.json" >"$TMP/bad/rank-3.json"
"${MPIRUN[@]}" -n 2 "$BIN/kernalyse-merge" "$TMP/bad" -o "$TMP/bad.h5" >/dev/null 2>"$TMP/bad.err"
rc=$?
expect_eq "truncated file on process 1: mpirun fails" "$([ "$rc" != 0 ] && echo failed)" "failed"
expect_eq "one line names it" "$(grep -c '^kernalyse-merge: .*rank-3.json' "$TMP/bad.err")" "1"
expect_eq "the line is the one-process run's" "$(grep '^kernalyse-merge: ' "$TMP/bad.err")" \
  "$(kernalyse-merge "$TMP/bad" -o "$TMP/bad1.h5" 2>&1 >/dev/null | grep '^kernalyse-merge: ')"
expect_eq "no store written" "$(ls "$TMP"/bad*.h5 2>/dev/null | wc -l)" "0"

# An existing output without --force: refused on every process before any import.
echo keep >"$TMP/exists.h5"
"${MPIRUN[@]}" -n 2 "$BIN/kernalyse-merge" "$TMP/kineto" -o "$TMP/exists.h5" >/dev/null \
  2>"$TMP/exists.err"
expect_eq "existing output: mpirun fails" "$([ $? != 0 ] && echo failed)" "failed"
expect_eq "existing output untouched" "$(cat "$TMP/exists.h5")" "keep"
expect_contains "existing output: said" "$(cat "$TMP/exists.err")" "exists"
finish
