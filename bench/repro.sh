#!/usr/bin/env bash
# Replays issue 19's reproducers (../shared/fuzz-repro, README.txt there) through kernalyse-merge
# and prints one Markdown table row per case: exit status, wall time, max RSS (/usr/bin/time -v),
# the number of stderr lines and the first one, whether a temporary (*.tmp*) was left, and
# whether the outcome is the expected one (exit 2 with one line for bad input, exit 0 for valid
# input). The acceptance (docs/fuzzing.md): expected outcome, < 5 s, < 500 MB.
# Usage: bench/repro.sh [REPRO_DIR]   (M=path/to/kernalyse-merge, default build/bin)
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
R=${1:-$src/../shared/fuzz-repro}
M=${M:-$src/build/bin/kernalyse-merge}
G=${G:-$(dirname "$M")/kernalyse-tracegen}
[ -d "$R" ] || { echo "repro.sh: no reproducer directory $R" >&2; exit 2; }
[ -x "$M" ] || { echo "repro.sh: no kernalyse-merge at $M" >&2; exit 2; }
R=$(cd "$R" && pwd)
work=$(mktemp -d /tmp/kernalyse-repro.XXXXXX)
trap 'rm -rf "$work"' EXIT
(cd "$work" && cp "$R/F16-memory-one-unit/gen.py" . && python3 gen.py) || exit 2

echo "| case | command | expected | exit | wall s | max RSS MB | stderr lines | first stderr line | tmp left | ok |"
echo "|---|---|---|---|---|---|---|---|---|---|"
# run NAME EXPECTED_EXIT ARGS... (run in a fresh directory: outputs and temporaries land there)
run() {
  local name=$1 want=$2
  shift 2
  local d="$work/run-$name"
  rm -rf "$d" && mkdir -p "$d"
  (cd "$d" && /usr/bin/time -v -o "$d/.time" "$M" "$@" >"$d/.out" 2>"$d/.err" </dev/null)
  local rc=$?
  report "$name" "$want" "$rc" "$d" "$*"
}
report() {
  local name=$1 want=$2 rc=$3 d=$4 cmd=$5
  local wall rss lines first tmp ok
  wall=$(awk -F': ' '/Elapsed \(wall clock\)/{n=split($2,a,":"); s=0; for(i=1;i<=n;i++) s=s*60+a[i]; printf "%.2f", s}' "$d/.time")
  rss=$(awk -F': ' '/Maximum resident set size/{printf "%.0f", $2/1024}' "$d/.time")
  lines=$(grep -c . "$d/.err")
  first=$(head -1 "$d/.err" | sed "s|$R/||g; s|$work/||g; s/|/\\\\|/g" | cut -c1-160)
  tmp=$(find "$d" -name '*.tmp*' | wc -l)
  ok=yes
  [ "$rc" = "$want" ] || ok=NO
  [ "$want" != 2 ] || [ "$lines" = 1 ] || ok=NO
  awk -v w="$wall" -v m="$rss" 'BEGIN{exit !(w < 5 && m < 500)}' || ok=NO
  [ "$tmp" = 0 ] || ok=NO
  cmd=$(echo "$cmd" | sed "s|$R/||g; s|$work/||g; s/|/\\\\|/g")
  echo "| $name | \`$cmd\` | $want | $rc | $wall | $rss | $lines | $first | $tmp | $ok |"
}

run F1 0 "$R/F1-ts-dur-overflow/rank-0.json" -o out.h5
run F2 2 "$R/F2-basetime-overflow/rank-0.json" -o out.h5
run F3 0 "$R/F3-nccl-bytes-overflow/rank-0.json" -o out.h5
run F4 2 "$R/F4-filename-rank-overflow/rank99999999999999999999.json" -o out.h5
run F5a 2 "$R/F5-rank-wrap/rank4294967297.json" -o out.h5
run F5b 2 "$R/F5-rank-wrap/dinfo-4294967296.json" -o out.h5
run F6 2 --spool "$R/F6-spool-name-overflow" -o out.h5
run F7 2 --spool "$R/F7-spool-name-intmax" -o out.h5
run F8a 2 --spool "$R/F8-spool-world/name-rank-3M" -o out.h5
run F8b 2 --spool "$R/F8-spool-world/meta-world-50M" -o out.h5
run F9 0 --spool "$R/F9-spool-overflow" -o out.h5
run F10 0 --spool "$R/F10-spool-misaligned" -o out.h5
run F11 0 "$R/F11-surrogate-key/rank-0.json" -o out.h5
run F12 2 "$R/F12-bracket-mismatch/rank-0.json" -o out.h5
run F13a 0 "$R/F13-html-span-overflow/rank-0.json" --html r.html
run F13b 2 "$R/F13-html-span-overflow/store-activity-start-int64min.h5" --html r.html
run F14 0 "$R/F14-comm-regex-long-name/rank-0-name100000.json" --comm-regex '.*allreduce'
run F15a 2 "$R/F15-corrupt-store-abort/length_error.h5" --all
run F15b 2 "$R/F15-corrupt-store-abort/huge_alloc.h5" --all
run F16a 2 "$work/rank-0-wsbomb.json.gz" -o out.h5
run F16b 2 "$work/rank-0-sparse2g-string.json" -o out.h5
run F17 2 "$R/F17-corrupt-store-rss/rss16g.h5" --all
# F18: gzip through a pipe.
d="$work/run-F18"
mkdir -p "$d"
(cd "$d" && gzip -c "$R/F18-gzip-pipe/rank-0.json" | /usr/bin/time -v -o "$d/.time" "$M" /dev/stdin -o out.h5 >"$d/.out" 2>"$d/.err")
report F18 0 $? "$d" "gzip -c F18-gzip-pipe/rank-0.json | kernalyse-merge /dev/stdin -o out.h5"
run F19 0 --spool "$R/F19-spool-empty-block" -o out.h5
for f in overflow1 overflow2 leak456; do
  run "HDF5-$f" 2 "$R/HDF5-lib-overflow/$f.h5" --all
done

# F20: SIGTERM while the store is written (sent once its temporary exists, then after a further
# delay): no temporary and no partial output may remain.
if [ -x "$G" ]; then
  "$G" --ranks 1 --kernels 2000000 --steps 10 --out "$work/big" >/dev/null 2>&1
  left=0 tries=0 killed=0 done_=0
  for delay in 0 0 0.05 0.1 0.2 0.3 0.5 1.0; do
    d="$work/run-F20"
    rm -rf "$d" && mkdir -p "$d"
    "$M" "$work/big/rank-0.json" -o "$d/out.h5" --progress off -q &
    p=$!
    while kill -0 "$p" 2>/dev/null && [ ! -e "$d/out.h5.tmp.$p" ]; do sleep 0.01; done
    sleep "$delay"
    kill -TERM "$p" 2>/dev/null
    wait "$p"
    [ $? = 143 ] && killed=$((killed + 1))
    [ -e "$d/out.h5" ] && done_=$((done_ + 1))
    tries=$((tries + 1))
    left=$((left + $(find "$d" -name '*.tmp*' | wc -l)))
  done
  echo
  echo "F20: SIGTERM 0-1 s after the store's temporary appeared (2 M-kernel trace), $tries runs ($killed killed by it, $done_ finished first): $left temporary file(s) left"
fi
