#!/usr/bin/env bash
# The project builds and its unit tests pass without CUDA: configure into a scratch build dir
# with the CUDA toolkit hidden (no find_package(CUDAToolkit), no nvcc on PATH, no CUDA
# language), build everything, check that the collector carries no CUPTI code, run the unit
# tests. Slow (a full rebuild): built unoptimised to keep it short, and timed.
source "$(dirname "$0")/lib.sh"

JOBS=${KERNALYSE_TEST_JOBS:-2}
B="$TMP/build-nocuda"
# PATH without the toolkit, so nothing can find nvcc behind our back.
NOCUDA_PATH=$(printf '%s' "$PATH" | tr ':' '\n' | grep -v -i cuda | paste -sd:)
t0=$(date +%s)
env -u CUDACXX -u CUDA_PATH -u CUDA_HOME -u CUDAToolkit_ROOT PATH="$NOCUDA_PATH" \
  cmake -S "$SRC" -B "$B" -DKERNALYSE_WITH_CUDA=OFF -DCMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON \
  -DCMAKE_BUILD_TYPE=NoOpt >"$TMP/configure.log" 2>&1
rc=$?
expect_eq "configure without CUDA" "$rc" "0"
[ "$rc" -eq 0 ] || { tail -30 "$TMP/configure.log"; finish; exit; }
cuda_compiler=$(sed -n 's/^CMAKE_CUDA_COMPILER:[A-Z]*=//p' "$B/CMakeCache.txt")
case "$cuda_compiler" in
  "" | *NOTFOUND) pass "no CUDA compiler configured" ;;
  *) fail "CMAKE_CUDA_COMPILER is '$cuda_compiler'" ;;
esac
expect_eq "configure log does not enable the CUPTI source" \
  "$(grep -c 'CUPTI source enabled' "$TMP/configure.log")" "0"

t1=$(date +%s)
env PATH="$NOCUDA_PATH" cmake --build "$B" -j"$JOBS" >"$TMP/build.log" 2>&1
rc=$?
t2=$(date +%s)
expect_eq "build everything without CUDA" "$rc" "0"
[ "$rc" -eq 0 ] || { grep -E -B2 -A8 'error|Error' "$TMP/build.log" | head -60; finish; exit; }
echo "# configure $((t1 - t0)) s, build $((t2 - t1)) s with -j$JOBS"
expect_eq "no warnings in the build" "$(grep -c 'warning:' "$TMP/build.log")" "0"

lib="$B/lib/libkernalyse_collector.so"
if [ -f "$lib" ]; then
  expect_eq "collector exports no InitializeInjection" \
    "$(nm -D --defined-only "$lib" | grep -c ' InitializeInjection$')" "0"
  expect_eq "collector does not need libcupti" "$(readelf -d "$lib" | grep -c 'libcupti')" "0"
  expect_eq "no CUDA path in its runpath" "$(readelf -d "$lib" | grep -i 'runpath' | grep -c cuda)" "0"
  expect_eq "collector still has the MPI interposers" \
    "$(nm -D --defined-only "$lib" | grep -c ' MPI_Finalize$')" "1"
else
  fail "no $lib"
fi
for t in kernalyse_cupti_tests kernalyse_nodriver_app kernalyse_nodriver_app_nvcc; do
  expect_eq "no $t without CUDA" "$([ -e "$B/bin/$t" ] && echo built || echo absent)" "absent"
done

t3=$(date +%s)
"$B/bin/kernalyse_unit_tests" --gtest_brief=1 >"$TMP/unit.log" 2>&1
rc=$?
t4=$(date +%s)
expect_eq "unit tests of the CUDA-less build ($(grep -o '[0-9]* tests\? from' "$TMP/unit.log" | head -1 | cut -d' ' -f1) tests)" "$rc" "0"
[ "$rc" -eq 0 ] || tail -30 "$TMP/unit.log"
echo "# unit tests $((t4 - t3)) s; total $((t4 - t0)) s"
finish
