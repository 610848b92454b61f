#!/usr/bin/env bash
# The benchmark store of bench/run.sh, made once for side-by-side runs: RANKS ranks x KERNELS
# kernels of synthetic Kineto JSON (kernalyse-tracegen, 10 steps), imported into STORE; the JSON is
# removed afterwards (gigabytes). Prints the generation and import times and the store's size.
# Usage: bench/make_bench_store.sh BIN [STORE] [RANKS] [KERNELS]
#   BIN: a build's bin/ directory; STORE default /work/bench-store/run.h5; 8 ranks x 1000000 kernels.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '5,5p' "$0" >&2; exit 2; }
bin=$(cd "$1" && pwd)
store=${2:-/work/bench-store/run.h5}
ranks=${3:-8}
kernels=${4:-1000000}
dir=$(dirname "$store")/traces
mkdir -p "$dir"
t0=$(date +%s.%N)
"$bin/kernalyse-tracegen" --ranks "$ranks" --kernels "$kernels" --steps 10 --out "$dir" >/dev/null
t1=$(date +%s.%N)
json_mb=$(($(cat "$dir"/rank-*.json | wc -c) / 1000000))
/usr/bin/time -f '%e %M' -o "$dir.time" "$bin/kernalyse-merge" "$dir" -o "$store" --force -q
read -r wall rss <"$dir.time"
rm -rf "$dir" "$dir.time"
echo "make_bench_store: $ranks x $kernels kernels: generate $(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.1f", b - a}') s ($json_mb MB JSON), import ${wall} s (peak RSS $((rss / 1024)) MB), $store $(($(stat -c %s "$store") / 1000000)) MB"
