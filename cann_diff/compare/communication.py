"""Communication per type and per group, base vs new (µs per step and rank).

communication.json splits an op's elapsed time into transit, wait and idle:
elapse = transit + wait + idle, synchronization being part of wait. Every real file of
the public test data we checked satisfies it to float rounding, so the three parts are
reported side by side (``base_transit_us``, ``base_wait_us``, ``base_idle_us`` and their
``new_`` twins).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..schema import Note, Run
from .ledger import JSON, TASKS, both_have_tasks, group_parts, same_groups
from .operators import count_units

COMM_JSON_FIELDS = ("elapse_us", "transit_us", "wait_us", "synchronization_us", "idle_us",
                    "transit_mb")
GROUP_TIMES = ("elapse_us", "transit_us", "wait_us", "synchronization_us", "idle_us")
LINKS = ("hccs", "rdma", "pcie", "sio", "sdma")

# How groups of two runs are paired, most telling first. A group's hash is a fresh
# number in every collection, so it pairs only groups of the same collection (two ranks
# of one job); the other keys say what the group is. Each rung pairs only keys that one
# group holds on each side.
PAIRING = (
    ("name", ("group",)),
    ("ranks", ("pair_members",)),
    ("ranks", ("pair_members", "collectives")),
    ("signature", ("collectives", "pair_ranks", "data_mb")),
    ("collectives", ("collectives", "pair_ranks")),
)
PAIR_KEYS = ("pair_members", "pair_ranks", "data_mb")
PAIRED_BY = tuple(dict.fromkeys(rung for rung, _ in PAIRING))


def _comm_side(run: Run, prefix: str) -> pd.DataFrame:
    ops, comm = run.summary.ops, run.summary.comm
    comm_ops = ops[(ops["category"] == "communication").to_numpy()]
    n_units = count_units(ops)
    grouped = comm_ops.groupby(comm_ops["comm_type"].astype(str))
    side = grouped[["count", "total_us", "exposed_us"]].sum() / n_units
    if len(comm):
        by_type = comm.groupby(comm["comm_type"].astype(str))
        comm_units = max(len(comm[["rank", "step"]].drop_duplicates()), 1)
        fields = [f for f in COMM_JSON_FIELDS if f in comm]
        side = side.join(by_type[fields].sum() / comm_units, how="outer")
        if comm_ops.empty:  # no kernels (cluster summary): counts and time from the json
            side["count"] = by_type["ops"].sum() / comm_units
            side["total_us"] = side["elapse_us"]
            side["exposed_us"] = np.nan
    return side.add_prefix(prefix)


def compare_communication(base: Run, new: Run) -> pd.DataFrame:
    """Per communication type, both sides: count, time and exposed time per step.

    Where communication.json exists, also elapse split into transit, wait and idle
    (``*_transit_us``, ``*_wait_us``, ``*_idle_us``; synchronization is part of wait), per
    step.
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


def _joined(parts: pd.Series) -> pd.Series:
    """Per group (first index level), its strings joined by ``,`` in index order."""
    return parts.groupby(level=0, sort=True).agg(",".join)


def _group_side(run: Run, shared_ranks: set[int], tasks_too: bool = False) -> pd.DataFrame:
    """Per group of one run: per-step figures and what the group is.

    ``members`` are the ranks whose communication.json records the group, ``collectives``
    its ops per step by type (``AllGather×1,AllReduce×3``); ``pair_members`` /
    ``pair_ranks`` the members among ``shared_ranks`` (the ranks both runs read; all of
    them when the runs share none) and ``data_mb`` the MB moved per step and rank to 3
    significant digits pair groups across runs.
    """
    comm = run.summary.comm
    if comm.empty:
        return pd.DataFrame()
    comm = comm.assign(group=comm["group"].fillna("").astype(str),
                       comm_type=comm["comm_type"].fillna("").astype(str))
    by_group = comm.groupby("group", sort=True)
    units = comm[["group", "rank", "step"]].drop_duplicates().groupby("group").size().clip(lower=1)
    times = [c for c in GROUP_TIMES if c in comm]
    links = [link for link in LINKS if f"{link}_mb" in comm]
    link_columns = [f"{link}_{unit}" for link in links for unit in ("mb", "us")]
    sums = by_group[[*times, "ops", "transit_mb", *link_columns]].sum()  # one pass
    side = sums[times].div(units, axis=0)
    side["ops"] = sums["ops"] / units
    side["ranks"] = by_group["rank"].nunique()
    side["transit_mb"] = sums["transit_mb"] / units
    with np.errstate(divide="ignore", invalid="ignore"):
        side["wait_ratio"] = sums["wait_us"] / (sums["wait_us"] + sums["transit_us"])
        for link in links:
            # MB per µs → GB/s as the profiler writes Bandwidth(GB/s): MB/ms, so × 1e3
            side[f"{link}_gbps"] = (sums[f"{link}_mb"] / sums[f"{link}_us"]
                                    * 1e3).where(sums[f"{link}_us"] > 0)
    ranks = comm[["group", "rank"]].drop_duplicates().sort_values(["group", "rank"])
    side["members"] = _joined(ranks.set_index("group")["rank"].astype(str))
    shared = ranks[ranks["rank"].isin(shared_ranks)] if shared_ranks else ranks
    side["pair_members"] = _joined(shared.set_index("group")["rank"].astype(str))
    side["pair_members"] = side["pair_members"].fillna("")
    counts = shared.groupby("group").size().reindex(side.index)
    side["pair_ranks"] = counts.map("{:.0f}".format).where(counts.notna(), "")
    per_type = comm.groupby(["group", "comm_type"], sort=True)["ops"].sum()
    per_step = per_type / units.reindex(per_type.index.get_level_values("group")).to_numpy()
    labels = per_type.index.get_level_values("comm_type") + "×" + \
        pd.Index(per_step.round(2).map("{:g}".format))
    side["collectives"] = _joined(pd.Series(labels, index=per_type.index))
    side["data_mb"] = side["transit_mb"].map("{:.3g}".format)
    return _from_tasks(side, run, tasks_too)


def _from_tasks(side: pd.DataFrame, run: Run, tasks_too: bool) -> pd.DataFrame:
    """The groups whose HCCL tasks the run holds take their transit, wait and idle from them.

    Only when ``tasks_too`` (both runs have tasks): communication.json splits one plane
    (compare/ledger.py). Bandwidth and synchronization stay communication.json's own.
    """
    side["parts_source"] = JSON
    tasks = group_parts(run) if tasks_too else None
    if tasks is None:
        return side
    same = same_groups(side, tasks)
    hit = same.notna().to_numpy()
    if not hit.any():
        return side
    for column in ("transit_us", "wait_us", "idle_us"):
        if column in side:
            side.loc[hit, column] = tasks.loc[same[hit], column].to_numpy()
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = side["wait_us"] / (side["wait_us"] + side["transit_us"])
    side.loc[hit, "wait_ratio"] = ratio[hit]
    side.loc[hit, "parts_source"] = TASKS
    return side


def _rung_keys(base: pd.DataFrame, new: pd.DataFrame,
               columns: tuple[str, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Each group's key on ``columns`` as one integer, numbered over both sides.

    -1 where a part is empty: an unnamed group, or no member among the shared ranks, says
    nothing. Numbered as the match stage numbers a rung (``match._rung``).
    """
    both = pd.concat([base[list(columns)], new[list(columns)]], ignore_index=True).astype(str)
    keys = both.groupby(list(columns), sort=False, dropna=False).ngroup().to_numpy(copy=True)
    keys[(both == "").any(axis=1).to_numpy()] = -1
    return keys[:len(base)], keys[len(base):]


def _held_once(keys: np.ndarray, open_: np.ndarray) -> np.ndarray:
    """Positions of the open groups whose key is set and no other open group holds."""
    at = np.flatnonzero(open_ & (keys >= 0))
    _, where, counts = np.unique(keys[at], return_inverse=True, return_counts=True)
    return at[counts[where] == 1]


def _pair(base: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """Pair the groups of two runs down PAIRING; one row per pair or one-sided group.

    A rung pairs a key that exactly one still-unpaired group holds on each side, in the
    base's order. Keys are integers over both sides (a few array operations a rung, not a
    merge: ≈ 10 ms a rung on a handful of groups).
    """
    base = base.rename_axis("group").reset_index()
    new = new.rename_axis("group").reset_index()
    base_groups, new_groups = base["group"], new["group"]
    base_open = np.ones(len(base), dtype=bool)
    new_open = np.ones(len(new), dtype=bool)
    found = []
    for paired_by, columns in PAIRING:
        b = n = np.zeros(0, dtype=np.int64)
        if base_open.any() and new_open.any():  # else no rung can pair any more
            base_keys, new_keys = _rung_keys(base, new, columns)
            b, n = _held_once(base_keys, base_open), _held_once(new_keys, new_open)
            _, in_b, in_n = np.intersect1d(base_keys[b], new_keys[n], return_indices=True)
            order = np.argsort(in_b, kind="stable")
            b, n = b[in_b[order]], n[in_n[order]]
        found.append(pd.DataFrame({"base_group": _at(base_groups, b),
                                   "new_group": _at(new_groups, n), "paired_by": paired_by}))
        base_open[b] = new_open[n] = False
    return pd.concat([*found,
                      pd.DataFrame({"base_group": _at(base_groups, np.flatnonzero(base_open))}),
                      pd.DataFrame({"new_group": _at(new_groups, np.flatnonzero(new_open))})],
                     ignore_index=True)


def _at(groups: pd.Series, positions: np.ndarray) -> pd.Series:
    return groups.iloc[positions].reset_index(drop=True)


def _pairing_note(table: pd.DataFrame) -> Note | None:
    """The pairing rule and what it did; None when every group paired by its own id."""
    counts = table["paired_by"].value_counts()
    if counts.get("name", 0) == len(table):
        return None
    paired = ", ".join(f"{counts[p]} by {p}" for p in PAIRED_BY if p in counts) or "none"
    alone = [f"{table[f'{other}_group'].isna().sum()} only in {side}"
             for side, other in (("base", "new"), ("new", "base"))
             if table[f"{other}_group"].isna().any()]
    return Note("groups-paired",
                "communication groups are paired by what they are, not by hash (a fresh "
                "number in every collection): same id, else same member ranks (among the "
                "ranks both runs read), else same collectives per step, rank count and data "
                "per step, else same collectives and rank count; only one-to-one matches "
                f"pair. Paired: {paired}" + (f"; {', '.join(alone)}" if alone else "") + ".")


def compare_groups(base: Run, new: Run) -> tuple[pd.DataFrame, list[Note]]:
    """Per communication group, both sides: ops, elapse, transit, wait and idle per step.

    Groups are paired across the runs by what they are (PAIRING), not by hash; the table
    keeps both hashes (``base_group``, ``new_group``), says how each row was paired
    (``paired_by``; None for a group on one side only) and keeps ``group`` (the base hash,
    else the new one) for display. Also the wait ratio, the bandwidth per link type
    (GB/s) and what pairs groups: ``*_members``, ``*_collectives``, ``*_ranks``. Returns
    the table and a note stating the pairing rule, unless every group paired by its own
    id (then the rule changed nothing).
    """
    ranks = [set(run.summary.comm["rank"]) if len(run.summary.comm) else set()
             for run in (base, new)]
    shared = ranks[0] & ranks[1]
    tasks = both_have_tasks(base, new)
    base_side, new_side = _group_side(base, shared, tasks), _group_side(new, shared, tasks)
    if base_side.empty and new_side.empty:
        return pd.DataFrame(), []
    base_side = base_side if len(base_side) else new_side.iloc[0:0]
    new_side = new_side if len(new_side) else base_side.iloc[0:0]
    table = _pair(base_side, new_side)
    keys = list(PAIR_KEYS)
    table = table.join(base_side.drop(columns=keys).add_prefix("base_"), on="base_group")
    table = table.join(new_side.drop(columns=keys).add_prefix("new_"), on="new_group")
    table.insert(0, "group", table["base_group"].fillna(table["new_group"]))
    order = table["paired_by"].map({p: i for i, p in enumerate(PAIRED_BY)}).fillna(len(PAIRED_BY))
    table = table.assign(_order=order).sort_values(["_order", "group"], kind="stable")
    table = table.drop(columns="_order").reset_index(drop=True)
    note = _pairing_note(table)
    return table, [note] if note else []
