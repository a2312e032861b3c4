"""What a format reader hands back for one rank, before canonical names are derived."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from ..schema import RunSummary

if TYPE_CHECKING:  # memory.py reads files through modules that import this one
    from .reduce.device_memory import RankMemory
    from .reduce.summary import StackShare


@dataclass
class RankData:
    """One rank's raw rows.

    ``ops`` holds ``op_name``, ``op_type_raw``, ``core`` (raw text or categoricals),
    ``start_ns`` (int64), ``dur_us`` (float), ``step`` (Int64), ``input_shapes``,
    ``input_dtypes``; optionally ``device_id``. ``steps`` is the profiler's own step
    breakdown (µs, STAGE_FIELDS) or None; ``comm`` the per-op communication detail
    (schema.COMM_COLUMNS) or None. ``info`` may hold ``rank``, ``cann_version``,
    ``torch_npu_version``, ``profiler_level``, ``device``.
    """

    source: Path
    format: str
    rank: int | None
    ops: pd.DataFrame
    steps: pd.DataFrame | None = None
    comm: pd.DataFrame | None = None
    info: dict = field(default_factory=dict)
    facts: object = None  # provenance facts (read/provenance.py), found where it was read
    warnings: list[str] = field(default_factory=list)
    links: object | None = None  # framework.HostLinks a reader found in its own pass
    # Filled by read_and_reduce, in the worker that read the rank:
    summary: RunSummary | None = None  # None when the rank was reduced in a stack:
    share: StackShare | None = None  # then its part of the stack's summary
    kernel_steps: pd.DataFrame | None = None  # breakdown from kernel intervals, when no steps
    outside_steps: int = 0  # kernels left out for lying outside every profiler step
    has_comm: bool = False  # communication detail was read (before ``comm`` may be dropped)
    step_ids: tuple[int, ...] = ()  # step ids the rank had before a step selection
    has_kernels: bool = True  # kernel rows were read (before a step selection)
    step_spans: pd.DataFrame | None = None  # step, start_us, end_us by its kernels
    memory: RankMemory | None = None  # None: no memory read (a cluster summary)
    nothing: bool = False  # a kernel-less rank that held nothing usable either
    framework: pd.DataFrame | None = None  # framework.FRAMEWORK_COLUMNS rows, None: no links
    framework_note: str = ""  # why ``framework`` is None
