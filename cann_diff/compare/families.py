"""Kernel time by compute family, base vs new: msprof-analyze's split of computing time.

msprof-analyze's overall comparison splits computing time into Cube (MatMul), Vector,
FlashAttention, Conv and SDMA; a reviewer reads an upgrade's gain or loss by those lines.
Here each operator key gets one family from its category and its operator family
(``family``, the type without version suffix) by the table below, first match wins:

========================  ======================================================================
family                    operator keys
========================  ======================================================================
Communication             category ``communication`` (HCCL collectives, NCCL on a GPU)
MC2 (MatMul + comm)       category ``mc2``: fused compute + communication kernels
SDMA / memcpy             category ``memcpy``: host↔device and device↔device copies
AI CPU                    category ``aicpu``
FlashAttention            family matching ``FlashAttention|FusedInferAttention|PagedAttention|
                          IncreFlashAttention|PromptFlashAttention|flash`` (case-insensitive)
Conv                      family matching ``^Conv|Convolution|DepthwiseConv``
MatMul / Cube             family matching ``MatMul|Matmul|Gemm|Gemv|Mm$|^Bmm|QuantBatch``
Vector / other AI Core    every other ``compute`` kernel (elementwise, norms, casts, …)
Other                     category ``other``
========================  ======================================================================

No core type is used: the kernel summary is keyed by type and shapes, and a family is the
same work whichever engine a version of CANN runs it on. Figures are µs (and kernels) per
step and per rank, like the operator table; the families sum to the category totals.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# (family, category it applies to, regex on the operator family or None for the category)
FAMILIES = (
    ("Communication", "communication", None),
    ("MC2 (MatMul + comm)", "mc2", None),
    ("SDMA / memcpy", "memcpy", None),
    ("AI CPU", "aicpu", None),
    ("FlashAttention", "compute", r"(?i)FlashAttention|FusedInferAttention|PagedAttention|"
                                  r"flash"),
    ("Conv", "compute", r"(?i)^Conv|Convolution|DepthwiseConv"),
    ("MatMul / Cube", "compute", r"MatMul|Matmul|Gemm|Gemv|Mm$|^Bmm|QuantBatch"),
    ("Vector / other AI Core", "compute", None),
    ("Other", "other", None),
)
ORDER = tuple(name for name, _, _ in FAMILIES)
FIGURES = ("base_count", "new_count", "base_total_us", "new_total_us")


def family_of(operators: pd.DataFrame) -> pd.Series:
    """Compute family of every operator key (``category`` and ``family`` columns)."""
    category = operators["category"].astype(str).to_numpy()
    family = operators["family"].astype(str)
    out = np.full(len(operators), "Other", dtype=object)
    unset = np.ones(len(operators), dtype=bool)
    for name, wanted, pattern in FAMILIES:
        hit = unset & (category == wanted)
        if pattern is not None:
            hit &= family.str.contains(pattern, regex=True).to_numpy()
        out[hit] = name
        unset &= ~hit
    return pd.Series(out, index=operators.index, name="compute_family")


def compare_families(operators: pd.DataFrame) -> pd.DataFrame:
    """Per compute family with kernels on either side, in the table's order.

    Columns: ``family``, ``base_count``, ``new_count`` (kernels per step),
    ``base_total_us``, ``new_total_us``, ``delta_us`` (µs per step), ``delta_pct``
    (relative to base; NaN when base is 0), ``base_share_pct``/``new_share_pct`` (share of
    the side's kernel time).
    """
    columns = ["family", *FIGURES, "delta_us", "delta_pct", "base_share_pct", "new_share_pct"]
    if operators is None or operators.empty:
        return pd.DataFrame(columns=columns)
    table = operators[list(FIGURES)].groupby(family_of(operators)).sum()
    table = table[(table[["base_count", "new_count"]].sum(axis=1) > 0).to_numpy()]
    table = table.reindex([name for name in ORDER if name in table.index])
    table["delta_us"] = table["new_total_us"] - table["base_total_us"]
    base = table["base_total_us"].where(table["base_total_us"] > 0)
    table["delta_pct"] = table["delta_us"] / base * 100
    for side in ("base", "new"):
        total = table[f"{side}_total_us"].sum()
        table[f"{side}_share_pct"] = table[f"{side}_total_us"] / total * 100 if total else np.nan
    table.index.name = "family"
    return table.reset_index()[columns]
