#!/usr/bin/env bash
# The NCCL profiler plugin as NCCL finds it: libkernalyse_collector.so exports the data symbol
# ncclProfiler_v5 (NCCL 2.28 dlsyms it), its table is named "kernalyse", and kernalyse-run points
# NCCL_PROFILER_PLUGIN at the collector unless the user set it. No GPU or NCCL needed.
. "$(dirname "$0")/lib.sh"
LIB="$BIN/../lib/libkernalyse_collector.so"
[ -f "$LIB" ] || { echo "SKIP: $LIB not built"; exit 77; }

if command -v nm >/dev/null; then
  sym=$(nm -D --defined-only "$LIB" | awk '$3 == "ncclProfiler_v5" {print $2}')
  expect_eq "ncclProfiler_v5 is an exported data symbol" "$sym" "D"
  v4=$(nm -D --defined-only "$LIB" | awk '$3 ~ /^ncclProfiler_v[0-46-9]$/' | wc -l)
  expect_eq "no other profiler ABI version exported" "$v4" "0"
fi

if command -v python3 >/dev/null; then
  name=$(python3 -c '
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1], mode=ctypes.RTLD_LOCAL)
table = ctypes.c_void_p.in_dll(lib, "ncclProfiler_v5")  # first member: const char* name
print(ctypes.c_char_p.from_address(ctypes.addressof(table)).value.decode())' "$LIB" 2>&1)
  expect_eq "table name" "$name" "kernalyse"
fi

if [ -x "$BIN/kernalyse-run" ]; then
  use_mpi
  out=$(cd "$TMP" && env -u NCCL_PROFILER_PLUGIN kernalyse-run -q -o "$TMP/a.h5" /usr/bin/env 2>&1)
  want=$(cd "$(dirname "$LIB")" && pwd -P)/libkernalyse_collector.so
  got=$(printf '%s\n' "$out" | sed -n 's/^NCCL_PROFILER_PLUGIN=//p')
  expect_eq "kernalyse-run sets NCCL_PROFILER_PLUGIN" "$(readlink -f "$got")" "$(readlink -f "$want")"
  out=$(cd "$TMP" && NCCL_PROFILER_PLUGIN=none kernalyse-run -q -o "$TMP/b.h5" /usr/bin/env 2>&1)
  expect_contains "a user's NCCL_PROFILER_PLUGIN wins" "$out" "NCCL_PROFILER_PLUGIN=none"
fi
finish
