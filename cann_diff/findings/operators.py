"""Operator findings: per-instance regressions/improvements, count changes, one-side keys.

A count-changed key whose instances also got significantly slower (or faster), by the
threshold in median and mean alike, is named among the regressions (improvements) too.

Keys a fusion group claims entirely belong to that group's finding. A key of which a
group claims some instances (the MatMuls that replaced a fused op, beside ordinary
MatMuls of the same shape) keeps its verdicts; for its count change only the part the
group does not explain counts.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..compare import Comparison
from .base import Finding, ms
from .fusion import FusionGroup, claimed_instances


def _count_changes(ops: pd.DataFrame, groups: list[FusionGroup]) -> pd.DataFrame:
    """Count-changed keys with the count change no fusion group explains (per step)."""
    base_claims, new_claims = claimed_instances(groups)
    rows = ops[ops["count_changed"].astype(bool)].copy()
    rows["base_left"] = rows["base_count"] - rows["key_id"].map(base_claims).fillna(0.0)
    rows["new_left"] = rows["new_count"] - rows["key_id"].map(new_claims).fillna(0.0)
    rows["left_effect_us"] = (rows["new_left"] - rows["base_left"]) * rows["base_mean_us"]
    return rows[(rows["new_left"] - rows["base_left"]).abs() > 1e-9]


def _count_finding(cmp: Comparison, ops: pd.DataFrame,
                   groups: list[FusionGroup]) -> Finding | None:
    rows = _count_changes(ops, groups)
    if rows.empty:
        return None
    rows = rows.sort_values("left_effect_us", key=np.abs, ascending=False, kind="stable")
    top = ", ".join(f"{r.op_type} {_short(r.input_shapes)} {r.base_left:g} → {r.new_left:g} "
                    f"per step ({ms(r.left_effect_us)})" for r in rows.head(3).itertuples())
    effect = float(rows["left_effect_us"].sum())
    material = abs(effect) >= cmp.thresholds.material_pct / 100 * max(cmp.step.base_us, 1e-9)
    return Finding("count-changed", "medium" if material else "info",
                   f"{len(rows)} operator key(s) run a different number of times per step",
                   f"Largest: {top}. A count change is other work, not a faster or slower "
                   f"kernel: count effect {ms(effect)} per step in all (Δ instances × base "
                   "mean).", effect,
                   {"keys": [int(k) for k in rows["key_id"]], "count_effect_us": effect})


def _counted_and_moved(cmp: Comparison, ops: pd.DataFrame, status: str,
                       groups: list[FusionGroup]) -> pd.DataFrame:
    """Count-changed keys whose instances also got significantly slower (or faster).

    The median (what the test saw) and the mean (what the effect uses) must move the same
    way, by at least the threshold; instances an MC2 group claims are left to the group
    (a split adds small collectives to a large one: another mix, not slower instances).
    """
    sign = 1 if status == "regressed" else -1
    median = ops["median_change_pct"] * sign
    mean = ops["instance_change_pct"] * sign
    threshold = cmp.thresholds.threshold_pct
    base_claims, new_claims = claimed_instances(groups)
    claimed = ops["key_id"].isin([*base_claims, *new_claims])
    return ops[(ops["status"] == "count-changed") & ops["significant"].astype(bool)
               & (median >= threshold) & (mean >= threshold) & ~claimed]


def operator_findings(cmp: Comparison, claimed: dict[int, str],
                      groups: list[FusionGroup] | tuple[FusionGroup, ...] = ()) -> list[Finding]:
    """Findings of operator keys no fusion group claims entirely, most time first."""
    ops = cmp.operators[~cmp.operators["key_id"].isin(claimed)]
    findings = []
    for status, fid, word in (("regressed", "op-regression", "slower"),
                              ("improved", "op-improvement", "faster")):
        rows = pd.concat([ops[ops["status"] == status],
                          _counted_and_moved(cmp, ops, status, list(groups))])
        rows = rows.sort_values("delta_us", key=np.abs, ascending=False, kind="stable")
        if len(rows):
            top = ", ".join(f"{r.op_type} {_short(r.input_shapes)} "
                            f"{r.instance_change_pct:+.1f}% per instance"
                            + (f" (count also changed, {r.base_count:g} → {r.new_count:g} "
                               "per step)" if r.status == "count-changed" else "")
                            for r in rows.head(3).itertuples())
            findings.append(Finding(fid, "medium" if status == "regressed" else "info",
                                    f"{len(rows)} operator(s) significantly {word} per "
                                    "instance", f"Largest: {top}.",
                                    float(rows["instance_effect_us"].sum())))
    counted = _count_finding(cmp, ops, list(groups))
    if counted:
        findings.append(counted)
    for status, fid in (("added", "new-ops"), ("removed", "removed-ops")):
        rows = ops[ops["status"] == status].sort_values("delta_us", key=np.abs, ascending=False,
                                                        kind="stable")
        if len(rows):
            top = ", ".join(f"{r.op_type} ({ms(abs(r.delta_us))})"
                            for r in rows.head(3).itertuples())
            where = "only in new" if status == "added" else "only in base"
            findings.append(Finding(fid, "info", f"{len(rows)} operator key(s) {where}",
                                    f"Largest: {top}.", float(rows["delta_us"].sum())))
    return findings


def _short(shapes: str) -> str:
    if not shapes:
        return ""
    return f"[{shapes if len(shapes) <= 30 else shapes[:29] + '…'}]"
