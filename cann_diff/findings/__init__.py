"""Analyse stage: MC2 fused/split groups and verdicts (DESIGN.md "Finding ids").

The central verdict is ``comm-hides-compute``: computing got faster, exposed
communication grew, and the step did not gain what computing gained. When it comes
with an MC2 split (a fused compute+communication op run as MatMul + collective),
the finding says which fused op split and how to turn fusion back on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from .. import format as fmt
from ..read.canonical import FusedOp, fusion_table
from ..compare import Comparison
from ..compare.stats import compare_steps

MIN_SHARE = 0.5  # the split side must gain at least half as many ops per step as the fused lost
EATEN_SHARE = 0.5  # share of the compute gain that communication must eat to be "hidden"
MATERIAL_PCT = 1.0  # step-level moves below 1 % of the base step are not worth a verdict


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


@dataclass(frozen=True)
class Finding:
    """One verdict with its numbers; ``data`` carries the figures behind ``detail``."""

    id: str
    severity: str
    title: str
    detail: str
    delta_us: float
    data: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Analysis:
    """Fusion groups, findings, and the operator keys that belong to a fusion group."""

    fusion: tuple[FusionGroup, ...]
    findings: tuple[Finding, ...]
    fusion_keys: dict[int, str]


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
        if gained < MIN_SHARE * lost:
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
        if gained < MIN_SHARE * lost:
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


def _significant_drop(cmp: Comparison, field_name: str) -> bool:
    """Tell whether ``field_name`` of the step breakdown changed beyond noise."""
    base = cmp.base.steps.groupby(cmp.base.steps["step"].fillna(-1))[field_name].mean()
    new = cmp.new.steps.groupby(cmp.new.steps["step"].fillna(-1))[field_name].mean()
    test = compare_steps(base.to_numpy(), new.to_numpy(), cmp.thresholds.confidence)
    material = abs(new.mean() - base.mean()) >= MATERIAL_PCT / 100 * max(cmp.step.base_us, 1e-9)
    if test.p_value is None:
        return bool(material)
    return bool(material and test.p_value < cmp.thresholds.alpha)


def _ms(us: float) -> str:
    return f"{fmt.ms(us)} ms"


def _comm_growth(cmp: Comparison) -> tuple[list[str], dict]:
    grown = cmp.comm_types[(cmp.comm_types["delta_count"] > 1e-9)
                           | (cmp.comm_types["delta_exposed_us"] > 0)]
    parts, data = [], {}
    for row in grown.itertuples():
        parts.append(f"{row.comm_type} {row.delta_count:+g}/step ({_ms(row.delta_us)} time, "
                     f"{_ms(row.delta_exposed_us)} exposed)")
        data[row.comm_type] = {"delta_count": row.delta_count, "delta_us": row.delta_us,
                               "delta_exposed_us": row.delta_exposed_us}
    return parts, data


def _growth_kind(cmp: Comparison) -> str:
    """Say whether communication grew by transfer, by waiting, or by more operations."""
    table = cmp.comm_types
    if "base_transit_us" not in table or "new_transit_us" not in table:
        return "more operations" if (table["delta_count"] > 0).any() else "unknown"
    transit = (table["new_transit_us"] - table["base_transit_us"]).sum()
    waiting = (table["new_wait_us"] - table["base_wait_us"]).sum()
    if (table["delta_count"] > 0).any() and transit >= 0 and waiting <= transit:
        return "more operations (transfer time grew with the count)"
    return "waiting (wait/synchronization)" if waiting > transit else "transfer (transit time)"


def _faster_compute(cmp: Comparison, claimed: dict[int, str],
                    n: int = 3) -> tuple[list[str], dict]:
    ops = cmp.operators[(cmp.operators["category"] == "compute")
                        & ~cmp.operators["key_id"].isin(claimed)]
    by_family = ops.groupby("family")[["base_total_us", "new_total_us"]].sum()
    by_family["delta_us"] = by_family["new_total_us"] - by_family["base_total_us"]
    faster = by_family[by_family["delta_us"] < 0].sort_values("delta_us").head(n)
    parts = [f"{name} {_ms(row.delta_us)} "
             f"({row.delta_us / row.base_total_us * 100:+.1f}%)"
             for name, row in faster.iterrows() if row.base_total_us > 0]
    return parts, {name: float(row.delta_us) for name, row in faster.iterrows()}


def comm_hides_compute(cmp: Comparison, groups: list[FusionGroup],
                       claimed: dict[int, str]) -> Finding | None:
    """The compute gain eaten by communication growth, or None."""
    br = cmp.step.breakdown
    d_comp = br["computing"]["delta_us"]
    d_exposed = br["communication_not_overlapped"]["delta_us"]
    d_step = cmp.step.delta_us
    if not (d_comp < 0 and d_exposed > 0 and d_step > d_comp):
        return None
    # Compute gains that win clearly are not "hidden": the step must have got slower, or
    # communication growth must have eaten at least half of the compute gain.
    if d_step <= 0 and d_exposed < EATEN_SHARE * -d_comp:
        return None
    if not (_significant_drop(cmp, "computing")
            and _significant_drop(cmp, "communication_not_overlapped")):
        return None
    comm_parts, comm_data = _comm_growth(cmp)
    fast_parts, fast_data = _faster_compute(cmp, claimed)
    split = [g for g in groups if g.direction == "split"]
    cause = ""
    if split:
        cause = " The new run executes " + "; ".join(
            f"{g.fused_type} as {' + '.join(g.split_types[:2])} "
            f"({g.base_count - g.new_count:g} fused ops per step fewer)" for g in split) + "."
    detail = (f"Computing fell by {_ms(-d_comp)} per step"
              f"{' (' + ', '.join(fast_parts) + ')' if fast_parts else ''}, but exposed "
              f"communication rose by {_ms(d_exposed)}"
              f"{' (' + '; '.join(comm_parts) + ')' if comm_parts else ''}; net step change "
              f"{_ms(d_step)} ({cmp.step.delta_pct:+.1f}%). Growth is mainly "
              f"{_growth_kind(cmp)}.{cause}")
    severity = "high" if d_step > 0 else "medium"
    ops = cmp.operators
    like_for_like = ops[(ops["category"] == "compute") & ops["match_kind"].notna()
                        & ~ops["key_id"].isin(claimed)]["delta_us"].sum()
    if split:
        detail += (" Part of the computing drop is the communication the fused op ran inside "
                   f"a compute kernel; matched kernels alone changed by {_ms(like_for_like)}.")
    gain = -like_for_like if like_for_like < 0 else -d_comp
    title = (f"Communication growth hides a {_ms(gain)} compute gain: step "
             f"{cmp.step.delta_pct:+.1f}%")
    return Finding("comm-hides-compute", severity, title, detail, float(d_step),
                   {"delta_computing_us": d_comp, "delta_matched_kernels_us": float(like_for_like),
                    "delta_exposed_us": d_exposed,
                    "delta_step_us": d_step, "comm_growth": comm_data,
                    "faster_compute": fast_data, "growth_kind": _growth_kind(cmp)})


def _fusion_finding(group: FusionGroup) -> Finding:
    spec = group.spec
    split_text = " + ".join(group.split_types)
    if group.direction == "split":
        title = f"{group.fused_type} now runs split as {split_text}"
        detail = (f"Base ran {group.base_count:g} {group.fused_type} per step, new runs "
                  f"{group.new_count:g}; in their place new runs "
                  + ", ".join(f"{v:g} {k}" for k, v in group.split_counts.items())
                  + f" per step (paired by {group.paired_by}). Time {_ms(group.base_total_us)}"
                  f" → {_ms(group.new_total_us)} per step, of which {_ms(group.exposed_us)} "
                  f"exposed communication. Recommendation: enable MC2 fusion — {spec.enable}"
                  f" ({spec.api}; CANN ≥ {spec.min_cann}).")
        return Finding("mc2-split", "high" if group.delta_us > 0 else "medium", title, detail,
                       group.delta_us, {"fused_type": group.fused_type})
    title = f"{split_text} now runs fused as {group.fused_type}"
    detail = ("Base ran " + ", ".join(f"{v:g} {k}" for k, v in group.split_counts.items())
              + f" per step where new runs {group.new_count:g} {group.fused_type} "
              f"(paired by {group.paired_by}). Time {_ms(group.base_total_us)} → "
              f"{_ms(group.new_total_us)} per step.")
    return Finding("mc2-fused", "info" if group.delta_us <= 0 else "medium", title, detail,
                   group.delta_us, {"fused_type": group.fused_type})


def _operator_findings(cmp: Comparison, claimed: dict[int, str]) -> list[Finding]:
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
            top = ", ".join(f"{r.op_type} ({_ms(abs(r.delta_us))})"
                            for r in rows.head(3).itertuples())
            where = "only in new" if status == "added" else "only in base"
            findings.append(Finding(fid, "info", f"{len(rows)} operator key(s) {where}",
                                    f"Largest: {top}.", float(rows["delta_us"].sum())))
    return findings


def _short(shapes: str) -> str:
    if not shapes:
        return ""
    return f"[{shapes if len(shapes) <= 30 else shapes[:29] + '…'}]"


OUTLIER_Z = 3.5  # robust z-score (median ± 3.5·1.4826·MAD), Iglewicz and Hoaglin
MIN_RANKS = 4


def slow_ranks(cmp: Comparison) -> list[Finding]:
    """Ranks of the new run whose step, computing or exposed communication is an outlier."""
    ranks = cmp.ranks
    if len(ranks) < MIN_RANKS:
        return []
    findings = []
    for column, what in (("new_computing", "computing"),
                         ("new_communication_not_overlapped", "exposed communication"),
                         ("new_stage", "step time")):
        values = ranks[column].dropna()
        if len(values) < MIN_RANKS:
            continue
        median = values.median()
        mad = (values - median).abs().median() * 1.4826
        floor = max(mad, 0.02 * abs(median), 1e-9)  # identical ranks: only 2 % moves count
        z = (values - median) / floor
        for index in z[z > OUTLIER_Z].index:
            rank = int(ranks.loc[index, "rank"])
            excess = values[index] - median
            why, kind = _waiting_or_transfer(ranks, index)
            findings.append(Finding(
                "slow-rank", "medium", f"Rank {rank}: {what} is an outlier",
                f"Rank {rank} spends {_ms(values[index])} per step on {what}, "
                f"{_ms(excess)} above the median of {len(values)} ranks ({_ms(median)}). "
                f"{why}", float(excess),
                {"rank": rank, "metric": what, "value_us": float(values[index]),
                 "median_us": float(median), "communication_growth": kind}))
    return findings


def _waiting_or_transfer(ranks: pd.DataFrame, slow_index) -> tuple[str, str]:
    """Tell whether the other ranks' communication grew by waiting (for a straggler)."""
    needed = ("base_wait_us", "new_wait_us", "base_transit_us", "new_transit_us")
    if not all(c in ranks for c in needed):
        return "Without communication.json, wait and transfer cannot be told apart.", "unknown"
    others = ranks.drop(index=slow_index)
    wait = float((others["new_wait_us"] - others["base_wait_us"]).median())
    transit = float((others["new_transit_us"] - others["base_transit_us"]).median())
    if not (np.isfinite(wait) and np.isfinite(transit)):
        return "Wait and transfer times are missing for some ranks.", "unknown"
    if wait > max(transit, 0.0):
        return (f"The other ranks' communication wait grew by {_ms(wait)} per step (median) "
                f"against {_ms(transit)} of transfer: they are waiting for this straggler.",
                "waiting")
    return (f"The other ranks' transfer time changed by {_ms(transit)} and their wait by "
            f"{_ms(wait)} per step (median): communication grew by transfer, not by waiting "
            "for this rank.", "transfer")


SEVERITY_ORDER = {"high": 0, "medium": 1, "info": 2}


def analyse(cmp: Comparison, fusion_map: Path | None = None) -> Analysis:
    """Findings for a Comparison, most severe first."""
    groups, claimed = detect_fusion(cmp, fusion_map)
    findings = [_fusion_finding(g) for g in groups]
    hidden = comm_hides_compute(cmp, groups, claimed)
    if hidden:
        findings.insert(0, hidden)
    findings += _operator_findings(cmp, claimed)
    findings += slow_ranks(cmp)
    findings.sort(key=lambda f: SEVERITY_ORDER.get(f.severity, 3))
    return Analysis(tuple(groups), tuple(findings), claimed)
