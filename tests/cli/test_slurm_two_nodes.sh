#!/usr/bin/env bash
# The analysis template (launch/slurm/kernalyse-analyse.sbatch) over two Slurm nodes: the local
# cluster of slurm_cluster.sh with two slurmds on this machine (node1 at 127.0.0.1, node2 at
# 127.0.0.2, each its own port, spool, log and pid file). "Two nodes" here means two slurmds:
# Slurm allocates the job on both, mpirun inside the job reads that allocation and starts its
# daemon on node2 through node2's slurmd (srun, no ssh), and the processes on the two nodes talk
# over TCP (Open MPI's shared memory is for processes of one node only). Asserts the allocation,
# the map (one process per node), the step on node2's slurmd, and that the report is the
# one-process run's, byte for byte. Fails, never skips, when the cluster cannot start.
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/slurm_cluster.sh"
use_mpi
trap 'slurm_stop; rm -rf "$TMP"' EXIT
cd "$TMP" || exit 1

t0=$SECONDS
if ! slurm_start "$TMP/slurm" 2 2; then
  echo "FAIL - the local two-node Slurm cluster did not start (daemon logs above)"
  exit 1
fi
expect_eq "two nodes idle ($((SECONDS - t0)) s)" "$(sinfo -h -N -o '%N %t' | tr '\n' ' ')" "node1 idle node2 idle "
export KERNALYSE_BIN=$BIN TMPDIR=$TMP/tmp
mkdir -p "$TMP/tmp"
show_on_fail() { [ "$FAILS" -eq "$1" ] || { echo "--- $2"; cat "$2"; }; }
job_field() { scontrol show job "$1" | tr ' ' '\n' | sed -n "s/^$2=//p" | head -n 1; }

# A store of 6 ranks (3 per process): generated traces, imported by one process.
kernalyse-tracegen --ranks 6 --kernels 3000 --steps 4 --slow-rank 2 --slow-factor 1.5 \
  --out traces >/dev/null 2>&1 || fail "kernalyse-tracegen"
kernalyse-merge traces -o run.h5 -q || fail "import"
kernalyse-merge run.h5 --all --json -q >all1.json || fail "one-process --all"

# 1. The MPI processes of a job over both nodes: where each rank runs, as the job sees it.
f0=$FAILS
slurm_run_job "$TMP/where.log" --chdir="$TMP" -N 2 --ntasks-per-node=1 \
  --wrap 'mpirun sh -c "echo rank \$OMPI_COMM_WORLD_RANK on \$SLURMD_NODENAME, host \$(hostname)"'
expect_eq "where: job exit code" "$SLURM_JOB_RC" "0"
expect_eq "where: rank 0 on node1 (host name node1), rank 1 on node2 (node2)" "$(grep '^rank' "$TMP/where.log" | sort | tr '\n' ' ')" \
  "rank 0 on node1, host node1 rank 1 on node2, host node2 "
show_on_fail "$f0" "$TMP/where.log"

# 2. The analysis job, 1 and 2 tasks per node (2 and 4 processes; 2 per node share memory, the
#    nodes talk over TCP): the report equals the one-process run's. (mpirun's --display-map would
#    show the map, but on stdout, which is the report; case 1 shows it.)
for per_node in 1 2; do
  f0=$FAILS
  what="analysis job, 2 nodes x $per_node"
  KERNALYSE_REPORT=$TMP/all-$per_node.json slurm_run_job "$TMP/analyse-$per_node.log" --chdir="$TMP" \
    -N 2 --ntasks-per-node="$per_node" "$SRC/launch/slurm/kernalyse-analyse.sbatch" run.h5 --all --json -q
  job=$SLURM_LAST_JOB
  expect_eq "$what: job exit code" "$SLURM_JOB_RC" "0"
  expect_eq "$what: allocation" "$(job_field "$job" NumNodes) $(job_field "$job" NodeList)" "2 node[1-2]"
  expect_contains "$what: $((2 * per_node)) processes" "$(cat "$TMP/analyse-$per_node.log")" \
    "on $((2 * per_node)) task(s) of job $job"
  expect_eq "$what: node2's slurmd started the job's step (mpirun's daemon)" \
    "$(grep -c "launch task StepId=$job\.0 " "$TMP/slurm/log/slurmd-node2.log")" "1"
  expect_eq "$what: report identical to one process's" \
    "$(cmp -s all1.json "all-$per_node.json" && echo identical)" "identical"
  show_on_fail "$f0" "$TMP/analyse-$per_node.log"
done

# 3. The Kineto export of the store as an analysis job over both nodes (2 x 2 processes): each
#    process writes its ranks' files (docs/analyses.md); the set is the one-process export's.
f0=$FAILS
kernalyse-merge run.h5 --export-kineto kin1 -q || fail "one-process --export-kineto"
slurm_run_job "$TMP/export.log" --chdir="$TMP" -N 2 --ntasks-per-node=2 \
  "$SRC/launch/slurm/kernalyse-analyse.sbatch" run.h5 --export-kineto kin4
expect_eq "export job: job exit code" "$SLURM_JOB_RC" "0"
expect_eq "export job: the one-process files ($(ls kin1 | wc -l))" \
  "$(diff -r kin1 kin4 >/dev/null && echo identical)" "identical"
expect_contains "export job: said once with the run's totals" "$(grep -c '^wrote 6 Kineto' "$TMP/export.log")" "1"
show_on_fail "$f0" "$TMP/export.log"

echo "total $((SECONDS - t0)) s"
finish
