#!/usr/bin/env bash
# docs/architecture.md's figures cannot drift (docs/architecture.py): no library or tool function
# over 150 lines (universal-ctags), the doc's measured list of functions over 120 lines equals the
# sources', and no room links or includes one listed after it in the doc's folder dependency order.
source "$(dirname "$0")/lib.sh"
command -v ctags-universal >/dev/null || command -v ctags >/dev/null ||
  { fail "universal-ctags not installed (.ci/install-deps)"; finish; exit; }
out=$(/usr/bin/python3 "$SRC/docs/architecture.py" check 2>&1)
expect_eq "docs/architecture.py check: exit code${out:+ ($out)}" "$?" "0"
# The checker must see a long function: one planted in a copy of the sources is reported.
mkdir -p "$TMP/src/docs" "$TMP/src/launch"
cp "$SRC/docs/architecture.py" "$SRC/docs/architecture.md" "$TMP/src/docs/"
{ echo "int planted() {"; for i in $(seq 1 150); do echo "  int x$i = $i;"; done; echo "}"; } > "$TMP/src/launch/planted.cpp"
out=$(/usr/bin/python3 "$TMP/src/docs/architecture.py" check 2>&1)
expect_contains "a planted 152-line function is reported" "$out" "launch/planted.cpp:1: planted is 152 lines (limit 150)"
# ... and a room linking one after it (the HTML page linking the pipeline that runs it).
mkdir -p "$TMP/src/analysis/html" "$TMP/src/analysis/pipeline"
echo 'add_library(kernalyse_analysis x.cpp)' > "$TMP/src/analysis/pipeline/CMakeLists.txt"
echo 'add_library(kernalyse_html x.cpp)
target_link_libraries(kernalyse_html PRIVATE kernalyse_analysis)' > "$TMP/src/analysis/html/CMakeLists.txt"
out=$(/usr/bin/python3 "$TMP/src/docs/architecture.py" check 2>&1)
expect_contains "a link cycle is reported" "$out" "analysis/html/ links kernalyse_analysis of analysis/pipeline/, which comes after it (9 > 8)"
# ... and a file including a header of a room after its own (links alone would not show it).
mkdir -p "$TMP/src/analysis/pipeline/include/kernalyse" "$TMP/src/analysis/html/src"
echo '#pragma once' > "$TMP/src/analysis/pipeline/include/kernalyse/pipeline.h"
echo '#include "kernalyse/pipeline.h"' > "$TMP/src/analysis/html/src/page.cpp"
out=$(/usr/bin/python3 "$TMP/src/docs/architecture.py" check 2>&1)
expect_contains "an include cycle is reported" "$out" "analysis/html/src/page.cpp (in analysis/html/) includes kernalyse/pipeline.h of analysis/pipeline/, which comes after it (9 > 8)"
finish
