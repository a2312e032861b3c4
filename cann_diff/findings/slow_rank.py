"""``slow-rank``: a rank whose step, computing or exposed communication became an outlier.

A rank is an outlier of a run when its mean per step lies above the ranks' median by more
than ``outlier_z`` · max(1.4826 · MAD, ``rank_floor_pct`` of the median). A finding is
about change: the new run's outlier is named only when its excess over the median grew
since base by at least ``material_pct`` of the base step and ``threshold_pct`` of the
median, and, with two or more steps a side, significantly (Welch on its per-step excess
over each step's median, Bonferroni over the outliers judged). An imbalance present in
both runs (the last pipeline stage holding the LM head) is described by
``imbalances_in_both`` for the Per rank section, not raised.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..compare import Comparison
from ..compare.stats import welch_p
from ..schema import Note, Run
from .base import Finding, ms

# (per-rank column of ``Run.steps``, the words for it)
METRICS = (("computing", "computing"),
           ("communication_not_overlapped", "exposed communication"),
           ("stage", "step time"))


def _outliers(means: pd.Series, cmp: Comparison) -> tuple[pd.Series, float]:
    """Ranks of one run whose mean lies beyond the robust-z cut, and the median."""
    t = cmp.thresholds
    median = float(means.median())
    mad = float((means - median).abs().median()) * 1.4826
    floor = max(mad, t.rank_floor_pct / 100 * abs(median), 1e-9)
    return (means - median) / floor > t.outlier_z, median


def _per_step_excess(run: Run, column: str, compared: tuple[int, ...]) -> pd.DataFrame:
    """Per (rank, step) of the compared steps: the value less that step's median over ranks.

    The steps the per-rank table (``cmp.ranks``) averages over, so that the test judges
    what the outlier was found on (µs).
    """
    steps = run.steps[["rank", "step", column]].dropna()
    if compared:
        steps = steps[steps["step"].isin(compared).to_numpy(bool)]
    return steps.assign(excess=steps[column] - steps.groupby("step")[column].transform("median"))


@dataclass(frozen=True)
class RankMetric:
    """One new-run outlier judged against base, µs per step.

    ``value_us``/``median_us``: the rank's mean and the ranks' median in new, ``base_*``
    the same in base; ``p_value``: Welch on the per-step excess (None with one step a
    side: ``tested`` False); ``base_outlier``: it was an outlier of base too; ``changed``:
    the finding is raised.
    """

    rank: int
    column: str
    what: str
    ranks: int
    value_us: float
    median_us: float
    base_value_us: float
    base_median_us: float
    p_value: float | None
    tested: bool
    base_outlier: bool
    changed: bool

    @property
    def excess_us(self) -> float:
        """How far above the median the rank lies in new."""
        return self.value_us - self.median_us

    @property
    def base_excess_us(self) -> float:
        """How far above the median the rank lay in base."""
        return self.base_value_us - self.base_median_us


def judge(cmp: Comparison) -> list[RankMetric]:
    """Every (rank, metric) outlier of the new run, judged against base."""
    ranks, t = cmp.ranks, cmp.thresholds
    if len(ranks) < t.min_ranks:
        return []
    table = ranks.set_index("rank")
    found = []
    for column, what in METRICS:
        new, base = table[f"new_{column}"].dropna(), table[f"base_{column}"].dropna()
        if len(new) < t.min_ranks or len(base) < t.min_ranks:
            continue
        outlier, median = _outliers(new, cmp)
        base_outlier, base_median = _outliers(base, cmp)
        for rank in outlier[outlier].index.intersection(base.index):
            found.append((column, what, int(rank), len(new), float(new[rank]), median,
                          float(base[rank]), base_median, bool(base_outlier[rank])))
    level = t.alpha / max(len(found), 1)  # Bonferroni over the outliers judged
    floor = t.material_pct / 100 * max(cmp.step.base_us or 0.0, 1e-9)
    excess = {(side, column): _per_step_excess(run, column, compared)
              for column in {f[0] for f in found}
              for side, run, compared in (("base", cmp.base, cmp.step.base_steps),
                                          ("new", cmp.new, cmp.step.new_steps))}
    judged = []
    for column, what, rank, count, value, median, base_value, base_median, was in found:
        grown = (value - median) - (base_value - base_median)
        material = grown >= max(floor, t.threshold_pct / 100 * abs(median))
        base_excess, new_excess = (
            frame.loc[frame["rank"].to_numpy() == rank, "excess"].to_numpy()
            for frame in (excess["base", column], excess["new", column]))
        p_value = welch_p(base_excess, new_excess)
        significant = p_value is None or (p_value < level
                                          and new_excess.mean() > base_excess.mean())
        judged.append(RankMetric(rank, column, what, count, value, median, base_value,
                                 base_median, p_value, p_value is not None, was,
                                 bool(material and significant)))
    return judged


def slow_ranks(cmp: Comparison, judged: list[RankMetric] | None = None) -> list[Finding]:
    """Ranks of the new run that became outliers in step, computing or exposed communication."""
    findings = []
    for r in judge(cmp) if judged is None else judged:
        if not r.changed:
            continue
        slow_index = cmp.ranks.index[cmp.ranks["rank"].to_numpy() == r.rank][0]
        why, kind = _waiting_or_transfer(cmp.ranks, slow_index)
        test = (f"Welch p = {r.p_value:.2g} on its per-step excess" if r.tested
                else "one step a side: not tested")
        findings.append(Finding(
            "slow-rank", "medium", f"Rank {r.rank}: {r.what} is an outlier",
            f"Rank {r.rank} spends {ms(r.value_us)} per step on {r.what}, {ms(r.excess_us)} "
            f"above the median of {r.ranks} ranks ({ms(r.median_us)}); in base "
            f"{ms(r.base_value_us)}, {ms(r.base_excess_us)} above the median: the excess "
            f"grew by {ms(r.excess_us - r.base_excess_us)} ({test}). {why}",
            float(r.excess_us),
            {"rank": r.rank, "metric": r.what, "value_us": r.value_us,
             "median_us": r.median_us, "base_value_us": r.base_value_us,
             "base_median_us": r.base_median_us,
             "growth_us": r.excess_us - r.base_excess_us, "p_value": r.p_value,
             "tested": r.tested, "communication_growth": kind}))
    return findings


def imbalances_in_both(cmp: Comparison,
                       judged: list[RankMetric] | None = None) -> tuple[Note, ...]:
    """A ``rank-imbalance`` Note per (rank, metric) that is an outlier in both runs.

    For the Per rank section, as "in both runs": outliers that did not grow into a
    ``slow-rank`` finding.

    ``data``: ``rank``, ``metric`` (``computing``, ``exposed communication``, ``step
    time``), ``ranks``, ``base_value_us``, ``new_value_us``, ``base_median_us``,
    ``new_median_us`` (µs per step).
    """
    return tuple(Note(
        "rank-imbalance",
        f"Rank {r.rank} spends {ms(r.value_us)} per step on {r.what}, {ms(r.excess_us)} "
        f"above the median of {r.ranks} ranks, in both runs (base {ms(r.base_value_us)}, "
        f"{ms(r.base_excess_us)} above): an imbalance of the job, not a change.",
        {"rank": r.rank, "metric": r.what, "ranks": r.ranks,
         "base_value_us": r.base_value_us, "new_value_us": r.value_us,
         "base_median_us": r.base_median_us, "new_median_us": r.median_us})
        for r in (judge(cmp) if judged is None else judged)
        if r.base_outlier and not r.changed)


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
