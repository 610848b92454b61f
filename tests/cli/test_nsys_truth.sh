#!/usr/bin/env bash
# kernalyse-tracegen --format nsys writes the planted workload as Nsight Systems SQLite exports;
# imported, it gives the same analysis numbers as its JSON form (--all --json: summary, gaps,
# overlap, breakdown, idle, ranges, stragglers' times and waits) and the same truth file. What an
# nsys report cannot carry is left out of the comparison and named here: PyTorch's NCCL
# metadata (message size, hence bus bandwidth; the process-group collective name
# "_allgather_base", the kernel's "allgather" instead; Seq, hence the matching rule's name) and
# the ranks' source, host and collector status (also the clock inference's host names and its
# note on unnamed hosts).
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
cd "$TMP" || exit 1
args=(--ranks 4 --kernels 3000 --steps 3 --seed 11 --slow-rank 2 --slow-factor 1.3 --launch-delay-rank 1 --launch-delay-us 40)
kernalyse-tracegen "${args[@]}" --out json --truth t-json.json 2>/dev/null
expect_eq "tracegen json: exit code" "$?" "0"
kernalyse-tracegen "${args[@]}" --out nsys --truth t-nsys.json --format nsys 2>/dev/null
expect_eq "tracegen nsys: exit code" "$?" "0"
expect_eq "nsys files" "$(cd nsys && ls)" "$(printf 'rank-0.sqlite\nrank-1.sqlite\nrank-2.sqlite\nrank-3.sqlite')"
expect_eq "same truth file" "$(cmp -s t-json.json t-nsys.json && echo same)" "same"
kernalyse-merge json --all --json -q >a.json
kernalyse-merge nsys --all --json -q >b.json
expect_eq "analyses: exit code" "$?" "0"
got=$("$PY" - <<'PY'
import json
a, b = json.load(open("a.json")), json.load(open("b.json"))
skip_coll = {"busbw_gbps", "msg_bytes", "op", "match"}
def scrub(j):
    for r in j["ranks"]:
        for k in ("source", "host", "collector_status", "rank_source"): r.pop(k)
    j["notes"] = [n for n in j["notes"] if not n.startswith(("ranks:", "collective matching:"))]
    for c in j["stragglers"]["collectives"]:
        for k in skip_coll: c.pop(k, None)
    j["stragglers"].pop("match", None)
    j["stragglers"].pop("matched_by", None)  # (pg, seq) with Seq, order without
    # Both infer the same clocks (--align auto); only nsys names the hosts.
    ci = j["clock_inference"]
    for h in ci["hosts"]: h.pop("host")
    ci["notes"] = [n for n in ci["notes"] if not n.startswith("ranks without a host name")]
    return j
a, b = scrub(a), scrub(b)
diffs = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
sections = sorted(k for k in a if k not in ("ranks", "notes", "emulated"))
print("same" if not diffs else "differ: " + ",".join(diffs), len(sections) >= 6, b["emulated"],
      len(a["stragglers"]["collectives"]) > 10)
PY
)
expect_eq "JSON and nsys forms: identical analysis numbers, synthetic marked" "$got" "same True True True"
finish
