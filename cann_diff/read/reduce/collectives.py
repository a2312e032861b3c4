"""HCCL tasks → one row per collective instance: where its elapsed time went, by plane.

docs/formats.md §14 holds the definitions; in short, per op-level collective (op) of a
rank, with its tasks clipped to the op's [start, end]:

* ``transfer`` — length of the union, over every plane, of the data-moving tasks
  (``TRANSFER_TYPES``, or any task of size > 0 that is not a signal);
* ``wait`` — length of the union of the ``Notify_Wait`` tasks over every plane, less what
  the transfer union covers: time some plane waits while no plane moves data;
* ``idle`` — elapsed less the union of all of the op's tasks: no task on any plane;
* ``other`` — the rest (notify records, …), so that the four add up to elapsed;
* ``group_ranks`` — the distinct ranks its tasks name (source or destination): how many
  ranks of its group this rank's tasks reach, so that a later stage can tell a group
  larger than the ranks profiled.

Everything is vectorized over the rank's tasks: one sort by (op, start), unions as
``timeline.merged_intervals`` (cumulative maximum of ends per group), sums by
``np.bincount``. A 1M-kernel rank holds tens of thousands of collectives, each with
about ten tasks per plane on up to eight planes. Plane ids are labels, numbered among
the distinct ones (``_plane_pairs``): a db may write 4294967295. The tasks come screened
(``hccl_tasks.screen``: no impossible time, each in its op's window), each placed in its
op by its reader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...schema import COLLECTIVE_COLUMNS, COLLECTIVE_LINK_COLUMNS
from ...vocab.names import comm_types
from ..formats.hccl_tasks import CollectiveTasks, screen
from ..formats.values import assign_steps
from .timeline import merged_intervals

# Task types that move data (normalized: upper case, blanks and dashes as ``_``); HCCL's
# task names ([MSPROF] TASK_PARAM_TYPE_NAME_MAP): SDMA copies and inline reductions, RDMA
# sends, payload sends and writes, the UB kinds of A3.
TRANSFER_TYPES = ("MEMCPY", "REDUCE_INLINE", "REDUCE_TBE", "RDMASEND", "RDMA_SEND",
                  "SEND_PAYLOAD", "WRITE_WITH_NOTIFY", "UB_INLINE_WRITE", "UB_REDUCE_INLINE")
WAIT_TYPES = ("NOTIFY_WAIT",)
# Synchronization tasks: never data, whatever size they report.
SIGNAL_TYPES = ("NOTIFY_WAIT", "NOTIFY_RECORD", "SEND_NOTIFY")
RDMA_SEND_TYPES = ("RDMASEND", "RDMA_SEND")
RDMA_SIGNALS = ("RDMA_SEND_NOTIFY",)  # db rdmaType of an RDMA send that carries a notify
LOCAL_LINK = "ON_CHIP"  # a copy within the chip: data moved, but over no link
# (op, rank) flags counted at once up to this many (64 MB); beyond, a sort of the pairs.
SEEN_CELLS = 1 << 26
_BLANKS = re.compile(r"[\s\-]+")


@dataclass(frozen=True)
class CollectiveFrames:
    """One rank's collectives (COLLECTIVE_COLUMNS, rank 0) and their per-link figures.

    ``links``: COLLECTIVE_LINK_COLUMNS (rank 0). ``planes``: the clipped tasks of the ops
    kept (``step``, ``plane``, ``start_ns``, ``end_ns``, ``task_type``), for the step
    lanes of reduce/host_time.py; not part of the Run. ``source``: where the tasks came
    from (``CollectiveTasks.source``).
    """

    collectives: pd.DataFrame
    links: pd.DataFrame
    planes: pd.DataFrame
    source: str


def _codes(values: pd.Series, normalize: bool = True) -> tuple[np.ndarray, list[str]]:
    """Category codes of ``values`` (missing: the last) and the names they index.

    ``normalize``: upper case, blanks and dashes as underscores (``Notify Wait`` ≡
    ``NOTIFY_WAIT``). Per distinct value only: a rank holds millions of tasks of a dozen
    kinds.
    """
    cat = values.astype("category")
    names = [_BLANKS.sub("_", str(name).strip().upper()) if normalize else str(name)
             for name in cat.cat.categories]
    codes = cat.cat.codes.to_numpy().astype(np.int64)
    return np.where(codes >= 0, codes, len(names)), [*names, ""]


def _is(values: pd.Series, wanted) -> np.ndarray:
    """Per row: its normalized value is one of ``wanted``."""
    codes, names = _codes(values)
    return np.array([name in wanted for name in names], bool)[codes]


def _union_length(start: np.ndarray, end: np.ndarray, group: np.ndarray,
                  count: int) -> np.ndarray:
    """Covered length (ns) of the intervals of each group 0 … count-1."""
    groups, starts, ends = merged_intervals(start, end, group)
    return np.bincount(groups, weights=(ends - starts).astype(np.float64), minlength=count)


def _kinds(tasks: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Masks: data-moving, waiting, over a link (moving, not ON_CHIP), RDMA payload send."""
    kind = tasks["task_type"]
    size = tasks["size"].to_numpy(np.int64)
    rdma_send = _is(kind, RDMA_SEND_TYPES)
    no_rdma_kind = _is(tasks["rdma"], ("",))
    signal = _is(kind, SIGNAL_TYPES) | _is(tasks["rdma"], RDMA_SIGNALS) | \
        (rdma_send & (size <= 0) & no_rdma_kind)  # a trace's RDMA send of nothing: a notify
    moving = (_is(kind, TRANSFER_TYPES) | (size > 0)) & ~signal
    link = moving & ~_is(tasks["link_type"], (LOCAL_LINK,))
    return moving, _is(kind, WAIT_TYPES), link, moving & rdma_send


def _rdma_completion(op: np.ndarray, plane: np.ndarray, start: np.ndarray, end: np.ndarray,
                     wait: np.ndarray, payload: np.ndarray) -> np.ndarray:
    """Ends of RDMA payload sends extended to the end of the next wait on their plane.

    An RDMA send only posts the write; the data is on the wire until the peer's notify
    arrives, which the ``Notify_Wait`` after it on the same plane waits for (msprof-analyze
    counts RDMA transit alike, from the send to the end of that wait).
    """
    if not payload.any() or not wait.any():
        return end
    order = np.lexsort((start, plane, op))
    key_op, key_plane = op[order], plane[order]
    waits = np.flatnonzero(wait[order])
    sends = np.flatnonzero(payload[order])
    nxt = np.searchsorted(waits, sends, side="right")
    found = nxt < len(waits)
    sends, nxt = sends[found], waits[nxt[found]]
    same = (key_op[nxt] == key_op[sends]) & (key_plane[nxt] == key_plane[sends])
    out = end.copy()
    rows, until = order[sends[same]], end[order[nxt[same]]]
    out[rows] = np.maximum(out[rows], until)
    return out


def _plane_pairs(op: np.ndarray, plane: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each task's (op, plane) pair as a dense code, and each pair's op and plane id.

    Plane ids are labels (a db may hold 4294967295, or anything): numbered among the
    distinct ones, so no array is ever sized by one. Pairs in (op, plane id) order.
    """
    plane_ids, plane_code = np.unique(plane, return_inverse=True)
    width = max(len(plane_ids), 1)
    pairs, pair = np.unique(op * width + plane_code.reshape(-1), return_inverse=True)
    return pair.reshape(-1), pairs // width, plane_ids[pairs % width]


def _critical(op: np.ndarray, plane: np.ndarray, start: np.ndarray, end: np.ndarray,
              count: int) -> tuple[np.ndarray, np.ndarray]:
    """Per op: the plane of longest total wait (lowest id on a tie; -1: no wait), its µs."""
    pair, pair_op, pair_plane = _plane_pairs(op, plane)
    waited = _union_length(start, end, pair, len(pair_op))
    # per op, the longest wait first and on a tie the lowest plane id (pairs are in that order)
    order = np.lexsort((pair_plane, -waited, pair_op))
    ops, first = np.unique(pair_op[order], return_index=True)
    best, longest = np.full(count, -1, np.int64), np.zeros(count)
    best[ops], longest[ops] = pair_plane[order][first], waited[order][first]
    return np.where(longest > 0, best, -1), longest / 1000.0


def _first(start: np.ndarray, op: np.ndarray, count: int) -> np.ndarray:
    """Earliest start per op, int64 max where it has none (one lexsort, no ufunc.at)."""
    first = np.full(count, np.iinfo(np.int64).max, dtype=np.int64)
    if len(op):
        order = np.lexsort((start, op))
        ops, at = np.unique(op[order], return_index=True)
        first[ops] = start[order][at]
    return first


def collective_frames(found: CollectiveTasks, spans: pd.DataFrame | None,
                      stepped: bool) -> CollectiveFrames:
    """The collectives of one rank from its tasks; ``spans`` are its steps' kernel spans.

    ``spans`` (``step``, ``start_ns``, ``end_ns``: first start to last end of each chosen
    step's canonical rows) give each op its step, the one whose span holds its start, as
    the op rows get theirs; ops in no span are left out. With ``stepped`` False (the rank
    has no step ids) every op is kept with step <NA>. ``seq`` counts over every op the
    reader kept (``hccl_tasks.screen``), before that choice, so it names the same instance
    on every rank.
    """
    found = screen(found)  # the readers' screen: a no-op, but for tasks built by hand
    ops, tasks = found.ops, found.tasks
    count = len(ops)
    op_start, op_end = ops["start_ns"].to_numpy(np.int64), ops["end_ns"].to_numpy(np.int64)
    op = tasks["op"].to_numpy(np.int64)
    moving, wait, link, payload = _kinds(tasks)
    plane = tasks["plane"].to_numpy(np.int64)  # an id, never a size: see _plane_pairs
    start = np.maximum(tasks["start_ns"].to_numpy(np.int64), op_start[op])
    end = _rdma_completion(op, plane, start, tasks["end_ns"].to_numpy(np.int64), wait, payload)
    end = np.clip(end, start, op_end[op])
    size = np.maximum(tasks["size"].to_numpy(np.int64), 0)
    transfer = _union_length(start[moving], end[moving], op[moving], count)
    signals = moving | wait
    covered = _union_length(start[signals], end[signals], op[signals], count)
    busy = _union_length(start, end, op, count)
    elapsed = (op_end - op_start).astype(np.float64)
    first = _first(start[link], op[link], count)
    has_first = first < np.iinfo(np.int64).max
    # sync wait: the wait before the first transfer over a link, i.e. both unions clipped
    # to end there; an op that moves nothing over a link waits for nothing else.
    cut = np.where(has_first, first, op_end)[op]
    early = start < cut
    cut_end = np.minimum(end, cut)
    before = _union_length(start[early & signals], cut_end[early & signals],
                           op[early & signals], count)
    moved_before = _union_length(start[early & moving], cut_end[early & moving],
                                 op[early & moving], count)
    critical_plane, critical_wait = _critical(op[wait], plane[wait], start[wait], end[wait],
                                              count)
    frame = pd.DataFrame({
        "op": np.arange(count, dtype=np.int64),
        "op_name": ops["op_name"].to_numpy(),
        "group": ops["group"].to_numpy(),
        "start_ns": op_start, "end_ns": op_end,
        "elapsed_us": elapsed / 1000.0,
        "transfer_us": transfer / 1000.0,
        "wait_us": (covered - transfer) / 1000.0,
        "idle_us": (elapsed - busy) / 1000.0,
        "other_us": (busy - covered) / 1000.0,
        "sync_wait_us": np.where(has_first, before - moved_before, covered - transfer) / 1000.0,
        "first_transfer_ns": pd.arrays.IntegerArray(np.where(has_first, first, 0),
                                                    ~has_first),
        "planes": _plane_count(op, plane, count),
        "critical_plane": pd.array(critical_plane, dtype="Int64"),
        "critical_wait_us": critical_wait,
        "bytes": np.bincount(op[moving], weights=size[moving], minlength=count).astype(np.int64),
        "link_transfer_us": _union_length(start[link], end[link], op[link], count) / 1000.0,
        "link_busy_us": _per_plane_busy(op[link], plane[link], start[link], end[link], count),
        "link_bytes": np.bincount(op[link], weights=size[link], minlength=count).astype(np.int64),
        "algorithm": ops["algorithm"].to_numpy(),
        "group_ranks": _group_ranks(op, tasks["src_rank"].to_numpy(np.int64),
                                    tasks["dst_rank"].to_numpy(np.int64), count),
    })
    frame["comm_type"] = _comm_types(ops["op_name"])
    frame["seq"] = frame.groupby(["group", "comm_type"], observed=True, sort=False
                                 ).cumcount().to_numpy(np.int64)
    frame["rank"] = 0
    frame["step"] = _steps(op_start, spans, stepped)
    keep = frame["step"].notna().to_numpy() | (not stepped)
    link_codes, link_names = _codes(tasks["link_type"])
    link_frame = _links(op[moving], np.asarray(link_names, dtype=object)[link_codes][moving],
                        start[moving], end[moving], size[moving], count)
    link_frame["step"] = frame["step"].array[link_frame["op"].to_numpy()]
    planes = pd.DataFrame({"step": frame["step"].array[op], "plane": plane, "start_ns": start,
                           "end_ns": end, "task_type": tasks["task_type"].to_numpy()})
    kept_ops = keep[link_frame["op"].to_numpy()]
    return CollectiveFrames(
        _conform(frame[keep], COLLECTIVE_COLUMNS),
        _conform(link_frame[kept_ops].assign(rank=0), COLLECTIVE_LINK_COLUMNS),
        planes[keep[op]].reset_index(drop=True), found.source)


def _group_ranks(op: np.ndarray, src: np.ndarray, dst: np.ndarray, count: int) -> np.ndarray:
    """Per op: distinct ranks its tasks name as source or destination (0: none named).

    The ranks of the group this rank's part of the op reaches: all of them for a mesh,
    itself and its ring neighbours for a ring. A count, so it does not matter whether
    HCCL numbers them globally or within the group, as long as one op's tasks use one
    numbering (the real files do: communication_matrix.json's ``src-dst`` keys name the
    same numbers).
    """
    ops, ranks = np.concatenate([op, op]), np.concatenate([src, dst])
    named = ranks >= 0
    if not named.any():
        return np.zeros(count, np.int64)
    width = int(ranks[named].max()) + 1
    keys = ops[named] * width + ranks[named]
    if count * width <= SEEN_CELLS:  # a flag per (op, rank): 15× faster than a sort
        seen = np.zeros(count * width, bool)
        seen[keys] = True
        return seen.reshape(count, width).sum(axis=1).astype(np.int64)
    return np.bincount(np.unique(keys) // width, minlength=count).astype(np.int64)


def _plane_count(op: np.ndarray, plane: np.ndarray, count: int) -> np.ndarray:
    _, pair_op, _ = _plane_pairs(op, plane)
    return np.bincount(pair_op, minlength=count).astype(np.int64)


def _per_plane_busy(op: np.ndarray, plane: np.ndarray, start: np.ndarray, end: np.ndarray,
                    count: int) -> np.ndarray:
    """Σ over planes of each plane's own union (µs): the link time the op occupies."""
    pair, pair_op, _ = _plane_pairs(op, plane)
    per = _union_length(start, end, pair, len(pair_op))
    return np.bincount(pair_op, weights=per, minlength=count) / 1000.0


def _links(op: np.ndarray, link: np.ndarray, start: np.ndarray, end: np.ndarray,
           size: np.ndarray, count: int) -> pd.DataFrame:
    """Per (op, link type) of the data-moving tasks: union length (µs) and bytes."""
    codes, names = pd.factorize(pd.Series(link, dtype=object).replace("", "UNKNOWN"))
    width = max(len(names), 1)
    key = op * width + codes
    lengths = _union_length(start, end, key, count * width)
    moved = np.bincount(key, weights=size, minlength=count * width)
    used = np.unique(key)
    return pd.DataFrame({"op": used // width,
                         "link_type": np.asarray(names, dtype=object)[used % width],
                         "transfer_us": lengths[used] / 1000.0,
                         "bytes": moved[used].astype(np.int64)})


def _comm_types(names: pd.Series) -> np.ndarray:
    categories = names.astype("category")
    types = comm_types([str(c) for c in categories.cat.categories])
    return np.asarray(types + [""], dtype=object)[categories.cat.codes.to_numpy()]


def _steps(op_start: np.ndarray, spans: pd.DataFrame | None, stepped: bool):
    if spans is None or not stepped or not len(spans):
        return pd.array(np.full(len(op_start), pd.NA), dtype="Int64")
    return assign_steps(op_start, spans["step"].to_numpy(), spans["start_ns"].to_numpy(),
                        spans["end_ns"].to_numpy())


def _conform(frame: pd.DataFrame, columns: dict[str, str]) -> pd.DataFrame:
    frame = frame[list(columns)].reset_index(drop=True)
    casts = {c: t for c, t in columns.items() if str(frame[c].dtype) != t}
    return frame.astype(casts) if casts else frame


def empty_frame(columns: dict[str, str]) -> pd.DataFrame:
    """An empty frame of the given columns and dtypes."""
    return pd.DataFrame({c: pd.Series(dtype=t) for c, t in columns.items()})
