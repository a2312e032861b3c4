"""Step time (Stage) and its breakdown, base vs new, with a test over steps."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..schema import Run
from .stats import Settings, compare_steps, status_of

BREAKDOWN_FIELDS = ("computing", "communication_not_overlapped", "overlapped", "communication",
                    "free", "bubble", "preparing")


@dataclass(frozen=True)
class StepComparison:
    """Step time (Stage, µs per step) of both runs and its per-field breakdown."""

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



def _step_samples(run: Run) -> np.ndarray:
    """Stage time per step, mean over ranks (one sample per step)."""
    steps = run.steps
    if steps.empty:
        return np.array([])
    return steps.groupby(steps["step"].fillna(-1))["stage"].mean().to_numpy()


def compare_step(base: Run, new: Run, settings: Settings) -> StepComparison:
    """Step time and breakdown: means over steps and ranks, with a Welch test."""
    base_samples, new_samples = _step_samples(base), _step_samples(new)
    base_us = float(base_samples.mean()) if len(base_samples) else float("nan")
    new_us = float(new_samples.mean()) if len(new_samples) else float("nan")
    delta = new_us - base_us
    delta_pct = delta / base_us * 100 if base_us else float("nan")
    test = compare_steps(base_samples, new_samples, settings.confidence)
    significant = None if test.p_value is None else bool(test.p_value < settings.alpha)
    breakdown = {}
    for name in BREAKDOWN_FIELDS:
        b = float(base.steps[name].mean()) if len(base.steps) else float("nan")
        n = float(new.steps[name].mean()) if len(new.steps) else float("nan")
        breakdown[name] = {"base_us": b, "new_us": n, "delta_us": n - b}
    return StepComparison(base_us, new_us, delta, delta_pct, test.p_value, significant,
                          test.ci_low, test.ci_high, status_of(delta_pct, significant, settings),
                          tuple(base_samples), tuple(new_samples), breakdown)
