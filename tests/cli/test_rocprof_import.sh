#!/usr/bin/env bash
# The real rocprofv3 capture (../shared/traces/rocprof: one PyTorch training process on an MI350
# node, 43,915 kernel dispatches) imports without a format flag: the kernel count, the summed
# kernel time and every kernel's count and total time in kernalyse-merge's summary (full names,
# --verbose) equal an independent count made here from the JSON with Python; RCCL kernels are
# communication; the host and device come from the file's metadata and agents; --all runs (exit 0).
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
need_traces
F="$TRACES/rocprof/mi350_train_908_results.json.gz"
[ -f "$F" ] || { echo "SKIP: $F absent"; exit 77; }
cd "$TMP" || exit 1
kernalyse-merge "$F" --json --verbose -q >summary.json 2>err.txt
expect_eq "summary: exit code" "$?" "0"
got=$("$PY" - "$F" <<'PY'
import gzip, json, sys, collections
tool = json.load(gzip.open(sys.argv[1]))["rocprofiler-sdk-tool"][0]
names = {k["kernel_id"]: k["formatted_kernel_name"] for k in tool["kernel_symbols"]}
kd = tool["buffer_records"]["kernel_dispatch"]
count, total = collections.Counter(), collections.Counter()
for r in kd:
    n = names[r["dispatch_info"]["kernel_id"]]
    count[n] += 1
    total[n] += r["end_timestamp"] - r["start_timestamp"]
j = json.load(open("summary.json"))
t = j["kernel_summary_totals"]
rows = {r["kernel"]: r for r in j["kernel_summary"]}
same_rows = {n: (r["count"], r["total_ns"]) for n, r in rows.items()} == \
            {n: (count[n], total[n]) for n in count}
comm = sorted({r["kernel"].split("(")[0] for r in rows.values() if r["category"] == "communication"})
rk = j["ranks"][0]
print(t["kernels"] == len(kd), t["total_ns"] == sum(total.values()), same_rows, len(kd))
print(comm)
print(rk["host"] == tool["metadata"]["node"]["hostname"], rk["device_name"], rk["devices"])
PY
)
expect_eq "kernels, total time and every kernel's count and time equal the JSON's" \
  "$(echo "$got" | sed -n 1p)" "True True True 43915"
expect_eq "RCCL kernels are communication" "$(echo "$got" | sed -n 2p)" "['ncclDevKernel_Generic_1']"
expect_eq "host and device from metadata and agents" "$(echo "$got" | sed -n 3p)" \
  "True AMD Instinct MI350X 0"
expect_contains "one clear note: taken as rank 0" "$(kernalyse-merge "$F" 2>&1 >/dev/null)" \
  "the only input, taken as rank 0"
kernalyse-merge "$F" --all -q >all.txt 2>err.txt
expect_eq "--all: exit code" "$?" "0"
expect_contains "--all: overlap section" "$(cat all.txt)" "overlap"
kernalyse-merge "$F" -o run.h5 -q 2>err.txt
expect_eq "store written" "$?" "0"
expect_contains "store: produced_by names the format" "$(h5dump -a produced_by run.h5 2>/dev/null)" \
  "rocprofv3 JSON import"
finish
