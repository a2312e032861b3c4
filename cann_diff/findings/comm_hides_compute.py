"""``comm-hides-compute``: the compute gain eaten by communication growth."""

from __future__ import annotations

from ..compare import Comparison
from ..compare.stats import compare_steps
from .base import Finding, ms
from .fusion import FusionGroup


def _significant_drop(cmp: Comparison, field_name: str) -> bool:
    """Tell whether ``field_name`` of the step breakdown changed beyond noise."""
    base = cmp.base.steps.groupby(cmp.base.steps["step"].fillna(-1))[field_name].mean()
    new = cmp.new.steps.groupby(cmp.new.steps["step"].fillna(-1))[field_name].mean()
    test = compare_steps(base.to_numpy(), new.to_numpy(), cmp.settings.confidence)
    floor = cmp.settings.material_pct / 100 * max(cmp.step.base_us, 1e-9)
    material = abs(new.mean() - base.mean()) >= floor
    if test.p_value is None:
        return bool(material)
    return bool(material and test.p_value < cmp.settings.alpha)



def _comm_growth(cmp: Comparison) -> tuple[list[str], dict]:
    grown = cmp.comm_types[(cmp.comm_types["delta_count"] > 1e-9)
                           | (cmp.comm_types["delta_exposed_us"] > 0)]
    parts, data = [], {}
    for row in grown.itertuples():
        parts.append(f"{row.comm_type} {row.delta_count:+g}/step ({ms(row.delta_us)} time, "
                     f"{ms(row.delta_exposed_us)} exposed)")
        data[row.comm_type] = {"delta_count": row.delta_count, "delta_us": row.delta_us,
                               "delta_exposed_us": row.delta_exposed_us}
    return parts, data


def _growth_kind(cmp: Comparison) -> str:
    """Say whether communication grew by transfer, by waiting, or by more operations."""
    table = cmp.comm_types
    if "base_transit_us" not in table or "new_transit_us" not in table:
        return "more operations" if (table["delta_count"] > 0).any() else "unknown"
    transit = (table["new_transit_us"] - table["base_transit_us"]).sum()
    waiting = (table["new_wait_us"] - table["base_wait_us"]).sum()
    if (table["delta_count"] > 0).any() and transit >= 0 and waiting <= transit:
        return "more operations (transfer time grew with the count)"
    return "waiting (wait/synchronization)" if waiting > transit else "transfer (transit time)"


def _faster_compute(cmp: Comparison, claimed: dict[int, str],
                    n: int = 3) -> tuple[list[str], dict]:
    ops = cmp.operators[(cmp.operators["category"] == "compute")
                        & ~cmp.operators["key_id"].isin(claimed)]
    by_family = ops.groupby("family")[["base_total_us", "new_total_us"]].sum()
    by_family["delta_us"] = by_family["new_total_us"] - by_family["base_total_us"]
    faster = by_family[by_family["delta_us"] < 0].sort_values("delta_us").head(n)
    parts = [f"{name} {ms(row.delta_us)} "
             f"({row.delta_us / row.base_total_us * 100:+.1f}%)"
             for name, row in faster.iterrows() if row.base_total_us > 0]
    return parts, {name: float(row.delta_us) for name, row in faster.iterrows()}


def comm_hides_compute(cmp: Comparison, groups: list[FusionGroup],
                       claimed: dict[int, str]) -> Finding | None:
    """The compute gain eaten by communication growth, or None."""
    br = cmp.step.breakdown
    d_comp = br["computing"]["delta_us"]
    d_exposed = br["communication_not_overlapped"]["delta_us"]
    d_step = cmp.step.delta_us
    if not (d_comp < 0 and d_exposed > 0 and d_step > d_comp):
        return None
    # Compute gains that win clearly are not "hidden": the step must have got slower, or
    # communication growth must have eaten at least half of the compute gain.
    if d_step <= 0 and d_exposed < cmp.settings.eaten_share * -d_comp:
        return None
    if not (_significant_drop(cmp, "computing")
            and _significant_drop(cmp, "communication_not_overlapped")):
        return None
    comm_parts, comm_data = _comm_growth(cmp)
    fast_parts, fast_data = _faster_compute(cmp, claimed)
    split = [g for g in groups if g.direction == "split"]
    cause = ""
    if split:
        cause = " The new run executes " + "; ".join(
            f"{g.fused_type} as {' + '.join(g.split_types[:2])} "
            f"({g.base_count - g.new_count:g} fused ops per step fewer)" for g in split) + "."
    detail = (f"Computing fell by {ms(-d_comp)} per step"
              f"{' (' + ', '.join(fast_parts) + ')' if fast_parts else ''}, but exposed "
              f"communication rose by {ms(d_exposed)}"
              f"{' (' + '; '.join(comm_parts) + ')' if comm_parts else ''}; net step change "
              f"{ms(d_step)} ({cmp.step.delta_pct:+.1f}%). Growth is mainly "
              f"{_growth_kind(cmp)}.{cause}")
    severity = "high" if d_step > 0 else "medium"
    ops = cmp.operators
    like_for_like = ops[(ops["category"] == "compute") & ops["match_kind"].notna()
                        & ~ops["key_id"].isin(claimed)]["delta_us"].sum()
    if split:
        detail += (" Part of the computing drop is the communication the fused op ran inside "
                   f"a compute kernel; matched kernels alone changed by {ms(like_for_like)}.")
    gain = -like_for_like if like_for_like < 0 else -d_comp
    title = (f"Communication growth hides a {ms(gain)} compute gain: step "
             f"{cmp.step.delta_pct:+.1f}%")
    return Finding("comm-hides-compute", severity, title, detail, float(d_step),
                   {"delta_computing_us": d_comp, "delta_matched_kernels_us": float(like_for_like),
                    "delta_exposed_us": d_exposed,
                    "delta_step_us": d_step, "comm_growth": comm_data,
                    "faster_compute": fast_data, "growth_kind": _growth_kind(cmp)})
