#!/usr/bin/env bash
# kernalyse-tracegen: files, valid JSON, exact kernel counts, truth file agrees with the trace.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

kernalyse-tracegen --ranks 2 --kernels 5000 --steps 3 --seed 7 --out "$TMP/plain" \
  --truth "$TMP/truth.json" 2>"$TMP/err.txt"
expect_eq "tracegen exits 0" "$?" "0"
for r in 0 1; do
  if [ -s "$TMP/plain/rank-$r.json" ]; then pass "rank-$r.json exists"; else fail "rank-$r.json missing"; fi
done

# Recount everything from the traces (ts/dur parsed as decimals: exact ns) and compare with the truth.
check=$("$PY" - "$TMP/plain" "$TMP/truth.json" <<'EOF'
import collections, decimal, json, sys
d, truth = sys.argv[1], json.load(open(sys.argv[2]))
ns = lambda v: int(decimal.Decimal(v) * 1000)
out = []
for t in truth["ranks"]:
    r = t["rank"]
    j = json.load(open(f"{d}/rank-{r}.json"), parse_float=str)
    ev = j["traceEvents"]
    ok = j.get("kernalyseSynthetic") is True and j["distributedInfo"]["rank"] == r \
        and j["distributedInfo"]["world_size"] == 2 and "baseTimeNanoseconds" in j \
        and "emulated" in j["deviceProperties"][0]["name"]
    out.append(f"rank{r}.header {ok}")
    # ts/dur: float µs with exactly three decimals
    three = lambda v: isinstance(v, str) and len(v.split(".")[-1]) == 3 and "." in v
    bad = [e for e in ev if "dur" in e and not (three(e["ts"]) and three(e["dur"]))]
    out.append(f"rank{r}.ts3 {len(bad)}")
    gpu = [e for e in ev if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset")]
    kern = [e for e in gpu if e["cat"] == "kernel"]
    out.append(f"rank{r}.kernels {len(kern)} {t['kernels']}")
    cnt = collections.Counter(e["cat"] for e in gpu)
    nccl = sum(1 for e in kern if e["name"].startswith("nccl"))
    steps = sum(1 for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    out.append(f"rank{r}.counts {cnt['gpu_memcpy']},{cnt['gpu_memset']},{nccl},{steps},{len(ev)} "
               f"{t['memcpy']},{t['memset']},{t['nccl_kernels']},{t['profiler_steps']},{t['events']}")
    names = collections.defaultdict(lambda: [0, 0])
    for e in kern:
        names[e["name"]][0] += 1
        names[e["name"]][1] += ns(e["dur"])
    want = {n: [v["count"], v["total_ns"]] for n, v in t["kernel_names"].items()}
    out.append(f"rank{r}.names {dict(names) == want}")
    # launches: every GPU op has a cuda_runtime call with the same correlation, launched before it
    launch = {e["args"]["correlation"]: ns(e["ts"]) for e in ev if e.get("cat") == "cuda_runtime"}
    out.append(f"rank{r}.launch {all(launch.get(e['args']['correlation'], 1 << 62) <= ns(e['ts']) for e in gpu)}")
    # per stream: gap = start - latest end so far, in start order
    for s, want in t["streams"].items():
        for key, ops in (("all", gpu), ("kernels_only", kern)):
            iv = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"])) for e in ops if e["tid"] == int(s))
            gaps = total = over = touch = 0
            latest = iv[0][1]
            for a, b in iv[1:]:
                g = a - latest
                if g > 0: gaps += 1; total += g
                elif g == 0: touch += 1
                else: over += 1
                latest = max(latest, b)
            w = want if key == "all" else want["kernels_only"]
            got = (len(iv), gaps, total, over, touch)
            exp = (w["ops"], w["gaps"], w["gap_total_ns"], w["overlaps"], w["touching"])
            out.append(f"rank{r}.stream{s}.{key} {got == exp} {got} {exp}")
print("\n".join(out))
EOF
)
echo "$check" | sed 's/^/# /'
for r in 0 1; do
  line() { echo "$check" | grep "^rank$r.$1 " | cut -d' ' -f2-; }
  expect_eq "rank $r header (synthetic marker, distributedInfo)" "$(line header)" "True"
  expect_eq "rank $r ts/dur have 3 decimals" "$(line ts3)" "0"
  expect_eq "rank $r has exactly 5000 kernels" "$(line kernels)" "5000 5000"
  got=$(line counts); expect_eq "rank $r memcpy,memset,nccl,steps,events match truth" "${got% *}" "${got#* }"
  expect_eq "rank $r per-name counts and durations match truth" "$(line names)" "True"
  expect_eq "rank $r launches precede their GPU ops" "$(line launch)" "True"
  for s in 7 23; do for k in all kernels_only; do
    expect_eq "rank $r stream $s ($k) gaps/overlaps match truth" "$(line stream$s.$k | cut -d' ' -f1)" "True"
  done; done
done
"$PY" -c 'import json,sys; t=json.load(open(sys.argv[1])); sys.exit(0 if t["ranks"][0]["streams"]["7"]["gaps"] > 0 and t["ranks"][0]["streams"]["7"]["overlaps"] > 0 else 1)' "$TMP/truth.json"
expect_eq "truth has gaps and overlaps on the compute stream" "$?" "0"

# Cross-rank truth (overlap, breakdown, idle split, steps, collectives), recomputed independently from
# the traces: unions of intervals in exact ns, steps from the ProfilerStep windows, collectives by Seq.
# Usage: cross.py DIR TRUTH [SKEW_US_BY_RANK_JSON]; prints "name True|False detail" lines.
cat >"$TMP/cross.py" <<'EOF'
import collections, decimal, json, sys
d, truth = sys.argv[1], json.load(open(sys.argv[2]))
skew = {int(k): int(decimal.Decimal(str(v)) * 1000) for k, v in json.loads(sys.argv[3] if len(sys.argv) > 3 else "{}").items()}
ns = lambda v: int(decimal.Decimal(v) * 1000)

def union(iv):
    out = []
    for a, b in sorted(iv):
        if out and a <= out[-1][1]: out[-1][1] = max(out[-1][1], b)
        else: out.append([a, b])
    return out
length = lambda u: sum(b - a for a, b in u)
def inter(x, y):  # |x ∩ y|, both unions: brute force over the pairs that can meet (two pointers)
    n = i = k = 0
    while i < len(x) and k < len(y):
        n += max(0, min(x[i][1], y[k][1]) - max(x[i][0], y[k][0]))
        if x[i][1] < y[k][1]: i += 1
        else: k += 1
    return n

def cover(ops):
    C = union([(o["s"], o["e"]) for o in ops if o["kind"] == "compute"])
    K = union([(o["s"], o["e"]) for o in ops if o["kind"] == "comm"])
    M = union([(o["s"], o["e"]) for o in ops if o["kind"] == "mem"])
    A = union([(o["s"], o["e"]) for o in ops])
    first, last = min(o["s"] for o in ops), max(o["e"] for o in ops)
    span, comm, comp, ov = last - first, length(K), length(C), inter(K, C)
    idle = span - length(A)
    mem_excl = length(M) - inter(M, union(C + K))
    ovl = {"comm_ns": comm, "compute_ns": comp, "overlap_ns": ov, "exposed_comm_ns": comm - ov,
           "overlap_pct": 100 * ov / comm if comm else None}
    brk = {"gpu_ops": len(ops), "first_start_ns": first, "last_end_ns": last, "span_ns": span,
           "busy_ns": length(A), "idle_ns": idle, "compute_ns": comp, "non_compute_ns": span - comp - idle,
           "comm_ns_excl": comm - ov, "memory_ns_excl": mem_excl,
           "other_ns": span - comp - idle - (comm - ov) - mem_excl}
    return ovl, brk

def same(got, want):  # ints exact, overlap_pct to 1e-9 (None without comm)
    return set(got) <= set(want) and all(
        got[k] == want[k] if k != "overlap_pct" or got[k] is None or want[k] is None
        else abs(got[k] - want[k]) <= 1e-9 * max(1, abs(want[k])) for k in got)

out, nccl = [], {}
for t in truth["ranks"]:
    r, sk = t["rank"], skew.get(t["rank"], 0)
    ev = json.load(open(f"{d}/rank-{r}.json"), parse_float=str)["traceEvents"]
    launch = {e["args"]["correlation"]: ns(e["ts"]) - sk for e in ev if e.get("cat") == "cuda_runtime"}
    steps = sorted((int(e["name"].split("#")[1]), ns(e["ts"]) - sk, ns(e["ts"]) + ns(e["dur"]) - sk)
                   for e in ev if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    ops = []
    for e in ev:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"): continue
        s = ns(e["ts"]) - sk
        kind = "mem" if e["cat"] != "kernel" else "comm" if e["name"].startswith("nccl") else "compute"
        lt = launch[e["args"]["correlation"]]
        inside = [n for n, a, b in steps if a <= lt < b]
        ops.append({"s": s, "e": s + ns(e["dur"]), "kind": kind, "stream": e["tid"], "launch": lt,
                    "step": inside[0] if len(inside) == 1 else None, "seq": e["args"].get("Seq"),
                    "op": e["args"].get("Collective name")})
    out.append(f"rank{r}.steps_cover {all(o['step'] is not None for o in ops)}")
    ovl, brk = cover(ops)
    out.append(f"rank{r}.overlap {same(ovl, t['overlap'])} {ovl}")
    out.append(f"rank{r}.breakdown {same(brk, t['breakdown'])} {brk}")
    out.append(f"rank{r}.other_zero {brk['other_ns'] == 0}")
    ok = len(steps) == len(t["steps"])
    for (n, a, b), w in zip(steps, t["steps"]):
        so, sb = cover([o for o in ops if o["step"] == n])
        ok = ok and w["step"] == n and w["cpu_start_ns"] == a and w["cpu_end_ns"] == b \
            and same(so, w["overlap"]) and same(sb, w["breakdown"])
    out.append(f"rank{r}.per_step {ok}")
    thr = truth["kernel_wait_threshold_ns"]
    for st, want in t["idle"].items():
        seq = sorted((o["s"], o["e"], o["launch"]) for o in ops if o["stream"] == int(st))
        got = collections.Counter(ops=len(seq))
        latest = seq[0][1]
        for (ps, pe, _), (s, e, lt) in zip(seq, seq[1:]):
            g = s - pe
            if pe != latest: got["prev_end_is_not_latest_end"] += 1  # the two idle definitions must agree
            latest = max(latest, e)
            if g < 0: got["overlap_count"] += 1; got["overlap_ns"] -= g
            elif g == 0: got["touching"] += 1
            else:
                k = "host_wait" if lt > pe else "kernel_wait" if g < thr else "other"
                got[k + "_ns"] += g; got[k + "_gaps"] += 1
        out.append(f"rank{r}.idle{st} {all(got[k] == want[k] for k in want) and set(got) <= set(want)} {dict(got)}")
    nccl[r] = sorted((o for o in ops if o["kind"] == "comm"), key=lambda o: o["seq"])

# collectives: the same Seq on every rank
R = len(truth["ranks"])
ok = len({len(v) for v in nccl.values()}) == 1 and len(nccl[0]) == len(truth["collectives"])
times_last, inflicted, suffered = [0] * R, [0] * R, [0] * R
for k, w in enumerate(truth["collectives"]):
    arr = [nccl[r][k] for r in range(R)]
    start, end = [a["s"] for a in arr], [a["e"] for a in arr]
    hi = max(start)
    last = start.index(hi)
    wait = [min(max(hi - start[r], 0), end[r] - start[r]) for r in range(R)]
    times_last[last] += 1; inflicted[last] += sum(wait)
    for r in range(R): suffered[r] += wait[r]
    ok = ok and len({a["seq"] for a in arr}) == 1 and w["seq"] == arr[0]["seq"] and w["op"] == arr[0]["op"] \
        and w["start_ns"] == start and w["end_ns"] == end and w["last_rank"] == last \
        and w["tied_last"] == start.count(hi) and w["skew_ns"] == hi - min(start) \
        and w["wait_ns"] == wait and w["inflicted_ns"] == sum(wait)
out.append(f"collectives {ok} {len(truth['collectives'])}")
st = truth["stragglers"]
out.append(f"stragglers {[s['times_last'] for s in st] == times_last and [s['inflicted_ns'] for s in st] == inflicted and [s['suffered_ns'] for s in st] == suffered} {times_last}")
print("\n".join(out))
EOF
cross=$("$PY" "$TMP/cross.py" "$TMP/plain" "$TMP/truth.json")
echo "$cross" | cut -c1-200 | sed 's/^/# /'
cline() { echo "$cross" | grep "^$1 " | cut -d' ' -f2; }
for r in 0 1; do
  expect_eq "rank $r: every GPU op's launch lies in one ProfilerStep" "$(cline rank$r.steps_cover)" "True"
  expect_eq "rank $r overlap (comm, overlap, exposed, pct) matches truth" "$(cline rank$r.overlap)" "True"
  expect_eq "rank $r breakdown (span, idle, compute, comm/memory/other) matches truth" "$(cline rank$r.breakdown)" "True"
  expect_eq "rank $r breakdown other is 0 (every op is compute, comm or memory)" "$(cline rank$r.other_zero)" "True"
  expect_eq "rank $r per-step overlap and breakdown match truth" "$(cline rank$r.per_step)" "True"
  for s in 7 23; do
    expect_eq "rank $r stream $s idle split (host/kernel/other wait, overlaps) matches truth" "$(cline rank$r.idle$s)" "True"
  done
done
expect_eq "collectives (starts, last rank, skew, waits, inflicted) match truth" "$(cline collectives)" "True"
expect_eq "straggler totals (times last, inflicted, suffered) match truth" "$(cline stragglers)" "True"
"$PY" - "$TMP/truth.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
o = [r["overlap"] for r in t["ranks"]]
ok = all(0 < x["overlap_ns"] < x["comm_ns"] for x in o) and len(t["collectives"]) > 20 \
    and all(r["idle"]["7"][k] > 0 for r in t["ranks"] for k in ("kernel_wait_ns", "other_ns", "overlap_count"))
sys.exit(0 if ok else 1)
EOF
expect_eq "truth is not degenerate (partial overlap, collectives, every idle class)" "$?" "0"

# Same seed, same output; --gz gives valid gzip with the same JSON; --minify has no blanks.
kernalyse-tracegen --ranks 2 --kernels 5000 --steps 3 --seed 7 --out "$TMP/gz" --gz 2>/dev/null
expect_eq "tracegen --gz exits 0" "$?" "0"
gzip -t "$TMP/gz/rank-1.json.gz"
expect_eq "rank-1.json.gz is valid gzip" "$?" "0"
expect_eq "--gz decompresses to the plain file" "$(zcat "$TMP/gz/rank-1.json.gz" | cmp - "$TMP/plain/rank-1.json" && echo same)" "same"
kernalyse-tracegen --ranks 2 --kernels 5000 --steps 3 --seed 7 --out "$TMP/min" --minify 2>/dev/null
expect_eq "tracegen --minify exits 0" "$?" "0"
expect_contains "--minify writes \"rank\":0" "$(head -c 2000 "$TMP/min/rank-0.json")" '"rank":0'
"$PY" -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); sys.exit(a != b)' \
  "$TMP/min/rank-0.json" "$TMP/plain/rank-0.json"
expect_eq "--minify holds the same JSON" "$?" "0"
expect_contains "default spacing writes \"rank\": 0" "$(head -c 2000 "$TMP/plain/rank-0.json")" '"rank": 0'

# Knobs: a rank whose launches come late makes the others wait in NCCL.
kernalyse-tracegen --ranks 2 --kernels 2000 --steps 2 --out "$TMP/late" --launch-delay-rank 1 \
  --launch-delay-us 500 --truth "$TMP/late.json" 2>/dev/null
expect_eq "tracegen --launch-delay exits 0" "$?" "0"
"$PY" - "$TMP/late.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))["ranks"]
nccl = [sum(v["total_ns"] for v in r["kernel_names"].values() if v["nccl"]) for r in t]
sys.exit(0 if nccl[0] > nccl[1] + 500_000 * t[0]["nccl_kernels"] // 2 else 1)
EOF
expect_eq "waiting rank spends longer in NCCL kernels" "$?" "0"

# Knobs plant an unambiguous straggler: the slow rank, or the rank whose launches come late, arrives last
# at every collective, and the cross-rank truth still agrees with the traces (4 ranks).
knob() {  # knob NAME ARGS... : generate, cross-check, then print "straggler times_last/collectives"
  local n=$1; shift
  kernalyse-tracegen --ranks 4 --kernels 4000 --steps 2 --seed 3 --out "$TMP/$n" --truth "$TMP/$n.json" "$@" 2>/dev/null \
    || { echo "exit $?"; return; }
  "$PY" "$TMP/cross.py" "$TMP/$n" "$TMP/$n.json" | grep -c ' False' | sed 's/^/false_checks=/'
  "$PY" - "$TMP/$n.json" <<'EOF'
import json, sys
t = json.load(open(sys.argv[1]))
p, cs = t["planted"], t["collectives"]
r = p["straggler"]
print(f"straggler={r} cause={p['cause']} last={sum(c['last_rank'] == r for c in cs)}/{len(cs)}")
me = t["ranks"][r]["planted"]
print(f"slow_extra_kernel_ns>0={me['slow_extra_kernel_ns'] > 0} launch_delays={me['launch_delays']}"
      f" host_wait_covers_delays={t['ranks'][r]['idle']['7']['host_wait_ns'] >= me['launch_delay_ns']}")
EOF
}
got=$(knob slow --slow-rank 2 --slow-factor 1.3)
echo "$got" | sed 's/^/# /'
expect_contains "--slow-rank: cross-rank truth matches the traces" "$got" "false_checks=0"
expect_contains "--slow-rank 2: planted straggler 2, cause kernels" "$got" "straggler=2 cause=kernels"
n=$(echo "$got" | sed -n 's/.* last=\([0-9]*\)\/\([0-9]*\)$/\1 \2/p')
expect_eq "--slow-rank 2: rank 2 arrives last at every collective" "${n% *}" "${n#* }"
expect_contains "--slow-rank 2: extra kernel time recorded" "$got" "slow_extra_kernel_ns>0=True launch_delays=0"
got=$(knob late --launch-delay-rank 1 --launch-delay-us 300)
echo "$got" | sed 's/^/# /'
expect_contains "--launch-delay: cross-rank truth matches the traces" "$got" "false_checks=0"
expect_contains "--launch-delay-rank 1: planted straggler 1, cause host_delay" "$got" "straggler=1 cause=host_delay"
n=$(echo "$got" | sed -n 's/.* last=\([0-9]*\)\/\([0-9]*\)$/\1 \2/p')
expect_eq "--launch-delay-rank 1: rank 1 arrives last at every collective" "${n% *}" "${n#* }"
expect_contains "--launch-delay-rank 1: one delay per collective, seen as host wait" "$got" \
  "launch_delays=${n#* } host_wait_covers_delays=True"

# --clock-skew-us: rank 1's timestamps (every event's ts) move by exactly 250.5 µs, nothing else changes;
# the truth keeps true times (only the recorded skew differs) and still matches the shifted traces.
kernalyse-tracegen --ranks 2 --kernels 5000 --steps 3 --seed 7 --out "$TMP/skew" --truth "$TMP/skew.json" \
  --clock-skew-us 1:250.5 2>/dev/null
expect_eq "tracegen --clock-skew-us exits 0" "$?" "0"
expect_eq "--clock-skew-us leaves rank 0 untouched" "$(cmp "$TMP/skew/rank-0.json" "$TMP/plain/rank-0.json" && echo same)" "same"
"$PY" - "$TMP/skew/rank-1.json" "$TMP/plain/rank-1.json" "$TMP/skew.json" "$TMP/truth.json" <<'EOF'
import decimal, json, sys
a, b = (json.load(open(f), parse_float=str) for f in sys.argv[1:3])
ns = lambda v: int(decimal.Decimal(v) * 1000)
ea, eb = a.pop("traceEvents"), b.pop("traceEvents")
ok = a == b and len(ea) == len(eb) and all(
    set(x) == set(y) and all(x[k] == y[k] for k in x if k != "ts") and ("ts" not in x or ns(x["ts"]) - ns(y["ts"]) == 250500)
    for x, y in zip(ea, eb))
ta, tb = (json.load(open(f)) for f in sys.argv[3:5])
ok = ok and ta["planted"].pop("clock_skew_ns") == {"1": 250500} and tb["planted"].pop("clock_skew_ns") == {}
ok = ok and ta["params"].pop("clock_skew_us") == "1:250.5" and tb["params"].pop("clock_skew_us") == ""
ok = ok and ta["ranks"][1]["planted"].pop("clock_skew_ns") == 250500 and tb["ranks"][1]["planted"].pop("clock_skew_ns") == 0
for t in (ta, tb):
    for r in t["ranks"]: r.pop("bytes")
sys.exit(0 if ok and ta == tb else 1)
EOF
expect_eq "--clock-skew-us shifts every rank-1 ts by 250.5 µs, truth unchanged" "$?" "0"
expect_eq "cross-rank truth matches skewed traces once the skew is removed" \
  "$("$PY" "$TMP/cross.py" "$TMP/skew" "$TMP/skew.json" '{"1": "250.5"}' | grep -c ' False')" "0"
kernalyse-tracegen --ranks 2 --kernels 10 --out "$TMP/x" --clock-skew-us 1:abc >/dev/null 2>&1
expect_eq "bad --clock-skew-us exits 2" "$?" "2"

kernalyse-tracegen --ranks 1 --kernels 10 --out "$TMP/x" --bogus >/dev/null 2>&1
expect_eq "unknown option exits 2" "$?" "2"
finish
