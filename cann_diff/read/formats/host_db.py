"""The host side of a profiler db: PYTORCH_API ops and nn.Module ranges, CONNECTION_IDS links.

PYTORCH_API.connectionId → CONNECTION_IDS (id → connectionId) → TASK.connectionId or
COMMUNICATION_OP.connectionId (docs/formats.md §7.2). The same read takes every PYTORCH_API
row of type op (``ProfilerStep#N`` included) as host spans, for the host time of each
step, and from CANN_API the runtime's launch of each task (the row whose connectionId is
the task's: mostly ``launch`` rows of the node level) and the host op compilation rows
(``aclopCompile…``), which time the device's waits for the host (docs/formats.md §15).
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import numpy as np
import pandas as pd

from ...vocab.memo import normalize_distinct
from . import sqlite_db
from .host_links import COMPILE_NAMES, MODULE_PREFIX, HostLinks, HostSide, _clean_shapes

API_OP, API_TRACE = 50001, 50003  # ENUM_API_TYPE op / trace (python function)


def _api_type(conn: sqlite3.Connection, tables: dict, name: str, default: int) -> int:
    if {"id", "name"} <= tables.get("ENUM_API_TYPE", set()):
        row = conn.execute("SELECT id FROM ENUM_API_TYPE WHERE name = ?", (name,)).fetchone()
        if row is not None:
            return int(row[0])
    return default


def _looks_like_shapes(values: pd.Series) -> float:
    """Share of non-empty values made of digits, commas and semicolons only."""
    text = pd.Series(values.astype(str).unique())
    text = text[text.str.strip() != ""]
    return float(text.str.fullmatch(r"[\d,;\s]+").mean()) if len(text) else 0.0


def _db_host_ops(conn, tables: dict, db: Path, strings, op_type: int | None) -> pd.DataFrame:
    columns = tables["PYTORCH_API"]
    wanted = {c: c if c in columns else "NULL" for c in
              ("sequenceNumber", "fwdThreadId", "inputShapes", "inputDtypes")}
    where = f"WHERE type = {op_type}" if op_type is not None else ""
    frame = sqlite_db._query(
        conn, "SELECT CAST(startNs AS INTEGER) AS start_ns, CAST(endNs AS INTEGER) AS end_ns, "
              "globalTid AS thread, name, "
              f"{wanted['sequenceNumber']} AS seq, {wanted['fwdThreadId']} AS fwd, "
              f"{wanted['inputShapes']} AS shapes, {wanted['inputDtypes']} AS dtypes "
              f"FROM PYTORCH_API {where}", db)
    frame["name"] = sqlite_db.resolve(frame["name"], strings)
    shapes, dtypes = (sqlite_db.resolve(frame[c], strings) for c in ("shapes", "dtypes"))
    # Some exports swap the two columns (observed: db/level1 holds "float;float" under
    # inputShapes): take whichever looks like shapes.
    if _looks_like_shapes(pd.Series(dtypes)) > _looks_like_shapes(pd.Series(shapes)):
        shapes = dtypes
    seq = pd.to_numeric(frame["seq"], errors="coerce").fillna(-1).astype(np.int64)
    named = pd.Series(frame["name"]).astype(str).str.contains("::", regex=False).to_numpy()
    keep = named | (seq.to_numpy() >= 0)
    ops = pd.DataFrame({"thread": pd.to_numeric(frame["thread"]).fillna(-1).astype(np.int64),
                        "start_ns": pd.to_numeric(frame["start_ns"]).astype("Int64"),
                        "end_ns": pd.to_numeric(frame["end_ns"]).astype("Int64")})
    ops["name"] = frame["name"]
    ops["input_shapes"] = normalize_distinct(pd.Series(shapes), _clean_shapes)
    ops["seq"] = seq.to_numpy()
    ops["forward"] = pd.to_numeric(frame["fwd"], errors="coerce").fillna(0).to_numpy() == 0
    ops = ops[keep & ops["start_ns"].notna().to_numpy() & ops["end_ns"].notna().to_numpy()]
    return ops.astype({"start_ns": "int64", "end_ns": "int64"}).reset_index(drop=True)


def _db_modules(conn, db: Path, strings, trace_type: int | None) -> pd.DataFrame:
    where = f"type = {trace_type} AND " if trace_type is not None else ""
    frame = sqlite_db._query(
        conn, "SELECT CAST(startNs AS INTEGER) AS start_ns, CAST(endNs AS INTEGER) AS end_ns, "
              "globalTid AS thread, name FROM PYTORCH_API WHERE " + where +
              "name IN (SELECT id FROM STRING_IDS WHERE value LIKE 'nn.Module: %')", db)
    names = pd.Series(sqlite_db.resolve(frame["name"], strings)).astype(str)
    return pd.DataFrame({"thread": pd.to_numeric(frame["thread"]).astype(np.int64),
                         "start_ns": pd.to_numeric(frame["start_ns"]).astype(np.int64),
                         "end_ns": pd.to_numeric(frame["end_ns"]).astype(np.int64),
                         "name": pd.Categorical(names.str.slice(len(MODULE_PREFIX)))})


def _device_starts(tables: dict) -> list[str]:
    """SELECTs of every device task's start and connection id (TASK, COMMUNICATION_OP)."""
    return [f"SELECT startNs AS device_ns, connectionId AS connection FROM {t}"
            for t in ("TASK", "COMMUNICATION_OP")
            if {"startNs", "connectionId"} <= tables.get(t, set())]


def _db_links(conn, tables: dict, db: Path, op_type: int | None) -> pd.DataFrame:
    where = f"AND P.type = {op_type}" if op_type is not None else ""
    launches = ("SELECT C.connectionId AS connection, P.globalTid AS thread, "
                "CAST(P.startNs AS INTEGER) AS launch_ns FROM PYTORCH_API P "
                f"JOIN CONNECTION_IDS C ON C.id = P.connectionId WHERE 1 {where}")
    devices = _device_starts(tables)
    if not devices:
        return pd.DataFrame({"device_ns": [], "thread": [], "launch_ns": []}, dtype="int64")
    frame = sqlite_db._query(conn, f"SELECT D.device_ns, L.thread, L.launch_ns FROM "
                                   f"({' UNION ALL '.join(devices)}) D JOIN ({launches}) L "
                                   "ON L.connection = D.connection", db)
    return frame.apply(pd.to_numeric).dropna().astype("int64")


def _db_runtime(conn, tables: dict, db: Path) -> pd.DataFrame | None:
    """``device_ns``, ``launch_ns``: the CANN_API row carrying each task's connectionId.

    A trace's HostToDevice flow starts from the same record (inside the call; the db keeps
    the call's start). None without CANN_API or without a row that reaches a task.
    """
    devices = _device_starts(tables)
    if not {"startNs", "connectionId"} <= tables.get("CANN_API", set()) or not devices:
        return None
    frame = sqlite_db._query(
        conn, "SELECT D.device_ns, CAST(A.startNs AS INTEGER) AS launch_ns FROM "
              f"({' UNION ALL '.join(devices)}) D JOIN CANN_API A "
              "ON A.connectionId = D.connection", db)
    frame = frame.apply(pd.to_numeric).dropna().astype("int64")
    return frame if len(frame) else None


def _db_compile(conn, tables: dict, db: Path) -> pd.DataFrame | None:
    """``start_ns``, ``end_ns`` of the CANN_API host op compilation rows.

    Empty when the db records the CANN level (``CANN_API``) and no compilation: then none
    happened; None when it does not record it.
    """
    if not {"startNs", "endNs", "name"} <= tables.get("CANN_API", set()):
        return None
    names = ", ".join(f"'{name}'" for name in sorted(COMPILE_NAMES))  # our own constants
    frame = sqlite_db._query(
        conn, "SELECT CAST(startNs AS INTEGER) AS start_ns, CAST(endNs AS INTEGER) AS end_ns "
              "FROM CANN_API WHERE name IN (SELECT id FROM STRING_IDS WHERE value IN "
              f"({names}))", db)
    return frame.apply(pd.to_numeric).dropna().astype("int64")


def _db_spans(conn, db: Path, strings, op_type: int | None) -> pd.DataFrame:
    """Every PYTORCH_API op row as a host span: thread, start_ns, end_ns, name."""
    where = f"WHERE type = {op_type}" if op_type is not None else ""
    frame = sqlite_db._query(
        conn, "SELECT CAST(startNs AS INTEGER) AS start_ns, CAST(endNs AS INTEGER) AS end_ns, "
              f"globalTid AS thread, name FROM PYTORCH_API {where}", db)
    spans = pd.DataFrame({"thread": pd.to_numeric(frame["thread"]).fillna(-1).astype(np.int64),
                          "start_ns": pd.to_numeric(frame["start_ns"]).astype("Int64"),
                          "end_ns": pd.to_numeric(frame["end_ns"]).astype("Int64")})
    spans["name"] = sqlite_db.resolve(frame["name"], strings)
    spans = spans[spans["start_ns"].notna().to_numpy() & spans["end_ns"].notna().to_numpy()]
    return spans.astype({"start_ns": "int64", "end_ns": "int64"}).reset_index(drop=True)


def read_db_host_side(db: Path) -> HostSide:
    """PYTORCH_API, CONNECTION_IDS, TASK/COMMUNICATION_OP of a profiler db, in one read.

    ``links`` is None without host→device links, ``spans`` None without PYTORCH_API; the
    db's HCCL tasks are its reader's (sqlite_db.py), not this read's.
    """
    with closing(sqlite_db.connect(db)) as conn:
        tables = sqlite_db.tables_of(conn)
        api = {"startNs", "endNs", "globalTid", "name"}
        if not api <= tables.get("PYTORCH_API", set()) or \
                not {"id", "value"} <= tables.get("STRING_IDS", set()):
            return HostSide()
        typed = "type" in tables["PYTORCH_API"]
        op_type = _api_type(conn, tables, "op", API_OP) if typed else None
        trace_type = _api_type(conn, tables, "trace", API_TRACE) if typed else None
        strings = sqlite_db.string_table(conn, db)
        spans = _db_spans(conn, db, strings, op_type)
        need = {"PYTORCH_API": {"connectionId"}, "CONNECTION_IDS": {"id", "connectionId"}}
        if any(not columns <= tables.get(table, set()) for table, columns in need.items()):
            return HostSide(spans=spans)
        links = _db_links(conn, tables, db, op_type)
        if links.empty:
            return HostSide(spans=spans)
        runtime = _db_runtime(conn, tables, db)
        return HostSide(HostLinks(_db_host_ops(conn, tables, db, strings, op_type),
                                  _db_modules(conn, db, strings, trace_type), links,
                                  launches=runtime, compile=_db_compile(conn, tables, db),
                                  launch_source="CANN_API launch rows" if runtime is not None
                                  else "PYTORCH_API via CONNECTION_IDS"),
                        spans)


def read_db_links(db: Path) -> HostLinks | None:
    """PYTORCH_API, CONNECTION_IDS, TASK/COMMUNICATION_OP of a profiler db; None without them."""
    return read_db_host_side(db).links

