"""Small vectorized helpers shared by the db, msprof and trace readers.

Kept apart from the format modules so that each reader stays one file per format
and none of them has to import another only for a helper.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

# msprof CHIP_TABLE: info.json ``platform_version`` -> chip (FORMATS.md §1.2).
CHIP_TABLE = {"0": "Ascend310", "1": "Ascend910A", "4": "Ascend310P", "5": "Ascend910B",
              "7": "Ascend310B", "15": "Ascend950"}

# Longest alternatives first: ``reducescatter`` must win over ``reduce``/``scatter``,
# ``alltoallvc`` over ``alltoall`` (torch_npu's own pattern gets this wrong, §5.3).
_COMM_TOKEN = (r"(reducescatterv|reducescatter|allgatherv|allgather|allreduce|alltoallvc|"
               r"alltoallv|alltoall|broadcast|batchsendrecv|sendrecv|receive|recv|send|"
               r"reduce|scatter|barrier)")
_COMM_TOKEN_NAMES = {"sendrecv": "batchsendrecv", "recv": "receive"}


def assign_steps(start_ns: np.ndarray, step_ids: np.ndarray, step_start: np.ndarray,
                 step_end: np.ndarray) -> pd.arrays.IntegerArray:
    """Step id of every start time (ns) from step windows ``[start, end]`` (ns).

    Returns an Int64 array, <NA> where a start falls in no window, which is how
    kernel_details.csv leaves such rows (FORMATS.md §2.1). Windows are assumed
    not to overlap (profiler steps are consecutive).
    """
    start_ns = np.asarray(start_ns, dtype=np.int64)
    if len(step_start) == 0:
        return pd.array(np.full(len(start_ns), pd.NA), dtype="Int64")
    order = np.argsort(np.asarray(step_start, dtype=np.int64), kind="stable")
    lo = np.asarray(step_start, dtype=np.int64)[order]
    hi = np.asarray(step_end, dtype=np.int64)[order]
    ids = np.asarray(step_ids, dtype=np.int64)[order]
    pos = np.searchsorted(lo, start_ns, side="right") - 1
    clipped = np.clip(pos, 0, None)
    inside = (pos >= 0) & (start_ns <= hi[clipped])
    out = pd.array(ids[clipped], dtype="Int64")
    out[~inside] = pd.NA
    return out


def comm_op_type(names: pd.Series) -> pd.Series:
    """``hcom_<type>_`` for collective names not written the HCCL way, else ``""``.

    MindSpore graph names (``Default/AllReduce-op534_0``) and NCCL kernels
    (``ncclKernel_AllReduce_RING_LL_Sum_float``) carry the collective in another
    spelling; giving them the op_summary ``OP Type`` form lets the canonical stage
    derive ``comm_type`` the same way for every source.
    """
    lower = names.astype(str).str.lower()
    token = lower.str.extract(_COMM_TOKEN, expand=False)
    found = token.notna()
    out = pd.Series("", index=names.index, dtype="object")
    out[found] = "hcom_" + token[found].astype(str).replace(_COMM_TOKEN_NAMES) + "_"
    return out


def scope_type(names: pd.Series) -> pd.Series:
    """Op type from a MindSpore scope name (``…/Cast-op239`` -> ``Cast``), else ``""``.

    The canonical stage derives types from aclnn and GE names; full scope paths
    would otherwise yield the path itself as the type.
    """
    text = names.astype(str)
    last = text.str.rsplit("/", n=1).str[-1].str.replace(r"-op\d+.*$", "", regex=True)
    return last.where(text.str.contains("/", regex=False), "")


def by_category(values: pd.Series, func) -> pd.Series:
    """Apply a vectorized string function to the distinct values only, mapped back to rows.

    Trace and db columns repeat a few hundred names over millions of rows. Missing
    values are treated as ``""``.
    """
    cat = values.astype("category")
    distinct = pd.Series([*cat.cat.categories.astype(str), ""], dtype="object")
    mapped = func(distinct).to_numpy()
    codes = cat.cat.codes.to_numpy()  # -1 (missing) picks the appended ""
    return pd.Series(mapped[codes], index=values.index)


def concat_frames(frames) -> pd.DataFrame:
    """Concatenate frames keeping categorical columns categorical (union of categories).

    Categorical columns are joined with union_categoricals directly: pd.concat of
    categoricals with different categories would expand them to strings first. Their
    categories are aligned on object first (an all-N/A column comes back from pyarrow
    with empty float categories).
    """
    frames = [f for f in frames if f is not None and len(f.columns)]
    if not frames:
        return pd.DataFrame()
    if len(frames) == 1:
        return frames[0].reset_index(drop=True)
    categorical = [c for c in frames[0].columns
                   if all(c in f and isinstance(f[c].dtype, pd.CategoricalDtype) for f in frames)]
    columns = list(dict.fromkeys(c for f in frames for c in f.columns))  # first-seen order
    merged = pd.concat([f.drop(columns=categorical) for f in frames], ignore_index=True)
    for column in categorical:
        parts = [pd.Categorical.from_codes(f[column].cat.codes, categories=pd.Index(
            f[column].cat.categories.astype(object), dtype=object)) for f in frames]
        merged[column] = union_categoricals(parts, ignore_order=True)
    return merged[columns]


def as_category(values) -> pd.Categorical:
    """Text values as a categorical with ``""`` for missing (readers hand raw text on)."""
    series = pd.Series(values, dtype="object")
    return pd.Categorical(series.where(series.notna(), ""))
