"""Interval arithmetic on kernel timelines: step breakdown and exposed communication.

Used when a profile has no step_trace_time.csv (the breakdown is then recomputed
from kernel intervals) and to say how much of each collective is exposed, i.e. not
hidden behind computation. Everything is vectorized: sort once, cumulative max of
interval ends per group, new block where a start passes the running end.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..frames import cut_rows

COMM_CATEGORIES = ("communication",)


def merged_intervals(start_ns: np.ndarray, end_ns: np.ndarray,
                     group: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Union of intervals per group: disjoint, sorted ``group``, ``start``, ``end`` (ns).

    Every ``end`` is at least its ``start`` (durations are never negative once read).
    """
    if len(start_ns) == 0:
        return group[:0], start_ns[:0], end_ns[:0]
    s, e, g = start_ns, end_ns, group
    # Kernel tables are written in start order: a sort is only needed when they are not.
    in_order = (g[1:] > g[:-1]) | ((g[1:] == g[:-1]) & (s[1:] >= s[:-1]))
    if not in_order.all():
        order = np.lexsort((start_ns, group))
        s, e, g = start_ns[order], end_ns[order], group[order]
    first_of_group = np.concatenate(([True], g[1:] != g[:-1]))
    running_end = _running_max(e, np.flatnonzero(first_of_group), g)
    prev_end = np.concatenate(([np.iinfo(np.int64).min], running_end[:-1]))
    starts = np.flatnonzero(first_of_group | (s > prev_end))  # the first row of each block
    # Sorted by start, a block begins at its first row and ends at its last row's running end.
    lasts = np.append(starts[1:], len(s)) - 1
    return g[starts], s[starts], running_end[lasts]


SEGMENT_LOOP_MAX = 64  # groups up to which a loop of numpy accumulates beats a groupby


def _running_max(values: np.ndarray, group_starts: np.ndarray, group: np.ndarray) -> np.ndarray:
    """Cumulative maximum of ``values`` within each run of equal (sorted) ``group``.

    Many runs of integers: one ``maximum.accumulate`` over the values lifted by
    run × (range + 1), so that no run's values reach the next run's; exact, and it
    saves the groupby (a rank's tens of thousands of collectives are as many runs).
    """
    if len(group_starts) > SEGMENT_LOOP_MAX and np.issubdtype(values.dtype, np.integer):
        low, high = int(values.min()), int(values.max())
        width = high - low + 1
        if width * len(group_starts) < 2 ** 62:
            first = np.zeros(len(values), dtype=np.int64)
            first[group_starts] = 1
            lift = (np.cumsum(first) - 1) * width
            return np.maximum.accumulate(values - low + lift) - lift + low
    if len(group_starts) > SEGMENT_LOOP_MAX or not np.issubdtype(values.dtype, np.integer):
        return pd.Series(values).groupby(group).cummax().to_numpy()
    bounds = [*group_starts.tolist(), len(values)]
    return np.concatenate([np.maximum.accumulate(values[low:high])
                           for low, high in zip(bounds[:-1], bounds[1:])])


def _union_length(start_ns, end_ns, group) -> pd.Series:
    """Covered length (µs) per group."""
    groups, starts, ends = merged_intervals(start_ns, end_ns, group)
    return pd.Series((ends - starts) / 1000.0).groupby(groups).sum()


def step_breakdown_from_kernels(ops: pd.DataFrame) -> pd.DataFrame:
    """The step figures (µs) per (rank, step) from kernel intervals: the run's one ledger.

    Computing is the union of non-communication kernels, Communication the union of
    communication ops, Overlapped their intersection, Free the part of the span (first
    start to last end) covered by neither; Bubble is the time of pipeline receives
    (``Receive`` ops, summed) and Stage the span less Bubble, as the profiler defines them.
    Preparing is unknown here.
    """
    if ops.empty:
        return pd.DataFrame(columns=["rank", "step"])
    step = ops["step"].fillna(-1).to_numpy(np.int64)
    keys = pd.DataFrame({"rank": ops["rank"].to_numpy(), "step": step})
    group = keys.groupby(["rank", "step"], sort=True).ngroup().to_numpy()
    start = ops["start_ns"].to_numpy(np.int64)
    end = start + np.rint(ops["dur_us"].to_numpy() * 1000).astype(np.int64)
    is_comm = ops["category"].isin(COMM_CATEGORIES).to_numpy()
    index = pd.Index(np.unique(group))
    computing = _union_length(start[~is_comm], end[~is_comm], group[~is_comm]).reindex(index,
                                                                                     fill_value=0)
    comm = _union_length(start[is_comm], end[is_comm], group[is_comm]).reindex(index, fill_value=0)
    busy = _union_length(start, end, group).reindex(index, fill_value=0)
    receive = is_comm & ((ops["comm_type"] == RECEIVE).to_numpy(bool) if "comm_type" in ops
                         else False)
    bubble = np.bincount(group[receive], weights=(end - start)[receive] / 1000.0,
                         minlength=int(group.max()) + 1)[index]
    span = pd.DataFrame({"g": group, "s": start, "e": end}).groupby("g").agg(s=("s", "min"),
                                                                           e=("e", "max"))
    length = (span["e"] - span["s"]) / 1000.0
    overlapped = computing + comm - busy
    first = keys.groupby(group).first()
    result = pd.DataFrame({
        "rank": first["rank"].to_numpy(),
        "step": pd.array(first["step"].where(first["step"] >= 0).to_numpy(), dtype="Int64"),
        "computing": computing.to_numpy(),
        "communication_not_overlapped": (comm - overlapped).to_numpy(),
        "overlapped": overlapped.to_numpy(),
        "communication": comm.to_numpy(),
        "free": (length - busy).to_numpy(),
        "stage": length.to_numpy() - bubble,
        "bubble": bubble,
        "preparing": np.nan,
    })
    return result


RECEIVE = "Receive"  # the comm type of pipeline receives: the profiler's Bubble
# The kernels cover a step the profiler measured when their span (Stage + Bubble) and their
# Computing each agree with the profiler's within this share (or a µs): then the rows are
# the whole step and their figures replace the profiler's, so that every figure derived
# from the same rows (exposed time per collective, Free's host-bound part) adds up to the
# step table. Kernel rows trimmed to an excerpt cover less, and the profiler's figures stay.
COVERED_SHARE = 0.01
LEDGER_FIELDS = ("computing", "communication_not_overlapped", "overlapped", "communication",
                 "free", "stage", "bubble")


def reconcile_steps(profiler: pd.DataFrame | None, kernels: pd.DataFrame | None
                    ) -> tuple[pd.DataFrame | None, dict[str, float]]:
    """The step figures of one rank: the kernels' where they cover the step.

    ``profiler``: the rank's figures from the profiler (step_trace_time.csv, analysis.db),
    ``kernels``: ``step_breakdown_from_kernels`` of its rows. A step the kernels cover takes
    their LEDGER_FIELDS and keeps the profiler's Preparing; others keep the profiler's row.
    Returns the figures and, per LEDGER_FIELDS, the largest |profiler − kernels| (µs) over
    the replaced rows (empty when nothing was replaced or nothing differed).
    """
    if profiler is None or kernels is None or not len(profiler) or not len(kernels):
        return profiler, {}
    own = profiler.reset_index(drop=True)
    theirs = kernels.drop_duplicates("step").set_index("step")
    found = theirs.reindex(pd.Index(own["step"].astype("Int64")))
    span_p = own["stage"].to_numpy(float) + np.nan_to_num(own["bubble"].to_numpy(float))
    span_k = found["stage"].to_numpy(float) + found["bubble"].to_numpy(float)
    comp_p, comp_k = own["computing"].to_numpy(float), found["computing"].to_numpy(float)
    with np.errstate(invalid="ignore"):
        covered = ((np.abs(span_k - span_p) <= np.maximum(COVERED_SHARE * span_p, 1.0))
                   & (np.abs(comp_k - comp_p) <= np.maximum(COVERED_SHARE * comp_p, 1.0)))
    if not covered.any():
        return profiler, {}
    out = own.copy()
    differ: dict[str, float] = {}
    for name in LEDGER_FIELDS:
        mine = found[name].to_numpy(float)
        before = out[name].to_numpy(float)
        gap = np.abs(mine - before)[covered]
        if np.nanmax(gap, initial=0.0) > 0:
            differ[name] = float(np.nanmax(gap, initial=0.0))
        out[name] = np.where(covered, mine, before)
    return out, differ


# A step id no step has, standing for a missing one (<NA>) in a stack's join keys: a
# missing step matches a missing step, as ``reindex`` matches NA with NA in reconcile_steps.
NO_STEP = np.iinfo(np.int64).min


def _step_keys(steps: pd.Series) -> np.ndarray:
    return pd.array(steps, dtype="Int64").to_numpy(dtype=np.int64, na_value=NO_STEP)


def reconcile_stacked(profilers: list[pd.DataFrame | None], ledger: pd.DataFrame | None
                      ) -> list[tuple[pd.DataFrame | None, dict[str, float]]]:
    """``reconcile_steps`` of every rank of a stack in one pass, with the same results.

    ``profilers``: each stacked rank's figures from the profiler (None: none); ``ledger``:
    ``step_breakdown_from_kernels`` of the whole stack, its ``rank`` the rank's position in
    ``profilers``. Per rank, pandas' fixed costs made the one-rank form ~3 ms: with 10,000
    small ranks, more than the read of their files.
    """
    results: list[tuple[pd.DataFrame | None, dict[str, float]]] = [(p, {}) for p in profilers]
    present = [(n, p) for n, p in enumerate(profilers) if p is not None and len(p)]
    if ledger is None or not len(ledger) or not present:
        return results
    have = [n for n, _ in present]
    lengths = np.array([len(p) for _, p in present], dtype=np.int64)
    slot = np.repeat(np.array(have, dtype=np.int64), lengths)
    own = pd.concat([p for _, p in present], ignore_index=True)
    theirs = ledger.drop_duplicates(["rank", "step"])
    index = pd.MultiIndex.from_arrays([theirs["rank"].to_numpy(np.int64),
                                       _step_keys(theirs["step"])])
    at = index.get_indexer(pd.MultiIndex.from_arrays([slot, _step_keys(own["step"])]))
    hit = at >= 0
    rows = np.maximum(at, 0)

    def kernels(name: str) -> np.ndarray:
        return np.where(hit, theirs[name].to_numpy(float)[rows], np.nan)

    span_p = own["stage"].to_numpy(float) + np.nan_to_num(own["bubble"].to_numpy(float))
    span_k = kernels("stage") + kernels("bubble")
    comp_p, comp_k = own["computing"].to_numpy(float), kernels("computing")
    with np.errstate(invalid="ignore"):
        covered = ((np.abs(span_k - span_p) <= np.maximum(COVERED_SHARE * span_p, 1.0))
                   & (np.abs(comp_k - comp_p) <= np.maximum(COVERED_SHARE * comp_p, 1.0)))
    if not covered.any():
        return results
    out = own.copy()
    gaps = {}
    for name in LEDGER_FIELDS:
        mine, before = kernels(name), out[name].to_numpy(float)
        gap = pd.Series(np.where(covered, np.abs(mine - before), np.nan))
        gaps[name] = gap.groupby(slot).max().reindex(range(len(profilers))).to_numpy()
        out[name] = np.where(covered, mine, before)
    bounds = np.concatenate(([0], np.cumsum(lengths)))
    changed = np.bincount(slot[covered], minlength=len(profilers)) > 0
    for n, frame in zip(have, cut_rows(out, bounds)):
        if changed[n]:
            results[n] = (frame, {name: float(g[n]) for name, g in gaps.items() if g[n] > 0})
    return results


def _covered_until(t: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Length of the disjoint sorted intervals [s, e) lying before each time ``t``."""
    if len(s) == 0:
        return np.zeros(len(t), dtype=np.int64)
    covered_before = np.concatenate(([0], np.cumsum(e - s)))
    idx = np.searchsorted(s, t, side="right") - 1
    at = np.maximum(idx, 0)
    inside = np.clip(t - s[at], 0, (e - s)[at])
    return np.where(idx >= 0, covered_before[at] + inside, 0)


def exposed_communication_us(ops: pd.DataFrame) -> pd.Series:
    """Exposed time (µs) of each communication op, indexed by the communication rows.

    Exposed is the part of the op's interval no computation on the same rank covers, and
    no earlier communication op covers either: where collectives overlap each other (two
    communication streams), the overlap counts once, for the op that started first. So the
    ops' exposed times add up to the rank's exposed communication (its union less
    Computing), the step table's figure, exactly.
    """
    is_comm = ops["category"].isin(COMM_CATEGORIES).to_numpy()
    start = ops["start_ns"].to_numpy(np.int64)
    end = start + np.rint(ops["dur_us"].to_numpy() * 1000).astype(np.int64)
    ranks = ops["rank"].to_numpy()
    # Sort rows by rank once and slice, rather than masking all rows for every rank.
    order = (np.arange(len(ranks)) if len(ranks) == 0 or (ranks == ranks[0]).all()
             else np.argsort(ranks, kind="stable"))
    bounds = np.flatnonzero(np.diff(ranks[order])) + 1
    exposed = np.zeros(len(ops))
    for rows in np.split(order, bounds):
        comm_rows = rows[is_comm[rows]]
        if len(comm_rows) == 0:
            continue
        compute_rows = rows[~is_comm[rows]]
        _, s, e = merged_intervals(start[compute_rows], end[compute_rows],
                                   np.zeros(len(compute_rows), np.int64))
        first = comm_rows[np.argsort(start[comm_rows], kind="stable")]
        reached = np.maximum.accumulate(end[first])
        own_start = np.maximum(start[first],
                               np.concatenate(([np.iinfo(np.int64).min], reached[:-1])))
        own_start = np.minimum(own_start, end[first])  # an op inside an earlier one owns none
        overlap = _covered_until(end[first], s, e) - _covered_until(own_start, s, e)
        exposed[first] = (end[first] - own_start - overlap) / 1000.0
    return pd.Series(exposed[is_comm], index=ops.index[is_comm])
