#!/usr/bin/python3
"""The real-data sweep: every trace file and every multi-file folder under the shared traces
through kernalyse-merge with no flags (`--all --json`), each input's exit code, its kernel count
and summed kernel time against an independent count read with Python's own JSON / sqlite3
readers (Kineto: `cat` "kernel" events; Nsight Systems: CUPTI_ACTIVITY_KIND_KERNEL rows;
rocprofv3: kernel_dispatch records), and the ranks with their rank_source.

  bench/sweep_shared.py BIN [TRACES]   (BIN: a build's bin/; TRACES default ../shared/traces)

One line per input; exit 1 when a count differs or an input other than the known-bad ones fails.
"""
import gzip
import json
import os
import sqlite3
import subprocess
import sys
import time

# Inputs that must fail with exit 2 and one line (what they lack is said in the traces' README).
KNOWN_BAD = {"nsys/llama3_no_cuda_trace.sqlite": "no kernel table (recorded without CUDA tracing)"}


def open_text(p):
    return gzip.open(p, "rt") if p.endswith(".gz") else open(p)


def independent(path):
    """(kernels, summed kernel ns or None) read without kernalyse."""
    if path.endswith(".sqlite"):
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            n, t = db.execute("SELECT COUNT(*), SUM(end - start) FROM CUPTI_ACTIVITY_KIND_KERNEL").fetchone()
        except sqlite3.OperationalError:
            return None, None
        return n, t or 0
    d = json.load(open_text(path))
    if isinstance(d, dict) and "traceEvents" in d:
        # "kernel", or "Kernel" in the 2021 schema.
        ev = [e for e in d["traceEvents"]
              if isinstance(e, dict) and str(e.get("cat", "")).lower() == "kernel" and e.get("ph") == "X"]
        return len(ev), sum(round(float(e.get("dur", 0)) * 1000) for e in ev)  # float µs -> ns
    # rocprofv3: {"rocprofiler-sdk-tool": [{"buffer_records": {"kernel_dispatch": [...]}}]}
    n = t = 0
    for tool in d.get("rocprofiler-sdk-tool", []):
        for r in tool.get("buffer_records", {}).get("kernel_dispatch", []):
            n += 1
            t += r["end_timestamp"] - r["start_timestamp"]
    return n, t


def inputs(root):
    out = []
    for dirpath, dirs, files in os.walk(root):
        dirs.sort()
        traces = sorted(f for f in files if f.endswith((".json", ".json.gz", ".sqlite")))
        for f in traces:
            out.append([os.path.join(dirpath, f)])
        if len(traces) >= 2 and os.path.basename(dirpath) not in ("single_gpu", "inference", "nsys",
                                                                  "tracelens_h100_hf"):
            out.append([os.path.join(dirpath, f) for f in traces])
    return out


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    merge = os.path.join(argv[1], "kernalyse-merge")
    root = argv[2] if len(argv) > 2 else os.path.join(os.path.dirname(__file__), "..", "..", "shared", "traces")
    root = os.path.abspath(root)
    bad = 0
    for files in inputs(root):
        name = os.path.relpath(files[0], root) if len(files) == 1 else os.path.relpath(os.path.dirname(files[0]), root) + "/ (" + str(len(files)) + " files)"
        arg = files[0] if len(files) == 1 else os.path.dirname(files[0])
        t0 = time.time()
        p = subprocess.run([merge, "-q", arg, "--all", "--json"], capture_output=True, text=True)
        wall = time.time() - t0
        want_n = want_t = 0
        for f in files:
            n, t = independent(f)
            want_n = None if n is None or want_n is None else want_n + n
            want_t = None if t is None or want_t is None else want_t + t
        rel = os.path.relpath(files[0], root)
        if p.returncode != 0:
            err = p.stderr.strip().splitlines()
            ok = len(files) == 1 and rel in KNOWN_BAD and p.returncode == 2 and len(err) == 1
            bad += not ok
            print(f"{'ok  ' if ok else 'FAIL'} {name}: exit {p.returncode} ({err[-1] if err else ''})")
            continue
        d = json.loads(p.stdout)
        tot = d["kernel_summary_totals"]
        got_n, got_t = tot["kernels"], tot["total_ns"]
        ranks = ", ".join(f"{r['rank']}:{r.get('rank_source') or '-'}" for r in d["ranks"])
        same = want_n == got_n and (want_t is None or want_t == got_t)
        bad += not same
        print(f"{'ok  ' if same else 'FAIL'} {name}: exit 0, kernels {got_n} (independent {want_n}), "
              f"kernel time {got_t} ns" + (f" (independent {want_t})" if want_t is not None else "") +
              f", ranks [{ranks}], {wall:.2f} s")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
