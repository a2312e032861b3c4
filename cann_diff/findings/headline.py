"""The headline: one sentence a manager understands — the step verdict, and why.

It quotes only figures that hold for the case: the step as judged (after screening
warm-up/outlier steps, which it names), the like-for-like kernel gain from the compute
split rather than Computing (which in an MC2 case also holds the communication a fused
kernel ran inside it), and Free or Bubble growth when it is at least
``headline_part_share`` of the step change.
"""

from __future__ import annotations

from collections.abc import Sequence

from .. import format as fmt
from ..compare import Comparison
from .base import Finding
from .compute_split import ComputeSplit
from .fusion import FusionGroup

PART_NAMES = {"free": "Free (device idle) time", "bubble": "Bubble time"}


def _screened(cmp: Comparison) -> str:
    """``; warm-up/outlier steps left out: …`` naming the screened steps, or ``""``."""
    s = cmp.step
    if not s.screened:
        return ""
    named = ", ".join(f"{x.side} step {x.step}"
                      + (f" at {x.stage_us / x.median_us:.1f}× the median"
                         if x.median_us > 0 else "") for x in s.screened)
    every = f"; over all steps {fmt.pct(s.all_steps.delta_pct)}" if s.all_steps else ""
    return f"; warm-up/outlier steps left out: {named}{every}"


def _parts(cmp: Comparison, skip: str = "") -> str:
    """``; Free … grew by …`` for Free/Bubble growth of at least a share of the step change."""
    s = cmp.step
    floor = cmp.thresholds.material_pct / 100 * max(abs(s.base_us), 1e-9)
    if not abs(s.delta_us) >= floor:
        return ""
    out = []
    for name, label in PART_NAMES.items():
        delta = s.breakdown.get(name, {}).get("delta_us")
        if name == skip or fmt.is_missing(delta) or delta <= 0:
            continue
        if delta >= cmp.thresholds.headline_part_share * abs(s.delta_us):
            out.append(f"{label} grew by {fmt.ms(delta)} ms, "
                       f"{delta / abs(s.delta_us):.0%} of the step change")
    return "; " + "; ".join(out) if out else ""


def _hidden(cmp: Comparison, fusion: Sequence[FusionGroup], compute: ComputeSplit,
            hidden: Finding) -> str:
    s = cmp.step
    base_new = f"{fmt.ms(s.base_us)} → {fmt.ms(s.new_us)} ms per step"
    grown = hidden.data["comm_growth"]
    more = ", ".join(f"{v['delta_count']:g} more {k}" for k, v in grown.items()
                     if v["delta_count"] > 0)
    split = [g.fused_type for g in fusion if g.direction == "split"]
    why = f" because {', '.join(split)} is no longer fused" if split else ""
    exposed = fmt.ms(hidden.data["delta_exposed_us"])
    comm = (f"{more} operations per step add {exposed} ms of exposed communication"
            if more else f"exposed communication grew by {exposed} ms"
            f"{' (' + ', '.join(grown) + ')' if grown else ''}")
    like = compute.like_for_like_us
    gain = (f"its like-for-like kernels got {fmt.ms(-like)} ms faster" if like < 0 else
            f"its computing time fell by {fmt.ms(-hidden.data['delta_computing_us'])} ms")
    if s.delta_us > 0:
        return (f"{cmp.new.label} is {s.delta_pct:.1f}% slower than {cmp.base.label} "
                f"({base_new}{_screened(cmp)}): {gain}, but {comm}{why}{_parts(cmp)}.")
    return (f"{cmp.new.label} is only {-s.delta_pct:.1f}% faster than {cmp.base.label} "
            f"({base_new}{_screened(cmp)}): {gain}, but {comm}{why}, eating most of the "
            f"gain{_parts(cmp)}.")


def _unchanged(cmp: Comparison) -> str:
    s = cmp.step
    base_new = f"{fmt.ms(s.base_us)} → {fmt.ms(s.new_us)} ms per step"
    between = f"{cmp.base.label} and {cmp.new.label}"
    if s.significant:
        return (f"Step time between {between} changed by {fmt.pct(s.delta_pct)} ({base_new}"
                f"{_screened(cmp)}): significant, but below the {s.threshold_pct:g}% step "
                "threshold.")
    if s.significant is None:
        return (f"No change in step time beyond the {s.threshold_pct:g}% threshold between "
                f"{between} ({base_new}, {fmt.pct(s.delta_pct)}; one step per side: "
                f"significance unknown{_screened(cmp)}).")
    return (f"No significant change in step time between {between} ({base_new}, "
            f"{fmt.pct(s.delta_pct)}{_screened(cmp)}).")


def headline(cmp: Comparison, findings: Sequence[Finding], fusion: Sequence[FusionGroup],
             compute: ComputeSplit) -> str:
    """One sentence: the verdict on the step time, and why."""
    s = cmp.step
    hidden = next((f for f in findings if f.id == "comm-hides-compute"), None)
    if hidden:
        return _hidden(cmp, fusion, compute, hidden)
    if s.status == "unchanged":
        return _unchanged(cmp)
    word = "slower" if s.status == "regressed" else "faster"
    moves = sorted(((k, v["delta_us"]) for k, v in s.breakdown.items()
                    if k in ("computing", "communication_not_overlapped", "free", "bubble")
                    and not fmt.is_missing(v["delta_us"])), key=lambda kv: -abs(kv[1]))
    driver, main = "", ""
    if moves:
        main = moves[0][0]
        name = main.replace("communication_not_overlapped", "exposed communication")
        driver = f", mostly from {name} ({fmt.ms(moves[0][1], signed=True)} ms)"
    return (f"{cmp.new.label} is {abs(s.delta_pct):.1f}% {word} than {cmp.base.label} "
            f"({fmt.ms(s.base_us)} → {fmt.ms(s.new_us)} ms per step{_screened(cmp)})"
            f"{driver}{_parts(cmp, skip=main)}.")
