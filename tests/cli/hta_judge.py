#!/usr/bin/python3
"""Real HTA as the judge (tests/cli/test_hta_real.sh, test_hta_real_export.sh).

usage: hta_judge.py RUN_HTA KERNALYSE_MERGE TRACES WORKDIR [SETDIR...]

The sets: every Kineto file under TRACES alone, and every folder of files that are distinct ranks
of one job (kineto_sets), and each SETDIR given. HTA runs in this one Python process (its import and pandas start once;
HTA's own run_hta.py does the work, called through its main()), one set after another. Per set:

- `kernalyse-merge SET --compat hta --overlap --breakdown --idle --json` against HTA's temporal
  breakdown, overlap and idle-time breakdown, per rank (and stream);
- HTA on `kernalyse-merge SET --export-kineto DIR` against HTA on SET: all four analyses
  (kernel-type breakdown too).

Equal means within 0.01: percentages within 0.01 percentage points, times within 0.01 % of HTA's
value. Where HTA itself fails (its own error or assertion) the row says so and what kernalyse
printed; nothing is compared there. Prints one row per (set, rank); exits 1 on any difference.
"""
import contextlib
import importlib.util
import io
import json
import math
import os
import subprocess
import sys
import time


def load_hta(path):
    spec = importlib.util.spec_from_file_location("run_hta", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)

    def run(d):
        argv, sys.argv = sys.argv, ["run_hta.py", d]
        buf = io.StringIO()
        try:
            with contextlib.redirect_stdout(buf):
                mod.main()
        except Exception as e:  # noqa: BLE001 - HTA failing to load a set is a result
            return {"error": f"{type(e).__name__}: {e}"}
        finally:
            sys.argv = argv
        return json.loads(buf.getvalue())

    return run


# Differences understood from HTA's source and left alone: file name -> why. Printed, not failed.
KNOWN = {
    # HTA links a kernel to its launch through index_correlation; a kernel whose launch is not in
    # the trace gets index 0 (np.minimum(correlation, 0)), and joins the ts of traceEvents[0]
    # (here the ProfilerStep, 380 µs into the trace) as its "launch" time: 509 such kernels on
    # stream 7, whose early gaps HTA then counts as host wait. kernalyse counts a kernel without a
    # launch as never waiting for the host.
    "Qwen_Qwen1.5-0.5B-Chat__1016005.json.gz": "idle",
    # One file with the kernels of 4 ranks (process ids 2, 100000003, 200000004, 300000005; no
    # CPU events): HTA takes a file for one rank and --compat hta does the same, but kernalyse
    # reads 4 ranks and exports one file per rank, which HTA then sees as 4 ranks.
    "merged_nccl_only.json.gz": "ranks",
}


def close(got, want, pct=False):
    if want is None or (isinstance(want, float) and math.isnan(want)):
        return got is None or got == 0
    if got is None:
        return False
    return abs(got - want) <= (0.01 if pct else 1e-4 * abs(want) + 1e-9)


class Judge:
    def __init__(self):
        self.failed = []
        self.known = []
        self.rows = []

    def check(self, what, got, want, pct=False):
        if not close(got, want, pct):
            self.failed.append(f"{what}: kernalyse/export {got}, HTA {want}")
            return False
        return True


def compare_compat(j, name, hta, k):
    """HTA's temporal breakdown, overlap and idle breakdown vs kernalyse --compat hta."""
    tb, ov, idle = (hta.get(x) for x in ("temporal_breakdown", "comm_comp_overlap", "idle_time_breakdown"))
    kb = {r["rank"]: r for r in k.get("breakdown", [])}
    ko = {r["rank"]: r for r in k.get("overlap", [])}
    for rank in hta["ranks"]:
        b = kb.get(rank, {})
        ok = True
        row = [name, rank]
        if isinstance(tb, dict):  # HTA failed here
            row += ["HTA: " + tb["error"][:60], f"kernalyse idle {b.get('idle_us')} compute {b.get('compute_us')} non-compute {b.get('non_compute_us')} µs"]
        else:
            h = next(r for r in tb if r["rank"] == rank)
            for hk, kk, pct in (("idle_time(us)", "idle_us", False), ("compute_time(us)", "compute_us", False),
                                ("non_compute_time(us)", "non_compute_us", False), ("kernel_time(us)", "span_us", False),
                                ("idle_time_pctg", "idle_pct", True), ("compute_time_pctg", "compute_pct", True),
                                ("non_compute_time_pctg", "non_compute_pct", True)):
                got = b.get(kk)
                if pct and got is not None:
                    got = round(got, 2)  # HTA rounds its percentages to 2 decimals
                ok &= j.check(f"{name} rank {rank} {kk}", got, h[hk], pct)
            row += [f"idle {h['idle_time(us)']:.0f}/{b.get('idle_us')}",
                    f"compute {h['compute_time(us)']:.0f}/{b.get('compute_us')}",
                    f"non-compute {h['non_compute_time(us)']:.0f}/{b.get('non_compute_us')}"]
        if isinstance(ov, list):
            h = next((r for r in ov if r["rank"] == rank), {})
            got = ko.get(rank, {}).get("overlap_pct")
            ok &= j.check(f"{name} rank {rank} overlap_pct", None if got is None else round(got, 2),
                          h.get("comp_comm_overlap_pctg"), True)
            row.append(f"overlap {h.get('comp_comm_overlap_pctg')}/{got}")
        if isinstance(idle, list):
            ki = {(r["rank"], r["stream"]): r for r in k.get("idle", [])}
            streams = sorted({r["stream"] for r in idle if r["rank"] == rank})
            worst = 0.0
            for s in streams:
                for cat, kk in (("host_wait", "host_wait_us"), ("kernel_wait", "kernel_wait_us"), ("other", "other_us")):
                    h = [r["idle_time"] for r in idle if r["rank"] == rank and r["stream"] == s and r["idle_category"] == cat]
                    if not h:
                        continue
                    got = ki.get((rank, s), {}).get(kk, 0.0)
                    if KNOWN.get(os.path.basename(name)) == "idle":
                        if not close(got, h[0]):
                            j.known.append(f"{name} rank {rank} stream {s} idle {cat}: kernalyse {got}, HTA {h[0]}")
                        continue
                    ok &= j.check(f"{name} rank {rank} stream {s} idle {cat}", got, h[0])
                    worst = max(worst, abs(got - h[0]) / max(abs(h[0]), 1))
            row.append(f"idle breakdown: {len(streams)} streams, worst rel. diff {100 * worst:.3g} %")
        else:
            row.append("HTA idle: " + str(idle)[:60])
        row.append("equal" if ok else "DIFFERENT")
        j.rows.append(row)


def compare_export(j, name, orig, exp):
    """HTA on the export must give what HTA gives on the originals, analysis by analysis."""
    if KNOWN.get(os.path.basename(name.rstrip("/"))) == "ranks":
        j.known.append(f"{name}: HTA sees ranks {orig.get('ranks')} in the original, {exp.get('ranks')} in the export (see KNOWN)")
        j.rows.append([name, str(orig.get("ranks")), "HTA on the export: known difference"])
        return
    ok = orig.get("ranks") == exp.get("ranks")
    if not ok:
        j.failed.append(f"{name}: HTA's ranks {orig.get('ranks')} on the originals, {exp.get('ranks')} on the export")
    for key in ("temporal_breakdown", "comm_comp_overlap", "idle_time_breakdown", "kernel_type_breakdown"):
        a, b = orig.get(key), exp.get(key)
        if isinstance(a, dict) or isinstance(b, dict):  # HTA failed on one side: fail the same way
            same = isinstance(a, dict) and isinstance(b, dict)
            if not same:
                j.failed.append(f"{name} {key}: HTA on the originals {str(a)[:80]}, on the export {str(b)[:80]}")
            ok &= same
            continue
        if len(a) != len(b):
            j.failed.append(f"{name} {key}: {len(a)} rows on the originals, {len(b)} on the export")
            ok = False
            continue
        # Rows by what they are, not where: HTA lists streams in the order it meets them.
        ident = lambda r: tuple(str(r.get(f)) for f in ("rank", "stream", "idle_category", "kernel_type"))
        a, b = sorted(a, key=ident), sorted(b, key=ident)
        if key == "idle_time_breakdown" and KNOWN.get(os.path.basename(name.rstrip("/"))) == "idle":
            if a != b:
                j.known.append(f"{name}: HTA's idle breakdown on the export differs (see KNOWN)")
            continue
        for ra, rb in zip(a, b):
            for f, v in ra.items():
                w = rb.get(f)
                if isinstance(v, str) or isinstance(w, str):
                    good = v == w
                else:
                    good = close(w, v, pct=not f.endswith("(us)") and f not in ("idle_time", "sum"))
                if not good:
                    j.failed.append(f"{name} {key} {ra}: {f} {v} on the originals, {w} on the export")
                    ok = False
    j.rows.append([name, str(orig.get("ranks")), "HTA on the export " + ("equal" if ok else "DIFFERENT")])


def kineto_sets(traces, work):
    """Every Kineto file under TRACES as a set of its own (HTA takes a folder: a link to the file in
    a folder of its own), and every folder whose Kineto files are distinct ranks of one job (HTA's
    own rank rule: the first "rank": N in the text) as one set too."""
    import gzip
    import re
    files = []
    for root, _, names in sorted(os.walk(traces)):
        for n in sorted(names):
            if not (n.endswith(".json") or n.endswith(".json.gz")):
                continue
            p = os.path.join(root, n)
            text = (gzip.open if n.endswith(".gz") else open)(p, "rt", errors="replace").read()
            # Chrome-trace JSON from the PyTorch profiler; not rocprofiler-sdk's own JSON.
            if '"traceEvents"' in text and '"rocprofiler-sdk-tool"' not in text[:4096]:
                m = re.search(r'"rank":\s+(\d+)', text)
                files.append((p, int(m.group(1)) if m else 0))
    sets = []
    for k, (p, _) in enumerate(files):
        d = os.path.join(work, f"file-{k}")
        os.makedirs(d)
        os.symlink(os.path.abspath(p), os.path.join(d, os.path.basename(p)))
        sets.append((os.path.relpath(p, traces), d))
    by_dir = {}
    for p, r in files:
        by_dir.setdefault(os.path.dirname(p), []).append(r)
    for d, ranks in sorted(by_dir.items()):
        if len(ranks) >= 2 and len(set(ranks)) == len(ranks):
            sets.append((os.path.relpath(d, traces) + "/", d))
    return sets


def main():
    run_hta, merge, traces, work = sys.argv[1:5]
    hta = load_hta(run_hta)
    j = Judge()
    t0 = time.time()
    sets = kineto_sets(traces, work) + [(os.path.basename(d.rstrip("/")) + "/", d) for d in sys.argv[5:]]
    for n, (name, d) in enumerate(sets):
        h = hta(d)
        if "error" in h and "ranks" not in h:
            j.rows.append([name, "-", "HTA cannot load it: " + h["error"][:80]])
            continue
        p = subprocess.run([merge, d, "--compat", "hta", "--overlap", "--breakdown", "--idle", "--json", "-q"],
                           capture_output=True, text=True)
        if p.returncode != 0:
            j.failed.append(f"{name}: kernalyse-merge exit {p.returncode}: {p.stderr.strip()[:200]}")
        else:
            compare_compat(j, name, h, json.loads(p.stdout))
        out = os.path.join(work, f"export-{n}")
        p = subprocess.run([merge, d, "--export-kineto", out, "-q"], capture_output=True, text=True)
        if p.returncode != 0:
            j.failed.append(f"{name}: kernalyse-merge --export-kineto exit {p.returncode}: {p.stderr.strip()[:200]}")
        else:
            compare_export(j, name, h, hta(out))
    for r in j.rows:
        print("# " + " | ".join(str(x) for x in r))
    for k in j.known:
        print("# known difference (hta_judge.py KNOWN): " + k)
    for f in j.failed:
        print("FAIL - " + f)
    print(f"# {len(sets)} sets, {len(j.failed)} differences, {time.time() - t0:.0f} s")
    sys.exit(1 if j.failed else 0)


if __name__ == "__main__":
    main()
