#!/usr/bin/env bash
# kernalyse-merge STORE under a real mpirun (issue 28): the store's ranks spread over the
# processes (each reads its own ranks' slices), the cross-rank rows exchanged, the first process
# writes; its output is byte for byte the one-process run's: --all in text and JSON, clocks the
# inference moves (two hosts with skew and drift) and clocks kept, 2 and 3 processes (4 ranks:
# an uneven split), more processes than ranks; an analysis without a rank-at-a-time form runs
# whole on the first process; the other processes write nothing.
source "$(dirname "$0")/lib.sh"
use_mpi
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)

kernalyse-tracegen --ranks 4 --kernels 4000 --steps 4 --seed 11 --ranks-per-host 2 \
  --host-skew-us 1:2500 --host-drift-ppm 1:15 --slow-rank 2 --slow-factor 1.3 \
  --launch-delay-rank 3 --launch-delay-us 150 --jitter-us 3 --pair --out "$TMP/tg" >/dev/null 2>&1
expect_eq "tracegen exits 0" "$?" "0"
kernalyse-merge "$TMP/tg/base" -o "$TMP/skew.h5" --align off -q # the analyses infer the clocks
kernalyse-merge "$TMP/tg/base" -o "$TMP/aligned.h5" -q           # aligned at the import

# same N STORE ARGS...: mpirun -n N gives the one-process run's stdout and exit status.
same() {
  local n=$1 store=$2
  shift 2
  kernalyse-merge "$store" "$@" >"$TMP/one.out" 2>/dev/null
  local r1=$?
  "${MPIRUN[@]}" -n "$n" "$BIN/kernalyse-merge" "$store" "$@" >"$TMP/mpi.out" 2>"$TMP/mpi.err"
  local rn=$?
  if [ "$r1" = "$rn" ] && [ -s "$TMP/one.out" ] && cmp -s "$TMP/one.out" "$TMP/mpi.out"; then
    pass "-n $n $(basename "$store") $*: identical ($(wc -c <"$TMP/mpi.out") bytes)"
  else
    fail "-n $n $(basename "$store") $*: exit $r1 vs $rn; $(diff "$TMP/one.out" "$TMP/mpi.out" | head -4; tail -3 "$TMP/mpi.err")"
  fi
}
same 2 "$TMP/skew.h5" --all --json -q
same 2 "$TMP/skew.h5" --all -q
same 3 "$TMP/skew.h5" --all --json -q
same 2 "$TMP/aligned.h5" --all --json -q
same 3 "$TMP/aligned.h5" --stragglers --verbose -q
same 6 "$TMP/aligned.h5" --summary --gaps --json -q
same 2 "$TMP/aligned.h5" --critical-path -q # no sliced form: the first process, whole

# A recorded run with power samples and GPU memory counters (the emulated device under
# kernalyse-run): --energy then declines the rank-at-a-time form and runs on the store read whole
# (its energy split sums doubles in row order), the overview's peaks come from the cross-rank rows.
"${MPIRUN[@]}" -n 2 "$BIN/kernalyse-run" -q -o "$TMP/power.h5" "$BIN/vicuna_tp" --layers 2 \
  --steps 3 --power-ms 10 --power-watts idle=80,gemm=700,attention=600,memory=320,comm=210 \
  2>"$TMP/run.err"
expect_eq "emulated run with power samples: exit code" "$?" "0"
for args in "--energy --json" "--all --json" "--all"; do
  # shellcheck disable=SC2086  # word lists on purpose
  KERNALYSE_WHOLE_STORE=1 kernalyse-merge "$TMP/power.h5" $args -q >"$TMP/whole.out"
  # shellcheck disable=SC2086
  kernalyse-merge "$TMP/power.h5" $args -q >"$TMP/sliced.out"
  expect_eq "power store $args: a rank at a time as whole" \
    "$(cmp -s "$TMP/whole.out" "$TMP/sliced.out" && echo identical)" "identical"
  # shellcheck disable=SC2086
  same 2 "$TMP/power.h5" $args -q
done
expect_contains "power store: energy measured" "$(cat "$TMP/sliced.out")" "energy: "

# A store of more than one block of rows (1 M, store_io.cpp): the processes share the scan of the
# rank columns, each reading its part of the blocks, and join the runs; a rank's rows cross the
# block boundary (12 ranks x 100 k kernels, merged from 6 node stores as a job's would be).
kernalyse-tracegen --ranks 2 --kernels 100000 --steps 4 --seed 5 --out "$TMP/node" >/dev/null 2>&1
kernalyse-merge "$TMP/node" -o "$TMP/node.h5" -q
nodes=()
for i in 1 2 3 4 5 6; do
  ln -s node.h5 "$TMP/node$i.h5"
  nodes+=("$TMP/node$i.h5")
done
kernalyse-merge "${nodes[@]}" -o "$TMP/blocks.h5" -q 2>/dev/null
expect_eq "12 ranks x 100 k kernels: the store is made" "$?" "0"
same 2 "$TMP/blocks.h5" --all --json -q
same 3 "$TMP/blocks.h5" --summary --gaps --stragglers --json -q

# A store whose /launches are not grouped by rank (another writer's): every process finds it out
# in the shared scan, none waits for the others, and the first process reads it whole.
cp "$TMP/aligned.h5" "$TMP/unsorted.h5"
/usr/bin/python3 - "$TMP/unsorted.h5" <<'PY'
import sys, h5py
with h5py.File(sys.argv[1], "r+") as f:
    r = f["launches/rank"]
    first, last = r[0], r[len(r) - 1]
    r[0], r[len(r) - 1] = last, first
PY
same 2 "$TMP/unsorted.h5" --summary --json -q

# The clock inference's line is said once (by the first process).
"${MPIRUN[@]}" -n 2 "$BIN/kernalyse-merge" "$TMP/skew.h5" --all >/dev/null 2>"$TMP/mpi.err"
expect_eq "one inference line" "$(grep -c 'inferred' "$TMP/mpi.err")" "1"
finish
