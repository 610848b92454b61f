#!/usr/bin/env bash
# Issue 28's many-rank figures: a 256-rank store of 51.2 M kernels (7.4 GB of columns), made as a
# job's node stores are merged (32 nodes x 8 ranks x 200 k kernels: one 8-rank tracegen store
# linked 32 times, `kernalyse-merge c1.h5 ... c32.h5 -o`), then
#   1. `--all --json` by one process (one core, taskset) and by `mpirun --bind-to core -n 2`:
#      wall time, each process's peak RSS, and whether the outputs are byte-identical;
#   2. `--all` under `ulimit -v` of 2 GiB (address space, so a bound on RSS too): completes, and
#      the same bytes as without the limit.
# Usage: bench/many_ranks.sh BIN [DIR]   (DIR default /tmp/kernalyse-many; ~9 GB of disk while
# it runs; the stores are removed at the end unless KEEP=1)
set -euo pipefail
[ $# -ge 1 ] || { sed -n '9,10p' "$0" >&2; exit 2; }
bin=$(cd "$1" && pwd)
dir=${2:-/tmp/kernalyse-many}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$dir"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl='^openib,ofi' OMPI_MCA_mtl='^ofi' OMPI_MCA_pml=ob1

"$here/make_bench_store.sh" "$bin" "$dir/node.h5" 8 200000 >/dev/null
nodes=()
for i in $(seq 1 32); do
  ln -sf node.h5 "$dir/node$i.h5"
  nodes+=("$dir/node$i.h5")
done
/usr/bin/time -f '%e %M' -o "$dir/t" "$bin/kernalyse-merge" "${nodes[@]}" -o "$dir/r256.h5" --force -q
read -r wall rss <"$dir/t"
cols=$(h5ls -r -v "$dir/r256.h5" | awk '/Storage:/ {s += $2} END {printf "%.2f", s / 1e9}')
echo "many_ranks: 256 ranks x 200000 kernels from 32 node stores: merged in $wall s (peak RSS $((rss / 1024)) MB), $((($(stat -c %s "$dir/r256.h5")) / 1000000)) MB, $cols GB of columns"

/usr/bin/time -f '%e %M' -o "$dir/t" taskset -c 0 "$bin/kernalyse-merge" "$dir/r256.h5" --all --json -q >"$dir/n1.json"
read -r w1 rss1 <"$dir/t"
# One GNU time per process: each process's own peak RSS.
rm -f "$dir/rss2"
/usr/bin/time -f '%e' -o "$dir/t" mpirun --bind-to core -n 2 /usr/bin/time -f '%M' -a -o "$dir/rss2" \
  "$bin/kernalyse-merge" "$dir/r256.h5" --all --json -q >"$dir/n2.json"
read -r w2 <"$dir/t"
same=$(cmp -s "$dir/n1.json" "$dir/n2.json" && echo identical || echo DIFFERENT)
echo "many_ranks: --all --json, one thread per process: -n 1 $w1 s (peak RSS $((rss1 / 1024)) MB); mpirun -n 2 $w2 s (peak RSS per process: $(awk '{printf "%s%d MB", (NR > 1 ? ", " : ""), $1 / 1024}' "$dir/rss2")), $(awk -v a="$w2" -v b="$w1" 'BEGIN {printf "%.2f", a / b}')x; outputs $same"

"$bin/kernalyse-merge" "$dir/r256.h5" --all -q >"$dir/free.txt"
rc=0
(ulimit -v 2097152 && /usr/bin/time -f '%e %M' -o "$dir/t" "$bin/kernalyse-merge" "$dir/r256.h5" --all -q >"$dir/limited.txt") || rc=$?
read -r wl rssl <"$dir/t" || true
echo "many_ranks: --all under ulimit -v 2 GiB: exit $rc, $wl s, peak RSS $((${rssl:-0} / 1024)) MB, output $(cmp -s "$dir/free.txt" "$dir/limited.txt" && echo 'identical to the unlimited run' || echo DIFFERENT)"
[ "${KEEP:-0}" = 1 ] || rm -f "$dir"/node*.h5 "$dir/r256.h5" "$dir"/*.json "$dir"/*.txt "$dir/t" "$dir/rss2"
