"""The library entry point: two paths in, a Report out (read → match → compare → analyse)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path

from .compare import Comparison, compare
from .compare.framework import FrameworkComparison, compare_framework
from .compare.memory import MemoryComparison, compare_memory, copy_summary, read_memory
from .findings import SEVERITY_ORDER, Analysis, Finding, analyse
from .match import match
from .read import StepRanges, load_run
from .report import Report, build_report
from .settings import Settings


@dataclass(frozen=True)
class Options:
    """What a caller may choose; the CLI fills it from its flags."""

    base_label: str | None = None
    new_label: str | None = None
    steps: StepRanges | None = None
    settings: Settings = Settings()
    top_n: int = 15
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
    memory: MemoryComparison | None = None
    framework: FrameworkComparison | None = None  # None: framework_note says why
    framework_note: str = ""


def _longer_label(path: Path, label: str, side: str) -> str:
    """Tell two runs with the same directory name apart by their parent directory."""
    parent = path.resolve().parent.name
    return f"{parent}/{label}" if parent else f"{side}:{label}"


def _ranks_text(ranks: tuple[int, ...]) -> str:
    if len(ranks) <= 8:
        return str(list(ranks))
    return f"{len(ranks)} ({ranks[0]}…{ranks[-1]})"


def has_memory_data(memory: MemoryComparison) -> bool:
    """True when at least one run recorded memory (profile_memory=True)."""
    return bool(memory.peak_reserved or memory.peak_allocated or memory.operators
                or memory.modules or memory.copies_total or memory.hbm)


def _with_memory_finding(analysis: Analysis, memory: MemoryComparison | None) -> Analysis:
    if memory is None or not memory.growth:
        return analysis
    g = memory.growth
    finding = Finding(g["id"], g["severity"], g["title"], g["detail"], 0.0,
                      {"delta_mb": g.get("delta_mb")})
    findings = sorted((*analysis.findings, finding),
                      key=lambda f: SEVERITY_ORDER.get(f.severity, len(SEVERITY_ORDER)))
    return Analysis(analysis.fusion, tuple(findings), analysis.fusion_keys)


def diff(base_path: str | Path, new_path: str | Path, options: Options = Options(),
         progress=lambda message: None,
         rank_progress=lambda side, done, total: None) -> Result:
    """Read both profiles and compare them.

    ``progress`` receives short status messages, ``rank_progress(side, done, total)``
    is called as ranks are read.
    """
    runs = []
    for side, path, label in (("base", base_path, options.base_label),
                              ("new", new_path, options.new_label)):
        progress(f"reading {side}: {path}")
        run = load_run(path, label, fusion_map=options.fusion_map, alias_map=options.alias_map,
                       jobs=options.jobs, scheduler=options.scheduler, keep_rows=False,
                       steps=options.steps,
                       progress=lambda done, total, side=side: rank_progress(side, done, total))
        runs.append(run)
        progress(f"  {run.summary.kernels:,} kernels, ranks {_ranks_text(run.meta.ranks)}")
    base, new = runs
    if base.label == new.label and not (options.base_label or options.new_label):
        base, new = (replace(run, label=_longer_label(Path(path), run.label, side))
                     for run, path, side in ((base, base_path, "base"), (new, new_path, "new")))
    progress("matching and comparing")
    comparison = compare(base, new, match(base.summary.ops, new.summary.ops), options.settings)
    progress("reading memory records")
    memory_of = partial(read_memory, jobs=options.jobs, scheduler=options.scheduler,
                        keep_rows=False)
    memory = compare_memory(memory_of(base_path), memory_of(new_path),
                            options.settings.threshold_pct,
                            base_copies=copy_summary(base.summary.ops),
                            new_copies=copy_summary(new.summary.ops))
    memory = memory if has_memory_data(memory) else None
    if memory is not None and not (memory.peak_reserved or memory.peak_allocated
                                   or memory.operators or memory.modules):
        # Only copies or HBM samples: the missing memory_record.csv etc. are expected
        # (profile_memory was off), not worth a note per rank.
        memory = replace(memory, warnings=tuple(w for w in memory.warnings
                                                if "profile_memory=True?" not in w))
    analysis = _with_memory_finding(analyse(comparison, options.fusion_map), memory)
    progress("comparing framework operators")
    framework, framework_note = compare_framework(base, new, options.settings)
    extra = {"memory": memory.to_dict() if memory else None,
             **(framework.to_dict() if framework else
                {"framework_ops": None, "framework_modules": None, "framework_notes": []}),
             "framework_note": framework_note or None}
    report = build_report(comparison, analysis, options.top_n, extra)
    if memory and memory.headline:
        report = replace(report, headline=f"{report.headline} {memory.headline}")
    return Result(comparison, analysis, report, memory, framework, framework_note)
