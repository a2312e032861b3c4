"""Host time per step, and where the device sat idle: waiting for a launch or not.

docs/formats.md §15. Per (rank, step) of the canonical rows:

* ``step_host_us`` — span of the host's ``ProfilerStep#N`` op (NaN when not recorded);
* ``host_busy_us`` — union of the host ops (``cpu_op`` events; db ``PYTORCH_API`` rows of
  type op), ``ProfilerStep#N`` itself left out, on the launching threads (those whose
  ops start launch flows; without flows, the threads of ``ProfilerStep#N``), each op
  counted in the step its start lies in, up to that step's end. Python-function events
  are not host ops: with a Python tracer on, the script's outer frames span the whole step;
* ``dataloader_us`` — union of the ``enumerate(DataLoader)…`` ops of the step, any thread
  (NaN when the rank has none at all);
* ``free_us`` — the step's device span (first start to last end of its rows) less the
  union of every row, kernels and collectives;
* ``host_bound_us`` / ``free_other_us`` — each idle gap [g0, g1] before the task k that
  starts at g1, launched at L_k, splits into [g0, min(g1, L_k)] (the device waited for the
  launch) and the rest; a gap whose next task has no known launch is all ``free_other``.
  L_k is the runtime's launch of k where the profile records it (``HostLinks.launches``:
  HostToDevice flows, CANN_API rows), else its framework op's launch flow: torch_npu's
  task queue hands the op to another thread, which may compile it before it launches, so
  the framework op's time is too early by that hand-over and compilation;
* ``compile_us`` — the part of the host-bound intervals that host op compilation
  (``HostLinks.compile``, any thread) covers: NaN when the rank records no compilation;
* ``launches`` — rows of the step whose launch is known.

``step_lanes`` draws one step (the median by device span) as merged intervals per lane.
Vectorized: unions by ``timeline.merged_intervals``, gaps and sums in numpy; the loops
run over lanes and steps of one rank, never over rows.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...schema import HOST_STEP_COLUMNS, STEP_LANE_COLUMNS
from ..formats.host_links import HostLinks
from ..formats.trace_events import STEP_PREFIX
from ..formats.values import assign_steps
from ..frames import by_category
from .timeline import COMM_CATEGORIES, merged_intervals

DATALOADER_PREFIX = "enumerate(DataLoader)"
LANE_POINTS = 2000  # segments a lane holds at most: intervals closer than span/2000 merge
LABELLED = 20  # segments per lane that keep the name of their longest interval


def _device(ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Rows' step code (index into the step ids), start and end (ns), and the step ids."""
    step = ops["step"]
    ids = np.sort(step.dropna().unique().astype(np.int64)) if step.notna().any() \
        else np.zeros(0, np.int64)
    code = np.searchsorted(ids, step.to_numpy(np.int64, na_value=-1)) if len(ids) \
        else np.zeros(len(ops), np.int64)
    start = ops["start_ns"].to_numpy(np.int64)
    end = start + np.rint(ops["dur_us"].to_numpy() * 1000).astype(np.int64)
    return code.astype(np.int64), start, np.maximum(end, start), ids


def _windows(spans: pd.DataFrame | None) -> pd.DataFrame:
    """``ProfilerStep#N`` spans: ``step``, ``start_ns``, ``end_ns``, ``thread``."""
    empty = pd.DataFrame({c: pd.Series(dtype="int64")
                          for c in ("step", "start_ns", "end_ns", "thread")})
    if spans is None or not len(spans):
        return empty
    names = spans["name"].astype(str)
    marked = by_category(spans["name"], lambda v: v.str.startswith(STEP_PREFIX)).to_numpy(bool)
    ids = pd.to_numeric(names[marked].str.slice(len(STEP_PREFIX)), errors="coerce")
    rows = spans[marked][ids.notna().to_numpy()]
    if not len(rows):
        return empty
    return pd.DataFrame({"step": ids.dropna().astype(np.int64).to_numpy(),
                         "start_ns": rows["start_ns"].to_numpy(np.int64),
                         "end_ns": rows["end_ns"].to_numpy(np.int64),
                         "thread": rows["thread"].to_numpy(np.int64)}
                        ).drop_duplicates("step").reset_index(drop=True)


def _host_ops(spans: pd.DataFrame | None, links: HostLinks | None,
              windows: pd.DataFrame) -> pd.DataFrame | None:
    """Host op spans on the launching threads, ``ProfilerStep#N`` left out."""
    if spans is None or not len(spans):
        return None
    threads = np.unique(links.links["thread"].to_numpy(np.int64)) \
        if links is not None and len(links.links) else np.unique(windows["thread"])
    marked = by_category(spans["name"], lambda v: v.str.startswith(STEP_PREFIX)).to_numpy(bool)
    on = np.isin(spans["thread"].to_numpy(np.int64), threads) & ~marked
    return spans[on].reset_index(drop=True)


def _union_in_windows(spans: pd.DataFrame | None, windows: pd.DataFrame,
                      ids: np.ndarray) -> np.ndarray:
    """Per step id of ``ids``: union (µs) of ``spans`` starting in its window, clipped to it."""
    out = np.zeros(len(ids))
    if spans is None or not len(spans) or not len(windows) or not len(ids):
        return np.where(np.isin(ids, windows["step"]), out, np.nan) if len(ids) else out
    start = spans["start_ns"].to_numpy(np.int64)
    step = assign_steps(start, windows["step"].to_numpy(), windows["start_ns"].to_numpy(),
                        windows["end_ns"].to_numpy())
    window_end = dict(zip(windows["step"].tolist(), windows["end_ns"].tolist()))
    step_of = step.to_numpy(np.int64, na_value=-1)
    inside = ~step.isna() & np.isin(step_of, ids)
    chosen = step_of[inside]
    code = np.searchsorted(ids, chosen)
    ends = np.minimum(spans["end_ns"].to_numpy(np.int64)[inside],
                      pd.Series(chosen).map(window_end).to_numpy(np.int64))
    starts = start[inside]
    groups, s, e = merged_intervals(starts, np.maximum(ends, starts), code)
    out = np.bincount(groups, weights=(e - s).astype(float), minlength=len(ids)) / 1000.0
    return np.where(np.isin(ids, windows["step"]), out, np.nan)


def _launch_lookup(links: HostLinks | None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct device starts (ns) of the links and the launch of each.

    A task's launch is the earliest runtime launch reaching it, else (no runtime record)
    the earliest framework launch flow.
    """
    if links is None:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    runtime = links.launches if links.launches is not None else links.links.iloc[:0]
    device = np.concatenate([runtime["device_ns"].to_numpy(np.int64),
                             links.links["device_ns"].to_numpy(np.int64)])
    launch = np.concatenate([runtime["launch_ns"].to_numpy(np.int64),
                             links.links["launch_ns"].to_numpy(np.int64)])
    framework = np.r_[np.zeros(len(runtime), bool), np.ones(len(links.links), bool)]
    order = np.lexsort((launch, framework, device))  # per device start: runtime first
    device, launch = device[order], launch[order]
    first = np.r_[True, device[1:] != device[:-1]] if len(device) else np.zeros(0, bool)
    return device[first], launch[first]


def launch_source(links: HostLinks | None) -> str:
    """Where a rank's launch times come from, in words (``""`` without links)."""
    return links.launch_source if links is not None else ""


def _covered(start: np.ndarray, end: np.ndarray, spans: pd.DataFrame) -> np.ndarray:
    """Per interval [start, end] (ns): how much of it the union of ``spans`` covers (ns).

    With C(t) the covered length before t (the union's blocks sorted, a running sum), the
    answer is C(end) − C(start): two binary searches per interval, no loop.
    """
    s_ns, e_ns = spans["start_ns"].to_numpy(np.int64), spans["end_ns"].to_numpy(np.int64)
    _, s, e = merged_intervals(s_ns, np.maximum(e_ns, s_ns), np.zeros(len(s_ns), np.int64))
    before = np.r_[0, np.cumsum(e - s)]  # covered length up to each block's start

    def covered_before(t: np.ndarray) -> np.ndarray:
        at = np.searchsorted(s, t, "right") - 1  # the last block starting at or before t
        inside = np.clip(t - s[np.maximum(at, 0)], 0, (e - s)[np.maximum(at, 0)])
        return np.where(at >= 0, before[np.maximum(at, 0)] + inside, 0)

    return covered_before(end) - covered_before(start) if len(s) else np.zeros(len(start))


def _launch_of(times: np.ndarray, device: np.ndarray, launch: np.ndarray) -> np.ndarray:
    """Launch (ns) of the task starting at each time, -1 when no link reaches it."""
    if not len(device):
        return np.full(len(times), -1, np.int64)
    at = np.clip(np.searchsorted(device, times), 0, len(device) - 1)
    return np.where(device[at] == times, launch[at], -1)


def host_steps(ops: pd.DataFrame, spans: pd.DataFrame | None,
               links: HostLinks | None) -> pd.DataFrame | None:
    """HOST_STEP_COLUMNS (rank 0) of one rank's canonical rows; None without a host side.

    ``spans`` are the rank's host op spans (``HostSide.spans``), ``links`` its HostLinks.
    A rank without step ids gives one row of step <NA>.
    """
    if (spans is None or not len(spans)) and links is None:
        return None
    code, start, end, ids = _device(ops)
    units = max(len(ids), 1)
    groups, s, e = merged_intervals(start, end, code)
    first = np.full(units, np.iinfo(np.int64).max)
    last = np.full(units, np.iinfo(np.int64).min)
    np.minimum.at(first, code, start)
    np.maximum.at(last, code, end)
    busy = np.bincount(groups, weights=(e - s).astype(float), minlength=units)
    has = first <= last
    free = np.where(has, (last - first) - busy, 0.0) / 1000.0
    # gaps between consecutive blocks of one step, each before the block starting at g1
    gap = np.flatnonzero(groups[1:] == groups[:-1])
    g0, g1, gap_step = e[gap], s[gap + 1], groups[gap]
    device, launch = _launch_lookup(links)
    launched = _launch_of(g1, device, launch)
    bound = np.where(launched >= 0, np.clip(np.minimum(g1, launched) - g0, 0, g1 - g0), 0)
    host_bound = np.bincount(gap_step, weights=bound.astype(float), minlength=units) / 1000.0
    compiling = np.full(units, np.nan)
    if links is not None and links.compile is not None:  # recorded: 0 when none compiled
        inside = _covered(g0, g0 + bound, links.compile).astype(float) \
            if len(links.compile) else np.zeros(len(g0))
        compiling = np.bincount(gap_step, weights=inside, minlength=units) / 1000.0
    known = np.isin(start, device)
    launches = np.bincount(code[known], minlength=units)
    windows = _windows(spans)
    step_ids = ids if len(ids) else np.zeros(0, np.int64)
    host_ops = _host_ops(spans, links, windows)
    frame = pd.DataFrame({
        "rank": 0,
        "step": pd.array(ids, dtype="Int64") if len(ids) else pd.array([pd.NA], dtype="Int64"),
        "step_host_us": _window_lengths(windows, step_ids, units),
        "host_busy_us": _busy(host_ops, windows, step_ids, units),
        "dataloader_us": _dataloader(spans, windows, step_ids, units),
        "free_us": free,
        "host_bound_us": host_bound,
        "free_other_us": free - host_bound,
        "compile_us": compiling,
        "launches": launches.astype(np.int64),
    })
    return frame[list(HOST_STEP_COLUMNS)].astype(HOST_STEP_COLUMNS)


def _window_lengths(windows: pd.DataFrame, ids: np.ndarray, units: int) -> np.ndarray:
    if not len(ids):  # one unit without ids: the whole capture, when it is one step
        return np.array([float((windows["end_ns"] - windows["start_ns"]).sum()) / 1000.0
                         if len(windows) == 1 else np.nan])
    length = pd.Series((windows["end_ns"] - windows["start_ns"]).to_numpy() / 1000.0,
                       index=windows["step"].to_numpy())
    return length.reindex(ids).to_numpy(float)


def _whole(windows: pd.DataFrame) -> pd.DataFrame:
    """The windows as one, for a rank without step ids (its rows are one unit)."""
    if not len(windows):
        return windows
    return pd.DataFrame({"step": [0], "start_ns": [int(windows["start_ns"].min())],
                         "end_ns": [int(windows["end_ns"].max())], "thread": [0]})


def _busy(host_ops: pd.DataFrame | None, windows: pd.DataFrame, ids: np.ndarray,
          units: int) -> np.ndarray:
    if not len(ids):
        return _union_in_windows(host_ops, _whole(windows), np.zeros(1, np.int64))
    return _union_in_windows(host_ops, windows, ids)


def _dataloader(spans: pd.DataFrame | None, windows: pd.DataFrame, ids: np.ndarray,
                units: int) -> np.ndarray:
    if spans is None or not len(spans):
        return np.full(units, np.nan)
    loading = by_category(spans["name"], lambda v: v.str.startswith(DATALOADER_PREFIX)
                          ).to_numpy(bool)
    if not loading.any():
        return np.full(units, np.nan)
    return _busy(spans[loading].reset_index(drop=True), windows, ids, units)


# ---------------------------------------------------------------- step lanes

def _median_step(code: np.ndarray, start: np.ndarray, end: np.ndarray,
                 ids: np.ndarray) -> int:
    """Code of the median step by device span: the lower median, a tie to the lower id."""
    units = max(len(ids), 1)
    first = np.full(units, np.iinfo(np.int64).max)
    last = np.full(units, np.iinfo(np.int64).min)
    np.minimum.at(first, code, start)
    np.maximum.at(last, code, end)
    present = np.flatnonzero(first <= last)
    span = (last - first)[present]
    order = present[np.lexsort((present, span))]  # by span, then by step id (codes sort so)
    return int(order[(len(order) - 1) // 2])


def _segments(start: np.ndarray, end: np.ndarray, names: np.ndarray, tolerance: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Intervals merged where closer than ``tolerance`` (ns); the longest's name per segment.

    Only the LABELLED longest segments keep a name; the others get ``""``.
    """
    if not len(start):
        return start, end, np.zeros(0, dtype=object)
    order = np.argsort(start, kind="stable")
    s, e, n = start[order], end[order], names[order]
    running = np.maximum.accumulate(e)
    new = np.r_[True, s[1:] > running[:-1] + tolerance]
    heads = np.flatnonzero(new)
    block = np.cumsum(new) - 1
    seg_s, seg_e = s[heads], np.maximum.reduceat(e, heads)
    longest = np.lexsort((-(e - s), block))
    first_of = np.r_[True, block[longest][1:] != block[longest][:-1]]
    label = np.full(len(heads), "", dtype=object)
    label[block[longest][first_of]] = n[longest][first_of]
    keep = np.argsort(-(seg_e - seg_s), kind="stable")[:LABELLED]
    shown = np.full(len(heads), "", dtype=object)
    shown[keep] = label[keep]
    return seg_s, seg_e, shown


def step_lanes(ops: pd.DataFrame, spans: pd.DataFrame | None, links: HostLinks | None,
               planes: pd.DataFrame | None) -> pd.DataFrame | None:
    """STEP_LANE_COLUMNS of the rank's median step; None without rows.

    Lanes, in order: ``compute`` (rows not of category communication), ``communication``,
    ``plane <n>`` (the HCCL tasks of the step's collectives, ``planes`` from
    reduce/collectives.py), ``host`` (host ops on the launching threads), ``free`` (gaps
    of the device). Times are µs from the step start: its host ``ProfilerStep#N`` start
    when that comes first, else its first device start. Intervals closer than 1/2000 of
    the drawn span merge.
    """
    if not len(ops):
        return None
    code, start, end, ids = _device(ops)
    chosen = _median_step(code, start, end, ids)
    step_id = int(ids[chosen]) if len(ids) else None
    rows = code == chosen
    start, end = start[rows], end[rows]
    windows = _windows(spans)
    window = windows[windows["step"] == step_id] if step_id is not None else _whole(windows)
    t0, t1 = int(start.min()), int(end.max())
    if len(window):
        t0 = min(t0, int(window["start_ns"].iloc[0]))
        t1 = max(t1, int(window["end_ns"].iloc[0]))
    tolerance = max((t1 - t0) // LANE_POINTS, 1)
    picked = ops[rows]
    comm = picked["category"].isin(COMM_CATEGORIES).to_numpy()
    names = picked["op_type"].astype(str).to_numpy(dtype=object)
    lanes = [("compute", start[~comm], end[~comm], names[~comm]),
             ("communication", start[comm], end[comm], names[comm])]
    if planes is not None and len(planes):
        in_step = planes["step"].isna().to_numpy() if step_id is None else \
            (planes["step"] == step_id).fillna(False).to_numpy(bool)
        chosen_planes = planes[in_step]
        for plane in np.unique(chosen_planes["plane"].to_numpy()):
            on = chosen_planes[chosen_planes["plane"].to_numpy() == plane]
            lanes.append((f"plane {int(plane)}", on["start_ns"].to_numpy(np.int64),
                          on["end_ns"].to_numpy(np.int64),
                          on["task_type"].astype(str).to_numpy(dtype=object)))
    host = _host_ops(spans, links, windows)
    if host is not None and len(host):
        hs, he = host["start_ns"].to_numpy(np.int64), host["end_ns"].to_numpy(np.int64)
        inside = (he > t0) & (hs < t1)
        lanes.append(("host", np.maximum(hs[inside], t0), np.minimum(he[inside], t1),
                      host["name"].astype(str).to_numpy(dtype=object)[inside]))
    _, bs, be = merged_intervals(start, end, np.zeros(len(start), np.int64))
    lanes.append(("free", be[:-1], bs[1:], np.full(max(len(bs) - 1, 0), "", dtype=object)))
    frames = []
    for lane, s, e, n in lanes:
        seg_s, seg_e, label = _segments(s, e, n, tolerance)
        frames.append(pd.DataFrame({"lane": lane, "start_us": (seg_s - t0) / 1000.0,
                                    "end_us": (seg_e - t0) / 1000.0, "label": label}))
    out = pd.concat(frames, ignore_index=True)
    out.insert(0, "step", pd.array([step_id] * len(out), dtype="Int64"))
    return out[list(STEP_LANE_COLUMNS)].astype(STEP_LANE_COLUMNS)
