#!/usr/bin/env bash
# Unpacks the carried Debian 12 packages (bench/gpu/fetch-debs.sh) into a private prefix with
# dpkg -x (never into /: packages unpacked over a foreign system can break it), makes the
# prefix usable without dpkg's maintainer scripts, and writes PREFIX/env.sh to source.
# Usage: bench/gpu/install-prefix.sh PREFIX [DEBDIR]     (DEBDIR default: .gpu-debs)
set -euo pipefail
P=$(mkdir -p "$1" && cd "$1" && pwd)
debs=${2:-$(cd "$(dirname "$0")/../.." && pwd)/.gpu-debs}
ls "$debs"/*.deb >/dev/null 2>&1 || { echo "install-prefix: no .deb files in $debs (run bench/gpu/fetch-debs.sh)" >&2; exit 2; }
command -v dpkg >/dev/null || { echo "install-prefix: dpkg not found" >&2; exit 2; }
for f in "$debs"/*.deb; do dpkg -x "$f" "$P"; done
L=$P/usr/lib/x86_64-linux-gnu

# Absolute symlinks point into the host's /: re-point them into the prefix.
find "$P" -type l | while read -r l; do
  t=$(readlink "$l")
  case $t in "$P"/*) ;; /*) ln -sfn "$P$t" "$l" ;; esac  # (already re-pointed: a rerun)
done
# Debian's update-alternatives (a maintainer script, not run by dpkg -x) names the plain
# commands; make them by hand.
for n in mpicc mpicxx mpic++ mpiCC mpirun mpiexec; do
  [ -e "$P/usr/bin/$n.openmpi" ] && ln -sfn "$n.openmpi" "$P/usr/bin/$n"
done
# h5pcc is a shell script with its install prefix written in; CMake's FindHDF5 runs it.
if [ -f "$P/usr/bin/h5pcc.openmpi" ]; then
  sed "s|^prefix=\"/usr\"|prefix=\"$P/usr\"|" "$P/usr/bin/h5pcc.openmpi" > "$P/usr/bin/h5pcc"
  chmod +x "$P/usr/bin/h5pcc"
fi
# CMake 3.25's FindCUDAToolkit sets a property on CUDA::nvToolsExt without checking that the
# target exists; CUDA 13 has no libnvToolsExt, so find_package(CUDAToolkit) fails in any project
# requiring CMake >= 3.25 (this one). Same guard as later CMake releases.
for f in "$P"/usr/share/cmake-*/Modules/FindCUDAToolkit.cmake; do
  [ -f "$f" ] && sed -i 's/^\( *\)if(CMAKE_MINIMUM_REQUIRED_VERSION VERSION_GREATER_EQUAL 3.25)$/\1if(TARGET CUDA::nvToolsExt AND CMAKE_MINIMUM_REQUIRED_VERSION VERSION_GREATER_EQUAL 3.25)/' "$f"
done
# Link-time names that -dev packages (not carried, or belonging to the host) would provide; the
# HDF5 link line asks for -lcurl -lcrypto -lsz -lz. Point each at the prefix's or the host's
# runtime library.
for pair in curl:libcurl.so.4 crypto:libcrypto.so.3 sz:libsz.so.2 z:libz.so.1 aec:libaec.so.0; do
  name=${pair%%:*}
  soname=${pair#*:}
  [ -e "$L/lib$name.so" ] && continue
  if [ -e "$L/$soname" ]; then
    ln -sfn "$soname" "$L/lib$name.so"
  else
    host=$(ldconfig -p | awk -v s="$soname" '$1 == s && /x86-64/ {print $NF; exit}')
    [ -n "$host" ] && ln -sfn "$host" "$L/lib$name.so"
  fi
done
# Generic libraries the host already has are dropped from the prefix, so that the host's own
# programs (PyTorch's python, nvcc) keep their libraries under our LD_LIBRARY_PATH. Open MPI,
# PMIx, hwloc, libevent and HDF5 always stay ours (a host Open MPI must not mix with ours).
hostlibs=$(ldconfig -p | awk '/x86-64/ {print $1}' | sort -u)
pruned=0
for f in "$L"/lib*.so.*; do
  [ -e "$f" ] || continue
  b=$(basename "$f")
  case $b in libmpi*|libopen-*|libompitrace*|liboshmem*|libmca*|libpmix*|libhwloc*|libevent*|libhdf5*|libsz*|libaec*) continue ;; esac
  soname=$(objdump -p "$f" 2>/dev/null | awk '/SONAME/ {print $2}')
  [ -n "$soname" ] || continue
  if grep -qxF "$soname" <<< "$hostlibs"; then
    rm -f "$f"
    pruned=$((pruned + 1))
  fi
done
# Dangling links left by the pruning (libfoo.so.1 -> libfoo.so.1.2.3) go too.
find "$L" -maxdepth 1 -xtype l -name 'lib*.so.*' -delete
# A -dev package's link-time name (libsqlite3.so -> libsqlite3.so.0.8.6) whose library was pruned
# points at the host's library of the same soname major instead (found by the first GPU run:
# CMake's FindSQLite3 failed without it).
for f in $(find "$L" -maxdepth 1 -xtype l -name 'lib*.so'); do
  b=$(basename "$f")
  host=$(ldconfig -p | awk -v s="$b." 'index($1, s) == 1 && /x86-64/ {print $NF; exit}')
  if [ -n "$host" ]; then ln -sfn "$host" "$f"; else rm -f "$f"; fi
done

cat > "$P/env.sh" <<ENV
# Source this: tools and libraries of the kernalyse GPU prefix ($P).
export KERNALYSE_PREFIX="$P"
export PATH="$P/usr/bin:\$PATH"
export LD_LIBRARY_PATH="$L:$L/openmpi/lib:$L/hdf5/openmpi:$L/pmix2/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export CMAKE_PREFIX_PATH="$P/usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}"
# Open MPI 4.1 relocation: every install directory but sysconfdir is configured relative to the
# prefix (/usr); sysconfdir is /etc/openmpi, named separately. PMIx (external, pmix2) likewise.
export OPAL_PREFIX="$P/usr"
export OPAL_SYSCONFDIR="$P/etc/openmpi"
export PMIX_PREFIX="$L/pmix2" PMIX_LIBDIR="$L/pmix2/lib" PMIX_PKGLIBDIR="$L/pmix2/lib/pmix"
export PMIX_DATADIR="$L/pmix2/share" PMIX_PKGDATADIR="$L/pmix2/share/pmix" PMIX_SYSCONFDIR="$P/etc/pmix"
export HWLOC_PLUGINS_PATH="$L/hwloc"
# A component whose libraries are missing must not print a warning on every start.
export OMPI_MCA_mca_base_component_show_load_errors=0
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMPI_MCA_btl='^openib,ofi' OMPI_MCA_mtl='^ofi' OMPI_MCA_pml=ob1 OMPI_MCA_osc='^ucx'
ENV
echo "install-prefix: $(ls "$debs"/*.deb | wc -l) packages unpacked into $P ($pruned host-provided libraries dropped); source $P/env.sh"
