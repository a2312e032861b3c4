"""Compare stage: per-key statistics, category totals, step breakdown, communication.

All totals are per step and per rank (``_us`` per step, averaged over the compared
steps and, for several ranks, over ranks), so runs of different lengths compare.
``*_instances`` columns hold raw counts over the whole run.
"""


from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..match import Matched
from ..schema import Note, Run
from ..settings import DEFAULT_SETTINGS, Settings
from .communication import compare_communication, compare_groups
from .operators import compare_categories, compare_operators, count_units, units_of
from .ranks import compare_ranks
from .steps import BREAKDOWN_FIELDS, StepComparison, compare_step

__all__ = ["BREAKDOWN_FIELDS", "Comparison", "StepComparison", "compare", "units_of"]


@dataclass(frozen=True)
class Comparison:
    """Everything the later stages need; DataFrames are per key / category / type."""

    base: Run
    new: Run
    matched: Matched
    operators: pd.DataFrame
    categories: pd.DataFrame
    comm_types: pd.DataFrame
    step: StepComparison
    settings: Settings
    base_units: int
    new_units: int
    base_steps: tuple[int, ...]
    new_steps: tuple[int, ...]
    warnings: tuple[Note, ...] = field(default_factory=tuple)
    ranks: pd.DataFrame = field(default_factory=pd.DataFrame)
    groups: pd.DataFrame = field(default_factory=pd.DataFrame)



def _step_set(run: Run) -> tuple[int, ...]:
    ops = run.summary.ops
    steps = ops["step"] if len(ops) else run.steps["step"]
    return tuple(sorted(int(s) for s in steps.dropna().unique()))


def compare(base: Run, new: Run, matched: Matched,
            settings: Settings = DEFAULT_SETTINGS) -> Comparison:
    """Build the Comparison of two matched runs."""
    warnings = []
    base_units, new_units = count_units(base.summary.ops), count_units(new.summary.ops)
    operators = compare_operators(base, new, matched, settings, base_units, new_units)
    step = compare_step(base, new, settings)
    base_steps, new_steps = _step_set(base), _step_set(new)
    if base_steps != new_steps and base_steps and new_steps:
        warnings.append(Note("steps-differ", f"the runs cover different steps (base "
                             f"{_fmt_steps(base_steps)}, new {_fmt_steps(new_steps)}); "
                             "figures are per-step averages"))
    if step.p_value is None:
        warnings.append(Note("one-step", f"one step per side ({len(step.base_samples)} vs "
                             f"{len(step.new_samples)}): significance of the step change is "
                             f"unknown; the {settings.threshold_pct:g}% threshold alone "
                             "decides"))
    elif min(len(step.base_samples), len(step.new_samples)) < settings.few_steps:
        warnings.append(Note("few-steps", f"few steps ({len(step.base_samples)} vs "
                             f"{len(step.new_samples)}): step significance uses Welch's "
                             "t-test, which assumes roughly normal step times"))
    for run in (base, new):
        if run.summary.sampled:
            share = f"{run.summary.fraction:.1%} of every rank, step and operator, at least " \
                "one each" if run.summary.fraction else "one of every rank, step and operator"
            warnings.append(Note("sampled", f"{run.label}: per-operator medians, p95 and "
                                 f"tests use {run.summary.sample_size:,} of "
                                 f"{run.summary.kernels:,} kernel durations ({share}, as "
                                 "evenly spaced quantiles); counts and totals are exact"))
    if set(base.meta.ranks) != set(new.meta.ranks):
        warnings.append(Note("ranks-differ", f"rank sets differ (base "
                             f"{list(base.meta.ranks)}, new {list(new.meta.ranks)}); "
                             "per-rank means compare unequal sets"))
    if base.step_source != new.step_source:
        warnings.append(Note("step-source-differs", "one run's step breakdown comes from "
                             "step_trace_time.csv, the other's from kernel intervals; small "
                             "differences in the breakdown may be method, not performance"))
    groups, group_notes = compare_groups(base, new)
    warnings += group_notes
    return Comparison(base, new, matched, operators, compare_categories(operators),
                      compare_communication(base, new), step, settings, base_units,
                      new_units, base_steps, new_steps, tuple(warnings),
                      compare_ranks(base, new), groups)


def _fmt_steps(steps: tuple[int, ...]) -> str:
    if len(steps) > 6:
        return f"{steps[0]}…{steps[-1]} ({len(steps)} steps)"
    return ",".join(str(s) for s in steps)
