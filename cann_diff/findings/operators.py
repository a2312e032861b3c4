"""Operator findings: per-instance regressions/improvements, count changes, one-side keys.

Each finding counts the rows of the report's table for its status, and names the largest
of them: ``op-regression`` the ``regressed`` keys (Top regressions), ``op-improvement``
the ``improved`` ones (Top improvements), ``count-changed`` the ``count-changed`` ones
(Count changed), ``new-ops`` / ``removed-ops`` the added / removed ones. Keys a fusion
group claims entirely belong to that group's finding and leave these tables too.

A count-changed key whose instances also got significantly slower (or faster), by the
threshold in its Hodges-Lehmann ratio and its ratio of means alike, stays a count change:
the count-changed finding says so ("per instance also …"), and no per-instance finding
counts it, as no per-instance table shows it.

A key of which a group claims some instances (the MatMuls that replaced a fused op,
beside ordinary MatMuls of the same shape) keeps its verdicts; for its count change only
the part the group does not explain counts. The count effect is the split's
(``compute_split.effect_parts``): the figure "Where Δ Computing went" shows for count
changes is the finding's effect on Computing, to the µs.
"""

from __future__ import annotations

import pandas as pd

from .. import format as fmt
from ..compare import Comparison
from .base import Finding, ms
from .compute_split import effect_parts
from .fusion import FusionGroup, claimed_instances


def _largest_first(rows: pd.DataFrame, by: pd.Series | None = None) -> pd.DataFrame:
    """Rows by |Δ| (or ``by``), largest first, ties in table order: as the tables list them."""
    key = (rows["delta_us"] if by is None else by).abs()
    return rows.loc[key.sort_values(ascending=False, kind="stable").index]


def _name(row) -> str:
    """``op_type [shapes]``, the shapes left out when none were recorded."""
    shapes = _short(row.input_shapes)
    return f"{row.op_type} {shapes}" if shapes else str(row.op_type)


def _moved_per_instance(cmp: Comparison, rows: pd.DataFrame, sign: int,
                        groups: list[FusionGroup]) -> pd.DataFrame:
    """Count-changed keys whose instances also got significantly slower (sign 1) or faster.

    Compared per instance (shapes recorded), significant, and by at least the threshold
    in both the Hodges-Lehmann ratio (what the test saw) and the ratio of means (what the
    effect uses); instances an MC2 group claims are left to the group (a split adds small
    collectives to a large one: another mix, not slower instances).
    """
    threshold = cmp.thresholds.threshold_pct
    base_claims, new_claims = claimed_instances(groups)
    claimed = rows["key_id"].isin([*base_claims, *new_claims])
    return rows[rows["per_instance"].astype(bool) & rows["significant"].astype(bool)
                & (rows["hl_change_pct"] * sign >= threshold)
                & (rows["instance_change_pct"] * sign >= threshold) & ~claimed]


def _count_finding(cmp: Comparison, ops: pd.DataFrame,
                   groups: list[FusionGroup]) -> Finding | None:
    """``count-changed``: every key of the Count changed table, its count effect the split's.

    None when MC2 groups explain every count change (their finding says it).
    """
    rows = ops[ops["status"] == "count-changed"]
    if rows.empty:
        return None
    parts = effect_parts(rows, groups)
    explained = (parts["new_left"] - parts["base_left"]).abs() <= 1e-9
    if explained.all():
        return None
    effect = parts["count"]
    kernels = rows["category"] != "communication"
    computing, collectives = float(effect[kernels].sum()), float(effect[~kernels].sum())
    largest = _largest_first(rows, effect).head(3)
    top = ", ".join(f"{_name(r)} {parts.at[r.Index, 'base_left']:g} → "
                    f"{parts.at[r.Index, 'new_left']:g} per step "
                    f"({fmt.ms(effect[r.Index], signed=True)} ms)" for r in largest.itertuples())
    pieces = [f"count effect {fmt.ms(computing, signed=True)} ms per step on Computing "
              "(Δ instances × base mean; a type without shapes by its totals), as Where Δ "
              "Computing went shows"]
    if collectives:
        pieces.append(f"{fmt.ms(collectives, signed=True)} ms per step on collectives")
    if explained.any():
        pieces.append(f"{int(explained.sum())} of them explained by the MC2 fusion change")
    moved = []
    for sign, word in ((1, "slower"), (-1, "faster")):
        ahead = _largest_first(_moved_per_instance(cmp, rows, sign, groups)).head(3)
        if len(ahead):
            moved.append(f"{word}: " + ", ".join(f"{_name(r)} {r.instance_change_pct:+.1f}%"
                                                 for r in ahead.itertuples()))
    also = f" Per instance (mean), significantly {'; '.join(moved)}." if moved else ""
    total = computing + collectives
    material = abs(total) >= cmp.thresholds.material_pct / 100 * max(cmp.step.base_us, 1e-9)
    return Finding("count-changed", "medium" if material else "info",
                   f"{len(rows)} operator key(s) run a different number of times per step",
                   f"Largest: {top}. A count change is other work, not a faster or slower "
                   f"kernel: {'; '.join(pieces)}.{also}", total,
                   {"keys": [int(k) for k in rows["key_id"]], "count_effect_us": computing,
                    "collectives_count_effect_us": collectives})


def operator_findings(cmp: Comparison, claimed: dict[int, str],
                      groups: list[FusionGroup] | tuple[FusionGroup, ...] = ()) -> list[Finding]:
    """Findings of operator keys no fusion group claims entirely, most time first."""
    ops = cmp.operators[~cmp.operators["key_id"].isin(claimed)]
    findings = []
    for status, fid, word in (("regressed", "op-regression", "slower"),
                              ("improved", "op-improvement", "faster")):
        rows = _largest_first(ops[ops["status"] == status])
        if len(rows):
            top = ", ".join(f"{_name(r)} {r.instance_change_pct:+.1f}% per instance"
                            for r in rows.head(3).itertuples())
            findings.append(Finding(fid, "medium" if status == "regressed" else "info",
                                    f"{len(rows)} operator(s) significantly {word} per "
                                    "instance", f"Largest: {top}.",
                                    float(rows["instance_effect_us"].sum())))
    counted = _count_finding(cmp, ops, list(groups))
    if counted:
        findings.append(counted)
    for status, fid in (("added", "new-ops"), ("removed", "removed-ops")):
        rows = _largest_first(ops[ops["status"] == status])
        if len(rows):
            top = ", ".join(f"{r.op_type} ({ms(abs(r.delta_us))})"
                            for r in rows.head(3).itertuples())
            where = "only in new" if status == "added" else "only in base"
            findings.append(Finding(fid, "info", f"{len(rows)} operator key(s) {where}",
                                    f"Largest: {top}.", float(rows["delta_us"].sum())))
    return findings


def _short(shapes) -> str:
    if not isinstance(shapes, str) or not shapes:
        return ""
    return f"[{shapes if len(shapes) <= 30 else shapes[:29] + '…'}]"
