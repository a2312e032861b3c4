"""A rank result without kernels: what it holds besides them (steps, communication, memory).

In a real CANN 8.3 job (Ascend/msinsight's ``test/st/level2`` test data) two of
the four ranks hold step_trace_time.csv, communication.json and analysis.db but no
kernel_details.csv (the profiler kept their device data elsewhere); db exports taken with
``profile_memory`` alone hold memory tables and no COMPUTE_TASK_INFO. Such a rank still
counts: its step breakdown and communication enter the per-rank table and slow-rank
detection, its memory the memory comparison. Text files come first, the db twin
(``StepTraceTime``, ``CommAnalyzerTime`` of analysis.db) fills in what the text lacks.
Memory is read by the worker for every rank alike (``memory.py``), not here.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import SchemaError
from ..rank_data import RankData
from ..reduce.device_memory import MEMORY_FILES, has_memory_files
from .csv_files import read_step_trace
from .json_files import read_communication, read_profiler_info
from .sqlite_db import (
    ANALYSIS_DBS,
    DB_NAME,
    connect,
    find_db,
    read_comm_table,
    read_step_trace_table,
    tables_of,
)
from .torch_text import output_dir, rank_dir_of

FORMAT = "no_kernels"
STEP_TRACE = "step_trace_time.csv"
COMMUNICATION = "communication.json"
FILES = (STEP_TRACE, COMMUNICATION, *ANALYSIS_DBS, *MEMORY_FILES)
LOOKS_FOR = (f"ASCEND_PROFILER_OUTPUT/{{{STEP_TRACE},{COMMUNICATION},analysis.db,"
             "memory_record.csv,…} without kernels")
NO_WINDOWS = pd.DataFrame({"step": [], "start_ns": [], "end_ns": []}, dtype="int64")


def _out(path: Path) -> Path:
    return path.parent if path.is_file() else output_dir(path)


def is_rank_dir(path: Path) -> bool:
    """True for a rank directory (or profiler db) holding any of ``FILES`` or a profiler db.

    Only asked once every kernel format has declined ``path``.
    """
    if path.is_file():
        return find_db(path) is not None
    if not path.is_dir():
        return False
    out = output_dir(path)
    return any((out / name).is_file() for name in FILES) or has_memory_files(path)


def _comm_span_ns(conn: sqlite3.Connection, tables: dict[str, set[str]]) -> int | None:
    """Span of the communication ops (ns): the only clock an analysis.db alone offers.

    ``read_step_trace_table`` tells ms from µs by comparing the stage with a span; without
    kernels the span of CommAnalyzerTime (start µs + elapse ms) bounds the steps instead.
    """
    if not {"start_timestamp", "elapse_time"} <= tables.get("CommAnalyzerTime", set()):
        return None
    low, high = conn.execute("SELECT min(start_timestamp), max(start_timestamp + "
                             "elapse_time * 1000) FROM CommAnalyzerTime").fetchone()
    if low is None or high is None or not np.isfinite([low, high]).all() or high <= low:
        return None
    return int((high - low) * 1000)


def _from_analysis_db(out: Path, rank: int | None, steps, comm):
    """Steps and/or communication from analysis.db where the text files were missing."""
    analysis = next((out / n for n in ANALYSIS_DBS if (out / n).is_file()), None)
    if analysis is None or (steps is not None and comm is not None):
        return steps, comm
    with closing(connect(analysis)) as conn:
        tables = tables_of(conn)
        if steps is None:
            steps = read_step_trace_table(conn, tables, analysis, NO_WINDOWS,
                                          _comm_span_ns(conn, tables), None)
        if comm is None:
            comm = read_comm_table(conn, tables, analysis, rank if rank is not None else 0)
    return steps, comm


def read_rank(path: Path) -> RankData:
    """Read what a kernel-less rank holds; its memory is read by the worker."""
    out = _out(path)
    root = rank_dir_of(out)
    infos = sorted(root.glob("profiler_info*.json"))
    info = read_profiler_info(infos[0]) if infos else {}
    db = find_db(path)
    match = DB_NAME.match(db.name) if db is not None else None
    if info.get("rank") is None and match and match.group(2):
        info["rank"] = int(match.group(2))
    rank = info.get("rank")
    warnings = []
    steps = read_step_trace(out / STEP_TRACE) if (out / STEP_TRACE).is_file() else None
    if (out / STEP_TRACE).is_file() and steps is None:
        warnings.append(f"{STEP_TRACE}: header only, no steps")
    comm = read_communication(out / COMMUNICATION, rank if rank is not None else 0) \
        if (out / COMMUNICATION).is_file() else None
    steps, comm = _from_analysis_db(out, rank, steps, comm)
    ops = pd.DataFrame({"op_name": pd.Series(dtype="object"),
                        "start_ns": pd.Series(dtype="int64"),
                        "dur_us": pd.Series(dtype="float64"),
                        "step": pd.Series(dtype="Int64")})
    return RankData(source=root, format=FORMAT, rank=rank, ops=ops, steps=steps, comm=comm,
                    info=info, warnings=tuple(warnings))


def nothing_read(path: Path) -> SchemaError:
    """The error for a rank that turned out to hold nothing usable at all."""
    db = find_db(path)
    if db is not None:
        return SchemaError(db, "no kernel table(s) COMPUTE_TASK_INFO, TASK and no step, "
                               "communication or memory data (Level_none or a db without "
                               "device data?)")
    return SchemaError(path, "no kernels, steps, communication or memory data")
