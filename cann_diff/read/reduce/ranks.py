"""Reduce where ranks are read: raw rows → canonical rows of the chosen steps → RunSummary.

A large rank is reduced on its own. Small ranks — a cluster of thousands, each a few
hundred kernels — are stacked and reduced in one pass (``reduce_ranks``): canonical
names, validation, step spans and summaries are computed once over the stack with the
rank's position as the rank key, and each rank keeps its share of the stack's summary
(``reduce.StackShare``). On a rank of 164 kernels, pandas' per-call overhead was most of
a reduce that cost ~13 ms. A rank's share is what reducing it alone gives, row for row
and in order (``summary_of``); only its categoricals' category lists are the stack's
(every value any rank of the stack had, in the stack's order), not the rank's own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ...errors import CannDiffError
from ...schema import OP_COLUMNS, RunSummary, conform_ops, validate
from ...vocab import Vocabulary, default_vocabulary
from ...vocab.memo import normalize_distinct
from ...vocab.names import canonicalize
from ...vocab.shapes import normalize_dtypes, normalize_shapes
from ..formats.host_links import Algorithms
from ..formats.kernel_attributes import RAW_FIELDS
from ..frames import concat_frames, concat_ranks, cut_rows
from ..rank_data import RankData
from .attributes import renumbered as renumbered_rows
from .device_memory import RankMemory
from .framework import framework_of, read_host_side
from .non_compute import NOTHING, NonCompute, non_compute
from .summary import Stack, StackShare, sort_codes, summarize
from .timeline import reconcile_stacked, reconcile_steps, step_breakdown_from_kernels

StepRanges = list[tuple[int | None, int | None]]

# A rank of at most this many kernels is stacked with others: above it the per-call
# overhead no longer counts, and stacking would only hold more rows at once.
STACK_RANK_ROWS = 20_000
# Rows stacked per pass, bounding what one pass holds.
STACK_ROWS = 1_000_000


@dataclass(frozen=True)
class RankPlan:
    """What every rank's worker is told besides its source (picklable, for Dask).

    ``max_samples`` bounds the durations a rank keeps (``samples_per_rank``); ``keep_rows``
    keeps the canonical rows and raw memory samples beside the summaries; ``steps`` selects
    kernels, steps, communication and memory samples alike; ``vocab`` names the kernels.
    """

    vocab: Vocabulary = field(default_factory=default_vocabulary)
    max_samples: int | None = None
    keep_rows: bool = True
    steps: StepRanges | None = None


def in_ranges(steps: pd.Series, ranges: StepRanges) -> np.ndarray:
    """Which values of ``steps`` lie in one of ``ranges`` (inclusive, None = open end)."""
    values = steps.astype("float64").to_numpy()
    keep = np.zeros(len(values), dtype=bool)
    for low, high in ranges:
        keep |= (values >= (low if low is not None else -np.inf)) & \
                (values <= (high if high is not None else np.inf))
    return keep


def normalize_ops(ops: pd.DataFrame, vocab: Vocabulary,
                  rank: int | np.ndarray = 0) -> pd.DataFrame:
    """Raw rows → canonical rows; ``rank`` is 0 (the id comes later) or each row's slot.

    The raw attribute and pipe columns a reader added (``kernel_attributes.RAW_FIELDS``)
    follow the canonical ones, as read: the summary reduces them (``summary.py``).
    """
    ops["rank"] = rank
    ops["input_shapes"] = normalize_distinct(ops["input_shapes"], normalize_shapes)
    ops["input_dtypes"] = normalize_distinct(ops["input_dtypes"], normalize_dtypes)
    named = canonicalize(ops, vocab)
    canonical = conform_ops(named)
    extra = [field for field in RAW_FIELDS if field in named]
    if extra:  # set at once: a column at a time cost ~0.05 ms each on a small rank
        canonical = pd.concat([canonical, named[extra].set_axis(canonical.index)], axis=1)
    return canonical


def _drop_rows_outside_steps(ops: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """The rows inside a step (all of them when none is), and how many were left out."""
    outside = ops["step"].isna()
    if outside.any() and not outside.all():
        return ops[~outside.to_numpy()].reset_index(drop=True), int(outside.sum())
    return ops, 0


def _step_ids(frames: list[pd.DataFrame | None]) -> tuple[int, ...]:
    return tuple(sorted({int(s) for f in frames if f is not None and len(f)
                         for s in f["step"].dropna().unique()}))


def _chosen(frame: pd.DataFrame | None, ranges: StepRanges) -> pd.DataFrame | None:
    if frame is None or not len(frame):
        return frame
    return frame[in_ranges(frame["step"], ranges)].reset_index(drop=True)


def _spans(slot: np.ndarray, steps: np.ndarray, start: np.ndarray, end: np.ndarray
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per (slot, step), in that order: slot, step, first start and last end (ns).

    Grouped in numpy (sorted keys, then ``reduceat``): on one rank's few hundred rows a
    pandas groupby-agg cost a millisecond and a half.
    """
    if not len(steps):
        return slot, steps, start, end
    order = np.lexsort((steps, slot))
    slot, steps = slot[order], steps[order]
    first = np.flatnonzero(np.r_[True, (steps[1:] != steps[:-1]) | (slot[1:] != slot[:-1])])
    return (slot[first], steps[first], np.minimum.reduceat(start[order], first),
            np.maximum.reduceat(end[order], first))


def _span_inputs(ops: pd.DataFrame, slot: np.ndarray
                 ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The stepped rows' slot, step, start and end (ns)."""
    stepped = ops["step"].notna().to_numpy()
    steps = ops["step"].to_numpy(np.int64, na_value=0)[stepped]
    start = ops["start_ns"].to_numpy(np.int64)[stepped]
    end = start + np.rint(ops["dur_us"].to_numpy()[stepped] * 1000).astype(np.int64)
    return slot[stepped], steps, start, end


def _span_frame(steps: np.ndarray, start: np.ndarray, end: np.ndarray) -> pd.DataFrame:
    return pd.DataFrame({"step": steps, "start_us": start / 1000.0, "end_us": end / 1000.0})


def step_spans(ops: pd.DataFrame) -> pd.DataFrame:
    """Each step's span by its kernels: ``step``, ``start_us`` (first start), ``end_us``."""
    _, steps, start, end = _spans(*_span_inputs(ops, np.zeros(len(ops), dtype=np.int64)))
    return _span_frame(steps, start, end)


@dataclass(frozen=True)
class RankResult:
    """One rank as the worker that read it hands it back: reduced, and built once.

    ``steps`` are the profiler's step figures of the chosen steps (None: not recorded);
    ``ops``/``comm`` the canonical and communication rows, None unless ``keep_rows``.
    ``summary`` is the rank's RunSummary, or None when it was reduced in a stack: then
    ``share`` is its part of the stack's. ``kernel_steps``: the breakdown from kernel
    intervals when the profiler gave none; ``outside_steps``: kernels left out for lying
    outside every profiler step; ``has_comm``: communication detail was read;
    ``step_ids``: the step ids it had before a step selection (only with one);
    ``has_kernels``: kernel rows were read; ``step_spans``: step, start_us, end_us by its
    kernels; ``framework``: its kernels per framework operator instance, None with
    ``framework_note`` saying why. ``memory`` (None for a cluster summary), ``facts``
    (provenance) and ``nothing`` (a kernel-less rank that held nothing usable either)
    come from the same worker, after the reduce. ``dtype_us``: µs of its compute kernels
    (chosen steps) per dtype of their first input, ``""`` where none is recorded
    (``dtype_time``). ``info`` holds the reader's, plus the ``hccl_algorithms`` the
    framework pass found in a trace_view.json beside kernel_details.csv.
    ``collectives``, ``collective_links`` (schema COLLECTIVE_COLUMNS,
    COLLECTIVE_LINK_COLUMNS), ``host_steps`` (HOST_STEP_COLUMNS) and ``step_lanes``
    (STEP_LANE_COLUMNS) are its non-compute frames of the chosen steps (rank 0 until the
    id is assigned; reduce/non_compute.py), None when it has no HCCL task-level data or no
    host side; ``collectives_source`` says where its tasks came from.
    """

    source: Path
    format: str
    rank: int | None
    info: Mapping[str, Any]
    warnings: tuple[str, ...]
    steps: pd.DataFrame | None
    ops: pd.DataFrame | None
    comm: pd.DataFrame | None
    summary: RunSummary | None = None
    share: StackShare | None = None
    kernel_steps: pd.DataFrame | None = None
    outside_steps: int = 0
    has_comm: bool = False
    step_ids: tuple[int, ...] = ()
    has_kernels: bool = True
    step_spans: pd.DataFrame | None = None
    framework: pd.DataFrame | None = None
    framework_note: str = ""
    memory: RankMemory | None = None
    facts: Any = None
    nothing: bool = False
    dtype_us: Mapping[str, float] = field(default_factory=dict)
    collectives: pd.DataFrame | None = None
    collective_links: pd.DataFrame | None = None
    collectives_source: str = ""
    host_launch_source: str = ""
    host_steps: pd.DataFrame | None = None
    step_lanes: pd.DataFrame | None = None
    # Per step field, the largest |profiler − kernels| (µs) where the kernels' figures
    # replaced the profiler's (timeline.reconcile_steps); empty when none differed.
    step_differ: Mapping[str, float] = field(default_factory=dict)


def _kept(frame: pd.DataFrame | None, plan: RankPlan) -> pd.DataFrame | None:
    return frame if plan.keep_rows else None


def dtype_time(ops: pd.DataFrame, slot: np.ndarray, count: int) -> list[dict[str, float]]:
    """Per slot 0 … count-1, µs of compute kernels by the dtype of their first input.

    ``FLOAT16;FLOAT16`` counts as ``FLOAT16``; ``""`` is no dtype recorded. The first
    dtype is derived per category of ``input_dtypes``, the sums by one ``bincount``.
    """
    dtypes = ops["input_dtypes"].astype("category")
    firsts = dtypes.cat.categories.astype(str).str.split(";").str[0].str.strip()
    group, names = pd.factorize(pd.Index([*firsts, ""]))
    codes = dtypes.cat.codes.to_numpy()
    row_group = group[np.where(codes >= 0, codes, len(firsts))]  # -1 (missing) picks ""
    compute = (ops["category"] == "compute").to_numpy()
    sums = np.bincount(slot[compute] * len(names) + row_group[compute],
                       weights=ops["dur_us"].to_numpy()[compute],
                       minlength=count * len(names)).reshape(count, len(names))
    return [{str(names[j]): float(us[j]) for j in np.flatnonzero(us > 0)} for us in sums]


def _framework(data: RankData, ops: pd.DataFrame
               ) -> tuple[pd.DataFrame | None, str, Algorithms | None, RankData]:
    """``framework_of`` with the host side read once; the algorithms and the rank it found.

    The rank comes back with its host side (links, host spans, HCCL tasks) for the
    non-compute frames. Beside a kernel_details.csv that pass is the one read of
    trace_view.json; a trace without launch flows gives no host→device links, and so no
    algorithms either.
    """
    data, note = read_host_side(data)
    if data.links is None:
        return None, note, None, data
    framework, note = framework_of(data, ops)
    return framework, note, data.links.algorithms, data


def _with_side(side: NonCompute) -> dict[str, Any]:
    """A RankResult's non-compute fields."""
    return {"collectives": side.collectives, "collective_links": side.collective_links,
            "collectives_source": side.collectives_source, "host_steps": side.host_steps,
            "host_launch_source": side.host_launch_source,
            "step_lanes": side.step_lanes}


def _info(data: RankData, algorithms: Algorithms | None) -> Mapping[str, Any]:
    """The reader's info, with the framework pass's algorithms where the reader found none."""
    if algorithms is None or not algorithms[1] or "hccl_algorithms" in data.info:
        return data.info
    return {**data.info, "hccl_algorithms": algorithms}


def reduce_kernels(data: RankData, plan: RankPlan) -> RankResult:
    """Canonical rows of the chosen steps, then a RunSummary (rows dropped unless kept)."""
    has_kernels = len(data.ops) > 0
    outside, spans = 0, None
    if has_kernels:
        ops = normalize_ops(data.ops, plan.vocab)
        validate(ops)
        ops, outside = _drop_rows_outside_steps(ops)
        spans = step_spans(ops)
    else:  # a cluster summary or a kernel-less rank: nothing to derive
        ops = pd.DataFrame({c: pd.Series(dtype=t) for c, t in OP_COLUMNS.items()})
    steps, comm = data.steps, data.comm
    step_ids: tuple[int, ...] = ()
    if plan.steps:
        step_ids = _step_ids([ops, steps])
        if step_ids:  # a rank without step ids is kept whole
            ops = ops[in_ranges(ops["step"], plan.steps)].reset_index(drop=True)
            steps, comm = _chosen(steps, plan.steps), _chosen(comm, plan.steps)
    framework, note, algorithms, data = _framework(data, ops)
    ledger = step_breakdown_from_kernels(ops) if len(ops) else None
    steps, differ = reconcile_steps(steps, ledger)
    return RankResult(
        data.source, data.format, data.rank, _info(data, algorithms), data.all_warnings(), steps,
        _kept(ops, plan), _kept(comm, plan), summary=summarize(ops, comm, plan.max_samples,
                                                           vocab=plan.vocab),
        kernel_steps=ledger if steps is None else None, step_differ=differ,
        outside_steps=outside, has_comm=comm is not None, step_ids=step_ids,
        has_kernels=has_kernels, step_spans=spans, framework=framework, framework_note=note,
        dtype_us=dtype_time(ops, np.zeros(len(ops), dtype=np.int64), 1)[0],
        **_with_side(non_compute(data, ops)))


def _stackable(data: RankData, plan: RankPlan) -> tuple[bool, RankData, str]:
    """A small rank with its own step figures and no host links: reduced in a stack.

    The links are looked for here (and handed on for its own reduce when found), since a
    rank's framework table needs its own rows. Returns whether to stack, the rank, and
    why it has no framework table.
    """
    rows = len(data.ops)
    if not 0 < rows <= min(STACK_RANK_ROWS, plan.max_samples or STACK_RANK_ROWS) or \
            data.steps is None or data.links is not None:
        return False, data, ""
    data, note = read_host_side(data)
    if data.links is not None:
        return False, data, ""
    return True, data, note


def reduce_ranks(datas: Iterable[RankData], plan: RankPlan) -> list[RankResult]:
    """``reduce_kernels`` of every rank, the small ones stacked; results in input order.

    ``datas`` may be read as it is consumed: a large rank is reduced (and its rows
    dropped) before the next is read.
    """
    results: dict[int, RankResult] = {}
    stack: list[tuple[int, RankData, str]] = []
    rows = 0
    for number, data in enumerate(datas):
        stackable, data, note = _stackable(data, plan)
        if stackable:
            stack.append((number, data, note))
            rows += len(data.ops)
            if rows >= STACK_ROWS:
                results.update(_reduce_stack(stack, plan))
                stack, rows = [], 0
        else:
            results[number] = reduce_kernels(data, plan)
    if stack:
        results.update(_reduce_stack(stack, plan))
    return [results[number] for number in sorted(results)]


def _bounds(keys: np.ndarray, count: int) -> np.ndarray:
    """Where each slot 0 … count-1 starts in sorted ``keys``, and the end: count + 1 offsets."""
    return np.searchsorted(keys, np.arange(count + 1), side="left")


def _reduce_stack(stack: list[tuple[int, RankData, str]], plan: RankPlan
                  ) -> dict[int, RankResult]:
    """Reduce small ranks as one stack, then give each rank its share.

    ``stack`` holds (position, rank, why it has no framework table). No rank's rows are
    touched before the stack's canonical rows pass the schema: when they fail, every rank
    is reduced alone, so the error is the one the failing rank raises by itself.
    """
    datas = [data for _, data, _ in stack]
    lengths = np.array([len(d.ops) for d in datas])
    slot = np.repeat(np.arange(len(datas), dtype=np.int64), lengths)
    try:
        ops = normalize_ops(concat_frames(d.ops for d in datas), plan.vocab, slot)
        validate(ops)
    except CannDiffError:
        return {number: reduce_kernels(data, plan) for number, data, _ in stack}
    first_rows = _first_rows(ops, slot)
    outside = ops["step"].isna().to_numpy()
    dropped = np.zeros(len(datas), dtype=np.int64)
    if outside.any():  # a rank whose kernels all lie outside every step keeps them all
        dropped = np.bincount(slot[outside], minlength=len(datas))
        dropped = np.where(dropped < lengths, dropped, 0)
        keep = ~(outside & (dropped > 0)[slot])
        ops, slot = ops[keep].reset_index(drop=True), slot[keep]
    span_slot, span_step, span_start, span_end = _spans(*_span_inputs(ops, slot))
    chosen = [_Chosen(d.steps, d.comm, ()) for d in datas]
    if plan.steps:
        ops, slot, chosen = _keep_stacked_steps(datas, ops, slot, span_slot, span_step,
                                                plan.steps)
    comm = concat_ranks([c.comm for c in chosen], range(len(datas)))
    summary = _in_rank_order(summarize(ops, comm if len(comm.columns) else None,
                                       vocab=plan.vocab), first_rows)
    spans = _bounds(span_slot, len(datas))
    # One frame for the stack, cut per rank: a small frame built per rank cost ~0.2 ms.
    every_span = _span_frame(span_step, span_start, span_end)
    step_spans = cut_rows(every_span, spans)
    dtype_us = dtype_time(ops, slot, len(datas))
    sides = _stacked_sides(datas, ops, slot)
    ledger = step_breakdown_from_kernels(ops.assign(rank=slot)) if len(ops) else None
    steps = reconcile_stacked([c.steps for c in chosen], ledger)
    shares = _share_out(datas, plan, ops, slot, summary)
    return {number: RankResult(
        data.source, data.format, data.rank, data.info, data.all_warnings(), steps[n][0],
        _kept(rows, plan), _kept(chosen[n].comm, plan), share=share, step_differ=steps[n][1],
        outside_steps=int(dropped[n]), has_comm=chosen[n].comm is not None,
        step_ids=chosen[n].step_ids, step_spans=step_spans[n], framework_note=note,
        dtype_us=dtype_us[n], **_with_side(sides[n]))
        for n, ((number, data, note), (share, rows)) in enumerate(zip(stack, shares))}


def _stacked_sides(datas: list[RankData], ops: pd.DataFrame, slot: np.ndarray
                   ) -> list[NonCompute]:
    """Each stacked rank's non-compute frames, from its own rows of the stack.

    Most small ranks have neither HCCL tasks nor a host side: only those that do, and the
    stack's first rank (for its step lanes), are reduced, one at a time, on their slice of
    the stack (in slot order).
    """
    bounds = _bounds(slot, len(datas))
    # The first rank of a stack draws its step from its rows alone: the report pictures the
    # lowest rank both runs hold, and lanes for every small rank would cost per rank.
    return [non_compute(data, ops.iloc[bounds[n]:bounds[n + 1]].reset_index(drop=True))
            if data.tasks is not None or data.host_spans is not None or n == 0 else NOTHING
            for n, data in enumerate(datas)]


@dataclass(frozen=True)
class _Chosen:
    """A stacked rank's step figures and communication of the chosen steps."""

    steps: pd.DataFrame | None
    comm: pd.DataFrame | None
    step_ids: tuple[int, ...]


# The summary key's columns whose categories come in the order each value first appears
# in a rank's rows (``canonicalize``, ``normalize_distinct``): a stack's categories follow
# the stack, so its summary rows would sort in another order than each rank's alone.
FIRST_SEEN_COLUMNS = ("op_type", "input_shapes", "family", "category", "comm_type")


@dataclass(frozen=True)
class FirstRows:
    """Per column, the (slot, code) pairs of a stack (sorted) and the row each first holds."""

    pairs: dict[str, np.ndarray]
    rows: dict[str, np.ndarray]
    width: dict[str, int]


def _pair(slot: np.ndarray, codes: np.ndarray, width: int) -> np.ndarray:
    return slot.astype(np.int64) * width + codes.astype(np.int64) + 1  # code -1 (missing) → 0


def _first_rows(ops: pd.DataFrame, slot: np.ndarray) -> FirstRows:
    pairs, rows, width = {}, {}, {}
    for column in FIRST_SEEN_COLUMNS:
        width[column] = len(ops[column].cat.categories) + 1
        pairs[column], rows[column] = np.unique(
            _pair(slot, ops[column].cat.codes.to_numpy(), width[column]), return_index=True)
    return FirstRows(pairs, rows, width)


def _in_rank_order(summary: RunSummary, first: FirstRows) -> RunSummary:
    """The stack's summary rows in the order each rank's own summary has them.

    Alone, a rank's rows sort by step, then by each key's category order (first seen in
    that rank), a missing value last, then by direction; here each category is placed by
    the row that first holds it in its rank. The samples, attributes and pipes follow
    their rows.
    """
    table = summary.ops
    if table.empty:  # no rows left (the chosen steps hold none): nothing to order
        return summary
    slot = table["rank"].to_numpy(np.int64)
    keys = [sort_codes(table["direction"])[0]]
    for column in reversed(FIRST_SEEN_COLUMNS):
        codes = table[column].cat.codes.to_numpy()
        at = np.searchsorted(first.pairs[column], _pair(slot, codes, first.width[column]))
        keys.append(np.where(codes >= 0, first.rows[column][at], np.iinfo(np.int64).max))
    keys += [sort_codes(table["step"])[0], slot]
    order = np.lexsort(keys)
    renumbered = np.empty(len(order), dtype=np.int64)
    renumbered[order] = np.arange(len(order))
    samples = summary.samples.assign(row=renumbered[summary.samples["row"].to_numpy()])
    return replace(summary, ops=table.iloc[order].reset_index(drop=True), samples=samples,
                   attributes=renumbered_rows(summary.attributes, renumbered),
                   pipes=renumbered_rows(summary.pipes, renumbered))


def _keep_stacked_steps(datas: list[RankData], ops: pd.DataFrame, slot: np.ndarray,
                        span_slot: np.ndarray, span_step: np.ndarray, ranges: StepRanges
                        ) -> tuple[pd.DataFrame, np.ndarray, list[_Chosen]]:
    """The chosen steps' rows of every stacked rank; a rank without step ids is kept whole."""
    has_ids = np.zeros(len(datas), dtype=bool)
    bounds = _bounds(span_slot, len(datas))
    chosen = []
    for number, data in enumerate(datas):
        kernel_ids = span_step[bounds[number]:bounds[number + 1]]
        step_ids = tuple(sorted({int(s) for s in kernel_ids} | set(_step_ids([data.steps]))))
        has_ids[number] = bool(step_ids)
        chosen.append(_Chosen(_chosen(data.steps, ranges), _chosen(data.comm, ranges),
                              step_ids) if step_ids else _Chosen(data.steps, data.comm, ()))
    keep = in_ranges(ops["step"], ranges) | ~has_ids[slot]
    return ops[keep].reset_index(drop=True), slot[keep], chosen


def _share_out(datas: list[RankData], plan: RankPlan, ops: pd.DataFrame, slot: np.ndarray,
               summary: RunSummary) -> list[tuple[StackShare, pd.DataFrame | None]]:
    """Each rank's share of the stack's summary (keyed by slot first), and its rows."""
    table = summary.ops
    # Samples come in kernel order, so their slots ascend though their rows do not.
    sample_slots = table["rank"].to_numpy()[summary.samples["row"].to_numpy()]
    stack = Stack(summary, _bounds(table["rank"].to_numpy(), len(datas)),
                  _bounds(sample_slots, len(datas)),
                  _bounds(summary.comm["rank"].to_numpy(), len(datas)),
                  np.array([d.rank if d.rank is not None else 0 for d in datas], dtype=np.int64))
    rows: list[pd.DataFrame | None] = [None] * len(datas)
    if plan.keep_rows:
        ops["rank"] = 0  # the real id is known once every rank is read (_assign_ranks)
        rows = list(cut_rows(ops, _bounds(slot, len(datas))))
    return [(StackShare(stack, number), rows[number]) for number in range(len(datas))]


def summary_of(data: RankResult) -> RunSummary | None:
    """A rank's own summary, cut from its stack when it was reduced in one."""
    return data.share.summary() if data.share is not None else data.summary
