#!/usr/bin/env bash
# kernalyse-tracegen --format rocprof writes the planted workload as rocprofv3 JSON; imported, it
# gives the JSON form's store row for row (rank, device, stream, start, end, name of every GPU
# activity: counts, per-kernel times, streams, devices, ranks) and the same analysis numbers
# (--all --json: gaps, overlap, breakdown, idle, ranges, stragglers' times and waits). What
# rocprofv3 cannot carry is left out of the comparison and named here: a memset is a kernel
# dispatch in rocprofv3 (HIP's fill kernels), so the kernel summary has the memsets as extra rows
# (checked: exactly the JSON form's memsets); PyTorch's NCCL metadata (message size, hence bus
# bandwidth; the process-group collective name; Seq, hence the matching rule's name); the ranks'
# source and collector status.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
"$PY" -c 'import h5py' 2>/dev/null || { echo "SKIP: $PY lacks h5py"; exit 77; }
cd "$TMP" || exit 1
args=(--ranks 4 --kernels 1500 --steps 3 --seed 11 --slow-rank 2 --slow-factor 1.3 --launch-delay-rank 1 --launch-delay-us 40)
kernalyse-tracegen "${args[@]}" --out json --truth t-json.json 2>/dev/null
expect_eq "tracegen json: exit code" "$?" "0"
kernalyse-tracegen "${args[@]}" --out rp --truth t-rp.json --format rocprof --gz 2>/dev/null
expect_eq "tracegen rocprof: exit code" "$?" "0"
expect_eq "rocprof files" "$(cd rp && ls)" "$(printf 'rank-0.json.gz\nrank-1.json.gz\nrank-2.json.gz\nrank-3.json.gz')"
expect_eq "same truth file" "$(cmp -s t-json.json t-rp.json && echo same)" "same"
kernalyse-merge json -o a.h5 -q 2>/dev/null
kernalyse-merge rp -o b.h5 -q 2>/dev/null
expect_eq "rocprof import: exit code" "$?" "0"
got=$("$PY" - <<'PY'
import collections, h5py
def rows(path):
    f = h5py.File(path, "r")
    s = f["strings"].asstr()[:]
    a = f["activities"]
    cols = [a[c][:] for c in ("rank", "device", "stream", "start_ns", "end_ns", "name_id", "kind")]
    out = collections.Counter()
    for r, d, st, b, e, n, k in zip(*cols):
        # rocprofv3 names a copy's direction, not its memory kinds ("Memcpy HtoD").
        name = s[n].split(" (")[0] if s[n].startswith("Memcpy") else s[n]
        out[(int(r), int(d), int(st), int(b), int(e), name)] += 1
    return out, collections.Counter(int(k) for k in cols[6]), bool(f.attrs["emulated"])
a, ka, _ = rows("a.h5")
b, kb, emu = rows("b.h5")
# Kind: 0 kernel, 1 memcpy, 2 memset; rocprofv3 has no memset record.
print(a == b, sum(a.values()) > 6000, ka[2] > 0, kb[0] == ka[0] + ka[2], kb[1] == ka[1], kb[2], emu)
PY
)
expect_eq "every GPU activity identical (rank, device, stream, times, name); memsets as dispatches; synthetic" \
  "$got" "True True True True True 0 True"
kernalyse-merge json --all --json -q >a.json 2>/dev/null
kernalyse-merge rp --all --json -q >b.json 2>/dev/null
expect_eq "analyses: exit code" "$?" "0"
got=$("$PY" - <<'PY'
import json
a, b = json.load(open("a.json")), json.load(open("b.json"))
skip_coll = {"busbw_gbps", "msg_bytes", "op", "match"}
def scrub(j):
    for r in j["ranks"]:
        for k in ("source", "collector_status", "clock_method"): r.pop(k)  # per format
    j["notes"] = [n for n in j["notes"]
                  if not n.startswith(("ranks:", "collective matching:", "Kernel summary"))]
    for c in j["stragglers"]["collectives"]:
        for k in skip_coll: c.pop(k, None)
    j["stragglers"].pop("match", None)
    j["stragglers"].pop("matched_by", None)  # (pg, seq) with Kineto's Seq, order in rocprof
    return j
def summary(j, key):
    return {r["kernel"]: (r["count"], r["total_ns"]) for r in j[key]}
# Kernel summaries: the rocprof form's rows are the JSON form's plus its memsets.
sa, sb = summary(a, "kernel_summary"), summary(b, "kernel_summary")
extra = {k: v for k, v in sb.items() if k not in sa}
same_kernels = all(sb[k] == v for k, v in sa.items()) and all(k.startswith("Memset") for k in extra)
for j in (a, b):
    for k in [k for k in j if k.startswith("kernel_summary")]: j.pop(k)
a, b = scrub(a), scrub(b)
diffs = [k for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
sections = sorted(k for k in a if k not in ("ranks", "notes", "emulated"))
print("same" if not diffs else "differ: " + ",".join(diffs), same_kernels, len(extra) > 0,
      len(sections) >= 6, b["emulated"], len(a["stragglers"]["collectives"]) > 10)
PY
)
expect_eq "JSON and rocprof forms: identical analysis numbers, kernels + memsets, synthetic marked" \
  "$got" "same True True True True True"
finish
