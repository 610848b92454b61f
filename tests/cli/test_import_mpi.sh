#!/usr/bin/env bash
# `mpirun -n P kernalyse-merge TRACES -o run.h5` (issue 28): each process imports its share of the
# files; with -o alone the files move so that each process holds a run of ranks, and all of them
# write the store together (parallel HDF5); with an analysis, or when the files' ranks interleave,
# process 0 gets every file and goes on as one process does. Either way the store holds the
# one-process import's data (bench/h5_compare.py: every dataset and attribute but the run's wall
# clock and command line), for Kineto and Nsight Systems sets, 2, 3 and 5 processes and more
# processes than files, files whose name order is not their rank order, and one file alone; an
# import + analysis prints the one-process bytes; a bad file on another process than the first,
# or two files of one rank, is the one-process run's line, exit 2, no output; an existing output
# is refused by every process.
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
expect_contains "-n 2 nsys: written by both processes" "$(cat "$TMP/mpi.err")" \
  "(2 processes, each its ranks' rows: parallel HDF5)"
same_store 3 "$TMP/nsys"

# 12 ranks: in name order rank-10 and rank-11 come before rank-2, so the files move between the
# processes before the write (each holds a run of ranks).
kernalyse-tracegen --ranks 12 --kernels 600 --steps 3 --seed 9 --ranks-per-host 4 \
  --host-skew-us 1:900 --out "$TMP/twelve" >/dev/null 2>&1
expect_eq "tracegen made 12 files, rank-10 listed before rank-2" \
  "$(ls "$TMP/twelve" | head -4 | tr '\n' ' ')" "rank-0.json rank-1.json rank-10.json rank-11.json "
same_store 2 "$TMP/twelve"
expect_contains "-n 2 twelve: parallel HDF5" "$(cat "$TMP/mpi.err")" "parallel HDF5"
expect_contains "-n 2 twelve: the clocks inferred, said once" \
  "$(grep -c '^clocks inferred from' "$TMP/mpi.err")" "1"
same_store 5 "$TMP/twelve"

# One file: process 0 imports it alone, streamed (the others have nothing to do).
mkdir -p "$TMP/one"
cp "$TMP/kineto/rank-2.json" "$TMP/one/"
same_store 2 "$TMP/one"

# Two files of one rank: the one-process run's line, exit 2, no store.
mkdir -p "$TMP/dup"
cp "$TMP"/kineto/rank-{0,1,2,3}.json "$TMP/dup/"
cp "$TMP/kineto/rank-1.json" "$TMP/dup/rank-1-again.json"
"${MPIRUN[@]}" -n 2 "$BIN/kernalyse-merge" "$TMP/dup" -o "$TMP/dup.h5" >/dev/null 2>"$TMP/dup.err"
rc=$?
expect_eq "two files of rank 1: mpirun fails" "$([ "$rc" != 0 ] && echo failed)" "failed"
expect_eq "two files of rank 1: the one-process line, once" "$(grep '^kernalyse-merge: ' "$TMP/dup.err")" \
  "$(kernalyse-merge "$TMP/dup" -o "$TMP/dup1.h5" 2>&1 >/dev/null | grep '^kernalyse-merge: ')"
expect_eq "two files of rank 1: no store" "$(ls "$TMP"/dup*.h5 2>/dev/null | wc -l)" "0"

# Ranks that interleave across files (the shared four-rank merged file split into ranks 0 and 2,
# and 1 and 3): every file goes to process 0, which writes the one-process store.
MERGED=$TRACES/kineto/merged_4rank_rocm/merged_nccl_only.json.gz
if [ -f "$MERGED" ]; then
  mkdir -p "$TMP/interleaved"
  /usr/bin/python3 "$(dirname "$0")/split_merged.py" "$MERGED" "$TMP/interleaved"
  same_store 2 "$TMP/interleaved"
  expect_eq "interleaved ranks: written by process 0 alone" \
    "$(grep -c 'parallel HDF5' "$TMP/mpi.err")" "0"
  expect_contains "interleaved ranks: the two files are 4 ranks" "$(cat "$TMP/mpi.err")" \
    "imported 2 file(s), 4 rank(s)"
else
  echo "SKIP (not counted): $MERGED absent, the interleaved-ranks case"
fi

# Import and analyse in one command: the first process analyses the merged store.
kernalyse-merge "$TMP/kineto" --all --json -q >"$TMP/one.json"
"${MPIRUN[@]}" -n 2 "$BIN/kernalyse-merge" "$TMP/kineto" --all --json -q >"$TMP/mpi.json"
expect_eq "-n 2 import + --all --json: the one-process bytes" \
  "$(cmp -s "$TMP/one.json" "$TMP/mpi.json" && echo identical)" "identical"

# With -o and analyses that all run a rank at a time: every process writes the store, then all
# of them analyse it a rank at a time; the one-process run's report and store.
# write_analyse N DIR ARGS...
write_analyse() {
  local n=$1 dir=$2
  shift 2
  kernalyse-merge "$dir" -o "$TMP/wa1.h5" --force "$@" >"$TMP/wa1.out" 2>"$TMP/wa1.err"
  "${MPIRUN[@]}" -n "$n" "$BIN/kernalyse-merge" "$dir" -o "$TMP/wan.h5" --force "$@" \
    >"$TMP/wan.out" 2>"$TMP/wan.err"
  local rc=$?
  if [ "$rc" = 0 ] && [ -s "$TMP/wa1.out" ] && cmp -s "$TMP/wa1.out" "$TMP/wan.out" &&
    compare "$TMP/wa1.h5" "$TMP/wan.h5" && grep -q "parallel HDF5" "$TMP/wan.err"; then
    pass "-n $n $(basename "$dir") -o $*: the one-process report and store, written by all"
  else
    fail "-n $n $(basename "$dir") -o $*: exit $rc; $(diff "$TMP/wa1.out" "$TMP/wan.out" | head -4; head -3 "$TMP/cmp.txt"; tail -3 "$TMP/wan.err")"
  fi
}
write_analyse 2 "$TMP/kineto" --all --json
write_analyse 3 "$TMP/kineto" --all
write_analyse 2 "$TMP/twelve" --all --json
write_analyse 5 "$TMP/twelve" --stragglers --verbose
write_analyse 2 "$TMP/nsys" --summary --gaps --json
expect_eq "the clock inference said once" "$(grep -c '^clocks inferred from' "$TMP/wan.err")" \
  "$(grep -c '^clocks inferred from' "$TMP/wa1.err")"

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
