#!/usr/bin/env bash
# kernalyse-run's command line (CLI11, launch/kernalyse_run.cpp): its own options end at the
# application's name (or at --); the application's arguments, options included, are passed on
# untouched; bad command lines exit 2 with one line; the application's exit code is ours.
source "$(dirname "$0")/lib.sh"
cd "$TMP"
run() { "$BIN/kernalyse-run" "$@" 2>err.txt; }

out=$("$BIN/kernalyse-run" --help)
expect_eq "--help: exit 0" "$?" "0"
expect_contains "--help: the usage line" "$out" "kernalyse-run [OPTIONS] [--] APP [ARGS...]"
for o in --output --force --flush-records --flush-ms --spool-dir --keep-spool --nvtx --timeout --quiet; do
  expect_contains "--help names $o" "$out" "$o"
done

# The application's own options are its own (echo prints them back), before and after --.
out=$(run -q -o a.h5 /bin/echo -o x --timeout -q)
expect_eq "app options passed on: exit code" "$?" "0"
expect_eq "app options passed on: argv" "$out" "-o x --timeout -q"
out=$(run -q -- /bin/echo -- -weird)
expect_eq "after --: the application" "$out" "-- -weird"
expect_eq "no device touched: no store" "$(ls a.h5 2>/dev/null)" ""

# The application's exit code, and the shell's 127 / 126 when it cannot run.
run -q /bin/sh -c 'exit 7'
expect_eq "exit code is the application's" "$?" "7"
run -q no-such-program-xyz
expect_eq "unknown program: 127" "$?" "127"
expect_contains "unknown program: said" "$(cat err.txt)" "kernalyse-run: no-such-program-xyz: command not found"

# Bad command lines: exit 2, one line naming the problem, nothing run.
run --bogus /bin/true
expect_eq "unknown option: exit 2" "$?" "2"
expect_contains "unknown option: said" "$(cat err.txt)" "kernalyse-run: unknown option --bogus"
run -o
expect_eq "option without its value: exit 2" "$?" "2"
expect_contains "option without its value: names it" "$(cat err.txt)" "kernalyse-run: --output"
run -q
expect_eq "no application: exit 2" "$?" "2"
expect_contains "no application: said" "$(cat err.txt)" "kernalyse-run: no application given"
for t in 0 -1 abc 2s ""; do
  run --timeout "$t" /bin/true
  expect_eq "--timeout '$t': exit 2" "$?" "2"
  expect_contains "--timeout '$t': said" "$(cat err.txt)" "--timeout needs a positive number of seconds"
done
expect_eq "nothing written by the bad command lines" "$(ls ./*.h5 ./*.spool-* 2>/dev/null | wc -l)" "0"

# --timeout ends a run that does not end by itself (SIGTERM: 143).
timeout 30 "$BIN/kernalyse-run" -q --timeout 0.5 /bin/sleep 20 2>err.txt
expect_eq "--timeout 0.5 stops sleep 20 (143)" "$?" "143"
expect_contains "--timeout: said" "$(cat err.txt)" "still running after --timeout 0.5 s"
finish
