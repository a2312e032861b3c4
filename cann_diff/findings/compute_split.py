"""One arithmetic for the change in Computing, so every figure quoted about it reconciles.

Δ Computing (step_trace_time, µs per step, over all steps: the steps the operator tables
cover) splits into rows that sum to it exactly:

* ``like_for_like_us`` — kernels with the same input shapes on both sides (exact, renamed
  and family rungs), per-instance effect only: new instances per step × Δ mean. This is
  "the kernels got faster/slower".
* changed work — ``count_changed_us`` (the same keys' count effect: Δ instances per step
  × base mean), ``added_us`` (keys only in new), ``removed_us`` (keys only in base, < 0)
  and ``reshaped_us`` (keys paired by family without equal shapes: Δ of their totals).
* ``mc2_us`` — MC2 fusion: the fused kernels lost or gained (their hidden communication
  leaves or enters Computing) against the split compute kernels that replaced them. Only
  the instances a fusion group claims count here (``FusionGroup.base_claims`` /
  ``new_claims``); the other instances of the same keys stay in the rows above.
* ``rest_us`` — what kernel sums do not explain: Computing is the *union* of kernel
  intervals, so kernels overlapping on parallel engines, and time that is no kernel at
  all, land here. It is Δ Computing minus the rows above.

Communication kernels are left out (they are not Computing). Per key, with ``cb``/``cn``
the instances claimed by MC2 on each side, ``b' = base_count − cb`` and
``n' = new_count − cn``: Δ = (n'·m_new − b'·m_base) + (cn·m_new − cb·m_base), and the
first part is (n' − b')·m_base + n'·(m_new − m_base) — count effect plus per-instance
effect, as in compare/operators.py.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..compare import SAME_SHAPE_KINDS, Comparison
from .fusion import FusionGroup, claimed_instances

ROW_NAMES = {"like_for_like_us": "like-for-like kernels (same shapes, per-instance change)",
             "count_changed_us": "changed work: instances per step (same shapes)",
             "added_us": "changed work: kernels only in new",
             "removed_us": "changed work: kernels only in base",
             "reshaped_us": "changed work: reshaped kernels (same family, other shapes)",
             "mc2_us": "MC2 fusion (fused kernels vs their split compute kernels)",
             "rest_us": "rest (kernels overlapping each other, non-kernel time)"}


@dataclass(frozen=True)
class ComputeSplit:
    """Δ Computing in rows that sum to it exactly (µs per step and rank).

    ``delta_computing_us`` is NaN when a run has no step breakdown; ``rest_us`` is then
    NaN too. ``like_for_like_by_family`` holds the like-for-like row per family.
    """

    base_computing_us: float
    new_computing_us: float
    delta_computing_us: float
    like_for_like_us: float
    count_changed_us: float
    added_us: float
    removed_us: float
    reshaped_us: float
    mc2_us: float
    rest_us: float
    like_for_like_by_family: dict[str, float] = field(default_factory=dict)

    @property
    def changed_work_us(self) -> float:
        """Added, removed, reshaped and count-changed work together (µs per step)."""
        return self.count_changed_us + self.added_us + self.removed_us + self.reshaped_us

    def rows(self) -> list[tuple[str, str, float]]:
        """(field, label, µs per step) in table order; they sum to ``delta_computing_us``."""
        return [(name, label, getattr(self, name)) for name, label in ROW_NAMES.items()]

    def to_dict(self) -> dict:
        """JSON-ready form: the totals and one entry per row."""
        return {"base_computing_us": self.base_computing_us,
                "new_computing_us": self.new_computing_us,
                "delta_computing_us": self.delta_computing_us,
                "rows": [{"part": name, "label": label, "delta_us": value}
                         for name, label, value in self.rows()],
                "like_for_like_by_family": dict(self.like_for_like_by_family)}


def _residual_parts(kernels: pd.DataFrame, base_claims: dict[int, float],
                    new_claims: dict[int, float]) -> pd.DataFrame:
    """Per key: the MC2 part and the residual count/instance effects (µs per step)."""
    keys = kernels["key_id"]
    claimed_base = keys.map(base_claims).fillna(0.0).to_numpy()
    claimed_new = keys.map(new_claims).fillna(0.0).to_numpy()
    base_mean = kernels["base_mean_us"].where(kernels["base_instances"] > 0, 0.0).fillna(0.0)
    new_mean = kernels["new_mean_us"].where(kernels["new_instances"] > 0, 0.0).fillna(0.0)
    base_left = kernels["base_count"].to_numpy() - claimed_base
    new_left = kernels["new_count"].to_numpy() - claimed_new
    parts = pd.DataFrame(index=kernels.index)
    parts["mc2"] = claimed_new * new_mean - claimed_base * base_mean
    parts["residual"] = new_left * new_mean - base_left * base_mean
    parts["count"] = (new_left - base_left) * base_mean
    parts["instance"] = new_left * (new_mean - base_mean)
    return parts


def mc2_part(ops: pd.DataFrame, groups) -> pd.Series:
    """Per operator row, the Δ time per step (µs) of the instances MC2 groups claim."""
    base_claims, new_claims = claimed_instances(list(groups))
    return _residual_parts(ops, base_claims, new_claims)["mc2"]


def split_computing(cmp: Comparison, groups: list[FusionGroup] | tuple[FusionGroup, ...]
                    ) -> ComputeSplit:
    """Split Δ Computing (all steps) into like-for-like, changed work, MC2 and the rest."""
    ops = cmp.operators
    kernels = ops[(ops["category"] != "communication").to_numpy()]
    base_claims, new_claims = claimed_instances(list(groups))
    parts = _residual_parts(kernels, base_claims, new_claims)
    both = (kernels["base_instances"] > 0) & (kernels["new_instances"] > 0)
    same = both & kernels["match_kind"].isin(SAME_SHAPE_KINDS)
    added = kernels["base_instances"] == 0
    removed = kernels["new_instances"] == 0
    reshaped = both & ~same
    like = parts.loc[same, "instance"]
    by_family = like.groupby(kernels.loc[same, "family"].astype(str)).sum()
    every = cmp.step.all_steps or cmp.step
    computing = every.breakdown["computing"]
    rows = {"like_for_like_us": float(like.sum()),
            "count_changed_us": float(parts.loc[same, "count"].sum()),
            "added_us": float(parts.loc[added, "residual"].sum()),
            "removed_us": float(parts.loc[removed, "residual"].sum()),
            "reshaped_us": float(parts.loc[reshaped, "residual"].sum()),
            "mc2_us": float(parts["mc2"].sum())}
    delta = float(computing["delta_us"])
    rest = delta - sum(rows.values()) if math.isfinite(delta) else float("nan")
    return ComputeSplit(float(computing["base_us"]), float(computing["new_us"]), delta,
                        **rows, rest_us=float(rest),
                        like_for_like_by_family={str(k): float(v) for k, v in
                                                 by_family[np.abs(by_family) > 0].items()})
