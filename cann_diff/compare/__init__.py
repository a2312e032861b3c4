"""Compare stage: per-key statistics, category totals, step breakdown, communication.

All totals are per step and per rank (``_us`` per step, averaged over the compared
steps and, for several ranks, over ranks), so runs of different lengths compare.
``*_instances`` columns hold raw counts over the whole run.

``Comparison.warnings`` are ``Note``s with a stable code: ``shapes-differ`` (first when
present: same-shape keys hold under ``same_shape_share`` of a side's kernel time),
``steps-differ``, ``steps-screened`` (warm-up/outlier steps left out of the step
comparison, named with their times), ``one-step``, ``few-steps``, ``sampled``,
``ranks-differ``, ``step-source-differs``.
"""


from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from .. import format as fmt
from ..match import Matched
from ..schema import MemoryData, Note, Run
from ..settings import DEFAULT_LIMITS, DEFAULT_THRESHOLDS, Limits, Thresholds
from .communication import compare_communication, compare_groups
from .comparability import Comparable, comparability
from .families import compare_families
from .framework import FrameworkComparison, compare_framework
from .memory import (
    MemoryComparison,
    compare_memory,
    copy_summary,
    has_memory_data,
    recorded_memory,
    without_missing_files,
)
from .non_compute import HostTime, collective_links, compare_skew, host_time, skew_note, with_parts
from .operators import (
    SAME_SHAPE_KINDS,
    compare_categories,
    compare_operators,
    count_units,
    same_shape_shares,
    units_of,
)
from .ranks import compare_ranks
from .steps import BREAKDOWN_FIELDS, ScreenedStep, StepComparison, StepFigures, compare_step

__all__ = ["BREAKDOWN_FIELDS", "SAME_SHAPE_KINDS", "Comparable", "Comparison", "HostTime",
           "ScreenedStep", "StepComparison", "StepFigures", "compare", "units_of"]


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
    thresholds: Thresholds
    base_units: int
    new_units: int
    base_steps: tuple[int, ...]
    new_steps: tuple[int, ...]
    warnings: tuple[Note, ...] = field(default_factory=tuple)
    ranks: pd.DataFrame = field(default_factory=pd.DataFrame)
    groups: pd.DataFrame = field(default_factory=pd.DataFrame)
    families: pd.DataFrame = field(default_factory=pd.DataFrame)
    limits: Limits = DEFAULT_LIMITS
    # Device memory: None when neither run recorded memory, copies or HBM samples.
    memory: MemoryComparison | None = None
    # Framework operators: None when a run links no host op to its kernels (the note says).
    framework: FrameworkComparison | None = None
    framework_note: Note | None = None
    # What differs besides the stack (chip, dtypes, algorithm, profiler settings, host).
    comparability: tuple[Comparable, ...] = ()
    # From the HCCL tasks and the host side (compare/non_compute.py): per (type, link type)
    # transfer, per (side, type, group) arrival skew (``skew_note`` says why there is
    # none), and host time with Free; empty / None when the profiles hold none.
    collective_links: pd.DataFrame = field(default_factory=pd.DataFrame)
    skew: pd.DataFrame = field(default_factory=pd.DataFrame)
    skew_note: str = ""
    host: HostTime | None = None


def _step_set(run: Run) -> tuple[int, ...]:
    ops = run.summary.ops
    steps = ops["step"] if len(ops) else run.steps["step"]
    return tuple(sorted(int(s) for s in steps.dropna().unique()))


def compare(base: Run, new: Run, matched: Matched,
            thresholds: Thresholds = DEFAULT_THRESHOLDS,
            limits: Limits = DEFAULT_LIMITS) -> Comparison:
    """Build the Comparison of two matched runs."""
    warnings = []
    base_units, new_units = count_units(base.summary.ops), count_units(new.summary.ops)
    operators = compare_operators(base, new, matched, thresholds, base_units, new_units,
                                  limits)
    step = compare_step(base, new, thresholds)
    base_steps, new_steps = _step_set(base), _step_set(new)
    if base_steps != new_steps and base_steps and new_steps:
        warnings.append(Note("steps-differ", f"the runs cover different steps (base "
                             f"{_fmt_steps(base_steps)}, new {_fmt_steps(new_steps)}); "
                             "figures are per-step averages"))
    warnings += _step_notes(step, thresholds)
    alike = comparability(base, new)
    shapes = _shapes_note(operators, thresholds, alike)
    if shapes:
        warnings.insert(0, shapes)
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
    # The framework tables cover every step: they explain Δ Stage over every step.
    every = step.all_steps if step.all_steps is not None else step
    framework, framework_note = compare_framework(base, new, thresholds, limits,
                                                  every.delta_us)

    comm_types = with_parts(compare_communication(base, new), base, new)
    return Comparison(base, new, matched, operators, compare_categories(operators),
                      comm_types, step, thresholds, base_units,
                      new_units, base_steps, new_steps, tuple(warnings),
                      compare_ranks(base, new), groups, compare_families(operators), limits,
                      _memory(base, new, thresholds), framework, framework_note, alike,
                      collective_links(base, new), compare_skew(base, new),
                      skew_note(base, new), host_time(base, new))


def _memory(base: Run, new: Run, thresholds: Thresholds) -> MemoryComparison | None:
    """The memory comparison, None when neither run recorded memory, copies or HBM."""
    memory = compare_memory(_memory_of(base), _memory_of(new), thresholds,
                            base_copies=copy_summary(base.summary.ops),
                            new_copies=copy_summary(new.summary.ops))
    if not has_memory_data(memory):
        return None
    # Only copies or HBM samples: the missing memory_record.csv etc. are expected
    # (profile_memory was off), not worth a note per rank.
    return memory if recorded_memory(memory) else without_missing_files(memory)


def _memory_of(run: Run) -> MemoryData:
    """A run's memory (``load_run`` always reads it; a Run built by hand may hold none)."""
    return run.memory if run.memory is not None else MemoryData(ranks=run.meta.ranks)


def _step_notes(step: StepComparison, thresholds: Thresholds) -> list[Note]:
    """Caveats of the step verdict: steps screened out, one step, few steps."""
    notes = []
    if step.screened:
        named = "; ".join(f"{s.side} step {s.step} ({fmt.ms(s.stage_us)} ms, "
                          f"{s.stage_us / s.median_us:.1f}× the median {fmt.ms(s.median_us)} ms)"
                          if s.median_us > 0 else f"{s.side} step {s.step}"
                          for s in step.screened)
        every = step.all_steps
        assert every is not None  # screening always keeps the figures over every step
        notes.append(Note("steps-screened", f"warm-up/outlier steps left out of the step "
                          f"comparison (robust z beyond {thresholds.step_outlier_z:g} on the "
                          f"step time): {named}. Over all steps the step changes by "
                          f"{fmt.pct(every.delta_pct)}; operator tables cover all steps; "
                          "--steps chooses the steps instead"))
    if step.p_value is None:
        notes.append(Note("one-step", f"one step per side ({len(step.base_samples)} vs "
                          f"{len(step.new_samples)}): significance of the step change is "
                          f"unknown; the {step.threshold_pct:g}% threshold alone decides"))
    elif min(len(step.base_samples), len(step.new_samples)) < thresholds.few_steps:
        notes.append(Note("few-steps", f"few steps ({len(step.base_samples)} vs "
                          f"{len(step.new_samples)}): step significance uses Welch's t-test "
                          "on log step times, which assumes roughly log-normal step times"))
    return notes


# Differences that change the shapes a kernel sees with the same model and batch: another
# chip or dtype picks other blocked formats (the C0 of NC1HWC0 is 16 for fp16, 8 for fp32).
SHAPE_CAUSES = ("device", "compute dtype mix")


def _shapes_note(operators: pd.DataFrame, thresholds: Thresholds,
                 alike: tuple[Comparable, ...] = ()) -> Note | None:
    """The ``shapes-differ`` caveat when same-shape keys hold little of the kernel time.

    A chip or dtype change is named as the likely cause before the batch-size guess.
    """
    base_share, new_share = same_shape_shares(operators)
    least = min(base_share, new_share)
    if not least < thresholds.same_shape_share:  # NaN (no kernels) says nothing
        return None
    causes = [c.what for c in alike if c.what in SHAPE_CAUSES]
    why = (f"the {' and the '.join(causes)} changed, and with them the blocked formats "
           "(the C0 of NC1HWC0) kernels see; else batch or sequence length changed"
           if causes else "batch or sequence length changed?")
    return Note("shapes-differ", f"the runs do not execute the same shapes: operator keys "
                f"with equal input shapes on both sides hold only {base_share:.0%} of base "
                f"and {new_share:.0%} of new kernel time ({why}). Per-operator verdicts cover "
                "those keys only; reshaped keys (same family, other shapes) are compared by "
                "totals and never called slower or faster", {"causes": causes})


def _fmt_steps(steps: tuple[int, ...]) -> str:
    if len(steps) > 6:
        return f"{steps[0]}…{steps[-1]} ({len(steps)} steps)"
    return ",".join(str(s) for s in steps)
