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
device_hint       not the device: the AI Core layout the PMU columns of ``kernel_details.csv``
                  (or msprof ``op_summary_*.csv``) imply (``aic_``/``aiv_`` or unprefixed)
profiler_config   per setting (``level``, ``with_stack``, ``l2_cache``, …), the
                  ``profiler_info_<rank>.json`` ``config`` value as text (``true``/``false``)
hccl_algorithms   per communication type, the HCCL algorithm (``RING-RING``) its reader
                  found: db ``COMMUNICATION_OP.algType``, trace ``hcom_*`` ``args.alg_type``
compute_dtypes    only its file: the dtype column of the kernels (``Run.dtype_us`` is summed
                  where the rank is reduced)
aicore_freq       the AI Core frequency in MHz (the most common value a rank records): db
                  ``AICORE_FREQ.freq``, msprof ``info.json`` ``DeviceInfo[].aic_frequency``,
                  ``trace_view.json`` ``AI Core Freq`` counter events (``args.MHz``)
================  ===========================================================================

``read_provenance`` returns the ``RunMeta`` fields; ``sources`` (and ``detail_sources`` for
the last four facts) maps every fact to the file
it was read from or, when the value is None, the file that would hold it (``file: key``;
``n/a: why`` when the format cannot record it), so that a report can say "not recorded"
and name the file. Only small metadata files are read (no kernel
table); a file that cannot be read loses only its facts, never the run, and never in
silence: its facts' source then says why it was ignored (``profiler_metadata.json:
JSON nested deeper than 64 levels …; ignored``) and ``_Found.problems`` holds one line
for the run's warnings. A count (world size, a parallel size) is ASCII digits or a JSON
integer, at least 1: ``str.isdigit`` also takes ``²``, which ``int`` refuses.
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
from . import msprof_dirs
from .csv_files import core_layout_hint, read_header
from .files import brief, check_depth, is_regular, present, read_bytes, require_file
from .json_files import load_json
from .sqlite_db import MSPROF_DB, OUTPUT_DIR, connect, find_db, tables_of
from .values import CHIP_TABLE

FACTS = ("cann", "torch_npu", "driver", "device", "device_count", "profiler_level",
         "collected", "host", "world_size", "parallel", "environment")
# What a run was collected with beyond its stack (what tells a like-for-like upgrade from
# another comparison); their files go to ``detail_sources``, so that ``sources`` keeps the
# facts report.json lists.
DETAIL_FACTS = ("device_hint", "profiler_config", "hccl_algorithms", "compute_dtypes",
                "aicore_freq")
ALL_FACTS = FACTS + DETAIL_FACTS
# Facts holding one value per key (setting, communication type); ranks combine per key.
MAPPED_FACTS = ("profiler_config", "hccl_algorithms")
# Read by the reduce (Run.dtype_us), not here: only its source is named.
DTYPE_FACT = "compute_dtypes"
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
    "device_hint": "ASCEND_PROFILER_OUTPUT/kernel_details.csv: aic_/aiv_ or unprefixed PMU "
                   "columns (a hint)",
    "profiler_config": "profiler_info_<rank>.json: config",
    "hccl_algorithms": "ASCEND_PROFILER_OUTPUT/trace_view.json: hcom_* args.alg_type",
    "compute_dtypes": "ASCEND_PROFILER_OUTPUT/kernel_details.csv: Input Data Types",
    "aicore_freq": "ASCEND_PROFILER_OUTPUT/trace_view.json: AI Core Freq",
}
WOULD_HOLD_DB = {
    **WOULD_HOLD_TORCH,
    "cann": "profiler_info_<rank>.json: cann_version (or the db's META_DATA)",
    "device": "ascend_pytorch_profiler_<rank>.db: NPU_INFO",
    "device_count": "ascend_pytorch_profiler_<rank>.db: NPU_INFO",
    "host": "ascend_pytorch_profiler_<rank>.db: HOST_INFO",
    "device_hint": "n/a: a db export names the device in NPU_INFO",
    "hccl_algorithms": "ascend_pytorch_profiler_<rank>.db: COMMUNICATION_OP.algType",
    "compute_dtypes": "ascend_pytorch_profiler_<rank>.db: COMPUTE_TASK_INFO.inputDataTypes",
    "aicore_freq": "ascend_pytorch_profiler_<rank>.db: AICORE_FREQ",
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
    "device_hint": "mindstudio_profiler_output/op_summary_*.csv: aic_/aiv_ or unprefixed PMU "
                   "columns (a hint)",
    "profiler_config": "n/a: an msprof capture runs below the framework",
    "hccl_algorithms": "mindstudio_profiler_output/msprof_*.db: COMMUNICATION_OP.algType",
    "compute_dtypes": "mindstudio_profiler_output/op_summary_*.csv: Input Data Types",
    "aicore_freq": "device_*/info.json.*: DeviceInfo aic_frequency",
}
WOULD_HOLD_KINETO = {
    **{fact: "n/a: a GPU (Kineto) trace does not record it" for fact in ALL_FACTS},
    "device": "the trace: deviceProperties",
    "device_count": "the trace: deviceProperties",
}
WOULD_HOLD_CLUSTER = {fact: "n/a: a cluster_analysis_output records none; see its rank "
                            "directories" for fact in ALL_FACTS}
# torch_npu writes cann_version and torch_npu_version from 2.1.0-7.0.0 (CANN 8.1.RC1) on.
PROFILER_INFO_KEYS = {"cann": "cann_version", "torch_npu": "torch_npu_version",
                      "profiler_level": "_profiler_level", "collected": "end_info",
                      "profiler_config": "config"}
# profiler_info ``config`` settings that change what a profile holds or costs, in the order
# a report lists them: (name, section, key). ``level`` is the profiler level again, so that
# a comparison of settings sees it beside the others.
PROFILER_SETTINGS = (
    ("level", "experimental_config", "_profiler_level"),
    ("with_stack", "common_config", "with_stack"),
    ("record_shapes", "common_config", "record_shapes"),
    ("profile_memory", "common_config", "profile_memory"),
    ("with_modules", "common_config", "with_modules"),
    ("with_flops", "common_config", "with_flops"),
    ("l2_cache", "experimental_config", "_l2_cache"),
    ("aic_metrics", "experimental_config", "_aic_metrics"),
    ("data_simplification", "experimental_config", "_data_simplification"),
    ("export_type", "experimental_config", "_export_type"),
    ("activities", "common_config", "activities"),
)
ACTIVITY_PREFIX = "ProfilerActivity."
PROF_DIR = re.compile(r"^PROF_\d+_(?P<time>\d{17})_[0-9a-zA-Z]+$")
PARALLEL_KEYS = (("TP", "tensor_model_parallel_size"), ("PP", "pipeline_model_parallel_size"),
                 ("DP", "data_parallel_size"), ("CP", "context_parallel_size"),
                 ("EP", "expert_model_parallel_size"))
KERNEL_TABLE = "kernel_details.csv"
DB_FORMATS = ("ascend_db", "ascend_ms_db")
TEXT_FORMAT = "ascend_pt_text"  # torch_text.FORMAT: its host side is read from the trace
METADATA = "profiler_metadata.json"
METADATA_FACTS = ("world_size", "parallel", "environment")
TRACE = f"{OUTPUT_DIR}/trace_view.json"
TRACE_FACTS = ("hccl_algorithms", "aicore_freq")  # of a text export, read from its trace
# A count in ASCII digits (``re.ASCII``: ``\s`` and ``\d`` then mean no other script's).
ASCII_COUNT = re.compile(r"\s*(\d{1,9})\s*", re.ASCII)
WORKER_DIR = re.compile(r"^(?P<host>.+)_(?P<pid>\d+)_(?P<time>\d{17})_ascend_(?:pt|ms)$")


@dataclass
class _Found:
    """Facts of one rank: fact -> (value, file it came from); device ids seen.

    ``mapped`` holds the MAPPED_FACTS: fact -> key (a setting, a communication type) ->
    (value, file it came from).
    """

    facts: dict[str, tuple[object, str]] = field(default_factory=dict)
    devices: set[int] = field(default_factory=set)
    looked: dict[str, str] = field(default_factory=dict)  # fact -> file read that lacked it
    mapped: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    # One line per file or value ignored as unusable (naming the rank directory): what a
    # run's warnings say, so that a fact is never "not recorded" without a word.
    problems: list[str] = field(default_factory=list)
    label: str = ""  # the rank directory's name, for ``problems``

    def add(self, fact: str, value, where: str) -> None:
        if fact not in self.facts and value not in (None, "", "N/A"):
            self.facts[fact] = (value, where)

    def add_keyed(self, fact: str, key: str, value, where: str) -> None:
        keyed = self.mapped.setdefault(fact, {})
        if key not in keyed and value not in (None, "", "N/A"):
            keyed[key] = (str(value), where)

    def unusable(self, facts: tuple[str, ...], where: str, why: str) -> None:
        """``where`` (a file, or ``file: key``) holds something unusable for ``facts``."""
        for fact in facts:
            self.looked.setdefault(fact, f"{where}: {why}; ignored")
        named = f"{self.label}/{where}" if self.label else where
        self.problems.append(f"{named}: {why}; ignored ({', '.join(facts)} not recorded)")


def _utc(ns: Any) -> str | None:
    """Unix time in ns as ISO 8601 UTC (``2025-01-09T08:28:04Z``); None when implausible."""
    try:
        seconds = float(ns) / 1e9
    except (TypeError, ValueError, OverflowError):
        return None
    if not 946684800 < seconds < 4102444800:  # 2000 … 2100: anything else is not a date
        return None
    return datetime.fromtimestamp(seconds, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _json(path: Path, found: _Found | None = None, facts: tuple[str, ...] = (),
          where: str = ""):
    """A JSON file's content, None when it is unusable.

    With ``found``, an unusable file (or one that is no JSON object) is noted against
    ``facts`` (``_Found.unusable``); without, the format reader says why.
    """
    try:
        data = load_json(path)
    except CannDiffError as exc:
        if found is not None:
            found.unusable(facts, where or path.name, exc.message)
        return None
    if found is not None and not isinstance(data, dict):
        found.unusable(facts, where or path.name, f"a JSON {type(data).__name__}, not an "
                                                  "object")
    return data


def _json_text(text: str, found: _Found, facts: tuple[str, ...], where: str):
    """A JSON value held as text (a db cell); None when it is not JSON.

    Text that is not JSON is some other value (ignored, as before); JSON nested past the
    limit, which Python's parser would recurse through, is noted as unusable.
    """
    try:
        check_depth(Path(where), text.encode("utf-8", "replace"))
        return json.loads(text)
    except InputError as exc:
        found.unusable(facts, where, exc.message)
    except RecursionError:
        found.unusable(facts, where, "JSON nested too deeply to parse")
    except ValueError:
        pass
    return None


def _count(value) -> int | None:
    """A positive whole number: a JSON integer or ASCII digits; None for anything else.

    ``str.isdigit`` accepts ``²`` (which ``int`` refuses) and other scripts' digits
    (which ``int`` reads): a world size written so is no number a profiler wrote.
    """
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if 0 < value < 2 ** 31 else None
    match = ASCII_COUNT.fullmatch(value) if isinstance(value, str) else None
    number = int(match.group(1)) if match else 0
    return number if number > 0 else None


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
    _profiler_settings(config, found, name)


def _setting_text(value) -> str | None:
    """A config value as text: JSON's ``true``/``false``, a list joined, None unknown."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        parts = [str(v).removeprefix(ACTIVITY_PREFIX) for v in value if v is not None]
        return ", ".join(parts) or None
    if isinstance(value, (str, int, float)):
        return str(value).strip() or None
    return None  # null or an object: not a setting this report can name


def _profiler_settings(config: dict, found: _Found, name: str) -> None:
    """The PROFILER_SETTINGS of one ``config`` object, as text."""
    for setting, section, key in PROFILER_SETTINGS:
        part = config.get(section)
        if isinstance(part, dict):
            found.add_keyed("profiler_config", setting, _setting_text(part.get(key)), name)


def _distributed(args, found: _Found, where: str) -> None:
    """World size and the parallel layout of Megatron / MindSpeed ``distributed_args``.

    A size that is no count (``_count``) is left out and noted, never guessed.
    """
    if not isinstance(args, dict):
        return
    size = args.get("world_size")
    if size is not None and _count(size) is None:
        found.unusable(("world_size",), where, f"world_size {brief(repr(size), 40)} is not a "
                                               "whole number ≥ 1 in ASCII digits")
    found.add("world_size", _count(size), where)
    layout = []
    for name, key in PARALLEL_KEYS:
        value = args.get(key)
        if value is not None and _count(value) is None:
            found.unusable(("parallel",), where, f"{key} {brief(repr(value), 40)} is not a "
                                                 "whole number ≥ 1 in ASCII digits")
        elif value is not None:
            layout.append(f"{name} {_count(value)}")
    if args.get("sequence_parallel") is True:
        layout.append("SP")
    found.add("parallel", " · ".join(layout) or None, where)


def _environment(variables, found: _Found, where: str) -> None:
    """The environment variables that were set (torch_npu records a fixed list, mostly empty)."""
    if isinstance(variables, str):
        variables = _json_text(variables, found, ("environment",), where)
    if isinstance(variables, dict):
        found.looked.setdefault("environment", f"{where}: none set")
        found.add("environment", ", ".join(f"{k}={v}" for k, v in sorted(variables.items())
                                           if v not in (None, "")) or None, where)


def _profiler_metadata(root: Path, found: _Found) -> None:
    """World size, parallel layout and environment of ``profiler_metadata.json``.

    A file of that name that is there but unusable (a FIFO, nested too deep, not JSON) is
    noted, not passed over: it is the only record of these facts.
    """
    path = root / METADATA
    try:
        there = present(path)
    except CannDiffError as exc:
        found.unusable(METADATA_FACTS, METADATA, exc.message)
        return
    data = _json(path, found, METADATA_FACTS) if there else None
    if isinstance(data, dict):
        _distributed(data.get("distributed_args"), found, METADATA)
        _environment(data.get("ENV_VARIABLES"), found, METADATA)


def _trace_beside(root: Path, found: _Found) -> None:
    """Note a text export's trace_view.json that is there but no regular file.

    Its host side (links, HCCL algorithms, AI Core frequency) is read elsewhere, which
    takes such a trace for an absent one; a FIFO or ``/dev/zero`` of that name is named
    here instead of passed over.
    """
    path = root / TRACE
    try:
        if not present(path):
            return
        require_file(path)
    except CannDiffError as exc:
        found.unusable(TRACE_FACTS, TRACE, f"{exc.message} (host→device links not read)")


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
                args = meta.get("distributed_args")
                if isinstance(args, str):  # else not JSON: the key holds something else
                    _distributed(_json_text(args, found, ("world_size", "parallel"),
                                            f"{label}: META_DATA"), found,
                                 f"{label}: META_DATA")
            if {"id", "name"} <= tables.get("NPU_INFO", set()):
                chips = conn.execute("SELECT id, name FROM NPU_INFO").fetchall()
                found.add("device", next((n for _, n in chips if n), None),
                          f"{label}: NPU_INFO")
                found.devices |= {int(i) for i, _ in chips if str(i).lstrip("-").isdigit()}
            if "inputDataTypes" in tables.get("COMPUTE_TASK_INFO", set()):
                found.add(DTYPE_FACT, True, f"{label}: COMPUTE_TASK_INFO.inputDataTypes")
            if "freq" in tables.get("AICORE_FREQ", set()):
                common = conn.execute("SELECT freq FROM AICORE_FREQ WHERE freq > 0 GROUP BY "
                                      "freq ORDER BY COUNT(*) DESC, freq DESC LIMIT 1"
                                      ).fetchall()
                found.add("aicore_freq", _mhz(common[0][0]) if common else None,
                          f"{label}: AICORE_FREQ")
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
        devices = data.get("DeviceInfo")
        frequencies = [f for d in (devices if isinstance(devices, list) else [])
                       if isinstance(d, dict) and (f := _mhz(d.get("aic_frequency")))]
        found.add("aicore_freq", max(sorted(set(frequencies)), key=frequencies.count)
                  if frequencies else None, f"{where}: DeviceInfo aic_frequency")
    for device in prof.glob("device_*"):
        number = device.name.removeprefix("device_")
        if device.is_dir() and number.isdigit():
            found.devices.add(int(number))
    for end in sorted([*prof.glob("device_*/end_info.*"), prof / "host" / "end_info"]):
        data = _end_info(end) if end.is_file() else None
        if data and str(data.get("collectionTimeEnd", "")).isdigit():  # µs since the epoch
            found.add("collected", _utc(int(data["collectionTimeEnd"]) * 1000),
                      f"{prefix}{end.relative_to(prof)}")


def _kernel_table(root: Path, fmt: str) -> tuple[Path, str] | None:
    """The rank's kernel_details.csv (or an msprof capture's first op_summary) and its label."""
    if fmt == "msprof":
        tables = sorted(p for folder in (root / msprof_dirs.OUTPUT, *root.glob("device_*/summary"))
                        for p in folder.glob("op_summary_*.csv")
                        if msprof_dirs.OP_SUMMARY.match(p.name))
        return (tables[0], str(tables[0].relative_to(root))) if tables else None
    for table in (root / OUTPUT_DIR / KERNEL_TABLE, root / KERNEL_TABLE):
        if is_regular(table):
            return table, str(table.relative_to(root))
    return None


def _pmu_columns(root: Path, fmt: str, found: _Found) -> None:
    """Device hint and dtype column from the kernel table's header (read once per process)."""
    table = _kernel_table(root, fmt)
    if table is None:
        return
    try:
        header = read_header(table[0])
    except (CannDiffError, OSError):
        return  # the format reader reports an unreadable table
    found.looked.setdefault("device_hint", f"{table[1]}: no PMU columns")
    found.add("device_hint", core_layout_hint(header), f"{table[1]}: PMU columns (a hint)")
    if fmt not in DB_FORMATS:
        found.looked.setdefault(DTYPE_FACT, f"{table[1]}: no Input Data Types")
        if "Input Data Types" in header:
            found.add(DTYPE_FACT, True, f"{table[1]}: Input Data Types")


def _algorithms(info: Mapping, found: _Found) -> None:
    """HCCL algorithm per communication type, as the reader found them: (file, pairs).

    A rank running one type with several algorithms (per group or message size) names
    them all, ``NHR/RING``.
    """
    where, pairs = info.get("hccl_algorithms") or ("", ())
    per_type: dict[str, set[str]] = {}
    for comm_type, algorithm in pairs:
        if algorithm not in (None, "", "N/A", "NA"):
            per_type.setdefault(str(comm_type), set()).add(str(algorithm))
    for comm_type, algorithms in sorted(per_type.items()):
        found.add_keyed("hccl_algorithms", comm_type, "/".join(sorted(algorithms)), where)


def _frequency(info: Mapping, found: _Found) -> None:
    """The AI Core frequency a reader found in the rank's trace: (file: key, MHz)."""
    frequency = info.get("aicore_freq")
    if isinstance(frequency, tuple) and len(frequency) == 2:
        found.add("aicore_freq", _mhz(frequency[1]), frequency[0])


def _mhz(value) -> str | None:
    """A frequency in MHz as text (``1800``); None when it is no positive number."""
    try:
        number = float(str(value).strip())
    except (TypeError, ValueError):
        return None
    return f"{number:g}" if number > 0 and number == number and number != float("inf") \
        else None


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
    root = source if source.is_dir() else source.parent
    if root.name == OUTPUT_DIR:
        root = root.parent
    found = _Found(label=root.name)
    _profiler_info(root, found, (info or {}).get("profiler_info"))
    _algorithms(info or {}, found)
    _frequency(info or {}, found)
    _profiler_metadata(root, found)
    if fmt == TEXT_FORMAT:
        _trace_beside(root, found)
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
    _pmu_columns(root, fmt, found)
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
    if fmt in DB_FORMATS:
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
    ``parallel``, ``environment``, ``device_hint``, ``profiler_config``,
    ``hccl_algorithms``, ``aicore_freq``, ``sources`` (FACTS) and ``detail_sources``
    (DETAIL_FACTS).
    """
    info = info or {}
    ranks = facts if facts is not None else [rank_facts(Path(source), fmt)
                                             for source in dict.fromkeys(sources)]
    values: dict[str, object] = {}
    where: dict[str, str] = {}
    for fact in ALL_FACTS:
        if fact == "device_count" or fact in MAPPED_FACTS:
            continue
        seen = [r.facts[fact] for r in ranks if fact in r.facts]
        if seen:
            values[fact] = _combined([v for v, _ in seen], fact)
            where[fact] = seen[0][1]
    mapped = {fact: _combined_keys(ranks, fact, where) for fact in MAPPED_FACTS}
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
    looked: dict[str, str] = {}
    for rank in ranks:  # the first rank that read a file for the fact says what it found
        for fact, note in rank.looked.items():
            looked.setdefault(fact, note)
    sources_of = {fact: where.get(fact, looked.get(fact, holds[fact])) for fact in ALL_FACTS}
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
            "device_hint": _text(values.get("device_hint")),
            "profiler_config": mapped["profiler_config"],
            "hccl_algorithms": mapped["hccl_algorithms"],
            "aicore_freq": _text(values.get("aicore_freq")),
            "sources": {fact: sources_of[fact] for fact in FACTS},
            "detail_sources": {fact: sources_of[fact] for fact in DETAIL_FACTS}}


def _combined_keys(ranks: list[_Found], fact: str, where: dict[str, str]) -> dict[str, str]:
    """One value per key of a mapped fact, ranks combined as ``_combined`` combines them.

    Keys keep the order the first rank holding them found them in; ``where`` gets the
    fact's first file.
    """
    seen: dict[str, list[tuple[str, str]]] = {}
    for rank in ranks:
        for key, found in rank.mapped.get(fact, {}).items():
            seen.setdefault(key, []).append(found)
    if seen:
        where[fact] = next(iter(seen.values()))[0][1]
    return {key: str(_combined([v for v, _ in found], fact)) for key, found in seen.items()}


def _text(value) -> str | None:
    return None if value is None else str(value)

