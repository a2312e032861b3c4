"""Step time (Stage) and its breakdown, base vs new, with a test over steps.

Warm-up and outlier steps are screened out before the step is judged: per side, a step
whose Stage lies beyond ``step_outlier_z`` robust z (median ± z·1.4826·MAD, the MAD
floored at ``step_floor_pct`` of the median) is left out, the first steps judged like
any other. One 2.7× warm-up step per side otherwise pins Welch's t near 1 and hides a
steady 10 % regression from the gate. ``--steps`` (``screen_steps=False``) turns
screening off: the user chose the steps. The comparison keeps both the screened figures
(its own fields; the status and the gate use them) and the all-steps ones
(``all_steps``), which is what the per-operator tables cover.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ..schema import Run
from ..settings import Thresholds
from .stats import compare_steps, robust_z, status_of

BREAKDOWN_FIELDS = ("computing", "communication_not_overlapped", "overlapped", "communication",
                    "free", "bubble", "preparing")


@dataclass(frozen=True)
class ScreenedStep:
    """A step left out of the step comparison: its Stage (µs), its side's median, its z."""

    side: str
    step: int
    stage_us: float
    median_us: float
    z: float


@dataclass(frozen=True)
class StepFigures:
    """Step time of one selection of steps (µs per step, mean over steps and ranks).

    ``significant`` is None when a side has one step (no test possible);
    ``ci_low``/``ci_high`` bound the ratio of geometric means new/base.
    """

    base_us: float
    new_us: float
    delta_us: float
    delta_pct: float
    p_value: float | None
    significant: bool | None
    ci_low: float | None
    ci_high: float | None
    base_samples: tuple[float, ...]
    new_samples: tuple[float, ...]
    base_steps: tuple[int, ...]
    new_steps: tuple[int, ...]
    breakdown: dict[str, dict[str, float]]


@dataclass(frozen=True)
class StepComparison:
    """Step time (Stage, µs per step) of both runs, judged on the screened steps.

    The top-level figures are those of the steps compared (after screening);
    ``all_steps`` holds the same figures over every step. ``status`` follows
    ``threshold_pct`` (``step_threshold_pct``, or ``one_step_threshold_pct`` when a side
    has one step), and is ``regressed`` whenever the gate fails. ``below_threshold``: a
    significant change smaller than the threshold. ``gate``: None without
    ``fail_on_regression_pct``, else whether that gate failed (``gate_failed``).
    """

    base_us: float
    new_us: float
    delta_us: float
    delta_pct: float
    p_value: float | None
    significant: bool | None
    ci_low: float | None
    ci_high: float | None
    status: str
    base_samples: tuple[float, ...]
    new_samples: tuple[float, ...]
    breakdown: dict[str, dict[str, float]]
    below_threshold: bool = False
    threshold_pct: float = 2.0
    gate_pct: float | None = None
    gate: bool | None = None
    base_steps: tuple[int, ...] = ()
    new_steps: tuple[int, ...] = ()
    screened: tuple[ScreenedStep, ...] = field(default_factory=tuple)
    all_steps: StepFigures | None = None

    def gate_failed(self, pct: float, one_step_pct: float) -> bool:
        """Tell whether the gate ``--fail-on-regression pct`` fails.

        It fails when the screened step regressed significantly by at least ``pct``
        percent. With one step per side no test is possible and the one-step threshold
        decides, as it decides the status: the step must be at least the larger of
        ``pct`` and ``one_step_pct`` slower.
        """
        if not math.isfinite(self.delta_pct) or self.significant is False:
            return False
        least = pct if self.significant else max(pct, one_step_pct)
        return bool(self.delta_pct >= least)


def _step_samples(run: Run) -> pd.Series:
    """Stage time per step, mean over ranks (one sample per step), indexed by step id."""
    steps = run.steps
    if steps.empty:
        return pd.Series(dtype=float)
    return steps.groupby(steps["step"].fillna(-1).astype("int64"))["stage"].mean()


def _screen(samples: pd.Series, side: str, thresholds: Thresholds) -> tuple[pd.Series,
                                                                         list[ScreenedStep]]:
    """The steps kept and the steps screened out, by robust z on Stage."""
    if not thresholds.screen_steps or len(samples) < thresholds.min_screen_steps:
        return samples, []
    median = float(samples.median())
    z = robust_z(samples.to_numpy(), thresholds.step_floor_pct / 100 * abs(median))
    out = np.abs(z) > thresholds.step_outlier_z
    screened = [ScreenedStep(side, int(step), float(value), median, float(score))
                for step, value, score in zip(samples.index[out], samples[out], z[out])]
    return samples[~out], screened


def _breakdown(base: Run, new: Run, base_steps, new_steps) -> dict[str, dict[str, float]]:
    """Mean of every breakdown field over the (rank, step) rows of the steps given."""
    def mean(run: Run, steps, name: str) -> float:
        rows = run.steps[run.steps["step"].fillna(-1).astype("int64").isin(list(steps))]
        return float(rows[name].mean()) if len(rows) else float("nan")

    return {name: {"base_us": mean(base, base_steps, name), "new_us": mean(new, new_steps, name),
                   "delta_us": mean(new, new_steps, name) - mean(base, base_steps, name)}
            for name in BREAKDOWN_FIELDS}


def _figures(base: Run, new: Run, base_samples: pd.Series, new_samples: pd.Series,
             thresholds: Thresholds) -> StepFigures:
    base_us = float(base_samples.mean()) if len(base_samples) else float("nan")
    new_us = float(new_samples.mean()) if len(new_samples) else float("nan")
    delta = new_us - base_us
    delta_pct = delta / base_us * 100 if base_us else float("nan")
    test = compare_steps(base_samples.to_numpy(), new_samples.to_numpy(), thresholds.confidence)
    significant = None if test.p_value is None else bool(test.p_value < thresholds.alpha)
    base_steps = tuple(int(s) for s in base_samples.index)
    new_steps = tuple(int(s) for s in new_samples.index)
    return StepFigures(base_us, new_us, delta, delta_pct, test.p_value, significant,
                       test.ci_low, test.ci_high, tuple(base_samples), tuple(new_samples),
                       base_steps, new_steps, _breakdown(base, new, base_steps, new_steps))


def compare_step(base: Run, new: Run, thresholds: Thresholds) -> StepComparison:
    """Step time and breakdown on the screened steps (and on all steps), with the verdict."""
    base_all, new_all = _step_samples(base), _step_samples(new)
    base_kept, base_out = _screen(base_all, "base", thresholds)
    new_kept, new_out = _screen(new_all, "new", thresholds)
    every = _figures(base, new, base_all, new_all, thresholds)
    kept = every if not (base_out or new_out) else _figures(base, new, base_kept, new_kept,
                                                             thresholds)
    threshold = (thresholds.one_step_threshold_pct if kept.significant is None
                 else thresholds.step_threshold_pct)
    status = status_of(kept.delta_pct, kept.significant, threshold)
    comparison = StepComparison(
        kept.base_us, kept.new_us, kept.delta_us, kept.delta_pct, kept.p_value,
        kept.significant, kept.ci_low, kept.ci_high, status, kept.base_samples,
        kept.new_samples, kept.breakdown, threshold_pct=threshold,
        base_steps=kept.base_steps, new_steps=kept.new_steps,
        screened=tuple(base_out + new_out), all_steps=every)
    gate = None
    if thresholds.fail_on_regression_pct is not None:
        gate = comparison.gate_failed(thresholds.fail_on_regression_pct,
                                      thresholds.one_step_threshold_pct)
        status = "regressed" if gate else status
    below = bool(kept.significant and status == "unchanged" and math.isfinite(kept.delta_pct))
    return replace(comparison, status=status, gate=gate,
                   gate_pct=thresholds.fail_on_regression_pct, below_threshold=below)
