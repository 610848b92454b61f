# A throw-away Slurm cluster on this machine for the CLI tests (sourced; bash), one node or more.
# Debian's slurm-wlm and munge, no systemd and nothing under /etc: munged, slurmctld and slurmd
# run with their own key, config, ports, state and logs under one directory and are stopped by
# pid (docs: ../shared/notes/environment.md §9).
#
#   source tests/cli/slurm_cluster.sh
#   slurm_start DIR [CPUS] [NODES] || exit 1   # exports SLURM_CONF; on failure prints why + logs
#   slurm_run_job OUT.log [sbatch options...] SCRIPT [args...]   # sets SLURM_JOB_RC, SLURM_LAST_JOB
#   slurm_stop                            # idempotent; call it from an EXIT trap
#
# One node is "localhost"; NODES > 1 are node1, node2, ... (CPUS each): one slurmd per node, node
# i at 127.0.0.i on its own port, each in its own UTS namespace named after the node, with spool,
# log and pid file of its own (DIR/spool/NODE, DIR/log/slurmd-NODE.log, DIR/run/slurmd-NODE.pid).
# Debian's slurm-wlm 22.05 is built with --enable-multiple-slurmd (auth_munge.so holds its
# "replayed cred ... expected in multiple slurmd mode", cgroup_v2.so its per-node
# "%s_%s.scope"): the slurmds share one munged, which sees a credential decoded on each node as a
# replay; that build accepts it.
#
# The daemons run as root (SlurmUser=root); munged runs as the munge user, so DIR and its parents
# must be traversable by it (mode 0711).

SLURM_DIR=""
SLURM_PIDS=()
SLURM_WATCHDOG=""

slurm_log() { echo "slurm_cluster: $*" >&2; }

# Prints every daemon log (the failure message of slurm_start).
slurm_dump_logs() {
  local f
  for f in "$SLURM_DIR"/log/*.log; do
    [ -f "$f" ] || continue
    echo "----- $f (last 40 lines) -----" >&2
    tail -n 40 "$f" >&2
  done
}

# A TCP port nobody listens on, away from the well-known Slurm ports 6817/6818 and from the
# ports given as arguments.
slurm_free_port() {
  local used p i
  used=$(ss -Htan 2>/dev/null | awk '{print $4}' | sed 's/.*://')
  for i in $(seq 1 200); do
    p=$((20000 + RANDOM % 40000))
    if ! grep -qx "$p" <<<"$used" && [[ " $* " != *" $p "* ]]; then
      echo "$p"
      return 0
    fi
  done
  return 1
}

# alive PID: true while PID runs (a zombie, waiting for PID 1 to reap it, counts as gone).
slurm_alive() {
  local st
  st=$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null) || return 1
  [ -n "$st" ] && [ "$st" != Z ] && [ "$st" != X ]
}

# wait_for SECONDS CMD...: polls CMD every 50 ms.
slurm_wait_for() {
  local deadline=$((SECONDS + $1))
  shift
  while ! "$@"; do
    [ "$SECONDS" -ge "$deadline" ] && return 1
    sleep 0.05
  done
}

slurm_pidfile_alive() {
  local pid
  pid=$(cat "$1" 2>/dev/null) || return 1
  [ -n "$pid" ] && slurm_alive "$pid"
}

slurm_gone() { ! slurm_alive "$1"; }
slurm_no_jobs() { [ -z "$(squeue -h 2>/dev/null)" ]; }

# All nodes idle (sinfo prints one line per state).
slurm_node_idle() {
  [ "$(sinfo -h -o %t 2>/dev/null)" = idle ]
}

# slurm_nodes N: the node lines of slurm.conf and gres.conf for N nodes on this machine
# (SLURM_NODES: localhost, or node1, node2, ...; node i at 127.0.0.i, its own slurmd port).
slurm_nodes() {
  local n=$1 i name port ports=()
  SLURM_NODES=()
  SLURM_NODE_LINES=""
  : >"$SLURM_DIR/gres.conf"
  for ((i = 1; i <= n; i++)); do
    # One node is "localhost" (as before); more are node1, node2, ...: with a first node named
    # localhost, slurmctld's node lookup answers any name with it while it is the only one, and
    # the second node line fails as "Duplicated NodeHostName" (_find_node_record, node_conf.c).
    name=node$i
    [ "$n" -eq 1 ] && name=localhost
    port=$(slurm_free_port "$cport" "${ports[@]}") || return 1
    ports+=("$port")
    SLURM_NODES+=("$name")
    SLURM_NODE_LINES+="NodeName=$name NodeAddr=127.0.0.$i Port=$port CPUs=$cpus Gres=gpu:$cpus State=UNKNOWN"$'\n'
    # Pretend GPUs: gres/gpu needs one file per device; plain files do (--gpus-per-task works
    # and sets CUDA_VISIBLE_DEVICES; nothing is bound with TaskPlugin=task/none).
    mkdir -p "$SLURM_DIR/spool/$name" "$SLURM_DIR/dev/$name" && touch $(seq -f "$SLURM_DIR/dev/$name/gpu%g" 0 $((cpus - 1)))
    echo "NodeName=$name Name=gpu File=$SLURM_DIR/dev/$name/gpu[0-$((cpus - 1))]" >>"$SLURM_DIR/gres.conf"
  done
}

slurm_start() {
  local dir=$1 cpus=${2:-8} nnodes=${3:-1}
  local d m pid cport node
  for cmd in munged mungekey slurmctld slurmd sbatch squeue scontrol sinfo runuser ss; do
    if ! command -v "$cmd" >/dev/null 2>&1 && [ ! -x "/usr/sbin/$cmd" ]; then
      slurm_log "$cmd not found: install slurm-wlm and munge (.ci/install-deps)"
      return 1
    fi
  done
  export PATH="$PATH:/usr/sbin:/sbin"
  if ! id munge >/dev/null 2>&1; then
    slurm_log "no munge user: install the munge package (.ci/install-deps)"
    return 1
  fi
  mkdir -p "$dir" || return 1
  SLURM_DIR=$(cd "$dir" && pwd)
  d=$SLURM_DIR
  m=$d/munge
  mkdir -p "$d/log" "$d/state" "$d/spool" "$d/run" "$d/tmp" "$m" || return 1
  # munged (as munge) must reach its socket: every parent traversable, its own dir 0711 and
  # owned by munge, nothing group/world-writable.
  local p=$d
  while [ "$p" != / ]; do
    case $(stat -c %A "$p") in
      *x??[xs]??[xt]) ;;
      *) chmod go+x "$p" || return 1 ;;
    esac
    p=$(dirname "$p")
  done
  chmod 0755 "$d/log"
  chown munge:munge "$m" && chmod 0711 "$m" || return 1
  touch "$d/log/munged.log" && chown munge:munge "$d/log/munged.log"

  # --- munge: own key and socket -----------------------------------------------------------------
  if ! runuser -u munge -- mungekey --create --keyfile="$m/munge.key" 2>"$d/log/mungekey.log"; then
    slurm_log "mungekey failed"; slurm_dump_logs; return 1
  fi
  runuser -u munge -- munged --socket="$m/munge.sock" --pid-file="$m/munged.pid" \
    --log-file="$d/log/munged.log" --seed-file="$m/munged.seed" --key-file="$m/munge.key" \
    2>>"$d/log/munged.log" || { slurm_log "munged failed"; slurm_dump_logs; return 1; }
  if ! slurm_wait_for 10 slurm_pidfile_alive "$m/munged.pid"; then
    slurm_log "munged did not start"; slurm_dump_logs; return 1
  fi
  SLURM_PIDS+=("$(cat "$m/munged.pid")")
  slurm_watchdog

  # --- slurm.conf ----------------------------------------------------------------------------------
  cport=$(slurm_free_port) && slurm_nodes "$nnodes" || {
    slurm_log "no free TCP port"; return 1; }
  # Two clusters at once (tests of two builds) must not share job ids: Slurm's PMIx plugin and
  # Open MPI name their scratch directories after them. Random first id, own TmpFS.
  local first_job=$((1000 + RANDOM * 30))
  cat >"$d/slurm.conf" <<EOF
ClusterName=kernalyse-test
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$cport
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$m/munge.sock
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SlurmdParameters=config_overrides
MpiDefault=none
StateSaveLocation=$d/state
SlurmdSpoolDir=$d/spool/%n
SlurmctldPidFile=$d/run/slurmctld.pid
SlurmdPidFile=$d/run/slurmd-%n.pid
SlurmctldLogFile=$d/log/slurmctld.log
SlurmdLogFile=$d/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ReturnToService=2
MinJobAge=60
FirstJobId=$first_job
TmpFS=$d/tmp
InactiveLimit=0
KillWait=5
GresTypes=gpu
${SLURM_NODE_LINES}PartitionName=debug Nodes=$(IFS=,; echo "${SLURM_NODES[*]}") Default=YES MaxTime=INFINITE State=UP
EOF
  export SLURM_CONF=$d/slurm.conf

  # --- slurmctld, slurmd ---------------------------------------------------------------------------
  if ! slurmctld -f "$SLURM_CONF" -i 2>>"$d/log/slurmctld.log"; then
    slurm_log "slurmctld failed (port $cport)"; slurm_dump_logs; return 1
  fi
  if ! pid=$(slurm_wait_for 10 slurm_pidfile_alive "$d/run/slurmctld.pid" && cat "$d/run/slurmctld.pid"); then
    slurm_log "slurmctld did not start (port $cport)"; slurm_dump_logs; return 1
  fi
  SLURM_PIDS+=("$pid")
  # More than one node: each slurmd in its own UTS namespace whose host name is the node's, so
  # that what runs under it (slurmstepd, Open MPI's daemon and processes) sees that name, as on
  # separate machines; Open MPI names its shared-memory segments (/dev/shm/vader_segment.HOST.*)
  # and session directories after the host name, and two nodes both called "vm" would share them.
  local uts=()
  [ "$nnodes" -gt 1 ] && uts=(unshare --uts sh -c 'hostname "$0" && exec "$@"')
  for node in "${SLURM_NODES[@]}"; do
    if ! "${uts[@]}" ${uts:+"$node"} slurmd -f "$SLURM_CONF" -N "$node" 2>>"$d/log/slurmd-$node.log"; then
      slurm_log "slurmd of $node failed"; slurm_dump_logs; return 1
    fi
    if ! pid=$(slurm_wait_for 10 slurm_pidfile_alive "$d/run/slurmd-$node.pid" && cat "$d/run/slurmd-$node.pid"); then
      slurm_log "slurmd of $node did not start"; slurm_dump_logs; return 1
    fi
    SLURM_PIDS+=("$pid")
  done
  if ! slurm_wait_for 20 slurm_node_idle; then
    slurm_log "nodes never became idle: $(sinfo -h -N -o '%N %t %E' 2>&1 | tr '\n' ';')"
    slurm_dump_logs
    return 1
  fi
  slurm_log "up in $d (${SLURM_NODES[*]}; slurmctld port $cport, $cpus CPUs per node, pids ${SLURM_PIDS[*]})"
}

# If the test itself is killed (ctest timeout: SIGKILL, no trap runs), a detached watchdog still
# stops the daemons by pid once the test's shell is gone.
slurm_watchdog() {
  [ -n "$SLURM_WATCHDOG" ] && kill "$SLURM_WATCHDOG" 2>/dev/null
  local d=$SLURM_DIR
  setsid bash -c '
    while kill -0 '"$$"' 2>/dev/null; do sleep 1; done
    for f in "$0"/run/slurmd-*.pid "$0"/run/slurmctld.pid "$0"/munge/munged.pid; do
      pid=$(cat "$f" 2>/dev/null) && [ -n "$pid" ] && kill "$pid" 2>/dev/null
    done' "$d" </dev/null >/dev/null 2>&1 &
  SLURM_WATCHDOG=$!
}

slurm_stop() {
  [ -n "$SLURM_DIR" ] || return 0
  local pid i
  # Jobs first (their slurmstepd would outlive slurmd), then the daemons, newest first.
  if [ -n "${SLURM_CONF:-}" ] && [ ${#SLURM_PIDS[@]} -ge 3 ]; then
    scancel --full --user=root 2>/dev/null
    slurm_wait_for 5 slurm_no_jobs
  fi
  for ((i = ${#SLURM_PIDS[@]} - 1; i >= 0; i--)); do
    pid=${SLURM_PIDS[i]}
    kill "$pid" 2>/dev/null
    slurm_wait_for 10 slurm_gone "$pid" || kill -9 "$pid" 2>/dev/null
  done
  SLURM_PIDS=()
  if [ -n "$SLURM_WATCHDOG" ]; then
    kill "$SLURM_WATCHDOG" 2>/dev/null
    SLURM_WATCHDOG=""
  fi
  SLURM_DIR=""
}

# slurm_run_job LOG [sbatch options...] SCRIPT [args...]: submits, waits (polling squeue every
# 0.1 s, at most SLURM_JOB_TIMEOUT seconds, default 120); the job's stdout+stderr go to LOG.
# Sets SLURM_LAST_JOB (the job id) and SLURM_JOB_RC: the job's exit code, "signal-N",
# "timeout" (the job is cancelled), "submit-failed" (sbatch's message on stderr) or "unknown".
# Returns 0 when the exit code is 0.
SLURM_LAST_JOB=""
SLURM_JOB_RC=""
slurm_run_job() {
  local log=$1 id deadline ec
  shift
  SLURM_LAST_JOB=""
  SLURM_JOB_RC=""
  if ! id=$(sbatch --parsable --output="$log" "$@" 2>"$log.sbatch-err"); then
    cat "$log.sbatch-err" >&2
    SLURM_JOB_RC=submit-failed
    return 1
  fi
  id=${id%%;*}
  SLURM_LAST_JOB=$id
  deadline=$((SECONDS + ${SLURM_JOB_TIMEOUT:-120}))
  while [ -n "$(squeue -h -j "$id" 2>/dev/null)" ]; do
    if [ "$SECONDS" -ge "$deadline" ]; then
      scancel "$id" 2>/dev/null
      SLURM_JOB_RC=timeout
      return 1
    fi
    sleep 0.1
  done
  ec=$(scontrol show job "$id" 2>/dev/null | sed -n 's/.* ExitCode=\([0-9]*\):\([0-9]*\).*/\1:\2/p')
  case "$ec" in
    *:0) SLURM_JOB_RC=${ec%%:*} ;;
    "") SLURM_JOB_RC=unknown ;;
    *) SLURM_JOB_RC="signal-${ec#*:}" ;;
  esac
  [ "$SLURM_JOB_RC" = 0 ]
}
