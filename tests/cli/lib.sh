# Helpers shared by the CLI tests. Each test sources this file.
set -u
BIN=$(cd "${KERNALYSE_BIN:?set KERNALYSE_BIN to the build bin dir}" && pwd)
SRC=${KERNALYSE_SRC:?}
TRACES=${KERNALYSE_SHARED_TRACES:-$SRC/../shared/traces}
export PATH="$BIN:$PATH"
TMP=$(mktemp -d /tmp/kernalyse-test.XXXXXX)
trap 'rm -rf "$TMP"' EXIT
FAILS=0
PASSES=0
pass() { PASSES=$((PASSES + 1)); echo "ok - $*"; }
fail() { FAILS=$((FAILS + 1)); echo "FAIL - $*"; }
# expect_eq WHAT GOT WANT
expect_eq() { if [ "$2" = "$3" ]; then pass "$1"; else fail "$1: got '$2', want '$3'"; fi; }
# expect_contains WHAT HAYSTACK NEEDLE
expect_contains() {
  case "$2" in *"$3"*) pass "$1" ;; *) fail "$1: '$3' not in: $2" ;; esac
}
need_traces() {
  if [ ! -d "$TRACES" ]; then echo "SKIP: $TRACES absent (shared traces not available)"; exit 77; fi
}
finish() {
  echo "$PASSES passed, $FAILS failed"
  [ "$FAILS" -eq 0 ]
}
# Open MPI as root on a 2-core machine: oversubscribe, skip fabric probing, yield when idle.
use_mpi() {
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl='^openib,ofi' OMPI_MCA_mtl='^ofi'
  export OMPI_MCA_pml=ob1 OMPI_MCA_mpi_yield_when_idle=1
}
