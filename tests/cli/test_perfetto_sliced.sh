#!/usr/bin/env bash
# --perfetto of a store a rank at a time (issue 28; export_perfetto_by_rank, sliced.h): the file
# is the whole-store export's byte for byte (KERNALYSE_WHOLE_STORE=1 reads it whole): a tracegen
# store (two skewed hosts, NCCL rows, launches, steps, GPU memory counters), its --rank, --step
# and --from/--to cuts (the counters' level at the window's start), gzip, clocks as recorded and
# clocks inferred from the cross-rank rows, together with --export-kineto, real stores of the
# shared traces; under mpirun the first process writes it (test_perfetto_spread.sh: all of them
# format it); an existing file is refused, exit 2,
# untouched; peak RSS is a slice's, well below the whole read's.
source "$(dirname "$0")/lib.sh"
use_mpi
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)

kernalyse-tracegen --ranks 4 --kernels 3000 --steps 4 --seed 31 --ranks-per-host 2 \
  --host-skew-us 1:2500 --out "$TMP/tg" >/dev/null 2>&1
kernalyse-merge "$TMP/tg" -o "$TMP/tg.h5" -q
kernalyse-merge "$TMP/tg" -o "$TMP/off.h5" --align off -q

# same NAME STORE FILE ARGS...: the export a rank at a time equals the whole-store export, and
# says the same lines.
same() {
  local name=$1 store=$2 file=$3
  shift 3
  rm -rf "$TMP/sl" "$TMP/wh"
  mkdir -p "$TMP/sl" "$TMP/wh"
  kernalyse-merge "$store" --perfetto "$TMP/sl/$file" "$@" 2>"$TMP/sl.err"
  local r1=$?
  KERNALYSE_WHOLE_STORE=1 kernalyse-merge "$store" --perfetto "$TMP/wh/$file" "$@" 2>"$TMP/wh.err"
  local r2=$?
  if [ "$r1" = 0 ] && [ "$r2" = 0 ] && [ -s "$TMP/sl/$file" ] && diff -r "$TMP/sl" "$TMP/wh" >/dev/null &&
    [ "$(grep -v '^writing' "$TMP/sl.err" | sed "s#$TMP/sl#D#")" = \
      "$(grep -v '^writing' "$TMP/wh.err" | sed "s#$TMP/wh#D#")" ]; then
    pass "$name: $(wc -c <"$TMP/sl/$file") bytes, identical"
  else
    fail "$name: exit $r1 / $r2; $(diff -r "$TMP/sl" "$TMP/wh" | head -3; tail -2 "$TMP/sl.err")"
  fi
}
same "tracegen store" "$TMP/tg.h5" p.json
same "--rank 2" "$TMP/tg.h5" p.json --rank 2
same "--step 2 (counters inside each rank's step)" "$TMP/tg.h5" p.json --step 2
same "--from/--to (counter levels at the start)" "$TMP/tg.h5" p.json --from 2ms --to 9ms
same "--from alone, gzip" "$TMP/tg.h5" p.json.gz --from 4ms
same "clocks as recorded (--align off)" "$TMP/off.h5" p.json --align off
same "clocks inferred (on the cross-rank rows)" "$TMP/off.h5" p.json
expect_contains "clocks inferred: said as the whole read says it" "$(cat "$TMP/sl.err")" \
  "clocks inferred from"
# The file has what the whole export has: flows and waits of the collectives.
python3 - "$TMP/sl/p.json" <<'PY' >"$TMP/kinds"
import json, sys, collections
ev = json.load(open(sys.argv[1]))["traceEvents"]
c = collections.Counter(e["ph"] for e in ev)
print(c["s"] > 0 and c["s"] == c["f"], any(e.get("cat") == "wait" for e in ev))
PY
expect_eq "flows and waits in the file" "$(cat "$TMP/kinds")" "True True"
# With --export-kineto: both, a rank at a time, as the whole read writes them.
rm -rf "$TMP/sl" "$TMP/wh"
mkdir -p "$TMP/sl" "$TMP/wh"
kernalyse-merge "$TMP/off.h5" --perfetto "$TMP/sl/p.json" --export-kineto "$TMP/sl/k" -q
KERNALYSE_WHOLE_STORE=1 kernalyse-merge "$TMP/off.h5" --perfetto "$TMP/wh/p.json" \
  --export-kineto "$TMP/wh/k" -q
expect_eq "with --export-kineto: the same files" \
  "$(ls "$TMP/sl/k" | wc -l) $(diff -r "$TMP/sl" "$TMP/wh" >/dev/null && echo same)" "4 same"

# Memory: 8 ranks, the export a rank at a time holds a slice, not the store.
kernalyse-tracegen --ranks 8 --kernels 40000 --steps 4 --seed 32 --out "$TMP/big" >/dev/null 2>&1
kernalyse-merge "$TMP/big" -o "$TMP/big.h5" -q
peak() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
sliced=$(peak kernalyse-merge "$TMP/big.h5" --perfetto "$TMP/bs.json" -q)
whole=$(KERNALYSE_WHOLE_STORE=1 peak kernalyse-merge "$TMP/big.h5" --perfetto "$TMP/bw.json" -q)
expect_eq "8 ranks: the same file" "$(cmp -s "$TMP/bs.json" "$TMP/bw.json" && echo same)" "same"
if nm -C "$BIN/kernalyse-merge" 2>/dev/null | grep -q __asan_init; then
  echo "note: an ASan build: the peak RSS is not compared ($sliced kB vs $whole kB)"
else
  expect_eq "8 ranks: peak RSS below 0.6x the whole read's ($sliced kB vs $whole kB)" \
    "$([ "$sliced" -lt $((whole * 3 / 5)) ] && echo yes)" "yes"
fi
rm -rf "$TMP/big" "$TMP/bs.json" "$TMP/bw.json"

if [ -d "$TRACES" ]; then
  # GPU memory counters (26,770 samples): their cuts by step and window.
  kernalyse-merge "$TRACES/hta/df_index_resolver" -o "$TMP/mem.h5" -q
  same "shared df_index_resolver: counters" "$TMP/mem.h5" p.json
  expect_eq "shared df_index_resolver: counter samples written" \
    "$([ "$(grep -c '"ph":"C"' "$TMP/sl/p.json")" -gt 1000 ] && echo yes)" "yes"
  same "shared df_index_resolver: --step 3" "$TMP/mem.h5" p.json --step 3
  same "shared df_index_resolver: --from/--to (levels at the start)" "$TMP/mem.h5" p.json \
    --from 50ms --to 80ms
  expect_contains "shared df_index_resolver: a level written at the window's start" \
    "$(grep '"ph":"C"' "$TMP/sl/p.json" | head -1)" '"ts":50000'
  for set in hta/trace_filter kineto/hta_trace_compare/base kineto/merged_4rank_rocm \
    kineto/single_gpu; do
    [ -e "$TRACES/$set" ] || continue
    kernalyse-merge "$TRACES/$set" -o "$TMP/real.h5" --force -q 2>/dev/null &&
      same "shared $set" "$TMP/real.h5" p.json
  done
else
  echo "SKIP (not counted): $TRACES absent, the shared traces' stores"
fi

# mpirun: the processes format their ranks' events, the first writes the file (more in
# test_perfetto_spread.sh).
kernalyse-merge "$TMP/off.h5" --perfetto "$TMP/one.json" 2>"$TMP/one.err"
rm -f "$TMP/m.json"
"${MPIRUN[@]}" -n 2 "$BIN/kernalyse-merge" "$TMP/off.h5" --perfetto "$TMP/m.json" \
  >"$TMP/m.out" 2>"$TMP/m.err"
expect_eq "-n 2: exit 0, the one-process file" \
  "$(echo $?; cmp -s "$TMP/one.json" "$TMP/m.json" && echo same)" "$(printf '0\nsame')"
expect_eq "-n 2: one 'wrote' line" "$(grep '^wrote' "$TMP/m.err")" \
  "$(grep '^wrote' "$TMP/one.err" | sed "s#$TMP/one.json#$TMP/m.json#")"

# An existing file: refused before any work, exit 2, one line naming it; untouched.
touch -d '2001-01-01' "$TMP/one.json"
kernalyse-merge "$TMP/tg.h5" --perfetto "$TMP/one.json" >/dev/null 2>"$TMP/ex.err"
expect_eq "existing file: exit 2" "$?" "2"
expect_eq "existing file: one line naming it" \
  "$(grep -c "^kernalyse-merge: .*one.json" "$TMP/ex.err") $(wc -l <"$TMP/ex.err")" "1 1"
expect_eq "existing file: untouched" "$(stat -c %y "$TMP/one.json" | cut -c1-4)" "2001"
expect_eq "existing file: no temporary left" "$(ls -a "$TMP" | grep -c '^\.')" "2"
"${MPIRUN[@]}" -n 3 "$BIN/kernalyse-merge" "$TMP/tg.h5" --perfetto "$TMP/one.json" \
  --export-kineto "$TMP/kx" </dev/null >/dev/null 2>"$TMP/ex3.err"
expect_eq "existing file under mpirun -n 3: the line said once" \
  "$(grep -c "^kernalyse-merge: .*one.json" "$TMP/ex3.err")" "1"
expect_eq "existing file under mpirun -n 3: nothing written" "$(ls "$TMP/kx" 2>/dev/null | wc -l)" "0"
# Both exports under mpirun: the Kineto files by every process, then the Perfetto file.
rm -rf "$TMP/sl" "$TMP/wh"
mkdir -p "$TMP/sl" "$TMP/wh"
"${MPIRUN[@]}" -n 3 "$BIN/kernalyse-merge" "$TMP/off.h5" --perfetto "$TMP/sl/p.json" \
  --export-kineto "$TMP/sl/k" -q </dev/null
KERNALYSE_WHOLE_STORE=1 kernalyse-merge "$TMP/off.h5" --perfetto "$TMP/wh/p.json" \
  --export-kineto "$TMP/wh/k" -q
expect_eq "-n 3, both exports: the one-process files" \
  "$(ls "$TMP/sl/k" | wc -l) $(diff -r "$TMP/sl" "$TMP/wh" >/dev/null && echo same)" "4 same"
finish
