"""torch_npu (Ascend PyTorch Profiler) text export: a ``*_ascend_pt`` directory.

Layout (docs/formats.md §1.1)::

    <worker>_<timestamp>_ascend_pt/
        profiler_info_<rank>.json
        ASCEND_PROFILER_OUTPUT/kernel_details.csv, step_trace_time.csv, communication.json
"""

from __future__ import annotations

from pathlib import Path

from ..rank_data import RankData
from .csv_files import read_kernel_table, read_step_trace
from .files import present
from .json_files import read_communication, read_profiler_info

FORMAT = "ascend_pt_text"
LOOKS_FOR = "ASCEND_PROFILER_OUTPUT/kernel_details.csv"
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
KERNELS = "kernel_details.csv"


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


def read_rank(path: Path) -> RankData:
    """Read one rank's text export."""
    out = output_dir(path)
    root = rank_dir_of(out)
    infos = sorted(root.glob("profiler_info*.json"))
    info = read_profiler_info(infos[0]) if infos else {}
    warnings = [] if infos else [f"{root.name}: no profiler_info*.json; rank and versions unknown"]
    ops, kernel_warnings = read_kernel_table(out / KERNELS)
    warnings += kernel_warnings
    rank = info.get("rank")
    steps_file = out / "step_trace_time.csv"
    steps = read_step_trace(steps_file) if present(steps_file) else None
    if present(steps_file) and steps is None:
        warnings.append(f"{steps_file.name}: header only, no steps")
    comm_file = out / "communication.json"
    comm = read_communication(comm_file, rank if rank is not None else 0) \
        if present(comm_file) else None
    return RankData(source=root, format=FORMAT, rank=rank, ops=ops, steps=steps, comm=comm,
                    info=info, warnings=tuple(warnings))
