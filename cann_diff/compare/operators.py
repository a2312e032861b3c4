"""Per operator key: counts and times per step, significance and status; category totals."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..match import Matched
from ..schema import Run, RunSummary
from .stats import Settings, adjust_bh, compare_samples, status_of


def units_of(frame: pd.DataFrame) -> pd.Series:
    """Per row (of ``Run.ops`` or ``summary.ops``), its (rank, step) unit as an integer id."""
    step = frame["step"].fillna(-1).to_numpy(np.int64) + 1
    rank = frame["rank"].to_numpy(np.int64)
    width = int(step.max()) + 1 if len(step) else 1
    return pd.Series(pd.factorize(rank * width + step)[0], index=frame.index)


def count_units(frame: pd.DataFrame) -> int:
    """Number of (rank, step) units the rows cover, at least 1 (the divisor of per-step figures)."""
    return max(int(units_of(frame).nunique()), 1) if len(frame) else 1


def _sample_keys(summary: RunSummary, keys: np.ndarray) -> np.ndarray:
    rows = summary.samples["row"].to_numpy()
    return keys[rows] if len(rows) else np.zeros(0, dtype=np.int64)


def _side_stats(summary: RunSummary, keys: np.ndarray, n_units: int,
                prefix: str) -> pd.DataFrame:
    """Counts and totals per key, exact from the summary; median and p95 from its samples."""
    ops = summary.ops
    frame = pd.DataFrame({"key_id": keys, "count": ops["count"].to_numpy(),
                          "total": ops["total_us"].to_numpy(), "unit": units_of(ops).to_numpy()})
    grouped = frame.groupby("key_id")
    durations = pd.Series(summary.samples["dur_us"].to_numpy()).groupby(
        _sample_keys(summary, keys))
    stats = pd.DataFrame({"instances": grouped["count"].sum(),
                          "total_us": grouped["total"].sum() / n_units})
    stats["mean_us"] = stats["total_us"] * n_units / stats["instances"]
    stats["median_us"] = durations.median()
    if summary.sampled:  # the samples sit at the (i + ½)/k quantiles: read them alike
        stats["p95_us"] = durations.agg(lambda v: np.quantile(v, 0.95, method="hazen"))
    else:
        stats["p95_us"] = durations.quantile(0.95)
    stats["count"] = stats["instances"] / n_units
    per_unit = frame.groupby(["key_id", "unit"])["count"].sum().groupby("key_id")
    units_with_key = per_unit.size()
    stats["count_min"] = per_unit.min().where(units_with_key >= n_units, 0)
    stats["count_max"] = per_unit.max()
    return stats.add_prefix(prefix)


def _durations_by_key(summary: RunSummary, keys: np.ndarray) -> dict[int, np.ndarray]:
    sample_keys = _sample_keys(summary, keys)
    if len(sample_keys) == 0:
        return {}
    order = np.argsort(sample_keys, kind="stable")
    sorted_keys = sample_keys[order]
    durations = summary.samples["dur_us"].to_numpy()[order]
    bounds = np.flatnonzero(np.diff(sorted_keys)) + 1
    starts = np.concatenate(([0], bounds))
    return {int(sorted_keys[s]): chunk for s, chunk in zip(starts, np.split(durations, bounds))}


def compare_operators(base: Run, new: Run, matched: Matched, settings: Settings,
                      base_units: int, new_units: int) -> pd.DataFrame:
    """Per matched key: counts and times per step, deltas, significance and status."""
    if (len(matched.base_key), len(matched.new_key)) != (len(base.summary.ops),
                                                         len(new.summary.ops)):
        raise ValueError("match() was given other rows than the runs' summary.ops")
    table = matched.keys.set_index("key_id")
    table = table.join(_side_stats(base.summary, matched.base_key, base_units, "base_"))
    table = table.join(_side_stats(new.summary, matched.new_key, new_units, "new_"))
    for side in ("base", "new"):
        for column in ("instances", "count", "total_us", "count_min", "count_max"):
            table[f"{side}_{column}"] = table[f"{side}_{column}"].fillna(0)
        table[f"{side}_instances"] = table[f"{side}_instances"].astype("int64")
    table["delta_us"] = table["new_total_us"] - table["base_total_us"]
    with np.errstate(divide="ignore", invalid="ignore"):
        table["delta_pct"] = np.where(table["base_total_us"] > 0,
                                      table["delta_us"] / table["base_total_us"] * 100, np.nan)
    base_durations = _durations_by_key(base.summary, matched.base_key)
    new_durations = _durations_by_key(new.summary, matched.new_key)
    tests = {key: compare_samples(base_durations[key], new_durations[key], settings.confidence,
                                  settings.max_pairs_per_side)
             for key in table.index if key in base_durations and key in new_durations}
    raw_p = np.array([tests[k].p_value if k in tests and tests[k].p_value is not None
                      else np.nan for k in table.index])
    table["p_value"] = adjust_bh(raw_p)
    table["ci_low"] = [tests[k].ci_low if k in tests else None for k in table.index]
    table["ci_high"] = [tests[k].ci_high if k in tests else None for k in table.index]
    # A count change is structural, not noise, when the per-step count ranges do not overlap.
    count_changed = (table["new_count_min"] > table["base_count_max"]) | \
                    (table["new_count_max"] < table["base_count_min"])
    table["significant"] = (table["p_value"] < settings.alpha).fillna(False) | count_changed
    table["status"] = [status_of(d, bool(s), settings)
                       for d, s in zip(table["delta_pct"], table["significant"])]
    table.loc[table["base_instances"] == 0, "status"] = "added"
    table.loc[table["new_instances"] == 0, "status"] = "removed"
    return table.reset_index()


def compare_categories(operators: pd.DataFrame) -> pd.DataFrame:
    """Per category: count and total time per step, both sides, and the delta."""
    cats = operators.groupby("category")[["base_count", "new_count", "base_total_us",
                                          "new_total_us"]].sum()
    cats["delta_us"] = cats["new_total_us"] - cats["base_total_us"]
    return cats.reset_index()
