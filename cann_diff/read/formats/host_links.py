"""The host side of a trace_view.json (or Kineto trace): torch ops, nn.Module events, flows.

docs/formats.md §3.3, §7.2: flow events ``torch_to_npu`` (cat ``async_npu``; Kineto's ``ac2g``
alike) start on the host thread at the launch and end at the kernel's ``ts``. A LinkScan
keeps them with the framework ops and nn.Module events in the pass that reads the trace;
``host_links`` turns its column lists into HostLinks (threads as codes, times in ns). The
same pass keeps the HCCL algorithm (``args.alg_type``) of the op-level ``hcom_*`` events,
for provenance: beside a kernel_details.csv it is the only read of the trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import SchemaError
from ...vocab.memo import normalize_distinct
from ...vocab.names import comm_types
from .trace_events import DEVICE_PROCESSES, TraceScan, _key, scan_trace, ts_to_ns
from .trace_select import NotVouched, select_events

FLOW_CATS = {"async_npu", "ac2g"}  # host launch -> device kernel (torch_npu, Kineto)
HOST_SIDE = FLOW_CATS | {"cpu_op", "python_function"}
MODULE_PREFIX = "nn.Module: "
# Op-level collectives (``hcom_allReduce__586_0_1``, no ``cat``) carry the HCCL algorithm in
# ``args.alg_type`` (``RING-RING``; docs/formats.md §3.1). Their key is what the host-side
# pass looks for besides HOST_SIDE: a JSON key is a string like any other.
HCOM_PREFIX = "hcom_"
ALGORITHM_KEY = "alg_type"
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
WANTED = HOST_SIDE | {ALGORITHM_KEY}
# (file: key, distinct (communication type, algorithm) pairs): what a reader found.
Algorithms = tuple[str, tuple[tuple[str, str], ...]]


@dataclass
class HostLinks:
    """What a profile says about the host side, as a reader found it.

    ``ops``: host operators (``thread`` int64, ``start_ns``, ``end_ns``, ``name``,
    ``input_shapes``, ``seq`` sequence number or -1, ``forward`` False for autograd
    nodes); ``modules``: ``nn.Module`` events (``thread``, ``start_ns``, ``end_ns``,
    ``name``); ``links``: one row per host→device link (``device_ns`` kernel start,
    ``thread``, ``launch_ns`` host launch time); ``algorithms``: the HCCL algorithms the
    same pass found (``LinkScan.algorithms``).
    """

    ops: pd.DataFrame
    modules: pd.DataFrame
    links: pd.DataFrame
    algorithms: Algorithms = ("", ())



@dataclass
class LinkScan(TraceScan):
    """A TraceScan that also keeps torch ops, nn.Module events, launch flows and algorithms.

    One streaming pass serves both levels: a trace-only rank's reader hands its events
    to the TraceScan columns and keeps the host side here (``kernels=True``); beside a
    kernel_details.csv only the host side is kept (``kernels=False``). Only ops that
    can matter are kept: framework ops (``::`` in the name) and autograd nodes (a
    sequence number); the launch records under them are not needed, their flows are.
    """

    kernels: bool = True
    op_pid: list = field(default_factory=list)  # pid and tid apart: tuples would be
    op_tid: list = field(default_factory=list)  # objects the garbage collector tracks
    op_ts: list = field(default_factory=list)
    op_dur: list = field(default_factory=list)
    op_name: list = field(default_factory=list)
    op_dims: list = field(default_factory=list)
    op_seq: list = field(default_factory=list)
    op_fwd: list = field(default_factory=list)
    mod_pid: list = field(default_factory=list)
    mod_tid: list = field(default_factory=list)
    mod_ts: list = field(default_factory=list)
    mod_dur: list = field(default_factory=list)
    mod_name: list = field(default_factory=list)
    start_id: list = field(default_factory=list)
    start_pid: list = field(default_factory=list)
    start_tid: list = field(default_factory=list)
    start_ts: list = field(default_factory=list)
    end_id: list = field(default_factory=list)
    end_ts: list = field(default_factory=list)
    alg_name: list = field(default_factory=list)
    alg_type: list = field(default_factory=list)

    def consume(self, events) -> None:
        """Keep the host side of ``events``; the device side too when ``kernels``."""
        if self.kernels:
            super().consume(self._tapped(events))
            return
        for _ in self._tapped(events):
            pass

    def _tapped(self, events):
        keep, algorithm = self._keep_host, self._keep_algorithm
        for event in events:
            if event.__class__ is dict:
                cat = event.get("cat")  # a list or object there is no category
                if cat is None:  # device tasks and collectives have none
                    name = event.get("name")
                    if name.__class__ is str and name.startswith(HCOM_PREFIX):
                        algorithm(event, name)
                elif cat.__class__ is str and cat in HOST_SIDE:
                    keep(event)
            yield event

    def _keep_algorithm(self, event: dict, name: str) -> None:
        args = event.get("args")
        found = args.get(ALGORITHM_KEY) if args.__class__ is dict else None
        if found.__class__ is str and event.get("ph") == "X":
            self.alg_name.append(name)
            self.alg_type.append(found)

    def algorithms(self) -> Algorithms:
        """Distinct (communication type, ``args.alg_type``) pairs of the hcom events."""
        where = f"{self.path.parent.name}/{self.path.name}" \
            if self.path.parent.name == OUTPUT_DIR else self.path.name
        pairs = set(zip(comm_types(self.alg_name), self.alg_type))
        return f"{where}: {HCOM_PREFIX}* args.{ALGORITHM_KEY}", tuple(sorted(pairs))

    def _keep_host(self, event) -> None:
        cat, ts = event.get("cat"), event.get("ts")
        if ts is None:
            return
        ph = event.get("ph")
        if cat in FLOW_CATS:
            if ph == "s":
                self.start_id.append(event.get("id"))
                self.start_pid.append(event.get("pid"))
                self.start_tid.append(event.get("tid"))
                self.start_ts.append(ts)
            elif ph == "f":
                self.end_id.append(event.get("id"))
                self.end_ts.append(ts)
            return
        name = event.get("name")
        if ph != "X" or name.__class__ is not str:
            return
        if cat == "cpu_op":
            if "::" not in name and "Backward" not in name:
                return  # a launch record: its flow is what counts (autograd nodes are
            args = event.get("args")  # named ``…Backward<n>`` and carry a sequence number)
            args = args if args.__class__ is dict else {}
            seq = args.get("Sequence number")
            seq = seq if seq.__class__ is int else -1
            if "::" not in name and seq < 0:
                return
            self.op_pid.append(event.get("pid"))
            self.op_tid.append(event.get("tid"))
            self.op_ts.append(ts)
            self.op_dur.append(event.get("dur"))
            self.op_name.append(name)
            self.op_dims.append(args.get("Input Dims"))
            self.op_seq.append(seq)
            fwd = args.get("Fwd thread id")
            self.op_fwd.append(fwd if fwd.__class__ is int else 0)
        elif name.startswith(MODULE_PREFIX):
            self.mod_pid.append(event.get("pid"))
            self.mod_tid.append(event.get("tid"))
            self.mod_ts.append(ts)
            self.mod_dur.append(event.get("dur"))
            self.mod_name.append(name[len(MODULE_PREFIX):])

    def host_links(self) -> HostLinks | None:
        """The host side as HostLinks (threads as codes, times in ns); None without flows."""
        if not self.start_id or not self.end_id:
            return None
        threads = _ThreadCodes()
        shift = self._kineto_base()
        starts = pd.DataFrame({"id": _keys(self.start_id),
                               "thread": threads(self.start_pid, self.start_tid),
                               "launch_ns": _ns(self.start_ts, self.path) + shift})
        ends = pd.DataFrame({"id": _keys(self.end_id),
                             "device_ns": _ns(self.end_ts, self.path) + shift})
        links = starts.drop_duplicates("id").merge(ends.drop_duplicates("id"), on="id")
        ops = _spans(threads(self.op_pid, self.op_tid), self.op_ts, self.op_dur, self.path,
                     shift)
        ops["name"] = pd.Categorical(self.op_name)
        ops["input_shapes"] = normalize_distinct(_dims_text(self.op_dims), _clean_shapes)
        ops["seq"] = np.asarray(self.op_seq, dtype=np.int64)
        ops["forward"] = np.asarray(self.op_fwd, dtype=np.int64) == 0
        modules = _spans(threads(self.mod_pid, self.mod_tid), self.mod_ts, self.mod_dur,
                         self.path, shift)
        modules["name"] = pd.Categorical(self.mod_name)
        return HostLinks(ops, modules, links[["device_ns", "thread", "launch_ns"]],
                         self.algorithms())

    def parsed_alike(self) -> bool:
        """True when any parser gives the kept values alike: no float among the exact ones.

        Timestamps, ids, pids and tids are read as text or keys, where ijson's exact
        Decimal and a float differ (``1E+3`` vs ``1000.0``; a float keeps 17 digits of a
        ts); dims must be torch_npu's strings (Kineto's lists may hold numbers).
        Durations become floats either way.
        """
        exact = (self.op_ts, self.mod_ts, self.start_ts, self.end_ts, self.start_id,
                 self.end_id, self.op_pid, self.op_tid, self.mod_pid, self.mod_tid,
                 self.start_pid, self.start_tid)
        return all(float not in set(map(type, values)) for values in exact) and \
            set(map(type, self.op_dims)) <= {str, type(None)}

    def _kineto_base(self) -> int:
        """Kineto writes ts relative to baseTimeNanoseconds; the kernel reader adds it too."""
        if set(self.processes.values()) & DEVICE_PROCESSES:
            return 0
        return int(self.top.get("baseTimeNanoseconds", 0) or 0)


def _keys(values: list) -> pd.Series:
    """Ids/pids/tids as hashable keys (ints or strings; anything else by its text)."""
    if values and set(map(type, values)) == {int}:  # the usual case, read at C speed
        try:
            return pd.Series(np.array(values, dtype=np.int64))
        except OverflowError:
            pass  # beyond int64: pandas picks uint64 or object
    series = pd.Series(values)
    if series.dtype != object:  # all ints (the usual case): no per-value look
        return series
    odd = ~series.map(lambda v: v.__class__ in (int, str) or v is None)
    if odd.any():
        series[odd] = series[odd].map(_key)
    return series


def _ns(values: list, path: Path) -> np.ndarray:
    """µs timestamps -> int64 ns; torch_npu's exact form (3 decimals) by dropping the point.

    That form is most of a trace's events and is exact as text, so it needs no regex;
    anything else goes through trace_events.ts_to_ns.
    """
    try:
        text = pa.array(values, type=pa.string())
        point = pc.find_substring(text, ".")
        if text.null_count == 0 and pc.all(pc.equal(
                point, pc.subtract(pc.utf8_length(text), 4))).as_py() in (True, None):
            return pc.cast(pc.replace_substring(text, ".", ""), pa.int64()).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    return ts_to_ns(_text(values), path)


def _text(values: list) -> list:
    """Timestamps as text (torch_npu writes strings, Kineto numbers)."""
    if all(v.__class__ is str for v in values[:1000]) and \
            all(v.__class__ is str for v in values[-1000:]):
        return values
    return [v if v.__class__ is str else str(v) for v in values]


class _ThreadCodes:
    """One integer per (pid, tid), shared by every table of one trace."""

    def __init__(self) -> None:
        self.codes: dict = {}

    def __call__(self, pids: list, tids: list) -> np.ndarray:
        if not pids:
            return np.zeros(0, np.int64)
        pid_code, pid_values = pd.factorize(_keys(pids))
        tid_code, tid_values = pd.factorize(_keys(tids))
        local, distinct = pd.factorize(pid_code * len(tid_values) + tid_code)
        pairs = zip(pid_values[distinct // len(tid_values)], tid_values[distinct % len(tid_values)])
        known = np.array([self.codes.setdefault(pair, len(self.codes)) for pair in pairs],
                         dtype=np.int64)
        return known[local]


def _spans(thread: np.ndarray, ts: list, dur: list, path: Path, shift: int) -> pd.DataFrame:
    start = _ns(ts, path) + shift
    try:
        length = np.nan_to_num(np.asarray(dur, dtype=float), nan=0.0)
    except (TypeError, ValueError):
        raise SchemaError(path, "an event 'dur' is not a number") from None
    return pd.DataFrame({"thread": thread, "start_ns": start,
                         "end_ns": start + np.rint(length * 1000).astype(np.int64)})


def _dims_text(values: list) -> pd.Series:
    """``Input Dims`` as text: torch_npu writes a string, Kineto a list of lists."""
    out = pd.Series(values, dtype="object")
    if list not in set(map(type, values)):
        return out.where(out.notna(), "").astype(str)
    lists = out.map(lambda v: v.__class__ is list)
    if lists.any():  # Kineto: [[32, 3], [], [64]] -> "32,3;;64"
        out[lists] = out[lists].map(
            lambda v: ";".join(",".join(str(d) for d in dims) if isinstance(dims, list)
                               else "" for dims in v))
    return out.where(out.notna(), "").astype(str)


def _clean_shapes(values: pd.Series) -> pd.Series:
    """Shapes without blanks, line breaks, quotes or brackets (``32,3; 64`` -> ``32,3;64``)."""
    return values.astype(str).str.replace(r"[\s\"\[\]]+", "", regex=True)


def read_trace_links(trace: Path) -> HostLinks | None:
    """The host side of a trace_view.json only (a kernel_details.csv has the kernels).

    Only the host-side events are parsed (trace_select.py), unless the file is one that
    pass leaves to the full stream, or a kept value is a float (orjson's float is not
    ijson's exact Decimal, whose text the timestamps are read from).
    """
    scan = LinkScan(trace, kernels=False)
    try:
        select_events(trace, WANTED, scan.consume)
        vouched = scan.parsed_alike()
    except NotVouched:
        vouched = False
    if not vouched:
        scan = LinkScan(trace, kernels=False)
        scan_trace(trace, scan)
    return scan.host_links()

