"""msprof (CANN) ``PROF_*`` directories: op_summary slices, db or timeline slices.

Layouts (docs/formats.md §1.1, §6, §13)::

    PROF_<n>_<timestamp>_<id>/
        host/info.json   device_<id>/info.json.<id>
        mindstudio_profiler_output/op_summary_*.csv, op_summary_slice_*.csv, msprof_*.db
        device_<id>/summary/op_summary_*.csv         (older exports)
        device_<id>/timeline/msprof_*.json           (2023 era: timeline slices only)

Sources are tried in the order of docs/formats.md §12: db with COMPUTE_TASK_INFO, op_summary
slices (all concatenated), then timeline slices. msprof has no framework steps, so
the whole capture is one unit (step <NA>) unless op_summary carries a Step Id.
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import pandas as pd

from ...errors import InputError
from ..frames import concat_frames
from ..rank_data import RankData
from . import sqlite_db, trace_json
from .csv_files import read_kernel_table
from .files import brief, is_directory, list_dir, present, shown
from .json_files import load_json
from .values import CHIP_TABLE

FORMAT = "msprof"
LOOKS_FOR = "PROF_*/mindstudio_profiler_output/op_summary_*.csv"
PROF_DIR = re.compile(r"^PROF_\d+_\d+_[0-9a-zA-Z]+$")
OUTPUT = "mindstudio_profiler_output"
OP_SUMMARY = re.compile(r"^op_summary_(slice_)?\d+.*\.csv$")
TIMELINE = re.compile(r"^msprof_(slice_)?\d+.*\.json$")
LOOKED_FOR = (f"{OUTPUT}/msprof_*.db, {OUTPUT}/op_summary_*.csv, device_*/summary/"
              "op_summary_*.csv, device_*/timeline/msprof_*.json (or task_time_*.json)")
# Host<->device copies: op_summary keeps them with N/A types; a MEMCPY type lets the
# canonical stage put them in category ``memcpy`` instead of ``compute``.
COPY_MARKERS = r"MEMCPY|PCIE_DMA"


def is_rank_dir(path: Path) -> bool:
    """True for a ``PROF_*`` directory (or its mindstudio_profiler_output)."""
    if not is_directory(path):
        return False
    if path.name == OUTPUT:
        return any(OP_SUMMARY.match(p.name) for p in list_dir(path))
    return bool(PROF_DIR.match(path.name))


def _prof_root(path: Path) -> Path:
    return path.parent if path.name == OUTPUT else path


def _files(root: Path, folder_glob: str, pattern: re.Pattern) -> list[Path]:
    """Entries matching by name, of any kind.

    One that is no regular file is refused when read, instead of skipped in silence.
    """
    return sorted(p for p in root.glob(folder_glob) if pattern.match(p.name) and present(p))


def _read_info(root: Path) -> tuple[dict, list[str]]:
    """Rank, chip and CANN version from host/info.json or device_*/info.json.*, and warnings.

    These files are optional metadata: a broken one (a FIFO, truncated JSON) loses only
    labels, so it is a warning, not an error.
    """
    info: dict = {}
    warnings = []
    files = [root / "host" / "info.json", *sorted(root.glob("device_*/info.json.*"))]
    for file in (f for f in files if present(f)):
        try:
            data = load_json(file)
        except InputError as exc:
            warnings.append(f"{shown(file)}: {exc.message}; rank, chip and CANN version "
                            "not read from it")
            continue
        if not isinstance(data, dict):
            continue
        rank = re.fullmatch(r"\s*(\d{1,9})\s*", str(data.get("rank_id", "")), flags=re.ASCII)
        if info.get("rank") is None and rank:
            info["rank"] = int(rank.group(1))
        chip = CHIP_TABLE.get(str(data.get("platform_version", "")).strip())
        if chip:
            info.setdefault("device", chip)
        version = data.get("cannVersion") or data.get("cann_version")
        if version:
            info.setdefault("cann_version", brief(" ".join(str(version).split()), 60))
    return info, warnings


def _mark_copies(ops: pd.DataFrame) -> pd.DataFrame:
    """Give host↔device copy rows a MEMCPY type (vectorized over categories)."""
    def text(column: str) -> pd.Series:
        # pandas 3 keeps missing values missing through astype(str): fill first.
        return ops[column].astype("object").fillna("").astype(str)

    core, name, raw = text("core").str.upper(), text("op_name").str.upper(), text("op_type_raw")
    copy = core.str.contains(COPY_MARKERS) | name.str.contains("MEMCPY", regex=False)
    missing = raw.str.strip().str.upper().isin({"", "N/A", "NAN"})
    if (copy & missing).any():
        ops["op_type_raw"] = pd.Categorical(raw.where(~(copy & missing), "MEMCPY_ASYNC"))
    return ops


def read_op_summaries(files: list[Path]) -> tuple[pd.DataFrame, list[str]]:
    """Concatenate all op_summary slices; warnings are deduplicated."""
    frames, warnings = [], []
    for file in files:
        frame, found = read_kernel_table(file)
        frames.append(frame)
        warnings += [w for w in found if w not in warnings]
    ops = concat_frames(frames).sort_values("start_ns", kind="stable")
    return _mark_copies(ops.reset_index(drop=True)), warnings


def read_timelines(files: list[Path]) -> tuple[pd.DataFrame, list[str]]:
    """Operators from msprof timeline JSON slices (copies kept as MEMCPY_ASYNC), warnings."""
    frames, warnings = [], []
    for file in files:
        ops, _, _, found = trace_json.read_events(file, include_memcpy=True)
        frames.append(ops)
        warnings += found
    return concat_frames(frames).sort_values("start_ns", kind="stable"), warnings


def _timeline_files(root: Path) -> list[Path]:
    """msprof_*.json slices hold every process; else task_time_* + hccl_* slices."""
    for folder in ("device_*/timeline", OUTPUT):
        found = _files(root, f"{folder}/*.json", TIMELINE)
        if found:
            return found
    pattern = re.compile(r"^(task_time|hccl)_\d+.*\.json$")
    return _files(root, "device_*/timeline/*.json", pattern)


def _db_file(root: Path) -> Path | None:
    found = _files(root, f"{OUTPUT}/*.db", sqlite_db.MSPROF_DB)
    with_kernels = [db for db in found if sqlite_db.has_kernels(db)]
    return with_kernels[0] if with_kernels else None


def read_rank(path: Path) -> RankData:
    """Read one PROF directory; InputError names the files looked for when none is there."""
    root = _prof_root(path)
    info, warnings = _read_info(root)
    db = _db_file(root)
    if db is not None:
        data = sqlite_db.read_db_file(db)
        return replace(data, source=root, format=FORMAT, rank=info.get("rank", data.rank),
                       info={**info, **{k: v for k, v in data.info.items() if v is not None}},
                       warnings=(*warnings, *data.warnings))
    summaries = _files(root, f"{OUTPUT}/*.csv", OP_SUMMARY) or \
        _files(root, "device_*/summary/*.csv", OP_SUMMARY)
    if summaries:
        ops, found = read_op_summaries(summaries)
    else:
        timelines = _timeline_files(root)
        if not timelines:
            raise InputError(root, f"msprof directory without exported data: looked for "
                                   f"{LOOKED_FOR}; run `msprof --export=on` first")
        ops, found = read_timelines(timelines)
        found.append(f"{root.name}: read from timeline JSON (no op_summary); no input "
                     "shapes, operators are matched by type only")
    warnings += found
    if "device_id" in ops and ops["device_id"].nunique() > 1:
        warnings.append(f"{root.name}: several devices in one PROF directory are read as "
                        "one rank")
    return RankData(source=root, format=FORMAT, rank=info.get("rank"),
                    ops=ops.reset_index(drop=True), info=info, warnings=tuple(warnings))
