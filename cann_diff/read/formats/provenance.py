"""Provenance: which software stack, devices and host each run was collected on, and when.

A reviewer of an upgrade ticket asks first which CANN, torch_npu, driver and device each
side ran. The profile records some of it, spread over several files (docs/formats.md §1.2,
§7, §13 items 6, 7, 10):

================  ===========================================================================
fact              where it is recorded (first found wins)
================  ===========================================================================
cann              ``profiler_info_<rank>.json`` ``cann_version`` (torch_npu ≥ 2.1.0-7.0.0);
                  db ``META_DATA``; msprof ``info.json`` ``cannVersion``
torch_npu         ``profiler_info_<rank>.json`` ``torch_npu_version``; db ``META_DATA``
driver            msprof ``host/info.json`` ``drvVersion`` (as recorded, undecoded)
device            db ``NPU_INFO.name``; msprof ``info.json`` ``platform_version`` (CHIP_TABLE)
device_count      distinct (host, device id) pairs: db ``NPU_INFO``, ``PROF_*/device_<id>``
profiler_level    ``profiler_info_<rank>.json`` ``experimental_config._profiler_level``
collected         end of collection: ``profiler_info`` ``end_info.collectionTimeEnd``, db
                  ``SESSION_TIME_INFO.endTimeNs``, msprof ``end_info``; else the
                  ``{host}_{pid}_{YYYYmmddHHMMSSfff}_ascend_pt`` directory name (local time)
host              db ``HOST_INFO.hostName``, msprof ``info.json`` ``hostname``, else the
                  directory name's ``{host}_{pid}`` worker prefix
world_size        ``profiler_metadata.json`` ``distributed_args.world_size`` (Megatron /
                  MindSpeed jobs)
parallel          ``distributed_args``: ``TP 2 · PP 2 · DP 2 · CP 1 · EP 1 · SP``
environment       the non-empty ``ENV_VARIABLES`` of ``profiler_metadata.json`` or db
                  ``META_DATA`` (``PYTORCH_NPU_ALLOC_CONF=…``), sorted
================  ===========================================================================

``read_provenance`` returns the ``RunMeta`` fields; ``sources`` maps every fact to the file
it was read from or, when the value is None, the file that would hold it (``file: key``;
``n/a: why`` when the format cannot record it), so that a report can say "not recorded"
and name the file. Only small metadata files are read (no kernel
table); a file that cannot be read loses only its facts, never the run.
"""

from __future__ import annotations

import ast
import json
import re
import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import closing
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ...errors import CannDiffError, InputError
from .files import read_bytes
from .json_files import load_json
from .sqlite_db import MSPROF_DB, OUTPUT_DIR, connect, find_db, tables_of
from .values import CHIP_TABLE

FACTS = ("cann", "torch_npu", "driver", "device", "device_count", "profiler_level",
         "collected", "host", "world_size", "parallel", "environment")
# Where a fact would be recorded, per reader format, as ``file: key`` (``n/a: why`` when
# the format cannot record it): named in the report's "not recorded (…)".
WOULD_HOLD_TORCH = {
    "cann": "profiler_info_<rank>.json: cann_version",
    "torch_npu": "profiler_info_<rank>.json: torch_npu_version",
    "driver": "PROF_*/host/info.json: drvVersion",
    "device": "PROF_*/device_*/info.json.*: platform_version",
    "device_count": "PROF_*/device_*",
    "profiler_level": "profiler_info_<rank>.json: _profiler_level",
    "collected": "profiler_info_<rank>.json: end_info",
    "host": "PROF_*/host/info.json: hostname",
    "world_size": "profiler_metadata.json: distributed_args",
    "parallel": "profiler_metadata.json: distributed_args",
    "environment": "profiler_metadata.json: ENV_VARIABLES",
}
WOULD_HOLD_DB = {
    **WOULD_HOLD_TORCH,
    "cann": "profiler_info_<rank>.json: cann_version (or the db's META_DATA)",
    "device": "ascend_pytorch_profiler_<rank>.db: NPU_INFO",
    "device_count": "ascend_pytorch_profiler_<rank>.db: NPU_INFO",
    "host": "ascend_pytorch_profiler_<rank>.db: HOST_INFO",
}
WOULD_HOLD_MSPROF = {
    "cann": "host/info.json: cannVersion",
    "torch_npu": "n/a: an msprof capture runs below the framework",
    "driver": "host/info.json: drvVersion",
    "device": "device_*/info.json.*: platform_version",
    "device_count": "device_*",
    "profiler_level": "n/a: msprof has no profiler level",
    "collected": "device_*/end_info.*",
    "host": "host/info.json: hostname",
    "world_size": "n/a: an msprof capture runs below the framework",
    "parallel": "n/a: an msprof capture runs below the framework",
    "environment": "n/a: an msprof capture runs below the framework",
}
WOULD_HOLD_KINETO = {
    **{fact: "n/a: a GPU (Kineto) trace does not record it" for fact in FACTS},
    "device": "the trace: deviceProperties",
    "device_count": "the trace: deviceProperties",
}
WOULD_HOLD_CLUSTER = {fact: "n/a: a cluster_analysis_output records none; see its rank "
                            "directories" for fact in FACTS}
# torch_npu writes cann_version and torch_npu_version from 2.1.0-7.0.0 (CANN 8.1.RC1) on.
PROFILER_INFO_KEYS = {"cann": "cann_version", "torch_npu": "torch_npu_version",
                      "profiler_level": "_profiler_level", "collected": "end_info"}
PROF_DIR = re.compile(r"^PROF_\d+_(?P<time>\d{17})_[0-9a-zA-Z]+$")
PARALLEL_KEYS = (("TP", "tensor_model_parallel_size"), ("PP", "pipeline_model_parallel_size"),
                 ("DP", "data_parallel_size"), ("CP", "context_parallel_size"),
                 ("EP", "expert_model_parallel_size"))
WORKER_DIR = re.compile(r"^(?P<host>.+)_(?P<pid>\d+)_(?P<time>\d{17})_ascend_(?:pt|ms)$")


@dataclass
class _Found:
    """Facts of one rank: fact -> (value, file it came from); device ids seen."""

    facts: dict[str, tuple[object, str]] = field(default_factory=dict)
    devices: set[int] = field(default_factory=set)
    looked: dict[str, str] = field(default_factory=dict)  # fact -> file read that lacked it

    def add(self, fact: str, value, where: str) -> None:
        if fact not in self.facts and value not in (None, "", "N/A"):
            self.facts[fact] = (value, where)


def _utc(ns: Any) -> str | None:
    """Unix time in ns as ISO 8601 UTC (``2025-01-09T08:28:04Z``); None when implausible."""
    try:
        seconds = float(ns) / 1e9
    except (TypeError, ValueError, OverflowError):
        return None
    if not 946684800 < seconds < 4102444800:  # 2000 … 2100: anything else is not a date
        return None
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _json(path: Path):
    """A JSON file's content, None when it is unusable (the format reader says why)."""
    try:
        return load_json(path)
    except CannDiffError:
        return None


def _profiler_info(root: Path, found: _Found, read: tuple[str, object] | None = None) -> None:
    """Facts of ``profiler_info_<rank>.json``.

    ``read`` is (name, content) when the format reader already parsed it: the file is then
    not opened again.
    """
    if read is not None:
        name, data = read
    else:
        files = sorted(root.glob("profiler_info*.json"))
        data = _json(files[0]) if files else None
        name = files[0].name if files else ""
    if not isinstance(data, dict):
        return
    for fact, key in PROFILER_INFO_KEYS.items():
        found.looked.setdefault(fact, f"{name}: no {key}")
    found.add("cann", data.get("cann_version"), name)
    found.add("torch_npu", data.get("torch_npu_version"), name)
    config = data.get("config")
    config = config if isinstance(config, dict) else {}
    experimental = config.get("experimental_config")
    if isinstance(experimental, dict):
        found.add("profiler_level", experimental.get("_profiler_level"), name)
    end = data.get("end_info")
    end = end if isinstance(end, dict) else {}
    found.add("collected", _utc(end.get("collectionTimeEnd")), name)


def _distributed(args, found: _Found, where: str) -> None:
    """World size and the parallel layout of Megatron / MindSpeed ``distributed_args``."""
    if not isinstance(args, dict):
        return
    size = args.get("world_size")
    found.add("world_size", int(str(size)) if str(size).isdigit() else None, where)
    layout = [f"{name} {args[key]}" for name, key in PARALLEL_KEYS if args.get(key) is not None]
    if args.get("sequence_parallel") is True:
        layout.append("SP")
    found.add("parallel", " · ".join(layout) or None, where)


def _environment(variables, found: _Found, where: str) -> None:
    """The environment variables that were set (torch_npu records a fixed list, mostly empty)."""
    if isinstance(variables, str):
        try:
            variables = json.loads(variables)
        except ValueError:
            return
    if isinstance(variables, dict):
        found.looked.setdefault("environment", f"{where}: none set")
        found.add("environment", ", ".join(f"{k}={v}" for k, v in sorted(variables.items())
                                           if v not in (None, "")) or None, where)


def _profiler_metadata(root: Path, found: _Found) -> None:
    data = _json(root / "profiler_metadata.json")
    if isinstance(data, dict):
        _distributed(data.get("distributed_args"), found, "profiler_metadata.json")
        _environment(data.get("ENV_VARIABLES"), found, "profiler_metadata.json")


def _db(db: Path, found: _Found, label: str) -> None:
    """META_DATA, NPU_INFO, HOST_INFO and SESSION_TIME_INFO of one profiler db."""
    try:
        with closing(connect(db)) as conn:
            tables = tables_of(conn)
            if {"name", "value"} <= tables.get("META_DATA", set()):
                meta = {str(k).lower(): v for k, v in
                        conn.execute("SELECT name, value FROM META_DATA").fetchall()}
                found.add("cann", meta.get("cann_version"), f"{label}: META_DATA")
                found.add("torch_npu", meta.get("torch_npu_version"), f"{label}: META_DATA")
                driver = next((v for k, v in meta.items() if "driver" in k), None)
                found.add("driver", driver, f"{label}: META_DATA")
                _environment(meta.get("env_variables"), found, f"{label}: META_DATA")
                try:
                    _distributed(json.loads(meta.get("distributed_args") or "null"), found,
                                 f"{label}: META_DATA")
                except (TypeError, ValueError):
                    pass  # not JSON: the key holds something else
            if {"id", "name"} <= tables.get("NPU_INFO", set()):
                chips = conn.execute("SELECT id, name FROM NPU_INFO").fetchall()
                found.add("device", next((n for _, n in chips if n), None),
                          f"{label}: NPU_INFO")
                found.devices |= {int(i) for i, _ in chips if str(i).lstrip("-").isdigit()}
            if "hostName" in tables.get("HOST_INFO", set()):
                hosts = conn.execute("SELECT hostName FROM HOST_INFO").fetchall()
                found.add("host", hosts[0][0] if hosts else None, f"{label}: HOST_INFO")
            if "endTimeNs" in tables.get("SESSION_TIME_INFO", set()):
                ends = conn.execute("SELECT MAX(endTimeNs) FROM SESSION_TIME_INFO").fetchall()
                found.add("collected", _utc(ends[0][0]) if ends else None,
                          f"{label}: SESSION_TIME_INFO")
    except (InputError, OSError, ValueError, sqlite3.Error):
        return  # the format reader reports a broken db; here it costs only these facts


END_INFO_LIMIT = 1 << 20  # bytes read of an end_info file


def _end_info(path: Path):
    """An msprof ``end_info`` file: JSON in newer CANN, a Python-literal dict in older."""
    try:
        text = read_bytes(path, END_INFO_LIMIT).decode("utf-8")
    except (CannDiffError, OSError, UnicodeDecodeError):
        return None
    if len(text) >= END_INFO_LIMIT:  # an end_info is a few hundred bytes
        return None
    for parse in (json.loads, ast.literal_eval):
        try:
            data = parse(text)
            return data if isinstance(data, dict) else None
        except (ValueError, SyntaxError):
            continue
    return None


def _prof_dir(prof: Path, found: _Found, prefix: str) -> None:
    """``host/info.json``, ``device_*/info.json.*`` and ``end_info`` of one PROF directory."""
    infos = [prof / "host" / "info.json", *sorted(prof.glob("device_*/info.json.*"))]
    for info in (p for p in infos if p.is_file()):
        data = _json(info)
        if not isinstance(data, dict):
            continue
        where = f"{prefix}{info.relative_to(prof)}"
        found.add("cann", data.get("cannVersion") or data.get("cann_version"), where)
        found.add("driver", data.get("drvVersion"), where)
        found.add("device", CHIP_TABLE.get(str(data.get("platform_version", "")).strip()),
                  where)
        found.add("host", data.get("hostname"), where)
    for device in prof.glob("device_*"):
        number = device.name.removeprefix("device_")
        if device.is_dir() and number.isdigit():
            found.devices.add(int(number))
    for end in sorted([*prof.glob("device_*/end_info.*"), prof / "host" / "end_info"]):
        data = _end_info(end) if end.is_file() else None
        if data and str(data.get("collectionTimeEnd", "")).isdigit():  # µs since the epoch
            found.add("collected", _utc(int(data["collectionTimeEnd"]) * 1000),
                      f"{prefix}{end.relative_to(prof)}")


def _local_time(stamp: str) -> str | None:
    """``YYYYmmddHHMMSSfff`` (a directory name's stamp) as ISO 8601 without a zone."""
    try:
        return datetime.strptime(stamp[:14], "%Y%m%d%H%M%S").strftime("%Y-%m-%dT%H:%M:%S")
    except ValueError:
        return None


def _directory_name(root: Path, found: _Found) -> None:
    """Host and time from torch_npu's ``{host}_{pid}_{stamp}_ascend_pt`` or ``PROF_*_{stamp}``."""
    worker, prof = WORKER_DIR.match(root.name), PROF_DIR.match(root.name)
    if worker:
        found.add("host", worker.group("host"), "directory name")
    match = worker or prof
    if match:
        found.add("collected", _local_time(match.group("time")), "directory name (local time)")


def rank_facts(source: Path, fmt: str, info: Mapping | None = None) -> _Found:
    """Facts of one rank source (a rank directory, a PROF directory or a file).

    Run where the rank is read (thread or Dask worker); ``info`` is the format reader's,
    whose ``profiler_info`` content is used instead of reading the file again.
    """
    found = _Found()
    root = source if source.is_dir() else source.parent
    if root.name == OUTPUT_DIR:
        root = root.parent
    _profiler_info(root, found, (info or {}).get("profiler_info"))
    _profiler_metadata(root, found)
    db = find_db(source) if fmt != "msprof" else None
    if db is not None:
        _db(db, found, db.name if db.parent == root else f"{db.parent.name}/{db.name}")
    if fmt == "msprof":
        for msprof_db in sorted([*root.glob("mindstudio_profiler_output/*.db"),
                                 *root.glob("*.db")]):
            if MSPROF_DB.match(msprof_db.name):
                _db(msprof_db, found, str(msprof_db.relative_to(root)))
        _prof_dir(root, found, "")
    else:
        for prof in sorted(p for p in root.glob("PROF_*") if p.is_dir()):
            _prof_dir(prof, found, "PROF_*/")
    _directory_name(root, found)
    return found


def _combined(values: list, fact: str) -> object:
    """One value for a run: the common value, or every distinct value with its rank count."""
    distinct = sorted({str(v) for v in values})
    if fact == "collected":
        return min(distinct)  # the earliest rank's end of collection
    if len(distinct) == 1:
        return values[0]
    if fact == "host" and len(distinct) > 4:
        return f"{len(distinct)} hosts ({distinct[0]} … {distinct[-1]})"
    counts = {v: sum(str(x) == v for x in values) for v in distinct}
    return "mixed: " + ", ".join(f"{v} ({n} rank{'s' if n > 1 else ''})"
                                 for v, n in counts.items())


def would_hold(fmt: str, sources: Sequence[Path] = ()) -> Mapping[str, str]:
    """Per fact, the file that would record it in a profile of format ``fmt``."""
    if fmt == "trace_json" and sources and all(
            Path(s).is_file() and not Path(s).name.startswith("trace_view") for s in sources):
        return WOULD_HOLD_KINETO  # a lone .json[.gz] trace: Kineto (the reader's own test)
    if fmt == "msprof":
        return WOULD_HOLD_MSPROF
    if fmt in ("ascend_db", "ascend_ms_db"):
        return WOULD_HOLD_DB
    if fmt.startswith("cluster"):
        return WOULD_HOLD_CLUSTER
    return WOULD_HOLD_TORCH


def read_provenance(fmt: str, sources: list[Path], info: Mapping | None = None,
                    facts: list[_Found] | None = None) -> dict:
    """``RunMeta`` fields for a run read from ``sources`` (one per rank) in format ``fmt``.

    ``info`` is what the format reader already found for the first rank (``cann_version``,
    ``torch_npu_version``, ``device``, ``profiler_level``); it fills what these files lack
    (a Kineto trace's device, read with the trace). Returns
    ``cann_version``, ``torch_npu_version``, ``driver_version``, ``device``,
    ``device_count``, ``profiler_level``, ``collected``, ``host``, ``world_size``,
    ``parallel``, ``environment`` and ``sources``.
    """
    info = info or {}
    ranks = facts if facts is not None else [rank_facts(Path(source), fmt)
                                             for source in dict.fromkeys(sources)]
    values: dict[str, object] = {}
    where: dict[str, str] = {}
    for fact in FACTS:
        if fact == "device_count":
            continue
        seen = [r.facts[fact] for r in ranks if fact in r.facts]
        if seen:
            values[fact] = _combined([v for v, _ in seen], fact)
            where[fact] = seen[0][1]
    pairs = {(r.facts.get("host", (i, ""))[0], d) for i, r in enumerate(ranks) for d in r.devices}
    if pairs:
        values["device_count"] = len(pairs)
        where["device_count"] = where.get("device", "device ids")
    for fact, key in (("cann", "cann_version"), ("torch_npu", "torch_npu_version"),
                      ("device", "device"), ("profiler_level", "profiler_level")):
        if info.get(key) and fact not in values:
            values[fact] = info[key]
            where[fact] = Path(sources[0]).name if sources else "the profile"
    holds = would_hold(fmt, sources)
    looked = ranks[0].looked if ranks else {}
    sources_of = {fact: where.get(fact, looked.get(fact, holds[fact])) for fact in FACTS}
    return {"cann_version": _text(values.get("cann")),
            "torch_npu_version": _text(values.get("torch_npu")),
            "driver_version": _text(values.get("driver")),
            "device": _text(values.get("device")),
            "device_count": values.get("device_count"),
            "profiler_level": _text(values.get("profiler_level")),
            "collected": _text(values.get("collected")),
            "host": _text(values.get("host")),
            "world_size": world if isinstance(world := values.get("world_size"), int) else None,
            "parallel": _text(values.get("parallel")),
            "environment": _text(values.get("environment")),
            "sources": sources_of}


def _text(value) -> str | None:
    return None if value is None else str(value)

