"""``slow-rank``: a rank whose step, computing or exposed communication is an outlier."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..compare import Comparison
from .base import Finding, ms


def slow_ranks(cmp: Comparison) -> list[Finding]:
    """Ranks of the new run whose step, computing or exposed communication is an outlier."""
    ranks = cmp.ranks
    thresholds = cmp.thresholds
    if len(ranks) < thresholds.min_ranks:
        return []
    findings = []
    for column, what in (("new_computing", "computing"),
                         ("new_communication_not_overlapped", "exposed communication"),
                         ("new_stage", "step time")):
        values = ranks[column].dropna()
        if len(values) < thresholds.min_ranks:
            continue
        median = values.median()
        mad = (values - median).abs().median() * 1.4826
        floor = max(mad, thresholds.rank_floor_pct / 100 * abs(median), 1e-9)
        z = (values - median) / floor
        for index in z[z > thresholds.outlier_z].index:
            rank = int(ranks.loc[index, "rank"])
            excess = values[index] - median
            why, kind = _waiting_or_transfer(ranks, index)
            findings.append(Finding(
                "slow-rank", "medium", f"Rank {rank}: {what} is an outlier",
                f"Rank {rank} spends {ms(values[index])} per step on {what}, "
                f"{ms(excess)} above the median of {len(values)} ranks ({ms(median)}). "
                f"{why}", float(excess),
                {"rank": rank, "metric": what, "value_us": float(values[index]),
                 "median_us": float(median), "communication_growth": kind}))
    return findings


def _waiting_or_transfer(ranks: pd.DataFrame, slow_index) -> tuple[str, str]:
    """Tell whether the other ranks' communication grew by waiting (for a straggler)."""
    needed = ("base_wait_us", "new_wait_us", "base_transit_us", "new_transit_us")
    if not all(c in ranks for c in needed):
        return "Without communication.json, wait and transfer cannot be told apart.", "unknown"
    others = ranks.drop(index=slow_index)
    wait = float((others["new_wait_us"] - others["base_wait_us"]).median())
    transit = float((others["new_transit_us"] - others["base_transit_us"]).median())
    if not (np.isfinite(wait) and np.isfinite(transit)):
        return "Wait and transfer times are missing for some ranks.", "unknown"
    if wait > max(transit, 0.0):
        return (f"The other ranks' communication wait grew by {ms(wait)} per step (median) "
                f"against {ms(transit)} of transfer: they are waiting for this straggler.",
                "waiting")
    return (f"The other ranks' transfer time changed by {ms(transit)} and their wait by "
            f"{ms(wait)} per step (median): communication grew by transfer, not by waiting "
            "for this rank.", "transfer")
