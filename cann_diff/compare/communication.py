"""Communication per type and per group, base vs new (µs per step and rank)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..schema import Run
from .operators import count_units

COMM_JSON_FIELDS = ("elapse_us", "transit_us", "wait_us", "synchronization_us", "transit_mb")


def _comm_side(run: Run, prefix: str) -> pd.DataFrame:
    ops, comm = run.summary.ops, run.summary.comm
    comm_ops = ops[(ops["category"] == "communication").to_numpy()]
    n_units = count_units(ops)
    grouped = comm_ops.groupby(comm_ops["comm_type"].astype(str))
    side = grouped[["count", "total_us", "exposed_us"]].sum() / n_units
    if len(comm):
        by_type = comm.groupby(comm["comm_type"].astype(str))
        comm_units = max(len(comm[["rank", "step"]].drop_duplicates()), 1)
        side = side.join(by_type[list(COMM_JSON_FIELDS)].sum() / comm_units, how="outer")
        if comm_ops.empty:  # no kernels (cluster summary): counts and time from the json
            side["count"] = by_type["ops"].sum() / comm_units
            side["total_us"] = side["elapse_us"]
            side["exposed_us"] = np.nan
    return side.add_prefix(prefix)


def compare_communication(base: Run, new: Run) -> pd.DataFrame:
    """Per communication type, both sides: count, time and exposed time per step.

    Where communication.json exists, also transit, wait and synchronization per step.
    """
    table = _comm_side(base, "base_").join(_comm_side(new, "new_"), how="outer")
    for column in ("count", "total_us", "exposed_us"):
        for side in ("base_", "new_"):
            table[side + column] = table.get(side + column, pd.Series(dtype=float)).fillna(0.0)
    table["delta_count"] = table["new_count"] - table["base_count"]
    table["delta_us"] = table["new_total_us"] - table["base_total_us"]
    table["delta_exposed_us"] = table["new_exposed_us"] - table["base_exposed_us"]
    table.index.name = "comm_type"
    return table.reset_index().sort_values("delta_us", ascending=False, kind="stable")



LINKS = ("hccs", "rdma", "pcie", "sio", "sdma")


def _group_side(run: Run, prefix: str) -> pd.DataFrame:
    comm = run.summary.comm
    if comm.empty:
        return pd.DataFrame()
    by_group = comm.groupby("group")
    units = comm[["group", "rank", "step"]].drop_duplicates().groupby("group").size().clip(lower=1)
    sums = by_group[["elapse_us", "transit_us", "wait_us", "synchronization_us"]].sum()
    side = sums.div(units, axis=0)
    side["ops"] = by_group["ops"].sum() / units
    side["ranks"] = by_group["rank"].nunique()
    with np.errstate(divide="ignore", invalid="ignore"):
        side["wait_ratio"] = sums["wait_us"] / (sums["wait_us"] + sums["transit_us"])
        for link in LINKS:
            if f"{link}_mb" in comm:
                link_sums = by_group[[f"{link}_mb", f"{link}_us"]].sum()
                # MB per µs → GB/s: × 1e6 / 1024
                side[f"{link}_gbps"] = (link_sums[f"{link}_mb"] / link_sums[f"{link}_us"]
                                        * 1e6 / 1024).where(link_sums[f"{link}_us"] > 0)
    return side.add_prefix(prefix)


def compare_groups(base: Run, new: Run) -> pd.DataFrame:
    """Per communication group, both sides: ops, transit and wait (µs per step and rank).

    Also the wait ratio and the bandwidth per link type (GB/s).
    """
    table = _group_side(base, "base_").join(_group_side(new, "new_"), how="outer")
    if table.empty:
        return table
    table.index.name = "group"
    return table.reset_index()
