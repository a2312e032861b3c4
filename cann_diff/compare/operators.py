"""Per operator key: counts and times per step, effects, significance and status; categories."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..match import Matched
from ..schema import Note, Run, RunSummary
from ..settings import DEFAULT_LIMITS, Limits, Thresholds
from .collectives import collective_keys, pair_instances, paired_ratio
from .stats import (
    adjust_bh,
    hodges_lehmann_by_group,
    mann_whitney_tests,
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


def has_shapes(operators: pd.DataFrame) -> pd.Series:
    """Per key, whether input shapes were recorded (on either side of a paired key).

    Level0 exports, trace-only profiles and communication ops carry none: such a key is
    the operator type alone.
    """
    recorded = pd.Series(False, index=operators.index)
    for column in ("input_shapes", "base_input_shapes", "new_input_shapes"):
        if column in operators:
            recorded |= operators[column].fillna("").astype(str).str.len().to_numpy() > 0
    return recorded


def _per_instance(table: pd.DataFrame, base_units: int, new_units: int) -> pd.Series:
    """Keys whose instances are compared one by one: the same work on both sides.

    Paired by a same-shape rung with instances on both sides and, when no shapes were
    recorded, as many instances per step on both sides (RmsNorm ×8 → ×8); a type without
    shapes whose count moved (Cast ×74 → ×4) runs other work under one name and is
    compared by its totals. Counts per step compare as whole numbers (instances × the
    other side's units), so no rounding decides.
    """
    both = (table["base_instances"] > 0) & (table["new_instances"] > 0)
    equal_counts = (table["base_instances"].to_numpy(np.int64) * new_units
                    == table["new_instances"].to_numpy(np.int64) * base_units)
    return both & table["same_shape"] & (table["shapes"] | equal_counts)


def _count_changed(table: pd.DataFrame) -> pd.Series:
    """Keys whose count changed: structurally, not by noise.

    The per-step count ranges do not overlap (with one step per side: the counts differ);
    for a same-shape key without shapes, the counts per step differ at all (its instances
    are then other work, ``_per_instance``).
    """
    both = (table["base_instances"] > 0) & (table["new_instances"] > 0)
    apart = ((table["new_count_min"] > table["base_count_max"])
             | (table["new_count_max"] < table["base_count_min"]))
    by_totals = table["same_shape"] & ~table["per_instance"]
    return both & (apart | by_totals)


def _test_keys(table: pd.DataFrame, base: RunSummary, new: RunSummary, matched: Matched,
               ordered: tuple[tuple[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]],
               thresholds: Thresholds, limits: Limits) -> pd.DataFrame:
    """Per key compared per instance: BH-adjusted p, its method, the HL ratio and interval.

    All keys' Mann-Whitney tests run in one pass (``mann_whitney_tests``), and all their
    Hodges-Lehmann figures in another (``hodges_lehmann_by_group``: keys of equal sample
    sizes partitioned together); collectives whose instances pair in launch order are
    tested paired instead (``collectives.py``). A key whose sample sizes cannot give p < α
    (the test's smallest p is above it) is not tested: ``tested`` False, ``p_value`` and
    ``p_method`` None.
    ``ci_short``: fewer than ``min_ci_instances`` durations on a side.
    """
    testable = np.sort(table.index[table["per_instance"]].to_numpy(np.int64))
    group_of_key = np.full(_key_space(matched, testable), -1, dtype=np.int64)
    group_of_key[testable] = np.arange(len(testable))
    base_group, base_dur = _tested_samples(ordered[0], group_of_key)
    new_group, new_dur = _tested_samples(ordered[1], group_of_key)
    n_base = np.bincount(base_group, minlength=len(testable))
    n_new = np.bincount(new_group, minlength=len(testable))
    sampled = (n_base > 0) & (n_new > 0)  # a key without samples on a side is not tested
    keys = testable[sampled]
    p_raw, exact = (a[sampled] for a in mann_whitney_tests(
        base_group, base_dur, new_group, new_dur, len(testable), limits.exact_max_pairs))
    centre, low, high = (a[sampled] for a in hodges_lehmann_by_group(
        base_group, base_dur, new_group, new_dur, len(testable), thresholds.confidence,
        limits.max_pairs_per_side, thresholds.min_ci_instances))
    method = np.where(exact, "exact", "asymptotic").astype(object)
    reachable = smallest_p_mann_whitney(n_base, n_new)[sampled]
    paired = _paired_tests(table, base, new, matched, keys, thresholds)
    for position, test in paired.items():
        p_raw[position], reachable[position] = test.p_value, test.reachable
        method[position] = "signed-rank"
    tested = reachable <= thresholds.alpha
    p_raw = np.where(tested, p_raw, np.nan)
    out = pd.DataFrame(index=table.index)
    out["p_value"] = pd.Series(adjust_bh(p_raw), index=keys, dtype=float)
    out["tested"] = pd.Series(tested, index=keys, dtype=bool).reindex(table.index,
                                                                        fill_value=False)
    out["p_method"] = pd.Series(method, index=keys, dtype=object).where(
        pd.Series(tested, index=keys), None)
    out["hl_change_pct"] = pd.Series((centre - 1) * 100, index=keys, dtype=float)
    out["ci_low"] = pd.Series(low, index=keys, dtype=float)
    out["ci_high"] = pd.Series(high, index=keys, dtype=float)
    out["ci_short"] = pd.Series(np.minimum(n_base, n_new)[sampled]
                                < thresholds.min_ci_instances, index=keys, dtype=bool)
    at = keys[list(paired)] if paired else np.zeros(0, np.int64)
    tests = list(paired.values())
    out["paired_change_pct"] = pd.Series([t.change_pct for t in tests], index=at, dtype=float)
    out["paired_direction"] = pd.Series([t.direction for t in tests], index=at, dtype=float)
    out.loc[at, "ci_low"] = [t.low for t in tests]
    out.loc[at, "ci_high"] = [t.high for t in tests]
    out.loc[at, "ci_short"] = [t.pairs < thresholds.min_ci_instances for t in tests]
    out["p_method"] = out["p_method"].astype(object).where(out["p_method"].notna(), None)
    out["ci_short"] = out["ci_short"].astype("boolean").fillna(False).astype(bool)
    return out


@dataclass(frozen=True)
class PairedTest:
    """A collective paired in launch order: its signed-rank test and ratio of paired totals.

    ``reachable``: the smallest p its number of non-zero differences allows;
    ``direction``: the sign of the signed rank sum; ``low``/``high``: the ratio's interval
    (NaN below ``min_ci_instances`` pairs).
    """

    p_value: float
    reachable: float
    change_pct: float
    direction: float
    low: float
    high: float
    pairs: int


def _paired_tests(table: pd.DataFrame, base: RunSummary, new: RunSummary, matched: Matched,
                  keys: np.ndarray, thresholds: Thresholds) -> dict[int, PairedTest]:
    """Per position in ``keys`` of a collective paired in launch order: its ``PairedTest``.

    The change is the ratio of the paired totals, the direction the sign of the
    signed-rank sum (a key is called slower or faster only when both agree).
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
        ratio, low, high = paired_ratio(pairs, thresholds.confidence,
                                        thresholds.min_ci_instances)
        out[position[int(key)]] = PairedTest(
            p_value, smallest_p_signed_rank(int(np.count_nonzero(differences))),
            (ratio - 1) * 100, float(np.sign(direction)), low, high, len(pairs.base_us))
    return out


def _estimate(table: pd.DataFrame) -> pd.Series:
    """The one per-instance change of each key, in percent (NaN: none).

    The Hodges-Lehmann ratio (the centre of its interval; its sign is the Mann-Whitney
    test's direction) for keys compared per instance; the ratio of means for a count-changed
    key (another mix of instances: its per-instance effect, count × mean, takes that
    sign); the ratio of paired totals for a collective paired in launch order. None for
    keys compared by totals (reshaped, or without shapes and with another count) or on
    one side only.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        means = (table["new_mean_us"] / table["base_mean_us"] - 1) * 100
    estimate = table["hl_change_pct"].where(table["per_instance"])
    estimate = estimate.where(~(table["per_instance"] & table["count_changed"]), means)
    paired = table["paired_change_pct"].notna()
    return estimate.where(~paired, table["paired_change_pct"])


def _effects(table: pd.DataFrame) -> pd.DataFrame:
    """Split Δ time per step into a count effect and a per-instance effect (µs per step).

    They sum to ``delta_us``. A key on one side only, or a count-changed key compared by
    its totals (no shapes), is all count effect. A count-changed key compared per
    instance, or a reshaped one: count effect = Δ instances per step × base mean,
    per-instance effect = new instances per step × Δ mean (total = count × mean on each
    side). Any other key ran the same work on both sides (its counts did not change): all
    of its Δ is per-instance effect.
    """
    both = (table["base_instances"] > 0) & (table["new_instances"] > 0)
    counted = table["status"] == "count-changed"
    split = both & ((counted & table["per_instance"]) | (table["status"] == "reshaped"))
    by_count = (table["new_count"] - table["base_count"]) \
        * table["base_mean_us"].where(both, 0.0).fillna(0.0)
    count = pd.Series(0.0, index=table.index).where(both & ~counted, table["delta_us"])
    count = count.where(~split, by_count)
    return pd.DataFrame({"count_effect_us": count,
                         "instance_effect_us": table["delta_us"] - count}, index=table.index)


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
    # columns (``p_value``, ``hl_change_pct``) for the reader.
    choices = ["added", "removed", "reshaped", "count-changed", "unchanged", "untested",
               "regressed", "improved"]
    status = np.select(conditions, choices, default="not-significant")
    below = significant & ~big & (status == "unchanged")
    return status, below


def _ci_note(table: pd.DataFrame) -> pd.Series:
    """Why a key has no ratio interval: ``count changed`` or ``n too small``; else None."""
    note = pd.Series(np.full(len(table), None, dtype=object), index=table.index)
    note[table["ci_short"]] = "n too small"
    note[table["status"] == "count-changed"] = "count changed"
    return note


def compare_operators(base: Run, new: Run, matched: Matched, thresholds: Thresholds,
                      base_units: int, new_units: int,
                      limits: Limits = DEFAULT_LIMITS) -> pd.DataFrame:
    """Per matched key: counts and times per step, effects, significance and status.

    Columns beyond the per-side figures: ``delta_us``/``delta_pct`` (total time per
    step), ``count_effect_us`` + ``instance_effect_us`` (= ``delta_us``, ``_effects``),
    ``instance_change_pct`` (the key's one per-instance estimate, ``_estimate``; it sets
    the status), ``hl_change_pct`` (the Hodges-Lehmann change of every key compared per
    instance, count-changed ones too), ``count_changed``, ``same_shape``, ``shapes``
    (input shapes recorded), ``per_instance`` (instances compared one by one),
    ``tested`` (the sample sizes can reach α), ``p_value`` (Mann-Whitney or, paired,
    Wilcoxon signed-rank; BH-adjusted over the keys tested; None when not tested),
    ``p_method`` (``exact``, ``asymptotic``, ``signed-rank``; None when not tested),
    ``ci_low``/``ci_high`` (the interval of the estimate: Hodges-Lehmann, or of the paired
    totals; None below ``min_ci_instances`` durations a side and for count-changed keys,
    ``ci_note`` says which), ``significant`` (p < alpha, nothing else), ``status`` and
    ``below_threshold``.
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
    table["same_shape"] = table["match_kind"].isin(SAME_SHAPE_KINDS)
    table["shapes"] = has_shapes(table)
    table["per_instance"] = _per_instance(table, base_units, new_units)
    table["count_changed"] = _count_changed(table)
    table = table.join(_test_keys(table, base.summary, new.summary, matched, ordered,
                                  thresholds, limits))
    table["instance_change_pct"] = _estimate(table)
    paired = table["paired_change_pct"].notna()
    # The direction the test found: a paired key's signed ranks, else the estimate's own
    # (the Hodges-Lehmann centre lies above 1 exactly when U says new is mostly larger).
    table["direction"] = table["paired_direction"].where(
        paired, np.sign(table["instance_change_pct"].fillna(0.0)))
    table["significant"] = (table["p_value"] < thresholds.alpha).fillna(False).astype(bool)
    table["status"], table["below_threshold"] = _statuses(table, thresholds)
    table = table.join(_effects(table))
    counted = table["status"] == "count-changed"
    table[["ci_low", "ci_high"]] = table[["ci_low", "ci_high"]].where(~counted)
    table["ci_note"] = _ci_note(table)
    table = table.drop(columns=["paired_change_pct", "paired_direction", "ci_short"])
    return table.reset_index()


def no_shapes_note(operators: pd.DataFrame, thresholds: Thresholds) -> Note | None:
    """The ``no-shapes`` caveat: kernels without input shapes hold much of a side's time.

    Raised when kernel keys (communication aside: it never has shapes) without recorded
    shapes hold at least ``same_shape_share`` of either side's kernel time, as in Level0
    exports: kernels were then compared by type only. ``data``: each side's share (0-1),
    and how many types were compared per instance (as many per step on both sides) and by
    totals (another count). None otherwise, or without kernel time.
    """
    kernels = operators[operators["category"] != "communication"]
    bare = ~kernels["shapes"]
    shares = []
    for side in ("base", "new"):
        total = kernels[f"{side}_total_us"].sum()
        shares.append(float(kernels.loc[bare, f"{side}_total_us"].sum() / total)
                      if total > 0 else float("nan"))
    if not max(shares, default=float("nan")) >= thresholds.same_shape_share:
        return None  # NaN (no kernel time) says nothing either
    paired = bare & (kernels["base_instances"] > 0) & (kernels["new_instances"] > 0) \
        & kernels["same_shape"]
    by_type = int((paired & kernels["per_instance"]).sum())
    by_totals = int((paired & ~kernels["per_instance"]).sum())
    text = (f"no input shapes recorded for {shares[0]:.0%} of base and {shares[1]:.0%} of "
            "new kernel time (Level0 exports and trace-only profiles carry none): kernels "
            f"were compared by type only: per instance where a type runs as many times per "
            f"step on both sides ({by_type} type(s): the same work as far as the profile can "
            f"tell), by totals where its count moved ({by_totals} type(s): other work, never "
            "called slower or faster)")
    return Note("no-shapes", text, {"base_share": shares[0], "new_share": shares[1],
                                    "types_per_instance": by_type,
                                    "types_by_totals": by_totals})


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
