#!/usr/bin/env bash
# `cmake --install` into a fresh prefix: the tools, the collector and the templates land there, and
# the emulated 4-rank job (the demo's) runs from the prefix alone: P/bin/kernalyse-run finds
# P/lib/libkernalyse_collector.so, with the build tree off PATH.
source "$(dirname "$0")/lib.sh"
CMAKE=${KERNALYSE_CMAKE:-cmake}
build=$(dirname "$BIN")
P="$TMP/prefix"
"$CMAKE" --install "$build" --prefix "$P" >"$TMP/install.log" 2>&1
expect_eq "cmake --install exits 0 ($(tail -c 300 "$TMP/install.log"))" "$?" "0"
for f in bin/kernalyse-run bin/kernalyse-merge bin/kernalyse-tracegen lib/libkernalyse_collector.so \
         libexec/kernalyse/vicuna_tp share/kernalyse/slurm/kernalyse.sbatch \
         share/kernalyse/slurm/kernalyse-mpirun.sbatch share/kernalyse/slurm/kernalyse-analyse.sbatch \
         lib/libkernalyse_h5.so lib/libkernalyse_mpi.so; do
  expect_eq "installed: $f" "$([ -f "$P/$f" ] && echo yes)" "yes"
done
# Every tool the README or the docs name that this build built is installed (kernalyse-scan
# only in CUDA builds with cuBLAS).
for t in $(grep -oh 'kernalyse-[a-z]*' "$SRC/README.md" "$SRC"/docs/*.md | sort -u); do
  [ -x "$BIN/$t" ] || continue
  expect_eq "installed: bin/$t (named in the docs, built)" "$([ -x "$P/bin/$t" ] && echo yes)" "yes"
done

# From the prefix only: the build's bin dir is not on PATH, and no KERNALYSE_COLLECTOR override.
export PATH="$P/bin:/usr/local/bin:/usr/bin:/bin"
unset KERNALYSE_COLLECTOR
expect_eq "kernalyse-run on PATH is the installed one" "$(command -v kernalyse-run)" "$P/bin/kernalyse-run"
use_mpi
cd "$TMP"
# Slow factor 2 at time scale 4: ~7.8 ms late per collective, above a loaded machine's stalls
# (as in test_run_mpi.sh).
mpirun -n 4 kernalyse-run -o job.h5 "$P/libexec/kernalyse/vicuna_tp" --layers 2 --steps 4 \
  --slow-rank 2 --slow-factor 2 --time-scale 4 2>run.err
expect_eq "installed kernalyse-run: emulated job exits 0 ($(head -c 300 run.err))" "$?" "0"
expect_contains "installed kernalyse-run: wrote the store" "$(cat run.err)" "wrote $TMP/job.h5: 4 ranks"
kernalyse-merge job.h5 --stragglers --json -q >job.json
expect_eq "installed kernalyse-merge: exit code" "$?" "0"
expect_eq "installed: 4 ranks, rank 2 named the straggler" \
  "$(/usr/bin/python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(len(d["ranks"]), d["stragglers"]["headline"].startswith("rank 2 arrived last"))' job.json)" \
  "4 True"
# The collector must come from the prefix: hide it and kernalyse-run must say so.
mv "$P/lib/libkernalyse_collector.so" "$P/lib/hidden.so"
kernalyse-run -o none.h5 /bin/true 2>nocoll.err
expect_eq "without the installed collector: exit code 2" "$?" "2"
expect_contains "without the installed collector: says so" "$(cat nocoll.err)" "libkernalyse_collector.so not found"
finish
