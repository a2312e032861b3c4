"""Per rank: step breakdown and communication transfer/wait/idle, base vs new.

Transfer, wait and idle come from the rank's HCCL tasks where both runs have tasks (every
plane), else from communication.json (one plane); ``*_parts_source`` says which
(compare/ledger.py).
"""

from __future__ import annotations

import pandas as pd

from ..schema import Run
from .ledger import JSON, TASKS, both_have_tasks, rank_parts

RANK_FIELDS = ("stage", "computing", "communication_not_overlapped", "free")
PART_COLUMNS = ("wait_us", "transit_us", "idle_us")


def _rank_side(run: Run, prefix: str, tasks_too: bool) -> pd.DataFrame:
    side = run.steps.groupby("rank")[list(RANK_FIELDS)].mean()
    parts = pd.DataFrame(columns=list(PART_COLUMNS), dtype=float)
    source = pd.Series(dtype=object)
    if len(run.summary.comm):
        by_rank = run.summary.comm.groupby("rank")
        units = by_rank["step"].nunique(dropna=False).clip(lower=1)
        columns = [c for c in PART_COLUMNS if c in run.summary.comm]
        parts = by_rank[columns].sum().div(units, axis=0).reindex(columns=list(PART_COLUMNS))
        source = pd.Series(JSON, index=parts.index, dtype=object)
    tasks = rank_parts(run) if tasks_too else None
    if tasks is not None:
        parts = tasks[list(PART_COLUMNS)].combine_first(parts)
        source = pd.Series(TASKS, index=tasks.index, dtype=object).combine_first(source)
    side = side.join(parts, how="left")
    side["parts_source"] = source.reindex(side.index).astype(object)
    return side.add_prefix(prefix)


def compare_ranks(base: Run, new: Run) -> pd.DataFrame:
    """Per rank: step breakdown (µs per step) and transfer/wait/idle, both sides.

    The parts come from the HCCL tasks when both runs have them, else from
    communication.json on both sides (``ledger.both_have_tasks``).
    """
    tasks = both_have_tasks(base, new)
    table = _rank_side(base, "base_", tasks).join(_rank_side(new, "new_", tasks), how="outer")
    table["delta_stage_us"] = table["new_stage"] - table["base_stage"]
    table.index.name = "rank"
    return table.reset_index()
