"""Why a key's kernels took their time: attributes and pipe ratios per summary row.

Beside the count and total of each summary row (``summary.py``), ``RunSummary.attributes``
says which values its kernels ran with (core, block dim, op state, input formats, dtypes,
HF32, the raw kernel name as the implementation), each with the kernels' count and µs,
and ``RunSummary.pipes`` sums each pipe's ratio × duration over the kernels that record
PMU counters, so that a later stage divides by ``pmu_us`` for a duration-weighted ratio
of any set of rows. Both are small (summary rows × attributes) and cross the process
boundary with the summary. Their ``row`` indexes ``RunSummary.ops`` as ``samples["row"]``
does, and every function that stacks, cuts, combines or selects summary rows carries them
with the helpers below. Collectives have neither: only kernels do.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...schema import ATTRIBUTES, PIPE_COLUMNS, PIPES
from ..formats.kernel_attributes import BLOCK_ATTRIBUTES, PIPE_FIELDS

# Attribute -> the ops column it is read from (the others are read from their own name).
SOURCE_COLUMNS = {"implementation": "op_name"}
# Values that say nothing was recorded (upper case): such kernels count for no value.
UNRECORDED = frozenset({"", "N/A", "NA", "NAN", "NONE", "NULL", "UNKNOWN"})
ATTRIBUTE_TYPE = pd.CategoricalDtype(list(ATTRIBUTES))


def empty_attributes() -> pd.DataFrame:
    """ATTRIBUTE_COLUMNS with no row."""
    return pd.DataFrame({"row": pd.Series(dtype="int64"),
                         "attribute": pd.Series(dtype=ATTRIBUTE_TYPE),
                         "value": pd.Series(dtype="object"),
                         "count": pd.Series(dtype="int64"),
                         "total_us": pd.Series(dtype="float64")})


def empty_pipes() -> pd.DataFrame:
    """PIPE_COLUMNS with no row."""
    return pd.DataFrame({c: pd.Series(dtype="int64" if c == "row" else "float64")
                         for c in PIPE_COLUMNS})


def _value_text(label: str, attribute: str) -> str | None:
    """A recorded value as the summary writes it; None when it records nothing.

    A block dim of 0 records nothing: a kernel on AI Cores runs on one block at least,
    and the exports write 0 for kernels without one (AI CPU, DSA, HCCL) and for every
    kernel at Level0, where a placement 0→32 would be read as a change.
    """
    text = label.strip()
    if text.upper() in UNRECORDED:
        return None
    if attribute in BLOCK_ATTRIBUTES:
        try:
            number = float(text)
        except ValueError:
            return text
        if number == 0 and attribute == "block_dim":
            return None
        return str(int(number)) if number.is_integer() else text
    return text


def _sort_key(value: str, attribute: str) -> tuple:
    """Values in a row's order: block dims by number, the rest as text."""
    if attribute in BLOCK_ATTRIBUTES and value.lstrip("-").isdigit():
        return (0, int(value), "")
    return (1, 0, value)


def _raw_codes(column: pd.Series) -> tuple[np.ndarray, pd.Index]:
    """Per kernel, a code into the column's distinct values as read (-1: missing)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        return column.cat.codes.to_numpy(np.int64), column.cat.categories
    codes, uniques = pd.factorize(column, use_na_sentinel=True)
    return codes.astype(np.int64), pd.Index(uniques)


def _combinations(row: np.ndarray, codes: list[np.ndarray], widths: list[int],
                  skip: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each kernel's combination of summary row and attribute codes, and each one's first kernel.

    Combinations are numbered in order of first appearance; kernels in ``skip`` get -1.
    The codes are folded into one int64 per kernel (hashed again whenever the next fold
    could overflow) and numbered by one hash: kernels of a key share their attributes
    almost always, so there are about as many combinations as summary rows, and every
    attribute is then counted over those, not over the kernels again.
    """
    key, size = row.astype(np.int64), max(int(row.max(initial=0)) + 1, 1)
    for column, width in zip(codes, widths):
        if size * width >= 2 ** 62:
            key, distinct = pd.factorize(key)
            key, size = key.astype(np.int64), len(distinct)
        key, size = key * width + column + 1, size * width
    if skip.any():
        key = np.where(skip, -1, key)
    ids, distinct = pd.factorize(key)
    ids = ids.astype(np.int64)
    first = np.empty(len(distinct), dtype=np.int64)
    first[ids[::-1]] = np.arange(len(ids) - 1, -1, -1)
    return np.where(np.asarray(distinct)[ids] < 0, -1, ids), first


def _cleaned(labels: pd.Index, used: np.ndarray, attribute: str
             ) -> tuple[np.ndarray, list[str]]:
    """Per raw code, a code into the attribute's values (-1: records nothing); the values.

    The values come in a row's order. Only the codes ``used`` are cleaned (a run names
    thousands of collectives, which no kernel attribute shows).
    """
    cleaned = {int(code): _value_text(str(labels[code]), attribute) for code in used
               if code >= 0}
    values = sorted({v for v in cleaned.values() if v is not None},
                    key=lambda v: _sort_key(v, attribute))
    position = {value: n for n, value in enumerate(values)}
    mapping = np.full(len(labels) + 1, -1, dtype=np.int64)  # code -1 (missing) picks the last
    for code, value in cleaned.items():
        if value is not None:
            mapping[code] = position[value]
    return mapping, values


def kernel_attributes(ops: pd.DataFrame, row: np.ndarray, n_rows: int) -> pd.DataFrame:
    """``RunSummary.attributes`` of canonical rows whose summary rows are ``row``.

    One row per (summary row, attribute, value) with the kernels' ``count`` and
    ``total_us`` (µs), in (row, ATTRIBUTES order, value) order; kernels that record no
    value of an attribute (N/A, a column the file lacks) count for none of it.
    """
    present = [(n, a) for n, a in enumerate(ATTRIBUTES) if SOURCE_COLUMNS.get(a, a) in ops]
    if not len(ops) or not present:
        return empty_attributes()
    raw = [_raw_codes(ops[SOURCE_COLUMNS.get(a, a)]) for _, a in present]
    collective = (ops["category"] == "communication").to_numpy(bool)
    ids, first = _combinations(row, [c for c, _ in raw], [len(labels) + 1 for _, labels in raw],
                               collective)
    kept = ids >= 0
    combos = len(first)
    count = np.bincount(ids[kept], minlength=combos)
    total = np.bincount(ids[kept], weights=ops["dur_us"].to_numpy(np.float64)[kept],
                        minlength=combos)
    real = count > 0  # the collectives' combination, if any, has none
    combo_row = row[first]
    parts = []
    for (position, attribute), (codes, labels) in zip(present, raw):
        combo_codes = codes[first]
        mapping, values = _cleaned(labels, np.unique(combo_codes[real]), attribute)
        value = mapping[combo_codes]
        keep = real & (value >= 0)
        if not keep.any():
            continue
        width = len(values)
        cell, cells = pd.factorize(combo_row[keep] * width + value[keep], sort=True)
        cells = np.asarray(cells, dtype=np.int64)
        parts.append(pd.DataFrame({
            "row": cells // width,
            "attribute": pd.Categorical.from_codes(np.full(len(cells), position),
                                                   dtype=ATTRIBUTE_TYPE),
            "value": np.array(values, dtype=object)[cells % width],
            "count": np.bincount(cell, weights=count[keep], minlength=len(cells)
                                 ).astype(np.int64),
            "total_us": np.bincount(cell, weights=total[keep], minlength=len(cells))}))
    if not parts:
        return empty_attributes()
    table = pd.concat(parts, ignore_index=True)
    # Each part is in (row, value) order: a stable sort by row puts the attributes of a
    # row in ATTRIBUTES order, as they were concatenated.
    order = np.argsort(table["row"].to_numpy(), kind="stable")
    return table.iloc[order].reset_index(drop=True)


def kernel_pipes(ops: pd.DataFrame, row: np.ndarray, n_rows: int) -> pd.DataFrame:
    """``RunSummary.pipes`` of canonical rows whose summary rows are ``row``.

    Per summary row whose kernels record a pipe ratio: ``pmu_us``, the µs of those kernels,
    and per pipe Σ ratio × duration (µs) over them; NaN for a pipe none of them records
    (910A has no fixpipe). Rows in ascending order; none without PMU counters.
    """
    fields = [(pipe, field) for pipe, field in zip(PIPES, PIPE_FIELDS) if field in ops]
    if not fields or not len(ops):
        return empty_pipes()
    collective = (ops["category"] == "communication").to_numpy(bool)
    durations = ops["dur_us"].to_numpy(np.float64)
    ratios = {pipe: ops[field].to_numpy(np.float64) for pipe, field in fields}
    unknown = {pipe: np.isnan(values) | collective if collective.any() else np.isnan(values)
               for pipe, values in ratios.items()}
    # In a real table every pipe is missing on the same rows (N/A): one mask serves all.
    masks = list(unknown.values())
    alike = all(np.array_equal(mask, masks[0]) for mask in masks[1:])
    unmeasured = masks[0] if alike else np.logical_and.reduce(masks)
    counted = np.bincount(row, weights=~unmeasured, minlength=n_rows)
    rows = np.flatnonzero(counted)
    if not len(rows):
        return empty_pipes()
    table = {"row": rows.astype(np.int64),
             "pmu_us": np.bincount(row, weights=np.where(unmeasured, 0.0, durations),
                                   minlength=n_rows)[rows]}
    for pipe in PIPES:
        table[pipe] = np.full(len(rows), np.nan)
    for pipe, values in ratios.items():
        share = values * durations
        share[unknown[pipe]] = 0.0
        summed = np.bincount(row, weights=share, minlength=n_rows)[rows]
        seen = counted[rows] > 0 if alike else \
            np.bincount(row, weights=~unknown[pipe], minlength=n_rows)[rows] > 0
        table[pipe] = np.where(seen, summed, np.nan)
    return pd.DataFrame(table)


# --------------------------------------------------------------------------- carrying rows


def rows_between(frame: pd.DataFrame | None, low: int, high: int) -> pd.DataFrame | None:
    """The rows of ``frame`` (sorted by ``row``) for summary rows ``low`` … ``high - 1``.

    Their ``row`` is renumbered from 0, as the summary rows of a slice are.
    """
    if frame is None:
        return None
    rows = frame["row"].to_numpy()
    start, stop = np.searchsorted(rows, [low, high], side="left")
    return frame.iloc[start:stop].assign(row=rows[start:stop] - low).reset_index(drop=True)


def renumbered(frame: pd.DataFrame | None, new_row: np.ndarray,
               keep: np.ndarray | None = None) -> pd.DataFrame | None:
    """``frame`` with each ``row`` r made ``new_row[r]``, in row order again.

    Rows where ``keep[r]`` is False are left out; within a row the order is kept.
    """
    if frame is None:
        return None
    rows = frame["row"].to_numpy()
    if keep is not None:
        kept = keep[rows] if len(rows) else np.zeros(0, dtype=bool)
        frame, rows = frame[kept], rows[kept]
    moved = new_row[rows] if len(rows) else rows
    order = np.argsort(moved, kind="stable")
    return frame.iloc[order].assign(row=moved[order]).reset_index(drop=True)


def stacked(frames: list[pd.DataFrame | None], offsets: list[int],
            empty) -> pd.DataFrame | None:
    """The frames one after another, each ``row`` moved by its part's offset.

    None when no part has the frame (summaries built without it); a part without one
    adds nothing.
    """
    held = [(f, o) for f, o in zip(frames, offsets) if f is not None]
    if not held:
        return None
    kept = [(f, o) for f, o in held if len(f)]
    if not kept:
        return empty()
    rows = np.concatenate([f["row"].to_numpy() + o for f, o in kept])
    table = pd.concat([f for f, _ in kept], ignore_index=True)
    table["row"] = rows
    return table
