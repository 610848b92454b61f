#!/usr/bin/env bash
# Seed corpus for the fuzz targets, made by the project's own tools (nothing binary is committed):
#   kineto: kernalyse-tracegen traces (plain, minified, gzip) and the Kineto export of an emulated
#           vicuna_tp run (memory events, NCCL metadata, NVTX ranges)
#   spool:  the spool files an emulated 2-rank vicuna_tp run writes (--keep-spool, small flushes so
#           every block type appears, several blocks per file)
#   store:  that run's store and the store kernalyse-merge imports from a tracegen trace
#   nsys:   kernalyse-tracegen --format nsys (an nsys-schema SQLite file), and the hostile schemas
#           of tests/tools/nsys_schema_cases.py --small (views, triggers, virtual and generated
#           columns, WITHOUT ROWID, wrong column types: byte mutation never builds these)
#   power_csv: nvidia-smi power logs in both CSV formats
#   rocprof: kernalyse-tracegen --format rocprof (rocprofv3 JSON, plain and gzip)
#   kineto_stream: the kineto seeds
# Usage: tests/fuzz/make_corpus.sh BIN_DIR OUT_DIR   (BIN_DIR: a normal, unsanitized build's bin/;
# the collector is preloaded into mpirun's ranks, which a sanitized build cannot do cleanly)
# Writes OUT_DIR/{kineto,kineto_stream,spool,store,nsys,power_csv,rocprof}/ and OUT_DIR/stamp; skips the work if the stamp
# is there with every target's seeds (a stamp from before a target was added would leave it with
# no seeds: libFuzzer then refuses to start) and names this recipe's version (seeds added since
# are then made: the nsys schema cases came with version 2, the NCCL operations and rank evidence
# with 3, the streamed Kineto import's with 4).
set -euo pipefail
bin=$(cd "${1:?BIN_DIR}" && pwd)
out=${2:?OUT_DIR}
targets=(kineto kineto_stream spool store nsys power_csv rocprof)
version="corpus 4"
complete=1
grep -qx "$version" "$out/stamp" 2>/dev/null || complete=0
for t in "${targets[@]}"; do [ -n "$(ls -A "$out/$t" 2>/dev/null)" ] || complete=0; done
[ "$complete" = 1 ] && exit 0
for t in kernalyse-tracegen kernalyse-merge kernalyse-run vicuna_tp; do
  [ -x "$bin/$t" ] || { echo "make_corpus.sh: $bin/$t missing (build it first)" >&2; exit 1; }
done
rm -rf "$out"
mkdir -p "$out/kineto" "$out/kineto_stream" "$out/spool" "$out/store" "$out/nsys" "$out/power_csv" "$out/rocprof"
work=$(mktemp -d /tmp/kernalyse-corpus.XXXXXX)
trap 'rm -rf "$work"' EXIT

# Kineto JSON: small traces keep the fuzzer's max input length (the largest seed) small.
"$bin/kernalyse-tracegen" --ranks 2 --kernels 12 --steps 2 --seed 1 --out "$work/tg" >/dev/null
"$bin/kernalyse-tracegen" --ranks 1 --kernels 8 --steps 1 --seed 2 --minify --out "$work/tgmin" >/dev/null
"$bin/kernalyse-tracegen" --ranks 1 --kernels 8 --steps 1 --seed 3 --gz --out "$work/tggz" >/dev/null
cp "$work/tg/rank-0.json" "$out/kineto/tracegen-rank0.json"
cp "$work/tg/rank-1.json" "$out/kineto/tracegen-rank1.json"
cp "$work/tgmin/rank-0.json" "$out/kineto/tracegen-minified.json"
cp "$work/tggz/rank-0.json.gz" "$out/kineto/tracegen.json.gz"

# An emulated MPI run (Open MPI as root on a 2-core machine, as tests/cli/lib.sh sets it up).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl='^openib,ofi' OMPI_MCA_mtl='^ofi'
export OMPI_MCA_pml=ob1 OMPI_MCA_mpi_yield_when_idle=1
(cd "$work" && mpirun -n 2 "$bin/kernalyse-run" -q --nvtx --flush-records 16 --keep-spool \
   --spool-dir "$work/sp" -o "$work/tp.h5" "$bin/vicuna_tp" --layers 1 --steps 2 --hidden 256 >/dev/null)
cp "$work"/sp/rank-*.kspool "$out/spool/"
cp "$work/tp.h5" "$out/store/vicuna_tp.h5"

"$bin/kernalyse-merge" -q "$work/tp.h5" --export-kineto "$work/exp" >/dev/null
for f in "$work"/exp/*; do cp "$f" "$out/kineto/export-$(basename "$f")"; done
"$bin/kernalyse-merge" -q "$work/tgmin/rank-0.json" -o "$work/tg.h5"
cp "$work/tg.h5" "$out/store/tracegen.h5"

# Nsight Systems SQLite: the generator's nsys form of a small workload (one file per rank).
"$bin/kernalyse-tracegen" --ranks 1 --kernels 8 --steps 1 --seed 4 --format nsys --out "$work/ns" >/dev/null
cp "$work/ns/rank-0.sqlite" "$out/nsys/tracegen-rank0.sqlite"
/usr/bin/python3 "$(dirname "$0")/../tools/nsys_schema_cases.py" "$work/schema" --small
for f in "$work"/schema/*.sqlite; do cp "$f" "$out/nsys/schema-$(basename "$f" _rank-0.sqlite).sqlite"; done
# The NCCL operation tables (NCCL_GPU_OPERATIONS*, joined to kernels and copies) and the rank
# evidence of a multi-process report (launcher variables, ncclCommInitRank payloads, network marks).
"$bin/kernalyse-tracegen" --nccl-ops --ranks 2 --steps 1 --ce-collectives --format nsys --out "$work/ops" >/dev/null
cp "$work/ops/rank-0.sqlite" "$out/nsys/nccl-ops-rank0.sqlite"
"$bin/kernalyse-tracegen" --ranks 4 --kernels 8 --steps 1 --seed 5 --ranks-per-host 2 --format nsys \
  --nsys-per-host --nsys-env 0,1 --nsys-payload 2 --nsys-marks cross-host --out "$work/ev" >/dev/null
for f in "$work"/ev/*.sqlite; do cp "$f" "$out/nsys/evidence-$(basename "$f")"; done

# rocprofv3 JSON: the generator's rocprof form (kernels, memsets as dispatches, copies, HIP calls,
# roctx ranges), plain and gzip.
"$bin/kernalyse-tracegen" --ranks 1 --kernels 8 --steps 2 --seed 5 --format rocprof --out "$work/rp" >/dev/null
"$bin/kernalyse-tracegen" --ranks 1 --kernels 6 --steps 1 --seed 6 --format rocprof --gz --out "$work/rpgz" >/dev/null
cp "$work/rp/rank-0.json" "$out/rocprof/tracegen-rank0.json"
cp "$work/rpgz/rank-0.json.gz" "$out/rocprof/tracegen-rank0.json.gz"

# nvidia-smi power logs, both formats nvidia-smi writes (--format=csv and csv,noheader,nounits).
printf '%s\n' 'timestamp, index, power.draw [W]' \
  '2026/11/23 10:00:00.000, 0, 250.34 W' '2026/11/23 10:00:00.040, 0, 251.10 W' \
  '2026/11/23 10:00:00.080, 1, 98.00 W' > "$out/power_csv/header_units.csv"
printf '%s\n' '2026/11/23 10:00:00.000, 0, 250.34' '2026/11/23 10:00:00.040, 0, 251.10' \
  > "$out/power_csv/noheader_nounits.csv"

# The streamed Kineto import (fuzz_kineto_stream) starts from the Kineto seeds.
cp "$out"/kineto/* "$out/kineto_stream/"
{ echo "$version"; date -u +%FT%TZ; } > "$out/stamp"
ls -l "$out"/*/ >&2
