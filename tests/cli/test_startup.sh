#!/usr/bin/env bash
# Start-up: kernalyse-merge loads libhdf5 (Debian's parallel build: libmpi, libcurl, ~40 shared
# libraries) only when it reads or writes a store (libkernalyse_h5.so, aggregator/store/src/h5_module.h).
# What a process maps is read from the dynamic loader's own log (LD_DEBUG=files: one "file=NAME"
# line per library it loads, whether at start or by dlopen), not from ldd.
. "$(dirname "$0")/lib.sh"

# loaded_libs CMD...: the names of the libraries the process loaded, one per line.
loaded_libs() {
  LD_DEBUG=files LD_DEBUG_OUTPUT="$TMP/ld" "$@" >/dev/null 2>&1
  cat "$TMP"/ld.* | sed -n 's/.*file=\([^ ]*\) .*/\1/p' | sort -u
  rm -f "$TMP"/ld.*
}
# heavy LIST: the libraries a store needs, found in LIST
heavy() { grep -E 'libhdf5|libmpi|libopen-pal|libcurl|libkernalyse_h5' <<<"$1" | tr '\n' ' '; }

kernalyse-tracegen --ranks 2 --kernels 2000 --steps 2 --seed 3 --out "$TMP/tr" 2>/dev/null
expect_eq "tracegen exits 0" "$?" "0"

# Positive control: reading a store does load the module, libhdf5 and libmpi (the log can tell).
kernalyse-merge "$TMP/tr" -o "$TMP/run.h5" 2>/dev/null
expect_eq "import to a store exits 0" "$?" "0"
libs=$(loaded_libs kernalyse-merge "$TMP/run.h5" --gaps)
for l in libkernalyse_h5 libhdf5 libmpi; do
  expect_contains "a store read loads $l" "$libs" "$l"
done

libs=$(loaded_libs kernalyse-merge --version)
expect_contains "--version: the log lists what it loaded" "$libs" "libc.so"
expect_eq "--version loads neither libhdf5 nor MPI" "$(heavy "$libs")" ""
libs=$(loaded_libs kernalyse-merge --help)
expect_eq "--help loads neither libhdf5 nor MPI" "$(heavy "$libs")" ""
# An analysis of traces without -o writes no store: no libhdf5 either.
libs=$(loaded_libs kernalyse-merge "$TMP/tr" --all --json)
expect_eq "traces --all --json (no store) loads neither libhdf5 nor MPI" "$(heavy "$libs")" ""

# The module missing (a copied tool without its ../lib): one line naming the module, exit 2.
mkdir -p "$TMP/alone/bin"
cp "$BIN/kernalyse-merge" "$TMP/alone/bin/"
"$TMP/alone/bin/kernalyse-merge" --version >/dev/null 2>&1
expect_eq "a tool without its module still prints --version" "$?" "0"
"$TMP/alone/bin/kernalyse-merge" "$TMP/run.h5" --gaps >/dev/null 2>"$TMP/err.txt"
expect_eq "a store read without the module exits 2" "$?" "2"
expect_eq "... with one line" "$(wc -l <"$TMP/err.txt")" "1"
expect_contains "... naming the module" "$(cat "$TMP/err.txt")" "libkernalyse_h5.so: cannot load"
"$TMP/alone/bin/kernalyse-merge" "$TMP/tr" -o "$TMP/alone/x.h5" >/dev/null 2>&1
expect_eq "a store write without the module exits 2" "$?" "2"
if [ -e "$TMP/alone/x.h5" ]; then fail "no module: an output file was left"; else pass "no module: no output file"; fi
finish
