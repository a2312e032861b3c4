"""Build the report model from the comparison and the analysis: typing and layout only.

No arithmetic happens here: every figure was computed by ``compare/`` or ``findings/``;
``build_report`` turns their frames into rows of the model, largest movers first as the
stages ordered them. ``build_candidates_summary`` lays out several pairwise reports that share one
baseline (it computes nothing they do not already hold), with the verdict across them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from types import MappingProxyType
from typing import Any, TypeVar

import pandas as pd

from .. import format as fmt
from ..compare import AttributeComparison, Comparison
from ..compare.memory import MemoryComparison
from ..findings import Analysis, Finding, FusionGroup
from ..findings.headline import Verdict
from ..schema import ATTRIBUTES, PIPES, Run
from .json_form import clean, frozen
from .model import (
    AllSteps,
    BandwidthChange,
    Breakdown,
    Candidate,
    CandidatesSummary,
    CategoryRow,
    CauseRow,
    CaveatRow,
    CollectiveLinkRow,
    CommParts,
    CommTypeRow,
    ComparableRow,
    ComponentPeak,
    ComputeRow,
    ComputeSplitResult,
    CopyChange,
    FamilyRow,
    Figure,
    FindingRow,
    FrameworkModuleRow,
    FrameworkOpRow,
    FrameworkRollupRow,
    FrameworkSummaryResult,
    FreeResult,
    FusionRow,
    GroupRow,
    HostFigures,
    Invocation,
    KernelShare,
    LaneSegment,
    Memory,
    MemorySeries,
    ModuleMemoryChange,
    Mover,
    OperatorMemoryChange,
    OperatorRow,
    PeakChange,
    RankRow,
    Report,
    ReportSettings,
    ScreenedStep,
    Side,
    SkewRow,
    StepLanes,
    StepResult,
    VerdictResult,
    Versions,
)

Row = TypeVar("Row")


def rows_of(frame: pd.DataFrame | None, row_type: type[Row]) -> tuple[Row, ...]:
    """Each row of ``frame`` as ``row_type``; a field the frame lacks is None."""
    names = [f.name for f in fields(row_type)]  # type: ignore[arg-type]
    if frame is None or frame.empty:
        return ()
    table = frame.reindex(columns=names).astype(object)
    table = table.where(table.notna(), None)
    return tuple(row_type(**{k: clean(v) for k, v in record.items()})
                 for record in table.to_dict("records"))


def _one(frame: pd.DataFrame | None, row_type: type[Row]) -> Row | None:
    rows = rows_of(frame, row_type)
    return rows[0] if rows else None


def _side(run: Run, steps: tuple[int, ...]) -> Side:
    meta = run.meta
    return Side(run.label, meta.path, meta.format, tuple(meta.ranks),
                Versions(meta.cann_version, meta.torch_npu_version), meta.device,
                meta.profiler_level, tuple(steps), run.step_source, tuple(run.warnings),
                meta.driver_version, meta.device_count, meta.collected, meta.host,
                meta.world_size, meta.parallel, meta.environment, frozen(meta.sources),
                tuple(run.ranks_without_kernels), meta.device_hint,
                frozen(meta.profiler_config), frozen(meta.hccl_algorithms),
                frozen(meta.detail_sources), meta.aicore_freq)


# Attributes whose values are whole numbers in report.json.
NUMBERS = ("block_dim", "mix_block_dim")
BOUND_FIELDS = {"base": "base_bound", "new": "new_bound", "base_ratio": "base_bound_ratio",
                "new_ratio": "new_bound_ratio", "pipe": "bound_pipe", "shift": "bound_shift"}


def _columns(table: pd.DataFrame) -> dict[str, list]:
    """Each column as JSON-ready Python values (None where missing), read once."""
    return {name: [None if value is None or value != value else value for value in values]
            for name, values in table.to_dict("list").items()}


def _whole(value: Any) -> Any:
    return int(value) if isinstance(value, str) and value.lstrip("-").isdigit() else value


def _side_attributes(table: dict[str, list], n: int, side: str,
                     not_recorded: Mapping[str, str | None]) -> list[Mapping[str, Any]]:
    """Per key, one side of ``operators[].attributes`` (``table``: ``_columns``).

    Its modal values, implementations, pipes, support and why nothing is recorded, read a
    column at a time; ``n`` keys.
    """
    none = [None] * n

    def column(name: str) -> list:
        return table.get(f"{side}_{name}", none)

    values = {a: column(a) for a in ATTRIBUTES if a != "implementation"}
    for attribute in NUMBERS:
        values[attribute] = [_whole(v) for v in values[attribute]]
    recorded = {a: (column(a), column(f"{a}_share"), column(f"{a}_count"),
                    column(f"{a}_kernels")) for a in ATTRIBUTES}
    pipes = {p: column(f"pipe_{p}") for p in PIPES}
    pmu = column("pmu_us")
    implementations = column("implementations")
    reasons = MappingProxyType(dict(not_recorded))
    out: list[Mapping[str, Any]] = []
    for i in range(n):  # one mapping per key: layout, as rows_of does per row
        support = {a: MappingProxyType({"share": share[i], "count": int(count[i]),
                                        "kernels": int(kernels[i])})
                   for a, (value, share, count, kernels) in recorded.items()
                   if value[i] is not None}
        out.append(MappingProxyType({
            **{a: column[i] for a, column in values.items()},
            "implementations": tuple(MappingProxyType({"name": str(n), "count": int(c)})
                                     for n, c in (implementations[i] or ())),
            "pipes": None if pmu[i] is None else MappingProxyType(
                {p: column[i] for p, column in pipes.items()}),
            "support": MappingProxyType(support), "not_recorded": reasons}))
    return out


def _attribute_rows(attributes: AttributeComparison) -> dict[int, tuple[Mapping, Mapping | None]]:
    """Per key_id recorded: its ``attributes`` and ``bound`` mappings (OperatorRow)."""
    if attributes.table.empty:
        return {}
    n, table = len(attributes.table), _columns(attributes.table)
    sides = {side: _side_attributes(table, n, side, attributes.not_recorded.get(side, {}))
             for side in ("base", "new")}
    bounds = {name: table.get(column, [None] * n) for name, column in BOUND_FIELDS.items()}
    changed = table["changed"]
    out: dict[int, tuple[Mapping, Mapping | None]] = {}
    for i, key in enumerate(attributes.table.index.tolist()):
        bound = None if bounds["pipe"][i] is None else MappingProxyType(
            {name: column[i] for name, column in bounds.items()})
        out[int(key)] = (MappingProxyType({"base": sides["base"][i], "new": sides["new"][i],
                                           "changed": tuple(changed[i])}), bound)
    return out


def _operators(cmp: Comparison, analysis: Analysis) -> tuple[OperatorRow, ...]:
    """The operator rows, each with its attributes and bound."""
    rows = rows_of(analysis.operators, OperatorRow)
    attributes = _attribute_rows(cmp.attributes)
    return tuple(replace(row, attributes=attributes[row.key_id][0],
                         bound=attributes[row.key_id][1])
                 if row.key_id in attributes else row for row in rows)


def _figure(values: Mapping[str, float]) -> Figure:
    return Figure(clean(values["base_us"]), clean(values["new_us"]), clean(values["delta_us"]))


def _step(cmp: Comparison) -> StepResult:
    s = cmp.step
    breakdown = Breakdown(**{f.name: _figure(s.breakdown[f.name]) for f in fields(Breakdown)})
    screened, outliers = (tuple(ScreenedStep(x.side, x.step, x.stage_us, x.median_us, x.z,
                                             x.reason) for x in steps)
                          for steps in (s.screened, s.outliers))
    every = s.all_steps
    all_steps = None if every is None else AllSteps(
        clean(every.base_us), clean(every.new_us), clean(every.delta_us),
        clean(every.delta_pct), clean(every.p_value), clean(every.ci_low),
        clean(every.ci_high), tuple(every.base_steps), tuple(every.new_steps),
        every.test, clean(every.shift_pct))
    return StepResult(clean(s.base_us), clean(s.new_us), clean(s.delta_us), clean(s.delta_pct),
                      clean(s.p_value), bool(s.significant),
                      "unknown" if s.significant is None else "tested",
                      clean(s.ci_low), clean(s.ci_high), s.status,
                      tuple(float(v) for v in s.base_samples),
                      tuple(float(v) for v in s.new_samples), breakdown,
                      float(s.threshold_pct), bool(s.below_threshold), s.gate_pct, s.gate,
                      tuple(s.base_steps), tuple(s.new_steps), screened, all_steps,
                      s.test, clean(s.shift_pct), outliers)


def _compute(analysis: Analysis) -> ComputeSplitResult:
    split = analysis.compute
    return ComputeSplitResult(clean(split.base_computing_us), clean(split.new_computing_us),
                              clean(split.delta_computing_us),
                              tuple(ComputeRow(name, label, clean(value))
                                    for name, label, value in split.rows()),
                              frozen(split.like_for_like_by_family),
                              analysis.compute_sentence)


def _fusion(group: FusionGroup) -> FusionRow:
    return FusionRow(group.fused_type, group.direction, tuple(group.split_types),
                     group.base_count, group.new_count, frozen(group.split_counts),
                     group.base_total_us, group.new_total_us, group.delta_us, group.exposed_us,
                     group.paired_by, group.spec.api, group.spec.min_cann, group.spec.enable)


def _finding(f: Finding) -> FindingRow:
    return FindingRow(f.id, f.severity, f.title, f.detail, float(f.delta_us), frozen(f.data))


def _verdict(v: Verdict | None) -> VerdictResult | None:
    if v is None:
        return None
    return VerdictResult(v.line, tuple(CauseRow(c.name, float(c.delta_us), c.share, c.detail,
                                                c.text) for c in v.causes),
                         tuple(CaveatRow(c.code, c.text) for c in v.caveats), v.memory)


def _kernels(value) -> tuple[KernelShare, ...]:
    return tuple(KernelShare(str(k["type"]), float(k["count"]), float(k["device_us"]))
                 for k in (value if isinstance(value, (list, tuple)) else ()))


def _text(value) -> str:
    value = clean(value)
    return "" if value is None else str(value)


def _framework(cmp: Comparison, analysis: Analysis) -> dict:
    """The Report's framework fields: typed rows, roll-ups, summary, notes; Nones without links."""
    framework = cmp.framework
    if framework is None:
        return {"framework_note": cmp.framework_note}
    ops = framework.operators
    rows = tuple(FrameworkOpRow(str(r["name"]), _text(r["input_shapes"]),
                                float(r["base_count"]), float(r["new_count"]),
                                clean(r["base_device_us"]), clean(r["new_device_us"]),
                                clean(r["delta_us"]), str(r["status"]),
                                _kernels(r["base_kernels"]), _kernels(r["new_kernels"]),
                                clean(r["instance_change_pct"]), clean(r["p_value"]),
                                bool(r["tested"]), clean(r["match_kind"]),
                                _text(r["base_input_shapes"]), _text(r["new_input_shapes"]))
                 for r in ops.to_dict("records"))
    modules = None if framework.modules is None else rows_of(framework.modules,
                                                             FrameworkModuleRow)
    s = framework.summary
    summary = FrameworkSummaryResult(
        s.attributed_base_us, s.attributed_new_us, s.delta_attributed_us,
        clean(s.step_delta_us), clean(s.outside_us), framework.changed_count,
        framework.key_count, analysis.framework_sentence)
    return {"framework_ops": rows, "framework_modules": modules,
            "framework_notes": tuple(framework.notes), "framework_note": cmp.framework_note,
            "framework_rollup": rows_of(framework.rollup, FrameworkRollupRow),
            "framework_summary": summary}


def _series(rank: int | None, frame: pd.DataFrame,
            measure: str = "reserved_mb") -> MemorySeries:
    if rank is None:
        return MemorySeries()
    return MemorySeries(int(rank), tuple(frame["time_ms"].tolist()),
                        **{measure: tuple(frame[measure].tolist())})


def memory_section(memory: MemoryComparison, grown: Finding | None = None,
                   headline: str | None = None) -> Memory:
    """The report's memory section: the comparison's tables typed.

    ``grown`` is the ``memory-growth`` finding and ``headline`` the memory sentence of the
    headline (findings stage), None when not raised.
    """
    growth = None if grown is None else {"id": grown.id, "severity": grown.severity,
                                         "title": grown.title, "detail": grown.detail,
                                         "delta_mb": grown.data["delta_mb"]}
    return Memory(
        threshold_pct=memory.threshold_pct, base_ranks=memory.base_ranks,
        new_ranks=memory.new_ranks,
        peak_reserved=_one(memory.peaks[(memory.peaks["measure"] == "reserved").to_numpy()],
                           PeakChange),
        peak_allocated=_one(memory.peaks[(memory.peaks["measure"] == "allocated").to_numpy()],
                            PeakChange),
        components=rows_of(memory.components, ComponentPeak),
        operators=rows_of(memory.operators, OperatorMemoryChange),
        operators_compared=len(memory.operator_table),
        operators_changed=int((memory.operator_table["delta_mb"].abs() > 1e-9).sum()),
        modules=rows_of(memory.modules, ModuleMemoryChange),
        timeline_component=memory.timeline_component,
        base_timeline=_series(memory.base_timeline_rank, memory.base_timeline),
        new_timeline=_series(memory.new_timeline_rank, memory.new_timeline),
        allocated_timeline_component=memory.allocated_timeline_component,
        base_allocated_timeline=_series(memory.base_allocated_timeline_rank,
                                        memory.base_allocated_timeline, "allocated_mb"),
        new_allocated_timeline=_series(memory.new_allocated_timeline_rank,
                                       memory.new_allocated_timeline, "allocated_mb"),
        headline=headline, growth=growth, warnings=memory.notes,
        copy_units=memory.copy_units, copies=rows_of(memory.copies, CopyChange),
        copies_total=_one(memory.copies_total, CopyChange),
        hbm=rows_of(memory.hbm, BandwidthChange))


def _memory(memory: MemoryComparison | None, analysis: Analysis) -> Memory | None:
    if memory is None:
        return None
    grown = next((f for f in analysis.findings if f.id == "memory-growth"), None)
    return memory_section(memory, grown, analysis.memory_headline)


def _parts(row: CommTypeRow, frame_row: Mapping[str, Any]) -> CommTypeRow:
    """``row`` with its split per source (tasks, communication.json) and algorithms."""
    def number(name: str) -> float | None:
        return clean(frame_row.get(name))

    parts: dict[str, dict[str, CommParts]] = {}
    for side in ("base", "new"):
        if number(f"{side}_task_elapsed_us") is not None:
            parts.setdefault("hccl_tasks", {})[side] = CommParts(
                number(f"{side}_task_elapsed_us"), number(f"{side}_task_transfer_us"),
                number(f"{side}_task_wait_us"), number(f"{side}_task_idle_us"),
                number(f"{side}_task_link_busy_us"), number(f"{side}_task_link_mb"))
        json = f"{side}_json_" if f"{side}_json_wait_us" in frame_row else f"{side}_"
        if number(f"{json}wait_us") is not None:
            parts.setdefault("communication.json", {})[side] = CommParts(
                number(f"{side}_elapse_us"), number(f"{json}transit_us"),
                number(f"{json}wait_us"), number(f"{json}idle_us"), None,
                number(f"{side}_transit_mb"))
    return replace(row, parts=frozen(parts))


def _communication(cmp: Comparison) -> tuple[CommTypeRow, ...]:
    rows = rows_of(cmp.comm_types, CommTypeRow)
    if not rows:
        return rows
    records = cmp.comm_types.to_dict("records")
    return tuple(_parts(row, record) for row, record in zip(rows, records))


def _figures(values: Mapping[str, float]) -> HostFigures:
    return HostFigures(**{f.name: clean(values.get(f.name)) for f in fields(HostFigures)})


def _free(cmp: Comparison) -> FreeResult | None:
    host = cmp.host
    if host is None:
        return None
    share = clean(host.host_bound_share)
    t = cmp.thresholds
    bound = share is not None and share >= t.host_bound_share
    return FreeResult(_figures(host.base), _figures(host.new), share, bound,
                      tuple(f"{s} {b} → {n}" for s, b, n in host.settings),
                      frozen({"base": host.launches[0], "new": host.launches[1]}))


def _lanes(cmp: Comparison) -> tuple[StepLanes, ...]:
    """Both runs' median step of one rank (the lowest both have, else each its lowest)."""
    both = sorted(set(cmp.base.step_lanes) & set(cmp.new.step_lanes))
    out = []
    for side, run in (("base", cmp.base), ("new", cmp.new)):
        if not run.step_lanes:
            continue
        rank = both[0] if both else min(run.step_lanes)
        frame = run.step_lanes[rank]
        steps = frame["step"].dropna()
        segments = tuple(LaneSegment(str(lane), float(a), float(b), str(label or ""))
                         for lane, a, b, label in zip(frame["lane"], frame["start_us"],
                                                      frame["end_us"], frame["label"]))
        out.append(StepLanes(side, int(rank), int(steps.iloc[0]) if len(steps) else None,
                             segments))
    return tuple(out)


def _non_compute(cmp: Comparison) -> dict:
    return {"collective_links": rows_of(cmp.collective_links, CollectiveLinkRow),
            "collectives_skew": rows_of(cmp.skew, SkewRow), "skew_note": cmp.skew_note,
            "free": _free(cmp), "step_lanes": _lanes(cmp)}


def build_report(cmp: Comparison, analysis: Analysis,
                 invocation: Invocation | None = None) -> Report:
    """The Report of a Comparison and its Analysis.

    ``invocation`` (command line and date) is shown in the report's provenance; leave it
    None for a report that depends on the profiles alone.
    """
    t = cmp.thresholds
    if invocation is not None:
        invocation = invocation.dated_by_profiles([cmp.base.meta.collected,
                                                   cmp.new.meta.collected])
    return Report(
        headline=analysis.headline, verdict=_verdict(analysis.verdict),
        rank_notes=analysis.rank_notes,
        skew_notes=analysis.skew_notes,
        base=_side(cmp.base, cmp.base_steps), new=_side(cmp.new, cmp.new_steps),
        step=_step(cmp), operators=_operators(cmp, analysis),
        categories=rows_of(cmp.categories, CategoryRow),
        communication=_communication(cmp),
        fusion=tuple(_fusion(g) for g in analysis.fusion),
        findings=tuple(_finding(f) for f in analysis.findings),
        notes=tuple(cmp.warnings), thresholds=ReportSettings(t.alpha, t.threshold_pct,
                                                             t.confidence),
        top_n=t.top_n, ranks=rows_of(cmp.ranks, RankRow),
        comm_groups=rows_of(cmp.groups, GroupRow), memory=_memory(cmp.memory, analysis),
        compute=_compute(analysis), families=rows_of(cmp.families, FamilyRow),
        invocation=invocation, **_framework(cmp, analysis),
        comparability=tuple(ComparableRow(c.what, c.base, c.new, c.source)
                            for c in cmp.comparability), **_non_compute(cmp))


# --------------------------------------------------------------------------- several candidates


def fusion_state(report: Report) -> str:
    """MC2 fusion in one phrase: which fused ops split or fused, or ``unchanged``."""
    if not report.fusion:
        return "unchanged"
    return "; ".join(f"{g.fused_type} {'split' if g.direction == 'split' else 'fused'}"
                     for g in report.fusion)


def _candidate(report: Report, directory: str, gate_failed: bool | None) -> Candidate:
    memory = report.memory
    peak = memory.peak_reserved if memory is not None else None
    breakdown = report.step.breakdown
    return Candidate(report.new.label, report.new.path, directory, report.step,
                     breakdown.computing, breakdown.communication_not_overlapped,
                     breakdown.free, fusion_state(report), report.findings,
                     peak.new_mb if peak else None, peak.delta_pct if peak else None,
                     gate_failed)


def _movers(reports: Sequence[Report], limit: int) -> tuple[Mover, ...]:
    """The operator keys that moved most in any candidate, largest |Δ| first."""
    keys: dict[tuple[str, str], dict] = {}
    for column, report in enumerate(reports):
        for op in report.operators:
            entry = keys.setdefault((op.op_type, op.input_shapes),
                                    {"base": op.base_total_us or None, "delta": {},
                                     "status": {}, "below": {}, "tested": {}})
            entry["delta"][column] = op.delta_us
            claimed = op.fusion or op.base_claimed or op.new_claimed
            entry["status"][column] = "mc2" if claimed else op.status
            entry["below"][column] = bool(op.below_threshold)
            entry["tested"][column] = bool(op.tested)
    ranked = sorted(keys.items(), key=lambda kv: (-max(abs(d or 0) for d in
                                                       kv[1]["delta"].values()), kv[0]))
    n = len(reports)
    return tuple(Mover(op_type, shapes, entry["base"],
                       tuple(entry["delta"].get(i) for i in range(n)),
                       tuple(entry["status"].get(i) for i in range(n)),
                       tuple(entry["below"].get(i, False) for i in range(n)),
                       tuple(entry["tested"].get(i, False) for i in range(n)))
                 for (op_type, shapes), entry in ranked[:limit])


def _describe(candidate: Candidate) -> str:
    step = candidate.step
    if step.status == "regressed":
        why = f", {candidate.fusion}" if candidate.fusion != "unchanged" else ""
        return f"{candidate.label} is {abs(step.change_pct or 0.0):.1f}% slower{why}"
    if step.status == "improved":
        return f"{candidate.label} is {abs(step.change_pct or 0.0):.1f}% faster"
    return f"{candidate.label} is unchanged ({fmt.pct(step.change_pct)})"


def verdict(base_label: str, candidates: tuple[Candidate, ...]) -> str:
    """One sentence across candidates: which are not slower than the baseline, and why not."""
    fine = [c for c in candidates if c.step.status != "regressed"]
    slow = [c for c in candidates if c.step.status == "regressed"]
    if not slow:
        return (f"No candidate is slower than {base_label}: "
                + "; ".join(_describe(c) for c in candidates) + ".")
    if not fine:
        return (f"Every candidate is slower than {base_label}: "
                + "; ".join(_describe(c) for c in candidates) + ".")
    names = " and ".join(c.label for c in fine)
    return (f"Only {names} {'is' if len(fine) == 1 else 'are'} not slower than {base_label}: "
            + "; ".join(_describe(c) for c in slow + fine) + ".")


def build_candidates_summary(reports: Sequence[Report], directories: Sequence[str],
                             gate_failed: Sequence[bool | None],
                             gate_pct: float | None = None) -> CandidatesSummary:
    """The CandidatesSummary of pairwise reports that share one baseline (in candidate order).

    The operator × candidate table lists the first reports' ``top_n`` (``--top``) movers.
    """
    if not reports:
        raise ValueError("a summary needs at least one candidate report")
    candidates = tuple(_candidate(r, d, g) for r, d, g in zip(reports, directories,
                                                                gate_failed))
    base = reports[0].base
    return CandidatesSummary(base, candidates, verdict(base.label, candidates),
                   _movers(reports, reports[0].top_n), reports[0].thresholds, gate_pct)
