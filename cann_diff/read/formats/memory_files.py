r"""Memory files of one rank → frames in MB and µs: the text export and its db twins.

==========================  ================================  ===========================
text file                   db twin (ascend_pytorch_profiler)  frame columns
==========================  ================================  ===========================
``memory_record.csv``       ``MEMORY_RECORD`` + ``NPU_MEM``    component, time_us,
                            (type ``app``)                     allocated_mb, reserved_mb
``operator_memory.csv``     ``OP_MEMORY``                      name, size_mb
``npu_module_mem.csv``      ``NPU_MODULE_MEM``                 component, time_us,
                                                               reserved_mb
==========================  ================================  ===========================

Data movement (db, else trace): ``MEMCPY_INFO`` + ``ENUM_MEMCPY_OPERATION`` → direction,
count, bytes per rank (no text twin); ``HBM`` (B/s per stack, type read/write in
STRING_IDS), else the ``HBM`` process counters of trace_view.json (MB/s of 2**20 B) →
direction, time_us, gbps (stacks summed per sample, GB/s = 10**9 B/s).

Units after reading: sizes in MB as torch_npu writes them (MiB: bytes / 2**20; the db
stores bytes), times in µs since the Unix epoch as float64 (the db stores ns). A float64
keeps 16-digit µs to a fraction of a µs, which is plenty for a memory chart; the kernel
readers need exact ns, these do not.

Quirks handled here and nowhere else (docs/formats.md §1.4, §13 items 4-5):

* header variants: ``Total Active(MB)``/``Stream Ptr`` absent before 2024, ``Device_id``
  prepended to npu_module_mem in CANN 8.3, ``Device Type`` vs ``Device``;
* a trailing TAB inside timestamps (``"1736408883573957.920\\t"``) and CRLF line ends;
* ``Total Allocated(MB)`` left empty on ``APP`` rows (the driver only knows what the
  process reserved) → NaN, not an error;
* timestamps in scientific notation (``1.69512E+15``: a file re-saved by a spreadsheet)
  are read but flagged, since the timeline lost its resolution;
* in the db, ``APP`` is not in MEMORY_RECORD: torch_npu writes the text ``APP`` rows from
  CANN's npu_mem data, whose db twin is ``NPU_MEM`` rows of type ``app``
  (``ddr + hbm`` bytes). Names are ids into ``STRING_IDS``, modules into ``ENUM_MODULE``.
* graph-engine operators are named ``cann::<node>`` in operator_memory.csv and ``<node>``
  in OP_MEMORY; the prefix is dropped;
* rows of a CPU device (``Device Type`` ``CPU…``) are dropped: only NPU memory counts.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import InputError, SchemaError
from ...schema import COPY_COLUMNS, empty_frame
from ...vocab.names import copy_direction
from .csv_files import read_csv_columns, read_header
from .files import DepthGuard, brief
from .sqlite_db import DB_ERRORS, open_readonly, sqlite_problem

MEMORY_RECORD = "memory_record.csv"
OPERATOR_MEMORY = "operator_memory.csv"
NPU_MODULE_MEM = "npu_module_mem.csv"
DB_GLOB = "ascend_pytorch_profiler*.db"
MIB = float(2**20)
GE_PREFIX = "cann::"

# canonical field -> accepted headers (first found wins); the first two are required.
RECORD_HEADERS = {
    "component": ("Component",),
    "time_us": ("Timestamp(us)",),
    "allocated_mb": ("Total Allocated(MB)",),
    "reserved_mb": ("Total Reserved(MB)",),
    "device": ("Device Type", "Device"),
}
OPERATOR_HEADERS = {
    "name": ("Name",),
    "size_kb": ("Size(KB)",),
    "device": ("Device Type", "Device"),
}
MODULE_HEADERS = {
    "component": ("Component",),
    "time_us": ("Timestamp(us)",),
    "reserved_mb": ("Total Reserved(MB)",),
    "device": ("Device", "Device Type"),
}
REQUIRED = {
    MEMORY_RECORD: ("component", "time_us", "reserved_mb"),
    OPERATOR_MEMORY: ("name", "size_kb"),
    NPU_MODULE_MEM: ("component", "time_us", "reserved_mb"),
}

RECORD_COLUMNS = ("component", "time_us", "allocated_mb", "reserved_mb")
OPERATOR_COLUMNS = ("name", "size_mb")
MODULE_COLUMNS = ("component", "time_us", "reserved_mb")


# --------------------------------------------------------------------------- text files


def _columns(path: Path, aliases: dict[str, tuple[str, ...]],
             required: tuple[str, ...]) -> dict[str, str]:
    header = read_header(path)
    picked = {}
    for field, names in aliases.items():
        found = next((name for name in names if name in header), None)
        if found is not None:
            picked[field] = found
    missing = [aliases[f][0] for f in required if f not in picked]
    if missing:
        raise SchemaError(path, f"missing column(s) {', '.join(missing)}; header is "
                                f"{brief(','.join(header[:8]), 160)}"
                                f"{',…' if len(header) > 8 else ''}")
    return picked


def _numbers(frame: pd.DataFrame, field: str, path: Path, header: str,
             required: bool) -> pd.Series:
    """Parse a text column of sizes or times as float; empty cells are NaN unless ``required``.

    Negative and infinite values are refused: no size or time of a sample is either,
    and a peak or a sum would carry them into the report as they are.
    """
    text = frame[field].astype("string").str.strip()
    values = pd.to_numeric(text, errors="coerce").astype("float64")
    blank = text.isna() | (text == "")
    bad = (values.isna() & (~blank | required)) | np.isinf(values) | (values < 0)
    if bad.any():
        row = int(np.flatnonzero(bad.to_numpy())[0])
        shown = frame[field].iloc[row]
        what = ("is empty" if blank.iloc[row] else
                f"is {brief(repr(shown), 40)}, not a finite number ≥ 0"
                if pd.notna(values.iloc[row]) else
                f"is not a number ({brief(repr(shown), 40)})")
        raise SchemaError(path, f"{header} {what}", where=f"row {row + 2}")
    return values


def _text(values: pd.Series) -> pd.Series:
    return values.astype("string").str.strip().fillna("").astype(str)


def _npu_rows(frame: pd.DataFrame) -> pd.DataFrame:
    if "device" not in frame:
        return frame
    cpu = frame["device"].astype("string").str.strip().str.upper().str.startswith("CPU")
    return frame[~cpu.fillna(False).to_numpy()]


def _time_warning(frame: pd.DataFrame, path: Path) -> list[str]:
    text = frame["time_us"].astype("string")
    if text.str.contains(r"\d[eE][+]", regex=True).fillna(False).any():
        return [f"{path.name}: timestamps in scientific notation "
                "(file re-saved by a spreadsheet?); its timeline has lost its resolution"]
    return []


def read_memory_record(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """Read memory_record.csv: one row per allocator sample, MB and µs, and warnings."""
    picked = _columns(path, RECORD_HEADERS, REQUIRED[MEMORY_RECORD])
    frame = _npu_rows(read_csv_columns(path, picked))
    warnings = _time_warning(frame, path)
    out = pd.DataFrame({"component": _text(frame["component"])})
    out["time_us"] = _numbers(frame, "time_us", path, picked["time_us"], True)
    out["allocated_mb"] = (_numbers(frame, "allocated_mb", path, picked["allocated_mb"], False)
                           if "allocated_mb" in frame else np.nan)
    out["reserved_mb"] = _numbers(frame, "reserved_mb", path, picked["reserved_mb"], False)
    return out.reset_index(drop=True), warnings


def read_operator_memory(path: Path) -> pd.DataFrame:
    """Read operator_memory.csv: one row per allocation, ``name`` and ``size_mb``."""
    picked = _columns(path, OPERATOR_HEADERS, REQUIRED[OPERATOR_MEMORY])
    frame = _npu_rows(read_csv_columns(path, picked))
    # torch_npu prefixes graph-engine rows with "cann::" in the text export only; the db
    # holds the bare node name. Drop it so text and db of one run name the same operators.
    out = pd.DataFrame({"name": _text(frame["name"]).str.removeprefix(GE_PREFIX)})
    out["size_mb"] = _numbers(frame, "size_kb", path, picked["size_kb"], True) / 1024.0
    return out.reset_index(drop=True)


def read_npu_module_mem(path: Path) -> tuple[pd.DataFrame, list[str]]:
    """Read npu_module_mem.csv: one row per (module, sample), MB and µs, and warnings."""
    picked = _columns(path, MODULE_HEADERS, REQUIRED[NPU_MODULE_MEM])
    frame = _npu_rows(read_csv_columns(path, picked))
    warnings = _time_warning(frame, path)
    out = pd.DataFrame({"component": _text(frame["component"])})
    out["time_us"] = _numbers(frame, "time_us", path, picked["time_us"], True)
    out["reserved_mb"] = _numbers(frame, "reserved_mb", path, picked["reserved_mb"], False)
    return out.reset_index(drop=True), warnings


# --------------------------------------------------------------------------- db twins


def open_db(path: Path) -> sqlite3.Connection:
    """Open a profiler db read-only, never locking, writing or journaling it.

    The kernel reader's opening (sqlite_db.open_readonly): only a regular file, and a
    db with a pending ``-wal`` read through a private copy rather than stale.
    """
    return open_readonly(path)


def db_tables(connection: sqlite3.Connection, path: Path) -> set[str]:
    """Names of the tables of a db; InputError when the file is not a readable db."""
    try:
        rows = connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
        return {name for (name,) in rows.fetchall()}
    except DB_ERRORS as exc:
        raise InputError(path, f"not a readable SQLite database: {sqlite_problem(exc)}") \
            from None


def _query(connection: sqlite3.Connection, path: Path, table: str, sql: str) -> pd.DataFrame:
    try:
        return pd.read_sql_query(sql, connection)
    except sqlite3.OperationalError as exc:  # a column or joined table is missing
        raise SchemaError(path, f"table {table}: {sqlite_problem(exc)}") from None
    except DB_ERRORS as exc:
        raise InputError(path, f"table {table} is unreadable: {sqlite_problem(exc)}") from None


def _floats(frame: pd.DataFrame, columns: tuple[str, ...]) -> pd.DataFrame:
    frame = frame.astype({c: "float64" for c in columns if c not in ("component", "name")})
    for text in {"component", "name"} & set(frame.columns):
        frame[text] = frame[text].astype("string").fillna("").astype(str)
    return frame[list(columns)]


def read_db_records(connection: sqlite3.Connection, path: Path,
                    tables: set[str]) -> pd.DataFrame:
    """MEMORY_RECORD (PTA, GE, PTA+GE, …) plus the ``APP`` rows of NPU_MEM, MB and µs."""
    parts = []
    if "MEMORY_RECORD" in tables:
        parts.append(_query(connection, path, "MEMORY_RECORD", f"""
            SELECT s.value AS component, m.timestamp / 1000.0 AS time_us,
                   m.totalAllocated / {MIB} AS allocated_mb,
                   m.totalReserved / {MIB} AS reserved_mb
            FROM MEMORY_RECORD m LEFT JOIN STRING_IDS s ON s.id = m.component"""))
    if "NPU_MEM" in tables:
        parts.append(_query(connection, path, "NPU_MEM", f"""
            SELECT 'APP' AS component, n.timestampNs / 1000.0 AS time_us,
                   NULL AS allocated_mb, (n.ddr + n.hbm) / {MIB} AS reserved_mb
            FROM NPU_MEM n JOIN STRING_IDS s ON s.id = n.type
            WHERE upper(s.value) = 'APP'"""))
    parts = [_floats(p, RECORD_COLUMNS) for p in parts if len(p)]
    return pd.concat(parts, ignore_index=True) if parts else empty_frame(RECORD_COLUMNS)


def read_db_operators(connection: sqlite3.Connection, path: Path) -> pd.DataFrame:
    """OP_MEMORY: one row per allocation, ``name`` and ``size_mb`` (the db holds bytes)."""
    frame = _query(connection, path, "OP_MEMORY", f"""
        SELECT s.value AS name, o.size / {MIB} AS size_mb
        FROM OP_MEMORY o LEFT JOIN STRING_IDS s ON s.id = o.name""")
    return _floats(frame, OPERATOR_COLUMNS)


def read_db_modules(connection: sqlite3.Connection, path: Path,
                    tables: set[str]) -> pd.DataFrame:
    """NPU_MODULE_MEM: one row per (module, sample); names from ENUM_MODULE when present."""
    name = "COALESCE(e.name, CAST(n.moduleId AS TEXT))" if "ENUM_MODULE" in tables \
        else "CAST(n.moduleId AS TEXT)"
    join = "LEFT JOIN ENUM_MODULE e ON e.id = n.moduleId" if "ENUM_MODULE" in tables else ""
    frame = _query(connection, path, "NPU_MODULE_MEM", f"""
        SELECT {name} AS component, n.timestampNs / 1000.0 AS time_us,
               n.totalReserved / {MIB} AS reserved_mb
        FROM NPU_MODULE_MEM n {join}""")
    return _floats(frame, MODULE_COLUMNS)


# --------------------------------------------------------------------------- data movement

HBM_COLUMNS = ("direction", "time_us", "gbps")
TRACE_VIEW = "trace_view.json"
HBM_PROCESS = "HBM"
# msprof writes the trace's HBM counters in MB/s computed with 1024 × 1024 (its HbmModel
# scale); GB/s here are 10**9 B/s, as bandwidth is usually quoted.
TRACE_MBPS_TO_GBPS = float(2**20) / 1e9
DB_BPS_TO_GBPS = 1e-9


def _empty(columns: tuple[str, ...]) -> pd.DataFrame:
    return empty_frame(columns).astype({"direction": "object"})


def read_db_copies(connection: sqlite3.Connection, path: Path,
                   tables: set[str]) -> pd.DataFrame:
    """MEMCPY_INFO: copies and bytes per direction (ENUM_MEMCPY_OPERATION names it).

    One row per ``globalTaskId`` (the task a copy belongs to): a task listed twice is
    counted once, with its largest size.
    """
    has_enum = "ENUM_MEMCPY_OPERATION" in tables
    name = "e.name" if has_enum else "NULL"
    join = "LEFT JOIN ENUM_MEMCPY_OPERATION e ON e.id = m.memcpyOperation" if has_enum else ""
    frame = _query(connection, path, "MEMCPY_INFO", f"""
        SELECT m.globalTaskId AS task, MAX(m.size) AS bytes, MIN({name}) AS operation
        FROM MEMCPY_INFO m {join} GROUP BY m.globalTaskId""")
    if frame.empty:
        return _empty(COPY_COLUMNS)
    named = frame["operation"].notna().to_numpy()
    direction = copy_direction(frame["operation"], "other").where(named, "unknown")
    table = pd.DataFrame({"direction": direction.to_numpy(),
                          "bytes": pd.to_numeric(frame["bytes"], errors="coerce")
                          .fillna(0.0).to_numpy(dtype="float64")})
    out = table.groupby("direction", sort=True)["bytes"].agg(count="size", bytes="sum")
    return out.reset_index().astype({"count": "float64", "bytes": "float64"})


def _hbm_totals(frame: pd.DataFrame) -> pd.DataFrame:
    """Sum the stacks (``hbmId``) of each (device, direction, sample): device bandwidth."""
    frame = frame.assign(direction=frame["direction"].astype(str).str.strip().str.lower())
    frame = frame[frame["direction"].isin(["read", "write"]).to_numpy()]
    totals = frame.groupby(["device", "direction", "stamp"], sort=True).agg(
        time_us=("time_us", "first"), gbps=("gbps", "sum")).reset_index()
    return totals[list(HBM_COLUMNS)].astype({"time_us": "float64", "gbps": "float64"})


def read_db_hbm(connection: sqlite3.Connection, path: Path) -> pd.DataFrame:
    """HBM: device read/write bandwidth per sample, GB/s (the db holds B/s per HBM stack)."""
    frame = _query(connection, path, "HBM", """
        SELECT h.deviceId AS device, s.value AS direction, h.timestampNs AS stamp,
               h.timestampNs / 1000.0 AS time_us, h.bandwidth AS bps
        FROM HBM h LEFT JOIN STRING_IDS s ON s.id = h.type""")
    frame["gbps"] = pd.to_numeric(frame["bps"], errors="coerce").astype("float64") \
        * DB_BPS_TO_GBPS
    return _hbm_totals(frame[_possible(frame) & frame["stamp"].notna().to_numpy()])


def read_trace_hbm(path: Path) -> pd.DataFrame:
    """The ``HBM`` process counters of a trace_view.json, GB/s per sample (stacks summed).

    Streamed with ijson, keeping only counter events (``ph`` ``C``) and process names:
    the metadata may come after the events, so the process is picked once the file is
    read. Counter names are ``HBM <stack>/Read`` with args ``{"Read(MB/s)": value}``.
    """
    import ijson

    from .trace_events import CHUNK, _first_chunk, _open, raise_stream_error

    pids, names, stamps, values, processes = [], [], [], [], {}
    try:
        with _open(path) as handle:
            first = _first_chunk(handle, path)
            form = first.lstrip()[:1]
            if form not in (b"[", b"{"):
                raise InputError(path, "not a trace: expected a JSON array of events")
            prefix = "item" if form == b"[" else "traceEvents.item"
            stream = _Prepend(handle, first, path)
            for event in ijson.items(stream, prefix, buf_size=CHUNK, use_float=True):
                if not isinstance(event, dict):
                    continue
                ph = event.get("ph")
                if ph == "C":
                    args = event.get("args")
                    # A finite float only: 10**400 or a bool is no bandwidth sample.
                    number = next((v for v in args.values() if v.__class__ is float
                                   or (v.__class__ is int and abs(v) < 2 ** 63)),
                                  None) if isinstance(args, dict) else None
                    if number is None or event.get("ts") is None:
                        continue
                    pids.append(str(event.get("pid")))
                    names.append(str(event.get("name", "")))
                    stamps.append(str(event.get("ts")))
                    values.append(float(number))
                elif ph == "M" and event.get("name") == "process_name":
                    args = event.get("args")
                    args = args if isinstance(args, dict) else {}
                    processes[str(event.get("pid"))] = str(args.get("name", ""))
    except BaseException as exc:
        raise_stream_error(path, exc)
    hbm = {pid for pid, name in processes.items() if name == HBM_PROCESS}
    frame = pd.DataFrame({"pid": pids, "name": names, "stamp": stamps, "value": values})
    frame = frame[frame["pid"].isin(hbm).to_numpy()]
    if frame.empty:
        return _empty(HBM_COLUMNS)
    parts = frame["name"].str.rsplit("/", n=1, expand=True)
    time_us = pd.to_numeric(frame["stamp"].str.strip(), errors="coerce")
    out = pd.DataFrame({"device": 0, "direction": parts[1] if 1 in parts else "",
                        "stamp": frame["stamp"], "time_us": time_us,
                        "gbps": frame["value"] * TRACE_MBPS_TO_GBPS})
    return _hbm_totals(out[_possible(out)])


def _possible(samples: pd.DataFrame) -> np.ndarray:
    """Bandwidth samples with a time and a finite rate ≥ 0 (others are broken cells)."""
    gbps = samples["gbps"].to_numpy(np.float64)
    return samples["time_us"].notna().to_numpy() & np.isfinite(gbps) & (gbps >= 0)


class _Prepend:
    """File wrapper that hands over an already-read first chunk before the rest.

    Every chunk passes a DepthGuard first: ijson's memory grows with the nesting squared.
    """

    def __init__(self, handle, first: bytes, path: Path):
        self.handle, self.pending = handle, first
        self.guard = DepthGuard(path)
        self.guard.feed(first)

    def read(self, size: int = -1) -> bytes:
        if size == 0:
            return b""
        if self.pending:
            data, self.pending = self.pending, b""
            return data
        data = self.handle.read(size)
        self.guard.feed(data)
        return data
