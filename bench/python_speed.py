#!/usr/bin/python3
"""The Python module's speed figures (docs/python.md), in one process:

1. kernalyse.hta.TraceAnalysis against real HTA (../shared/tools/hta) side by side: opening the
   trace_filter pair and computing HTA's four analyses (temporal breakdown, overlap, idle
   breakdown of every rank, kernel-type breakdown), alternately, REPEAT times each; the imports
   are done first, once, for both.
2. A store's activities as a DataFrame: kernalyse.read_table (the file's activities read alone),
   and Run.activities() on an opened run: the time and the extra memory (peak RSS during the call
   over the RSS before it; the kernel's peak counter reset first), against the bytes of the
   store's activity columns.

usage: PYTHONPATH=build/python bench/python_speed.py [--store run.h5] [--repeat 5]
"""
import argparse
import logging
import os
import statistics
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))


def rss_kb(field="VmRSS"):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def cpu_s():
    """CPU time of this process (all its threads) and of its children that ended (HTA parses the
    ranks' files in a multiprocessing pool)."""
    import resource
    me = resource.getrusage(resource.RUSAGE_SELF)
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + ch.ru_utime + ch.ru_stime


def reset_peak():
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # resets VmHWM to the current RSS (Linux >= 4.0)


def hta_side_by_side(pair, hta_dir, repeat):
    sys.path.insert(0, hta_dir)
    logging.disable(logging.CRITICAL)
    warnings.simplefilter("ignore")
    from hta.trace_analysis import TraceAnalysis as Real
    from kernalyse.hta import TraceAnalysis as Ours

    def four(cls):
        t0, c0 = time.perf_counter(), cpu_s()
        a = cls(trace_dir=pair)
        a.get_temporal_breakdown(visualize=False)
        a.get_comm_comp_overlap(visualize=False)
        a.get_idle_time_breakdown(ranks=a.t.get_ranks(), visualize=False)
        a.get_gpu_kernel_breakdown(visualize=False)
        return time.perf_counter() - t0, cpu_s() - c0

    four(Ours), four(Real)  # warm: file cache, lazy imports inside both
    real, ours = [], []
    for _ in range(repeat):
        real.append(four(Real))
        ours.append(four(Ours))
    # Wall time, and the CPU time (all threads, and the child processes HTA's pool runs): on a
    # loaded machine the wall time of a call is mostly waiting for a core.
    for i, what in ((0, "wall"), (1, "CPU")):
        r = statistics.median(x[i] for x in real)
        o = statistics.median(x[i] for x in ours)
        print(f"trace_filter pair, HTA's four analyses, {what} time, median of {repeat}: real HTA "
              f"{r * 1000:.0f} ms, kernalyse.hta {o * 1000:.1f} ms: {r / o:.1f}x "
              f"(real {min(x[i] for x in real) * 1000:.0f}-{max(x[i] for x in real) * 1000:.0f} "
              f"ms, kernalyse {min(x[i] for x in ours) * 1000:.1f}-"
              f"{max(x[i] for x in ours) * 1000:.1f} ms)")


def read_activities(store, repeat):
    """kernalyse.read_table: the activities of a store file as a DataFrame, read alone."""
    import kernalyse
    times, extras = [], []
    for _ in range(repeat):
        before = rss_kb()
        reset_peak()
        t0 = time.perf_counter()
        df = kernalyse.read_table(store, "activities")
        times.append(time.perf_counter() - t0)
        extras.append(rss_kb("VmHWM") - before)
        rows = len(df)
        del df
    col_mb = rows * 46 / 1e6  # the activity columns' bytes per row (store.h)
    extra = statistics.median(extras) / 1e3
    # The first call's memory is the honest one: later calls reuse the pages the previous
    # call's frame freed.
    print(f"{store}: read_table(activities): {rows:,} rows; first call {times[0]:.2f} s, peak "
          f"memory over the process before it {extras[0] / 1e3:.0f} MB "
          f"({extras[0] / 1e3 / col_mb:.2f}x the {col_mb:.0f} MB of columns); median of "
          f"{repeat} {statistics.median(times):.2f} s ({min(times):.2f}-{max(times):.2f}), "
          f"{extra:.0f} MB")


def activities_frame(store, repeat):
    import kernalyse
    t0 = time.perf_counter()
    r = kernalyse.open(store, quiet=True)
    opened = time.perf_counter() - t0
    times, extras = [], []
    for _ in range(repeat):
        before = rss_kb()
        reset_peak()
        t0 = time.perf_counter()
        df = r.activities()
        times.append(time.perf_counter() - t0)
        extras.append(rss_kb("VmHWM") - before)
        rows = len(df)
        del df
    # The store's activity columns: the bytes the frame views (uint8 kind/category and the
    # uint32 names included).
    per_row = sum(a.dtype.itemsize for _, a, _ in r._native.table("activities", "store"))
    col_mb = rows * per_row / 1e6
    extra = statistics.median(extras) / 1e3
    print(f"{store}: {rows:,} activities ({per_row} bytes/row, {col_mb:.0f} MB of columns); "
          f"open {opened:.1f} s; Run.activities(): first call {times[0] * 1000:.0f} ms, "
          f"extra peak memory {extras[0] / 1e3:.1f} MB ({extras[0] / 1e3 / col_mb:.3f}x the "
          f"columns); median of {repeat} {statistics.median(times) * 1000:.0f} ms, "
          f"{extra:.1f} MB")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--store", default="/work/bench-store/run.h5")
    ap.add_argument("--traces", default=os.path.join(HERE, "..", "..", "shared", "traces"))
    ap.add_argument("--hta", default=os.path.join(HERE, "..", "..", "shared", "tools", "hta"))
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--skip-hta", action="store_true")
    a = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M:%S %Z')}, load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    pair = os.path.join(a.traces, "hta", "trace_filter")
    if not a.skip_hta:
        if os.path.isdir(pair) and os.path.isdir(a.hta):
            hta_side_by_side(pair, a.hta, a.repeat)
        else:
            print(f"# {pair} or {a.hta} absent: no HTA comparison")
    if os.path.exists(a.store):
        read_activities(a.store, a.repeat)
        activities_frame(a.store, a.repeat)
    else:
        print(f"# {a.store} absent (bench/make_bench_store.sh makes it)")


if __name__ == "__main__":
    main()
