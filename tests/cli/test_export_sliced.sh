#!/usr/bin/env bash
# --export-kineto of a store a rank at a time (issue 28; export_kineto_by_rank, sliced.h): the
# files are the whole-store export's byte for byte (KERNALYSE_WHOLE_STORE=1 reads it whole): a
# tracegen store (two skewed hosts, NCCL rows, launches, steps), its --rank, --step and
# --from/--to cuts, a store whose clocks are as recorded (each file keeps its rank's base time),
# real stores of the shared traces; under mpirun -n 2, 3 and 6 every process writes its ranks'
# files and the set is the same, also with clocks to infer (on every process, from everyone's
# cross-rank rows); an existing file is the one-process line, said once, exit 2, nothing
# overwritten; peak RSS is a slice's, well below the whole read's.
source "$(dirname "$0")/lib.sh"
use_mpi
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)

kernalyse-tracegen --ranks 4 --kernels 3000 --steps 4 --seed 21 --ranks-per-host 2 \
  --host-skew-us 1:2500 --out "$TMP/tg" >/dev/null 2>&1
kernalyse-merge "$TMP/tg" -o "$TMP/tg.h5" -q
kernalyse-merge "$TMP/tg" -o "$TMP/off.h5" --align off -q

# same NAME STORE ARGS...: the export a rank at a time equals the whole-store export.
same() {
  local name=$1 store=$2
  shift 2
  rm -rf "$TMP/sl" "$TMP/wh"
  kernalyse-merge "$store" --export-kineto "$TMP/sl" "$@" 2>"$TMP/sl.err"
  local r1=$?
  KERNALYSE_WHOLE_STORE=1 kernalyse-merge "$store" --export-kineto "$TMP/wh" "$@" 2>"$TMP/wh.err"
  local r2=$?
  if [ "$r1" = 0 ] && [ "$r2" = 0 ] && [ -n "$(ls "$TMP/sl")" ] && diff -r "$TMP/sl" "$TMP/wh" >/dev/null &&
    [ "$(grep -v '^writing' "$TMP/sl.err" | sed "s#$TMP/sl#D#")" = \
      "$(grep -v '^writing' "$TMP/wh.err" | sed "s#$TMP/wh#D#")" ]; then
    pass "$name: $(ls "$TMP/sl" | wc -l) files, $(cat "$TMP"/sl/* | wc -c) bytes, identical"
  else
    fail "$name: exit $r1 / $r2; $(diff -r "$TMP/sl" "$TMP/wh" | head -3; tail -2 "$TMP/sl.err")"
  fi
}
same "tracegen store" "$TMP/tg.h5"
same "--rank 2" "$TMP/tg.h5" --rank 2
same "--step 2" "$TMP/tg.h5" --step 2
same "--from/--to" "$TMP/tg.h5" --from 2ms --to 9ms
same "clocks as recorded (--align off)" "$TMP/off.h5" --align off
same "clocks inferred (on the cross-rank rows)" "$TMP/off.h5"
expect_contains "clocks inferred: said as the whole read says it" "$(cat "$TMP/sl.err")" \
  "clocks inferred from"

# Memory: 8 ranks, the export a rank at a time holds a slice, not the store (its peak RSS well
# below the whole read's: measured 41 MB against 70 MB).
kernalyse-tracegen --ranks 8 --kernels 40000 --steps 4 --seed 22 --out "$TMP/big" >/dev/null 2>&1
kernalyse-merge "$TMP/big" -o "$TMP/big.h5" -q
peak() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
sliced=$(peak kernalyse-merge "$TMP/big.h5" --export-kineto "$TMP/bs" -q)
whole=$(KERNALYSE_WHOLE_STORE=1 peak kernalyse-merge "$TMP/big.h5" --export-kineto "$TMP/bw" -q)
expect_eq "8 ranks: the same files" "$(diff -r "$TMP/bs" "$TMP/bw" >/dev/null && echo same)" "same"
if nm -C "$BIN/kernalyse-merge" 2>/dev/null | grep -q __asan_init; then
  echo "note: an ASan build: the peak RSS is not compared ($sliced kB vs $whole kB)"
else
  expect_eq "8 ranks: peak RSS below 0.75x the whole read's ($sliced kB vs $whole kB)" \
    "$([ "$sliced" -lt $((whole * 3 / 4)) ] && echo yes)" "yes"
fi
rm -rf "$TMP/big" "$TMP/bs" "$TMP/bw"

if [ -d "$TRACES" ]; then
  for set in hta/trace_filter kineto/hta_trace_compare/base kineto/merged_4rank_rocm; do
    kernalyse-merge "$TRACES/$set" -o "$TMP/real.h5" --force -q 2>/dev/null &&
      same "shared $set" "$TMP/real.h5"
  done
else
  echo "SKIP (not counted): $TRACES absent, the shared traces' stores"
fi

# mpirun: every process writes its slices' files; the same set as one process.
kernalyse-merge "$TMP/tg.h5" --export-kineto "$TMP/one" 2>"$TMP/one.err"
for n in 2 3 6; do
  rm -rf "$TMP/m"
  "${MPIRUN[@]}" -n "$n" "$BIN/kernalyse-merge" "$TMP/tg.h5" --export-kineto "$TMP/m" \
    >"$TMP/m.out" 2>"$TMP/m.err"
  rc=$?
  if [ "$rc" = 0 ] && diff -r "$TMP/one" "$TMP/m" >/dev/null; then
    pass "-n $n: the one-process files ($(ls "$TMP/m" | wc -l))"
  else
    fail "-n $n: exit $rc; $(diff -r "$TMP/one" "$TMP/m" | head -3; tail -3 "$TMP/m.err")"
  fi
  expect_eq "-n $n: one 'wrote' line with the run's totals" "$(grep '^wrote' "$TMP/m.err")" \
    "$(grep '^wrote' "$TMP/one.err" | sed "s#$TMP/one#$TMP/m#")"
done
rm -rf "$TMP/m"
kernalyse-merge "$TMP/off.h5" --export-kineto "$TMP/offone" -q
"${MPIRUN[@]}" -n 3 "$BIN/kernalyse-merge" "$TMP/off.h5" --export-kineto "$TMP/m" 2>"$TMP/m.err"
expect_eq "-n 3, clocks inferred: the one-process files" \
  "$(diff -r "$TMP/offone" "$TMP/m" >/dev/null && echo same)" "same"
expect_eq "-n 3, clocks inferred: said once" "$(grep -c '^clocks inferred from' "$TMP/m.err")" "1"
rm -rf "$TMP/m"
"${MPIRUN[@]}" -n 3 "$BIN/kernalyse-merge" "$TMP/tg.h5" --export-kineto "$TMP/m" --rank 1 -q
expect_eq "-n 3 --rank 1: one file" "$(ls "$TMP/m")" "rank-1.json"
expect_eq "-n 3 --rank 1: the one-process file" \
  "$(cmp -s "$TMP/m/rank-1.json" "$TMP/one/rank-1.json" && echo same)" "same"

# An existing file: the one-process line, once; nothing rewritten.
touch -d '2001-01-01' "$TMP/one/rank-2.json"
"${MPIRUN[@]}" -n 2 "$BIN/kernalyse-merge" "$TMP/tg.h5" --export-kineto "$TMP/one" >/dev/null \
  2>"$TMP/ex.err"
expect_eq "existing files: mpirun fails" "$([ $? != 0 ] && echo failed)" "failed"
expect_eq "existing files: the one-process line, once" "$(grep '^kernalyse-merge: ' "$TMP/ex.err")" \
  "$(kernalyse-merge "$TMP/tg.h5" --export-kineto "$TMP/one" 2>&1 | grep '^kernalyse-merge: ')"
expect_eq "existing files: untouched" "$(stat -c %y "$TMP/one/rank-2.json" | cut -c1-4)" "2001"
finish
