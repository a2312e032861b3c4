"""One source per quantity: a collective's transfer, wait and idle from its HCCL tasks.

communication.json splits each op's elapsed time on one HCCL plane; the HCCL tasks see
every plane (docs/design.md "Collectives from their tasks"). A wait on another plane shows
in communication.json as idle, so the two disagree most where waiting matters (the real
910A → 910B pair: wait 58.99 → 5.94 ms there, 58.99 → 101.77 ms from the tasks). Wherever a
run has tasks, every table that shows transfer, wait or idle — per type, per group, per
rank — takes them from the tasks; communication.json's own figures stay beside them,
labelled. These helpers give the tasks' figures per rank and per group, µs per step and
rank, on the same (rank, step) units as the other per-step figures.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..schema import Run

TASKS = "hccl_tasks"
JSON = "communication.json"


def both_have_tasks(base: Run, new: Run) -> bool:
    """Whether both runs hold HCCL tasks: only then do tables take their parts from them.

    A pair whose one run has tasks and the other communication.json alone compares both on
    communication.json, so that a Δ never sets one plane against every plane.
    """
    return all(run.collectives is not None and len(run.collectives) for run in (base, new))
# The tasks' parts under the names communication.json's figures go by in the tables.
AS_JSON = {"transfer_us": "transit_us", "wait_us": "wait_us", "idle_us": "idle_us"}


def _units_by_rank(run: Run) -> pd.Series:
    """Per rank with tasks, its (rank, step) units: the steps its kernels cover, else the tasks'."""
    c = run.collectives
    assert c is not None
    ops = run.summary.ops
    tasks = c[["rank", "step"]].drop_duplicates().groupby("rank").size()
    if len(ops):
        own = ops[["rank", "step"]].drop_duplicates().groupby("rank").size()
        tasks = own.reindex(tasks.index).fillna(tasks)
    return tasks.clip(lower=1)


def rank_parts(run: Run) -> pd.DataFrame | None:
    """Per rank with HCCL tasks: transit (transfer), wait and idle, µs per step; None without."""
    c = run.collectives
    if c is None or c.empty:
        return None
    sums = c.groupby("rank")[list(AS_JSON)].sum().rename(columns=AS_JSON)
    return sums.div(_units_by_rank(run), axis=0)


def group_parts(run: Run) -> pd.DataFrame | None:
    """Per task group: the parts per step and rank, its ranks and its collectives per step.

    ``collectives`` reads as communication.json's groups do (``AllReduce×4``), so that a
    task group and a communication.json group of one run can be told to be the same group
    although the two sources name groups differently (a hash there, ``Group 0`` here).
    """
    c = run.collectives
    if c is None or c.empty:
        return None
    frame = c.assign(group=c["group"].astype(str), comm_type=c["comm_type"].astype(str))
    units = frame[["group", "rank", "step"]].drop_duplicates().groupby("group").size()
    units = units.clip(lower=1)
    side = frame.groupby("group")[list(AS_JSON)].sum().rename(columns=AS_JSON)
    side = side.div(units, axis=0)
    side["members"] = frame.groupby("group")["rank"].agg(
        lambda ranks: ",".join(str(r) for r in sorted(set(ranks))))
    per_type = frame.groupby(["group", "comm_type"]).size()
    per_step = per_type / units.reindex(per_type.index.get_level_values("group")).to_numpy()
    labels = pd.Series(per_type.index.get_level_values("comm_type") + "×"
                       + pd.Index(per_step.round(2).map("{:g}".format)), index=per_type.index)
    side["collectives"] = labels.groupby(level=0).agg(",".join)
    return side


def same_groups(json_side: pd.DataFrame, tasks: pd.DataFrame) -> pd.Series:
    """Per communication.json group, the task group that is the same group, or NaN.

    Same members and the same collectives per step, held by one group on each side.
    """
    def key(frame: pd.DataFrame) -> pd.Series:
        return frame["members"].astype(str) + "|" + frame["collectives"].astype(str)

    theirs = key(tasks)
    unique = theirs[~theirs.duplicated(keep=False)]
    lookup = pd.Series(unique.index, index=unique.to_numpy())
    mine = key(json_side)
    found = mine.map(lookup)
    found[mine.duplicated(keep=False).to_numpy()] = np.nan
    return found


def one_source(table: pd.DataFrame) -> pd.DataFrame:
    """The per-type table with transit, wait and idle from one source.

    Where ``parts_source`` is the tasks (both runs have them for the type),
    ``{side}_transit_us`` etc. become the tasks' figures; communication.json's own stay as
    ``{side}_json_transit_us`` etc. for the table that shows both sources, labelled.
    ``{side}_synchronization_us`` stays communication.json's (part of its wait): the
    tasks' synchronization wait is a part of theirs, not shown on its own.
    """
    out = table.copy()
    tasks = (out["parts_source"] == TASKS).to_numpy(bool) if "parts_source" in out \
        else np.zeros(len(out), bool)
    for side in ("base", "new"):
        for task, name in (("transfer_us", "transit_us"), ("wait_us", "wait_us"),
                           ("idle_us", "idle_us")):
            mine = f"{side}_{name}"
            if mine not in out:
                out[mine] = np.nan
            out[f"{side}_json_{name}"] = out[mine]
            out[mine] = np.where(tasks, out[f"{side}_task_{task}"], out[mine])
    return out


def on_steps(run: Run, steps: tuple[int, ...], every: bool) -> Run:
    """The run's step-part figures restricted to ``steps`` (the compared steps).

    The step table, the verdict and the sections that split a step part — communication
    by type, the collectives, Free, per rank — cover the same steps; with warm-up steps
    screened out those are not every step. ``every``: nothing was screened (the run as it
    is). Per-operator statistics keep every step (their samples index ``summary.ops``).
    """
    from dataclasses import replace

    if every or not steps:
        return run
    chosen = set(steps)

    def kept(frame: pd.DataFrame | None) -> pd.DataFrame | None:
        if frame is None or "step" not in frame or not len(frame):
            return frame
        return frame[frame["step"].isin(chosen).to_numpy(bool)].reset_index(drop=True)

    # The samples, attributes and pipes (indexed by the summary's rows) and the adjacency
    # cells are for the per-operator statistics, which keep every step: not carried here.
    summary = replace(run.summary, ops=kept(run.summary.ops), comm=kept(run.summary.comm),
                      samples=run.summary.samples.iloc[:0], adjacent=None,
                      attributes=None, pipes=None)
    return replace(run, summary=summary, steps=kept(run.steps),
                   collectives=kept(run.collectives),
                   collective_links=kept(run.collective_links),
                   host_steps=kept(run.host_steps))
