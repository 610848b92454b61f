#!/usr/bin/env bash
# Every bad-input class gets one clear stderr line naming the file, exit code 2, and no output
# file (not even a temporary one) left behind.
source "$(dirname "$0")/lib.sh"

good="$TMP/rank-0.json"
cat > "$good" <<'J'
{"distributedInfo": {"rank": 0, "world_size": 1}, "traceEvents": [
 {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2, "args": {"device": 0, "stream": 7}}
]}
J

# check NAME EXPECTED_MSG ARGS... : exit 2, one line on stderr containing MSG, no out.h5*
check() {
  local name=$1 msg=$2
  shift 2
  rm -f "$TMP"/out.h5*
  "$BIN/kernalyse-merge" "$@" -o "$TMP/out.h5" >"$TMP/stdout" 2>"$TMP/stderr"
  local rc=$?
  expect_eq "$name: exit code" "$rc" "2"
  expect_contains "$name: message" "$(cat "$TMP/stderr")" "$msg"
  expect_eq "$name: one line" "$(grep -vc '^warning' "$TMP/stderr")" "1"
  expect_eq "$name: no output file" "$(ls "$TMP" | grep -c '^out\.h5')" "0"
}

# truncated gzip
gzip -c "$good" > "$TMP/full.json.gz"
head -c $(( $(stat -c %s "$TMP/full.json.gz") - 12 )) "$TMP/full.json.gz" > "$TMP/rank-1.json.gz"
check "truncated gzip" "$TMP/rank-1.json.gz: corrupt or truncated gzip" "$TMP/rank-1.json.gz"

# truncated JSON (plain)
head -c 100 "$good" > "$TMP/rank-2.json"
check "truncated json" "$TMP/rank-2.json: truncated JSON: input ends at byte 100" "$TMP/rank-2.json"

# invalid JSON
printf '{"traceEvents": [ {"ph": "X"} oops ]}' > "$TMP/rank-3.json"
check "invalid json" "$TMP/rank-3.json: invalid JSON at byte 30" "$TMP/rank-3.json"

# not a trace
printf '{"hello": "world"}' > "$TMP/rank-4.json"
check "not a trace" "$TMP/rank-4.json: not a Chrome/Kineto trace" "$TMP/rank-4.json"

# empty file, empty gzip
: > "$TMP/rank-5.json"
check "empty" "$TMP/rank-5.json: empty file" "$TMP/rank-5.json"
printf '' | gzip -c > "$TMP/rank-6.json.gz"
check "empty gzip" "$TMP/rank-6.json.gz: empty file" "$TMP/rank-6.json.gz"

# binary garbage
head -c 3000 /dev/urandom > "$TMP/rank-7.json"
printf 'x' | dd of="$TMP/rank-7.json" bs=1 count=1 conv=notrunc 2>/dev/null
check "garbage" "$TMP/rank-7.json: invalid JSON at byte 0" "$TMP/rank-7.json"

# missing file, missing rank, duplicate rank
check "missing file" "$TMP/nope.json: no such file" "$TMP/nope.json"
sed 's/"distributedInfo": {"rank": 0, "world_size": 1}, //' "$good" > "$TMP/norank.json"
# One file without a rank is rank 0 (an info line); two are one error that lists both.
cp "$TMP/norank.json" "$TMP/second.json"
check "no rank" "cannot tell the ranks of 2 traces (no distributedInfo.rank, no rank in the file names): $TMP/norank.json, $TMP/second.json" "$TMP/norank.json" "$TMP/second.json"
cp "$good" "$TMP/copy.json"
check "duplicate rank" "duplicate rank 0" "$good" "$TMP/copy.json"

# a directory without traces
mkdir -p "$TMP/emptydir"
check "empty dir" "$TMP/emptydir: no *.json, *.json.gz or *.sqlite" "$TMP/emptydir"

# unwritable output path
rm -f "$TMP"/out.h5*
"$BIN/kernalyse-merge" "$good" -o /nonexistent-dir/run.h5 2>"$TMP/stderr" >/dev/null
expect_eq "unwritable: exit code" "$?" "2"
expect_contains "unwritable: message" "$(cat "$TMP/stderr")" "/nonexistent-dir/run.h5"

# existing output is never overwritten without --force
"$BIN/kernalyse-merge" "$good" -o "$TMP/run.h5" -q >/dev/null 2>&1
expect_eq "first write" "$?" "0"
before=$(md5sum < "$TMP/run.h5")
"$BIN/kernalyse-merge" "$good" -o "$TMP/run.h5" 2>"$TMP/stderr" >/dev/null
expect_eq "existing: exit code" "$?" "2"
expect_contains "existing: message" "$(cat "$TMP/stderr")" "$TMP/run.h5: exists (use --force"
expect_eq "existing: untouched" "$(md5sum < "$TMP/run.h5")" "$before"
"$BIN/kernalyse-merge" "$good" -o "$TMP/run.h5" --force -q >/dev/null 2>&1
expect_eq "--force replaces" "$?" "0"

# a non-store HDF5-looking / non-trace input given as a store
printf 'not hdf5 at all' > "$TMP/fake.h5"
"$BIN/kernalyse-merge" "$TMP/fake.h5" 2>"$TMP/stderr" >/dev/null
expect_eq "fake store: exit code" "$?" "2"
expect_contains "fake store: message" "$(cat "$TMP/stderr")" "$TMP/fake.h5"

# malformed individual events are counted, not fatal
cat > "$TMP/rank-9.json" <<'J'
{"distributedInfo": {"rank": 9}, "traceEvents": [
 {"ph": "X", "cat": "kernel", "name": "k", "pid": 0, "tid": 7, "ts": 1.5, "dur": 2, "args": {"device": 0, "stream": 7}},
 {"ph": "X", "cat": "kernel", "name": "bad", "ts": "x", "dur": 2, "args": {"device": 0, "stream": 7}},
 17
]}
J
out=$("$BIN/kernalyse-merge" "$TMP/rank-9.json" --json 2>"$TMP/stderr")
expect_eq "malformed events: exit code" "$?" "0"
expect_contains "malformed events: warning" "$(cat "$TMP/stderr")" "2 of 3 events malformed"
expect_contains "malformed events: still analysed" "$out" '"events_malformed": 2'

finish
