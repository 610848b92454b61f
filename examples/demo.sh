#!/usr/bin/env bash
# The built-in default job: a synthetic 4-rank tensor-parallel trace set (generated here, labelled
# synthetic), merged into one store, then the kernel summary and the gap analysis.
# Usage: examples/demo.sh [BUILD_DIR]
set -euo pipefail
build=${1:-build}
bin="$build/bin"
out="$build/demo"
rm -rf "$out/traces"
mkdir -p "$out"
"$bin/kernalyse-tracegen" --ranks 4 --kernels 20000 --steps 5 --gz --out "$out/traces"
"$bin/kernalyse-merge" "$out/traces" -o "$out/run.h5" --force
"$bin/kernalyse-merge" "$out/run.h5" --top 15
"$bin/kernalyse-merge" "$out/run.h5" --gaps --top 10 --hist-min 0 --hist-max 100
echo "store: $out/run.h5 (h5py/pandas recipe in docs/store.md)"
