#!/usr/bin/env bash
# Hostile input through the CLI (issue 19; docs/limits.md): inputs the fuzzers found, rebuilt
# small here. Each is refused with one line naming the file and exit 2, or imported correctly,
# quickly; no output or temporary file is left, also not after SIGTERM during the write.
source "$(dirname "$0")/lib.sh"
M="$BIN/kernalyse-merge"
K='{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":1,"dur":2,"args":{"device":0,"stream":7}}'

# refuse NAME MSG ARGS...: exit 2, one line (warnings aside) containing MSG, within 5 s.
refuse() {
  local name=$1 msg=$2
  shift 2
  local t0=$SECONDS
  "$M" "$@" >"$TMP/stdout" 2>"$TMP/stderr"
  expect_eq "$name: exit code" "$?" "2"
  expect_contains "$name: message" "$(cat "$TMP/stderr")" "$msg"
  expect_eq "$name: one line" "$(grep -vc '^warning' "$TMP/stderr")" "1"
  expect_eq "$name: within 5 s" "$(( SECONDS - t0 <= 5 ))" "1"
}

# F4, F5: ranks past int32 in the file name or distributedInfo.
echo "{\"traceEvents\":[$K]}" > "$TMP/rank99999999999999999999.json"
refuse "F4 file-name rank" "rank 99999999999999999999 in the file name is out of range" \
  "$TMP/rank99999999999999999999.json"
echo "{\"traceEvents\":[$K]}" > "$TMP/rank4294967297.json"
refuse "F5 file-name rank 2^32+1" "out of range" "$TMP/rank4294967297.json"
echo "{\"distributedInfo\":{\"rank\":4294967296},\"traceEvents\":[$K]}" > "$TMP/d.json"
refuse "F5 distributedInfo.rank" "distributedInfo.rank 4294967296 is out of range" "$TMP/d.json"

# F12: mismatched brackets in a skipped value.
echo '{"distributedInfo":{"rank":0},"traceEvents":[],"y":{]}' > "$TMP/b.json"
refuse "F12 bracket" "$TMP/b.json: invalid JSON at byte" "$TMP/b.json"

# F13: kernels at ±9e15 µs are malformed (counted), and the HTML report is written.
echo '{"distributedInfo":{"rank":0},"traceEvents":[
 {"ph":"X","cat":"kernel","name":"a","pid":0,"tid":7,"ts":-9000000000000000,"dur":1,"args":{"device":0,"stream":7}},
 {"ph":"X","cat":"kernel","name":"b","pid":0,"tid":7,"ts":9000000000000000,"dur":1,"args":{"device":0,"stream":7}},
 '"$K"']}' > "$TMP/rank-0.json"
"$M" "$TMP/rank-0.json" --html "$TMP/r.html" -q 2>"$TMP/stderr"
expect_eq "F13 html: exit code" "$?" "0"
expect_contains "F13 html: malformed counted" "$(cat "$TMP/stderr")" "2 of 3 events malformed"
"$M" "$TMP/rank-0.json" --all --json -q >"$TMP/all.json" 2>/dev/null
expect_eq "F13 --all: exit code" "$?" "0"

# F14: --comm-regex on a 50,000-character kernel name.
long=$(head -c 50000 /dev/zero | tr '\0' a)
echo "{\"distributedInfo\":{\"rank\":0},\"traceEvents\":[{\"ph\":\"X\",\"cat\":\"kernel\",\"name\":\"$long\",\"pid\":0,\"tid\":7,\"ts\":1,\"dur\":2,\"args\":{\"device\":0,\"stream\":7}}]}" > "$TMP/long.json"
"$M" "$TMP/long.json" --comm-regex '.*allreduce' -q >/dev/null 2>"$TMP/stderr"
expect_eq "F14 long name regex: exit code" "$?" "0"

# F18: gzip through a pipe; F11: a lone surrogate key is valid JSON.
echo "{\"distributedInfo\":{\"rank\":0},\"traceEvents\":[$K,$K]}" | gzip -c | "$M" /dev/stdin -q --json >"$TMP/pipe.json"
expect_eq "F18 gzip pipe: exit code" "$?" "0"
expect_contains "F18 gzip pipe: two kernels" "$(tr -d ' \n' <"$TMP/pipe.json")" '"count":2'
echo '{"traceEvents":[],"\ud800":1}' > "$TMP/rank-3.json"
"$M" "$TMP/rank-3.json" -o "$TMP/s.h5" -q 2>"$TMP/stderr"
expect_eq "F11 surrogate key: imports" "$?" "0"

# gzip with bytes after the stream is refused, not silently cut; a second member is read.
echo "{\"distributedInfo\":{\"rank\":0},\"traceEvents\":[$K]}" | gzip -c > "$TMP/rank-4.json.gz"
printf 'trailing' >> "$TMP/rank-4.json.gz"
refuse "gzip trailing garbage" "$TMP/rank-4.json.gz: trailing garbage after the gzip stream at compressed byte" \
  "$TMP/rank-4.json.gz" -o "$TMP/g.h5"
expect_eq "gzip trailing garbage: no output" "$(ls "$TMP" | grep -c '^g\.h5')" "0"
{ echo "{\"distributedInfo\":{\"rank\":0},\"traceEvents\":[$K," | gzip -c
  echo "$K]}" | gzip -c; } > "$TMP/rank-5.json.gz"
"$M" "$TMP/rank-5.json.gz" -q --json >"$TMP/two.json" 2>"$TMP/stderr"
expect_eq "gzip two members: exit code" "$?" "0"
expect_contains "gzip two members: two kernels" "$(tr -d ' \n' <"$TMP/two.json")" '"count":2'

# -o naming a directory or a missing directory is refused before the import.
refuse "-o directory" "$TMP: is a directory" "$TMP/rank-0.json" -o "$TMP"
refuse "-o missing directory" "cannot create $TMP/no/out.h5: No such file or directory" \
  "$TMP/rank-0.json" -o "$TMP/no/out.h5"
expect_eq "-o refused before the import" "$(grep -c imported "$TMP/stderr")" "0"

# F6/F8: spool file names past the rank limit.
mkdir "$TMP/spool" && printf 'KSPL' > "$TMP/spool/rank-99999999999.kspool"
refuse "F6 spool rank" "past the limit of 65536 ranks per spool" --spool "$TMP/spool" -o "$TMP/x.h5"

# --spool where no file can be read: each file's reason on the one line; a FIFO is not waited on.
mkdir "$TMP/spool2" "$TMP/spool2/rank-0.kspool" && mkfifo "$TMP/spool2/rank-1.kspool"
: > "$TMP/spool2/rank-2.kspool"
refuse "spool unreadable files" "rank-0.kspool: a directory, not a spool file; rank-1.kspool: not a regular file; rank-2.kspool: empty file" \
  --spool "$TMP/spool2" -o "$TMP/y.h5"

# F15/F17: a store whose column claims more rows than it holds.
"$M" "$TMP/rank-0.json" -o "$TMP/c.h5" -q 2>/dev/null
python3 - "$TMP/c.h5" <<'PY'
import sys
# The first 1-row dataset's dataspace message (dims = 1, maxdims = H5S_UNLIMITED, 8-byte
# little-endian each) patched to claim 2^40 rows: a /ranks column, as the fuzzed stores had.
p = sys.argv[1]
b = bytearray(open(p, 'rb').read())
pat = (1).to_bytes(8, 'little') + b'\xff' * 8
i = b.find(pat)
if i < 0: sys.exit('pattern not found')
b[i:i + 8] = (1 << 40).to_bytes(8, 'little')
open(p, 'wb').write(b)
PY
refuse "F15 corrupt store" "$TMP/c.h5: corrupt /" "$TMP/c.h5" --all

# F20: SIGTERM while the store is written leaves neither the store nor its temporary.
kernalyse-tracegen --ranks 1 --kernels 100000 --steps 2 --out "$TMP/big" >/dev/null 2>&1
mkdir "$TMP/o"
seen=0
for i in 1 2 3; do
  rm -f "$TMP/o"/*
  "$M" "$TMP/big/rank-0.json" -o "$TMP/o/out.h5" -q --progress off &
  P=$!
  while kill -0 $P 2>/dev/null && [ ! -e "$TMP/o/out.h5.tmp.$P" ]; do :; done
  kill -TERM $P 2>/dev/null
  wait $P
  rc=$?
  [ "$rc" = 143 ] && seen=$((seen + 1))
  expect_eq "F20 SIGTERM run $i: no temporary left" "$(ls "$TMP/o" | grep -c tmp)" "0"
  if [ "$rc" = 143 ]; then expect_eq "F20 run $i: no partial store" "$(ls "$TMP/o" | wc -l)" "0"; fi
done
expect_eq "F20: SIGTERM reached a write at least once" "$(( seen > 0 ))" "1"
finish
