#!/usr/bin/python3
"""Compare two kernalyse stores by content: every group, dataset (dtype, shape, chunks,
compression, values) and attribute, except the root attributes that name this run's wall clock and
command line (created_utc, command_line). Prints one line per difference (at most 40) and exits 1
when there is any, 0 when the stores hold the same data. Used by bench/compare_outputs.sh.
Usage: h5_compare.py BASE.h5 NEW.h5"""
import sys

import h5py
import numpy as np

VOLATILE = {"/": {"created_utc", "command_line"}}
LIMIT = 40


def attrs_of(obj, path):
    skip = VOLATILE.get(path, set())
    return {k: obj.attrs[k] for k in obj.attrs if k not in skip}


def same_value(a, b):
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    return type(a) is type(b) and a == b


def first_difference(a, b):
    """Index and values of the first element where two equal-shaped arrays differ."""
    if a.dtype.names:
        for name in a.dtype.names:
            hit = first_difference(a[name], b[name])
            if hit:
                return f"field {name}: {hit}"
        return None
    neq = a != b
    if a.dtype.kind == "f":
        neq &= ~(np.isnan(a) & np.isnan(b))
    idx = np.flatnonzero(neq)
    if idx.size == 0:
        return None
    i = idx[0]
    return f"{idx.size} of {a.size} differ, first at [{i}]: {a.flat[i]!r} vs {b.flat[i]!r}"


def layout(d):
    return (str(d.dtype), d.shape, d.chunks, d.compression, d.compression_opts, d.shuffle)


def compare(fa, fb, out):
    names = {}
    for f, side in ((fa, 0), (fb, 1)):
        f.visititems(lambda n, o, s=side: names.setdefault("/" + n, [None, None]).__setitem__(s, o))
    names["/"] = [fa, fb]
    for path in sorted(names):
        a, b = names[path]
        if a is None or b is None:
            out.append(f"{path}: only in {'new' if a is None else 'base'}")
            continue
        if isinstance(a, h5py.Dataset) != isinstance(b, h5py.Dataset):
            out.append(f"{path}: a dataset in one store, a group in the other")
            continue
        aa, ab = attrs_of(a, path), attrs_of(b, path)
        for k in sorted(set(aa) | set(ab)):
            if k not in aa or k not in ab:
                out.append(f"{path}@{k}: only in {'new' if k not in aa else 'base'}")
            elif not same_value(aa[k], ab[k]):
                out.append(f"{path}@{k}: {aa[k]!r} vs {ab[k]!r}")
        if isinstance(a, h5py.Dataset):
            if layout(a) != layout(b):
                out.append(f"{path}: layout {layout(a)} vs {layout(b)}")
            if a.dtype != b.dtype or a.shape != b.shape:
                continue
            va, vb = a[()], b[()]
            if isinstance(va, np.ndarray):
                hit = first_difference(va, vb)
            else:
                hit = None if same_value(va, vb) else f"{va!r} vs {vb!r}"
            if hit:
                out.append(f"{path}: {hit}")


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    out = []
    with h5py.File(sys.argv[1], "r") as fa, h5py.File(sys.argv[2], "r") as fb:
        compare(fa, fb, out)
    for line in out[:LIMIT]:
        print(line)
    if len(out) > LIMIT:
        print(f"... {len(out) - LIMIT} more")
    return 1 if out else 0


if __name__ == "__main__":
    sys.exit(main())
