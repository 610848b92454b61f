#!/usr/bin/env bash
# --html (docs/report.md): one self-contained file (no http(s) sources, the data island, the
# emulated label), the size budget (8 ranks; the size must not grow with the number of kernels:
# 8 × 20 k and 8 × 50 k kernels give reports within 64 kB of each other, both ≤ 5 MB; the full
# 8 × 1 M figure is in docs/benchmarks.md), --rank/--from/--to, and bad outputs: an unwritable
# path or an existing file give one line naming the file, exit code 2 and no file.
. "$(dirname "$0")/lib.sh"
cd "$TMP" || exit 1
budget=$((5 * 1000 * 1000))
size() { stat -c %s "$1"; }

kernalyse-tracegen --ranks 8 --kernels 20000 --steps 5 --minify --out small >/dev/null 2>&1
kernalyse-merge small -o small.h5 -q
kernalyse-merge small.h5 --html small.html 2>err.txt
expect_eq "small: exit code" "$?" "0"
expect_contains "small: says what it wrote" "$(cat err.txt)" "wrote small.html ("
html=$(cat small.html)
expect_contains "has the data island" "$html" '<script type="application/json" id="kx-data">'
expect_contains "has the charting library inlined" "$html" "echarts"
expect_contains "tracegen data is labelled emulated, visibly" "$html" 'class="emulated" id="emulated">EMULATED DATA'
expect_contains "no fetches allowed (CSP)" "$html" "default-src 'none'"
expect_eq "no external src/href" "$(grep -Eoi '(src|href)[[:space:]]*=[[:space:]]*["'"'"']?(https?:)?//' small.html | wc -l)" "0"
expect_eq "no <link> elements" "$(grep -Eoi '<link[[:space:]]' small.html | wc -l)" "0"
for t in ranks timeline_lanes stragglers_collectives overlap gap_histogram kernel_summary; do
  expect_contains "table $t has its anchor" "$html" "id=\"t-$t\""
  expect_contains "a chart links to table $t" "$html" "href=\"#t-$t\""
done
expect_contains "root-cause sentence" "$html" "arrived last at"

# Size: 2.5x the kernels, about the same report (timeline bins and heatmap columns are capped).
kernalyse-tracegen --ranks 8 --kernels 50000 --steps 5 --minify --out big >/dev/null 2>&1
kernalyse-merge big -o big.h5 -q
rm -rf big
kernalyse-merge big.h5 --html big.html -q
expect_eq "big: exit code" "$?" "0"
s_small=$(size small.html) s_big=$(size big.html)
echo "report sizes: 8 x 20k kernels $s_small B, 8 x 50k kernels $s_big B"
expect_eq "8 ranks x 50 k kernels: within the 5 MB budget ($s_big B)" "$((s_big <= budget))" "1"
d=$((s_big - s_small))
expect_eq "size does not grow with kernels (difference ${d#-} B <= 64 kB)" "$(( ${d#-} <= 65536 ))" "1"

# Filters: --rank keeps one rank; --from/--to narrow the timeline window.
kernalyse-merge small.h5 --html r3.html --rank 3 -q
expect_contains "--rank 3: scope" "$(cat r3.html)" '"scope":"rank 3'
kernalyse-merge small.h5 --html win.html --from 1ms --to 2ms -q
expect_contains "--from/--to: timeline starts at 1 ms" "$(cat win.html)" '"t0_ns":1000000'

# Bad outputs.
kernalyse-merge small.h5 --html /nonexistent-dir/r.html 2>err.txt
expect_eq "unwritable path: exit code 2" "$?" "2"
expect_eq "unwritable path: one line" "$(wc -l <err.txt)" "1"
expect_contains "unwritable path: names the file" "$(cat err.txt)" "cannot create /nonexistent-dir/r.html"
mkdir ro && chmod 555 ro
if [ "$(id -u)" != 0 ]; then  # root writes anywhere
  kernalyse-merge small.h5 --html ro/r.html 2>err.txt
  expect_eq "read-only dir: exit code 2" "$?" "2"
fi
expect_eq "no partial or temporary file left" "$(ls /nonexistent-dir 2>/dev/null; ls ro | wc -l)" "0"
kernalyse-merge small.h5 --html small.html 2>err.txt
expect_eq "existing file: exit code 2" "$?" "2"
expect_contains "existing file: says so" "$(cat err.txt)" "small.html: exists (use --force"
kernalyse-merge small.h5 --html small.html --force -q
expect_eq "--force replaces it" "$?" "0"
expect_eq "no temporary files left" "$(ls | grep -c '\.tmp\.')" "0"
finish
