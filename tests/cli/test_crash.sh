#!/usr/bin/env bash
# Crash survival (docs/collector.md, "Crash recovery"): a rank SIGKILLed mid-run, SIGTERM to the
# whole job, a spool file cut at a random byte, a full disk; and the offline merge of a normal
# run's spool equals the store the collector wrote.
source "$(dirname "$0")/lib.sh"
use_mpi
cd "$TMP"
json() { /usr/bin/python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))" "$@"; }
now_ns() { date +%s%N; }
FLUSH_MS=50
SLACK_MS=300  # scheduling on 2 oversubscribed cores, the flush thread's wake-up, record spacing
# Pid of the profiled application (vicuna_tp) of world rank $2 of the run writing $1.
app_pid() {
  local p
  for p in $(pgrep -x vicuna_tp); do
    if { tr "\0" "\n" < "/proc/$p/environ"; } 2>/dev/null | grep -qx "KERNALYSE_OUTPUT=$1" &&
       { tr "\0" "\n" < "/proc/$p/environ"; } 2>/dev/null | grep -qx "OMPI_COMM_WORLD_RANK=$2"; then
      echo "$p"; return 0
    fi
  done
  return 1
}
# Waits (up to 30 s) until every spool file in $1 holds at least $2 bytes ($3 files).
wait_spool() {
  local i n
  for i in $(seq 300); do
    n=$(find "$1" -name 'rank-*.kspool' -size +"$2"c 2>/dev/null | wc -l)
    [ "$n" -ge "$3" ] && return 0
    sleep 0.1
  done
  return 1
}

# 1. SIGKILL rank 2's application mid-run: the job dies; the spool keeps every rank's data up to
#    at most one flush interval (+ slack) before the kill.
timeout 120 mpirun -n 4 "$BIN/kernalyse-run" --flush-ms $FLUSH_MS --spool-dir "$TMP/spA" \
  -o "$TMP/a.h5" "$BIN/vicuna_tp" --layers 8 --steps 200 >a.out 2>a.err &
job=$!
wait_spool "$TMP/spA" 20000 4 || fail "kill: spool files did not grow"
sleep 1
pid=$(app_pid "$TMP/a.h5" 2)
t_kill=$(now_ns)
kill -KILL "$pid"
wait $job
rc=$?
expect_eq "kill: the job fails (rc $rc)" "$([ "$rc" -ne 0 ] && echo failed)" "failed"
expect_eq "kill: no store from the dead job" "$(test -e a.h5 && echo yes || echo no)" "no"
"$BIN/kernalyse-merge" --spool "$TMP/spA" --json > recA.json
expect_eq "kill: recovery exit code" "$?" "0"
"$BIN/kernalyse-merge" --spool "$TMP/spA" -o recA.h5 > recA.txt 2>recA.err
expect_eq "kill: recovery writes the store" "$?:$(test -f recA.h5 && echo yes)" "0:yes"
cat recA.txt
expect_contains "kill: report names rank 2" "$(cat recA.txt)" "rank 2:"
expect_eq "kill: 4 ranks recovered" "$(json recA.json 'sum(r["recovered"] for r in d["ranks"])')" "4"
expect_eq "kill: rank 2 stopped before its end clock sync" "$(json recA.json 'd["ranks"][2]["has_end_sample"]')" "False"
for r in 0 1 2 3; do
  end=$(json recA.json "d['ranks'][$r]['data_end_ns']")
  lag_ms=$(( (t_kill - end) / 1000000 ))
  expect_eq "kill: rank $r data ends within one flush interval of the kill (${lag_ms} ms before)" \
    "$([ "$lag_ms" -le $((FLUSH_MS + SLACK_MS)) ] && echo yes)" "yes"
done
"$BIN/kernalyse-merge" recA.h5 --json -q > recA.store.json
expect_eq "kill: the store has 4 rank rows" "$(json recA.store.json 'len(d["ranks"])')" "4"
expect_contains "kill: the store names the spool" "$(json recA.store.json 'd["ranks"][2]["source"]')" "spool: $TMP/spA/rank-2.kspool"

# 2. SIGTERM to the whole job, with a flush interval far longer than the run: what the spool
#    holds past the start can only come from the flush at SIGTERM.
# mpirun must get one SIGTERM: timeout(1) without --foreground would also signal its whole
# process group, and a second SIGTERM makes mpirun SIGKILL the job at once.
# Open MPI SIGKILLs the ranks odls_base_sigkill_timeout (default 1 s) after SIGTERM; on this
# shared 2-core machine give them the grace a user would set (docs/collector.md).
timeout --foreground 120 mpirun --mca odls_base_sigkill_timeout 5 -n 4 "$BIN/kernalyse-run" --flush-ms 600000 \
  --flush-records 100000000 --spool-dir "$TMP/spB" -o "$TMP/b.h5" \
  "$BIN/vicuna_tp" --layers 8 --steps 200 >b.out 2>b.err &
job=$!
# Every rank past its start clock sync (its Meta block written), then 2 s of records.
wait_spool "$TMP/spB" 100 4 || fail "term: no rank got past MPI_Init"
sleep 2
t_term=$(now_ns)
kill -TERM $job
wait $job
echo "mpirun exit after SIGTERM: $?"
cat b.err
"$BIN/kernalyse-merge" --spool "$TMP/spB" --json > recB.json
expect_eq "term: recovery exit code" "$?" "0"
json recB.json '"\n".join(d["lines"])'
expect_eq "term: 4 ranks recovered" "$(json recB.json 'sum(r["recovered"] for r in d["ranks"])')" "4"
expect_eq "term: no torn spool file" "$(json recB.json 'sum(r["truncated"] for r in d["ranks"])')" "0"
for r in 0 1 2 3; do
  end=$(json recB.json "d['ranks'][$r]['data_end_ns']")
  lag_ms=$(( (t_term - end) / 1000000 ))
  expect_eq "term: rank $r flushed at SIGTERM (data ends ${lag_ms} ms before it)" \
    "$([ "$lag_ms" -le $((FLUSH_MS + SLACK_MS)) ] && echo yes)" "yes"
done

# 3. A spool file cut at a random byte (the many-block spool of 1): every complete block is
#    kept, the cut is reported.
cp -r "$TMP/spA" spC
f=spC/rank-1.kspool
size=$(stat -c %s "$f")
# The complete blocks of the first $2 bytes, from their headers (magic, version, type, count,
# payload bytes, crc): "end-of-last-complete-block records".
prefix() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import struct, sys
data = open(sys.argv[1], 'rb').read()[:int(sys.argv[2])]
off = records = 0
while off + 20 <= len(data):
    magic, ver, typ, count, payload, crc = struct.unpack_from('<IHHIII', data, off)
    if off + 20 + payload > len(data): break
    if typ in (2, 3, 4, 5): records += count
    off += 20 + payload
print(off, records)
PY
}
cut=$(( (RANDOM * 32768 + RANDOM) % (size - 1) + 1 ))
read -r keep records < <(prefix "$f" "$cut")
if [ "$keep" = "$cut" ]; then  # on a block boundary: cut one byte into the block before
  cut=$((cut - 1))
  read -r keep records < <(prefix "$f" "$cut")
fi
truncate -s "$cut" "$f"
echo "cut rank 1's spool at byte $cut of $size: complete blocks end at $keep, $records records"
"$BIN/kernalyse-merge" --spool spC --json > recC.json
expect_eq "cut: recovery exit code" "$?" "0"
json recC.json '"\n".join(d["lines"])'
expect_eq "cut: rank 1 truncated" "$(json recC.json 'd["ranks"][1]["truncated"]')" "True"
expect_eq "cut: kept prefix ends at the last complete block" "$(json recC.json 'd["ranks"][1]["cut_byte"]')" "$keep"
expect_eq "cut: every record of the complete blocks kept" "$(json recC.json 'd["ranks"][1]["records"]')" "$records"
expect_eq "cut: other ranks untouched" \
  "$(json recC.json '[(r["records"], r["truncated"]) for r in d["ranks"] if r["rank"] != 1]')" \
  "$(json recA.json '[(r["records"], r["truncated"]) for r in d["ranks"] if r["rank"] != 1]')"
expect_eq "cut: fewer records than the whole file" \
  "$(json recC.json 'd["ranks"][1]["records"] < '"$(json recA.json 'd["ranks"][1]["records"]')")" "True"
expect_contains "cut: report names the cut" "$(json recC.json 'd["lines"][1]')" "byte $keep"
"$BIN/kernalyse-merge" --spool spC -o recC.h5 >/dev/null 2>&1
if [ "$records" -gt 0 ]; then
  expect_eq "cut: store written" "$?:$(test -f recC.h5 && echo yes)" "0:yes"
fi
# A rank whose file is gone is named missing; none at all is an error (exit 2).
rm spC/rank-3.kspool
"$BIN/kernalyse-merge" --spool spC > recD.txt
expect_contains "missing: named" "$(cat recD.txt)" "rank 3: missing (no spool file)"
mkdir empty
"$BIN/kernalyse-merge" --spool empty -o none.h5 2>none.err
expect_eq "nothing to recover: exit 2" "$?" "2"
expect_contains "nothing to recover: message" "$(cat none.err)" "no rank-<r>.kspool spool files"
expect_eq "nothing to recover: no store" "$(test -e none.h5 && echo yes || echo no)" "no"

# 4. A normal run's spool, merged offline, gives the same analysis as the collector's store.
mpirun -n 2 "$BIN/kernalyse-run" -q --keep-spool --spool-dir "$TMP/spE" -o "$TMP/e.h5" \
  "$BIN/vicuna_tp" --layers 2 --steps 4 >/dev/null 2>&1
expect_eq "normal run: exit code" "$?" "0"
"$BIN/kernalyse-merge" --spool "$TMP/spE" -o recE.h5 > recE.txt 2>/dev/null
expect_contains "normal run: ranks complete" "$(cat recE.txt)" "rank 1: complete;"
"$BIN/kernalyse-merge" e.h5 --all --json -q | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("ranks"); print(json.dumps(d, sort_keys=True))' > e.sum
"$BIN/kernalyse-merge" recE.h5 --all --json -q | /usr/bin/python3 -c 'import json,sys; d=json.load(sys.stdin); d.pop("ranks"); print(json.dumps(d, sort_keys=True))' > recE.sum
expect_eq "normal run: offline merge analyses like the collector's store" "$(cmp -s e.sum recE.sum && echo same)" "same"

# 5. A full disk (a 2 MB tmpfs): a clear error, and no corrupt store.
mkdir full
if mount -t tmpfs -o size=2m tmpfs "$TMP/full" 2>/dev/null; then
  trap 'umount "$TMP/full" 2>/dev/null; rm -rf "$TMP"' EXIT
  timeout 120 mpirun -n 4 "$BIN/kernalyse-run" --flush-ms $FLUSH_MS --spool-dir "$TMP/full/sp" \
    -o "$TMP/full/f.h5" "$BIN/vicuna_tp" --layers 8 --steps 100 >f.out 2>f.err
  echo "full disk: kernalyse-run exit code $?"
  grep kernalyse-run f.err | head -6
  expect_contains "full disk: the spool error is clear" "$(grep 'writing spool' f.err)" "failed: No space left on device"
  expect_contains "full disk: the store error is clear" "$(grep 'spool files kept' f.err)" "kernalyse-run: $TMP/full/f.h5: cannot"
  for s in "$TMP"/full/*.h5; do
    [ -e "$s" ] || continue
    "$BIN/kernalyse-merge" "$s" --json -q >/dev/null 2>&1
    expect_eq "full disk: a store left behind reads back ($s)" "$?" "0"
  done
  expect_eq "full disk: no temporary store left" "$(ls "$TMP/full" | grep -c '\.tmp')" "0"
  "$BIN/kernalyse-merge" --spool "$TMP/full/sp" -o "$TMP/full/rec.h5" >g.out 2>g.err
  rc=$?
  cat g.err
  # Exit 2 expected; HDF5 1.10's exit handler may crash (139) on the file whose close failed.
expect_eq "full disk: recovery into the full disk fails (exit $rc)" "$([ "$rc" -ne 0 ] && echo failed)" "failed"
  expect_contains "full disk: recovery error is clear" "$(cat g.err)" "kernalyse-merge: $TMP/full/rec.h5: cannot"
  expect_contains "full disk: recovery error names the cause" "$(cat g.err)" "No space left on device"
  expect_eq "full disk: no recovered store, no temporary" "$(ls "$TMP/full" | grep -c 'rec\.h5')" "0"
  "$BIN/kernalyse-merge" --spool "$TMP/full/sp" -o "$TMP/rec-elsewhere.h5" >/dev/null 2>&1
  expect_eq "full disk: the kept spool still recovers elsewhere" "$?" "0"
else
  echo "SKIP full disk: cannot mount a tmpfs here"
fi

finish
