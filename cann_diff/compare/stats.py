"""Statistics, opinionated: the test is chosen from the data, not offered as a menu.

* Per operator key: the per-instance durations of both sides are compared with the
  Mann-Whitney U test (no normality assumed; kernels have long tails). Its p is exact
  where scipy defines the exact test (no ties: scipy's exact null distribution assumes
  none) and it is affordable (n·m ≤ ``EXACT_MAX_PAIRS``), else the normal approximation
  with continuity and tie correction; p-values across keys are adjusted with
  Benjamini-Hochberg. The effect is the Hodges-Lehmann ratio new/base, the median of the
  pairwise ratios, with the interval the same order statistics give (on log durations):
  the estimator that belongs to the test, so that its sign is the test's direction.
* Per step: per-step totals are few (often 2-5 steps). A rank test cannot help there:
  Mann-Whitney (or any permutation test) of 3 vs 3 has a smallest two-sided p of
  2/C(6,3) = 0.1, of 2 vs 2 one of 1/3, so it could never call a step change
  significant. Welch's t-test on the *logarithms* of the step times can: it needs no
  equal variances, a step time is a product of many small factors (log-normal noise),
  and the difference of log means is the log of the ratio of geometric means, so its
  interval is a ratio interval that never goes negative. It leans on roughly normal log
  step times, which a few warm-up or checkpoint steps break: those are screened out first
  by a robust z (median ± z·1.4826·MAD, ``robust_z``). With one step per side,
  significance is unknown and a threshold alone decides (and the report says so).
* Status: ``regressed``/``improved`` need significance *and* a change of at least the
  threshold; a significant change below it keeps ``unchanged`` but is flagged
  ``below_threshold`` so that a renderer shows its % with a mark of its own (``~`` means
  "not significant" only).

Speed: the per-key tests run in one pass over all keys (``mann_whitney_by_group``: one
sort, ranks within groups, scipy's normal approximation with tie correction written out;
durations on the nanosecond grid sort as packed integers, and a side sorted once by
``sorted_samples`` also gives its medians and p95 without a groupby); the exact null
distribution is built once per pair of sample sizes (``_lower_tail``, cached), not once
per key. The Hodges-Lehmann figures of all keys whose sample sizes agree come from one
partition of their pairwise ratios, row by row (a sort of them would cost ~30× more).
scipy.stats is never imported (it costs more than
all the tests); scipy.special (the normal and t distribution functions) only where a p or
an interval needs it.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..settings import DEFAULT_LIMITS, DEFAULT_THRESHOLDS


@dataclass(frozen=True)
class SampleTest:
    """Outcome of comparing two samples.

    ``p_value`` is None when not computable, the confidence interval of the ratio
    new/base None when the samples are too small.
    """

    p_value: float | None
    ci_low: float | None
    ci_high: float | None


def _subsample(values: np.ndarray, limit: int, ordered: bool = False) -> np.ndarray:
    """At most ``limit`` evenly spaced order statistics (``ordered``: values ascending).

    Deterministic, and the same for the same sample on both sides (identical runs give
    an interval around 1).
    """
    if len(values) <= limit:
        return values
    picks = np.linspace(0, len(values) - 1, limit).round().astype(np.int64)
    return (values if ordered else np.sort(values))[picks]


def _interval_rank(n_base, n_new, z: float):
    """C of the Hodges-Lehmann interval [D(C), D(nm + 1 − C)] (1-based sorted ratios).

    C = floor(nm/2 − z·√(nm(n+m+1)/12)), the normal approximation to the Mann-Whitney
    distribution; scalars or arrays alike (the same rounding either way).
    """
    nm = n_base * n_new
    return np.floor(nm / 2 - z * np.sqrt(nm * (n_base + n_new + 1) / 12))


def ratio_estimate(base: np.ndarray, new: np.ndarray,
                   confidence: float = 0.95,
                   max_pairs: int = DEFAULT_LIMITS.max_pairs_per_side,
                   ordered: bool = False) -> tuple[float | None, float | None, float | None]:
    """Hodges-Lehmann ratio new/base and its interval: (centre, low, high).

    The centre is the median of the pairwise ratios new/base (the mean of the middle two
    of an even count, as ``np.median``), the interval the order statistics the normal
    approximation to the Mann-Whitney distribution names, of the same ratios: the
    centre lies inside its interval. Durations that are not positive are left out; the
    centre needs one duration a side (None without), the interval two and a rank C ≥ 1
    (None, None below). A side of more than ``max_pairs`` durations is read as that many
    evenly spaced order statistics. The order statistics of the log differences are those
    of the ratios themselves (the log keeps the order), and a division is rounded the
    same on every CPU where numpy's vectorized log and exp are not: their last digit
    differed between an AVX-512 machine and one without, and with it the bytes of
    report.json. ``ordered``: both samples come in ascending order (slices of
    ``sorted_samples``), so a subsample needs no sort.
    """
    base = np.asarray(base, dtype=float)
    new = np.asarray(new, dtype=float)
    base = base[base > 0]
    new = new[new > 0]
    if len(base) == 0 or len(new) == 0:
        return None, None, None
    base = _subsample(base, max_pairs, ordered)
    new = _subsample(new, max_pairs, ordered)
    ratios = np.divide.outer(new, base).ravel()
    size = ratios.size
    middle = [(size - 1) // 2, size // 2]
    c = int(_interval_rank(len(base), len(new), normal_quantile(0.5 + confidence / 2)))
    bounds = [c - 1, size - c] if c >= 1 and min(len(base), len(new)) >= 2 else []
    # Only a few order statistics are needed: a partition is linear, a sort is not.
    picks = sorted(set(middle + bounds))
    chosen = dict(zip(picks, np.partition(ratios, picks)[picks], strict=True))
    centre = float((chosen[middle[0]] + chosen[middle[1]]) / 2)
    if not bounds:
        return centre, None, None
    return centre, float(chosen[bounds[0]]), float(chosen[bounds[1]])


def ratio_interval(base: np.ndarray, new: np.ndarray,
                   confidence: float = 0.95,
                   max_pairs: int = DEFAULT_LIMITS.max_pairs_per_side,
                   ordered: bool = False) -> tuple[float | None, float | None]:
    """Hodges-Lehmann interval of the ratio new/base (``ratio_estimate`` without its centre).

    (None, None) when the samples are too small for one.
    """
    _, low, high = ratio_estimate(base, new, confidence, max_pairs, ordered)
    return low, high


# Ratios partitioned at once (8 bytes each, a few arrays of them): bounds the memory of
# ``hodges_lehmann_by_group``.
CHUNK_PAIRS = 1 << 21


def _positive_subsample(groups: np.ndarray, values: np.ndarray, n_groups: int,
                        limit: int) -> tuple[np.ndarray, np.ndarray]:
    """A side's positive durations, at most ``limit`` evenly spaced ones per group.

    ``groups``/``values`` ordered by (group, value). Returns the values kept (still in
    that order) and each group's count. The picks are ``_subsample``'s (numpy's linspace
    arithmetic, rounded half to even), so one key gives what it gives alone.
    """
    positive = values > 0
    groups, values = groups[positive], values[positive]
    counts = np.bincount(groups, minlength=n_groups)
    kept = np.minimum(counts, limit)
    if not (counts > limit).any():
        return values, counts
    first = np.concatenate(([0], np.cumsum(counts)[:-1]))
    group_of = np.repeat(np.arange(n_groups), kept)
    k = np.arange(int(kept.sum())) - np.repeat(np.cumsum(kept) - kept, kept)
    big = counts[group_of] > limit
    step = (counts[group_of] - 1) / max(limit - 1, 1)
    position = np.where(big, np.round(k * step), k).astype(np.int64)
    last = big & (k == limit - 1)
    position[last] = counts[group_of][last] - 1  # linspace ends on its stop exactly
    return values[first[group_of] + position], kept


def _order_statistics(base: np.ndarray, base_start: np.ndarray, n_base: int,
                      new: np.ndarray, new_start: np.ndarray, n_new: int,
                      picks: np.ndarray) -> np.ndarray:
    """The ``picks`` order statistics (0-based ranks) of several groups' pairwise ratios.

    The groups share their sizes (``n_base`` and ``n_new`` durations from the given
    starts), so their ratios stack as rows of one array and one partition along the rows
    selects them all, in linear time: a sort of every ratio costs about 30× more. Returns
    groups × len(picks) values.
    """
    new_rows = new[new_start[:, None] + np.arange(n_new)]
    base_rows = base[base_start[:, None] + np.arange(n_base)]
    # Ratio j·n_base + i of a row is new_j / base_i, as np.divide.outer(new, base).ravel().
    ratios = (new_rows[:, :, None] / base_rows[:, None, :]).reshape(len(new_start), -1)
    return np.partition(ratios, picks, axis=1)[:, picks]


def hodges_lehmann_by_group(base_group: np.ndarray, base: np.ndarray,
                            new_group: np.ndarray, new: np.ndarray, n_groups: int,
                            confidence: float = 0.95,
                            max_pairs: int = DEFAULT_LIMITS.max_pairs_per_side,
                            min_ci: int = DEFAULT_THRESHOLDS.min_ci_instances
                            ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``ratio_estimate`` of every group ``0 … n_groups − 1`` at once: centre, low, high.

    Each side's samples come ordered by (group, value) (``sorted_samples``). NaN where a
    group has no positive duration on a side (centre) or fewer than ``min_ci`` durations a
    side, as the interval of 1 vs 2 instances spans orders of magnitude ([0.004, 246.7])
    and says nothing. Groups whose (subsampled) sizes agree want the same ranks: their
    ratios are partitioned together (``_order_statistics``), in chunks of ``CHUNK_PAIRS``.
    """
    raw_base = np.bincount(base_group, minlength=n_groups)
    raw_new = np.bincount(new_group, minlength=n_groups)
    base_kept, n_base = _positive_subsample(base_group, np.asarray(base, float), n_groups,
                                            max_pairs)
    new_kept, n_new = _positive_subsample(new_group, np.asarray(new, float), n_groups,
                                          max_pairs)
    base_start = np.cumsum(n_base) - n_base
    new_start = np.cumsum(n_new) - n_new
    pairs = n_base * n_new
    c = _interval_rank(n_base, n_new, normal_quantile(0.5 + confidence / 2)) \
        if n_groups else np.zeros(0)
    with_ci = (np.minimum(raw_base, raw_new) >= min_ci) & (np.minimum(n_base, n_new) >= 2) \
        & (c >= 1)
    c = np.where(with_ci, c, 1).astype(np.int64)  # with no interval, rank 1 is harmless
    # Wanted 0-based ranks: the middle two, then the interval's bounds. They depend on the
    # sizes alone, so the groups of one pair of sizes (and interval or none) go together.
    found = np.full((n_groups, 4), np.nan)
    sized = np.flatnonzero(pairs > 0)
    code = (n_base[sized] * (int(n_new.max(initial=0)) + 1) + n_new[sized]) * 2 \
        + with_ci[sized]
    order = np.argsort(code, kind="stable")
    runs = np.split(sized[order], np.flatnonzero(np.diff(code[order])) + 1) if len(sized) \
        else []
    for rows in runs:  # one pass per pair of sizes, not per key
        nb, nn, rank = int(n_base[rows[0]]), int(n_new[rows[0]]), int(c[rows[0]])
        size_pairs = nb * nn
        picks = np.array([(size_pairs - 1) // 2, size_pairs // 2, rank - 1, size_pairs - rank])
        wanted = np.unique(picks)
        step = max(CHUNK_PAIRS // size_pairs, 1)
        for first in range(0, len(rows), step):  # bounded memory
            part = rows[first:first + step]
            values = _order_statistics(base_kept, base_start[part], nb, new_kept,
                                       new_start[part], nn, wanted)
            found[part] = values[:, np.searchsorted(wanted, picks)]
    centre = (found[:, 0] + found[:, 1]) / 2
    return (centre, np.where(with_ci, found[:, 2], np.nan),
            np.where(with_ci, found[:, 3], np.nan))


def load_distributions() -> None:
    """Import scipy.special now (~0.2 s): a caller that waits on workers hides its cost."""
    from scipy import special  # noqa: F401


def normal_quantile(q: float) -> float:
    """The standard normal quantile of ``q`` (scipy.special, imported when first needed)."""
    from scipy import special

    return float(special.ndtri(q))


def _all_equal(base: np.ndarray, new: np.ndarray) -> bool:
    return bool(np.all(base == base[0]) and np.all(new == base[0]))


# Largest n·m whose Mann-Whitney p is exact (``Limits.exact_max_pairs``). Where scipy
# defines the exact test (no ties) its p is exact up to here and the normal
# approximation's beyond: at 9 vs 9 that approximation is off by up to 3× for p in
# (1e-4, 0.05), at 100 vs 100 by 11 % (and on the safe side). The null distribution of
# sizes (m ≤ n) costs about m·mn/2 additions, 2.5 ms at 100 vs 100, once per pair of
# sizes (cached): thousands of keys share few.
EXACT_MAX_PAIRS = DEFAULT_LIMITS.exact_max_pairs


@functools.lru_cache(maxsize=1024)  # at most 40 kB each: 5,001 floats
def _lower_tail(m: int, n: int) -> np.ndarray:
    """P(U ≤ k) of the Mann-Whitney null without ties, k = 0 … ⌊mn/2⌋ (sizes m ≤ n).

    The null counts of U are the coefficients of the Gaussian binomial
    [m + n choose m]_q = Π_{i=1..m} (1 − q^(n+i)) / (1 − q^i), built factor by factor (a
    division by 1 − q^i is a running sum along each residue mod i). A coefficient depends
    on lower ones only and the distribution is symmetric, so the lower half suffices; in
    float64 its cumulative sums stay within 2e-15 of Python-integer arithmetic up to
    100 vs 100, at a fiftieth of its cost. Read-only: the cache shares it.
    """
    half = m * n // 2
    counts = np.zeros(half + 1)
    counts[0] = 1.0
    for i in range(1, m + 1):  # one pass per instance of the smaller side, not per row
        shift = n + i
        if shift <= half:
            counts[shift:] -= counts[:-shift].copy()  # × (1 − q^(n+i))
        padded = np.concatenate([counts, np.zeros(-len(counts) % i)]).reshape(-1, i)
        counts = np.cumsum(padded, axis=0).ravel()[:half + 1]  # ÷ (1 − q^i)
    tail = np.cumsum(counts) / float(math.comb(m + n, m))
    tail.flags.writeable = False
    return tail


def _exact_two_sided(u: np.ndarray, n1: np.ndarray, n2: np.ndarray) -> np.ndarray:
    """Two-sided exact Mann-Whitney p of U = max(U1, U2) without ties, as scipy computes it.

    p = 2·P(U' ≥ u) = 2·P(U' ≤ mn − u) by symmetry, at most 1; one null distribution per
    distinct pair of sizes.
    """
    small, large = np.minimum(n1, n2).astype(np.int64), np.maximum(n1, n2).astype(np.int64)
    below = np.rint(small * large - u).astype(np.int64)  # ≤ mn/2: u is the larger U
    p = np.empty(len(u))
    sizes = small * (int(large.max(initial=0)) + 1) + large
    order = np.argsort(sizes, kind="stable")
    for rows in np.split(order, np.flatnonzero(np.diff(sizes[order])) + 1) if len(u) else []:
        tail = _lower_tail(int(small[rows[0]]), int(large[rows[0]]))
        p[rows] = np.minimum(1.0, 2 * tail[below[rows]])
    return p


def compare_samples(base: np.ndarray, new: np.ndarray, confidence: float = 0.95,
                    max_pairs: int = DEFAULT_LIMITS.max_pairs_per_side,
                    min_ci: int = DEFAULT_THRESHOLDS.min_ci_instances) -> SampleTest:
    """Mann-Whitney U (two-sided) plus the HL ratio interval; None where undefined.

    The interval needs ``min_ci`` durations on each side: with fewer it spans orders of
    magnitude (1 vs 2 instances gave [0.004, 246.7]) and says nothing.
    """
    base = np.asarray(base, dtype=float)
    new = np.asarray(new, dtype=float)
    if len(base) == 0 or len(new) == 0:
        return SampleTest(None, None, None)
    p_value = float(mann_whitney_by_group(np.zeros(len(base), np.int64), base,
                                          np.zeros(len(new), np.int64), new, 1)[0])
    if min(len(base), len(new)) < min_ci:
        return SampleTest(p_value, None, None)
    low, high = ratio_interval(base, new, confidence, max_pairs)
    return SampleTest(p_value, low, high)


def _normal_sf_times_two(z: np.ndarray) -> np.ndarray:
    from scipy import special

    return special.ndtr(-z) * 2


# Durations read from text carry at most three decimals of a microsecond: as whole
# nanoseconds they pack with their group (and side) into one int64, and one plain sort
# orders them all (≈ 3× faster than an argsort by value and a stable regroup; on samples
# already in order a stable sort only merges).
_NS_PER_US = 1000


def order_by_group(groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Stable order by group id: a radix sort when the ids fit in 16 bits."""
    small = np.int16 if n_groups < np.iinfo(np.int16).max else np.int64
    return np.argsort(groups.astype(small, copy=False), kind="stable")


def _packed(groups: np.ndarray, values: np.ndarray, n_groups: int,
            side: np.ndarray | None = None) -> tuple[np.ndarray, int] | None:
    """(group, nanoseconds[, side]) in one int64, and the shift of the group.

    None when a value is negative, not finite or off the nanosecond grid, or the bits run
    out.
    """
    if not len(values) or not values.min() >= 0:  # NaN fails the comparison too
        return None
    ns = np.rint(values * _NS_PER_US)
    top = ns.max()
    if not top < 2.0**53 or not np.array_equal(ns / _NS_PER_US, values):
        return None
    low = 0 if side is None else 1
    shift = int(top).bit_length() + low
    if shift + max(int(n_groups - 1).bit_length(), 1) > 63:
        return None
    packed = groups.astype(np.int64) << shift
    packed |= ns.astype(np.int64) << low
    if side is not None:
        packed |= side
    return packed, shift


def sorted_samples(groups: np.ndarray, values: np.ndarray,
                   n_groups: int) -> tuple[np.ndarray, np.ndarray]:
    """The samples ordered by (group, value): their groups and values."""
    values = np.asarray(values, dtype=float)
    packed = _packed(groups, values, n_groups)
    if packed is not None:
        keys, shift = packed
        keys.sort()
        return keys >> shift, (keys & ((1 << shift) - 1)) / _NS_PER_US
    order = _by_value_then_group(groups, values, n_groups)
    return groups[order], values[order]


def _by_value_then_group(groups: np.ndarray, values: np.ndarray, n_groups: int) -> np.ndarray:
    """The order by (group, value) of any values: by value, then stably by group.

    Much faster than np.lexsort over (group, value).
    """
    by_value = np.argsort(values)
    return by_value[order_by_group(groups[by_value], n_groups)]


def _group_runs(groups: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Where each group starts in samples ordered by group, and its size."""
    starts = np.flatnonzero(np.r_[True, groups[1:] != groups[:-1]]) if len(groups) \
        else np.zeros(0, np.int64)
    return starts, np.diff(np.append(starts, len(groups)))


def sorted_group_median(groups: np.ndarray, values: np.ndarray) -> pd.Series:
    """Per group (index), the median of samples ordered by (group, value).

    As pandas computes it: the mean of the middle two of an even count.
    """
    starts, counts = _group_runs(groups)
    low, high = values[starts + (counts - 1) // 2], values[starts + counts // 2]
    return pd.Series((low + high) / 2, index=groups[starts])


def sorted_group_quantile(groups: np.ndarray, values: np.ndarray, q: float,
                          method: str = "linear") -> pd.Series:
    """Per group (index), the q-quantile of samples ordered by (group, value).

    ``linear`` as pandas' groupby quantile gives it, ``hazen`` as numpy's
    ``quantile(method="hazen")`` (each with its own interpolation formula, so the
    figures agree to the last bit).
    """
    starts, counts = _group_runs(groups)
    if method == "hazen":
        # numpy's virtual index for alpha = beta = ½, in its order of operations
        position = np.clip(counts * q + (0.5 + q * 0.0) - 1, 0, counts - 1)
    else:
        position = q * (counts - 1)
    below = np.floor(position).astype(np.int64)
    low = values[starts + below]
    high = values[starts + np.minimum(below + 1, counts - 1)]
    t = position - below
    if method == "hazen":  # numpy's lerp: from the nearer end
        value = np.where(t >= 0.5, high - (high - low) * (1 - t), low + (high - low) * t)
    else:
        value = low + (high - low) * t
    return pd.Series(value, index=groups[starts])


def _by_group_and_value(groups: np.ndarray, values: np.ndarray, is_base: np.ndarray,
                        n_groups: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The samples ordered by (group, value): groups, tie values and sides.

    The tie values are equal exactly where the durations tie.
    """
    packed = _packed(groups, values, n_groups, is_base)
    if packed is not None:
        keys, shift = packed
        keys.sort(kind="stable")  # each side comes in order from sorted_samples: a merge
        return keys >> shift, keys >> 1, (keys & 1).astype(bool)
    order = _by_value_then_group(groups, values, n_groups)
    return groups[order], values[order], is_base[order]


def mann_whitney_by_group(base_group: np.ndarray, base: np.ndarray, new_group: np.ndarray,
                          new: np.ndarray, n_groups: int,
                          exact_max_pairs: int = EXACT_MAX_PAIRS) -> np.ndarray:
    """Two-sided Mann-Whitney p of base vs new within every group (``mann_whitney_tests``)."""
    return mann_whitney_tests(base_group, base, new_group, new, n_groups, exact_max_pairs)[0]


def mann_whitney_tests(base_group: np.ndarray, base: np.ndarray, new_group: np.ndarray,
                       new: np.ndarray, n_groups: int,
                       exact_max_pairs: int = EXACT_MAX_PAIRS
                       ) -> tuple[np.ndarray, np.ndarray]:
    """Per group ``0 … n_groups − 1``, the two-sided Mann-Whitney p and whether it is exact.

    Per group, what ``scipy.stats.mannwhitneyu(base, new, method=…)`` gives, without a
    call per group: ``method="exact"`` for a group without ties (scipy's exact null
    distribution assumes none) and n·m ≤ ``exact_max_pairs``, else
    ``method="asymptotic"`` (continuity and tie correction). One sort of all values by
    (group, value) gives each value's average rank within its group and the tie sizes;
    from them U, its normal approximation, and the exact tail (``_exact_two_sided``). NaN
    for a group missing on either side; 1 where every value of both sides is the same
    (every arrangement gives the same U: exactly 1, where scipy would give NaN). Groups
    are numbered densely: ``n_groups`` bounds the ids. Returns (p, exact) per group.
    """
    base_group = np.asarray(base_group, dtype=np.int64)
    new_group = np.asarray(new_group, dtype=np.int64)
    base = np.asarray(base, dtype=float)
    new = np.asarray(new, dtype=float)
    groups = np.concatenate([base_group, new_group])
    values = np.concatenate([base, new])
    is_base = np.concatenate([np.ones(len(base), bool), np.zeros(len(new), bool)])
    groups, values, is_base = _by_group_and_value(groups, values, is_base, n_groups)
    size = len(values)
    n1 = np.bincount(base_group, minlength=n_groups).astype(float)
    n2 = np.bincount(new_group, minlength=n_groups).astype(float)
    p = np.full(n_groups, np.nan)
    if size == 0:
        return p, np.zeros(n_groups, dtype=bool)
    # Runs of equal (group, value): a tie shares the average of its 1-based positions.
    new_run = np.ones(size, dtype=bool)
    new_run[1:] = (groups[1:] != groups[:-1]) | (values[1:] != values[:-1])
    run_starts = np.flatnonzero(new_run)
    run_sizes = np.diff(np.append(run_starts, size))
    group_start = np.zeros(n_groups, dtype=np.int64)
    group_start[1:] = np.cumsum(np.bincount(groups, minlength=n_groups))[:-1]
    first = run_starts - group_start[groups[run_starts]]
    run_rank = first + (run_sizes + 1) / 2.0
    ranks = np.repeat(run_rank, run_sizes)
    rank_sum = np.bincount(groups[is_base], weights=ranks[is_base], minlength=n_groups)
    run_group = groups[run_starts]
    ties = run_sizes.astype(float)
    tie_term = np.bincount(run_group, weights=ties**3 - ties, minlength=n_groups)
    tied = np.bincount(run_group, weights=run_sizes > 1, minlength=n_groups) > 0
    u1 = rank_sum - n1 * (n1 + 1) / 2
    u = np.maximum(u1, n1 * n2 - u1)
    n = n1 + n2
    with np.errstate(divide="ignore", invalid="ignore"):
        spread = np.sqrt(n1 * n2 / 12 * ((n + 1) - tie_term / (n * (n - 1))))
        z = (u - n1 * n2 / 2 - 0.5) / spread
    both = (n1 > 0) & (n2 > 0)
    constant = both & (np.bincount(run_group, minlength=n_groups) == 1)
    exact = both & ~constant & ~tied & (n1 * n2 <= exact_max_pairs)
    normal = both & ~constant & ~exact
    if normal.any():
        p[normal] = np.clip(_normal_sf_times_two(z[normal]), 0.0, 1.0)
    p[constant] = 1.0
    if exact.any():
        p[exact] = _exact_two_sided(u[exact], n1[exact], n2[exact])
    return p, exact | constant


def adjust_bh(p_values: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values; NaN (untested) stays NaN.

    scipy's ``false_discovery_control(method="bh")`` step by step (sort, p·m/i, running
    minimum from the largest, clip to 1), without importing scipy.stats.
    """
    p_values = np.asarray(p_values, dtype=float)
    adjusted = np.full_like(p_values, np.nan)
    tested = ~np.isnan(p_values)
    ps = p_values[tested]
    if len(ps) <= 1:
        adjusted[tested] = ps
        return adjusted
    order = np.argsort(ps)
    ranked = ps[order] * (len(ps) / np.arange(1, len(ps) + 1, dtype=float))
    ranked = np.minimum.accumulate(ranked[::-1])[::-1]
    out = np.empty_like(ranked)
    out[order] = ranked
    adjusted[tested] = np.clip(out, 0.0, 1.0)
    return adjusted


def compare_steps(base: np.ndarray, new: np.ndarray,
                  confidence: float = 0.95) -> SampleTest:
    """Welch's t-test on log step times; interval of the ratio of geometric means new/base.

    With fewer than two steps on a side, or a step time that is not positive, there is
    no test: p_value is None. Steps identical within each side give p = 1 when both sides
    are equal and p = 0 otherwise (no noise at all: noise-free crafted profiles).
    """
    base = np.asarray(base, dtype=float)
    new = np.asarray(new, dtype=float)
    if len(base) < 2 or len(new) < 2 or (base <= 0).any() or (new <= 0).any():
        return SampleTest(None, None, None)
    log_b, log_n = np.log(base), np.log(new)
    shift = float(log_n.mean() - log_b.mean())
    var_b, var_n = log_b.var(ddof=1) / len(base), log_n.var(ddof=1) / len(new)
    if var_b + var_n == 0:
        ratio = math.exp(shift)
        return SampleTest(1.0 if shift == 0 else 0.0, ratio, ratio)
    p_value, dof = _welch(shift, var_b, var_n, len(base), len(new))
    from scipy import special

    half = special.stdtrit(dof, 0.5 + confidence / 2) * math.sqrt(var_b + var_n)
    return SampleTest(p_value, math.exp(shift - half), math.exp(shift + half))


def _welch(shift: float, var_b: float, var_n: float, n_b: int, n_n: int) -> tuple[float, float]:
    """Two-sided Welch p and Welch-Satterthwaite degrees of freedom, from the moments.

    Written out rather than scipy's ttest_ind, which warns on near-identical steps
    ("catastrophic cancellation") where the arithmetic here is exact enough.
    """
    dof = (var_b + var_n) ** 2 / (var_b**2 / (n_b - 1) + var_n**2 / (n_n - 1))
    from scipy import special

    t = abs(shift) / math.sqrt(var_b + var_n)
    return float(2 * special.stdtr(dof, -t)), float(dof)


def welch_p(base: np.ndarray, new: np.ndarray) -> float | None:
    """Welch's t-test p on raw per-step values, for breakdown parts that can be 0 in a step.

    None with fewer than two steps a side; identical constant sides give 1, different
    constant sides 0.
    """
    base = np.asarray(base, dtype=float)
    new = np.asarray(new, dtype=float)
    if len(base) < 2 or len(new) < 2:
        return None
    var_b, var_n = base.var(ddof=1) / len(base), new.var(ddof=1) / len(new)
    if var_b + var_n == 0:
        return 1.0 if base.mean() == new.mean() else 0.0
    return _welch(float(new.mean() - base.mean()), var_b, var_n, len(base), len(new))[0]


def status_of(change_pct: float, significant: bool | None, threshold_pct: float) -> str:
    """``regressed``/``improved`` only when significant (or unknown) and big enough.

    ``significant=None`` (one step per side) lets the threshold alone decide.
    """
    if significant is False or not np.isfinite(change_pct):
        return "unchanged"
    if change_pct >= threshold_pct:
        return "regressed"
    if change_pct <= -threshold_pct:
        return "improved"
    return "unchanged"


def robust_z(values: np.ndarray, floor: float) -> np.ndarray:
    """Robust z of every value: (v − median) / max(1.4826·MAD, floor).

    Returns a float array of signed z scores; a caller flags ``abs(z) > cut``. The
    floor (same unit as ``values``) keeps near-identical values from flagging jitter. At
    most just under half the values can be flagged: the half nearest the median is
    within one MAD of it.
    """
    values = np.asarray(values, dtype=float)
    if len(values) == 0:
        return np.zeros(0)
    median = np.median(values)
    spread = max(1.4826 * float(np.median(np.abs(values - median))), floor, 1e-12)
    return (values - median) / spread


def wilcoxon_signed_rank(differences: np.ndarray) -> tuple[float, float]:
    """Two-sided Wilcoxon signed-rank p of paired differences, and the signed rank sum.

    Zero differences are dropped (Wilcoxon's rule); ties among |d| share their average
    rank. Without ties and with at most 50 pairs the exact null distribution of W+ (the
    counts of subset sums of 1 … n, built by convolution) gives p, as scipy does; else the
    normal approximation with the tie correction (scipy's defaults). The signed rank sum
    (W+ − W−) says the direction: > 0 when new is mostly larger. NaN when no difference
    is left.
    """
    d = np.asarray(differences, dtype=float)
    d = d[d != 0]
    n = len(d)
    if n == 0:
        return float("nan"), 0.0
    magnitude = np.abs(d)
    order = np.argsort(magnitude, kind="stable")
    sorted_mag = magnitude[order]
    starts = np.flatnonzero(np.r_[True, sorted_mag[1:] != sorted_mag[:-1]])
    sizes = np.diff(np.append(starts, n))
    ranks = np.empty(n)
    ranks[order] = np.repeat(starts + (sizes + 1) / 2.0, sizes)
    w_plus = float(ranks[d > 0].sum())
    total = n * (n + 1) / 2
    signed = 2 * w_plus - total
    if (sizes == 1).all() and n <= 50:
        counts = np.zeros(int(total) + 1, dtype=np.int64)
        counts[0] = 1
        for k in range(1, n + 1):  # × (1 + q^k): subsets of 1 … k
            counts[k:] = counts[k:] + counts[:-k].copy()
        extreme = max(w_plus, total - w_plus)
        tail = int(counts[int(math.ceil(extreme)):].sum())
        return min(1.0, 2 * tail / 2.0**n), signed
    tie_term = float(((sizes.astype(float) ** 3) - sizes).sum()) / 48
    spread = math.sqrt(n * (n + 1) * (2 * n + 1) / 24 - tie_term)
    if spread == 0:
        return 1.0, signed
    z = abs(w_plus - total / 2) / spread  # no continuity correction, as scipy's default
    return float(np.clip(_normal_sf_times_two(np.array([max(z, 0.0)]))[0], 0.0, 1.0)), signed


def smallest_p_mann_whitney(n_base: np.ndarray, n_new: np.ndarray) -> np.ndarray:
    """The smallest two-sided Mann-Whitney p any data could give at these sizes.

    2 / C(n + m, n): the two most extreme orderings of all C(n + m, n). A key whose
    smallest p is above α cannot be called significant whatever its durations: untested.
    """
    n_base = np.asarray(n_base, dtype=float)
    n_new = np.asarray(n_new, dtype=float)
    from scipy import special

    with np.errstate(over="ignore"):
        return np.minimum(1.0, 2.0 / special.comb(n_base + n_new, n_base))


def smallest_p_signed_rank(pairs: int) -> float:
    """The smallest two-sided signed-rank p of ``pairs`` non-zero differences: 2 / 2^n.

    ``ldexp``: 2.0 ** n overflows past 1,023 pairs (40 ranks × 4 steps × 20 AllReduce).
    """
    return min(1.0, math.ldexp(1.0, 1 - pairs)) if pairs > 0 else 1.0
