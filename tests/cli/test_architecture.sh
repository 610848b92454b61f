#!/usr/bin/env bash
# docs/architecture.md's figures cannot drift (docs/architecture.py): no library or tool function
# over 150 lines (universal-ctags), the doc's measured list of functions over 120 lines equals the
# sources', and no folder links one listed after it in the doc's folder dependency order.
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
# ... and a folder linking one after it (analysis/ linking collector/'s spool library).
mkdir -p "$TMP/src/analysis" "$TMP/src/collector"
echo 'add_library(kernalyse_spool STATIC x.cpp)' > "$TMP/src/collector/CMakeLists.txt"
echo 'add_library(kernalyse_analysis x.cpp)
target_link_libraries(kernalyse_analysis PRIVATE kernalyse_spool)' > "$TMP/src/analysis/CMakeLists.txt"
out=$(/usr/bin/python3 "$TMP/src/docs/architecture.py" check 2>&1)
expect_contains "a cycle is reported" "$out" "analysis/ links kernalyse_spool of collector/, which comes after it (3 > 2)"
finish
