"""torch_npu (Ascend PyTorch Profiler) text export: a ``*_ascend_pt`` directory.

Layout (docs/formats.md §1.1)::

    <worker>_<timestamp>_ascend_pt/
        profiler_info_<rank>.json
        ASCEND_PROFILER_OUTPUT/kernel_details.csv, step_trace_time.csv, communication.json
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ...errors import CannDiffError
from ..rank_data import RankData
from . import text_batch
from .csv_files import TEXT_TABLE_BYTES, read_kernel_table, read_step_trace
from .files import present
from .json_files import read_communication, read_profiler_info

FORMAT = "ascend_pt_text"
LOOKS_FOR = "ASCEND_PROFILER_OUTPUT/kernel_details.csv"
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
KERNELS = "kernel_details.csv"
STEPS = "step_trace_time.csv"
COMMUNICATION = "communication.json"


def output_dir(rank_dir: Path) -> Path:
    """The directory holding the exported files of one rank."""
    return rank_dir if rank_dir.name == OUTPUT_DIR or present(rank_dir / KERNELS) \
        else rank_dir / OUTPUT_DIR


def is_rank_dir(path: Path) -> bool:
    """True when ``path`` is one rank's text export (or its ASCEND_PROFILER_OUTPUT).

    Any entry named kernel_details.csv counts (a directory, a FIFO): reading it then
    says what is wrong, instead of the rank being passed over in silence.
    """
    return present(output_dir(path) / KERNELS)


def rank_dir_of(path: Path) -> Path:
    """The ``*_ascend_pt`` directory (holding profiler_info) of an output directory."""
    return path.parent if path.name == OUTPUT_DIR else path


@dataclass(frozen=True)
class _Rank:
    """A rank's files and what its profiler_info says, before its tables are read."""

    root: Path
    out: Path
    info: dict
    warnings: tuple[str, ...]

    @property
    def rank(self) -> int | None:
        return self.info.get("rank")

    @property
    def comm_rank(self) -> int:
        """The rank its communication rows carry: 0 when profiler_info names none."""
        rank = self.rank
        return rank if rank is not None else 0

    @property
    def steps_file(self) -> Path:
        return self.out / STEPS

    @property
    def comm_file(self) -> Path:
        return self.out / COMMUNICATION


def _rank_files(path: Path) -> _Rank:
    out = output_dir(path)
    root = rank_dir_of(out)
    infos = sorted(root.glob("profiler_info*.json"))
    info = read_profiler_info(infos[0]) if infos else {}
    warnings = () if infos else (f"{root.name}: no profiler_info*.json; rank and versions "
                                 "unknown",)
    return _Rank(root, out, info, warnings)


def _rank_data(files: _Rank, ops: pd.DataFrame, kernel_warnings: list[str],
               steps: pd.DataFrame | None, comm: pd.DataFrame | None) -> RankData:
    warnings = [*files.warnings, *kernel_warnings]
    if steps is None and present(files.steps_file):
        warnings.append(f"{STEPS}: header only, no steps")
    return RankData(source=files.root, format=FORMAT, rank=files.rank, ops=ops, steps=steps,
                    comm=comm, info=files.info, warnings=tuple(warnings))


def read_rank(path: Path) -> RankData:
    """Read one rank's text export."""
    files = _rank_files(path)
    ops, kernel_warnings = read_kernel_table(files.out / KERNELS)
    steps = read_step_trace(files.steps_file) if present(files.steps_file) else None
    comm = read_communication(files.comm_file, files.comm_rank) \
        if present(files.comm_file) else None
    return _rank_data(files, ops, kernel_warnings, steps, comm)


# Ranks whose kernel tables are at most TEXT_TABLE_BYTES are read as stacks of up to this
# many bytes of kernel tables (and BATCH_MAX_RANKS ranks): the stack's frames are held
# together until the ranks are reduced.
BATCH_MAX_BYTES = 16 << 20
BATCH_MAX_RANKS = 512


def _kernel_bytes(path: Path) -> int | None:
    """The size of the rank's kernel table when it is small enough to stack, else None."""
    try:
        size = (output_dir(path) / KERNELS).stat().st_size
    except (OSError, CannDiffError):
        return None  # read alone in its turn, where the reader names the problem
    return size if size <= TEXT_TABLE_BYTES else None


def read_ranks(paths: list[Path]) -> Iterator[RankData]:
    """``read_rank`` of each path, in order; runs of small ranks read as stacks.

    A large rank is read alone when its turn comes, so that it can be reduced (and its
    rows let go) before the next is read. A stack's ranks hold slices of its frames, so
    the stack lives until its last rank is let go: at most ``BATCH_MAX_BYTES`` of tables.
    """
    batch: list[Path] = []
    held = 0
    for path in paths:
        size = _kernel_bytes(path)
        if batch and (size is None or held + size > BATCH_MAX_BYTES
                      or len(batch) >= BATCH_MAX_RANKS):
            yield from _read_batch(batch)
            batch, held = [], 0
        if size is None:
            yield read_rank(path)
        else:
            batch.append(path)
            held += size
    yield from _read_batch(batch)


def _read_batch(paths: list[Path]) -> Iterator[RankData]:
    """The ranks read as stacks (``text_batch``), or one by one after any error there.

    One by one, each rank is handed on before the next is read, as without stacks: its
    reduce (which reads a rank's host side) then fails before a later rank's read does,
    so the error raised is the one the first bad rank raises alone. An error that is no
    input error (a bug, an input the stacks do not foresee) takes the same way: the
    stacks only make reading faster, never change what it gives.
    """
    stacked = None
    if len(paths) > 1:
        try:
            stacked = _read_stacked(paths)
        except Exception:  # read again one by one, which raises what it raises
            stacked = None
    if stacked is None:
        for path in paths:
            yield read_rank(path)
    else:
        yield from stacked


def _read_stacked(paths: list[Path]) -> list[RankData]:
    ranks = [_rank_files(path) for path in paths]
    kernels = text_batch.kernel_tables([r.out / KERNELS for r in ranks])
    stepped = [n for n, r in enumerate(ranks) if present(r.steps_file)]
    steps = dict(zip(stepped, text_batch.step_tables([ranks[n].steps_file for n in stepped])))
    talking = [n for n, r in enumerate(ranks) if present(r.comm_file)]
    comms = dict(zip(talking, text_batch.communications(
        [(ranks[n].comm_file, ranks[n].comm_rank) for n in talking])))
    return [_rank_data(r, ops, warnings, steps.get(n), comms.get(n))
            for n, (r, (ops, warnings)) in enumerate(zip(ranks, kernels))]
