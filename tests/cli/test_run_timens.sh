#!/usr/bin/env bash
# The recorded job with unaligned clocks: every rank of the emulated tensor-parallel run starts in
# its own time namespace with a known CLOCK_MONOTONIC(_RAW) offset (seconds apart plus odd ns).
# kernalyse-run must recover the offsets within the uncertainty it states (and the drift within
# what that implies); the aligned store must have no happened-before violation beyond those
# stated errors while the unaligned clocks have many, and the straggler ledger must still name
# the slow rank. (Drift under libfaketime: test_clock_truth.sh, same code.)
source "$(dirname "$0")/lib.sh"
use_mpi
# Spinning MPI waits (no yield) keep the ping-pong round trips sub-µs on this shared machine;
# the ranks' own waits do not spin (the collector's and the example's idle waits sleep).
export OMPI_MCA_mpi_yield_when_idle=0
cd "$TMP"
[ -x "$BIN/kernalyse_timens_exec" ] || { fail "kernalyse_timens_exec not built"; finish; exit; }

# Slow factor 3: rank 2 arrives ~3.8 ms late at every collective (~1.9 ms per unit of factor,
# measured). The ledger counts a skew as noise when it is within the two ranks' stated clock ±,
# and with 4 ranks x 3 threads on 2 shared cores and a busy one the MPI ping-pong's ± reached
# 1.86 ms: at factor 1.3 (0.57 ms late) rank 2's collectives were noise and stalls named another
# rank (1 run in 4). Time scale 1, unlike the other emulated straggler tests (time scale 4): a run
# over 0.5 s has its drift fitted, and under load the re-inferred drift then missed the MPI one by
# more than both stated ± (1 run in 3 at time scale 4: the completion fit's drift error is not
# covered there; reported, not hidden).
cat > rank.sh <<EOF
#!/usr/bin/env bash
r=\$OMPI_COMM_WORLD_RANK
exec "$BIN/kernalyse_timens_exec" \$((5 + 3 * r)) \$((777 + 31337 * r)) \\
  "$BIN/kernalyse-run" -q -o "$TMP/ns.h5" "$BIN/vicuna_tp" --layers 4 --steps 6 --slow-rank 2 --slow-factor 3 --print-offset
EOF
chmod +x rank.sh
mpirun -n 4 ./rank.sh 2>run.err
expect_eq "run in time namespaces: exit code" "$?" "0"
[ -f ns.h5 ] || { fail "no store: $(tail -c 1500 run.err)"; finish; exit; }
"$BIN/kernalyse-merge" ns.h5 --stragglers --json -q > ns.json
expect_eq "analysis exit code" "$?" "0"

/usr/bin/python3 - "$TMP" <<'PY'
import json, sys
import h5py
tmp = sys.argv[1]
d = json.load(open(f"{tmp}/ns.json"))
f = h5py.File(f"{tmp}/ns.h5", "r")
R = f["ranks"]
ranks = R["rank"][:].tolist()
off, drift = R["clock_offset_ns"][:].tolist(), R["clock_drift"][:].tolist()
base, unc = R["base_time_ns"][:].tolist(), R["clock_uncertainty_ns"][:].tolist()
start = f["activities/start_ns"][:]
t_run = int(start.min())  # a moment inside the run, on the aligned timeline
span = float(f["activities/end_ns"][:].max() - start.min())
passed = failed = 0
def check(what, ok, detail=""):
    global passed, failed
    if ok: passed += 1
    else:
        failed += 1
        print("FAIL -", what, detail)
injected = {r: (5 + 3 * r) * 10**9 + 777 + 31337 * r for r in range(4)}
for i, r in enumerate(ranks):
    # Invert the stored map at t_run: the rank's own clock read t_local when rank 0's read t_run.
    t_local = (t_run - base[i] - off[i]) / (1.0 + drift[i])
    measured = (t_run - base[i]) - t_local          # rank 0 clock − rank r clock
    expected = injected[0] - injected[r]
    err = abs(measured - expected)
    # The promise is an offset within the uncertainty the store states. (On an idle machine that
    # is ~0.3 µs; 4 ranks x 3 threads on 2 shared cores sometimes leave only slow round trips,
    # and the stated bound widens honestly. The 2 µs / 2 ppm figures on pinned ranks:
    # test_clock_truth.sh, the same clock code.)
    print(f"# rank {r}: offset error {err:.0f} ns, stated ±{unc[i]} ns, drift {drift[i]*1e6:.3f} ppm")
    check(f"rank {r}: offset {measured:.0f} ns vs injected {expected} ns within the stated ±{unc[i]} ns",
          err <= unc[i] + 50, f"error {err:.0f} ns")
    # A two-point drift is off by at most the two samples' errors over the time between them
    # (at least the recorded span).
    bound = 2 * unc[i] / span + 2e-6
    check(f"rank {r}: |drift| {abs(drift[i])*1e6:.3f} ppm within {bound*1e6:.2f} ppm", abs(drift[i]) <= bound)
cc = d["stragglers"]["clock_check"]
# Happened-before on the aligned clocks, within what the store promises: no rank ends a collective
# before another started it by more than the two ranks' stated ± together. (Zero raw violations is
# the idle machine's result; under load the MPI ping-pong can leave a rank at ±1 ms, honestly
# stated, and a few instances then overlap by less than that: 4 of 54 in one run of 5 with a
# fuzzer and a build beside the suite, rank 3 at ±1.17 ms, 2026-11-26.) The collectives are each
# rank's k-th communication kernel of a name (the emulated job's are in one order on every rank);
# their count must be the ledger's, or this grouping is not the ledger's match.
a = f["activities"]
names = [x.decode() if isinstance(x, bytes) else x for x in f["strings"][:]]
unc_of = dict(zip(ranks, unc))
per = {}
for rk, cat, st, en, nid in zip(a["rank"][:], a["category"][:], a["start_ns"][:], a["end_ns"][:], a["name_id"][:]):
    if cat == 1:  # Category::Communication
        per.setdefault(int(rk), []).append((int(st), int(en), names[nid]))
seen, groups = {}, {}
for rk, rows in per.items():
    for st, en, nm in sorted(rows):
        k = seen.get((rk, nm), 0)
        seen[(rk, nm)] = k + 1
        groups.setdefault((nm, k), []).append((rk, st, en))
beyond = raw = nxn = 0
for g in groups.values():
    if len(g) != len(ranks):
        continue
    nxn += 1
    i = min(g, key=lambda x: x[2])  # ends first
    j = max(g, key=lambda x: x[1])  # starts last
    raw += i[2] < j[1]
    beyond += i[2] + unc_of[i[0]] + unc_of[j[0]] < j[1]
print(f"# happened-before: {raw} raw violations of {nxn} instances, {beyond} beyond the stated ±; ledger: {cc}")
check(f"the grouping finds the ledger's {cc['nxn_instances']} instances", nxn == cc["nxn_instances"], str(nxn))
check("the grouping's raw violations are the ledger's", raw == cc["violations_aligned"], str(raw))
check("happened-before violations after alignment beyond the stated ±: 0", beyond == 0, str(beyond))
check("violations on the unaligned clocks: many", cc["violations_unaligned"] > cc["nxn_instances"] // 2, cc)
c = d["stragglers"]["collectives"]
# (The >= 90 % share is asserted in test_run_mpi.sh; here: the aligned ledger blames rank 2.)
counts = {r: sum(x["last_rank"] == r for x in c) for r in range(4)}
check(f"slow rank 2 is last most often {counts}", max(counts, key=counts.get) == 2)
print("#", d["stragglers"]["headline"][:100])
print("# per rank (times last, inflicted µs, noise-skipped):",
      [(g["rank"], g["times_last"], round(g["inflicted_us"]), g["noise_skipped"]) for g in d["stragglers"]["ranks"]])
check("headline names rank 2", d["stragglers"]["headline"].startswith("rank 2 arrived last"))
print(f"{passed} passed, {failed} failed")
sys.exit(1 if failed else 0)
PY
expect_eq "clock truth through the recorded job" "$?" "0"

# The same run with its recorded alignment stripped (each rank back on its own clock, its own
# "host": separate time namespaces), the clocks inferred from its collectives instead
# (docs/clocks.md "Inferred from the collectives"): within the stated ± of the MPI measurement.
cp ns.h5 stripped.h5 && /usr/bin/python3 "$SRC/tests/cli/strip_clock_alignment.py" stripped.h5
expect_eq "strip the recorded alignment" "$?" "0"
"$BIN/kernalyse-merge" stripped.h5 --stragglers --json -q > re.json
expect_eq "re-inferred analysis exit code" "$?" "0"
/usr/bin/python3 - "$TMP" <<'PY'
import json, re, sys
import h5py
tmp = sys.argv[1]
d = json.load(open(f"{tmp}/re.json"))
# The emulator's own clock offset per rank (vicuna_tp --print-offset) and its error: half its best
# ping-pong round trip. It places every modelled collective end of that rank, so it is a
# per-rank constant in the evidence that no completion fit can tell from a clock offset.
emu = {int(m[1]): int(m[2]) for m in re.finditer(
    r"vicuna_tp: rank (\d+) emulator clock offset -?\d+ ns \+- (\d+) ns", open(f"{tmp}/run.err").read())}
R = h5py.File(f"{tmp}/ns.h5", "r")["ranks"]
off, drift = R["clock_offset_ns"][:], R["clock_drift"][:]
base, unc = R["base_time_ns"][:], R["clock_uncertainty_ns"][:]
f = h5py.File(f"{tmp}/ns.h5", "r")
times = [int(f["activities/start_ns"][:].min()), int(f["activities/end_ns"][:].max())]
ci = d.get("clock_inference", {})
print("#", ci.get("summary"))
ok = ci.get("ok") is True and ci.get("violations_after") == 0
for r in d["ranks"]:
    i = r["rank"]
    for t in times:  # a moment on the MPI-aligned timeline → the rank's own clock → inferred map
        # integers until the drift term: an epoch-sized float is quantised to 256 ns
        local = int(t - base[i] - off[i]) / (1.0 + drift[i])
        err = abs(local + int(r["clock_offset_ns"]) + r["clock_drift"] * local - int(t - base[i]))
        print(f"# rank {i}: inferred vs MPI {err:.0f} ns; inferred ±{r['clock_uncertainty_ns']} ns, "
              f"MPI ±{unc[i]} ns, emulator ±{emu.get(i)} ns")
        # Both are estimates: they agree within the sum of their stated errors, and the evidence
        # is only as good as the emulator's physics: its own offset's error is added. Under load
        # its ping-pong found no round trip under 4-8 ms on one rank in about a third of the runs
        # (±2-4 ms); every miss of the inference seen (0.24-0.41 ms at ±0.17-0.21 ms, 4 of 20
        # runs beside a busy loop, 2026-11-28) was on such a rank, and none elsewhere
        # (docs/clocks.md, "Limit").
        if i not in emu:
            print(f"FAIL - rank {i}: no emulator offset in run.err")
            ok = False
        elif err > r["clock_uncertainty_ns"] + unc[i] + emu[i] + 1:
            print(f"FAIL - rank {i}: inferred offset {err:.0f} ns from the MPI one, outside the stated errors")
            ok = False
ok = ok and d["stragglers"]["clock_check"]["violations_aligned"] == 0
ok = ok and d["stragglers"]["headline"].startswith("rank 2 arrived last")
sys.exit(0 if ok else 1)
PY
expect_eq "re-inferred clocks: inference ran, within the stated ± of the MPI offsets, 0 happened-before violations after, rank 2 named" "$?" "0"
finish
