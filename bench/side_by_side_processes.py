#!/usr/bin/env python3
"""Whole processes side by side (bench/run.sh's trace_filter pair, issue 28): runs command A and
command B in alternation, ROUNDS times, and prints each one's median wall time in ms and the
ratio A / B.

Each time is taken the same way for both: a monotonic clock read just before the process is
spawned and just after it is reaped (its start, its run, its exit). A shell's `$(date +%s%N)`
around a command also times two `date` processes starting and bash reaping them: 2 to 6 ms on
this 2-core VM, a fifth to a half of a 12 ms run (measured 2026-11-28: 20.1 ms that way against
13.7 ms by `perf stat` and 14.0 ms by this timer, the same binary, in the same minute).

usage: side_by_side_processes.py ROUNDS -- A... -- B...
output: one line "A_MS B_MS RATIO" (medians; RATIO = A_MS / B_MS)
"""
import statistics
import subprocess
import sys
import time


def timed(cmd):
    t0 = time.perf_counter()
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    t1 = time.perf_counter()
    if r.returncode != 0:
        sys.exit(f"side_by_side_processes.py: {cmd[0]} exited {r.returncode}")
    return (t1 - t0) * 1000.0


def main():
    args = sys.argv[1:]
    if len(args) < 5 or args[1] != "--" or "--" not in args[2:]:
        sys.exit("usage: side_by_side_processes.py ROUNDS -- A... -- B...")
    rounds = int(args[0])
    cut = args.index("--", 2)
    a, b = args[2:cut], args[cut + 1:]
    if not a or not b:
        sys.exit("side_by_side_processes.py: two commands are needed")
    ta, tb = [], []
    for _ in range(rounds):
        ta.append(timed(a))
        tb.append(timed(b))
    ma, mb = statistics.median(ta), statistics.median(tb)
    print(f"{ma:.1f} {mb:.2f} {ma / mb:.1f}")


if __name__ == "__main__":
    main()
