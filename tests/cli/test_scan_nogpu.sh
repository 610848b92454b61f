#!/usr/bin/env bash
# kernalyse-scan on a machine without a usable GPU: one line saying so on stderr, exit 2, nothing
# on stdout and no output file. Skipped where it was not built (no CUDA toolkit with cuBLAS) and
# where a CUDA driver is installed (the measuring path is checked on a GPU: docs/analyses.md).
source "$(dirname "$0")/lib.sh"
if [ ! -x "$BIN/kernalyse-scan" ]; then echo "SKIP: kernalyse-scan not built (no CUDA toolkit)"; exit 77; fi
for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib/wsl/lib; do
  if [ -e "$d/libcuda.so.1" ]; then echo "SKIP: a CUDA driver is installed ($d/libcuda.so.1)"; exit 77; fi
done
kernalyse-scan -o "$TMP/peaks.json" > "$TMP/out" 2> "$TMP/err"; rc=$?
expect_eq "no GPU: exit 2" "$rc" 2
expect_eq "no GPU: one line on stderr" "$(wc -l < "$TMP/err")" 1
expect_contains "no GPU: says so" "$(cat "$TMP/err")" "no CUDA device"
expect_eq "no GPU: nothing on stdout" "$(wc -c < "$TMP/out")" 0
if [ -e "$TMP/peaks.json" ]; then fail "no GPU: output file written"; else pass "no GPU: no output file"; fi
finish
