#!/usr/bin/env bash
# --export-kineto output is found rank by rank by HTA's own file-rank rule. HTA v0.6.1
# (facebookresearch/HolisticTraceAnalysis, hta/common/trace_file.py, create_rank_to_trace_dict)
# reads each file's rank with the regular expression "rank":\s+(\d+) on the raw text, so "rank":0
# (no blank) gives no rank and HTA sees one rank instead of eight; later HTA versions parse the
# JSON and read distributedInfo.rank. The test applies both rules to an 8-rank export and checks
# the fields HTA reads besides: deviceProperties, baseTimeNanoseconds, ProfilerStep#N, ac2g flows.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
kernalyse-tracegen --ranks 8 --kernels 400 --steps 3 --seed 5 --out "$TMP/gen" 2>/dev/null
expect_eq "tracegen exit code" "$?" "0"
kernalyse-merge "$TMP/gen" -o "$TMP/run.h5" -q
expect_eq "merge exit code" "$?" "0"
kernalyse-merge "$TMP/run.h5" --export-kineto "$TMP/exp" -q
expect_eq "export exit code" "$?" "0"
got=$("$PY" - "$TMP/exp" <<'PY'
import json, os, re, sys
d = sys.argv[1]
regex, parsed, problems = set(), set(), []
files = sorted(f for f in os.listdir(d) if f.endswith(".json"))
for f in files:
    raw = open(os.path.join(d, f)).read()
    m = re.search(r'"rank":\s+(\d+)', raw)  # HTA v0.6.1's rule, on the raw text
    if m: regex.add(int(m.group(1)))
    j = json.loads(raw)
    r = j["distributedInfo"]["rank"]
    parsed.add(r)
    if not m or int(m.group(1)) != r: problems.append(f"{f}: regex rank {m and m.group(1)} vs {r}")
    if not isinstance(j.get("baseTimeNanoseconds"), int): problems.append(f"{f}: baseTimeNanoseconds")
    if not j.get("deviceProperties") or "name" not in j["deviceProperties"][0]:
        problems.append(f"{f}: deviceProperties")
    ev = j["traceEvents"]
    if not any(e.get("name", "").startswith("ProfilerStep#") for e in ev): problems.append(f"{f}: no ProfilerStep#")
    if not any(e.get("cat") == "ac2g" for e in ev): problems.append(f"{f}: no ac2g flows")
print(len(files), len(regex), len(parsed), "; ".join(problems) or "ok")
PY
)
expect_eq "8 files, 8 distinct ranks by HTA's regex and by distributedInfo.rank, HTA fields" "$got" "8 8 8 ok"
finish
