"""kernalyse's Python module (docs/python.md): tables, every analysis of the registry, the report and
exports, against kernalyse-merge's own output and h5py's reading of the store."""
import json
import math
import os
import threading
import time

import numpy as np
import pandas as pd
import pytest

import kernalyse
from conftest import merge


def same(a, b):
    """A DataFrame cell and a JSON value are the same number, text or missing value."""
    if b is None:
        return a is None or a is pd.NA or (isinstance(a, float) and math.isnan(a))
    if isinstance(b, str) or isinstance(a, str):
        return a == b
    if isinstance(b, (dict, list)):
        return True  # nested JSON (not a table cell)
    return a is not pd.NA and abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))


def test_every_registry_analysis_is_a_method():
    names = list(kernalyse.analyses()["name"])
    assert {"summary", "gaps", "overlap", "breakdown", "idle", "stragglers",
            "critical-path"} <= set(names)
    for n in names:
        assert callable(getattr(kernalyse.Run, n.replace("-", "_"))), n


@pytest.mark.parametrize("name", [n for n in kernalyse.analyses()["name"]])
def test_frames_equal_the_cli_json(gen, name):
    """Each analysis's DataFrames have the JSON output's column names and values."""
    r = kernalyse.open(gen / "run.h5", quiet=True)
    res = r.analyse(name)
    _, out, _ = merge(gen / "run.h5", f"--{name}", "--json", "-q")
    doc = json.loads(out)
    tables = [(k, df) for k, df, j in zip(res.keys, res, res.in_json) if j]
    assert tables or res.json, f"{name}: no tables and no JSON keys"
    for key, df in tables:
        assert key in doc, f"{name}: table {key} not in the CLI's JSON"
        rows = doc[key]
        assert len(df) == len(rows), f"{name}/{key}: {len(df)} rows, CLI {len(rows)}"
        if rows:
            assert list(df.columns) == list(rows[0].keys()), f"{name}/{key} columns"
        for i, row in enumerate(rows):
            for c, v in row.items():
                got = df[c].iloc[i]
                got = None if got is pd.NA else got
                assert same(got, v), f"{name}/{key} row {i} {c}: {got!r}, CLI {v!r}"
    # The extra keys (the ledger's per-collective list, ...) are the CLI's too.
    for k, v in res.json.items():
        assert k in doc, f"{name}: JSON key {k} not in the CLI's"
        assert json.dumps(v, sort_keys=True) == json.dumps(doc[k], sort_keys=True), k


def test_tables_are_the_store_columns_without_copy(gen):
    h5py = pytest.importorskip("h5py")
    r = kernalyse.open(gen / "run.h5", quiet=True)
    a = r.activities()
    with h5py.File(gen / "run.h5", "r") as f:
        strings = [s.decode() if isinstance(s, bytes) else s for s in f["strings"][()]]
        g = f["activities"]
        assert len(a) == len(g["start_ns"]) > 0
        for c in ("rank", "device", "stream", "start_ns", "end_ns", "correlation", "step"):
            assert np.array_equal(a[c].to_numpy(), g[c][()]), c
        assert list(a["name"].astype(str)) == [strings[i] for i in g["name_id"][()]]
    assert a["start_ns"].dtype == np.int64 and a["end_ns"].dtype == np.int64
    assert set(a["kind"].cat.categories) >= {"kernel", "memcpy"}
    assert (a["category"] == "communication").any()
    # No copy: the arrays view the store's vectors (not owning, read-only).
    start = a["start_ns"].to_numpy()
    assert not start.flags.owndata and not start.flags.writeable and start.base is not None
    with pytest.raises(ValueError):
        start[0] = 0
    # The arrays outlive the run object.
    first = int(start[0])
    del r, a
    import gc
    gc.collect()
    assert int(start[0]) == first
    r = kernalyse.open(gen / "run.h5", quiet=True)
    for t in ("launches", "annotations", "nccl", "counters", "ops"):
        df = getattr(r, t)()
        assert isinstance(df, pd.DataFrame)
    assert len(r.nccl()) > 0 and "collective" in r.nccl().columns
    ranks = r.ranks()
    assert list(ranks["rank"]) == [0, 1, 2, 3] and "clock_method" in ranks.columns


def test_trace_input_and_results_by_key(gen):
    r = kernalyse.open(gen / "traces", quiet=True)  # a folder of Kineto files
    s = r.stragglers()
    assert s.keys[:2] == ["stragglers_collectives", "stragglers_ranks"]
    assert s["stragglers_ranks"] is s[1]
    assert len(s[1]) == 4 and s.notes
    assert s.json["stragglers"]["matched"] > 0
    with pytest.raises(KeyError):
        s["nope"]
    g = r.gaps(hist_min=1, hist_max=100, bins=5, rank=1)
    assert set(g["gap_summary"]["rank"]) == {1} if "gap_summary" in g.keys else True


def test_options_are_the_cli_flags(gen):
    r = kernalyse.open(gen / "run.h5", quiet=True)
    top = r.summary(top=3, sort="count")
    _, out, _ = merge(gen / "run.h5", "--summary", "--top", "3", "--sort", "count", "--json", "-q")
    assert len(top["kernel_summary"]) == len(json.loads(out)["kernel_summary"]) == 3
    # open()'s options are every call's defaults; a call's own win.
    r1 = kernalyse.open(gen / "run.h5", quiet=True, rank=1)
    assert set(r1.breakdown()["breakdown"]["rank"]) == {1}
    assert set(r1.breakdown(rank=2)["breakdown"]["rank"]) == {2}


def cli_line(*args):
    code, _, err = merge(*args, check=False)
    assert code == 2, (args, code, err)
    return err.splitlines()[0].removeprefix("kernalyse-merge: ")


@pytest.mark.parametrize("kwargs,flags", [
    ({"sort": "bogus"}, ["--summary", "--sort", "bogus"]),
    ({"gap_sort": "x"}, ["--gaps", "--gap-sort", "x"]),
    ({"hist_min": 5, "hist_max": 1}, ["--gaps", "--hist-min", "5", "--hist-max", "1"]),
    ({"bins": 0}, ["--gaps", "--bins", "0"]),
    ({"rank": 9}, ["--gaps", "--rank", "9"]),
    ({"step": 99}, ["--gaps", "--step", "99"]),
    ({"top": "many"}, ["--gaps", "--top", "many"]),
    ({"compat": "nsight"}, ["--gaps", "--compat", "nsight"]),
    ({"peaks": "/nonexistent/peaks.json"}, ["--roofline", "--peaks", "/nonexistent/peaks.json"]),
])
def test_bad_analysis_options_raise_the_cli_line(gen, kwargs, flags):
    r = kernalyse.open(gen / "run.h5", quiet=True)
    method = flags[0][2:]
    with pytest.raises(kernalyse.Error) as e:
        r.analyse(method, **kwargs)
    assert str(e.value) == cli_line(gen / "run.h5", *flags)
    assert isinstance(e.value, ValueError)


def test_bad_what_if_and_regex_raise_the_cli_line(gen):
    r = kernalyse.open(gen / "run.h5", quiet=True)
    with pytest.raises(kernalyse.Error) as e:
        r.critical_path(what_if="rank=x:median")
    assert str(e.value) == cli_line(gen / "run.h5", "--what-if", "rank=x:median")
    with pytest.raises(kernalyse.Error) as e:
        kernalyse.open(gen / "traces", comm_regex="(")
    assert str(e.value) == cli_line(gen / "traces", "--comm-regex", "(")
    with pytest.raises(kernalyse.Error) as e:
        kernalyse.open(gen / "run.h5", align="sometimes")
    assert str(e.value) == cli_line(gen / "run.h5", "--align", "sometimes")


def test_bad_inputs_raise_the_cli_line(gen, tmp_path):
    """The importers the fuzz targets exercise (Kineto, nsys, rocprof, the store reader) are the
    module's too: a bad file gives the CLI's one line."""
    cases = {"missing.json": None, "empty.json": b"", "bad.json": b'{"traceEvents": [',
             "notgzip.json.gz": b"\x1f\x8bxx", "bad.sqlite": b"SQLite format 3\x00" + b"\x00" * 80,
             "bad.h5": b"\x89HDF\r\n\x1a\n" + b"\x00" * 100}
    for name, content in cases.items():
        p = tmp_path / name
        if content is not None:
            p.write_bytes(content)
        with pytest.raises(kernalyse.Error) as e:
            kernalyse.open(p)
        assert str(e.value) == cli_line(p), name
        assert "\n" not in str(e.value) and str(p) in str(e.value), name


def test_null_bytes_and_wrong_types_are_refused(gen):
    """A NUL would end the C string early (another file, another value): refused, as Python's
    own open() refuses it."""
    with pytest.raises(kernalyse.Error, match="null byte"):
        kernalyse.open(str(gen / "run.h5") + "\0.json")
    with pytest.raises(kernalyse.Error, match="null byte"):
        kernalyse.read_table(str(gen / "run.h5") + "\0x")
    r = kernalyse.open(gen / "run.h5", quiet=True)
    with pytest.raises(kernalyse.Error, match="--comm-regex: embedded null byte"):
        kernalyse.open(gen / "run.h5", comm_regex="nccl\0x")
    with pytest.raises(kernalyse.Error, match="null byte"):
        r.critical_path(what_if="rank=1:median\0")
    with pytest.raises(TypeError, match="path must be"):
        kernalyse.open(42)


def test_unknown_keyword_is_a_type_error(gen):
    r = kernalyse.open(gen / "run.h5", quiet=True)
    with pytest.raises(TypeError, match="hist_mni"):
        r.gaps(hist_mni=3)
    with pytest.raises(TypeError):
        kernalyse.open(gen / "run.h5", gaps=True)


def test_compat_hta_needs_recorded_clocks(gen, tmp_path):
    # Rank 1's clock 5 ms off: --align auto moves it; --compat hta then needs the recorded ones.
    import subprocess
    from conftest import tool
    d = tmp_path / "skew"
    subprocess.run([tool("kernalyse-tracegen"), "--ranks", "2", "--kernels", "200", "--steps", "3",
                    "--clock-skew-us", "1:5000", "--out", str(d)], check=True,
                   capture_output=True)
    r = kernalyse.open(d, quiet=True)
    if r.ranks()["clock_offset_ns"].abs().max() == 0:
        pytest.skip("the inference kept the recorded clocks here")
    with pytest.raises(kernalyse.Error, match="compat='hta'"):
        r.overlap(compat="hta")
    h = kernalyse.open(d, quiet=True, compat="hta")
    _, out, _ = merge(d, "--compat", "hta", "--overlap", "--json", "-q")
    assert list(h.overlap()["overlap"]["overlap_pct"].round(6)) == \
        [round(x["overlap_pct"], 6) for x in json.loads(out)["overlap"]]


def test_gil_is_released_while_the_library_works(tmp_path):
    """While a thread imports traces and analyses them, this thread keeps running."""
    import subprocess
    from conftest import tool
    d = tmp_path / "big"
    subprocess.run([tool("kernalyse-tracegen"), "--ranks", "4", "--kernels", "40000", "--steps",
                    "4", "--out", str(d)], check=True, capture_output=True)

    def work():
        kernalyse.open(d, quiet=True).critical_path()

    t0 = time.perf_counter()
    work()
    alone = time.perf_counter() - t0
    th = threading.Thread(target=work)
    gaps, last = [], time.perf_counter()
    th.start()
    while th.is_alive():
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
        time.sleep(0.001)
    th.join()
    # Holding the GIL through the import or the analysis would stall this loop for all of it.
    assert alone > 0.2, f"the work takes {alone:.2f} s: too short to tell"
    assert max(gaps) < 0.4 * alone, (max(gaps), alone)


def test_report_and_exports(gen, tmp_path):
    r = kernalyse.open(gen / "run.h5", quiet=True)
    h = r.report()
    assert "<html" in h.text.lower() and "echarts" in h.text.lower()
    assert h._repr_html_().startswith("<iframe srcdoc=")
    r.report(tmp_path / "r.html")
    assert (tmp_path / "r.html").stat().st_size == len(h.text.encode())
    with pytest.raises(kernalyse.Error) as e:  # never over an existing file without force
        r.report(tmp_path / "r.html")
    assert str(e.value) == cli_line(gen / "run.h5", "--html", tmp_path / "r.html")
    st = r.export_perfetto(tmp_path / "t.json")
    assert st["events"] > 0 and st["flows"] > 0
    assert json.load(open(tmp_path / "t.json"))["traceEvents"]
    st = r.export_kineto(tmp_path / "k")
    assert st["files"] == 4 and len(os.listdir(tmp_path / "k")) == 4
    r.save(tmp_path / "copy.h5")
    c = kernalyse.open(tmp_path / "copy.h5", quiet=True)
    assert len(c.activities()) == len(r.activities())
    assert c.summary()[0].equals(r.summary()[0])
    with pytest.raises(kernalyse.Error):
        r.save(tmp_path / "copy.h5")


def test_hta_view_table(gen):
    r = kernalyse.open(gen / "traces", quiet=True, compat="hta")
    v = r.activities(view="hta")
    # HTA's integer µs: each rank's times are its base plus whole µs.
    assert len(v) > 0 and (v.groupby("rank")["start_ns"].agg(lambda x: (x % 1000).nunique()) == 1).all()
    with pytest.raises(kernalyse.Error, match="view must be"):
        r.activities(view="nsys")


def test_read_table_alone(gen, tmp_path):
    r = kernalyse.open(gen / "run.h5", quiet=True, align="off")
    for t in ("activities", "launches", "nccl", "ops"):
        a = kernalyse.read_table(gen / "run.h5", t)
        b = getattr(r, t)()
        assert list(a.columns) == list(b.columns), t
        pd.testing.assert_frame_equal(a.astype({c: str for c in a.select_dtypes("category")}),
                                      b.astype({c: str for c in b.select_dtypes("category")}))
        assert not a.iloc[:, 0].to_numpy().flags.owndata
    with pytest.raises(kernalyse.Error, match="no table 'act'"):
        kernalyse.read_table(gen / "run.h5", "act")
    (tmp_path / "x.h5").write_text("not a store")
    with pytest.raises(kernalyse.Error, match="x.h5"):
        kernalyse.read_table(tmp_path / "x.h5")
