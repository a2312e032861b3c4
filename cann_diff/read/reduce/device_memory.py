"""Memory of one rank, read and reduced in the worker that reads its kernels.

``read_rank_memory(source, keep_rows, intervals)`` reads the memory files of one rank
source (a rank directory, its ``ASCEND_PROFILER_OUTPUT``, or a profiler db), text first and
each missing file from its db twin. A rank's memory files can hold hundreds of thousands
of samples and a cluster has hundreds of ranks, so each rank is reduced there to what the
comparison needs (``MemorySummary``): peaks per component, a peak-preserving timeline of at
most ``MAX_POINTS`` samples per component (allocated and reserved MB, each measure's peak
kept), allocations per operator name, module peaks and HBM bandwidth sums. The raw
frames are kept only when asked for. ``memory_data`` stacks the ranks of one input, under
the rank ids ``load_run`` gave them, into a ``MemoryData``.

Steps and clocks
----------------
``--steps`` keeps the memory samples (memory_record, npu_module_mem, HBM) that lie inside
the chosen steps' time span, taken from the rank's kernels: a step spans from its first
kernel's start to its last kernel's end, and consecutive chosen steps form one span (the
gap between them included). Peaks and the timeline are computed after that selection.

The clocks agree: ``Timestamp(us)`` of memory_record.csv / npu_module_mem.csv, the ``ts``
of trace_view.json's HBM counters and the kernels' ``Start Time(us)`` are all µs of local
Unix time (the profiler converts the device's cycle counter to host time), and so are the
db's ``timestampNs``. Measured on real exports (Ascend/msinsight's public test data, one step each):

* MI-2025 text/level1 rank 0 — kernels 1736408883704643 … 1736408883841224 µs (136.6 ms).
  Its PTA allocator samples start 10.4 ms *before* the first kernel (the host allocates
  ahead of the device running the kernel): 12 of 381 fall outside the kernel span, all
  381 inside the host's ProfilerStep#50 window of trace_view.json (which opens 17.9 ms
  before the first kernel); 113 of 114 GE samples inside. Its APP samples (the driver's,
  every ~20 ms) start 131 ms before the first kernel, during the warm-up: 7 of 14 inside.
  npu_module_mem: 539 of 1078 inside; HBM counters: 48 of 104 inside.
* CANN 8.3 st/level2 rank 0 (810 ms step): 9301 of 9309 PTA samples, all 41 APP inside.
* MI-2023 test_rank_0 (tests/data): both APP samples lie 40–60 ms before the first kernel
  of step 2; the three PTA samples inside, 1 of 3 GE samples inside.

A step selection therefore drops the host's allocations made a few ms before the first
kernel of the first chosen step; the profiler's host-side step windows (ProfilerStep#,
STEP_TIME) would keep them, but the format readers do not hand them over. Operator
allocations (operator_memory.csv) and copy bytes (MEMCPY_INFO) carry no sample time here
and always cover the whole profile.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from ...errors import InputError
from ...schema import (
    COPY_COLUMNS,
    HBM_TOTAL_COLUMNS,
    MAX_POINTS,
    MEMORY_NOT_RECORDED,
    MODULE_PEAK_COLUMNS,
    OPERATOR_TOTAL_COLUMNS,
    PEAK_COLUMNS,
    SPAN_COLUMNS,
    TIMELINE_COLUMNS,
    MemoryData,
    MemorySummary,
    Note,
    memory_frame,
)
from ..formats.memory_files import (
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
from ..formats.torch_text import output_dir, rank_dir_of
from ..frames import concat_ranks

MEMORY_FILES = (MEMORY_RECORD, OPERATOR_MEMORY, NPU_MODULE_MEM)
# db tables that hold memory or data movement: a db without kernels but with one of these
# is a memory-only rank result.
MEMORY_TABLES = {"MEMORY_RECORD", "NPU_MEM", "OP_MEMORY", "NPU_MODULE_MEM", "MEMCPY_INFO", "HBM"}
# Note codes: a memory file or table the profile lacks (expected when profile_memory was
# off), and any other caveat of a rank's memory.
MEMORY_NOTE = "memory"


def _missing(text_name: str, table: str, has_db: bool, what: str) -> Note:
    twin = f" (nor a {table} table in the db)" if has_db else ""
    return Note(MEMORY_NOT_RECORDED, f"no {text_name}{twin}; {what} (was profile_memory=True?)")


def _notes(texts: list[str]) -> list[Note]:
    return [Note(MEMORY_NOTE, text) for text in texts]


def _locate(source: Path) -> tuple[Path, list[Path]]:
    """The export directory of a rank source and its profiler dbs (a source may be a .db)."""
    if source.is_file():
        return source.parent, [source] if source.suffix == ".db" else []
    out = output_dir(source)
    return out, sorted(out.glob(DB_GLOB))


def has_memory_files(source: Path) -> bool:
    """True when a rank source holds a memory text file or a profiler db."""
    out, dbs = _locate(source)
    return bool(dbs) or any((out / name).is_file() for name in MEMORY_FILES)


def _read_hbm(connection: sqlite3.Connection, db: Path, tables: set[str], out: Path,
              notes: list[Note]) -> pd.DataFrame:
    """HBM samples from the db, else from a trace_view.json that is small enough."""
    if "HBM" in tables:
        return read_db_hbm(connection, db)
    trace = out / TRACE_VIEW
    if trace.is_file() and trace.stat().st_size <= TRACE_HBM_MAX_BYTES:
        return read_trace_hbm(trace) if _mentions_hbm(trace) \
            else _absent(HBM_COLUMNS)
    if trace.is_file():
        # Streaming a multi-GB trace again only for HBM counters would dominate the run; the
        # db export carries the same samples in its HBM table.
        notes.append(Note(MEMORY_NOTE, f"{TRACE_VIEW} over {TRACE_HBM_MAX_BYTES // 2**20} "
                          "MiB: HBM bandwidth not read (export_type=db has it in the HBM "
                          "table)"))
    return _absent(HBM_COLUMNS)


# The empty frame of each kind that a rank without its file or table hands back: one
# object for all such ranks, as their summary is (``_summarize``). Frames are only read
# after the read (filtered into new frames, stacked), never changed in place.
_ABSENT: dict[tuple[str, ...], pd.DataFrame] = {}


def _absent(columns: tuple[str, ...]) -> pd.DataFrame:
    if columns not in _ABSENT:
        _ABSENT[columns] = memory_frame(columns, ranked=False)
    return _ABSENT[columns]


def _read_files(source: Path) -> tuple[dict[str, pd.DataFrame], list[Note], bool, Path]:
    """Read one rank: text files first, each missing one from the db twin when present.

    Returns the frames (records, operators, modules, copies, hbm), notes (what is missing,
    without the rank label), whether the rank recorded any memory at all and the export
    directory. Copy bytes come from the db only; HBM from the db, else from trace_view.json.
    """
    out, dbs = _locate(source)
    notes = _notes([f"several profiler dbs; using {dbs[0].name}"] if len(dbs) > 1 else [])
    text = {name: (out / name).is_file() for name in MEMORY_FILES}
    db = dbs[0] if dbs else None
    connection = open_db(db) if db else None
    try:
        try:
            tables = db_tables(connection, db) if connection and db else set()
        except InputError as exc:
            if not all(text.values()):
                raise
            # Every memory file is in text: the db only adds copies and HBM samples.
            tables = set()
            notes += _notes([f"{exc}; copies and HBM bandwidth not read from it"])
        # Read from only where ``tables`` names a table, which only an open db gives.
        conn, db_file = cast(sqlite3.Connection, connection), cast(Path, db)
        frames = {}
        if text[MEMORY_RECORD]:
            frames["records"], more = read_memory_record(out / MEMORY_RECORD)
            notes += _notes(more)
        elif tables & {"MEMORY_RECORD", "NPU_MEM"}:
            frames["records"] = read_db_records(conn, db_file, tables)
        else:
            frames["records"] = _absent(RECORD_COLUMNS)
            notes.append(_missing(MEMORY_RECORD, "MEMORY_RECORD", bool(dbs),
                                  "peak memory unknown"))
        if text[OPERATOR_MEMORY]:
            frames["operators"] = read_operator_memory(out / OPERATOR_MEMORY)
        elif "OP_MEMORY" in tables:
            frames["operators"] = read_db_operators(conn, db_file)
        else:
            frames["operators"] = _absent(OPERATOR_COLUMNS)
            notes.append(_missing(OPERATOR_MEMORY, "OP_MEMORY", bool(dbs),
                                  "per-operator allocations unknown"))
        if text[NPU_MODULE_MEM]:
            frames["modules"], more = read_npu_module_mem(out / NPU_MODULE_MEM)
            notes += _notes(more)
        elif "NPU_MODULE_MEM" in tables:
            frames["modules"] = read_db_modules(conn, db_file, tables)
        else:
            frames["modules"] = _absent(MODULE_COLUMNS)
            notes.append(_missing(NPU_MODULE_MEM, "NPU_MODULE_MEM", bool(dbs),
                                  "memory per module unknown"))
        frames["copies"] = read_db_copies(conn, db_file, tables) if "MEMCPY_INFO" in tables \
            else _absent(COPY_COLUMNS)
        frames["hbm"] = _read_hbm(conn, db_file, tables, out, notes)
    finally:
        if connection is not None:
            connection.close()
    recorded = any(text.values()) or bool(tables & MEMORY_TABLES) or len(frames["hbm"]) > 0
    return frames, notes, recorded, out


TRACE_HBM_MAX_BYTES = 256 * 2**20


def _mentions_hbm(path: Path) -> bool:
    """A byte search (memory-mapped, GB/s) before streaming a trace for HBM counters."""
    import mmap

    with open(path, "rb") as handle:
        if handle.seek(0, 2) == 0:
            return False
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return data.find(b'"HBM"') >= 0


# --------------------------------------------------------------------------- steps


def step_intervals(spans: pd.DataFrame, chosen: np.ndarray) -> np.ndarray:
    """Time intervals (µs, shape (k, 2), sorted) of the chosen steps of one rank.

    ``spans`` holds one rank's ``step``, ``start_us``, ``end_us`` (see ``MemoryData``),
    ``chosen`` marks the steps selected. Consecutive chosen steps (in the rank's own step
    order) merge into one interval, so that the samples between them are kept too.
    """
    order = np.argsort(spans["step"].to_numpy(np.int64), kind="stable")
    picked = np.asarray(chosen, dtype=bool)[order]
    if not picked.any():
        return np.empty((0, 2))
    run = np.cumsum(~picked)[picked]  # one id per run of consecutive chosen steps
    starts = spans["start_us"].to_numpy(np.float64)[order][picked]
    ends = spans["end_us"].to_numpy(np.float64)[order][picked]
    frame = pd.DataFrame({"run": run, "start": starts, "end": ends})
    merged = frame.groupby("run", sort=True).agg(start=("start", "min"), end=("end", "max"))
    return merged[["start", "end"]].to_numpy(np.float64)


def _inside(times: pd.Series, intervals: np.ndarray) -> np.ndarray:
    """Which ``times`` (µs) fall inside one of ``intervals`` (ends included)."""
    values = times.to_numpy(np.float64)
    if not len(intervals):
        return np.zeros(len(values), dtype=bool)
    at = np.searchsorted(intervals[:, 0], values, side="right") - 1
    return (at >= 0) & (values <= intervals[np.maximum(at, 0), 1])


def keep_inside(frames: dict[str, pd.DataFrame], intervals: np.ndarray
                ) -> dict[str, pd.DataFrame]:
    """The frames with only the timed samples (records, modules, hbm) inside ``intervals``."""
    kept = dict(frames)
    for name in ("records", "modules", "hbm"):
        frame = frames[name]
        kept[name] = frame[_inside(frame["time_us"], intervals)].reset_index(drop=True)
    return kept


# --------------------------------------------------------------------------- per rank


MEASURES = ("allocated_mb", "reserved_mb")


def _thinned(rows: pd.DataFrame, time_ms: pd.Series) -> np.ndarray:
    """Row positions that keep each measure's largest sample of every time bucket.

    Peak-preserving thinning to at most MAX_POINTS rows: the buckets are shared out among
    the measures the component records (APP: reserved only; PTA, GE, PTA+GE: both), so the
    peak of the one the chart shows is never a sample thinned away.
    """
    measures = [m for m in MEASURES if rows[m].notna().any()]
    buckets = MAX_POINTS // max(len(measures), 1)
    span = float(time_ms.iloc[-1]) or 1.0
    bucket = np.minimum((time_ms.to_numpy() / span * buckets).astype(np.int64), buckets - 1)
    kept = [rows[m].dropna().groupby(bucket[rows[m].notna().to_numpy()]).idxmax().to_numpy()
            for m in measures]
    return np.unique(np.concatenate(kept)) if kept else np.arange(0)


def _timeline(records: pd.DataFrame) -> pd.DataFrame:
    """Allocated and reserved MB per component over ms since its first sample, thinned."""
    frames = []
    timed = records.dropna(subset=list(MEASURES), how="all")
    for component, rows in timed.groupby("component", sort=True):  # a handful of components
        rows = rows.sort_values("time_us", kind="mergesort").reset_index(drop=True)
        time_ms = (rows["time_us"] - rows["time_us"].iloc[0]) / 1000.0
        if len(rows) > MAX_POINTS:
            kept = _thinned(rows, time_ms)
            rows, time_ms = rows.loc[kept], time_ms.loc[kept]
        frames.append(pd.DataFrame({"component": component, "time_ms": time_ms.to_numpy(),
                                    **{m: rows[m].to_numpy(np.float64) for m in MEASURES}}))
    if not frames:
        return memory_frame(TIMELINE_COLUMNS, ranked=False)
    return pd.concat(frames, ignore_index=True)


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


RAW_FRAMES = {"records": RECORD_COLUMNS, "operators": OPERATOR_COLUMNS,
              "modules": MODULE_COLUMNS, "hbm": HBM_COLUMNS}


@dataclass
class RankMemory:
    """One rank's memory as its worker hands it back (frames without a rank column).

    ``name`` is the rank directory's name (for the warnings, labelled once the rank id is
    known); ``notes`` say what is missing; ``recorded`` is False when the rank holds no
    memory file or table at all; ``raw`` (records, operators, modules, hbm) only with
    ``keep_rows``.
    """

    name: str
    summary: MemorySummary
    copies: pd.DataFrame
    notes: list[Note]
    recorded: bool
    raw: dict[str, pd.DataFrame] | None = None


# The summary of empty frames, by their columns and dtypes (it depends on nothing else).
_EMPTY_SUMMARIES: dict[tuple, MemorySummary] = {}


def _layout(frame: pd.DataFrame) -> tuple:
    return tuple(frame.columns), tuple(str(t) for t in frame.dtypes)


def _summarize(frames: dict[str, pd.DataFrame]) -> MemorySummary:
    """The rank's memory summary; one shared object for every rank without memory.

    Most ranks of a cluster hold no memory files. Their empty frames are summarized
    once, and the one summary is handed out to all of them: a rank's summary is only
    read (stacked with the other ranks'), and a worker's chunk of ranks then pickles it
    once on its way back instead of five empty frames per rank.
    """
    raw = [frames[name] for name in RAW_FRAMES]
    if any(len(frame) for frame in raw):
        return summarize_memory(*raw)
    absent = {id(frame) for frame in _ABSENT.values()}
    # The shared frames of absent files are known by identity: a frame's dtypes cost more
    # than the rest of such a rank's memory read (~0.2 ms each).
    key = tuple((id(frame),) if id(frame) in absent else _layout(frame) for frame in raw)
    if key not in _EMPTY_SUMMARIES:
        _EMPTY_SUMMARIES[key] = summarize_memory(*raw)
    return _EMPTY_SUMMARIES[key]


# The empty copies frame a rank without copies hands back, shared like its summary.
_EMPTY_COPIES: dict[tuple, pd.DataFrame] = {}


def _shared_if_empty(frame: pd.DataFrame) -> pd.DataFrame:
    if len(frame) or any(frame is absent for absent in _ABSENT.values()):
        return frame  # an absent file's frame is shared already
    return _EMPTY_COPIES.setdefault(_layout(frame), frame)


def read_rank_memory(source: Path, keep_rows: bool,
                     intervals: np.ndarray | None = None) -> RankMemory:
    """Read one rank's memory and reduce it, in the thread or Dask worker that read the rank.

    ``intervals`` (µs, from ``step_intervals``) keeps only the timed samples inside the
    chosen steps, before anything is summarized; None keeps the whole profile.
    """
    frames, notes, recorded, out = _read_files(source)
    if intervals is not None:
        frames = keep_inside(frames, intervals)
    raw = {name: frames[name] for name in RAW_FRAMES} if keep_rows else None
    return RankMemory(rank_dir_of(out).name, _summarize(frames),
                      _shared_if_empty(frames["copies"]), notes, recorded, raw)


# --------------------------------------------------------------------------- one input


def _stack(frames: list[pd.DataFrame], ranks: list[int], columns: tuple[str, ...]):
    if not any(len(f) for f in frames):
        return memory_frame(columns)
    return concat_ranks(frames, ranks)[["rank", *columns]]


SUMMARY_FRAMES = {"peaks": PEAK_COLUMNS, "timelines": TIMELINE_COLUMNS,
                  "operators": OPERATOR_TOTAL_COLUMNS, "modules": MODULE_PEAK_COLUMNS,
                  "hbm": HBM_TOTAL_COLUMNS}


def _stack_summaries(summaries: list[MemorySummary], ranks: list[int]) -> MemorySummary:
    return MemorySummary(**{name: _stack([getattr(s, name) for s in summaries], ranks, columns)
                            for name, columns in SUMMARY_FRAMES.items()})


def memory_data(parts: list[tuple[int, RankMemory]], spans: list[pd.DataFrame],
                keep_rows: bool, warnings: Sequence[Note] = ()) -> MemoryData:
    """Stack the ranks of one input (``(rank id, RankMemory)``, ``spans`` alike) into one.

    Each rank's notes become warnings ``rank <id> (<directory>): <note>``, after
    ``warnings`` (which concern the input as a whole).
    """
    ranks = [rank for rank, _ in parts]
    labelled = list(warnings) + [Note(note.code, f"rank {rank} ({part.name}): {note.text}")
                                 for rank, part in parts for note in part.notes]
    raw = {}
    if keep_rows:
        raw = {name: _stack([(p.raw or {})[name] for _, p in parts], ranks, columns)
               for name, columns in RAW_FRAMES.items()}
    return MemoryData(ranks=tuple(ranks), summary=_stack_summaries([p.summary for _, p in parts],
                                                                   ranks),
                      warnings=tuple(labelled),
                      copies=_stack([p.copies for _, p in parts], ranks, COPY_COLUMNS),
                      step_spans=_stack(spans, ranks, SPAN_COLUMNS), **raw)


def select_memory(memory: MemoryData, chosen: np.ndarray) -> MemoryData:
    """The memory of the steps marked in ``chosen`` (one flag per ``memory.step_spans`` row).

    Needs the raw samples (``keep_rows``); without them the memory is returned whole with a
    warning. Ranks without step spans (no kernels, or no step ids) are kept whole.
    """
    if memory.records is None:
        return replace(memory, warnings=(*memory.warnings, Note(
            MEMORY_NOTE, "memory rows were not kept: its figures cover every step (pass "
            "steps= to load_run)")))
    raw = {name: getattr(memory, name) for name in RAW_FRAMES}
    summaries: list[MemorySummary] = []
    kept: dict[str, list[pd.DataFrame]] = {name: [] for name in RAW_FRAMES}
    spans = memory.step_spans.assign(chosen=np.asarray(chosen, dtype=bool))
    for rank in memory.ranks:
        frames = {name: frame[(frame["rank"] == rank).to_numpy()].drop(columns="rank")
                  for name, frame in raw.items()}
        rank_spans = spans[(spans["rank"] == rank).to_numpy()]
        if len(rank_spans):
            frames = keep_inside(frames, step_intervals(rank_spans,
                                                        rank_spans["chosen"].to_numpy()))
        summaries.append(_summarize(frames))
        for name in RAW_FRAMES:
            kept[name].append(frames[name])
    ranks = list(memory.ranks)
    return replace(memory, summary=_stack_summaries(summaries, ranks),
                   **{name: _stack(kept[name], ranks, columns)
                      for name, columns in RAW_FRAMES.items()})
