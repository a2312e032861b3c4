"""The library entry point: two paths in, a Report out (read → match → compare → analyse)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .analyse import Analysis, analyse
from .compare import Comparison, compare
from .match import match
from .readers import StepRanges, load_run, select_steps
from .report import Report, build_report
from .stats import Thresholds


@dataclass(frozen=True)
class Options:
    """What a caller may choose; the CLI fills it from its flags."""

    base_label: str | None = None
    new_label: str | None = None
    steps: StepRanges | None = None
    thresholds: Thresholds = Thresholds()
    top_n: int = 15
    fusion_map: Path | None = None
    alias_map: Path | None = None
    jobs: int = 1


@dataclass(frozen=True)
class Result:
    """The comparison and its report; ``comparison`` keeps the frames for library users."""

    comparison: Comparison
    analysis: Analysis
    report: Report


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
                       jobs=options.jobs,
                       progress=lambda done, total, side=side: rank_progress(side, done, total))
        runs.append(select_steps(run, options.steps))
        progress(f"  {len(run.ops):,} kernels, ranks {list(run.meta.ranks)}")
    base, new = runs
    progress("matching and comparing")
    comparison = compare(base, new, match(base.ops, new.ops), options.thresholds)
    analysis = analyse(comparison, options.fusion_map)
    return Result(comparison, analysis, build_report(comparison, analysis, options.top_n))
