"""The library entry point: two paths in, a Report out (read → match → compare → analyse)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from .compare import Comparison, compare
from .compare.stats import load_distributions
from .errors import InputError
from .findings import Analysis, analyse
from .match import match
from .read import StepRanges, start_run
from .read.execute import Processes, plan_read, shared_workers, while_workers_read
from .read.formats import FORMATS, KERNEL_LESS
from .report import Invocation, Report, build_report
from .schema import Note, Run
from .settings import Limits, Thresholds

# The Note on a run whose kernel durations cannot be measurements (docs/design.md "Notes").
IMPLAUSIBLE = "implausible-durations"


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
    profiler suffixes skipped), else by the side after the label (a run compared with
    itself: ``cann7.0.1.3 (base)`` and ``cann7.0.1.3 (new)``; the charts already put the
    side before a label, so a side first read "base: base:cann7.0.1.3" there).
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
    return f"{run.label} ({side})"


def _ranks_text(ranks: tuple[int, ...]) -> str:
    if len(ranks) <= 8:
        return str(list(ranks))
    return f"{len(ranks)} ({ranks[0]}…{ranks[-1]})"


def read_side(path: str | Path, label: str | None, side: str, options: Options,
              progress=lambda message: None,
              rank_progress=lambda side, done, total: None) -> Run:
    """Read one input as the comparison needs it (summaries only, the chosen steps).

    Raises InputError when the input holds nothing to compare (``require_data``); a run
    whose kernel durations cannot be real carries an ``implausible-durations`` note.
    """
    return start_side(path, label, side, options, progress, rank_progress)()


def start_side(path: str | Path, label: str | None, side: str, options: Options,
               progress=lambda message: None,
               rank_progress=lambda side, done, total: None,
               named: bool = False) -> Callable[[], Run]:
    """``read_side`` in two halves (``read.start_run``): started now, the Run when called.

    ``named`` puts the side in the progress line of its kernels (the sides' lines mix).
    """
    progress(f"reading {side}: {path}")
    finish = start_run(path, label, limits=options.limits, fusion_map=options.fusion_map,
                       alias_map=options.alias_map, jobs=options.jobs,
                       scheduler=options.scheduler, keep_rows=False, steps=options.steps,
                       progress=lambda done, total: rank_progress(side, done, total))

    def run() -> Run:
        read = finish()
        require_data(read)
        where = f"{side}: " if named else ""
        progress(f"  {where}{read.summary.kernels:,} kernels, "
                 f"ranks {_ranks_text(read.meta.ranks)}")
        return flag_implausible(read)

    return run


def _has_memory(run: Run) -> bool:
    memory = run.memory
    return memory is not None and any(len(frame) for frame in (
        memory.summary.peaks, memory.summary.operators, memory.summary.hbm, memory.copies))


def require_data(run: Run) -> None:
    """Refuse a run with no kernel rows, no step times and no communication figures.

    Each reader accepts a rank that holds any one of them; a profile whose files are
    there but empty (a 0-byte db beside an empty communication.json, a db of unrelated
    tables) would otherwise give a report against nothing, and exit 0. A run with device
    memory alone is kept: the memory comparison reads it.
    """
    comm = run.summary.comm
    if run.summary.kernels or len(run.steps) or (len(comm) and comm["ops"].sum() > 0) \
            or _has_memory(run):
        return
    looked = next((f.looks_for for f in (*FORMATS, KERNEL_LESS) if f.name == run.meta.format),
                  None)
    where = f" (read as {run.meta.format}: {looked})" if looked else ""
    raise InputError(run.meta.path, f"nothing to compare: no kernel rows, no step times and "
                                    f"no communication data{where}")


def flag_implausible(run: Run) -> Run:
    """The run, with an ``implausible-durations`` note when its durations cannot be real.

    Every kernel lasting 0 µs, or every kernel of two or more operator types lasting
    exactly the same time, is no measurement: a profile written by a tool, or a column
    overwritten. The run is still compared (its step figures may be real); the note says
    why its kernel figures are not to be trusted.
    """
    durations = run.summary.samples["dur_us"]
    if run.summary.kernels < 2 or len(durations) < 2 or durations.nunique() != 1:
        return run
    value = float(durations.iloc[0])
    types = run.summary.ops["op_type"].nunique()
    if value == 0:
        text = (f"implausible kernel durations: all {run.summary.kernels:,} kernels last 0 µs; "
                "the kernel, operator and communication-kernel figures of this run are not "
                "measurements")
    elif types >= 2:
        text = (f"implausible kernel durations: all {run.summary.kernels:,} kernels, of "
                f"{types} operator types, last exactly {value:g} µs; the kernel and operator "
                "figures of this run are not measurements")
    else:
        return run
    return replace(run, warnings=(*run.warnings, Note(IMPLAUSIBLE, text,
                                                      {"duration_us": value})))


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


def _read_item(options: Options, item: tuple[str | Path, str | None, str]) -> Run:
    """``read_side`` of one (path, label, side), as a side worker runs it."""
    path, label, side = item
    return read_side(path, label, side, options)


def _raise(error: BaseException) -> Run:
    raise error


def _start_sides(items: list[tuple[str | Path, str | None, str]], options: Options,
                 progress, rank_progress) -> list[Callable[[], Run]]:
    """``start_side`` of each item, in order, up to the first that cannot start.

    That one's error (a bad input, or a bug) is raised when its Run is asked for, after
    the inputs before it, whose workers still read, have reported theirs: as when read one
    after the other. An interrupt is not deferred.
    """
    started: list[Callable[[], Run]] = []
    for path, label, side in items:
        try:
            started.append(start_side(path, label, side, options, progress, rank_progress,
                                      named=len(items) > 1))
        except Exception as error:  # noqa: BLE001 (raised in its turn, below)
            if not started:
                raise
            started.append(partial(_raise, error))
            break
    return started


def read_sides(items: list[tuple[str | Path, str | None, str]], options: Options,
               progress=lambda message: None,
               rank_progress=lambda side, done, total: None) -> list[Run]:
    """Read every (path, label, side), the sides in worker processes when planned so.

    The sides are independent: when ``execute.plan_read`` gives side workers (enough
    bytes and jobs, or on 2-3 jobs inputs whose ranks would not spread or that balance; no
    Dask scheduler: ``costs.side_plan``), they are read at the same time in processes (threads
    would share one interpreter lock), the jobs shared out for their ranks; else one after
    the other in this process, each with all ``jobs`` for its ranks.
    """
    plan = plan_read([path for path, _, _ in items], options.jobs, options.scheduler,
                     pool_min_s=options.limits.rank_pool_min_s)
    # The comparison's scipy import runs while workers read, if any do.
    with while_workers_read(load_distributions):
        if not plan.side_workers:
            # One pool of rank workers for all inputs: each input's chunks are handed to it
            # as soon as its ranks are found (``execute.SharedWorkers``), in order.
            with shared_workers(options.jobs):
                started = _start_sides(items, options, progress, rank_progress)
                return [finish() for finish in started]
        workers = plan.side_workers
        share = replace(options, jobs=plan.jobs)
        for path, _, side in items:
            progress(f"reading {side}: {path}")
        runs = Processes(workers, "cann_diff.pipeline").run(
            partial(_read_item, share), items, lambda done, total: None)
    for run, (_, _, side) in zip(runs, items):
        ranks = len(run.meta.ranks)
        rank_progress(side, ranks, ranks)
        progress(f"  {side}: {run.summary.kernels:,} kernels, "
                 f"ranks {_ranks_text(run.meta.ranks)}")
    return runs


def diff(base_path: str | Path, new_path: str | Path, options: Options = Options(),
         progress=lambda message: None,
         rank_progress=lambda side, done, total: None,
         invocation: Invocation | None = None) -> Result:
    """Read both profiles and compare them.

    ``progress`` receives short status messages, ``rank_progress(side, done, total)``
    is called as ranks are read; ``invocation`` (the CLI's command line and date) goes
    into the report's provenance. The two sides may be read at the same time, in two
    processes (``read_sides``).
    """
    base, new = read_sides([(base_path, options.base_label, "base"),
                            (new_path, options.new_label, "new")],
                           options, progress, rank_progress)
    if not (options.base_label or options.new_label):
        base, new = distinct_labels([base, new], [base_path, new_path], ["base", "new"])
    return compare_runs(base, new, options, progress, invocation)


def _read_path(base_path: str | Path, new_paths: list[str | Path], options: Options,
               labels: list[str | None] | None, progress, rank_progress) -> list[Run]:
    """BASE and every NEW read once, at the same time, their default labels told apart.

    ``labels`` names the base and then each other input (None: the default label).
    """
    labels = list(labels or [None] * (len(new_paths) + 1))
    items = [(base_path, labels[0], "base"),
             *[(path, label, f"new {i}") for i, (label, path)
               in enumerate(zip(labels[1:], new_paths), 1)]]
    runs = read_sides(items, options, progress, rank_progress)
    # Runs named by default are told apart (a candidate given twice is reported twice, as
    # "… (new1)" and "… (new2)"); names the caller gave are kept as given.
    paths = [base_path, *new_paths]
    sides = ["base", *(["new"] if len(new_paths) == 1
                       else [f"new{i}" for i in range(1, len(new_paths) + 1)])]
    defaulted = [i for i, label in enumerate(labels) if label is None]
    told = distinct_labels([runs[i] for i in defaulted], [paths[i] for i in defaulted],
                           [sides[i] for i in defaulted])
    for i, run in zip(defaulted, told):
        # Among several candidates the summary marks the base "(base)" itself.
        if i == 0 and len(new_paths) > 1 and run.label == f"{runs[0].label} (base)":
            continue
        runs[i] = run
    return runs


def diff_candidates(base_path: str | Path, new_paths: list[str | Path],
                    options: Options = Options(), labels: list[str | None] | None = None,
                    progress=lambda message: None,
                    rank_progress=lambda side, done, total: None,
                    invocation: Invocation | None = None,
                    on_result: Callable[[Result], None] = lambda result: None) -> list[Result]:
    """One baseline against several candidates: every input read once, at the same time.

    ``labels`` names the base and then each candidate (None: the default label). Returns
    one Result per candidate, in order; ``on_result`` gets each as soon as it is compared
    (the command line's chart workers start drawing it while the next is compared). The
    inputs may be read in worker processes, side by side (``read_sides``).
    """
    runs = _read_path(base_path, new_paths, options, labels, progress, rank_progress)
    base, news = runs[0], runs[1:]
    results = []
    for new in news:
        results.append(compare_runs(base, new, options, progress, invocation))
        on_result(results[-1])
    return results


def diff_ladder(base_path: str | Path, step_paths: list[str | Path],
                options: Options = Options(), labels: list[str | None] | None = None,
                progress=lambda message: None,
                rank_progress=lambda side, done, total: None,
                invocation: Invocation | None = None,
                on_result: Callable[[Result], None] = lambda result: None) -> list[Result]:
    """The steps of one upgrade path: each profile against the one before it, then the gate.

    Every input is read once. Returns the rungs' Results in path order (BASE vs STEP1,
    STEP1 vs STEP2, …) and last BASE vs the last step (the gate); ``on_result`` gets each
    as it is compared.
    """
    runs = _read_path(base_path, step_paths, options, labels, progress, rank_progress)
    results = []
    for base, new in [*zip(runs, runs[1:]), (runs[0], runs[-1])]:
        results.append(compare_runs(base, new, options, progress, invocation))
        on_result(results[-1])
    return results
