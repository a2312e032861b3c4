"""msprof-analyze cluster output: a ``cluster_analysis_output`` directory.

It holds no kernels, only the per-rank step breakdown (``cluster_step_trace_time.csv``,
rows of ``Type`` ``rank``) and the per-rank communication detail
(``cluster_communication.json``: group → step → op → rank → time and bandwidth info).
Comparing two of them gives the per-rank and communication parts of the report.
"""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd

from ...errors import SchemaError
from ...schema import STAGE_FIELDS
from ..rank_data import RankData
from . import fast_json
from .csv_files import STEP_HEADERS, integer_ids, read_csv_columns, read_header
from .files import brief, is_directory, present
from .json_files import _step_number, comm_frame, comm_types_of, load_json
from .values import check_step_figures

FORMAT = "cluster_analysis_output"
LOOKS_FOR = "cluster_analysis_output/cluster_step_trace_time.csv"
STEPS = "cluster_step_trace_time.csv"
COMM = "cluster_communication.json"
RANK_KEY = re.compile(r"\d{1,9}", flags=re.ASCII)
RAW_OP_COLUMNS = ("op_name", "op_type_raw", "core", "start_ns", "dur_us", "step",
                  "input_shapes", "input_dtypes")


def is_rank_dir(path: Path) -> bool:
    """True for a directory holding cluster_step_trace_time.csv."""
    return is_directory(path) and present(path / STEPS)


def _no_kernels() -> pd.DataFrame:
    frame = pd.DataFrame({c: pd.Series(dtype="object") for c in RAW_OP_COLUMNS})
    return frame.astype({"start_ns": "int64", "dur_us": "float64", "step": "Int64"})


def _read_steps(path: Path) -> pd.DataFrame:
    header = read_header(path)
    for needed in ("Type", "Index", "Stage"):
        if needed not in header:
            raise SchemaError(path, f"missing column {needed}")
    columns = {f: h for h, f in STEP_HEADERS.items() if h in header}
    columns.update({"type": "Type", "index": "Index"})
    frame = read_csv_columns(path, columns)
    frame = frame[frame["type"].astype(str).str.lower() == "rank"].reset_index(drop=True)
    rank = pd.to_numeric(frame["index"], errors="coerce")
    if rank.isna().any() or not rank.between(0, 2 ** 31 - 1).all() or (rank % 1 != 0).any():
        raise SchemaError(path, "a rank in the Index column is not a whole number ≥ 0")
    frame["rank"] = rank.astype("int64")
    frame["step"] = integer_ids(frame["step"], path, "Step") \
        if "step" in frame else pd.array([pd.NA] * len(frame), dtype="Int64")
    for field in STAGE_FIELDS:
        frame[field] = pd.to_numeric(frame[field], errors="coerce").astype("float64") \
            if field in frame else float("nan")
    check_step_figures(frame, path, {f: h for h, f in STEP_HEADERS.items()})
    return frame


def _read_comm(path: Path) -> pd.DataFrame:
    with fast_json.collector_paused():  # a cluster's file holds every rank's collectives
        return _comm_rows(path)


def _comm_rows(path: Path) -> pd.DataFrame:
    data = load_json(path)
    if not isinstance(data, dict):
        raise SchemaError(path, "expected an object keyed by communication group")
    ranks: list[int] = []
    step_ids: list[int | None] = []
    keys: list[str] = []
    infos: list[dict] = []
    for steps in data.values():
        if not isinstance(steps, dict):
            raise SchemaError(path, "expected step objects inside each group")
        for step_key, ops in steps.items():
            step = _step_number(step_key)
            if not isinstance(ops, dict):
                raise SchemaError(path, f"{brief(step_key)}: expected an object of operators")
            for op_key, by_rank in ops.items():
                if op_key.startswith("Total Op Info") or not isinstance(by_rank, dict):
                    continue
                found = [(int(rank), info) for rank, info in by_rank.items()
                         if RANK_KEY.fullmatch(rank) and isinstance(info, dict)]
                ranks += [rank for rank, _ in found]
                infos += [info for _, info in found]
                keys += [op_key] * len(found)
                step_ids += [step] * len(found)
    frame = comm_frame(path, ranks, step_ids, keys, infos)
    return frame


def read_rank(path: Path) -> list[RankData]:
    """One RankData per rank of the cluster (no kernels, steps and communication only)."""
    steps = _read_steps(path / STEPS)
    comm_file = path / COMM
    comm = _read_comm(comm_file) if present(comm_file) else None
    warnings = [] if comm is not None else [f"{path.name}: no {COMM}"]
    if comm is not None and len(comm):
        comm["comm_type"] = comm_types_of(comm["op_name"])
    ranks = []
    comm_by_rank = dict(iter(comm.groupby("rank", sort=False))) if comm is not None else {}
    for rank, rank_steps in steps.groupby("rank", sort=True):
        rank_comm = comm_by_rank[rank].reset_index(drop=True) if rank in comm_by_rank \
            else (comm.iloc[:0] if comm is not None else None)
        ranks.append(RankData(source=path, format=FORMAT, rank=int(rank), ops=_no_kernels(),
                              steps=rank_steps.reset_index(drop=True), comm=rank_comm,
                              info={}, warnings=tuple(warnings) if rank == steps["rank"].min()
                              else ()))
    if not ranks:
        raise SchemaError(path / STEPS, "no rows of Type 'rank'")
    return ranks
