#!/usr/bin/env bash
# Progress on stderr: a '\r'-redrawn bar with percentage, rate and ETA under a terminal; plain
# lines and a final "done" line when stderr is a file; nothing at all with --quiet.
source "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
# Bare carriage returns (redraws); the pty turns every '\n' into "\r\n", which do not count.
redraws() { perl -0777 -ne 'print scalar(() = /\r(?!\n)/g)' "$1"; }
if ! command -v script >/dev/null 2>&1; then echo "SKIP: util-linux script absent"; exit 77; fi

# ~450 MB of JSON over 2 ranks: the import lasts long enough (> 0.5 s) for an ETA to appear.
kernalyse-tracegen --ranks 2 --kernels 200000 --steps 4 --seed 3 --out tg >gen.log 2>&1 ||
  { fail "tracegen: $(tail -3 gen.log)"; finish; exit; }

# (a) pseudo-terminal: the bar is redrawn in place.
TERM=xterm script -qec "kernalyse-merge tg -o tty.h5 --perfetto tty.json >/dev/null" /dev/null \
  </dev/null >tty.out 2>&1
tty=$(cat tty.out)
expect_eq "tty: redraws with \\r" "$([ "$(redraws tty.out)" -ge 3 ] && echo yes)" "yes"
expect_eq "tty: a percentage" "$(grep -qE '\[[=> ]+\] +[0-9]+%' tty.out && echo yes)" "yes"
expect_eq "tty: a rate" "$(grep -qE '[0-9] [kMG]B/s' tty.out && echo yes)" "yes"
expect_contains "tty: an ETA" "$tty" "ETA "
expect_contains "tty: import bar" "$tty" "importing 2 files ["
expect_contains "tty: store write bar" "$tty" "writing tty.h5 ["
expect_contains "tty: perfetto export bar" "$tty" "writing tty.json ["
expect_eq "tty: store written" "$([ -s tty.h5 ] && echo yes)" "yes"

# (b) stderr to a file: plain lines, no '\r', a final done line per task.
kernalyse-merge tg -o lines.h5 >/dev/null 2>lines.err
expect_eq "lines: exit" "$?" "0"
expect_eq "lines: no \\r" "$(tr -cd '\r' <lines.err | wc -c)" "0"
# 10 % lines appear only after 1 s (quick tasks get just their done line): check their form.
expect_eq "lines: every import line well formed" \
  "$(grep '^importing' lines.err | grep -cvE '^importing 2 files: ([0-9]+% \(.*B of .*B, [0-9.]+ [kMG]B/s(, ETA [0-9hms]+)?\)|.*B done in [0-9.]+s \([0-9.]+ [kMG]B/s\))$')" "0"
expect_eq "lines: import done line" \
  "$(grep -cE '^importing 2 files: .* MB done in [0-9.]+s \([0-9.]+ [kMG]B/s\)$' lines.err)" "1"
expect_eq "lines: store write done line" "$(grep -cE '^writing lines.h5: .* done in [0-9.]+s' lines.err)" "1"
expect_contains "lines: the usual summary stays" "$(cat lines.err)" "imported 2 file(s)"
kernalyse-merge lines.h5 --export-kineto kt >/dev/null 2>kt.err
expect_eq "lines: kineto export done line" \
  "$(grep -cE '^writing kt \(2 rank files\): .* events done in [0-9.]+s' kt.err)" "1"

# (c) --quiet: no progress (nor anything else) on stderr, on a terminal or not.
kernalyse-merge tg -o quiet.h5 -q --perfetto quiet.json >/dev/null 2>quiet.err
expect_eq "quiet: stderr empty" "$(wc -c <quiet.err)" "0"
TERM=xterm script -qec "kernalyse-merge tg -o quiet2.h5 -q >/dev/null" /dev/null </dev/null >quiet2.out 2>&1
expect_eq "quiet on a tty: nothing" "$(wc -c <quiet2.out)" "0"
# --progress off: no progress, the info lines stay.
kernalyse-merge tg -o off.h5 --progress off >/dev/null 2>off.err
expect_eq "off: no progress lines" "$(grep -c 'done in\|%' off.err)" "0"
expect_contains "off: info kept" "$(cat off.err)" "wrote off.h5"
# --progress lines forces lines on a terminal; TERM=dumb makes auto choose lines.
TERM=dumb script -qec "kernalyse-merge tg -o dumb.h5 >/dev/null" /dev/null </dev/null >dumb.out 2>&1
expect_eq "TERM=dumb: no \\r" "$(redraws dumb.out)" "0"
expect_contains "TERM=dumb: lines" "$(cat dumb.out)" "importing 2 files: "
# A bad value is a usage error.
kernalyse-merge tg --progress fancy >/dev/null 2>&1
expect_eq "bad --progress: exit 2" "$?" "2"

finish
