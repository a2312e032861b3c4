"""Framework operators of two runs: aligned per step, compared per operator and per module.

Kernels change names across CANN stacks; framework operators (``aten::…``) do not. So,
as msprof-analyze aligns torch ops with a longest common subsequence and TraceLens
aligns call trees by edit distance, each (rank, step) unit's sequence of framework-op
instances — keyed by name + input shapes, in launch order — is aligned with its
counterpart (Myers' shortest edit script, i.e. an LCS), so an inserted or removed
operator does not shift the pairing of the rest. Units pair by rank and by the position
of the step among the rank's steps. The cost is bounded: common prefix and suffix are
cut off vectorized, and the middle may need at most ``Limits.max_align_edits`` edits;
beyond that the unit pairs the k-th instance of every key instead (``cumcount``, as
match.py pairs repeats) and a note says so.

Figures are per step and per rank, µs (as the kernel level's); kernels no link reaches
form one more row, ``(no framework op)``, so that the table adds up. Status per operator
(name, input_shapes), kept deliberately simple:

* ``added`` / ``removed``: instances on one side only;
* ``changed``: instances per step differ, or device time per step moved by at least
  ``threshold_pct`` — confirmed, where both sides have ``min_ci_instances`` instances,
  by a Mann-Whitney U test of per-instance device times (BH-adjusted across operators,
  ``alpha``), and otherwise (too few instances for a test) only when the move is also
  at least ``material_pct`` of the base run's framework device time per step;
* ``unchanged`` otherwise.

Modules get the same figures and rule from the instances under each module path.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..schema import NO_FRAMEWORK_LINKS, NO_LINKS, UNLINKED, Note, Run
from ..settings import DEFAULT_LIMITS, DEFAULT_THRESHOLDS, Limits, Thresholds
from .stats import adjust_bh

FRAMEWORK_OP_FIELDS = ("name", "input_shapes", "base_count", "new_count", "base_device_us",
                       "new_device_us", "delta_us", "status", "base_kernels", "new_kernels")
MODULE_FIELDS = ("module", "base_count", "new_count", "base_device_us", "new_device_us",
                 "delta_us", "status")
NO_MODULE = "(no module)"


@dataclass(frozen=True)
class FrameworkComparison:
    """Per framework operator and per module, both runs; figures per step and rank, µs.

    ``operators`` has FRAMEWORK_OP_FIELDS (``*_kernels``: list of ``{type, count,
    device_us}`` per step and rank, largest first), ordered by |delta_us|; ``modules``
    has MODULE_FIELDS, or is None when neither run recorded stacks; ``instances`` the
    aligned pairs (``rank``, ``base_step``, ``new_step``, ``name``, ``input_shapes``,
    ``base_device_us``, ``new_device_us``; NaN on the side an instance is missing).
    """

    operators: pd.DataFrame
    modules: pd.DataFrame | None
    instances: pd.DataFrame
    notes: tuple[Note, ...] = ()


def _normal_sf(z: np.ndarray) -> np.ndarray:
    """The standard normal's upper tail, from scipy.special (scipy.stats costs 0.6 s)."""
    from scipy import special

    return special.ndtr(-np.asarray(z, dtype=float))


# ---------------------------------------------------------------- alignment

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


# ---------------------------------------------------------------- instances

def key_ids(frame: pd.DataFrame, keys: pd.MultiIndex) -> np.ndarray:
    """Row of ``keys`` (name, input_shapes) of every row, looked up per distinct pair only."""
    names, shapes = frame["name"].astype("category"), frame["input_shapes"].astype("category")
    width = len(shapes.cat.categories) + 1
    pair, distinct = pd.factorize(names.cat.codes.to_numpy(np.int64) * width
                                  + shapes.cat.codes.to_numpy(np.int64))
    text = pd.MultiIndex.from_arrays([
        np.asarray(names.cat.categories.astype(str))[distinct // width],
        np.asarray(shapes.cat.categories.astype(str))[distinct % width]])
    return keys.get_indexer(text)[pair] if len(frame) else np.zeros(0, np.int64)


def _instances(frame: pd.DataFrame, keys: pd.MultiIndex) -> pd.DataFrame:
    """One row per linked op instance: rank, step, order, key id, module, device µs."""
    linked = frame[(frame["name"] != UNLINKED).to_numpy()]
    grouped = linked.groupby(["rank", "step", "order"], observed=True, sort=True, dropna=False)
    inst = grouped.agg(name=("name", "first"), input_shapes=("input_shapes", "first"),
                       module=("module", "first"), device_us=("device_us", "sum"))
    inst = inst.reset_index()
    inst["key"] = key_ids(inst, keys)
    return inst


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


# ---------------------------------------------------------------- per operator

def _units(frame: pd.DataFrame) -> int:
    """(rank, step) units a run's framework rows cover, at least 1."""
    return max(len(frame[["rank", "step"]].drop_duplicates()), 1)


def _kernel_lists(frame: pd.DataFrame, keys: pd.Index, units: int) -> list:
    """Per key, [{type, count, device_us}] per step and rank, largest first."""
    grouped = frame.groupby(["name", "input_shapes", "kernel_type"], observed=True)
    table = grouped.agg(count=("kernels", "sum"), device_us=("device_us", "sum")).reset_index()
    table = table.sort_values(["device_us", "kernel_type"], ascending=[False, True],
                              kind="mergesort")
    table["key"] = key_ids(table, keys)
    lists: list = [[] for _ in range(len(keys))]
    for key, kind, count, device_us in zip(table["key"], table["kernel_type"].astype(str),
                                           table["count"], table["device_us"]):
        lists[key].append({"type": kind, "count": round(float(count) / units, 6),
                           "device_us": float(device_us) / units})
    return lists


def _status(base_n: np.ndarray, new_n: np.ndarray, base_count: np.ndarray,
            new_count: np.ndarray, base_us: np.ndarray, new_us: np.ndarray,
            p_adjusted: np.ndarray, floor_us: float, thresholds: Thresholds) -> np.ndarray:
    """Status per key (added/removed/changed/unchanged) by the module docstring's rule."""
    delta = new_us - base_us
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(base_us > 0, delta / base_us * 100, np.inf)
    big = np.abs(pct) >= thresholds.threshold_pct
    tested = ~np.isnan(p_adjusted)
    moved = big & np.where(tested, p_adjusted < thresholds.alpha, np.abs(delta) >= floor_us)
    counted = ~np.isclose(base_count, new_count, rtol=0, atol=1e-9)
    status = np.where(counted | moved, "changed", "unchanged").astype(object)
    status[base_n == 0] = "added"
    status[new_n == 0] = "removed"
    return status


def _mann_whitney(samples: pd.DataFrame, n_keys: int, thresholds: Thresholds) -> np.ndarray:
    """BH-adjusted two-sided Mann-Whitney U p per key; NaN where a side has too few instances.

    ``samples``: ``key``, ``side`` (0 base, 1 new), ``device_us``. All keys at once, from
    ranks within each key: the normal approximation with tie and continuity corrections
    (scipy's ``method="asymptotic"``), since a loop of scipy calls over thousands of
    operator keys would cost more than the rest of the comparison.
    """
    key, side = samples["key"].to_numpy(), samples["side"].to_numpy()
    rank = samples.groupby("key")["device_us"].rank(method="average").to_numpy()
    n_new = np.bincount(key, weights=side, minlength=n_keys)
    n_all = np.bincount(key, minlength=n_keys).astype(float)
    n_base = n_all - n_new
    rank_base = np.bincount(key, weights=rank * (side == 0), minlength=n_keys)
    u_base = rank_base - n_base * (n_base + 1) / 2
    ties = samples.groupby(["key", "device_us"]).size()
    tie_sum = np.bincount(ties.index.get_level_values(0).to_numpy(),
                          weights=(ties.to_numpy() ** 3 - ties.to_numpy()).astype(float),
                          minlength=n_keys)
    with np.errstate(divide="ignore", invalid="ignore"):
        variance = n_base * n_new / 12 * ((n_all + 1) - tie_sum / (n_all * (n_all - 1)))
        centred = u_base - n_base * n_new / 2
        z = (np.abs(centred) - 0.5).clip(min=0) / np.sqrt(variance)
    p_value = np.where(variance > 0, np.minimum(2 * _normal_sf(z), 1.0), 1.0)
    enough = (n_base >= thresholds.min_ci_instances) & (n_new >= thresholds.min_ci_instances)
    return adjust_bh(np.where(enough, p_value, np.nan))


def _side_totals(inst: pd.DataFrame, keys: pd.Index, column: str,
                 units: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Instances, instances per unit and device µs per unit of every key."""
    n = np.bincount(inst[column].to_numpy(), minlength=len(keys)).astype(float)
    return n, n / units, np.bincount(inst[column].to_numpy(), weights=inst["device_us"],
                                     minlength=len(keys)) / units


def compare_operators(base: pd.DataFrame, new: pd.DataFrame, thresholds: Thresholds,
                      limits: Limits = DEFAULT_LIMITS
                      ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The per-operator table (FRAMEWORK_OP_FIELDS), the aligned instances, notes."""
    pairs = pd.concat([f[["name", "input_shapes"]].drop_duplicates().astype(str)
                       for f in (base, new)])
    keys = pd.MultiIndex.from_frame(pairs.drop_duplicates().sort_values(["name",
                                                                          "input_shapes"]))
    inst_b, inst_n = _instances(base, keys), _instances(new, keys)
    instances, notes = align_units(inst_b, inst_n, limits.max_align_edits)
    units_b, units_n = _units(base), _units(new)
    # UNLINKED kernels count as one "instance" per unit, so that totals add up.
    unlinked = [f[f["name"] == UNLINKED].groupby(["rank", "step"], observed=True,
                                                 dropna=False)["device_us"].sum().reset_index()
                for f in (base, new)]
    key_of_unlinked = keys.get_indexer([(UNLINKED, "")])[0]
    sides, pooled = [], []
    for number, (inst, extra, frame, units) in enumerate(((inst_b, unlinked[0], base, units_b),
                                                         (inst_n, unlinked[1], new, units_n))):
        everything = pd.concat([inst[["key", "device_us"]],
                                extra.assign(key=key_of_unlinked)[["key", "device_us"]]])
        sides.append((_side_totals(everything, keys, "key", units),
                      _kernel_lists(frame, keys, units)))
        pooled.append(everything.assign(side=number))
    (n_b, count_b, us_b), kernels_b = sides[0]
    (n_n, count_n, us_n), kernels_n = sides[1]
    floor = base["device_us"].sum() / units_b * thresholds.material_pct / 100
    status = _status(n_b, n_n, count_b, count_n, us_b, us_n,
                     _mann_whitney(pd.concat(pooled), len(keys), thresholds), floor, thresholds)
    table = pd.DataFrame({"name": keys.get_level_values(0), "input_shapes":
                          keys.get_level_values(1), "base_count": count_b, "new_count": count_n,
                          "base_device_us": us_b, "new_device_us": us_n,
                          "delta_us": us_n - us_b, "status": status,
                          "base_kernels": kernels_b, "new_kernels": kernels_n})
    table = _by_move(table, ["name", "input_shapes"])
    return table[list(FRAMEWORK_OP_FIELDS)], instances, notes


def compare_modules(base: pd.DataFrame, new: pd.DataFrame, thresholds: Thresholds
                    ) -> pd.DataFrame | None:
    """Per module path (MODULE_FIELDS); None when neither run recorded modules."""
    if not ((base["module"] != "").any() or (new["module"] != "").any()):
        return None
    linked = [f[f["name"] != UNLINKED] for f in (base, new)]
    inst = [f.groupby(["rank", "step", "order"], observed=True, dropna=False).agg(
        module=("module", "first"), device_us=("device_us", "sum")).reset_index()
        for f in linked]
    names = pd.Index(sorted(set(inst[0]["module"].astype(str)) | set(inst[1]["module"]
                                                                     .astype(str))))
    totals, pooled = [], []
    for number, (side, frame) in enumerate(zip(inst, (base, new))):
        side = side.assign(key=names.get_indexer(side["module"].astype(str)), side=number)
        totals.append(_side_totals(side, names, "key", _units(frame)))
        pooled.append(side[["key", "side", "device_us"]])
    (n_b, count_b, us_b), (n_n, count_n, us_n) = totals
    floor = base["device_us"].sum() / _units(base) * thresholds.material_pct / 100
    status = _status(n_b, n_n, count_b, count_n, us_b, us_n,
                     _mann_whitney(pd.concat(pooled), len(names), thresholds), floor, thresholds)
    table = pd.DataFrame({"module": [m or NO_MODULE for m in names], "base_count": count_b,
                          "new_count": count_n, "base_device_us": us_b, "new_device_us": us_n,
                          "delta_us": us_n - us_b, "status": status})
    return _by_move(table, ["module"])


def _by_move(table: pd.DataFrame, names: list[str]) -> pd.DataFrame:
    """Largest |delta_us| first, then by name: a stable, deterministic order."""
    order = table.assign(_move=-table["delta_us"].abs()).sort_values(["_move", *names],
                                                                      kind="mergesort")
    return order.drop(columns="_move").reset_index(drop=True)


def _coverage_notes(run: Run) -> list[str]:
    """Share of the run's kernel time no framework op reaches, when it is not small."""
    frame = run.framework
    if frame is None:
        return []
    total = frame["device_us"].sum()
    lone = frame.loc[frame["name"] == UNLINKED, "device_us"].sum()
    if total > 0 and lone / total >= 0.05:
        return [f"{run.label}: {lone / total:.0%} of kernel time is linked to no framework "
                f"operator (shown as {UNLINKED})"]
    return []


def compare_framework(base: Run, new: Run, thresholds: Thresholds = DEFAULT_THRESHOLDS,
                      limits: Limits = DEFAULT_LIMITS
                      ) -> tuple[FrameworkComparison | None, Note | None]:
    """Compare two runs per framework operator; (None, why) when a run has no links."""
    for run in (base, new):
        if run.framework is None:
            note = run.framework_note
            why = note.text if note else f"no host→device links: {NO_LINKS}"
            # The reason names its rank directory first: a label that is that name once.
            named = note is not None and note.data.get("source") == run.label
            return None, Note(NO_FRAMEWORK_LINKS, why if named else f"{run.label}: {why}")
    operators, instances, notes = compare_operators(base.framework, new.framework, thresholds,
                                                    limits)
    modules = compare_modules(base.framework, new.framework, thresholds)
    notes += [run.framework_note.text for run in (base, new) if run.framework_note]
    notes += _coverage_notes(base) + _coverage_notes(new)
    return FrameworkComparison(operators, modules, instances,
                               tuple(Note("framework", text) for text in notes)), None
