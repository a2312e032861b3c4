"""What a format reader hands back for one rank, before canonical names are derived."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd


@dataclass(frozen=True)
class RankData:
    """One rank's raw rows, as its format reader found them.

    ``ops`` holds ``op_name``, ``op_type_raw``, ``core`` (raw text or categoricals),
    ``start_ns`` (int64), ``dur_us`` (float), ``step`` (Int64), ``input_shapes``,
    ``input_dtypes``; optionally ``device_id``. ``steps`` is the profiler's own step
    breakdown (µs, STAGE_FIELDS) or None; ``comm`` the per-op communication detail
    (schema.COMM_COLUMNS) or None. ``info`` may hold ``rank``, ``cann_version``,
    ``torch_npu_version``, ``profiler_level``, ``device``, ``profiler_info`` (the parsed
    profiler_info_<rank>.json). ``links`` are the host→device links
    (``formats/host_links.py``) a reader found in its own pass over a trace.
    ``tasks`` are its HCCL op-level collectives and plane tasks
    (``formats/hccl_tasks.CollectiveTasks``), None when the profile has no task-level data
    or its reader leaves them to the host-side read; ``host_spans`` its host op spans
    (``formats/host_links.HostSide.spans``). ``side_read`` is True once the host side was
    looked for (by the reader's own pass, or by ``reduce/framework.read_host_side``): then
    ``links``, ``host_spans`` and ``tasks`` are final, and ``side_note`` says why ``links``
    is None when it is. What the HCCL task reader dropped is in ``tasks.dropped``
    (``all_warnings`` says it): the tasks may be read with the host side, after the rank.
    """

    source: Path
    format: str
    rank: int | None
    ops: pd.DataFrame
    steps: pd.DataFrame | None = None
    comm: pd.DataFrame | None = None
    info: Mapping[str, Any] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()
    links: Any = None
    tasks: Any = None
    host_spans: pd.DataFrame | None = None
    side_read: bool = False
    side_note: str = ""

    def all_warnings(self) -> tuple[str, ...]:
        """The reader's warnings, then what the HCCL task reader dropped, naming the rank."""
        if self.tasks is None or not self.tasks.dropped:
            return self.warnings
        label = f"rank {self.rank}" if self.rank is not None else Path(self.source).name
        return (*self.warnings, *self.tasks.warnings(label))
