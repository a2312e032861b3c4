"""``comm-hides-compute``: the compute gain eaten by communication growth.

The compute side is quoted from the one compute arithmetic (compute_split.py): the gain
is that of like-for-like kernels, not Computing, which in an MC2 case also holds the
communication a fused kernel ran inside it. The communication side names the part of
the elapsed time that grew most — transfer (transit), waiting for a peer (wait) or idle
between tasks (idle = elapse − transit − wait) — with its numbers, and whether there are
more operations or slower ones.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..compare import Comparison
from ..compare.stats import welch_p
from .base import Finding, ms
from .compute_split import ComputeSplit, split_computing
from .fusion import FusionGroup

PARTS = (("transit", "transfer"), ("wait", "waiting for a peer"),
         ("idle", "idle between tasks"))


def _kept_rows(steps: pd.DataFrame, kept: tuple[int, ...]) -> pd.DataFrame:
    """Rows of the steps the step comparison kept (all when it names none)."""
    if not kept:
        return steps
    return steps[steps["step"].fillna(-1).astype("int64").isin(list(kept))]


def _significant_drop(cmp: Comparison, field_name: str) -> bool:
    """Tell whether ``field_name`` of the step breakdown changed beyond noise."""
    base_rows = _kept_rows(cmp.base.steps, cmp.step.base_steps)
    new_rows = _kept_rows(cmp.new.steps, cmp.step.new_steps)
    base = base_rows.groupby(base_rows["step"].fillna(-1))[field_name].mean()
    new = new_rows.groupby(new_rows["step"].fillna(-1))[field_name].mean()
    floor = cmp.thresholds.material_pct / 100 * max(cmp.step.base_us, 1e-9)
    material = abs(new.mean() - base.mean()) >= floor
    # A breakdown part can be 0 in a step (no exposed communication): Welch on raw values.
    p_value = welch_p(base.to_numpy(), new.to_numpy())
    if p_value is None:
        return bool(material)
    return bool(material and p_value < cmp.thresholds.alpha)


def _grown(cmp: Comparison) -> pd.DataFrame:
    table = cmp.comm_types
    return table[(table["delta_count"] > 1e-9) | (table["delta_exposed_us"] > 0)]


def _comm_growth(cmp: Comparison) -> tuple[list[str], dict]:
    parts, data = [], {}
    for row in _grown(cmp).itertuples():
        parts.append(f"{row.comm_type} {row.delta_count:+g}/step ({ms(row.delta_us)} time, "
                     f"{ms(row.delta_exposed_us)} exposed)")
        data[row.comm_type] = {"delta_count": row.delta_count, "delta_us": row.delta_us,
                               "delta_exposed_us": row.delta_exposed_us}
    return parts, data


def _part_sums(table: pd.DataFrame) -> dict[str, dict[str, float]] | None:
    """Transit, wait and idle per step (µs) of both sides, summed over ``table``'s types."""
    if not all(f"{side}_{part}_us" in table for side in ("base", "new")
               for part in ("transit", "wait")):
        return None
    sums: dict[str, dict[str, float]] = {}
    for part, _ in PARTS:
        sums[part] = {}
        for side in ("base", "new"):
            if f"{side}_{part}_us" in table:
                values = table[f"{side}_{part}_us"]
            elif part == "idle" and f"{side}_elapse_us" in table:  # elapse = transit+wait+idle
                values = (table[f"{side}_elapse_us"] - table[f"{side}_transit_us"]
                          - table[f"{side}_wait_us"])
            else:
                values = pd.Series(np.nan, index=table.index)
            sums[part][side] = float(values.fillna(0.0).sum()) if values.notna().any() \
                else float("nan")
    return sums


def growth_kind(cmp: Comparison) -> tuple[str, str, dict]:
    """Which part of the grown communication grew most, in words, and the figures.

    Returns (kind, sentence, data): kind is ``transfer``, ``waiting``, ``idle`` or
    ``unknown`` (no communication.json, or no part grew); the sentence names it with its
    numbers and says "more operations" or "slower operations".
    """
    grown = _grown(cmp)
    more = float(grown["delta_count"].clip(lower=0).sum()) if len(grown) else 0.0
    ops = f"more operations ({more:+g} per step)" if more > 1e-9 else \
        "slower operations (same count per step)"
    sums = _part_sums(grown if len(grown) else cmp.comm_types)
    data = {"operations": "more" if more > 1e-9 else "slower", "parts": sums or {}}
    if not sums:
        return "unknown", (f"{ops}; without communication.json transfer, waiting and idle "
                           "time cannot be told apart"), {**data, "kind": "unknown"}
    growth = {part: sums[part]["new"] - sums[part]["base"] for part, _ in PARTS}
    finite = {p: g for p, g in growth.items() if math.isfinite(g)}
    top = max(finite, key=finite.__getitem__) if finite else None
    if top is None or finite[top] <= 0:
        return "unknown", f"{ops}; no part of the elapsed time grew", {**data, "kind": "unknown"}
    words = dict(PARTS)
    figures = ", ".join(f"{words[p]} {ms(sums[p]['base'])} → {ms(sums[p]['new'])}"
                        for p, _ in PARTS if p in finite)
    kind = {"transit": "transfer", "wait": "waiting", "idle": "idle"}[top]
    return kind, (f"{words[top]} (+{ms(finite[top])} per step; {figures}), from {ops}"), \
        {**data, "kind": kind}


def _faster_compute(split: ComputeSplit, cmp: Comparison, n: int = 3) -> tuple[list[str], dict]:
    """The families whose like-for-like kernels gained most, with their share."""
    ops = cmp.operators
    same = ops[ops["same_shape"] & (ops["category"] != "communication")]
    base = same.groupby(same["family"].astype(str))["base_total_us"].sum()
    faster = sorted(((f, d) for f, d in split.like_for_like_by_family.items() if d < 0),
                    key=lambda fd: fd[1])[:n]
    parts = [f"{family} {ms(delta)} ({delta / base[family] * 100:+.1f}%)"
             for family, delta in faster if base.get(family, 0) > 0]
    return parts, dict(faster)


def _compute_text(split: ComputeSplit, d_comp: float, fast_parts: list[str],
                  screened: bool) -> str:
    """Computing's change and where it went, from the compute split."""
    text = f"Computing fell by {ms(-d_comp)} per step"
    pieces = [f"like-for-like kernels {ms(split.like_for_like_us)}"
              + (f" ({', '.join(fast_parts)})" if fast_parts else "")]
    if abs(split.mc2_us) > 0:
        pieces.append(f"MC2 fused kernels replaced by split ones {ms(split.mc2_us)}")
    if abs(split.changed_work_us) > 0:
        pieces.append(f"changed work {ms(split.changed_work_us)}")
    if math.isfinite(split.rest_us) and abs(split.rest_us) > 0:
        pieces.append(f"rest {ms(split.rest_us)}")
    over = "; kernel figures over all steps" if screened else ""
    return f"{text} ({'; '.join(pieces)}{over})"


def comm_hides_compute(cmp: Comparison, groups: list[FusionGroup],
                       split: ComputeSplit | None = None) -> Finding | None:
    """The compute gain eaten by communication growth, or None."""
    br = cmp.step.breakdown
    d_comp = br["computing"]["delta_us"]
    d_exposed = br["communication_not_overlapped"]["delta_us"]
    d_step = cmp.step.delta_us
    if not (d_comp < 0 and d_exposed > 0 and d_step > d_comp):
        return None
    # Compute gains that win clearly are not "hidden": the step must have got slower, or
    # communication growth must have eaten at least half of the compute gain.
    if d_step <= 0 and d_exposed < cmp.thresholds.eaten_share * -d_comp:
        return None
    if not (_significant_drop(cmp, "computing")
            and _significant_drop(cmp, "communication_not_overlapped")):
        return None
    split = split or split_computing(cmp, groups)
    comm_parts, comm_data = _comm_growth(cmp)
    fast_parts, fast_data = _faster_compute(split, cmp)
    kind, kind_text, kind_data = growth_kind(cmp)
    split_groups = [g for g in groups if g.direction == "split"]
    cause = ""
    if split_groups:
        cause = " The new run executes " + "; ".join(
            f"{g.fused_type} as {' + '.join(g.split_types[:2])} "
            f"({g.base_count - g.new_count:g} fused ops per step fewer)"
            for g in split_groups) + "."
    detail = (f"{_compute_text(split, d_comp, fast_parts, bool(cmp.step.screened))}, but "
              f"exposed communication rose by {ms(d_exposed)}"
              f"{' (' + '; '.join(comm_parts) + ')' if comm_parts else ''}; net step change "
              f"{ms(d_step)} ({cmp.step.delta_pct:+.1f}%). Growth is mainly {kind_text}."
              f"{cause}")
    like = split.like_for_like_us
    gain = -like if like < 0 else -d_comp
    what = "like-for-like kernel" if like < 0 else "computing"
    title = (f"Communication growth hides a {ms(gain)} {what} gain: step "
             f"{cmp.step.delta_pct:+.1f}%")
    return Finding("comm-hides-compute", "high" if d_step > 0 else "medium", title, detail,
                   float(d_step),
                   {"delta_computing_us": d_comp, "delta_matched_kernels_us": float(like),
                    "delta_exposed_us": d_exposed, "delta_step_us": d_step,
                    "comm_growth": comm_data, "faster_compute": fast_data,
                    "growth_kind": kind, "growth": kind_data,
                    "compute_split": split.to_dict()})
