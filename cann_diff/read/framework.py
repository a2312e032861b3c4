"""Framework operators: every kernel attributed to the host operator that launched it.

Between two CANN stacks most kernels change name or signature; the framework operators
(``aten::…``) keep theirs. Where a profile links host to device (FORMATS.md §3.3, §7.2):

* trace_view.json (and Kineto traces): flow events ``torch_to_npu`` (cat ``async_npu``;
  Kineto's ``ac2g`` alike) start on the host thread at the launch and end at the kernel's
  ``ts``;
* the db: PYTORCH_API.connectionId → CONNECTION_IDS (id → connectionId) → TASK.connectionId
  or COMMUNICATION_OP.connectionId.

A kernel belongs to the innermost *framework operator* open at its launch on the
launching thread: the innermost host op named ``namespace::op`` (``aten::mm``,
``aten::convolution_backward``, ``c10d::allreduce_``). The launch records torch_npu
writes below it (``Conv2DBackpropFilter``, ``aclnnMm``) carry CANN's names, which an
upgrade renames, so they are never the framework operator. Kernels are joined to links
on their exact start (ns); a communication op the link file reaches only through its
tasks (trace_view.json links SDMA/notify tasks, not the op) takes the first unclaimed
link inside its interval.

Module path (recorded with ``with_stack``): the ``nn.Module: X`` python-function events
open at the op on its thread, outer to inner (``AlexNet_0/Sequential_0/Conv2d_0``). A
backward op (on the autograd thread, outside every module) takes the module of the
forward op with its autograd node's sequence number, marked `` (backward)``.

The reduction happens in the worker that read the rank: ``Run.framework`` holds one row
per (rank, step, op instance, kernel type) — see FRAMEWORK_COLUMNS — never kernel rows.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ..errors import SchemaError
from . import sqlite_db, torch_text
from .canonical import normalize_distinct
from .derive import concat_frames
from .trace_events import DEVICE_PROCESSES, TraceScan, _key, scan_trace, ts_to_ns

TRACE = "trace_view.json"
FLOW_CATS = {"async_npu", "ac2g"}  # host launch -> device kernel (torch_npu, Kineto)
HOST_SIDE = FLOW_CATS | {"cpu_op", "python_function"}
MODULE_PREFIX = "nn.Module: "
UNLINKED = "(no framework op)"  # kernels no link reaches: kept so that totals add up
BACKWARD = " (backward)"
API_OP, API_TRACE = 50001, 50003  # ENUM_API_TYPE op / trace (python function)

FRAMEWORK_COLUMNS = {
    "rank": "int64",          # global rank (assigned once every rank is read)
    "step": "Int64",          # step of the op's kernels (the kernel level's step)
    "order": "int64",         # position of the op instance in its (rank, step), by launch
    "name": "category",       # framework operator (``aten::mm``); UNLINKED for the rest
    "input_shapes": "category",  # normalized ``d,d;d,d`` of the op's inputs, ``""`` unknown
    "module": "category",     # nn.Module path, ``""`` without stacks
    "occurrence": "int64",    # k-th instance of (name, input_shapes) in its (rank, step)
    "kernel_type": "category",  # canonical op_type of the kernels under the instance
    "kernels": "int64",       # kernels of that type under the instance
    "device_us": "float64",   # their summed duration, µs
}
NO_LINKS = "framework-operator comparison unavailable"


@dataclass
class HostLinks:
    """What a profile says about the host side, as a reader found it.

    ``ops``: host operators (``thread`` int64, ``start_ns``, ``end_ns``, ``name``,
    ``input_shapes``, ``seq`` sequence number or -1, ``forward`` False for autograd
    nodes); ``modules``: ``nn.Module`` events (``thread``, ``start_ns``, ``end_ns``,
    ``name``); ``links``: one row per host→device link (``device_ns`` kernel start,
    ``thread``, ``launch_ns`` host launch time).
    """

    ops: pd.DataFrame
    modules: pd.DataFrame
    links: pd.DataFrame


# ---------------------------------------------------------------- trace_view.json

@dataclass
class LinkScan(TraceScan):
    """A TraceScan that also keeps torch ops, nn.Module events and launch flows.

    One streaming pass serves both levels: a trace-only rank's reader hands its events
    to the TraceScan columns and keeps the host side here (``kernels=True``); beside a
    kernel_details.csv only the host side is kept (``kernels=False``). Only ops that
    can matter are kept: framework ops (``::`` in the name) and autograd nodes (a
    sequence number); the launch records under them are not needed, their flows are.
    """

    kernels: bool = True
    op_pid: list = field(default_factory=list)  # pid and tid apart: tuples would be
    op_tid: list = field(default_factory=list)  # objects the garbage collector tracks
    op_ts: list = field(default_factory=list)
    op_dur: list = field(default_factory=list)
    op_name: list = field(default_factory=list)
    op_dims: list = field(default_factory=list)
    op_seq: list = field(default_factory=list)
    op_fwd: list = field(default_factory=list)
    mod_pid: list = field(default_factory=list)
    mod_tid: list = field(default_factory=list)
    mod_ts: list = field(default_factory=list)
    mod_dur: list = field(default_factory=list)
    mod_name: list = field(default_factory=list)
    start_id: list = field(default_factory=list)
    start_pid: list = field(default_factory=list)
    start_tid: list = field(default_factory=list)
    start_ts: list = field(default_factory=list)
    end_id: list = field(default_factory=list)
    end_ts: list = field(default_factory=list)

    def consume(self, events) -> None:
        """Keep the host side of ``events``; the device side too when ``kernels``."""
        if self.kernels:
            super().consume(self._tapped(events))
            return
        keep = self._keep_host
        for event in events:
            if event.__class__ is dict and event.get("cat") in HOST_SIDE:
                keep(event)

    def _tapped(self, events):
        keep = self._keep_host
        for event in events:
            if event.__class__ is dict and event.get("cat") in HOST_SIDE:
                keep(event)
            yield event

    def _keep_host(self, event) -> None:
        cat, ts = event.get("cat"), event.get("ts")
        if ts is None:
            return
        ph = event.get("ph")
        if cat in FLOW_CATS:
            if ph == "s":
                self.start_id.append(event.get("id"))
                self.start_pid.append(event.get("pid"))
                self.start_tid.append(event.get("tid"))
                self.start_ts.append(ts)
            elif ph == "f":
                self.end_id.append(event.get("id"))
                self.end_ts.append(ts)
            return
        name = event.get("name")
        if ph != "X" or name.__class__ is not str:
            return
        if cat == "cpu_op":
            if "::" not in name and "Backward" not in name:
                return  # a launch record: its flow is what counts (autograd nodes are
            args = event.get("args")  # named ``…Backward<n>`` and carry a sequence number)
            args = args if args.__class__ is dict else {}
            seq = args.get("Sequence number")
            seq = seq if seq.__class__ is int else -1
            if "::" not in name and seq < 0:
                return
            self.op_pid.append(event.get("pid"))
            self.op_tid.append(event.get("tid"))
            self.op_ts.append(ts)
            self.op_dur.append(event.get("dur"))
            self.op_name.append(name)
            self.op_dims.append(args.get("Input Dims"))
            self.op_seq.append(seq)
            fwd = args.get("Fwd thread id")
            self.op_fwd.append(fwd if fwd.__class__ is int else 0)
        elif name.startswith(MODULE_PREFIX):
            self.mod_pid.append(event.get("pid"))
            self.mod_tid.append(event.get("tid"))
            self.mod_ts.append(ts)
            self.mod_dur.append(event.get("dur"))
            self.mod_name.append(name[len(MODULE_PREFIX):])

    def host_links(self) -> HostLinks | None:
        """The host side as HostLinks (threads as codes, times in ns); None without flows."""
        if not self.start_id or not self.end_id:
            return None
        threads = _ThreadCodes()
        shift = self._kineto_base()
        starts = pd.DataFrame({"id": _keys(self.start_id),
                               "thread": threads(self.start_pid, self.start_tid),
                               "launch_ns": _ns(self.start_ts, self.path) + shift})
        ends = pd.DataFrame({"id": _keys(self.end_id),
                             "device_ns": _ns(self.end_ts, self.path) + shift})
        links = starts.drop_duplicates("id").merge(ends.drop_duplicates("id"), on="id")
        ops = _spans(threads(self.op_pid, self.op_tid), self.op_ts, self.op_dur, self.path,
                     shift)
        ops["name"] = pd.Categorical(self.op_name)
        ops["input_shapes"] = normalize_distinct(_dims_text(self.op_dims), _clean_shapes)
        ops["seq"] = np.asarray(self.op_seq, dtype=np.int64)
        ops["forward"] = np.asarray(self.op_fwd, dtype=np.int64) == 0
        modules = _spans(threads(self.mod_pid, self.mod_tid), self.mod_ts, self.mod_dur,
                         self.path, shift)
        modules["name"] = pd.Categorical(self.mod_name)
        return HostLinks(ops, modules, links[["device_ns", "thread", "launch_ns"]])

    def _kineto_base(self) -> int:
        """Kineto writes ts relative to baseTimeNanoseconds; the kernel reader adds it too."""
        if set(self.processes.values()) & DEVICE_PROCESSES:
            return 0
        return int(self.top.get("baseTimeNanoseconds", 0) or 0)


def _keys(values: list) -> pd.Series:
    """Ids/pids/tids as hashable keys (ints or strings; anything else by its text)."""
    series = pd.Series(values)
    if series.dtype != object:  # all ints (the usual case): no per-value look
        return series
    odd = ~series.map(lambda v: v.__class__ in (int, str) or v is None)
    if odd.any():
        series[odd] = series[odd].map(_key)
    return series


def _ns(values: list, path: Path) -> np.ndarray:
    """µs timestamps -> int64 ns; torch_npu's exact form (3 decimals) by dropping the point.

    That form is most of a trace's events and is exact as text, so it needs no regex;
    anything else goes through trace_events.ts_to_ns.
    """
    try:
        text = pa.array(values, type=pa.string())
        point = pc.find_substring(text, ".")
        if text.null_count == 0 and pc.all(pc.equal(
                point, pc.subtract(pc.utf8_length(text), 4))).as_py() in (True, None):
            return pc.cast(pc.replace_substring(text, ".", ""), pa.int64()).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    return ts_to_ns(_text(values), path)


def _text(values: list) -> list:
    """Timestamps as text (torch_npu writes strings, Kineto numbers)."""
    if all(v.__class__ is str for v in values[:1000]) and \
            all(v.__class__ is str for v in values[-1000:]):
        return values
    return [v if v.__class__ is str else str(v) for v in values]


class _ThreadCodes:
    """One integer per (pid, tid), shared by every table of one trace."""

    def __init__(self):
        self.codes: dict = {}

    def __call__(self, pids: list, tids: list) -> np.ndarray:
        if not pids:
            return np.zeros(0, np.int64)
        pid_code, pid_values = pd.factorize(_keys(pids))
        tid_code, tid_values = pd.factorize(_keys(tids))
        local, distinct = pd.factorize(pid_code * len(tid_values) + tid_code)
        pairs = zip(pid_values[distinct // len(tid_values)], tid_values[distinct % len(tid_values)])
        known = np.array([self.codes.setdefault(pair, len(self.codes)) for pair in pairs],
                         dtype=np.int64)
        return known[local]


def _spans(thread: np.ndarray, ts: list, dur: list, path: Path, shift: int) -> pd.DataFrame:
    start = _ns(ts, path) + shift
    try:
        length = np.nan_to_num(np.asarray(dur, dtype=float), nan=0.0)
    except (TypeError, ValueError):
        raise SchemaError(path, "an event 'dur' is not a number") from None
    return pd.DataFrame({"thread": thread, "start_ns": start,
                         "end_ns": start + np.rint(length * 1000).astype(np.int64)})


def _dims_text(values: list) -> pd.Series:
    """``Input Dims`` as text: torch_npu writes a string, Kineto a list of lists."""
    out = pd.Series(values, dtype="object")
    lists = out.map(lambda v: v.__class__ is list)
    if lists.any():  # Kineto: [[32, 3], [], [64]] -> "32,3;;64"
        out[lists] = out[lists].map(
            lambda v: ";".join(",".join(str(d) for d in dims) if isinstance(dims, list)
                               else "" for dims in v))
    return out.where(out.notna(), "").astype(str)


def _clean_shapes(values: pd.Series) -> pd.Series:
    """Shapes without blanks, line breaks, quotes or brackets (``32,3; 64`` -> ``32,3;64``)."""
    return values.astype(str).str.replace(r"[\s\"\[\]]+", "", regex=True)


def read_trace_links(trace: Path) -> HostLinks | None:
    """Stream a trace_view.json for its host side only (a kernel_details.csv has the kernels)."""
    return scan_trace(trace, LinkScan(trace, kernels=False)).host_links()


# ---------------------------------------------------------------- db

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


def _db_links(conn, tables: dict, db: Path, op_type: int | None) -> pd.DataFrame:
    where = f"AND P.type = {op_type}" if op_type is not None else ""
    launches = ("SELECT C.connectionId AS connection, P.globalTid AS thread, "
                "CAST(P.startNs AS INTEGER) AS launch_ns FROM PYTORCH_API P "
                f"JOIN CONNECTION_IDS C ON C.id = P.connectionId WHERE 1 {where}")
    devices = [f"SELECT startNs AS device_ns, connectionId AS connection FROM {t}"
               for t in ("TASK", "COMMUNICATION_OP")
               if {"startNs", "connectionId"} <= tables.get(t, set())]
    if not devices:
        return pd.DataFrame({"device_ns": [], "thread": [], "launch_ns": []}, dtype="int64")
    frame = sqlite_db._query(conn, f"SELECT D.device_ns, L.thread, L.launch_ns FROM "
                                   f"({' UNION ALL '.join(devices)}) D JOIN ({launches}) L "
                                   "ON L.connection = D.connection", db)
    return frame.apply(pd.to_numeric).dropna().astype("int64")


def read_db_links(db: Path) -> HostLinks | None:
    """PYTORCH_API, CONNECTION_IDS, TASK/COMMUNICATION_OP of a profiler db; None without them."""
    with closing(sqlite_db.connect(db)) as conn:
        tables = sqlite_db.tables_of(conn)
        need = {"PYTORCH_API": {"startNs", "endNs", "globalTid", "connectionId", "name"},
                "CONNECTION_IDS": {"id", "connectionId"}, "STRING_IDS": {"id", "value"}}
        if any(not columns <= tables.get(table, set()) for table, columns in need.items()):
            return None
        typed = "type" in tables["PYTORCH_API"]
        op_type = _api_type(conn, tables, "op", API_OP) if typed else None
        trace_type = _api_type(conn, tables, "trace", API_TRACE) if typed else None
        strings = sqlite_db.string_table(conn, db)
        links = _db_links(conn, tables, db, op_type)
        if links.empty:
            return None
        return HostLinks(_db_host_ops(conn, tables, db, strings, op_type),
                         _db_modules(conn, db, strings, trace_type), links)


# ---------------------------------------------------------------- nesting

@dataclass(frozen=True)
class Nesting:
    """The host ops of one thread as nested intervals ``[start, end)``.

    Host ops nest (a RecordFunction scope opens and closes inside its parent), so the
    ops open at a time t form a chain with one op per depth; the innermost is the
    latest-starting op at depth ``open_at(t)``. Depths come from one sweep over starts
    and ends; lookups are searchsorted within each depth, so no row is visited in Python.
    """

    index: np.ndarray   # original row of each op, in (depth, start) order
    depth: np.ndarray   # depth of each op (1 = outermost), same order
    start: np.ndarray
    end: np.ndarray
    sorted_starts: np.ndarray
    sorted_ends: np.ndarray
    blocks: dict        # depth -> (lo, hi) slice of the (depth, start) order

    @classmethod
    def of(cls, start: np.ndarray, end: np.ndarray, index: np.ndarray) -> Nesting:
        """Nest the ops ``index`` with these starts and ends (ns); empty spans are left out."""
        keep = end > start
        start, end, index = start[keep], end[keep], index[keep]
        order = np.lexsort((-end, start))  # by start, the longer (the parent) first
        start, end, index = start[order], end[order], index[order]
        n = len(start)
        times = np.concatenate([start, end])
        step = np.concatenate([np.ones(n, np.int64), -np.ones(n, np.int64)])
        tie = np.concatenate([np.arange(n), np.zeros(n, np.int64)])
        sweep = np.lexsort((tie, step, times))  # ends before starts at one instant
        running = np.cumsum(step[sweep])
        depth = np.empty(n, np.int64)
        opening = sweep < n
        depth[sweep[opening]] = running[opening]
        by_depth = np.lexsort((start, depth))
        depth, start, end, index = depth[by_depth], start[by_depth], end[by_depth], \
            index[by_depth]
        levels, first = np.unique(depth, return_index=True)
        bounds = np.append(first, n)
        blocks = {int(d): (int(bounds[i]), int(bounds[i + 1])) for i, d in enumerate(levels)}
        return cls(index, depth, start, end, np.sort(start), np.sort(end), blocks)

    def open_at(self, times: np.ndarray) -> np.ndarray:
        """Number of ops open at each time."""
        return np.searchsorted(self.sorted_starts, times, "right") - \
            np.searchsorted(self.sorted_ends, times, "right")

    def latest(self, times: np.ndarray, depths: np.ndarray, must_be_open: bool = True
               ) -> np.ndarray:
        """Position (in this order) of the latest op at ``depths`` starting by ``times``; -1."""
        found = np.full(len(times), -1, np.int64)
        for level, (lo, hi) in self.blocks.items():
            asked = np.flatnonzero(depths == level)
            if not len(asked):
                continue
            pos = lo + np.searchsorted(self.start[lo:hi], times[asked], "right") - 1
            ok = pos >= lo
            if must_be_open:
                ok &= self.end[np.maximum(pos, lo)] > times[asked]
            found[asked[ok]] = pos[ok]
        return found

    def innermost(self, times: np.ndarray) -> np.ndarray:
        """Original row of the innermost op open at each time; -1 where none is."""
        pos = self.latest(times, self.open_at(times))
        return np.where(pos >= 0, self.index[np.maximum(pos, 0)], -1)

    def parents(self) -> np.ndarray:
        """Position of each op's parent in this order; -1 for the outermost."""
        return self.latest(self.start, self.depth - 1, must_be_open=False)


def innermost(thread: np.ndarray, start: np.ndarray, end: np.ndarray,
              query_thread: np.ndarray, query_time: np.ndarray) -> np.ndarray:
    """Row of the innermost interval open at each query on the query's thread; -1 if none."""
    found = np.full(len(query_time), -1, np.int64)
    rows = np.arange(len(start))
    for code in np.intersect1d(np.unique(thread), np.unique(query_thread)):
        asked = np.flatnonzero(query_thread == code)
        mine = thread == code
        found[asked] = Nesting.of(start[mine], end[mine], rows[mine]).innermost(
            query_time[asked])
    return found


def module_paths(modules: pd.DataFrame) -> np.ndarray:
    """``Outer_0/Inner_0`` path of every nn.Module event (object array, row order)."""
    paths = np.full(len(modules), "", dtype=object)
    names = modules["name"].astype(str).to_numpy(dtype=object)
    thread = modules["thread"].to_numpy()
    for code in np.unique(thread):
        rows = np.flatnonzero(thread == code)
        nest = Nesting.of(modules["start_ns"].to_numpy()[rows],
                          modules["end_ns"].to_numpy()[rows], rows)
        parent = nest.parents()
        own = names[nest.index]
        text = own.copy()
        for level in sorted(nest.blocks)[1:]:  # parents' paths are complete one level up
            lo, hi = nest.blocks[level]
            up = parent[lo:hi]
            has = up >= 0
            text[lo:hi][has] = text[up[has]] + "/" + own[lo:hi][has]
        paths[nest.index] = text
    return paths


# ---------------------------------------------------------------- attribution

def _link_of_kernel(ops: pd.DataFrame, links: pd.DataFrame) -> np.ndarray:
    """Row of ``links`` reaching each kernel: exact start, else (communication) containment."""
    device = links["device_ns"].to_numpy(np.int64)
    order = np.argsort(device, kind="stable")
    ordered = device[order]
    start = ops["start_ns"].to_numpy(np.int64)
    pos = np.clip(np.searchsorted(ordered, start), 0, max(len(ordered) - 1, 0))
    exact = (ordered[pos] == start) if len(ordered) else np.zeros(len(start), bool)
    found = np.where(exact, order[pos] if len(ordered) else -1, -1)
    comm = (ops["category"] == "communication").to_numpy() & (found < 0)
    if comm.any() and len(ordered):
        free = np.ones(len(device), bool)
        free[found[found >= 0]] = False
        spare = np.flatnonzero(free)
        spare = spare[np.argsort(device[spare], kind="stable")]
        end = start + np.rint(ops["dur_us"].to_numpy() * 1000).astype(np.int64)
        at = np.searchsorted(device[spare], start[comm])
        inside = at < len(spare)
        inside[inside] &= device[spare[at[inside]]] <= end[comm][inside]
        found[np.flatnonzero(comm)[inside]] = spare[at[inside]]
    return found


def _instance_modules(host: HostLinks, fw: pd.DataFrame) -> np.ndarray:
    """Module path of each framework op instance (rows of ``fw``); ``""`` when unknown."""
    modules = host.modules
    out = np.full(len(fw), "", dtype=object)
    if modules.empty or fw.empty:
        return out
    paths = module_paths(modules)
    mod_thread = modules["thread"].to_numpy()
    mod_start, mod_end = modules["start_ns"].to_numpy(), modules["end_ns"].to_numpy()

    def module_at(thread: np.ndarray, time: np.ndarray) -> np.ndarray:
        row = innermost(mod_thread, mod_start, mod_end, thread, time)
        return np.where(row >= 0, paths[np.maximum(row, 0)], "")

    thread, start = fw["thread"].to_numpy(), fw["start_ns"].to_numpy()
    out[:] = module_at(thread, start)
    missing = np.flatnonzero(out == "")
    ops = host.ops
    seq, forward = ops["seq"].to_numpy(), ops["forward"].to_numpy()
    nodes = np.flatnonzero((seq >= 0) & ~forward)
    if not len(missing) or not len(nodes):
        return out
    # Backward: the autograd node open at the op names the forward op's sequence number.
    node = innermost(ops["thread"].to_numpy()[nodes], ops["start_ns"].to_numpy()[nodes],
                     ops["end_ns"].to_numpy()[nodes], thread[missing], start[missing])
    has_node = node >= 0
    wanted = seq[nodes[node[has_node]]]
    # Sequence numbers repeat outside the model (data loading ops reuse them): take the
    # forward op of that number that runs inside a module.
    fwd_rows = np.flatnonzero((seq >= 0) & forward)
    fwd_module = module_at(ops["thread"].to_numpy()[fwd_rows], ops["start_ns"].to_numpy()[fwd_rows])
    inside = fwd_module != ""
    by_seq = pd.Series(fwd_module[inside], index=seq[fwd_rows][inside]).groupby(level=0).first()
    found = by_seq.reindex(wanted).to_numpy(dtype=object)
    known = pd.notna(found)
    out[missing[has_node][known]] = found[known] + BACKWARD
    return out


def attribute(ops: pd.DataFrame, host: HostLinks) -> pd.DataFrame:
    """Canonical kernel rows of one rank + its HostLinks -> FRAMEWORK_COLUMNS rows (rank 0)."""
    framework = host.ops["name"].astype(str).str.contains("::", regex=False).to_numpy()
    fw = host.ops[framework].reset_index(drop=True)
    links = host.links
    owner = innermost(fw["thread"].to_numpy(), fw["start_ns"].to_numpy(),
                      fw["end_ns"].to_numpy(), links["thread"].to_numpy(),
                      links["launch_ns"].to_numpy())
    link = _link_of_kernel(ops, links)
    instance = np.where(link >= 0, owner[np.maximum(link, 0)], -1)
    kernels = pd.DataFrame({"instance": instance, "step": ops["step"].array,
                            "kernel_type": ops["op_type"].array,
                            "dur_us": ops["dur_us"].to_numpy()})
    linked = kernels[instance >= 0]
    used = np.unique(linked["instance"].to_numpy())
    inst = fw.iloc[used][["thread", "start_ns", "name", "input_shapes"]].copy()
    inst["module"] = _instance_modules(host, fw.iloc[used].reset_index(drop=True))
    inst["step"] = linked.groupby("instance")["step"].min().reindex(used).array
    inst = inst.assign(instance=used).sort_values(["step", "start_ns", "thread"],
                                                  kind="stable", na_position="last")
    unit = inst["step"].fillna(-1).to_numpy()
    inst["order"] = inst.groupby(unit).cumcount().to_numpy()
    inst["occurrence"] = inst.groupby([unit, inst["name"].astype(str),
                                       inst["input_shapes"].astype(str)]).cumcount().to_numpy()
    per_type = linked.groupby(["instance", "kernel_type"], observed=True).agg(
        kernels=("dur_us", "size"), device_us=("dur_us", "sum")).reset_index()
    rows = per_type.merge(inst, on="instance")
    rest = kernels[instance < 0].groupby(["step", "kernel_type"], observed=True,
                                         dropna=False).agg(
        kernels=("dur_us", "size"), device_us=("dur_us", "sum")).reset_index()
    rest = rest.assign(order=-1, occurrence=0, name=UNLINKED, input_shapes="", module="")
    return conform_framework(concat_frames([rows, rest]).assign(rank=0))


def conform_framework(frame: pd.DataFrame) -> pd.DataFrame:
    """Columns and dtypes of FRAMEWORK_COLUMNS, rows in (rank, step, order) order."""
    if frame.empty or not len(frame.columns):
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in FRAMEWORK_COLUMNS.items()})
    frame = frame[list(FRAMEWORK_COLUMNS)]
    for column, dtype in FRAMEWORK_COLUMNS.items():
        if dtype == "category":
            frame[column] = frame[column].astype(str).astype("category")
    frame = frame.astype(FRAMEWORK_COLUMNS)
    return frame.sort_values(["rank", "step", "order", "kernel_type"], kind="stable",
                             na_position="last").reset_index(drop=True)


# ---------------------------------------------------------------- per rank, per run

def host_links_of(data) -> tuple[HostLinks | None, str]:
    """The host side of one rank (RankData): what its reader found, else read it now."""
    if data.links is not None:
        return data.links, ""
    source = Path(data.source)
    if data.format in (sqlite_db.FORMAT, "ascend_ms_db"):
        db = sqlite_db.find_db(source)
        links = read_db_links(db) if db is not None else None
        return links, "" if links is not None else \
            f"{source.name}: no host→device links in the db (PYTORCH_API, CONNECTION_IDS)"
    if data.format == torch_text.FORMAT:
        trace = torch_text.output_dir(source) / TRACE
        if not trace.is_file():
            return None, f"{source.name}: no {TRACE} beside kernel_details.csv (host→device " \
                         "links live there)"
        links = read_trace_links(trace)
        return links, "" if links is not None else \
            f"{source.name}: no torch_to_npu flow events in {TRACE}"
    if data.format == "trace_json":
        return None, f"{source.name}: no host→device flow events in the trace"
    return None, f"{source.name}: no host→device links in this profile ({data.format})"


def reduce_framework(data) -> None:
    """Fill ``data.framework``/``framework_note`` from its canonical ops; drop ``links``.

    Runs in the worker that read the rank, after its steps are chosen.
    """
    host, note = host_links_of(data)
    data.links = None
    if host is not None and (data.ops is None or not len(data.ops)):
        host, note = None, f"{Path(data.source).name}: no kernel rows"
    if host is None:
        data.framework, data.framework_note = None, note
        return
    data.framework, data.framework_note = attribute(data.ops, host), ""


def combine_framework(datas: list) -> tuple[pd.DataFrame | None, str]:
    """Stack the ranks' frames with their rank ids; a note names the ranks without one."""
    frames = [d.framework.assign(rank=d.rank) for d in datas if d.framework is not None]
    missing = [d for d in datas if d.framework is None]
    if not frames:
        reason = missing[0].framework_note if missing else "no ranks"
        return None, f"{reason}: {NO_LINKS}"
    note = ""
    if missing:
        ranks = ", ".join(str(d.rank) for d in missing[:8])
        note = f"rank(s) {ranks} have no host→device links ({missing[0].framework_note}); " \
               "the framework-operator comparison covers the other ranks"
    return conform_framework(concat_frames(frames)), note
