"""Compare stage: per-key statistics, category totals, step breakdown, communication.

All totals are per step and per rank (``_us`` per step, averaged over the compared
steps and, for several ranks, over ranks), so runs of different lengths compare.
``*_instances`` columns hold raw counts over the whole run.

``Comparison.warnings`` are ``Note``s with a stable code, in this order: ``excerpt`` /
``unrelated`` (a side under ``busy_share`` busy; runs sharing under ``common_share`` of
their compute kernel time), ``shapes-differ`` (same-shape keys hold under
``same_shape_share`` of a side's kernel time), ``no-shapes`` (kernels without input
shapes hold as much: compared by type only), ``steps-differ``, ``steps-screened``
(warm-up steps left out of both sides, named with their times), ``step-outliers``
(mid-run outlier steps kept and named), ``one-step``, ``few-steps``, ``sampled``,
``ranks-differ``, ``step-source-differs``.
"""


from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from .. import format as fmt
from ..match import Matched
from ..schema import MemoryData, Note, Run
from ..settings import DEFAULT_LIMITS, DEFAULT_THRESHOLDS, Limits, Thresholds
from .attributes import AttributeComparison, compare_attributes, empty_attributes, why
from .communication import compare_communication, compare_groups
from .comparability import Comparable, comparability
from .coverage import coverage_notes
from .families import compare_families
from .framework import FrameworkComparison, compare_framework
from .ledger import on_steps, one_source
from .memory import (
    MemoryComparison,
    compare_memory,
    copy_summary,
    has_memory_data,
    recorded_memory,
    without_missing_files,
)
from .non_compute import (
    HostTime,
    arrivals,
    collective_links,
    compare_skew,
    host_time,
    skew_note,
    with_parts,
)
from .operators import (
    SAME_SHAPE_KINDS,
    compare_categories,
    compare_operators,
    count_units,
    no_shapes_note,
    same_shape_shares,
    units_of,
)
from .ranks import compare_ranks
from .steps import BREAKDOWN_FIELDS, ScreenedStep, StepComparison, StepFigures, compare_step

__all__ = ["BREAKDOWN_FIELDS", "SAME_SHAPE_KINDS", "AttributeComparison", "Comparable",
           "Comparison", "HostTime", "ScreenedStep", "StepComparison", "StepFigures",
           "compare", "units_of"]


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
    # Per (collective instance, rank) of the compared steps, when each rank arrived
    # (``non_compute.arrivals``), base and new: what the skew table and late-rank read.
    arrivals: tuple[pd.DataFrame, pd.DataFrame] = (pd.DataFrame(), pd.DataFrame())
    # Per operator key, its kernels' attributes and pipes on both sides and which changed
    # (compare/attributes.py); ``operators["why"]`` says it in a few words.
    attributes: AttributeComparison = field(default_factory=empty_attributes)


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
    attributes = compare_attributes(base, new, matched, thresholds.attribute_change_share)
    operators["why"] = why(operators, attributes)
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
    shapeless = no_shapes_note(operators, thresholds)
    if shapeless:
        warnings.insert(1 if shapes else 0, shapeless)
    warnings[:0] = coverage_notes(operators, step.base_us, step.new_us, (base.label, new.label),
                                  thresholds)
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
    # The framework tables cover every step: they explain Δ Stage over every step.
    every = step.all_steps if step.all_steps is not None else step
    framework, framework_note = compare_framework(base, new, thresholds, limits,
                                                  every.delta_us)

    # The sections that split a part of the step cover the steps the step table covers.
    whole = not step.screened  # nothing screened: every step is compared
    b, n = on_steps(base, step.base_steps, whole), on_steps(new, step.new_steps, whole)
    comm_types = one_source(with_parts(compare_communication(b, n), b, n))
    groups, group_notes = compare_groups(b, n)
    warnings += group_notes
    came = (arrivals(b), arrivals(n))
    return Comparison(base, new, matched, operators, compare_categories(operators),
                      comm_types, step, thresholds, base_units,
                      new_units, base_steps, new_steps, tuple(warnings),
                      compare_ranks(b, n), groups, compare_families(operators), limits,
                      _memory(base, new, thresholds), framework, framework_note, alike,
                      collective_links(b, n), compare_skew(*came),
                      skew_note(base, new), host_time(b, n), came, attributes)


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
    """Caveats of the step verdict: warm-up left out, outliers kept, one step, few steps."""
    from .step_test import MANN_WHITNEY, WELCH_LOG

    def one(s: ScreenedStep) -> str:
        if not s.median_us > 0:
            return f"{s.side} step {s.step}"
        paired = ", left out with the other side's warm-up" if s.reason == "paired" else ""
        return (f"{s.side} step {s.step} ({fmt.ms(s.stage_us)} ms, {s.stage_us / s.median_us:.1f}"
                f"× the median {fmt.ms(s.median_us)} ms{paired})")

    def named(steps: tuple[ScreenedStep, ...]) -> str:
        return "; ".join(one(s) for s in steps)

    rule = (f"beyond {thresholds.step_outlier_z:g} robust z and at least "
            f"{thresholds.step_outlier_pct:g}% off their side's median step time")
    notes = []
    if step.screened:
        every = step.all_steps
        assert every is not None  # screening always keeps the figures over every step
        notes.append(Note("steps-screened", f"leading warm-up steps left out of the step "
                          f"comparison, at the same positions on both sides (steps {rule}, "
                          f"slower): {named(step.screened)}. Over all steps the step test's "
                          f"estimate is {fmt.pct(every.shift_pct)} (the mean step "
                          f"{fmt.pct(every.delta_pct)}); operator tables cover all steps; "
                          "--steps chooses the steps instead"))
    if step.outliers:
        if step.test == MANN_WHITNEY:
            how = ("the step test (Mann-Whitney, both sides alike) counts each no more than "
                   "a step just above the rest; its estimate (Hodges-Lehmann), which the "
                   f"status follows, is {fmt.pct(step.shift_pct)}, while the mean step time "
                   f"changes by {fmt.pct(step.delta_pct)}")
        elif step.test == WELCH_LOG:
            how = (f"with fewer than {thresholds.few_steps} steps a side the step test "
                   "(Welch's t on log step times) is not robust to them: its p grows and "
                   "the verdict stays cautious; --steps chooses the steps")
        else:
            how = "the step is not tested (one step on a side)"
        where = "not leading" if thresholds.screen_steps else "of the steps --steps chose"
        notes.append(Note("step-outliers", f"outlier steps kept in the step comparison "
                          f"(steps {rule}, {where}): {named(step.outliers)}; {how}"))
    if step.p_value is None:
        notes.append(Note("one-step", f"one step per side ({len(step.base_samples)} vs "
                          f"{len(step.new_samples)}): significance of the step change is "
                          f"unknown; the {step.threshold_pct:g}% threshold alone decides"))
    elif step.test == WELCH_LOG:
        notes.append(Note("few-steps", f"few steps ({len(step.base_samples)} vs "
                          f"{len(step.new_samples)}): step significance uses Welch's t-test "
                          "on log step times, which assumes roughly log-normal step times "
                          f"(from {thresholds.few_steps} steps a side: Mann-Whitney)"))
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
