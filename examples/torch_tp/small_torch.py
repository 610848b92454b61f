#!/usr/bin/env python3
"""A small, deterministic PyTorch CUDA workload for validating kernalyse against torch.profiler.

The same work runs in both modes: a few bf16 Linear layers with GeLU, forward only, a fixed
number of iterations, each inside an NVTX range "iter N".

  python3 small_torch.py                        # plain run (profile it with kernalyse-run)
  python3 small_torch.py --profile --trace t.json
      runs the identical workload under torch.profiler (CUDA activities, whole run, no schedule),
      writes the Kineto JSON trace and prints the GPU kernels it holds, per name, as JSON.

bench/gpu/validate.sh compares `kernalyse-run python3 small_torch.py` (the store's kernel names and
counts) with the --profile output. Prints one JSON object on stdout; exit 2 without a CUDA device.
"""
import argparse
import json
import sys
import time


def build(torch, hidden, ffn, layers):
    mods = []
    for _ in range(layers):
        mods += [torch.nn.Linear(hidden, ffn), torch.nn.GELU(), torch.nn.Linear(ffn, hidden)]
    return torch.nn.Sequential(*mods).to(device="cuda", dtype=torch.bfloat16).eval()


def run(torch, model, x, iters):
    with torch.no_grad():
        for i in range(iters):
            torch.cuda.nvtx.range_push(f"iter {i}")
            y = model(x)
            # A reduction and a device-to-host copy per iteration, like reading a result.
            s = y.float().sum().item()
            torch.cuda.nvtx.range_pop()
            yield i, s


def kernels_in_trace(path):
    with open(path) as f:
        trace = json.load(f)
    counts = {}
    for ev in trace.get("traceEvents", []):
        if ev.get("ph") == "X" and ev.get("cat") == "kernel":
            counts[ev["name"]] = counts.get(ev["name"], 0) + 1
    return counts


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3, help="untimed iterations first (still run, still profiled)")
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--ffn", type=int, default=4096)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--profile", action="store_true", help="run under torch.profiler and report its kernels")
    ap.add_argument("--trace", default="small_torch_trace.json", help="Kineto JSON written by --profile")
    a = ap.parse_args()

    import torch

    if not torch.cuda.is_available():
        print("small_torch.py: no usable CUDA device", file=sys.stderr)
        return 2
    torch.manual_seed(0)
    model = build(torch, a.hidden, a.ffn, a.layers)
    # Drawn on the CPU and copied: a randn on the GPU is a kernel before torch.profiler's window
    # that kernalyse-run (the whole process) records and --profile cannot (first GPU run).
    x = torch.randn(a.batch, a.hidden, dtype=torch.bfloat16).to("cuda")
    torch.cuda.synchronize()
    total = a.warmup + a.iters

    out = {"app": "small_torch", "torch": torch.__version__, "device": torch.cuda.get_device_name(),
           "iterations": total, "warmup": a.warmup, "batch": a.batch, "hidden": a.hidden,
           "ffn": a.ffn, "layers": a.layers, "mode": "profile" if a.profile else "plain"}
    t0 = 0
    if a.profile:
        from torch.profiler import ProfilerActivity, profile

        # The whole run, no schedule: the same kernels a profiler outside the process sees.
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for i, s in run(torch, model, x, total):
                if i == a.warmup:
                    t0 = time.monotonic_ns()
                prof.step()
            torch.cuda.synchronize()
            t1 = time.monotonic_ns()
        prof.export_chrome_trace(a.trace)
        counts = kernels_in_trace(a.trace)
        out["trace"] = a.trace
        out["kernels"] = dict(sorted(counts.items()))
        out["kernel_total"] = sum(counts.values())
    else:
        for i, s in run(torch, model, x, total):
            if i == a.warmup:
                t0 = time.monotonic_ns()
        torch.cuda.synchronize()
        t1 = time.monotonic_ns()
    out["timed_ns"] = t1 - t0
    out["checksum"] = s
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
