"""The host side of a trace_view.json (or Kineto trace): torch ops, nn.Module events, flows.

docs/formats.md §3.3, §7.2: flow events ``torch_to_npu`` (cat ``async_npu``; Kineto's ``ac2g``
alike) start on the host thread at the launch and end at the kernel's ``ts``. A LinkScan
keeps them with the framework ops and nn.Module events in the pass that reads the trace,
and beside them the runtime's own launch flows (``HostToDevice``: from the CANN record that
launched a task, inside its launch call, to the task) and the host op compilation spans
(``AscendCL@aclopCompile…``), which time the device's waits for the host (§15);
``host_links`` turns its column lists into HostLinks (threads as codes, times in ns). The
same pass keeps the HCCL algorithm (``args.alg_type``) of the op-level ``hcom_*`` events,
for provenance, every host op span (``cpu_op`` events, ``ProfilerStep#N`` included: the
host time of each step, docs/formats.md §15) and the HCCL op-level and plane task events
(``hccl_tasks.py``, §14): beside a kernel_details.csv it is the only read of the trace.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import repeat
from operator import contains, itemgetter, methodcaller
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ...errors import SchemaError
from ...vocab.memo import normalize_distinct
from ...vocab.names import comm_types
from .hccl_tasks import TASK_KEY, CollectiveTasks, plain_task_columns, trace_tasks
from .trace_events import DEVICE_PROCESSES, STEP_PREFIX, TraceScan, _key, scan_trace, ts_to_ns
from .trace_select import NotVouched, select_events

FLOW_CATS = {"async_npu", "ac2g"}  # host launch -> device kernel (torch_npu, Kineto)
RUNTIME_FLOW = "HostToDevice"  # CANN launch record -> device task (docs/formats.md §3.3)
HOST_SIDE = FLOW_CATS | {RUNTIME_FLOW, "cpu_op", "python_function"}
# Host op compilation as CANN names it (api_statistic.csv, CANN_API): aclop* compile the
# op (when no cached kernel fits) before launching it; opCompile is the compile step inside
# aclopCompileAndExecute. A trace's AscendCL level writes each as ``AscendCL@<api>``.
COMPILE_APIS = ("aclopCompile", "aclopCompileAndExecute", "aclopCompileAndExecuteV2",
                "opCompile")
COMPILE_NAMES = frozenset(COMPILE_APIS) | {f"AscendCL@{api}" for api in COMPILE_APIS}
# What the select pass looks for: a trace writes only the AscendCL@ names (each wanted
# value costs a look at every string of its length).
TRACE_COMPILE_NAMES = frozenset(f"AscendCL@{api}" for api in COMPILE_APIS)
MODULE_PREFIX = "nn.Module: "
# Op-level collectives (``hcom_allReduce__586_0_1``, no ``cat``) carry the HCCL algorithm in
# ``args.alg_type`` (``RING-RING``; docs/formats.md §3.1). Their key is what the host-side
# pass looks for besides HOST_SIDE: a JSON key is a string like any other.
HCOM_PREFIX = "hcom_"
ALGORITHM_KEY = "alg_type"
OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
# The metadata naming processes and threads: which task events lie on a ``Plane`` thread
# of the HCCL process is known from them only.
METADATA = {"process_name", "thread_name"}
# The AI Core frequency: torch_npu (2025 on) writes it as counter events of this name
# (``args.MHz``), once at the start and at each change; kept for provenance.
FREQUENCY_NAME = "AI Core Freq"
WANTED = HOST_SIDE | {ALGORITHM_KEY, FREQUENCY_NAME} | TRACE_COMPILE_NAMES
# What the pass looks for when it keeps the HCCL tasks too.
WANTED_WITH_TASKS = WANTED | {TASK_KEY} | METADATA
TASK_BATCH = 4096  # task events whose fields are taken at once
_TASK_TOP = itemgetter("ph", "ts", "pid", "tid", "dur", "name", "args")
_TASK_ARGS = itemgetter("task type", "size(Byte)", TASK_KEY, "transport type")
# The ranks a task is between, where it names them (older msprof did not).
_TASK_RANKS = (methodcaller("get", "src rank"), methodcaller("get", "dst rank"))
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
    same pass found (``LinkScan.algorithms``). ``launches``: the runtime's launch of each
    task it records (``device_ns`` task start, ``launch_ns``; None when the profile records
    none), which times a device wait better than the framework op: torch_npu's task queue
    launches on another thread, after the op; ``compile``: host op compilation spans
    (``start_ns``, ``end_ns``; None when the profile records none); ``launch_source``: where
    the launches that time the tasks come from, in words.
    """

    ops: pd.DataFrame
    modules: pd.DataFrame
    links: pd.DataFrame
    algorithms: Algorithms = ("", ())
    launches: pd.DataFrame | None = None
    compile: pd.DataFrame | None = None
    launch_source: str = ""


@dataclass
class HostSide:
    """Everything one read of a rank's host side gives: each part None when absent.

    ``links``: the HostLinks (None without launch flows / connection ids); ``spans``:
    every host op span (``thread`` int64, coded as in ``links``, ``start_ns``, ``end_ns``,
    ``name`` categorical), ``ProfilerStep#N`` included, from which the host time of each
    step is derived (reduce/host_time.py); ``tasks``: the HCCL op-level events and plane
    tasks (``hccl_tasks.CollectiveTasks``).
    """

    links: HostLinks | None = None
    spans: pd.DataFrame | None = None
    tasks: CollectiveTasks | None = None
    # (file: key, MHz as text) of the trace's AI Core frequency; None when not recorded.
    aicore_freq: tuple[str, str] | None = None


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
    tasks: bool = True  # keep HCCL op-level and plane task events (hccl_tasks.py)
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
    rt_start_id: list = field(default_factory=list)  # HostToDevice flows
    rt_start_ts: list = field(default_factory=list)
    rt_end_id: list = field(default_factory=list)
    rt_end_ts: list = field(default_factory=list)
    compile_ts: list = field(default_factory=list)  # host op compilation (COMPILE_NAMES)
    compile_dur: list = field(default_factory=list)
    alg_name: list = field(default_factory=list)
    alg_type: list = field(default_factory=list)
    span_pid: list = field(default_factory=list)  # every host op (cpu_op), for host time
    span_tid: list = field(default_factory=list)
    span_ts: list = field(default_factory=list)
    span_dur: list = field(default_factory=list)
    span_name: list = field(default_factory=list)
    hop_pid: list = field(default_factory=list)  # hcom_* op-level events
    hop_tid: list = field(default_factory=list)
    hop_ts: list = field(default_factory=list)
    hop_dur: list = field(default_factory=list)
    hop_name: list = field(default_factory=list)
    hop_alg: list = field(default_factory=list)
    # HCCL task events (args TASK_KEY): batches of columns (lists or arrays), in order
    task_chunks: list = field(default_factory=list)
    task_inexact: bool = False  # a batch kept a float among ts / pid / tid
    thread_codes: _ThreadCodes = field(default_factory=lambda: _ThreadCodes())
    freq_mhz: list = field(default_factory=list)  # AI Core Freq counter values

    def consume_tasks(self, events: list) -> None:
        """Keep events the select pass routed here for their TASK_KEY alone.

        The task events among them (no ``cat``, not ``hcom_*``, args holding TASK_KEY) are
        taken a batch at a time; any other goes the ordinary way (``consume``). A batch
        of plain ``X`` task events, as msprof writes them, is taken by C-level getters
        (``itemgetter`` and ``zip``): the same values, without a Python step per event.
        """
        if self.tasks and self._take_plain_tasks(events):
            return
        tasks = [e for e in events if e.__class__ is dict and e.get("cat") is None
                 and e.get("args").__class__ is dict and TASK_KEY in e["args"]
                 and not (e.get("name").__class__ is str and e["name"].startswith(HCOM_PREFIX))]
        if len(tasks) != len(events):
            chosen = {id(e) for e in tasks}
            self.consume([e for e in events if id(e) not in chosen])
        if self.tasks:
            self._keep_tasks(tasks)

    def take_task_bytes(self, region: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                        quotes: np.ndarray) -> bool:
        """Keep routed task events from their bytes when all are plain (``plain_task_columns``).

        False leaves them to be parsed for ``consume_tasks``.
        """
        columns = plain_task_columns(region, starts, ends, quotes) if self.tasks else None
        if columns is not None:
            self.task_chunks.append(columns)
        return columns is not None

    def consume(self, events) -> None:
        """Keep the host side of ``events``; the device side too when ``kernels``."""
        if self.kernels:
            super().consume(self._tapped(events))
            return
        for _ in self._tapped(events):
            pass

    def _tapped(self, events):
        keep, algorithm = self._keep_host, self._keep_algorithm
        tasks, metadata = self.tasks, not self.kernels  # a TraceScan keeps its own metadata
        # Task events are gathered and their fields taken a batch at a time (list
        # comprehensions): a Level1 trace holds more of them than of any host-side kind.
        pending: list = []
        task = pending.append
        for event in events:
            if event.__class__ is dict:
                cat = event.get("cat")  # a list or object there is no category
                if cat is None:  # device tasks, collectives and metadata have none
                    name = event.get("name")
                    if name.__class__ is str and name.startswith(HCOM_PREFIX):
                        algorithm(event, name)
                    elif name.__class__ is str and name in COMPILE_NAMES:
                        self._keep_compile(event)
                    elif name == FREQUENCY_NAME and event.get("ph") == "C":
                        args = event.get("args")
                        self.freq_mhz.append(args.get("MHz") if args.__class__ is dict
                                             else None)
                    elif tasks:
                        args = event.get("args")
                        if args.__class__ is dict and TASK_KEY in args:
                            task(event)
                            if len(pending) >= TASK_BATCH:
                                self._keep_tasks(pending)
                                pending.clear()
                        elif metadata and event.get("ph") == "M":
                            self._metadata(event)
                elif cat.__class__ is str and cat in HOST_SIDE:
                    keep(event)
                elif cat == "user_annotation" and name_is_step(event.get("name")) and \
                        event.get("ts") is not None and event.get("ph") == "X":
                    self._keep_span(event, event.get("ts"))  # Kineto's host step marks
            yield event
        self._keep_tasks(pending)

    def _keep_algorithm(self, event: dict, name: str) -> None:
        args = event.get("args")
        found = args.get(ALGORITHM_KEY) if args.__class__ is dict else None
        ph, ts = event.get("ph"), event.get("ts")
        if found.__class__ is str and ph == "X":
            self.alg_name.append(name)
            self.alg_type.append(found)
        if self.tasks and ph == "X" and ts is not None:
            self.hop_pid.append(event.get("pid"))
            self.hop_tid.append(event.get("tid"))
            self.hop_ts.append(ts)
            self.hop_dur.append(event.get("dur"))
            self.hop_name.append(name)
            self.hop_alg.append(found)

    def _take_plain_tasks(self, events: list) -> bool:
        """Keep ``events`` when each is an ``X`` task event with every field; else False.

        Anything else (a missing key, a ``cat``, an ``hcom_*`` name, a ph other than X, a
        ts of None) leaves the batch to the general path, which decides event by event.
        """
        try:
            ph, ts, pid, tid, dur, name, args = zip(*map(_TASK_TOP, events))
            if set(ph) != {"X"} or None in ts or set(map(type, args)) != {dict} or \
                    any(n.__class__ is not str or n.startswith(HCOM_PREFIX) for n in set(name)):
                return False
            if any(map(contains, events, repeat("cat"))):  # a category: not a task event
                return False
            kind, size, link, transport = zip(*map(_TASK_ARGS, args))
            src, dst = (tuple(map(get, args)) for get in _TASK_RANKS)
        except (KeyError, TypeError, ValueError):  # ValueError: an empty batch to unpack
            return not events
        # Compact at once: a million events' own strings and numbers, kept as objects,
        # cost more memory than the rest of the pass holds.
        self.task_chunks.append({
            "pid": self._exact(pid, np.int64), "tid": self._exact(tid, np.int64),
            "ts": self._exact(ts, None), "dur": _array(dur, np.float64),
            "name": _text_array(name), "type": _text_array(kind),
            "size": _array(size, np.float64), "link": _text_array(link),
            "transport": _text_array(transport), "src": _array(src, np.float64),
            "dst": _array(dst, np.float64)})
        return True

    def _exact(self, values: tuple, dtype) -> object:
        """Values read exactly: int64 (``dtype``) or text (None) when they all are, else a list.

        A float among them is noted (``task_inexact``): the parse the caller vouches for
        must give it alike, which orjson and ijson do not (``parsed_alike``).
        """
        kinds = set(map(type, values))
        if dtype is not None and kinds == {int}:
            try:
                return np.array(values, dtype=dtype)
            except OverflowError:
                pass
        if dtype is None and kinds == {str}:
            return pa.array(values, type=pa.string())
        self.task_inexact |= float in kinds
        return list(values)

    def _keep_tasks(self, events: list) -> None:
        """The fields of the ``X`` task events among ``events`` (each holds args TASK_KEY)."""
        events = [e for e in events if e.get("ph") == "X" and e.get("ts") is not None]
        if not events:
            return
        args = [e["args"] for e in events]
        chunk = {"pid": [e.get("pid") for e in events], "tid": [e.get("tid") for e in events],
                 "ts": [e["ts"] for e in events], "dur": [e.get("dur") for e in events],
                 "name": [e.get("name") for e in events],
                 "type": [a.get("task type") for a in args],
                 "size": [a.get("size(Byte)") for a in args],
                 "link": [a[TASK_KEY] for a in args],
                 "transport": [a.get("transport type") for a in args],
                 "src": [a.get("src rank") for a in args],
                 "dst": [a.get("dst rank") for a in args]}
        self.task_inexact |= any(float in set(map(type, chunk[column]))
                                 for column in ("pid", "tid", "ts"))
        self.task_chunks.append(chunk)

    def _keep_compile(self, event: dict) -> None:
        ts = event.get("ts")
        if ts is not None and event.get("ph") == "X":
            self.compile_ts.append(ts)
            self.compile_dur.append(event.get("dur"))

    def _keep_span(self, event: dict, ts) -> None:
        self.span_pid.append(event.get("pid"))
        self.span_tid.append(event.get("tid"))
        self.span_ts.append(ts)
        self.span_dur.append(event.get("dur"))
        self.span_name.append(event.get("name"))

    def aicore_freq(self) -> tuple[str, str] | None:
        """(file: key, the most common AI Core Freq value in MHz as text), or None."""
        values = [float(v) for v in self.freq_mhz if v.__class__ in (int, float)
                  and not isinstance(v, bool) and v == v and v > 0]
        if not values:
            return None
        common = max(sorted(set(values)), key=values.count)
        where = f"{self.path.parent.name}/{self.path.name}" \
            if self.path.parent.name == OUTPUT_DIR else self.path.name
        return f"{where}: {FREQUENCY_NAME}", f"{common:g}"

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
        if cat == RUNTIME_FLOW:
            if ph == "s":
                self.rt_start_id.append(event.get("id"))
                self.rt_start_ts.append(ts)
            elif ph == "f":
                self.rt_end_id.append(event.get("id"))
                self.rt_end_ts.append(ts)
            return
        name = event.get("name")
        if ph != "X" or name.__class__ is not str:
            return
        if cat == "cpu_op":
            # Every cpu_op is a host span (host time, §15): the framework ops below are
            # kept as ops and join the spans in host_spans; the rest are kept as spans here.
            if "::" not in name and "Backward" not in name:
                self._keep_span(event, ts)
                return  # a launch record: its flow is what counts (autograd nodes are
            args = event.get("args")  # named ``…Backward<n>`` and carry a sequence number)
            args = args if args.__class__ is dict else {}
            seq = args.get("Sequence number")
            seq = seq if seq.__class__ is int else -1
            if "::" not in name and seq < 0:
                self._keep_span(event, ts)
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
        threads = self.thread_codes
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
        launches = self._runtime_launches(shift)
        return HostLinks(ops, modules, links[["device_ns", "thread", "launch_ns"]],
                         self.algorithms(), launches, self._compile_spans(shift),
                         f"{RUNTIME_FLOW} flows" if launches is not None
                         else "torch_to_npu flows")

    def _runtime_launches(self, shift: int) -> pd.DataFrame | None:
        """``device_ns``, ``launch_ns`` of the HostToDevice flows; None without any.

        One launch may start several tasks (a flow id with several ends): each keeps it.
        """
        if not self.rt_start_id or not self.rt_end_id:
            return None
        # msprof's ids are text past int64: one code per id for both ends, then arrays
        # (a merge on the text cost as much as the rest of the side).
        ids = self.rt_start_id + self.rt_end_id
        code = pd.factorize(np.array(ids, dtype=object) if set(map(type, ids)) == {str}
                            else _keys(ids))[0]
        starts, ends = code[:len(self.rt_start_id)], code[len(self.rt_start_id):]
        first = np.full(int(code.max()) + 2, -1, np.int64)  # the first start of each id
        named = np.flatnonzero(starts >= 0)  # an id of null has code -1: it joins nothing
        first[starts[named][::-1]] = named[::-1]
        start_of = np.where(ends >= 0, first[ends], -1)
        reached = start_of >= 0
        if not reached.any():
            return None
        launch = _ns(self.rt_start_ts, self.path) + shift
        device = _ns(self.rt_end_ts, self.path) + shift
        return pd.DataFrame({"device_ns": device[reached],
                             "launch_ns": launch[start_of[reached]]})

    def _compile_spans(self, shift: int) -> pd.DataFrame | None:
        """``start_ns``, ``end_ns`` of the host op compilation events.

        Empty when the trace records the CANN level (its HostToDevice flows) and no
        compilation: then none happened; None when it does not record it.
        """
        if not self.compile_ts:
            return pd.DataFrame({"start_ns": pd.Series(dtype="int64"),
                                 "end_ns": pd.Series(dtype="int64")}) \
                if len(self.rt_start_ts) else None
        spans = _spans(np.zeros(len(self.compile_ts), np.int64), self.compile_ts,
                       self.compile_dur, self.path, shift)
        return spans[["start_ns", "end_ns"]]

    def parsed_alike(self) -> bool:
        """True when any parser gives the kept values alike: no float among the exact ones.

        Timestamps, ids, pids and tids are read as text or keys, where ijson's exact
        Decimal and a float differ (``1E+3`` vs ``1000.0``; a float keeps 17 digits of a
        ts); dims must be torch_npu's strings (Kineto's lists may hold numbers).
        Durations become floats either way.
        """
        exact = (self.op_ts, self.mod_ts, self.start_ts, self.end_ts, self.start_id,
                 self.end_id, self.rt_start_id, self.rt_start_ts, self.rt_end_id,
                 self.rt_end_ts, self.compile_ts, self.op_pid, self.op_tid, self.mod_pid,
                 self.mod_tid,
                 self.start_pid, self.start_tid, self.span_ts, self.span_pid, self.span_tid,
                 self.hop_ts, self.hop_pid, self.hop_tid)
        return not self.task_inexact and \
            all(float not in set(map(type, values)) for values in exact) and \
            set(map(type, self.op_dims)) <= {str, type(None)}

    def host_spans(self) -> pd.DataFrame | None:
        """Every kept host op span (threads coded as in ``host_links``); None when none.

        Columns ``thread``, ``start_ns``, ``end_ns``, ``name`` (categorical).
        """
        if not self.span_ts and not self.op_ts:
            return None
        spans = _spans(self.thread_codes(self.op_pid + self.span_pid,
                                         self.op_tid + self.span_tid),
                       self.op_ts + self.span_ts, self.op_dur + self.span_dur, self.path,
                       self._kineto_base())
        names = self.op_name + self.span_name
        try:  # text: a dictionary at C speed
            encoded = pc.fill_null(pa.array(names, type=pa.string()), "").dictionary_encode()
            spans["name"] = pd.Categorical.from_codes(
                encoded.indices.to_numpy(zero_copy_only=False), encoded.dictionary.to_pylist())
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            spans["name"] = pd.Categorical(pd.Series(names, dtype=object).fillna("")
                                           .astype(str))
        return spans

    def collective_tasks(self) -> CollectiveTasks | None:
        """The HCCL op-level and plane task events kept (``hccl_tasks.trace_tasks``)."""
        if not self.task_chunks:
            return None
        ops = {"pid": self.hop_pid, "tid": self.hop_tid, "ts": self.hop_ts,
               "dur": self.hop_dur, "name": self.hop_name, "algorithm": self.hop_alg}
        columns = dict.fromkeys(column for chunk in self.task_chunks for column in chunk)
        tasks = {column: [chunk.get(column) for chunk in self.task_chunks]
                 for column in columns}
        return trace_tasks(self.path, self.processes, self.threads, ops, tasks,
                           lambda values: _ns(values, self.path))

    def side(self) -> HostSide:
        """What this pass found of the host side: links, host spans, HCCL tasks."""
        links = self.host_links()
        return HostSide(links, self.host_spans(), self.collective_tasks(), self.aicore_freq())

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
        text = values if isinstance(values, pa.Array) else pa.array(values, type=pa.string())
        point = pc.find_substring(text, ".")
        if text.null_count == 0 and pc.all(pc.equal(
                point, pc.subtract(pc.utf8_length(text), 4))).as_py() in (True, None):
            return pc.cast(pc.replace_substring(text, ".", ""), pa.int64()).to_numpy()
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        pass
    return ts_to_ns(_text(values.to_pylist() if isinstance(values, pa.Array) else values), path)


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


def _array(values: tuple, dtype) -> object:
    """Numbers as a numpy array; values of other kinds stay a list (read later)."""
    try:
        return np.array(values, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        return list(values)


def _text_array(values: tuple) -> object:
    """Text (None as null) as an Arrow string array; other values stay a list."""
    try:
        return pa.array(values, type=pa.string())
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        return list(values)


def name_is_step(name) -> bool:
    """True for a ``ProfilerStep#N`` name."""
    return name.__class__ is str and name.startswith(STEP_PREFIX)


def read_trace_side(trace: Path, tasks: bool = True) -> HostSide:
    """The host side of a trace_view.json only (a kernel_details.csv has the kernels).

    Only the host-side events (and, with ``tasks``, the HCCL task events and the process
    and thread names) are parsed (trace_select.py), unless the file is one that pass
    leaves to the full stream, or a kept value is a float (orjson's float is not ijson's
    exact Decimal, whose text the timestamps are read from).
    """
    scan = LinkScan(trace, kernels=False, tasks=tasks)
    try:
        select_events(trace, WANTED_WITH_TASKS if tasks else WANTED, scan.consume,
                      (TASK_KEY, scan.consume_tasks, scan.take_task_bytes) if tasks else None)
        vouched = scan.parsed_alike()
    except NotVouched:
        vouched = False
    if not vouched:
        scan = LinkScan(trace, kernels=False, tasks=tasks)
        scan_trace(trace, scan)
    return scan.side()


def read_trace_links(trace: Path) -> HostLinks | None:
    """The host→device links of a trace_view.json (``read_trace_side`` without the tasks)."""
    return read_trace_side(trace, tasks=False).links

