#!/usr/bin/env bash
# --perfetto of a store under mpirun -n P (export_perfetto_by_rank, sliced.h): the processes
# format the events in pieces, in turn; each writes its own into process 0's file at the places
# process 0 gives them (a plain file on one host), or sends them to process 0 (gzip). The file is the one-process export's
# byte for byte: tracegen stores of 6 and 4 ranks under -n 2, 3 and 4 (more processes than ranks
# too), gzip, --from/--to, --rank, --step, clocks as recorded and inferred, with --export-kineto,
# stores of the shared traces; one 'wrote' line, the one-process one; TMPDIR unused. An existing
# file: exit 2, said once, untouched. A failure on one process (its writes failing while the
# events stream, the writer's or another's, plain or gzip) reaches every process: exit 2, one
# line, no file, no temporary left, no hang.
source "$(dirname "$0")/lib.sh"
use_mpi
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)

kernalyse-tracegen --ranks 6 --kernels 2000 --steps 4 --seed 41 --ranks-per-host 2 \
  --host-skew-us 1:2500 --out "$TMP/tg" >/dev/null 2>&1
kernalyse-merge "$TMP/tg" -o "$TMP/tg.h5" -q
kernalyse-merge "$TMP/tg" -o "$TMP/off.h5" --align off -q
kernalyse-tracegen --ranks 4 --kernels 1500 --steps 3 --seed 42 --out "$TMP/tg4" >/dev/null 2>&1
kernalyse-merge "$TMP/tg4" -o "$TMP/tg4.h5" -q

mkdir -p "$TMP/tmpdir"
# spread NAME P STORE FILE ARGS...: `mpirun -n P` writes the one-process file, exit 0, and says
# its one 'wrote' line; the processes' TMPDIR is empty after.
spread() {
  local name=$1 procs=$2 store=$3 file=$4
  shift 4
  rm -rf "$TMP/one" "$TMP/mp"
  mkdir -p "$TMP/one" "$TMP/mp"
  kernalyse-merge "$store" --perfetto "$TMP/one/$file" "$@" 2>"$TMP/one.err"
  local r1=$?
  timeout 300 "${MPIRUN[@]}" -n "$procs" -x TMPDIR="$TMP/tmpdir" "$BIN/kernalyse-merge" "$store" \
    --perfetto "$TMP/mp/$file" "$@" </dev/null >/dev/null 2>"$TMP/mp.err"
  local r2=$?
  local wrote_one wrote_mp
  wrote_one=$(grep '^wrote' "$TMP/one.err" | sed "s#$TMP/one#D#")
  wrote_mp=$(grep '^wrote' "$TMP/mp.err" | sed "s#$TMP/mp#D#")
  if [ "$r1" = 0 ] && [ "$r2" = 0 ] && [ -s "$TMP/one/$file" ] &&
    cmp -s "$TMP/one/$file" "$TMP/mp/$file" && [ "$(ls -A "$TMP/mp")" = "$file" ] &&
    [ -n "$wrote_one" ] && [ "$wrote_one" = "$wrote_mp" ] && [ -z "$(ls -A "$TMP/tmpdir")" ]; then
    pass "$name (-n $procs): $(wc -c <"$TMP/mp/$file") bytes, identical"
  else
    fail "$name (-n $procs): exit $r1 / $r2; $(cmp "$TMP/one/$file" "$TMP/mp/$file" 2>&1 | head -1);" \
      "$(ls -A "$TMP/mp" "$TMP/tmpdir" | tr '\n' ' '); $(tail -2 "$TMP/mp.err")"
  fi
}
for n in 2 3 4; do
  spread "tracegen store, 6 ranks" "$n" "$TMP/tg.h5" p.json
done
spread "4 ranks" 4 "$TMP/tg4.h5" p.json
spread "4 ranks, more processes than ranks" 6 "$TMP/tg4.h5" p.json
spread "gzip" 3 "$TMP/tg.h5" p.json.gz
spread "gzip with --from" 2 "$TMP/tg.h5" p.json.gz --from 4ms
spread "--from/--to (counter levels at the start)" 3 "$TMP/tg.h5" p.json --from 2ms --to 9ms
spread "--rank 3" 4 "$TMP/tg.h5" p.json --rank 3
spread "--step 2 (counters inside each rank's step)" 3 "$TMP/tg.h5" p.json --step 2
spread "clocks as recorded (--align off)" 3 "$TMP/off.h5" p.json --align off
spread "clocks inferred (on every process)" 4 "$TMP/off.h5" p.json --align inferred
expect_contains "clocks inferred: said as one process says it" "$(cat "$TMP/mp.err")" \
  "clocks inferred from"
expect_eq "clocks inferred: said once" "$(grep -c 'clocks inferred from' "$TMP/mp.err")" "1"
# The file has events of every rank, flows and waits: the assembly left nothing out.
python3 - "$TMP/mp/p.json" <<'PY' >"$TMP/kinds"
import json, sys, collections
ev = json.load(open(sys.argv[1]))["traceEvents"]
c = collections.Counter(e["ph"] for e in ev)
ranks = sorted({e["pid"] for e in ev if e["ph"] == "X" and e.get("cat") == "kernel"})
print(c["s"] > 0 and c["s"] == c["f"], any(e.get("cat") == "wait" for e in ev), ranks)
PY
expect_eq "flows, waits, every rank's kernels in the file" "$(cat "$TMP/kinds")" \
  "True True [0, 1, 2, 3, 4, 5]"

# With --export-kineto: both exports spread, the one-process files.
rm -rf "$TMP/one" "$TMP/mp"
mkdir -p "$TMP/one" "$TMP/mp"
kernalyse-merge "$TMP/off.h5" --perfetto "$TMP/one/p.json" --export-kineto "$TMP/one/k" -q
timeout 300 "${MPIRUN[@]}" -n 3 -x TMPDIR="$TMP/tmpdir" "$BIN/kernalyse-merge" "$TMP/off.h5" \
  --perfetto "$TMP/mp/p.json" --export-kineto "$TMP/mp/k" -q </dev/null
expect_eq "-n 3, both exports: exit 0, the one-process files" \
  "$? $(ls "$TMP/mp/k" | wc -l) $(diff -r "$TMP/one" "$TMP/mp" >/dev/null && echo same)" "0 6 same"

if [ -d "$TRACES" ]; then
  for set in kineto/merged_4rank_rocm hta/trace_filter kineto/hta_trace_compare/base; do
    [ -e "$TRACES/$set" ] || continue
    kernalyse-merge "$TRACES/$set" -o "$TMP/real.h5" --force -q 2>/dev/null &&
      spread "shared $set" 2 "$TMP/real.h5" p.json
  done
  # GPU memory counters (26,770 samples), also with a window: the levels at its start.
  kernalyse-merge "$TRACES/hta/df_index_resolver" -o "$TMP/mem.h5" -q
  spread "shared df_index_resolver: counters" 2 "$TMP/mem.h5" p.json
  expect_eq "shared df_index_resolver: counter samples written" \
    "$([ "$(grep -c '"ph":"C"' "$TMP/mp/p.json")" -gt 1000 ] && echo yes)" "yes"
  spread "shared df_index_resolver: --from/--to" 3 "$TMP/mem.h5" p.json --from 50ms --to 80ms
  expect_contains "shared df_index_resolver: a level written at the window's start" \
    "$(grep '"ph":"C"' "$TMP/mp/p.json" | head -1)" '"ts":50000'
else
  echo "SKIP (not counted): $TRACES absent, the shared traces' stores"
fi

# An existing file: refused before any work, exit 2, the line said once, untouched.
echo keep >"$TMP/exists.json"
timeout 300 "${MPIRUN[@]}" -n 3 -x TMPDIR="$TMP/tmpdir" "$BIN/kernalyse-merge" "$TMP/tg.h5" \
  --perfetto "$TMP/exists.json" </dev/null >/dev/null 2>"$TMP/ex.err"
expect_eq "existing file under -n 3: exit 2" "$?" "2"
expect_eq "existing file under -n 3: one line naming it, said once" \
  "$(grep -c "^kernalyse-merge: .*exists.json: exists" "$TMP/ex.err") $(grep -c '^kernalyse-merge' "$TMP/ex.err")" \
  "1 1"
expect_eq "existing file under -n 3: untouched" "$(cat "$TMP/exists.json")" "keep"

# wrapped SETUP FILE: tg.h5 --perfetto into an empty $TMP/mp/FILE under mpirun -n 3, each process
# through a wrapper that first runs the shell line SETUP; the exit status in $rc, stderr in
# fail.err.
wrapped() {
  cat >"$TMP/wrap.sh" <<EOF
#!/bin/sh
$1
exec "$BIN/kernalyse-merge" "\$@"
EOF
  chmod +x "$TMP/wrap.sh"
  rm -rf "$TMP/mp"
  mkdir -p "$TMP/mp"
  timeout 300 "${MPIRUN[@]}" -n 3 -x TMPDIR="$TMP/tmpdir" "$TMP/wrap.sh" "$TMP/tg.h5" \
    --perfetto "$TMP/mp/$2" </dev/null >/dev/null 2>"$TMP/fail.err"
  rc=$?
}

# The processes need no TMPDIR (process 1's does not exist): exit 0, the file.
wrapped "[ \"\$OMPI_COMM_WORLD_RANK\" = 1 ] && export TMPDIR=\"$TMP/missing\"" p.json
kernalyse-merge "$TMP/tg.h5" --perfetto "$TMP/one.json" -q
expect_eq "process 1 without a TMPDIR: exit 0, the file" \
  "$rc $(cmp -s "$TMP/mp/p.json" "$TMP/one.json" && echo same)" "0 same"
# Failures while the events stream: one process's writes limited (ulimit -f, SIGXFSZ ignored: the
# write fails with EFBIG): process 0's (the file's header and its pieces) or process 2's (its
# pieces, written into the file) to 200 kB; with gzip (the events sent to process 0) process
# 0's to 20 kB. (Open MPI's shared memory segments fail the limit too: it says so and goes on
# without them.)
for case in "0 400 p.json" "2 400 p.json" "0 40 p.json.gz"; do
  read -r who blocks file <<<"$case"
  wrapped "if [ \"\$OMPI_COMM_WORLD_RANK\" = $who ]; then trap '' XFSZ; ulimit -f $blocks; fi" "$file"
  expect_eq "process $who's writes failing midway ($file): exit 2 (no hang)" "$rc" "2"
  expect_eq "process $who's writes failing midway ($file): one line, the write error" \
    "$(grep -c '^kernalyse-merge: .*\(File too large\|write error\)' "$TMP/fail.err") $(grep -c '^kernalyse-merge' "$TMP/fail.err")" \
    "1 1"
  expect_eq "process $who's writes failing midway ($file): no file, no temporary" \
    "$(ls -A "$TMP/mp" | wc -l)" "0"
done
expect_eq "TMPDIR empty after every run" "$(ls -A "$TMP/tmpdir" | wc -l)" "0"
finish
