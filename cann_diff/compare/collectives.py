"""Collectives compared instance by instance, in launch order.

A collective type is one operator key (it has no input shapes), yet its instances are of
unlike sizes: a step's first AllReduce may carry 16 MB and wait for every rank, the next
few 1 MB. Pooled, a Mann-Whitney test compares a mix with a mix and says little. Where
both runs launched the same number of instances in every (rank, step) — the same model
on another stack — the k-th instance of a step is paired with the k-th instance of its
counterpart step (steps pair by rank and by their position among the rank's steps, as the
framework level pairs them), and the differences are tested with the Wilcoxon
signed-rank test. The per-instance change of such a key is its ratio of paired totals
(the time the step spends in the collective, weighted as the step weighs it), and its
interval is that ratio's own: the ratio estimator's normal interval, on the log scale
(``paired_ratio``), so that the % and the interval printed beside it are one estimate.

Pairing needs every duration in launch order: a run whose durations were sampled
(``RunSummary.sampled``) is compared pooled.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..schema import RunSummary
from .stats import normal_quantile


@dataclass(frozen=True)
class Paired:
    """One collective key's paired instances: base and new durations (µs), pair by pair."""

    base_us: np.ndarray
    new_us: np.ndarray


def _units(summary: RunSummary, keys: np.ndarray, key: int
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The key's durations ordered by (rank, step position), launch order within a unit.

    Returns the distinct units (rank × a large stride + position), each unit's count and
    the durations; a step's position is its rank among the rank's steps (every key's).
    """
    ops = summary.ops
    steps = ops["step"].astype("float64").fillna(-1)
    position = steps.groupby(ops["rank"].to_numpy()).rank(method="dense").to_numpy(np.int64)
    unit_of_row = ops["rank"].to_numpy(np.int64) * (1 << 32) + position
    sample_rows = summary.samples["row"].to_numpy()
    mine = keys[sample_rows] == key
    units = unit_of_row[sample_rows[mine]]
    order = np.argsort(units, kind="stable")  # stable: launch order within a unit stays
    distinct, counts = np.unique(units[order], return_counts=True)
    return distinct, counts, summary.samples["dur_us"].to_numpy(dtype=float)[mine][order]


def pair_instances(base: RunSummary, new: RunSummary, base_keys: np.ndarray,
                   new_keys: np.ndarray, key: int) -> Paired | None:
    """The key's instances paired in launch order, or None when they cannot be.

    They cannot when a run's durations were sampled, when a (rank, step) unit has the key
    on one side only, or when a unit's counts differ.
    """
    if base.sampled or new.sampled:
        return None
    base_units, base_counts, base_us = _units(base, base_keys, key)
    new_units, new_counts, new_us = _units(new, new_keys, key)
    if not len(base_units) or not np.array_equal(base_units, new_units) \
            or not np.array_equal(base_counts, new_counts):
        return None
    return Paired(base_us, new_us)


def collective_keys(table: pd.DataFrame) -> np.ndarray:
    """Key ids of the communication keys that both runs have."""
    both = (table["base_instances"] > 0) & (table["new_instances"] > 0)
    return table.index[(table["category"] == "communication") & both].to_numpy(np.int64)


def paired_ratio(pairs: Paired, confidence: float, min_pairs: int
                 ) -> tuple[float, float, float]:
    """Ratio of the paired totals new/base and its interval: (ratio, low, high).

    R = Σ new / Σ base. Its standard error is the ratio estimator's (linearized):
    √(Σ (new_i − R·base_i)² / (k − 1) / k) / mean(base), for k pairs; the interval is
    R·exp(±z·se/R), on the log scale so that it stays positive. NaN bounds with fewer
    than ``min_pairs`` pairs (the rule of every operator interval); the ratio is NaN when
    the base total is not positive.
    """
    k = len(pairs.base_us)
    base_total = float(pairs.base_us.sum())
    if k == 0 or base_total <= 0:
        return float("nan"), float("nan"), float("nan")
    ratio = float(pairs.new_us.sum()) / base_total
    if k < max(min_pairs, 2) or ratio <= 0:
        return ratio, float("nan"), float("nan")
    residual = pairs.new_us - ratio * pairs.base_us
    spread = math.sqrt(float((residual ** 2).sum()) / (k - 1) / k) / (base_total / k)
    half = normal_quantile(0.5 + confidence / 2) * spread / ratio
    return ratio, ratio * math.exp(-half), ratio * math.exp(half)
