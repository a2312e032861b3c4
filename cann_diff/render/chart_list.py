"""Which charts a report has, without matplotlib.

The command queues a report's charts for its chart workers as soon as the report is
built; knowing their names must not cost this process matplotlib's import (≈ 0.55 s with
charts.py's), which it needs only once it draws. ``charts.FIGURES`` draws each one.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..report.model import OperatorRow, RankRow, Report
from .memory_section import has_timeline

HEATMAP_FIELDS = (("stage", "step"), ("computing", "computing"),
                  ("communication_not_overlapped", "exposed comm"), ("free", "free"),
                  ("wait_us", "comm wait"))
MAX_RANKS_DRAWN = 64


def movers(report: Report, n: int = 12) -> list[OperatorRow]:
    """The operator keys to chart: largest |Δ| first, without what the MC2 section shows.

    Keys MC2 groups claim, wholly or in part (the AllReduce a split MatmulAllReduce became,
    beside the data-parallel ones), are left out: their change is the fusion's.
    """
    return [op for op in report.operators if not op.fusion and op.delta_us == op.delta_us
            and not (op.base_claimed or op.new_claimed)][:n]


PIPE_MOVERS = 6  # keys the pipes chart draws: a 3 × 2 grid of panels


def pipe_movers(report: Report, n: int = PIPE_MOVERS) -> list[OperatorRow]:
    """The keys the pipes chart draws, at most ``n``.

    The top movers (``movers``' order and rule) whose kernels record pipe ratios on both
    sides.
    """
    def both(op: OperatorRow) -> bool:
        held = op.attributes
        return held is not None and all(held[side].get("pipes") for side in ("base", "new"))

    return [op for op in movers(report, len(report.operators)) if both(op)][:n]


def ranks_to_draw(report: Report) -> list[RankRow]:
    """The ranks the heatmap and the per-rank steps show: the 64 that moved most."""
    moved = sorted(report.ranks, key=lambda r: -abs(r.delta_stage_us or 0))
    return sorted(moved[:MAX_RANKS_DRAWN], key=lambda r: r.rank)


def rank_grid(report: Report):
    """(fields, ranks, Δ% grid) of the heatmap; NaN where a rank lacks a side."""
    ranks = ranks_to_draw(report)
    fields = [(key, name) for key, name in HEATMAP_FIELDS
              if any(getattr(r, f"base_{key}") is not None for r in ranks)]
    grid = np.full((len(fields), len(ranks)), np.nan)
    for j, r in enumerate(ranks):
        for i, (key, _) in enumerate(fields):
            base, new = getattr(r, f"base_{key}"), getattr(r, f"new_{key}")
            if base and new is not None and base == base and new == new:
                grid[i, j] = (new - base) / base * 100
    drawn = np.isfinite(grid).any(axis=1)  # a metric zero in every base (no comm) says nothing
    return [f for f, keep in zip(fields, drawn) if keep], ranks, grid[drawn]


def has_rank_change(report: Report) -> bool:
    """True when at least one rank has both sides, so the heatmap has a cell to colour."""
    return len(report.ranks) >= 2 and bool(np.isfinite(rank_grid(report)[2]).any())


def has_step(report: Report) -> bool:
    """Both runs have a step time: the step breakdown and its waterfall have bars."""
    return report.step.base_us is not None and report.step.new_us is not None


def has_lanes(report: Report) -> bool:
    """Both runs hold a median step with lanes: the step timeline has something to draw."""
    return len(report.step_lanes) == 2 and all(side.segments for side in report.step_lanes)


def has_memory_timeline(report: Report) -> bool:
    """Either run sampled a compared peak's measure: the memory chart has a line."""
    return report.memory is not None and has_timeline(report.memory)


# The charts of a report, in order, and when each is drawn. The name is the PNG's file
# name (``<name>.png``) and the key report.md and report.html link it by.
WANTED: tuple[tuple[str, Callable[[Report], bool]], ...] = (
    ("step_breakdown", has_step),
    ("step_waterfall", has_step),
    ("top_movers", lambda report: bool(movers(report))),
    ("pipes", lambda report: bool(pipe_movers(report))),
    ("rank_heatmap", has_rank_change),
    ("rank_steps", lambda report: len(report.ranks) >= 2),
    ("families", lambda report: bool(report.families)),
    ("step_timeline", has_lanes),
    ("memory", has_memory_timeline),
)


def wanted(report: Report) -> list[str]:
    """The names of the charts ``report`` has data for, in order."""
    return [name for name, drawn in WANTED if drawn(report)]
