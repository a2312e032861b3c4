"""Framework operators of two runs: aligned per step, compared per operator and per module.

Kernels change names across CANN stacks; framework operators (``aten::…``) do not. So,
as msprof-analyze aligns torch ops with a longest common subsequence and TraceLens
aligns call trees by edit distance, each (rank, step) unit's sequence of framework-op
instances — keyed by name + input shapes, in launch order — is aligned with its
counterpart (Myers' shortest edit script, i.e. an LCS), so an inserted or removed
operator does not shift the pairing of the rest. Units pair by rank and by the position
of the step among the rank's steps. The cost is bounded: common prefix and suffix are
cut off vectorized, and the middle may need at most ``Settings.max_align_edits`` edits;
beyond that the unit pairs the k-th instance of every key instead (``cumcount``, as
match.py pairs repeats) and a note says so.

Figures are per step and per rank, µs (as the kernel level's). Status per operator
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

from ..read.framework import NO_LINKS, UNLINKED
from ..schema import Note, Run
from ..settings import DEFAULT_SETTINGS, Settings
from .stats import adjust_bh, compare_samples

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

    def to_dict(self) -> dict:
        """report.json form: ``framework_ops``, ``framework_modules``, ``framework_notes``."""
        modules = None if self.modules is None else _records(self.modules)
        return {"framework_ops": _records(self.operators), "framework_modules": modules,
                "framework_notes": [n.text for n in self.notes]}


def _records(frame: pd.DataFrame) -> list[dict]:
    """Rows as JSON-ready dicts: NaN -> None, numpy scalars -> Python."""
    out = frame.astype(object).where(frame.notna(), None).to_dict("records")
    return [{k: (float(v) if isinstance(v, np.floating) else
                 int(v) if isinstance(v, np.integer) else v) for k, v in row.items()}
            for row in out]


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


def _snake(a: np.ndarray, b: np.ndarray, x: int, y: int) -> int:
    """Furthest x along the diagonal from (x, y) while a[x] == b[y], in numpy chunks."""
    n, m = len(a), len(b)
    while x < n and y < m and a[x] == b[y]:
        k = min(n - x, m - y, 512)
        differ = a[x:x + k] != b[y:y + k]
        if differ.any():
            return x + int(np.argmax(differ))
        x, y = x + k, y + k
    return x


def _myers(a: np.ndarray, b: np.ndarray, max_edits: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Matched positions of an LCS of ``a`` and ``b`` (Myers 1986); None past ``max_edits``."""
    n, m = len(a), len(b)
    if n == 0 or m == 0:
        return (np.zeros(0, np.int64),) * 2 if n + m <= max_edits else None
    offset = max_edits + 1
    furthest = [0] * (2 * max_edits + 3)
    history = []
    for d in range(max_edits + 1):
        history.append(furthest[:])
        for k in range(-d, d + 1, 2):
            down = k == -d or (k != d and furthest[offset + k - 1] < furthest[offset + k + 1])
            x = furthest[offset + k + 1] if down else furthest[offset + k - 1] + 1
            x = _snake(a, b, x, x - k)
            furthest[offset + k] = x
            if x >= n and x - k >= m:
                return _backtrack(history, offset, n, m)
    return None


def _backtrack(history: list, offset: int, n: int, m: int) -> tuple[np.ndarray, np.ndarray]:
    """The diagonal runs (matches) of the edit path that reached (n, m), in order."""
    x, y = n, m
    runs = []  # (x, y, length) of each diagonal run, last first
    for d in range(len(history) - 1, 0, -1):
        furthest, k = history[d], x - y
        down = k == -d or (k != d and furthest[offset + k - 1] < furthest[offset + k + 1])
        prev_k = k + 1 if down else k - 1
        prev_x = furthest[offset + prev_k]
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

def _instances(frame: pd.DataFrame, keys: pd.Index) -> pd.DataFrame:
    """One row per linked op instance: rank, step, order, key id, module, device µs."""
    linked = frame[frame["name"] != UNLINKED]
    grouped = linked.groupby(["rank", "step", "order"], observed=True, sort=True, dropna=False)
    inst = grouped.agg(name=("name", "first"), input_shapes=("input_shapes", "first"),
                       module=("module", "first"), device_us=("device_us", "sum"))
    inst = inst.reset_index()
    for column in ("name", "input_shapes", "module"):
        inst[column] = inst[column].astype(str)
    inst["key"] = keys.get_indexer(pd.MultiIndex.from_frame(inst[["name", "input_shapes"]]))
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
    lone_b = np.setdiff1d(np.arange(len(base)), matched_b)
    lone_n = np.setdiff1d(np.arange(len(new)), matched_n)
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
    table["key"] = keys.get_indexer(pd.MultiIndex.from_frame(
        table[["name", "input_shapes"]].astype(str)))
    lists: list = [[] for _ in range(len(keys))]
    for key, kind, count, device_us in zip(table["key"], table["kernel_type"].astype(str),
                                           table["count"], table["device_us"]):
        lists[key].append({"type": kind, "count": round(float(count) / units, 6),
                           "device_us": float(device_us) / units})
    return lists


def _status(base_n: np.ndarray, new_n: np.ndarray, base_count: np.ndarray,
            new_count: np.ndarray, base_us: np.ndarray, new_us: np.ndarray,
            p_adjusted: np.ndarray, floor_us: float, settings: Settings) -> np.ndarray:
    """Status per key (added/removed/changed/unchanged) by the module docstring's rule."""
    delta = new_us - base_us
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(base_us > 0, delta / base_us * 100, np.inf)
    big = np.abs(pct) >= settings.threshold_pct
    tested = ~np.isnan(p_adjusted)
    moved = big & np.where(tested, p_adjusted < settings.alpha, np.abs(delta) >= floor_us)
    counted = ~np.isclose(base_count, new_count, rtol=0, atol=1e-9)
    status = np.where(counted | moved, "changed", "unchanged").astype(object)
    status[base_n == 0] = "added"
    status[new_n == 0] = "removed"
    return status


def _samples(inst: pd.DataFrame, n_keys: int, column: str = "key") -> list[np.ndarray]:
    order = np.argsort(inst[column].to_numpy(), kind="stable")
    keys = inst[column].to_numpy()[order]
    values = inst["device_us"].to_numpy()[order]
    bounds = np.searchsorted(keys, np.arange(n_keys + 1))
    return [values[bounds[k]:bounds[k + 1]] for k in range(n_keys)]


def _tests(base: list, new: list, settings: Settings) -> np.ndarray:
    """BH-adjusted Mann-Whitney p per key where both sides have enough instances; else NaN."""
    enough = settings.min_ci_instances
    raw = np.array([compare_samples(b, n, settings.confidence, settings.max_pairs_per_side
                                    ).p_value if len(b) >= enough and len(n) >= enough
                    else np.nan for b, n in zip(base, new)], dtype=float)
    return adjust_bh(raw)


def _side_totals(inst: pd.DataFrame, keys: pd.Index, column: str,
                 units: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Instances, instances per unit and device µs per unit of every key."""
    n = np.bincount(inst[column].to_numpy(), minlength=len(keys)).astype(float)
    return n, n / units, np.bincount(inst[column].to_numpy(), weights=inst["device_us"],
                                     minlength=len(keys)) / units


def compare_operators(base: pd.DataFrame, new: pd.DataFrame, settings: Settings
                      ) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """The per-operator table (FRAMEWORK_OP_FIELDS), the aligned instances, notes."""
    pairs = pd.concat([f[["name", "input_shapes"]].astype(str) for f in (base, new)])
    keys = pd.MultiIndex.from_frame(pairs.drop_duplicates().sort_values(["name",
                                                                          "input_shapes"]))
    inst_b, inst_n = _instances(base, keys), _instances(new, keys)
    instances, notes = align_units(inst_b, inst_n, settings.max_align_edits)
    units_b, units_n = _units(base), _units(new)
    # UNLINKED kernels count as one "instance" per unit, so that totals add up.
    unlinked = [f[f["name"] == UNLINKED].groupby(["rank", "step"], observed=True,
                                                 dropna=False)["device_us"].sum().reset_index()
                for f in (base, new)]
    key_of_unlinked = keys.get_indexer([(UNLINKED, "")])[0]
    sides = []
    for inst, extra, frame, units in ((inst_b, unlinked[0], base, units_b),
                                      (inst_n, unlinked[1], new, units_n)):
        everything = pd.concat([inst[["key", "device_us"]],
                                extra.assign(key=key_of_unlinked)[["key", "device_us"]]])
        sides.append((_side_totals(everything, keys, "key", units),
                      _samples(everything, len(keys)), _kernel_lists(frame, keys, units)))
    (n_b, count_b, us_b), samples_b, kernels_b = sides[0]
    (n_n, count_n, us_n), samples_n, kernels_n = sides[1]
    floor = base["device_us"].sum() / units_b * settings.material_pct / 100
    status = _status(n_b, n_n, count_b, count_n, us_b, us_n,
                     _tests(samples_b, samples_n, settings), floor, settings)
    table = pd.DataFrame({"name": keys.get_level_values(0), "input_shapes":
                          keys.get_level_values(1), "base_count": count_b, "new_count": count_n,
                          "base_device_us": us_b, "new_device_us": us_n,
                          "delta_us": us_n - us_b, "status": status,
                          "base_kernels": kernels_b, "new_kernels": kernels_n})
    table = _by_move(table, ["name", "input_shapes"])
    return table[list(FRAMEWORK_OP_FIELDS)], instances, notes


def compare_modules(base: pd.DataFrame, new: pd.DataFrame, settings: Settings
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
    totals, samples = [], []
    for side, frame in zip(inst, (base, new)):
        side = side.assign(key=names.get_indexer(side["module"].astype(str)))
        totals.append(_side_totals(side, names, "key", _units(frame)))
        samples.append(_samples(side, len(names)))
    (n_b, count_b, us_b), (n_n, count_n, us_n) = totals
    floor = base["device_us"].sum() / _units(base) * settings.material_pct / 100
    status = _status(n_b, n_n, count_b, count_n, us_b, us_n,
                     _tests(samples[0], samples[1], settings), floor, settings)
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
    total = frame["device_us"].sum()
    lone = frame.loc[frame["name"] == UNLINKED, "device_us"].sum()
    if total > 0 and lone / total >= 0.05:
        return [f"{run.label}: {lone / total:.0%} of kernel time is linked to no framework "
                f"operator (shown as {UNLINKED})"]
    return []


def compare_framework(base: Run, new: Run, settings: Settings = DEFAULT_SETTINGS
                      ) -> tuple[FrameworkComparison | None, str]:
    """Compare two runs per framework operator; (None, reason) when a run has no links."""
    for run in (base, new):
        if run.framework is None:
            reason = run.framework_note or f"no host→device links: {NO_LINKS}"
            return None, f"{run.label}: {reason}"
    operators, instances, notes = compare_operators(base.framework, new.framework, settings)
    modules = compare_modules(base.framework, new.framework, settings)
    notes += [n for run in (base, new) for n in ([run.framework_note] if run.framework_note
                                                  else [])]
    notes += _coverage_notes(base) + _coverage_notes(new)
    return FrameworkComparison(operators, modules, instances,
                               tuple(Note("framework", text) for text in notes)), ""
