"""``late-rank``: one rank starts a collective last, again and again, and the others wait.

A collective's wait on a rank is the time until its peers arrive; the rank that arrives
last waits least and is where to look. Per (type, group) of the new run the skew table
(compare/non_compute.py) says whose late arrivals cost the others most waiting; the
finding is raised when that rank causes ``late_rank_share`` of it, at least
``material_pct`` of the step; ``medium`` when the arrival waiting grew since base, else
``info``.
The finding names that rank and where its step differs from the other ranks': its
computing and Free (host gaps) against their median, and the operators it spends most
extra time in.
"""

from __future__ import annotations

import math

import pandas as pd

from ..compare import Comparison
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


def late_ranks(cmp: Comparison) -> list[Finding]:
    """A finding per (type, group) of the new run with a rank that mostly arrives last."""
    skew = cmp.skew
    if skew.empty:
        return []
    t = cmp.thresholds
    floor = t.material_pct / 100 * max(cmp.step.new_us or 0.0, 1e-9)
    base = skew[skew["side"] == "base"].set_index(["comm_type", "group"])
    findings = []
    for row in skew[skew["side"] == "new"].itertuples():
        if row.last_cost_us < floor or row.last_cost_us < t.late_rank_share * row.cost_us:
            continue
        rank = int(row.last_rank)
        before, severity = "", "medium"
        if (row.comm_type, row.group) in base.index:
            b = base.loc[(row.comm_type, row.group)]
            before = (f" In base: skew median {ms(b['median_skew_us'])}, max "
                      f"{ms(b['max_skew_us'])}, rank {int(b['last_rank'])} costing "
                      f"{ms(b['last_cost_us'])} per step.")
            # The waiting was there before and did not grow: worth knowing, not a cause.
            severity = "medium" if row.cost_us > b["cost_us"] else "info"
        where, data = _where(cmp, rank)
        last = round(row.last_share * row.instances)
        findings.append(Finding(
            "late-rank", severity,
            f"Rank {rank} arrives last at {row.comm_type}: {ms(row.last_cost_us)} of "
            "waiting per step",
            f"Rank {rank} starts {last} of {row.instances} {row.comm_type} ({row.group}) "
            f"last (skew median {ms(row.median_skew_us)}, max {ms(row.max_skew_us)}); its "
            f"late arrivals cost {ms(row.last_cost_us)} of waiting per step and rank "
            f"({row.last_cost_us / row.cost_us:.0%} of all arrival waiting).{before}{where}",
            float(row.last_cost_us),
            {"rank": rank, "comm_type": row.comm_type, "group": row.group,
             "instances": int(row.instances), "last_share": float(row.last_share),
             "median_skew_us": float(row.median_skew_us),
             "max_skew_us": float(row.max_skew_us), "cost_us": float(row.cost_us),
             "last_cost_us": float(row.last_cost_us), **data}))
    return findings
