"""MC2 fusion: a fused compute+communication op on one side, its split ops on the other."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ..compare import Comparison
from ..read.canonical import FusedOp, fusion_table
from .base import Finding, ms


@dataclass(frozen=True)
class FusionGroup:
    """A fused MC2 op on one side matched to its split equivalent on the other.

    Counts are per step; ``split_counts`` maps each split family or comm type to the
    number of ops per step attributed to this group; times are µs per step.
    """

    fused_type: str
    direction: str  # "split": base fused, new split; "fused": the opposite
    split_types: tuple[str, ...]
    base_count: float
    new_count: float
    split_counts: dict[str, float]
    base_total_us: float
    new_total_us: float
    exposed_us: float
    paired_by: str  # "shapes" or "counts"
    spec: FusedOp

    @property
    def delta_us(self) -> float:
        """New minus base time of the group (µs per step)."""
        return self.new_total_us - self.base_total_us


def _leading_shapes(shapes: str, n: int = 2) -> str:
    return ";".join(shapes.split(";")[:n]) if shapes else ""


def _paired_compute_keys(ops: pd.DataFrame, fused_keys: pd.DataFrame, family: str):
    """Compute keys whose leading input shapes equal those of the fused op's keys."""
    candidates = ops[ops["family"] == family]
    fused_shapes = {_leading_shapes(s) for s in fused_keys["input_shapes"] if s}
    if not fused_shapes:
        return candidates, "counts"
    lead = candidates["input_shapes"].map(_leading_shapes)
    paired = candidates[lead.isin(fused_shapes)]
    return (paired, "shapes") if len(paired) else (candidates, "counts")


def _detect_one(spec: FusedOp, cmp: Comparison) -> tuple[FusionGroup, list[int]] | None:
    ops = cmp.operators
    family_rows = ops[ops["family"] == spec.fused_type]
    main = family_rows[family_rows["op_type"] == spec.fused_type]
    if family_rows.empty:
        return None
    fused_base, fused_new = main["base_count"].sum(), main["new_count"].sum()
    if fused_base == fused_new:
        return None
    direction = "split" if fused_base > fused_new else "fused"
    split_side, fused_side = ("new", "base") if direction == "split" else ("base", "new")
    lost = abs(fused_base - fused_new)
    counts, times, exposed, keys = {}, 0.0, 0.0, list(family_rows["key_id"])
    comm = cmp.comm_types.set_index("comm_type")
    for comm_type in spec.comm:
        if comm_type not in comm.index:
            return None
        row = comm.loc[comm_type]
        gained = row[f"{split_side}_count"] - row[f"{fused_side}_count"]
        if gained < cmp.settings.fusion_min_share * lost:
            return None
        taken = min(gained, lost)
        # Marginal cost of the ops gained, not the side's mean op: other collectives of
        # the same type (e.g. a large data-parallel AllReduce) must not inflate it.
        per_op = max(row[f"{split_side}_total_us"] - row[f"{fused_side}_total_us"], 0.0) / gained
        per_op_exposed = max(row[f"{split_side}_exposed_us"]
                             - row[f"{fused_side}_exposed_us"], 0.0) / gained
        counts[comm_type], times, exposed = taken, times + taken * per_op, \
            exposed + taken * per_op_exposed
        is_type = (ops["family"] == comm_type) & (ops["category"] == "communication")
        keys += list(ops.loc[is_type & (ops[f"{split_side}_count"] != ops[f"{fused_side}_count"]),
                             "key_id"])
    paired_by = "counts"
    for family in spec.compute[:1]:
        paired, paired_by = _paired_compute_keys(ops, main, family)
        gained = paired[f"{split_side}_count"].sum() - paired[f"{fused_side}_count"].sum()
        if gained < cmp.settings.fusion_min_share * lost:
            return None
        taken = min(gained, lost)
        grown = paired[f"{split_side}_total_us"].sum() - paired[f"{fused_side}_total_us"].sum()
        counts[family], times = taken, times + taken * max(grown, 0.0) / gained
        keys += list(paired.loc[paired[f"{split_side}_count"] != paired[f"{fused_side}_count"],
                                "key_id"])
    base_total = family_rows["base_total_us"].sum() + (times if direction == "fused" else 0.0)
    new_total = family_rows["new_total_us"].sum() + (times if direction == "split" else 0.0)
    group = FusionGroup(spec.fused_type, direction, spec.split, float(fused_base),
                        float(fused_new), counts, float(base_total), float(new_total),
                        float(exposed), paired_by, spec)
    return group, keys


def detect_fusion(cmp: Comparison, fusion_map: Path | None = None):
    """Fusion groups in both directions, and the operator keys each group claims."""
    groups, claimed = [], {}
    for spec in fusion_table(fusion_map).values():
        found = _detect_one(spec, cmp)
        if found:
            group, keys = found
            groups.append(group)
            for key in keys:
                claimed.setdefault(int(key), spec.fused_type)
    return groups, claimed



def fusion_finding(group: FusionGroup) -> Finding:
    """The ``mc2-split`` or ``mc2-fused`` finding of one group, with how to fuse again."""
    spec = group.spec
    split_text = " + ".join(group.split_types)
    if group.direction == "split":
        title = f"{group.fused_type} now runs split as {split_text}"
        detail = (f"Base ran {group.base_count:g} {group.fused_type} per step, new runs "
                  f"{group.new_count:g}; in their place new runs "
                  + ", ".join(f"{v:g} {k}" for k, v in group.split_counts.items())
                  + f" per step (paired by {group.paired_by}). Time {ms(group.base_total_us)}"
                  f" → {ms(group.new_total_us)} per step, of which {ms(group.exposed_us)} "
                  f"exposed communication. Recommendation: enable MC2 fusion — {spec.enable}"
                  f" ({spec.api}; CANN ≥ {spec.min_cann}).")
        return Finding("mc2-split", "high" if group.delta_us > 0 else "medium", title, detail,
                       group.delta_us, {"fused_type": group.fused_type})
    title = f"{split_text} now runs fused as {group.fused_type}"
    detail = ("Base ran " + ", ".join(f"{v:g} {k}" for k, v in group.split_counts.items())
              + f" per step where new runs {group.new_count:g} {group.fused_type} "
              f"(paired by {group.paired_by}). Time {ms(group.base_total_us)} → "
              f"{ms(group.new_total_us)} per step.")
    return Finding("mc2-fused", "info" if group.delta_us <= 0 else "medium", title, detail,
                   group.delta_us, {"fused_type": group.fused_type})
