"""One arithmetic for the change in Computing, so every figure quoted about it reconciles.

Δ Computing (step_trace_time, µs per step, over all steps: the steps the operator tables
cover) splits into rows that sum to it exactly:

* ``like_for_like_us`` — kernels with the same input shapes on both sides (exact, renamed
  and family rungs), per-instance effect only. This is "the kernels got faster/slower".
  A key without shapes is like for like only with as many instances per step on both
  sides (``per_instance``); the row's label says when its kernels were matched by type.
* changed work — ``count_changed_us`` (the count effect of the keys whose status is
  ``count-changed``: Δ instances per step × base mean, or the whole Δ of a type without
  shapes, compared by its totals), ``added_us`` (keys only in new), ``removed_us`` (keys
  only in base, < 0) and ``reshaped_us`` (keys paired by family without equal shapes: Δ
  of their totals).
* ``mc2_us`` — MC2 fusion: the fused kernels lost or gained (their hidden communication
  leaves or enters Computing) against the split compute kernels that replaced them. Only
  the instances a fusion group claims count here (``FusionGroup.base_claims`` /
  ``new_claims``); the other instances of the same keys stay in the rows above.
* ``rest_us`` — what kernel sums do not explain: Computing is the *union* of kernel
  intervals, so kernels overlapping on parallel engines, and time that is no kernel at
  all, land here. It is Δ Computing minus the rows above.

Communication kernels are left out (they are not Computing). Per key, with ``cb``/``cn``
the instances claimed by MC2 on each side, ``b' = base_count − cb`` and
``n' = new_count − cn``: Δ = (n'·m_new − b'·m_base) + (cn·m_new − cb·m_base). The
first part (the residual) splits as compare/operators.py splits Δ: for a count-changed
key compared per instance, (n' − b')·m_base + n'·(m_new − m_base), count effect plus
per-instance effect; for a count-changed key without shapes, all count effect; for any
other key, whose count did not change, all per-instance effect. ``effect_parts`` is that
split, and the count-changed finding quotes its count effect: one definition.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..compare import SAME_SHAPE_KINDS, Comparison
from ..compare.operators import has_shapes
from .fusion import FusionGroup, claimed_instances

ROW_NAMES = {"like_for_like_us": "like-for-like kernels (same shapes, per-instance change)",
             "count_changed_us": "changed work: instances per step (same shapes)",
             "added_us": "changed work: kernels only in new",
             "removed_us": "changed work: kernels only in base",
             "reshaped_us": "changed work: reshaped kernels (same family, other shapes)",
             "mc2_us": "MC2 fusion (fused kernels vs their split compute kernels)",
             "rest_us": "rest (kernels overlapping each other, non-kernel time)"}
# The two rows of same-rung keys, when some or all of their kernels carry no input shapes
# (Level0): then they were matched by type, and compared per instance only at equal counts.
ROW_NAMES_BY_TYPE = {
    ("like_for_like_us", "none"): "like-for-like kernels (same type and count per step; no "
                                  "shapes recorded)",
    ("like_for_like_us", "some"): "like-for-like kernels (same shapes or, without shapes, "
                                  "same type and count)",
    ("count_changed_us", "none"): "changed work: instances per step (same type; no shapes: "
                                  "by totals)",
    ("count_changed_us", "some"): "changed work: instances per step (same shapes; by totals "
                                  "without shapes)"}


@dataclass(frozen=True)
class ComputeSplit:
    """Δ Computing in rows that sum to it exactly (µs per step and rank).

    ``delta_computing_us`` is NaN when a run has no step breakdown; ``rest_us`` is then
    NaN too. ``like_for_like_by_family`` holds the like-for-like row per family.
    ``like_for_like_shapes`` / ``count_changed_shapes``: whether the keys of that row
    carry input shapes, ``all``, ``some`` or ``none`` (Level0): its label says so.
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
    like_for_like_shapes: str = "all"
    count_changed_shapes: str = "all"

    @property
    def changed_work_us(self) -> float:
        """Added, removed, reshaped and count-changed work together (µs per step)."""
        return self.count_changed_us + self.added_us + self.removed_us + self.reshaped_us

    def rows(self) -> list[tuple[str, str, float]]:
        """(field, label, µs per step) in table order; they sum to ``delta_computing_us``."""
        shapes = {"like_for_like_us": self.like_for_like_shapes,
                  "count_changed_us": self.count_changed_shapes}
        return [(name, ROW_NAMES_BY_TYPE.get((name, shapes.get(name, "all")), label),
                 getattr(self, name)) for name, label in ROW_NAMES.items()]

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
    """Per key: the MC2 part, the residual and its count/instance effects (µs per step)."""
    keys = kernels["key_id"]
    claimed_base = keys.map(base_claims).fillna(0.0).to_numpy()
    claimed_new = keys.map(new_claims).fillna(0.0).to_numpy()
    base_mean = kernels["base_mean_us"].where(kernels["base_instances"] > 0, 0.0).fillna(0.0)
    new_mean = kernels["new_mean_us"].where(kernels["new_instances"] > 0, 0.0).fillna(0.0)
    base_left = kernels["base_count"].to_numpy() - claimed_base
    new_left = kernels["new_count"].to_numpy() - claimed_new
    counted = (kernels["status"] == "count-changed").to_numpy()
    by_instance = kernels["per_instance"].to_numpy(dtype=bool)
    parts = pd.DataFrame(index=kernels.index)
    parts["mc2"] = claimed_new * new_mean - claimed_base * base_mean
    parts["residual"] = new_left * new_mean - base_left * base_mean
    parts["base_left"], parts["new_left"] = base_left, new_left
    # A count change compared per instance: Δ instances × base mean; without shapes, by
    # its totals: all of it; any other key's count did not change: none of it.
    parts["count"] = np.where(counted & by_instance, (new_left - base_left) * base_mean,
                              np.where(counted, parts["residual"], 0.0))
    parts["instance"] = parts["residual"] - parts["count"]
    return parts


def effect_parts(ops: pd.DataFrame, groups) -> pd.DataFrame:
    """Per operator row, Δ time per step (µs) in the split's parts.

    Columns: ``mc2`` (the instances MC2 groups claim), ``residual`` (the rest of Δ),
    ``count`` and ``instance`` (the residual's count and per-instance effects, summing to
    it), ``base_left``/``new_left`` (instances per step no group claims). The one
    definition of a key's count effect: the split's count row and the count-changed
    finding both sum ``count``.
    """
    base_claims, new_claims = claimed_instances(list(groups))
    return _residual_parts(ops, base_claims, new_claims)


def _coverage(recorded: pd.Series) -> str:
    """``all``, ``none`` or ``some``: how many of a row's keys carry input shapes."""
    if recorded.all():
        return "all"
    return "none" if not recorded.any() else "some"


def mc2_part(ops: pd.DataFrame, groups) -> pd.Series:
    """Per operator row, the Δ time per step (µs) of the instances MC2 groups claim."""
    return effect_parts(ops, groups)["mc2"]


def split_computing(cmp: Comparison, groups: list[FusionGroup] | tuple[FusionGroup, ...]
                    ) -> ComputeSplit:
    """Split Δ Computing (all steps) into like-for-like, changed work, MC2 and the rest."""
    ops = cmp.operators
    kernels = ops[(ops["category"] != "communication").to_numpy()]
    parts = effect_parts(kernels, groups)
    both = (kernels["base_instances"] > 0) & (kernels["new_instances"] > 0)
    same = both & kernels["match_kind"].isin(SAME_SHAPE_KINDS)
    added = kernels["base_instances"] == 0
    removed = kernels["new_instances"] == 0
    reshaped = both & ~same
    counted = same & (kernels["status"] == "count-changed")
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
    recorded = has_shapes(kernels)
    return ComputeSplit(float(computing["base_us"]), float(computing["new_us"]), delta,
                        **rows, rest_us=float(rest),
                        like_for_like_by_family={str(k): float(v) for k, v in
                                                 by_family[np.abs(by_family) > 0].items()},
                        like_for_like_shapes=_coverage(
                            recorded[same & kernels["per_instance"].astype(bool)]),
                        count_changed_shapes=_coverage(recorded[counted]))
