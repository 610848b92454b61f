#!/usr/bin/env bash
# Run HERE (Debian 12, root, packages installed): checks the prefix from install-prefix.sh with
# the host's own Open MPI, PMIx, HDF5, nlohmann-json, CLI11 and CMake hidden in a private mount
# namespace, as on the GPU machine: wrappers, mpirun, and a kernalyse configure + build of the
# MPI/HDF5 parts (one small target) against the prefix alone.
# Usage: bench/gpu/check-prefix-here.sh [PREFIX]   (default /tmp/kernalyse-gpu-prefix)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
P=${1:-/tmp/kernalyse-gpu-prefix}
[ -f "$P/env.sh" ] || "$root/bench/gpu/install-prefix.sh" "$P"
exec unshare --mount --propagation private bash -s "$root" "$P" <<'INNER'
set -euo pipefail
root=$1 P=$2
hide_dir() { if [ -d "$1" ]; then mount -t tmpfs none "$1"; fi; }
hide_file() { if [ -e "$1" ]; then mount --bind /dev/null "$1"; fi; }
for d in /usr/lib/x86_64-linux-gnu/openmpi /usr/lib/x86_64-linux-gnu/hdf5 /usr/lib/x86_64-linux-gnu/pmix2 \
         /usr/share/openmpi /etc/openmpi /usr/include/hdf5 /usr/include/nlohmann /usr/include/CLI \
         /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11 /usr/share/cmake-3.25; do hide_dir "$d"; done
for f in /usr/lib/x86_64-linux-gnu/lib{mpi,open-pal,open-rte,pmix,hwloc,event_core,event_pthreads,hdf5_openmpi,mca_common}*.so* \
         /usr/bin/mpi* /usr/bin/orte* /usr/bin/opal* /usr/bin/h5pcc* /usr/bin/cmake \
         /usr/include/sqlite3.h /usr/include/sqlite3ext.h; do hide_file "$f"; done
source "$P/env.sh"
echo "== which: $(command -v mpicxx) $(command -v mpirun) $(command -v cmake) $(command -v h5pcc)"
echo "== mpicxx --showme:"; mpicxx --showme
echo "== mpirun --version:"; mpirun --version | head -1
cat > /tmp/kp_hello.c <<'C'
#include <mpi.h>
#include <stdio.h>
int main(int c, char** v) { int r, n; MPI_Init(&c, &v); MPI_Comm_rank(MPI_COMM_WORLD, &r);
  MPI_Comm_size(MPI_COMM_WORLD, &n); int s = r, t = 0; MPI_Allreduce(&s, &t, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  printf("rank %d of %d, sum %d\n", r, n, t); MPI_Finalize(); return 0; }
C
mpicc -o /tmp/kp_hello /tmp/kp_hello.c
echo "== ldd: $(ldd /tmp/kp_hello | grep -E 'libmpi|open-pal' | tr -s ' \t' ' ')"
echo "== mpirun -n 2:"; mpirun -n 2 /tmp/kp_hello < /dev/null  # (mpirun would eat this script from stdin)
echo "== h5pcc -show: $(h5pcc -show)"
b=/tmp/kp_build
rm -rf "$b"
echo "== cmake configure against the prefix:"
cmake -S "$root" -B "$b" -DCMAKE_BUILD_TYPE=Release -DKERNALYSE_BUILD_TESTS=OFF > /tmp/kp_cmake.log 2>&1 || { cat /tmp/kp_cmake.log; exit 1; }
grep -E "^(HDF5_C_COMPILER_EXECUTABLE|HDF5_C_LIBRARY_hdf5|MPI_CXX_COMPILER|nlohmann_json_DIR|CLI11_DIR|CMAKE_COMMAND):" "$b/CMakeCache.txt"
grep -iE "vicuna|cuda" /tmp/kp_cmake.log || true
echo "== build kernalyse-merge and vicuna_tp_cuda (nvcc + the prefix's MPI) against the prefix (-j2):"
targets=(kernalyse-merge)
grep -q "vicuna_tp_cuda: building" /tmp/kp_cmake.log && targets+=(vicuna_tp_cuda)
cmake --build "$b" -j2 --target "${targets[@]}" > /tmp/kp_build.log 2>&1 || { tail -30 /tmp/kp_build.log; exit 1; }
[ -x "$b/bin/vicuna_tp_cuda" ] && echo "== vicuna_tp_cuda without a driver: $("$b/bin/vicuna_tp_cuda" 2>&1 < /dev/null; echo "exit $?")"
echo "== ldd kernalyse-merge: $(ldd "$b/bin/kernalyse-merge" | grep -E 'hdf5|mpi|not found' | awk '{print $1"=>"$3}' | tr '\n' ' ')"
"$b/bin/kernalyse-merge" --version
echo "PREFIX CHECK OK"
INNER
