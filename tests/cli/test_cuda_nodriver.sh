#!/usr/bin/env bash
# A real CUDA application on a host without a CUDA driver, under kernalyse-run: CUDA never calls
# our InitializeInjection (cuInit fails first), so the collector itself notices at finish that
# the application used CUDA, warns once ("no CUDA device"), records it as the rank's
# collector_status, still writes the store, and the application's exit code (3) survives.
# Two builds of the app: nvcc (cudart static, device code in the executable) and C++ on the
# shared libcudart. On a host with a driver the "no CUDA device" parts do not apply: skipped.
source "$(dirname "$0")/lib.sh"
use_mpi
cd "$TMP"

apps=()
for a in kernalyse_nodriver_app_nvcc kernalyse_nodriver_app; do
  [ -x "$BIN/$a" ] && apps+=("$a")
done
if [ "${#apps[@]}" -eq 0 ]; then
  echo "SKIP: no CUDA test application built (CUDA toolkit not found)"
  exit 77
fi
for d in /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib/wsl/lib; do
  if [ -e "$d/libcuda.so.1" ]; then echo "SKIP: a CUDA driver is installed ($d/libcuda.so.1)"; exit 77; fi
done

PY=/usr/bin/python3  # Debian's h5py lives there, not in the pyenv python3 on PATH
status_of() {  # the /ranks collector_status column of a store, one line per rank
  "$PY" - "$1" <<'PYEOF'
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    r = f["ranks"]
    if "collector_status" not in r:
        print("<no collector_status column>")
    else:
        for s in r["collector_status"].asstr()[()]:
            print(s)
PYEOF
}

check_run() {  # LABEL STORE ERRFILE RC
  local label=$1 store=$2 err=$3 rc=$4
  expect_eq "$label: exit code preserved" "$rc" "3"
  local warn
  warn=$(grep -c "no CUDA device" "$err")
  expect_eq "$label: exactly one 'no CUDA device' line on stderr" "$warn" "1"
  expect_contains "$label: the warning names the rank and the consequence" "$(cat "$err")" \
    "kernalyse: rank 0: no CUDA device (libcuda.so.1 not found"
  expect_contains "$label: ...and says the run was unprofiled" "$(cat "$err")" \
    "GPU activity not recorded, the application ran unprofiled"
  if [ -f "$store" ]; then
    pass "$label: store written"
    # Needs the store's collector_status column (store schema 2, written by the store owner's
    # change in main): fails on a branch without it.
    expect_contains "$label: /ranks collector_status" "$(status_of "$store" 2>&1)" "no CUDA device"
  else
    fail "$label: no store $store"
    cat "$err"
  fi
}

for app in "${apps[@]}"; do
  # Under mpirun, one rank.
  timeout 120 mpirun -n 1 "$BIN/kernalyse-run" -o "$app-mpi.h5" "$BIN/$app" >"$app-mpi.out" 2>"$app-mpi.err"
  check_run "$app under mpirun" "$app-mpi.h5" "$app-mpi.err" "$?"
  expect_contains "$app: the application itself ran" "$(cat "$app-mpi.out")" "cudaGetDeviceCount:"
  # Singleton: kernalyse-run without a launcher.
  timeout 120 "$BIN/kernalyse-run" -o "$app-single.h5" "$BIN/$app" >"$app-single.out" 2>"$app-single.err"
  check_run "$app singleton" "$app-single.h5" "$app-single.err" "$?"
done

# A program that never touches CUDA gets no warning (libcupti in the collector does not count).
timeout 120 "$BIN/kernalyse-run" -o plain.h5 /bin/true 2>plain.err
expect_eq "non-CUDA app: exit code" "$?" "0"
expect_eq "non-CUDA app: no 'no CUDA device' warning" "$(grep -c 'no CUDA device' plain.err)" "0"

# kernalyse-run points CUDA and NCCL at the collector, and leaves another tool's injection alone.
env_of() { "$BIN/kernalyse-run" -o "env$1.h5" /usr/bin/env 2>"env$1.err"; }
lib=$(cd "$BIN/../lib" && pwd)/libkernalyse_collector.so
if nm -D --defined-only "$lib" | grep -q ' InitializeInjection$'; then
  expect_contains "CUDA_INJECTION64_PATH set" "$(env_of 1)" "CUDA_INJECTION64_PATH=$lib"
  out=$(CUDA_INJECTION64_PATH=/opt/other/libToolsInjection64.so env_of 2)
  expect_contains "another injection kept" "$out" "CUDA_INJECTION64_PATH=/opt/other/libToolsInjection64.so"
  expect_contains "another injection: warned" "$(cat env2.err)" \
    "CUDA_INJECTION64_PATH is already set (/opt/other/libToolsInjection64.so)"
fi
expect_contains "NCCL_PROFILER_PLUGIN set" "$(env_of 3)" "NCCL_PROFILER_PLUGIN=$lib"

finish
