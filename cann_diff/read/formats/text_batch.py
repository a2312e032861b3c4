"""Many small text exports read as stacks: one Arrow-to-pandas pass per kind of file.

A rank of a few hundred kernels costs more in per-file pandas work (building frames,
checking them, parsing ids) than in reading its files: over 1,000 such ranks that work
was most of the run. Here a chunk's kernel and step tables of one header are each read
by Arrow as one text (Arrow's set-up was most of a step table's read), its communication
files one by one by the JSON parser; then they are stacked, converted and checked once,
and cut back into one frame per file. Only regular files are stacked: small,
every number parsed by Arrow, no row skipped, no impossible duration. Any other file is
read by its own reader (``csv_files``, ``json_files``), with its own warnings. An error
raised here is for the caller to read the files one by one again (``torch_text``), so
that the error a user sees is the one the first bad rank raises alone.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from ...errors import CannDiffError, InputError
from ...schema import STAGE_FIELDS
from ..frames import cut_rows
from . import fast_json
from .csv_files import (
    KERNEL_NUMBERS,
    TEXT_TABLE_BYTES,
    checked_steps,
    joined_tables,
    kernel_columns,
    kernel_frame,
    no_shapes_warning,
    numeric_steps,
    read_kernel_table,
    read_step_trace,
    read_table_counted,
    split_header,
    step_arrow,
    step_columns,
)
from .files import require_file
from .json_files import comm_entries, comm_table, read_communication
from .values import impossible_durations


def _bounds(lengths: list[int]) -> np.ndarray:
    return np.r_[0, np.cumsum(lengths, dtype=np.int64)]


# What a file's first look gives: its columns (canonical field -> header), its Arrow table
# when it can be stacked (else None), and else the file's reader's own answer for it.
Look = tuple[dict[str, str], pa.Table | None, Any]


def _stacks(paths: list[Path], looks: list[Look]
            ) -> tuple[dict[int, Any], dict[tuple, list[tuple[int, Path, pa.Table]]]]:
    """Per path, its reader's answer (not regular) or its place in a stack of one layout.

    Returns ({position: answer}, {layout: [(position, path, table), …]}).
    """
    done: dict[int, Any] = {}
    stacks: dict[tuple, list[tuple[int, Path, pa.Table]]] = {}
    for number, (path, (picked, table, answer)) in enumerate(zip(paths, looks)):
        if table is None:
            done[number] = answer
        else:
            stacks.setdefault(tuple(picked.items()), []).append((number, path, table))
    return done, stacks


def _joined_looks(paths: list[Path], columns_of: Callable[..., dict[str, str]],
                  numeric: tuple[str, ...], regular: Callable[[Path], Look],
                  joined: Callable[[Path, dict[str, str], pa.Table], Look]) -> list[Look]:
    """``regular(path)`` of each path; small files of one header read as one text first.

    ``csv_files.joined_tables`` reads the files of a header together, and ``joined``
    makes a file's look from its rows (as ``regular`` would from the file). A file that
    ``split_header`` leaves out, or a header's files that cannot be read so, are looked
    at by ``regular``, one by one.
    """
    split = [split_header(path) for path in paths]
    picked = [columns_of(path, part[0] if part else None) for path, part in zip(paths, split)]
    groups: dict[tuple, list[tuple[int, bytes]]] = {}
    for number, part in enumerate(split):
        if part is not None:
            groups.setdefault((tuple(picked[number].items()), part[0]), []).append(
                (number, part[1]))
    looks: dict[int, Look] = {}
    for (_, header), members in groups.items():
        first = members[0][0]
        tables = joined_tables([body for _, body in members], paths[first], list(header),
                               picked[first], numeric) if len(members) > 1 else None
        for (number, _), table in zip(members, tables or ()):
            looks[number] = joined(paths[number], picked[number], table)
    return [looks[n] if n in looks else regular(path) for n, path in enumerate(paths)]


def _regular_kernels(path: Path) -> Look:
    """A small kernel table whose every start, duration and step id Arrow parses."""
    picked = kernel_columns(path)
    if require_file(path) <= TEXT_TABLE_BYTES:
        try:
            table, skipped = read_table_counted(path, picked, numeric=KERNEL_NUMBERS)
        except InputError:  # a value Arrow could not parse: the reader reads it as text
            table, skipped = None, 0
        if table is not None and table.num_rows and not skipped:
            return picked, table, None
    return picked, None, read_kernel_table(path)


def _joined_kernels(path: Path, picked: dict[str, str], table: pa.Table) -> Look:
    # No rows: the reader says what the file lacks.
    return (picked, table, None) if table.num_rows else (picked, None, read_kernel_table(path))


def kernel_tables(paths: list[Path]) -> list[tuple[pd.DataFrame, list[str]]]:
    """``read_kernel_table`` of each path: the same frames and warnings."""
    done, stacks = _stacks(paths, _joined_looks(paths, kernel_columns, KERNEL_NUMBERS,
                                                _regular_kernels, _joined_kernels))
    for key, members in stacks.items():
        done.update(_kernel_stack(members, dict(key))
                    or {number: read_kernel_table(path) for number, path, _ in members})
    return [done[number] for number in range(len(paths))]


def _kernel_stack(members: list[tuple[int, Path, pa.Table]], picked: dict[str, str]
                  ) -> dict[int, tuple[pd.DataFrame, list[str]]] | None:
    """The stack's frames, or None when a file must be read alone to say what it holds."""
    bounds = _bounds([table.num_rows for _, _, table in members])
    try:
        frame = kernel_frame(pa.concat_tables([table for _, _, table in members]),
                             members[0][1], picked, bounds)
    except CannDiffError:
        return None
    start, dur = frame["start_ns"].to_numpy(), frame["dur_us"].to_numpy()
    # Judged per file: "absurdly long" is against the span of the file's own rows.
    if any(impossible_durations(start[low:high], dur[low:high]).any()
           for low, high in zip(bounds[:-1], bounds[1:])):
        return None
    shapes = "input_shapes" in picked
    return {number: (part, [] if shapes else [no_shapes_warning(path)])
            for (number, path, _), part in zip(members, cut_rows(frame, bounds))}


def _regular_steps(path: Path) -> Look:
    """A step table whose figures Arrow parses; a header only is the reader's None."""
    picked = step_columns(path)
    try:
        table = step_arrow(path, picked)
    except InputError:  # a figure that is no number: the reader reads the file as text
        return picked, None, read_step_trace(path)
    if not table.num_rows:
        return picked, None, None  # a header and no steps, as the reader says
    return picked, table, None


def _joined_steps(path: Path, picked: dict[str, str], table: pa.Table) -> Look:
    # A header only: no steps, as the reader says.
    return picked, table if table.num_rows else None, None


def step_tables(paths: list[Path]) -> list[pd.DataFrame | None]:
    """``read_step_trace`` of each path: the same frames (None for a header only)."""
    done, stacks = _stacks(paths, _joined_looks(paths, step_columns, STAGE_FIELDS,
                                                _regular_steps, _joined_steps))
    for key, members in stacks.items():
        picked = dict(key)
        bounds = _bounds([table.num_rows for _, _, table in members])
        try:
            first = members[0][1]
            frame = checked_steps(numeric_steps(
                pa.concat_tables([table for _, _, table in members]), first, picked), first)
        except CannDiffError:
            done.update({number: read_step_trace(path) for number, path, _ in members})
            continue
        done.update({number: part
                     for (number, _, _), part in zip(members, cut_rows(frame, bounds))})
    return [done[number] for number in range(len(paths))]


def communications(files: list[tuple[Path, int]]) -> list[pd.DataFrame]:
    """``read_communication(path, rank)`` of each (path, rank): the same frames.

    A file without ops gets its frame of its own: an empty text column is ``object``,
    where a slice of a stack keeps the stack's ``str``.
    """
    if not files:
        return []
    with fast_json.collector_paused():
        entries = [comm_entries(path) for path, _ in files]
        lengths = [len(keys) for _, keys, _ in entries]
        try:
            frame = comm_table(files[0][0],
                               np.repeat(np.array([rank for _, rank in files], dtype=np.int64),
                                         lengths),
                               list(chain.from_iterable(steps for steps, _, _ in entries)),
                               list(chain.from_iterable(keys for _, keys, _ in entries)),
                               list(chain.from_iterable(infos for _, _, infos in entries)))
        except CannDiffError:  # named by the file that holds the bad value
            return [read_communication(path, rank) for path, rank in files]
    return [part if length else comm_table(path, [], [], [], [])
            for part, length, (path, _) in zip(cut_rows(frame, _bounds(lengths)), lengths, files)]
