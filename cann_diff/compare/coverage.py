"""Comparable at all? Two warnings that come before any verdict.

* ``excerpt``: a side's kernels cover under ``Thresholds.busy_share`` of its step. A
  29-row excerpt of a kernel table (10 ms of kernels over a 2.86 s span) or a trimmed test
  fixture says nothing about the step it is set against, and a run that busy only is
  host-bound or idle: either way the step figures compare unlike captures.
* ``unrelated``: the compute kernel keys both runs execute, paired by more than their
  family (collectives and copies left out: they pair whatever the model), hold under
  ``Thresholds.common_share`` of either side's compute kernel time, and the mix of kernel
  families overlaps by under ``Thresholds.common_family_share`` (a bigger batch changes
  every shape, 0 % of keys in common, and keeps the mix, 99.9 %). Measured on the real
  pairs: the 910A → 910B job 40 % / 50 % of keys, two ranks of a pipeline 96 % / 55 %,
  the msprof-analyze excerpt against an older capture 0.1 % (mix 29 %), two unrelated
  GPU traces 6.5 % (mix 6.5 %). Two traces of different models
  compare step times that no upgrade explains.

Both read the operator table (kernel time per step, every category) and the step figures.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ..schema import Note
from ..settings import Thresholds

UNSAID = ("communication", "memcpy")
FAMILY_ONLY = "type-only"  # match.py's last rung: the same family, other shapes


def _busy(operators: pd.DataFrame, side: str, step_us: float | None) -> float:
    """Kernel time per step over the step time, 0-1; NaN without either."""
    kernels = float(operators[f"{side}_total_us"].sum()) if len(operators) else 0.0
    if step_us is None or not math.isfinite(step_us) or step_us <= 0 or kernels <= 0:
        return math.nan
    return kernels / step_us


def coverage_notes(operators: pd.DataFrame, base_us: float | None, new_us: float | None,
                   labels: tuple[str, str], thresholds: Thresholds) -> list[Note]:
    """The ``excerpt`` and ``unrelated`` notes the runs call for (none for most pairs)."""
    notes = []
    for side, label, step in (("base", labels[0], base_us), ("new", labels[1], new_us)):
        busy = _busy(operators, side, step)
        if busy < thresholds.busy_share:
            kernels = busy * (step or 0.0)
            notes.append(Note("excerpt", f"{side} ({label}) is {busy:.2%} busy: its kernels "
                              f"take {kernels / 1000:,.2f} ms of a {(step or 0.0) / 1000:,.2f} "
                              "ms step — an excerpt of a profile, or a host-bound or idle "
                              "run? Its step figures do not describe the work its kernels do",
                              {"side": side, "busy_share": busy, "kernel_us": kernels,
                               "step_us": step}))
    unrelated = _unrelated(operators, thresholds)
    if unrelated is not None:
        notes.append(unrelated)
    return notes


def _unrelated(operators: pd.DataFrame, thresholds: Thresholds) -> Note | None:
    """The ``unrelated`` note: few keys in common, and a mix of families that differs too.

    Keys both runs execute, paired by more than their family (a family-only pair — any
    MatMul with any MatMul — is what two unrelated models share), must hold under
    ``common_share`` of either side's compute kernel time; and the family mix (each
    family's share of compute kernel time) must overlap by under ``common_family_share``,
    since a bigger batch or a longer sequence changes every shape but keeps the mix.
    Collectives pair by type and copies by direction whatever the model: only the kernels
    that compute say whether two runs are one workload.
    """
    kernels = operators[~operators["category"].isin(UNSAID).to_numpy(bool)] \
        if len(operators) else operators
    if not len(kernels):
        return None
    both = ((kernels["base_instances"] > 0) & (kernels["new_instances"] > 0)
            & (kernels["match_kind"] != FAMILY_ONLY))
    totals = [float(kernels[f"{side}_total_us"].sum()) for side in ("base", "new")]
    if not min(totals) > 0:  # a side without compute kernels: nothing to call unrelated
        return None
    shares = [float(kernels.loc[both, f"{side}_total_us"].sum()) / total
              for side, total in zip(("base", "new"), totals)]
    families = kernels.groupby(kernels["family"].astype(str))[["base_total_us",
                                                               "new_total_us"]].sum()
    overlap = float(np.minimum(families["base_total_us"] / totals[0],
                               families["new_total_us"] / totals[1]).sum())
    if min(shares) >= thresholds.common_share or overlap >= thresholds.common_family_share:
        return None
    return Note("unrelated", f"not the same workload: the compute kernel keys both runs "
                f"execute (paired by more than their family) hold only {shares[0]:.0%} of "
                f"base and {shares[1]:.0%} of new kernel time, and the kernel families' mix "
                f"overlaps by only {overlap:.0%}; the step change is not what an upgrade of "
                "one job's stack did", {"base_share": shares[0], "new_share": shares[1],
                                        "family_overlap": overlap})
