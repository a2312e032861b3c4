"""Operator findings: significant regressions/improvements, keys on one side only."""

from __future__ import annotations

import numpy as np

from ..compare import Comparison
from .base import Finding, ms


def operator_findings(cmp: Comparison, claimed: dict[int, str]) -> list[Finding]:
    """Findings of operator keys no fusion group claimed, most time first."""
    ops = cmp.operators[~cmp.operators["key_id"].isin(claimed)]
    findings = []
    for status, fid, word in (("regressed", "op-regression", "slower"),
                              ("improved", "op-improvement", "faster")):
        rows = ops[ops["status"] == status].sort_values("delta_us", key=np.abs, ascending=False)
        if len(rows):
            top = ", ".join(f"{r.op_type} {_short(r.input_shapes)} {r.delta_pct:+.1f}%"
                            for r in rows.head(3).itertuples())
            findings.append(Finding(fid, "medium" if status == "regressed" else "info",
                                    f"{len(rows)} operator(s) significantly {word}",
                                    f"Largest: {top}.", float(rows["delta_us"].sum())))
    for status, fid in (("added", "new-ops"), ("removed", "removed-ops")):
        rows = ops[ops["status"] == status].sort_values("delta_us", key=np.abs, ascending=False)
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
