"""Framework operators: every kernel attributed to the host operator that launched it.

Between two CANN stacks most kernels change name or signature; the framework operators
(``aten::…``) keep theirs. Where a profile links host to device (docs/formats.md §3.3, §7.2):

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

Where the parts live: host_links.py (the trace side, HostLinks), host_db.py (the db
side), nesting.py (innermost open op, module paths); attribution and the per-rank and
per-run steps here.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from ...schema import NO_FRAMEWORK_LINKS, NO_LINKS, UNLINKED, Note
from ..formats import sqlite_db, torch_text
from ..formats.files import present
from ..formats.host_db import read_db_host_side, read_db_links
from ..formats.host_links import HostLinks, HostSide, LinkScan, read_trace_links, read_trace_side
from ..frames import by_category, concat_frames
from ..rank_data import RankData
from .nesting import Nesting, innermost, module_paths

__all__ = ["FRAMEWORK_COLUMNS", "NO_LINKS", "UNLINKED", "HostLinks", "LinkScan", "Nesting",
           "attribute", "combine_framework", "conform_framework", "framework_of",
           "host_links_of", "innermost", "module_paths", "read_db_links", "read_host_side",
           "read_trace_links"]

TRACE = "trace_view.json"
BACKWARD = " (backward)"

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
    framework = by_category(host.ops["name"], lambda v: v.str.contains("::", regex=False)
                            ).to_numpy(bool)
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
    used = np.flatnonzero(np.bincount(linked["instance"].to_numpy(), minlength=len(fw)))
    inst = fw.iloc[used][["thread", "start_ns", "name", "input_shapes"]].copy()
    inst["module"] = _instance_modules(host, fw.iloc[used].reset_index(drop=True))
    inst["step"] = linked.groupby("instance")["step"].min().reindex(used).array
    inst = inst.assign(instance=used).sort_values(["step", "start_ns", "thread"],
                                                  kind="stable", na_position="last")
    unit = inst["step"].fillna(-1).to_numpy()
    inst["order"] = inst.groupby(unit).cumcount().to_numpy()
    inst["occurrence"] = inst.groupby([unit, _text_codes(inst["name"]),
                                       _text_codes(inst["input_shapes"])]).cumcount().to_numpy()
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
            frame[column] = _text_category(frame[column])
    frame = frame.astype(FRAMEWORK_COLUMNS)
    # sort_values(["rank", "step", "order", "kernel_type"], stable, steps missing last),
    # as one numpy lexsort of integer keys (the last key sorts first)
    step = frame["step"]
    order = np.lexsort((frame["kernel_type"].cat.codes.to_numpy(), frame["order"].to_numpy(),
                        step.fillna(0).to_numpy(np.int64), step.isna().to_numpy(),
                        frame["rank"].to_numpy()))
    return frame.take(order).reset_index(drop=True)


def _text_category(values: pd.Series) -> pd.Series:
    """``values.astype(str).astype("category")``, without the text copy when it is text.

    Categoricals of text keep their codes (unused categories dropped, the rest put in the
    sorted order sort_values follows); a column of text only is made categorical at once.
    """
    if values.isna().any():
        return values.astype(str).astype("category")
    if isinstance(values.dtype, pd.CategoricalDtype):
        if not all(c.__class__ is str for c in values.cat.categories):
            return values.astype(str).astype("category")
        used = values.cat.remove_unused_categories()
        categories = used.cat.categories
        return used if categories.is_monotonic_increasing else \
            used.cat.reorder_categories(sorted(categories))
    if pd.api.types.infer_dtype(values, skipna=False) == "string":
        return values.astype("category")
    return values.astype(str).astype("category")


def _text_codes(values: pd.Series) -> np.ndarray:
    """One integer per distinct text of ``values`` (``astype(str)`` equality, as codes)."""
    return pd.factorize(_text_category(values))[0]


# ---------------------------------------------------------------- per rank, per run

def _side(data: RankData, side: HostSide, note: str) -> tuple[RankData, str]:
    """``data`` with what one read of its host side found; its own tasks win.

    The AI Core frequency the trace records goes to ``info`` (provenance reads it there).
    """
    info = data.info if side.aicore_freq is None or "aicore_freq" in data.info \
        else {**data.info, "aicore_freq": side.aicore_freq}
    found = replace(data, links=side.links, host_spans=side.spans, info=info,
                    tasks=data.tasks if data.tasks is not None else side.tasks,
                    side_read=True, side_note="" if side.links is not None else note)
    return found, found.side_note


def read_host_side(data: RankData) -> tuple[RankData, str]:
    """One rank with its host side looked for, and why it has no links ("" when it has).

    The host side (host→device links, host op spans, and beside a kernel_details.csv the
    HCCL tasks of trace_view.json) is read once per rank: by the reader in its own pass
    (trace_json), else here (the db's PYTORCH_API, the trace beside kernel_details.csv),
    and the rank handed back carries it (``RankData.side_read``).
    """
    if data.side_read:
        return data, data.side_note
    if data.links is not None:  # links handed over by hand: nothing more to look for
        return replace(data, side_read=True), ""
    source = Path(data.source)
    if data.format in (sqlite_db.FORMAT, "ascend_ms_db"):
        db = sqlite_db.find_db(source)
        side = read_db_host_side(db) if db is not None else HostSide()
        return _side(data, side, f"{source.name}: no host→device links in the db "
                                 "(PYTORCH_API, CONNECTION_IDS)")
    if data.format == torch_text.FORMAT:
        trace = torch_text.output_dir(source) / TRACE
        if not trace.is_file():
            what = f"{TRACE} that is not a regular file" if present(trace) else f"no {TRACE}"
            return _side(data, HostSide(), f"{source.name}: {what} beside "
                                           "kernel_details.csv (host→device links live there)")
        return _side(data, read_trace_side(trace),
                     f"{source.name}: no torch_to_npu flow events in {TRACE}")
    if data.format == "trace_json":
        return _side(data, HostSide(), f"{source.name}: no host→device flow events in the "
                                       "trace")
    return _side(data, HostSide(), f"{source.name}: no host→device links in this profile "
                                   f"({data.format})")


def host_links_of(data) -> tuple[HostLinks | None, str]:
    """The host→device links of one rank (RankData): ``read_host_side`` of it, links only."""
    found, note = read_host_side(data)
    return found.links, note


def framework_of(data, ops: pd.DataFrame | None) -> tuple[pd.DataFrame | None, str]:
    """A rank's kernels per framework operator instance, or (None, why).

    ``ops`` are its canonical rows of the chosen steps; ``data`` is its RankData, whose
    reader may have found the links already. Runs in the worker that read the rank.
    """
    host, note = host_links_of(data)
    if host is not None and (ops is None or not len(ops)):
        host, note = None, f"{Path(data.source).name}: no kernel rows"
    if host is None:
        return None, note
    return attribute(ops, host), ""


def combine_framework(datas: list) -> tuple[pd.DataFrame | None, Note | None]:
    """Stack the ranks' frames with their rank ids; a note names the ranks without one.

    Without any frame the note (``NO_FRAMEWORK_LINKS``) says why, its ``data["source"]``
    naming the rank directory its sentence starts with.
    """
    frames = [d.framework.assign(rank=d.rank) for d in datas if d.framework is not None]
    missing = [d for d in datas if d.framework is None]
    if not frames:
        reason = missing[0].framework_note if missing else "no ranks"
        source = Path(missing[0].source).name if missing else None
        return None, Note(NO_FRAMEWORK_LINKS, f"{reason}: {NO_LINKS}", {"source": source})
    note = None
    if missing:
        ranks = ", ".join(str(d.rank) for d in missing[:8])
        note = Note("framework-coverage", f"rank(s) {ranks} have no host→device links "
                    f"({missing[0].framework_note}); the framework-operator comparison "
                    "covers the other ranks")
    return conform_framework(concat_frames(frames)), note
