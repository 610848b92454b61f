#!/usr/bin/env bash
# Fails on clang-format drift: every C/C++ file of the source tree must be formatted as the
# repo's .clang-format says (clang-format 14, as Debian 12 ships it). Lists the files that differ
# and how many lines would change. Usage: tests/cli/test_format.sh [REPO_ROOT]
# Registered in ctest (cli.test_format), so CI fails on drift.
set -u
root=${1:-${KERNALYSE_SRC:-$(cd "$(dirname "$0")/../.." && pwd)}}
cd "$root" || { echo "FAIL - no repository at $root"; exit 1; }
cf=$(command -v clang-format-14 || true)
if [ -z "$cf" ]; then
  echo "FAIL - clang-format-14 not found (apt-get install clang-format-14)"
  exit 1
fi
[ -f .clang-format ] || { echo "FAIL - $root/.clang-format missing"; exit 1; }
# The files are found by walking the tree, not with git: a source tarball is no git checkout.
# Left out: what .gitignore leaves out (build trees at the top, .cache, bench/out, .gpu-debs),
# any other build tree (a folder holding CMakeCache.txt), .git, and vendored third-party code
# (not ours to format; none is C++ today, the rule keeps it so).
mapfile -t files < <(find . \( -name .git -o -path './build*' -o -path ./.cache -o -path ./bench/out \
  -o -path ./.gpu-debs -o -name vendor -o -exec test -e '{}/CMakeCache.txt' \; \) -prune \
  -o -type f \( -name '*.c' -o -name '*.cc' -o -name '*.cpp' -o -name '*.cu' -o -name '*.h' \
  -o -name '*.hpp' \) -print | sed 's|^\./||' | LC_ALL=C sort)
if [ "${#files[@]}" -eq 0 ]; then
  echo "FAIL - no C/C++ files found under $root"
  exit 1
fi
drift=0
for f in "${files[@]}"; do
  n=$("$cf" --style=file "$f" | diff "$f" - | grep -c '^[<>]')
  if [ "$n" -gt 0 ]; then
    echo "drift: $f ($n lines differ; fix: $cf -i $f)"
    drift=$((drift + 1))
  fi
done
echo "${#files[@]} files checked, $drift differ from .clang-format"
[ "$drift" -eq 0 ]
