"""Device memory of two runs: compare peaks, operators, modules, copies and HBM bandwidth.

``load_run`` reads the memory of an input with its kernels (``Run.memory``, a
``MemoryData``: each rank reduced to a ``MemorySummary`` where it is read;
``cann_diff.read.read_memory(path)`` is the same for library users), and
``compare_memory(base, new, threshold_pct) -> MemoryComparison`` compares two of them.
Nothing here renders; see ``render/memory.py``.

Which component is "the" peak
-----------------------------
``memory_record.csv`` mixes several series in its ``Component`` column:

* ``APP`` — device memory the whole process holds, as the driver sees it (framework
  allocators plus CANN runtime, HCCL buffers and workspaces). It is what runs out first,
  so it is the **peak reserved** figure. It has no allocated figure (the cell is empty).
  In the db it is the ``NPU_MEM`` row of type ``app`` (``ddr + hbm``).
* ``PTA`` — torch_npu's caching allocator; ``GE`` — the graph engine's allocator;
  ``PTA+GE`` — torch_npu's sum of the two at every sample. ``PTA+GE`` is therefore the
  framework's **peak allocated** figure (falls back to ``PTA``, then ``GE``).

Each measure takes the first component of its preference order, reserved
``APP → PTA+GE → PTA → GE`` and allocated ``PTA+GE → PTA → GE``, that *both* runs
recorded, so that base and new are always compared like for like (a db export without
``NPU_MEM`` is compared on ``PTA+GE``). Every component's own peaks are listed as well.

Several ranks
-------------
Peaks are the maximum over ranks (the device that runs out first), with the rank that
holds it; the timeline is that rank's. Operator counts and totals are per rank (mean over
the ranks that recorded operator allocations); the largest single allocation is the
maximum over ranks. Module peaks are the maximum over ranks.

``to_dict()`` keys (the ``memory`` object of report.json)
---------------------------------------------------------
All sizes in MB (MiB, as the profiler writes them), times in ms; ``null`` when unknown.
``delta_*`` is new − base; ``delta_pct`` is relative to base (``null`` when base is 0).

- ``threshold_pct``: the relative change (%) that counts as growth.
- ``ranks``: ``{"base": [0, 1], "new": [0, 1]}``, the rank ids read.
- ``peak_reserved``, ``peak_allocated``: ``null`` or ``{"measure": "reserved|allocated",
  "component": "APP", "base_mb", "new_mb", "delta_mb", "delta_pct", "base_rank",
  "new_rank"}``.
- ``components``: one per memory_record component, ``{"component", "base_allocated_mb",
  "new_allocated_mb", "base_reserved_mb", "new_reserved_mb"}`` (peaks over the run).
- ``operators``: the top changes by ``|delta_mb|`` (ties by name), ``{"name",
  "base_count", "new_count", "base_total_mb", "new_total_mb", "delta_mb", "delta_pct",
  "base_largest_mb", "new_largest_mb", "status": "added|removed|increased|decreased|
  unchanged"}``; ``increased``/``decreased`` when ``|delta_pct| ≥ threshold_pct``.
- ``operators_compared``: operator names seen in either run;
  ``operators_changed``: how many of them changed their total at all.
- ``modules``: npu_module_mem modules at their peak, non-zero in a run, largest first:
  ``{"module", "base_peak_mb", "new_peak_mb", "delta_mb", "delta_pct"}``.
- ``timeline``: ``{"component", "base": {"rank", "time_ms": [...], "reserved_mb":
  [...]}, "new": {...}}``; time since the run's first sample, at most 2000 points per
  run (peak-preserving: the largest sample of each time bucket).
- ``headline``: one sentence when a peak moved by ≥ ``threshold_pct`` or ≥ ``headline_mb``
  (``Settings.memory_headline_mb``, 1 GB), else ``null``.
- ``growth``: ``null`` or the ``memory-growth`` finding ``{"id": "memory-growth",
  "severity": "high|medium", "title", "detail", "delta_mb"}``, raised when peak reserved
  grew by ≥ ``threshold_pct``; ``high`` from twice the threshold or ``headline_mb`` on.
- ``copies``: ``null`` (no copy in either run) or host↔device copies, ``{"units": {"base",
  "new"}, "directions": [...], "total": {...}}``. ``units`` counts the (rank, step) units
  of each run's kernels; every row (``total`` is the sum over directions, ``direction``
  ``"all"``) is ``{"direction": "host_to_device|device_to_host|device_to_device|other|
  unknown", "base_count", "new_count", "base_time_us", "new_time_us", "delta_time_us",
  "delta_pct", "base_mb", "new_mb", "delta_mb"}``: count and device time per step (mean
  over units, from the ``memcpy`` kernel rows; direction from the op name/type, else
  ``unknown``), MB per rank (mean over the ranks with copies) over the whole profile
  from the db's MEMCPY_INFO (direction
  from ENUM_MEMCPY_OPERATION; ``null`` without a db). Kernel rows rarely name a direction
  while the db always does, so counts and MB may sit on different rows.
- ``hbm``: ``null`` (neither run sampled HBM) or ``{"directions": [...]}``, one row per
  ``read``/``write``: ``{"direction", "base_mean_gbps", "new_mean_gbps",
  "delta_mean_gbps", "delta_mean_pct", "base_peak_gbps", "new_peak_gbps",
  "delta_peak_gbps", "delta_peak_pct", "base_samples", "new_samples"}``. Bandwidth of a
  device at a sample is the sum over its HBM stacks, in GB/s (10⁹ B/s); mean and peak are
  over every sample of every rank. From the db's ``HBM`` table, else the ``HBM`` counters
  of trace_view.json; ``null`` figures on the side that did not sample.
- ``warnings``: missing files and other caveats, prefixed ``base:``/``new:``.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np
import pandas as pd

from ..schema import MemoryData
from ..settings import DEFAULT_SETTINGS
from .movement import (
    BandwidthChange,
    CopyChange,
    copy_changes,
    copy_summary,
    hbm_changes,
    movement_warnings,
    pct_change,
)

__all__ = ["BandwidthChange", "CopyChange", "MemoryComparison", "compare_memory",
           "copy_summary"]

RESERVED_ORDER = ("APP", "PTA+GE", "PTA", "GE")
ALLOCATED_ORDER = ("PTA+GE", "PTA", "GE")


@dataclass(frozen=True)
class PeakChange:
    """Peak of one measure (``reserved``/``allocated``) of one component, base vs new (MB)."""

    measure: str
    component: str
    base_mb: float
    new_mb: float
    delta_mb: float
    delta_pct: float | None
    base_rank: int
    new_rank: int


@dataclass(frozen=True)
class OperatorMemoryChange:
    """Allocations of one operator name, per rank: count, total and largest (MB)."""

    name: str
    base_count: float
    new_count: float
    base_total_mb: float
    new_total_mb: float
    delta_mb: float
    delta_pct: float | None
    base_largest_mb: float | None
    new_largest_mb: float | None
    status: str


@dataclass(frozen=True)
class ModuleMemoryChange:
    """Peak reserved memory of one npu_module_mem module (MB); None when not recorded."""

    module: str
    base_peak_mb: float | None
    new_peak_mb: float | None
    delta_mb: float | None
    delta_pct: float | None


@dataclass(frozen=True)
class MemorySeries:
    """Reserved memory over time of one rank: ms since its first sample, MB."""

    rank: int | None = None
    time_ms: tuple[float, ...] = ()
    reserved_mb: tuple[float, ...] = ()


@dataclass(frozen=True)
class MemoryComparison:
    """Base vs new device memory; ``to_dict()`` keys are listed in the module docstring."""

    threshold_pct: float
    base_ranks: tuple[int, ...]
    new_ranks: tuple[int, ...]
    peak_reserved: PeakChange | None
    peak_allocated: PeakChange | None
    components: tuple[dict, ...]
    operators: tuple[OperatorMemoryChange, ...]
    operators_compared: int
    operators_changed: int
    modules: tuple[ModuleMemoryChange, ...]
    timeline_component: str | None
    base_timeline: MemorySeries
    new_timeline: MemorySeries
    headline: str | None
    growth: dict | None
    warnings: tuple[str, ...] = field(default_factory=tuple)
    copy_units: tuple[int, int] | None = None
    copies: tuple[CopyChange, ...] = ()
    copies_total: CopyChange | None = None
    hbm: tuple[BandwidthChange, ...] = ()

    def to_dict(self) -> dict:
        """JSON-ready form (the ``memory`` object of report.json)."""
        return {
            "threshold_pct": self.threshold_pct,
            "ranks": {"base": list(self.base_ranks), "new": list(self.new_ranks)},
            "peak_reserved": asdict(self.peak_reserved) if self.peak_reserved else None,
            "peak_allocated": asdict(self.peak_allocated) if self.peak_allocated else None,
            "components": [dict(c) for c in self.components],
            "operators": [asdict(o) for o in self.operators],
            "operators_compared": self.operators_compared,
            "operators_changed": self.operators_changed,
            "modules": [asdict(m) for m in self.modules],
            "timeline": {"component": self.timeline_component,
                         "base": _series_dict(self.base_timeline),
                         "new": _series_dict(self.new_timeline)},
            "headline": self.headline,
            "growth": dict(self.growth) if self.growth else None,
            "warnings": list(self.warnings),
            "copies": None if self.copies_total is None or self.copy_units is None else {
                "units": {"base": self.copy_units[0], "new": self.copy_units[1]},
                "directions": [asdict(c) for c in self.copies],
                "total": asdict(self.copies_total)},
            "hbm": {"directions": [asdict(h) for h in self.hbm]} if self.hbm else None,
        }


def _series_dict(series: MemorySeries) -> dict:
    return {"rank": series.rank, "time_ms": list(series.time_ms),
            "reserved_mb": list(series.reserved_mb)}


# --------------------------------------------------------------------------- comparing


def _choose(base: MemoryData, new: MemoryData, order: tuple[str, ...],
            column: str) -> str | None:
    """First component of ``order`` that both runs recorded a value of ``column`` for."""
    def available(peaks: pd.DataFrame) -> set:
        return set(peaks.loc[peaks[column].notna(), "component"].unique())
    both = available(base.summary.peaks) & available(new.summary.peaks)
    return next((c for c in order if c in both), None)


def _peak(peaks: pd.DataFrame, component: str, column: str) -> tuple[float, int]:
    rows = peaks[(peaks["component"] == component).to_numpy()]
    per_rank = rows.groupby("rank")[column].max().dropna()
    return float(per_rank.max()), int(per_rank.idxmax())  # idxmax: lowest rank on ties


def _peak_change(base: MemoryData, new: MemoryData, measure: str,
                 order: tuple[str, ...]) -> PeakChange | None:
    column = f"{measure}_mb"
    component = _choose(base, new, order, column)
    if component is None:
        return None
    base_mb, base_rank = _peak(base.summary.peaks, component, column)
    new_mb, new_rank = _peak(new.summary.peaks, component, column)
    return PeakChange(measure, component, base_mb, new_mb, new_mb - base_mb,
                      pct_change(new_mb - base_mb, base_mb), base_rank, new_rank)


def _component_peaks(base: MemoryData, new: MemoryData) -> tuple[dict, ...]:
    def peaks(data: MemoryData) -> pd.DataFrame:
        return data.summary.peaks.groupby("component")[["allocated_mb", "reserved_mb"]].max()
    table = peaks(base).add_prefix("base_").join(peaks(new).add_prefix("new_"), how="outer")
    rank = {c: i for i, c in enumerate(RESERVED_ORDER)}
    table = table.reset_index()
    table["order"] = table["component"].map(rank).fillna(len(rank))
    table = table.sort_values(["order", "component"], kind="mergesort").drop(columns="order")
    table = table.astype(object).where(table.notna(), None)
    return tuple(table.to_dict("records"))


def _per_name(operators: pd.DataFrame) -> pd.DataFrame:
    ranks = max(operators["rank"].nunique(), 1)
    table = operators.groupby("name", sort=True).agg(
        count=("count", "sum"), total_mb=("total_mb", "sum"), largest_mb=("largest_mb", "max"))
    table[["count", "total_mb"]] = table[["count", "total_mb"]].astype("float64") / ranks
    return table


def _operator_table(base: MemoryData, new: MemoryData, threshold_pct: float) -> pd.DataFrame:
    """Every operator name of either run with base/new figures, sorted by |Δ total|."""
    table = _per_name(base.summary.operators).add_prefix("base_").reset_index().merge(
        _per_name(new.summary.operators).add_prefix("new_").reset_index(), on="name", how="outer",
        indicator=True)
    for column in ("base_count", "new_count", "base_total_mb", "new_total_mb"):
        table[column] = table[column].fillna(0.0)
    table["delta_mb"] = table["new_total_mb"] - table["base_total_mb"]
    base_total = table["base_total_mb"].where(table["base_total_mb"] > 0)
    table["delta_pct"] = 100.0 * table["delta_mb"] / base_total
    side = table["_merge"].astype(str)
    table["status"] = np.select(
        [side == "right_only", side == "left_only", table["delta_pct"] >= threshold_pct,
         table["delta_pct"] <= -threshold_pct],
        ["added", "removed", "increased", "decreased"], "unchanged")
    table["size"] = table["delta_mb"].abs()
    table = table.sort_values(["size", "name"], ascending=[False, True], kind="mergesort")
    return table.drop(columns=["_merge", "size"]).reset_index(drop=True)


def _operator_changes(table: pd.DataFrame, top_n: int) -> tuple[OperatorMemoryChange, ...]:
    changed = table[(table["delta_mb"].abs() > 1e-9).to_numpy()].head(top_n)
    columns = [f.name for f in OperatorMemoryChange.__dataclass_fields__.values()]
    rows = changed[columns].astype(object).where(changed[columns].notna(), None)
    return tuple(OperatorMemoryChange(**row) for row in rows.to_dict("records"))


def _module_changes(base: MemoryData, new: MemoryData) -> tuple[ModuleMemoryChange, ...]:
    def peaks(data: MemoryData, name: str) -> pd.Series:
        return data.summary.modules.groupby("component")["reserved_mb"].max().rename(name)
    table = peaks(base, "base_peak_mb").to_frame().join(peaks(new, "new_peak_mb"),
                                                        how="outer").reset_index()
    table["largest"] = table[["base_peak_mb", "new_peak_mb"]].max(axis=1)
    table = table[(table["largest"] > 0).to_numpy()]
    table = table.sort_values(["largest", "component"], ascending=[False, True],
                              kind="mergesort")
    table["delta_mb"] = table["new_peak_mb"] - table["base_peak_mb"]
    base_peak = table["base_peak_mb"].where(table["base_peak_mb"] > 0)
    table["delta_pct"] = 100.0 * table["delta_mb"] / base_peak
    table = table.rename(columns={"component": "module"})
    columns = ["module", "base_peak_mb", "new_peak_mb", "delta_mb", "delta_pct"]
    rows = table[columns].astype(object).where(table[columns].notna(), None)
    return tuple(ModuleMemoryChange(**row) for row in rows.to_dict("records"))


def _series(timelines: pd.DataFrame, component: str | None, rank: int | None) -> MemorySeries:
    """Reserved MB of one component on one rank over ms since its first sample."""
    if component is None or rank is None:
        return MemorySeries()
    keep = ((timelines["component"] == component) & (timelines["rank"] == rank)).to_numpy()
    rows = timelines[keep]
    if rows.empty:
        return MemorySeries(rank)
    return MemorySeries(rank, tuple(np.round(rows["time_ms"].to_numpy(float), 3).tolist()),
                        tuple(rows["reserved_mb"].to_numpy(dtype=float).tolist()))


def _moved(peak: PeakChange | None, threshold_pct: float, headline_mb: float) -> bool:
    if peak is None or peak.delta_mb == 0:
        return False
    relative = peak.delta_pct is not None and abs(peak.delta_pct) >= threshold_pct
    return relative or abs(peak.delta_mb) >= headline_mb


def _describe(peak: PeakChange) -> str:
    verb = "rose" if peak.delta_mb > 0 else "fell"
    pct = "" if peak.delta_pct is None else f" ({peak.delta_pct:+.1f} %)"
    return (f"peak {peak.measure} device memory ({peak.component}) {verb} by "
            f"{abs(peak.delta_mb):,.1f} MB{pct}: {peak.base_mb:,.1f} MB → {peak.new_mb:,.1f} MB")


def _headline(peaks: list[PeakChange | None], threshold_pct: float,
              headline_mb: float) -> str | None:
    moved = [_describe(p) for p in peaks if p is not None and _moved(p, threshold_pct, headline_mb)]
    if not moved:
        return None
    text = "; ".join(moved) + "."
    return text[0].upper() + text[1:]


def _growth(peak: PeakChange | None, operators: pd.DataFrame,
            modules: tuple[ModuleMemoryChange, ...], threshold_pct: float,
            headline_mb: float) -> dict | None:
    """The memory-growth finding when peak reserved grew by at least ``threshold_pct``."""
    if peak is None or peak.delta_pct is None or peak.delta_mb <= 0 \
            or peak.delta_pct < threshold_pct:
        return None
    severe = peak.delta_pct >= 2 * threshold_pct or peak.delta_mb >= headline_mb
    detail = (f"Peak reserved device memory ({peak.component}) went from {peak.base_mb:,.1f} MB"
              f" (rank {peak.base_rank}) to {peak.new_mb:,.1f} MB (rank {peak.new_rank}): "
              f"{peak.delta_mb:+,.1f} MB ({peak.delta_pct:+.1f} %), at or above the "
              f"{threshold_pct:g} % threshold.")
    grown = operators[(operators["delta_mb"] > 1e-9).to_numpy()]
    grown = grown.sort_values(["delta_mb", "name"], ascending=[False, True], kind="mergesort")
    if len(grown):
        named = ", ".join(f"{n} {d:+,.1f} MB" for n, d in
                          zip(grown["name"].head(3), grown["delta_mb"].head(3)))
        detail += f" Operator allocations that grew most (total per rank): {named}."
    modules_grown = sorted((m for m in modules if (m.delta_mb or 0) > 0),
                           key=lambda m: (-(m.delta_mb or 0), m.module))[:3]
    if modules_grown:
        named = ", ".join(f"{m.module} {m.delta_mb:+,.1f} MB" for m in modules_grown)
        detail += f" Modules that grew most: {named}."
    return {"id": "memory-growth", "severity": "high" if severe else "medium",
            "title": f"Peak reserved device memory grew {peak.delta_pct:+.1f} % "
                     f"({peak.delta_mb:+,.1f} MB)",
            "detail": detail, "delta_mb": peak.delta_mb}


def _comparison_warnings(base: MemoryData, new: MemoryData,
                         peaks: list[PeakChange | None]) -> list[str]:
    warnings = [f"base: {w}" for w in base.warnings] + [f"new: {w}" for w in new.warnings]
    for peak, measure in zip(peaks, ("reserved", "allocated")):
        if peak is None and len(base.summary.peaks) and len(new.summary.peaks):
            warnings.append(f"peak {measure}: no memory_record component holds it in both "
                            "runs; not compared")
    return warnings


def compare_memory(base: MemoryData, new: MemoryData,
                   threshold_pct: float = DEFAULT_SETTINGS.threshold_pct, *,
                   headline_mb: float = DEFAULT_SETTINGS.memory_headline_mb,
                   top_n: int = 20, base_copies: dict | None = None,
                   new_copies: dict | None = None) -> MemoryComparison:
    """Compare the device memory of two runs (sizes in MB, see the module docstring).

    ``threshold_pct`` is the relative growth of peak reserved memory that raises the
    ``memory-growth`` finding; a peak move of ``headline_mb`` reaches the headline (and
    makes growth ``high``) whatever its percentage; ``top_n`` caps the operator rows kept.
    ``base_copies`` and ``new_copies`` are ``copy_summary`` results of each run's kernels
    (None: not known).
    """
    reserved = _peak_change(base, new, "reserved", RESERVED_ORDER)
    allocated = _peak_change(base, new, "allocated", ALLOCATED_ORDER)
    operators = _operator_table(base, new, threshold_pct)
    modules = _module_changes(base, new)
    copy_units, copies, copies_total = copy_changes(base, new, base_copies, new_copies)
    component, base_rank, new_rank = ((reserved.component, reserved.base_rank,
                                       reserved.new_rank) if reserved else (None, None, None))
    return MemoryComparison(
        threshold_pct=threshold_pct,
        base_ranks=base.ranks,
        new_ranks=new.ranks,
        peak_reserved=reserved,
        peak_allocated=allocated,
        components=_component_peaks(base, new),
        operators=_operator_changes(operators, top_n),
        operators_compared=len(operators),
        operators_changed=int((operators["delta_mb"].abs() > 1e-9).sum()),
        modules=modules,
        timeline_component=component,
        base_timeline=_series(base.summary.timelines, component, base_rank),
        new_timeline=_series(new.summary.timelines, component, new_rank),
        headline=_headline([reserved, allocated], threshold_pct, headline_mb),
        growth=_growth(reserved, operators, modules, threshold_pct, headline_mb),
        warnings=tuple(_comparison_warnings(base, new, [reserved, allocated])
                       + movement_warnings(base, new)),
        copy_units=copy_units,
        copies=copies,
        copies_total=copies_total,
        hbm=hbm_changes(base, new),
    )
