"""Non-compute time of one rank, reduced where the rank is read: collectives, host, lanes.

The rank's reader (or the one read of its host side, ``framework.read_host_side``) has
found its HCCL tasks (``RankData.tasks``), host op spans (``RankData.host_spans``) and
host→device links (``RankData.links``); here, with the rank's canonical rows of the chosen
steps, they become the frames a RankResult carries on: ``collectives`` and
``collective_links`` (reduce/collectives.py), ``host_steps`` and ``step_lanes``
(reduce/host_time.py). Each is None when the rank holds nothing to build it from.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..rank_data import RankData
from .collectives import collective_frames
from .host_time import host_steps, launch_source, step_lanes


@dataclass(frozen=True)
class NonCompute:
    """What a rank's tasks and host side give (all None / ``""`` without them)."""

    collectives: pd.DataFrame | None = None
    collective_links: pd.DataFrame | None = None
    collectives_source: str = ""
    host_steps: pd.DataFrame | None = None
    step_lanes: pd.DataFrame | None = None
    host_launch_source: str = ""  # where launch times come from (host_time.launch_source)


NOTHING = NonCompute()


def _step_spans_ns(ops: pd.DataFrame) -> pd.DataFrame:
    """Per step of the rows: ``step``, ``start_ns`` (first start), ``end_ns`` (last end)."""
    stepped = ops[ops["step"].notna().to_numpy()]
    if not len(stepped):
        return pd.DataFrame({c: pd.Series(dtype="int64") for c in ("step", "start_ns", "end_ns")})
    start = stepped["start_ns"].to_numpy(np.int64)
    end = start + np.rint(stepped["dur_us"].to_numpy() * 1000).astype(np.int64)
    frame = pd.DataFrame({"step": stepped["step"].to_numpy(np.int64), "start_ns": start,
                          "end_ns": end})
    return frame.groupby("step", sort=True).agg(start_ns=("start_ns", "min"),
                                                end_ns=("end_ns", "max")).reset_index()


def non_compute(data: RankData, ops: pd.DataFrame) -> NonCompute:
    """The rank's non-compute frames from its ``ops`` (canonical rows of the chosen steps).

    A collective takes the step whose span (first start to last end of that step's rows)
    holds its start, so ``--steps`` chooses collectives as it chooses rows; a rank without
    step ids keeps every collective, of step <NA>.
    """
    if data.tasks is None and data.host_spans is None and data.links is None:
        # Kernel rows alone still draw a step: compute, communication and Free lanes.
        return NonCompute(step_lanes=step_lanes(ops, None, None, None)) if len(ops) \
            else NOTHING
    stepped = bool(ops["step"].notna().any()) if len(ops) else False
    frames = collective_frames(data.tasks, _step_spans_ns(ops), stepped) \
        if data.tasks is not None else None
    if not len(ops):
        return NonCompute(frames.collectives, frames.links, frames.source) \
            if frames is not None else NOTHING
    return NonCompute(
        frames.collectives if frames is not None else None,
        frames.links if frames is not None else None,
        frames.source if frames is not None else "",
        host_steps(ops, data.host_spans, data.links),
        step_lanes(ops, data.host_spans, data.links,
                   frames.planes if frames is not None else None),
        launch_source(data.links))
