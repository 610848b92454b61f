#!/usr/bin/env bash
# kernalyse-merge --diff on a planted pair (kernalyse-tracegen --pair): every planted difference is
# recovered exactly (kernel, count, time delta) against an independent recount of the trace files,
# nothing else is reported; a store diffed with itself reports no change; renderers and bad input.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3

kernalyse-tracegen --ranks 3 --kernels 6000 --steps 2 --seed 11 --pair --pair-slow-factor 1.5 \
  --out "$TMP/pair" 2>/dev/null
expect_eq "tracegen --pair exits 0" "$?" "0"
# --align off: the recounts below read the times as written; --align auto would correct each
# rank's clock (a fitted drift moves durations by parts per million). The store-vs-traces check
# further down runs with the default: both sides get the same inferred clocks.
kernalyse-merge --diff "$TMP/pair/base" "$TMP/pair/test" --align off --json -q >"$TMP/diff.json"
expect_eq "--diff exits 0" "$?" "0"

# Independent: per-name count and total (exact ns from the µs text) of both runs' files, and the
# planted slow kernel instance by instance.
check=$("$PY" - "$TMP/pair" "$TMP/diff.json" <<'EOF'
import collections, decimal, glob, json, sys
root, diff = sys.argv[1], json.load(open(sys.argv[2]))["diff"]
planted = json.load(open(f"{root}/planted.json"))
ns = lambda v: int(decimal.Decimal(v) * 1000)
def recount(side):
    tot = collections.defaultdict(lambda: [0, 0])
    seq = collections.defaultdict(list)  # (rank, name) -> durations in file order
    for f in sorted(glob.glob(f"{root}/{side}/rank-*.json")):
        j = json.load(open(f), parse_float=str)
        r = j["distributedInfo"]["rank"]
        for e in j["traceEvents"]:
            if e.get("cat") == "kernel":
                d = ns(e["dur"])
                tot[e["name"]][0] += 1
                tot[e["name"]][1] += d
                seq[(r, e["name"])].append(d)
    return tot, seq
(b, bseq), (t, tseq) = recount("base"), recount("test")
out = []
# The generator's own accounting agrees with the files.
gen = {n: (v["base"]["count"], v["base"]["total_ns"], v["test"]["count"], v["test"]["total_ns"])
       for n, v in planted["kernels"].items()}
mine = {n: (b[n][0] if n in b else 0, b[n][1] if n in b else 0, t[n][0] if n in t else 0,
            t[n][1] if n in t else 0) for n in set(b) | set(t)}
out.append(f"planted_matches_files {gen == mine}")
# Expected diff from the recount.
both = set(b) & set(t)
want_changed = {n: (t[n][0] - b[n][0], t[n][1] - b[n][1]) for n in both if b[n] != t[n]}
got_changed = {k["name"]: (k["delta_count"], k["delta_total_ns"]) for k in diff["kernels"] if k["changed"]}
out.append(f"changed_exact {got_changed == want_changed} {len(got_changed)} {len(want_changed)}")
got_all = {k["name"]: (k["base"]["count"], k["base"]["total_ns"], k["test"]["count"], k["test"]["total_ns"])
           for k in diff["kernels"]}
out.append(f"matched_all {got_all == {n: (b[n][0], b[n][1], t[n][0], t[n][1]) for n in both}}")
# Nothing unplanted: among compute kernels only the slowed one changed; collectives are consequences.
nccl = {n for n, v in planted["kernels"].items() if v["nccl"]}
slow = planted["slowed"]["name"]
out.append(f"only_planted_compute {sorted(set(got_changed) - nccl) == [slow]}")
f = decimal.Decimal(str(planted["slowed"]["factor"]))
inst_ok = all(len(bseq[k]) == len(tseq[k]) and all(
    int((decimal.Decimal(x) * f + decimal.Decimal("0.5")).to_integral_value(decimal.ROUND_FLOOR)) == y
    for x, y in zip(bseq[k], tseq[k])) for k in bseq if k[1] == slow)
out.append(f"slow_instances {inst_ok and got_changed[slow][0] == 0}")
out.append(f"slow_delta {got_changed[slow][1]} {t[slow][1] - b[slow][1]}")
rm = planted["removed"]["name"]
out.append(f"only_base {[(k['name'], k['count'], k['total_ns']) for k in diff['only_base']] == [(rm, b[rm][0], b[rm][1])]}")
out.append(f"only_test_empty {diff['only_test'] == []}")
g = diff["replaced"]
fz = planted["fused"]
ok = len(g) == 1 and g[0]["range"] == fz["range"] \
    and sorted((k["name"], k["count"], k["total_ns"]) for k in g[0]["before"]) == sorted((n, b[n][0], b[n][1]) for n in fz["before"]) \
    and [(k["name"], k["count"], k["total_ns"]) for k in g[0]["after"]] == [(n, t[n][0], t[n][1]) for n in fz["after"]] \
    and g[0]["delta_total_ns"] == sum(t[n][1] for n in fz["after"]) - sum(b[n][1] for n in fz["before"])
out.append(f"replaced {ok}")
out.append(f"straggler {diff['straggler']['base']},{diff['straggler']['test']} "
           f"{planted['straggler']['base']},{planted['straggler']['test']}")
st = diff["steps"]
out.append(f"steps {[s['step'] for s in st]} {all(s['base'] and s['test'] for s in st)}")
out.append(f"identical {diff['identical']}")
print("\n".join(out))
EOF
)
echo "$check" | sed 's/^/# /'
line() { echo "$check" | grep "^$1 " | cut -d' ' -f2-; }
expect_eq "planted.json agrees with the files it describes" "$(line planted_matches_files)" "True"
expect_eq "changed kernels and their count/time deltas equal the recount" "$(line changed_exact | cut -d' ' -f1)" "True"
expect_eq "every kernel in both runs carries both sides' count and total" "$(line matched_all)" "True"
expect_eq "the only compute kernel that changed is the planted slow one" "$(line only_planted_compute)" "True"
expect_eq "slowed kernel: every instance x factor, same count" "$(line slow_instances)" "True"
got=$(line slow_delta); expect_eq "slowed kernel's time delta exact" "${got% *}" "${got#* }"
expect_eq "only in BASE: exactly the removed kernel, count and time" "$(line only_base)" "True"
expect_eq "nothing only in TEST (the Triton kernel is explained by the fusion)" "$(line only_test_empty)" "True"
expect_eq "one replaced group under mlp.act: 3 eager kernels -> 1 Triton, exact times" "$(line replaced)" "True"
got=$(line straggler); expect_eq "straggler moved as planted" "${got% *}" "${got#* }"
expect_eq "both steps on both sides" "$(line steps)" "[1, 2] True"
expect_eq "the pair is not identical" "$(line identical)" "False"

# Text, CSV and HTML renderers of the same diff.
kernalyse-merge --diff "$TMP/pair/base" "$TMP/pair/test" --align off -q --csv "$TMP/csv" --html "$TMP/diff.html" >"$TMP/diff.txt"
expect_eq "--diff text/CSV/HTML exits 0" "$?" "0"
expect_contains "text names the straggler move" "$(cat "$TMP/diff.txt")" "rank 0 → rank 2"
expect_contains "text shows the replaced group" "$(cat "$TMP/diff.txt")" "mlp.act"
for k in diff_steps diff_kernels diff_only_base diff_only_test diff_replaced diff_ranks; do
  if [ -s "$TMP/csv/$k.csv" ]; then pass "CSV $k written"; else fail "CSV $k missing"; fi
done
expect_eq "CSV only_base has the removed kernel's exact ns" \
  "$("$PY" -c 'import csv,sys; r=list(csv.DictReader(open(sys.argv[1]))); print(len(r), r[0]["total_ns"])' "$TMP/csv/diff_only_base.csv")" \
  "1 $("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1]))["diff"]["only_base"][0]; print(d["total_ns"])' "$TMP/diff.json")"
html=$(cat "$TMP/diff.html")
expect_contains "HTML draws both runs" "$html" "$TMP/pair/test"
expect_contains "HTML has the straggler section" "$html" "Wait inflicted while last"
kernalyse-merge --diff "$TMP/pair/base" "$TMP/pair/test" -q --html "$TMP/diff.html" >/dev/null 2>"$TMP/err"
expect_eq "existing --html refused without --force: exit 2" "$?" "2"
expect_eq "one line naming the file" "$(wc -l <"$TMP/err") $(grep -c "diff.html: exists" "$TMP/err")" "1 1"

# A store diffed with itself, and the same run given as store and as traces: no change.
kernalyse-merge "$TMP/pair/base" -o "$TMP/base.h5" -q
kernalyse-merge --diff "$TMP/base.h5" "$TMP/base.h5" --json -q >"$TMP/self.json"
expect_eq "self diff exits 0" "$?" "0"
self=$("$PY" - "$TMP/self.json" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))["diff"]
ok = d["identical"] and not d["only_base"] and not d["only_test"] and not d["replaced"] \
    and len(d["kernels"]) > 10 and not any(k["changed"] for k in d["kernels"]) \
    and all(s["delta_cpu_ns"] == 0 and s["delta_gpu_span_ns"] == 0 for s in d["steps"]) \
    and all(r["base"] == r["test"] for r in d["ranks"]) and len(d["ranks"]) == 3 \
    and d["straggler"]["base"] == d["straggler"]["test"] == 0
print(ok)
EOF
)
expect_eq "store vs itself: identical, nothing changed" "$self" "True"
expect_contains "text says no change" "$(kernalyse-merge --diff "$TMP/base.h5" "$TMP/pair/base" -q)" "no change"

# Stores are read a rank at a time (RankSlices: peak memory of a rank, not of both runs), trace
# directories whole: the same pair both ways gives the same diff, with and without filters.
kernalyse-merge "$TMP/pair/test" -o "$TMP/test.h5" -q
for args in "" "--rank 1 --step 2" "--step 1" "--rank 2"; do
  kernalyse-merge --diff "$TMP/base.h5" "$TMP/test.h5" $args --json -q >"$TMP/sliced.json"
  kernalyse-merge --diff "$TMP/pair/base" "$TMP/pair/test" $args --json -q >"$TMP/whole.json"
  expect_eq "stores by rank = traces whole (${args:-no filter})" "$("$PY" - "$TMP/sliced.json" "$TMP/whole.json" <<'EOF'
import json, sys
s, w = (json.load(open(f))["diff"] for f in sys.argv[1:])
for d in (s, w):
    d.pop("base"), d.pop("test")  # the inputs' names
print(s == w and len(s["kernels"]) > 10 and len(s["replaced"]) == 1)
EOF
)" "True"
done
# The diff's ledger (gathered slice by slice, without causes) = the --stragglers ledger of the
# whole store: who was last, how often, the wait inflicted and suffered, per rank.
kernalyse-merge "$TMP/base.h5" --stragglers --json -q >"$TMP/ledger.json"
kernalyse-merge --diff "$TMP/base.h5" "$TMP/test.h5" --json -q >"$TMP/sliced.json"
expect_eq "diff ledger per rank = --stragglers ledger" "$("$PY" - "$TMP/ledger.json" "$TMP/sliced.json" <<'EOF'
import json, sys
led = json.load(open(sys.argv[1]))["stragglers"]
d = json.load(open(sys.argv[2]))["diff"]
want = {r["rank"]: (r["times_last"], round(r["inflicted_us"] * 1000), round(r["suffered_us"] * 1000))
        for r in led["ranks"]}
got = {r["rank"]: (r["base"]["times_last"], r["base"]["inflicted_ns"], r["base"]["suffered_ns"])
       for r in d["ranks"]}
print(want == got and sum(v[0] for v in want.values()) > 10)
EOF
)" "True"

# --rank and --step apply to both sides.
kernalyse-merge --diff "$TMP/pair/base" "$TMP/pair/test" --align off --rank 1 --step 2 --json -q >"$TMP/r1.json"
expect_eq "--rank/--step diff exits 0" "$?" "0"
expect_eq "--rank 1 --step 2: one rank, one step" \
  "$("$PY" -c 'import json,sys; d=json.load(open(sys.argv[1]))["diff"]; print([r["rank"] for r in d["ranks"]], [s["step"] for s in d["steps"]])' "$TMP/r1.json")" \
  "[1] [2]"

# Bad input: one line, exit 2.
kernalyse-merge --diff "$TMP/pair/base" "$TMP/nope" -q >/dev/null 2>"$TMP/err"
expect_eq "missing TEST: exit 2" "$?" "2"
expect_eq "missing TEST: one line naming it" "$(wc -l <"$TMP/err") $(grep -c "nope: no such file" "$TMP/err")" "1 1"
kernalyse-merge --diff "$TMP/base.h5" "$TMP/base.h5" --step 99 -q >/dev/null 2>"$TMP/err"
expect_eq "--step missing in BASE: exit 2" "$?" "2"
expect_contains "--step missing: names the side" "$(cat "$TMP/err")" "base.h5: no ProfilerStep#99"
kernalyse-merge --diff "$TMP/base.h5" -q >/dev/null 2>&1
expect_eq "--diff with one input: exit 2" "$?" "2"
kernalyse-merge --diff "$TMP/base.h5" "$TMP/base.h5" --compat hta -q >/dev/null 2>"$TMP/err"
expect_eq "--diff with --compat hta: exit 2, one line" "$? $(wc -l <"$TMP/err")" "2 1"
finish
