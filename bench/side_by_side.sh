#!/usr/bin/env bash
# Side-by-side timing of two builds of kernalyse-merge on one store: ROUNDS rounds (default 7),
# each running base then new (the order swapped every other round, so a drift in the machine's
# load does not favour one side) for `--all --top 20` and for `--all --json`; wall time and peak
# RSS of each run from GNU time, then per command the medians and new/base ratios.
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
  if ! /usr/bin/time -f '%e %M' -o "$tmp/t" "$bin" "$store" "$@" -q >/dev/null 2>"$tmp/err"; then
    echo "side_by_side: $side $label failed: $(tail -3 "$tmp/err")" >&2
    exit 1
  fi
  cat "$tmp/t" >>"$tmp/$label.$side"
  read -r w m <"$tmp/t"
  printf '  %-5s %-9s %6.2f s %8d kB\n' "$side" "$label" "$w" "$m"
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
for label in text json; do
  bw=$(awk '{print $1}' "$tmp/$label.base" | median)
  nw=$(awk '{print $1}' "$tmp/$label.new" | median)
  bm=$(awk '{print $2}' "$tmp/$label.base" | median)
  nm=$(awk '{print $2}' "$tmp/$label.new" | median)
  bmax=$(awk '{print $2}' "$tmp/$label.base" | sort -n | tail -1)
  nmax=$(awk '{print $2}' "$tmp/$label.new" | sort -n | tail -1)
  # Each round's new/base pair ran back to back: the median of the per-round ratios.
  pw=$(paste "$tmp/$label.base" "$tmp/$label.new" | awk '{print $3 / $1}' | median)
  pm=$(paste "$tmp/$label.base" "$tmp/$label.new" | awk '{print $4 / $2}' | median)
  printf '%s (--all %s): wall median base %.2f s, new %.2f s, new/base %.3f (median of per-round ratios %.3f); peak RSS median base %d kB, new %d kB, new/base %.3f (per-round %.3f; max base %d, new %d kB)\n' \
    "$label" "$([ $label = text ] && echo '--top 20' || echo '--json')" "$bw" "$nw" \
    "$(awk -v a="$bw" -v b="$nw" 'BEGIN {print b / a}')" "$pw" "$bm" "$nm" \
    "$(awk -v a="$bm" -v b="$nm" 'BEGIN {print b / a}')" "$pm" "$bmax" "$nmax"
done
