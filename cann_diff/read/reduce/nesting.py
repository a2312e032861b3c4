"""Host intervals as nested scopes: the innermost op open at a time, module paths."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd


@dataclass(frozen=True)
class Nesting:
    """The host ops of one thread as nested intervals ``[start, end)``.

    Host ops nest (a RecordFunction scope opens and closes inside its parent), so the
    ops open at a time t form a chain with one op per depth; the innermost is the
    latest-starting op at depth ``open_at(t)``. Depths come from one sweep over starts
    and ends; lookups are searchsorted within each depth, so no row is visited in Python.
    """

    index: np.ndarray   # original row of each op, in (depth, start) order
    depth: np.ndarray   # depth of each op (1 = outermost), same order
    start: np.ndarray
    end: np.ndarray
    sorted_starts: np.ndarray
    sorted_ends: np.ndarray
    blocks: dict        # depth -> (lo, hi) slice of the (depth, start) order

    @classmethod
    def of(cls, start: np.ndarray, end: np.ndarray, index: np.ndarray) -> Nesting:
        """Nest the ops ``index`` with these starts and ends (ns); empty spans are left out."""
        keep = end > start
        start, end, index = start[keep], end[keep], index[keep]
        order = np.lexsort((-end, start))  # by start, the longer (the parent) first
        start, end, index = start[order], end[order], index[order]
        n = len(start)
        times = np.concatenate([start, end])
        step = np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)])
        tie = np.concatenate([np.arange(n), np.zeros(n, np.int64)])
        sweep = np.lexsort((tie, step, times))  # ends before starts at one instant
        running = np.cumsum(step[sweep])
        depth = np.empty(n, np.int64)
        opening = sweep < n
        depth[sweep[opening]] = running[opening]
        by_depth = np.lexsort((start, depth))
        depth, start, end, index = depth[by_depth], start[by_depth], end[by_depth], \
            index[by_depth]
        levels, first = np.unique(depth, return_index=True)
        bounds = np.append(first, n)
        blocks = {int(d): (int(bounds[i]), int(bounds[i + 1])) for i, d in enumerate(levels)}
        return cls(index, depth, start, end, np.sort(start), np.sort(end), blocks)

    def open_at(self, times: np.ndarray) -> np.ndarray:
        """Number of ops open at each time."""
        return np.searchsorted(self.sorted_starts, times, "right") - \
            np.searchsorted(self.sorted_ends, times, "right")

    def latest(self, times: np.ndarray, depths: np.ndarray, must_be_open: bool = True
               ) -> np.ndarray:
        """Position (in this order) of the latest op at ``depths`` starting by ``times``; -1."""
        found = np.full(len(times), -1, np.int64)
        for level, (lo, hi) in self.blocks.items():
            asked = np.flatnonzero(depths == level)
            if not len(asked):
                continue
            pos = lo + np.searchsorted(self.start[lo:hi], times[asked], "right") - 1
            ok = pos >= lo
            if must_be_open:
                ok &= self.end[np.maximum(pos, lo)] > times[asked]
            found[asked[ok]] = pos[ok]
        return found

    def innermost(self, times: np.ndarray) -> np.ndarray:
        """Original row of the innermost op open at each time; -1 where none is."""
        pos = self.latest(times, self.open_at(times))
        return np.where(pos >= 0, self.index[np.maximum(pos, 0)], -1)

    def parents(self) -> np.ndarray:
        """Position of each op's parent in this order; -1 for the outermost."""
        return self.latest(self.start, self.depth - 1, must_be_open=False)


def innermost(thread: np.ndarray, start: np.ndarray, end: np.ndarray,
              query_thread: np.ndarray, query_time: np.ndarray) -> np.ndarray:
    """Row of the innermost interval open at each query on the query's thread; -1 if none."""
    found = np.full(len(query_time), -1, np.int64)
    rows = np.arange(len(start))
    for code in np.intersect1d(np.unique(thread), np.unique(query_thread)):
        asked = np.flatnonzero(query_thread == code)
        mine = thread == code
        found[asked] = Nesting.of(start[mine], end[mine], rows[mine]).innermost(
            query_time[asked])
    return found


def module_paths(modules: pd.DataFrame) -> np.ndarray:
    """``Outer_0/Inner_0`` path of every nn.Module event (object array, row order)."""
    paths = np.full(len(modules), "", dtype=object)
    names = modules["name"].astype(str).to_numpy(dtype=object)
    thread = modules["thread"].to_numpy()
    for code in np.unique(thread):
        rows = np.flatnonzero(thread == code)
        nest = Nesting.of(modules["start_ns"].to_numpy()[rows],
                          modules["end_ns"].to_numpy()[rows], rows)
        parent = nest.parents()
        own = names[nest.index]
        text = own.copy()
        for level in sorted(nest.blocks)[1:]:  # parents' paths are complete one level up
            lo, hi = nest.blocks[level]
            up = parent[lo:hi]
            has = up >= 0
            text[lo:hi][has] = text[up[has]] + "/" + own[lo:hi][has]
        paths[nest.index] = text
    return paths

