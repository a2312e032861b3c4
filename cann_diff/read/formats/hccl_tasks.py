"""HCCL task-level data: the op-level collectives and the tasks each runs on its planes.

docs/formats.md §14. Two sources, one form (``CollectiveTasks``):

* trace_view.json (and msprof timelines): the process named ``HCCL`` (``Communication``
  in current msprof) holds, per communication group, a thread ``Group <g> Communication``
  with the op-level events (``hcom_allReduce__586_0_1``, args ``alg_type``, ``count``,
  ``data_type``) and threads ``Plane <n>`` with the task events (``Notify_Wait``,
  ``Memcpy``, ``Reduce_Inline``, …; args ``task type``, ``size(Byte)``, ``link type``,
  ``transport type``, ``src rank``, ``dst rank``, ``notify_id``). msprof numbers the
  threads of the g-th group it meets ``9·g`` (the group) and ``9·g + plane + 1`` (its
  planes; [MSPROF] ``hccl_assembler.cpp``), so a plane thread belongs to the group thread
  of the same process with the largest tid below its own. The events themselves are kept
  by the pass that reads the trace (``host_links.LinkScan``); ``trace_tasks`` turns its
  column lists into the frames.
* the profiler db: ``COMMUNICATION_OP`` (one row per op, ``opId``) and
  ``COMMUNICATION_TASK_INFO`` ⨝ ``TASK`` on ``globalTaskId`` (one row per task, its
  ``opId`` and ``planeId``); names and task types through ``STRING_IDS``, link, transport
  and RDMA kinds through the ``ENUM_HCCL_*`` tables (``read_db_tasks``).

Readers hand the rows on as found but for rows whose times are impossible (``screen``):
an op or task with a missing or out-of-range time, its end before its start or a
duration longer than any capture, a task outside the window of the op its ``opId`` names
(or of an op so dropped), or a task placed by time window that falls in no op's window.
They are dropped with a count per reason and plane (``CollectiveTasks.dropped``), which
RankData turns into the rank's warnings, so that no figure sums them. Every figure is
derived in ``reduce/collectives.py``.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...settings import DEFAULT_LIMITS
from ..frames import as_category

COMM_PROCESSES = ("HCCL", "Communication")
PLANE_THREAD = re.compile(r"^\s*Plane\s+(\d{1,6})\s*$")
GROUP_SUFFIX = " Communication"
# What marks a task event of a plane thread, whatever its name: the select pass over a
# trace looks for this key (a JSON key is a string like any other), and the pass that
# keeps events tells task events from the rest by it.
TASK_KEY = "link type"
# The db's enums, as msprof defines them; a db's own ENUM_HCCL_* tables win.
LINK_TYPES = {0: "ON_CHIP", 1: "HCCS", 2: "PCIE", 3: "ROCE", 4: "SIO", 5: "HCCS_SW",
              6: "STANDARD_ROCE", 7: "RESERVED", 65534: "N/A", 65535: "INVALID_TYPE"}
TRANSPORT_TYPES = {0: "SDMA", 1: "RDMA", 2: "LOCAL", 65534: "N/A", 65535: "INVALID_TYPE"}
RDMA_TYPES = {0: "RDMA_SEND_NOTIFY", 1: "RDMA_SEND_PAYLOAD", 2: "RDMA_PAYLOAD_PREPARE",
              3: "RDMA_PAYLOAD_CHECK", 4: "RDMA_PAYLOAD_ACK", 5: "RDMA_SEND_OP",
              65534: "N/A", 65535: "INVALID_TYPE"}

OP_FIELDS = {"start_ns": "int64", "end_ns": "int64", "op_name": "category",
             "group": "category", "algorithm": "category"}
TASK_FIELDS = {"start_ns": "int64", "end_ns": "int64", "op": "int64", "group": "category",
               "plane": "int64", "task_type": "category", "size": "int64",
               "link_type": "category", "transport": "category", "rdma": "category",
               "src_rank": "int64", "dst_rank": "int64"}
# A task names no rank with UINT32_MAX (4294967295: the records and waits of a rank with
# itself); a value from it on, a negative one or a missing one is "no rank" (-1).
NO_RANK_FROM = 0xFFFF_FFFF
# Why ``screen`` drops an op or a task; a row is named by the first that holds.
UNTIMED = "time missing or not a number"
BACKWARDS = "end before start"
ENDLESS = f"longer than any capture (> {DEFAULT_LIMITS.max_duration_s:g} s)"
OP_FAULTS = (UNTIMED, BACKWARDS, ENDLESS)
TASK_FAULTS = (*OP_FAULTS, "their op was dropped", "outside their op's time window",
               "in no op's time window")
LONGEST_NS = int(DEFAULT_LIMITS.max_duration_s * 1e9)
# Planes named one by one in a warning; the rest are counted.
NAMED_PLANES = 5


@dataclass(frozen=True)
class CollectiveTasks:
    """One rank's op-level collectives and their HCCL tasks, as a reader found them.

    ``ops``: one row per collective instance (OP_FIELDS): ``start_ns``, ``end_ns``
    (int64 ns), ``op_name`` (``hcom_allReduce__586_0_1``), ``group`` (the db's
    ``groupName``; in a trace the group thread's name without `` Communication``, e.g.
    ``Group 0``), ``algorithm`` (``alg_type`` / ``algType``, ``""`` when not recorded).
    ``tasks``: one row per task (TASK_FIELDS): ``start_ns``, ``end_ns``, ``op`` (the row
    of ``ops`` it belongs to, or -1: then ``screen`` finds it by time window within
    ``group``, ``""`` meaning any group), ``plane`` (an id, any int64), ``task_type`` (as written:
    ``Notify_Wait``), ``size`` (bytes, 0 when none), ``link_type`` (``HCCS``, ``ON_CHIP``,
    …), ``transport`` (``SDMA``, ``RDMA``, ``LOCAL``), ``rdma`` (db ``rdmaType`` name,
    ``""`` in a trace), ``src_rank`` and ``dst_rank`` (args ``src rank`` / ``dst rank``,
    db ``srcRank`` / ``dstRank``: the ranks the task is between, numbered as HCCL numbers
    them in the group; -1 for none, see ``rank_ids``). ``source`` says where the rows
    came from, for the report (``trace_view.json: HCCL plane tasks``).
    """

    ops: pd.DataFrame
    tasks: pd.DataFrame
    source: str
    # What ``screen`` left out: (where, sentence), e.g. ("plane 1", "12 HCCL task(s)
    # dropped: end before start (…)"); ("", …) for ops. ``warnings`` names the rank.
    dropped: tuple[tuple[str, str], ...] = ()

    def warnings(self, label: str) -> tuple[str, ...]:
        """The drops as warnings of the rank ``label`` names (``rank 3``)."""
        return tuple(f"{label}, {where}: {text}" if where else f"{label}: {text}"
                     for where, text in self.dropped)


def rank_ids(values) -> np.ndarray:
    """Rank ids as int64, -1 where a task names none.

    None: missing, not a number, negative, or HCCL's UINT32_MAX for "no peer"; so that a
    count of ranks never counts a sentinel.
    """
    numbers = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(np.float64,
                                                                         na_value=np.nan)
    valid = np.isfinite(numbers) & (numbers >= 0) & (numbers < NO_RANK_FROM)
    return np.where(valid, numbers, -1).astype(np.int64)


def _conform(frame: pd.DataFrame, fields: dict[str, str]) -> pd.DataFrame:
    out = pd.DataFrame(index=frame.index)
    for column, dtype in fields.items():
        values = frame[column]
        if str(values.dtype) == dtype:
            out[column] = values
        elif dtype == "category":
            out[column] = as_category(values)
        else:
            out[column] = pd.to_numeric(values, errors="coerce").fillna(0).astype(dtype)
    return out.reset_index(drop=True)


# ---------------------------------------------------------------- screen

def _group_codes(values: pd.Series) -> tuple[np.ndarray, list[str]]:
    """Codes of ``values`` as a categorical (missing: the last) and the names they index."""
    cat = values.astype("category")
    codes = cat.cat.codes.to_numpy().astype(np.int64)
    names = [str(name) for name in cat.cat.categories]
    return np.where(codes >= 0, codes, len(names)), [*names, ""]


def assign_ops(op: np.ndarray, group: pd.Series, start: np.ndarray,
               ops: pd.DataFrame) -> np.ndarray:
    """The op (row of ``ops``) each task belongs to, -1 for none.

    ``op``, ``group``, ``start``: the tasks' columns. A task the reader placed (``op`` ≥ 0)
    keeps its op; the others go to the op of the same group (any group when the task's is
    unknown) whose [start, end] holds the task's start. Ops of one group run one after
    another, so at most one holds it. Looped over groups only.
    """
    op = np.asarray(op, np.int64).copy()
    todo = op < 0
    if not todo.any() or not len(ops):
        return op
    # groups as codes into the ops' group names (-1: a name no op has, -2: unknown)
    op_group, op_names = _group_codes(ops["group"])
    task_codes, task_names = _group_codes(group)
    where = {name: code for code, name in enumerate(op_names[:-1])}
    task_group = np.array([where.get(name, -1) if name != "" else -2 for name in task_names],
                          np.int64)[task_codes]
    op_start, op_end = ops["start_ns"].to_numpy(np.int64), ops["end_ns"].to_numpy(np.int64)
    for code in np.unique(task_group[todo]):
        rows = np.flatnonzero(todo & (task_group == code))
        candidates = np.flatnonzero(op_group == code) if code != -2 else np.arange(len(ops))
        if not len(candidates):
            candidates = np.arange(len(ops))  # the group thread held no op: any op
        candidates = candidates[np.argsort(op_start[candidates], kind="stable")]
        at = np.searchsorted(op_start[candidates], start[rows], side="right") - 1
        inside = at >= 0
        inside[inside] = start[rows][inside] <= op_end[candidates[at[inside]]]
        op[rows[inside]] = candidates[at[inside]]
    return op


def _first_fault(faults: list[np.ndarray]) -> np.ndarray:
    """Per row, the index of the first of ``faults`` (masks) that holds, -1 for none."""
    stacked = np.vstack(faults)
    return np.where(stacked.any(axis=0), np.argmax(stacked, axis=0), -1)


def _time_faults(start: np.ndarray, end: np.ndarray, timed: np.ndarray) -> list[np.ndarray]:
    """UNTIMED, BACKWARDS, ENDLESS masks (OP_FAULTS order); no arithmetic on untimed rows."""
    start, end = np.where(timed, start, 0), np.where(timed, end, 0)
    backwards = timed & (end < start)
    # end − start in two halves: the difference of two int64 may not fit one
    endless = timed & ~backwards & ((end // 2 - start // 2) > LONGEST_NS // 2)
    return [~timed, backwards, endless]


def _planes_text(planes: np.ndarray) -> str:
    """``plane 1`` or ``planes 1 (10), 4 (2)``, NAMED_PLANES at most, then how many more."""
    ids, counts = np.unique(planes, return_counts=True)
    if len(ids) == 1:
        return f"plane {ids[0]}"
    named = ", ".join(f"{i} ({c})" for i, c in zip(ids[:NAMED_PLANES], counts[:NAMED_PLANES]))
    more = f" and {len(ids) - NAMED_PLANES} more" if len(ids) > NAMED_PLANES else ""
    return f"planes {named}{more}"


def screen(found: CollectiveTasks, op_timed: np.ndarray | None = None,
           task_timed: np.ndarray | None = None) -> CollectiveTasks:
    """``found`` without the rows whose times are impossible, every task placed in its op.

    ``op_timed`` / ``task_timed``: rows whose times the reader could read as numbers in
    range (all when None; the others may hold anything). Dropped, each for the first of
    its faults (OP_FAULTS, TASK_FAULTS), and counted in ``dropped``: ops with no time,
    ending before they start or longer than any capture; tasks alike, tasks of a dropped
    op, tasks lying wholly outside the window of the op their reader placed them in
    (partly outside is clipped by the reduce), and tasks that ``assign_ops`` places in no
    op's window. The rest keep their op (a row of the ops kept). Screening screened rows
    drops nothing and changes nothing.
    """
    ops, tasks = found.ops, found.tasks
    op_timed = np.ones(len(ops), bool) if op_timed is None else op_timed
    task_timed = np.ones(len(tasks), bool) if task_timed is None else task_timed
    op_start, op_end = ops["start_ns"].to_numpy(np.int64), ops["end_ns"].to_numpy(np.int64)
    op_fault = _first_fault(_time_faults(op_start, op_end, op_timed))
    kept_op = op_fault < 0
    kept_ops = ops[kept_op].reset_index(drop=True)
    new_row = np.append(np.where(kept_op, np.cumsum(kept_op) - 1, -1), -1)  # last: none
    start, end = tasks["start_ns"].to_numpy(np.int64), tasks["end_ns"].to_numpy(np.int64)
    given = tasks["op"].to_numpy(np.int64)
    at = np.where((given >= 0) & (given < len(ops)), given, len(ops))  # else: by window
    orphan = at < len(ops)
    orphan[orphan] = ~kept_op[at[orphan]]
    op = new_row[at]
    kept_start = np.append(kept_ops["start_ns"].to_numpy(np.int64), 0)[op]
    kept_end = np.append(kept_ops["end_ns"].to_numpy(np.int64), 0)[op]
    outside = (op >= 0) & ((end < kept_start) | (start > kept_end))
    time_faults = _time_faults(start, end, task_timed)
    bad_time = np.logical_or.reduce(time_faults)
    # rows dropped anyway are not looked for: op 0 marks them placed
    op = assign_ops(np.where(bad_time | orphan, 0, op), tasks["group"], start, kept_ops)
    task_fault = _first_fault([*time_faults, orphan, outside, op < 0])
    kept_task = task_fault < 0
    if kept_op.all() and kept_task.all():
        return found if np.array_equal(given, op) else \
            CollectiveTasks(ops, tasks.assign(op=op), found.source, found.dropped)
    file = found.source.split(":")[0]
    dropped = list(found.dropped)
    names = ops["op_name"].astype(str).to_numpy()
    for code in np.unique(op_fault[~kept_op]):
        distinct = pd.unique(names[op_fault == code])
        shown = ", ".join(distinct[:3]) + (", …" if len(distinct) > 3 else "")
        dropped.append(("", f"{int((op_fault == code).sum())} HCCL op(s) dropped: "
                            f"{OP_FAULTS[code]} ({shown}; {file}; not in the collectives' "
                            "split)"))
    plane = tasks["plane"].to_numpy(np.int64)
    for code in np.unique(task_fault[~kept_task]):
        rows = task_fault == code
        dropped.append((_planes_text(plane[rows]),
                        f"{int(rows.sum())} HCCL task(s) dropped: {TASK_FAULTS[code]} "
                        f"({file}; not in the collectives' split)"))
    empty = len(kept_ops) - len(np.unique(op[kept_task]))
    if empty and not kept_task.all():
        dropped.append(("", f"{empty} of {len(kept_ops)} HCCL op(s) hold no task once those "
                            f"are dropped ({file}): their split shows them all idle"))
    return CollectiveTasks(kept_ops, tasks[kept_task].assign(op=op[kept_task])
                           .reset_index(drop=True), found.source, tuple(dropped))


# ---------------------------------------------------------------- trace

def _plane_groups(threads: dict, pids: set) -> tuple[dict, dict]:
    """Per (pid, tid) of a communication process: plane number, and the group of each thread.

    Returns ``planes`` ({(pid, tid): plane}) and ``groups`` ({(pid, tid): group label}):
    a group thread's label is its name without `` Communication``; a plane thread's is
    that of the group thread of its process with the largest tid below its own (``""``
    when no group thread precedes it, or tids are not numbers).
    """
    planes, group_threads = {}, {}
    for (pid, tid), name in threads.items():
        if pid not in pids:
            continue
        plane = PLANE_THREAD.match(name)
        if plane:
            planes[(pid, tid)] = int(plane.group(1))
        else:
            group_threads[(pid, tid)] = name.removesuffix(GROUP_SUFFIX).strip()
    groups = dict(group_threads)
    for pid, tid in planes:
        below = [(t, label) for (p, t), label in group_threads.items()
                 if p == pid and isinstance(t, int) and isinstance(tid, int) and t < tid]
        groups[(pid, tid)] = max(below, key=lambda pair: pair[0])[1] if below else ""
    return planes, groups


# A task event as msprof writes it, one to a line: the fields in this order, a single
# blank after each ``:`` and ``,``, strings of printable ASCII without escapes, integers
# of at most 18 digits, floats without a huge exponent. An event of this form is valid
# JSON whose values any parser reads alike; its fields are taken from its bytes
# (``plain_task_columns``). Any other form is parsed (trace_select.py).
_STRING = r'"[ !#-\[\]-~]*"'
_INT = r"-?(?:0|[1-9][0-9]{0,17})"
_NUMBER = _INT + r"(?:\.[0-9]+)?(?:[eE][-+]?[0-9]{1,2})?"
_PAIR = f"{_STRING}: (?:{_STRING}|{_NUMBER})"
PLAIN_TASK = (rf'^\{{"name": {_STRING}, "pid": {_INT}, "tid": {_INT}, "ts": {_STRING}, '
              rf'"dur": {_NUMBER}, "args": \{{{_PAIR}(?:, {_PAIR})*\}}, "ph": "X"\}}$')
# The args taken, with whether the value is text: each exactly once in a plain event.
PLAIN_ARGS = {"type": ("task type", True), "size": ("size(Byte)", False),
              "link": (TASK_KEY, True), "transport": ("transport type", True)}
# The ranks a task is between: numbers, at most once in a plain event (NaN in an event
# without one; older msprof wrote neither).
PLAIN_RANKS = {"src": "src rank", "dst": "dst rank"}
_COLON, _CLOSE = ord(":"), ord("}")


def plain_task_columns(region: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                       quotes: np.ndarray) -> dict | None:
    """The fields of task events read from their bytes, when every one is plain; else None.

    ``region`` holds the events at ``starts``/``ends`` (ascending); ``quotes`` are the
    positions of its real quotes. Plain: each event is of the PLAIN_TASK form, its name
    is not an op-level one (``hcom_*``) and it holds each of PLAIN_ARGS once, text as
    text and the size as a number, and each of PLAIN_RANKS at most once, as a number.
    Returns the columns a batch of parsed plain events gives (``pid``, ``tid`` int64;
    ``ts``, ``name``, ``type``, ``link``, ``transport`` Arrow text; ``dur``, ``size``,
    ``src``, ``dst`` float64, NaN where an event names no rank): the same values, with
    no object per event.
    The columns hold no view of ``region``.
    """
    data = pa.py_buffer(region)
    plain = pc.match_substring_regex(_spans(data, starts, ends), PLAIN_TASK)
    if not plain.to_numpy(zero_copy_only=False)[0::2].all():
        return None
    opening, closing = quotes[0::2].copy(), quotes[1::2].copy()  # contiguous: indexed often
    # The strings of a plain event: "name", its name, "pid", "tid", "ts", its ts, "dur",
    # "args", then those of the args; a key is a string followed by ``:``.
    first = np.searchsorted(opening, starts)

    def value(key: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # ``"key": <value>, "``
        return closing[key] + 3, opening[key + 1] - 2

    name = _slices(data, opening[first + 1] + 1, closing[first + 1])
    if pc.any(pc.starts_with(name, "hcom_")).as_py():
        return None
    columns = {"pid": _slices(data, *value(first + 2)), "tid": _slices(data, *value(first + 3)),
               "ts": _slices(data, opening[first + 5] + 1, closing[first + 5]),
               "dur": _slices(data, *value(first + 6)), "name": name}
    length = closing - opening - 1
    after = region[closing + 1]

    def keyed(key: str) -> tuple[np.ndarray, np.ndarray]:  # strings spelling ``"key":``
        spelled = np.frombuffer(key.encode(), np.uint8)
        at = np.flatnonzero((length == len(key)) & (after == _COLON))
        at = at[region[opening[at] + 1] == spelled[0]]
        at = at[(region[opening[at, None] + np.arange(1, len(key) + 1)] == spelled).all(axis=1)]
        event = np.searchsorted(starts, opening[at], "right") - 1
        inside = (event >= 0) & (opening[at] < ends[np.maximum(event, 0)])
        return at[inside], event[inside]

    def cut(at: np.ndarray, text: bool) -> pa.Array | None:  # the values; None: wrong kind
        begin, end = value(at)
        is_text = opening[at + 1] == begin
        if not (is_text.all() if text else not is_text.any()):
            return None
        if text:
            return _slices(data, begin + 1, closing[at + 1])
        # ``, "`` follows, or ``}, "ph"`` after the last of the args
        return _slices(data, begin, end - (region[end - 1] == _CLOSE))

    for column, (key, text) in PLAIN_ARGS.items():
        at, event = keyed(key)
        if len(at) != len(starts) or not np.array_equal(event, np.arange(len(starts))):
            return None  # not exactly one such key in each event
        found = cut(at, text)
        if found is None:
            return None
        columns[column] = found
    for column, key in PLAIN_RANKS.items():  # at most once in each event, NaN where absent
        at, event = keyed(key)
        found = cut(at, False)
        if found is None or (np.diff(event) == 0).any():  # ascending: twice is adjacent
            return None
        ranks = np.full(len(starts), np.nan)
        ranks[event] = pc.cast(found, pa.float64()).to_numpy(zero_copy_only=False)
        columns[column] = ranks
    for column in ("pid", "tid"):
        columns[column] = pc.cast(columns[column], pa.int64()).to_numpy()
    for column in ("dur", "size"):
        columns[column] = pc.cast(columns[column], pa.float64()).to_numpy()
    return columns


def _spans(data: pa.Buffer, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """Text of ``data``: from each start to its end, then to the next start (no copy).

    The slices are the items at even positions. ``starts`` and ``ends`` ascend, apart.
    """
    offsets = np.empty(2 * len(starts), np.int64)
    offsets[0::2], offsets[1::2] = starts, ends
    return pa.Array.from_buffers(pa.large_string(), len(offsets) - 1,
                                 [None, pa.py_buffer(offsets), data])


def _slices(data: pa.Buffer, starts: np.ndarray, ends: np.ndarray) -> pa.Array:
    """The text of ``data`` from each start to its end (ascending, apart), as a copy."""
    if not len(starts):
        return pa.array([], pa.string())
    spans = _spans(data, starts, ends)
    return spans.take(pa.array(np.arange(0, len(spans), 2))).cast(pa.string())


Chunks = list  # a column as pieces: Python lists, numpy or Arrow arrays


def _ints(chunks: Chunks) -> np.ndarray:
    """A pid/tid column as int64 when every value is an integer, else as objects."""
    parts = []
    for chunk in chunks:
        if isinstance(chunk, np.ndarray):
            parts.append(chunk)
            continue
        if isinstance(chunk, pa.Array):
            parts.append(np.asarray(chunk.to_pandas(), dtype=object) if chunk.null_count
                         else chunk.to_numpy(zero_copy_only=False))
            continue
        try:  # ints (floats never reach here: the pass that kept them refuses those)
            parts.append(np.array(chunk, dtype=np.int64))
        except (TypeError, ValueError, OverflowError):
            parts.append(np.array(chunk, dtype=object))
    if not parts:
        return np.zeros(0, np.int64)
    if all(p.dtype == np.int64 for p in parts):
        return np.concatenate(parts)
    return np.concatenate([p.astype(object) for p in parts])


def _pairs(pids: Chunks, tids: Chunks) -> tuple[np.ndarray, list]:
    """A code per event for its (pid, tid) and the distinct pairs the codes index.

    Factorized per column, so a million task events cost no Python loop.
    """
    pid, tid = _ints(pids), _ints(tids)
    if not len(pid):
        return np.zeros(0, np.int64), []
    pid_code, pid_values = pd.factorize(pid)
    tid_code, tid_values = pd.factorize(tid)
    local, distinct = pd.factorize(pid_code.astype(np.int64) * len(tid_values) + tid_code)
    pairs = [(_key(pid_values[d // len(tid_values)]), _key(tid_values[d % len(tid_values)]))
             for d in distinct]
    return local, pairs


def _key(value):
    """A pid or tid as the metadata dicts key it (numpy ints back to int)."""
    return int(value) if isinstance(value, np.integer) else value


def trace_tasks(path: Path, processes: dict, threads: dict, ops: dict[str, list],
                tasks: dict[str, Chunks], ns) -> CollectiveTasks | None:
    """The CollectiveTasks of a trace from the columns a LinkScan kept.

    ``ops`` holds lists ``pid``, ``tid``, ``ts``, ``dur``, ``name``, ``algorithm`` of the
    ``hcom_*`` ``X`` events; ``tasks`` holds, as chunks (lists or Arrow arrays), ``pid``,
    ``tid``, ``ts``, ``dur``, ``name``, ``type`` (args ``task type``), ``size``, ``link``,
    ``transport`` of the events carrying TASK_KEY, and where kept ``src`` and ``dst``
    (args ``src rank``, ``dst rank``; a chunk is None where they were not kept). Only
    events of a communication process count: op-level ones on a thread that is not a
    plane, tasks on a ``Plane <n>`` thread.
    ``ns(texts)`` converts timestamps (an Arrow string array) to int64 ns. None when the
    trace holds no task of a plane thread. Screened (``screen``): each task placed in the
    op whose window holds its start.
    """
    pids = {pid for pid, name in processes.items() if name in COMM_PROCESSES}
    planes, groups = _plane_groups(threads, pids)
    task_code, task_pairs = _pairs(tasks["pid"], tasks["tid"])
    pair_plane = np.array([planes.get(pair, -1) for pair in task_pairs] + [-1], np.int64)
    plane = pair_plane[task_code]
    on_plane = plane >= 0
    if not on_plane.any():
        return None
    ops = {column: [values] for column, values in ops.items()}
    op_code, op_pairs = _pairs(ops["pid"], ops["tid"])
    pair_is_op = np.array([pair[0] in pids and pair not in planes for pair in op_pairs]
                          + [False], bool)
    op_rows = pair_is_op[op_code]
    op_frame, op_timed = _events(ops, op_rows, ns)
    op_frame["op_name"] = _category(ops["name"], op_rows)
    op_group = np.array([groups.get(pair, "") for pair in op_pairs] + [""], dtype=object)
    op_frame["group"] = pd.Categorical(op_group[op_code[op_rows]].astype(str))
    op_frame["algorithm"] = _category(ops["algorithm"], op_rows)
    task_frame, task_timed = _events(tasks, on_plane, ns)
    task_group = pd.Categorical([groups.get(pair, "") for pair in task_pairs] + [""])
    task_frame["op"] = -1
    task_frame["group"] = pd.Categorical.from_codes(task_group.codes[task_code[on_plane]],
                                                    dtype=task_group.dtype)
    task_frame["plane"] = plane[on_plane]
    # The task type is the event's name; args "task type" says the same where present.
    typed = _category(tasks["type"], on_plane)
    if "" in typed.categories:  # some events without the arg: their name says it
        named = np.asarray(_category(tasks["name"], on_plane))
        typed = pd.Categorical(np.where(np.asarray(typed) != "", np.asarray(typed), named))
    task_frame["task_type"] = typed
    task_frame["size"] = _numbers(tasks["size"], on_plane, np.int64)
    task_frame["link_type"] = _category(tasks["link"], on_plane)
    task_frame["transport"] = _category(tasks["transport"], on_plane)
    task_frame["rdma"] = pd.Categorical.from_codes(np.zeros(len(task_frame), np.int8), [""])
    task_frame["src_rank"] = _rank_column(tasks, "src", on_plane)
    task_frame["dst_rank"] = _rank_column(tasks, "dst", on_plane)
    order = np.argsort(op_frame["start_ns"].to_numpy(), kind="stable")
    found = CollectiveTasks(_conform(op_frame.iloc[order], OP_FIELDS),
                            _conform(task_frame, TASK_FIELDS), f"{path.name}: HCCL plane tasks")
    return screen(found, op_timed[order], task_timed)


def _rank_column(tasks: dict[str, Chunks], column: str, keep: np.ndarray) -> np.ndarray:
    """Rank ids (``rank_ids``) of the kept task events; -1 where a chunk lacks the column.

    A chunk is None where its events were kept without their ranks, and the column is
    absent when no chunk holds it.
    """
    chunks = tasks.get(column)
    if chunks is None:
        return np.full(int(keep.sum()), -1, np.int64)
    parts = [np.full(len(ts), -1, np.int64) if chunk is None else
             rank_ids(chunk.to_numpy(zero_copy_only=False) if isinstance(chunk, pa.Array)
                      else chunk)
             for chunk, ts in zip(chunks, tasks["ts"])]
    return np.concatenate(parts)[keep] if parts else np.zeros(0, np.int64)


def _strings(chunks: Chunks) -> pa.Array:
    """A column as one Arrow string array (missing values null; other values as text)."""
    parts = []
    for chunk in chunks:
        if isinstance(chunk, pa.Array):
            parts.append(chunk if chunk.type == pa.string() else chunk.cast(pa.string()))
            continue
        try:
            parts.append(pa.array(chunk, type=pa.string()))
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # numbers or objects: by their text
            parts.append(pa.array([v if v.__class__ is str or v is None else str(v)
                                   for v in chunk], type=pa.string()))
    return pa.concat_arrays(parts) if parts else pa.array([], pa.string())


def _events(columns: dict[str, Chunks], keep: np.ndarray, ns
            ) -> tuple[pd.DataFrame, np.ndarray]:
    """``start_ns``, ``end_ns`` of the kept events, and where ``dur`` is a finite number.

    A negative ``dur`` gives an end before the start, and a huge one an end so far that
    ``screen`` drops the event; a ``dur`` that is no number leaves the end at the start,
    and the event untimed.
    """
    ts = _strings(columns["ts"])
    if not keep.all():
        ts = ts.filter(pa.array(keep))
    start = ns(ts) if len(ts) else np.zeros(0, np.int64)
    dur = _numbers(columns["dur"], keep, np.float64, finite=False)
    timed = np.isfinite(dur)
    # at most 2 * LONGEST_NS: beyond is as impossible; the end saturates, never wraps
    length = np.rint(np.clip(np.where(timed, dur, 0) * 1000, -2 * LONGEST_NS,
                             2 * LONGEST_NS)).astype(np.int64)
    bounds = np.iinfo(np.int64)
    length = np.clip(length, bounds.min - np.minimum(start, 0), bounds.max - np.maximum(start, 0))
    return pd.DataFrame({"start_ns": start, "end_ns": start + length}), timed


def _numbers(chunks: Chunks, keep: np.ndarray, dtype, finite: bool = True) -> np.ndarray:
    """The kept values as numbers (text and None too: then 0 where not a number).

    ``finite`` False: NaN where not a number, infinities kept (float64 only).
    """
    parts = []
    for chunk in chunks:
        if isinstance(chunk, np.ndarray):
            parts.append(chunk.astype(np.float64))
            continue
        try:  # all numbers (or numeric text): read at C speed
            parts.append(chunk.cast(pa.float64()).to_numpy(zero_copy_only=False)
                         if isinstance(chunk, pa.Array) else np.asarray(chunk, dtype=np.float64))
        except (TypeError, ValueError, OverflowError, pa.ArrowInvalid):
            values = chunk.to_pylist() if isinstance(chunk, pa.Array) else chunk
            parts.append(pd.to_numeric(pd.Series(values, dtype=object), errors="coerce")
                         .to_numpy(float))
    out = np.concatenate(parts) if parts else np.zeros(0)
    if not finite:
        return out[keep]
    out = np.nan_to_num(out[keep], nan=0.0, posinf=0.0, neginf=0.0)
    return out.astype(dtype) if dtype is not np.float64 else out


def _category(chunks: Chunks, keep: np.ndarray) -> pd.Categorical:
    """The kept values as a categorical of text, ``""`` for missing ones.

    Through Arrow's dictionary encoding: a million task events hold a handful of texts.
    """
    text = pc.fill_null(_strings(chunks), "")
    if not keep.all():
        text = text.filter(pa.array(keep))
    encoded = text.dictionary_encode()
    return pd.Categorical.from_codes(encoded.indices.to_numpy(zero_copy_only=False),
                                     encoded.dictionary.to_pylist())


# ---------------------------------------------------------------- db

def _enum(conn: sqlite3.Connection, tables: dict, table: str, default: dict) -> dict:
    if {"id", "name"} <= tables.get(table, set()):
        return {**default, **dict(conn.execute(f"SELECT id, name FROM {table}").fetchall())}
    return default


def _names(ids: pd.Series, table: dict) -> pd.Series:
    numbers = pd.to_numeric(ids, errors="coerce")
    return numbers.map(table).where(numbers.notna(), "").fillna("").astype(str)


def _times_sql(table: str) -> str:
    """``start_ns``, ``end_ns`` and ``timed`` of ``table``'s startNs, endNs, for a SELECT.

    As int64, 0 where a time is not an integer in range (``timed`` 0 then): a NULL, a
    text or a non-finite REAL would make pandas read the column as float, and every ns
    inexact.
    """
    def in_range(column: str) -> str:
        value = f"{table}.{column}"
        return (f"(typeof({value}) = 'integer' OR "
                f"(typeof({value}) = 'real' AND abs({value}) < 9.2e18))")

    return (f"CASE WHEN {in_range('startNs')} THEN CAST({table}.startNs AS INTEGER) ELSE 0 "
            f"END AS start_ns, CASE WHEN {in_range('endNs')} THEN CAST({table}.endNs AS "
            f"INTEGER) ELSE 0 END AS end_ns, ({in_range('startNs')} AND {in_range('endNs')}) "
            "AS timed")


def read_db_tasks(conn: sqlite3.Connection, tables: dict[str, set[str]], path: Path,
                  strings, query, resolve) -> CollectiveTasks | None:
    """COMMUNICATION_OP and COMMUNICATION_TASK_INFO ⨝ TASK of a profiler db, or None.

    None when the db holds no task rows (Level0, or a db without the tables). ``query``,
    ``resolve`` and ``strings`` are the db reader's (sqlite_db.py), so that ids resolve
    alike for kernels and tasks. Screened (``screen``): a task whose ``opId`` names no op
    is placed by time window within its ``groupName``.
    """
    op_columns = tables.get("COMMUNICATION_OP", set())
    info = tables.get("COMMUNICATION_TASK_INFO", set())
    task = tables.get("TASK", set())
    if not {"opName", "startNs", "endNs"} <= op_columns or \
            not {"globalTaskId", "taskType"} <= info or \
            not {"startNs", "endNs", "globalTaskId"} <= task or strings is None:
        return None

    def column(name: str, present: set, alias: str, table: str) -> str:
        return f"{table}.{name} AS {alias}" if name in present else f"NULL AS {alias}"

    tasks = query(conn, f"SELECT {_times_sql('T')}, "
                        f"{column('opId', info, 'op_id', 'C')}, "
                        f"{column('groupName', info, 'group_id', 'C')}, "
                        f"{column('planeId', info, 'plane', 'C')}, C.taskType AS task_type, "
                        f"{column('size', info, 'size', 'C')}, "
                        f"{column('linkType', info, 'link', 'C')}, "
                        f"{column('transportType', info, 'transport', 'C')}, "
                        f"{column('rdmaType', info, 'rdma', 'C')}, "
                        f"{column('srcRank', info, 'src_rank', 'C')}, "
                        f"{column('dstRank', info, 'dst_rank', 'C')} "
                        "FROM COMMUNICATION_TASK_INFO C JOIN TASK T "
                        "ON T.globalTaskId = C.globalTaskId", path)
    if tasks.empty:
        return None
    ops = query(conn, f"SELECT {_times_sql('O')}, opName AS op_name, "
                      f"{column('opId', op_columns, 'op_id', 'O')}, "
                      f"{column('groupName', op_columns, 'group_id', 'O')}, "
                      f"{column('algType', op_columns, 'algorithm', 'O')} "
                      "FROM COMMUNICATION_OP O ORDER BY startNs", path)
    ops["op_name"] = resolve(ops["op_name"], strings)
    ops["group"] = resolve(ops["group_id"], strings)
    ops["algorithm"] = resolve(ops["algorithm"], strings)
    op_ids = pd.to_numeric(ops["op_id"], errors="coerce")
    row_of = pd.Series(np.arange(len(ops)), index=op_ids.to_numpy()) \
        if op_ids.notna().all() and op_ids.is_unique else pd.Series(dtype="int64")
    found = pd.to_numeric(tasks["op_id"], errors="coerce").map(row_of)
    tasks["op"] = found.fillna(-1).astype(np.int64)
    tasks["group"] = resolve(tasks["group_id"], strings)
    tasks["task_type"] = resolve(tasks["task_type"], strings)
    tasks["link_type"] = _names(tasks["link"], _enum(conn, tables, "ENUM_HCCL_LINK_TYPE",
                                                     LINK_TYPES))
    tasks["transport"] = _names(tasks["transport"], _enum(
        conn, tables, "ENUM_HCCL_TRANSPORT_TYPE", TRANSPORT_TYPES))
    tasks["rdma"] = _names(tasks["rdma"], _enum(conn, tables, "ENUM_HCCL_RDMA_TYPE",
                                                RDMA_TYPES))
    tasks["src_rank"] = rank_ids(tasks["src_rank"])
    tasks["dst_rank"] = rank_ids(tasks["dst_rank"])
    found = CollectiveTasks(_conform(ops, OP_FIELDS), _conform(tasks, TASK_FIELDS),
                            f"{path.name}: COMMUNICATION_TASK_INFO + TASK")
    return screen(found, _timed(ops), _timed(tasks))


def _timed(frame: pd.DataFrame) -> np.ndarray:
    """Rows whose two times ``_times_sql`` read as numbers in range."""
    return pd.to_numeric(frame["timed"], errors="coerce").fillna(0).to_numpy() > 0
