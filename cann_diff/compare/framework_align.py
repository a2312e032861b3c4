"""Framework-op instances of two runs aligned per (rank, step) unit, in launch order.

Each unit's sequence of instances — keyed by the paired key id (framework_keys.py), so
an op whose index tensor changed shape still lines up with itself — is aligned with its
counterpart by Myers' shortest edit script (an LCS), as msprof-analyze aligns torch ops
and TraceLens call trees: an inserted or removed operator does not shift the pairing of
the rest. Units pair by rank and by the position of the step among the rank's steps.
The cost is bounded: common prefix and suffix are cut off vectorized, and the middle may
need at most ``Limits.max_align_edits`` edits; beyond that the unit pairs the k-th
instance of every key instead (``cumcount``, as match.py pairs repeats) and a note says so.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _common_ends(a: np.ndarray, b: np.ndarray) -> tuple[int, int]:
    """Lengths of the common prefix and (of what is left) the common suffix."""
    k = min(len(a), len(b))
    differ = a[:k] != b[:k]
    prefix = int(np.argmax(differ)) if differ.any() else k
    a, b = a[prefix:], b[prefix:]
    k = min(len(a), len(b))
    differ = a[len(a) - k:][::-1] != b[len(b) - k:][::-1]
    return prefix, int(np.argmax(differ)) if differ.any() else k


def _snakes(a: np.ndarray, b: np.ndarray, x: np.ndarray, k: np.ndarray) -> np.ndarray:
    """Furthest x along each diagonal k from x while a[x] == b[x - k] (a, b end in sentinels).

    All diagonals step together a few times (most snakes are short); the few still
    running then follow their run in numpy chunks.
    """
    n, m = len(a) - 1, len(b) - 1
    x = x.copy()
    for _ in range(4):
        y = x - k
        equal = (a[np.minimum(x, n)] == b[np.clip(y, 0, m)]) & (x < n) & (y >= 0) & (y < m)
        if not equal.any():
            return x
        x += equal
    for i in np.flatnonzero((a[np.minimum(x, n)] == b[np.clip(x - k, 0, m)]) & (x < n)
                            & (x - k >= 0) & (x - k < m)):
        at, diagonal = int(x[i]), int(k[i])
        while True:
            run = min(n - at, m - (at - diagonal), 1024)
            differ = a[at:at + run] != b[at - diagonal:at - diagonal + run]
            if differ.any() or run == 0:
                at += int(np.argmax(differ)) if run else 0
                break
            at += run
        x[i] = at
    return x


def _myers(a: np.ndarray, b: np.ndarray, max_edits: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Matched positions of an LCS of ``a`` and ``b`` (Myers 1986); None past ``max_edits``.

    The greedy O((n + m)·D) search, each round of D vectorized over its diagonals.
    """
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        return (np.zeros(0, np.int64),) * 2 if n + m <= max_edits else None
    # Every key one side has more of costs an edit each: a bound that rules out, without
    # the search, pairs of sequences too far apart.
    size = int(max(a.max(), b.max())) + 1
    if np.abs(np.bincount(a, minlength=size) - np.bincount(b, minlength=size)).sum() > max_edits:
        return None
    a = np.append(a, -1)  # sentinels: never equal to a key or to each other
    b = np.append(b, -2)
    offset = max_edits + 1
    furthest = np.zeros(2 * max_edits + 3, np.int64)
    history = []
    for d in range(max_edits + 1):
        history.append(furthest[offset - d - 1:offset + d + 2].copy())
        k = np.arange(-d, d + 1, 2)
        left, right = furthest[offset + k - 1], furthest[offset + k + 1]
        down = (k == -d) | ((k != d) & (left < right))
        x = _snakes(a, b, np.where(down, right, left + 1), k)
        furthest[offset + k] = x
        if ((x >= n) & (x - k >= m)).any():
            return _backtrack(history, n, m)
    return None


def _backtrack(history: list, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The diagonal runs (matches) of the edit path that reached (n, m), in order.

    ``history[d]`` holds the furthest x of diagonals -d-1 … d+1 before round d.
    """
    x, y = n, m
    runs = []  # (x, y, length) of each diagonal run, last first
    for d in range(len(history) - 1, 0, -1):
        furthest, k = history[d], x - y
        at = k + d + 1  # index of diagonal k in history[d]
        down = k == -d or (k != d and furthest[at - 1] < furthest[at + 1])
        prev_k = k + 1 if down else k - 1
        prev_x = int(furthest[at + (1 if down else -1)])
        mid_x = prev_x if down else prev_x + 1  # after the edit, before the run
        if x > mid_x:
            runs.append((mid_x, mid_x - k, x - mid_x))
        x, y = prev_x, prev_x - prev_k
    if x > 0:
        runs.append((0, 0, x))
    if not runs:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    runs.reverse()
    return (np.concatenate([np.arange(a, a + r) for a, _, r in runs]),
            np.concatenate([np.arange(b, b + r) for _, b, r in runs]))


def _by_occurrence(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pair the k-th instance of every key (the bounded fallback)."""
    left = pd.DataFrame({"key": a, "occ": pd.Series(a).groupby(a).cumcount(), "i": range(len(a))})
    right = pd.DataFrame({"key": b, "occ": pd.Series(b).groupby(b).cumcount(), "j": range(len(b))})
    both = left.merge(right, on=["key", "occ"]).sort_values("i")
    return both["i"].to_numpy(np.int64), both["j"].to_numpy(np.int64)


def align(a: np.ndarray, b: np.ndarray, max_edits: int) -> tuple[np.ndarray, np.ndarray, bool]:
    """Matched positions (in a, in b) of an LCS of two key sequences, and whether it is exact.

    Beyond ``max_edits`` edits the k-th instances of each key are paired (``False``).
    """
    prefix, suffix = _common_ends(a, b)
    middle = _myers(a[prefix:len(a) - suffix], b[prefix:len(b) - suffix], max_edits)
    exact = middle is not None
    if middle is None:
        middle = _by_occurrence(a[prefix:len(a) - suffix], b[prefix:len(b) - suffix])
    head, tail_a, tail_b = np.arange(prefix), np.arange(len(a) - suffix, len(a)), \
        np.arange(len(b) - suffix, len(b))
    return (np.concatenate([head, middle[0] + prefix, tail_a]),
            np.concatenate([head, middle[1] + prefix, tail_b]), exact)


def _unit_pairs(base: pd.DataFrame, new: pd.DataFrame) -> list[tuple]:
    """(rank, base step, new step) of the units to align: the i-th step of each rank."""
    pairs = []
    for rank in sorted(set(base["rank"]) & set(new["rank"])):
        steps_b = sorted(base.loc[base["rank"] == rank, "step"].dropna().unique())
        steps_n = sorted(new.loc[new["rank"] == rank, "step"].dropna().unique())
        if not steps_b and not steps_n:  # runs without steps: the whole rank is the unit
            pairs.append((rank, pd.NA, pd.NA))
        pairs += [(rank, b, n) for b, n in zip(steps_b, steps_n)]
    return pairs


def _unit_rows(inst: pd.DataFrame, rank, step) -> np.ndarray:
    same_step = inst["step"].isna() if pd.isna(step) else inst["step"] == step
    return np.flatnonzero((inst["rank"] == rank).to_numpy() & same_step.fillna(False).to_numpy())


def _unmatched(count: int, matched: np.ndarray) -> np.ndarray:
    """Rows 0 … count-1 not in ``matched``, in order (a mask: no sort)."""
    lone = np.ones(count, bool)
    lone[matched] = False
    return np.flatnonzero(lone)


def align_units(base: pd.DataFrame, new: pd.DataFrame,
                max_edits: int) -> tuple[pd.DataFrame, list[str]]:
    """Aligned instance pairs of every paired unit; notes for units aligned by occurrence."""
    rows_b, rows_n, coarse = [], [], []
    for rank, step_b, step_n in _unit_pairs(base, new):
        in_b, in_n = _unit_rows(base, rank, step_b), _unit_rows(new, rank, step_n)
        ia, ib, exact = align(base["key"].to_numpy()[in_b], new["key"].to_numpy()[in_n],
                              max_edits)
        rows_b.append(in_b[ia])
        rows_n.append(in_n[ib])
        if not exact:
            coarse.append(f"rank {rank} step {step_b}")
    matched_b = np.concatenate(rows_b) if rows_b else np.zeros(0, np.int64)
    matched_n = np.concatenate(rows_n) if rows_n else np.zeros(0, np.int64)
    pairs = pd.DataFrame({
        "rank": base["rank"].to_numpy()[matched_b],
        "base_step": base["step"].array[matched_b], "new_step": new["step"].array[matched_n],
        "name": base["name"].to_numpy()[matched_b],
        "input_shapes": base["input_shapes"].to_numpy()[matched_b],
        "base_device_us": base["device_us"].to_numpy()[matched_b],
        "new_device_us": new["device_us"].to_numpy()[matched_n]})
    lone_b, lone_n = _unmatched(len(base), matched_b), _unmatched(len(new), matched_n)
    lone = [pd.DataFrame({"rank": side["rank"].to_numpy()[rows],
                          f"{label}_step": side["step"].array[rows],
                          "name": side["name"].to_numpy()[rows],
                          "input_shapes": side["input_shapes"].to_numpy()[rows],
                          f"{label}_device_us": side["device_us"].to_numpy()[rows]})
            for side, rows, label in ((base, lone_b, "base"), (new, lone_n, "new")) if len(rows)]
    notes = []
    if coarse:
        notes.append(f"{len(coarse)} unit(s) ({', '.join(coarse[:4])}) differ by more than "
                     f"{max_edits} framework ops: their instances are paired by occurrence "
                     "instead of aligned")
    instances = pd.concat([pairs, *lone], ignore_index=True) if lone else pairs
    return instances, notes
