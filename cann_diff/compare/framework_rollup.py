"""Roll-ups of the framework table, and the figures that place it in the step's change.

A stack or optimizer rewrite moves time between keys: ``aten::add_`` and ``aten::mul_``
per parameter become ``aten::_foreach_add_`` / ``_foreach_mul_`` over all of them,
``aten::mm`` + bias becomes ``aten::addmm``. Key by key that reads as unrelated removals
and additions; summed by operator name, by family (``data/framework_families.json``) and
by module they read as one change. A roll-up compares totals, not speed: ``increased`` /
``decreased`` when |Δ| is at least ``threshold_pct`` of the base total.

``FrameworkSummary`` says how much of Δ Stage the framework table can explain: the device
time attributed to a framework operator on each side, and what is left (``outside_us``):
time that belongs to no operator (Free, waiting, kernels no link reaches).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache

import numpy as np
import pandas as pd

from ..schema import UNLINKED, Run
from ..settings import Thresholds
from ..vocab.tables import package_map
from .operators import count_units

ROLLUP_FIELDS = ("level", "key", "base_us", "new_us", "delta_us", "status")
LEVELS = ("name", "family", "module")
FAMILIES_FILE = "framework_families.json"
# The mark read/reduce/framework.py (BACKWARD) puts after the module of a backward op:
# the text is the contract, since no later stage may import a reader.
BACKWARD = " (backward)"


@dataclass(frozen=True)
class FrameworkSummary:
    """How much of the step's change the framework table explains (µs per step and rank).

    ``attributed_*_us``: device time of the kernels a framework operator launched
    (UNLINKED excluded). ``step_delta_us``: Δ Stage, the mean over each run's (rank, step)
    rows, every step (as the operator tables cover every step), unless the caller gave
    it. ``outside_us`` = ``step_delta_us`` − ``delta_attributed_us``: time no operator
    holds (Free, waiting, unlinked kernels). Both None when a run has no step rows.
    """

    attributed_base_us: float
    attributed_new_us: float
    delta_attributed_us: float
    step_delta_us: float | None
    outside_us: float | None


@cache
def families() -> dict[str, str]:
    """Framework operator name → family, from the package's table."""
    raw = package_map(FAMILIES_FILE)
    return {name: family for family, names in raw.items() if not family.startswith("_")
            for name in names}


def family_of(names: pd.Series, table: Mapping[str, str] | None = None) -> pd.Series:
    """Family of each name; unlisted names as themselves, without ``aten::`` and a final ``_``.

    ``table``: name → family (the run's Vocabulary, with the user's alias map); the
    package's own by default.
    """
    text = names.astype(str)
    plain = text.str.removeprefix("aten::").str.replace(r"_$", "", regex=True)
    return text.map(dict(families() if table is None else table)).fillna(plain)


def _statuses(base_n: np.ndarray, new_n: np.ndarray, base_us: np.ndarray, new_us: np.ndarray,
              threshold_pct: float) -> np.ndarray:
    """Totals' status: added/removed (one side only), increased/decreased (|Δ| ≥ threshold %)."""
    delta = new_us - base_us
    with np.errstate(divide="ignore", invalid="ignore"):
        pct = np.where(base_us > 0, delta / base_us * 100, np.sign(delta) * np.inf)
    pct = np.nan_to_num(pct, nan=0.0, posinf=np.inf, neginf=-np.inf)
    conditions = [base_n == 0, new_n == 0, pct >= threshold_pct, pct <= -threshold_pct]
    return np.select(conditions, ["added", "removed", "increased", "decreased"],
                     default="unchanged")


def _level(level: str, keys: pd.Series, table: pd.DataFrame, threshold_pct: float
           ) -> pd.DataFrame:
    """One level's rows: ``table``'s per-side counts and µs summed per key."""
    summed = table[["base_count", "new_count", "base_device_us", "new_device_us"]].groupby(
        keys.to_numpy()).sum()
    base_us, new_us = summed["base_device_us"].to_numpy(), summed["new_device_us"].to_numpy()
    return pd.DataFrame({
        "level": level, "key": summed.index.astype(str), "base_us": base_us, "new_us": new_us,
        "delta_us": new_us - base_us,
        "status": _statuses(summed["base_count"].to_numpy(), summed["new_count"].to_numpy(),
                            base_us, new_us, threshold_pct)})


def rollup(operators: pd.DataFrame, modules: pd.DataFrame | None,
           thresholds: Thresholds, named: Mapping[str, str] | None = None) -> pd.DataFrame:
    """ROLLUP_FIELDS by operator name, by family and (with module events) by module.

    A module's backward pass (`` (backward)``) rolls up with its forward; kernels no
    framework op reaches stay one line (UNLINKED), so each level adds up to the table.
    Sorted by level (LEVELS), then |Δ| descending, then key. ``named``: the families
    (``family_of``).
    """
    parts = [_level("name", operators["name"], operators, thresholds.threshold_pct),
             _level("family", family_of(operators["name"], named), operators,
                    thresholds.threshold_pct)]
    if modules is not None:
        keys = modules["module"].astype(str).str.removesuffix(BACKWARD)
        parts.append(_level("module", keys, modules, thresholds.threshold_pct))
    table = pd.concat(parts, ignore_index=True)
    order = table.assign(_level=table["level"].map(LEVELS.index), _move=-table["delta_us"].abs())
    order = order.sort_values(["_level", "_move", "key"], kind="mergesort")
    return order[list(ROLLUP_FIELDS)].reset_index(drop=True)


def _mean_stage(run: Run) -> float | None:
    stage = run.steps["stage"] if "stage" in run.steps else pd.Series(dtype=float)
    value = float(stage.mean()) if len(stage) else math.nan
    return value if math.isfinite(value) else None


def summarize(base: Run, new: Run, step_delta_us: float | None = None) -> FrameworkSummary:
    """FrameworkSummary of two runs with framework frames; Δ Stage from their steps unless given."""
    attributed = []
    for run in (base, new):
        frame = run.framework
        if frame is None:
            raise ValueError(f"{run.label}: no framework frame to summarize")
        linked = frame.loc[(frame["name"] != UNLINKED).to_numpy(), "device_us"].sum()
        attributed.append(float(linked) / count_units(frame))
    if step_delta_us is None:
        stages = _mean_stage(base), _mean_stage(new)
        if stages[0] is not None and stages[1] is not None:
            step_delta_us = stages[1] - stages[0]
    delta = attributed[1] - attributed[0]
    outside = None if step_delta_us is None else step_delta_us - delta
    return FrameworkSummary(attributed[0], attributed[1], delta, step_delta_us, outside)
