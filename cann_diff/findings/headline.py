"""The verdict sentence: the step time and, when a finding explains it, why."""

from __future__ import annotations

from .. import format as fmt
from ..compare import Comparison
from . import Analysis


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

