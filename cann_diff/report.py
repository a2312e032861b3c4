"""Report stage: the frozen, JSON-ready result that every renderer reads.

``Report.to_dict()`` is report.json (schema ``cann-diff/1``, DESIGN.md). Operator
figures are per step and per rank: ``base_count`` ops per step, ``base_total_us``
µs per step; ``base_instances`` is the raw count over the whole run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .compare import Comparison
from .findings import Analysis, FusionGroup
from .findings.headline import headline
from .schema import Note, Run

SCHEMA = "cann-diff/1"
OPERATOR_FIELDS = ("key_id", "op_type", "base_op_type", "new_op_type", "family", "input_shapes",
                   "category", "match_kind", "base_count", "new_count", "base_instances",
                   "new_instances", "base_total_us", "new_total_us", "delta_us", "delta_pct",
                   "base_mean_us", "new_mean_us", "base_median_us", "new_median_us",
                   "base_p95_us", "new_p95_us", "p_value", "ci_low", "ci_high", "significant",
                   "status", "fusion")


def clean(value):
    """Make a value JSON-safe: numpy scalars to Python, NaN/inf to None."""
    if isinstance(value, dict):
        return {str(k): clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v) for v in value]
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating, float)):
        return None if not math.isfinite(float(value)) else float(value)
    if isinstance(value, np.bool_):
        return bool(value)
    if value is None or isinstance(value, (str, int, bool)):
        return value
    if isinstance(value, float) or value is np.nan:
        return None
    try:
        return None if value != value else value  # pandas NA
    except TypeError:
        return None


@dataclass(frozen=True)
class Report:
    """Everything a renderer needs, as plain JSON-ready data."""

    headline: str
    base: dict
    new: dict
    step: dict
    operators: list[dict]
    categories: list[dict]
    communication: list[dict]
    fusion: list[dict]
    findings: list[dict]
    warnings: list[str]
    thresholds: dict
    top_n: int
    extra: dict = field(default_factory=dict)
    notes: tuple[Note, ...] = ()

    def to_dict(self) -> dict:
        """report.json content."""
        return clean({
            "schema": SCHEMA, "headline": self.headline, "base": self.base, "new": self.new,
            "step": self.step, "operators": self.operators, "categories": self.categories,
            "communication": self.communication, "fusion": self.fusion,
            "findings": self.findings, "warnings": self.warnings,
            "thresholds": self.thresholds, **self.extra,
        })


def _side(run: Run, steps: tuple[int, ...]) -> dict:
    meta = run.meta.to_dict()
    return {"label": run.label, **meta, "steps": list(steps), "step_source": run.step_source,
            "warnings": list(run.warnings)}


def _step(cmp: Comparison) -> dict:
    s = cmp.step
    # report.json's ``significant`` is a bool; "unknown" (one step per side) is spelled
    # out in ``significance`` so a gate does not mistake it for "no change".
    return {"base_us": s.base_us, "new_us": s.new_us, "delta_us": s.delta_us,
            "delta_pct": s.delta_pct, "p_value": s.p_value,
            "significant": bool(s.significant),
            "significance": "unknown" if s.significant is None else "tested",
            "ci_low": s.ci_low, "ci_high": s.ci_high, "status": s.status,
            "base_samples": list(s.base_samples), "new_samples": list(s.new_samples),
            "breakdown": s.breakdown}


def _fusion(group: FusionGroup) -> dict:
    return {"fused_type": group.fused_type, "direction": group.direction,
            "split_types": list(group.split_types), "base_count": group.base_count,
            "new_count": group.new_count, "split_counts": group.split_counts,
            "base_total_us": group.base_total_us, "new_total_us": group.new_total_us,
            "delta_us": group.delta_us, "exposed_us": group.exposed_us,
            "paired_by": group.paired_by, "api": group.spec.api,
            "min_cann": group.spec.min_cann, "enable": group.spec.enable}


def build_report(cmp: Comparison, analysis: Analysis, top_n: int = 15,
                 extra: dict | None = None) -> Report:
    """Assemble the Report from a Comparison and its Analysis."""
    ops = cmp.operators.copy()
    fusion = ops["key_id"].map(analysis.fusion_keys)
    ops["fusion"] = fusion.astype(object).where(fusion.notna(), None)
    ops = ops.reindex(ops["delta_us"].abs().sort_values(ascending=False, kind="stable").index)
    operators = [{k: row.get(k) for k in OPERATOR_FIELDS} for row in ops.to_dict("records")]
    findings = [{"id": f.id, "severity": f.severity, "title": f.title, "detail": f.detail,
                 "delta_us": f.delta_us, "data": f.data} for f in analysis.findings]
    t = cmp.settings
    return Report(
        headline=headline(cmp, analysis),
        base=_side(cmp.base, cmp.base_steps), new=_side(cmp.new, cmp.new_steps),
        step=_step(cmp), operators=operators,
        categories=cmp.categories.to_dict("records"),
        communication=cmp.comm_types.to_dict("records"),
        fusion=[_fusion(g) for g in analysis.fusion], findings=findings,
        warnings=[note.text for note in cmp.warnings], notes=cmp.warnings,
        thresholds={"alpha": t.alpha, "threshold_pct": t.threshold_pct,
                    "confidence": t.confidence},
        top_n=top_n, extra={"ranks": cmp.ranks.to_dict("records"),
                            "comm_groups": cmp.groups.to_dict("records"), **(extra or {})})
