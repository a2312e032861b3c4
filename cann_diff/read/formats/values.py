"""Raw values the db, msprof and trace readers derive and check alike.

Step ids from timestamps, collective types from names, chips from platform numbers, and
the checks that refuse impossible durations or step figures. Kept apart from the format
modules so that each reader stays one file per format and none of them has to import
another only for a helper.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ...errors import InputError, SchemaError
from ...schema import STAGE_FIELDS
from ...settings import DEFAULT_LIMITS
from .files import shown

# msprof CHIP_TABLE: info.json ``platform_version`` -> chip (docs/formats.md §1.2).
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
    kernel_details.csv leaves such rows (docs/formats.md §2.1). Windows are assumed
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


# The largest whole µs a timestamp may have: with any three decimals it fits int64 ns
# (9223372036854775.808 µs would wrap to a negative start).
MAX_WHOLE_US = (np.iinfo(np.int64).max - 999) // 1000

# The exact rule sorts every duration; on a table of at least SHORT_ROWS_MIN_TABLE rows the
# shortest 1/SHORT_ROWS_SHARE are sorted instead when that proves the rest sane (0.77 ->
# 0.12 s at 1M rows). Below it a sort costs less than the proof's passes.
SHORT_ROWS_MIN_TABLE = 4096
SHORT_ROWS_SHARE = 64


def impossible_durations(start_ns: np.ndarray, dur_us: np.ndarray) -> np.ndarray:
    """Mask of durations no device can have: negative, NaN, inf, or absurdly long.

    Absurd is longer than ``max_duration_s`` (no capture lasts that long), or more than
    ``absurd_duration_factor`` times the whole span (first start to last end) of all the
    rows shorter than it. The longest row may well be what ends the run, so it is judged
    against the run the other rows span; two equal broken cells still are (each is
    judged by the strictly shorter rows), and a 1e300 µs cell never is summed.
    """
    dur = np.asarray(dur_us, dtype=np.float64)
    bad = ~np.isfinite(dur) | (dur < 0) | (dur > DEFAULT_LIMITS.max_duration_s * 1e6)
    start_us = (np.asarray(start_ns, dtype=np.int64) // 1000).astype(np.float64)
    rows = np.flatnonzero(~bad)
    if len(rows) < 2:
        return bad
    factor = DEFAULT_LIMITS.absurd_duration_factor
    # A row longer than the cut is judged against a span that holds every row shorter than
    # the cut; when even the longest row fits within that, only the rows up to the cut
    # need the exact rule (and its sort), not the whole table.
    if len(rows) >= SHORT_ROWS_MIN_TABLE:
        kept = dur[rows]
        cut = np.partition(kept, len(rows) // SHORT_ROWS_SHARE)[len(rows) // SHORT_ROWS_SHARE]
        below = rows[kept < cut]
        if len(below) and kept.max() <= factor * (
                (start_us[below] + dur[below]).max() - start_us[below].min()):
            short = rows[kept <= cut]
            bad[short] = _absurd(start_us[short], dur[short], factor)
            return bad
    bad[rows] = _absurd(start_us[rows], dur[rows], factor)
    return bad


def _absurd(start_us: np.ndarray, dur: np.ndarray, factor: float) -> np.ndarray:
    """Rows longer than ``factor`` times the span of the strictly shorter rows."""
    order = np.argsort(dur, kind="stable")
    sorted_dur = dur[order]
    first = np.minimum.accumulate(start_us[order])
    last = np.maximum.accumulate(start_us[order] + sorted_dur)
    shorter = np.searchsorted(sorted_dur, sorted_dur, side="left")  # rows strictly shorter
    known = shorter > 0
    span = np.where(known, last[np.maximum(shorter - 1, 0)] - first[np.maximum(shorter - 1, 0)],
                    0.0)
    absurd = np.zeros(len(dur), dtype=bool)
    absurd[order[known & (span > 0) & (sorted_dur > factor * span)]] = True
    return absurd


def drop_impossible_durations(ops: pd.DataFrame, path: Path,
                              column: str = "duration") -> tuple[pd.DataFrame, list[str]]:
    """Leave out rows of impossible duration with a warning, or refuse a file of them.

    ``ops`` holds ``start_ns`` and ``dur_us``. Returns the kept rows and the warnings;
    an InputError when more than ``max_bad_duration_share`` of the rows are impossible
    (then the column itself is broken, not a few cells).
    """
    bad = impossible_durations(ops["start_ns"].to_numpy(), ops["dur_us"].to_numpy())
    count = int(bad.sum())
    if count == 0:
        return ops, []
    dur = ops["dur_us"].to_numpy(dtype=np.float64)
    kinds = [name for name, mask in (("negative", dur < 0), ("NaN", np.isnan(dur)),
                                     ("infinite", np.isinf(dur)))
             if mask.any()]
    longer = bad & np.isfinite(dur) & (dur >= 0)
    if longer.any():
        kinds.append(f"absurdly long, up to {float(dur[longer].max()):.4g} µs")
    what = ", ".join(kinds)
    if count > DEFAULT_LIMITS.max_bad_duration_share * len(ops):
        raise InputError(path, f"{count} of {len(ops)} rows have an impossible {column} "
                               f"({what}): the column is broken")
    warning = (f"{shown(path)}: {count} of {len(ops)} rows left out for an impossible "
               f"{column} ({what})")
    return ops[~bad].reset_index(drop=True), [warning]


# Step figures that are lengths of time; Free and Bubble are differences and may dip below 0.
NON_NEGATIVE = ("computing", "communication_not_overlapped", "overlapped", "communication",
                "stage", "preparing")


def check_step_figures(frame: pd.DataFrame, path: Path, headers: dict[str, str]) -> None:
    """Refuse infinite figures and negative lengths of time: they would be summed as is."""
    for field in STAGE_FIELDS:
        values = frame[field].to_numpy(np.float64) if field in frame else np.array([])
        wrong = np.isinf(values) | ((values < 0) if field in NON_NEGATIVE else False)
        if wrong.any():
            row = int(np.flatnonzero(wrong)[0])
            raise SchemaError(path, f"{headers.get(field, field)} is {values[row]:g}, not a "
                                    "finite length of time", where=f"row {row + 2}")


def check_comm_times(frame: pd.DataFrame, path: Path, columns) -> None:
    """Refuse communication times or sizes that are infinite, NaN or negative."""
    for column in columns:
        values = pd.to_numeric(frame[column], errors="coerce").to_numpy(np.float64)
        wrong = ~np.isfinite(values) | (values < 0)
        if wrong.any():
            row = int(np.flatnonzero(wrong)[0])
            raise SchemaError(path, f"{column} is {values[row]:g}, not a finite "
                                    "non-negative number", where=f"row {row + 1}")


def ids_or_na(values) -> pd.arrays.IntegerArray:
    """Integer ids or ns timestamps as Int64, exact; anything not a whole int64 is <NA>.

    Parsed with nullable dtypes so that 19-digit ns timestamps never pass through a
    float64 (which keeps only 16 digits).
    """
    series = values if isinstance(values, pd.Series) else pd.Series(values, dtype=object)
    numbers = pd.to_numeric(series, errors="coerce", dtype_backend="numpy_nullable")
    if pd.api.types.is_signed_integer_dtype(numbers.dtype):
        return numbers.astype("Int64").array
    floats = numbers.astype("Float64").to_numpy(np.float64, na_value=np.nan)
    whole = np.isfinite(floats) & (floats == np.round(floats)) & (np.abs(floats) < 2.0 ** 62)
    out = pd.array(np.where(whole, floats, 0).astype(np.int64), dtype="Int64")
    out[~whole] = pd.NA
    return out
