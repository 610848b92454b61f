#!/usr/bin/env bash
# The sanitizer job (docs/fuzzing.md): builds the project with ASan+UBSan
# (-fsanitize=address,undefined -fno-sanitize-recover=all) in $SANITIZE_BUILD (default
# build-sanitize) and runs the unit and CLI tests there. ASan and LSan reports are written to
# $SANITIZE_BUILD/sanitizer-reports/ (one file per process: asan.<exe>.<pid>), so a report from a
# process whose stderr a CLI test swallows is still seen. UBSan reports go to stderr (gcc's
# libubsan ignores log_path next to ASan) and end the process with exit 1 (halt_on_error), which
# fails its test. Exit 0 only if every test passed and there is no report file. Extra arguments
# go to ctest (e.g. -R Spool).
# Usage: bench/sanitize.sh [ctest args...]
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
bd=${SANITIZE_BUILD:-$src/build-sanitize}
jobs=${SANITIZE_JOBS:-$(nproc)}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
if [ ! -f "$bd/CMakeCache.txt" ]; then
  cmake -S "$src" -B "$bd" -DKERNALYSE_SANITIZE=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
fi
# The build's output goes to a log, shown when it fails (a compile error must not pass unseen).
if ! cmake --build "$bd" -j"$jobs" >"$bd/build.log" 2>&1; then
  tail -n 40 "$bd/build.log"
  echo "sanitize.sh: the sanitizer build failed (log: $bd/build.log)" >&2
  exit 1
fi

reports=$bd/sanitizer-reports
rm -rf "$reports"
mkdir -p "$reports"
# verify_asan_link_order=0: kernalyse-run preloads the (sanitized) collector into applications,
# which puts it before the ASan runtime in the library list. Leaks of Open MPI & co. are
# suppressed by tests/sanitize/lsan.supp (and nothing else).
# fast_unwind_on_malloc=0: Open MPI dlclose()s its components at MPI_Finalize, so at exit LSan
# cannot name their frames ("<unknown module>") and frame-pointer stacks stop there (Open MPI and
# libc have no frame pointers). The slow unwinder records each allocation's whole stack while the
# components are loaded, so it reaches the libopen-pal / libmpi / libevent frames the
# suppressions name. (Measured: the MPI tests' leak reports are all matched with it, none
# without.)
# intercept_tls_get_addr=0: gcc 12's runtime takes a dynamic TLS block that malloc placed at page
# offset 16 for a glibc 2.19-2.24 block, reads ASan's chunk header before it as {start, size} and
# hands LeakSanitizer that range as a root; its tracer then dies scanning it at exit ("Tracer
# caught signal 11" in ScanRangeForPointers, no leak report; 1 in 128 blocks by address, so one
# mpirun -n 2 kernalyse-merge run of cli.test_sliced_mpi, docs/fuzzing.md). Off, the blocks (heap
# chunks reachable from each thread's dtv) are still scanned; fewer roots can only add reports.
export ASAN_OPTIONS="detect_leaks=1:verify_asan_link_order=0:fast_unwind_on_malloc=0:intercept_tls_get_addr=0:log_path=$reports/asan:log_exe_name=1"
export LSAN_OPTIONS="suppressions=$src/tests/sanitize/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Not here: the fuzz.* tests (their own sanitized build) and cli.test_no_cuda_build (a full
# unsanitized rebuild of the project; nothing of the sanitized build runs in it).
set +e
ctest --test-dir "$bd" --output-on-failure -j"$jobs" -LE fuzz -E '^cli\.test_no_cuda_build$' "$@"
rc=$?
set -e
n=$(find "$reports" -type f | wc -l)
if [ "$n" -gt 0 ]; then
  echo "sanitize.sh: $n sanitizer report(s) in $reports:"
  for f in "$reports"/*; do
    echo "== $f"
    grep -m3 -E 'ERROR: |runtime error:|SUMMARY:' "$f" || head -3 "$f"
  done
  rc=1
fi
exit "$rc"
