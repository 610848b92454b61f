#!/usr/bin/env python3
"""Evaluates the GPU validation checks of bench/gpu/validate.sh from the files its runs left.

Standard library only (the GPU machine's python3 has no h5py guarantee): the store is read
through `kernalyse-merge --summary --json --verbose` and `--perfetto` output. Each subcommand
prints one JSON object {"check", "pass" (true/false/null = not evaluable), "target", ...}.
`finish DIR OUT` merges DIR/*.json into OUT/results.json and OUT/gpu-validation-snippet.md.
"""
import glob
import json
import os
import statistics
import subprocess
import sys


TARGETS = {
    "overhead": "median decode-loop time under kernalyse-run <= 1.03 x uninstrumented",
    "twogpu": "2 ranks on one GPU under kernalyse-run (NCCL permitting)",
    "counts": "store kernel count == app-reported count, per own kernel name and in total",
    "durations": "per-name summed kernel time within 5 % of summed cudaEvent time",
    "nvtx": "kernels attributed to each NVTX 'layer L' range == kernels the app launched in it",
    "torch": "same kernel names and counts as torch.profiler",
    "collector": "every rank: collector_status 'cupti: ...', no dropped records, GPU memory and NVML power counters present",
    "graph": "--cuda-graph (the layers replayed from one graph per step): store kernel count == app count per own "
             "kernel name, and one step's own kernels (kernalyse-merge --step) == the app's per step",
    "tree": "torchrun process trees (kernalyse-run torchrun ..., torchrun --no-python kernalyse-run ...): one store each, "
            "2 ranks numbered by RANK, CUPTI recording on each, kernels in the store, clocks 'shared host clock', data-loader workers not ranks",
}


def load(path):
    with open(path) as f:
        return json.load(f)


def demangle_all(names):
    """c++filt on the mangled ones (CUPTI may report mangled names, Kineto demangles)."""
    mangled = [n for n in names if n.startswith("_Z")]
    out = {n: n for n in names}
    if mangled:
        try:
            r = subprocess.run(["c++filt"], input="\n".join(mangled), capture_output=True, text=True, timeout=60)
            for m, d in zip(mangled, r.stdout.splitlines()):
                out[m] = d
        except (OSError, subprocess.SubprocessError):
            pass
    return {k: v.strip() for k, v in out.items()}


def store_kernels(summary, rank=None):
    """name -> {count, total_ns} from kernalyse-merge --summary --json --verbose."""
    key = "kernel_summary" if rank is None else f"kernel_summary_rank{rank}"
    rows = summary.get(key)
    if rows is None and rank == 0:
        rows = summary.get("kernel_summary", [])
    rows = rows or []
    names = demangle_all([r["kernel"] for r in rows])
    res = {}
    for r in rows:
        n = names[r["kernel"]]
        e = res.setdefault(n, {"count": 0, "total_ns": 0})
        e["count"] += int(r["count"])
        e["total_ns"] += int(r.get("total_ns", round(r.get("total_us", 0) * 1000)))
    return res


def is_nccl(name):
    return name.startswith(("ncclDevKernel", "ncclKernel", "ncclSymk"))


def own(name):
    return name.startswith("vtp_")


def emit(obj):
    print(json.dumps(obj, indent=1))


# (a) overhead: median decode-loop time with and without kernalyse-run
def overhead(args):
    bare = [load(p)["decode_loop_ns_max"] for p in args[0].split(",") if os.path.exists(p)]
    prof = [load(p)["decode_loop_ns_max"] for p in args[1].split(",") if os.path.exists(p)]
    res = {"check": "a_overhead", "target": "median decode-loop time under kernalyse-run <= 1.03 x uninstrumented",
           "bare_ns": bare, "profiled_ns": prof}
    if len(bare) < 1 or len(prof) < 1:
        res.update({"pass": False, "detail": "missing runs"})
    else:
        mb, mp = statistics.median(bare), statistics.median(prof)
        pct = 100.0 * (mp - mb) / mb
        res.update({"median_bare_ns": int(mb), "median_profiled_ns": int(mp), "overhead_pct": round(pct, 2),
                    "pass": pct <= 3.0, "runs": [len(bare), len(prof)]})
    emit(res)


# (c) kernel counts: the store's per-name counts against the app's own launch counter
def counts(args):
    rep, summ = load(args[0]), load(args[1])
    res = {"check": "c_kernel_counts", "target": "store kernel count == app-reported count, per own kernel name and in total",
           "gemm": rep["gemm"]}
    per_rank = []
    ok = True
    for r in rep["ranks"]:
        st = store_kernels(summ, r["rank"] if rep["world_size"] > 1 else None)
        mism = {}
        for name, n in r["kernels_launched"].items():
            got = st.get(name, {}).get("count", 0)
            if got != n:
                mism[name] = {"app": n, "store": got}
        own_store = sum(v["count"] for k, v in st.items() if own(k))
        nccl_store = sum(v["count"] for k, v in st.items() if is_nccl(k))
        other = {k: v["count"] for k, v in st.items() if not own(k) and not is_nccl(k)}
        colls = sum(r["nccl_collectives"].values())
        row = {"rank": r["rank"], "app_own_kernels": r["kernels_launched_total"], "store_own_kernels": own_store,
               "store_nccl_kernels": nccl_store, "app_nccl_collectives": colls,
               "store_other_kernels": sum(other.values()), "gemm_calls": sum(r["gemm_calls"].values()),
               "mismatches": mism}
        if rep["gemm"] == "custom":
            # Every kernel is ours or NCCL's: the total must add up exactly (NCCL: one kernel per
            # collective with >1 rank; with 1 rank NCCL may launch none, reported, not judged).
            row["store_total"] = sum(v["count"] for v in st.values())
            row["unexpected_kernels"] = other
            if other:
                ok = False
        else:
            row["cublas_kernels_per_gemm_call"] = round(sum(other.values()) / max(1, row["gemm_calls"]), 3)
            row["cublas_kernel_names"] = other
        if rep["world_size"] > 1:
            row["nccl_ok"] = nccl_store == colls
            ok = ok and row["nccl_ok"]
        ok = ok and not mism and own_store == r["kernels_launched_total"]
        per_rank.append(row)
    res.update({"pass": ok, "ranks": per_rank})
    emit(res)


# (d) per-name durations against CUDA-event times
def durations(args):
    """args: the app's report, then one or more --summary files (comma-separated: one per timed
    step), whose kernels are added up."""
    rep, summs = load(args[0]), [load(p) for p in args[1].split(",")]
    res = {"check": "d_durations", "target": "per-name summed kernel time within 5 % of summed cudaEvent time",
           "gemm": rep["gemm"]}
    rows = []
    ok = True
    for r in rep["ranks"]:
        st = {}
        for summ in summs:
            for k, v in store_kernels(summ, r["rank"] if rep["world_size"] > 1 else None).items():
                e = st.setdefault(k, {"count": 0, "total_ns": 0})
                e["count"] += v["count"]
                e["total_ns"] += v["total_ns"]
        for key, ev_ns in r["event_ns"].items():
            if key == "cublas_gemm":
                # A cuBLAS call may be several kernels with cuBLAS's names: compare the sum of all
                # kernels that are neither ours nor NCCL's.
                prof_ns = sum(v["total_ns"] for k, v in st.items() if not own(k) and not is_nccl(k))
                n_store = sum(v["count"] for k, v in st.items() if not own(k) and not is_nccl(k))
            else:
                prof_ns = st.get(key, {}).get("total_ns", 0)
                n_store = st.get(key, {}).get("count", 0)
            dev = 100.0 * (prof_ns - ev_ns) / ev_ns if ev_ns else None
            good = dev is not None and abs(dev) <= 5.0
            ok = ok and good
            rows.append({"rank": r["rank"], "name": key, "event_ns": ev_ns, "event_launches": r["event_launches"].get(key),
                         "store_ns": prof_ns, "store_count": n_store,
                         "diff_pct": None if dev is None else round(dev, 2), "pass": good})
    res.update({"pass": ok if rows else False, "rows": rows})
    emit(res)


# (i) CUDA graphs: kernels replayed by cudaGraphLaunch, counted and attributed to their step
def graph(args):
    """args: the app's report (--cuda-graph --gemm custom), the whole store's summary, and the
    summary of one step (kernalyse-merge --step K)."""
    rep, whole, one = load(args[0]), load(args[1]), load(args[2])
    res = {"check": "i_cuda_graph", "target": TARGETS["graph"], "gemm": rep["gemm"]}
    steps = rep["warmup"] + rep["steps"]
    rows, ok = [], True
    for r in rep["ranks"]:
        rk = r["rank"] if rep["world_size"] > 1 else None
        st, st1 = store_kernels(whole, rk), store_kernels(one, rk)
        mism = {n: {"app": c, "store": st.get(n, {}).get("count", 0)}
                for n, c in r["kernels_launched"].items() if st.get(n, {}).get("count", 0) != c}
        # Every step launches the same kernels; vtp_init_weights runs in the set-up, before step 0.
        per_step = {n: c // steps for n, c in r["kernels_launched"].items() if n != "vtp_init_weights"}
        step_mism = {n: {"app": c, "store": st1.get(n, {}).get("count", 0)}
                     for n, c in per_step.items() if st1.get(n, {}).get("count", 0) != c}
        other = {k: v["count"] for k, v in st.items() if not own(k) and not is_nccl(k)}
        row = {"rank": r["rank"], "app_own_kernels": r["kernels_launched_total"],
               "store_own_kernels": sum(v["count"] for k, v in st.items() if own(k)),
               "app_own_per_step": sum(per_step.values()),
               "store_own_in_step": sum(v["count"] for k, v in st1.items() if own(k)),
               "mismatches": mism, "step_mismatches": step_mism, "unexpected_kernels": other}
        ok = ok and not mism and not step_mism and not (rep["gemm"] == "custom" and other)
        rows.append(row)
    res.update({"pass": ok if rows else False, "ranks": rows,
                "detail": "; ".join(f"rank {r['rank']}: {r['store_own_kernels']}/{r['app_own_kernels']} own kernels, "
                                    f"one step {r['store_own_in_step']}/{r['app_own_per_step']}" for r in rows)})
    emit(res)


# (e) NVTX: kernels whose launch lies in "layer L" (perfetto export) vs what the app launched there
def nvtx(args):
    rep, trace = load(args[0]), load(args[1])
    res = {"check": "e_nvtx_layers", "target": "kernels attributed to each NVTX 'layer L' range == kernels the app launched in it"}
    evs = trace.get("traceEvents", [])
    ok = True
    out = []
    for r in rep["ranks"]:
        rank = r["rank"]
        ranges = [e for e in evs if e.get("ph") == "X" and e.get("pid") == rank and e.get("cat") == "nvtx"]
        names = {}
        for e in ranges:
            fam = "layer" if e["name"].startswith("layer ") else "ProfilerStep#" if e["name"].startswith("ProfilerStep#") else e["name"]
            names[fam] = names.get(fam, 0) + 1
        # Steps may come back as step annotations rather than NVTX: count those too.
        steps = sum(1 for e in evs if e.get("ph") == "X" and e.get("pid") == rank and e["name"].startswith("ProfilerStep#")
                    and e.get("cat") != "nvtx")
        layers = sorted(((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0)), int(e["name"].split()[1]))
                         for e in ranges if e["name"].startswith("layer ")))
        launch_ts = {}
        for e in evs:
            if e.get("ph") == "X" and e.get("pid") == rank and e.get("cat") == "cuda_runtime":
                c = e.get("args", {}).get("correlation")
                if c is not None:
                    launch_ts[c] = float(e["ts"])
        got = [0] * rep["layers"]       # own (non-NCCL) kernels launched inside "layer L"
        got_nccl = [0] * rep["layers"]  # NCCL kernels launched inside "layer L"
        unattributed = 0
        for e in evs:
            if e.get("ph") == "X" and e.get("pid") == rank and e.get("cat") == "kernel":
                c = e.get("args", {}).get("correlation")
                t = launch_ts.get(c)
                if t is None:
                    unattributed += 1
                    continue
                for lo, hi, li in layers:  # a few hundred ranges: linear is fine
                    if lo <= t <= hi and 0 <= li < len(got):
                        (got_nccl if is_nccl(e["name"]) else got)[li] += 1
                        break
        expect = list(r["layer_own_kernels"]) if rep["gemm"] == "custom" else None  # cuBLAS: unknown per call
        good = expect is not None and got == expect and names.get("layer", 0) == r["nvtx_ranges"].get("layer", -1)
        if rep["world_size"] > 1:
            good = good and got_nccl == list(r["layer_collectives"])
        ok = ok and good
        out.append({"rank": rank, "nvtx_range_counts_store": names, "nvtx_range_counts_app": r["nvtx_ranges"],
                    "step_annotations_store": steps, "kernels_per_layer_store": got, "kernels_per_layer_app": expect,
                    "nccl_kernels_per_layer_store": got_nccl, "collectives_per_layer_app": r["layer_collectives"],
                    "kernels_without_launch": unattributed, "pass": good})
    res.update({"pass": ok, "ranks": out})
    emit(res)


# (f) kernalyse-run python3 small_torch.py vs torch.profiler (same workload)
def torch_cmp(args):
    prof, summ = load(args[0]), load(args[1])
    st = {k: v["count"] for k, v in store_kernels(summ).items()}
    tp = prof.get("kernels", {})
    tpn = demangle_all(list(tp))
    tp = {tpn[k]: v for k, v in tp.items()}
    only_store = {k: v for k, v in st.items() if k not in tp}
    only_torch = {k: v for k, v in tp.items() if k not in st}
    diff = {k: {"torch": tp[k], "store": st[k]} for k in tp if k in st and tp[k] != st[k]}
    emit({"check": "f_torch_profiler", "target": "same kernel names and counts as torch.profiler",
          "torch_total": sum(tp.values()), "store_total": sum(st.values()), "names_torch": len(tp),
          "names_store": len(st), "only_in_store": only_store, "only_in_torch": only_torch,
          "count_differences": diff, "pass": not only_store and not only_torch and not diff and bool(tp)})


# (b) two ranks sharing the one GPU: what NCCL does without and with per-rank NCCL_HOSTID
def twogpu(args):
    rc_plain, log_plain, rc_share, rep_p, summ_p = args[0], args[1], args[2], args[3], args[4]
    plain_lines = []
    if os.path.exists(log_plain):
        with open(log_plain, errors="replace") as f:
            plain_lines = [l.strip() for l in f if "Duplicate GPU" in l or "NCCL WARN" in l or "vicuna_tp_cuda:" in l][:5]
    res = {"check": "b_two_ranks_one_gpu", "target": "2 ranks on one GPU under kernalyse-run (NCCL permitting)",
           "plain_rc": int(rc_plain), "plain_messages": plain_lines, "hostid_rc": int(rc_share)}
    if int(rc_share) == 0 and os.path.exists(rep_p) and os.path.exists(summ_p):
        rep, summ = load(rep_p), load(summ_p)
        ranks = []
        for r in rep["ranks"]:
            st = store_kernels(summ, r["rank"])
            ranks.append({"rank": r["rank"], "store_nccl_kernels": sum(v["count"] for k, v in st.items() if is_nccl(k)),
                          "app_nccl_collectives": sum(r["nccl_collectives"].values()),
                          "store_own_kernels": sum(v["count"] for k, v in st.items() if own(k)),
                          "app_own_kernels": r["kernels_launched_total"]})
        res["ranks"] = ranks
        res["pass"] = all(x["store_nccl_kernels"] == x["app_nccl_collectives"] and x["store_own_kernels"] == x["app_own_kernels"]
                          for x in ranks) and len(ranks) == 2
        res["detail"] = (f"plain: rc {rc_plain}; with per-rank NCCL_HOSTID (socket transport): rc 0, "
                         + ", ".join(f"rank {x['rank']} {x['store_nccl_kernels']}/{x['app_nccl_collectives']} NCCL kernels" for x in ranks))
    else:
        res["pass"] = False
        res["detail"] = f"plain: rc {rc_plain}; with per-rank NCCL_HOSTID: rc {rc_share}"
    emit(res)


def collector(args):
    summ = load(args[0])
    rows = []
    for r in summ.get("ranks", []):
        rows.append({"rank": r.get("rank"), "status": r.get("collector_status", ""),
                     "dropped": r.get("records_dropped", 0) + r.get("records_dropped_cupti", 0),
                     "peak_memory_bytes": max(r.get("peak_gpu_memory_bytes", {}).values(), default=0),
                     "peak_power_mw": max(r.get("peak_gpu_power_mw", {}).values(), default=0)})
    ok = bool(rows) and all(x["status"].startswith("cupti:") and x["dropped"] == 0 and x["peak_memory_bytes"] > 0
                            and x["peak_power_mw"] > 0 for x in rows)
    emit({"check": "g_collector_status_memory_power", "target": TARGETS["collector"], "pass": ok, "ranks": rows,
          "detail": "; ".join(f"rank {x['rank']}: {x['status']}, {x['dropped']} dropped, peak {x['peak_memory_bytes']} B, "
                              f"{x['peak_power_mw']} mW" for x in rows)})


def tree(args):
    """args: one --summary --json file per torchrun way round."""
    rows = []
    for path in args:
        summ = load(path)
        ranks = summ.get("ranks", [])
        kernels = sum(k["count"] for k in store_kernels(summ).values())
        rows.append({"store": os.path.basename(path), "ranks": sorted(x.get("rank") for x in ranks),
                     "status": [x.get("collector_status", "") for x in ranks],
                     "clock": [x.get("clock_method", "") for x in ranks],
                     "source": [x.get("source", "") for x in ranks], "kernels": kernels})
    ok = bool(rows) and all(r["ranks"] == [0, 1] and all(s.startswith("cupti:") for s in r["status"])
                            and all(c.startswith("shared host clock") for c in r["clock"])
                            and all("rank from RANK=" in s for s in r["source"])
                            and r["kernels"] > 0 for r in rows)
    emit({"check": "h_torchrun_process_tree", "target": TARGETS["tree"], "pass": ok, "stores": rows,
          "detail": "; ".join(f"{r['store']}: ranks {r['ranks']}, kernels {r['kernels']}, {r['status'][:1]}" for r in rows)})


def finish(args):
    src, out = args[0], args[1]
    checks = {}
    for p in sorted(glob.glob(os.path.join(src, "*.json"))):
        try:
            d = load(p)
        except (OSError, ValueError) as e:
            d = {"check": os.path.basename(p), "pass": False, "detail": f"unreadable: {e}"}
        checks[d.get("check", os.path.basename(p))] = d
    env = {}
    envp = os.path.join(src, "..", "env.json")
    if os.path.exists(envp):
        env = load(envp)
    res = {"env": env, "checks": checks}
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(res, f, indent=1)
    verdict = {True: "PASS", False: "FAIL", None: "not evaluated"}
    lines = [f"### Results of {env.get('date', '?')} on {env.get('gpu', '?')}", "",
             f"Driver {env.get('driver', '?')}, nvcc {env.get('nvcc', '?')}, NCCL {env.get('nccl', '?')}, "
             f"PyTorch {env.get('torch', '?')}, kernalyse {env.get('commit', '?')}.", "",
             "| check | target | result | numbers |", "|---|---|---|---|"]
    for name, d in checks.items():
        nums = ""
        if name == "a_overhead" and "overhead_pct" in d:
            nums = f"{d['overhead_pct']} % ({d['median_profiled_ns'] / 1e6:.3f} vs {d['median_bare_ns'] / 1e6:.3f} ms, medians of {d['runs']})"
        elif name == "c_kernel_counts":
            nums = "; ".join(f"rank {r['rank']}: app {r['app_own_kernels']}, store {r['store_own_kernels']} own, "
                             f"{r['store_nccl_kernels']} NCCL / {r['app_nccl_collectives']} collectives" for r in d.get("ranks", []))
        elif name == "d_durations":
            nums = "; ".join(f"{r['name']}: {r['diff_pct']} %" for r in d.get("rows", []))
        elif name == "e_nvtx_layers":
            nums = "; ".join(f"rank {r['rank']}: {r['kernels_per_layer_store']} vs {r['kernels_per_layer_app']}" for r in d.get("ranks", []))
        elif name == "f_torch_profiler":
            nums = (f"{d.get('names_store')} / {d.get('names_torch')} names, {d.get('store_total')} / {d.get('torch_total')} kernels, "
                    f"{len(d.get('count_differences', {}))} count differences")
        elif name.startswith(("b_", "g_", "h_", "i_")):
            nums = d.get("detail", "")
        lines.append(f"| {name} | {d.get('target', '')} | {verdict.get(d.get('pass'), '?')} | {nums} |")
    lines.append("")
    with open(os.path.join(out, "gpu-validation-snippet.md"), "w") as f:
        f.write("\n".join(lines))
    print("\n".join(lines))
    return 0 if all(d.get("pass") is not False for d in checks.values()) else 1


def main():
    cmds = {"overhead": overhead, "twogpu": twogpu, "counts": counts, "durations": durations, "nvtx": nvtx, "torch": torch_cmp,
            "collector": collector, "tree": tree, "graph": graph, "finish": finish}
    if len(sys.argv) < 2 or sys.argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        return cmds[sys.argv[1]](sys.argv[2:]) or 0
    except (OSError, ValueError, KeyError, TypeError) as e:
        # A missing or malformed input is a failed check, not a crash of the whole validation.
        names = {"overhead": "a_overhead", "twogpu": "b_two_ranks_one_gpu", "counts": "c_kernel_counts",
                 "durations": "d_durations", "nvtx": "e_nvtx_layers", "torch": "f_torch_profiler",
                 "collector": "g_collector_status_memory_power", "tree": "h_torchrun_process_tree",
                 "graph": "i_cuda_graph"}
        emit({"check": names.get(sys.argv[1], sys.argv[1]), "target": TARGETS.get(sys.argv[1], ""), "pass": False, "detail": f"{type(e).__name__}: {e}"})
        return 0


if __name__ == "__main__":
    sys.exit(main())
