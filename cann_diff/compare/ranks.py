"""Per rank: step breakdown and communication wait/transit, base vs new."""

from __future__ import annotations

import pandas as pd

from ..schema import Run

RANK_FIELDS = ("stage", "computing", "communication_not_overlapped", "free")


def _rank_side(run: Run, prefix: str) -> pd.DataFrame:
    side = run.steps.groupby("rank")[list(RANK_FIELDS)].mean()
    if len(run.summary.comm):
        by_rank = run.summary.comm.groupby("rank")
        units = by_rank["step"].nunique(dropna=False).clip(lower=1)
        comm = by_rank[["wait_us", "transit_us"]].sum().div(units, axis=0)
        side = side.join(comm, how="left")
    return side.add_prefix(prefix)


def compare_ranks(base: Run, new: Run) -> pd.DataFrame:
    """Per rank: step breakdown (µs per step) and communication wait/transit, both sides."""
    table = _rank_side(base, "base_").join(_rank_side(new, "new_"), how="outer")
    table["delta_stage_us"] = table["new_stage"] - table["base_stage"]
    table.index.name = "rank"
    return table.reset_index()
