#!/usr/bin/env bash
# Real HTA as the judge (../shared/tools/hta, HTA's own code): on every Kineto file and every
# multi-file Kineto job in ../shared/traces, `--compat hta --overlap --breakdown --idle` gives
# HTA's numbers, and HTA on `--export-kineto` output gives what HTA gives on the originals
# (within 0.01: percentage points, or % of the value). Prints the per-set table (HTA/kernalyse).
# HTA takes 1-4 s per file on an idle 2-core machine: all sets run in one Python process.
source "$(dirname "$0")/lib.sh"
need_traces
PY=/usr/bin/python3
HTA="${KERNALYSE_SHARED_TOOLS:-$SRC/../shared/tools}/hta/run_hta.py"
[ -f "$HTA" ] || { echo "SKIP: $HTA absent (real HTA not available)"; exit 77; }
if ! "$PY" -c 'import pandas, numpy, plotly, networkx, psutil, yaml' 2>/dev/null; then
  echo "SKIP: HTA needs Debian's python3-pandas python3-numpy python3-plotly python3-networkx python3-psutil python3-yaml (.ci/install-deps)"
  exit 77
fi
# The shape of the issue's 8-rank V100 set: 8 ranks on one host, no host names, the recorded
# clocks consistent. --align auto keeps them (0 violations, corrections within their ±), so the
# export reproduces the sources and HTA on it sees what it sees on them; judged with the rest.
kernalyse-tracegen --ranks 8 --kernels 400 --steps 4 --seed 3 --out "$TMP/gen8" >/dev/null
kernalyse-merge "$TMP/gen8" --stragglers --json -q >"$TMP/gen8.json"
expect_eq "8 consistent ranks (auto): recorded clocks kept" "$("$PY" -c '
import json, sys
ci = json.load(open(sys.argv[1]))["clock_inference"]
print(ci["violations_before"], ci["moved"], ci["summary"].startswith("recorded clocks kept: 0 violations"))' "$TMP/gen8.json")" "0 False True"
mkdir "$TMP/judge"
"$PY" "$SRC/tests/cli/hta_judge.py" "$HTA" "$BIN/kernalyse-merge" "$TRACES" "$TMP/judge" "$TMP/gen8"
expect_eq "--compat hta and HTA on --export-kineto equal real HTA on every Kineto set" "$?" "0"
finish
