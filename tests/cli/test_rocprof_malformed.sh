#!/usr/bin/env bash
# rocprofv3 JSON with bad records: each is counted as malformed, never fatal, and the good ones are
# kept (a dispatch with end < start, one without dispatch_info, one on an unknown agent, one with a
# string timestamp; a kernel_id without a symbol is kept under "kernel_id N" with a warning). A file
# that is not valid JSON, or a truncated gzip, is one line naming the file, exit 2, no output file.
. "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
cd "$TMP" || exit 1
d() {  # d START END AGENT KERNEL_ID CORR
  printf '{"kind": 11, "operation": 2, "thread_id": 7, "correlation_id": {"internal": %s, "external": 0}, "start_timestamp": %s, "end_timestamp": %s, "dispatch_info": {"agent_id": {"handle": %s}, "queue_id": {"handle": 3}, "kernel_id": %s}}' \
    "$5" "$1" "$2" "$3" "$4"
}
{
  echo '{"rocprofiler-sdk-tool": [{"metadata": {"pid": 42, "node": {"hostname": "nodeA"}},'
  echo '"agents": [{"id": {"handle": 5}, "type": 1}, {"id": {"handle": 9}, "type": 2, "gpu_index": 1, "product_name": "GPU X"}],'
  echo '"kernel_symbols": [{"kernel_id": 1, "formatted_kernel_name": "good_kernel"}],'
  echo '"buffer_records": {"kernel_dispatch": ['
  d 1000 2000 9 1 1; echo ,
  d 3000 3500 9 1 2; echo ,
  d 5000 4000 9 1 3; echo ,
  echo '{"kind": 11, "start_timestamp": 6000, "end_timestamp": 7000},'
  d 8000 9000 77 1 4; echo ,
  d '"9000"' 9500 9 1 5; echo ,
  d 10000 11000 9 2 6
  echo '], "hsa_api": [{"kind": 1, "operation": 3, "start_timestamp": 1, "end_timestamp": 2}]}}]}'
} >rank-3.json
kernalyse-merge rank-3.json --json --verbose >out.json 2>err.txt
expect_eq "exit code" "$?" "0"
got=$("$PY" - <<'PY'
import json
j = json.load(open("out.json"))
rows = {r["kernel"]: (r["count"], r["total_ns"]) for r in j["kernel_summary"]}
r = j["ranks"][0]
print(rows, r["rank"], r["events_malformed"], r["host"], r["device_name"], r["devices"])
PY
)
expect_eq "good records kept, 4 malformed counted, rank from the name, host and device" "$got" \
  "{'good_kernel': (2, 1500), 'kernel_id 2': (1, 1000)} 3 4 nodeA GPU X 1"
expect_contains "warning: malformed records" "$(cat err.txt)" "4 of 8 records malformed and skipped"
expect_contains "warning: kernel without a symbol" "$(cat err.txt)" 'named "kernel_id N"'
printf '{"rocprofiler-sdk-tool": [{"agents": [}]}' >bad.json
kernalyse-merge bad.json -o bad.h5 >/dev/null 2>err.txt
expect_eq "invalid JSON: exit 2" "$?" "2"
expect_eq "invalid JSON: one line naming the file" "$(wc -l <err.txt | tr -d ' ')/$(grep -c 'bad.json: invalid JSON' err.txt)" "1/1"
expect_eq "invalid JSON: no output file" "$(ls bad.h5 2>/dev/null)" ""
gzip -c rank-3.json | head -c 200 >cut.json.gz
kernalyse-merge cut.json.gz >/dev/null 2>err.txt
expect_eq "truncated gzip: exit 2" "$?" "2"
expect_contains "truncated gzip: says so" "$(cat err.txt)" "cut.json.gz: corrupt or truncated gzip"
finish
