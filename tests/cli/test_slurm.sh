#!/usr/bin/env bash
# The Slurm templates (launch/slurm/*.sbatch) on a real single-node Slurm cluster started here
# (munged, slurmctld, slurmd from Debian's slurm-wlm and munge; own key, config, ports and state
# under $TMP; stopped by pid on exit, failure included): the emulated vicuna_tp on 2 and 4 tasks
# through `srun --mpi=pmix`, once through mpirun inside sbatch, a non-MPI application with the
# torch.distributed variables, and once onto an existing store name with a failing application. Asserts the store (ranks, straggler) and the job log (summary).
# Fails, never skips, when the cluster cannot start (the daemon logs are in the message).
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/slurm_cluster.sh"
use_mpi
trap 'slurm_stop; rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1
json() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }

t0=$SECONDS
if ! slurm_start "$TMP/slurm" 8; then
  echo "FAIL - the local Slurm cluster did not start (daemon logs above); install slurm-wlm and munge (.ci/install-deps)"
  exit 1
fi
pass "local Slurm cluster up ($((SECONDS - t0)) s)"

SBATCH=$SRC/launch/slurm/kernalyse.sbatch
SBATCH_MPIRUN=$SRC/launch/slurm/kernalyse-mpirun.sbatch
# The templates find the tools through KERNALYSE_BIN; the store goes to KERNALYSE_OUT_DIR. sbatch
# passes the environment (these, the Open MPI settings of use_mpi) on to the job.
# TMPDIR: Open MPI's session directories, away from those of other jobs and clusters.
export KERNALYSE_BIN=$BIN KERNALYSE_OUT_DIR=$TMP/out TMPDIR=$TMP/tmp
mkdir -p "$TMP/out" "$TMP/tmp"
APP=("$BIN/vicuna_tp" --layers 4 --steps 6)
show_on_fail() { [ "$FAILS" -eq "$1" ] || { echo "--- $2"; cat "$2"; }; }

# 1. srun --mpi=pmix, 2 tasks (the template's #SBATCH lines, tasks overridden on the command line).
f0=$FAILS
t=$SECONDS
slurm_run_job "$TMP/job2.log" --chdir="$TMP" --ntasks-per-node=2 "$SBATCH" "${APP[@]}"
rc=$SLURM_JOB_RC
job=$SLURM_LAST_JOB
expect_eq "srun, 2 tasks: job exit code ($((SECONDS - t)) s)" "$rc" "0"
store=$TMP/out/run-$job.0.h5
expect_eq "srun, 2 tasks: store named run-<job>.<step>.h5" "$(test -f "$store" && echo yes)" "yes"
"$BIN/kernalyse-merge" "$store" --json -q > job2.json
expect_eq "srun, 2 tasks: 2 ranks in the store" "$(json job2.json 'len(d["ranks"])')" "2"
expect_eq "srun, 2 tasks: ranks 0 and 1" "$(json job2.json 'sorted(r["rank"] for r in d["ranks"])')" "[0, 1]"
log=$(cat "$TMP/job2.log")
expect_contains "srun, 2 tasks: kernalyse-run reported the store" "$log" "wrote $store: 2 ranks"
expect_contains "srun, 2 tasks: log names the store" "$log" "== kernalyse: $store (application exit code 0)"
expect_contains "srun, 2 tasks: straggler summary in the job log" "$log" "arrived last"
expect_contains "srun, 2 tasks: gap summary in the job log" "$log" "Idle gaps per stream"
expect_contains "srun, 2 tasks: gap totals in the job log" "$log" "Gap analysis (ranks 0-1"
show_on_fail "$f0" "$TMP/job2.log"

# 2. srun --mpi=pmix, 4 tasks, rank 1 slowed down: the straggler is rank 1. Slow factor 2 at time
#    scale 4: ~7.8 ms late at every collective, above a loaded machine's stalls (as in
#    test_run_mpi.sh).
f0=$FAILS
t=$SECONDS
slurm_run_job "$TMP/job4.log" --chdir="$TMP" --ntasks-per-node=4 "$SBATCH" "${APP[@]}" \
  --slow-rank 1 --slow-factor 2 --time-scale 4
rc=$SLURM_JOB_RC
job=$SLURM_LAST_JOB
expect_eq "srun, 4 tasks: job exit code ($((SECONDS - t)) s)" "$rc" "0"
store=$TMP/out/run-$job.0.h5
"$BIN/kernalyse-merge" "$store" --stragglers --json -q > job4.json
expect_eq "srun, 4 tasks: 4 ranks in the store" "$(json job4.json 'len(d["ranks"])')" "4"
expect_eq "srun, 4 tasks: clocks aligned over MPI" \
  "$(json job4.json 'all(r["clock_method"].startswith("mpi-pingpong") or r["rank"] == 0 for r in d["ranks"])')" "True"
expect_contains "srun, 4 tasks: straggler headline names rank 1" \
  "$(json job4.json 'd["stragglers"]["headline"]')" "rank 1 arrived last"
share=$(json job4.json 'sum(c["last_rank"] == 1 for c in d["stragglers"]["collectives"]) / len(d["stragglers"]["collectives"])')
expect_eq "srun, 4 tasks: rank 1 last in >= 80 % of collectives ($share)" \
  "$(awk -v s="$share" 'BEGIN {print (s >= 0.8)}')" "1"
log=$(cat "$TMP/job4.log")
expect_contains "srun, 4 tasks: job log headline names rank 1" "$log" "rank 1 arrived last"
expect_contains "srun, 4 tasks: gap summary in the job log" "$log" "Gap analysis (ranks 0-3"
expect_contains "srun, 4 tasks: straggler ledger in the job log" "$log" "Straggler ledger per rank"
show_on_fail "$f0" "$TMP/job4.log"

# 2b. An analysis job (kernalyse-analyse.sbatch) on that store, 2 tasks: its ranks spread over
#     the two processes; the report is the one-process run's, byte for byte.
f0=$FAILS
"$BIN/kernalyse-merge" "$store" --all --json -q > all1.json
KERNALYSE_REPORT=$TMP/all2.json slurm_run_job "$TMP/analyse.log" --chdir="$TMP"   --ntasks-per-node=2 "$SRC/launch/slurm/kernalyse-analyse.sbatch" "$store" --all --json -q
expect_eq "analysis job, 2 tasks: job exit code" "$SLURM_JOB_RC" "0"
expect_eq "analysis job, 2 tasks: report identical to one process's" \
  "$(cmp -s all1.json "$TMP/all2.json" && echo identical)" "identical"
show_on_fail "$f0" "$TMP/analyse.log"

# 3. mpirun inside sbatch, 2 tasks.
f0=$FAILS
t=$SECONDS
slurm_run_job "$TMP/mpirun.log" --chdir="$TMP" --ntasks-per-node=2 "$SBATCH_MPIRUN" "${APP[@]}"
rc=$SLURM_JOB_RC
job=$SLURM_LAST_JOB
expect_eq "mpirun in sbatch, 2 tasks: job exit code ($((SECONDS - t)) s)" "$rc" "0"
store=$(ls "$TMP/out/run-$job".*.h5 2>/dev/null | head -n 1)
expect_eq "mpirun in sbatch: store named run-<job>.<step>.h5" "$(basename "${store:-none}")" "run-$job.0.h5"
"$BIN/kernalyse-merge" "${store:-none}" --json -q > mpirun.json
expect_eq "mpirun in sbatch: 2 ranks in the store" "$(json mpirun.json 'len(d["ranks"])')" "2"
log=$(cat "$TMP/mpirun.log")
expect_contains "mpirun in sbatch: straggler summary in the job log" "$log" "arrived last"
expect_contains "mpirun in sbatch: gap summary in the job log" "$log" "Idle gaps per stream"
show_on_fail "$f0" "$TMP/mpirun.log"

# 4. A non-MPI application (as a PyTorch script would be) under the srun template: it sees the
#    torch.distributed env:// variables, and the collector still brings MPI up for the merge.
f0=$FAILS
slurm_run_job "$TMP/torch.log" --chdir="$TMP" --ntasks-per-node=2 "$SBATCH" /usr/bin/python3 -c \
  'import os; print("torch env: rank %s of %s, local %s, master %s:%s" % tuple(os.environ[k] for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")))'
rc=$SLURM_JOB_RC
job=$SLURM_LAST_JOB
expect_eq "non-MPI app: job exit code" "$rc" "0"
log=$(cat "$TMP/torch.log")
expect_contains "non-MPI app: rank 0 env" "$log" "torch env: rank 0 of 2, local 0, master localhost:"
expect_contains "non-MPI app: rank 1 env" "$log" "torch env: rank 1 of 2, local 1, master localhost:"
"$BIN/kernalyse-merge" "$TMP/out/run-$job.0.h5" --json -q > torch.json
expect_eq "non-MPI app: 2 ranks in the store" "$(json torch.json 'len(d["ranks"])')" "2"
show_on_fail "$f0" "$TMP/torch.log"

# 5. Never overwrite, and the application's exit code: the next job's default name is taken
#    already (job ids count up by one); the app exits 3.
f0=$FAILS
next=$((job + 1))
echo "not a store" > "$TMP/out/run-$next.0.h5"
slurm_run_job "$TMP/again.log" --chdir="$TMP" --ntasks-per-node=2 "$SBATCH" \
  "$BIN/vicuna_tp" --layers 2 --steps 2 --exit-code 3
rc=$SLURM_JOB_RC
expect_eq "existing name: job id as predicted" "$SLURM_LAST_JOB" "$next"
expect_eq "app exits 3: job exit code 3" "$rc" "3"
expect_eq "existing name: untouched" "$(cat "$TMP/out/run-$next.0.h5")" "not a store"
log=$(cat "$TMP/again.log")
expect_contains "existing name: kernalyse-run says so" "$log" \
  "run-$next.0.h5 exists; writing $TMP/out/run-$next.0-1.h5 instead"
expect_contains "existing name: summary of the store written" "$log" \
  "== kernalyse: $TMP/out/run-$next.0-1.h5 (application exit code 3)"
expect_contains "existing name: summary printed" "$log" "Idle gaps per stream"
show_on_fail "$f0" "$TMP/again.log"

expect_eq "no spool or marker files left" "$(ls -A "$TMP/out" | grep -vc '\.h5$')" "0"
echo "total $((SECONDS - t0)) s"
finish
