#!/usr/bin/env bash
# The h5py -> pandas recipe in docs/store.md, run verbatim on a store written by kernalyse-merge,
# works with Debian's python3-h5py/pandas; h5dump reads the file too.
source "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3  # Debian's packages live there, not in the pyenv python3 on PATH
if ! "$PY" -c 'import h5py, pandas' 2>/dev/null; then
  echo "SKIP: $PY lacks h5py/pandas (apt-get install python3-h5py python3-pandas)"
  exit 77
fi

"$BIN/kernalyse-tracegen" --ranks 2 --kernels 2000 --steps 3 --out "$TMP/tr" >"$TMP/gen.log" 2>&1
expect_eq "tracegen exit code" "$?" "0"
"$BIN/kernalyse-merge" "$TMP/tr" -o "$TMP/run.h5" -q >"$TMP/merge.log" 2>&1
expect_eq "merge exit code" "$?" "0"
if [ ! -f "$TMP/run.h5" ]; then
  cat "$TMP/gen.log" "$TMP/merge.log"
  fail "no store written"
  finish
  exit
fi

# The recipe exactly as documented: the python block between the recipe markers.
sed -n '/^<!-- recipe -->$/,/^<!-- \/recipe -->$/p' "$SRC/docs/store.md" |
  grep -v -e '^<!--' -e '^```' >"$TMP/recipe.py"
expect_contains "recipe found in docs/store.md" "$(cat "$TMP/recipe.py")" 'f["strings"].asstr()'

cat "$TMP/recipe.py" - >"$TMP/check.py" <<'PY'

assert len(df) > 0, "no rows"
assert df["start_ns"].dtype == "int64", df["start_ns"].dtype
assert df["end_ns"].dtype == "int64", df["end_ns"].dtype
assert df["name"].map(lambda s: isinstance(s, str) and s != "").all(), "empty or non-str names"
assert set(df["rank"].unique()) == {0, 1}, set(df["rank"].unique())
assert (df["end_ns"] >= df["start_ns"]).all(), "negative durations"
assert int((df["kind"] == 0).sum()) == 2 * 2000, int((df["kind"] == 0).sum())
assert list(ranks["rank"]) == [0, 1], list(ranks["rank"])
assert all(isinstance(s, str) for s in ranks["source"]), "ranks.source not str"
assert kernel_ns.sum() > 0 and kernel_ns.index.map(lambda s: s != "").all()
assert f.attrs["schema_version"] == 3
assert isinstance(clock, str) and "clock" in clock, clock
assert f.attrs["emulated"] == 1, "tracegen data must be marked emulated"
print("rows", len(df), "kernels", len(kernel_ns))
PY
out=$(cd "$TMP" && "$PY" check.py 2>&1)
rc=$?
expect_eq "recipe runs and its result checks out ($out)" "$rc" "0"

if command -v h5dump >/dev/null; then
  hdr=$(h5dump -H "$TMP/run.h5" 2>&1)
  expect_eq "h5dump -H exit code" "$?" "0"
  expect_contains "h5dump sees /activities" "$hdr" 'GROUP "activities"'
  expect_contains "h5dump sees schema_version" "$hdr" 'ATTRIBUTE "schema_version"'
  expect_contains "h5dump sees int64 start_ns" "$hdr" 'H5T_STD_I64LE'
else
  echo "note: h5dump not installed (hdf5-tools); skipped that check"
fi
finish
