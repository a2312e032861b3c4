"""``late-rank``: a rank arrives at a collective later than it did, and the others wait.

A collective's wait on a rank is the time until its peers arrive; the rank that arrives
last waits least and is where to look. Per (type, group) the skew table
(compare/non_compute.py) says whose late arrivals cost the others most waiting. A
finding is about change: the new run's rank causing ``late_rank_share`` of a group's
arrival waiting, at least ``material_pct`` of the new step, is named only when the
waiting its late arrivals cost grew since base by at least ``material_pct`` of the base
step and, where the instances allow a test, its lateness (own start − first start, per
instance) is significantly larger (Mann-Whitney, Bonferroni over the ranks judged). A
rank last in both runs without growth is described (``late_in_both``), not raised.

A group whose tasks name more ranks than were profiled is waiting, in part, for ranks no
profile shows: the finding then speaks of the profiled ranks only, and
``unprofiled_peers`` says how many ranks are missing and how much waiting no profiled
arrival explains.

The finding names that rank and where its step differs from the other ranks': its
computing and Free (host gaps) against their median, and the operators it spends most
extra time in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..compare import Comparison
from ..compare.stats import mann_whitney_by_group, smallest_p_mann_whitney
from ..schema import Note
from .base import Finding, ms

SHOWN_OPERATORS = 3
NOTHING_US = 10.0  # a per-step difference under 10 µs is not where a rank spends its time


def _others_median(table: pd.DataFrame, column: str, rank: int) -> float:
    others = table.loc[table["rank"] != rank, column].dropna()
    return float(others.median()) if len(others) else math.nan


def _where(cmp: Comparison, rank: int) -> tuple[str, dict]:
    """Where the late rank's step differs from the other ranks' median, in words."""
    ranks = cmp.ranks
    data: dict = {}
    pieces = []
    if len(ranks) and rank in set(ranks["rank"]):
        mine = ranks.set_index("rank").loc[rank]
        for column, word in (("new_computing", "computing"), ("new_free", "Free (host gaps)")):
            if column in ranks:
                extra = float(mine[column]) - _others_median(ranks, column, rank)
                if math.isfinite(extra) and abs(extra) >= NOTHING_US:
                    data[word.split(" ")[0].lower() + "_extra_us"] = extra
                    pieces.append(f"{word} {'+' if extra >= 0 else '-'}{ms(abs(extra))}")
    ops = cmp.new.summary.ops
    if len(ops):
        compute = ops[(ops["category"] != "communication").to_numpy()]
        steps = compute.groupby("rank")["step"].nunique(dropna=False).clip(lower=1)
        per = compute.groupby(["rank", compute["op_type"].astype(str)], observed=True)[
            "total_us"].sum().unstack(fill_value=0.0).div(steps, axis=0)
        if rank in per.index and len(per) >= 2:
            extra = (per.loc[rank] - per.drop(index=rank).median()).sort_values(ascending=False)
            extra = extra[extra >= NOTHING_US].head(SHOWN_OPERATORS)
            data["operators"] = {str(k): float(v) for k, v in extra.items()}
            if len(extra):
                pieces.append("largest: " + ", ".join(f"{k} +{ms(v)}" for k, v in extra.items()))
    text = (f" Against the other ranks' median, its step spends {'; '.join(pieces)}."
            if pieces else "")
    return text, data


def paired_groups(skew: pd.DataFrame) -> pd.DataFrame:
    """The new run's skew rows, each with its base row's fields (``base_*``, NaN when none).

    A (type, group) pairs with the base row of the same id; a group id is a fresh number
    in every collection (and a trace names ``Group 0`` what a db names by hash), so a type
    that holds one unpaired group on each side pairs those two. Anything else stays alone.
    """
    if skew.empty:
        return pd.DataFrame()
    keys = ["comm_type", "group"]
    base = skew[skew["side"] == "base"].drop(columns="side")
    new = skew[skew["side"] == "new"].drop(columns="side").reset_index(drop=True)
    same = new.set_index(keys).index.isin(base.set_index(keys).index)
    alone_base = base[~base.set_index(keys).index.isin(new.set_index(keys).index)]
    one = pd.concat([new[~same].groupby("comm_type")["group"].agg(["size", "first"]),
                     alone_base.groupby("comm_type")["group"].agg(["size", "first"])],
                    axis=1, keys=["new", "base"], join="inner")
    one = one[(one[("new", "size")] == 1) & (one[("base", "size")] == 1)]
    by_type = new["comm_type"].map(one[("base", "first")]).where(~same)
    new["base_group"] = new["group"].where(same, by_type)
    base = base.rename(columns={c: f"base_{c}" for c in base.columns})
    return new.merge(base, left_on=["comm_type", "base_group"],
                     right_on=["base_comm_type", "base_group"], how="left"
                     ).drop(columns="base_comm_type")


@dataclass(frozen=True)
class Judged:
    """One (type, group) whose new-run last rank causes most of the arrival waiting.

    ``caused_us``: the waiting its late arrivals cost per step and rank in new,
    ``base_caused_us`` in base (0 when it was never last there); ``late_us`` /
    ``base_late_us``: its lateness per instance (own start − first start, µs);
    ``p_value``: Mann-Whitney of the two, None when so few instances can never reach
    ``alpha`` (``tested`` False: the magnitude alone decides); ``changed``: the finding
    is raised.
    """

    row: pd.Series
    rank: int
    caused_us: float
    base_caused_us: float
    late_us: np.ndarray
    base_late_us: np.ndarray
    p_value: float | None
    tested: bool
    changed: bool

    @property
    def grown_us(self) -> float:
        """Growth of the waiting the rank's late arrivals cost, µs per step and rank."""
        return self.caused_us - self.base_caused_us


def _per_group(per: pd.DataFrame, comm_type: str, group: str, rank: int) -> pd.DataFrame:
    if per.empty:
        return per
    return per[(per["comm_type"] == comm_type) & (per["group"] == group)
               & (per["rank"] == rank)]



def judge(cmp: Comparison) -> list[Judged]:
    """The candidates for ``late-rank`` of the new run, each judged against base."""
    paired = paired_groups(cmp.skew)
    if paired.empty:
        return []
    t = cmp.thresholds
    new_floor = t.material_pct / 100 * max(cmp.step.new_us or 0.0, 1e-9)
    growth_floor = t.material_pct / 100 * max(cmp.step.base_us or 0.0, 1e-9)
    candidates = paired[(paired["last_cost_us"] >= new_floor)
                        & (paired["last_cost_us"] >= t.late_rank_share * paired["cost_us"])
                        & paired["base_group"].notna()]
    if candidates.empty:
        return []
    base_per, new_per = cmp.arrivals
    steps = {side: max(per["step"].nunique(), 1) if len(per) else 1
             for side, per in (("new", new_per), ("base", base_per))}
    level = t.alpha / len(candidates)  # Bonferroni over the ranks judged
    judged = []
    for _, row in candidates.iterrows():  # one per (type, group): a handful
        rank = int(row["last_rank"])
        mine = _per_group(new_per, row["comm_type"], row["group"], rank)
        before = _per_group(base_per, row["comm_type"], row["base_group"], rank)
        if before.empty:
            continue  # the rank took no part in base: nothing to compare with
        late, base_late = mine["late_us"].to_numpy(), before["late_us"].to_numpy()
        base_caused = _caused(base_per, row, rank) / steps["base"]
        tested = float(smallest_p_mann_whitney(np.array([len(base_late)]),
                                               np.array([len(late)]))[0]) < t.alpha
        p_value = float(mann_whitney_by_group(np.zeros(len(base_late), np.int64), base_late,
                                              np.zeros(len(late), np.int64), late, 1)[0]) \
            if tested else None
        grown = float(row["last_cost_us"]) - base_caused >= growth_floor
        # The direction the test speaks of: the Hodges-Lehmann shift (the median of the
        # pairwise differences), which one outlying arrival cannot turn as it turns a mean.
        later = float(np.median(np.subtract.outer(late, base_late))) > 0 \
            if len(late) and len(base_late) else False
        significant = p_value is not None and p_value < level and later
        judged.append(Judged(row, rank, float(row["last_cost_us"]), base_caused, late,
                             base_late, p_value, tested,
                             bool(grown and (significant or not tested))))
    return judged


def _caused(per: pd.DataFrame, row: pd.Series, rank: int) -> float:
    """The waiting ``rank``'s late arrivals cost in the paired base group (µs, all steps).

    Σ over the base instances it started last of their mean waiting over ranks.
    """
    group = per[(per["comm_type"] == row["comm_type"]) & (per["group"] == row["base_group"])]
    last = group[group["last"] & (group["rank"] == rank)]
    keys = ["step", "group", "comm_type", "seq"]
    costs = group.groupby(keys, sort=False)["behind_us"].mean()
    return float(costs.reindex(pd.MultiIndex.from_frame(last[keys])).sum()) if len(last) else 0.0


def _ranks(count) -> str:
    return f"{int(count)} rank{'s' if int(count) != 1 else ''}"


def _take(count) -> str:
    return "takes" if int(count) == 1 else "take"


def _unprofiled_text(row: pd.Series) -> str:
    if not row["unprofiled"] > 0:
        return ""
    return (f" Its tasks name {int(row['group_ranks'])} ranks of the group and "
            f"{int(row['ranks'])} were profiled: at least {_ranks(row['unprofiled'])} "
            f"{_take(row['unprofiled'])} part unseen, and the profiled ranks wait "
            f"{ms(row['unseen_wait_us'])} per step beyond what their own arrivals "
            "explain, so the rank they all wait for may be one that was not profiled.")


def late_ranks(cmp: Comparison, judged: list[Judged] | None = None) -> list[Finding]:
    """A finding per (type, group) whose late rank's lateness grew since base.

    ``judged``: ``judge(cmp)`` when the caller has it (it is computed once per report).
    """
    findings = []
    for j in judge(cmp) if judged is None else judged:
        if not j.changed:
            continue
        row = j.row
        shown = row["unprofiled"] > 0
        who = "the other profiled ranks" if shown else "the other ranks"
        test = (f"Mann-Whitney p = {j.p_value:.2g} on its lateness per instance"
                if j.tested else "not tested: too few instances to reach alpha")
        where, data = _where(cmp, j.rank)
        last = round(row["last_share"] * row["instances"])
        base_last = round(row["base_last_share"] * row["base_instances"]) \
            if row["base_last_rank"] == j.rank else None
        before = (f"{base_last} of {int(row['base_instances'])}" if base_last is not None
                  else "another rank's late arrivals cost most")
        findings.append(Finding(
            "late-rank", "medium",
            f"Rank {j.rank} arrives later at {row['comm_type']}: {ms(j.base_caused_us)} → "
            f"{ms(j.caused_us)} of waiting per step",
            f"Rank {j.rank} starts {last} of {int(row['instances'])} {row['comm_type']} "
            f"({row['group']}) last (base: {before}); its lateness behind the first rank "
            f"has median {ms(float(np.median(j.late_us)))} (base "
            f"{ms(float(np.median(j.base_late_us)))}; {test}). Its late arrivals cost "
            f"{who} {ms(j.caused_us)} of waiting per step and rank (base "
            f"{ms(j.base_caused_us)}), {j.caused_us / row['cost_us']:.0%} of the arrival "
            f"waiting among the profiled ranks.{_unprofiled_text(row)}{where}",
            float(j.grown_us),
            {"rank": j.rank, "comm_type": row["comm_type"], "group": row["group"],
             "instances": int(row["instances"]), "last_share": float(row["last_share"]),
             "median_skew_us": float(row["median_skew_us"]),
             "max_skew_us": float(row["max_skew_us"]), "cost_us": float(row["cost_us"]),
             "last_cost_us": float(j.caused_us), "base_last_cost_us": float(j.base_caused_us),
             "p_value": j.p_value, "tested": j.tested,
             "group_ranks": int(row["group_ranks"]), "unprofiled": int(row["unprofiled"]),
             **data}))
    return findings


def late_in_both(cmp: Comparison, judged: list[Judged] | None = None) -> tuple[Note, ...]:
    """A ``late-in-both`` Note per (type, group) whose rank arrives last in both runs.

    For the Per rank section: the same rank causes ``late_rank_share`` of the arrival
    waiting, at least ``material_pct`` of the step, in both runs, and it did not grow
    into a finding. Groups with unprofiled ranks get none (``unprofiled_peers`` speaks
    for them). ``data``: ``rank``, ``comm_type``, ``group``, ``base_cost_us``,
    ``new_cost_us`` (the waiting its late arrivals cost, µs per step and rank).
    """
    t = cmp.thresholds
    base_floor = t.material_pct / 100 * max(cmp.step.base_us or 0.0, 1e-9)
    notes = []
    for j in judge(cmp) if judged is None else judged:
        row = j.row
        if j.changed or row["unprofiled"] > 0 or row["base_unprofiled"] > 0 or \
                row["base_last_rank"] != j.rank or j.base_caused_us < base_floor or \
                j.base_caused_us < t.late_rank_share * row["base_cost_us"]:
            continue
        notes.append(Note(
            "late-in-both",
            f"Rank {j.rank} arrives last at {row['comm_type']} ({row['group']}) in both "
            f"runs: its late arrivals cost the other ranks {ms(j.base_caused_us)} of waiting "
            f"per step in base and {ms(j.caused_us)} in new; an imbalance of the job, not "
            "a change.",
            {"rank": j.rank, "comm_type": row["comm_type"], "group": row["group"],
             "base_cost_us": j.base_caused_us, "new_cost_us": j.caused_us}))
    return tuple(notes)


def unprofiled_peers(cmp: Comparison) -> tuple[Note, ...]:
    """An ``unprofiled-peers`` Note per (side, type, group) holding unprofiled ranks.

    For the "Who waits for whom" section: the group's tasks name more ranks than were
    profiled.

    ``data``: ``side``, ``comm_type``, ``group``, ``group_ranks`` (the ranks one rank's
    tasks name in one instance: at least that many in the group), ``ranks`` (profiled),
    ``unprofiled`` (at least that many not profiled), ``unseen_wait_us`` (waiting per step
    and rank before the first transfer that no profiled rank's arrival explains).
    """
    skew = cmp.skew
    if skew.empty or "unprofiled" not in skew:
        return ()
    rows = skew[skew["unprofiled"] > 0]
    return tuple(Note(
        "unprofiled-peers",
        f"{row.side}: {row.comm_type} ({row.group}) — the group's tasks name {row.group_ranks} "
        f"ranks of the group and {row.ranks} were profiled: at least "
        f"{_ranks(row.unprofiled)} {_take(row.unprofiled)} part unseen. The profiled ranks "
        f"wait {ms(row.unseen_wait_us)} per step beyond what their own arrivals explain; "
        "the rank they wait for cannot be named from these profiles (profile every rank of "
        "the group to see it), and the last profiled rank to arrive is not necessarily it.",
        {"side": row.side, "comm_type": row.comm_type, "group": row.group,
         "group_ranks": int(row.group_ranks), "ranks": int(row.ranks),
         "unprofiled": int(row.unprofiled), "unseen_wait_us": float(row.unseen_wait_us)})
        for row in rows.itertuples())
