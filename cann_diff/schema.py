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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from .errors import SchemaError
from .vocab import Vocabulary, default_vocabulary

if TYPE_CHECKING:  # the memory frames are described where they are read
    from .read.memory import MemoryData

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


@dataclass(frozen=True)
class Note:
    """A caveat carried as data by the result it qualifies.

    ``code`` is a stable id a renderer may act on (``one-step``, ``few-steps``,
    ``steps-differ``, ``sampled``, ``ranks-differ``, ``step-source-differs``, …) so that no
    stage matches another stage's text; ``text`` is the sentence shown to the user.
    """

    code: str
    text: str

    def __str__(self) -> str:
        """The sentence, for places that only print."""
        return self.text


@dataclass(frozen=True)
class RunMeta:
    """What we know about how a run was collected; every field may be unknown.

    ``collected`` is the end of collection, ISO 8601 (``…Z`` when the profile recorded
    Unix time, no zone when only a directory name's local time); ``device_count`` counts
    distinct (host, device id) pairs; ``world_size``, ``parallel`` and ``environment`` come
    from ``profiler_metadata.json``. ``sources`` maps each provenance fact (``cann``,
    ``torch_npu``, ``driver``, ``device``, ``device_count``, ``profiler_level``,
    ``collected``, ``host``, ``world_size``, ``parallel``, ``environment``) to the file it
    was read from or, when unknown, the file that would record it (``read/provenance.py``).
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
        }


SUMMARY_KEY = ("rank", "step", "op_type", "input_shapes", "family", "category", "comm_type",
               "direction")
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
    pass (``read/memory.py``: ``MemoryData``); None only for a Run built by hand.
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
    warnings: tuple[str, ...] = field(default_factory=tuple)
    memory: MemoryData | None = None
    ranks_without_kernels: tuple[int, ...] = ()
    # Kernels per framework operator instance (read/framework.py FRAMEWORK_COLUMNS); None
    # when the profile links no host op to its kernels, ``framework_note`` then says why.
    framework: pd.DataFrame | None = None
    framework_note: str = ""
    # The tables its canonical names were derived with (the package's and the user's maps).
    vocab: Vocabulary = field(default_factory=default_vocabulary)


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
