#!/usr/bin/env bash
# `kernalyse-merge TRACE -o OUT` for one Kineto trace imports it straight into the store file,
# its rows through temporary files in chunks (issue 28: a 10 GB trace in bounded memory). The
# store must be the one the in-memory import writes (the same import with an analysis asked,
# which keeps the store in memory): every shared Kineto trace, a generated one with steps, ops and
# NCCL rows, and the merged multi-rank file (finished in memory), each in chunks of a few rows so
# that every table spills and merges many runs. Peak memory must stay below the in-memory
# import's; bad input and unwritable outputs fail as before, leaving nothing behind.
source "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
PY=/usr/bin/python3
CMP="$SRC/bench/h5_compare.py"

# same_store WHAT TRACE [CHUNK]: in-memory (-o with --summary) against streamed (-o alone).
same_store() {
  rm -f mem.h5 str.h5
  kernalyse-merge "$2" -o mem.h5 --summary >/dev/null 2>mem.err
  local rm=$?
  KERNALYSE_IMPORT_CHUNK_ROWS=${3:-7} kernalyse-merge "$2" -o str.h5 >str.out 2>str.err
  local rs=$?
  if [ $rm -ne 0 ] || [ $rs -ne 0 ]; then
    fail "$1: exit $rm (in memory) / $rs (streamed): $(tail -1 str.err)"
    return
  fi
  expect_eq "$1: the same store" "$("$PY" "$CMP" mem.h5 str.h5 2>&1 | head -3)" ""
  # The same lines but for the timings and the progress lines.
  norm() {
    grep -v '^importing \|^writing \|rows were sorted on disk' "$1" |
      sed -E 's/ in [0-9.]+ s \([0-9]+ MB\/s\)//; s/(mem|str)\.h5/OUT/'
  }
  expect_eq "$1: the same messages" "$(norm str.err)" "$(norm mem.err)"
  # Past 64 runs' worth of rows the trace is streamed, and says so; below, imported in memory.
  if [ "${4:-}" = streamed ]; then
    expect_contains "$1: streamed through runs on disk" "$(cat str.err)" "rows were sorted on disk ("
  fi
  expect_eq "$1: nothing on stdout" "$(wc -c <str.out)" "0"
}

kernalyse-tracegen --ranks 1 --kernels 20000 --steps 4 --seed 11 --out tg >gen.log 2>&1 ||
  { fail "tracegen: $(tail -3 gen.log)"; finish; exit; }
same_store "generated (steps, ops, NCCL), chunks of 7" tg/rank-0.json 7 streamed
same_store "generated, chunks of 512" tg/rank-0.json 512 streamed
same_store "generated, below the default budget: in memory" tg/rank-0.json
"$PY" - str.h5 <<'PY' >tables.txt
import h5py, sys
h = h5py.File(sys.argv[1])
print(h["activities/rank"].shape[0] > 0, h["ops/rank"].shape[0] > 0, h["nccl/activity"].shape[0] > 0,
      len(set(h["activities/step"][()].tolist()) - {-1}) == 4)
PY
expect_eq "generated: activities, ops, NCCL rows and 4 steps stored" "$(cat tables.txt)" "True True True True"

# A trace whose baseTimeNanoseconds moves some rows out of the time range: dropped and counted
# alike (the shift happens after the last chunk).
"$PY" - <<'PY'
import json
ev = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "pid": 1, "tid": 1,
       "ts": 0, "dur": 400}]
for i in range(40):
    ts = 10 + 9 * i if i % 5 else 4.7e12  # every fifth: past 2^62 ns once the base is added
    ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
               "ts": ts, "dur": 2, "args": {"correlation": i, "External id": 100 + i}})
    ev.append({"ph": "X", "cat": "kernel", "name": "k%d" % (i % 3), "pid": 0, "tid": 7,
               "ts": ts + 3, "dur": 4, "args": {"device": 0, "stream": 7, "correlation": i}})
    ev.append({"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1, "ts": ts - 1,
               "dur": 8, "args": {"External id": 100 + i, "Input Dims": [[2, 2]]}})
json.dump({"traceEvents": ev, "distributedInfo": {"rank": 0},
           "baseTimeNanoseconds": 4611686018427387000 - 10**10}, open("shift.json", "w"))
PY
same_store "base time drops rows, chunks of 1" shift.json 1 streamed
expect_contains "base time: the dropped rows are counted" "$(cat str.err)" "16 malformed events skipped"

need_traces
n=0
streamed=0
while IFS= read -r f; do
  same_store "$(basename "$f")" "$f" 7
  n=$((n + 1))
  grep -q 'rows were sorted on disk (' str.err && streamed=$((streamed + 1))
done < <(find "$TRACES/kineto" "$TRACES/hta" "$TRACES/tracelens" -name '*.json' -o -name '*.json.gz' | sort)
expect_eq "shared Kineto traces compared ($n), most streamed ($streamed)" \
  "$([ "$n" -ge 20 ] && [ "$streamed" -ge 20 ] && echo yes)" "yes"
expect_contains "the merged 4-rank file: four ranks" \
  "$(KERNALYSE_IMPORT_CHUNK_ROWS=2 kernalyse-merge "$TRACES/kineto/merged_4rank_rocm/merged_nccl_only.json.gz" -o m4.h5 --force 2>&1)" \
  "4 rank(s)"

# Memory: a 350 MB trace in chunks of 4096 rows peaks well below the in-memory import (measured
# 40.6 MB against 101.6 MB).
kernalyse-tracegen --ranks 1 --kernels 300000 --steps 4 --seed 12 --out big >gen.log 2>&1
peak() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
mem=$(peak kernalyse-merge big/rank-0.json -o m.h5 --summary -q)
str=$(KERNALYSE_IMPORT_CHUNK_ROWS=4096 peak kernalyse-merge big/rank-0.json -o s.h5 -q)
expect_contains "big: streamed" "$(KERNALYSE_IMPORT_CHUNK_ROWS=4096 kernalyse-merge big/rank-0.json -o s2.h5 2>&1)" \
  "rows were sorted on disk ("
# Under ASan (bench/sanitize.sh) RSS is not comparable (shadow memory, the free quarantine).
if nm -C "$BIN/kernalyse-merge" 2>/dev/null | grep -q __asan_init; then
  echo "note: an ASan build: the peak RSS is not compared ($str kB vs $mem kB)"
else
  expect_eq "streamed peak RSS below 0.6x the in-memory import's ($str kB vs $mem kB)" \
    "$([ "$str" -lt $((mem * 6 / 10)) ] && echo yes)" "yes"
fi
expect_eq "big: the same store" "$("$PY" "$CMP" m.h5 s.h5 2>&1 | head -3)" ""

# Bad input: one line naming the file, exit 2, no output, no temporary left.
head -c 300000 big/rank-0.json >cut.json
mkdir out
KERNALYSE_IMPORT_CHUNK_ROWS=50 kernalyse-merge cut.json -o out/cut.h5 >/dev/null 2>cut.err
expect_eq "truncated: exit 2" "$?" "2"
expect_eq "truncated: one line" "$(wc -l <cut.err | tr -d ' ')" "1"
expect_contains "truncated: names the file" "$(cat cut.err)" "cut.json: truncated JSON"
expect_eq "truncated: nothing left in the output directory" "$(ls -A out | wc -l)" "0"
cp tg/rank-0.json t.json
kernalyse-merge t.json -o mem.h5 -q 2>exists.err
expect_eq "existing output: exit 2" "$?" "2"
expect_contains "existing output: refused" "$(cat exists.err)" "exists"
kernalyse-merge t.json -o /nonexistent/x.h5 -q 2>nodir.err
expect_eq "missing directory: exit 2" "$?" "2"
KERNALYSE_IMPORT_CHUNK_ROWS=0 kernalyse-merge t.json -o z.h5 2>chunk.err
expect_eq "a bad KERNALYSE_IMPORT_CHUNK_ROWS: exit 2" "$?" "2"
expect_contains "a bad KERNALYSE_IMPORT_CHUNK_ROWS: named" "$(cat chunk.err)" "KERNALYSE_IMPORT_CHUNK_ROWS=0"
# A full disk (a 3 MB tmpfs, where root may mount one): one line naming the trace and the
# directory, exit 2, nothing left there.
mkdir -p small
if mount -t tmpfs -o size=3m tmpfs small 2>/dev/null; then
  KERNALYSE_IMPORT_CHUNK_ROWS=7 kernalyse-merge tg/rank-0.json -o small/x.h5 -q 2>full.err
  expect_eq "full disk: exit 2" "$?" "2"
  expect_eq "full disk: one line" "$(wc -l <full.err | tr -d ' ')" "1"
  expect_contains "full disk: names the trace and the directory" "$(cat full.err)" \
    "tg/rank-0.json: cannot write a temporary file in small: No space left on device"
  expect_eq "full disk: nothing left" "$(ls -A small | wc -l)" "0"
  umount small
else
  echo "note: cannot mount a tmpfs here; the full-disk case is not run"
fi
finish
