"""Memory of one input: find its ranks, read each where it is read, reduce it there.

``read_memory(path) -> MemoryData`` reads one input (a rank directory, an
``ASCEND_PROFILER_OUTPUT`` directory, a profiler db or a directory of rank directories).
A rank's memory files can hold hundreds of thousands of samples and a cluster has
hundreds of ranks, so each rank is reduced, in the thread or Dask worker that read it, to
what the comparison needs (``MemorySummary``): peaks per component, a peak-preserving
timeline of at most ``MAX_POINTS`` samples per component, allocations per operator name,
module peaks and HBM bandwidth sums. The raw frames are kept only when asked for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from . import find_rank_sources, read_all
from .derive import concat_frames
from .memory_files import (
    COPY_COLUMNS,
    DB_GLOB,
    HBM_COLUMNS,
    MEMORY_RECORD,
    MODULE_COLUMNS,
    NPU_MODULE_MEM,
    OPERATOR_COLUMNS,
    OPERATOR_MEMORY,
    RECORD_COLUMNS,
    TRACE_VIEW,
    db_tables,
    empty_frame,
    open_db,
    read_db_copies,
    read_db_hbm,
    read_db_modules,
    read_db_operators,
    read_db_records,
    read_memory_record,
    read_npu_module_mem,
    read_operator_memory,
    read_trace_hbm,
)
from .torch_text import output_dir, rank_dir_of

MEMORY_FILES = (MEMORY_RECORD, OPERATOR_MEMORY, NPU_MODULE_MEM)
MAX_POINTS = 2000  # timeline samples kept per rank and component

PEAK_COLUMNS = ("component", "allocated_mb", "reserved_mb")
TIMELINE_COLUMNS = ("component", "time_ms", "reserved_mb")
OPERATOR_TOTAL_COLUMNS = ("name", "count", "total_mb", "largest_mb")
MODULE_PEAK_COLUMNS = ("component", "reserved_mb")
HBM_TOTAL_COLUMNS = ("direction", "samples", "total_gbps", "peak_gbps")


def _no_rows(columns: tuple[str, ...]) -> pd.DataFrame:
    frame = empty_frame(columns)
    if "direction" in columns:
        frame = frame.astype({"direction": "object"})
    return frame.assign(rank=pd.Series(dtype="int64"))[["rank", *columns]]


@dataclass(frozen=True, eq=False)
class MemorySummary:
    """What the comparison reads, per rank; sizes in MB.

    ``peaks``: rank, component, allocated_mb, reserved_mb (maxima; NaN when not recorded).
    ``timelines``: rank, component, time_ms (since that rank's first sample of the
    component), reserved_mb; at most MAX_POINTS rows per rank and component, the largest
    sample of each time bucket. ``operators``: rank, name, count, total_mb, largest_mb.
    ``modules``: rank, component, reserved_mb (peak). ``hbm``: rank, direction, samples,
    total_gbps (sum over samples), peak_gbps.
    """

    peaks: pd.DataFrame = field(default_factory=lambda: _no_rows(PEAK_COLUMNS))
    timelines: pd.DataFrame = field(default_factory=lambda: _no_rows(TIMELINE_COLUMNS))
    operators: pd.DataFrame = field(default_factory=lambda: _no_rows(OPERATOR_TOTAL_COLUMNS))
    modules: pd.DataFrame = field(default_factory=lambda: _no_rows(MODULE_PEAK_COLUMNS))
    hbm: pd.DataFrame = field(default_factory=lambda: _no_rows(HBM_TOTAL_COLUMNS))


@dataclass(frozen=True, eq=False)
class MemoryData:
    """Memory of one input, every rank stacked; sizes in MB, times in µs.

    ``summary`` is what the comparison reads. ``copies``: rank, direction, count, bytes
    (db MEMCPY_INFO totals over the profile). ``warnings`` name what is missing. With
    ``keep_rows`` the raw samples are kept too (else None): ``records`` (rank, component,
    time_us, allocated_mb, reserved_mb), ``operators`` (rank, name, size_mb, one row per
    allocation), ``modules`` (rank, component, time_us, reserved_mb) and ``hbm`` (rank,
    direction, time_us, gbps).
    """

    ranks: tuple[int, ...]
    summary: MemorySummary = field(default_factory=MemorySummary)
    warnings: tuple[str, ...] = ()
    copies: pd.DataFrame = field(default_factory=lambda: _no_rows(COPY_COLUMNS))
    records: pd.DataFrame | None = None
    operators: pd.DataFrame | None = None
    modules: pd.DataFrame | None = None
    hbm: pd.DataFrame | None = None


def _has_memory(path: Path) -> bool:
    out = output_dir(path)
    return any((out / name).is_file() for name in MEMORY_FILES) or any(out.glob(DB_GLOB))


def _rank_dirs(path: Path) -> list[Path]:
    """Rank directories of an input: find_rank_sources' answer when it has one.

    A db-only or memory-only result has no kernel_details.csv, which is what the
    registered formats look for; such directories are then found by their memory files.
    """
    try:
        return find_rank_sources(path)[1]
    except InputError:
        if path.is_file() and path.match(DB_GLOB):
            return [path]
        if not path.is_dir():
            raise
        if _has_memory(path):
            return [path]
        ranks = sorted(child for child in path.iterdir() if child.is_dir() and
                       _has_memory(child))
        if not ranks:
            raise
        return ranks


def _locate(source: Path) -> tuple[Path, list[Path]]:
    """The export directory of a rank source and its profiler dbs (a source may be a .db)."""
    if source.is_file():
        return source.parent, [source] if source.suffix == ".db" else []
    out = output_dir(source)
    return out, sorted(out.glob(DB_GLOB))


def _rank_ids(rank_dirs: list[Path]) -> tuple[list[int], list[str]]:
    """Rank from ``profiler_info_<rank>.json``, else the db name, else the position."""
    ranks = []
    for position, rank_dir in enumerate(rank_dirs):
        out, dbs = _locate(rank_dir)
        names = sorted(p.name for p in rank_dir_of(out).glob("profiler_info_*.json"))
        names += [p.name for p in dbs]
        found = [m.group(1) for m in map(re.compile(r"_(\d+)\.(?:json|db)$").search, names)
                 if m]
        ranks.append(int(found[0]) if found else position)
    if len(set(ranks)) < len(ranks):
        return list(range(len(rank_dirs))), ["several results carry the same rank id; "
                                             "ranks numbered by directory order instead"]
    return ranks, []


def _missing(label: str, text_name: str, table: str, has_db: bool, what: str) -> str:
    twin = f" (nor a {table} table in the db)" if has_db else ""
    return f"{label}: no {text_name}{twin}; {what} (was profile_memory=True?)"


def _read_files(rank_dir: Path, rank: int) -> tuple:
    """Read one rank: text files first, each missing one from the db twin when present.

    Returns records, operators, modules, warnings, copies and HBM samples. Copy bytes
    come from the db only; HBM from the db, else from trace_view.json.
    """
    out, dbs = _locate(rank_dir)
    label = f"rank {rank} ({rank_dir_of(out).name})"
    warnings = [f"{label}: several profiler dbs; using {dbs[0].name}"] if len(dbs) > 1 else []
    text = {name: (out / name).is_file() for name in MEMORY_FILES}
    connection = open_db(dbs[0]) if dbs else None
    try:
        try:
            tables = db_tables(connection, dbs[0]) if connection else set()
        except InputError as exc:
            if not all(text.values()):
                raise
            # Every memory file is in text: the db only adds copies and HBM samples.
            tables = set()
            warnings.append(f"{label}: {exc}; copies and HBM bandwidth not read from it")
        if text[MEMORY_RECORD]:
            records, notes = read_memory_record(out / MEMORY_RECORD)
            warnings += [f"{label}: {note}" for note in notes]
        elif tables & {"MEMORY_RECORD", "NPU_MEM"}:
            records = read_db_records(connection, dbs[0], tables)
        else:
            records = empty_frame(RECORD_COLUMNS)
            warnings.append(_missing(label, MEMORY_RECORD, "MEMORY_RECORD", bool(dbs),
                                     "peak memory unknown"))
        if text[OPERATOR_MEMORY]:
            operators = read_operator_memory(out / OPERATOR_MEMORY)
        elif "OP_MEMORY" in tables:
            operators = read_db_operators(connection, dbs[0])
        else:
            operators = empty_frame(OPERATOR_COLUMNS)
            warnings.append(_missing(label, OPERATOR_MEMORY, "OP_MEMORY", bool(dbs),
                                     "per-operator allocations unknown"))
        if text[NPU_MODULE_MEM]:
            modules, notes = read_npu_module_mem(out / NPU_MODULE_MEM)
            warnings += [f"{label}: {note}" for note in notes]
        elif "NPU_MODULE_MEM" in tables:
            modules = read_db_modules(connection, dbs[0], tables)
        else:
            modules = empty_frame(MODULE_COLUMNS)
            warnings.append(_missing(label, NPU_MODULE_MEM, "NPU_MODULE_MEM", bool(dbs),
                                     "memory per module unknown"))
        copies = read_db_copies(connection, dbs[0], tables) if "MEMCPY_INFO" in tables \
            else _no_rows(COPY_COLUMNS).drop(columns="rank")
        if "HBM" in tables:
            hbm = read_db_hbm(connection, dbs[0])
        elif (out / TRACE_VIEW).is_file() and \
                (out / TRACE_VIEW).stat().st_size <= TRACE_HBM_MAX_BYTES:
            hbm = read_trace_hbm(out / TRACE_VIEW) if _mentions_hbm(out / TRACE_VIEW) \
                else _no_rows(HBM_COLUMNS).drop(columns="rank")
        else:
            if (out / TRACE_VIEW).is_file():
                # Streaming a multi-GB trace again only for HBM counters would dominate the
                # run; the db export carries the same samples in its HBM table.
                warnings.append(f"{label}: {TRACE_VIEW} over "
                                f"{TRACE_HBM_MAX_BYTES // 2**20} MiB: HBM bandwidth not read "
                                "(export_type=db has it in the HBM table)")
            hbm = _no_rows(HBM_COLUMNS).drop(columns="rank")
    finally:
        if connection is not None:
            connection.close()
    return records, operators, modules, warnings, copies, hbm


TRACE_HBM_MAX_BYTES = 256 * 2**20


def _mentions_hbm(path: Path) -> bool:
    """A byte search (memory-mapped, GB/s) before streaming a trace for HBM counters."""
    import mmap

    with open(path, "rb") as handle:
        if handle.seek(0, 2) == 0:
            return False
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(b'"HBM"') >= 0


# --------------------------------------------------------------------------- per rank


def _timeline(records: pd.DataFrame) -> pd.DataFrame:
    """Reserved MB per component over ms since its first sample, thinned per component."""
    frames = []
    for component, rows in records.dropna(subset=["reserved_mb"]).groupby("component",
                                                                          sort=True):
        rows = rows.sort_values("time_us", kind="mergesort").reset_index(drop=True)
        time_ms = (rows["time_us"] - rows["time_us"].iloc[0]) / 1000.0
        if len(rows) > MAX_POINTS:
            # Peak-preserving thinning: keep the largest sample of each time bucket.
            span = float(time_ms.iloc[-1]) or 1.0
            bucket = np.minimum((time_ms.to_numpy() / span * MAX_POINTS).astype(np.int64),
                                MAX_POINTS - 1)
            kept = np.sort(rows["reserved_mb"].groupby(bucket).idxmax().to_numpy())
            rows, time_ms = rows.loc[kept], time_ms.loc[kept]
        frames.append(pd.DataFrame({"component": component, "time_ms": time_ms.to_numpy(),
                                    "reserved_mb": rows["reserved_mb"].to_numpy()}))
    return pd.concat(frames, ignore_index=True) if frames else empty_frame(TIMELINE_COLUMNS)


def summarize_memory(records: pd.DataFrame, operators: pd.DataFrame, modules: pd.DataFrame,
                     hbm: pd.DataFrame) -> MemorySummary:
    """One rank's raw memory frames (without a rank column) → its MemorySummary."""
    peaks = records.groupby("component", sort=True)[["allocated_mb", "reserved_mb"]].max()
    by_name = operators.groupby("name", sort=True)["size_mb"]
    totals = pd.DataFrame({"count": by_name.size().astype("float64"),
                           "total_mb": by_name.sum(), "largest_mb": by_name.max()})
    module_peaks = modules.groupby("component", sort=True)["reserved_mb"].max()
    by_direction = hbm.groupby("direction", sort=True)["gbps"]
    bandwidth = pd.DataFrame({"samples": by_direction.size(), "total_gbps": by_direction.sum(),
                              "peak_gbps": by_direction.max()})
    return MemorySummary(peaks.reset_index(), _timeline(records), totals.reset_index(),
                         module_peaks.reset_index(), bandwidth.reset_index())


@dataclass
class RankMemory:
    """One rank's memory as a worker hands it back."""

    rank: int
    summary: MemorySummary
    copies: pd.DataFrame
    warnings: list[str]
    raw: tuple[pd.DataFrame, ...] | None  # records, operators, modules, hbm


def read_and_reduce_memory(keep_rows: bool, source: tuple[Path, int]) -> RankMemory:
    """Read one rank's memory files and reduce them, in a thread or on a Dask worker."""
    rank_dir, rank = source
    records, operators, modules, warnings, copies, hbm = _read_files(rank_dir, rank)
    summary = summarize_memory(records, operators, modules, hbm)
    return RankMemory(rank, summary, copies, warnings,
                      (records, operators, modules, hbm) if keep_rows else None)


def _stack(frames: list[pd.DataFrame], ranks: list[int], columns: tuple[str, ...]):
    tagged = [f.assign(rank=rank) for f, rank in zip(frames, ranks) if len(f)]
    if not tagged:
        return _no_rows(columns)
    return concat_frames(tagged)[["rank", *columns]]


def read_memory(path: str | Path, *, jobs: int = 1, scheduler: str | None = None,
                keep_rows: bool = True) -> MemoryData:
    """Read the memory files of every rank of one input into a MemoryData.

    Ranks are read by ``jobs`` threads, or on the Dask cluster at ``scheduler``;
    ``keep_rows=False`` keeps only the per-rank summaries. Missing files (the profile was
    taken without ``profile_memory``) become warnings; unreadable or truncated files raise
    InputError, files lacking columns SchemaError.
    """
    rank_dirs = _rank_dirs(Path(path))
    ranks, warnings = _rank_ids(rank_dirs)
    parts = read_all(partial(read_and_reduce_memory, keep_rows), list(zip(rank_dirs, ranks)),
                     jobs, lambda done, total: None, scheduler)
    for part in parts:
        warnings += part.warnings

    def stacked(name: str, columns: tuple[str, ...]) -> pd.DataFrame:
        return _stack([getattr(p.summary, name) for p in parts], ranks, columns)

    summary = MemorySummary(stacked("peaks", PEAK_COLUMNS),
                            stacked("timelines", TIMELINE_COLUMNS),
                            stacked("operators", OPERATOR_TOTAL_COLUMNS),
                            stacked("modules", MODULE_PEAK_COLUMNS),
                            stacked("hbm", HBM_TOTAL_COLUMNS))
    raw = {}
    if keep_rows:
        for index, (name, columns) in enumerate((("records", RECORD_COLUMNS),
                                                 ("operators", OPERATOR_COLUMNS),
                                                 ("modules", MODULE_COLUMNS),
                                                 ("hbm", HBM_COLUMNS))):
            raw[name] = _stack([p.raw[index] for p in parts], ranks, columns)
    return MemoryData(ranks=tuple(ranks), summary=summary, warnings=tuple(warnings),
                      copies=_stack([p.copies for p in parts], ranks, COPY_COLUMNS), **raw)
