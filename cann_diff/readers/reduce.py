"""Read-and-reduce: one rank's canonical rows become a RunSummary where the rank was read.

Hundreds of ranks of millions of kernels do not fit the machine that writes the report.
Everything the comparison needs from the rows is additive per (rank, step, operator) —
counts, total and exposed time, copies by direction, communication sums — except the
duration distribution behind medians, percentiles and tests, which is kept as a bounded
sample of order statistics. Summaries of ranks concatenate, and steps select on them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..canonical import copy_direction
from ..schema import COMM_SUMMARY_KEY, SUMMARY_KEY, RunSummary
from ..timeline import exposed_communication_us
from .derive import concat_frames

SAMPLE_BUDGET = 4_000_000  # durations kept per side over all ranks (12 bytes each)
MIN_RANK_SAMPLES = 20_000  # ... but at least this many per rank
MIN_ROW_SAMPLES = 3  # and this many per summary row, so that a rare operator stays testable
COUNT_COLUMNS = ("count", "total_us", "exposed_us")


def samples_per_rank(n_ranks: int) -> int:
    """The share of the sample budget one rank may keep."""
    return max(SAMPLE_BUDGET // max(n_ranks, 1), MIN_RANK_SAMPLES)


def _empty_ops() -> pd.DataFrame:
    frame = pd.DataFrame({c: pd.Series(dtype="object") for c in SUMMARY_KEY})
    frame = frame.astype({"rank": "int64", "step": "Int64"})
    for column in COUNT_COLUMNS:
        frame[column] = pd.Series(dtype="int64" if column == "count" else "float64")
    return frame


def _empty_samples() -> pd.DataFrame:
    return pd.DataFrame({"row": pd.Series(dtype="int64"), "dur_us": pd.Series(dtype="float64")})


def _empty_comm() -> pd.DataFrame:
    frame = pd.DataFrame({c: pd.Series(dtype="object") for c in COMM_SUMMARY_KEY})
    return frame.astype({"rank": "int64", "step": "Int64"}).assign(ops=pd.Series(dtype="int64"))


def empty_summary() -> RunSummary:
    """The summary of a run without kernels or communication rows."""
    return RunSummary(_empty_ops(), _empty_samples(), _empty_comm())


def _copy_directions(ops: pd.DataFrame) -> pd.Categorical:
    """Direction of each memcpy row (from its names), ``""`` for every other row."""
    codes = np.zeros(len(ops), dtype=np.int8)
    names = pd.Index([""])
    is_copy = (ops["category"] == "memcpy").to_numpy()
    if is_copy.any():
        copies = ops[is_copy]
        text = copies["op_name"].astype(str) + " " + copies["op_type_raw"].astype(str) \
            + " " + copies["op_type"].astype(str)
        direction = copy_direction(text).to_numpy()
        names = names.append(pd.Index(sorted(set(direction))))
        codes[is_copy] = names.get_indexer(direction)
    return pd.Categorical.from_codes(codes, names)


def _exposed(ops: pd.DataFrame) -> np.ndarray:
    exposed = np.zeros(len(ops))
    is_comm = (ops["category"] == "communication").to_numpy()
    if is_comm.any():
        exposed[is_comm] = exposed_communication_us(ops).to_numpy()
    return exposed


def order_statistics(row: np.ndarray, durations: np.ndarray, counts: np.ndarray,
                     max_samples: int | None) -> tuple[np.ndarray, np.ndarray, bool]:
    """At most about ``max_samples`` durations, each row keeping its share.

    A row of n durations keeps k = max(MIN_ROW_SAMPLES, ⌈n·f⌉) (f = max_samples / all
    durations), the order statistics at the midpoints ⌊(i + ½)·n/k⌋ of its sorted
    durations: deterministic, spread over the whole distribution, every one when k = n.
    Returns each sample's row, its duration, and whether any was left out.
    """
    if max_samples is None or len(durations) <= max_samples:
        return row, durations, False
    fraction = max_samples / len(durations)
    take = np.minimum(counts, np.maximum(MIN_ROW_SAMPLES,
                                         np.ceil(counts * fraction).astype(np.int64)))
    order = np.lexsort((durations, row))
    starts = np.cumsum(counts) - counts
    pick_row = np.repeat(np.arange(len(counts)), take)
    rank_in_row = np.arange(int(take.sum())) - np.repeat(np.cumsum(take) - take, take)
    position = starts[pick_row] + (2 * rank_in_row + 1) * counts[pick_row] // (2 * take[pick_row])
    return pick_row, durations[order][position], True


def summarize_ops(ops: pd.DataFrame,
                  max_samples: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame, bool]:
    """Canonical rows of one rank (``Run.ops`` columns) → summary rows, samples, sampled."""
    if ops.empty:
        return _empty_ops(), _empty_samples(), False
    keys = ops[[c for c in SUMMARY_KEY if c != "direction"]].copy()
    keys["direction"] = _copy_directions(ops)
    grouper = keys.groupby(list(SUMMARY_KEY), observed=True, sort=True, dropna=False)
    row = grouper.ngroup().to_numpy(np.int64)
    n_rows = int(row.max()) + 1
    first = np.empty(n_rows, dtype=np.int64)
    first[row[::-1]] = np.arange(len(row) - 1, -1, -1)  # first occurrence of each row
    durations = ops["dur_us"].to_numpy(np.float64)
    counts = np.bincount(row, minlength=n_rows)
    table = keys.iloc[first].reset_index(drop=True)
    table["count"] = counts
    table["total_us"] = np.bincount(row, weights=durations, minlength=n_rows)
    table["exposed_us"] = np.bincount(row, weights=_exposed(ops), minlength=n_rows)
    sample_row, sample_dur, sampled = order_statistics(row, durations, counts, max_samples)
    return table, pd.DataFrame({"row": sample_row, "dur_us": sample_dur}), sampled


def summarize_comm(comm: pd.DataFrame | None) -> pd.DataFrame:
    """Per-op communication rows → sums per (rank, step, comm_type, group) and op count."""
    if comm is None or comm.empty:
        return _empty_comm()
    keys = list(COMM_SUMMARY_KEY)
    numeric = [c for c in comm.columns if c not in keys and c != "op_name"
               and pd.api.types.is_numeric_dtype(comm[c])]
    frame = comm[keys + numeric].astype({"comm_type": "object", "group": "object"})
    grouped = frame.groupby(keys, sort=True, dropna=False)
    table = grouped[numeric].sum()
    table["ops"] = grouped.size()
    return table.reset_index()


def summarize(ops: pd.DataFrame, comm: pd.DataFrame | None,
              max_samples: int | None = None) -> RunSummary:
    """One rank's summary; ``max_samples`` bounds the durations kept (None: keep all)."""
    table, samples, sampled = summarize_ops(ops, max_samples)
    return RunSummary(table, samples, summarize_comm(comm), sampled)


def combine(parts: list[tuple[int, RunSummary]]) -> RunSummary:
    """Stack the summaries of ranks, giving each its rank id."""
    if not parts:
        return empty_summary()
    offsets = np.cumsum([0] + [len(s.ops) for _, s in parts[:-1]])
    ops = concat_frames(s.ops.assign(rank=rank) for rank, s in parts if len(s.ops))
    comm = concat_frames(s.comm.assign(rank=rank) for rank, s in parts if len(s.comm))
    samples = concat_frames(s.samples.assign(row=s.samples["row"].to_numpy() + offset)
                            for offset, (_, s) in zip(offsets, parts) if len(s.samples))
    return RunSummary(ops if len(ops.columns) else _empty_ops(),
                      samples if len(samples.columns) else _empty_samples(),
                      comm if len(comm.columns) else _empty_comm(),
                      any(s.sampled for _, s in parts))


def select(summary: RunSummary, keep_ops: np.ndarray, keep_comm: np.ndarray) -> RunSummary:
    """The summary restricted to the rows ``keep_ops`` / ``keep_comm`` (boolean masks)."""
    renumber = np.cumsum(keep_ops) - 1
    rows = summary.samples["row"].to_numpy()
    kept = keep_ops[rows] if len(rows) else np.zeros(0, dtype=bool)
    samples = pd.DataFrame({"row": renumber[rows[kept]],
                            "dur_us": summary.samples["dur_us"].to_numpy()[kept]})
    return RunSummary(summary.ops[keep_ops].reset_index(drop=True), samples,
                      summary.comm[keep_comm].reset_index(drop=True), summary.sampled)
