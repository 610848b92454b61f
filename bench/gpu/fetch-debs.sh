#!/usr/bin/env bash
# Run HERE (Debian 12, with network): downloads the Debian packages kernalyse needs to build and
# run on the lent GPU machine (no network there, none of these packages installed) into
# .gpu-debs/ (git-ignored), then prints the total size. The device tool carries at most 64 MiB of
# ignored paths plus the working tree, so keep the set small: runtime libraries, the headers and
# CMake files the build reads, Open MPI's launcher, and CMake itself in case the image lacks one.
# validate.sh unpacks them with dpkg -x into a private prefix (never into /) and drops every
# library the machine already has (install-prefix.sh).
# Usage: bench/gpu/fetch-debs.sh [--no-cmake]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
dest="$root/.gpu-debs"
with_cmake=1
[ "${1:-}" = "--no-cmake" ] && with_cmake=0

pkgs=(
  # Open MPI 4.1 (launcher, libraries, wrappers, headers, help files, MCA components)
  openmpi-bin openmpi-common libopenmpi3 libopenmpi-dev
  libpmix2 libhwloc15 libhwloc-plugins libevent-core-2.1-7 libevent-pthreads-2.1-7 libmunge2
  # libopenmpi3's components link these; present so that no component fails to load noisily
  libfabric1 libucx0 libibverbs1 librdmacm1 libpsm2-2 libpsm-infinipath1 libnl-3-200 libnl-route-3-200
  # parallel HDF5 1.10 (libhdf5_openmpi, headers, h5pcc) and what it links
  libhdf5-openmpi-dev libhdf5-openmpi-103-1 libhdf5-openmpi-hl-100 libsz2 libaec0 libaec-dev
  libcurl4 libnghttp2-14 librtmp1 libssh2-1 libpsl5 libbrotli1 libldap-2.5-0 libsasl2-2
  libgssapi-krb5-2 libkrb5-3 libk5crypto3 libkrb5support0 libkeyutils1
  # header-only / small build dependencies
  nlohmann-json3-dev libcli11-dev zlib1g-dev libgtest-dev
  # SQLite (Nsight Systems exports): the header and libsqlite3.so; the host's runtime is used if it has one
  libsqlite3-dev libsqlite3-0
)
if [ "$with_cmake" = 1 ]; then
  pkgs+=(cmake cmake-data libjsoncpp25 librhash0 libuv1 libarchive13 libb2-1 libxml2 libicu72 liblzma5 libzstd1 liblz4-1 libnettle8 libacl1 libbz2-1.0)
fi

mkdir -p "$dest"
rm -f "$dest"/*.deb
# apt-get download fetches exactly the named packages (no dependency resolution) for this
# machine's release and architecture: Debian 12 amd64.
(cd "$dest" && apt-get download "${pkgs[@]}")
echo "fetched $(ls "$dest"/*.deb | wc -l) packages into $dest"
du -sh "$dest"
total=$(du -sb "$dest" | cut -f1)
tree=$(cd "$root" && git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
echo "debs: $((total / 1048576)) MiB; working tree that travels: $((tree / 1048576)) MiB; limit 64 MiB together"
if [ $((total + tree)) -gt $((60 * 1048576)) ]; then
  echo "WARNING: over 60 MiB together: rerun with --no-cmake if the GPU image has CMake >= 3.25" >&2
  exit 1
fi
