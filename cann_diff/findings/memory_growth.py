"""Device memory: the ``memory-growth`` finding and the memory sentence of the headline.

Peak reserved memory is what runs out first (``compare/memory.py`` says which component
holds it), so its growth beyond ``Thresholds.memory_growth_pct`` is a finding, ``high``
from ``memory_severe_factor`` times the threshold or ``memory_headline_mb`` on. A peak
that moved by the threshold or by ``memory_headline_mb`` either way gets a sentence after
the step verdict.
"""

from __future__ import annotations

from ..compare.memory import MemoryComparison
from ..settings import Thresholds
from .base import Finding


def _moved(peak: dict | None, threshold_pct: float, headline_mb: float) -> bool:
    if peak is None or peak["delta_mb"] == 0:
        return False
    relative = peak["delta_pct"] is not None and abs(peak["delta_pct"]) >= threshold_pct
    return relative or abs(peak["delta_mb"]) >= headline_mb


def _describe(peak: dict) -> str:
    verb = "rose" if peak["delta_mb"] > 0 else "fell"
    pct = "" if peak["delta_pct"] is None else f" ({peak['delta_pct']:+.1f} %)"
    return (f"peak {peak['measure']} device memory ({peak['component']}) {verb} by "
            f"{abs(peak['delta_mb']):,.1f} MB{pct}: {peak['base_mb']:,.1f} MB → "
            f"{peak['new_mb']:,.1f} MB")


def _peaks(memory: MemoryComparison) -> list[dict | None]:
    return [memory.peak("reserved"), memory.peak("allocated")]


def memory_sentence(memory: MemoryComparison | None, thresholds: Thresholds) -> str | None:
    """One sentence naming every peak that moved enough, else None."""
    if memory is None:
        return None
    moved = [_describe(p) for p in _peaks(memory) if p is not None
             and _moved(p, memory.threshold_pct, thresholds.memory_headline_mb)]
    if not moved:
        return None
    text = "; ".join(moved) + "."
    return text[0].upper() + text[1:]


def _grown_detail(memory: MemoryComparison) -> str:
    """The operators and modules whose memory grew most, as sentences (or ``""``)."""
    operators = memory.operator_table
    grown = operators[(operators["delta_mb"] > 1e-9).to_numpy()]
    grown = grown.sort_values(["delta_mb", "name"], ascending=[False, True], kind="mergesort")
    detail = ""
    if len(grown):
        named = ", ".join(f"{n} {d:+,.1f} MB" for n, d in
                          zip(grown["name"].head(3), grown["delta_mb"].head(3)))
        detail += f" Operator allocations that grew most (total per rank): {named}."
    modules = memory.modules
    modules = modules[(modules["delta_mb"].fillna(0) > 0).to_numpy()]
    modules = modules.assign(order=-modules["delta_mb"]).sort_values(
        ["order", "module"], kind="mergesort").head(3)
    if len(modules):
        named = ", ".join(f"{m} {d:+,.1f} MB" for m, d in zip(modules["module"],
                                                             modules["delta_mb"]))
        detail += f" Modules that grew most: {named}."
    return detail


def memory_growth(memory: MemoryComparison | None, thresholds: Thresholds) -> Finding | None:
    """``memory-growth`` when peak reserved grew by at least ``memory_growth_pct``."""
    peak = memory.peak("reserved") if memory is not None else None
    if memory is None or peak is None or peak["delta_pct"] is None or peak["delta_mb"] <= 0 \
            or peak["delta_pct"] < memory.threshold_pct:
        return None
    threshold = memory.threshold_pct
    severe = (peak["delta_pct"] >= thresholds.memory_severe_factor * threshold
              or peak["delta_mb"] >= thresholds.memory_headline_mb)
    detail = (f"Peak reserved device memory ({peak['component']}) went from "
              f"{peak['base_mb']:,.1f} MB (rank {peak['base_rank']}) to {peak['new_mb']:,.1f} MB"
              f" (rank {peak['new_rank']}): {peak['delta_mb']:+,.1f} MB "
              f"({peak['delta_pct']:+.1f} %), at or above the {threshold:g} % threshold.")
    return Finding("memory-growth", "high" if severe else "medium",
                   f"Peak reserved device memory grew {peak['delta_pct']:+.1f} % "
                   f"({peak['delta_mb']:+,.1f} MB)", detail + _grown_detail(memory), 0.0,
                   {"delta_mb": peak["delta_mb"]})
