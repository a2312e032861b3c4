"""Read stage: ``load_run(path, label)`` detects the layout and returns a canonical Run.

Each format module offers ``is_rank_dir(path)`` (one rank's result) and
``read_rank(path) -> RankData``. A directory that is not itself a rank result is
searched one level down for rank results (one per rank). Formats are tried in
FORMATS.md's priority order. One rule finds the ranks of everything the comparison reads:
beside the kernel ranks, rank directories that hold no kernels but a step breakdown,
communication or memory (``kernelless.py``) are ranks too. Each rank is read once, in one
worker (the caller's process, a thread, a worker process or a Dask worker), kernels and
memory alike, and reduced there (``rank_reduce.py``: small ranks a worker reads are
reduced as one stack).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
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
from . import cluster_output, kernelless, msprof_dirs, sqlite_db, torch_text, trace_json
from .base import RankData
from .derive import concat_frames, concat_ranks
from .files import is_directory, list_dir, present
from .framework import combine_framework
from .maps import load_vocabulary
from .memory import MEMORY_NOTE, memory_data, read_rank_memory, select_memory, step_intervals
from .provenance import rank_facts, read_provenance
from .rank_reduce import RankPlan, StepRanges, in_ranges, reduce_ranks
from .reduce import StackShare, combine, samples_per_rank, select
from .workers import RANK_PROCESS_MIN, TASKS_PER_WORKER, read_in_processes


@dataclass(frozen=True)
class Format:
    """A profile layout we can read."""

    name: str
    looks_for: str
    is_rank_dir: Callable[[Path], bool]
    read_rank: Callable[[Path], RankData | list[RankData]]


def _db_with_kernels(path: Path) -> bool:
    """A rank result holding a profiler db with kernels (one probe of its tables).

    A db without COMPUTE_TASK_INFO gives way to a kernel_details.csv beside it (FORMATS.md
    §12 priority 1 applies only when the db has kernels), and alone it is a kernel-less
    rank (memory, steps, communication): ``kernelless.py`` reads it.
    """
    db = sqlite_db.find_db(path)
    return db is not None and sqlite_db.has_kernels(db)


FORMATS: list[Format] = [
    Format(sqlite_db.FORMAT, "ASCEND_PROFILER_OUTPUT/ascend_{pytorch,mindspore}_profiler_*.db",
           _db_with_kernels, sqlite_db.read_rank),
    Format(torch_text.FORMAT, "ASCEND_PROFILER_OUTPUT/kernel_details.csv",
           torch_text.is_rank_dir, torch_text.read_rank),
    Format(msprof_dirs.FORMAT, "PROF_*/mindstudio_profiler_output/op_summary_*.csv",
           msprof_dirs.is_rank_dir, msprof_dirs.read_rank),
    Format(trace_json.FORMAT, "ASCEND_PROFILER_OUTPUT/trace_view.json or a *.json[.gz] trace",
           trace_json.is_rank_dir, trace_json.read_rank),
    Format(cluster_output.FORMAT, "cluster_analysis_output/cluster_step_trace_time.csv",
           cluster_output.is_rank_dir, cluster_output.read_rank),
]
# A rank without kernels: asked only once every kernel format has declined a path.
KERNEL_LESS = Format(kernelless.FORMAT, kernelless.LOOKS_FOR, kernelless.is_rank_dir,
                     kernelless.read_rank)
# The torch_npu layouts, beside whose ranks kernel-less rank directories are looked for (a
# PROF_* or cluster_analysis_output input covers its ranks in its own files).
TORCH_LAYOUTS = (sqlite_db.FORMAT, torch_text.FORMAT, trace_json.FORMAT)


@dataclass(frozen=True)
class RankSource:
    """One rank result to read (a directory or a file) and the format that reads it."""

    path: Path
    format: Format


def _kernel_format(path: Path) -> Format | None:
    return next((fmt for fmt in FORMATS if fmt.is_rank_dir(path)), None)


def _looked_for() -> str:
    return "; ".join(f.looks_for for f in (*FORMATS, KERNEL_LESS))


def find_rank_sources(path: Path) -> tuple[Format, list[RankSource]]:
    """Decide the input's format and list one source per rank, each with its reader.

    ``path`` itself may be a rank result; else its subdirectories are: those of the first
    format (priority order) that any of them has, plus, beside torch_npu layouts, those
    that hold no kernels but steps, communication or memory. The format returned is the
    kernel ranks' (``no_kernels`` when none has kernels). InputError says what was looked
    for when nothing is found.
    """
    if not present(path):  # an unreadable parent or a too-long name: one line, not a crash
        raise InputError(path, "no such file or directory")
    own = _kernel_format(path) or (KERNEL_LESS if KERNEL_LESS.is_rank_dir(path) else None)
    if own is not None:
        return own, [RankSource(path, own)]
    children = [p for p in list_dir(path) if is_directory(p)] if is_directory(path) else []
    formats = {child: _kernel_format(child) for child in children}
    fmt = next((f for f in FORMATS if any(found is f for found in formats.values())), None)
    sources = [RankSource(child, fmt) for child in children if fmt and formats[child] is fmt]
    if fmt is None or fmt.name in TORCH_LAYOUTS:
        sources += [RankSource(child, KERNEL_LESS) for child in children
                    if formats[child] is None and KERNEL_LESS.is_rank_dir(child)]
    if not sources:
        raise InputError(path, f"no profile found: looked for {_looked_for()} in this "
                               "directory and in its subdirectories")
    return fmt or KERNEL_LESS, sorted(sources, key=lambda s: s.path)


def _rank_of(data: RankData) -> int:
    """A rank's id, once ``_assign_ranks`` has given every rank one."""
    if data.rank is None:
        raise ValueError(f"{data.source}: no rank id assigned")
    return data.rank


def _assign_ranks(datas: list[RankData]) -> tuple[list[RankData], list[Note]]:
    """Give every rank an id; for duplicates keep the newest result (by directory name).

    Kernels, steps, communication and memory travel together in one RankData, so the
    rank a duplicate loses is lost for all of them alike.
    """
    warnings: list[Note] = []
    used = {d.rank for d in datas if d.rank is not None}
    free = (n for n in range(len(datas) + len(used) + 1) if n not in used)
    for data in datas:  # ranks that do not say get ids no other rank uses
        if data.rank is None:
            data.rank = next(free)
    by_rank: dict[int, RankData] = {}
    for data in sorted(datas, key=lambda d: d.source.name):
        rank = _rank_of(data)
        if rank in by_rank:
            warnings.append(Note("duplicate-rank", f"rank {rank}: several results; using "
                                 f"{data.source.name}, ignoring {by_rank[rank].source.name}"))
        by_rank[rank] = data
    return [by_rank[r] for r in sorted(by_rank)], warnings


def _memory_intervals(data: RankData, steps: StepRanges | None) -> np.ndarray | None:
    """The µs intervals of the chosen steps on this rank; None keeps all of its memory."""
    if not steps or data.step_spans is None or data.step_spans.empty:
        return None
    return step_intervals(data.step_spans, in_ranges(data.step_spans["step"], steps))


def read_and_reduce(plan: RankPlan, source: RankSource) -> RankData | list[RankData]:
    """One rank's read-and-reduce: ``read_and_reduce_many`` of that one source."""
    return read_and_reduce_many(plan, [source])[0]


def read_and_reduce_many(plan: RankPlan, sources: list[RankSource],
                         progress: Callable[[int, int], None] | None = None
                         ) -> list[RankData | list[RankData]]:
    """The read-and-reduce of several sources in one worker (a process, a Dask worker).

    Each raw table (text, PMU columns unread) becomes canonical rows of the chosen
    steps, then a RunSummary (``rank_reduce``: a large rank as soon as it is read, small
    ones stacked); each rank's memory files are read and reduced to a MemorySummary,
    their timed samples limited to the chosen steps' spans (see ``read/memory.py``).
    Only the summaries leave the worker unless ``plan.keep_rows``. A cluster summary
    (several ranks in one source) holds no memory. ``progress(done, total)`` follows
    the sources as they are read.
    """
    results: list[RankData | list[RankData]] = []

    def read():
        for number, source in enumerate(sources, 1):
            result = source.format.read_rank(source.path)
            results.append(result)
            yield from result if isinstance(result, list) else [result]
            if progress is not None and number < len(sources):  # the last once all is done
                progress(number, len(sources))

    reduce_ranks(read(), plan)
    for source, result in zip(sources, results):
        if not isinstance(result, list):
            _read_memory_and_facts(plan, source, result)
    if progress is not None:
        progress(len(sources), len(sources))
    return results


def _read_memory_and_facts(plan: RankPlan, source: RankSource, result: RankData) -> None:
    result.facts = rank_facts(source.path, source.format.name, result.info)
    result.info.pop("profiler_info", None)  # parsed once; only its facts travel on
    intervals = _memory_intervals(result, plan.steps)
    result.memory = read_rank_memory(source.path, plan.keep_rows, intervals)
    if plan.steps and intervals is None and result.memory.recorded:
        result.memory.notes.append(Note(MEMORY_NOTE, "no kernel times to place its memory "
                                        "samples in steps: they cover the whole profile, "
                                        "not only the chosen steps"))
    # Compared by name: on Dask the source's Format is a copy.
    if source.format.name == KERNEL_LESS.name and not result.memory.recorded:
        # The run's "ranks without kernels" warning says what such a rank holds; a note per
        # missing memory file would only repeat that it holds no memory.
        result.memory.notes = []
        result.nothing = result.steps is None and not result.has_comm


def _steps_of(data: RankData) -> pd.DataFrame | None:
    """The rank's step figures: the profiler's, else those derived from its kernels."""
    return data.steps if data.steps is not None else data.kernel_steps


def _step_breakdown(datas: list[RankData], warnings: list[Note]) -> tuple[pd.DataFrame, str]:
    """The profiler's step figures where a rank has them, else the kernel-derived ones.

    A rank with neither (memory alone) has no step figures and counts for neither.
    """
    derived = [_rank_of(d) for d in datas if d.steps is None and d.has_kernels]
    stepped = [d for d in datas if d.steps is not None or d.has_kernels]
    steps = concat_ranks([_steps_of(d) for d in datas], [d.rank for d in datas])
    steps = steps[list(STEP_COLUMNS)] if len(steps.columns) else steps
    if not len(steps.columns):
        steps = pd.DataFrame({c: pd.Series(dtype="float64") for c in STEP_COLUMNS})
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


def _rank_list(ranks: list[int], limit: int = 12) -> str:
    shown = ", ".join(str(r) for r in ranks[:limit])
    return shown + (f" … ({len(ranks)} ranks)" if len(ranks) > limit else "")


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
    if not keep.any():
        available = sorted(int(s) for s in summary.ops["step"].dropna().unique())
        raise InputError(run.meta.path, f"--steps selects no step of this profile "
                                        f"(it has steps {available})")

    def chosen(frame: pd.DataFrame | None) -> pd.DataFrame | None:
        if frame is None or frame.empty:
            return frame
        return frame[in_ranges(frame["step"], ranges)].reset_index(drop=True)

    summary = select(summary, keep, in_ranges(summary.comm["step"], ranges))
    memory = run.memory
    if memory is not None and len(memory.step_spans):
        memory = select_memory(memory, in_ranges(memory.step_spans["step"], ranges))
    return replace(run, ops=chosen(run.ops), steps=chosen(run.steps), comm=chosen(run.comm),
                   summary=summary, memory=memory, framework=chosen(run.framework))


def _unread_children(path: Path, sources: list[RankSource]) -> list[Note]:
    """Rank-like subdirectories that no reader accepted (nothing readable in them)."""
    paths = {s.path for s in sources}
    if not path.is_dir() or path in paths:
        return []
    return [Note("rank-skipped", f"{child.name}: no readable profile (looked for "
                 f"{_looked_for()}); rank skipped")
            for child in sorted(path.iterdir())
            if child.is_dir() and child not in paths
            and (child.name.endswith(("_ascend_pt", "_ascend_ms")) or
                 (child / torch_text.OUTPUT_DIR).is_dir())]


def _read_on_dask(reader, chunks: list, scheduler: str, progress, timeout_s: float) -> list:
    """Read chunks of ranks on an existing Dask cluster (optional extra ``cann-diff[dask]``)."""
    try:
        from distributed import Client
    except ImportError:
        raise InputError(None, "--scheduler needs Dask: pip install 'cann-diff[dask]'") from None
    try:
        client = Client(scheduler, timeout=timeout_s, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(None, f"cannot reach Dask scheduler {scheduler}: {exc}") from None
    try:
        futures = client.map(reader, chunks, pure=False)
        results = []
        for number, future in enumerate(futures, 1):
            results.append(future.result())
            progress(number, len(chunks))
        return results
    finally:
        client.close()


Reader = Callable[..., list[RankData | list[RankData]]]


# Ranks per Dask task: a cluster's size is not known here, so its tasks are many and small.
DASK_CHUNK_RANKS = 16


def _chunked(sources: list[RankSource], workers: int, most: int | None = None
             ) -> list[list[RankSource]]:
    """Sources in ``TASKS_PER_WORKER`` chunks per worker (a chunk's small ranks stack).

    Enough chunks that the workers finish together and progress moves; at most ``most``
    sources a chunk.
    """
    size = max(1, math.ceil(len(sources) / (workers * TASKS_PER_WORKER)))
    size = min(size, most) if most else size
    return [sources[i:i + size] for i in range(0, len(sources), size)]


def read_all(reader: Reader, sources: list[RankSource], jobs: int,
             progress: Callable[[int, int], None], scheduler: str | None = None,
             timeout_s: float = DEFAULT_LIMITS.dask_timeout_s) -> list[RankData]:
    """Read every source: in order, on ``jobs`` worker processes, or in threads.

    ``reader(sources[, progress])`` reads a list of sources (``read_and_reduce_many``).
    With ``jobs`` ≥ 2 and at least ``workers.RANK_PROCESS_MIN`` sources the ranks are read
    in worker processes, a chunk of ranks per task (reading a rank is mostly Python work
    under the interpreter lock); with fewer, a rank per thread, where a process pool would
    cost more than it saves. With ``scheduler`` the chunks are read on that Dask cluster
    instead, waiting up to ``timeout_s`` seconds for it. A source may hold several ranks
    (a cluster_analysis_output directory). Every path gives the same ranks in the same
    order.
    """
    def flat(results: list[RankData | list[RankData]]) -> list[RankData]:
        return [d for r in results for d in (r if isinstance(r, list) else [r])]

    def by_chunk(chunks: list[list[RankSource]]) -> Callable[[int, int], None]:
        done = np.cumsum([0] + [len(c) for c in chunks])
        return lambda number, _: progress(int(done[number]), len(sources))

    if scheduler:
        chunks = _chunked(sources, max(jobs, 1), DASK_CHUNK_RANKS)
        return flat([r for rs in _read_on_dask(reader, chunks, scheduler, by_chunk(chunks),
                                               timeout_s) for r in rs])
    if jobs >= 2 and len(sources) >= RANK_PROCESS_MIN:
        chunks = _chunked(sources, jobs)
        return flat([r for rs in read_in_processes(reader, chunks, jobs, by_chunk(chunks))
                     for r in rs])
    if jobs <= 1 or len(sources) == 1:
        return flat(reader(sources, progress))
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(reader, [source]) for source in sources]
        results = []
        for number, future in enumerate(futures, 1):
            results += future.result()
            progress(number, len(sources))
        return flat(results)


def _drop_empty(datas: list[RankData]) -> tuple[list[RankData], list[Note]]:
    """Leave out kernel-less ranks that held nothing usable; raise when no rank is left."""
    empty = [d for d in datas if d.nothing]
    if empty and len(empty) == len(datas):
        raise kernelless.nothing_read(empty[0].source)
    return [d for d in datas if not d.nothing], [
        Note("rank-skipped", f"{d.source.name}: no kernels, steps, communication or memory "
             "data; rank skipped") for d in empty]


def _holdings(data: RankData) -> str:
    held = [what for what, has in (("step breakdown", data.steps is not None),
                                   ("communication", data.has_comm),
                                   ("memory", data.memory is not None and data.memory.recorded))
            if has]
    return f"{', '.join(held)} only" if held else "nothing else"


def _without_kernels(datas: list[RankData]) -> tuple[tuple[int, ...], list[Note]]:
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


def _memory_of(datas: list[RankData], keep_rows: bool, steps: StepRanges | None) -> MemoryData:
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


def _read_ranks(path: Path, limits: Limits, plan: RankPlan, jobs: int,
                scheduler: str | None, progress) -> tuple[Format, list[RankData], list[Note]]:
    """Find and read the ranks of one input: its format, the ranks kept, warnings."""
    fmt, sources = find_rank_sources(path)
    with_kernels = sum(s.format.name != KERNEL_LESS.name for s in sources)
    plan = replace(plan, max_samples=samples_per_rank(with_kernels, limits.sample_budget))
    reader = partial(read_and_reduce_many, plan)
    datas = read_all(reader, sources, jobs, progress, scheduler, limits.dask_timeout_s)
    datas, skipped = _drop_empty(datas)
    datas, warnings = _assign_ranks(datas)
    return fmt, datas, _unread_children(path, sources) + skipped + warnings


def load_run(path: str | Path, label: str | None = None, *,
             limits: Limits = DEFAULT_LIMITS, fusion_map: Path | None = None,
             alias_map: Path | None = None, jobs: int = 1, scheduler: str | None = None,
             keep_rows: bool = True, steps: StepRanges | None = None,
             progress=lambda done, total: None, vocab: Vocabulary | None = None) -> Run:
    """Read a profile (any supported layout) into a canonical Run, memory included.

    ``label`` defaults to the directory name; ranks are read by ``jobs`` threads, or
    with 32 ranks or more by ``jobs`` worker processes (a script calling this with
    ``jobs`` ≥ 2 guards its entry point with ``if __name__ == "__main__":``, as
    multiprocessing asks), and ``progress(done, total)`` is called as they come in; with
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
    path = Path(path)
    vocab = vocab or load_vocabulary(fusion_map, alias_map)
    plan = RankPlan(vocab, None, keep_rows, steps)
    fmt, datas, warnings = _read_ranks(path, limits, plan, jobs, scheduler, progress)
    for data in datas:
        warnings += [Note("input", text) for text in data.warnings]
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
        for data in datas:
            data.kernel_steps = None if data.kernel_steps is None else \
                data.kernel_steps[data.kernel_steps["step"].notna()]
            if keep_rows:
                data.ops = data.ops[data.ops["step"].notna().to_numpy()]
    if outside:
        warnings.append(Note("outside-steps", f"{outside} kernel(s) fall outside every "
                             "profiler step and are left out"))
    available = sorted({s for d in datas for s in d.step_ids})
    if steps and available and summary.kernels == 0 and not any(
            d.steps is not None and len(d.steps) for d in datas):
        raise InputError(path, f"--steps selects no step of this profile "
                               f"(it has steps {available})")
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
               vocab)


def _rows_of(datas: list[RankData]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The kept canonical rows and communication rows of every rank, under its rank id."""
    for data in datas:
        data.ops["rank"] = data.rank
        if data.comm is not None:  # a rank id assigned here, not known to the reader
            data.comm["rank"] = data.rank
    comm_frames = [d.comm for d in datas if d.comm is not None]
    return (conform_ops(concat_frames(d.ops for d in datas)),
            concat_frames(comm_frames) if comm_frames else empty_comm())


def _meta_of(path: Path, fmt: Format, datas: list[RankData]) -> RunMeta:
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
