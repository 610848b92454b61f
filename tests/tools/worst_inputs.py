#!/usr/bin/python3
"""Crafted worst-case inputs for the per-reader bounds of docs/limits.md (issue 30), used by
tests/cli/test_input_bounds.sh. Each is the cheapest input per byte for its reader that we know
of: the most records, or the most distinct strings, that a byte of file can make it keep.

Usage: worst_inputs.py OUT_DIR SCALE   (SCALE 1: inputs of about 4 MB; 0: tiny ones, the baseline)
       worst_inputs.py --compress-store IN.h5 OUT.h5: IN's numeric columns gzip-compressed (h5py),
       what a store repacked by another tool may be: its rows far more than its bytes.
Writes OUT_DIR/ kineto-names_rank-0.json, kineto-events_rank-0.json, kineto-gzip_rank-0.json.gz,
nsys_rank-0.sqlite, power.csv (+ power-trace_rank-0.json, the trace it is attached to),
spool/rank-0.kspool, same_rank-0.json.gz (for a store: kernalyse-merge it -o store.h5).
"""
import gzip
import json
import os
import sqlite3
import struct
import sys
import zlib


def kineto(path, events, opener=open):
    with opener(path, "wt") as f:
        f.write('{"distributedInfo":{"rank":0},"traceEvents":[')
        f.write(",".join(events))
        f.write("]}")


def kernel(i, name):
    # The fields a kernel needs and no more: the smallest event that is kept.
    return ('{"ph":"X","cat":"kernel","name":%s,"pid":0,"tid":7,"ts":%d,"dur":1,'
            '"args":{"device":0,"stream":7}}' % (json.dumps(name), i * 2))


def nsys(path, rows):
    if os.path.exists(path):
        os.remove(path)
    db = sqlite3.connect(path)
    db.executescript("""
create table StringIds (id integer primary key, value text not null);
create table CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, correlationId,
  demangledName, shortName);
""")
    # Every kernel its own one-character-apart name: a string lookup and an interned string per
    # row, and rows as small as SQLite stores them (small integers take one byte or none).
    db.executemany("insert into StringIds values (?, ?)", ((i, "k%d" % i) for i in range(rows)))
    db.executemany("insert into CUPTI_ACTIVITY_KIND_KERNEL values (?, ?, 0, 7, ?, ?, ?)",
                   ((i, i + 1, i, i, i) for i in range(rows)))
    db.commit()
    db.close()


def spool(path, n, empty):
    def block(btype, count, payload):
        return struct.pack("<IHHIII", 0x4C50534B, 3, btype, count, len(payload),
                           zlib.crc32(payload)) + payload

    # Besides n activities, `empty` empty strings: one byte of file each, a std::string (32 bytes)
    # each in memory: the reader's most expensive byte.
    names = b"\0" + b"".join(b"k%d\0" % i for i in range(n)) + b"\0" * empty
    meta = struct.pack("<iiq8qiBBBB", 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 0, 0, 1)
    meta += b"host\0cmd\0"
    acts = b"".join(struct.pack("<qqqiiIB", i * 2, i * 2 + 1, i, 0, 7, i + 1, 1) for i in range(n))
    with open(path, "wb") as f:
        f.write(block(1, n + 1 + empty, names) + block(6, 1, meta) + block(2, n, acts))


def compress_store(src, dst):
    import h5py
    with h5py.File(src, "r") as a, h5py.File(dst, "w") as b:
        for k, v in a.attrs.items():
            b.attrs[k] = v

        def copy(name, obj):
            parent, _, leaf = name.rpartition("/")
            if isinstance(obj, h5py.Group):
                g = b.require_group(name)
                for k, v in obj.attrs.items():
                    g.attrs[k] = v
            elif obj.dtype.kind in "iuf" and obj.shape[0] > 0:
                d = b.create_dataset(name, data=obj[:], chunks=(min(obj.shape[0], 1 << 20),),
                                     maxshape=(None,), compression="gzip", compression_opts=9)
                for k, v in obj.attrs.items():
                    d.attrs[k] = v
            else:  # strings (the reader refuses filters on them) and empty columns as they are
                a.copy(obj, b[parent] if parent else b, leaf)
        a.visititems(copy)


def rocprof(path, n, name_bytes):
    """rocprofv3 JSON: n kernel dispatches, each its own kernel symbol of about name_bytes."""
    syms = ",".join('{"kernel_id":%d,"kernel_name":"k%d_%s"}' % (i + 1, i, "x" * name_bytes)
                    for i in range(n))
    recs = ",".join('{"correlation_id":{"external":0,"internal":%d},"dispatch_info":{"agent_id":'
                    '{"handle":100},"dispatch_id":%d,"kernel_id":%d,"queue_id":{"handle":7}},'
                    '"start_timestamp":%d,"end_timestamp":%d,"kind":11,"operation":2,'
                    '"stream_id":{"handle":7},"thread_id":1}' % (i + 1, i + 1, i + 1, 1000 * i,
                                                                  1000 * i + 1)
                    for i in range(n))
    with open(path, "w") as f:
        f.write('{"rocprofiler-sdk-tool":[{"metadata":{"pid":1,"node":{"hostname":"h"}},'
                '"agents":[{"id":{"handle":100},"type":2,"gpu_index":0,"name":"gfx942",'
                '"product_name":"worst case"}],"strings":{},"kernel_symbols":[' + syms +
                '],"buffer_records":{"kernel_dispatch":[' + recs + ']}}]}')


def main():
    if sys.argv[1] == "--compress-store":
        return compress_store(sys.argv[2], sys.argv[3])
    out, scale = sys.argv[1], float(sys.argv[2])
    os.makedirs(os.path.join(out, "spool"), exist_ok=True)
    # Kineto: few events with huge distinct names (the 300 MB example, scaled down)...
    n_names = max(1, int(40 * scale))
    kineto(os.path.join(out, "kineto-names_rank-0.json"),
           [kernel(i, "n%d_" % i + "x" * 100000) for i in range(n_names)])
    # ... and the most events a byte can make: the smallest kernel events, each its own name.
    n_events = max(1, int(40000 * scale))
    kineto(os.path.join(out, "kineto-events_rank-0.json"),
           [kernel(i, "k%d" % i) for i in range(n_events)])
    # gzip: the same, compressed; the bound is in the bytes it inflates to.
    kineto(os.path.join(out, "kineto-gzip_rank-0.json.gz"),
           [kernel(i, "k%d" % i) for i in range(n_events * 3)], gzip.open)
    # The source of the store case: identical kernels, whose columns compress the most.
    kineto(os.path.join(out, "same_rank-0.json.gz"), [kernel(0, "k")] * max(1, int(300000 * scale)),
           gzip.open)
    nsys(os.path.join(out, "nsys_rank-0.sqlite"), max(1, int(90000 * scale)))
    n_lines = max(1, int(120000 * scale))
    with open(os.path.join(out, "power.csv"), "w") as f:
        f.write("timestamp, index, power.draw [W]\n")
        for i in range(n_lines):
            f.write("2026/11/23 10:%02d:%02d.%03d, 0, %d.5 W\n"
                    % (i // 60000 % 60, i // 1000 % 60, i % 1000, 100 + i % 200))
    # The trace the log is attached to: one kernel over the log's two minutes (epoch µs, UTC).
    kineto(os.path.join(out, "power-trace_rank-0.json"),
           [kernel(0, "k").replace('"ts":0,"dur":1', '"ts":1795428000000000,"dur":120000000')])
    # rocprofv3: the smallest dispatches, each its own symbol; and few symbols of 100 kB.
    rocprof(os.path.join(out, "rocprof-events_rank-0.json"), max(1, int(15000 * scale)), 0)
    rocprof(os.path.join(out, "rocprof-names_rank-0.json"), max(1, int(40 * scale)), 100000)
    spool(os.path.join(out, "spool", "rank-0.kspool"), max(1, int(50000 * scale)),
          int(1000000 * scale))


if __name__ == "__main__":
    main()
