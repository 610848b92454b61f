#!/usr/bin/env bash
# Reproducer (docs/fuzzing.md, "Runs on 2026-11-26, second session"): LeakSanitizer's tracer
# dies at exit in a process whose dynamic TLS block (a dlopen'd module's __thread variable, which
# glibc malloc()s per thread) lands at page offset 16. gcc 12's __tls_get_addr interceptor takes
# such a block for glibc 2.19-2.24's, reads ASan's chunk header before it as {start, size} and
# gives LSan that range to scan. Here the second thread's block lands there (gcc 12.2, glibc
# 2.36): `tests/sanitize/dtls_tracer.sh` exits 1 ("Tracer caught signal 11", no leak report);
# `tests/sanitize/dtls_tracer.sh :intercept_tls_get_addr=0` (bench/sanitize.sh's setting) exits 0
# and reports no leak: the block that the TLS variable alone points to is still found reachable.
# Usage: tests/sanitize/dtls_tracer.sh [:more ASAN options]
set -u
cc=${CC:-gcc}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cat >"$dir/mod.c" <<'C'
#include <stdlib.h>
__thread void *held; /* the only pointer to a heap block: in the module's dynamic TLS */
void hold(void) { held = malloc(100); }
C
cat >"$dir/main.c" <<'C'
#include <dlfcn.h>
#include <pthread.h>
#include <unistd.h>
static void (*hold)(void);
static void *run(void *a) { hold(); for (;;) pause(); return a; } /* alive at exit */
int main(int argc, char **argv) {
  void *h = dlopen(argv[1], RTLD_NOW);
  if (!h || argc < 2) return 2;
  hold = (void (*)(void))dlsym(h, "hold");
  hold();
  pthread_t t;
  pthread_create(&t, 0, run, 0);
  sleep(1);
  return 0;
}
C
"$cc" -shared -fPIC -O1 -o "$dir/libmod.so" "$dir/mod.c" || exit 2
"$cc" -fsanitize=address -g -O1 -o "$dir/main" "$dir/main.c" -ldl -lpthread || exit 2
ASAN_OPTIONS="detect_leaks=1${1:-}" "$dir/main" "$dir/libmod.so"
rc=$?
echo "dtls_tracer.sh: exit $rc (ASAN_OPTIONS=detect_leaks=1${1:-})"
exit "$rc"
