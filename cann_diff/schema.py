"""The canonical schema every reader produces, written down once.

After ``load_run`` no code knows which file a row came from. Durations are float
microseconds; start times are integer nanoseconds of local Unix time (a float64
cannot hold 16 integer digits of µs plus 3 decimals exactly).

``Run.ops`` — one row per device task (kernel) or large communication op:

===============  ========  ==========================================================
column           dtype     meaning
===============  ========  ==========================================================
rank             int64     global rank (0 when the profile does not say)
step             Int64     profiler step id; <NA> when the run has no steps
op_name          category  raw kernel name (``aclnnMatmul_MatMulV3Common_MatMulV3``)
op_type_raw      category  raw ``Type``; derived from the name when it was ``N/A``
op_type          category  canonical type (``MatMulV3``, ``AllReduce``, ``MatmulAllReduce``)
family           category  type without version suffix (``MatMul``); comm type for comm
comm_type        category  ``AllReduce`` … for communication ops, else empty
category         category  compute | communication | mc2 | memcpy | aicpu | other
core             category  AI_CORE, AI_VECTOR_CORE, MIX_AIC, MIX_AIV, AI_CPU, COMM, UNKNOWN
start_ns         int64     start, local Unix time in ns
dur_us           float64   duration in µs
input_shapes     category  normalized ``d,d;d,d`` (no quotes, no spaces), ``""`` if unknown
input_dtypes     category  normalized (``DT_`` prefix dropped, upper case)
===============  ========  ==========================================================

``Run.steps`` — one row per (rank, step), µs: see ``STEP_COLUMNS``.

``Run.comm`` — one row per (rank, step, communication op) from communication.json
or its db twin: see ``COMM_COLUMNS``; times in µs, sizes in MB.

``Run.ops`` and ``Run.comm`` are kept only when asked for (``load_run(keep_rows=True)``):
a cluster's rows do not fit one machine. What the later stages read is ``Run.summary``,
built per rank where the rank was read (``read/reduce.py``):

* ``summary.ops`` — one row per (rank, step, op_type, input_shapes, family, category,
  comm_type, direction) with ``count``, ``total_us`` and ``exposed_us`` (communication not
  hidden behind computation); ``direction`` names a memcpy's direction, else ``""``;
* ``summary.samples`` — ``row`` (into ``summary.ops``) and ``dur_us``: every duration, or,
  above the sample budget, the same fraction of every row's durations (at least one) as
  the quantiles at (i + ½)/k of its sorted durations;
* ``summary.comm`` — one row per (rank, step, comm_type, group) with ``ops`` and the sums
  of the numeric ``COMM_COLUMNS`` (and per-link ``*_mb``/``*_us`` where known).

``Run.memory`` — the device memory of the same ranks (``MemoryData``), reduced per rank to
a ``MemorySummary`` where it is read (``read/memory.py``).

``Run.framework`` — kernels per framework operator instance (``read/framework.py``
``FRAMEWORK_COLUMNS``); kernels no host→device link reaches are the operator ``UNLINKED``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from .errors import SchemaError
from .vocab import Vocabulary, default_vocabulary

CATEGORIES = ("compute", "communication", "mc2", "memcpy", "aicpu", "other")

OP_COLUMNS = {
    "rank": "int64",
    "step": "Int64",
    "op_name": "category",
    "op_type_raw": "category",
    "op_type": "category",
    "family": "category",
    "comm_type": "category",
    "category": "category",
    "core": "category",
    "start_ns": "int64",
    "dur_us": "float64",
    "input_shapes": "category",
    "input_dtypes": "category",
}

# Step breakdown figures as step_trace_time.csv names them, in µs.
STAGE_FIELDS = (
    "computing",
    "communication_not_overlapped",
    "overlapped",
    "communication",
    "free",
    "stage",
    "bubble",
    "preparing",
)
STEP_COLUMNS = ("rank", "step", *STAGE_FIELDS)

COMM_COLUMNS = (
    "rank",
    "step",
    "op_name",
    "comm_type",
    "group",
    "elapse_us",
    "transit_us",
    "wait_us",
    "synchronization_us",
    "idle_us",
    "transit_mb",
)

# One row per collective instance of a rank, from its HCCL tasks (read/reduce/collectives.py,
# docs/formats.md §14): times in µs (``*_ns`` int64 ns of local Unix time), sizes in bytes.
COLLECTIVE_COLUMNS = {
    "rank": "int64",
    "step": "Int64",
    "op": "int64",                   # the op's index on its rank, in start order
    "op_name": "category",
    "comm_type": "category",
    "group": "category",
    "seq": "int64",                  # order within (group, comm_type) on the rank
    "start_ns": "int64",
    "end_ns": "int64",
    "elapsed_us": "float64",         # end − start
    "transfer_us": "float64",        # union over planes of data-moving tasks
    "wait_us": "float64",            # union of Notify_Wait tasks less the transfer union
    "idle_us": "float64",            # no task on any plane
    "other_us": "float64",           # elapsed − transfer − wait − idle
    "sync_wait_us": "float64",       # wait before the first transfer over a link
    "first_transfer_ns": "Int64",    # start of that transfer; <NA>: no transfer over a link
    "planes": "int64",               # planes with tasks
    "critical_plane": "Int64",       # plane of the longest total wait; <NA>: no wait
    "critical_wait_us": "float64",
    "bytes": "int64",                # size of the data-moving tasks
    "link_transfer_us": "float64",   # union over planes of transfers over a link (not ON_CHIP)
    "link_busy_us": "float64",       # Σ over planes of each plane's link-transfer union
    "link_bytes": "int64",
    "algorithm": "category",         # HCCL alg_type / algType, "" when not recorded
    "group_ranks": "int64",          # distinct ranks its tasks name (own, src, dst); 0: none
}
# One row per (collective, link type) of its data-moving tasks: union length and bytes.
COLLECTIVE_LINK_COLUMNS = {
    "rank": "int64",
    "step": "Int64",
    "op": "int64",                   # COLLECTIVE_COLUMNS ``op`` of the same rank
    "link_type": "category",         # ON_CHIP, HCCS, PCIE, ROCE, SIO, … as recorded
    "transfer_us": "float64",
    "bytes": "int64",
}
# One row per (rank, step): host time and device idle time (read/reduce/host_time.py,
# docs/formats.md §15), µs.
HOST_STEP_COLUMNS = {
    "rank": "int64",
    "step": "Int64",
    "step_host_us": "float64",       # span of the host's ProfilerStep#N; NaN: none
    "host_busy_us": "float64",       # union of host ops on the launching threads, in it
    "dataloader_us": "float64",      # union of enumerate(DataLoader)… ops; NaN: none at all
    "free_us": "float64",            # device span of the step without kernel or collective
    "host_bound_us": "float64",      # the part of free the device waited for a launch
    "free_other_us": "float64",      # free − host_bound
    "compile_us": "float64",         # host op compilation (aclopCompile…) in host-bound gaps
    "launches": "int64",             # device tasks of the step whose launch is known
}
# A rank's median step as merged intervals per lane, for a picture: µs from the step start.
STEP_LANE_COLUMNS = {
    "step": "Int64",
    "lane": "object",                # compute, communication, plane <n>, host, free
    "start_us": "float64",
    "end_us": "float64",
    "label": "object",               # the largest segments' longest op, else ""
}


# --------------------------------------------------------------------------- device memory

MAX_POINTS = 2000  # memory timeline samples kept per rank and component

# Columns of the per-rank memory summaries (each also has ``rank`` in front).
PEAK_COLUMNS = ("component", "allocated_mb", "reserved_mb")
# A timeline row holds a sample's allocated and reserved MB (NaN where not recorded: APP
# has no allocated figure), so that each measure's peak can be drawn on its own.
TIMELINE_COLUMNS = ("component", "time_ms", "allocated_mb", "reserved_mb")
OPERATOR_TOTAL_COLUMNS = ("name", "count", "total_mb", "largest_mb")
MODULE_PEAK_COLUMNS = ("component", "reserved_mb")
HBM_TOTAL_COLUMNS = ("direction", "samples", "total_gbps", "peak_gbps")
SPAN_COLUMNS = ("step", "start_us", "end_us")
# Host↔device copies: totals per direction (db MEMCPY_INFO), directions in display order.
COPY_COLUMNS = ("direction", "count", "bytes")
COPY_DIRECTIONS = ("host_to_device", "device_to_host", "device_to_device", "other", "unknown")
_TEXT_COLUMNS = {"component", "name"}
# The code of a Note saying a memory file or table is absent: expected when the profile
# was taken with profile_memory off.
MEMORY_NOT_RECORDED = "memory-not-recorded"


def empty_frame(columns: tuple[str, ...]) -> pd.DataFrame:
    """An empty frame with the given columns: text columns as str, the rest float64."""
    return pd.DataFrame({c: pd.Series(dtype=str if c in _TEXT_COLUMNS else "float64")
                         for c in columns})


# Empty frames built once per process and copied: a rank without memory files needs a
# dozen of them, and building one costs ten times its copy.
_EMPTY_FRAMES: dict[tuple[bool, tuple[str, ...]], pd.DataFrame] = {}


def memory_frame(columns: tuple[str, ...], ranked: bool = True) -> pd.DataFrame:
    """A fresh empty memory frame, ``rank`` (int64) first when ``ranked``.

    A ``direction`` column is object, other text str, the rest float64.
    """
    key = (ranked, columns)
    if key not in _EMPTY_FRAMES:
        frame = empty_frame(columns)
        if "direction" in columns:
            frame = frame.astype({"direction": "object"})
        if ranked:
            frame = frame.assign(rank=pd.Series(dtype="int64"))[["rank", *columns]]
        _EMPTY_FRAMES[key] = frame
    return _EMPTY_FRAMES[key].copy()


@dataclass(frozen=True, eq=False)
class MemorySummary:
    """What the comparison reads, per rank; sizes in MB.

    ``peaks``: rank, component, allocated_mb, reserved_mb (maxima; NaN when not recorded).
    ``timelines``: rank, component, time_ms (since that rank's first sample of the
    component), allocated_mb, reserved_mb (NaN where not recorded); at most MAX_POINTS rows
    per rank and component, each measure's largest sample of each time bucket.
    ``operators``: rank, name, count, total_mb, largest_mb.
    ``modules``: rank, component, reserved_mb (peak). ``hbm``: rank, direction, samples,
    total_gbps (sum over samples), peak_gbps.
    """

    peaks: pd.DataFrame = field(default_factory=lambda: memory_frame(PEAK_COLUMNS))
    timelines: pd.DataFrame = field(default_factory=lambda: memory_frame(TIMELINE_COLUMNS))
    operators: pd.DataFrame = field(
        default_factory=lambda: memory_frame(OPERATOR_TOTAL_COLUMNS))
    modules: pd.DataFrame = field(default_factory=lambda: memory_frame(MODULE_PEAK_COLUMNS))
    hbm: pd.DataFrame = field(default_factory=lambda: memory_frame(HBM_TOTAL_COLUMNS))


@dataclass(frozen=True, eq=False)
class MemoryData:
    """Memory of one input, every rank stacked; sizes in MB, times in µs.

    ``summary`` is what the comparison reads. ``copies``: rank, direction, count, bytes
    (db MEMCPY_INFO totals over the profile). ``warnings`` (Notes) name what is missing. With
    ``keep_rows`` the raw samples are kept too (else None): ``records`` (rank, component,
    time_us, allocated_mb, reserved_mb), ``operators`` (rank, name, size_mb, one row per
    allocation), ``modules`` (rank, component, time_us, reserved_mb) and ``hbm`` (rank,
    direction, time_us, gbps). ``step_spans``: rank, step, start_us, end_us — each step's
    span by its kernels (first start to last end, before any step selection), what a later
    ``select_steps`` selects the raw samples by.
    """

    ranks: tuple[int, ...]
    summary: MemorySummary = field(default_factory=MemorySummary)
    warnings: tuple[Note, ...] = ()
    copies: pd.DataFrame = field(default_factory=lambda: memory_frame(COPY_COLUMNS))
    records: pd.DataFrame | None = None
    operators: pd.DataFrame | None = None
    modules: pd.DataFrame | None = None
    hbm: pd.DataFrame | None = None
    step_spans: pd.DataFrame = field(default_factory=lambda: memory_frame(SPAN_COLUMNS))


# --------------------------------------------------------------------------- framework

# The framework operator of kernels no host→device link reaches: kept so that totals add up.
UNLINKED = "(no framework op)"
# What a run without host→device links cannot give, and the code of the Note that says why.
NO_LINKS = "framework-operator comparison unavailable"
NO_FRAMEWORK_LINKS = "no-framework-links"


@dataclass(frozen=True)
class Note:
    """A caveat carried as data by the result it qualifies: the one form of every caveat.

    ``code`` is a stable id a later stage or a renderer may act on (``one-step``,
    ``steps-differ``, ``sampled``, ``memory-not-recorded``, ``input``, …; docs/design.md
    "Notes" lists them) so that no stage matches another stage's text; ``text`` is the
    sentence shown to the user; ``data`` the figures behind it, when a stage needs them.
    """

    code: str
    text: str
    data: Mapping[str, Any] = field(default_factory=dict, compare=False)

    def __str__(self) -> str:
        """The sentence, for places that only print."""
        return self.text


@dataclass(frozen=True)
class RunMeta:
    """What we know about how a run was collected; every field may be unknown.

    ``collected`` is the end of collection, ISO 8601 (``…Z`` when the profile recorded
    Unix time, no zone when only a directory name's local time); ``device_count`` counts
    distinct (host, device id) pairs; ``world_size``, ``parallel`` and ``environment`` come
    from ``profiler_metadata.json``. ``device_hint`` is not the device but what the kernel
    table's PMU columns imply (``aic_``/``aiv_`` split cores: Ascend910B-class; unprefixed:
    Ascend910A-class), whether or not the device is recorded. ``profiler_config`` maps each
    profiler setting of ``profiler_info_<rank>.json`` (``level``, ``with_stack``,
    ``record_shapes``, ``profile_memory``, ``with_modules``, ``with_flops``, ``l2_cache``,
    ``aic_metrics``, ``data_simplification``, ``export_type``, ``activities``) to its value
    as text (``true``/``false``); ``hccl_algorithms`` maps each communication type
    (``AllReduce``) to its HCCL algorithm (``MESH-RING``; several of one rank joined by
    ``/``). Ranks that disagree give ``mixed: …`` for a fact or a key. ``sources`` maps each
    provenance fact (``cann``, ``torch_npu``, ``driver``, ``device``, ``device_count``,
    ``profiler_level``, ``collected``, ``host``, ``world_size``, ``parallel``,
    ``environment``) to the file it was read from or, when unknown, the file that would
    record it (``read/provenance.py``); ``detail_sources`` does the same for
    ``device_hint``, ``profiler_config``, ``hccl_algorithms`` and ``compute_dtypes`` (the
    dtype column behind ``Run.dtype_us``).
    """

    path: str
    format: str
    ranks: tuple[int, ...] = ()
    cann_version: str | None = None
    torch_npu_version: str | None = None
    device: str | None = None
    profiler_level: str | None = None
    driver_version: str | None = None
    device_count: int | None = None
    collected: str | None = None
    host: str | None = None
    world_size: int | None = None
    parallel: str | None = None
    environment: str | None = None
    sources: Mapping[str, str] = field(default_factory=dict)
    device_hint: str | None = None
    profiler_config: Mapping[str, str] = field(default_factory=dict)
    hccl_algorithms: Mapping[str, str] = field(default_factory=dict)
    detail_sources: Mapping[str, str] = field(default_factory=dict)
    # The AI Core frequency the profile records (MHz, as text: ``1800``; ``mixed: …`` when
    # ranks disagree); None when not recorded (db AICORE_FREQ, msprof info.json).
    aicore_freq: str | None = None

    def to_dict(self) -> dict:
        """JSON-ready form used by report.json ``base``/``new``."""
        return {
            "path": self.path,
            "format": self.format,
            "ranks": list(self.ranks),
            "versions": {"cann": self.cann_version, "torch_npu": self.torch_npu_version},
            "driver": self.driver_version,
            "device": self.device,
            "device_count": self.device_count,
            "profiler_level": self.profiler_level,
            "collected": self.collected,
            "host": self.host,
            "world_size": self.world_size,
            "parallel": self.parallel,
            "environment": self.environment,
            "sources": dict(self.sources),
            "device_hint": self.device_hint,
            "profiler_config": dict(self.profiler_config),
            "hccl_algorithms": dict(self.hccl_algorithms),
            "detail_sources": dict(self.detail_sources),
            "aicore_freq": self.aicore_freq,
        }


SUMMARY_KEY = ("rank", "step", "op_type", "input_shapes", "family", "category", "comm_type",
               "direction")

# A kernel's attributes that say why it took its time (docs/design.md "Why operators
# changed"): the raw per-kernel columns readers add where their files record them, under
# these names, beside OP_COLUMNS (``core``, ``op_name`` and ``input_dtypes`` are there
# already), and the attribute names of ``RunSummary.attributes``.
KERNEL_ATTRIBUTES = ("block_dim", "mix_block_dim", "op_state", "input_formats", "hf32")
ATTRIBUTES = ("core", "block_dim", "mix_block_dim", "op_state", "input_formats",
              "input_dtypes", "hf32", "implementation")
ATTRIBUTE_COLUMNS = {"row": "int64", "attribute": "category", "value": "object",
                     "count": "int64", "total_us": "float64"}
# PMU pipe ratios in one vocabulary (910A's unprefixed ``mac_ratio`` … and A2/A3's
# ``aic_``/``aiv_`` columns both map here): the raw per-kernel columns ``pipe_<name>``
# (ratio 0-1) and ``pmu_aicore_us`` / ``pmu_aiv_us`` (the cores' busy time).
PIPES = ("cube", "vector", "scalar", "mte1", "mte2", "mte3", "fixpipe")
PIPE_COLUMNS = ("row", "pmu_us", *PIPES)
# How reports name attributes, pipes and bounds (the why cells and the section alike).
ATTRIBUTE_LABELS = {"core": "core", "block_dim": "block dim", "mix_block_dim": "mix block dim",
                    "op_state": "op state", "input_formats": "formats",
                    "input_dtypes": "dtype", "hf32": "HF32", "implementation": "kernel"}
PIPE_LABELS = {"cube": "cube", "vector": "vector", "scalar": "scalar", "mte1": "MTE1",
               "mte2": "MTE2", "mte3": "MTE3", "fixpipe": "fixpipe"}
BOUND_WORDS = {**{pipe: f"{PIPE_LABELS[pipe]}-bound" for pipe in PIPES},
               "mte2": "memory-bound"}
# A key whose time moved with every recorded attribute alike: the kernel library's change.
KERNEL_ITSELF = "same placement and implementation: the kernel itself"
COMM_SUMMARY_KEY = ("rank", "step", "comm_type", "group")


@dataclass(frozen=True)
class RunSummary:
    """The reduced form of a run's rows: additive figures exactly, durations as a sample.

    ``sampled`` is True when some durations were left out of ``samples`` (counts and
    totals stay exact; medians, percentiles and tests then use the sample), ``fraction``
    the share of every row's durations kept (1.0 when none was left out).
    """

    ops: pd.DataFrame
    samples: pd.DataFrame
    comm: pd.DataFrame
    sampled: bool = False
    fraction: float = 1.0
    # Compute kernels next to a collective on their rank (rank int64, step Int64, op_type,
    # input_shapes, comm_type category, count int64, total_us float64; rows in the order
    # of their first kernel): which collective each split compute kernel feeds or takes
    # from, so that an MC2 split is attributed by adjacency, not by shape alone (docs/
    # design.md "MC2 fused operators"). None: not built.
    adjacent: pd.DataFrame | None = None
    # Why a key's kernels took the time they took, per summary row (``row`` indexes
    # ``ops`` as ``samples`` does; docs/design.md "Why operators changed"):
    # ``attributes`` — ATTRIBUTE_COLUMNS, one row per (row, attribute, value) with the
    # kernels' count and total_us: which core, block dim, op state, formats, dtypes, HF32
    # and implementation (kernel name) the row's kernels ran with; ``pipes`` — one row per
    # summary row whose kernels record PMU counters: PIPE_COLUMNS, ``pmu_us`` the duration
    # of those kernels and each pipe's ratio × duration summed (µs), so that ratios
    # combine exactly over rows. None: the reader records none of it.
    attributes: pd.DataFrame | None = None
    pipes: pd.DataFrame | None = None

    @property
    def kernels(self) -> int:
        """Number of kernel rows summarized."""
        return int(self.ops["count"].sum()) if len(self.ops) else 0

    @property
    def sample_size(self) -> int:
        """Number of durations kept."""
        return len(self.samples)


@dataclass(frozen=True)
class Run:
    """One profile, read and normalized.

    ``step_source`` says where ``steps`` came from: ``step_trace_time`` (the
    profiler's own figures), ``kernels`` (recomputed from kernel intervals) or
    ``mixed`` (some ranks each). ``ops``/``comm`` are None unless rows were kept.
    ``memory`` is the device memory of the same ranks under the same ids, read in the same
    pass (``MemoryData``); None only for a Run built by hand.
    ``ranks_without_kernels`` lists the ranks read for their step breakdown, communication
    or memory alone (no kernel rows); a warning names them when other ranks have kernels.
    """

    label: str
    meta: RunMeta
    ops: pd.DataFrame | None
    steps: pd.DataFrame
    comm: pd.DataFrame | None
    summary: RunSummary
    step_source: str = "step_trace_time"
    warnings: tuple[Note, ...] = field(default_factory=tuple)
    memory: MemoryData | None = None
    ranks_without_kernels: tuple[int, ...] = ()
    # Kernels per framework operator instance (read/framework.py FRAMEWORK_COLUMNS); None
    # when the profile links no host op to its kernels, ``framework_note`` then says why.
    framework: pd.DataFrame | None = None
    framework_note: Note | None = None
    # The tables its canonical names were derived with (the package's and the user's maps).
    vocab: Vocabulary = field(default_factory=default_vocabulary)
    # µs of compute kernels (category ``compute``) per dtype of their first input, summed over
    # ranks and the steps read; ``""`` where no dtype is recorded. Used as shares.
    dtype_us: Mapping[str, float] = field(default_factory=dict)
    # Per collective instance, from HCCL task-level data (COLLECTIVE_COLUMNS), every rank
    # that has such data; None when no rank has (communication.json figures are then the
    # only ones). ``collective_links``: COLLECTIVE_LINK_COLUMNS of the same ranks;
    # ``collectives_source`` maps each of those ranks to where its tasks came from
    # (``trace_view.json: HCCL plane tasks``, ``<db>: COMMUNICATION_TASK_INFO + TASK``).
    collectives: pd.DataFrame | None = None
    collective_links: pd.DataFrame | None = None
    collectives_source: Mapping[int, str] = field(default_factory=dict)
    # Host time per (rank, step) (HOST_STEP_COLUMNS), None when no rank records a host side;
    # per rank with one, where its launch times come from (HostToDevice flows, CANN_API
    # launch rows, the framework op's flow).
    host_steps: pd.DataFrame | None = None
    host_launch_source: Mapping[int, str] = field(default_factory=dict)
    # Per rank, its median step as lanes (STEP_LANE_COLUMNS), for a chart.
    step_lanes: Mapping[int, pd.DataFrame] = field(default_factory=dict)


def empty_comm() -> pd.DataFrame:
    """Return an empty communication frame."""
    frame = pd.DataFrame({c: pd.Series(dtype="float64") for c in COMM_COLUMNS})
    return frame.astype({"rank": "int64", "step": "Int64", "op_name": "object",
                         "comm_type": "object", "group": "object"})


def conform_ops(ops: pd.DataFrame) -> pd.DataFrame:
    """Order and cast the operator columns; raise SchemaError when one is missing."""
    missing = [c for c in OP_COLUMNS if c not in ops.columns]
    if missing:
        raise SchemaError(None, f"operator frame lacks columns {missing}")
    ordered = ops[list(OP_COLUMNS)] if list(ops.columns) != list(OP_COLUMNS) \
        else ops.copy(deep=False)
    # Only the columns not yet of their dtype: an astype of every column cost ~1.5 ms on
    # one rank's frame, most of it on columns already right.
    casts = {c: t for c, t in OP_COLUMNS.items() if str(ordered[c].dtype) != t}
    return ordered.astype(casts) if casts else ordered


def _used_categories(column: pd.Series) -> list[str]:
    """The category names a categorical column uses ("nan" for a missing value).

    Read from the codes and ``.cat.categories``, never by a string per row.
    """
    codes = column.cat.codes.to_numpy()
    categories = column.cat.categories
    used = np.bincount(codes[codes >= 0], minlength=len(categories)) > 0
    names = [str(name) for name in categories[used]]
    return names + (["nan"] if (codes < 0).any() else [])


def validate(ops: pd.DataFrame) -> None:
    """Check an operator frame against the schema (columns, dtypes, categories)."""
    for column, dtype in OP_COLUMNS.items():
        if column not in ops.columns:
            raise SchemaError(None, f"missing column {column!r}")
        if str(ops[column].dtype) != dtype:
            raise SchemaError(None, f"column {column!r} is {ops[column].dtype}, want {dtype}")
    unknown = set(_used_categories(ops["category"])) - set(CATEGORIES)
    if unknown:
        raise SchemaError(None, f"unknown categories {sorted(unknown)}")
