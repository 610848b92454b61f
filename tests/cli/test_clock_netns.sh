#!/usr/bin/env bash
# Clock alignment across two fake "nodes" (docs/clocks.md; environment notes §8): two network
# namespaces joined by a veth pair, each with its own host name (UTS namespace) and its own time
# namespace, CLOCK_MONOTONIC(_RAW) shifted by a known ns-precise amount (node1 +5 s + 111111 ns,
# node2 +3 s + 777 ns). 4 ranks, 2 per node: ranks on node1 talk over shared memory, node1-node2 over
# TCP (~25 µs round trips). Open MPI starts node2's daemon through a launcher agent that enters
# node2's namespaces. True offsets to rank 0: 0 on node1, off(node1) - off(node2) on node2.
# Asserts per rank != 0: offsets at start and end within 10 µs of the truth and within the reported
# bound; drift consistent with that (|drift| <= 2 * 10 µs / span); 0 < uncertainty <= 50 µs.
# Never skips: without network/time namespaces it fails and says why.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
PROBE=$BIN/kernalyse_clocksync_probe
TIMENS=$BIN/kernalyse_timens_exec
TOL_NS=10000
N1=kcs1-$$ N2=kcs2-$$   # namespace names, unique per test run
V1=kcsa$$ V2=kcsb$$     # veth names (<= 15 characters)
OFF1=(5 111111) OFF2=(3 777)

for f in "$PROBE" "$TIMENS"; do
  if [ ! -x "$f" ]; then fail "$f not built (targets kernalyse_clocksync_probe, kernalyse_timens_exec)"; finish; exit; fi
done
for c in mpirun ip unshare; do
  if ! command -v $c >/dev/null; then fail "$c not found"; finish; exit; fi
done

cleanup() { ip netns del "$N1" 2>/dev/null; ip netns del "$N2" 2>/dev/null; rm -rf "$TMP"; }
trap cleanup EXIT
if ! err=$({ ip netns add "$N1" && ip netns add "$N2" &&
  ip link add "$V1" type veth peer name "$V2" &&
  ip link set "$V1" netns "$N1" && ip link set "$V2" netns "$N2" &&
  ip -n "$N1" addr add 10.77.0.1/24 dev "$V1" && ip -n "$N2" addr add 10.77.0.2/24 dev "$V2" &&
  ip -n "$N1" link set lo up && ip -n "$N2" link set lo up &&
  ip -n "$N1" link set "$V1" up && ip -n "$N2" link set "$V2" up; } 2>&1); then
  fail "network namespaces unavailable (needs root / CAP_NET_ADMIN): $err"; finish; exit
fi
if ! err=$("$TIMENS" 1 0 true 2>&1); then
  fail "time namespaces unavailable (unshare(CLONE_NEWTIME) needs CAP_SYS_ADMIN, Linux >= 5.6): $err"
  finish; exit
fi

# Launcher agent: Open MPI calls it as `agent [options] HOST orted ARGS...` for the remote node.
cat >"$TMP/agent.sh" <<EOF
#!/usr/bin/env bash
while [ \$# -gt 0 ] && [ "\${1#-}" != "\$1" ]; do shift; done
host=\$1; shift
case \$host in
  10.77.0.2|node2) exec ip netns exec $N2 unshare --uts "$TIMENS" ${OFF2[0]} ${OFF2[1]} bash -c "hostname node2; \$*" ;;
  *) echo "agent: unknown host \$host" >&2; exit 1 ;;
esac
EOF
chmod +x "$TMP/agent.sh"

# Rank 0 on a CPU of its own, the others on another: the measured pair never shares a CPU (the
# ranks waiting for their turn sleep, clocksync.cpp). With that, busy polling (no
# mpi_yield_when_idle) gives ~7 µs round trips even beside CPU hogs; yielding ranks lose their CPU
# to such hogs for whole scheduler ticks (ms).
mapfile -t CPUS < <($PY -c 'import os; print(*sorted(os.sched_getaffinity(0)), sep="\n")')
if [ ${#CPUS[@]} -ge 2 ]; then PIN0="taskset -c ${CPUS[0]}"; PINW="taskset -c ${CPUS[1]}"
else PIN0=""; PINW=""; echo "# one CPU only: ranks not pinned"; fi
cat >"$TMP/rank.sh" <<EOF
#!/usr/bin/env bash
if [ "\$OMPI_COMM_WORLD_RANK" = 0 ]; then exec $PIN0 "$PROBE" "\$@"; else exec $PINW "$PROBE" "\$@"; fi
EOF
chmod +x "$TMP/rank.sh"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_mtl='^ofi' OMPI_MCA_pml=ob1
MPIRUN=(mpirun --allow-run-as-root --oversubscribe --bind-to none --mca plm_rsh_agent "$TMP/agent.sh"
  --mca oob_tcp_if_include 10.77.0.0/24 --mca btl_tcp_if_include 10.77.0.0/24 --mca btl self,vader,tcp
  --mca mpi_yield_when_idle 0 --host 10.77.0.1:2,10.77.0.2:2 -n 4 "$TMP/rank.sh" --work-ms 1000)
if ! ip netns exec "$N1" unshare --uts "$TIMENS" "${OFF1[0]}" "${OFF1[1]}" \
    bash -c "hostname node1; exec ${MPIRUN[*]}" >"$TMP/probe.jsonl" 2>"$TMP/probe.err"; then
  fail "mpirun across the two namespaces failed: $(tail -c 2000 "$TMP/probe.err")"; finish; exit
fi
cat "$TMP/probe.jsonl"

cat >"$TMP/check.py" <<'EOF'
import json, sys
path, tol, o1s, o1n, o2s, o2n = sys.argv[1], int(sys.argv[2]), *map(int, sys.argv[3:7])
off1, off2 = o1s * 10**9 + o1n, o2s * 10**9 + o2n
rows = [json.loads(l) for l in open(path) if l.strip()]
out = []
def check(label, ok, detail=""):
    out.append(f"{label}\t{bool(ok)}\t{detail}")
check("4 rows, ranks 0..3 in order", [d.get("rank") for d in rows] == [0, 1, 2, 3])
by = {d["rank"]: d for d in rows}
if 0 in by:
    check("rank 0 is the reference", (by[0]["offset_ns"], by[0]["drift"], by[0]["uncertainty_ns"]) == (0, 0.0, 0), by[0])
for r in (1, 2, 3):
    d = by.get(r)
    if d is None:
        continue
    want = 0 if r == 1 else off1 - off2  # mpirun maps ranks by slot: 0, 1 on node1; 2, 3 on node2
    u = d["uncertainty_ns"]
    e0, e1 = d["offset_ns"] - want, d["offset_end_ns"] - want
    span = d["t1_local_ns"] - d["t0_local_ns"]
    max_drift = 2 * tol / span
    check(f"rank {r}: start offset within {tol} ns of {want}", abs(e0) <= tol, f"error {e0} ns")
    check(f"rank {r}: end offset within {tol} ns of {want}", abs(e1) <= tol, f"error {e1} ns")
    check(f"rank {r}: |errors| {abs(e0)}, {abs(e1)} ns within the bound {u} ns", max(abs(e0), abs(e1)) <= u)
    check(f"rank {r}: |drift| {d['drift'] * 1e6:.3f} ppm <= {max_drift * 1e6:.1f} ppm", abs(d["drift"]) <= max_drift)
    check(f"rank {r}: 0 < uncertainty {u} ns <= 50000 ns", 0 < u <= 50000, f"rtt {d['rtt_start_ns']}/{d['rtt_end_ns']}")
    print(f"# rank {r}: offset error start {e0:+d} ns, end {e1:+d} ns; drift {d['drift'] * 1e6:+.3f} ppm; "
          f"uncertainty {u} ns", file=sys.stderr)
print("\n".join(out))
EOF
$PY "$TMP/check.py" "$TMP/probe.jsonl" $TOL_NS "${OFF1[@]}" "${OFF2[@]}" >"$TMP/check.tsv" 2>"$TMP/check.log" ||
  echo "check.py	False	crashed: $(tail -c 1000 "$TMP/check.log")" >>"$TMP/check.tsv"
while IFS=$'\t' read -r label ok detail; do
  if [ "$ok" = True ]; then pass "$label"; else fail "$label: $detail"; fi
done <"$TMP/check.tsv"
cat "$TMP/check.log"
finish
