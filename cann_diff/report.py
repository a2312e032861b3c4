"""Report stage: the frozen, JSON-ready result that every renderer reads.

``Report.to_dict()`` is report.json (schema ``cann-diff/1``, DESIGN.md). Operator
figures are per step and per rank: ``base_count`` ops per step, ``base_total_us``
µs per step; ``base_instances`` is the raw count over the whole run.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from . import format as fmt
from .compare import Comparison
from .findings import Analysis, FusionGroup
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


def headline(cmp: Comparison, analysis: Analysis) -> str:
    """One sentence a manager understands: the verdict on the step time, and why."""
    s = cmp.step
    hidden = next((f for f in analysis.findings if f.id == "comm-hides-compute"), None)
    base_new = f"{fmt.ms(s.base_us)} → {fmt.ms(s.new_us)} ms per step"
    if hidden:
        grown = hidden.data["comm_growth"]
        more = ", ".join(f"{v['delta_count']:g} more {k}" for k, v in grown.items()
                         if v["delta_count"] > 0)
        split = [g.fused_type for g in analysis.fusion if g.direction == "split"]
        why = f" because {', '.join(split)} is no longer fused" if split else ""
        exposed = fmt.ms(hidden.data["delta_exposed_us"])
        comm = (f"{more} operations per step add {exposed} ms of exposed communication"
                if more else f"exposed communication grew by {exposed} ms"
                f"{' (' + ', '.join(grown) + ')' if grown else ''}")
        # Like for like: matched kernels, not Computing, which in the base also holds the
        # communication a fused MC2 kernel ran inside it.
        matched = hidden.data["delta_matched_kernels_us"]
        gain = (f"its kernels got {fmt.ms(-matched)} ms faster" if matched < 0 else
                f"its computing time fell by {fmt.ms(-hidden.data['delta_computing_us'])} ms")
        if s.delta_us > 0:
            return (f"{cmp.new.label} is {s.delta_pct:.1f}% slower than {cmp.base.label} "
                    f"({base_new}): {gain}, but {comm}{why}.")
        return (f"{cmp.new.label} is only {-s.delta_pct:.1f}% faster than {cmp.base.label} "
                f"({base_new}): {gain}, but {comm}{why}, eating most of the gain.")
    if s.status == "unchanged":
        if s.significant:
            return (f"Step time between {cmp.base.label} and {cmp.new.label} changed by "
                    f"{fmt.pct(s.delta_pct)} ({base_new}): significant, but below the "
                    f"{cmp.settings.threshold_pct:g}% threshold.")
        if s.significant is None:
            return (f"No change in step time beyond the {cmp.settings.threshold_pct:g}% "
                    f"threshold between {cmp.base.label} and {cmp.new.label} ({base_new}, "
                    f"{fmt.pct(s.delta_pct)}; one step per side: significance unknown).")
        return (f"No significant change in step time between {cmp.base.label} and "
                f"{cmp.new.label} ({base_new}, {fmt.pct(s.delta_pct)}).")
    word = "slower" if s.status == "regressed" else "faster"
    moves = sorted(((k, v["delta_us"]) for k, v in s.breakdown.items()
                    if k in ("computing", "communication_not_overlapped", "free", "bubble")
                    and not fmt.is_missing(v["delta_us"])), key=lambda kv: -abs(kv[1]))
    driver = ""
    if moves:
        name = moves[0][0].replace("communication_not_overlapped", "exposed communication")
        driver = f", mostly from {name} ({fmt.ms(moves[0][1], signed=True)} ms)"
    return (f"{cmp.new.label} is {abs(s.delta_pct):.1f}% {word} than {cmp.base.label} "
            f"({base_new}){driver}.")


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
