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
"$PY" "$SRC/tests/cli/hta_judge.py" "$HTA" "$BIN/kernalyse-merge" "$TRACES" "$TMP"
expect_eq "--compat hta and HTA on --export-kineto equal real HTA on every Kineto set" "$?" "0"
finish
