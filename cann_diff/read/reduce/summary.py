"""Read-and-reduce: one rank's canonical rows become a RunSummary where the rank was read.

Hundreds of ranks of millions of kernels do not fit the machine that writes the report.
Everything the comparison needs from the rows is additive per (rank, step, operator) —
counts, total and exposed time, copies by direction, communication sums — except the
duration distribution behind medians, percentiles and tests. That is kept as a sample:
every summary row keeps the same fraction f of its durations (at least one), as the
quantiles at (i + ½)/k of its sorted durations, so that pooled samples weigh every rank,
step and operator alike. Summaries of ranks concatenate, and steps select on them.
Beside them, ``adjacent``: the collective each MatMul-like kernel of an MC2 split runs
next to, the one fact about a kernel's neighbours the fusion finding needs; and
``attributes`` / ``pipes`` (``attributes.py``): what each row's kernels ran with, carried
wherever the rows go.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from ...schema import COMM_SUMMARY_KEY, SUMMARY_KEY, RunSummary
from ...vocab import Vocabulary, default_vocabulary
from ...vocab.names import copy_direction
from ..frames import concat_frames
from .attributes import (
    empty_attributes,
    empty_pipes,
    kernel_attributes,
    kernel_pipes,
    renumbered,
    rows_between,
    stacked,
)
from .timeline import exposed_communication_us

RANK_SLACK = 2  # a rank may keep twice its even share, so that unequal ranks lose nothing
COUNT_COLUMNS = ("count", "total_us", "exposed_us")
ADJACENT_KEY = ("rank", "step", "op_type", "input_shapes", "comm_type")


def samples_per_rank(n_ranks: int, budget: int) -> int:
    """The durations one rank may keep before the side's ``budget`` is shared out."""
    return max(RANK_SLACK * budget // max(n_ranks, 1), 1)


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


def _empty_adjacent() -> pd.DataFrame:
    frame = pd.DataFrame({c: pd.Series(dtype="category") for c in ADJACENT_KEY})
    return frame.astype({"rank": "int64", "step": "Int64"}).assign(
        count=pd.Series(dtype="int64"), total_us=pd.Series(dtype="float64"))


def empty_summary() -> RunSummary:
    """The summary of a run without kernels or communication rows."""
    return RunSummary(_empty_ops(), _empty_samples(), _empty_comm(), adjacent=_empty_adjacent(),
                      attributes=empty_attributes(), pipes=empty_pipes())


def sort_codes(column: pd.Series) -> tuple[np.ndarray, int]:
    """Codes in the order ``groupby(sort=True, dropna=False)`` sorts ``column``, and their count.

    A missing value gets the last code, where the groupby puts it.
    """
    if isinstance(column.dtype, pd.CategoricalDtype):
        codes = column.cat.codes.to_numpy(np.int64)
        width = len(column.cat.categories) + 1
    else:
        found, uniques = pd.factorize(column, sort=True)
        codes, width = found.astype(np.int64), len(uniques) + 1
    return np.where(codes < 0, width - 1, codes), width


def group_ids(frame: pd.DataFrame, columns: list[str]) -> np.ndarray:
    """``frame.groupby(columns, observed=True, sort=True, dropna=False).ngroup()``, as int64.

    The key columns' codes are folded into one int64 per row and numbered in their sorted
    order: on the few hundred rows of one rank a pandas groupby costs a millisecond, this
    a tenth of it. The numbering is a hash table's (``pd.factorize``, its few distinct
    keys sorted after): np.unique sorts every row, 70 ms at 1M rows against 8 ms. Falls
    back to the groupby when the folded codes would overflow.
    """
    combined = np.zeros(len(frame), dtype=np.int64)
    size = 1
    for column in columns:
        codes, width = sort_codes(frame[column])
        size *= width
        if size >= 2**62:
            return frame.groupby(columns, observed=True, sort=True, dropna=False
                                 ).ngroup().to_numpy(np.int64)
        combined = combined * width + codes
    return pd.factorize(combined, sort=True)[0].astype(np.int64)


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


def kept_per_row(counts: np.ndarray, fraction: float) -> np.ndarray:
    """Durations each row keeps at ``fraction``: ⌊n·f⌉, at least one, at most n."""
    if fraction >= 1:
        return counts.copy()
    return np.minimum(counts, np.maximum(1, np.rint(counts * fraction).astype(np.int64)))


def sample_fraction(counts: np.ndarray, budget: int | None) -> float:
    """The largest fraction f ≤ 1 whose kept durations fit ``budget``.

    0 when even one duration per row does not fit: every row then keeps one, so the
    sample never outgrows the summary rows it belongs to.
    """
    if budget is None or counts.sum() <= budget:
        return 1.0
    if len(counts) >= budget:
        return 0.0
    low, high = 0.0, budget / counts.sum() * 2
    for _ in range(40):  # the kept total is monotone in f: bisect
        middle = (low + high) / 2
        low, high = (middle, high) if kept_per_row(counts, middle).sum() <= budget \
            else (low, middle)
    return low


def quantile_sample(row: np.ndarray, values: np.ndarray, take: np.ndarray
                    ) -> tuple[np.ndarray, np.ndarray]:
    """``take[r]`` values per row r: the quantiles at (i + ½)/k of the row's values.

    Hazen plotting positions, interpolated between neighbours; every value itself when
    k equals the row's size. Deterministic, so an unchanged run samples the same.
    """
    order = np.lexsort((values, row))
    ordered = values[order]
    sizes = np.bincount(row, minlength=len(take))
    starts = np.cumsum(sizes) - sizes
    pick_row = np.repeat(np.arange(len(take)), take)
    i = np.arange(int(take.sum())) - np.repeat(np.cumsum(take) - take, take)
    n, k = sizes[pick_row], take[pick_row]
    position = np.clip((i + 0.5) * n / k - 0.5, 0, n - 1)
    low = np.floor(position).astype(np.int64)
    high = np.minimum(low + 1, n - 1)
    weight = position - low
    picked = ordered[starts[pick_row] + low] * (1 - weight) \
        + ordered[starts[pick_row] + high] * weight
    return pick_row, picked


def _resample(samples: pd.DataFrame, counts: np.ndarray,
              fraction: float) -> tuple[pd.DataFrame, bool]:
    """Samples of rows with ``counts`` durations, brought down to ``fraction``."""
    take = kept_per_row(counts, fraction)
    if take.sum() >= len(samples):
        return samples, bool(take.sum() < counts.sum())
    row, picked = quantile_sample(samples["row"].to_numpy(), samples["dur_us"].to_numpy(), take)
    return pd.DataFrame({"row": row, "dur_us": picked}), True


def summarize_ops(ops: pd.DataFrame, max_samples: int | None = None
                  ) -> tuple[pd.DataFrame, pd.DataFrame, float]:
    """Canonical rows of one rank (``Run.ops`` columns) → summary rows, samples, fraction."""
    return _summarize_ops(ops, max_samples)[:3]


def _summarize_ops(ops: pd.DataFrame, max_samples: int | None
                   ) -> tuple[pd.DataFrame, pd.DataFrame, float, np.ndarray]:
    """``summarize_ops``, and each kernel's summary row."""
    if ops.empty:
        return _empty_ops(), _empty_samples(), 1.0, np.zeros(0, dtype=np.int64)
    # No .copy(): pandas ≥ 3 copies on write, so adding ``direction`` leaves ``ops`` as it
    # was; a deep copy of the seven 1M-row columns cost ~13 ms, a tenth of this function
    # (more than ``adjacent_kernels`` costs).
    keys = ops[[c for c in SUMMARY_KEY if c != "direction"]]
    keys["direction"] = _copy_directions(ops)
    row = group_ids(keys, list(SUMMARY_KEY))
    n_rows = int(row.max()) + 1
    first = np.empty(n_rows, dtype=np.int64)
    first[row[::-1]] = np.arange(len(row) - 1, -1, -1)  # first occurrence of each row
    durations = ops["dur_us"].to_numpy(np.float64)
    counts = np.bincount(row, minlength=n_rows)
    table = keys.iloc[first].reset_index(drop=True)
    table["count"] = counts
    table["total_us"] = np.bincount(row, weights=durations, minlength=n_rows)
    table["exposed_us"] = np.bincount(row, weights=_exposed(ops), minlength=n_rows)
    fraction = sample_fraction(counts, max_samples)
    samples, sampled = _resample(pd.DataFrame({"row": row, "dur_us": durations}), counts,
                                 fraction)
    return table, samples, fraction if sampled else 1.0, row


def _group_sum(row: np.ndarray, values: pd.Series) -> np.ndarray:
    """Per group id, its values added in row order; whole numbers stay whole."""
    weights = np.nan_to_num(values.to_numpy(np.float64, na_value=np.nan), nan=0.0)
    summed = np.bincount(row, weights=weights)
    return summed if values.dtype.kind == "f" else np.rint(summed).astype(np.int64)


def summarize_comm(comm: pd.DataFrame | None) -> pd.DataFrame:
    """Per-op communication rows → sums per (rank, step, comm_type, group) and op count.

    Built column by column from numpy arrays in one frame: on the few dozen collectives
    of one rank, pandas' per-column overhead was most of the cost.
    """
    if comm is None or comm.empty:
        return _empty_comm()
    keys = list(COMM_SUMMARY_KEY)
    numeric = [c for c in comm.columns if c not in keys and c != "op_name"
               and pd.api.types.is_numeric_dtype(comm[c])]
    row = group_ids(comm, keys)  # text keys sort alike as str or object
    first = np.empty(int(row.max()) + 1, dtype=np.int64)
    first[row[::-1]] = np.arange(len(row) - 1, -1, -1)
    # Each group's values added in row order (a missing value counts 0, as in a groupby
    # sum), as the kernel sums are: pandas' grouped sum gave a group other last bits when
    # other groups stood beside it, so a rank reduced in a stack and alone differed.
    sums = {column: _group_sum(row, comm[column]) for column in numeric}
    table = {"rank": comm["rank"].to_numpy()[first], "step": comm["step"].array.take(first)}
    for column in ("comm_type", "group"):  # text keys come back as an index infers them
        table[column] = pd.Index(comm[column].to_numpy(dtype=object)[first])
    table.update(sums)
    table["ops"] = np.bincount(row).astype(np.int64)
    return pd.DataFrame(table)


def split_neighbours(vocab: Vocabulary) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """What may neighbour in an MC2 split: (compute families, collectives before, after).

    From the fusion table: each fused op's first compute family (MatMul, BatchMatMul,
    GroupedMatmul), the collectives right before one in a split order (AllGather,
    MatMul: the kernel takes what was gathered) and those right after one (MatMul,
    AllReduce: the kernel feeds it).
    """
    compute: set[str] = set()
    before: set[str] = set()
    after: set[str] = set()
    for spec in vocab.fusion.values():
        if not spec.compute or spec.compute[0] not in spec.split:
            continue
        at = spec.split.index(spec.compute[0])
        compute.add(spec.compute[0])
        before.update(s for s in spec.split[max(at - 1, 0):at] if s in spec.comm)
        after.update(s for s in spec.split[at + 1:at + 2] if s in spec.comm)
    return frozenset(compute), frozenset(before), frozenset(after)


def _units(*frames: pd.DataFrame) -> list[np.ndarray]:
    """Per row of each frame, one int64 per (rank, step), alike across the frames."""
    steps = [f["step"].to_numpy(np.int64, na_value=-1) + 1 for f in frames]  # missing: 0
    above = max(int(s.max(initial=0)) for s in steps) + 1
    return [f["rank"].to_numpy(np.int64) * above + s for f, s in zip(frames, steps)]


KERNEL, BEFORE, AFTER = 1, 2, 3  # what a row is in the sequence of neighbours; 0: not in it


def _is(column: pd.Series, values) -> np.ndarray:
    """Whether each summary row's value is one of ``values``, looked up per category.

    Read from the Categorical itself: on a small rank the ``.cat`` accessor's Series
    were most of the cost.
    """
    array = column.array
    if not isinstance(array, pd.Categorical):
        return column.isin(list(values)).to_numpy()
    held = np.fromiter((c in values for c in array.categories), dtype=bool,
                       count=len(array.categories))
    return np.append(held, False)[array.codes]  # code -1 (missing) picks the False


def _kinds(table: pd.DataFrame, vocab: Vocabulary) -> np.ndarray:
    """Per summary row: KERNEL, BEFORE, AFTER (``split_neighbours``) or 0 (none of them).

    Decided per summary row, then gathered per kernel: one test of a 1M-row rank's
    column cost a millisecond.
    """
    compute, before, after = split_neighbours(vocab)
    category, comm_type = table["category"], table["comm_type"]
    collective = _is(category, ("communication",))
    kind = np.where(_is(table["family"], compute) & _is(category, ("compute",)), KERNEL, 0)
    kind[collective & _is(comm_type, before)] = BEFORE
    kind[collective & _is(comm_type, after)] = AFTER
    return kind.astype(np.int8)


def _sequence(ops: pd.DataFrame, row: np.ndarray, ranks: np.ndarray, kinds: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray]:
    """The rows of the sequence (kinds not 0) in (rank, start) order, and their kinds.

    About a quarter of a training step's kernels are MatMul-like: a sort of them cost
    15 ms on a 1M-row rank, so rows already in order (a text export's, a db's, which the
    reader sorts, and the ranks of a stack one after another) are not sorted again.
    """
    every = kinds[row]
    rows = np.flatnonzero(every != 0)
    kind = every[rows]
    start = ops["start_ns"].to_numpy(np.int64)[rows]
    later = start[1:] > start[:-1]  # a tie is left to the sort, which orders it
    keys = [kind == KERNEL, start]
    if ranks.min() < ranks.max():
        rank = ranks[row[rows]]
        later = later & (rank[1:] == rank[:-1]) | (rank[1:] > rank[:-1])
        keys.append(rank)
    if later.all():
        return rows, kind
    # At one start a collective sorts first: launched beside the kernel after it (not
    # exposed), it starts with that kernel, and the kernel before fed it.
    order = np.lexsort(keys)
    return rows[order], kind[order]


def _attached(ops: pd.DataFrame, rows: np.ndarray, kind: np.ndarray, unit_of
              ) -> tuple[np.ndarray, np.ndarray]:
    """Positions in ``rows`` of the kernels next to a collective, and of that collective.

    A kernel feeds the collective right after it, or takes what the one right before it
    gathered, when nothing of the sequence lies between them and both are of one (rank,
    step) (``unit_of`` ops rows). When both, the nearer: the gap from the kernel's end to
    the next one's start against the gap from the previous one's end to the kernel's
    start (a tie goes to the one after).
    """
    collective = np.flatnonzero(kind > KERNEL)  # a tenth of the sequence: look from them
    fed = collective[(kind[collective] == AFTER) & (collective > 0)]
    fed = fed[kind[fed - 1] == KERNEL]
    gathered = collective[(kind[collective] == BEFORE) & (collective < len(rows) - 1)]
    gathered = gathered[kind[gathered + 1] == KERNEL]
    fed = fed[unit_of(rows[fed - 1]) == unit_of(rows[fed])]
    gathered = gathered[unit_of(rows[gathered + 1]) == unit_of(rows[gathered])]
    both = np.intersect1d(fed - 1, gathered + 1, assume_unique=True)
    if len(both):
        start, dur_us = ops["start_ns"].to_numpy(np.int64), ops["dur_us"].to_numpy()

        def end(position: np.ndarray) -> np.ndarray:
            at = rows[position]
            return start[at] + np.rint(dur_us[at] * 1000).astype(np.int64)

        after_nearer = start[rows[both + 1]] - end(both) <= start[rows[both]] - end(both - 1)
        fed = np.setdiff1d(fed, both[~after_nearer] + 1, assume_unique=True)
        gathered = np.setdiff1d(gathered, both[after_nearer] - 1, assume_unique=True)
    return np.r_[fed - 1, gathered + 1], np.r_[fed, gathered]


def adjacent_kernels(ops: pd.DataFrame, row: np.ndarray, table: pd.DataFrame,
                     vocab: Vocabulary | None = None) -> pd.DataFrame:
    """Split compute kernels next to a collective: ``RunSummary.adjacent``.

    One row per (rank, step, op_type, input_shapes, comm_type) with ``count`` and
    ``total_us`` (µs). The canonical rows carry no stream, so neighbours are taken in
    start order on the rank, in the sequence of the fusion table's split compute kernels
    and of the collectives it puts right before or after one (``_attached``): an MC2
    split's MatMul is told from an ordinary one of the same shapes by the collective it
    feeds (AllReduce, ReduceScatter) or follows (AllGather). ``row``: each kernel's row
    in ``table`` (its summary). Rows come in the order of their first kernel, so a rank
    reduced in a stack gets what it gets alone.
    """
    kinds = _kinds(table, vocab or default_vocabulary())
    if not (kinds == KERNEL).any() or not (kinds > KERNEL).any():
        return _empty_adjacent()
    rows, kind = _sequence(ops, row, table["rank"].to_numpy(np.int64), kinds)
    [units] = _units(table)
    kernels, collectives = _attached(ops, rows, kind, lambda at: units[row[at]])
    kernels, collectives = rows[kernels], rows[collectives]
    comm_type = pd.Categorical(table["comm_type"].array)  # the column's own if categorical
    width = len(comm_type.categories) + 1
    first_seen = np.argsort(kernels, kind="stable")
    group, ids = pd.factorize((row[kernels] * width + comm_type.codes[row[collectives]]
                               + 1)[first_seen])
    return pd.DataFrame({
        **{c: table[c].array.take(ids // width) for c in ADJACENT_KEY[:-1]},
        "comm_type": pd.Categorical.from_codes(ids % width - 1, comm_type.categories),
        "count": np.bincount(group, minlength=len(ids)),
        "total_us": np.bincount(group, weights=ops["dur_us"].to_numpy()[kernels[first_seen]],
                                minlength=len(ids))})


def summarize(ops: pd.DataFrame, comm: pd.DataFrame | None,
              max_samples: int | None = None, vocab: Vocabulary | None = None) -> RunSummary:
    """One rank's summary; ``max_samples`` bounds the durations kept (None: keep all).

    ``vocab`` says which kernels and collectives ``adjacent`` pairs (None: the package's
    fusion table).
    """
    table, samples, fraction, row = _summarize_ops(ops, max_samples)
    adjacent = adjacent_kernels(ops, row, table, vocab) if len(ops) else _empty_adjacent()
    return RunSummary(table, samples, summarize_comm(comm), fraction < 1, fraction, adjacent,
                      kernel_attributes(ops, row, len(table)), kernel_pipes(ops, row, len(table)))


@dataclass(frozen=True, eq=False)
class Stack:
    """The summary of ranks reduced as one stack (rank key: each rank's slot in it).

    ``rows``, ``samples`` and ``comm`` are count + 1 offsets: slot k's summary rows are
    ``rows[k]:rows[k + 1]``, and so on. The ranks keep a ``StackShare`` of it, so a worker
    hands one summary per stack to the parent (pickling a frame per rank cost ~1.2 ms a
    rank) and ``combine`` takes the rows of consecutive ranks in one slice.
    """

    summary: RunSummary
    rows: np.ndarray
    samples: np.ndarray
    comm: np.ndarray
    reader_ranks: np.ndarray  # the rank id each rank's reader gave its communication rows

    def adjacent_bounds(self, first: int, last: int) -> np.ndarray:
        """Where the ``adjacent`` rows of slots ``first`` … ``last`` start.

        They come in slot order (each slot's in the order of its first kernel).
        """
        slots = self.summary.adjacent["rank"].to_numpy() \
            if self.summary.adjacent is not None else np.zeros(0, dtype=np.int64)
        return np.searchsorted(slots, np.arange(first, last + 1), side="left")

    def slots(self, first: int, last: int) -> RunSummary:
        """The summary rows of slots ``first`` … ``last - 1``, samples renumbered to them."""
        rows, comm = slice(self.rows[first], self.rows[last]), \
            slice(self.comm[first], self.comm[last])
        picked = slice(self.samples[first], self.samples[last])
        samples = pd.DataFrame({"row": self.summary.samples["row"].to_numpy()[picked]
                                - self.rows[first],
                                "dur_us": self.summary.samples["dur_us"].to_numpy()[picked]})
        adjacent = self.summary.adjacent
        if adjacent is not None:
            low, high = self.adjacent_bounds(first, last)[[0, -1]]
            adjacent = adjacent.iloc[low:high]
        low, high = int(self.rows[first]), int(self.rows[last])
        return RunSummary(self.summary.ops.iloc[rows], samples, self.summary.comm.iloc[comm],
                          adjacent=adjacent,
                          attributes=rows_between(self.summary.attributes, low, high),
                          pipes=rows_between(self.summary.pipes, low, high))

    def rank_summary(self, slot: int) -> RunSummary:
        """Slot ``slot``'s summary, as reducing that rank alone gives it."""
        part, empty = self.slots(slot, slot + 1), empty_summary()
        adjacent = part.adjacent
        if adjacent is not None:
            adjacent = adjacent.reset_index(drop=True).assign(rank=0) if len(adjacent) \
                else empty.adjacent
        return RunSummary(
            part.ops.reset_index(drop=True).assign(rank=0) if len(part.ops) else empty.ops,
            part.samples,
            part.comm.reset_index(drop=True).assign(rank=self.reader_ranks[slot])
            if len(part.comm) else empty.comm, adjacent=adjacent,
            attributes=part.attributes, pipes=part.pipes)


@dataclass(frozen=True, eq=False)
class StackShare:
    """One rank's part of a ``Stack``."""

    stack: Stack
    slot: int

    def summary(self) -> RunSummary:
        """The rank's own summary (``Stack.rank_summary``)."""
        return self.stack.rank_summary(self.slot)


@dataclass(frozen=True)
class _Piece:
    """Summary rows of one rank or of consecutive ranks of one stack, each row's rank id."""

    summary: RunSummary
    ops_ranks: np.ndarray
    comm_ranks: np.ndarray
    adjacent_ranks: np.ndarray


def _run_piece(shares: list[StackShare], ranks: list[int]) -> _Piece:
    stack, first, last = shares[0].stack, shares[0].slot, shares[-1].slot + 1
    ids = np.array(ranks, dtype=np.int64)
    return _Piece(stack.slots(first, last),
                  np.repeat(ids, np.diff(stack.rows[first:last + 1])),
                  np.repeat(ids, np.diff(stack.comm[first:last + 1])),
                  np.repeat(ids, np.diff(stack.adjacent_bounds(first, last))))


def _pieces(parts: list[tuple[int, RunSummary | StackShare]], join: bool = True
            ) -> list[_Piece]:
    """The parts, consecutive shares of one stack (slots one after another) joined.

    ``join=False`` keeps every share a piece of its own: ``_resample`` leaves a piece's
    samples as they are when all of them fit, so a run must not be judged as a whole.
    """
    pieces: list[_Piece] = []
    shares: list[StackShare] = []
    ranks: list[int] = []
    for rank, part in parts:
        if join and isinstance(part, StackShare) and shares \
                and part.stack is shares[-1].stack and part.slot == shares[-1].slot + 1:
            shares.append(part)
            ranks.append(rank)
            continue
        if shares:
            pieces.append(_run_piece(shares, ranks))
            shares, ranks = [], []
        if isinstance(part, StackShare):
            shares, ranks = [part], [rank]
        else:
            adjacent = len(part.adjacent) if part.adjacent is not None else 0
            pieces.append(_Piece(part, np.full(len(part.ops), rank, dtype=np.int64),
                                 np.full(len(part.comm), rank, dtype=np.int64),
                                 np.full(adjacent, rank, dtype=np.int64)))
    if shares:
        pieces.append(_run_piece(shares, ranks))
    return pieces


def _with_ranks(frames: list[pd.DataFrame], ranks: list[np.ndarray]) -> pd.DataFrame:
    """The frames with rows stacked, ``rank`` set to each row's id (see ``concat_ranks``)."""
    kept = [(f, r) for f, r in zip(frames, ranks) if len(f)]
    merged = concat_frames(f for f, _ in kept)
    if kept:
        merged["rank"] = np.concatenate([r for _, r in kept])
    return merged


def combine(parts: list[tuple[int, RunSummary | StackShare]], budget: int) -> RunSummary:
    """Stack the summaries of ranks (or their shares of a stack), giving each its rank id.

    Every rank is brought to one fraction — the smallest any rank kept, and no more than
    the side's ``budget`` of durations allows — so that the pooled samples weigh ranks
    alike.
    """
    if not parts:
        return empty_summary()
    pieces = _pieces(parts)
    counts = [p.summary.ops["count"].to_numpy(np.int64) for p in pieces]
    fraction = min([p.summary.fraction for p in pieces] +
                   [sample_fraction(np.concatenate(counts), budget)])
    if fraction < 1:  # resampled rank by rank, as their own summaries would be
        pieces = _pieces(parts, join=False)
        counts = [p.summary.ops["count"].to_numpy(np.int64) for p in pieces]
    offsets = np.cumsum([0] + [len(c) for c in counts[:-1]])
    rows, durations, sampled = [], [], False
    for piece, piece_counts, offset in zip(pieces, counts, offsets):
        kept, dropped = _resample(piece.summary.samples, piece_counts, fraction)
        sampled |= dropped
        if len(kept):  # stacked as arrays: a frame per rank cost more than its rows
            rows.append(kept["row"].to_numpy() + offset)
            durations.append(kept["dur_us"].to_numpy())
    ops = _with_ranks([p.summary.ops for p in pieces], [p.ops_ranks for p in pieces])
    comm = _with_ranks([p.summary.comm for p in pieces], [p.comm_ranks for p in pieces])
    samples = pd.DataFrame({"row": np.concatenate(rows), "dur_us": np.concatenate(durations)}) \
        if rows else _empty_samples()
    row_offsets = [int(n) for n in np.cumsum([0] + [len(p.summary.ops) for p in pieces[:-1]])]
    return RunSummary(ops if len(ops.columns) else _empty_ops(), samples,
                      comm if len(comm.columns) else _empty_comm(), sampled,
                      fraction if sampled else 1.0, _combined_adjacent(pieces),
                      stacked([p.summary.attributes for p in pieces], row_offsets,
                              empty_attributes),
                      stacked([p.summary.pipes for p in pieces], row_offsets, empty_pipes))


def _combined_adjacent(pieces: list[_Piece]) -> pd.DataFrame | None:
    """The pieces' ``adjacent`` rows stacked with their rank ids.

    None when a piece has none (a summary built without it): the fusion finding then
    pairs by keys alone, as for a run whose adjacency is unknown.
    """
    if any(p.summary.adjacent is None for p in pieces):
        return None
    adjacent = _with_ranks([p.summary.adjacent for p in pieces],
                           [p.adjacent_ranks for p in pieces])
    return adjacent if len(adjacent.columns) else _empty_adjacent()


def select(summary: RunSummary, keep_ops: np.ndarray, keep_comm: np.ndarray) -> RunSummary:
    """The summary restricted to the rows ``keep_ops`` / ``keep_comm`` (boolean masks).

    ``adjacent`` keeps the rows of the (rank, step)s whose summary rows are kept: every
    caller keeps or drops whole steps.
    """
    renumber = np.cumsum(keep_ops) - 1
    rows = summary.samples["row"].to_numpy()
    kept = keep_ops[rows] if len(rows) else np.zeros(0, dtype=bool)
    samples = pd.DataFrame({"row": renumber[rows[kept]],
                            "dur_us": summary.samples["dur_us"].to_numpy()[kept]})
    adjacent = summary.adjacent
    if adjacent is not None and len(adjacent):
        ops_units, adjacent_units = _units(summary.ops, adjacent)
        kept_units = pd.unique(ops_units[keep_ops])
        adjacent = adjacent[np.isin(adjacent_units, kept_units)].reset_index(drop=True)
    return RunSummary(summary.ops[keep_ops].reset_index(drop=True), samples,
                      summary.comm[keep_comm].reset_index(drop=True), summary.sampled,
                      summary.fraction, adjacent,
                      renumbered(summary.attributes, renumber, keep_ops),
                      renumbered(summary.pipes, renumber, keep_ops))
