"""Device memory of two runs: compare peaks, operators, modules, copies and HBM bandwidth.

``load_run`` reads the memory of an input with its kernels (``Run.memory``, a
``MemoryData``: each rank reduced to a ``MemorySummary`` where it is read;
``cann_diff.read.read_memory(path)`` is the same for library users), and
``compare_memory(base, new, thresholds) -> MemoryComparison`` compares two of them, as
tables; the report's ``Memory`` section (``report/model.py``) types them, the
``memory-growth`` finding and the memory sentence of the headline are
``findings/memory_growth.py``'s, and nothing here renders.

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
holds it; each measure's timeline is that rank's: reserved MB of the reserved peak's
component and allocated MB of the allocated peak's (the series the memory sentence
speaks of, whichever it names). Operator counts and totals are per rank (mean over
the ranks that recorded operator allocations); the largest single allocation is the
maximum over ranks. Module peaks are the maximum over ranks.

The ``memory`` object of report.json
------------------------------------
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
  [...]}, "new": {...}, "allocated": ...}``: reserved MB of the peak-reserved component;
  time since the rank's first sample of it, at most 2000 points per run (peak-preserving:
  the largest sample of each time bucket). ``allocated`` is ``null`` (no allocated peak
  compared) or the same for the peak-allocated component: ``{"component", "base":
  {"rank", "time_ms": [...], "allocated_mb": [...]}, "new": {...}}``.
- ``headline``: one sentence when a peak moved by ≥ ``threshold_pct`` or ≥ ``headline_mb``
  (``Thresholds.memory_headline_mb``, 1 GB), else ``null``.
- ``growth``: ``null`` or the ``memory-growth`` finding ``{"id": "memory-growth",
  "severity": "high|medium", "title", "detail", "delta_mb"}``, raised when peak reserved
  grew by ≥ ``threshold_pct`` (``Thresholds.memory_growth_pct``); ``high`` from
  ``memory_severe_factor`` (2) times the threshold or ``headline_mb`` on.
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

from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ..schema import MEMORY_NOT_RECORDED, MemoryData, Note
from ..settings import DEFAULT_THRESHOLDS, Thresholds
from .movement import copy_changes, copy_summary, hbm_changes, movement_notes, pct_change

__all__ = ["MemoryComparison", "compare_memory", "copy_summary", "has_memory_data",
           "recorded_memory", "without_missing_files"]

RESERVED_ORDER = ("APP", "PTA+GE", "PTA", "GE")
ALLOCATED_ORDER = ("PTA+GE", "PTA", "GE")
PEAK_FIELDS = ("measure", "component", "base_mb", "new_mb", "delta_mb", "delta_pct",
               "base_rank", "new_rank")
OPERATOR_FIELDS = ("name", "base_count", "new_count", "base_total_mb", "new_total_mb",
                   "delta_mb", "delta_pct", "base_largest_mb", "new_largest_mb", "status")
MODULE_FIELDS = ("module", "base_peak_mb", "new_peak_mb", "delta_mb", "delta_pct")


@dataclass(frozen=True, eq=False)
class MemoryComparison:
    """Base vs new device memory as tables; sizes in MB, times in ms.

    ``peaks``: a row per measure compared (``reserved`` first, then ``allocated``;
    PEAK_FIELDS). ``components``: each memory_record component's peaks.
    ``operator_table``: every operator name (OPERATOR_FIELDS), by |Δ total|;
    ``operators``: its first ``memory_top_n`` rows that changed. ``modules``
    (MODULE_FIELDS), largest first. ``base_timeline``/``new_timeline``: ``time_ms``,
    ``reserved_mb`` of ``timeline_component`` on the rank (``*_timeline_rank``) holding the
    reserved peak; ``base_allocated_timeline``/``new_allocated_timeline``: ``time_ms``,
    ``allocated_mb`` of ``allocated_timeline_component`` on the rank
    (``*_allocated_timeline_rank``) holding the allocated peak. ``copies``: a row per copy
    direction and ``copies_total`` the row ``all`` (``movement.py``), ``copy_units`` the
    (rank, step) units per side, None without copies. ``hbm``: a row per HBM direction.
    ``notes``: what is missing, per side.
    """

    threshold_pct: float
    base_ranks: tuple[int, ...]
    new_ranks: tuple[int, ...]
    peaks: pd.DataFrame
    components: pd.DataFrame
    operator_table: pd.DataFrame
    operators: pd.DataFrame
    modules: pd.DataFrame
    timeline_component: str | None
    base_timeline_rank: int | None
    new_timeline_rank: int | None
    base_timeline: pd.DataFrame
    new_timeline: pd.DataFrame
    notes: tuple[Note, ...]
    copy_units: tuple[int, int] | None
    copies: pd.DataFrame
    copies_total: pd.DataFrame | None
    hbm: pd.DataFrame
    allocated_timeline_component: str | None = None
    base_allocated_timeline_rank: int | None = None
    new_allocated_timeline_rank: int | None = None
    base_allocated_timeline: pd.DataFrame = field(
        default_factory=lambda: _no_series("allocated_mb"))
    new_allocated_timeline: pd.DataFrame = field(
        default_factory=lambda: _no_series("allocated_mb"))

    def peak(self, measure: str) -> dict | None:
        """The ``reserved`` or ``allocated`` peak row (PEAK_FIELDS), None when not compared."""
        rows = self.peaks[(self.peaks["measure"] == measure).to_numpy()]
        return None if rows.empty else rows.iloc[0].to_dict()


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
                 order: tuple[str, ...]) -> dict | None:
    column = f"{measure}_mb"
    component = _choose(base, new, order, column)
    if component is None:
        return None
    base_mb, base_rank = _peak(base.summary.peaks, component, column)
    new_mb, new_rank = _peak(new.summary.peaks, component, column)
    return dict(zip(PEAK_FIELDS, (measure, component, base_mb, new_mb, new_mb - base_mb,
                                  pct_change(new_mb - base_mb, base_mb), base_rank, new_rank)))


def _component_peaks(base: MemoryData, new: MemoryData) -> pd.DataFrame:
    def peaks(data: MemoryData) -> pd.DataFrame:
        return data.summary.peaks.groupby("component")[["allocated_mb", "reserved_mb"]].max()
    table = peaks(base).add_prefix("base_").join(peaks(new).add_prefix("new_"), how="outer")
    rank = {c: i for i, c in enumerate(RESERVED_ORDER)}
    table = table.reset_index()
    table["order"] = table["component"].map(rank).fillna(len(rank))
    return table.sort_values(["order", "component"], kind="mergesort").drop(columns="order")


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
    return table.drop(columns=["_merge", "size"]).reset_index(drop=True)[list(OPERATOR_FIELDS)]


def _changed(table: pd.DataFrame) -> np.ndarray:
    return (table["delta_mb"].abs() > 1e-9).to_numpy()


def _module_changes(base: MemoryData, new: MemoryData) -> pd.DataFrame:
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
    return table.rename(columns={"component": "module"})[list(MODULE_FIELDS)]


def _no_series(column: str) -> pd.DataFrame:
    return pd.DataFrame({"time_ms": [], column: []}, dtype="float64")


def _series(timelines: pd.DataFrame, peak: dict | None, side: str) -> pd.DataFrame:
    """One side's timeline of a peak's measure (``time_ms``, ``<measure>_mb``).

    MB of the peak's component on the rank holding that side's peak, over ms since the
    rank's first sample of the component.
    """
    column = f"{peak['measure']}_mb" if peak else "reserved_mb"
    if peak is None:
        return _no_series(column)
    keep = ((timelines["component"] == peak["component"])
            & (timelines["rank"] == peak[f"{side}_rank"]) & timelines[column].notna())
    rows = timelines[keep.to_numpy()]
    return pd.DataFrame({"time_ms": np.round(rows["time_ms"].to_numpy(float), 3),
                         column: rows[column].to_numpy(dtype=float)})


def _timeline_fields(base: MemoryData, new: MemoryData, peak: dict | None,
                     prefix: str) -> dict:
    """The MemoryComparison fields of one measure's timeline.

    ``prefix`` is ``""`` (reserved, the fields report.json has always had) or
    ``"allocated_"``.
    """
    return {f"{prefix}timeline_component": peak["component"] if peak else None,
            f"base_{prefix}timeline_rank": peak["base_rank"] if peak else None,
            f"new_{prefix}timeline_rank": peak["new_rank"] if peak else None,
            f"base_{prefix}timeline": _series(base.summary.timelines, peak, "base"),
            f"new_{prefix}timeline": _series(new.summary.timelines, peak, "new")}


def _comparison_notes(base: MemoryData, new: MemoryData,
                      peaks: list[dict | None]) -> list[Note]:
    notes = [Note(n.code, f"{side}: {n.text}") for side, data in (("base", base), ("new", new))
             for n in data.warnings]
    for peak, measure in zip(peaks, ("reserved", "allocated")):
        if peak is None and len(base.summary.peaks) and len(new.summary.peaks):
            notes.append(Note("memory", f"peak {measure}: no memory_record component holds "
                              "it in both runs; not compared"))
    return notes


def compare_memory(base: MemoryData, new: MemoryData,
                   thresholds: Thresholds = DEFAULT_THRESHOLDS, *,
                   base_copies: dict | None = None,
                   new_copies: dict | None = None) -> MemoryComparison:
    """Compare the device memory of two runs (sizes in MB, see the module docstring).

    ``thresholds.memory_growth_pct`` is the relative change of an operator's allocations
    called increased/decreased; ``memory_top_n`` caps the operator rows listed.
    ``base_copies`` and ``new_copies`` are ``copy_summary`` results of each run's kernels
    (None: not known).
    """
    threshold_pct = thresholds.memory_growth_pct
    reserved = _peak_change(base, new, "reserved", RESERVED_ORDER)
    allocated = _peak_change(base, new, "allocated", ALLOCATED_ORDER)
    operators = _operator_table(base, new, threshold_pct)
    copy_units, copies, copies_total = copy_changes(base, new, base_copies, new_copies)
    return MemoryComparison(
        threshold_pct=threshold_pct,
        base_ranks=base.ranks,
        new_ranks=new.ranks,
        peaks=pd.DataFrame([p for p in (reserved, allocated) if p is not None],
                           columns=list(PEAK_FIELDS), dtype=object),
        components=_component_peaks(base, new),
        operator_table=operators,
        operators=operators[_changed(operators)].head(thresholds.memory_top_n),
        modules=_module_changes(base, new),
        **_timeline_fields(base, new, reserved, ""),
        **_timeline_fields(base, new, allocated, "allocated_"),
        notes=tuple(_comparison_notes(base, new, [reserved, allocated])
                    + movement_notes(base, new)),
        copy_units=copy_units,
        copies=copies,
        copies_total=copies_total,
        hbm=hbm_changes(base, new),
    )


def has_memory_data(memory: MemoryComparison) -> bool:
    """True when at least one run recorded memory (profile_memory=True), copies or HBM."""
    return bool(len(memory.peaks) or len(memory.operators) or len(memory.modules)
                or memory.copies_total is not None or len(memory.hbm))


def recorded_memory(memory: MemoryComparison) -> bool:
    """True when a run recorded memory itself (not only copies or HBM samples)."""
    return bool(len(memory.peaks) or len(memory.operators) or len(memory.modules))


def without_missing_files(memory: MemoryComparison) -> MemoryComparison:
    """The comparison without its notes of absent memory files.

    Those files are expected to be absent without profile_memory, when a run holds only
    copies or HBM samples.
    """
    return replace(memory, notes=tuple(n for n in memory.notes
                                       if n.code != MEMORY_NOT_RECORDED))
