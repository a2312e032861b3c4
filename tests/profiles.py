"""Write crafted torch_npu text-export profiles from a compact description.

A profile is described per rank and per step as a list of operators, laid out one
after another on the compute stream (``GAP_US`` apart):

* ``Kernel`` — a compute kernel (name, Type, Accelerator Core, µs, input shapes).
  ``beside=True`` starts it together with the previous kernel on another engine
  (an AI_CPU companion of an MC2 op) without moving the clock.
* ``Comm`` — a collective. ``exposed=True``: the compute stream waits for it (it
  is not hidden). ``exposed=False``: it runs on the communication stream beside the
  compute kernels that follow it (overlapped while they last).

``write_profile(root, label, schedule, ...)`` writes ``root/label/`` holding one
``*_ascend_pt`` directory per rank (``profiler_info_<rank>.json`` +
``ASCEND_PROFILER_OUTPUT/kernel_details.csv``, ``step_trace_time.csv``,
``communication.json``), the layout of examples/generate.py. The
step_trace_time.csv figures are accounted here from the same schedule by plain
interval arithmetic, independently of cann_diff (FORMATS.md §4):
Computing = |∪ compute|, Communication = |∪ comm|, Overlapped = |∪comm ∩ ∪compute|,
Communication(Not Overlapped) = Communication − Overlapped,
Stage = last end − first start, Free = Stage − |∪ compute ∪ comm|.

With ``noise=σ`` every kernel instance is multiplied by a lognormal factor
``exp(N(0, σ))`` drawn from ``random.Random(seed)``; with ``noise=0`` durations are
exact, so hand-computed answers hold to the microsecond.
"""

from __future__ import annotations

import csv
import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

GAP_US = 2.0  # launch gap between consecutive ops on the compute stream
STEP_GAP_US = 500.0  # host gap between steps (outside every step)
T0_US = 1_736_413_971_000_000.0  # a 2025 local timestamp, µs

HEADER_LEVEL1 = ("Step Id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,"
                 "Start Time(us),Duration(us),Wait Time(us),Block Dim,Mix Block Dim,"
                 "HF32 Eligible,Input Shapes,Input Data Types,Input Formats,Output Shapes,"
                 "Output Data Types,Output Formats,Context ID").split(",")
HEADER_LEVEL0 = ("Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),"
                 "Wait Time(us),Block Dim").split(",")
STEP_HEADER = ["Step", "Computing", "Communication(Not Overlapped)", "Overlapped",
               "Communication", "Free", "Stage", "Bubble",
               "Communication(Not Overlapped and Exclude Receive)", "Preparing"]


@dataclass(frozen=True)
class Kernel:
    """A compute kernel of the schedule; ``us`` before noise."""

    name: str
    type: str
    core: str
    us: float
    shapes: str = ""
    beside: bool = False

    def scaled(self, factor: float) -> Kernel:
        return replace(self, us=self.us * factor)


@dataclass(frozen=True)
class Comm:
    """A collective (``kind`` as HCCL spells it: allReduce, allGather, reduceScatter,
    alltoall, broadcast); ``us`` before noise."""

    kind: str
    us: float
    exposed: bool = True
    group: str = "17522688603477080586"

    def scaled(self, factor: float) -> Comm:
        return replace(self, us=self.us * factor)


Op = Kernel | Comm
Schedule = Sequence[Op] | Callable[[int, int], Sequence[Op]]


def aclnn(op_type: str, us: float, shapes: str = "", core: str = "AI_CORE") -> Kernel:
    """A kernel named the aclnn way (``aclnnX_X_X``) with ``Type`` = ``op_type``."""
    return Kernel(f"aclnn{op_type}_{op_type}_{op_type}", op_type, core, us, shapes)


def scaled(ops: Sequence[Op], factor: float,
           only: Callable[[Op], bool] = lambda op: True) -> list[Op]:
    """The schedule with the ops selected by ``only`` made ``factor`` times longer."""
    return [op.scaled(factor) if only(op) else op for op in ops]


@dataclass
class Built:
    """What was written: the run directory and, per (rank, step), the row figures."""

    path: Path
    figures: dict[tuple[int, int], dict[str, float]] = field(default_factory=dict)

    def mean(self, column: str) -> float:
        """Mean of a step_trace_time column over ranks and steps (µs)."""
        values = [f[column] for f in self.figures.values()]
        return sum(values) / len(values)

    def __fspath__(self) -> str:
        return str(self.path)

    def __str__(self) -> str:
        return str(self.path)


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[list[float]] = []
    for start, end in sorted(intervals):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    return [(s, e) for s, e in merged]


def _length(intervals: list[tuple[float, float]]) -> float:
    return sum(e - s for s, e in _union(intervals))


def _intersection(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    total = 0.0
    for s1, e1 in _union(a):
        for s2, e2 in _union(b):
            total += max(0.0, min(e1, e2) - max(s1, s2))
    return total


def _layout(ops: Sequence[Op], start: float, rng: random.Random, noise: float, gap: float):
    """Place one step's ops in time; return rows and the end of the step."""
    clock, comm_free, rows = start, start, []
    last_compute_start = start
    for op in ops:
        dur = round(op.us * (rng.lognormvariate(0.0, noise) if noise else 1.0), 3)
        if isinstance(op, Kernel):
            begin = last_compute_start if op.beside else clock
            if not op.beside:
                last_compute_start = begin
                clock = begin + dur + gap
            rows.append({"op": op, "start": begin, "dur": dur, "comm": False})
        else:
            begin = max(clock, comm_free)
            comm_free = begin + dur
            if op.exposed:
                clock = comm_free + gap
            rows.append({"op": op, "start": begin, "dur": dur, "comm": True})
    end = max(r["start"] + r["dur"] for r in rows)
    return rows, end


def _figures(step: int, rows: list[dict], start: float, end: float) -> dict[str, float]:
    compute = [(r["start"], r["start"] + r["dur"]) for r in rows if not r["comm"]]
    comm = [(r["start"], r["start"] + r["dur"]) for r in rows if r["comm"]]
    computing, communication = _length(compute), _length(comm)
    overlapped = _intersection(compute, comm)
    not_overlapped = communication - overlapped
    stage = end - start
    free = stage - _length(compute + comm)
    return {"Step": step, "Computing": computing, "Communication(Not Overlapped)": not_overlapped,
            "Overlapped": overlapped, "Communication": communication, "Free": free,
            "Stage": stage, "Bubble": 0.0,
            "Communication(Not Overlapped and Exclude Receive)": not_overlapped,
            "Preparing": 100.0}


def _kernel_line(row: dict, step: int, name: str, level0: bool, task_id: int) -> list[str]:
    op = row["op"]
    start, dur = f"{row['start']:.3f}\t", f"{row['dur']:.3f}"
    if row["comm"]:
        op_type, core, shapes = f"hcom_{op.kind}_", "HCCL", "N/A"
    else:
        op_type, core, shapes = op.type, op.core, op.shapes or "N/A"
    if level0:
        return [str(step), name, "N/A", "N/A", start, dur, "0", "0"]
    dtypes = "N/A" if shapes == "N/A" else ";".join(["DT_BF16"] * (shapes.count(";") + 1))
    quoted = shapes if shapes == "N/A" else f'"{shapes}"'  # triple quotes once csv-written
    return [str(step), "4294967295", str(task_id), "N/A" if row["comm"] else "2", name,
            op_type, "dynamic", core, start, dur, "0", "24", "0", "NO", quoted, dtypes, "ND",
            quoted, dtypes, "ND", "N/A"]


def _comm_record(row: dict) -> dict:
    elapse = row["dur"] / 1000.0
    transit, wait = elapse * 0.6, elapse * 0.3
    links = {link: {"Transit Size(MB)": 0, "Transit Time(ms)": 0, "Bandwidth(GB/s)": 0,
                    "Large Packet Ratio": 0, "Size Distribution": {}}
             for link in ("RDMA", "HCCS", "PCIE", "SDMA", "SIO")}
    for link in ("HCCS", "SDMA"):
        links[link] = {"Transit Size(MB)": 64.0, "Transit Time(ms)": transit,
                       "Bandwidth(GB/s)": round(64.0 / 1024 / transit * 1000, 4) if transit
                       else 0, "Large Packet Ratio": 0.0, "Size Distribution": {}}
    return {"Communication Time Info": {
        "Start Timestamp(us)": row["start"], "Elapse Time(ms)": elapse,
        "Transit Time(ms)": transit, "Wait Time(ms)": wait,
        "Synchronization Time(ms)": wait * 0.9, "Idle Time(ms)": elapse - transit - wait,
        "Wait Time Ratio": 0.3333, "Synchronization Time Ratio": 0.3103},
        "Communication Bandwidth Info": links}


def write_profile(root: Path, label: str, schedule: Schedule, *, ranks: Sequence[int] = (0,),
                  steps: Sequence[int] = (1, 2, 3), noise: float = 0.0, seed: int = 0,
                  level0: bool = False, communication_json: bool = True,
                  step_trace: bool = True, gap_us: float = GAP_US) -> Built:
    """Write ``root/label`` (one ``*_ascend_pt`` per rank) and return it with its figures.

    ``schedule`` is a list of ops run in every step on every rank, or a function
    ``(rank, step) -> ops``.
    """
    run_dir = Path(root) / label
    built = Built(run_dir)
    for rank in ranks:
        rng = random.Random(seed * 1000 + rank)
        rank_dir = run_dir / f"node0_{4000 + rank}_20250109171251{rank:03d}_ascend_pt"
        out = rank_dir / "ASCEND_PROFILER_OUTPUT"
        out.mkdir(parents=True, exist_ok=True)
        clock, lines, comm_steps, comm_index = T0_US + rank * 0.5, [], {}, 0
        for step in steps:
            ops = schedule(rank, step) if callable(schedule) else schedule
            rows, end = _layout(ops, clock, rng, noise, gap_us)
            built.figures[(rank, step)] = _figures(step, rows, clock, end)
            for row in rows:
                if row["comm"]:
                    name = f"hcom_{row['op'].kind}__{586 + rank}_{comm_index}_1"
                    comm_index += 1
                    collective = comm_steps.setdefault(f"step{step}", {"p2p": {},
                                                                       "collective": {}})
                    collective["collective"][f"{name}@{row['op'].group}"] = _comm_record(row)
                else:
                    name = row["op"].name
                lines.append(_kernel_line(row, step, name, level0, 11000 + len(lines)))
            clock = end + STEP_GAP_US
        with open(out / "kernel_details.csv", "w", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\r\n")
            writer.writerow(HEADER_LEVEL0 if level0 else HEADER_LEVEL1)
            writer.writerows(lines)
        if step_trace:
            with open(out / "step_trace_time.csv", "w", newline="") as handle:
                writer = csv.writer(handle, lineterminator="\r\n")
                writer.writerow(STEP_HEADER)
                for step in steps:
                    figures = built.figures[(rank, step)]
                    writer.writerow([step, *(f"{figures[c]:.3f}" for c in STEP_HEADER[1:])])
        if communication_json and comm_steps:
            (out / "communication.json").write_text(json.dumps(comm_steps, indent=1))
        info = {"config": {"experimental_config": {
            "_profiler_level": "Level0" if level0 else "Level1"}}, "rank_id": rank}
        (rank_dir / f"profiler_info_{rank}.json").write_text(json.dumps(info, indent=1))
    return built


def texts(notes) -> list[str]:
    """The sentences of a sequence of Notes (what the report shows)."""
    return [note.text for note in notes]


def memory_report(base, new, thresholds=None, **copies):
    """Compare two MemoryData as the pipeline does: the report's memory section.

    ``compare_memory``, then the findings stage's ``memory-growth`` and memory sentence,
    typed by the report stage; ``copies`` are ``base_copies``/``new_copies``.
    """
    from cann_diff.compare.memory import compare_memory
    from cann_diff.findings.memory_growth import memory_growth, memory_sentence
    from cann_diff.report.build import memory_section
    from cann_diff.settings import Thresholds

    thresholds = thresholds or Thresholds()
    compared = compare_memory(base, new, thresholds, **copies)
    return memory_section(compared, memory_growth(compared, thresholds),
                          memory_sentence(compared, thresholds))


# The tables a crafted torch_npu db export needs for its kernels (docs/formats.md §7), and
# those its host side adds: one text, so that the tests that write dbs agree on it.
DB_KERNEL_TABLES = """
    CREATE TABLE STRING_IDS(id INTEGER PRIMARY KEY, value TEXT);
    CREATE TABLE TASK(startNs INTEGER, endNs INTEGER, deviceId INTEGER,
                      connectionId INTEGER, globalTaskId INTEGER);
    CREATE TABLE COMPUTE_TASK_INFO(name INTEGER, globalTaskId INTEGER,
                      taskType INTEGER, opType INTEGER);
    CREATE TABLE STEP_TIME(id INTEGER, startNs INTEGER, endNs INTEGER);
"""
DB_HOST_TABLES = """
    CREATE TABLE PYTORCH_API(startNs TEXT, endNs TEXT, globalTid INTEGER,
                      connectionId INTEGER, name INTEGER, sequenceNumber INTEGER,
                      type INTEGER);
    CREATE TABLE CONNECTION_IDS(id INTEGER, connectionId INTEGER);
    CREATE TABLE ENUM_API_TYPE(id INTEGER, name TEXT);
"""
