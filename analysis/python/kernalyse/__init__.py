"""kernalyse in Python: a run's tables and every analysis as pandas DataFrames (docs/python.md).

    import kernalyse
    r = kernalyse.open("run.h5")               # a store, a trace file, several files or a folder
    r.activities()                             # the store's tables, int64 ns, names resolved
    r.stragglers()[0]                          # each analysis: one DataFrame per result table
    r.gaps(hist_min=1, hist_max=100, rank=0)   # options are kernalyse-merge's flags
    r.report()                                 # the HTML report (inline in Jupyter)

Options are kernalyse-merge's flags as keywords (`--gap-sort count` is `gap_sort="count"`, a
repeatable flag takes a list, `--from` is `from_`), parsed by the CLI's own flag definitions: a bad
value raises kernalyse.Error with the line kernalyse-merge prints. kernalyse.hta is a drop-in for
HTA's TraceAnalysis.
"""
import builtins as _builtins
import html as _html
import json as _json
import os as _os
import tempfile as _tempfile

import numpy as _np
import pandas as _pd

from . import _kernalyse
from ._kernalyse import Error

__all__ = ["open", "read_table", "analyses", "Run", "Results", "Html", "Error"]

# Keyword options by what takes them (the values are checked by kernalyse-merge's flag parser).
_ANALYSIS_OPTIONS = {
    "rank", "step", "top", "verbose", "sort", "gap_sort", "hist_min", "hist_max", "bins", "compat",
    "kernel_wait_us", "tokens", "units_per_step", "peaks", "what_if", "quiet", "progress",
}
_OPEN_OPTIONS = _ANALYSIS_OPTIONS | {
    "step_range", "comm_regex", "align", "power_log", "output", "force",
}
_EXPORT_OPTIONS = {"rank", "step", "from_", "to", "force", "quiet", "progress"}
_HTML_OPTIONS = _ANALYSIS_OPTIONS | _EXPORT_OPTIONS

_TABLES = ("activities", "launches", "annotations", "nccl", "counters", "ops")


def _flags(kwargs, allowed, where):
    """Keyword options as kernalyse-merge's flags: gap_sort="count" -> --gap-sort=count; True ->
    --flag; False or None -> left out; a list or tuple -> the flag once per item."""
    args = []
    for key, value in kwargs.items():
        if key not in allowed:
            raise TypeError(f"{where}() got an unexpected keyword argument '{key}' "
                            f"(its options: {', '.join(sorted(allowed))})")
        flag = "--" + key.rstrip("_").replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
            continue
        for v in value if isinstance(value, (list, tuple)) else [value]:
            text = f"{flag}={_os.fspath(v) if isinstance(v, _os.PathLike) else v}"
            if "\0" in text:  # C strings end there: refused, as Python's own open() does
                raise Error(f"{flag}: embedded null byte")
            args.append(text)
    return args


def _path(p):
    """A path for the library: str, refused with a NUL in it (C strings end there)."""
    p = _os.fsdecode(p)
    if "\0" in p:
        raise Error(f"{p!r}: embedded null byte")
    return p


def analyses():
    """The registry (kernalyse-merge's analyses, in output order) as a DataFrame: name (the flag,
    and the Run method with '-' as '_'), help, in_all, in_page, hta_view (what --compat hta
    reproduces)."""
    rows = _kernalyse.analyses()
    return _pd.DataFrame(rows, columns=["name", "help", "in_all", "in_page", "hta_view"])


class Results(list):
    """One analysis's result: one DataFrame per result table, in the report's order. Index by
    position or by the table's key (its JSON key and CSV name: r.gaps()["gap_summary"]).
    `keys`, `titles`, `notes` (the report's headline lines) and `json` (the analysis's keys of
    kernalyse-merge --json, built on first use) go with it."""

    def __init__(self, name, native):
        self.name = name
        self._native = native
        self.keys, self.titles, self.in_json = [], [], []
        frames = []
        for key, title, columns, values, in_json in native.tables():
            frames.append(_result_frame(columns, values))
            self.keys.append(key)
            self.titles.append(title)
            self.in_json.append(in_json)
        super().__init__(frames)
        self.notes = list(native.notes())
        self._json = None

    def __getitem__(self, k):
        if isinstance(k, str):
            if k not in self.keys:
                raise KeyError(f"{k!r}: this result's tables are {', '.join(self.keys)}")
            return list.__getitem__(self, self.keys.index(k))
        return list.__getitem__(self, k)

    @property
    def json(self):
        """The analysis's part of kernalyse-merge's --json object (docs/json.md), as a dict."""
        if self._json is None:
            self._json = _json.loads(self._native.json())
        return self._json

    def __repr__(self):
        parts = [f"{self.name}: {len(self)} table(s)"] + list(self.notes)
        for key, title, df in zip(self.keys, self.titles, self):
            parts.append(f"\n[{key}] {title} ({len(df)} rows)\n{df.head(10).to_string()}")
        return "\n".join(parts)

    def _repr_html_(self):
        out = [f"<b>{_html.escape(self.name)}</b>"]
        out += [f"<div>{_html.escape(n)}</div>" for n in self.notes]
        for key, title, df in zip(self.keys, self.titles, self):
            out.append(f"<h4>{_html.escape(title)} <code>[{_html.escape(key)}]</code> "
                       f"({len(df)} rows)</h4>{df.head(20).to_html()}")
        return "\n".join(out)


def _result_frame(columns, values):
    """A report table as a DataFrame: integers int64 (nullable Int64 where a cell is missing),
    numbers float64 (NaN where the JSON has null), text object."""
    data = {}
    for c, v in zip(columns, values):
        if isinstance(v, tuple):
            data[c] = _pd.arrays.IntegerArray(v[0], v[1])
        else:
            data[c] = v
    return _pd.DataFrame(data, columns=list(columns))


def _strings_dtype(strings):
    try:
        return _pd.CategoricalDtype(strings)
    except ValueError:  # a hand-made store with a string twice: keep the first
        return _pd.CategoricalDtype(list(dict.fromkeys(strings)))


def _table_frame(columns, strings):
    """A store table's columns (numpy views) as a DataFrame without copying them: string ids and
    enum codes become categoricals (`strings()` gives the string table's dtype)."""
    data = {}
    for col, arr, decode in columns:
        if decode is None:
            data[col] = arr
        elif decode == "strings":
            data[col] = _pd.Categorical.from_codes(arr, dtype=strings())
        else:
            data[col] = _pd.Categorical.from_codes(arr, dtype=_pd.CategoricalDtype(decode))
    return _pd.DataFrame(data, copy=False)


def read_table(path, name="activities"):
    """One row table of a kernalyse store (activities, launches, annotations, nccl, counters,
    ops) as a DataFrame, read alone: no other table, no clock inference, no analysis. The
    columns are the same read-only views as Run.table's, of a store holding only that table."""
    columns, strings = _kernalyse.read_table(_path(path), name)
    return _table_frame(columns, lambda: _strings_dtype(strings))


class Html:
    """The HTML report (docs/report.md): shown inline in Jupyter, `save(path)` writes it."""

    def __init__(self, text):
        self.text = text

    def save(self, path):
        with _builtins.open(path, "w", encoding="utf-8") as f:
            f.write(self.text)

    def _repr_html_(self):
        # In an iframe: the page's own script and styles stay apart from the notebook's.
        return (f'<iframe srcdoc="{_html.escape(self.text, quote=True)}" '
                'style="width:100%;height:720px;border:0"></iframe>')

    def __repr__(self):
        return f"<kernalyse.Html {len(self.text)} bytes>"


class Run:
    """An opened run (kernalyse.open): the store with its clocks as aligned, its tables as
    DataFrames, and one method per analysis of the registry."""

    def __init__(self, native, inputs, defaults):
        self._native = native
        self.inputs = inputs
        self._defaults = defaults  # open()'s analysis options: every call's defaults
        self._dtypes = {}
        self.info = list(native.info)  # what the loading said (kernalyse-merge's info lines)
        self.warnings = list(native.warnings)

    # ---- the store's tables ------------------------------------------------------------------
    def table(self, name, view="store"):
        """A row table of the store (activities, launches, annotations, nccl, counters, ops) as a
        DataFrame whose numeric columns are read-only views of the store's columns (no copy; take
        .copy() to write). Names are categoricals over the store's string table, times int64 ns.
        view="hta": the table as --compat hta sees it (HTA's rounding, window and categories)."""
        if name == "ranks":
            return self.ranks()
        return _table_frame(self._native.table(name, view), lambda: self._strings(view))

    def _strings(self, view):
        if view not in self._dtypes:
            self._dtypes[view] = _strings_dtype(self._native.strings(view))
        return self._dtypes[view]

    def activities(self, view="store"):
        return self.table("activities", view)

    def launches(self, view="store"):
        return self.table("launches", view)

    def annotations(self, view="store"):
        return self.table("annotations", view)

    def nccl(self, view="store"):
        return self.table("nccl", view)

    def counters(self, view="store"):
        return self.table("counters", view)

    def ops(self, view="store"):
        return self.table("ops", view)

    def ranks(self):
        """/ranks: one row per rank (host, devices, source, clock alignment, event counts)."""
        return _pd.DataFrame(self._native.ranks())

    @property
    def attrs(self):
        """The store's file attributes (tool version, producer, command line, clock domain)."""
        return self._native.attrs()

    # ---- analyses ----------------------------------------------------------------------------
    def analyse(self, name, **options):
        """Runs the registry's analysis `name` ("gaps", "critical-path") with kernalyse-merge's
        options; returns its Results. Each analysis also has its own method (r.gaps())."""
        options = {**self._defaults, **options}
        return Results(name, self._native.analyse(name, _flags(options, _ANALYSIS_OPTIONS, name)))

    def report(self, path=None, **options):
        """The HTML report (kernalyse-merge --html): written to `path` when given; returns an
        Html object, shown inline in Jupyter."""
        args = _flags({**self._defaults, **options}, _HTML_OPTIONS, "report")
        if path is not None:
            self._native.html(_path(path), args)
            with _builtins.open(path, encoding="utf-8") as f:
                return Html(f.read())
        with _tempfile.TemporaryDirectory(prefix="kernalyse-") as d:
            p = _os.path.join(d, "report.html")
            self._native.html(p, args)
            with _builtins.open(p, encoding="utf-8") as f:
                return Html(f.read())

    def export_perfetto(self, path, **options):
        """kernalyse-merge --perfetto PATH: the aligned timeline for Perfetto UI (docs/exports.md).
        Returns the counts written (events, flows, counters, files)."""
        return self._native.export("perfetto", _path(path),
                                   _flags(self._export(options), _EXPORT_OPTIONS, "export_perfetto"))

    def export_kineto(self, directory, **options):
        """kernalyse-merge --export-kineto DIR: one Kineto JSON per rank, for HTA / TraceLens."""
        return self._native.export("kineto", _path(directory),
                                   _flags(self._export(options), _EXPORT_OPTIONS, "export_kineto"))

    def _export(self, options):
        d = {k: v for k, v in self._defaults.items() if k in _EXPORT_OPTIONS}
        return {**d, **options}

    def save(self, path, force=False):
        """Writes the run as a kernalyse store (HDF5, docs/store.md)."""
        self._native.save(_path(path), bool(force))

    def __repr__(self):
        a = self.attrs
        return (f"<kernalyse.Run {', '.join(self.inputs)}: {len(self._native.ranks()['rank'])} "
                f"rank(s), produced by {a['produced_by'] or '?'}>")


def _analysis_method(name, help_text):
    def method(self, **options):
        return self.analyse(name, **options)
    method.__name__ = name.replace("-", "_")
    method.__doc__ = (f"kernalyse-merge --{name}: {help_text}. Options as keywords "
                      f"(kernalyse-merge's flags); returns Results (one DataFrame per table).")
    return method


# One method per analysis of the registry: the registry is the only list of analyses.
for _name, _help, *_ in _kernalyse.analyses():
    setattr(Run, _name.replace("-", "_"), _analysis_method(_name, _help))


def open(path, **options):  # noqa: A001 - kernalyse.open, like the issue's API
    """Opens a run: a kernalyse store, a trace file (Kineto JSON, rocprofv3 JSON, Nsight Systems
    SQLite), several files or a folder of them, with kernalyse-merge's rules. Options as
    keywords: rank, step_range, comm_regex (list), align, power_log (list), compat, output
    (write the imported store), force, quiet, progress; analysis options given here (rank, step,
    top, compat, ...) are every call's defaults. compat="hta" keeps the recorded clocks (HTA's
    view). The info lines go to stderr unless quiet=True; warnings always."""
    return _open(path, True, options)


def _open(path, ops, options):
    """open(); ops=False leaves /ops out of a trace import (kernalyse.hta's runs)."""
    if isinstance(path, (str, bytes, _os.PathLike)):
        paths = [path]
    elif isinstance(path, (list, tuple)):
        paths = list(path)
    else:
        raise TypeError(f"kernalyse.open: path must be a str, bytes, os.PathLike or a list of "
                        f"them, not {type(path).__name__}")
    inputs = [_path(p) for p in paths]
    if "progress" not in options:
        options = dict(options, progress="off")  # no progress bars in notebooks unless asked
    native = _kernalyse.open_run(inputs, _flags(options, _OPEN_OPTIONS, "open"), ops)
    import sys
    for line in native.info + native.warnings:
        print(line, file=sys.stderr)
    return Run(native, inputs, {k: v for k, v in options.items() if k in _ANALYSIS_OPTIONS})
