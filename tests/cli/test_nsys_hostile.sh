#!/usr/bin/env bash
# Nsight Systems import trusts nothing in the file: reports built here with python3's sqlite3
# hold cells of the wrong type (NULL, text, blob), dangling string ids, reversed times, missing optional tables and
# columns, no version row and no session start. Bad rows are counted as malformed (not fatal);
# the good rows import exactly. A file without a kernel table, an empty database, a file that only
# starts like SQLite, and a --step-range without a capture group are each one line, exit 2.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
cd "$TMP" || exit 1
"$PY" - <<'PY'
import sqlite3
db = sqlite3.connect("hostile_rank-3.sqlite")
db.executescript("""
create table StringIds (id integer primary key, value text not null);
insert into StringIds values (1, 'void gemm<float>(float*)'), (2, 'gemm'),
  (3, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)'),
  (4, 'cudaLaunchKernel_v7000'), (5, 'ProfilerStep#4'), (6, 'forward');
create table CUPTI_ACTIVITY_KIND_KERNEL (start, end, deviceId, streamId, correlationId,
  demangledName, shortName);
insert into CUPTI_ACTIVITY_KIND_KERNEL values
  (1000, 2000, 0, 7, 10, 1, 2),          -- good (rows: 8 kernels, 2 calls, 5 NVTX; 7 bad)
  (3000, 4000, 0, 13, 11, 3, 3),         -- good, NCCL
  ('x', 5000, 0, 7, 12, 1, 2),           -- start is text
  (6000, 5000, 0, 7, 13, 1, 2),          -- ends before it starts
  (7000, 8000, null, 7, 14, 1, 2),       -- no device
  (7000, 8000, 0, 7, 15, 999, 998),      -- dangling name ids
  (7000, 8000, 0, 7, 16, x'00ff', 2),    -- blob demangled name: falls back to the short name
  (9000, 9500, 0, 99999999999, 17, 1, 2);-- stream out of range
create table CUPTI_ACTIVITY_KIND_RUNTIME (start, end, globalTid, correlationId, nameId);
insert into CUPTI_ACTIVITY_KIND_RUNTIME values (900, 950, 16777217, 10, 4), (1, 2, 0, 11, 'zz');
create table NVTX_EVENTS (start, end, eventType, text, textId, domainId, globalTid);
insert into NVTX_EVENTS values (500, 5000, 59, null, 5, 0, 16777217), (600, 700, 59, 'fwd', null, 0, 1),
  (800, null, 59, 'unclosed', null, 0, 1), (800, 900, 34, 'mark', null, 0, 1), (1, 2, 'ab', 'x', null, 0, 1);
""")
db.commit()
db = sqlite3.connect("nokernels.sqlite"); db.execute("create table StringIds (id integer primary key, value text)"); db.commit()
sqlite3.connect("empty.sqlite").execute("create table t (a)")
open("fake.sqlite", "wb").write(b"SQLite format 3\0" + b"\xff" * 5000)
PY
kernalyse-merge hostile_rank-3.sqlite -o h.h5 --progress off 2>err.txt
expect_eq "hostile: imports (exit code) $(head -c 300 err.txt)" "$?" "0"
expect_contains "hostile: malformed rows counted" "$(cat err.txt)" "7 of 15 rows malformed and skipped"
got=$("$PY" - <<'PY'
import h5py
f = h5py.File("h.h5", "r"); s = f["strings"].asstr()[:]; a = f["activities"]
print(list(f["ranks"]["rank"][:]), list(a["start_ns"][:]), [s[i] for i in a["name_id"][:]],
      list(a["step"][:]), len(f["launches"]["rank"]), sorted(s[i] for i in f["annotations"]["name_id"][:]),
      [s[i] for i in f["nccl"]["collective_id"][:]], [s[i] for i in f["nccl"]["algo_id"][:]],
      list(f["ranks"]["events_malformed"][:]))
PY
)
expect_eq "hostile: the good rows, exactly" "$got" "[3] [1000, 7000, 3000] ['void gemm<float>(float*)', 'gemm', 'ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)'] [4, -1, 4] 1 ['ProfilerStep#4', 'fwd'] ['allreduce'] ['RING'] [7]"
kernalyse-merge hostile_rank-3.sqlite --step-range '(?:fw|Profiler)[^0-9]*([0-9]*)' -o s.h5 -q
expect_eq "--step-range: exit code" "$?" "0"
expect_eq "--step-range: 'fwd' has no number (not a step), ProfilerStep#4 is step 4 (fwd inside it)" "$("$PY" -c 'import h5py; f=h5py.File("s.h5","r"); print(sorted(f["annotations"]["step"][:].tolist()), sorted(f["annotations"]["kind"][:].tolist()))')" "[4, 4] [0, 3]"
err=$(kernalyse-merge hostile_rank-3.sqlite --step-range 'fwd' -o s2.h5 2>&1)
expect_eq "--step-range without a capture group: exit code" "$?" "2"
expect_contains "--step-range without a capture group: says so" "$err" "one capture group"
for f in nokernels empty fake; do
  err=$(kernalyse-merge $f.sqlite -o $f.h5 2>&1)
  expect_eq "$f: exit code" "$?" "2"
  expect_eq "$f: one line naming the file" "$(printf '%s\n' "$err" | wc -l) $(case "$err" in *"$f.sqlite:"*) echo named ;; esac)" "1 named"
  expect_eq "$f: no output" "$([ -e $f.h5 ] && echo yes || echo no)" "no"
done
finish
