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

kernalyse-tracegen --ranks 1 --kernels 10 --out "$TMP/x" --bogus >/dev/null 2>&1
expect_eq "unknown option exits 2" "$?" "2"
finish
