"""communication.json and profiler_info_<rank>.json → canonical frames and metadata."""

from __future__ import annotations

import codecs
import re
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import InputError, SchemaError
from ...schema import COMM_COLUMNS
from ...vocab.names import comm_types
from . import fast_json
from .files import brief, check_depth, json_problem, read_bytes

LINK_TYPES = ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")
TIME_FIELDS = {
    "Elapse Time(ms)": "elapse_us",
    "Transit Time(ms)": "transit_us",
    "Wait Time(ms)": "wait_us",
    "Synchronization Time(ms)": "synchronization_us",
    "Idle Time(ms)": "idle_us",
}
LINK_COLUMNS = tuple(f"{link.lower()}_{what}" for link in LINK_TYPES for what in ("mb", "us"))


# Byte-order marks of the encodings JSON allows besides UTF-8 (RFC 8259 §8.1 asks for
# UTF-8, but a file saved by a Windows editor or PowerShell is UTF-16 with a BOM). The
# UTF-32 marks begin with the UTF-16 ones: they are tried first.
BOM_ENCODINGS = ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                 (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))


def load_json(path: Path):
    """Parse a JSON file; anything unusable is an InputError naming it in one line.

    Not a regular file, nested too deep, truncated, not UTF-8: all refused. UTF-16 or
    UTF-32 text is read when a byte-order mark says so (the same text, in another
    encoding). The nesting is checked on the UTF-8 bytes first, since Python's parser
    recurses once per level.
    """
    data = read_bytes(path)
    encoding = next((name for bom, name in BOM_ENCODINGS if data.startswith(bom)), None)
    if encoding is not None:
        data = _as_utf8(path, data, encoding)
    check_depth(path, data)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(path, f"not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    del data  # the parse holds the text and its objects, not the bytes too
    try:
        return fast_json.loads(text)  # orjson when installed; the GC paused while parsing
    except RecursionError:  # only reachable with a limit above the interpreter's own
        raise InputError(path, "JSON nested too deeply to parse") from None
    except ValueError as exc:
        raise InputError(path, f"truncated or invalid JSON: {json_problem(exc)}") from None


def _as_utf8(path: Path, data: bytes, encoding: str) -> bytes:
    """The UTF-8 bytes of a text that a byte-order mark says is ``encoding``."""
    try:
        return data.decode(encoding).encode("utf-8")
    except UnicodeError as exc:  # a lone surrogate does not encode either
        where = f"byte {exc.start}: " if isinstance(exc, UnicodeDecodeError) else ""
        raise InputError(path, f"not {encoding.upper()} text despite its byte-order mark "
                               f"({where}{getattr(exc, 'reason', exc)})") from None


def _step_number(key: str) -> int | None:
    match = re.fullmatch(r"step(\d{1,9})", key, flags=re.ASCII)
    return int(match.group(1)) if match else None


def _number(path: Path, key: str, field: str, value) -> float:
    """A time (ms) or size (MB) of communication.json: a finite number ≥ 0 or refused."""
    if isinstance(value, (list, dict)):  # ``value or 0.0`` would take [] and {} for 0
        raise SchemaError(path, f"{brief(key)}: {field} is not a number "
                                f"({brief(repr(value), 40)})")
    try:
        number = float(value or 0.0)
    except (TypeError, ValueError, OverflowError):
        raise SchemaError(path, f"{brief(key)}: {field} is not a number "
                                f"({brief(repr(value), 40)})") from None
    if not np.isfinite(number) or number < 0:
        raise SchemaError(path, f"{brief(key)}: {field} is {brief(repr(value), 40)}, not a "
                                "finite non-negative number")
    return number


def _numbers(path: Path, keys: list[str], field: str, values: list) -> np.ndarray:
    """A column of times (ms) or sizes (MB): finite numbers ≥ 0 (missing is 0), or refused.

    One numpy conversion decides the column; only when it fails are the values taken one
    at a time, to name the first op whose value is wrong.
    """
    try:
        numbers = np.array(values, dtype=np.float64)  # None (a missing value) becomes NaN
    except (TypeError, ValueError, OverflowError):
        numbers = None
    if numbers is not None and numbers.shape != (len(values),):
        numbers = None  # lists in the file ([] for every op makes an empty 2-D array)
    if numbers is not None:
        unset = np.flatnonzero(np.isnan(numbers))
        if len(unset) and all(values[i] is None for i in unset):
            numbers[unset] = 0.0  # missing is 0; a NaN the file wrote is refused below
    if numbers is None or not np.isfinite(numbers).all() or (numbers < 0).any():
        numbers = np.array([_number(path, key, field, value)
                            for key, value in zip(keys, values)], dtype=np.float64)
    return numbers


def _objects(path: Path, keys: list[str], what: str, values: list) -> None:
    """Refuse an info that is not a JSON object, naming its op."""
    bad = next((i for i, value in enumerate(values) if not isinstance(value, dict)), None)
    if bad is not None:
        raise SchemaError(path, f"{brief(keys[bad])}: {what} must be an object")


def comm_frame(path: Path, ranks: list[int] | np.ndarray, steps: list[int | None], keys: list[str],
               infos: list[dict]) -> pd.DataFrame:
    """One row per communication op (``name@group`` keys and their info objects).

    Times become µs. The columns are built a field at a time, not a dict per op: a
    collective-heavy rank holds tens of thousands of ops.
    """
    times = [info.get("Communication Time Info", {}) for info in infos]
    links = [info.get("Communication Bandwidth Info", {}) for info in infos]
    _objects(path, keys, "time and bandwidth info", times)
    _objects(path, keys, "time and bandwidth info", links)
    parts = [key.partition("@") for key in keys]
    columns: dict[str, Any] = {
        "rank": np.array(ranks, dtype=np.int64), "step": pd.array(steps, dtype="Int64"),
        "op_name": np.array([part[0] for part in parts], dtype=object),
        "comm_type": np.full(len(keys), np.nan),  # named by comm_types_of
        "group": np.array([part[2] for part in parts], dtype=object)}
    for source, target in TIME_FIELDS.items():
        columns[target] = _numbers(path, keys, source, [t.get(source) for t in times]) * 1000.0
    for link in LINK_TYPES:
        values = [found.get(link) or {} for found in links]
        _objects(path, keys, f"{link} bandwidth info", values)
        columns[f"{link.lower()}_mb"] = _numbers(path, keys, link,
                                                 [v.get("Transit Size(MB)") for v in values])
        columns[f"{link.lower()}_us"] = _numbers(
            path, keys, link, [v.get("Transit Time(ms)") for v in values]) * 1000
    # SDMA aggregates the on-node links (HCCS, PCIE, SIO); RDMA is the inter-node one.
    columns["transit_mb"] = columns["sdma_mb"] + columns["rdma_mb"]
    return pd.DataFrame({column: columns[column] for column in (*COMM_COLUMNS, *LINK_COLUMNS)})


def read_communication(path: Path, rank: int) -> pd.DataFrame:
    """Read communication.json into one row per (step, op): times in µs, sizes in MB."""
    with fast_json.collector_paused():
        return _read_communication(path, rank)


def _read_communication(path: Path, rank: int) -> pd.DataFrame:
    steps, keys, infos = comm_entries(path)
    return comm_table(path, [rank] * len(keys), steps, keys, infos)


def comm_table(path: Path, ranks: list[int] | np.ndarray, steps: list[int | None],
               keys: list[str], infos: list[dict]) -> pd.DataFrame:
    """``comm_frame`` with each op's communication type named."""
    frame = comm_frame(path, ranks, steps, keys, infos)
    frame["comm_type"] = comm_types_of(frame["op_name"])
    return frame


def comm_entries(path: Path) -> tuple[list[int | None], list[str], list[dict]]:
    """communication.json's ops: each one's step, ``name@group`` key and info object."""
    data = load_json(path)
    if not isinstance(data, dict):
        raise SchemaError(path, "expected an object keyed by step")
    steps: list[int | None] = []
    keys: list[str] = []
    infos: list[dict] = []
    for step_key, kinds in data.items():
        if not isinstance(kinds, dict):
            raise SchemaError(path, f"{brief(step_key)}: expected an object of p2p/collective "
                                    "ops")
        step = _step_number(step_key)
        for ops in kinds.values():
            if not isinstance(ops, dict):
                continue
            found = [(key, info) for key, info in ops.items()
                     if isinstance(info, dict) and not key.startswith("Total Op Info")]
            keys += [key for key, _ in found]
            infos += [info for _, info in found]
            steps += [step] * len(found)
    return steps, keys, infos


def comm_types_of(op_names: pd.Series) -> np.ndarray:
    """Canonical communication type (``AllReduce`` …) of each communication op name.

    Every op's name is its own (an op index in it), but digits never decide the type
    (``comm_types``): the ASCII ones are dropped in Arrow first, so that the few names
    left go through ``comm_types``, not one a row (20k ops of a rank: 26 -> 10 ms).
    """
    if not len(op_names):
        return np.array([], dtype=object)
    text = pa.array(op_names.astype(str).to_numpy(), type=pa.string())
    folded = pc.replace_substring_regex(text, "[0-9]+", "").dictionary_encode()
    return np.array(comm_types(folded.dictionary.to_pylist()),
                    dtype=object)[folded.indices.to_numpy()]


def read_profiler_info(path: Path) -> dict:
    """Return rank, versions and profiler level from profiler_info[_<rank>].json."""
    data = load_json(path)
    if not isinstance(data, dict):
        raise SchemaError(path, "expected a JSON object")
    match = re.fullmatch(r"profiler_info_(\d{1,9})\.json", path.name, flags=re.ASCII)
    rank = int(match.group(1)) if match else None
    rank_id = re.fullmatch(r"\s*(\d{1,9})\s*", str(data.get("rank_id", "")), flags=re.ASCII)
    if rank is None and rank_id:  # -1 (not distributed) or junk leaves the rank unknown
        rank = int(rank_id.group(1))
    config = data.get("config", {})
    if not isinstance(config, dict):
        raise SchemaError(path, "'config' must be an object")
    experimental = config.get("experimental_config")
    experimental = experimental if isinstance(experimental, dict) else {}
    return {
        "rank": rank,
        "cann_version": data.get("cann_version"),
        "torch_npu_version": data.get("torch_npu_version"),
        "profiler_level": experimental.get("_profiler_level"),
        "profiler_info": (path.name, data),  # the whole file, so provenance need not reopen it
    }
