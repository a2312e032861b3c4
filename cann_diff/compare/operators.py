"""Per operator key: counts and times per step, effects, significance and status; categories."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..match import Matched
from ..schema import Run, RunSummary
from ..settings import DEFAULT_LIMITS, Limits, Thresholds
from .collectives import collective_keys, pair_instances
from .stats import (
    adjust_bh,
    mann_whitney_by_group,
    ratio_interval,
    smallest_p_mann_whitney,
    smallest_p_signed_rank,
    sorted_group_median,
    sorted_group_quantile,
    sorted_samples,
    wilcoxon_signed_rank,
)

# Match kinds whose keys have equal input shapes on both sides: judged per instance. The
# family-only rung ("type-only") pairs different shapes and is never judged so.
SAME_SHAPE_KINDS = ("exact", "family", "renamed")


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


def _ordered_samples(summary: RunSummary, keys: np.ndarray,
                     n_keys: int) -> tuple[np.ndarray, np.ndarray]:
    """A side's samples ordered by (key, duration): its median, p95, ranks and slices.

    Sorted once, for ``_side_stats``, the Mann-Whitney ranks and the intervals' slices.
    """
    return sorted_samples(_sample_keys(summary, keys),
                          summary.samples["dur_us"].to_numpy(dtype=float), n_keys)


def _side_stats(summary: RunSummary, keys: np.ndarray, n_units: int, prefix: str,
                ordered: tuple[np.ndarray, np.ndarray]) -> pd.DataFrame:
    """Counts and totals per key, exact from the summary; median and p95 from its samples."""
    ops = summary.ops
    frame = pd.DataFrame({"key_id": keys, "count": ops["count"].to_numpy(),
                          "total": ops["total_us"].to_numpy(), "unit": units_of(ops).to_numpy()})
    grouped = frame.groupby("key_id")
    stats = pd.DataFrame({"instances": grouped["count"].sum(),
                          "total_us": grouped["total"].sum() / n_units})
    stats["mean_us"] = stats["total_us"] * n_units / stats["instances"]
    stats["median_us"] = sorted_group_median(*ordered)
    # Sampled, the samples sit at the (i + ½)/k quantiles: read them alike.
    stats["p95_us"] = sorted_group_quantile(*ordered, 0.95,
                                            "hazen" if summary.sampled else "linear")
    stats["count"] = stats["instances"] / n_units
    per_unit = frame.groupby(["key_id", "unit"])["count"].sum().groupby("key_id")
    units_with_key = per_unit.size()
    stats["count_min"] = per_unit.min().where(units_with_key >= n_units, 0)
    stats["count_max"] = per_unit.max()
    return stats.add_prefix(prefix)


def _tested_samples(ordered: tuple[np.ndarray, np.ndarray],
                    group_of_key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The samples of the tested keys, still in (group, duration) order.

    Their group is the key's position among the tested keys, numbered in key order.
    """
    sample_keys, durations = ordered
    groups = group_of_key[sample_keys] if len(sample_keys) else np.zeros(0, np.int64)
    kept = groups >= 0
    return groups[kept], durations[kept]


def _key_space(matched: Matched, *more: np.ndarray) -> int:
    """One more than the largest key id either side (or ``more``) uses."""
    return int(max(matched.base_key.max(initial=-1), matched.new_key.max(initial=-1),
                   *(ids.max(initial=-1) for ids in more))) + 1


def _test_keys(table: pd.DataFrame, base: RunSummary, new: RunSummary, matched: Matched,
               ordered: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
               thresholds: Thresholds, limits: Limits) -> pd.DataFrame:
    """Per key tested (same shapes, both sides): BH-adjusted p, ratio CI, sample sizes.

    All keys' Mann-Whitney tests run in one pass (``mann_whitney_by_group``); collectives
    whose instances pair in launch order are tested paired instead (``collectives.py``).
    A key whose sample sizes cannot give p < α (the test's smallest p is above it) is not
    tested: ``tested`` False, ``p_value`` None. The ratio interval is per key, for keys
    with enough durations.
    """
    testable = np.sort(table.index[table["same_shape"] & (table["base_instances"] > 0)
                                   & (table["new_instances"] > 0)].to_numpy(np.int64))
    group_of_key = np.full(_key_space(matched, testable), -1, dtype=np.int64)
    group_of_key[testable] = np.arange(len(testable))
    base_group, base_dur = _tested_samples(ordered[0], group_of_key)
    new_group, new_dur = _tested_samples(ordered[1], group_of_key)
    n_base = np.bincount(base_group, minlength=len(testable))
    n_new = np.bincount(new_group, minlength=len(testable))
    sampled = (n_base > 0) & (n_new > 0)  # a key without samples on a side is not tested
    keys = testable[sampled]
    p_raw = mann_whitney_by_group(base_group, base_dur, new_group, new_dur,
                                  len(testable))[sampled]
    reachable = smallest_p_mann_whitney(n_base, n_new)[sampled]
    paired = _paired_tests(table, base, new, matched, keys)
    for position, (p_value, reach, _, _) in paired.items():
        p_raw[position], reachable[position] = p_value, reach
    tested = reachable <= thresholds.alpha
    p_raw = np.where(tested, p_raw, np.nan)
    smallest = np.minimum(n_base, n_new)[sampled]
    ci_low = np.full(len(keys), np.nan)
    ci_high = np.full(len(keys), np.nan)
    wide = np.flatnonzero(smallest >= thresholds.min_ci_instances)
    if len(wide):  # each group's durations are one slice of its side
        base_bounds = np.concatenate(([0], np.cumsum(n_base)))
        new_bounds = np.concatenate(([0], np.cumsum(n_new)))
        groups = np.flatnonzero(sampled)
        for i in wide:
            g = groups[i]
            low, high = ratio_interval(
                base_dur[base_bounds[g]:base_bounds[g + 1]],
                new_dur[new_bounds[g]:new_bounds[g + 1]],
                thresholds.confidence, limits.max_pairs_per_side, ordered=True)
            ci_low[i] = np.nan if low is None else low
            ci_high[i] = np.nan if high is None else high
    out = pd.DataFrame(index=table.index)
    out["p_value"] = pd.Series(adjust_bh(p_raw), index=keys, dtype=float)
    out["tested"] = pd.Series(tested, index=keys, dtype=bool).reindex(table.index,
                                                                        fill_value=False)
    out["paired_change_pct"] = pd.Series(
        {keys[i]: change for i, (_, _, change, _) in paired.items()}, dtype=float)
    out["paired_direction"] = pd.Series(
        {keys[i]: direction for i, (_, _, _, direction) in paired.items()}, dtype=float)
    out["ci_low"] = pd.Series(ci_low, index=keys, dtype=float)
    out["ci_high"] = pd.Series(ci_high, index=keys, dtype=float)
    out["ci_note"] = None
    too_few = keys[smallest < thresholds.min_ci_instances]
    out.loc[too_few, "ci_note"] = "n too small"
    return out


def _paired_tests(table: pd.DataFrame, base: RunSummary, new: RunSummary, matched: Matched,
                  keys: np.ndarray) -> dict[int, tuple[float, float, float, float]]:
    """Per position in ``keys`` of a paired collective: (p, smallest p, change %, direction).

    Collectives whose instances pair in launch order are tested on their differences; the
    change is the ratio of the paired totals, the direction the sign of the signed-rank
    sum (a key is called slower or faster only when both agree).
    """
    position = {int(k): i for i, k in enumerate(keys)}
    out = {}
    for key in collective_keys(table):
        if int(key) not in position:
            continue
        pairs = pair_instances(base, new, matched.base_key, matched.new_key, int(key))
        if pairs is None or pairs.base_us.sum() <= 0:
            continue
        differences = pairs.new_us - pairs.base_us
        p_value, direction = wilcoxon_signed_rank(differences)
        change = (pairs.new_us.sum() / pairs.base_us.sum() - 1) * 100
        out[position[int(key)]] = (p_value, smallest_p_signed_rank(
            int(np.count_nonzero(differences))), change, float(np.sign(direction)))
    return out


def _effects(table: pd.DataFrame) -> pd.DataFrame:
    """Split Δ time per step into a count effect and a per-instance effect (µs per step).

    count effect = Δ instances per step × base mean; per-instance effect = new instances
    per step × Δ mean; they sum to ``delta_us`` exactly (total = count × mean on each
    side). A key on one side only is all count effect. The per-instance change the status
    is judged on is the ratio of medians (what Mann-Whitney tests; one long first-call
    instance does not move it), in percent.
    """
    both = (table["base_instances"] > 0) & (table["new_instances"] > 0)
    base_mean = table["base_mean_us"].where(both, 0.0).fillna(0.0)
    new_mean = table["new_mean_us"].where(both, 0.0).fillna(0.0)
    count = (table["new_count"] - table["base_count"]) * base_mean
    out = pd.DataFrame(index=table.index)
    out["count_effect_us"] = count.where(both, table["delta_us"])
    out["instance_effect_us"] = (table["new_count"] * (new_mean - base_mean)).where(both, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = table["new_median_us"] / table["base_median_us"]
    out["instance_change_pct"] = ((ratio - 1) * 100).where(both & (table["base_median_us"] > 0))
    # A count change is structural, not noise, when the per-step count ranges do not overlap
    # (with one step per side: when the counts differ).
    out["count_changed"] = both & ((table["new_count_min"] > table["base_count_max"])
                                   | (table["new_count_max"] < table["base_count_min"]))
    return out


def _statuses(table: pd.DataFrame, thresholds: Thresholds) -> tuple[np.ndarray, np.ndarray]:
    """Status per key (docs/design.md "Status rules") and the below-threshold flag.

    Five words for a same-shape key's per-instance change: ``unchanged`` (under the
    threshold), ``untested`` (at or over it, but the sample sizes cannot reach α),
    ``regressed`` / ``improved`` (significant and at or over it), ``not-significant``
    (at or over it, tested, p ≥ α).
    """
    change = table["instance_change_pct"].to_numpy(dtype=float)
    significant = table["significant"].to_numpy(dtype=bool)
    tested = table["tested"].to_numpy(dtype=bool)
    agrees = np.sign(np.nan_to_num(change)) == table["direction"].to_numpy(dtype=float)
    big = np.nan_to_num(np.abs(change), nan=0.0) >= thresholds.threshold_pct
    kind = table["match_kind"]
    conditions = [table["base_instances"].to_numpy() == 0, table["new_instances"].to_numpy() == 0,
                  (kind.notna() & ~kind.isin(SAME_SHAPE_KINDS)).to_numpy(),
                  table["count_changed"].to_numpy(dtype=bool), ~big, ~tested,
                  significant & agrees & (change > 0), significant & agrees & (change < 0)]
    # A count change comes before speed: with other instances per step the durations are
    # another mix (a split MC2 op adds small AllReduces to a large one), so their medians
    # differ without any instance getting slower. Its per-instance test stays in the
    # columns (``p_value``, ``instance_change_pct``) for the reader.
    choices = ["added", "removed", "reshaped", "count-changed", "unchanged", "untested",
               "regressed", "improved"]
    status = np.select(conditions, choices, default="not-significant")
    below = significant & ~big & (status == "unchanged")
    return status, below


def compare_operators(base: Run, new: Run, matched: Matched, thresholds: Thresholds,
                      base_units: int, new_units: int,
                      limits: Limits = DEFAULT_LIMITS) -> pd.DataFrame:
    """Per matched key: counts and times per step, effects, significance and status.

    Columns beyond the per-side figures: ``delta_us``/``delta_pct`` (total time per
    step), ``count_effect_us`` + ``instance_effect_us`` (= ``delta_us``),
    ``instance_change_pct`` (ratio of medians − 1; of paired totals for a collective
    paired in launch order), ``count_changed``, ``same_shape``, ``tested`` (the sample
    sizes can reach α), ``p_value`` (Mann-Whitney or, paired, Wilcoxon signed-rank;
    BH-adjusted over the keys tested; None when not tested), ``ci_low``/``ci_high``
    (None below ``min_ci_instances`` durations a side, ``ci_note`` = ``"n too small"``),
    ``significant`` (p < alpha, nothing else), ``status`` and ``below_threshold``; for a
    count-changed key ``instance_change_pct`` is the ratio of means (its effect's sign) and
    ``median_change_pct`` the ratio of medians its test saw.
    """
    if (len(matched.base_key), len(matched.new_key)) != (len(base.summary.ops),
                                                         len(new.summary.ops)):
        raise ValueError("match() was given other rows than the runs' summary.ops")
    table = matched.keys.set_index("key_id")
    n_keys = _key_space(matched, table.index.to_numpy(np.int64))
    ordered = (_ordered_samples(base.summary, matched.base_key, n_keys),
               _ordered_samples(new.summary, matched.new_key, n_keys))
    table = table.join(_side_stats(base.summary, matched.base_key, base_units, "base_",
                                   ordered[0]))
    table = table.join(_side_stats(new.summary, matched.new_key, new_units, "new_",
                                   ordered[1]))
    for side in ("base", "new"):
        for column in ("instances", "count", "total_us", "count_min", "count_max"):
            table[f"{side}_{column}"] = table[f"{side}_{column}"].fillna(0)
        table[f"{side}_instances"] = table[f"{side}_instances"].astype("int64")
    table["delta_us"] = table["new_total_us"] - table["base_total_us"]
    with np.errstate(divide="ignore", invalid="ignore"):
        table["delta_pct"] = np.where(table["base_total_us"] > 0,
                                      table["delta_us"] / table["base_total_us"] * 100, np.nan)
    table = table.join(_effects(table))
    table["same_shape"] = table["match_kind"].isin(SAME_SHAPE_KINDS)
    table = table.join(_test_keys(table, base.summary, new.summary, matched, ordered,
                                  thresholds, limits))
    paired = table["paired_change_pct"].notna()
    table["instance_change_pct"] = table["instance_change_pct"].where(
        ~paired, table["paired_change_pct"])
    # The direction the test found: a paired key's signed ranks, else the change's own.
    table["direction"] = table["paired_direction"].where(
        paired, np.sign(table["instance_change_pct"].fillna(0.0)))
    table = table.drop(columns=["paired_change_pct", "paired_direction"])
    table["significant"] = (table["p_value"] < thresholds.alpha).fillna(False).astype(bool)
    table["status"], table["below_threshold"] = _statuses(table, thresholds)
    # A count-changed key's effect is mean-based (count × mean): its per-instance % is
    # the ratio of means, so that the % and the per-instance effect share their sign; the
    # median's ratio (what its test saw) stays as ``median_change_pct``.
    table["median_change_pct"] = table["instance_change_pct"]
    counted = (table["status"] == "count-changed").to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        means = (table["new_mean_us"] / table["base_mean_us"] - 1) * 100
    table.loc[counted, "instance_change_pct"] = means[counted]
    return table.reset_index()


def same_shape_shares(operators: pd.DataFrame) -> tuple[float, float]:
    """Share of each side's non-communication kernel time held by same-shape keys (0-1).

    NaN for a side without kernel time. Communication keys carry no shapes and would
    match whatever the batch, so they are left out.
    """
    kernels = operators[operators["category"] != "communication"]
    shares = []
    for side in ("base", "new"):
        total = kernels[f"{side}_total_us"].sum()
        same = kernels.loc[kernels["same_shape"], f"{side}_total_us"].sum()
        shares.append(float(same / total) if total > 0 else float("nan"))
    return shares[0], shares[1]


def compare_categories(operators: pd.DataFrame) -> pd.DataFrame:
    """Per category: count and total time per step, both sides, and the delta."""
    cats = operators.groupby("category")[["base_count", "new_count", "base_total_us",
                                          "new_total_us"]].sum()
    cats["delta_us"] = cats["new_total_us"] - cats["base_total_us"]
    return cats.reset_index()
