#!/usr/bin/env bash
# Runs one libFuzzer target (docs/fuzzing.md): bench/fuzz.sh TARGET SECONDS [libFuzzer flags...]
#   TARGET: kineto | kineto_stream | spool | store | nsys | power_csv | rocprof
#           (tests/fuzz/fuzz_TARGET.cpp)
# bench/fuzz.sh --prepare: only builds every target and the seeds (the fuzz.build ctest).
# Builds what is missing first: the fuzz build (clang-14, -DKERNALYSE_FUZZ=ON) in $FUZZ_BUILD
# (default build-fuzz), and the seed corpus (tests/fuzz/make_corpus.sh) from the tools of the
# normal build in $KERNALYSE_BUILD (default build; its tools are built there if absent).
# The corpus grows in $FUZZ_WORK/corpus/TARGET (default $FUZZ_BUILD/work); a crashing, hanging
# (-timeout, default 10 s) or memory-hungry (-rss_limit_mb, default 2048) input is saved as
# $FUZZ_WORK/artifacts/TARGET/{crash,timeout,oom,leak}-<sha1> and the script exits non-zero.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
usage="usage: bench/fuzz.sh TARGET SECONDS [libFuzzer flags...] | bench/fuzz.sh --prepare"
target=${1:?$usage}
if [ "$target" = --prepare ]; then
  build_targets=()
  for f in "$src"/tests/fuzz/fuzz_*.cpp; do build_targets+=("$(basename "$f" .cpp)"); done
else
  seconds=${2:?$usage}
  shift 2
  [ -f "$src/tests/fuzz/fuzz_$target.cpp" ] || { echo "fuzz.sh: no target $target (tests/fuzz/fuzz_$target.cpp)" >&2; exit 2; }
  build_targets=("fuzz_$target")
fi
command -v clang++-14 >/dev/null || { echo "fuzz.sh: clang++-14 missing (.ci/install-deps installs it)" >&2; exit 2; }
fb=${FUZZ_BUILD:-$src/build-fuzz}
nb=${KERNALYSE_BUILD:-$src/build}
work=${FUZZ_WORK:-$fb/work}
jobs=${FUZZ_BUILD_JOBS:-$(nproc)}
launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)

# The fuzz build: only the target (and the libraries it links) are built.
if [ ! -f "$fb/CMakeCache.txt" ]; then
  CC=clang-14 CXX=clang++-14 cmake -S "$src" -B "$fb" -DKERNALYSE_FUZZ=ON -DKERNALYSE_BUILD_TESTS=OFF \
    -DKERNALYSE_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo "${launcher[@]}" >/dev/null
elif [ "$target" = --prepare ] || ! grep -q "fuzz_$target" "$fb/Makefile" 2>/dev/null; then
  # An existing build dir picks up targets added since. Only here: the fuzz.* ctests run in
  # parallel after fuzz.build and must not reconfigure one directory at the same time.
  cmake -S "$src" -B "$fb" >/dev/null
fi
cmake --build "$fb" -j"$jobs" --target "${build_targets[@]}" >/dev/null

# Seeds from the normal build's tools.
tools=(kernalyse-tracegen kernalyse-merge kernalyse-run vicuna_tp kernalyse_collector)
missing=0
for t in kernalyse-tracegen kernalyse-merge kernalyse-run vicuna_tp; do [ -x "$nb/bin/$t" ] || missing=1; done
if [ ! -f "$work/seeds/stamp" ] && [ "$missing" = 1 ]; then
  [ -f "$nb/CMakeCache.txt" ] || cmake -S "$src" -B "$nb" "${launcher[@]}" >/dev/null
  cmake --build "$nb" -j"$jobs" --target "${tools[@]}" >/dev/null
fi
"$src/tests/fuzz/make_corpus.sh" "$nb/bin" "$work/seeds" 2>/dev/null
[ "$target" = --prepare ] && exit 0

corpus=$work/corpus/$target
art=$work/artifacts/$target
mkdir -p "$corpus" "$art"
# One malloc above -rss_limit_mb is reported as out-of-memory by libFuzzer itself (a corrupt
# length field must be caught before it turns into an allocation). LSan on, with
# tests/fuzz/lsan.supp (the sanitizer job's Open MPI list plus libhdf5's own leak on corrupt
# object headers); UBSan reports are fatal
# (-fno-sanitize-recover) and print their stack. The seed dir comes last: read, never written.
# fast_unwind_on_malloc=0: libhdf5 has no frame pointers, so only the slow unwinder sees the
# H5C_protect frame that suppression matches (and the frames above it in a report).
# allocator_may_return_null=1: a C malloc larger than ASan's 1 TiB maximum returns NULL, as glibc's
# does for a size past the address space, instead of aborting. libhdf5 1.10 asks for whatever a
# corrupt metadata size says (e.g. a local heap of 2^56 bytes) and reports the NULL as an error
# ("missing dataset /strings" in kernalyse-merge). Our own allocations stay covered: a throwing
# operator new that gets NULL is still a fatal ASan report, and any malloc above -rss_limit_mb
# that succeeds is still libFuzzer's out-of-memory finding (-malloc_limit_mb defaults to it).
# intercept_tls_get_addr=0: as bench/sanitize.sh (clang 14's runtime has the same misread dynamic
# TLS block that can kill LeakSanitizer's tracer at exit; docs/fuzzing.md).
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:fast_unwind_on_malloc=0:allocator_may_return_null=1:intercept_tls_get_addr=0}
export LSAN_OPTIONS=${LSAN_OPTIONS:-suppressions=$src/tests/fuzz/lsan.supp:print_suppressions=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
dict=()
[ -f "$src/tests/fuzz/${target%_stream}.dict" ] && dict=(-dict="$src/tests/fuzz/${target%_stream}.dict")
set +e
"$fb/bin/fuzz_$target" "${dict[@]}" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
  -print_final_stats=1 -artifact_prefix="$art/" "$@" "$corpus" "$work/seeds/$target"
rc=$?
set -e
if [ "$rc" -ne 0 ]; then
  echo "fuzz.sh: fuzz_$target failed (exit $rc); inputs in $art:" >&2
  ls -1 "$art" >&2
fi
exit "$rc"
