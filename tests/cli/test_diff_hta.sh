#!/usr/bin/env bash
# kernalyse-merge --diff on HTA's own before/after pair (kineto/hta_trace_compare): per kernel name
# counts and time deltas, the one-sided names and the per-step CPU time and GPU span equal an
# independent computation from the gzipped JSON.
source "$(dirname "$0")/lib.sh"
need_traces
pair="$TRACES/kineto/hta_trace_compare"
[ -d "$pair/base" ] || { echo "SKIP: $pair absent"; exit 77; }
PY=/usr/bin/python3

# The files carry distributedInfo.rank; --rank 1 names it explicitly for both sides.
kernalyse-merge --diff "$pair/base" "$pair/test" --rank 1 --json -q >"$TMP/diff.json"
expect_eq "--diff on the HTA pair exits 0" "$?" "0"

check=$("$PY" - "$pair" "$TMP/diff.json" <<'EOF'
import bisect, collections, decimal, glob, gzip, json, sys
pair, diff = sys.argv[1], json.load(open(sys.argv[2]))["diff"]
ns = lambda v: int(decimal.Decimal(str(v)) * 1000)
def load(side):
    ev = json.load(gzip.open(glob.glob(f"{pair}/{side}/*.json.gz")[0]), parse_float=decimal.Decimal)["traceEvents"]
    kern = collections.defaultdict(lambda: [0, 0])
    steps = sorted((ns(e["ts"]), ns(e["ts"]) + ns(e["dur"]), int(e["name"].split("#")[1])) for e in ev
                   if e.get("cat") == "user_annotation" and e["name"].startswith("ProfilerStep#"))
    def step_at(t):
        i = bisect.bisect_right([s[0] for s in steps], t) - 1
        return steps[i][2] if i >= 0 and t < steps[i][1] else None
    launch = {e["args"]["correlation"]: ns(e["ts"]) for e in ev
              if e.get("cat") in ("cuda_runtime", "cuda_driver") and "correlation" in e.get("args", {})}
    span = {}
    nk = collections.Counter()
    for e in ev:
        if e.get("cat") not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        s, d = ns(e["ts"]), ns(e["dur"])
        c = e["args"].get("correlation")
        st = step_at(launch[c]) if c in launch else step_at(s)
        if e["cat"] == "kernel":
            kern[e["name"]][0] += 1
            kern[e["name"]][1] += d
        if st is not None:
            lo, hi = span.get(st, (s, s + d))
            span[st] = (min(lo, s), max(hi, s + d))
            nk[st] += e["cat"] == "kernel"
    cpu = {n: e - s for s, e, n in steps}
    return kern, cpu, span, nk
(bk, bc, bs, bn), (tk, tc, ts, tn) = load("base"), load("test")
out = []
both = set(bk) & set(tk)
want = {n: (bk[n][0], bk[n][1], tk[n][0], tk[n][1]) for n in both}
got = {k["name"]: (k["base"]["count"], k["base"]["total_ns"], k["test"]["count"], k["test"]["total_ns"])
       for k in diff["kernels"]}
out.append(f"kernels {got == want} {len(got)}")
deltas = {k["name"]: (k["delta_count"], k["delta_total_ns"]) for k in diff["kernels"]}
out.append(f"deltas {deltas == {n: (tk[n][0] - bk[n][0], tk[n][1] - bk[n][1]) for n in both}}")
out.append(f"changed {sum(k['changed'] for k in diff['kernels'])} {sum(bk[n] != tk[n] for n in both)}")
only = lambda a, b: sorted((n, a[n][0], a[n][1]) for n in set(a) - set(b))
out.append(f"only_base {sorted((k['name'], k['count'], k['total_ns']) for k in diff['only_base']) == only(bk, tk)}")
out.append(f"only_test {sorted((k['name'], k['count'], k['total_ns']) for k in diff['only_test']) == only(tk, bk)}")
want_steps = [(n, bc[n], bs[n][1] - bs[n][0], bn[n], tc[n], ts[n][1] - ts[n][0], tn[n]) for n in sorted(bc)]
got_steps = [(s["step"], s["base"]["cpu_ns"], s["base"]["gpu_span_ns"], s["base"]["kernels"], s["test"]["cpu_ns"],
              s["test"]["gpu_span_ns"], s["test"]["kernels"]) for s in diff["steps"]]
out.append(f"steps {got_steps == want_steps} {len(got_steps)}")
out.append(f"step_deltas {[(s['delta_cpu_ns'], s['delta_gpu_span_ns']) for s in diff['steps']] == [(w[4] - w[1], w[5] - w[2]) for w in want_steps]}")
out.append(f"totals {diff['totals']['base']['count']},{diff['totals']['test']['count']} "
           f"{sum(v[0] for v in bk.values())},{sum(v[0] for v in tk.values())}")
print("\n".join(out))
EOF
)
echo "$check" | sed 's/^/# /'
line() { echo "$check" | grep "^$1 " | cut -d' ' -f2-; }
expect_eq "kernels in both runs: counts and totals equal the JSON's" "$(line kernels)" "True 3"
expect_eq "count and time deltas equal the JSON's" "$(line deltas)" "True"
expect_eq "changed names: as many as computed from the JSON" "$(line changed)" "1 1"
expect_eq "only in base: as computed" "$(line only_base)" "True"
expect_eq "only in test: as computed" "$(line only_test)" "True"
expect_eq "per step CPU time, GPU span and kernels equal the JSON's" "$(line steps)" "True 2"
expect_eq "per step deltas" "$(line step_deltas)" "True"
got=$(line totals); expect_eq "kernel totals per side" "${got% *}" "${got#* }"
finish
