#!/usr/bin/env bash
# Nsight Systems exports with hostile schemas (issue 30; docs/limits.md): the cases of
# tests/tools/nsys_schema_cases.py. refuse-* files end with one line naming the file and the
# object, exit 2, no output file, in under 1 s (a view over an endless recursive CTE ran for
# ever before); read-* files import.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
cd "$TMP" || exit 1
"$PY" "$SRC/tests/tools/nsys_schema_cases.py" cases || exit 1

# ms: wall milliseconds since the epoch.
ms() { echo $(($(date +%s%N) / 1000000)); }

# refuse CASE WANT [MAX_MS]: exit 2, one line naming the file and containing WANT, within MAX_MS
# (default 1,000), no -o output.
refuse() {
  local f="cases/$1_rank-0.sqlite" max=${3:-1000} t0
  t0=$(ms)
  kernalyse-merge "$f" -o "$1.h5" --progress off >out.txt 2>err.txt
  local rc=$? took=$(($(ms) - t0))
  expect_eq "$1: exit code" "$rc" "2"
  expect_eq "$1: one line" "$(wc -l <err.txt)" "1"
  expect_contains "$1: names the file and the problem" "$(cat err.txt)" "$f: $2"
  expect_eq "$1: under $max ms (took $took ms)" "$((took < max))" "1"
  expect_eq "$1: no output file" "$(ls | grep -c "^$1\.h5")" "0"
}
refuse refuse-view-kernels "CUPTI_ACTIVITY_KIND_KERNEL is a view, not a table"
refuse refuse-view-stringids "StringIds is a view, not a table"
refuse refuse-view-nvtx "NVTX_EVENTS is a view, not a table"
refuse refuse-view-lowercase-name "CUPTI_ACTIVITY_KIND_RUNTIME is a view, not a table"
refuse refuse-trigger-memcpy "CUPTI_ACTIVITY_KIND_MEMCPY is a trigger, not a table"
refuse refuse-index-memset "CUPTI_ACTIVITY_KIND_MEMSET is an index, not a table"
refuse refuse-generated-column "column end of CUPTI_ACTIVITY_KIND_KERNEL is a generated column"
refuse refuse-unknown-collation "not a readable Nsight Systems export (no such collation sequence: evil)"
# SQLite's step budget: about 0.5 s of work here, so a looser limit on a loaded machine.
refuse refuse-unindexed-strings "reading it takes more than" 3000
if [ -e cases/refuse-fts5-stringids_rank-0.sqlite ]; then
  refuse refuse-fts5-stringids "StringIds is a virtual table, not a table"
else
  echo "SKIP: no FTS5 in $PY's sqlite3 module"
fi

# read CASE KERNELS MALFORMED: imports; KERNELS kernels stored, MALFORMED rows counted.
read_case() {
  kernalyse-merge "cases/$1_rank-0.sqlite" -o "$1.h5" --progress off 2>err.txt
  expect_eq "$1: imports (exit code) $(head -c 300 err.txt)" "$?" "0"
  expect_eq "$1: kernels, malformed rows" "$("$PY" -c 'import h5py, sys; f = h5py.File(sys.argv[1], "r")
print(len(f["activities"]["kind"]), int(f["ranks"]["events_malformed"][0]))' "$1.h5")" "$2 $3"
}
read_case read-unrelated-view 2 0
read_case read-trigger-on-kernels 2 0
read_case read-without-rowid 2 0
read_case read-text-times 0 3
[ -e cases/read-unrelated-fts5_rank-0.sqlite ] && read_case read-unrelated-fts5 2 0
t0=$(ms)
read_case read-one-name-many-rows 50002 0
took=$(($(ms) - t0))
expect_eq "read-one-name-many-rows: within 5 s (took $took ms)" "$((took < 5000))" "1"
expect_eq "read-one-name-many-rows: the NVTX ranges and NCCL kernels, all kept" "$("$PY" -c 'import h5py; f = h5py.File("read-one-name-many-rows.h5", "r")
print(len(f["annotations"]["kind"]), len(f["nccl"]["activity"]))')" "50001 50001"
read_case read-long-step-name 2 0
expect_eq "read-long-step-name: a plain range (3), not a step; ProfilerStep#4 still is one (0)" "$("$PY" -c 'import h5py; f = h5py.File("read-long-step-name.h5", "r")
print(sorted(f["annotations"]["kind"][:].tolist()))')" "[0, 3]"
t0=$(ms)
read_case read-huge-strings 3 0
expect_eq "read-huge-strings: the 2 MB name, whole" "$("$PY" -c 'import h5py; f = h5py.File("read-huge-strings.h5", "r")
print(max(len(s) for s in f["strings"][:]))')" "2000001"
took=$(($(ms) - t0))
expect_eq "read-huge-strings: within 5 s (took $took ms)" "$((took < 5000))" "1"
finish
