#!/usr/bin/env bash
# kernalyse-merge --diff under a real mpirun (issue 28): each side's ranks spread over the
# processes (a store read a rank at a time: each process reads its own ranks' slices), the figures
# exchanged after each pass, the first process writes; stdout and the exit status are the
# one-process run's, byte for byte: text, JSON, a rank and a step filter, 2 and 3 processes (4
# ranks: an uneven split), more processes than ranks, clocks kept or inferred (a side read whole),
# trace directories. A step no rank has is one error line, from the first process, exit 2. And
# --spool under mpirun: the one-process output, once.
source "$(dirname "$0")/lib.sh"
use_mpi
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)

kernalyse-tracegen --ranks 4 --kernels 3000 --steps 4 --seed 21 --slow-rank 2 --slow-factor 1.3 \
  --pair --out "$TMP/tg" >/dev/null 2>&1
expect_eq "tracegen exits 0" "$?" "0"
kernalyse-merge "$TMP/tg/base" -o "$TMP/base.h5" -q
kernalyse-merge "$TMP/tg/test" -o "$TMP/test.h5" -q

# same N ARGS...: mpirun -n N kernalyse-merge --diff ARGS gives the one-process run's stdout
# and exit status.
same() {
  local n=$1
  shift
  kernalyse-merge --diff "$@" >"$TMP/one.out" 2>"$TMP/one.err"
  local r1=$?
  "${MPIRUN[@]}" -n "$n" "$BIN/kernalyse-merge" --diff "$@" >"$TMP/mpi.out" 2>"$TMP/mpi.err"
  local rn=$?
  if [ "$r1" = "$rn" ] && [ -s "$TMP/one.out" ] && cmp -s "$TMP/one.out" "$TMP/mpi.out"; then
    pass "-n $n --diff $*: identical ($(wc -c <"$TMP/mpi.out") bytes)"
  else
    fail "-n $n --diff $*: exit $r1 vs $rn; $(diff "$TMP/one.out" "$TMP/mpi.out" | head -4; tail -3 "$TMP/mpi.err")"
  fi
}
B="$TMP/base.h5"
T="$TMP/test.h5"
same 2 "$B" "$T" --json -q
same 2 "$B" "$T" -q
same 3 "$B" "$T" --json -q
same 6 "$B" "$T" --json -q
same 2 "$B" "$T" --rank 1 --json -q
same 3 "$B" "$T" --step 2 -q
same 2 "$B" "$T" --align off --json -q
same 2 "$B" "$T" --align inferred --json -q  # read whole: the first process analyses it
same 2 "$TMP/tg/base" "$TMP/tg/test" --json -q
same 2 "$B" "$TMP/tg/test" --top 5 -q

# An error every process meets: said once, by the first process; exit 2.
"${MPIRUN[@]}" -n 2 "$BIN/kernalyse-merge" --diff "$B" "$T" --step 999 >"$TMP/err.out" 2>"$TMP/err.err"
expect_eq "no such step: exit 2" "$?" "2"
expect_eq "no such step: one line of ours" "$(grep -c '^kernalyse-merge: ' "$TMP/err.err")" "1"
expect_contains "no such step: the serial message" "$(cat "$TMP/err.err")" "no ProfilerStep#999 in ranks 0-3"

# --html: the first process writes it, the same page as one process writes.
kernalyse-merge --diff "$B" "$T" --html "$TMP/one.html" -q >/dev/null
"${MPIRUN[@]}" -n 2 "$BIN/kernalyse-merge" --diff "$B" "$T" --html "$TMP/mpi.html" -q >/dev/null
expect_eq "--html: the same page" "$(cmp -s "$TMP/one.html" "$TMP/mpi.html" && echo same)" "same"
# --spool under mpirun (no spreading): the first process recovers and writes, the others do
# nothing; before, every process wrote the same output.
"${MPIRUN[@]}" -n 2 "$BIN/kernalyse-run" -q --keep-spool --flush-records 64 --spool-dir "$TMP/sp" \
  -o "$TMP/tp.h5" "$BIN/vicuna_tp" --layers 1 --steps 2 --hidden 256 >/dev/null 2>&1
expect_eq "a kept spool" "$(ls "$TMP/sp" | grep -c '\.kspool$')" "2"
kernalyse-merge --spool "$TMP/sp" --summary --json -q >"$TMP/sp1.json"
"${MPIRUN[@]}" -n 2 "$BIN/kernalyse-merge" --spool "$TMP/sp" --summary --json -q >"$TMP/sp2.json"
expect_eq "--spool: exit 0" "$?" "0"
expect_eq "--spool: one process's output" "$(cmp -s "$TMP/sp1.json" "$TMP/sp2.json" && echo same)" "same"
finish
