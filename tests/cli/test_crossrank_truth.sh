#!/usr/bin/env bash
# kernalyse-merge's cross-rank analyses (--overlap --breakdown --idle --stragglers) against the truth
# kernalyse-tracegen plants and computes exactly: 4 ranks x 20000 kernels, first with a slow rank
# (rank 2, kernels x1.3), then with a rank whose launches come late (rank 1, 300 µs before each
# collective's gate kernel). Every figure must equal the truth to the ns (|diff| <= 0.0005 µs); the
# straggler, its cause and the headline must be the planted ones. Never skips: a CLI without these
# flags or keys fails.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

# check.py TRUTH OUT.json MODE [ARG]: one line per check, "label<TAB>True|False<TAB>detail".
# MODE all: every analysis of --all --json; idle-thr: --idle --kernel-wait-us ARG (invariants, as the
# truth is at 30 µs); step-rank: --overlap --breakdown --step N --rank R with ARG = "N R".
cat >"$TMP/check.py" <<'EOF'
import json, re, sys, traceback

truth_file, out_file, mode = sys.argv[1:4]
arg = sys.argv[4] if len(sys.argv) > 4 else ""
TOL = 0.0005  # µs: ns / 1000, exact to 3 decimals
lines = []

def check(label, ok, detail=""):
    lines.append(f"{label}\t{bool(ok)}\t{str(detail)[:300]}")

def us(ns):
    return None if ns is None else ns / 1000

def close(got, want, tol=TOL):
    if want is None or got is None:
        return got is None and want is None
    return isinstance(got, (int, float)) and not isinstance(got, bool) and abs(got - want) <= tol

def compare(label, row, want):
    """row: CLI row (dict or None); want: {key: (expected value, tolerance)}."""
    if not isinstance(row, dict):
        return check(label, False, f"no row ({row!r})")
    bad = {k: (row.get(k, "<missing>"), w) for k, (w, tol) in want.items() if not close(row.get(k), w, tol)}
    check(label, not bad, f"got/want {bad}" if bad else "")

def index(rows, label, *keys):
    """CLI rows keyed by the given keys (as str); duplicate keys fail."""
    if not isinstance(rows, list):
        check(f"{label} is a list of rows", False, f"got {type(rows).__name__}")
        return {}
    idx = {}
    for row in rows:
        k = tuple(str(row.get(x)) for x in keys) if isinstance(row, dict) else None
        if k in idx or k is None:
            check(f"{label}: one row per {'/'.join(keys)}", False, f"duplicate or malformed {k}")
        idx[k] = row
    return idx

def overlap_want(o):
    return {"comm_us": (us(o["comm_ns"]), TOL), "overlap_us": (us(o["overlap_ns"]), TOL),
            "exposed_comm_us": (us(o["exposed_comm_ns"]), TOL), "overlap_pct": (o["overlap_pct"], 1e-6)}

def breakdown_want(b):
    return {"span_us": (us(b["span_ns"]), TOL), "idle_us": (us(b["idle_ns"]), TOL),
            "compute_us": (us(b["compute_ns"]), TOL), "non_compute_us": (us(b["non_compute_ns"]), TOL),
            "comm_us": (us(b["comm_ns_excl"]), TOL), "memory_us": (us(b["memory_ns_excl"]), TOL),
            "other_us": (us(b["other_ns"]), TOL)}

def family(op):  # "allreduce", "_allgather_base", "AllGather", "ReduceScatter" ... -> one word
    s = re.sub(r"[^a-z]", "", str(op).lower())
    return next((f for f in ("allreduce", "allgather", "reducescatter") if f in s), s)

def run():
    t = json.load(open(truth_file))
    try:
        j = json.load(open(out_file))
    except Exception as e:
        return check("kernalyse-merge printed one JSON object", False, e)
    check("kernalyse-merge printed one JSON object", isinstance(j, dict))
    R = [r["rank"] for r in t["ranks"]]

    if mode == "step-rank":
        step, rank = (int(x) for x in arg.split())
        tr = t["ranks"][rank]
        st = next(s for s in tr["steps"] if s["step"] == step)
        for key, want in (("overlap", overlap_want(st["overlap"])), ("breakdown", breakdown_want(st["breakdown"]))):
            rows = j.get(key)
            check(f"--step {step} --rank {rank}: {key} has exactly rank {rank}",
                  isinstance(rows, list) and [r.get("rank") for r in rows] == [rank], f"rows {rows}"[:200])
            compare(f"--step {step} --rank {rank}: {key} equals the truth of step {step}",
                    rows[0] if isinstance(rows, list) and rows else None, want)
        return

    if mode == "idle-thr":
        thr = float(arg)
        idle = index(j.get("idle"), "idle", "rank", "stream")
        moved = 0.0
        for tr in t["ranks"]:
            for s, w in tr["idle"].items():
                row = idle.get((str(tr["rank"]), s))
                if row is None:
                    check(f"--kernel-wait-us {arg}: rank {tr['rank']} stream {s} has an idle row", False)
                    continue
                ok = close(row.get("host_wait_us"), us(w["host_wait_ns"])) and close(
                    (row.get("kernel_wait_us") or 0) + (row.get("other_us") or 0),
                    us(w["kernel_wait_ns"] + w["other_ns"]), 2 * TOL) and \
                    row.get("kernel_wait_us", -1) >= us(w["kernel_wait_ns"]) - TOL
                moved += (row.get("kernel_wait_us") or 0) - us(w["kernel_wait_ns"])
                check(f"--kernel-wait-us {arg}: rank {tr['rank']} stream {s}: host wait unchanged, kernel wait + "
                      "other unchanged, kernel wait not smaller", ok, f"row {row} truth@30us {w}")
        check(f"--kernel-wait-us {arg} moves gaps from other to kernel wait", moved > 0, f"moved {moved} µs")
        return

    # ---- mode all ----
    check("has the keys ranks, overlap, breakdown, idle, stragglers, overlap_steps, breakdown_steps",
          all(k in j for k in ("ranks", "overlap", "breakdown", "idle", "stragglers", "overlap_steps",
                               "breakdown_steps")), sorted(j))
    check(f"ranks lists the {len(R)} ranks", isinstance(j.get("ranks"), list) and
          sorted(r.get("rank") for r in j["ranks"] if isinstance(r, dict)) == R, j.get("ranks"))

    ov, br = index(j.get("overlap"), "overlap", "rank"), index(j.get("breakdown"), "breakdown", "rank")
    ovs = index(j.get("overlap_steps"), "overlap_steps", "rank", "step")
    brs = index(j.get("breakdown_steps"), "breakdown_steps", "rank", "step")
    idle = index(j.get("idle"), "idle", "rank", "stream")
    for tr in t["ranks"]:
        r = tr["rank"]
        compare(f"rank {r} overlap (comm, overlap, exposed, pct) equals the truth", ov.get((str(r),)),
                overlap_want(tr["overlap"]))
        compare(f"rank {r} breakdown (span, idle, compute, non-compute = comm + memory + other) equals the truth",
                br.get((str(r),)), breakdown_want(tr["breakdown"]))
        for s, w in tr["idle"].items():
            compare(f"rank {r} stream {s} idle (host wait, kernel wait, other) equals the truth",
                    idle.get((str(r), s)),
                    {"host_wait_us": (us(w["host_wait_ns"]), TOL), "kernel_wait_us": (us(w["kernel_wait_ns"]), TOL),
                     "other_us": (us(w["other_ns"]), TOL), "overlaps": (w["overlap_count"], 0)})
        bad = []
        for st in tr["steps"]:
            k = (str(r), str(st["step"]))
            for rows, want, name in ((ovs, overlap_want(st["overlap"]), "overlap"),
                                     (brs, breakdown_want(st["breakdown"]), "breakdown")):
                row = rows.get(k)
                miss = {x: (row.get(x, "<missing>") if row else None, w) for x, (w, tol) in want.items()
                        if not row or not close(row.get(x), w, tol)}
                if miss: bad.append((name, st["step"], miss))
        check(f"rank {r} per-step overlap and breakdown ({len(tr['steps'])} steps) equal the truth", not bad, bad)
    check("no per-step rows beyond the truth's steps",
          set(ovs) | set(brs) <= {(str(tr["rank"]), str(s["step"])) for tr in t["ranks"] for s in tr["steps"]},
          sorted(set(ovs) | set(brs)))

    sg = j.get("stragglers")
    if not isinstance(sg, dict):
        return check("stragglers is an object", False, type(sg).__name__)
    check("collectives matched by NCCL Seq", "seq" in str(sg.get("match", "")).lower(), sg.get("match"))
    tc, cc = t["collectives"], sg.get("collectives")
    check(f"all {len(tc)} collectives matched, none left over",
          isinstance(cc, list) and len(cc) == len(tc) and not sg.get("unmatched_count"),
          f"{len(cc) if isinstance(cc, list) else cc} matched, unmatched {sg.get('unmatched_count')}")
    cc = cc if isinstance(cc, list) else []
    check("collective ids are unique", len({str(c.get("id")) for c in cc}) == len(cc))
    bad = []
    for k, (w, c) in enumerate(zip(tc, cc)):  # both in time order (Seq order is time order here)
        tied = [r for r in R if w["start_ns"][r] == max(w["start_ns"])]
        want_last = None if len(tied) == len(R) else tied
        wait = c.get("wait_us") if isinstance(c.get("wait_us"), dict) else {}
        errs = []
        if family(c.get("op")) != family(w["op"]): errs.append(("op", c.get("op"), w["op"]))
        if not (c.get("last_rank") is None if want_last is None else c.get("last_rank") in want_last):
            errs.append(("last_rank", c.get("last_rank"), want_last))
        if not close(c.get("skew_us"), us(w["skew_ns"])): errs.append(("skew_us", c.get("skew_us"), us(w["skew_ns"])))
        if not close(c.get("inflicted_us"), us(w["inflicted_ns"])):
            errs.append(("inflicted_us", c.get("inflicted_us"), us(w["inflicted_ns"])))
        for r in R:
            if not close(wait.get(str(r)), us(w["wait_ns"][r])): errs.append((f"wait_us[{r}]", wait.get(str(r)), us(w["wait_ns"][r])))
        if c.get("noise"): errs.append(("noise", True, False))
        if errs: bad.append((k, c.get("id"), errs))
    check("every collective's op, last rank, skew, per-rank waits and inflicted wait equal the truth", not bad,
          f"{len(bad)} differ, first: {bad[:2]}")

    rk = index(sg.get("ranks"), "stragglers.ranks", "rank")
    for w in t["stragglers"]:
        compare(f"rank {w['rank']} times last, wait inflicted and wait suffered equal the truth", rk.get((str(w["rank"]),)),
                {"times_last": (w["times_last"], 0), "inflicted_us": (us(w["inflicted_ns"]), 2 * TOL),
                 "suffered_us": (us(w["suffered_ns"]), 2 * TOL)})

    p = t["planted"]
    s, cause = p["straggler"], {"kernels": "kernels_us", "host_delay": "host_delay_us"}.get(p["cause"])
    check("the truth plants one straggler with one cause", s >= 0 and cause, p)
    if not (s >= 0 and cause):
        return
    times = {r: (rk.get((str(r),)) or {}).get("times_last", -1) for r in R}
    check(f"planted rank {s} is last most often", all(times[s] > v for r, v in times.items() if r != s), times)
    causes = (rk.get((str(s),)) or {}).get("causes")
    causes = causes if isinstance(causes, dict) else {}
    total = sum(max(0.0, v) for v in causes.values() if isinstance(v, (int, float)))
    share = (causes.get(cause) or 0) / total if total > 0 else 0
    check(f"rank {s}'s lateness is >= 80 % {cause} (planted: {p['cause']})", share >= 0.8,
          f"{cause} share {share:.3f} of {causes}")
    check("causes has kernels_us, host_delay_us, other_idle_us, inherited_us",
          all(k in causes for k in ("kernels_us", "host_delay_us", "other_idle_us", "inherited_us")), causes)
    head = sg.get("headline")
    check(f"the headline names rank {s}", isinstance(head, str) and re.search(rf"\brank {s}\b", head)
          and not re.search(rf"\brank (?!{s}\b)\d+\b", head), head)

try:
    run()
except Exception:
    check("checker ran to the end", False, traceback.format_exc().replace("\n", " | "))
print("\n".join(lines))
EOF

# report TAG CHECK-OUTPUT: one pass/fail per line; no line at all is a failure too.
report() {
  local tag=$1 out=$2 n=0 label ok detail
  while IFS=$'\t' read -r label ok detail; do
    [ -z "$label" ] && continue
    n=$((n + 1))
    if [ "$ok" = True ]; then pass "$tag: $label"; else fail "$tag: $label: $detail"; fi
  done <<<"$out"
  [ "$n" -gt 0 ] || fail "$tag: the checker printed nothing"
}

# scenario NAME ARGS...: generate with --truth, run --all --json, check everything.
scenario() {
  local n=$1; shift
  kernalyse-tracegen --ranks 4 --kernels 20000 --steps 4 --seed 1 --out "$TMP/$n" --truth "$TMP/$n.truth.json" \
    "$@" 2>"$TMP/$n.gen.err"
  expect_eq "$n: tracegen exits 0" "$?" "0"
  # tracegen writes every rank on one true clock and the truth is exact on the times as written:
  # --align off (an inferred alignment moves ranks by tens of ns, within its stated ±; its own
  # accuracy: test_clock_infer.sh).
  kernalyse-merge "$TMP/$n" --all --json --align off >"$TMP/$n.all.json" 2>"$TMP/$n.all.err"
  expect_eq "$n: kernalyse-merge DIR --all --json exits 0 ($(head -c 200 "$TMP/$n.all.err"))" "$?" "0"
  report "$n" "$("$PY" "$TMP/check.py" "$TMP/$n.truth.json" "$TMP/$n.all.json" all)"
}

scenario slow --slow-rank 2 --slow-factor 1.3
scenario late --launch-delay-rank 1 --launch-delay-us 300

# The explicit flags, --step/--rank filters and --kernel-wait-us.
kernalyse-merge "$TMP/slow" --overlap --breakdown --idle --stragglers --json --align off >"$TMP/flags.json" 2>"$TMP/flags.err"
expect_eq "--overlap --breakdown --idle --stragglers --json exits 0 ($(head -c 200 "$TMP/flags.err"))" "$?" "0"
report "explicit flags" "$("$PY" "$TMP/check.py" "$TMP/slow.truth.json" "$TMP/flags.json" all)"
kernalyse-merge "$TMP/slow" --overlap --breakdown --json --step 2 --rank 1 >"$TMP/step.json" 2>"$TMP/step.err"
expect_eq "--step 2 --rank 1 exits 0 ($(head -c 200 "$TMP/step.err"))" "$?" "0"
report "step/rank" "$("$PY" "$TMP/check.py" "$TMP/slow.truth.json" "$TMP/step.json" step-rank "2 1")"
kernalyse-merge "$TMP/slow" --idle --json --kernel-wait-us 100 >"$TMP/kw.json" 2>"$TMP/kw.err"
expect_eq "--idle --kernel-wait-us 100 exits 0 ($(head -c 200 "$TMP/kw.err"))" "$?" "0"
report "kernel-wait" "$("$PY" "$TMP/check.py" "$TMP/slow.truth.json" "$TMP/kw.json" idle-thr 100)"
finish
