"""The step test: a rank test from ``few_steps`` steps a side, Welch's t on logs below.

A few slow steps (a checkpoint, a host stall, a collective waiting on a straggler) are
part of a run, not errors to be cut from one side. Mann-Whitney treats both sides alike,
and a step 2.5× slow counts no more than one just above the rest, where it pins Welch's t
near 1 (the mean and the variance both follow it): on 12 steps a side, each a 2.5×
checkpoint with probability 0.1, Welch missed a steady +5 % in 87 % of draws,
Mann-Whitney in 2 % (both at their level, ≤ 5 %, on A/A). Its estimate is the
Hodges-Lehmann ratio (the median of every new/base step ratio) and its interval the
distribution-free one of the same order statistics, taken from the same null distribution
as p, so that (without ties) the interval excludes 1 exactly when p < 1 − confidence.
Below ``few_steps``
a rank test can hardly reach α (3 vs 3: its smallest p is 0.1; 4 vs 4: 0.029) and Welch's
t on log step times decides, with its ratio of geometric means; with one step a side
nothing is tested.

The test is the per-key tests' own (``stats.mann_whitney_tests``): exact without ties up
to ``Limits.exact_max_pairs`` pairs (``scipy.stats.mannwhitneyu(method="exact")``'s p;
scipy's own "auto" goes exact only below 8 steps a side), else the normal approximation
with scipy's tie and continuity corrections (its "asymptotic" p).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .stats import (
    EXACT_MAX_PAIRS,
    _lower_tail,
    compare_steps,
    mann_whitney_tests,
    normal_quantile,
)

MANN_WHITNEY = "mann-whitney"
WELCH_LOG = "welch-log"

@dataclass(frozen=True)
class StepTest:
    """Outcome of the step test: which test, p, the ratio new/base and its interval.

    ``name`` is None (no test: a side with one step or a non-positive step time), then
    ``p_value``, ``ratio`` and the interval are None too. ``ratio`` is the test's own
    estimate: the Hodges-Lehmann ratio (Mann-Whitney) or the ratio of geometric means
    (Welch).
    """

    name: str | None
    p_value: float | None
    ratio: float | None
    ci_low: float | None
    ci_high: float | None


def step_test(base: np.ndarray, new: np.ndarray, confidence: float,
              rank_from: int) -> StepTest:
    """Mann-Whitney + Hodges-Lehmann with ``rank_from`` steps a side or more, else Welch."""
    base = np.asarray(base, dtype=float)
    new = np.asarray(new, dtype=float)
    if len(base) < 2 or len(new) < 2 or (base <= 0).any() or (new <= 0).any():
        return StepTest(None, None, None, None, None)
    if min(len(base), len(new)) >= rank_from:
        return rank_test(base, new, confidence)
    welch = compare_steps(base, new, confidence)
    ratio = math.exp(float(np.log(new).mean() - np.log(base).mean()))
    return StepTest(WELCH_LOG, welch.p_value, ratio, welch.ci_low, welch.ci_high)


def rank_test(base: np.ndarray, new: np.ndarray, confidence: float,
              exact_max_pairs: int = EXACT_MAX_PAIRS) -> StepTest:
    """Two-sided Mann-Whitney p, the Hodges-Lehmann ratio and its interval.

    The per-key tests' own code (``stats.mann_whitney_tests``, one group): exact without
    ties up to ``exact_max_pairs`` pairs, else the normal approximation with scipy's tie
    and continuity corrections. The ratio is the median of the pairwise ratios new/base,
    as the operator table's; the interval is [D(c), D(nm + 1 − c)] of the nm sorted
    ratios (1-based), c − 1 the largest U that the test rejects at 1 − confidence: the
    shifts the test would not reject. Without ties (the exact path) it excludes 1 exactly
    when p < 1 − confidence; with ties both are normal approximations, which agree up to
    the continuity correction. Every value equal on both sides: p = 1, ratio 1.
    """
    n_b, n_n = len(base), len(new)
    pairs = n_b * n_n
    ratios = np.sort(np.divide.outer(new, base).ravel())
    ratio = float(np.median(ratios))
    values = np.concatenate([base, new])
    if (values == values[0]).all():
        return StepTest(MANN_WHITNEY, 1.0, 1.0, 1.0, 1.0)
    p, exact = mann_whitney_tests(np.zeros(n_b, np.int64), base, np.zeros(n_n, np.int64),
                                  new, 1, exact_max_pairs)
    alpha = 1 - confidence
    if exact[0]:
        tail = _lower_tail(min(n_b, n_n), max(n_b, n_n))  # P(U ≤ k), k up to nm/2
        c = int(np.count_nonzero(2 * tail < alpha))  # U = 0 … c − 1 are rejected
    else:
        n = n_b + n_n
        ties = np.unique(values, return_counts=True)[1].astype(float)
        spread = math.sqrt(n_b * n_n / 12 * ((n + 1) - float((ties**3 - ties).sum())
                                             / (n * (n - 1))))
        c = max(0, math.ceil(pairs / 2 - 0.5 - normal_quantile(1 - alpha / 2) * spread))
    if c < 1:
        return StepTest(MANN_WHITNEY, float(p[0]), ratio, None, None)
    return StepTest(MANN_WHITNEY, float(p[0]), ratio, float(ratios[c - 1]),
                    float(ratios[pairs - c]))
