"""The kernel table's status rule, applied to framework-operator keys and module paths.

docs/design.md "Status rules" / "Operator keys", word for word; the first rule that
applies decides: ``added`` / ``removed`` (one side only); ``reshaped`` (paired by name
alone: totals compared, never slower or faster); ``count-changed`` (the per-step instance
counts do not overlap); ``unchanged`` (per-instance change under ``threshold_pct``);
``untested`` (the smallest two-sided p these sample sizes allow is above ``alpha``);
``regressed`` / ``improved`` (significant after Benjamini-Hochberg over the tested keys,
at least the threshold, the test pointing the same way); else ``not-significant``.

An instance's device time is the sum of the kernels it launched; the per-instance change
is the kernel table's one estimate: the Hodges-Lehmann ratio of the instance times (the
median of the pairwise ratios, whose side Mann-Whitney tests), but for a ``count-changed``
key the ratio of the mean instance times (Δ time = Δ count × base mean + new count × Δ
mean: the % shares the per-instance effect's sign). A collective — a key
whose every kernel is communication — with as many instances in every (rank, step) on
both sides is compared instance by instance instead, as the kernel table compares its
collectives (compare/collectives.py): the k-th instance of a step with the k-th of its
counterpart (steps pair by rank and position among the rank's steps), the Wilcoxon
signed-rank test on the differences, the change the ratio of the paired totals. So the
framework table says of ``c10d::allreduce_`` what the kernel table says of AllReduce.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..settings import Thresholds
from .stats import (
    adjust_bh,
    hodges_lehmann_by_group,
    mann_whitney_by_group,
    smallest_p_mann_whitney,
    smallest_p_signed_rank,
    sorted_samples,
    wilcoxon_signed_rank,
)

STATUSES = ("added", "removed", "reshaped", "count-changed", "unchanged", "untested",
            "regressed", "improved", "not-significant")
JUDGED_FIELDS = ("base_instances", "new_instances", "base_count", "new_count",
                 "base_device_us", "new_device_us", "instance_change_pct", "p_value",
                 "tested", "status")


def _side(inst: pd.DataFrame, n_keys: int, units: int) -> pd.DataFrame:
    """Per key: instances, instances and device µs per unit, per-unit count range, median.

    ``count_min`` is 0 when a unit lacks the key (the kernel table's rule).
    """
    key = inst["key"].to_numpy(np.int64)
    out = pd.DataFrame(index=pd.RangeIndex(n_keys))
    out["instances"] = np.bincount(key, minlength=n_keys)
    out["count"] = out["instances"] / units
    out["device_us"] = np.bincount(key, weights=inst["device_us"].to_numpy(float),
                                   minlength=n_keys) / units
    unit = inst.groupby(["rank", "step"], dropna=False, sort=False).ngroup().to_numpy()
    per_unit = pd.Series(unit).groupby([key, unit]).size().groupby(level=0)
    out["count_min"] = per_unit.min().where(per_unit.size() >= units, 0)
    out["count_max"] = per_unit.max()
    out["median_us"] = pd.Series(inst["device_us"].to_numpy(float)).groupby(key).median()
    return out.fillna({"count_min": 0, "count_max": 0})


def counts_differ(base: pd.DataFrame, new: pd.DataFrame, n_keys: int,
                  units: tuple[int, int]) -> np.ndarray:
    """Per key, whether its per-step instance counts do not overlap (min/max per unit).

    The ``count-changed`` condition; a unit that lacks the key counts 0 in it, and a key on
    one side only differs when it runs in every unit of that side.
    """
    return _apart(_side(base, n_keys, units[0]).add_prefix("base_").join(
        _side(new, n_keys, units[1]).add_prefix("new_")))


def _apart(table: pd.DataFrame) -> np.ndarray:
    """Whether the per-step count ranges (``base_``/``new_`` count_min, count_max) are apart."""
    return ((table["new_count_min"] > table["base_count_max"])
            | (table["new_count_max"] < table["base_count_min"])).to_numpy(bool)


def _occurrences(inst: pd.DataFrame, keys: np.ndarray) -> pd.DataFrame:
    """The instances of ``keys``: rank, step position in the rank, k-th of its key there."""
    step = inst["step"].astype("float64").fillna(-1)
    position = step.groupby(inst["rank"].to_numpy()).rank(method="dense")
    mine = inst.assign(position=position.to_numpy())[inst["key"].isin(keys).to_numpy()]
    return mine.assign(occurrence=mine.groupby(["key", "rank", "position"]).cumcount())[
        ["key", "rank", "position", "occurrence", "device_us"]]


def paired_collectives(base: pd.DataFrame, new: pd.DataFrame, keys: np.ndarray
                       ) -> dict[int, tuple[float, float, float, float]]:
    """Per collective key pairable in launch order: (p, smallest p, change %, direction).

    Pairable when every instance has its counterpart (equal counts in every unit, the
    same units); the direction is the sign of the signed-rank sum.
    """
    both = _occurrences(base, keys).merge(
        _occurrences(new, keys), on=["key", "rank", "position", "occurrence"], how="outer",
        suffixes=("_base", "_new"))
    out = {}
    for key, rows in both.groupby("key"):
        base_us, new_us = rows["device_us_base"].to_numpy(), rows["device_us_new"].to_numpy()
        if np.isnan(base_us).any() or np.isnan(new_us).any() or base_us.sum() <= 0:
            continue
        differences = new_us - base_us
        p_value, direction = wilcoxon_signed_rank(differences)
        out[int(key)] = (p_value, smallest_p_signed_rank(int(np.count_nonzero(differences))),
                         (new_us.sum() / base_us.sum() - 1) * 100, float(np.sign(direction)))
    return out


def _pooled_tests(base: pd.DataFrame, new: pd.DataFrame, keys: np.ndarray,
                  n_keys: int, thresholds: Thresholds
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per key of ``keys``: Mann-Whitney p, the smallest p reachable and the HL change %.

    The change is the Hodges-Lehmann ratio new/base (the kernel table's one estimate), so
    that the % a framework row prints and its test speak of one quantity.
    """
    group_of_key = np.full(n_keys, -1, np.int64)
    group_of_key[keys] = np.arange(len(keys))
    groups, values = [], []
    for side in (base, new):
        group = group_of_key[side["key"].to_numpy(np.int64)]
        groups.append(group[group >= 0])
        values.append(side["device_us"].to_numpy(float)[group >= 0])
    p_value = mann_whitney_by_group(groups[0], values[0], groups[1], values[1], len(keys))
    reachable = smallest_p_mann_whitney(np.bincount(groups[0], minlength=len(keys)),
                                        np.bincount(groups[1], minlength=len(keys)))
    ordered = [sorted_samples(g, v, len(keys)) for g, v in zip(groups, values)]
    centre, _, _ = hodges_lehmann_by_group(*ordered[0], *ordered[1], len(keys),
                                           thresholds.confidence)
    return p_value, reachable, (centre - 1) * 100


def _tests(table: pd.DataFrame, base: pd.DataFrame, new: pd.DataFrame,
           per_instance: np.ndarray, collective: np.ndarray,
           thresholds: Thresholds) -> pd.DataFrame:
    """Per key: per-instance change %, test direction, BH-adjusted p (NaN: untested), tested."""
    n_keys = len(table)
    both = (table["base_instances"] > 0).to_numpy() & (table["new_instances"] > 0).to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = table["new_median_us"] / table["base_median_us"]
    change = ((ratio - 1) * 100).where(both & per_instance & (table["base_median_us"] > 0))
    out = pd.DataFrame({"instance_change_pct": change, "direction": np.sign(change.fillna(0)),
                        "p_raw": np.nan, "reachable": 1.0}, index=table.index)
    testable = np.flatnonzero(both & per_instance)
    paired = paired_collectives(base, new, testable[collective[testable]])
    pooled = np.array([k for k in testable if int(k) not in paired], dtype=np.int64)
    p_raw, smallest, hl_pct = _pooled_tests(base, new, pooled, n_keys, thresholds)
    out.loc[pooled, "p_raw"], out.loc[pooled, "reachable"] = p_raw, smallest
    estimated = np.isfinite(hl_pct)
    out.loc[pooled[estimated], "instance_change_pct"] = hl_pct[estimated]
    out.loc[pooled[estimated], "direction"] = np.sign(hl_pct[estimated])
    for key, (p_value, reachable, change_pct, direction) in paired.items():
        out.loc[key, ["p_raw", "reachable", "instance_change_pct", "direction"]] = \
            (p_value, reachable, change_pct, direction)
    out["tested"] = (out["reachable"] <= thresholds.alpha) & out["p_raw"].notna()
    out["p_value"] = adjust_bh(out["p_raw"].where(out["tested"]).to_numpy(float))
    return out.drop(columns=["p_raw", "reachable"])


def _statuses(table: pd.DataFrame, per_instance: np.ndarray, counted: np.ndarray,
              thresholds: Thresholds) -> np.ndarray:
    """The first status (STATUSES, in order) whose condition holds, per key."""
    change = table["instance_change_pct"].to_numpy(float)
    significant = (table["p_value"] < thresholds.alpha).to_numpy(bool)
    agrees = np.sign(np.nan_to_num(change)) == table["direction"].to_numpy(float)
    big = np.nan_to_num(np.abs(change), nan=0.0) >= thresholds.threshold_pct
    conditions = [table["base_instances"].to_numpy() == 0,
                  table["new_instances"].to_numpy() == 0, ~per_instance, counted, ~big,
                  ~table["tested"].to_numpy(bool), significant & agrees & (change > 0),
                  significant & agrees & (change < 0)]
    return np.select(conditions, list(STATUSES[:-1]), default=STATUSES[-1])


def judge(base: pd.DataFrame, new: pd.DataFrame, n_keys: int, units: tuple[int, int],
          per_instance: np.ndarray, collective: np.ndarray, thresholds: Thresholds,
          mix_changed: np.ndarray | None = None) -> pd.DataFrame:
    """Per key id 0 … n_keys − 1: JUDGED_FIELDS (figures per unit, µs), by the module's rule.

    ``base``/``new``: one row per instance (``key``, ``rank``, ``step``, ``device_us``),
    in launch order within each unit; ``units``: each side's (rank, step) units.
    ``per_instance``: keys whose instances are judged (the others, when on both sides,
    are ``reshaped``); ``collective``: keys whose kernels are all communication;
    ``mix_changed``: keys that are ``count-changed`` whatever their own counts (a module
    whose operators changed their counts per step).
    """
    table = _side(base, n_keys, units[0]).add_prefix("base_").join(
        _side(new, n_keys, units[1]).add_prefix("new_"))
    table = table.join(_tests(table, base, new, per_instance, collective, thresholds))
    counted = _apart(table) if mix_changed is None else _apart(table) | mix_changed
    table["status"] = _statuses(table, per_instance, counted, thresholds)
    # Another number of instances a step is another mix of durations: the medians' ratio
    # measures the mix. The count rule's figure is the means' ratio (the Δ split's).
    recounted = (table["status"] == "count-changed").to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        means = ((table["new_device_us"] / table["new_count"])
                 / (table["base_device_us"] / table["base_count"]) - 1) * 100
    table.loc[recounted, "instance_change_pct"] = means[recounted]
    return table[list(JUDGED_FIELDS)]
