"""Step time (Stage) and its breakdown, base vs new, with a test over steps.

Screening cannot bias: it looks at both sides the same way. A step is an outlier of its
side when its Stage lies beyond ``step_outlier_z`` robust z (median ± z·1.4826·MAD, no
floor on the spread) *and* at least ``step_outlier_pct`` off the side's median. Leading
slow outliers are warm-up: the longest such prefix of either side is left out of *both*
sides (if new's step 1 is warm-up, base's step 1 goes too), so no side loses a step the
other keeps; a side never loses half its steps. Mid-run outliers (a checkpoint, a host
stall) are part of the run and are kept on both sides: the step test from ``few_steps``
steps a side is Mann-Whitney with its Hodges-Lehmann ratio (``step_test.py``), to which a
2.5× step counts no more than one just above the rest; they are named in a note.
Dropping them from the side that happened to show them had made an ordinary +4 % stall
flip a +2 % regression to "unchanged". ``--steps`` (``screen_steps=False``) turns
screening off: the user chose the steps. The comparison keeps both the screened figures
(its own fields; the status and the gate use them) and the all-steps ones
(``all_steps``), which is what the per-operator tables cover. ``delta_pct`` is the change
of the mean step time (what the breakdown adds up to); ``shift_pct``, the test's own
estimate, decides the status and the gate with its p and interval, so that an outlier
kept in one mean cannot turn a slower step "improved".
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd

from ..schema import Run
from ..settings import Thresholds
from .stats import robust_z, status_of
from .step_test import step_test

BREAKDOWN_FIELDS = ("computing", "communication_not_overlapped", "overlapped", "communication",
                    "free", "bubble", "preparing")


@dataclass(frozen=True)
class ScreenedStep:
    """A step named by screening: its Stage (µs), its side's median, its robust z.

    ``reason``: ``warm-up`` (a leading outlier of its side, left out), ``paired`` (left
    out because the other side's warm-up holds its position), ``kept`` (a mid-run
    outlier, compared like any step).
    """

    side: str
    step: int
    stage_us: float
    median_us: float
    z: float
    reason: str = "warm-up"


@dataclass(frozen=True)
class StepFigures:
    """Step time of one selection of steps (µs per step, mean over steps and ranks).

    ``significant`` is None when a side has one step (no test possible); ``test`` names
    the step test (``mann-whitney``, ``welch-log``, None), ``shift_pct`` is its estimate
    of the change (Hodges-Lehmann or geometric-mean ratio − 1, in %; ``delta_pct`` when
    untested) and ``ci_low``/``ci_high`` bound the same ratio new/base.
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
    test: str | None = None
    shift_pct: float = float("nan")


@dataclass(frozen=True)
class StepComparison:
    """Step time (Stage, µs per step) of both runs, judged on the screened steps.

    The top-level figures are those of the steps compared (after screening);
    ``all_steps`` holds the same figures over every step. ``status`` follows the test's
    ``shift_pct`` against ``threshold_pct`` (``step_threshold_pct``, or
    ``one_step_threshold_pct`` when a side has one step), and is ``regressed`` whenever
    the gate fails. ``below_threshold``: a significant change smaller than the threshold.
    ``gate``: None without ``fail_on_regression_pct``, else whether that gate failed
    (``gate_failed``). ``screened``: the warm-up steps left out (both sides);
    ``outliers``: mid-run outliers kept in the comparison; ``test``: the step test used.
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
    test: str | None = None
    shift_pct: float = float("nan")
    outliers: tuple[ScreenedStep, ...] = field(default_factory=tuple)

    def gate_failed(self, pct: float, one_step_pct: float) -> bool:
        """Tell whether the gate ``--fail-on-regression pct`` fails.

        It fails when the screened step regressed significantly by at least ``pct``
        percent (the test's ``shift_pct``, as for the status). With one step per side no
        test is possible and the one-step threshold decides, as it decides the status:
        the step must be at least the larger of ``pct`` and ``one_step_pct`` slower.
        """
        if not math.isfinite(self.shift_pct) or self.significant is False:
            return False
        least = pct if self.significant else max(pct, one_step_pct)
        return bool(self.shift_pct >= least)


def _step_samples(run: Run) -> pd.Series:
    """Stage time per step, mean over ranks (one sample per step), indexed by step id."""
    steps = run.steps
    if steps.empty:
        return pd.Series(dtype=float)
    return steps.groupby(steps["step"].fillna(-1).astype("int64"))["stage"].mean()


def _outliers(samples: pd.Series,
              thresholds: Thresholds) -> tuple[np.ndarray, np.ndarray, float]:
    """Per step, whether it is an outlier of its side and its robust z; the side's median.

    An outlier lies beyond ``step_outlier_z`` robust z and ``step_outlier_pct`` off the
    median. A side with fewer than ``min_screen_steps`` steps has none.
    """
    values = samples.to_numpy(dtype=float)
    median = float(np.median(values)) if len(values) else float("nan")
    z = robust_z(values, 0.0)
    if len(values) < thresholds.min_screen_steps or not median > 0:
        return np.zeros(len(values), bool), z, median
    off_pct = np.abs(values / median - 1) * 100
    flagged = (np.abs(z) > thresholds.step_outlier_z) & (off_pct >= thresholds.step_outlier_pct)
    return flagged, z, median


def _screen(base: pd.Series, new: pd.Series, thresholds: Thresholds) -> tuple[
        pd.Series, pd.Series, list[ScreenedStep], list[ScreenedStep]]:
    """The steps kept per side, the warm-up steps left out and the mid-run outliers kept.

    Warm-up is the longest leading run of slow outliers on either side, left out of both
    (the same positions), never half of a side's steps.
    """
    flags = {side: _outliers(samples, thresholds) for side, samples in
             (("base", base), ("new", new))}
    warm = 0
    if thresholds.screen_steps and min(len(base), len(new)) >= thresholds.min_screen_steps:
        leading = max(int(np.cumprod(flagged & (z > 0)).sum()) for flagged, z, _ in
                      flags.values())
        warm = min(leading, (len(base) - 1) // 2, (len(new) - 1) // 2)
    screened: list[ScreenedStep] = []
    outliers: list[ScreenedStep] = []
    for side, samples in (("base", base), ("new", new)):
        flagged, z, median = flags[side]
        position = np.arange(len(samples))
        named = [(position < warm) & flagged, (position < warm) & ~flagged,
                 (position >= warm) & flagged]
        for picked, reason, into in zip(named, ("warm-up", "paired", "kept"),
                                        (screened, screened, outliers)):
            into += [ScreenedStep(side, int(step), float(value), median, float(score), reason)
                     for step, value, score in zip(samples.index[picked], samples[picked],
                                                   z[picked])]
    screened.sort(key=lambda s: (s.side != "base", s.step))
    return base.iloc[warm:], new.iloc[warm:], screened, outliers


def _breakdown(base: Run, new: Run, base_steps, new_steps) -> dict[str, dict[str, float]]:
    """Mean of every breakdown field over the (rank, step) rows of the steps given."""
    def means(run: Run, steps) -> pd.Series:
        rows = run.steps[run.steps["step"].fillna(-1).astype("int64").isin(list(steps))]
        return rows[list(BREAKDOWN_FIELDS)].mean() if len(rows) else \
            pd.Series(float("nan"), index=list(BREAKDOWN_FIELDS))

    base_us, new_us = means(base, base_steps), means(new, new_steps)
    return {name: {"base_us": float(base_us[name]), "new_us": float(new_us[name]),
                   "delta_us": float(new_us[name]) - float(base_us[name])}
            for name in BREAKDOWN_FIELDS}


def _figures(base: Run, new: Run, base_samples: pd.Series, new_samples: pd.Series,
             thresholds: Thresholds) -> StepFigures:
    base_us = float(base_samples.mean()) if len(base_samples) else float("nan")
    new_us = float(new_samples.mean()) if len(new_samples) else float("nan")
    delta = new_us - base_us
    delta_pct = delta / base_us * 100 if base_us else float("nan")
    test = step_test(base_samples.to_numpy(), new_samples.to_numpy(), thresholds.confidence,
                     thresholds.few_steps)
    significant = None if test.p_value is None else bool(test.p_value < thresholds.alpha)
    shift_pct = delta_pct if test.ratio is None else (test.ratio - 1) * 100
    base_steps = tuple(int(s) for s in base_samples.index)
    new_steps = tuple(int(s) for s in new_samples.index)
    return StepFigures(base_us, new_us, delta, delta_pct, test.p_value, significant,
                       test.ci_low, test.ci_high, tuple(base_samples), tuple(new_samples),
                       base_steps, new_steps, _breakdown(base, new, base_steps, new_steps),
                       test.name, shift_pct)


def compare_step(base: Run, new: Run, thresholds: Thresholds) -> StepComparison:
    """Step time and breakdown on the screened steps (and on all steps), with the verdict."""
    base_all, new_all = _step_samples(base), _step_samples(new)
    base_kept, new_kept, screened, outliers = _screen(base_all, new_all, thresholds)
    every = _figures(base, new, base_all, new_all, thresholds)
    kept = every if not screened else _figures(base, new, base_kept, new_kept, thresholds)
    threshold = (thresholds.one_step_threshold_pct if kept.significant is None
                 else thresholds.step_threshold_pct)
    status = status_of(kept.shift_pct, kept.significant, threshold)
    comparison = StepComparison(
        kept.base_us, kept.new_us, kept.delta_us, kept.delta_pct, kept.p_value,
        kept.significant, kept.ci_low, kept.ci_high, status, kept.base_samples,
        kept.new_samples, kept.breakdown, threshold_pct=threshold,
        base_steps=kept.base_steps, new_steps=kept.new_steps,
        screened=tuple(screened), all_steps=every, test=kept.test,
        shift_pct=kept.shift_pct, outliers=tuple(outliers))
    gate = None
    if thresholds.fail_on_regression_pct is not None:
        gate = comparison.gate_failed(thresholds.fail_on_regression_pct,
                                      thresholds.one_step_threshold_pct)
        status = "regressed" if gate else status
    below = bool(kept.significant and status == "unchanged" and math.isfinite(kept.shift_pct))
    return replace(comparison, status=status, gate=gate,
                   gate_pct=thresholds.fail_on_regression_pct, below_threshold=below)
