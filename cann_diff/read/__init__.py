"""Read stage: ``load_run(path, label)`` detects the layout and returns a canonical Run.

The Run is the only door out of this package. Three jobs live in it, one folder or module
each: ``formats/`` reads files (one module per layout, ``find_rank_sources`` decides the
layout and lists the ranks: a directory that is not itself a rank result is searched one
level down; beside the kernel ranks, rank directories that hold no kernels but a step
breakdown, communication or memory are ranks too); ``reduce/`` turns each rank's rows
into summaries where it was read (small ranks a worker reads are reduced as one stack);
``execute.py`` decides where that runs (this process, threads, worker processes or a
Dask cluster). Each rank is read once, kernels and memory alike. This module assigns
rank ids and assembles the Run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from itertools import groupby
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError
from ..schema import (
    STEP_COLUMNS,
    MemoryData,
    Note,
    Run,
    RunMeta,
    RunSummary,
    conform_ops,
    empty_comm,
)
from ..settings import DEFAULT_LIMITS, Limits
from ..vocab import Vocabulary
from .execute import InOrder, plan_ranks, start
from .formats import (
    FORMATS,
    KERNEL_LESS,
    Format,
    RankSource,
    cluster_output,
    find_rank_sources,
    kernelless,
    torch_text,
    unread_children,
)
from .formats.provenance import rank_facts, read_provenance
from .frames import concat_frames, concat_ranks
from .maps import load_vocabulary
from .reduce.device_memory import (
    MEMORY_NOTE,
    memory_data,
    read_rank_memory,
    select_memory,
    step_intervals,
)
from .reduce.framework import combine_framework
from .reduce.ranks import RankPlan, RankResult, StepRanges, in_ranges, reduce_ranks
from .reduce.summary import StackShare, combine, samples_per_rank, select

__all__ = ["FORMATS", "KERNEL_LESS", "Format", "RankPlan", "RankSource", "StepRanges",
           "default_label", "find_rank_sources", "load_run", "read_all", "read_and_reduce",
           "start_all", "start_run",
           "read_and_reduce_many", "read_memory", "select_steps", "missing_steps",
           "STEPS_MISSING"]


def _rank_of(data: RankResult) -> int:
    """A rank's id, once ``_assign_ranks`` has given every rank one."""
    if data.rank is None:
        raise ValueError(f"{data.source}: no rank id assigned")
    return data.rank


def _assign_ranks(datas: list[RankResult]) -> tuple[list[RankResult], list[Note]]:
    """Give every rank an id; for duplicates keep the newest result (by directory name).

    Kernels, steps, communication and memory travel together in one RankResult, so the
    rank a duplicate loses is lost for all of them alike.
    """
    warnings: list[Note] = []
    used = {d.rank for d in datas if d.rank is not None}
    free = (n for n in range(len(datas) + len(used) + 1) if n not in used)
    # ranks that do not say get ids no other rank uses
    datas = [data if data.rank is not None else replace(data, rank=next(free))
             for data in datas]
    by_rank: dict[int, RankResult] = {}
    for data in sorted(datas, key=lambda d: d.source.name):
        rank = _rank_of(data)
        if rank in by_rank:
            warnings.append(Note("duplicate-rank", f"rank {rank}: several results; using "
                                 f"{data.source.name}, ignoring {by_rank[rank].source.name}"))
        by_rank[rank] = data
    return [by_rank[r] for r in sorted(by_rank)], warnings


def _memory_intervals(data: RankResult, steps: StepRanges | None) -> np.ndarray | None:
    """The µs intervals of the chosen steps on this rank; None keeps all of its memory."""
    if not steps or data.step_spans is None or data.step_spans.empty:
        return None
    return step_intervals(data.step_spans, in_ranges(data.step_spans["step"], steps))


def read_and_reduce(plan: RankPlan, source: RankSource) -> RankResult | list[RankResult]:
    """One rank's read-and-reduce: ``read_and_reduce_many`` of that one source."""
    return read_and_reduce_many(plan, [source])[0]


def read_and_reduce_many(plan: RankPlan, sources: list[RankSource],
                         progress: Callable[[int, int], None] | None = None
                         ) -> list[RankResult | list[RankResult]]:
    """The read-and-reduce of several sources in one worker (a process, a Dask worker).

    Each raw table (text, PMU columns unread) becomes canonical rows of the chosen
    steps, then a RunSummary (``rank_reduce``: a large rank as soon as it is read, small
    ones stacked); each rank's memory files are read and reduced to a MemorySummary,
    their timed samples limited to the chosen steps' spans (see ``read/memory.py``).
    Only the summaries leave the worker unless ``plan.keep_rows``. A cluster summary
    (several ranks in one source) holds no memory. ``progress(done, total)`` follows
    the sources as they are read.
    """
    counts: list[int | None] = []  # per source: None for one rank, else its ranks

    def each_read():
        # Each source's read, in order: a run of one format's sources is read together
        # when the format offers it (``Format.read_ranks``: small ranks as stacks).
        for _, grouped in groupby(sources, key=lambda source: source.format.name):
            run = list(grouped)
            fmt = run[0].format
            if fmt.read_ranks is not None and len(run) > 1:
                yield from fmt.read_ranks([source.path for source in run])
            else:
                yield from (source.format.read_rank(source.path) for source in run)

    def read():
        for number, result in enumerate(each_read(), 1):
            counts.append(len(result) if isinstance(result, list) else None)
            yield from result if isinstance(result, list) else [result]
            if progress is not None and number < len(sources):  # the last once all is done
                progress(number, len(sources))

    reduced = reduce_ranks(read(), plan)
    results: list[RankResult | list[RankResult]] = []
    at = 0
    for source, count in zip(sources, counts):
        if count is None:
            results.append(_with_memory_and_facts(plan, source, reduced[at]))
            at += 1
        else:
            results.append(reduced[at:at + count])
            at += count
    if progress is not None:
        progress(len(sources), len(sources))
    return results


NO_KERNEL_TIMES = ("no kernel times to place its memory samples in steps: they cover the "
                   "whole profile, not only the chosen steps")


def _with_memory_and_facts(plan: RankPlan, source: RankSource,
                           result: RankResult) -> RankResult:
    """The rank with its provenance facts and memory, read where the rank was read."""
    facts = rank_facts(source.path, source.format.name, result.info)
    info = {k: v for k, v in result.info.items() if k != "profiler_info"}  # parsed once
    intervals = _memory_intervals(result, plan.steps)
    memory = read_rank_memory(source.path, plan.keep_rows, intervals)
    if plan.steps and intervals is None and memory.recorded:
        memory = replace(memory, notes=[*memory.notes, Note(MEMORY_NOTE, NO_KERNEL_TIMES)])
    nothing = False
    # Compared by name: on Dask the source's Format is a copy.
    if source.format.name == KERNEL_LESS.name and not memory.recorded:
        # The run's "ranks without kernels" warning says what such a rank holds; a note per
        # missing memory file would only repeat that it holds no memory.
        memory = replace(memory, notes=[])
        nothing = result.steps is None and not result.has_comm
    return replace(result, info=info, facts=facts, memory=memory, nothing=nothing)


def _steps_of(data: RankResult) -> pd.DataFrame | None:
    """The rank's step figures: the profiler's, else those derived from its kernels."""
    return data.steps if data.steps is not None else data.kernel_steps


def _step_breakdown(datas: list[RankResult], warnings: list[Note]) -> tuple[pd.DataFrame, str]:
    """The profiler's step figures where a rank has them, else the kernel-derived ones.

    A rank with neither (memory alone) has no step figures and counts for neither.
    """
    derived = [_rank_of(d) for d in datas if d.steps is None and d.has_kernels]
    stepped = [d for d in datas if d.steps is not None or d.has_kernels]
    steps = concat_ranks([_steps_of(d) for d in datas], [d.rank for d in datas])
    steps = steps[list(STEP_COLUMNS)] if len(steps.columns) else steps
    if not len(steps.columns):
        steps = pd.DataFrame({c: pd.Series(dtype="float64") for c in STEP_COLUMNS})
    differ = _ledger_note(datas)
    if differ is not None:
        warnings.append(differ)
    if not derived:
        return steps, "step_trace_time"
    if len(derived) == len(stepped):
        warnings.append(Note("steps-from-kernels", "no step_trace_time.csv: step breakdown "
                             "recomputed from kernel intervals (computing = union of "
                             "non-communication kernels)"))
        return steps, "kernels"
    warnings.append(Note("steps-from-kernels", f"no step_trace_time.csv for rank(s) "
                         f"{_rank_list(derived)}: their step breakdown is recomputed "
                         "from kernel intervals"))
    return steps, "mixed"


# Differences under the display precision (10 µs) are the profiler's rounding, not news.
LEDGER_NOTE_US = 10.0
LEDGER_WORDS = {"computing": "Computing", "communication": "Communication",
                "communication_not_overlapped": "exposed communication",
                "overlapped": "Overlapped", "free": "Free", "stage": "Stage",
                "bubble": "Bubble"}


def _ledger_note(datas: list[RankResult]) -> Note | None:
    """The ``steps-ledger`` note: the profiler's figures differ from the kernels'.

    Said once for the run, with the largest difference of each field over its ranks.
    """
    largest: dict[str, float] = {}
    for data in datas:
        for name, gap in data.step_differ.items():
            largest[name] = max(largest.get(name, 0.0), gap)
    shown = {k: v for k, v in largest.items() if v >= LEDGER_NOTE_US}
    if not shown:
        return None
    parts = ", ".join(f"{LEDGER_WORDS.get(k, k)} by up to {v / 1000:.2f} ms"
                      for k, v in sorted(shown.items(), key=lambda kv: -kv[1]))
    return Note("steps-ledger", "the profiler's own step breakdown (step_trace_time.csv / "
                f"analysis.db) differs from the kernel rows' ({parts}): the step figures "
                "here are the kernels', so that each collective's exposed time and Free's "
                "parts add up to them (some exports count a collective's HCCL task time "
                "rather than its span)", {"differ_us": shown})


def _rank_list(ranks: list[int], limit: int = 12) -> str:
    shown = ", ".join(str(r) for r in ranks[:limit])
    return shown + (f" … ({len(ranks)} ranks)" if len(ranks) > limit else "")


# The Note on a run that lacks some of the steps ``--steps`` asked for.
STEPS_MISSING = "steps-missing"


def _steps_text(spans: list[tuple[int | None, int | None]]) -> str:
    """``[(1, 3), (5, 5), (9, None)]`` → ``1-3, 5, 9-``."""
    return ", ".join(f"{low}" if low == high else f"{'' if low is None else low}-"
                     f"{'' if high is None else high}" for low, high in spans)


def _runs_of(steps: list[int]) -> list[tuple[int | None, int | None]]:
    """Sorted distinct step ids as (first, last) runs of consecutive ids."""
    runs: list[tuple[int | None, int | None]] = []
    for step in steps:
        if runs and runs[-1][1] == step - 1:
            runs[-1] = (runs[-1][0], step)
        else:
            runs.append((step, step))
    return runs


def missing_steps(ranges: StepRanges, available: list[int]) -> Note | None:
    """A note naming the steps of ``ranges`` this profile lacks; None when it has them all.

    A closed range (``5-7``, ``9``) asks for each of its steps; an open one (``3-``) for any
    step past its bound, so it lacks only when it holds none. ``available``: the profile's
    step ids before the selection, sorted. e.g. ``--steps: step 9 is not in this profile
    (it has steps 1-8)``.
    """
    lacking: list[tuple[int | None, int | None]] = []
    for low, high in ranges:
        inside = [s for s in available if (low is None or s >= low)
                  and (high is None or s <= high)]
        if low is None or high is None:
            if not inside:
                lacking.append((low, high))
            continue
        bounds = [low - 1, *inside, high + 1]  # the gaps between the steps it has
        lacking += [(a + 1, b - 1) for a, b in zip(bounds, bounds[1:]) if b - a > 1]
    if not lacking:
        return None
    several = len(lacking) > 1 or lacking[0][0] != lacking[0][1]
    return Note(STEPS_MISSING, f"--steps: {'steps' if several else 'step'} "
                               f"{_steps_text(lacking)} {'are' if several else 'is'} not in "
                               f"this profile (it has steps {_steps_text(_runs_of(available))})")


def select_steps(run: Run, ranges: StepRanges | None) -> Run:
    """Keep only steps inside ``ranges`` (inclusive, None = open end).

    A run without step ids is kept whole. Memory is selected by the steps' kernel spans
    when its raw samples were kept (else it stays whole, with a warning). Raises
    InputError when no step is left.
    """
    summary = run.summary
    if not ranges or summary.ops["step"].isna().all():
        return run
    keep = in_ranges(summary.ops["step"], ranges)
    available = sorted(int(s) for s in summary.ops["step"].dropna().unique())
    if not keep.any():
        raise InputError(run.meta.path, f"--steps selects no step of this profile "
                                        f"(it has steps {available})")
    lacking = missing_steps(ranges, available)

    def chosen(frame: pd.DataFrame | None) -> pd.DataFrame | None:
        if frame is None or frame.empty:
            return frame
        return frame[in_ranges(frame["step"], ranges)].reset_index(drop=True)

    summary = select(summary, keep, in_ranges(summary.comm["step"], ranges))
    memory = run.memory
    if memory is not None and len(memory.step_spans):
        memory = select_memory(memory, in_ranges(memory.step_spans["step"], ranges))
    lanes = {rank: frame for rank, frame in run.step_lanes.items()
             if len(frame) and in_ranges(frame["step"].iloc[:1], ranges).all()}
    warnings = run.warnings if lacking is None else (*run.warnings, lacking)
    return replace(run, ops=chosen(run.ops), steps=chosen(run.steps), comm=chosen(run.comm),
                   summary=summary, memory=memory, framework=chosen(run.framework),
                   warnings=warnings,
                   collectives=chosen(run.collectives),
                   collective_links=chosen(run.collective_links),
                   host_steps=chosen(run.host_steps), step_lanes=lanes)


Reader = Callable[..., list[RankResult | list[RankResult]]]


def read_all(reader: Reader, sources: list[RankSource], jobs: int,
             progress: Callable[[int, int], None], scheduler: str | None = None,
             timeout_s: float = DEFAULT_LIMITS.dask_timeout_s,
             pool_min_s: float = DEFAULT_LIMITS.rank_pool_min_s) -> list[RankResult]:
    """Read every source as ``execute.plan_ranks`` plans it; the same ranks in the same order.

    ``reader(sources[, progress])`` reads a list of sources (``read_and_reduce_many``); a
    source may hold several ranks (a cluster_analysis_output directory). In this process
    progress follows the sources; elsewhere it follows the chunks as they come back.
    """
    return start_all(reader, sources, jobs, scheduler, timeout_s, pool_min_s)(progress)


def start_all(reader: Reader, sources: list[RankSource], jobs: int,
              scheduler: str | None = None,
              timeout_s: float = DEFAULT_LIMITS.dask_timeout_s,
              pool_min_s: float = DEFAULT_LIMITS.rank_pool_min_s,
              ) -> Callable[[Callable[[int, int], None]], list[RankResult]]:
    """``read_all`` in two halves: planned (and handed to shared workers) now, collected later.

    The returned function takes ``progress`` and returns what ``read_all`` returns
    (``execute.start``: only chunks for a shared pool of workers are handed out before it
    is called).
    """
    def flat(results: list[RankResult | list[RankResult]]) -> list[RankResult]:
        return [d for r in results for d in (r if isinstance(r, list) else [r])]

    if scheduler:  # a Dask worker's working directory is not this process's
        sources = [replace(s, path=s.path.absolute()) for s in sources]
    plan = plan_ranks(sources, jobs, scheduler, timeout_s, pool_min_s=pool_min_s)
    if isinstance(plan.executor, InOrder):
        return lambda progress: flat(reader(sources, progress))
    done = np.cumsum([0] + [len(c) for c in plan.chunks])
    collect = start(plan.executor, reader, plan.chunks)

    def results(progress: Callable[[int, int], None]) -> list[RankResult]:
        chunks = collect(lambda number, _: progress(int(done[number]), len(sources)))
        return flat([r for rs in chunks for r in rs])

    return results


def _drop_empty(datas: list[RankResult]) -> tuple[list[RankResult], list[Note]]:
    """Leave out kernel-less ranks that held nothing usable; raise when no rank is left."""
    empty = [d for d in datas if d.nothing]
    if empty and len(empty) == len(datas):
        raise kernelless.nothing_read(empty[0].source)
    return [d for d in datas if not d.nothing], [
        Note("rank-skipped", f"{d.source.name}: no kernels, steps, communication or memory "
             "data; rank skipped") for d in empty]


def _holdings(data: RankResult) -> str:
    held = [what for what, has in (("step breakdown", data.steps is not None),
                                   ("communication", data.has_comm),
                                   ("memory", data.memory is not None and data.memory.recorded))
            if has]
    return f"{', '.join(held)} only" if held else "nothing else"


def _without_kernels(datas: list[RankResult]) -> tuple[tuple[int, ...], list[Note]]:
    """Ranks read without kernels and, when other ranks have kernels, a warning naming them.

    e.g. ``ranks without kernels: 1, 3 (step breakdown, communication only)``.
    """
    lacking = [d for d in datas if not d.has_kernels]
    ranks = tuple(_rank_of(d) for d in lacking)
    if not lacking or len(lacking) == len(datas):
        return ranks, []
    groups: dict[str, list[int]] = {}
    for data in lacking:
        groups.setdefault(_holdings(data), []).append(_rank_of(data))
    named = "; ".join(f"{_rank_list(group)} ({held})" for held, group in groups.items())
    return ranks, [Note("ranks-without-kernels", f"ranks without kernels: {named}")]


STEPS_MEMORY_NOTE = ("steps chosen: memory samples are those inside the chosen steps' kernel "
                     "spans; operator allocations and copy bytes cover the whole profile")


def _memory_of(datas: list[RankResult], keep_rows: bool, steps: StepRanges | None) -> MemoryData:
    """The memory of the run: every rank that was read for it, under its rank id."""
    read = [(d, d.memory) for d in datas if d.memory is not None]
    notes = [Note(MEMORY_NOTE, STEPS_MEMORY_NOTE)] if steps and any(m.recorded for _, m in read) \
        else []
    no_spans = pd.DataFrame({"step": pd.Series(dtype="int64"),
                             "start_us": pd.Series(dtype="float64"),
                             "end_us": pd.Series(dtype="float64")})
    return memory_data([(_rank_of(d), m) for d, m in read],
                       [d.step_spans if d.step_spans is not None else no_spans for d, _ in read],
                       keep_rows, notes)


def _start_ranks(path: Path, limits: Limits, plan: RankPlan, jobs: int,
                 scheduler: str | None) -> Callable[[Any], tuple[Format, list[RankResult],
                                                                 list[Note]]]:
    """Find the ranks of one input and start reading them (``start_all``).

    The returned function takes ``progress`` and gives the input's format, the ranks
    kept and the warnings.
    """
    fmt, sources = find_rank_sources(path)
    with_kernels = sum(s.format.name != KERNEL_LESS.name for s in sources)
    plan = replace(plan, max_samples=samples_per_rank(with_kernels, limits.sample_budget))
    reader = partial(read_and_reduce_many, plan)
    collect = start_all(reader, sources, jobs, scheduler, limits.dask_timeout_s,
                        limits.rank_pool_min_s)

    def finish(progress) -> tuple[Format, list[RankResult], list[Note]]:
        datas, skipped = _drop_empty(collect(progress))
        datas, warnings = _assign_ranks(datas)
        return fmt, datas, unread_children(path, sources) + skipped + warnings

    return finish


def load_run(path: str | Path, label: str | None = None, *,
             limits: Limits = DEFAULT_LIMITS, fusion_map: Path | None = None,
             alias_map: Path | None = None, jobs: int = 1, scheduler: str | None = None,
             keep_rows: bool = True, steps: StepRanges | None = None,
             progress=lambda done, total: None, vocab: Vocabulary | None = None) -> Run:
    """Read a profile (any supported layout) into a canonical Run, memory included.

    ``label`` defaults to the directory name; ranks are read here, or by up to ``jobs``
    worker processes when their sizes make that pay (``execute.plan_ranks``; a script
    calling this with ``jobs`` ≥ 2 guards its entry point with
    ``if __name__ == "__main__":``, as multiprocessing asks), and ``progress(done, total)``
    is called as they come in; with
    ``scheduler`` (a Dask scheduler address) ranks are read on that cluster instead
    (``limits.dask_timeout_s`` to reach it). Each rank is read once and reduced where
    it is read: kernels, steps, communication and memory (``Run.memory``) come from the
    same ranks under the same ids.
    ``keep_rows=False`` keeps only the summaries, which is what a cluster of many ranks
    needs. ``steps`` keeps only those steps, memory samples included, before anything is
    summarized (see ``select_steps``). Raises InputError/SchemaError on unusable input;
    partial input (no communication.json, no step_trace_time.csv, a rank without kernels)
    yields warnings instead.
    """
    return start_run(path, label, limits=limits, fusion_map=fusion_map, alias_map=alias_map,
                     jobs=jobs, scheduler=scheduler, keep_rows=keep_rows, steps=steps,
                     progress=progress, vocab=vocab)()


def start_run(path: str | Path, label: str | None = None, *,
              limits: Limits = DEFAULT_LIMITS, fusion_map: Path | None = None,
              alias_map: Path | None = None, jobs: int = 1, scheduler: str | None = None,
              keep_rows: bool = True, steps: StepRanges | None = None,
              progress=lambda done, total: None,
              vocab: Vocabulary | None = None) -> Callable[[], Run]:
    """``load_run`` in two halves: the ranks found and their reading started, then the Run.

    The returned function waits for the ranks and assembles the Run. Inside
    ``execute.shared_workers`` the chunks of ranks for worker processes are handed to the
    shared pool now (``SharedWorkers.queue`` says when they go out), so the next input's
    ranks are found while this one's are read or the forkserver imports, and this one is
    assembled while the workers read the next.
    """
    path = Path(path)
    vocab = vocab or load_vocabulary(fusion_map, alias_map)
    plan = RankPlan(vocab, None, keep_rows, steps)
    ranks = _start_ranks(path, limits, plan, jobs, scheduler)
    return partial(_assemble, path, label, limits, keep_rows, steps, vocab, ranks, progress)


def _assemble(path: Path, label: str | None, limits: Limits, keep_rows: bool,
              steps: StepRanges | None, vocab: Vocabulary, ranks, progress) -> Run:
    """The Run of an input whose ranks ``ranks(progress)`` gives (``start_run``)."""
    fmt, datas, warnings = ranks(progress)
    for data in datas:
        warnings += [Note("input", text) for text in data.warnings]
    # A metadata file or value the provenance reader could not use: its facts are "not
    # recorded", and the run says which file was ignored and why.
    warnings += [Note("input", text) for data in datas if data.facts is not None
                 for text in data.facts.problems]
    parts: list[tuple[int, RunSummary | StackShare]] = []
    for data in datas:
        held = data.share if data.share is not None else data.summary
        if held is not None:
            parts.append((_rank_of(data), held))
    summary = combine(parts, limits.sample_budget)
    outside = sum(d.outside_steps for d in datas)
    unstepped = summary.ops["step"].isna().to_numpy()
    if unstepped.any() and not unstepped.all():  # whole ranks without step ids
        outside += int(summary.ops.loc[unstepped, "count"].sum())
        summary = select(summary, ~unstepped, np.ones(len(summary.comm), dtype=bool))
        datas = [_stepped_only(data) for data in datas]
    if outside:
        warnings.append(Note("outside-steps", f"{outside} kernel(s) fall outside every "
                             "profiler step and are left out"))
    available = sorted({s for d in datas for s in d.step_ids})
    if steps and available and summary.kernels == 0 and not any(
            d.steps is not None and len(d.steps) for d in datas):
        raise InputError(path, f"--steps selects no step of this profile "
                               f"(it has steps {available})")
    lacking = missing_steps(steps, available) if steps and available else None
    warnings += [lacking] if lacking is not None else []
    if summary.kernels == 0:
        what = " (a cluster summary)" if fmt.name == cluster_output.FORMAT else ""
        warnings.append(Note("no-kernels", f"no kernel rows{what}: operator comparison "
                             "unavailable"))
    step_frame, step_source = _step_breakdown(datas, warnings)
    has_comm_ops = (summary.ops["category"] == "communication").any()
    if has_comm_ops and not any(d.has_comm for d in datas):
        warnings.append(Note("no-communication-detail", "no communication.json: transit/wait "
                             "split of communication unavailable"))
    without_kernels, note = _without_kernels(datas)
    ops, comm = _rows_of(datas) if keep_rows else (None, None)
    framework, framework_note = combine_framework(datas)
    return Run(label or default_label(path), _meta_of(path, fmt, datas), ops, step_frame, comm,
               summary, step_source, tuple(warnings + note),
               _memory_of(datas, keep_rows, steps), without_kernels, framework, framework_note,
               vocab, _dtype_us(datas), **_non_compute_of(datas))


def _stacked(frames: list[pd.DataFrame | None], ranks: list[int]) -> pd.DataFrame | None:
    """The ranks' frames under their rank ids (column order kept); None when no rank has one."""
    pairs = [(f, r) for f, r in zip(frames, ranks) if f is not None]
    if not pairs:
        return None
    empty = pairs[0][0].iloc[:0]
    merged = concat_ranks([f for f, _ in pairs], [r for _, r in pairs])
    return merged[list(empty.columns)] if len(merged.columns) else empty


def _non_compute_of(datas: list[RankResult]) -> dict[str, Any]:
    """The Run's non-compute fields: collectives and theirs, host steps, lanes, launch source.

    Each rank's frame under its rank id (assigned once every rank is read); lanes per rank.
    """
    ranks = [_rank_of(d) for d in datas]
    lanes = {rank: d.step_lanes for d, rank in zip(datas, ranks) if d.step_lanes is not None}
    return {"collectives": _stacked([d.collectives for d in datas], ranks),
            "collective_links": _stacked([d.collective_links for d in datas], ranks),
            "collectives_source": {rank: d.collectives_source for d, rank in zip(datas, ranks)
                                   if d.collectives is not None},
            "host_steps": _stacked([d.host_steps for d in datas], ranks),
            "host_launch_source": {rank: d.host_launch_source
                                   for d, rank in zip(datas, ranks) if d.host_launch_source},
            "step_lanes": lanes}


def _dtype_us(datas: list[RankResult]) -> dict[str, float]:
    """Compute kernel µs per first-input dtype, summed over the ranks (``Run.dtype_us``)."""
    total: dict[str, float] = {}
    for data in datas:
        for dtype, us in data.dtype_us.items():
            total[dtype] = total.get(dtype, 0.0) + us
    return total


def _stepped_only(data: RankResult) -> RankResult:
    """The rank without its kernels outside every step (whole ranks without step ids)."""
    kernel_steps = data.kernel_steps
    if kernel_steps is not None:
        kernel_steps = kernel_steps[kernel_steps["step"].notna()]
    ops = data.ops if data.ops is None else data.ops[data.ops["step"].notna().to_numpy()]
    # A rank's kernels all lie in steps or none do (the reduce kept them so): no span, none.
    unstepped = data.step_spans is not None and data.step_spans.empty

    def stepped(frame: pd.DataFrame | None) -> pd.DataFrame | None:
        return frame if frame is None else frame[frame["step"].notna().to_numpy()]

    return replace(data, kernel_steps=kernel_steps, ops=ops,
                   dtype_us={} if unstepped else data.dtype_us,
                   collectives=stepped(data.collectives),
                   collective_links=stepped(data.collective_links),
                   host_steps=stepped(data.host_steps),
                   step_lanes=None if unstepped else data.step_lanes)


def _rows_of(datas: list[RankResult]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The kept canonical rows and communication rows of every rank, under its rank id."""
    # A rank id assigned here, not known to the reader.
    ops = [d.ops.assign(rank=d.rank) for d in datas if d.ops is not None]
    comm_frames = [d.comm.assign(rank=d.rank) for d in datas if d.comm is not None]
    return (conform_ops(concat_frames(ops)),
            concat_frames(comm_frames) if comm_frames else empty_comm())


def _meta_of(path: Path, fmt: Format, datas: list[RankResult]) -> RunMeta:
    """Versions and device from the first rank with kernels (else the first rank)."""
    info = next((d.info for d in datas if d.has_kernels), datas[0].info)
    facts: list[Any] | None = [d.facts for d in datas] \
        if all(d.facts is not None for d in datas) else None
    return RunMeta(path=str(path), format=fmt.name, ranks=tuple(_rank_of(d) for d in datas),
                   **read_provenance(fmt.name, [d.source for d in datas], info, facts))


def read_memory(path: str | Path, *, jobs: int = 1, scheduler: str | None = None,
                keep_rows: bool = True, steps: StepRanges | None = None,
                limits: Limits = DEFAULT_LIMITS) -> MemoryData:
    """The device memory of one input: ``load_run(path, …).memory`` (for library users).

    One pass over the input, kernels included: the ranks and their ids are the Run's.
    Missing files (the profile was taken without ``profile_memory``) become warnings;
    unreadable or truncated files raise InputError, files lacking columns SchemaError.
    """
    run = load_run(path, limits=limits, jobs=jobs, scheduler=scheduler,
                   keep_rows=keep_rows, steps=steps)
    return run.memory if run.memory is not None else MemoryData(ranks=run.meta.ranks)


def default_label(path: Path) -> str:
    """A short label for a path: its directory name without the profiler suffixes."""
    name = path.resolve().name
    if name == torch_text.OUTPUT_DIR:
        name = path.resolve().parent.name
    return name.removesuffix("_ascend_pt").removesuffix("_ascend_ms") or "run"
