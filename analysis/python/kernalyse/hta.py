"""kernalyse.hta: HTA's TraceAnalysis (Holistic Trace Analysis 0.6.1) on kernalyse (docs/python.md).

    from kernalyse.hta import TraceAnalysis
    a = TraceAnalysis(trace_dir="traces/")
    a.get_temporal_breakdown()                  # HTA's method names, DataFrame shapes and numbers
    a.get_comm_comp_overlap()
    a.get_idle_time_breakdown(ranks=[0, 1])
    a.get_gpu_kernel_breakdown()

The numbers are --compat hta's (kernalyse-merge --compat hta: HTA's integer µs, last step left
out, its kernel classes, the recorded clocks), checked against real HTA on every Kineto set in
../shared/traces by tests/python/test_hta_real.py. The temporal breakdown, overlap and idle
breakdown are the registry's breakdown, overlap and idle analyses; the kernel-type breakdown is
computed here, with HTA's algorithm, over the activities of the same --compat hta view
(Run.activities(view="hta")). A method HTA has and kernalyse does not raises NotImplementedError
naming the kernalyse analysis that answers the question.
"""
import os

import numpy as np
import pandas as pd

import kernalyse

DEFAULT_TRACE_DIR = "/tmp/trace"  # HTA's default

# HTA's methods kernalyse does not reproduce, and what answers the question instead.
_INSTEAD = {
    "get_potential_stragglers": "the straggler ledger: kernalyse.open(trace_dir).stragglers() "
                                "(who arrived last at each collective, the wait it inflicted, why)",
    "get_profiler_steps": "the steps: kernalyse.open(trace_dir).annotations() rows of kind 'step'",
    "get_gpu_kernels_with_user_annotations": "ranges: kernalyse.open(trace_dir).ranges() "
                                             "(GPU time of the kernels launched in each range)",
    "get_gpu_user_annotation_breakdown": "ranges: kernalyse.open(trace_dir).ranges()",
    "get_frequent_cuda_kernel_sequences": "gaps: kernalyse.open(trace_dir).gaps() "
                                          "(top kernel-to-kernel transitions)",
    "get_aten_op_kernels_and_delay": "roofline: kernalyse.open(trace_dir).roofline() "
                                     "(ATen ops with their kernels)",
    "get_cuda_kernel_launch_stats": "idle: kernalyse.open(trace_dir).idle() (host wait: "
                                    "launches that came after the stream drained)",
    "generate_trace_with_counters": "the Perfetto export: kernalyse.open(trace_dir)"
                                    ".export_perfetto(path)",
    "get_queue_length_summary": "idle: kernalyse.open(trace_dir).idle()",
    "get_queue_length_summary_from_time_series": "idle: kernalyse.open(trace_dir).idle()",
    "get_queue_length_time_series": "idle: kernalyse.open(trace_dir).idle()",
    "get_time_spent_blocked_on_full_queue": "idle: kernalyse.open(trace_dir).idle()",
    "get_memory_bw_summary": "the kernel summary: kernalyse.open(trace_dir).summary() "
                             "(memcpy and memset rows)",
    "get_memory_bw_time_series": "the counters: kernalyse.open(trace_dir).counters()",
    "get_cupti_counter_data_with_operators": "roofline: kernalyse.open(trace_dir).roofline()",
    "critical_path_analysis": "the critical path: kernalyse.open(trace_dir).critical_path()",
    "overlay_critical_path_analysis": "the critical path: kernalyse.open(trace_dir)"
                                      ".critical_path()",
}

_IDLE_CATEGORIES = (("host_wait", "host_wait_us", "host_wait_gaps"),
                    ("kernel_wait", "kernel_wait_us", "kernel_wait_gaps"),
                    ("other", "other_us", "other_gaps"))


def _not_implemented(name, instead):
    def method(self, *args, **kwargs):
        raise NotImplementedError(f"kernalyse.hta.TraceAnalysis.{name}: not reproduced by "
                                  f"kernalyse; ask {instead}")
    method.__name__ = name
    method.__doc__ = f"Not reproduced: raises NotImplementedError naming {instead}."
    return method


class _Trace:
    """The little of HTA's Trace object callers use: get_ranks()."""

    def __init__(self, ranks):
        self._ranks = ranks

    def get_ranks(self):
        return list(self._ranks)


class TraceAnalysis:
    """HTA's TraceAnalysis over kernalyse: the traces are read once by kernalyse (open with
    compat="hta"), each method runs an analysis of the registry on HTA's view."""

    def __init__(self, trace_files=None, trace_dir=DEFAULT_TRACE_DIR,
                 include_last_profiler_step=False):
        if include_last_profiler_step:
            raise NotImplementedError(
                "include_last_profiler_step=True: --compat hta reproduces HTA's default (the "
                "last step left out); kernalyse.open(trace_dir).breakdown() counts every step")
        if trace_files is None:
            inputs = [trace_dir]
        else:
            files = ([trace_files[r] for r in sorted(trace_files)]
                     if isinstance(trace_files, dict) else list(trace_files))
            inputs = [f if os.path.isabs(f) or not os.path.exists(os.path.join(trace_dir, f))
                      else os.path.join(trace_dir, f) for f in files]
        # HTA's analyses read no /ops: the import leaves them out (a tenth of it).
        self.run = kernalyse._open(inputs, False, {"compat": "hta", "quiet": True})
        self.t = _Trace(sorted(int(r) for r in self.run._native.ranks()["rank"]))
        # Every call's flags are open()'s: the calls share one analysis context (HTA's view made
        # once, the unions the breakdown and overlap share).
        self._flags = kernalyse._flags(self.run._defaults, kernalyse._ANALYSIS_OPTIONS, "hta")
        self._stream_pos = None  # (rank, stream) -> its first kept GPU event's place in its file

    def _table(self, analysis, key, extra=()):
        """One result table of a registry analysis as {column: numpy array or list}, straight
        from the library (no DataFrame in between: this package builds HTA's own)."""
        for k, _, columns, values, _ in self.run._native.analyse(analysis,
                                                                 self._flags + list(extra)).tables():
            if k == key:
                return dict(zip(columns, values))
        raise KeyError(key)

    # ---- the analyses kernalyse computes -----------------------------------------------------
    def get_temporal_breakdown(self, visualize=True):
        """Per rank: idle, compute and non-compute time (µs) over the span of GPU work
        (kernel_time), and their shares (%, 2 decimals): the registry's breakdown."""
        b = self._table("breakdown", "breakdown")
        pct = {c: np.round(_float(b[c]), 2) for c in ("idle_pct", "compute_pct", "non_compute_pct")}
        return pd.DataFrame({
            "rank": _int(b["rank"]),
            "idle_time(us)": _float(b["idle_us"]),
            "compute_time(us)": _float(b["compute_us"]),
            "non_compute_time(us)": _float(b["non_compute_us"]),
            "kernel_time(us)": _float(b["span_us"]),
            "idle_time_pctg": pct["idle_pct"],
            "compute_time_pctg": pct["compute_pct"],
            "non_compute_time_pctg": pct["non_compute_pct"],
        })

    def get_comm_comp_overlap(self, visualize=True):
        """Per rank: the share of communication time overlapped by computation (%, 2
        decimals; NaN without communication, as HTA): the registry's overlap."""
        o = self._table("overlap", "overlap")
        pct = dict(zip(_int(o["rank"]).tolist(), np.round(_float(o["overlap_pct"]), 2).tolist()))
        ranks = self.t.get_ranks()  # HTA: a row per rank, NaN for one without GPU work
        return pd.DataFrame({
            "rank": np.asarray(ranks, dtype="int64"),
            "comp_comm_overlap_pctg": np.array([pct.get(r, np.nan) for r in ranks], dtype=float),
        })

    def get_idle_time_breakdown(self, ranks=None, streams=None, visualize=True,
                                visualize_pctg=True, show_idle_interval_stats=False,
                                consecutive_kernel_delay=30):
        """Per rank and stream: idle time (µs) by category (host_wait, kernel_wait, other) and
        its share of the stream's idle time; ranks default to [0] as HTA's. Returns
        (DataFrame, None) like HTA, or with show_idle_interval_stats=True (DataFrame, the gaps'
        statistics per row, as HTA's): the registry's idle. A rank's
        streams come in HTA's order: its trace's event order (the first GPU work of each it
        kept)."""
        ranks = list(ranks) if ranks else [0]
        # The default (HTA's 30 µs) left to the run: the call then shares its context (HTA's
        # view, made once) with the breakdown and overlap.
        extra = [] if consecutive_kernel_delay == 30 else [f"--kernel-wait-us={consecutive_kernel_delay}"]
        t = self._table("idle", "idle", extra)
        rank, stream = _int(t["rank"]), _int(t["stream"])
        pos = {r: k for k, r in enumerate(ranks)}  # the ranks in the order asked, as HTA
        rank_pos = np.array([pos.get(r, -1) for r in rank], dtype="int64")
        wanted = rank_pos >= 0
        if streams:
            wanted &= np.isin(stream, list(streams))
        total = sum(_float(t[us]) for _, us, _ in _IDLE_CATEGORIES)
        cols = {k: [] for k in ("pos", "stream", "cat", "value", "total")}
        for c, (cat, us, gaps) in enumerate(_IDLE_CATEGORIES):
            # HTA groups a stream's kernels by category; its first kernel (no gap) is "other".
            has = wanted & ((_int(t[gaps]) > 0) | (cat == "other"))
            for k, v in (("pos", rank_pos), ("stream", stream), ("total", total),
                         ("value", _float(t[us]))):
                cols[k].append(v[has])
            cols["cat"].append(np.full(int(has.sum()), c))
        p, st, c, v, tot = (np.concatenate(cols[k]) for k in ("pos", "stream", "cat", "value",
                                                              "total"))
        # HTA takes a rank's streams in its trace's event order (the first GPU work of each
        # it kept); a stream not found there after those, ascending.
        if self._stream_pos is None:
            self._stream_pos = {(r, s): i for r, s, i in self.run._native.hta_stream_order()}
        ranks_arr = np.asarray(ranks, dtype="int64")
        first = np.array([self._stream_pos.get((int(r), int(s)), np.iinfo("int64").max)
                          for r, s in zip(ranks_arr[p] if len(p) else [], st)], dtype="int64")
        o = np.lexsort((c, st, first, p))
        p, st, c, v, tot = p[o], st[o], c[o], v[o], tot[o]
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = np.where(tot != 0, v / np.where(tot != 0, tot, 1), np.nan)
        starts = np.searchsorted(p, p, side="left")  # HTA's index: 0.. within each rank
        df = pd.DataFrame({
            "rank": np.asarray(ranks, dtype="int64")[p] if len(p) else np.empty(0, "int64"),
            "stream": st,
            "idle_category": np.array([x[0] for x in _IDLE_CATEGORIES], dtype=object)[c],
            "idle_time": v.round(2),
            "idle_time_ratio": ratio.round(2),
        }, index=np.arange(len(p)) - starts)
        if not show_idle_interval_stats:
            return df, None
        return df, self._idle_interval_stats(df, consecutive_kernel_delay)

    def _idle_interval_stats(self, rows, delay_us):
        """HTA's show_idle_interval_stats: per row of the idle breakdown (rank, stream,
        category), pandas' describe() of its gaps in µs (count, mean, std, min, 25%, 50%, 75%,
        max; 2 decimals), indexed by the category. The gaps are the idle analysis' own, made
        again here from HTA's view: per stream, each GPU kernel, copy or set after the first,
        its start minus the previous one's end; host_wait when its launch started after that
        end, else kernel_wait below consecutive_kernel_delay µs, else other."""
        a = {c: (arr, d) for c, arr, d in self.run._native.table("activities", "hta")}
        launches = {c: arr for c, arr, _ in self.run._native.table("launches", "hta")}
        kind, words = a["kind"]
        gpu = np.isin(kind, [words.index(w) for w in ("kernel", "memcpy", "memset")
                             if w in words])
        r, dev, st = a["rank"][0][gpu], a["device"][0][gpu], a["stream"][0][gpu]
        start, end, corr = a["start_ns"][0][gpu], a["end_ns"][0][gpu], a["correlation"][0][gpu]
        # The view's rows are in (rank, device, stream, start) order: a gap is a row after
        # another of its stream.
        same = (r[1:] == r[:-1]) & (dev[1:] == dev[:-1]) & (st[1:] == st[:-1])
        prev_end = end[:-1][same]
        gap = start[1:][same] - prev_end
        g_rank, g_stream, g_corr = r[1:][same], st[1:][same], corr[1:][same]
        launch_at = {}
        for lr, lc, ls in zip(launches["rank"].tolist(), launches["correlation"].tolist(),
                              launches["start_ns"].tolist()):
            launch_at.setdefault((lr, lc), ls)
        none = np.iinfo("int64").min
        launch = np.array([launch_at.get(k, none) for k in zip(g_rank.tolist(),
                                                               g_corr.tolist())], dtype="int64")
        host = (launch != none) & (launch > prev_end)
        cat = np.where(host, 0, np.where(gap < delay_us * 1000, 1, 2))
        names = [x[0] for x in _IDLE_CATEGORIES]
        o = np.lexsort((cat, g_stream, g_rank))
        values = gap[o] / 1000.0
        where = {}  # (rank, stream, category) -> its slice of values
        for i, k in enumerate(zip(g_rank[o].tolist(), g_stream[o].tolist(), cat[o].tolist())):
            where.setdefault(k, [i, i])[1] = i + 1
        stats = []
        for rank, stream, c in zip(rows["rank"].tolist(), rows["stream"].tolist(),
                                   rows["idle_category"].tolist()):
            lo, hi = where.get((rank, stream, names.index(c)), (0, 0))
            stats.append((rank, stream, *_describe(values[lo:hi])))
        cols = ["rank", "stream", "count", "mean", "std", "min", "25%", "50%", "75%", "max"]
        out = pd.DataFrame({c: np.array([x[i] for x in stats],
                                        dtype="int64" if i < 2 else float)
                            for i, c in enumerate(cols)},
                           index=pd.Index(rows["idle_category"].to_numpy(), name="idle_category"))
        return out.round(2)

    def get_gpu_kernel_breakdown(self, visualize=True, duration_ratio=0.8, num_kernels=10,
                                 include_memory_kernels=True, image_renderer=""):
        """HTA's kernel breakdown on the --compat hta view: (time per kernel type and per
        overlap of types across ranks, with its share in % to 1 decimal; per type and rank the
        kernels' sum/max/min/stddev/mean in µs, the smaller ones as "others")."""
        a = {c: (arr, decode) for c, arr, decode in self.run._native.table("activities", "hta")}
        types = ["COMPUTATION", "COMMUNICATION"] + (["MEMORY"] if include_memory_kernels else [])
        # Names stay codes into the view's strings until the result's few rows.
        kind, words = a["category"]  # int8 codes of the category words
        words = [w.upper() for w in words]
        type_code = [words.index(t) if t in words else -1 for t in types]
        rank = a["rank"][0]
        ts = a["start_ns"][0] // 1000  # HTA's integer µs (the view's times are whole µs)
        dur = (a["end_ns"][0] - a["start_ns"][0]) // 1000
        code = a["name"][0]
        names = _Names(self.run)
        sums, rows = {}, []
        for r in np.unique(rank):
            mine = rank == r
            k = kind[mine]
            for t, v in _kernel_type_time(ts[mine], dur[mine], k, types, type_code).items():
                sums[t] = sums.get(t, 0) + v
            c, d = code[mine], dur[mine]
            for t, tc in zip(types, type_code):
                sel = k == tc
                rows += [(n, *x, t, int(r)) for n, *x in
                         _aggregate_kernel_time(c[sel], d[sel], names, num_kernels,
                                                duration_ratio)]
        kt = sorted(sums.items(), key=lambda x: -x[1])  # stable: HTA's sort_values(kind=stable)
        kt_sum = np.array([v for _, v in kt], dtype="int64")
        with np.errstate(invalid="ignore", divide="ignore"):
            pctg = np.round(kt_sum / kt_sum.sum() * 100, 1)
        kt_df = pd.DataFrame({"kernel_type": np.array([t for t, _ in kt], dtype=object),
                              "sum": kt_sum, "percentage": pctg})
        rows.sort(key=lambda x: (x[6], x[0], x[7]))  # kernel_type, name, rank (stable)
        cols = list(zip(*rows)) if rows else [()] * 8
        km = pd.DataFrame({
            "name": np.array(cols[0], dtype=object),
            "sum (us)": np.array(cols[1], dtype=float),
            "max (us)": np.array(cols[2], dtype=float),
            "min (us)": np.array(cols[3], dtype=float),
            "stddev": np.array(cols[5], dtype=float),
            "mean (us)": np.array(cols[4], dtype=float),
            "kernel_type": np.array(cols[6], dtype=object),
            "rank": np.array(cols[7], dtype="int64"),
        })
        return kt_df, km


def _float(v):
    """A result column as float64 (NaN where a nullable column has no value)."""
    if isinstance(v, tuple):  # (values, missing) of a column with empty cells
        x = np.asarray(v[0], dtype=float)
        x[np.asarray(v[1], dtype=bool)] = np.nan
        return x
    return np.asarray(v, dtype=float)


def _int(v):
    return np.asarray(v[0] if isinstance(v, tuple) else v, dtype="int64")


def _describe(v):
    """pandas' describe() of a numeric Series: count, mean, std (ddof 1), min, quartiles
    (linear), max; NaN where there are too few values."""
    n = len(v)
    if n == 0:
        return (0.0,) + (np.nan,) * 7
    std = float(np.std(v, ddof=1)) if n > 1 else np.nan
    q = np.percentile(v, [25, 50, 75])
    return (float(n), float(np.mean(v)), std, float(v.min()), *map(float, q), float(v.max()))


class _Names:
    """The view's string table, decoded on first use, indexed by name code."""

    def __init__(self, run):
        self._run, self._list = run, None

    def take(self, codes):
        if self._list is None:
            self._list = np.array(self._run._native.strings("hta"), dtype=object)
        return self._list[codes]


def _merge_intervals(ts, end):
    """HTA's merge_kernel_intervals: sorted by start, an interval starting after every end so
    far opens a new group (touching intervals merge)."""
    o = np.argsort(ts, kind="stable")
    ts, end = ts[o], end[o]
    if not len(ts):
        return ts, end
    cummax = np.maximum.accumulate(end)
    new = np.concatenate([[True], ts[1:] > cummax[:-1]])
    starts = ts[new]
    ends = np.maximum.reduceat(end, np.flatnonzero(new))
    return starts, ends


def _kernel_type_time(ts, dur, kind, types, type_code):
    """One rank's time per kernel type and overlap of types (HTA's _get_gpu_kernel_type_time):
    the union of each type's intervals, swept together; each piece goes to the types running."""
    times, deltas = [], []
    end = ts + dur
    for i, t in enumerate(type_code):
        mine = kind == t
        s, e = _merge_intervals(ts[mine], end[mine])
        times += [s, e]
        deltas += [np.full(len(s), 1 << i), np.full(len(e), -(1 << i))]
    t = np.concatenate(times)
    d = np.concatenate(deltas)
    o = np.argsort(t, kind="stable")
    t, d = t[o], d[o]
    running = np.cumsum(d)[:-1]
    piece = np.diff(t)
    keep = (running > 0) & (piece > 0)
    states, inverse = np.unique(running[keep], return_inverse=True)
    sums = np.bincount(inverse, weights=piece[keep], minlength=len(states))
    return {" overlapping ".join(x for i, x in enumerate(types) if int(v) & (1 << i)): int(n)
            for v, n in zip(states, sums)}


def _stats(values, groups, n):
    """Per group (0..n-1): sum, max, min, mean and pandas' std (ddof 1; 0 for one value)."""
    count = np.bincount(groups, minlength=n)
    total = np.bincount(groups, weights=values, minlength=n)
    if n and count.min() > 0:  # every group has a value (np.unique's): reduceat, not ufunc.at
        o = np.argsort(groups, kind="stable")
        starts = np.searchsorted(groups[o], np.arange(n))
        hi = np.maximum.reduceat(values[o], starts)
        lo = np.minimum.reduceat(values[o], starts)
    else:
        hi = np.full(n, -np.inf)
        lo = np.full(n, np.inf)
        np.maximum.at(hi, groups, values)
        np.minimum.at(lo, groups, values)
    mean = total / count
    dev = np.bincount(groups, weights=(values - mean[groups]) ** 2, minlength=n)
    std = np.where(count > 1, np.sqrt(dev / np.maximum(count - 1, 1)), 0.0)
    return total, hi, lo, mean, std


def _aggregate_kernel_time(codes, dur, names, num_kernels, duration_ratio):
    """HTA's _aggr_gpu_kernel_time, as (name, sum, max, min, mean, std) rows: per name the
    durations' statistics, by sum descending; beyond num_kernels names (or past the
    duration_ratio quantile of the running sum) the rest is one "others" row, and then every
    row is aggregated over the names' sums, as HTA does. codes index `names`."""
    if not len(codes):
        return []
    u, inv = np.unique(codes, return_inverse=True)
    text = np.asarray(names.take(u), dtype=object)
    stats = _stats(dur.astype(float), inv, len(u))
    order = np.argsort(text, kind="stable")  # HTA groups by the name's text, then by sum
    order = order[np.argsort(-stats[0][order], kind="stable")]
    text = text[order]
    stats = [x[order] for x in stats]
    if len(u) <= num_kernels:
        return list(zip(text, *stats))
    cumsum = np.cumsum(stats[0])
    q = np.quantile(cumsum, duration_ratio)
    text = np.where((cumsum > q) | (np.arange(len(text)) >= num_kernels), "others", text)
    g, ginv = np.unique(text, return_inverse=True)
    return list(zip(g, *_stats(stats[0], ginv, len(g))))


for _name, _instead in _INSTEAD.items():
    setattr(TraceAnalysis, _name, _not_implemented(_name, _instead))
