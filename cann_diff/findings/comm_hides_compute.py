"""``comm-hides-compute``: a kernel gain eaten by communication growth.

It fires only when the like-for-like kernels got faster (compute_split.py): Computing
also falls when the new run does less work (kernels no longer run, an MC2 op split so its
hidden communication left Computing), and none of that is a gain the communication ate.
The gain is judged against the kernels it is a gain of — at least ``--threshold`` of their
base time, duration-weighted — never against the step: in a communication-bound step a
10 % gain on every kernel is under 1 % of the step and still the story. Exposed
communication must have grown materially (``material_pct`` of the step) and, where steps
allow, both changes must be beyond noise (Welch on the per-step figures).
The compute side is said in parts with their signs (``story.compute_parts``); the
communication side names the part of the elapsed time that grew most — transfer
(transit), waiting for a peer (wait) or idle between tasks (idle = elapse − transit −
wait) — with its numbers. With one step per side nothing can be tested: the finding
fires on magnitudes and says so.
"""

from __future__ import annotations

import pandas as pd

from ..compare import SAME_SHAPE_KINDS, Comparison
from ..compare.stats import welch_p
from .base import Finding, ms
from .compute_split import ComputeSplit, effect_parts, split_computing
from .fusion import FusionGroup
from .story import (
    _comm_growth,
    collective_parts,
    collectives_text,
    compute_parts,
    growth_kind,
    parts_data,
    signed_ms,
    step_change,
)


def _kept_rows(steps: pd.DataFrame, kept: tuple[int, ...]) -> pd.DataFrame:
    """Rows of the steps the step comparison kept (all when it names none)."""
    if not kept:
        return steps
    return steps[steps["step"].fillna(-1).astype("int64").isin(list(kept))]


def _per_step(cmp: Comparison, field_name: str) -> tuple[pd.Series, pd.Series]:
    """``field_name`` of the step breakdown per compared step (mean over ranks), both sides."""
    base_rows = _kept_rows(cmp.base.steps, cmp.step.base_steps)
    new_rows = _kept_rows(cmp.new.steps, cmp.step.new_steps)
    return (base_rows.groupby(base_rows["step"].fillna(-1))[field_name].mean(),
            new_rows.groupby(new_rows["step"].fillna(-1))[field_name].mean())


def _beyond_noise(cmp: Comparison, field_name: str, floor_us: float) -> bool:
    """Whether ``field_name`` moved by ``floor_us`` or more, and beyond noise where it can tell."""
    base, new = _per_step(cmp, field_name)
    material = abs(new.mean() - base.mean()) >= floor_us
    # A breakdown part can be 0 in a step (no exposed communication): Welch on raw values.
    p_value = welch_p(base.to_numpy(), new.to_numpy())
    if p_value is None:
        return bool(material)
    return bool(material and p_value < cmp.thresholds.alpha)


def like_for_like_gain(cmp: Comparison, groups: list[FusionGroup]) -> tuple[float, float]:
    """The like-for-like kernels' per-instance change (µs per step) and its base time.

    Duration-weighted: the row of compute_split over the base time of the instances it
    covers (same-rung keys, MC2-claimed instances left out), so that a gain of 10 % on
    every kernel reads 10 % however small Computing is beside the step.
    """
    ops = cmp.operators
    kernels = ops[(ops["category"] != "communication").to_numpy()]
    parts = effect_parts(kernels, groups)
    same = ((kernels["base_instances"] > 0) & (kernels["new_instances"] > 0)
            & kernels["match_kind"].isin(SAME_SHAPE_KINDS)).to_numpy()
    base_mean = kernels["base_mean_us"].where(kernels["base_instances"] > 0, 0.0).fillna(0.0)
    base_time = float((parts["base_left"] * base_mean)[same].sum())
    return float(parts.loc[same, "instance"].sum()), base_time


def _one_step(cmp: Comparison) -> bool:
    return cmp.step.p_value is None


def comm_hides_compute(cmp: Comparison, groups: list[FusionGroup],
                       split: ComputeSplit | None = None) -> Finding | None:
    """The kernel gain eaten by communication growth, or None."""
    br = cmp.step.breakdown
    d_comp = br["computing"]["delta_us"]
    d_exposed = br["communication_not_overlapped"]["delta_us"]
    d_step = cmp.step.delta_us
    split = split or split_computing(cmp, groups)
    like = split.like_for_like_us
    _, like_base = like_for_like_gain(cmp, groups)
    if not (like < 0 and like_base > 0 and d_comp < 0 and d_exposed > 0 and d_step > d_comp):
        return None
    # The gain is judged against the kernels it is a gain of, not against the step: a
    # communication-bound step hides a 10 % kernel gain that is 1 % of it.
    gain_pct = -like / like_base * 100
    if gain_pct < cmp.thresholds.threshold_pct:
        return None
    # Compute gains that win clearly are not "hidden": the step must have got slower, or
    # communication growth must have eaten at least half of the compute gain.
    if d_step <= 0 and d_exposed < cmp.thresholds.eaten_share * -d_comp:
        return None
    floor = cmp.thresholds.material_pct / 100 * max(cmp.step.base_us, 1e-9)
    if not (_beyond_noise(cmp, "computing", 0.0)
            and _beyond_noise(cmp, "communication_not_overlapped", floor)):
        return None
    compute_text, compute = compute_parts(cmp, split)
    _, comm_data = _comm_growth(cmp)
    collectives = collective_parts(cmp)
    comm_text = collectives_text(cmp, collectives)
    kind, kind_text, kind_data = growth_kind(cmp)
    split_groups = [g for g in groups if g.direction == "split"]
    cause = ""
    if split_groups:
        cause = " The new run executes " + "; ".join(
            f"{g.fused_type} as {' + '.join(g.split_types[:2])} "
            f"({g.base_count - g.new_count:g} fused ops per step fewer)"
            for g in split_groups) + "."
    untested = " One step per side: not tested, the figures are one capture's." \
        if _one_step(cmp) else ""
    detail = (f"{compute_text[0].upper()}{compute_text[1:]}, but exposed communication "
              f"rose by {ms(d_exposed)}"
              f"{' (' + '; '.join(comm_text) + ')' if comm_text else ''}; net step change "
              f"{signed_ms(d_step)} ({cmp.step.delta_pct:+.1f}%). Growth is mainly "
              f"{kind_text}.{cause}{untested}")
    title = (f"Communication growth hides a {ms(-like)} kernel gain ({gain_pct:.1f}% of "
             f"those kernels' time): step {step_change(cmp.step):+.1f}%")
    return Finding("comm-hides-compute", "high" if d_step > 0 else "medium", title, detail,
                   float(d_step),
                   {"delta_computing_us": d_comp, "delta_matched_kernels_us": float(like),
                    "matched_kernels_base_us": like_base, "kernel_gain_pct": gain_pct,
                    "delta_exposed_us": d_exposed, "delta_step_us": d_step,
                    "comm_growth": comm_data, "growth_kind": kind, "growth": kind_data,
                    "compute_split": split.to_dict(), "one_step": _one_step(cmp),
                    "parts": parts_data(compute + collectives)})
