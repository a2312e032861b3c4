"""Read stage: ``load_run(path, label)`` detects the layout and returns a canonical Run.

Each format module offers ``is_rank_dir(path)`` (one rank's result) and
``read_rank(path) -> RankData``. A directory that is not itself a rank result is
searched one level down for rank results (one per rank). Formats are tried in
FORMATS.md's priority order.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import InputError
from ..schema import OP_COLUMNS, STEP_COLUMNS, Run, RunMeta, conform_ops, empty_comm, validate
from . import cluster_output, msprof_dirs, sqlite_db, torch_text, trace_json
from .base import RankData
from .canonical import canonicalize, normalize_distinct, normalize_dtypes, normalize_shapes
from .derive import concat_frames
from .framework import combine_framework, reduce_framework
from .reduce import combine, samples_per_rank, select, summarize
from .timeline import step_breakdown_from_kernels


@dataclass(frozen=True)
class Format:
    """A profile layout we can read."""

    name: str
    looks_for: str
    is_rank_dir: Callable[[Path], bool]
    read_rank: Callable[[Path], RankData | list[RankData]]


FORMATS: list[Format] = [
    Format(sqlite_db.FORMAT, "ASCEND_PROFILER_OUTPUT/ascend_{pytorch,mindspore}_profiler_*.db",
           sqlite_db.is_rank_dir, sqlite_db.read_rank),
    Format(torch_text.FORMAT, "ASCEND_PROFILER_OUTPUT/kernel_details.csv",
           torch_text.is_rank_dir, torch_text.read_rank),
    Format(msprof_dirs.FORMAT, "PROF_*/mindstudio_profiler_output/op_summary_*.csv",
           msprof_dirs.is_rank_dir, msprof_dirs.read_rank),
    Format(trace_json.FORMAT, "ASCEND_PROFILER_OUTPUT/trace_view.json or a *.json[.gz] trace",
           trace_json.is_rank_dir, trace_json.read_rank),
    Format(cluster_output.FORMAT, "cluster_analysis_output/cluster_step_trace_time.csv",
           cluster_output.is_rank_dir, cluster_output.read_rank),
]


def find_rank_sources(path: Path) -> tuple[Format, list[Path]]:
    """Decide the format and list one source per rank; InputError says what was looked for."""
    if not path.exists():
        raise InputError(path, "no such file or directory")
    for fmt in FORMATS:
        if fmt.is_rank_dir(path):
            return fmt, [path]
    children = sorted(p for p in path.iterdir() if p.is_dir()) if path.is_dir() else []
    for fmt in FORMATS:
        ranks = [child for child in children if fmt.is_rank_dir(child)]
        if ranks:
            return fmt, ranks
    wanted = "; ".join(f.looks_for for f in FORMATS)
    raise InputError(path, f"no profile found: looked for {wanted} in this directory and "
                           "in its subdirectories")


def _assign_ranks(datas: list[RankData]) -> tuple[list[RankData], list[str]]:
    """Give every rank an id; for duplicates keep the newest result (by directory name)."""
    warnings = []
    used = {d.rank for d in datas if d.rank is not None}
    free = (n for n in range(len(datas) + len(used) + 1) if n not in used)
    for data in datas:  # ranks that do not say get ids no other rank uses
        if data.rank is None:
            data.rank = next(free)
    by_rank: dict[int, RankData] = {}
    for data in sorted(datas, key=lambda d: d.source.name):
        if data.rank in by_rank:
            warnings.append(f"rank {data.rank}: several results; using {data.source.name}, "
                            f"ignoring {by_rank[data.rank].source.name}")
        by_rank[data.rank] = data
    return [by_rank[r] for r in sorted(by_rank)], warnings


def _normalize_ops(ops: pd.DataFrame, fusion_map: Path | None,
                   alias_map: Path | None) -> pd.DataFrame:
    ops["rank"] = 0  # the real id is known once every rank is read (_assign_ranks)
    ops["input_shapes"] = normalize_distinct(ops["input_shapes"], normalize_shapes)
    ops["input_dtypes"] = normalize_distinct(ops["input_dtypes"], normalize_dtypes)
    return canonicalize(ops, fusion_map, alias_map)[list(OP_COLUMNS)]


StepRanges = list[tuple[int | None, int | None]]


def _in_ranges(steps: pd.Series, ranges: StepRanges) -> np.ndarray:
    values = steps.astype("float64").to_numpy()
    keep = np.zeros(len(values), dtype=bool)
    for low, high in ranges:
        keep |= (values >= (low if low is not None else -np.inf)) & \
                (values <= (high if high is not None else np.inf))
    return keep


def _drop_rows_outside_steps(data: RankData) -> None:
    outside = data.ops["step"].isna()
    if outside.any() and not outside.all():
        data.outside_steps = int(outside.sum())
        data.ops = data.ops[~outside.to_numpy()].reset_index(drop=True)


def _keep_steps(data: RankData, ranges: StepRanges) -> None:
    """Keep the rows of the chosen steps; a rank without step ids is kept whole."""
    frames = [f for f in (data.ops, data.steps) if f is not None and len(f)]
    data.step_ids = tuple(sorted({int(s) for f in frames for s in f["step"].dropna().unique()}))
    if not data.step_ids:
        return
    data.ops = data.ops[_in_ranges(data.ops["step"], ranges)].reset_index(drop=True)
    if data.steps is not None:
        data.steps = data.steps[_in_ranges(data.steps["step"], ranges)].reset_index(drop=True)
    if data.comm is not None and len(data.comm):
        data.comm = data.comm[_in_ranges(data.comm["step"], ranges)].reset_index(drop=True)


def read_and_reduce(read_rank, fusion_map: Path | None, alias_map: Path | None,
                    max_samples: int | None, keep_rows: bool, steps: StepRanges | None,
                    source: Path) -> RankData | list[RankData]:
    """One rank's read-and-reduce, run in a thread or on a Dask worker.

    The raw table (text, PMU columns unread) becomes canonical rows of the chosen
    ``steps``, then a RunSummary; only the summary leaves the worker unless ``keep_rows``.
    """
    result = read_rank(source)
    for data in result if isinstance(result, list) else [result]:
        if len(data.ops):
            data.ops = conform_ops(_normalize_ops(data.ops, fusion_map, alias_map))
            validate(data.ops)
            _drop_rows_outside_steps(data)
        else:  # a cluster summary has no kernels: nothing to derive
            data.ops = pd.DataFrame({c: pd.Series(dtype=t) for c, t in OP_COLUMNS.items()})
        if steps:
            _keep_steps(data, steps)
        if data.steps is None and len(data.ops):
            data.kernel_steps = step_breakdown_from_kernels(data.ops)
        reduce_framework(data)
        data.summary = summarize(data.ops, data.comm, max_samples)
        data.has_comm = data.comm is not None
        if not keep_rows:
            data.ops = data.comm = None
    return result


def _steps_of(data: RankData) -> pd.DataFrame | None:
    steps = data.steps if data.steps is not None else data.kernel_steps
    if steps is None or steps.empty:
        return None
    steps = steps.copy()
    steps["rank"] = data.rank
    return steps[list(STEP_COLUMNS)]


def _step_breakdown(datas: list[RankData], warnings: list[str]) -> tuple[pd.DataFrame, str]:
    """The profiler's step figures where a rank has them, else the kernel-derived ones."""
    derived = [d.rank for d in datas if d.steps is None]
    steps = concat_frames(_steps_of(d) for d in datas)
    if not len(steps.columns):
        steps = pd.DataFrame({c: pd.Series(dtype="float64") for c in STEP_COLUMNS})
    if not derived:
        return steps, "step_trace_time"
    if len(derived) == len(datas):
        warnings.append("no step_trace_time.csv: step breakdown recomputed from kernel "
                        "intervals (computing = union of non-communication kernels)")
        return steps, "kernels"
    warnings.append(f"no step_trace_time.csv for rank(s) {_rank_list(derived)}: their step "
                    "breakdown is recomputed from kernel intervals")
    return steps, "mixed"


def _rank_list(ranks: list[int], limit: int = 12) -> str:
    shown = ", ".join(str(r) for r in ranks[:limit])
    return shown + (f" … ({len(ranks)} ranks)" if len(ranks) > limit else "")


def select_steps(run: Run, ranges: StepRanges | None) -> Run:
    """Keep only steps inside ``ranges`` (inclusive, None = open end).

    A run without step ids is kept whole. Raises InputError when no step is left.
    """
    summary = run.summary
    if not ranges or summary.ops["step"].isna().all():
        return run
    keep = _in_ranges(summary.ops["step"], ranges)
    if not keep.any():
        available = sorted(int(s) for s in summary.ops["step"].dropna().unique())
        raise InputError(run.meta.path, f"--steps selects no step of this profile "
                                        f"(it has steps {available})")

    def chosen(frame: pd.DataFrame | None) -> pd.DataFrame | None:
        if frame is None or frame.empty:
            return frame
        return frame[_in_ranges(frame["step"], ranges)].reset_index(drop=True)

    summary = select(summary, keep, _in_ranges(summary.comm["step"], ranges))
    return replace(run, ops=chosen(run.ops), steps=chosen(run.steps), comm=chosen(run.comm),
                   summary=summary, framework=chosen(run.framework))


def _unread_children(path: Path, sources: list[Path]) -> list[str]:
    """Rank-like subdirectories that no reader accepted (e.g. a rank without kernels)."""
    if not path.is_dir() or path in sources:
        return []
    return [f"{child.name}: no readable profile (looked for "
            f"{'; '.join(f.looks_for for f in FORMATS)}); rank skipped"
            for child in sorted(path.iterdir())
            if child.is_dir() and child not in sources
            and (child.name.endswith(("_ascend_pt", "_ascend_ms")) or
                 (child / torch_text.OUTPUT_DIR).is_dir())]


def _read_on_dask(reader, sources: list[Path], scheduler: str, progress) -> list:
    """Read ranks on an existing Dask cluster (optional extra ``cann-diff[dask]``)."""
    try:
        from distributed import Client
    except ImportError:
        raise InputError(None, "--scheduler needs Dask: pip install 'cann-diff[dask]'") from None
    try:
        client = Client(scheduler, timeout=30, set_as_default=False)
    except (OSError, TimeoutError, ValueError) as exc:
        raise InputError(None, f"cannot reach Dask scheduler {scheduler}: {exc}") from None
    try:
        futures = client.map(reader, sources, pure=False)
        results = []
        for number, future in enumerate(futures, 1):
            results.append(future.result())
            progress(number, len(sources))
        return results
    finally:
        client.close()


def read_all(reader, sources: list[Path], jobs: int, progress,
              scheduler: str | None = None) -> list[RankData]:
    """Read every source in parallel threads (pyarrow and pandas release the GIL).

    With ``scheduler`` the sources are read on that Dask cluster instead. A source may
    hold several ranks (a cluster_analysis_output directory).
    """
    def flat(results) -> list[RankData]:
        return [d for r in results for d in (r if isinstance(r, list) else [r])]

    if scheduler:
        return flat(_read_on_dask(reader, sources, scheduler, progress))
    if jobs <= 1 or len(sources) == 1:
        results = []
        for number, source in enumerate(sources, 1):
            results.append(reader(source))
            progress(number, len(sources))
        return flat(results)
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(reader, source) for source in sources]
        results = []
        for number, future in enumerate(futures, 1):
            results.append(future.result())
            progress(number, len(sources))
        return flat(results)


def load_run(path: str | Path, label: str | None = None, *, fusion_map: Path | None = None,
             alias_map: Path | None = None, jobs: int = 1, scheduler: str | None = None,
             keep_rows: bool = True, steps: StepRanges | None = None,
             progress=lambda done, total: None) -> Run:
    """Read a profile (any supported layout) into a canonical Run.

    ``label`` defaults to the directory name; ranks are read by ``jobs`` threads and
    ``progress(done, total)`` is called after each; with ``scheduler`` (a Dask
    scheduler address) ranks are read on that cluster instead. Each rank is reduced to
    its summary where it is read; ``keep_rows=False`` keeps only the summaries, which is
    what a cluster of many ranks needs. ``steps`` keeps only those steps, before anything
    is summarized (see ``select_steps``). Raises InputError/SchemaError on unusable input;
    partial input (no communication.json, no step_trace_time.csv) yields warnings instead.
    """
    path = Path(path)
    fmt, sources = find_rank_sources(path)
    reader = partial(read_and_reduce, fmt.read_rank, fusion_map, alias_map,
                     samples_per_rank(len(sources)), keep_rows, steps)
    datas, warnings = _assign_ranks(read_all(reader, sources, jobs, progress, scheduler))
    warnings = _unread_children(path, sources) + warnings
    for data in datas:
        warnings += data.warnings
    summary = combine([(d.rank, d.summary) for d in datas])
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
        warnings.append(f"{outside} kernel(s) fall outside every profiler step and are left out")
    available = sorted({s for d in datas for s in d.step_ids})
    if steps and available and summary.kernels == 0 and not any(
            d.steps is not None and len(d.steps) for d in datas):
        raise InputError(path, f"--steps selects no step of this profile "
                               f"(it has steps {available})")
    if summary.kernels == 0:
        warnings.append("no kernel rows (a cluster summary): operator comparison unavailable")
    steps, step_source = _step_breakdown(datas, warnings)
    has_comm_ops = (summary.ops["category"] == "communication").any()
    if has_comm_ops and not any(d.has_comm for d in datas):
        warnings.append("no communication.json: transit/wait split of communication unavailable")
    ops = comm = None
    if keep_rows:
        for data in datas:
            data.ops["rank"] = data.rank
            if data.comm is not None:  # a rank id assigned here, not known to the reader
                data.comm["rank"] = data.rank
        ops = conform_ops(concat_frames(d.ops for d in datas))
        comm_frames = [d.comm for d in datas if d.comm is not None]
        comm = concat_frames(comm_frames) if comm_frames else empty_comm()
    info = datas[0].info
    meta = RunMeta(path=str(path), format=fmt.name, ranks=tuple(d.rank for d in datas),
                   cann_version=info.get("cann_version"),
                   torch_npu_version=info.get("torch_npu_version"),
                   device=info.get("device"), profiler_level=info.get("profiler_level"))
    framework, framework_note = combine_framework(datas)
    return Run(label or default_label(path), meta, ops, steps, comm, summary, step_source,
               tuple(warnings), framework, framework_note)


def default_label(path: Path) -> str:
    """A short label for a path: its directory name without the profiler suffixes."""
    name = path.resolve().name
    if name == torch_text.OUTPUT_DIR:
        name = path.resolve().parent.name
    return name.removesuffix("_ascend_pt").removesuffix("_ascend_ms") or "run"
