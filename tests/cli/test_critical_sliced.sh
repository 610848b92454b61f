#!/usr/bin/env bash
# --critical-path and --what-if of a store a step at a time (issue 28; critical_sliced.cpp): past
# the memory budget (KERNALYSE_IMPORT_MEMORY_MB, here 1 MB) each rank's rows of each step go to a
# scratch file as the slices come and the steps are analysed one at a time; the report is the
# whole read's byte for byte (KERNALYSE_WHOLE_STORE=1): a tracegen store (two skewed hosts,
# clocks inferred, NCCL rows, steps), what-if scenarios, real stores of the shared traces (the
# HTA critical-path sets, the trace_filter pair, a four-rank merged trace, a store without
# steps); under mpirun -n 2, 3 and 5 the steps go round the processes (the same report); within
# the budget the store is read whole (the same report); peak RSS below the whole read's; nothing
# left in TMPDIR.
source "$(dirname "$0")/lib.sh"
use_mpi
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
export TMPDIR=$TMP/scratch
mkdir -p "$TMPDIR"

kernalyse-tracegen --ranks 6 --kernels 3000 --steps 4 --seed 51 --ranks-per-host 3 \
  --host-skew-us 1:2500 --out "$TMP/tg" >/dev/null 2>&1
kernalyse-merge "$TMP/tg" -o "$TMP/tg.h5" -q

# same NAME STORE ARGS...: a step at a time (1 MB budget) equals the whole read.
same() {
  local name=$1 store=$2
  shift 2
  KERNALYSE_IMPORT_MEMORY_MB=1 kernalyse-merge "$store" "$@" >"$TMP/sl.out" 2>"$TMP/sl.err"
  local r1=$?
  KERNALYSE_WHOLE_STORE=1 kernalyse-merge "$store" "$@" >"$TMP/wh.out" 2>"$TMP/wh.err"
  local r2=$?
  if [ "$r1" = "$r2" ] && { [ -s "$TMP/sl.out" ] || [ "$r1" != 0 ]; } &&
    cmp -s "$TMP/sl.out" "$TMP/wh.out" &&
    cmp -s "$TMP/sl.err" "$TMP/wh.err"; then
    pass "$name: $(wc -c <"$TMP/sl.out") bytes, identical (exit $r1)"
  else
    fail "$name: exit $r1 / $r2; $(diff "$TMP/sl.out" "$TMP/wh.out" | head -4; diff "$TMP/sl.err" "$TMP/wh.err" | head -3)"
  fi
}
same "tracegen store" "$TMP/tg.h5" --critical-path
same "tracegen store, JSON" "$TMP/tg.h5" --critical-path --json
same "tracegen store, what-if" "$TMP/tg.h5" --critical-path --json --what-if rank=1:median \
  --what-if comm=overlapped --what-if 'kernel=gemm:x2'
same "tracegen store, --verbose --top 5" "$TMP/tg.h5" --critical-path --verbose --top 5
same "what-if of a rank the store lacks: the same error" "$TMP/tg.h5" --critical-path \
  --what-if rank=9:median
expect_contains "what-if of a rank the store lacks: said" "$(cat "$TMP/sl.err")" "no rank 9"
expect_eq "nothing left in TMPDIR" "$(ls -A "$TMPDIR")" ""
# The sliced run took its own route: its peak RSS is below the whole read's.
kernalyse-tracegen --ranks 8 --kernels 150000 --steps 6 --seed 52 --out "$TMP/big" >/dev/null 2>&1
kernalyse-merge "$TMP/big" -o "$TMP/big.h5" -q
peak() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
sliced=$(KERNALYSE_IMPORT_MEMORY_MB=1 peak kernalyse-merge "$TMP/big.h5" --critical-path --json)
whole=$(KERNALYSE_WHOLE_STORE=1 peak kernalyse-merge "$TMP/big.h5" --critical-path --json)
same "8 ranks, 6 steps" "$TMP/big.h5" --critical-path --json
if nm -C "$BIN/kernalyse-merge" 2>/dev/null | grep -q __asan_init; then
  echo "note: an ASan build: the peak RSS is not compared ($sliced kB vs $whole kB)"
else
  expect_eq "8 ranks: peak RSS below 0.75x the whole read's ($sliced kB vs $whole kB)" \
    "$([ "$sliced" -lt $((whole * 3 / 4)) ] && echo yes)" "yes"
fi
# Within the default budget the store is read whole: the same bytes.
kernalyse-merge "$TMP/big.h5" --critical-path --json >"$TMP/default.out"
expect_eq "default budget: the whole read's report" \
  "$(cmp -s "$TMP/default.out" "$TMP/wh.out" && echo same)" "same"
rm -rf "$TMP/big"

if [ -d "$TRACES" ]; then
  for set in kineto/hta_critical_path/alexnet kineto/hta_critical_path/cuda_event_sync \
    kineto/hta_critical_path/cuda_event_sync_multi_stream kineto/hta_critical_path/simple_add \
    hta/trace_filter kineto/merged_4rank_rocm kineto/single_gpu/a100_gemm.json \
    nsys/allreduce_2nodes_2gpus; do
    [ -e "$TRACES/$set" ] || continue
    if kernalyse-merge "$TRACES/$set" -o "$TMP/real.h5" --force -q 2>/dev/null; then
      same "shared $set" "$TMP/real.h5" --critical-path --json --what-if comm=overlapped
    fi
  done
else
  echo "SKIP (not counted): $TRACES absent, the shared traces' stores"
fi

# mpirun: the steps go round the processes (each step's rows to the one that analyses it); the
# one-process report, also with what-if scenarios and clocks inferred.
KERNALYSE_WHOLE_STORE=1 kernalyse-merge "$TMP/tg.h5" --critical-path --json \
  --what-if comm=overlapped --what-if rank=2:median >"$TMP/one.json" 2>"$TMP/one.err"
for n in 2 3 5; do
  KERNALYSE_IMPORT_MEMORY_MB=1 "${MPIRUN[@]}" -n "$n" -x KERNALYSE_IMPORT_MEMORY_MB \
    "$BIN/kernalyse-merge" "$TMP/tg.h5" --critical-path --json --what-if comm=overlapped \
    --what-if rank=2:median >"$TMP/m.json" 2>"$TMP/m.err"
  expect_eq "-n $n: exit 0, the one-process report" \
    "$(echo $?; cmp -s "$TMP/one.json" "$TMP/m.json" && echo same)" "$(printf '0\nsame')"
  expect_eq "-n $n: the one-process lines" "$(cat "$TMP/m.err")" "$(cat "$TMP/one.err")"
done
# Within the budget, under mpirun: read whole by the first process, the same report.
"${MPIRUN[@]}" -n 2 "$BIN/kernalyse-merge" "$TMP/tg.h5" --critical-path --json \
  --what-if comm=overlapped --what-if rank=2:median >"$TMP/m.json" 2>/dev/null
expect_eq "-n 2 within the budget: the one-process report" \
  "$(cmp -s "$TMP/one.json" "$TMP/m.json" && echo same)" "same"
expect_eq "nothing left in TMPDIR at the end" "$(ls -A "$TMPDIR")" ""
finish
