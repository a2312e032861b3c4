"""Report stage: one typed, frozen model of the result that every renderer reads.

Markdown, report.json, ranks.csv and the charts all render this model and nothing else,
so they cannot disagree. Every part is a frozen dataclass; ``Report.to_dict()`` is
report.json (schema ``cann-diff/1``; every key is described in
``cann_diff/data/report.schema.json``), derived from the fields by ``to_json``.
Operator figures are per step and per rank: ``base_count`` ops per step,
``base_total_us`` µs per step; ``base_instances`` is the raw count over the whole run.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, is_dataclass
from datetime import datetime, timezone
from importlib import metadata, resources
from types import MappingProxyType
from typing import Any, TypeVar

import numpy as np
import pandas as pd

from .compare import Comparison
from .compare.families import compare_families
from .compare.memory import MemoryComparison
from .compare.steps import ScreenedStep
from .findings import Analysis, FusionGroup
from .findings.compute_split import mc2_part
from .findings.headline import headline
from .schema import Note, Run

SCHEMA = "cann-diff/1"


def json_schema() -> dict:
    """The JSON Schema (2020-12) of report.json: ``cann_diff/data/report.schema.json``."""
    text = resources.files("cann_diff").joinpath("data/report.schema.json").read_text("utf-8")
    return json.loads(text)


def clean(value: Any) -> Any:
    """Make a scalar JSON-safe: numpy scalars to Python, NaN/inf/NA to None."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return float(value) if math.isfinite(float(value)) else None
    if value is None or isinstance(value, (str, int)):
        return value
    try:
        return None if pd.isna(value) else value
    except (TypeError, ValueError):
        return value


def to_json(value: Any) -> Any:
    """A model object as JSON-ready data: dataclasses by field order, mappings, sequences."""
    if hasattr(value, "to_dict") and not isinstance(value, Report):
        return to_json(value.to_dict())
    if is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, Mapping):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v) for v in value]
    return clean(value)


def frozen(mapping: Mapping | None) -> Mapping:
    """A read-only view of a mapping, nested mappings included."""
    return MappingProxyType({k: frozen(v) if isinstance(v, Mapping) else v
                             for k, v in (mapping or {}).items()})


Row = TypeVar("Row")


def rows_of(frame: pd.DataFrame, row_type: type[Row]) -> tuple[Row, ...]:
    """Each row of ``frame`` as ``row_type``; a field the frame lacks is None."""
    names = [f.name for f in fields(row_type)]  # type: ignore[arg-type]
    if frame is None or frame.empty:
        return ()
    table = frame.reindex(columns=names).astype(object)
    table = table.where(table.notna(), None)
    return tuple(row_type(**{k: clean(v) for k, v in record.items()})
                 for record in table.to_dict("records"))


# --------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class Versions:
    """Software versions a profile records; None when it does not."""

    cann: str | None
    torch_npu: str | None


@dataclass(frozen=True)
class Side:
    """One run as the report names it: where it came from and what it holds.

    ``driver`` is the driver version as the profile records it (msprof ``drvVersion`` is
    a number, kept undecoded); ``collected`` the end of collection (ISO 8601; ``Z`` = UTC,
    no zone = the host's local time from a directory name); ``device_count`` the distinct
    devices recorded; ``world_size``, ``parallel`` (``TP 2 · PP 2 · DP 2 …``) and
    ``environment`` (the environment variables that were set) come from
    profiler_metadata.json. ``sources`` maps each provenance fact to the file it was read
    from or, when its value is None, to the file that would record it.
    """

    label: str
    path: str
    format: str
    ranks: tuple[int, ...]
    versions: Versions
    device: str | None
    profiler_level: str | None
    steps: tuple[int, ...]
    step_source: str
    warnings: tuple[str, ...]
    driver: str | None = None
    device_count: int | None = None
    collected: str | None = None
    host: str | None = None
    world_size: int | None = None
    parallel: str | None = None
    environment: str | None = None
    sources: Mapping[str, str] = field(default_factory=dict)
    ranks_without_kernels: tuple[int, ...] = ()


@dataclass(frozen=True)
class Figure:
    """One step-breakdown figure, µs per step (mean over steps and ranks)."""

    base_us: float | None
    new_us: float | None
    delta_us: float | None


@dataclass(frozen=True)
class Breakdown:
    """The step_trace_time fields, base vs new."""

    computing: Figure
    communication_not_overlapped: Figure
    overlapped: Figure
    communication: Figure
    free: Figure
    bubble: Figure
    preparing: Figure

    def get(self, name: str) -> Figure:
        """The figure called ``name`` (a step_trace_time field)."""
        return getattr(self, name)


@dataclass(frozen=True)
class StepResult:
    """Step time (Stage) base vs new, with its test.

    ``significance`` is ``unknown`` or ``tested``, so that a gate never mistakes "no test
    possible" for "no change".
    """

    base_us: float | None
    new_us: float | None
    delta_us: float | None
    delta_pct: float | None
    p_value: float | None
    significant: bool
    significance: str
    ci_low: float | None
    ci_high: float | None
    status: str
    base_samples: tuple[float, ...]
    new_samples: tuple[float, ...]
    breakdown: Breakdown
    threshold_pct: float = 2.0
    below_threshold: bool = False
    gate_pct: float | None = None
    gate: bool | None = None
    base_steps: tuple[int, ...] = ()
    new_steps: tuple[int, ...] = ()
    screened: tuple[ScreenedStep, ...] = ()
    all_steps: AllSteps | None = None


@dataclass(frozen=True)
class AllSteps:
    """The step figures over every step, before screening (µs per step)."""

    base_us: float | None
    new_us: float | None
    delta_us: float | None
    delta_pct: float | None
    p_value: float | None
    ci_low: float | None
    ci_high: float | None
    base_steps: tuple[int, ...]
    new_steps: tuple[int, ...]


@dataclass(frozen=True)
class ComputeRow:
    """One part of Δ Computing (µs per step); the parts sum to Δ Computing."""

    part: str
    label: str
    delta_us: float | None


@dataclass(frozen=True)
class ComputeSplitResult:
    """Δ Computing (step_trace_time) split into like-for-like, changed work, MC2, rest."""

    base_computing_us: float | None
    new_computing_us: float | None
    delta_computing_us: float | None
    rows: tuple[ComputeRow, ...]
    like_for_like_by_family: Mapping[str, float]


@dataclass(frozen=True)
class OperatorRow:
    """One operator key (type + input shapes) of either run, µs per step and rank."""

    key_id: int
    op_type: str
    base_op_type: str | None
    new_op_type: str | None
    family: str
    input_shapes: str
    category: str
    match_kind: str | None
    base_count: float
    new_count: float
    base_instances: int
    new_instances: int
    base_total_us: float
    new_total_us: float
    delta_us: float
    delta_pct: float | None
    base_mean_us: float | None
    new_mean_us: float | None
    base_median_us: float | None
    new_median_us: float | None
    base_p95_us: float | None
    new_p95_us: float | None
    p_value: float | None
    ci_low: float | None
    ci_high: float | None
    significant: bool
    status: str
    fusion: str | None
    base_input_shapes: str | None = None
    new_input_shapes: str | None = None
    match_shapes: str | None = None
    count_effect_us: float | None = None
    instance_effect_us: float | None = None
    instance_change_pct: float | None = None
    count_changed: bool = False
    same_shape: bool = False
    below_threshold: bool = False
    ci_note: str | None = None
    base_claimed: float | None = None
    new_claimed: float | None = None
    mc2_us: float | None = None


@dataclass(frozen=True)
class CategoryRow:
    """Kernel count and time per step of one category, base vs new."""

    category: str
    base_count: float
    new_count: float
    base_total_us: float
    new_total_us: float
    delta_us: float


@dataclass(frozen=True)
class CommTypeRow:
    """One communication type, µs per step and rank.

    Transit and wait come from communication.json (None when a run has none).
    """

    comm_type: str
    base_count: float
    new_count: float
    base_total_us: float
    new_total_us: float
    base_exposed_us: float | None
    new_exposed_us: float | None
    base_elapse_us: float | None
    new_elapse_us: float | None
    base_transit_us: float | None
    new_transit_us: float | None
    base_wait_us: float | None
    new_wait_us: float | None
    base_synchronization_us: float | None
    new_synchronization_us: float | None
    base_transit_mb: float | None
    new_transit_mb: float | None
    delta_count: float
    delta_us: float
    delta_exposed_us: float | None
    base_idle_us: float | None = None
    new_idle_us: float | None = None


@dataclass(frozen=True)
class FusionRow:
    """An MC2 fused op on one side matched to its split equivalent on the other."""

    fused_type: str
    direction: str
    split_types: tuple[str, ...]
    base_count: float
    new_count: float
    split_counts: Mapping[str, float]
    base_total_us: float
    new_total_us: float
    delta_us: float
    exposed_us: float
    paired_by: str
    api: str | None
    min_cann: str | None
    enable: str | None


@dataclass(frozen=True)
class FindingRow:
    """One verdict with the figures behind it (``data``)."""

    id: str
    severity: str
    title: str
    detail: str
    delta_us: float
    data: Mapping[str, Any]


@dataclass(frozen=True)
class RankRow:
    """One rank's step breakdown and communication, µs per step, base vs new."""

    rank: int
    base_stage: float | None
    base_computing: float | None
    base_communication_not_overlapped: float | None
    base_free: float | None
    base_wait_us: float | None
    base_transit_us: float | None
    new_stage: float | None
    new_computing: float | None
    new_communication_not_overlapped: float | None
    new_free: float | None
    new_wait_us: float | None
    new_transit_us: float | None
    delta_stage_us: float | None


@dataclass(frozen=True)
class GroupRow:
    """One communication group, µs per step and rank; bandwidth per link type in GB/s."""

    group: str
    base_elapse_us: float | None
    base_transit_us: float | None
    base_wait_us: float | None
    base_synchronization_us: float | None
    base_ops: float | None
    base_ranks: float | None
    base_wait_ratio: float | None
    base_hccs_gbps: float | None
    base_rdma_gbps: float | None
    base_pcie_gbps: float | None
    base_sio_gbps: float | None
    base_sdma_gbps: float | None
    new_elapse_us: float | None
    new_transit_us: float | None
    new_wait_us: float | None
    new_synchronization_us: float | None
    new_ops: float | None
    new_ranks: float | None
    new_wait_ratio: float | None
    new_hccs_gbps: float | None
    new_rdma_gbps: float | None
    new_pcie_gbps: float | None
    new_sio_gbps: float | None
    new_sdma_gbps: float | None
    base_group: str | None = None
    new_group: str | None = None
    paired_by: str | None = None
    base_idle_us: float | None = None
    new_idle_us: float | None = None


@dataclass(frozen=True)
class FamilyRow:
    """Kernel time of one compute family (``compare/families.py``), per step and rank."""

    family: str
    base_count: float
    new_count: float
    base_total_us: float
    new_total_us: float
    delta_us: float
    delta_pct: float | None
    base_share_pct: float | None
    new_share_pct: float | None


@dataclass(frozen=True)
class Invocation:
    """How the report was asked for: the command line and when (the CLI fills it).

    Library users leave it None, so a report built twice from the same profiles is the
    same report (the golden files rely on it).
    """

    command: str
    date: str

    @classmethod
    def now(cls, command: str) -> Invocation:
        """The invocation of ``command`` now (local time, ISO 8601, seconds).

        ``SOURCE_DATE_EPOCH`` (the reproducible-builds convention), when set, is the time
        instead, so two runs on the same profiles write byte-identical reports.
        """
        epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
        when = (datetime.fromtimestamp(int(epoch), tz=timezone.utc) if epoch.isdigit()
                else datetime.now().astimezone())
        return cls(command, when.isoformat(timespec="seconds"))


def tool_version() -> str | None:
    """The installed cann-diff version (package metadata); None when not installed."""
    try:
        return metadata.version("cann-diff")
    except metadata.PackageNotFoundError:
        return None


@dataclass(frozen=True)
class Tool:
    """The program that made the report."""

    name: str = "cann-diff"
    version: str | None = field(default_factory=tool_version)


@dataclass(frozen=True)
class KernelShare:
    """One kernel type under a framework operator: instances and device µs per step."""

    type: str
    count: float
    device_us: float


@dataclass(frozen=True)
class FrameworkOpRow:
    """One framework operator (``aten::…``) of either run, per step and rank (µs)."""

    name: str
    input_shapes: str
    base_count: float
    new_count: float
    base_device_us: float | None
    new_device_us: float | None
    delta_us: float | None
    status: str
    base_kernels: tuple[KernelShare, ...]
    new_kernels: tuple[KernelShare, ...]


@dataclass(frozen=True)
class FrameworkModuleRow:
    """One nn.Module path of either run, per step and rank (µs)."""

    module: str
    base_count: float
    new_count: float
    base_device_us: float | None
    new_device_us: float | None
    delta_us: float | None
    status: str


@dataclass(frozen=True)
class ReportSettings:
    """The thresholds the verdicts were made with."""

    alpha: float
    threshold_pct: float
    confidence: float


@dataclass(frozen=True)
class Report:
    """Everything a renderer needs; ``notes`` are the caveats, each with a stable code."""

    headline: str
    base: Side
    new: Side
    step: StepResult
    operators: tuple[OperatorRow, ...]
    categories: tuple[CategoryRow, ...]
    communication: tuple[CommTypeRow, ...]
    fusion: tuple[FusionRow, ...]
    findings: tuple[FindingRow, ...]
    notes: tuple[Note, ...]
    thresholds: ReportSettings
    top_n: int
    ranks: tuple[RankRow, ...] = ()
    comm_groups: tuple[GroupRow, ...] = ()
    memory: MemoryComparison | None = None
    compute: ComputeSplitResult | None = None
    families: tuple[FamilyRow, ...] = ()
    tool: Tool = field(default_factory=Tool)
    invocation: Invocation | None = None
    framework_ops: tuple[FrameworkOpRow, ...] | None = None
    framework_modules: tuple[FrameworkModuleRow, ...] | None = None
    framework_notes: tuple[str, ...] = ()
    framework_note: str | None = None

    @property
    def warnings(self) -> tuple[str, ...]:
        """The caveats' sentences, in order."""
        return tuple(note.text for note in self.notes)

    def to_dict(self) -> dict:
        """report.json content."""
        data = {f.name: to_json(getattr(self, f.name)) for f in fields(self)
                if f.name not in ("notes", "top_n")}
        data["warnings"] = list(self.warnings)
        order = ("tool", "invocation", "headline", "base", "new", "step", "operators",
                 "categories", "families", "communication", "fusion", "findings", "warnings",
                 "thresholds", "ranks", "comm_groups", "memory", "compute")
        rest = [key for key in data if key not in order]  # a field added later still shows
        return {"schema": SCHEMA, **{key: data[key] for key in (*order, *rest)}}


# --------------------------------------------------------------------------- building


def _side(run: Run, steps: tuple[int, ...]) -> Side:
    meta = run.meta
    return Side(run.label, meta.path, meta.format, tuple(meta.ranks),
                Versions(meta.cann_version, meta.torch_npu_version), meta.device,
                meta.profiler_level, tuple(steps), run.step_source, tuple(run.warnings),
                meta.driver_version, meta.device_count, meta.collected, meta.host,
                meta.world_size, meta.parallel, meta.environment, frozen(meta.sources),
                tuple(run.ranks_without_kernels))


def _figure(values: Mapping[str, float]) -> Figure:
    return Figure(clean(values["base_us"]), clean(values["new_us"]), clean(values["delta_us"]))


def _step(cmp: Comparison) -> StepResult:
    s = cmp.step
    breakdown = Breakdown(**{f.name: _figure(s.breakdown[f.name]) for f in fields(Breakdown)})
    screened = tuple(s.screened)  # compare's frozen ScreenedStep, shown as it is
    every = s.all_steps
    all_steps = None if every is None else AllSteps(
        clean(every.base_us), clean(every.new_us), clean(every.delta_us),
        clean(every.delta_pct), clean(every.p_value), clean(every.ci_low),
        clean(every.ci_high), tuple(every.base_steps), tuple(every.new_steps))
    return StepResult(clean(s.base_us), clean(s.new_us), clean(s.delta_us), clean(s.delta_pct),
                      clean(s.p_value), bool(s.significant),
                      "unknown" if s.significant is None else "tested",
                      clean(s.ci_low), clean(s.ci_high), s.status,
                      tuple(float(v) for v in s.base_samples),
                      tuple(float(v) for v in s.new_samples), breakdown,
                      float(s.threshold_pct), bool(s.below_threshold), s.gate_pct, s.gate,
                      tuple(s.base_steps), tuple(s.new_steps), screened, all_steps)


def _compute(analysis: Analysis) -> ComputeSplitResult | None:
    split = getattr(analysis, "compute", None)
    if split is None:
        return None
    return ComputeSplitResult(clean(split.base_computing_us), clean(split.new_computing_us),
                              clean(split.delta_computing_us),
                              tuple(ComputeRow(name, label, clean(value))
                                    for name, label, value in split.rows()),
                              frozen(split.like_for_like_by_family))


def _fusion(group: FusionGroup) -> FusionRow:
    return FusionRow(group.fused_type, group.direction, tuple(group.split_types),
                     group.base_count, group.new_count, frozen(group.split_counts),
                     group.base_total_us, group.new_total_us, group.delta_us, group.exposed_us,
                     group.paired_by, group.spec.api, group.spec.min_cann, group.spec.enable)


def _operators(cmp: Comparison, analysis: Analysis) -> tuple[OperatorRow, ...]:
    ops = cmp.operators.copy()
    fusion = ops["key_id"].map(analysis.fusion_keys)
    ops["fusion"] = fusion.astype(object).where(fusion.notna(), None)
    base_claims, new_claims = analysis.fusion_claims
    ops["base_claimed"] = ops["key_id"].map(base_claims)
    ops["new_claimed"] = ops["key_id"].map(new_claims)
    ops["mc2_us"] = mc2_part(ops, analysis.fusion)
    ops = ops.reindex(ops["delta_us"].abs().sort_values(ascending=False, kind="stable").index)
    return rows_of(ops, OperatorRow)


def _kernels(value) -> tuple[KernelShare, ...]:
    return tuple(KernelShare(str(k["type"]), float(k["count"]), float(k["device_us"]))
                 for k in (value if isinstance(value, (list, tuple)) else ()))


def _framework(framework) -> tuple:
    """Typed framework-operator and module rows (compare/framework.py), or Nones."""
    if framework is None:
        return None, None, ()
    ops = framework.operators
    rows = tuple(FrameworkOpRow(str(r["name"]), str(r["input_shapes"] or ""),
                                float(r["base_count"]), float(r["new_count"]),
                                clean(r["base_device_us"]), clean(r["new_device_us"]),
                                clean(r["delta_us"]), str(r["status"]),
                                _kernels(r["base_kernels"]), _kernels(r["new_kernels"]))
                 for r in ops.to_dict("records"))
    modules = None if framework.modules is None else rows_of(framework.modules,
                                                             FrameworkModuleRow)
    return rows, modules, tuple(n.text for n in framework.notes)


def build_report(cmp: Comparison, analysis: Analysis, top_n: int = 15,
                 memory: MemoryComparison | None = None,
                 invocation: Invocation | None = None,
                 framework=None, framework_note: str = "") -> Report:
    """Assemble the Report from a Comparison, its Analysis and the memory comparison.

    ``invocation`` (command line and date) is shown in the report's provenance; leave it
    None for a report that depends on the profiles alone.
    """
    findings = tuple(FindingRow(f.id, f.severity, f.title, f.detail, float(f.delta_us),
                                frozen(f.data)) for f in analysis.findings)
    t = cmp.settings
    framework_ops, framework_modules, framework_notes = _framework(framework)
    text = headline(cmp, analysis)
    if memory is not None and memory.headline:
        text = f"{text} {memory.headline}"
    return Report(
        headline=text,
        base=_side(cmp.base, cmp.base_steps), new=_side(cmp.new, cmp.new_steps),
        step=_step(cmp), operators=_operators(cmp, analysis),
        categories=rows_of(cmp.categories, CategoryRow),
        communication=rows_of(cmp.comm_types, CommTypeRow),
        fusion=tuple(_fusion(g) for g in analysis.fusion), findings=findings,
        notes=tuple(cmp.warnings), thresholds=ReportSettings(t.alpha, t.threshold_pct,
                                                             t.confidence),
        top_n=top_n, ranks=rows_of(cmp.ranks, RankRow),
        comm_groups=rows_of(cmp.groups, GroupRow), memory=memory,
        compute=_compute(analysis),
        families=rows_of(compare_families(cmp.operators), FamilyRow), invocation=invocation,
        framework_ops=framework_ops, framework_modules=framework_modules,
        framework_notes=framework_notes, framework_note=framework_note or None)
