#!/usr/bin/env bash
# Output equivalence judge: runs two builds of kernalyse-merge on the same inputs and reports, one
# line per case, whether their outputs are identical (exit code, stdout, and every file written:
# HTML, CSV, Perfetto, Kineto exports, stores). stderr is compared too but reported apart (it
# holds warnings whose wording may change on purpose).
#
# Usage: bench/compare_outputs.sh [--big STORE] [--jobs N] [--only REGEX] BASE_BIN NEW_BIN [OUTDIR]
#   BASE_BIN, NEW_BIN: a build's bin/ directory (or its kernalyse-merge). BASE_BIN's
#     kernalyse-tracegen makes the synthetic inputs, so both builds read the same bytes.
#   OUTDIR (default /tmp/kernalyse-compare): inputs/, base/ and new/ (each case's outputs, kept),
#     diffs/ (an excerpt per differing case), results.txt (the case lines).
#   --big STORE: also the analyses on STORE (the 8 x 1 M-kernel benchmark store, bench/run.sh),
#     without the exports and -o (gigabytes each).
#   --jobs N: cases run N at a time (default 2).
#   --only REGEX: only the cases whose id matches (ids are INPUT__CASE).
# Inputs: every trace file under the shared traces ($KERNALYSE_SHARED_TRACES, default
# ../shared/traces next to the repository), every folder of it holding two or more trace files
# that import as one run (a multi-rank set), a 4-rank tracegen set with collectives, two hosts with
# clock skew and drift, a slow rank, a late launcher and user ranges (tracegen --pair's base; its
# test for --diff), a 2-rank tracegen Nsight Systems set with a 3 ms skew, the performance model's
# planted shape traces, and the shared traces' --diff pairs.
# Each trace input is analysed as imported (--all, --all --json, HTA's view, HTML, CSV, exports,
# -o; multi-rank sets every analysis) and every analysis runs on the store the base build made of
# it (OUTDIR/inputs/stores): that is where analyses read only their columns.
# Normalised before comparing, and only these (each is the wall clock or a path of this run):
#   - the HTML report's creation time: "created_utc":"<UTC>" in its data and the "produced by"
#     line, which show the time the traces were imported (a store's own attribute otherwise);
#   - the stores' root attributes created_utc and command_line (the binary's path).
# Exit status: 0 when every case is identical on stdout, exit code and files; 1 otherwise.
set -uo pipefail

big=""
jobs=2
only=""
while [ $# -gt 0 ]; do
  case $1 in
    --big) big=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    -h | --help) sed -n '2,30p' "$0"; exit 0 ;;
    *) break ;;
  esac
done
[ $# -ge 2 ] || { sed -n '7,7p' "$0"; exit 2; }
bin_of() { if [ -d "$1" ]; then (cd "$1" && pwd); else (cd "$(dirname "$1")" && pwd); fi; }
base_bin=$(bin_of "$1")
new_bin=$(bin_of "$2")
out=$(mkdir -p "${3:-/tmp/kernalyse-compare}" && cd "${3:-/tmp/kernalyse-compare}" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
traces=${KERNALYSE_SHARED_TRACES:-$here/../../shared/traces}
[ -d "$traces" ] && traces=$(cd "$traces" && pwd)
for b in "$base_bin" "$new_bin"; do
  [ -x "$b/kernalyse-merge" ] || { echo "compare_outputs: no kernalyse-merge in $b" >&2; exit 2; }
done
[ -x "$base_bin/kernalyse-tracegen" ] || {
  echo "compare_outputs: no kernalyse-tracegen in $base_bin" >&2
  exit 2
}
[ -d "$traces" ] || echo "compare_outputs: $traces absent: shared traces skipped" >&2
[ -z "$big" ] || [ -f "$big" ] || { echo "compare_outputs: --big $big: no such file" >&2; exit 2; }
rm -rf "$out/base" "$out/new" "$out/diffs"
mkdir -p "$out/inputs" "$out/base" "$out/new" "$out/diffs"
t_start=$(date +%s)

# ---- inputs: synthetic ones, made by the base build; each trace input also imported into a store
# by the base build. Kept in OUTDIR/inputs between runs while the base binaries are the same. ----
gen=$base_bin/kernalyse-tracegen
in=$out/inputs
tg_args=(--ranks 4 --kernels 6000 --steps 4 --seed 11 --ranks-per-host 2 --host-skew-us 1:2500
  --host-drift-ppm 1:15 --slow-rank 2 --slow-factor 1.3 --launch-delay-rank 3
  --launch-delay-us 150 --jitter-us 3)
key="${tg_args[*]} $(cat "$base_bin/kernalyse-merge" "$gen" | md5sum | cut -c1-32) $traces"
if [ "$(cat "$in/params" 2>/dev/null)" != "$key" ]; then
  rm -rf "${in:?}"/*
  mkdir -p "$in/stores"
  # --pair: base/ and test/ (for --diff); base/ is the 4-rank set, user ranges included.
  "$gen" "${tg_args[@]}" --pair --out "$in/pair" >/dev/null 2>&1
  "$gen" --ranks 2 --kernels 3000 --steps 3 --seed 5 --clock-skew-us 1:3000 --format nsys \
    --out "$in/tg_nsys" >/dev/null 2>&1
  "$gen" --shapes "$in/shapes" >/dev/null 2>&1
  echo "$key" >"$in/params"
fi

# ---- the cases: one line each, "ID<TAB>ARGS" with the arguments separated by \x1f ----
cases=$out/cases.txt
: >"$cases"
declare -A seen
add() {
  local id=$1
  shift
  [ -n "$only" ] && ! [[ $id =~ $only ]] && return
  [ -n "${seen[$id]:-}" ] && return # the same case from two lists (a multi-rank set's --all)
  seen[$id]=1
  local IFS=$'\x1f'
  printf '%s\t%s\n' "$id" "$*" >>"$cases"
}
analyses=(summary gaps overlap breakdown idle ranges stragglers energy critical-path roofline hints all)
# analysis_cases LABEL INPUT: every analysis alone and --all, text and JSON, the combinations the
# brief names, the HTML report and the CSV tables.
analysis_cases() {
  local label=$1 a
  shift
  for a in "${analyses[@]}"; do
    add "${label}__$a" "$@" --"$a" -q
    add "${label}__$a.json" "$@" --"$a" --json -q
  done
  add "${label}__hta_compat" "$@" --compat hta --overlap --breakdown --idle -q
  add "${label}__hta_compat.json" "$@" --compat hta --overlap --breakdown --idle --json -q
  add "${label}__what_if" "$@" --critical-path --what-if rank=0:median -q
  add "${label}__what_if.json" "$@" --critical-path --what-if rank=0:median --json -q
  add "${label}__roofline_hints" "$@" --roofline --hints -q
  add "${label}__roofline_hints.json" "$@" --roofline --hints --json -q
  add "${label}__html" "$@" --html report.html -q
}
# import_cases LABEL INPUT...: import and analyse in one process (every analysis reads the imported
# store in memory), and the files written from traces: exports and -o.
import_cases() {
  local label=$1
  shift
  add "${label}__all" "$@" --all -q
  add "${label}__all.json" "$@" --all --json -q
  add "${label}__hta_compat.json" "$@" --compat hta --overlap --breakdown --idle --json -q
  add "${label}__html" "$@" --html report.html -q
  add "${label}__all_csv" "$@" --all --top 20 --csv csv -q
  add "${label}__export_kineto" "$@" --export-kineto kineto -q
  add "${label}__perfetto" "$@" --perfetto perfetto.json -q
  add "${label}__store" "$@" -o store.h5 -q
}
# add_input LABEL FULL INPUT: the import cases on INPUT (every analysis too when FULL is full),
# and every analysis on the store the base build made of it (where analyses read their columns).
# An input the base build cannot import (not a trace, or a folder that is not one run) gets one
# case: the same error from both builds.
add_input() {
  local label=$1 full=$2 input=$3 st=$in/stores/$1.h5
  if [ ! -f "$st" ] && { [ -f "$st.failed" ] || ! "$base_bin/kernalyse-merge" "$input" -o "$st" -q 2>/dev/null; }; then
    touch "$st.failed" # not tried again while the inputs are kept
    add "${label}__all" "$input" --all -q
    return
  fi
  if [ "$full" = full ]; then analysis_cases "$label" "$input"; fi
  import_cases "$label" "$input"
  analysis_cases "${label}.h5" "$st"
  add "${label}.h5__export_kineto" "$st" --export-kineto kineto -q # a store's: a rank at a time
  add "${label}.h5__perfetto" "$st" --perfetto perfetto.json -q      # the same
}
is_trace() { [[ $1 =~ \.(json|json\.gz|sqlite)$ ]]; }
label_of() { local l=${1#"$traces"/}; l=${l//\//_}; echo "${l%%.*}"; }
if [ -d "$traces" ]; then
  # Single files: import cases and the store's analyses. Multi-rank sets: every case.
  while IFS= read -r f; do
    is_trace "$f" && add_input "$(label_of "$f")" some "$f"
  done < <(find "$traces" -type f | sort)
  while IFS= read -r d; do
    n=$(find "$d" -maxdepth 1 -type f | grep -cE '\.(json|json\.gz|sqlite)$')
    [ "$n" -ge 2 ] && add_input "set_$(label_of "$d")" full "$d"
  done < <(find "$traces" -mindepth 1 -type d | sort)
  for p in kineto/hta_trace_compare/base:kineto/hta_trace_compare/test hta/trace_diff/control:hta/trace_diff/test; do
    b=$traces/${p%%:*} t=$traces/${p##*:}
    add "diff_$(label_of "$b")__diff" --diff "$b" "$t" -q
    add "diff_$(label_of "$b")__diff.json" --diff "$b" "$t" --json -q
  done
fi
add_input tg full "$in/pair/base"
add "tg__align_inferred_store" "$in/pair/base" --align inferred -o store.h5 -q
add "tg__align_off.json" "$in/pair/base" --align off --all --json -q
add "tg__rank1_step2" "$in/pair/base" --rank 1 --step 2 --all -q
add "tg__window_exports" "$in/pair/base" --from 1ms --to 20ms --perfetto perfetto.json --export-kineto kineto -q
add "tg.h5__rank1_step2.json" "$in/stores/tg.h5" --rank 1 --step 2 --all --json -q
add "tg.h5__window_exports" "$in/stores/tg.h5" --from 1ms --to 20ms --perfetto perfetto.json.gz --export-kineto kineto -q
add "tg.h5__step2_perfetto" "$in/stores/tg.h5" --step 2 --perfetto perfetto.json -q
add "tg.h5__rank1_from_perfetto" "$in/stores/tg.h5" --rank 1 --from 5ms --perfetto perfetto.json -q
add_input tg_nsys full "$in/tg_nsys"
add_input shapes_hints some "$in/shapes/hints.json"
add_input shapes_clean some "$in/shapes/clean.json"
add "tg_pair__diff" --diff "$in/pair/base" "$in/pair/test" -q
add "tg_pair__diff.json" --diff "$in/pair/base" "$in/pair/test" --json -q
[ -n "$big" ] && analysis_cases big "$big"

[ -s "$cases" ] || { echo "compare_outputs: no case to run${only:+ (--only $only)}" >&2; exit 2; }

# ---- run: each case in its own directory per side, so written files have the same relative names ----
# run_case SIDE BIN LINE
run_case() {
  local side=$1 bin=$2 line=$3
  local id=${line%%$'\t'*} rest=${line#*$'\t'}
  local -a args
  IFS=$'\x1f' read -r -a args <<<"$rest"
  local d=$OUT/$side/$id
  mkdir -p "$d/files"
  (cd "$d/files" && exec /usr/bin/time -f %e -o "$d/wall" "$bin/kernalyse-merge" "${args[@]}" \
    >"$d/stdout" 2>"$d/stderr" </dev/null)
  echo $? >"$d/rc"
}
export -f run_case
export OUT=$out
# Alternate sides case by case, so both builds see the same load.
while IFS= read -r line; do
  printf 'base\0%s\0%s\0new\0%s\0%s\0' "$base_bin" "$line" "$new_bin" "$line"
done <"$cases" | xargs -r -0 -P "$jobs" -n 3 bash -c 'run_case "$@"' _
t_run=$(date +%s)

# ---- compare ----
# norm FILE: the file with only the volatile content above replaced.
norm() {
  case $1 in
    *.html) sed -E -e 's/("created_utc": ?")[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z"/\1<UTC>"/g' \
      -e 's#(<dt>produced by</dt><dd>[^<]*) [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z</dd>#\1 <UTC></dd>#g' "$1" ;;
    *) cat "$1" ;;
  esac
}
# same_file A B: 0 when equal after normalisation (stores: by content, h5_compare.py).
same_file() {
  case $1 in
    *.h5) /usr/bin/python3 "$HERE/h5_compare.py" "$1" "$2" >/dev/null 2>&1 ;;
    *) cmp -s "$1" "$2" || cmp -s <(norm "$1") <(norm "$2") ;;
  esac
}
# excerpt A B: a short description of how two files differ.
excerpt() {
  case $1 in
    *.h5) /usr/bin/python3 "$HERE/h5_compare.py" "$1" "$2" 2>&1 | head -40 ;;
    *)
      if grep -qI . "$1" 2>/dev/null || [ ! -s "$1" ]; then
        diff <(norm "$1" | cut -c1-400) <(norm "$2" | cut -c1-400) | head -40
      else cmp "$1" "$2" | head -5; fi ;;
  esac
}
# compare_case ID: writes OUT/base/ID/verdict, one line: "same RC STDERR" or "diff RC STDERR WHAT...",
# and OUT/diffs/ID.txt (and .stderr.txt) with excerpts.
compare_case() {
  local id=$1 b=$OUT/base/$1 n=$OUT/new/$1 x=$OUT/diffs/$1.txt
  local -a what=()
  local rb rn fb fn f err=same
  read -r rb <"$b/rc"
  read -r rn <"$n/rc"
  : >"$x"
  [ "$rb" = "$rn" ] || { what+=(exit); echo "exit: base $rb, new $rn" >>"$x"; }
  cmp -s "$b/stdout" "$n/stdout" || {
    what+=(stdout)
    { echo "--- stdout (< base, > new)"; excerpt "$b/stdout" "$n/stdout"; } >>"$x"
  }
  # Files written: the same names, and each the same.
  fb=$(cd "$b/files" && find . -type f | sort) fn=$(cd "$n/files" && find . -type f | sort)
  if [ "$fb" != "$fn" ]; then
    what+=(files)
    { echo "--- files written differ"; diff <(echo "$fb") <(echo "$fn"); } >>"$x"
  fi
  while IFS= read -r f; do
    [ -n "$f" ] && [ -f "$n/files/$f" ] || continue
    same_file "$b/files/$f" "$n/files/$f" || {
      what+=("${f#./}")
      { echo "--- ${f#./} (< base, > new)"; excerpt "$b/files/$f" "$n/files/$f"; } >>"$x"
    }
  done <<<"$fb"
  if ! cmp -s "$b/stderr" "$n/stderr"; then
    err=differs
    diff "$b/stderr" "$n/stderr" | head -20 >"$OUT/diffs/$id.stderr.txt"
  fi
  if [ ${#what[@]} -eq 0 ]; then
    rm -f "$x"
    echo "same $rb $err" >"$b/verdict"
  else echo "diff $rb $err ${what[*]}" >"$b/verdict"; fi
}
export -f compare_case norm same_file excerpt
export HERE=$here
cut -f1 "$cases" | tr '\n' '\0' | xargs -r -0 -P "$jobs" -n 1 bash -c 'compare_case "$1"' _
results=$out/results.txt
: >"$results"
while IFS= read -r line; do
  id=${line%%$'\t'*}
  read -r verdict rc err what <"$out/base/$id/verdict"
  note=""
  [ "$err" = same ] || note=" (stderr differs: diffs/$id.stderr.txt)"
  if [ "$verdict" = same ]; then
    printf '%-60s identical (exit %s)%s\n' "$id" "$rc" "$note"
  else
    printf '%-60s DIFFERENT: %s (diffs/%s.txt)%s\n' "$id" "$what" "$id" "$note"
  fi
done <"$cases" | tee "$results"
# The loop ran in a pipe's subshell: count from its lines.
n_same=$(grep -c ' identical (exit' "$results")
n_diff=$(grep -c ' DIFFERENT: ' "$results")
n_err=$(grep -c '(stderr differs' "$results")
t_end=$(date +%s)
# The slowest cases (base build's wall seconds; the last line GNU time wrote), to see where time goes.
echo "slowest cases (base wall s):"
while IFS= read -r line; do
  id=${line%%$'\t'*}
  echo "$(tail -1 "$out/base/$id/wall") $id"
done <"$cases" | sort -rn | head -5 | sed 's/^/  /'

echo "compare_outputs: $((n_same + n_diff)) cases: $n_same identical, $n_diff DIFFERENT, $n_err with stderr differences; runs $((t_run - t_start)) s, comparison $((t_end - t_run)) s; results in $results" | tee -a "$results"
[ "$n_diff" -eq 0 ]
