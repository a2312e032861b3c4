"""Compare stage: per-key statistics, category totals, step breakdown, communication.

All totals are per step and per rank (``_us`` per step, averaged over the compared
steps and, for several ranks, over ranks), so runs of different lengths compare.
``*_instances`` columns hold raw counts over the whole run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..match import Matched
from ..schema import Run, RunSummary
from .stats import (
    DEFAULT_THRESHOLDS,
    Thresholds,
    adjust_bh,
    compare_samples,
    compare_steps,
    status_of,
)

BREAKDOWN_FIELDS = ("computing", "communication_not_overlapped", "overlapped", "communication",
                    "free", "bubble", "preparing")
COMM_JSON_FIELDS = ("elapse_us", "transit_us", "wait_us", "synchronization_us", "transit_mb")


@dataclass(frozen=True)
class StepComparison:
    """Step time (Stage, µs per step) of both runs and its per-field breakdown."""

    base_us: float
    new_us: float
    delta_us: float
    delta_pct: float
    p_value: float | None
    significant: bool | None
    ci_low: float | None
    ci_high: float | None
    status: str
    base_samples: tuple[float, ...]
    new_samples: tuple[float, ...]
    breakdown: dict[str, dict[str, float]]


@dataclass(frozen=True)
class Comparison:
    """Everything the later stages need; DataFrames are per key / category / type."""

    base: Run
    new: Run
    matched: Matched
    operators: pd.DataFrame
    categories: pd.DataFrame
    comm_types: pd.DataFrame
    step: StepComparison
    thresholds: Thresholds
    base_units: int
    new_units: int
    base_steps: tuple[int, ...]
    new_steps: tuple[int, ...]
    warnings: tuple[str, ...] = field(default_factory=tuple)
    ranks: pd.DataFrame = field(default_factory=pd.DataFrame)
    groups: pd.DataFrame = field(default_factory=pd.DataFrame)


def units_of(frame: pd.DataFrame) -> pd.Series:
    """Per row (of ``Run.ops`` or ``summary.ops``), its (rank, step) unit as an integer id."""
    step = frame["step"].fillna(-1).to_numpy(np.int64) + 1
    rank = frame["rank"].to_numpy(np.int64)
    width = int(step.max()) + 1 if len(step) else 1
    return pd.Series(pd.factorize(rank * width + step)[0], index=frame.index)


def _count_units(frame: pd.DataFrame) -> int:
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


def compare_operators(base: Run, new: Run, matched: Matched, thresholds: Thresholds,
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
    tests = {key: compare_samples(base_durations[key], new_durations[key], thresholds.confidence)
             for key in table.index if key in base_durations and key in new_durations}
    raw_p = np.array([tests[k].p_value if k in tests and tests[k].p_value is not None
                      else np.nan for k in table.index])
    table["p_value"] = adjust_bh(raw_p)
    table["ci_low"] = [tests[k].ci_low if k in tests else None for k in table.index]
    table["ci_high"] = [tests[k].ci_high if k in tests else None for k in table.index]
    # A count change is structural, not noise, when the per-step count ranges do not overlap.
    count_changed = (table["new_count_min"] > table["base_count_max"]) | \
                    (table["new_count_max"] < table["base_count_min"])
    table["significant"] = (table["p_value"] < thresholds.alpha).fillna(False) | count_changed
    table["status"] = [status_of(d, bool(s), thresholds)
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


def _step_samples(run: Run) -> np.ndarray:
    """Stage time per step, mean over ranks (one sample per step)."""
    steps = run.steps
    if steps.empty:
        return np.array([])
    return steps.groupby(steps["step"].fillna(-1))["stage"].mean().to_numpy()


def compare_step(base: Run, new: Run, thresholds: Thresholds) -> StepComparison:
    """Step time and breakdown: means over steps and ranks, with a Welch test."""
    base_samples, new_samples = _step_samples(base), _step_samples(new)
    base_us = float(base_samples.mean()) if len(base_samples) else float("nan")
    new_us = float(new_samples.mean()) if len(new_samples) else float("nan")
    delta = new_us - base_us
    delta_pct = delta / base_us * 100 if base_us else float("nan")
    test = compare_steps(base_samples, new_samples, thresholds.confidence)
    significant = None if test.p_value is None else bool(test.p_value < thresholds.alpha)
    breakdown = {}
    for name in BREAKDOWN_FIELDS:
        b = float(base.steps[name].mean()) if len(base.steps) else float("nan")
        n = float(new.steps[name].mean()) if len(new.steps) else float("nan")
        breakdown[name] = {"base_us": b, "new_us": n, "delta_us": n - b}
    return StepComparison(base_us, new_us, delta, delta_pct, test.p_value, significant,
                          test.ci_low, test.ci_high, status_of(delta_pct, significant, thresholds),
                          tuple(base_samples), tuple(new_samples), breakdown)


def _comm_side(run: Run, prefix: str) -> pd.DataFrame:
    ops, comm = run.summary.ops, run.summary.comm
    comm_ops = ops[(ops["category"] == "communication").to_numpy()]
    n_units = _count_units(ops)
    grouped = comm_ops.groupby(comm_ops["comm_type"].astype(str))
    side = grouped[["count", "total_us", "exposed_us"]].sum() / n_units
    if len(comm):
        by_type = comm.groupby(comm["comm_type"].astype(str))
        comm_units = max(len(comm[["rank", "step"]].drop_duplicates()), 1)
        side = side.join(by_type[list(COMM_JSON_FIELDS)].sum() / comm_units, how="outer")
        if comm_ops.empty:  # no kernels (cluster summary): counts and time from the json
            side["count"] = by_type["ops"].sum() / comm_units
            side["total_us"] = side["elapse_us"]
            side["exposed_us"] = np.nan
    return side.add_prefix(prefix)


def compare_communication(base: Run, new: Run) -> pd.DataFrame:
    """Per communication type, both sides: count, time and exposed time per step.

    Where communication.json exists, also transit, wait and synchronization per step.
    """
    table = _comm_side(base, "base_").join(_comm_side(new, "new_"), how="outer")
    for column in ("count", "total_us", "exposed_us"):
        for side in ("base_", "new_"):
            table[side + column] = table.get(side + column, pd.Series(dtype=float)).fillna(0.0)
    table["delta_count"] = table["new_count"] - table["base_count"]
    table["delta_us"] = table["new_total_us"] - table["base_total_us"]
    table["delta_exposed_us"] = table["new_exposed_us"] - table["base_exposed_us"]
    table.index.name = "comm_type"
    return table.reset_index().sort_values("delta_us", ascending=False, kind="stable")


RANK_FIELDS = ("stage", "computing", "communication_not_overlapped", "free")


def _rank_side(run: Run, prefix: str) -> pd.DataFrame:
    side = run.steps.groupby("rank")[list(RANK_FIELDS)].mean()
    if len(run.summary.comm):
        by_rank = run.summary.comm.groupby("rank")
        units = by_rank["step"].nunique(dropna=False).clip(lower=1)
        comm = by_rank[["wait_us", "transit_us"]].sum().div(units, axis=0)
        side = side.join(comm, how="left")
    return side.add_prefix(prefix)


def compare_ranks(base: Run, new: Run) -> pd.DataFrame:
    """Per rank: step breakdown (µs per step) and communication wait/transit, both sides."""
    table = _rank_side(base, "base_").join(_rank_side(new, "new_"), how="outer")
    table["delta_stage_us"] = table["new_stage"] - table["base_stage"]
    table.index.name = "rank"
    return table.reset_index()


LINKS = ("hccs", "rdma", "pcie", "sio", "sdma")


def _group_side(run: Run, prefix: str) -> pd.DataFrame:
    comm = run.summary.comm
    if comm.empty:
        return pd.DataFrame()
    by_group = comm.groupby("group")
    units = comm[["group", "rank", "step"]].drop_duplicates().groupby("group").size().clip(lower=1)
    sums = by_group[["elapse_us", "transit_us", "wait_us", "synchronization_us"]].sum()
    side = sums.div(units, axis=0)
    side["ops"] = by_group["ops"].sum() / units
    side["ranks"] = by_group["rank"].nunique()
    with np.errstate(divide="ignore", invalid="ignore"):
        side["wait_ratio"] = sums["wait_us"] / (sums["wait_us"] + sums["transit_us"])
        for link in LINKS:
            if f"{link}_mb" in comm:
                link_sums = by_group[[f"{link}_mb", f"{link}_us"]].sum()
                # MB per µs → GB/s: × 1e6 / 1024
                side[f"{link}_gbps"] = (link_sums[f"{link}_mb"] / link_sums[f"{link}_us"]
                                        * 1e6 / 1024).where(link_sums[f"{link}_us"] > 0)
    return side.add_prefix(prefix)


def compare_groups(base: Run, new: Run) -> pd.DataFrame:
    """Per communication group, both sides: ops, transit and wait (µs per step and rank).

    Also the wait ratio and the bandwidth per link type (GB/s).
    """
    table = _group_side(base, "base_").join(_group_side(new, "new_"), how="outer")
    if table.empty:
        return table
    table.index.name = "group"
    return table.reset_index()


def _step_set(run: Run) -> tuple[int, ...]:
    ops = run.summary.ops
    steps = ops["step"] if len(ops) else run.steps["step"]
    return tuple(sorted(int(s) for s in steps.dropna().unique()))


def compare(base: Run, new: Run, matched: Matched,
            thresholds: Thresholds = DEFAULT_THRESHOLDS) -> Comparison:
    """Build the Comparison of two matched runs."""
    warnings = []
    base_units, new_units = _count_units(base.summary.ops), _count_units(new.summary.ops)
    operators = compare_operators(base, new, matched, thresholds, base_units, new_units)
    step = compare_step(base, new, thresholds)
    base_steps, new_steps = _step_set(base), _step_set(new)
    if base_steps != new_steps and base_steps and new_steps:
        warnings.append(f"the runs cover different steps (base {_fmt_steps(base_steps)}, "
                        f"new {_fmt_steps(new_steps)}); figures are per-step averages")
    if step.p_value is None:
        warnings.append(f"one step per side ({len(step.base_samples)} vs "
                        f"{len(step.new_samples)}): significance of the step change is "
                        f"unknown; the {thresholds.threshold_pct:g}% threshold alone decides")
    elif min(len(step.base_samples), len(step.new_samples)) < 4:
        warnings.append(f"few steps ({len(step.base_samples)} vs {len(step.new_samples)}): "
                        "step significance uses Welch's t-test, which assumes roughly "
                        "normal step times")
    for run in (base, new):
        if run.summary.sampled:
            share = f"{run.summary.fraction:.1%} of every rank, step and operator, at least " \
                "one each" if run.summary.fraction else "one of every rank, step and operator"
            warnings.append(f"{run.label}: per-operator medians, p95 and tests use "
                            f"{run.summary.sample_size:,} of {run.summary.kernels:,} kernel "
                            f"durations ({share}, as evenly spaced quantiles); counts and "
                            "totals are exact")
    if set(base.meta.ranks) != set(new.meta.ranks):
        warnings.append(f"rank sets differ (base {list(base.meta.ranks)}, new "
                        f"{list(new.meta.ranks)}); per-rank means compare unequal sets")
    if base.step_source != new.step_source:
        warnings.append("one run's step breakdown comes from step_trace_time.csv, the other's "
                        "from kernel intervals; small differences in the breakdown may be "
                        "method, not performance")
    return Comparison(base, new, matched, operators, compare_categories(operators),
                      compare_communication(base, new), step, thresholds, base_units,
                      new_units, base_steps, new_steps, tuple(warnings),
                      compare_ranks(base, new), compare_groups(base, new))


def _fmt_steps(steps: tuple[int, ...]) -> str:
    if len(steps) > 6:
        return f"{steps[0]}…{steps[-1]} ({len(steps)} steps)"
    return ",".join(str(s) for s in steps)


