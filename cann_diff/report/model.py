"""The report model: frozen types that every renderer reads, and nothing else.

Markdown, HTML, report.json, ranks.csv and the charts all render these types, so they
cannot disagree. Every part is a frozen dataclass built by ``build.py``;
``Report.to_dict()`` is report.json (schema ``cann-diff/1``; every key is described in
``cann_diff/data/report.schema.json``), derived from the fields by ``json_form.to_json``.
Operator figures are per step and per rank: ``base_count`` ops per step,
``base_total_us`` µs per step; ``base_instances`` is the raw count over the whole run.
The memory section's types, the copies' and the several-candidates summary's are here
too. Caveats are ``Note``s (``schema.py``); report.json holds their sentences.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from importlib import metadata
from typing import Any

from ..schema import Note
from .json_form import SCHEMA, fields_json, to_json


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
    from or, when its value is None, to the file that would record it. ``device_hint`` is
    the chip class the kernel table's PMU columns imply (not the device);
    ``profiler_config`` the profiler settings as text; ``hccl_algorithms`` the algorithm
    per communication type; ``detail_sources`` the files these came from.
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
    warnings: tuple[Note, ...]
    driver: str | None = None
    device_count: int | None = None
    collected: str | None = None
    host: str | None = None
    world_size: int | None = None
    parallel: str | None = None
    environment: str | None = None
    sources: Mapping[str, str] = field(default_factory=dict)
    ranks_without_kernels: tuple[int, ...] = ()
    device_hint: str | None = None
    profiler_config: Mapping[str, str] = field(default_factory=dict)
    hccl_algorithms: Mapping[str, str] = field(default_factory=dict)
    detail_sources: Mapping[str, str] = field(default_factory=dict)
    # The AI Core frequency recorded (MHz as text, ``mixed: …`` when ranks disagree);
    # None when not recorded.
    aicore_freq: str | None = None


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
    # The step test (``mann-whitney`` from 5 steps a side, ``welch-log`` below, None with
    # one step) and its estimate of the change in % (Hodges-Lehmann or geometric-mean
    # ratio − 1; ``delta_pct`` when untested): the status and the gate follow it.
    test: str | None = None
    shift_pct: float | None = None
    outliers: tuple[ScreenedStep, ...] = ()  # mid-run outlier steps, kept and named

    @property
    def change_pct(self) -> float | None:
        """The step change the status speaks of: the test's estimate, else the mean's."""
        return self.shift_pct if self.shift_pct is not None else self.delta_pct

    @property
    def test_name(self) -> str:
        """The step test in words (``""`` without one)."""
        return STEP_TESTS.get(self.test or "", "")


STEP_TESTS = {"mann-whitney": "Mann-Whitney on the step times, Hodges-Lehmann estimate",
              "welch-log": "Welch's t-test on log step times, ratio of geometric means"}


@dataclass(frozen=True)
class ScreenedStep:
    """A step screening named: its Stage (µs), its side's median, its robust z and why.

    ``reason``: ``warm-up`` (a leading outlier of its side, left out), ``paired`` (left out
    because the other side's warm-up holds its position), ``kept`` (a mid-run outlier,
    compared like any step).
    """

    side: str
    step: int
    stage_us: float
    median_us: float
    z: float
    reason: str = "warm-up"


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
    test: str | None = None
    shift_pct: float | None = None


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
    sentence: str = ""


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
    tested: bool = False
    # How ``p_value`` was computed: ``exact`` or ``asymptotic`` (Mann-Whitney),
    # ``signed-rank`` (a collective paired in launch order); None when not tested.
    p_method: str | None = None
    # Compared per instance (same-shape rung, both sides, and without shapes as many
    # instances per step); False: compared by totals.
    per_instance: bool = False
    # Why it changed (compare/attributes.py): ``attributes`` {base: {core, block_dim, …,
    # implementations, pipes, support, not_recorded}, new: {…}, changed: [...]}, None for a
    # key with nothing recorded (communication); ``bound`` {base, new, base_ratio,
    # new_ratio, pipe, shift}, None without pipes; ``why`` the few words the tables show.
    attributes: Mapping[str, Any] | None = None
    bound: Mapping[str, Any] | None = None
    why: str | None = None


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
    # Where the split of elapsed time the verdict uses comes from: ``hccl_tasks`` (every
    # plane) or ``communication.json`` (one plane); None when neither side has a split.
    parts_source: str | None = None
    parts: Mapping[str, Mapping[str, CommParts]] = field(default_factory=dict)
    base_algorithm: str | None = None
    new_algorithm: str | None = None


@dataclass(frozen=True)
class CommParts:
    """One side's split of a type's elapsed time, µs per step and rank, from one source.

    From ``hccl_tasks``: transfer is the union over planes of data-moving tasks, wait the
    union of notify waits less transfer, idle no task on any plane; ``link_transfer_us``
    sums each plane's transfers over a link (not within the chip) and ``link_mb`` their
    size. From ``communication.json``: its transit, wait and idle (link figures None).
    """

    elapsed_us: float | None
    transfer_us: float | None
    wait_us: float | None
    idle_us: float | None
    link_transfer_us: float | None = None
    link_mb: float | None = None


@dataclass(frozen=True)
class CollectiveLinkRow:
    """One (communication type, link type): transfer µs and MB per step and rank, from tasks."""

    comm_type: str
    link_type: str
    base_transfer_us: float | None
    new_transfer_us: float | None
    base_mb: float | None
    new_mb: float | None


@dataclass(frozen=True)
class SkewRow:
    """Arrival skew of one run's (type, group): instances matched across ranks, µs.

    ``cost_us`` is the waiting all late arrivals cost, per step and rank; ``last_rank`` the
    rank whose late arrivals cost most of it (``last_cost_us``), last in ``last_share`` of
    the instances.
    """

    side: str
    comm_type: str
    group: str
    instances: int
    ranks: int
    median_skew_us: float
    max_skew_us: float
    last_rank: int
    last_share: float
    cost_us: float
    last_cost_us: float
    # The ranks the group's tasks name (a lower bound on its size), how many of them no
    # profile holds, and the waiting per step and rank no profiled arrival explains.
    group_ranks: int = 0
    unprofiled: int = 0
    unseen_wait_us: float | None = None


@dataclass(frozen=True)
class HostFigures:
    """One run's host and Free figures, µs per step and rank (means over its steps)."""

    step_host_us: float | None
    host_busy_us: float | None
    dataloader_us: float | None
    free_us: float | None
    host_bound_us: float | None
    free_other_us: float | None
    compile_us: float | None = None  # host op compilation inside the host-bound waits


@dataclass(frozen=True)
class FreeResult:
    """Where Free went: host-bound (the device waiting for a launch) or not, both runs.

    ``host_bound_share`` is Δ host-bound / Δ Free (None when Free did not grow);
    ``settings`` the host-costly profiler settings that differ, as ``with_stack false →
    true``; ``source`` the files the host side came from.
    """

    base: HostFigures
    new: HostFigures
    host_bound_share: float | None
    host_bound: bool
    settings: tuple[str, ...] = ()
    # Where each run's launch times come from (HostToDevice flows, CANN_API launch rows, the
    # framework op's flow): {"base": …, "new": …}, "" when unknown.
    launch_source: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class LaneSegment:
    """One drawn interval of a step, µs from the step's start; ``label`` names large ones."""

    lane: str
    start_us: float
    end_us: float
    label: str = ""


@dataclass(frozen=True)
class StepLanes:
    """One run's median step of one rank, as lanes (for step_timeline.png)."""

    side: str
    rank: int
    step: int | None
    segments: tuple[LaneSegment, ...]


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
class CauseRow:
    """One cause of the step change: ``text`` is how every output says it.

    ``delta_us`` is the part's own change per step (the step table's Δ); ``share`` the
    signed fraction of Δ Stage it makes, None for a part outside Stage (Preparing).
    """

    name: str
    delta_us: float
    share: float | None
    detail: str
    text: str


@dataclass(frozen=True)
class CaveatRow:
    """What limits how far the verdict can be trusted, said once."""

    code: str
    text: str


@dataclass(frozen=True)
class VerdictResult:
    """The verdict as one line, up to four causes largest first, and its caveats.

    The same structure in stdout, report.md, report.html and report.json; ``memory`` is
    the device-memory sentence when a peak moved enough.
    """

    line: str
    causes: tuple[CauseRow, ...]
    caveats: tuple[CaveatRow, ...]
    memory: str | None = None


@dataclass(frozen=True)
class RankRow:
    """One rank's step breakdown and communication, µs per step, base vs new.

    Transit (transfer), wait and idle come from the rank's HCCL tasks where it has them,
    else from communication.json: ``*_parts_source`` says which.
    """

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
    base_idle_us: float | None = None
    new_idle_us: float | None = None
    # Where wait, transit and idle come from: ``hccl_tasks`` (every plane) or
    # ``communication.json`` (one plane); None when the rank has neither.
    base_parts_source: str | None = None
    new_parts_source: str | None = None


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
    # Where transit, wait, synchronization and idle come from, per side: ``hccl_tasks``
    # when the group is one of the run's task groups, else ``communication.json``.
    base_parts_source: str | None = None
    new_parts_source: str | None = None


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
    """How the report was asked for: the command line and its date (the CLI fills it).

    Library users leave it None, so a report built twice from the same profiles is the
    same report (the golden files rely on it). ``date_source`` says what dates it:
    ``SOURCE_DATE_EPOCH`` (the reproducible-builds convention), ``collected`` (the newest
    collection time the profiles record: the same profiles give the same bytes) or
    ``run`` (the time of the run, when the profiles record none).
    """

    command: str
    date: str
    date_source: str = "run"

    @classmethod
    def now(cls, command: str) -> Invocation:
        """The invocation of ``command``: dated by ``SOURCE_DATE_EPOCH`` when set, else now.

        ``dated_by_profiles`` replaces a ``run`` date by the profiles' own.
        """
        epoch = os.environ.get("SOURCE_DATE_EPOCH", "").strip()
        if epoch.isdigit():
            when = datetime.fromtimestamp(int(epoch), tz=timezone.utc)
            return cls(command, when.isoformat(timespec="seconds"), "SOURCE_DATE_EPOCH")
        return cls(command, datetime.now().astimezone().isoformat(timespec="seconds"))

    def dated_by_profiles(self, collected: list[str | None]) -> Invocation:
        """Dated by the newest collection time among ``collected`` (ISO 8601).

        Unchanged when ``SOURCE_DATE_EPOCH`` dates it or no profile records a time.
        """
        known = [c for c in collected if c]
        if self.date_source != "run" or not known:
            return self
        return Invocation(self.command, max(known), "collected")


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
    # What the status rule saw (as OperatorRow's) and the pairing rung: ``exact``,
    # ``data-inputs`` (index/workspace inputs differ), ``name`` (reshaped), None (one side).
    instance_change_pct: float | None = None
    p_value: float | None = None
    tested: bool = False
    match_kind: str | None = None
    base_input_shapes: str = ""
    new_input_shapes: str = ""


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
    instance_change_pct: float | None = None
    p_value: float | None = None
    tested: bool = False


@dataclass(frozen=True)
class FrameworkRollupRow:
    """Framework time summed by operator name, family or module (µs per step and rank).

    ``status`` compares totals: added, removed, increased, decreased (|Δ| at least the
    threshold of the base total), unchanged.
    """

    level: str
    key: str
    base_us: float | None
    new_us: float | None
    delta_us: float | None
    status: str


@dataclass(frozen=True)
class FrameworkSummaryResult:
    """How much of Δ Stage the framework operators explain (µs per step and rank).

    ``changed``/``keys``: the framework keys not ``unchanged``, of all; ``sentence`` says
    it in words, naming the operators that carry the change.
    """

    attributed_base_us: float
    attributed_new_us: float
    delta_attributed_us: float
    step_delta_us: float | None
    outside_us: float | None
    changed: int
    keys: int
    sentence: str


@dataclass(frozen=True)
class ComparableRow:
    """One way the runs differ besides their stack: what, each side's value, and where."""

    what: str
    base: str
    new: str
    source: str


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
    memory: Memory | None = None
    compute: ComputeSplitResult | None = None
    families: tuple[FamilyRow, ...] = ()
    tool: Tool = field(default_factory=Tool)
    invocation: Invocation | None = None
    framework_ops: tuple[FrameworkOpRow, ...] | None = None
    framework_modules: tuple[FrameworkModuleRow, ...] | None = None
    framework_notes: tuple[Note, ...] = ()
    framework_note: Note | None = None
    framework_rollup: tuple[FrameworkRollupRow, ...] | None = None
    framework_summary: FrameworkSummaryResult | None = None
    comparability: tuple[ComparableRow, ...] = ()
    collective_links: tuple[CollectiveLinkRow, ...] = ()
    collectives_skew: tuple[SkewRow, ...] = ()
    skew_note: str = ""
    free: FreeResult | None = None
    # Imbalances of the job present in both runs (Per rank) and groups holding ranks no
    # profile holds (Who waits for whom): sentences with their data, not findings.
    rank_notes: tuple[Note, ...] = ()
    skew_notes: tuple[Note, ...] = ()
    # The median step of both runs for the timeline chart; not in report.json (it is a
    # drawing's data, thousands of segments).
    step_lanes: tuple[StepLanes, ...] = ()
    verdict: VerdictResult | None = None

    @property
    def warnings(self) -> tuple[str, ...]:
        """The caveats' sentences, in order."""
        return tuple(note.text for note in self.notes)

    def to_dict(self) -> dict:
        """report.json content."""
        data = fields_json(self, leave_out=("notes", "top_n", "step_lanes"))
        data["warnings"] = list(self.warnings)
        for name in ("rank_notes", "skew_notes"):  # sentences with their figures
            data[name] = [{"code": n.code, "text": n.text, "data": to_json(dict(n.data))}
                          for n in getattr(self, name)]
        order = ("tool", "invocation", "headline", "verdict", "comparability", "base", "new",
                 "step", "operators",
                 "categories", "families", "communication", "fusion", "findings", "warnings",
                 "thresholds", "ranks", "comm_groups", "memory", "compute")
        rest = [key for key in data if key not in order]  # a field added later still shows
        return {"schema": SCHEMA, **{key: data[key] for key in (*order, *rest)}}


# --------------------------------------------------------------------------- device memory


@dataclass(frozen=True)
class PeakChange:
    """Peak of one measure (``reserved``/``allocated``) of one component, base vs new (MB)."""

    measure: str
    component: str
    base_mb: float
    new_mb: float
    delta_mb: float
    delta_pct: float | None
    base_rank: int
    new_rank: int


@dataclass(frozen=True)
class ComponentPeak:
    """One memory_record component's peaks over the run (MB; None when not recorded)."""

    component: str
    base_allocated_mb: float | None
    base_reserved_mb: float | None
    new_allocated_mb: float | None
    new_reserved_mb: float | None


@dataclass(frozen=True)
class OperatorMemoryChange:
    """Allocations of one operator name, per rank: count, total and largest (MB)."""

    name: str
    base_count: float
    new_count: float
    base_total_mb: float
    new_total_mb: float
    delta_mb: float
    delta_pct: float | None
    base_largest_mb: float | None
    new_largest_mb: float | None
    status: str


@dataclass(frozen=True)
class ModuleMemoryChange:
    """Peak reserved memory of one npu_module_mem module (MB); None when not recorded."""

    module: str
    base_peak_mb: float | None
    new_peak_mb: float | None
    delta_mb: float | None
    delta_pct: float | None


@dataclass(frozen=True)
class MemorySeries:
    """One measure of memory over time on one rank: ms since its first sample, MB.

    A reserved timeline fills ``reserved_mb``, an allocated one ``allocated_mb``.
    """

    rank: int | None = None
    time_ms: tuple[float, ...] = ()
    reserved_mb: tuple[float, ...] = ()
    allocated_mb: tuple[float, ...] = ()


@dataclass(frozen=True)
class CopyChange:
    """Host↔device copies of one direction: count and µs per step, MB per rank (db)."""

    direction: str
    base_count: float | None
    new_count: float | None
    base_time_us: float | None
    new_time_us: float | None
    delta_time_us: float | None
    delta_pct: float | None
    base_mb: float | None
    new_mb: float | None
    delta_mb: float | None


@dataclass(frozen=True)
class BandwidthChange:
    """HBM bandwidth of one direction (read/write), GB/s; None on a side without samples."""

    direction: str
    base_mean_gbps: float | None
    new_mean_gbps: float | None
    delta_mean_gbps: float | None
    delta_mean_pct: float | None
    base_peak_gbps: float | None
    new_peak_gbps: float | None
    delta_peak_gbps: float | None
    delta_peak_pct: float | None
    base_samples: int
    new_samples: int


@dataclass(frozen=True)
class Memory:
    """Base vs new device memory; report.json ``memory`` (keys: ``compare/memory.py``).

    ``headline`` is the memory sentence of the headline and ``growth`` the
    ``memory-growth`` finding's parts, both from the findings stage. The timelines are the
    peak holders' series: reserved MB of ``timeline_component`` (``base_timeline``,
    ``new_timeline``) and allocated MB of ``allocated_timeline_component``
    (``base_allocated_timeline``, ``new_allocated_timeline``; None: no allocated peak).
    """

    threshold_pct: float
    base_ranks: tuple[int, ...]
    new_ranks: tuple[int, ...]
    peak_reserved: PeakChange | None
    peak_allocated: PeakChange | None
    components: tuple[ComponentPeak, ...]
    operators: tuple[OperatorMemoryChange, ...]
    operators_compared: int
    operators_changed: int
    modules: tuple[ModuleMemoryChange, ...]
    timeline_component: str | None
    base_timeline: MemorySeries
    new_timeline: MemorySeries
    headline: str | None
    growth: Mapping[str, Any] | None
    warnings: tuple[Note, ...] = ()
    copy_units: tuple[int, int] | None = None
    copies: tuple[CopyChange, ...] = ()
    copies_total: CopyChange | None = None
    hbm: tuple[BandwidthChange, ...] = ()
    allocated_timeline_component: str | None = None
    base_allocated_timeline: MemorySeries = MemorySeries()
    new_allocated_timeline: MemorySeries = MemorySeries()

    def to_dict(self) -> dict:
        """JSON-ready form (the ``memory`` object of report.json)."""
        return {
            "threshold_pct": self.threshold_pct,
            "ranks": {"base": list(self.base_ranks), "new": list(self.new_ranks)},
            "peak_reserved": asdict(self.peak_reserved) if self.peak_reserved else None,
            "peak_allocated": asdict(self.peak_allocated) if self.peak_allocated else None,
            "components": [asdict(c) for c in self.components],
            "operators": [asdict(o) for o in self.operators],
            "operators_compared": self.operators_compared,
            "operators_changed": self.operators_changed,
            "modules": [asdict(m) for m in self.modules],
            "timeline": {"component": self.timeline_component,
                         "base": _series_dict(self.base_timeline),
                         "new": _series_dict(self.new_timeline),
                         "allocated": None if self.allocated_timeline_component is None
                         else {"component": self.allocated_timeline_component,
                               "base": _series_dict(self.base_allocated_timeline,
                                                    "allocated_mb"),
                               "new": _series_dict(self.new_allocated_timeline,
                                                   "allocated_mb")}},
            "headline": self.headline,
            "growth": dict(self.growth) if self.growth else None,
            "warnings": [w.text for w in self.warnings],
            "copies": None if self.copies_total is None or self.copy_units is None else {
                "units": {"base": self.copy_units[0], "new": self.copy_units[1]},
                "directions": [asdict(c) for c in self.copies],
                "total": asdict(self.copies_total)},
            "hbm": {"directions": [asdict(h) for h in self.hbm]} if self.hbm else None,
        }


def _series_dict(series: MemorySeries, measure: str = "reserved_mb") -> dict:
    return {"rank": series.rank, "time_ms": list(series.time_ms),
            measure: list(getattr(series, measure))}


# --------------------------------------------------------------------------- several candidates


@dataclass(frozen=True)
class Candidate:
    """One candidate's column: its step figures, MC2 state, findings and memory peak.

    ``report`` is the pairwise report's directory relative to the summary's output
    directory; ``gate_failed`` is None when no gate was asked for.
    """

    label: str
    path: str
    report: str
    step: StepResult
    computing: Figure
    exposed_communication: Figure
    free: Figure
    fusion: str
    findings: tuple[FindingRow, ...]
    peak_reserved_mb: float | None
    peak_reserved_delta_pct: float | None
    gate_failed: bool | None


@dataclass(frozen=True)
class Mover:
    """One operator key's Δ time per step (µs) in each candidate (None: not in that pair)."""

    op_type: str
    input_shapes: str
    base_total_us: float | None
    delta_us: tuple[float | None, ...]
    status: tuple[str | None, ...]
    below_threshold: tuple[bool, ...] = ()  # per candidate: significant, under the threshold
    tested: tuple[bool, ...] = ()  # per candidate: its sample sizes could reach α


@dataclass(frozen=True)
class CandidatesSummary:
    """Several candidates against one baseline: one column each, the verdict, the movers."""

    base: Side
    candidates: tuple[Candidate, ...]
    verdict: str
    movers: tuple[Mover, ...]
    thresholds: ReportSettings
    gate_pct: float | None

    def to_dict(self) -> dict:
        """Summary report.json: ``candidates[]`` with ``label, path, report, step, findings``."""
        return {"schema": SCHEMA, "kind": "summary", **fields_json(self)}
