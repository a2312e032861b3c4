"""Stream Chrome trace-event JSON (torch_npu trace_view, msprof timeline, Kineto) with ijson.

These files reach gigabytes, so they are never ``json.load``-ed: ijson's C
backend parses chunks and hands over one event at a time, and only the few
fields a reader needs are kept, as column lists. Metadata events
(``process_name``, ``thread_name``, ``process_labels``) may come anywhere in the
file (torch_npu writes them after the Python events), so events are kept while
their process is still unknown and filtered once the whole file is read.
"""

from __future__ import annotations

import gzip
import io
import re
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import ijson
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import InputError, SchemaError
from ...settings import DEFAULT_LIMITS
from .files import DepthGuard, brief, json_problem, open_binary, os_problem, size_text
from .values import MAX_WHOLE_US

CHUNK = 1 << 16
HEAD = TAIL = 1 << 16
# Host-side categories never hold device work; dropping them while streaming keeps
# memory proportional to device events (torch_npu puts its metadata at the end).
HOST_CATS = {"cpu_op", "python_function", "enqueue", "dequeue", "async_npu", "fwdbwd",
             "cuda_runtime", "cuda_driver", "ac2g", "Trace", "python", "overhead",
             "cpu_instant_event", "user_annotation", "gpu_user_annotation"}
GPU_CATS = {"kernel", "Kernel", "gpu_memcpy", "Memcpy", "gpu_memset", "Memset"}
DEVICE_PROCESSES = {"Ascend Hardware", "HCCL", "Communication"}
STEP_PREFIX = "ProfilerStep#"
# At most 16 integer digits: µs beyond 9.2e15 overflow int64 ns (checked after parsing).
TS_PATTERN = r"^\s*(?P<w>\d{1,16})(?:\.(?P<f>\d*))?\s*$"


def _key(value):
    """Pids/tids are ints or strings; anything else is keyed by its text."""
    return value if value.__class__ in (int, str) or value is None else str(value)


@dataclass
class TraceScan:
    """The kept ``X`` events of one trace file as column lists, plus its metadata."""

    path: Path
    pid: list = field(default_factory=list)
    tid: list = field(default_factory=list)
    name: list = field(default_factory=list)
    ts: list = field(default_factory=list)
    dur: list = field(default_factory=list)
    cat: list = field(default_factory=list)
    task_type: list = field(default_factory=list)
    processes: dict = field(default_factory=dict)
    threads: dict = field(default_factory=dict)
    labels: dict = field(default_factory=dict)
    top: dict = field(default_factory=dict)

    def consume(self, events) -> None:
        """Keep what a reader may need from an iterable of parsed events."""
        processes, keep_pid = self.processes, self._keep_pid
        for event in events:
            if not isinstance(event, dict):
                continue
            ph = event.get("ph")
            if ph == "X":
                name = event.get("name")
                cat = event.get("cat")
                if cat is not None and cat.__class__ is not str:
                    cat = str(cat)  # a list or object there would be unhashable below
                ts = event.get("ts")
                if ts is None or not isinstance(name, str):
                    continue
                pid = _key(event.get("pid"))
                if not (cat in GPU_CATS or name.startswith(STEP_PREFIX)
                        or (pid in processes and keep_pid(pid))
                        or (pid not in processes and cat not in HOST_CATS)):
                    continue
                args = event.get("args")
                self.pid.append(pid)
                self.tid.append(_key(event.get("tid")))
                self.name.append(name)
                self.ts.append(ts if ts.__class__ is str else str(ts))
                self.dur.append(event.get("dur"))
                self.cat.append(cat)
                self.task_type.append(args.get("Task Type") if isinstance(args, dict) else None)
            elif ph == "M":
                self._metadata(event)

    def _keep_pid(self, pid) -> bool:
        return self.processes.get(pid) in DEVICE_PROCESSES

    def _metadata(self, event: dict) -> None:
        raw = event.get("args")
        args: dict = raw if isinstance(raw, dict) else {}
        kind, pid = event.get("name"), _key(event.get("pid"))
        if kind == "process_name":
            self.processes[pid] = str(args.get("name", ""))
        elif kind == "thread_name":
            self.threads[(pid, _key(event.get("tid")))] = str(args.get("name", ""))
        elif kind == "process_labels":
            self.labels[pid] = str(args.get("labels", ""))

    def frame(self) -> pd.DataFrame:
        """Kept events as one frame, one row per ``X`` event.

        Columns: ``process``, ``thread``, ``name``, ``cat``, ``task_type`` (categorical),
        ``start_ns`` (int64 ns, exact for µs strings with 3 decimals), ``dur_us``.
        """
        pid = pd.Series(self.pid, dtype="object")
        out = pd.DataFrame({
            "pid": pid,
            "process": pd.Categorical(pid.map(self.processes).astype("object").fillna("")),
            "name": pd.Categorical(self.name),
            "cat": pd.Categorical(pd.Series(self.cat, dtype="object").fillna("")),
            "task_type": pd.Categorical(pd.Series(self.task_type, dtype="object")
                                        .fillna("").astype(str)),
        })
        threads = pd.DataFrame([(p, t, n) for (p, t), n in self.threads.items()],
                               columns=["pid", "tid", "thread"]).drop_duplicates(["pid", "tid"])
        keys = pd.DataFrame({"pid": pid, "tid": pd.Series(self.tid, dtype="object")})
        joined = keys.merge(threads.astype({"pid": "object", "tid": "object"}),
                            on=["pid", "tid"], how="left")["thread"]
        out["thread"] = pd.Categorical(joined.fillna("").to_numpy())
        out["start_ns"] = ts_to_ns(self.ts, self.path)
        try:  # None -> NaN -> 0 (an X event without dur); Decimal/str -> float
            out["dur_us"] = np.nan_to_num(np.asarray(self.dur, dtype=float), nan=0.0)
        except (TypeError, ValueError, OverflowError):  # text, a list, 10**400
            raise SchemaError(self.path, "an event 'dur' is not a number of µs") from None
        return out


def ts_to_ns(values: list[str], path: Path) -> np.ndarray:
    """µs timestamps as text (``"1736408883700100.123"``, ``"56635864652.490005"``) -> int64 ns.

    Split at the point and joined as integers, so 16 integer digits plus 3 decimals
    stay exact (a float64 would not); digits beyond ns are cut. Vectorized in Arrow:
    a GB trace holds millions of events.
    """
    parsed = pc.extract_regex(pa.array(values, type=pa.string()), TS_PATTERN)
    valid = parsed.is_valid().to_numpy(zero_copy_only=False)
    if not valid.all():
        row = int(np.flatnonzero(~valid)[0])
        raise SchemaError(path, f"event ts is not a number of µs ({values[row]!r})",
                          where=f"event {row + 1} kept")
    whole = pc.cast(parsed.field("w"), pa.int64()).to_numpy()
    if len(whole) and int(whole.max()) > MAX_WHOLE_US:
        row = int(np.argmax(whole))
        raise SchemaError(path, f"event ts is beyond any clock ({brief(values[row], 40)} µs)",
                          where=f"event {row + 1} kept")
    frac = pc.utf8_slice_codeunits(pc.utf8_rpad(parsed.field("f"), 3, "0"), 0, 3)
    return whole * 1000 + pc.cast(frac, pa.int64()).to_numpy()


@contextmanager
def _open(path: Path):
    """A regular file (refused otherwise), decompressed when its name ends in ``.gz``."""
    with open_binary(path) as raw:
        if path.name.endswith(".gz"):
            with gzip.GzipFile(fileobj=raw, mode="rb") as handle:
                yield handle
        else:
            yield raw


class _Recorder:
    """File wrapper for ijson that remembers the first and the last bytes it read.

    The event array is parsed in one pass with ``ijson.items`` (the C backend's
    fastest path); the few top-level Kineto keys are then taken from the recorded
    head (``distributedInfo``/``deviceProperties`` precede ``traceEvents``) and tail
    (``baseTimeNanoseconds`` follows it), so a GB file is read only once.
    """

    def __init__(self, handle, first: bytes, path: Path):
        self.handle, self.pending = handle, first
        self.head, self.tail = bytearray(first[:HEAD]), first[-TAIL:]
        self.guard = DepthGuard(path)
        self.guard.feed(first)

    def read(self, size: int = -1) -> bytes:
        """Return the next bytes (the peeked first chunk comes first), depth-checked."""
        if size == 0:  # ijson probes read(0) to tell bytes from text
            return b""
        if self.pending:
            data, self.pending = self.pending, b""
            return data
        data = self.handle.read(size)
        self.guard.feed(data)
        if len(self.head) < HEAD:
            self.head += data[:HEAD - len(self.head)]
        self.tail = (self.tail + data)[-TAIL:]
        return data


def _first_chunk(handle, path: Path) -> bytes:
    """The first chunk holding a non-blank byte, leading blanks dropped.

    InputError for a file that is empty or blank for ``max_leading_blank_bytes``:
    a trace starts with ``[`` or ``{``, and a gzip of blanks would inflate for hours.
    """
    limit = DEFAULT_LIMITS.max_leading_blank_bytes
    skipped = 0
    while skipped <= limit:
        chunk = handle.read(CHUNK)
        if not chunk:
            raise InputError(path, "empty file" if skipped == 0 else "holds only blanks")
        first = chunk.lstrip()
        if first:
            return first
        skipped += len(chunk)
    raise InputError(path, f"not a trace: the first {size_text(limit)} are blank")


def _top_keys(recorder: _Recorder) -> dict:
    """``distributedInfo``/``deviceProperties`` from the head, base time from the tail."""
    top = {}
    for key in ("distributedInfo", "deviceProperties"):
        try:
            for value in ijson.items(io.BytesIO(bytes(recorder.head)), key):
                top[key] = value
                break
        except ijson.JSONError:
            pass  # the head is cut mid-file: only keys before the cut can be found
    base = re.search(rb'"baseTimeNanoseconds"\s*:\s*(\d{1,19})\b', recorder.tail)
    if base:
        top["baseTimeNanoseconds"] = int(base.group(1))
    return top


def scan_trace(path: Path, scan: TraceScan | None = None) -> TraceScan:
    """Stream one trace file; InputError when it is unreadable, truncated or not JSON.

    ``scan`` may be a TraceScan subclass that keeps more (read/host_links.py's LinkScan).
    """
    scan = TraceScan(path) if scan is None else scan
    try:
        with _open(path) as handle:
            first = _first_chunk(handle, path)
            form = first.lstrip()[:1]
            if form not in (b"[", b"{"):
                raise InputError(path, "not a trace: expected a JSON array of events or an "
                                       "object with traceEvents")
            recorder = _Recorder(handle, first, path)
            prefix = "item" if form == b"[" else "traceEvents.item"
            scan.consume(ijson.items(recorder, prefix, buf_size=CHUNK))
    except BaseException as exc:
        raise_stream_error(path, exc)
    scan.top = _top_keys(recorder) if form == b"{" else {}
    return scan


def raise_stream_error(path: Path, exc: BaseException):
    """Re-raise what streaming a JSON file can raise as one InputError line.

    ijson's messages are three lines of yajl text; gzip says ``Not a gzipped file`` or
    ``Compressed file ended before the end-of-stream marker``; zlib ``Error -3 …``.
    Errors of our own and anything else (KeyboardInterrupt, bugs) pass through.
    """
    if isinstance(exc, ijson.JSONError):
        raise InputError(path, f"truncated or invalid JSON: {json_problem(exc)}") from None
    if isinstance(exc, EOFError):
        raise InputError(path, "truncated gzip: the compressed stream ends early") from None
    if isinstance(exc, (zlib.error, gzip.BadGzipFile)):
        raise InputError(path, f"corrupt gzip: {brief(' '.join(str(exc).split()), 80)}") \
            from None
    if isinstance(exc, OSError):
        raise InputError(path, f"cannot read: {os_problem(exc)}") from None
    if isinstance(exc, UnicodeDecodeError):
        raise InputError(path, f"not UTF-8 text (byte {exc.start}: {exc.reason})") from None
    raise exc
