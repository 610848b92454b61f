#!/usr/bin/env bash
# The HTML report in a real browser (headless Chromium): reports of (a) the shared trace_filter
# pair, (b) an emulated 4-rank kernalyse-run job with a slow rank (and its rank 1 alone) and
# (c) a hand-built store with GPU memory counters. Each page must load with no console message
# at all (Chromium's log, and the page's own error hook read back from the DOM), draw every chart
# it has data for (the page's self-check: data points and SVG elements per chart, each > 0), and
# make no network request (Chromium's net log: no request initiated by the page). Screenshots
# are kept in BUILD/artifacts/report-*.png.
. "$(dirname "$0")/lib.sh"
CHROMIUM=$(command -v chromium || command -v chromium-browser || true)
if [ -z "$CHROMIUM" ]; then echo "SKIP: chromium not installed (.ci/install-deps installs it)"; exit 77; fi
ART=$(cd "$BIN/.." && pwd)/artifacts
mkdir -p "$ART"
cd "$TMP" || exit 1

# chromium ARGS...: headless, offline, a fresh profile each time.
chromium_run() {
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
    --disable-component-update --disable-sync --no-first-run --disable-quic --hide-scrollbars \
    --user-data-dir="$(mktemp -d "$TMP/profile.XXXXXX")" --virtual-time-budget=10000 "$@"
}

# check NAME FILE CHARTS EMULATED: loads FILE, checks it, saves the screenshot.
check() {
  local name=$1 file=$2 charts=$3 emulated=$4 url="file://$TMP/$2"
  chromium_run --enable-logging=stderr --v=1 --log-net-log="$TMP/$name.net.json" --dump-dom "$url" \
    >"$name.dom.html" 2>"$name.chromium.log"
  expect_eq "$name: chromium exit code" "$?" "0"
  local console
  console=$(grep -E ':CONSOLE[:(]' "$name.chromium.log")
  expect_eq "$name: no console messages (errors, CSP violations, warnings)" "$console" ""
  /usr/bin/python3 - "$name.dom.html" "$charts" "$emulated" >"$name.check.txt" <<'PY'
import html, json, re, sys
dom, want, emulated = open(sys.argv[1]).read(), sys.argv[2].split(","), sys.argv[3] == "yes"
def attr(a):
    m = re.search(a + r'="([^"]*)"', dom)
    return html.unescape(m.group(1)) if m else None
print("ready", attr("data-kx-ready"))
print("errors", attr("data-kx-errors"))
charts = json.loads(attr("data-kx-charts") or "{}")
for c in want:
    x = charts.get(c, {})
    ok = x.get("status") == "drawn" and x.get("points", 0) > 0 and x.get("svg", 0) > 0
    print("chart", c, "ok" if ok else "bad", json.dumps(x))
print("emulated label", "yes" if 'id="emulated"' in dom else "no", "want", "yes" if emulated else "no")
PY
  local out
  out=$(cat "$name.check.txt")
  expect_contains "$name: page script finished" "$out" "ready 1"
  expect_contains "$name: no JS errors recorded in the page" "$out" "errors []"
  local c
  for c in ${charts//,/ }; do
    expect_contains "$name: chart $c drawn with data" "$(grep "^chart $c " "$name.check.txt")" " ok "
  done
  if [ "$emulated" = yes ]; then
    expect_contains "$name: emulated label visible" "$out" "emulated label yes"
  else
    expect_contains "$name: no emulated label" "$out" "emulated label no"
  fi
  grep '^chart' "$name.check.txt"
  # Requests the page initiated (the browser's own service requests have no origin).
  local net
  net=$(/usr/bin/python3 - "$name.net.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
types = {v: k for k, v in d["constants"]["logEventTypes"].items()}
for e in d["events"]:
    p = e.get("params", {})
    if types.get(e["type"]) == "URL_REQUEST_START_JOB" and "url" in p and \
            p.get("initiator") != "not an origin" and not p["url"].startswith(("file:", "data:")):
        print(p["url"])
PY
)
  expect_eq "$name: the page made no network request" "$net" ""
  rm -f "$ART/report-$name.png"
  chromium_run --window-size=1400,4000 --screenshot="$ART/report-$name.png" "$url" >/dev/null 2>&1
  expect_eq "$name: screenshot saved ($ART/report-$name.png)" \
    "$( [ "$(stat -c %s "$ART/report-$name.png" 2>/dev/null || echo 0)" -gt 20000 ] && echo yes)" "yes"
}

all=timeline,stragglers,critpath,overlap,gaps,kernels
# (a) Real traces: 2 ranks of HTA's DLRM job.
if [ -d "$TRACES/hta/trace_filter" ]; then
  kernalyse-merge "$TRACES/hta/trace_filter" --html trace_filter.html -q
  expect_eq "trace_filter: report written" "$?" "0"
  check trace_filter trace_filter.html "$all,ranges" no
else
  echo "SKIP (part): $TRACES/hta/trace_filter absent (shared traces not available)"
fi

# (b) The emulated 4-rank tensor-parallel job, rank 2 slow.
use_mpi
# Slow factor 2 at time scale 4: ~7.8 ms late per collective, above a loaded machine's stalls
# (as in test_run_mpi.sh).
mpirun -n 4 "$BIN/kernalyse-run" -q -o emu.h5 "$BIN/vicuna_tp" --layers 4 --steps 6 --slow-rank 2 \
  --slow-factor 2 --time-scale 4 >/dev/null 2>mpirun.err
expect_eq "emulated run: exit code" "$?" "0"
kernalyse-merge emu.h5 --html emulated.html -q
expect_eq "emulated: report written" "$?" "0"
expect_contains "emulated: root cause names rank 2" "$(grep -o 'Root cause:</b> [^<]*' emulated.html)" "rank 2 arrived last"
check emulated emulated.html "$all,ranges" yes
# One rank of it: no cross-rank heatmap, the rest drawn, still no error.
kernalyse-merge emu.h5 --html rank1.html --rank 1 -q
check rank1 rank1.html timeline,critpath,overlap,gaps,kernels yes

# (c) GPU memory counters (hand-built store).
"$BIN/kernalyse_html_fixture" counters.html
expect_eq "fixture: report written" "$?" "0"
check counters counters.html "$all,memory,power" yes

# (d) An all-to-all job (kernalyse-tracegen --nccl-ops): the all-to-all heat map drawn too.
kernalyse-tracegen --nccl-ops --ranks 4 --steps 6 --ranks-per-host 2 --out a2a 2>/dev/null
kernalyse-merge a2a --html alltoall.html -q
expect_eq "alltoall: report written" "$?" "0"
check alltoall alltoall.html "$all,alltoall" yes
finish
