"""Non-compute time compared: collectives from their HCCL tasks, arrival skew, host time.

The readers turn a rank's HCCL tasks into one row per collective instance
(``Run.collectives``: elapsed split into transfer, wait and idle over every plane) and its
host side into per-step host figures (``Run.host_steps``). Here both sides become per-step
figures (µs per step and rank, as every other comparison) beside communication.json's:

* ``collective_parts`` — per communication type: elapsed, transfer, wait, idle, link
  transfer summed over planes and link MB, and the algorithm;
* ``collective_links`` — per (type, link type): transfer time and MB;
* ``collective_skew`` — per instance matched across ranks by (step, group, type, order),
  the arrival skew (last start − first start) and the last rank; per (type, group) the
  median and largest skew, who arrives last how often, the waiting it costs, and how
  many ranks the group holds that were not profiled (its tasks name them) with the
  waiting no profiled arrival explains;
* ``host_time`` — host busy, dataloader, Free and the host-bound part of Free.

Ranks' clocks are their hosts' local clocks: skew across hosts includes clock offset, which
the docs say (docs/design.md "Collectives from their tasks").
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..schema import Run

TASKS = "hccl_tasks"
JSON = "communication.json"
PART_FIELDS = ("elapsed_us", "transfer_us", "wait_us", "idle_us", "link_busy_us")
HOST_FIELDS = ("step_host_us", "host_busy_us", "dataloader_us", "free_us", "host_bound_us",
               "free_other_us", "compile_us")
SKEW_FIELDS = ("comm_type", "group", "instances", "ranks", "median_skew_us", "max_skew_us",
               "last_rank", "last_share", "cost_us", "last_cost_us", "group_ranks",
               "unprofiled", "unseen_wait_us")
# Profiler settings that cost host time themselves (stack walks, shape records, allocator
# hooks): quoted beside a Free that grew.
HOST_SETTINGS = ("with_stack", "record_shapes", "profile_memory")


def _task_units(run: Run) -> int:
    """(rank, step) units of the ranks that have tasks: the divisor of per-step figures."""
    c = run.collectives
    assert c is not None  # called only for a run with tasks
    ranks = set(run.collectives_source) or set(c["rank"].unique())
    ops = run.summary.ops
    if len(ops):
        mine = ops[ops["rank"].isin(ranks).to_numpy()]
        units = mine[["rank", "step"]].drop_duplicates()
        if len(units):
            return len(units)
    return max(len(c[["rank", "step"]].drop_duplicates()), 1)


def _algorithm(values: pd.Series) -> str:
    """The most frequent recorded algorithm (ties: the first in name order), else ``""``."""
    known = values.astype(str)
    known = known[known != ""]
    if known.empty:
        return ""
    counts = known.value_counts()
    return str(sorted(counts[counts == counts.max()].index)[0])


def collective_parts(run: Run) -> pd.DataFrame | None:
    """Per communication type of one run, from its tasks: µs per step and rank; None without."""
    c = run.collectives
    if c is None or c.empty:
        return None
    units = _task_units(run)
    by_type = c.groupby(c["comm_type"].astype(str), sort=True)
    parts = by_type[list(PART_FIELDS)].sum() / units
    parts["link_mb"] = by_type["link_bytes"].sum() / units / 1e6
    parts["algorithm"] = by_type["algorithm"].agg(_algorithm)
    return parts


def with_parts(table: pd.DataFrame, base: Run, new: Run) -> pd.DataFrame:
    """``table`` (per comm_type) with both sides' task figures and where the verdict's come from.

    Adds ``{side}_task_{elapsed,transfer,wait,idle,link_busy}_us``, ``{side}_task_link_mb``,
    ``{side}_algorithm`` and ``parts_source``: ``hccl_tasks`` when both sides have tasks
    for the type, else ``communication.json`` when both have its wait figures, else None.
    """
    out = table.set_index("comm_type")
    for side, run in (("base", base), ("new", new)):
        parts = collective_parts(run)
        names = [f"{side}_task_{f}" for f in PART_FIELDS] + [f"{side}_task_link_mb",
                                                              f"{side}_algorithm"]
        if parts is None:
            for name in names:
                out[name] = None if name.endswith("algorithm") else np.nan
            continue
        parts = parts.rename(columns={**{f: f"{side}_task_{f}" for f in PART_FIELDS},
                                      "link_mb": f"{side}_task_link_mb",
                                      "algorithm": f"{side}_algorithm"})
        out = out.join(parts, how="left")
        out[f"{side}_algorithm"] = out[f"{side}_algorithm"].astype(object).where(
            out[f"{side}_algorithm"].notna() & (out[f"{side}_algorithm"] != ""), None)
    tasks = out["base_task_elapsed_us"].notna() & out["new_task_elapsed_us"].notna()
    json_ok = pd.Series(False, index=out.index)
    if "base_wait_us" in out and "new_wait_us" in out:
        json_ok = out["base_wait_us"].notna() & out["new_wait_us"].notna()
    source = pd.Series(None, index=out.index, dtype=object)
    source[json_ok.to_numpy(bool)] = JSON
    source[tasks.to_numpy(bool)] = TASKS
    out["parts_source"] = source
    return out.reset_index()


def collective_links(base: Run, new: Run) -> pd.DataFrame:
    """Per (type, link type): transfer µs and MB per step and rank of both sides."""
    sides = []
    for side, run in (("base", base), ("new", new)):
        links, c = run.collective_links, run.collectives
        if links is None or c is None or links.empty:
            continue
        types = c[["rank", "op", "comm_type"]].astype({"comm_type": str})
        joined = links.astype({"link_type": str}).merge(types, on=["rank", "op"], how="left")
        units = _task_units(run)
        grouped = joined.groupby(["comm_type", "link_type"], sort=True)
        frame = pd.DataFrame({f"{side}_transfer_us": grouped["transfer_us"].sum() / units,
                              f"{side}_mb": grouped["bytes"].sum() / units / 1e6})
        sides.append(frame)
    if not sides:
        return pd.DataFrame()
    table = sides[0] if len(sides) == 1 else sides[0].join(sides[1], how="outer")
    for side in ("base", "new"):
        for column in (f"{side}_transfer_us", f"{side}_mb"):
            if column not in table:
                table[column] = np.nan
    return table.reset_index()


INSTANCE_KEYS = ["step", "group", "comm_type", "seq"]


def arrivals(run: Run) -> pd.DataFrame:
    """Per (collective instance seen on several ranks, rank): when the rank arrived.

    Instances match across ranks by (step, group, type, order within group and type on
    the rank). Columns: INSTANCE_KEYS, ``rank``, ``ranks`` (profiled ranks in the
    instance), ``late_us`` (own start − first start: how late the rank came),
    ``behind_us`` (last start − own start: what the last arrival costs it),
    ``unseen_us`` (its wait before its first transfer less ``behind_us``, at least 0:
    waiting that no profiled rank's arrival explains), ``last`` (it started last; ties
    go to the higher rank) and ``group_ranks`` (ranks its tasks name). Empty without
    collectives on two ranks.
    """
    c = run.collectives
    if c is None or c.empty or c["rank"].nunique() < 2:
        return pd.DataFrame()
    frame = c[["rank", *INSTANCE_KEYS, "start_ns", "sync_wait_us", "group_ranks"]].astype(
        {"group": str, "comm_type": str})
    frame = frame.assign(step=frame["step"].astype("float64").fillna(-1))
    grouped = frame.groupby(INSTANCE_KEYS, sort=False)
    first, last = grouped["start_ns"].transform("min"), grouped["start_ns"].transform("max")
    frame = frame.assign(ranks=grouped["rank"].transform("nunique"),
                         late_us=(frame["start_ns"] - first) / 1000,
                         behind_us=(last - frame["start_ns"]) / 1000)
    frame["unseen_us"] = (frame["sync_wait_us"] - frame["behind_us"]).clip(lower=0.0)
    latest = frame.sort_values(["start_ns", "rank"], kind="stable").groupby(
        INSTANCE_KEYS, sort=False).tail(1).index
    frame["last"] = frame.index.isin(latest)
    frame = frame[frame["ranks"] >= 2]
    return frame.drop(columns=["start_ns", "sync_wait_us"]).sort_values(
        [*INSTANCE_KEYS, "rank"], kind="stable").reset_index(drop=True)


def instances(per: pd.DataFrame) -> pd.DataFrame:
    """Per collective instance seen on several ranks: its skew, last rank and cost.

    From a run's ``arrivals``: ``skew_us`` = last start − first start; ``last_rank`` the rank
    that started last; ``cost_us`` the mean over ranks of (last start − own start): the
    waiting the last arrival costs a rank on average; ``unseen_us`` the mean over ranks
    of the waiting no profiled arrival explains; ``group_ranks`` the most ranks one
    rank's tasks name in it (0: not recorded).
    """
    if per.empty:
        return pd.DataFrame()
    grouped = per.groupby(INSTANCE_KEYS, sort=True)
    out = grouped.agg(ranks=("rank", "nunique"), skew_us=("late_us", "max"),
                      cost_us=("behind_us", "mean"), unseen_us=("unseen_us", "mean"),
                      group_ranks=("group_ranks", "max"))
    out["last_rank"] = per[per["last"]].set_index(INSTANCE_KEYS)["rank"]
    return out.reset_index()


def collective_skew(per: pd.DataFrame) -> pd.DataFrame:
    """Per (type, group) of one run's ``arrivals``: SKEW_FIELDS, µs per step (means over ranks).

    ``cost_us``: the waiting every late arrival costs, per step and rank; ``last_rank``: the
    rank whose late arrivals cost most of it (``last_cost_us``), ``last_share`` the share
    of instances it starts last. A rank last by microseconds in most instances is not the
    one to look at when another is last by milliseconds once. ``group_ranks``: the most
    ranks one instance's tasks name on one rank (a lower bound of the group's size; 0 when
    the tasks name none); ``unprofiled``: how many of them at least were not profiled
    (``group_ranks`` less the profiled ranks, never below 0); ``unseen_wait_us``: the
    waiting per step and rank before the first transfer that no profiled rank's late
    arrival explains — with unprofiled ranks, the wait for them.
    """
    per = instances(per)
    if per.empty:
        return pd.DataFrame(columns=list(SKEW_FIELDS))
    steps = max(per["step"].nunique(), 1)
    keys = ["comm_type", "group"]
    grouped = per.groupby(keys, sort=True)
    table = grouped.agg(instances=("seq", "size"), ranks=("ranks", "max"),
                        median_skew_us=("skew_us", "median"), max_skew_us=("skew_us", "max"),
                        cost_us=("cost_us", "sum"), group_ranks=("group_ranks", "max"),
                        unseen_wait_us=("unseen_us", "sum"))
    # Per (type, group, rank last): the waiting its late arrivals caused and how often;
    # the rank that caused most (then the more often last, then the lower rank) is named.
    caused = per.groupby([*keys, "last_rank"], sort=True)["cost_us"].agg(["sum", "size"])
    caused = caused.reset_index().sort_values(
        [*keys, "sum", "size", "last_rank"], ascending=[True, True, False, False, True],
        kind="stable").groupby(keys, sort=True).head(1).set_index(keys)
    table["last_rank"] = caused["last_rank"].astype(np.int64)
    table["last_share"] = caused["size"] / table["instances"]
    table["last_cost_us"] = caused["sum"] / steps
    table["cost_us"] /= steps
    table["unseen_wait_us"] /= steps
    table["unprofiled"] = (table["group_ranks"] - table["ranks"]).clip(lower=0)
    return table.reset_index()[list(SKEW_FIELDS)]


def compare_skew(base: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """Both runs' skew per (type, group) from their ``arrivals``, ``side`` first."""
    frames = [collective_skew(per).assign(side=side) for side, per in (("base", base),
                                                                       ("new", new))]
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame()
    table = pd.concat(frames, ignore_index=True)
    return table[["side", *SKEW_FIELDS]]


def skew_note(base: Run, new: Run) -> str:
    """Why no skew is shown, or ``""`` when some side shows one."""
    counts = [run.collectives["rank"].nunique() if run.collectives is not None
              and len(run.collectives) else 0 for run in (base, new)]
    if max(counts) >= 2:
        return ""
    if max(counts) == 1:
        return ("arrival skew cannot be seen from one rank: a collective's wait is the time "
                "until its peers arrive, and their starts are in their own profiles")
    return ""


@dataclass(frozen=True)
class HostTime:
    """Host and Free figures of both runs, µs per step and rank (means over (rank, step)).

    ``base``/``new`` map HOST_FIELDS to values (NaN when unknown); ``settings`` the profiler
    settings among HOST_SETTINGS that differ, as (setting, base, new); ``launches`` where
    each run's launch times come from (its ranks' sources joined, ``""`` when unknown).
    """

    base: dict[str, float]
    new: dict[str, float]
    settings: tuple[tuple[str, str, str], ...] = ()
    launches: tuple[str, str] = ("", "")

    def delta(self, name: str) -> float:
        """New − base of one HOST_FIELDS figure."""
        return self.new[name] - self.base[name]

    @property
    def host_bound_share(self) -> float:
        """Share of Δ Free that is Δ host-bound; NaN when Free did not grow."""
        grown = self.delta("free_us")
        return self.delta("host_bound_us") / grown if grown > 0 else float("nan")


def _host_side(run: Run) -> dict[str, float] | None:
    h = run.host_steps
    if h is None or h.empty:
        return None
    return {name: float(h[name].mean()) if h[name].notna().any() else float("nan")
            for name in HOST_FIELDS}


def host_settings(base: Run, new: Run) -> tuple[tuple[str, str, str], ...]:
    """The HOST_SETTINGS both runs record with different values."""
    b, n = base.meta.profiler_config, new.meta.profiler_config
    return tuple((s, b[s], n[s]) for s in HOST_SETTINGS if s in b and s in n and b[s] != n[s])


def host_time(base: Run, new: Run) -> HostTime | None:
    """Both runs' host figures; None unless both record a host side."""
    b, n = _host_side(base), _host_side(new)
    if b is None or n is None:
        return None
    return HostTime(b, n, host_settings(base, new),
                    (_launch_sources(base), _launch_sources(new)))


def _launch_sources(run: Run) -> str:
    """The run's launch sources, distinct, in order of first rank: ``"HostToDevice flows"``."""
    return "; ".join(dict.fromkeys(v for _, v in sorted(run.host_launch_source.items()) if v))
