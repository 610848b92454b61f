#!/usr/bin/env bash
# --html of a store a rank at a time (write_html_by_rank, sliced.h; past the memory budget,
# KERNALYSE_IMPORT_MEMORY_MB, here 1 MB): the page is the whole read's byte for byte
# (KERNALYSE_WHOLE_STORE=1): tracegen stores with clocks recorded and inferred, --from/--to,
# --rank and --step (read whole: the same bytes), with --all (its report too), real stores of the
# shared traces; under mpirun -n 2 and 3 the slices spread and the first process writes; an
# existing file is refused once, exit 2, untouched; peak RSS below the whole read's. Also the
# rank-at-a-time forms of --roofline, --hints and --alltoall: the whole read's text and JSON.
source "$(dirname "$0")/lib.sh"
use_mpi
MPIRUN=(mpirun --allow-run-as-root --oversubscribe)
PY=/usr/bin/python3
export KERNALYSE_IMPORT_MEMORY_MB=1  # past the budget: the rank-at-a-time route

kernalyse-tracegen --ranks 4 --kernels 3000 --steps 4 --seed 61 --ranks-per-host 2 \
  --host-skew-us 1:2500 --out "$TMP/tg" >/dev/null 2>&1
kernalyse-merge "$TMP/tg" -o "$TMP/tg.h5" -q
kernalyse-merge "$TMP/tg" -o "$TMP/off.h5" --align off -q

# same NAME STORE ARGS...: the page a rank at a time equals the whole read's, the report on
# stdout too, and the lines on stderr but the timed "wrote" line.
same() {
  local name=$1 store=$2
  shift 2
  rm -f "$TMP/sl.html" "$TMP/wh.html"
  kernalyse-merge "$store" --html "$TMP/sl.html" "$@" >"$TMP/sl.out" 2>"$TMP/sl.err"
  local r1=$?
  KERNALYSE_WHOLE_STORE=1 kernalyse-merge "$store" --html "$TMP/wh.html" "$@" >"$TMP/wh.out" \
    2>"$TMP/wh.err"
  local r2=$?
  if [ "$r1" = 0 ] && [ "$r2" = 0 ] && [ -s "$TMP/sl.html" ] &&
    cmp -s "$TMP/sl.html" "$TMP/wh.html" && cmp -s "$TMP/sl.out" "$TMP/wh.out" &&
    [ "$(grep -v '^wrote\|^writing' "$TMP/sl.err")" = "$(grep -v '^wrote\|^writing' "$TMP/wh.err")" ]; then
    pass "$name: $(wc -c <"$TMP/sl.html") bytes, identical"
  else
    fail "$name: exit $r1 / $r2; $(cmp "$TMP/sl.html" "$TMP/wh.html" 2>&1 | head -2;
      diff "$TMP/sl.out" "$TMP/wh.out" | head -3; diff "$TMP/sl.err" "$TMP/wh.err" | head -4)"
  fi
}
same "tracegen store (clocks recorded)" "$TMP/tg.h5"
same "clocks inferred (on the cross-rank rows)" "$TMP/off.h5"
expect_contains "clocks inferred: said once" "$(grep -c 'clocks inferred from' "$TMP/sl.err")" "1"
same "--from/--to" "$TMP/off.h5" --from 2ms --to 9ms
same "--from alone" "$TMP/tg.h5" --from 4ms
same "--rank 2 (read whole)" "$TMP/tg.h5" --rank 2
same "--step 2 (read whole)" "$TMP/tg.h5" --step 2
same "with --all --json" "$TMP/off.h5" --all --json
same "with --all, text, --top 5" "$TMP/tg.h5" --all --top 5
same "with --roofline --alltoall --critical-path --json" "$TMP/off.h5" --roofline --alltoall \
  --critical-path --json
# The page has what the whole read's has: lanes for every rank, a heat map.
"$PY" - "$TMP/sl.html" <<'PY' >"$TMP/kinds"
import json, re, sys
d = json.loads(re.search(r'id="kx-data">(.*?)</script>', open(sys.argv[1]).read()).group(1))
print(len(d["timeline"]["ranks"]), len(d["stragglers"]["cells"]) > 0)
PY
expect_eq "4 ranks' lanes, a straggler heat map" "$(cat "$TMP/kinds")" "4 True"

# --roofline, --hints, --alltoall a rank at a time: the whole read's text and JSON, on a store of
# two ranks with operator shapes (tracegen --shapes, its hints.json as ranks 0 and 1) and on an
# all-to-all store (tracegen --nccl-ops).
kernalyse-tracegen --shapes "$TMP/sh" >/dev/null 2>&1
mkdir -p "$TMP/shr"
"$PY" - "$TMP/sh/hints.json" "$TMP/shr" <<'PY'
import json, sys
for rank in (0, 1):
    t = json.load(open(sys.argv[1]))
    t.setdefault("distributedInfo", {})["rank"] = rank
    json.dump(t, open("%s/r%d.json" % (sys.argv[2], rank), "w"))
PY
kernalyse-merge "$TMP/shr" -o "$TMP/shapes.h5" -q
kernalyse-tracegen --nccl-ops --ranks 4 --steps 6 --ranks-per-host 2 --out "$TMP/a2a" >/dev/null 2>&1
kernalyse-merge "$TMP/a2a" -o "$TMP/a2a.h5" -q
# report NAME STORE ARGS...: stdout a rank at a time equals the whole read's.
report() {
  local name=$1 store=$2
  shift 2
  kernalyse-merge "$store" "$@" >"$TMP/r1.out" 2>/dev/null
  local r1=$?
  KERNALYSE_WHOLE_STORE=1 kernalyse-merge "$store" "$@" >"$TMP/r2.out" 2>/dev/null
  local r2=$?
  if [ "$r1" = 0 ] && [ "$r2" = 0 ] && [ -s "$TMP/r1.out" ] && cmp -s "$TMP/r1.out" "$TMP/r2.out"; then
    pass "$name: $(wc -c <"$TMP/r1.out") bytes, identical"
  else
    fail "$name: exit $r1 / $r2; $(diff "$TMP/r1.out" "$TMP/r2.out" | head -4)"
  fi
}
report "shapes: --roofline" "$TMP/shapes.h5" --roofline
report "shapes: --roofline --hints --json" "$TMP/shapes.h5" --roofline --hints --json
report "shapes: --hints --verbose" "$TMP/shapes.h5" --hints --verbose
expect_eq "shapes: two ranks, modelled time, hints fired" "$(kernalyse-merge "$TMP/shapes.h5" \
  --roofline --hints 2>&1 | grep -c '^ranks: 0,1;') $(kernalyse-merge "$TMP/shapes.h5" \
  --roofline --hints --json 2>/dev/null | "$PY" -c '
import json, sys
r = json.load(sys.stdin)
print(r["roofline_device"]["modelled_time_ns"] > 0, len(r["hints"]) > 0)')" "1 True True"
report "all-to-all: --alltoall" "$TMP/a2a.h5" --alltoall
report "all-to-all: --alltoall --json" "$TMP/a2a.h5" --alltoall --json
expect_eq "all-to-all: instances matched" "$(kernalyse-merge "$TMP/a2a.h5" --alltoall --json \
  2>/dev/null | "$PY" -c 'import json,sys; print(json.load(sys.stdin)["alltoall"]["instances"] > 0)')" \
  "True"
same "all-to-all store: the page (its heat map)" "$TMP/a2a.h5"
report "--all --roofline --hints --alltoall --json (clocks inferred)" "$TMP/off.h5" --all \
  --roofline --hints --alltoall --json

# Memory: 8 ranks, the page a rank at a time holds a few slices, not the store.
kernalyse-tracegen --ranks 8 --kernels 100000 --steps 4 --seed 62 --out "$TMP/big" >/dev/null 2>&1
kernalyse-merge "$TMP/big" -o "$TMP/big.h5" -q
rm -rf "$TMP/big"
peak() { /usr/bin/time -f %M "$@" 2>&1 >/dev/null | tail -1; }
sliced=$(peak kernalyse-merge "$TMP/big.h5" --html "$TMP/bs.html" -q)
whole=$(KERNALYSE_WHOLE_STORE=1 peak kernalyse-merge "$TMP/big.h5" --html "$TMP/bw.html" -q)
expect_eq "8 ranks: the same page" "$(cmp -s "$TMP/bs.html" "$TMP/bw.html" && echo same)" "same"
if nm -C "$BIN/kernalyse-merge" 2>/dev/null | grep -q __asan_init; then
  echo "note: an ASan build: the peak RSS is not compared ($sliced kB vs $whole kB)"
else
  expect_eq "8 ranks: peak RSS below 0.75x the whole read's ($sliced kB vs $whole kB)" \
    "$([ "$sliced" -lt $((whole * 3 / 4)) ] && echo yes)" "yes"
fi
# Within the default budget the store is read whole: the same page.
rm -f "$TMP/bd.html"
env -u KERNALYSE_IMPORT_MEMORY_MB kernalyse-merge "$TMP/big.h5" --html "$TMP/bd.html" -q
expect_eq "default budget: the whole read's page" \
  "$(cmp -s "$TMP/bd.html" "$TMP/bw.html" && echo same)" "same"
rm -f "$TMP/big.h5" "$TMP"/b?.html

if [ -d "$TRACES" ]; then
  for set in hta/trace_filter hta/df_index_resolver kineto/merged_4rank_rocm \
    kineto/hta_critical_path/alexnet kineto/single_gpu nsys/allreduce_2nodes_2gpus \
    kineto/tracelens_h100_hf; do
    [ -e "$TRACES/$set" ] || continue
    if kernalyse-merge "$TRACES/$set" -o "$TMP/real.h5" --force -q 2>/dev/null; then
      same "shared $set" "$TMP/real.h5"
      report "shared $set: --roofline --hints --alltoall --json" "$TMP/real.h5" --roofline \
        --hints --alltoall --json
    fi
  done
else
  echo "SKIP (not counted): $TRACES absent, the shared traces' stores"
fi

# mpirun: the slices spread over the processes, the first one writes the page (and the report).
KERNALYSE_WHOLE_STORE=1 kernalyse-merge "$TMP/off.h5" --html "$TMP/one.html" --all --json \
  >"$TMP/one.out" 2>"$TMP/one.err"
for n in 2 3; do
  rm -f "$TMP/m.html"
  "${MPIRUN[@]}" -n "$n" -x KERNALYSE_IMPORT_MEMORY_MB "$BIN/kernalyse-merge" "$TMP/off.h5" \
    --html "$TMP/m.html" --all --json </dev/null >"$TMP/m.out" 2>"$TMP/m.err"
  expect_eq "-n $n: exit 0, the one-process page and report" \
    "$(echo $?; cmp -s "$TMP/one.html" "$TMP/m.html" && echo same;
      cmp -s "$TMP/one.out" "$TMP/m.out" && echo same)" "$(printf '0\nsame\nsame')"
  expect_eq "-n $n: one 'wrote' line, the inference said once" \
    "$(grep -c '^wrote' "$TMP/m.err") $(grep -c 'clocks inferred from' "$TMP/m.err")" "1 1"
done
rm -f "$TMP/m.html"
"${MPIRUN[@]}" -n 3 -x KERNALYSE_IMPORT_MEMORY_MB "$BIN/kernalyse-merge" "$TMP/a2a.h5" \
  --roofline --alltoall --json </dev/null >"$TMP/m.out" 2>/dev/null
KERNALYSE_WHOLE_STORE=1 kernalyse-merge "$TMP/a2a.h5" --roofline --alltoall --json \
  >"$TMP/one.out" 2>/dev/null
expect_eq "-n 3: --roofline --alltoall --json, the one-process report" \
  "$(cmp -s "$TMP/one.out" "$TMP/m.out" && echo same)" "same"
"${MPIRUN[@]}" -n 2 -x KERNALYSE_IMPORT_MEMORY_MB "$BIN/kernalyse-merge" "$TMP/shapes.h5" \
  --roofline --hints --json </dev/null >"$TMP/m.out" 2>/dev/null
KERNALYSE_WHOLE_STORE=1 kernalyse-merge "$TMP/shapes.h5" --roofline --hints --json \
  >"$TMP/one.out" 2>/dev/null
expect_eq "-n 2: shapes --roofline --hints --json, the one-process report" \
  "$(cmp -s "$TMP/one.out" "$TMP/m.out" && echo same)" "same"

# An existing file: refused before any work, exit 2, one line naming it; untouched.
touch -d '2001-01-01' "$TMP/one.html"
kernalyse-merge "$TMP/tg.h5" --html "$TMP/one.html" --all >"$TMP/ex.out" 2>"$TMP/ex.err"
expect_eq "existing file: exit 2" "$?" "2"
expect_eq "existing file: one line naming it, no report" \
  "$(grep -c "^kernalyse-merge: .*one.html" "$TMP/ex.err") $(wc -l <"$TMP/ex.err") $(wc -c <"$TMP/ex.out")" \
  "1 1 0"
expect_eq "existing file: untouched" "$(stat -c %y "$TMP/one.html" | cut -c1-4)" "2001"
expect_eq "existing file: no temporary left" "$(ls -a "$TMP" | grep -c '^\.')" "2"
"${MPIRUN[@]}" -n 3 -x KERNALYSE_IMPORT_MEMORY_MB "$BIN/kernalyse-merge" "$TMP/tg.h5" \
  --html "$TMP/one.html" </dev/null >/dev/null 2>"$TMP/ex3.err"
expect_eq "existing file under mpirun -n 3: the line said once" \
  "$(grep -c "^kernalyse-merge: .*one.html" "$TMP/ex3.err")" "1"
expect_eq "existing file under mpirun -n 3: untouched, no temporary" \
  "$(stat -c %y "$TMP/one.html" | cut -c1-4) $(ls -a "$TMP" | grep -c '^\.')" "2001 2"
finish
