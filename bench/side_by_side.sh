#!/usr/bin/env bash
# Side-by-side timing of two builds of kernalyse-merge on one store: ROUNDS rounds (default 7),
# each running base then new (the order swapped every other round, so a drift in the machine's
# load does not favour one side) for `--all --top 20` and for `--all --json`; wall time, CPU time
# (user + sys) and peak RSS of each run from GNU time, then per command the medians and new/base
# ratios. On a loaded machine the wall time mostly measures the wait for a core: compare the CPU
# time there, and the wall time on an idle machine.
# Run it with the same binary twice (BASE_BIN = NEW_BIN) to see the noise floor of the ratio.
# Usage: bench/side_by_side.sh BASE_BIN NEW_BIN STORE [ROUNDS]
#   BASE_BIN, NEW_BIN: a build's bin/ directory (or its kernalyse-merge).
#   STORE: e.g. the benchmark store: bench/make_bench_store.sh makes /work/bench-store/run.h5.
# The store is read once before the first round, so every run reads it from the page cache.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '7,7p' "$0" >&2; exit 2; }
merge_of() { if [ -d "$1" ]; then echo "$1/kernalyse-merge"; else echo "$1"; fi; }
base=$(merge_of "$1")
new=$(merge_of "$2")
store=$3
rounds=${4:-7}
[ -x /usr/bin/time ] || { echo "side_by_side: needs GNU time: apt-get install time" >&2; exit 2; }
for b in "$base" "$new"; do [ -x "$b" ] || { echo "side_by_side: $b: not executable" >&2; exit 2; }; done
[ -f "$store" ] || { echo "side_by_side: $store: no such file" >&2; exit 2; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat "$store" >/dev/null

# one SIDE LABEL ARGS...: one timed run; appends "wall rss_kb" to $tmp/LABEL.SIDE.
one() {
  local side=$1 label=$2 bin
  shift 2
  [ "$side" = base ] && bin=$base || bin=$new
  if ! /usr/bin/time -f '%e %M %U %S' -o "$tmp/t" "$bin" "$store" "$@" -q >/dev/null 2>"$tmp/err"; then
    echo "side_by_side: $side $label failed: $(tail -3 "$tmp/err")" >&2
    exit 1
  fi
  cat "$tmp/t" >>"$tmp/$label.$side"
  read -r w m u y <"$tmp/t"
  printf '  %-5s %-5s %6.2f s wall %6.2f s CPU %8d kB\n' "$side" "$label" "$w" "$(awk -v u="$u" -v y="$y" 'BEGIN {print u + y}')" "$m"
}
echo "side_by_side: base $base, new $new, store $store ($(($(stat -c %s "$store") / 1000000)) MB), $rounds rounds, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$rounds"); do
  echo "round $r"
  if [ $((r % 2)) -eq 1 ]; then order="base new"; else order="new base"; fi
  for label in text json; do
    for side in $order; do
      if [ $label = text ]; then one "$side" text --all --top 20; else one "$side" json --all --json; fi
    done
  done
done
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# med_of LABEL SIDE FIELD: the median of one field (1 wall, 2 peak RSS, 3 CPU) over the rounds.
med_of() { awk -v f="$3" '{print (f == 3) ? $3 + $4 : $f}' "$tmp/$1.$2" | median; }
# paired LABEL FIELD: the median of the per-round new/base ratios (each pair ran back to back).
paired() { paste "$tmp/$1.base" "$tmp/$1.new" | awk -v f="$2" '{print (f == 3) ? ($7 + $8) / ($3 + $4) : $(f + 4) / $f}' | median; }
for label in text json; do
  printf '%s (--all %s), medians of %d rounds:\n' "$label" "$([ $label = text ] && echo '--top 20' || echo '--json')" "$rounds"
  for f in 1 3 2; do
    case $f in 1) what="wall s" ;; 3) what="CPU s" ;; 2) what="peak RSS kB" ;; esac
    b=$(med_of $label base $f) n=$(med_of $label new $f)
    printf '  %-11s base %10s  new %10s  new/base %.3f (median of per-round ratios %.3f)\n' \
      "$what" "$b" "$n" "$(awk -v a="$b" -v b="$n" 'BEGIN {print b / a}')" "$(paired $label $f)"
  done
done
