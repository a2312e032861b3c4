"""Statistics, opinionated: the test is chosen from the data, not offered as a menu.

* Per operator key: the per-instance durations of both sides are compared with the
  Mann-Whitney U test (no normality assumed; kernels have long tails), the effect is
  the ratio of medians new/base with a Hodges-Lehmann interval on log durations, and
  p-values across keys are adjusted with Benjamini-Hochberg.
* Per step: per-step totals are few (often 1-5 steps), where Mann-Whitney cannot
  reach p < 0.05 below 4 vs 4; Welch's t-test can. With one step per side,
  significance is unknown and the threshold alone decides (and the report says so).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from ..settings import DEFAULT_SETTINGS, Settings


@dataclass(frozen=True)
class SampleTest:
    """Outcome of comparing two samples.

    ``p_value`` is None when not computable, the confidence interval of the ratio
    new/base None when the samples are too small.
    """

    p_value: float | None
    ci_low: float | None
    ci_high: float | None


def _subsample(values: np.ndarray, limit: int) -> np.ndarray:
    """At most ``limit`` evenly spaced order statistics.

    Deterministic, and the same for the same sample on both sides (identical runs give
    an interval around 1).
    """
    if len(values) <= limit:
        return values
    picks = np.linspace(0, len(values) - 1, limit).round().astype(np.int64)
    return np.sort(values)[picks]


def ratio_interval(base: np.ndarray, new: np.ndarray,
                   confidence: float = 0.95,
                   max_pairs: int = DEFAULT_SETTINGS.max_pairs_per_side
                   ) -> tuple[float | None, float | None]:
    """Hodges-Lehmann interval of the ratio new/base, from pairwise log differences.

    Uses the normal approximation to the Mann-Whitney distribution for the order
    statistics; returns (None, None) when the samples are too small for one.
    """
    base = base[base > 0]
    new = new[new > 0]
    if len(base) < 2 or len(new) < 2:
        return None, None
    base, new = _subsample(base, max_pairs), _subsample(new, max_pairs)
    diffs = np.subtract.outer(np.log(new), np.log(base)).ravel()
    nb, nn = len(base), len(new)
    z = stats.norm.ppf(0.5 + confidence / 2)
    # The interval is [D(C), D(nm + 1 − C)] of the sorted differences (1-based), with
    # C = floor(nm/2 − z·√(nm(n+m+1)/12)); 0-based that is [C − 1, nm − C].
    c = int(math.floor(nb * nn / 2 - z * math.sqrt(nb * nn * (nb + nn + 1) / 12)))
    if c < 1:
        return None, None
    # Only two order statistics are needed: a partition is linear, a sort is not.
    lo, hi = c - 1, diffs.size - c
    low, high = np.partition(diffs, [lo, hi])[[lo, hi]]
    return float(np.exp(low)), float(np.exp(high))


def compare_samples(base: np.ndarray, new: np.ndarray, confidence: float = 0.95,
                    max_pairs: int = DEFAULT_SETTINGS.max_pairs_per_side) -> SampleTest:
    """Mann-Whitney U (two-sided) plus the HL ratio interval; None where undefined."""
    base = np.asarray(base, dtype=float)
    new = np.asarray(new, dtype=float)
    if len(base) == 0 or len(new) == 0:
        return SampleTest(None, None, None)
    if np.all(base == base[0]) and np.all(new == base[0]):
        p_value = 1.0
    else:
        p_value = float(stats.mannwhitneyu(base, new, alternative="two-sided").pvalue)
    low, high = ratio_interval(base, new, confidence, max_pairs)
    return SampleTest(p_value, low, high)


def adjust_bh(p_values: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values; NaN (untested) stays NaN."""
    p_values = np.asarray(p_values, dtype=float)
    adjusted = np.full_like(p_values, np.nan)
    tested = ~np.isnan(p_values)
    if tested.any():
        adjusted[tested] = stats.false_discovery_control(p_values[tested], method="bh")
    return adjusted


def compare_steps(base: np.ndarray, new: np.ndarray,
                  confidence: float = 0.95) -> SampleTest:
    """Welch's t-test on per-step totals; interval of the ratio of means (delta method).

    With fewer than two steps on a side there is no test: p_value is None.
    """
    base = np.asarray(base, dtype=float)
    new = np.asarray(new, dtype=float)
    if len(base) < 2 or len(new) < 2:
        return SampleTest(None, None, None)
    mean_b, mean_n = base.mean(), new.mean()
    var_b, var_n = base.var(ddof=1) / len(base), new.var(ddof=1) / len(new)
    if var_b + var_n == 0:
        p_value = 1.0 if mean_b == mean_n else 0.0
    else:
        p_value = float(stats.ttest_ind(new, base, equal_var=False).pvalue)
    if mean_b <= 0:
        return SampleTest(p_value, None, None)
    ratio = mean_n / mean_b
    # Delta method: var(ratio) ≈ ratio² (var_n/mean_n² + var_b/mean_b²).
    spread = ratio * math.sqrt(var_n / mean_n**2 + var_b / mean_b**2) if mean_n > 0 else 0.0
    # Welch-Satterthwaite degrees of freedom, as the t-test uses, so CI and p agree.
    total = var_b + var_n
    denominator = (var_b**2 / (len(base) - 1) + var_n**2 / (len(new) - 1))
    dof = total**2 / denominator if denominator > 0 else float(len(base) + len(new) - 2)
    t = stats.t.ppf(0.5 + confidence / 2, dof)
    return SampleTest(p_value, float(ratio - t * spread), float(ratio + t * spread))


def status_of(delta_pct: float, significant: bool | None, settings: Settings) -> str:
    """``regressed``/``improved`` only when significant (or unknown) and big enough.

    ``significant=None`` (one step per side) lets the threshold alone decide.
    """
    if significant is False or not np.isfinite(delta_pct):
        return "unchanged"
    if delta_pct >= settings.threshold_pct:
        return "regressed"
    if delta_pct <= -settings.threshold_pct:
        return "improved"
    return "unchanged"
