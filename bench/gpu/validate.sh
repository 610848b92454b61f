#!/usr/bin/env bash
# GPU validation of kernalyse in one command, on the lent GPU machine (one H100/H200, CUDA 13,
# PyTorch, no network, none of the Debian packages kernalyse builds against). Prepare HERE with
# bench/gpu/fetch-debs.sh, then run through the device tool with carry [".gpu-debs"]:
#     bench/gpu/validate.sh
# Steps: unpack .gpu-debs into a private prefix (install-prefix.sh), configure + build kernalyse
# (Release, -j16), then the checks of docs/gpu-validation.md:
#   a  overhead: vicuna_tp_cuda, 1 rank, bare vs under kernalyse-run, >= 5 runs each, medians
#   b  2 ranks sharing the GPU under kernalyse-run (NCCL's duplicate-GPU rule, NCCL_HOSTID)
#   c  kernel counts in the store == the app's own counts
#   d  per-name kernel durations vs cudaEvent times (5 %)
#   e  NVTX "layer L" ranges attribute kernels to layers
#   f  kernalyse-run python3 small_torch.py vs torch.profiler: names and counts
#   h  torchrun process trees without MPI: kernalyse-run torchrun ... and torchrun --no-python
#      kernalyse-run ... (examples/torch_tp/torchrun_tp.py, 2 ranks, gloo, DataLoader workers)
#   i  CUDA graphs: vicuna_tp_cuda --cuda-graph (layers replayed by cudaGraphLaunch): counts per
#      kernel name, and one step's kernels
# Results: $OUT (the device tool's output folder) or ./gpu-results: results.json,
# gpu-validation-snippet.md, validate.log, build.log, details.tar.gz. Big files stay in $WORK.
# VALIDATE_REUSE_BUILD=1 skips the build when $WORK/build already has the binaries;
# VALIDATE_BUILD_ONLY=1 stops after the build.
# Exit 0 when every evaluated check passed, 1 otherwise, 2 when the setup failed.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root" || exit 2
res=${OUT:-$root/gpu-results}
WORK=${KERNALYSE_GPU_WORK:-/tmp/kernalyse-gpu}
RUNS=${VALIDATE_RUNS:-5}
JOBS=${VALIDATE_JOBS:-16}
mkdir -p "$res" "$WORK"
rm -f "$res"/{results.json,gpu-validation-snippet.md,details.tar.gz,build.log,validate.log}
rm -rf "$WORK/checks" "$WORK/runs"
mkdir -p "$WORK/checks" "$WORK/runs"
exec > >(tee "$res/validate.log") 2>&1
t_start=$(date +%s)
say() { echo "[validate $(($(date +%s) - t_start))s] $*"; }
setup_fail() {
  say "SETUP FAILED: $*"
  tar -czf "$res/details.tar.gz" -C "$WORK" runs checks 2>/dev/null
  exit 2
}

# ---- environment facts ------------------------------------------------------------------------
py=python3
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -1)
nvccv=$(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')
torchv=$($py -c 'import torch; print(torch.__version__)' 2>/dev/null)
say "GPU ${gpu:-none} driver ${driver:-?} nvcc ${nvccv:-none} torch ${torchv:-none} os $(. /etc/os-release 2>/dev/null; echo "$PRETTY_NAME")"
[ -n "$gpu" ] || say "WARNING: nvidia-smi shows no GPU; the runs will fail with exit code 2"
command -v nvcc >/dev/null || export PATH=/usr/local/cuda/bin:$PATH

# ---- prefix -----------------------------------------------------------------------------------
rm -rf "$WORK/prefix"  # always a fresh prefix from the carried packages
"$root/bench/gpu/install-prefix.sh" "$WORK/prefix" "$root/.gpu-debs" || setup_fail "install-prefix.sh"
# shellcheck disable=SC1091
source "$WORK/prefix/env.sh"
# CMake: the carried one (Debian 3.25) if it runs here, else the machine's.
cmake_bin=$KERNALYSE_PREFIX/usr/bin/cmake
if ! "$cmake_bin" --version >/dev/null 2>&1; then
  cmake_bin=$(PATH=${PATH#"$KERNALYSE_PREFIX/usr/bin:"} command -v cmake) || setup_fail "no working cmake"
fi
say "cmake: $cmake_bin ($("$cmake_bin" --version | head -1)); mpirun: $(command -v mpirun) ($(mpirun --version 2>/dev/null | head -1))"

# NCCL: next to the toolkit, else PyTorch's wheel (nvidia-nccl-cu13: include/ and lib/libnccl.so.2).
if [ ! -e /usr/local/cuda/include/nccl.h ] && [ -z "${NCCL_HOME:-}" ]; then
  NCCL_HOME=$($py -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null) && export NCCL_HOME
fi
if [ -n "${NCCL_HOME:-}" ]; then
  export LD_LIBRARY_PATH=$NCCL_HOME/lib:$LD_LIBRARY_PATH
  say "NCCL_HOME=$NCCL_HOME"
fi

# cuBLAS: the toolkit's, else PyTorch's wheel (nvidia-cublas: include/, lib/libcublas.so.13).
cmake_extra=()
if ! ls /usr/local/cuda/lib64/libcublas.so* >/dev/null 2>&1; then
  cb=$($py -c 'import nvidia.cublas, os; print(list(nvidia.cublas.__path__)[0])' 2>/dev/null)
  if [ -n "$cb" ] && [ -e "$cb/include/cublas_v2.h" ]; then
    lib=$(ls "$cb"/lib/libcublas.so* 2>/dev/null | head -1)
    libLt=$(ls "$cb"/lib/libcublasLt.so* 2>/dev/null | head -1)
    cmake_extra+=("-DCUDA_cublas_LIBRARY=$lib" "-DCUDA_cublasLt_LIBRARY=$libLt")
    export CPATH=$cb/include${CPATH:+:$CPATH} LD_LIBRARY_PATH=$cb/lib:$LD_LIBRARY_PATH
    say "cuBLAS from the PyTorch wheel: $lib"
  fi
fi

# ---- build ------------------------------------------------------------------------------------
B=$WORK/build
if [ "${VALIDATE_REUSE_BUILD:-0}" = 1 ] && [ -x "$B/bin/vicuna_tp_cuda" ]; then
  say "reusing the build in $B (VALIDATE_REUSE_BUILD=1)"
else
  say "configure + build (Release, -j$JOBS) in $B"
  "$cmake_bin" -S "$root" -B "$B" -DCMAKE_BUILD_TYPE=Release -DKERNALYSE_BUILD_TESTS=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 "${cmake_extra[@]}" > "$res/build.log" 2>&1 || { tail -40 "$res/build.log"; setup_fail "cmake configure"; }
  grep -E "vicuna_tp_cuda|CUDA|CUPTI|NCCL" "$res/build.log" | head -10
  "$cmake_bin" --build "$B" -j"$JOBS" >> "$res/build.log" 2>&1 || { tail -40 "$res/build.log"; setup_fail "build"; }
fi
bin=$B/bin
for t in kernalyse-run kernalyse-merge vicuna_tp_cuda; do
  [ -x "$bin/$t" ] || setup_fail "$t was not built (see build.log)"
done
say "built: $(ls "$bin" | tr '\n' ' ')"
# The build alone (for bench/gpu/overhead.sh when the device time is short).
[ "${VALIDATE_BUILD_ONLY:-0}" = 1 ] && { say "VALIDATE_BUILD_ONLY=1: stopping after the build"; exit 0; }

# The device tool copies the working tree, but its .git may lag (the first GPU run named the
# session's first commit for trees three commits later): the tree's own fingerprint says which
# sources ran; the same command in a clean checkout of a commit gives that commit's.
tree_fp() { (cd "$root" && find CMakeLists.txt aggregator analysis collector launch examples bench tests cmake -type f -print0 | LC_ALL=C sort -z | xargs -0 sha1sum | sha1sum | cut -c1-12); }
commit="$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown) (device .git), sources $(tree_fp)"
ncclv=$($py - <<'EOF' 2>/dev/null
import ctypes
for n in ("libnccl.so.2", "libnccl.so"):
    try:
        l = ctypes.CDLL(n); v = ctypes.c_int(); l.ncclGetVersion(ctypes.byref(v)); print(v.value); break
    except OSError:
        pass
EOF
)
$py - "$WORK/env.json" <<EOF
import json, sys
json.dump({"date": "$(date -u +%Y-%m-%dT%H:%MZ)", "gpu": "$gpu", "driver": "$driver", "nvcc": "$nvccv",
           "torch": "$torchv", "nccl": "$ncclv", "commit": "$commit", "cmake": "$cmake_bin",
           "runs_per_side": $RUNS}, open(sys.argv[1], "w"), indent=1)
EOF

R=$WORK/runs
# One tiny run first: without a usable device every check would only repeat exit code 2.
timeout 120 mpirun -n 1 "$bin/vicuna_tp_cuda" --layers 1 --hidden 256 --steps 1 --warmup 0 < /dev/null > "$R/probe.log" 2>&1
probe=$?
[ "$probe" = 0 ] || { cat "$R/probe.log"; setup_fail "vicuna_tp_cuda probe run: exit $probe"; }
say "probe: $(tail -1 "$R/probe.log")"

run1() { timeout "${TMO:-300}" mpirun -n 1 "$@" < /dev/null; }  # one rank, never reading our stdin
prof1() { run1 "$bin/kernalyse-run" -q --force --nvtx -o "$@"; }  # prof1 STORE APP ARGS...
summary() { timeout 300 "$bin/kernalyse-merge" "$1" --summary --verbose --json > "$2" 2> "$2.err"; }
check() { $py "$root/bench/gpu/validate_checks.py" "$@"; }
app=$bin/vicuna_tp_cuda

# ---- (a) overhead ------------------------------------------------------------------------------
# Decode-sized (batch 8): launch-bound, the worst case for a per-launch cost. Bare and profiled
# runs alternate, so drift of clocks or temperature hits both sides alike.
say "(a) overhead: $RUNS bare + $RUNS profiled runs"
A="--layers 8 --hidden 4096 --batch 8 --steps 100 --warmup 5"
bare=() prof=()
for i in $(seq "$RUNS"); do
  run1 "$app" $A --report-json "$R/a-bare-$i.json" > "$R/a-bare-$i.log" 2>&1 || say "bare run $i: rc $?"
  prof1 "$R/a-prof-$i.h5" "$app" $A --report-json "$R/a-prof-$i.json" > "$R/a-prof-$i.log" 2>&1 || say "profiled run $i: rc $?"
  bare+=("$R/a-bare-$i.json") prof+=("$R/a-prof-$i.json")
  rm -f "$R/a-prof-$i.h5"
done
check overhead "$(IFS=,; echo "${bare[*]}")" "$(IFS=,; echo "${prof[*]}")" > "$WORK/checks/a.json"
grep -E '"overhead_pct"|"pass"' "$WORK/checks/a.json"

# ---- (c) kernel counts and (e) NVTX layers: own GEMM, so the app knows every kernel ----------
say "(c)+(e) kernel counts and NVTX attribution (--gemm custom)"
C="--layers 4 --hidden 2048 --batch 8 --steps 10 --warmup 1 --gemm custom"
prof1 "$R/c.h5" "$app" $C --report-json "$R/c.json" > "$R/c.log" 2>&1 || say "run c: rc $?"
summary "$R/c.h5" "$R/c-summary.json"
check counts "$R/c.json" "$R/c-summary.json" > "$WORK/checks/c.json"
check collector "$R/c-summary.json" > "$WORK/checks/g.json"
timeout 300 "$bin/kernalyse-merge" "$R/c.h5" --perfetto "$R/c-perfetto.json" --force > /dev/null 2>&1
check nvtx "$R/c.json" "$R/c-perfetto.json" > "$WORK/checks/e.json"
# The same counts with cuBLAS: own kernels exact, cuBLAS kernels per GEMM call reported.
prof1 "$R/c2.h5" "$app" ${C/--gemm custom/--gemm cublas} --report-json "$R/c2.json" > "$R/c2.log" 2>&1 || say "run c2: rc $?"
summary "$R/c2.h5" "$R/c2-summary.json"
check counts "$R/c2.json" "$R/c2-summary.json" | sed 's/"c_kernel_counts"/"c2_kernel_counts_cublas"/' > "$WORK/checks/c2.json"
grep -E '"check"|"pass"' "$WORK/checks/c.json" "$WORK/checks/c2.json" "$WORK/checks/e.json"

# ---- (i) CUDA graphs: the layers captured once and replayed per step (cudaGraphLaunch) ----------
say "(i) CUDA graph replays: kernel counts, and one step's kernels (--gemm custom --cuda-graph)"
prof1 "$R/i.h5" "$app" $C --cuda-graph --report-json "$R/i.json" > "$R/i.log" 2>&1 || say "run i: rc $?"
summary "$R/i.h5" "$R/i-summary.json"
timeout 300 "$bin/kernalyse-merge" "$R/i.h5" --step 3 --summary --verbose --json > "$R/i-step3.json" 2> "$R/i-step3.json.err"
check graph "$R/i.json" "$R/i-summary.json" "$R/i-step3.json" > "$WORK/checks/i.json"
grep -E '"detail"|"pass"' "$WORK/checks/i.json"

# ---- (d) durations vs cudaEvents: large kernels (prefill-sized), host queued ahead -------------
# Big enough that the ~1 us between an event and its kernel is far below 5 % (GeLU: 33.5 M
# elements, ~50 us; GEMMs: ms with the own kernel, ~0.1-0.5 ms with cuBLAS).
say "(d) durations vs cudaEvent"
D="--layers 2 --hidden 8192 --batch 1024 --steps 5 --warmup 1 --event-timing"
# The app times the steps after the warm-up (1..5); the store's kernels of the same steps, one
# --step summary each (a cuBLAS shape's first call loads its kernels inside the warm-up's events).
step_summaries() {  # STORE OUT_PREFIX → the summaries of steps 1..5, comma-separated
  local n list=()
  for n in 1 2 3 4 5; do
    timeout 300 "$bin/kernalyse-merge" "$1" --step "$n" --summary --verbose --json > "$2-step$n.json" 2> "$2-step$n.json.err"
    list+=("$2-step$n.json")
  done
  (IFS=,; echo "${list[*]}")
}
prof1 "$R/d.h5" "$app" $D --gemm custom --report-json "$R/d.json" > "$R/d.log" 2>&1 || say "run d: rc $?"
check durations "$R/d.json" "$(step_summaries "$R/d.h5" "$R/d-summary")" > "$WORK/checks/d.json"
prof1 "$R/d2.h5" "$app" $D --gemm cublas --report-json "$R/d2.json" > "$R/d2.log" 2>&1 || say "run d2: rc $?"
check durations "$R/d2.json" "$(step_summaries "$R/d2.h5" "$R/d2-summary")" | sed 's/"d_durations"/"d2_durations_cublas"/' > "$WORK/checks/d2.json"
grep -E '"name"|"diff_pct"' "$WORK/checks/d.json" "$WORK/checks/d2.json"

# ---- (b) two ranks sharing the GPU --------------------------------------------------------------
say "(b) 2 ranks on one GPU"
B2="--layers 4 --hidden 2048 --batch 8 --steps 10 --warmup 1 --slow-rank 1 --slow-us 500"
NCCL_DEBUG=WARN timeout 150 mpirun -n 2 "$app" $B2 --no-share-gpu < /dev/null > "$R/b-plain.log" 2>&1
rc_plain=$?
say "plain 2 ranks (no NCCL_HOSTID): rc $rc_plain: $(grep -m1 -E 'Duplicate GPU|vicuna_tp_cuda:' "$R/b-plain.log")"
NCCL_DEBUG=WARN timeout 300 mpirun -n 2 "$bin/kernalyse-run" -q --force --nvtx -o "$R/b.h5" "$app" $B2 --report-json "$R/b.json" < /dev/null > "$R/b.log" 2>&1
rc_share=$?
say "2 ranks, per-rank NCCL_HOSTID, under kernalyse-run: rc $rc_share"
summary "$R/b.h5" "$R/b-summary.json"
timeout 300 "$bin/kernalyse-merge" "$R/b.h5" --stragglers --json > "$R/b-stragglers.json" 2>&1
grep -m1 '"headline"' "$R/b-stragglers.json"
check twogpu "$rc_plain" "$R/b-plain.log" "$rc_share" "$R/b.json" "$R/b-summary.json" > "$WORK/checks/b.json"

# ---- (f) PyTorch: kernalyse-run vs torch.profiler -------------------------------------------
say "(f) small_torch.py: torch.profiler vs kernalyse-run"
T=$root/examples/torch_tp/small_torch.py
(cd "$R" && timeout 300 $py "$T" --profile --trace "$R/f-trace.json" > "$R/f-torch.json" 2> "$R/f-torch.log") || say "torch.profiler run: rc $?"
(cd "$R" && prof1 "$R/f.h5" "$(command -v $py)" "$T" > "$R/f-plain.json" 2> "$R/f-plain.log") || say "kernalyse-run python3: rc $?"
summary "$R/f.h5" "$R/f-summary.json"
check torch "$R/f-torch.json" "$R/f-summary.json" > "$WORK/checks/f.json"
grep -E '"torch_total"|"store_total"|"pass"' "$WORK/checks/f.json"

# ---- (h) torchrun process trees (no MPI) --------------------------------------------------------
say "(h) torchrun: kernalyse-run torchrun ... and torchrun --no-python kernalyse-run ..."
TR=$root/examples/torch_tp/torchrun_tp.py
trun=(torchrun)
command -v torchrun > /dev/null || trun=($py -m torch.distributed.run)
(cd "$R" && timeout 300 "$bin/kernalyse-run" --force --timeout 240 -o "$R/h1.h5" "${trun[@]}" --standalone \
   --nproc-per-node 2 "$TR" < /dev/null > "$R/h1.log" 2>&1) || say "kernalyse-run torchrun: rc $?"
(cd "$R" && timeout 300 "${trun[@]}" --standalone --nproc-per-node 2 --no-python "$bin/kernalyse-run" --force \
   -o "$R/h2.h5" "$(command -v $py)" "$TR" < /dev/null > "$R/h2.log" 2>&1) || say "torchrun --no-python kernalyse-run: rc $?"
summary "$R/h1.h5" "$R/h1-summary.json"
summary "$R/h2.h5" "$R/h2-summary.json"
check tree "$R/h1-summary.json" "$R/h2-summary.json" > "$WORK/checks/h.json"
grep -E '"detail"|"pass"' "$WORK/checks/h.json"

# ---- results ------------------------------------------------------------------------------------
say "results"
check finish "$WORK/checks" "$res"
rc=$?
cp "$WORK/env.json" "$WORK/checks/" 2>/dev/null
# Small files only (reports, summaries, logs); stores and traces stay in $WORK.
(cd "$WORK" && find runs checks -type f \( -name '*.json' -o -name '*.log' -o -name '*.err' \) \
   ! -name 'c-perfetto.json' ! -name 'f-trace.json' -size -8M -print0 | tar --null -czf "$res/details.tar.gz" -T -)
say "done in $(($(date +%s) - t_start)) s; results in $res (exit $rc)"
exit $rc
