"""A kernel's attributes and PMU pipe ratios, in one vocabulary for every layout.

Why a kernel took its time (docs/design.md "Why operators changed") is in columns beside
the ones the keys are built from: the core it ran on, its block dim, op state, input
formats, HF32 flag, and, where the profile was taken with ``aic_metrics``
PipeUtilization, the share of its time each pipe was busy. The text exports, msprof's
op_summary and the db name them differently, and the chips split them differently:

* Atlas A2/A3 (``aic_``/``aiv_`` prefixes, a cube core and a vector core): cube =
  ``aic_mac_ratio``, vector = ``aiv_vec_ratio``, mte1 = ``aic_mte1_ratio``, mte3 =
  ``aiv_mte3_ratio``, fixpipe = ``aic_fixpipe_ratio``; scalar and mte2 run on both cores
  and are combined weighted by each core's busy time (``aicore_time(us)``,
  ``aiv_time(us)``; db ``aic_total_time``/``aiv_total_time`` in ns), or taken from the
  one side recorded;
* Ascend910A (unprefixed, one AI Core does both): ``mac_ratio``, ``vec_ratio``,
  ``scalar_ratio``, ``mte1_ratio``, ``mte2_ratio``, ``mte3_ratio`` (no fixpipe), busy
  time ``aicore_time(us)``.

Other ``aic_metrics`` sets (ArithmeticUtilization, Memory, MemoryL0, MemoryUB, L2Cache,
ResourceConflictRatio) hold no pipe ratio: their kernels have busy times and no pipes.
Readers add the raw per-kernel columns ``KERNEL_ATTRIBUTES`` (text), ``PIPE_FIELDS``
(ratio 0-1) and ``BUSY_FIELDS`` (µs) where their files record them; N/A is NaN.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ...schema import KERNEL_ATTRIBUTES, PIPES

PIPE_FIELDS = tuple(f"pipe_{pipe}" for pipe in PIPES)
BUSY_FIELDS = ("pmu_aicore_us", "pmu_aiv_us")
# Every raw per-kernel column a reader may add beside schema.OP_COLUMNS.
RAW_FIELDS = (*KERNEL_ATTRIBUTES, *PIPE_FIELDS, *BUSY_FIELDS)

# Text exports and op_summary: attribute -> accepted headers. ``Block Num`` first: msprof
# renamed ``Block Dim`` so (VA-2026), and the newest db schema reuses blockDim for SIMT.
ATTRIBUTE_HEADERS = {
    "block_dim": ("Block Num", "Block Dim"),
    "mix_block_dim": ("Mix Block Num", "Mix Block Dim"),
    "op_state": ("OP State",),
    "input_formats": ("Input Formats",),
    "hf32": ("HF32 Eligible",),
}
# db COMPUTE_TASK_INFO: attribute -> accepted columns (first present wins); the text ones
# are STRING_IDS ids, the block dims integers.
DB_ATTRIBUTE_COLUMNS = {
    "block_dim": ("blockNum", "blockDim", "block_dim"),
    "mix_block_dim": ("mixBlockNum", "mixBlockDim", "mix_block_dim"),
    "op_state": ("opState",),
    "input_formats": ("inputFormats",),
    "hf32": ("hf32Eligible",),
}
DB_STRING_ATTRIBUTES = ("op_state", "input_formats", "hf32")
BLOCK_ATTRIBUTES = ("block_dim", "mix_block_dim")

# The raw counters read, by the names both the text header and TASK_PMU_INFO give them.
CUBE_SIDE = {"cube": "aic_mac_ratio", "scalar": "aic_scalar_ratio", "mte1": "aic_mte1_ratio",
             "mte2": "aic_mte2_ratio", "fixpipe": "aic_fixpipe_ratio"}
VECTOR_SIDE = {"vector": "aiv_vec_ratio", "scalar": "aiv_scalar_ratio",
               "mte2": "aiv_mte2_ratio", "mte3": "aiv_mte3_ratio"}
UNIFIED = {"cube": "mac_ratio", "vector": "vec_ratio", "scalar": "scalar_ratio",
           "mte1": "mte1_ratio", "mte2": "mte2_ratio", "mte3": "mte3_ratio"}
RATIO_COUNTERS = (*CUBE_SIDE.values(), *VECTOR_SIDE.values(), *UNIFIED.values())
# Busy time: text header (µs) and TASK_PMU_INFO name (ns), per busy field.
BUSY_HEADERS = {"pmu_aicore_us": "aicore_time(us)", "pmu_aiv_us": "aiv_time(us)"}
BUSY_DB_NAMES = {"pmu_aicore_us": "aic_total_time", "pmu_aiv_us": "aiv_total_time"}
# The counter fields a kernel table is read with: field -> header (a ratio's field is its
# header). Numbers, parsed by Arrow where they can be.
COUNTER_HEADERS = {**{name: (name,) for name in RATIO_COUNTERS},
                   **{field: (header,) for field, header in BUSY_HEADERS.items()}}
COUNTER_FIELDS = tuple(COUNTER_HEADERS)


def _positive(busy_us: np.ndarray | None, length: int) -> np.ndarray:
    """A core's busy µs as a weight: 0 where it is not recorded or not positive."""
    if busy_us is None:
        return np.zeros(length)
    with np.errstate(invalid="ignore"):
        return np.where(busy_us > 0, busy_us, 0.0)


def _shared(cube: np.ndarray, vector: np.ndarray, cube_weight: np.ndarray,
            vector_weight: np.ndarray) -> np.ndarray:
    """A pipe both cores have, over the kernel: each side's ratio weighted by its busy time.

    A side without a ratio weighs nothing; where no side has weight (both times zero or
    unknown) the ratios present are averaged; NaN where neither is recorded. Few
    whole-array passes and temporaries: this runs on every kernel of a 1M-row table.
    """
    sides = []
    for ratio, weight in ((cube, cube_weight), (vector, vector_weight)):
        unknown = np.isnan(ratio)
        if unknown.any():
            ratio, weight = np.where(unknown, 0.0, ratio), np.where(unknown, 0.0, weight)
        sides.append((ratio, weight, unknown))
    (cube, cube_weight, cube_unknown), (vector, vector_weight, vector_unknown) = sides
    total = cube_weight + vector_weight
    combined = cube * cube_weight
    combined += vector * vector_weight
    with np.errstate(invalid="ignore", divide="ignore"):
        combined /= total
    unweighted = np.flatnonzero(total == 0)
    if len(unweighted):  # the plain mean of the sides recorded; 0/0 (NaN) where none is
        recorded = (2.0 - cube_unknown[unweighted] - vector_unknown[unweighted])
        with np.errstate(invalid="ignore", divide="ignore"):
            combined[unweighted] = (cube[unweighted] + vector[unweighted]) / recorded
    return combined


def _pipes_of(counters: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """``pipe_*`` and ``pmu_*_us`` columns of one batch of kernels from its raw counters."""
    out = {field: counters[field] for field in BUSY_FIELDS if field in counters}
    length = len(next(iter(counters.values())))
    weights = None
    for pipe, field in zip(PIPES, PIPE_FIELDS):
        cube, vector = counters.get(CUBE_SIDE.get(pipe, "")), \
            counters.get(VECTOR_SIDE.get(pipe, ""))
        if cube is not None and vector is not None:
            if weights is None:  # once for both shared pipes
                weights = (_positive(counters.get("pmu_aicore_us"), length),
                           _positive(counters.get("pmu_aiv_us"), length))
            out[field] = _shared(cube, vector, *weights)
        elif cube is not None:
            out[field] = cube
        elif vector is not None:
            out[field] = vector
        elif UNIFIED.get(pipe) in counters:
            out[field] = counters[UNIFIED[pipe]]
    return out


# Kernels whose pipes are worked out at once: small enough for the temporaries to stay in
# the CPU's cache (a 1M-row table in one piece spent more in page faults than in sums).
BATCH_ROWS = 1 << 15


def _as_float(values) -> np.ndarray:
    """A counter batch as float64: numbers kept, N/A or text that is no number NaN."""
    if isinstance(values, np.ndarray) and values.dtype == np.float64:
        return values
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        if pa.types.is_floating(values.type):
            return values.to_numpy(zero_copy_only=False).astype(np.float64, copy=False)
        values = values.to_pandas()
    return pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(np.float64)


def _batches(counters: dict[str, Any], length: int):
    """(start, stop, {field: float64 array}) over the kernels, a few Arrow chunks at a time.

    Columns of one CSV read share their chunks; any other mix is taken as one batch.
    """
    columns = list(counters.values())
    chunked = all(isinstance(c, pa.ChunkedArray) for c in columns)
    sizes = [len(chunk) for chunk in columns[0].chunks] if chunked else []
    if not chunked or any([len(chunk) for chunk in c.chunks] != sizes for c in columns[1:]):
        yield 0, length, {field: _as_float(values) for field, values in counters.items()}
        return
    ends = np.cumsum(sizes)
    first, start = 0, 0
    while first < len(sizes):
        last = int(np.searchsorted(ends, start + BATCH_ROWS, side="left")) + 1
        last = min(max(last, first + 1), len(sizes))
        stop = int(ends[last - 1])
        yield start, stop, {field: _as_float(values.chunks[first] if last == first + 1
                                             else pa.chunked_array(values.chunks[first:last]))
                            for field, values in counters.items()}
        first, start = last, stop


def pipe_columns(counters: dict[str, pa.ChunkedArray | np.ndarray], length: int
                 ) -> dict[str, np.ndarray]:
    """The ``pipe_*`` and ``pmu_*_us`` columns (float64) of ``length`` kernels.

    ``counters`` are the raw counters a table records (COUNTER_FIELDS names, busy times in
    µs; Arrow columns as read, or arrays). A pipe no counter gives is left out, as is a
    busy time.
    """
    if not counters or not length:
        return {}
    columns: dict[str, np.ndarray] = {}
    for start, stop, batch in _batches(counters, length):
        for field, values in _pipes_of(batch).items():
            if start == 0 and stop == length:  # one batch: its arrays are the columns
                columns[field] = values
                continue
            if field not in columns:
                columns[field] = np.empty(length)
            columns[field][start:stop] = values
    return columns


def block_text(values) -> pd.Categorical:
    """A db's block dims (integers) as integer text (``32``); missing or no number NaN.

    Converted per distinct value, never a string per row.
    """
    numbers = pd.to_numeric(pd.Series(values), errors="coerce").to_numpy(np.float64)
    whole = np.isfinite(numbers) & (numbers == np.round(numbers)) & (np.abs(numbers) < 2 ** 53)
    codes, distinct = pd.factorize(np.where(whole, numbers, np.nan), sort=True)
    labels = [str(int(value)) for value in distinct]
    return pd.Categorical.from_codes(codes, categories=pd.Index(labels, dtype=object))
