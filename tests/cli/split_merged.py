#!/usr/bin/env python3
"""The shared four-rank merged Kineto trace split into two files whose ranks interleave
(even.json: ranks 0 and 2, odd.json: ranks 1 and 3): the case where an MPI import sends every
file to process 0. Usage: split_merged.py MERGED.json.gz OUTDIR"""
import gzip
import json
import sys

doc = json.load(gzip.open(sys.argv[1]))
for name, keep in (("even.json", (0, 2)), ("odd.json", (1, 3))):
    ev = [e for e in doc["traceEvents"] if int(e.get("pid", 0)) // 100000000 in keep]
    json.dump({"traceEvents": ev}, open(sys.argv[2] + "/" + name, "w"))
