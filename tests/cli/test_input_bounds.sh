#!/usr/bin/env bash
# Each reader's bound from docs/limits.md ("What an input of N bytes can cost"), held on the
# crafted worst-case inputs of tests/tools/worst_inputs.py (about 4 MB each): kernalyse-merge's
# peak RSS above the same reader's run on a tiny input (/usr/bin/time's %M) is at most K * N + C,
# and its wall time at most 2 s + N / (200 kB/s) (rates of 20-100 MB/s are usual: the slack is for
# a loaded machine and sanitizer builds). Under ASan (KERNALYSE_SANITIZE) RSS is not comparable
# (shadow memory, quarantine): only the times are checked.
source "$(dirname "$0")/lib.sh"
PY=/usr/bin/python3
export TZ=UTC  # the power log's local timestamps
cd "$TMP" || exit 1
"$PY" "$SRC/tests/tools/worst_inputs.py" big 1 || exit 1
"$PY" "$SRC/tests/tools/worst_inputs.py" small 0 || exit 1
check_rss=1
nm -C "$BIN/kernalyse-merge" 2>/dev/null | grep -q __asan_init && check_rss=0

# cost ARGS...: "WALL_S RSS_KB" of kernalyse-merge ARGS -o out.h5: the import and the store's
# write, no analysis (each analysis adds its own: the kernel summary about 700 bytes per distinct
# kernel name). It must succeed.
# A store is read with --summary instead (one kernel name there: the summary costs nothing).
cost() {
  local act=(-o out.h5 --force)
  case "$1" in *.h5) act=(--summary) ;; esac
  /usr/bin/time -f "%e %M" -o time.txt kernalyse-merge "$@" "${act[@]}" -q >/dev/null 2>err.txt
  local rc=$?
  [ "$rc" = 0 ] || echo "kernalyse-merge $* exited $rc: $(head -c 300 err.txt)" >&2
  tail -n 1 time.txt
}

# bound NAME K C_MB BYTES ARGS_WITH_@: ARGS with @ replaced by big/ and by small/.
bound() {
  local name=$1 k=$2 c_mb=$3 n=$4
  shift 4
  local big small
  big=$(cost "${@//@/big/}")
  small=$(cost "${@//@/small/}")
  local wall=${big% *} rss=${big#* } rss0=${small#* }
  local grew=$(( (rss - rss0) * 1024 ))
  echo "$name: N = $n bytes, wall $wall s, peak RSS $rss kB (tiny input: $rss0 kB), grew $((grew / n)).$(( (grew % n) * 10 / n )) x N"
  if [ "$check_rss" = 1 ]; then
    expect_eq "$name: RSS growth <= $k * N + $c_mb MB" "$(( grew <= k * n + c_mb * 1048576 ))" "1"
  fi
  # The time bound is on the bytes the reader works through: TIME_N where they differ from the
  # file's (a compressed store inflates its columns).
  local tn=${TIME_N:-$n}
  expect_eq "$name: wall <= 2 s + ${TIME_N:+inflated }N / 200 kB/s" \
    "$("$PY" -c "print(int($wall <= 2 + $tn / 200e3))")" "1"
}
size() { stat -c %s "$1"; }

bound "Kineto, 40 names of 100 kB" 5 16 "$(size big/kineto-names_rank-0.json)" @kineto-names_rank-0.json
bound "Kineto, smallest events" 5 16 "$(size big/kineto-events_rank-0.json)" @kineto-events_rank-0.json
# gzip: N is the inflated size (deflate inflates up to 1032x).
bound "Kineto gzip (N inflated)" 5 16 "$(gzip -dc big/kineto-gzip_rank-0.json.gz | wc -c)" @kineto-gzip_rank-0.json.gz
bound "rocprofv3, smallest dispatches" 5 16 "$(size big/rocprof-events_rank-0.json)" @rocprof-events_rank-0.json
bound "rocprofv3, 40 symbols of 100 kB" 5 16 "$(size big/rocprof-names_rank-0.json)" @rocprof-names_rank-0.json
bound "nsys SQLite, smallest rows" 8 16 "$(size big/nsys_rank-0.sqlite)" @nsys_rank-0.sqlite
bound "power-log CSV" 4 16 "$(size big/power.csv)" @power-trace_rank-0.json --power-log @power.csv
bound "spool" 40 16 "$(size big/spool/rank-0.kspool)" --spool @spool
# The store: identical kernels, numeric columns gzip-compressed. The reader allows 1,100 rows'
# bytes per stored byte of a filtered column (deflate's ratio), so that is its bound.
for d in big small; do
  kernalyse-merge "$d/same_rank-0.json.gz" -o "$d/plain.h5" -q 2>/dev/null
  "$PY" "$SRC/tests/tools/worst_inputs.py" --compress-store "$d/plain.h5" "$d/store.h5" || exit 1
done
# Its time is bounded by the inflated columns' bytes (N inflated, as for gzip above).
inflated=$("$PY" -c '
import h5py, sys
n = 0
def add(name, obj):
    global n
    if isinstance(obj, h5py.Dataset): n += obj.size * obj.dtype.itemsize
h5py.File(sys.argv[1]).visititems(add)
print(n)' big/store.h5)
TIME_N=$inflated bound "store (HDF5), compressed columns" 1100 16 "$(size big/store.h5)" @store.h5
finish
