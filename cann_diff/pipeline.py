"""The library entry point: two paths in, a Report out (read → match → compare → analyse)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

from .compare import Comparison, compare
from .compare.stats import load_distributions
from .findings import Analysis, analyse
from .match import match
from .read import StepRanges, load_run
from .read.workers import kill_pool, pool_context
from .report import Invocation, Report, build_report
from .schema import Run
from .settings import Limits, Thresholds


@dataclass(frozen=True)
class Options:
    """What a caller may choose; the CLI fills it from its flags."""

    base_label: str | None = None
    new_label: str | None = None
    steps: StepRanges | None = None
    thresholds: Thresholds = Thresholds()
    limits: Limits = Limits()
    fusion_map: Path | None = None
    alias_map: Path | None = None
    jobs: int = 1
    scheduler: str | None = None


@dataclass(frozen=True)
class Result:
    """The comparison and its report; ``comparison`` keeps the frames for library users."""

    comparison: Comparison
    analysis: Analysis
    report: Report


def _longer_label(run, other, path: Path, other_path: Path, side: str) -> str:
    """Tell two runs with the same default label apart.

    By the CANN version each recorded when those differ, else by the shortest path suffix
    that differs (``level1/rank0`` vs ``level2/rank0``; ``ASCEND_PROFILER_OUTPUT`` and the
    profiler suffixes skipped), else by the side (a run compared with itself).
    """
    mine, theirs = run.meta.cann_version, other.meta.cann_version
    if mine and theirs and mine != theirs:
        return f"CANN {mine}"

    def parts(where: Path) -> list[str]:
        names = [p for p in where.resolve().parts[1:] if p != "ASCEND_PROFILER_OUTPUT"]
        return [p.removesuffix("_ascend_pt").removesuffix("_ascend_ms") for p in names]

    own, alien = parts(path), parts(other_path)
    for depth in range(1, len(own) + 1):
        if own[-depth:] != alien[-depth:]:
            return "/".join(own[-depth:])
    return f"{side}:{run.label}"


def _ranks_text(ranks: tuple[int, ...]) -> str:
    if len(ranks) <= 8:
        return str(list(ranks))
    return f"{len(ranks)} ({ranks[0]}…{ranks[-1]})"


def read_side(path: str | Path, label: str | None, side: str, options: Options,
              progress=lambda message: None,
              rank_progress=lambda side, done, total: None) -> Run:
    """Read one input as the comparison needs it (summaries only, the chosen steps)."""
    progress(f"reading {side}: {path}")
    run = load_run(path, label, limits=options.limits, fusion_map=options.fusion_map,
                   alias_map=options.alias_map, jobs=options.jobs,
                   scheduler=options.scheduler, keep_rows=False, steps=options.steps,
                   progress=lambda done, total: rank_progress(side, done, total))
    progress(f"  {run.summary.kernels:,} kernels, ranks {_ranks_text(run.meta.ranks)}")
    return run


def compare_runs(base: Run, new: Run, options: Options = Options(),
                 progress=lambda message: None,
                 invocation: Invocation | None = None) -> Result:
    """Compare two runs already read: match, compare, findings, report.

    Each run was walked and read once: its kernels, steps, communication and memory come
    from the same ranks under the same rank ids (``load_run``).
    """
    progress("matching and comparing")
    vocab = base.vocab  # both sides were read with the options' maps
    matched = match(base.summary.ops, new.summary.ops, thresholds=options.thresholds,
                    vocab=vocab)
    comparison = compare(base, new, matched, options.thresholds, options.limits)
    analysis = analyse(comparison, vocab)
    return Result(comparison, analysis, build_report(comparison, analysis, invocation))


def distinct_labels(runs: list[Run], paths: list[str | Path],
                    sides: list[str]) -> list[Run]:
    """Runs whose default labels collide, each told apart from the first run sharing it."""
    labels = [run.label for run in runs]
    out = []
    for i, (run, path) in enumerate(zip(runs, paths)):
        other = next((j for j, label in enumerate(labels) if label == run.label and j != i),
                     None)
        out.append(run if other is None else replace(run, label=_longer_label(
            run, runs[other], Path(path), Path(paths[other]), sides[i])))
    return out


PROCESS_MIN_BYTES = 64 * 2**20  # below this a worker's start-up (~1 s) costs more than it saves
# A side worker wants two cores of its own: one for its Python, one for pyarrow's parse.
# With two jobs in all, two sides in processes ran 17-25 % slower (wall) than one after the
# other, each parse on both cores (0.25M, 1M and 4M kernels per side; docs/performance.md,
# "Round 5"). So there are at most jobs // JOBS_PER_SIDE_WORKER side workers, and at least 2.
JOBS_PER_SIDE_WORKER = 2
SIDE_PROCESS_MIN_JOBS = 2 * JOBS_PER_SIDE_WORKER


def _large(paths: list[str | Path], limit: int | None = None) -> bool:
    """Whether the inputs hold at least ``limit`` bytes (the walk stops once they do).

    ``limit`` defaults to ``PROCESS_MIN_BYTES`` as it is when called.
    """
    import os

    limit = PROCESS_MIN_BYTES if limit is None else limit
    total = 0
    for path in paths:
        for root, _dirs, names in os.walk(path):
            for name in names:
                try:
                    total += os.stat(os.path.join(root, name), follow_symlinks=False).st_size
                except OSError:
                    continue
                if total >= limit:
                    return True
        if os.path.isfile(path):
            total += os.path.getsize(path)
    return total >= limit


def read_sides(items: list[tuple[str | Path, str | None, str]], options: Options,
               progress=lambda message: None,
               rank_progress=lambda side, done, total: None) -> list[Run]:
    """Read every (path, label, side), each side in its own process when ``jobs`` allows.

    The sides are independent: with ``jobs`` ≥ ``SIDE_PROCESS_MIN_JOBS`` and inputs of at
    least ``PROCESS_MIN_BYTES`` they are read at the same time in worker processes (threads
    would share one interpreter lock), ``JOBS_PER_SIDE_WORKER`` jobs or more each, shared
    out for their ranks. With fewer jobs or smaller inputs, or a Dask scheduler (which
    spreads the ranks itself), they are read one after the other in this process, each
    with all ``jobs`` for its ranks.
    """
    if options.jobs < SIDE_PROCESS_MIN_JOBS or options.scheduler or len(items) < 2 or \
            not _large([path for path, _, _ in items]):
        return [read_side(path, label, side, options, progress, rank_progress)
                for path, label, side in items]
    from concurrent.futures import ProcessPoolExecutor

    workers = min(len(items), options.jobs // JOBS_PER_SIDE_WORKER)
    share = replace(options, jobs=max(1, options.jobs // workers))
    for path, _, side in items:
        progress(f"reading {side}: {path}")
    pool = ProcessPoolExecutor(max_workers=workers,
                               mp_context=pool_context("cann_diff.pipeline"))
    try:
        futures = [pool.submit(read_side, path, label, side, share)
                   for path, label, side in items]
        load_distributions()  # the comparison's import, while the workers read
        runs = []
        for future, (_, _, side) in zip(futures, items):
            run = future.result()
            ranks = len(run.meta.ranks)
            rank_progress(side, ranks, ranks)
            progress(f"  {side}: {run.summary.kernels:,} kernels, "
                     f"ranks {_ranks_text(run.meta.ranks)}")
            runs.append(run)
    except BaseException:
        kill_pool(pool)  # the workers of this pool only
        raise
    pool.shutdown()
    return runs


def diff(base_path: str | Path, new_path: str | Path, options: Options = Options(),
         progress=lambda message: None,
         rank_progress=lambda side, done, total: None,
         invocation: Invocation | None = None) -> Result:
    """Read both profiles and compare them.

    ``progress`` receives short status messages, ``rank_progress(side, done, total)``
    is called as ranks are read; ``invocation`` (the CLI's command line and date) goes
    into the report's provenance. With ``options.jobs`` ≥ ``SIDE_PROCESS_MIN_JOBS`` and
    inputs of at least ``PROCESS_MIN_BYTES`` the two sides are read at the same time, in
    two processes (``read_sides``).
    """
    base, new = read_sides([(base_path, options.base_label, "base"),
                            (new_path, options.new_label, "new")],
                           options, progress, rank_progress)
    if not (options.base_label or options.new_label):
        base, new = distinct_labels([base, new], [base_path, new_path], ["base", "new"])
    return compare_runs(base, new, options, progress, invocation)


def diff_candidates(base_path: str | Path, new_paths: list[str | Path],
                    options: Options = Options(), labels: list[str | None] | None = None,
                    progress=lambda message: None,
                    rank_progress=lambda side, done, total: None,
                    invocation: Invocation | None = None) -> list[Result]:
    """One baseline against several candidates: every input read once, at the same time.

    ``labels`` names the base and then each candidate (None: the default label). Returns
    one Result per candidate, in order. With ``options.jobs`` ≥ ``SIDE_PROCESS_MIN_JOBS`` and
    inputs of at least ``PROCESS_MIN_BYTES`` the inputs are read in worker processes, two
    jobs or more each (``read_sides``).
    """
    labels = list(labels or [None] * (len(new_paths) + 1))
    items = [(base_path, labels[0], "base"),
             *[(path, label, f"new {i}") for i, (label, path)
               in enumerate(zip(labels[1:], new_paths), 1)]]
    runs = read_sides(items, options, progress, rank_progress)
    if not any(labels):
        candidates = (["new"] if len(new_paths) == 1
                      else [f"new{i}" for i in range(1, len(new_paths) + 1)])
        runs = distinct_labels(runs, [base_path, *new_paths], ["base", *candidates])
    base, news = runs[0], runs[1:]
    return [compare_runs(base, new, options, progress, invocation) for new in news]
