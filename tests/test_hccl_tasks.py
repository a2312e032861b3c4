"""HCCL task-level data → one row per collective instance (Run.collectives).

Crafted traces and dbs are written here from one description, with the figures worked
out by hand in the comments (docs/formats.md §14 holds the definitions: transfer = union
over planes of data-moving tasks, wait = union of Notify_Wait less the transfer union,
idle = no task on any plane, other = the rest, sync wait = wait before the first transfer
over a link). The real-data figures at the end were computed by a separate script with
``json`` / ``sqlite3`` only (the same definitions, plain Python lists of intervals), never
with the code under test; communication.json, the profiler's own file, is a second
witness where it looks at the same single plane.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REALDATA, needs_realdata
from profiles import DB_KERNEL_TABLES

from cann_diff.errors import InputError
from cann_diff.read import load_run
from cann_diff.read.formats import hccl_tasks, host_links, torch_text, trace_events, trace_select
from cann_diff.read.formats.host_links import LinkScan, read_trace_side
from cann_diff.read.formats.trace_events import scan_trace
from cann_diff.read.reduce import ranks as rank_reduce
from cann_diff.read.reduce.collectives import collective_frames
from cann_diff.schema import COLLECTIVE_COLUMNS, COLLECTIVE_LINK_COLUMNS

T0 = 1_736_413_971_000_000_000  # ns, a 2025 local timestamp
MS = 1_000_000
HCCL, HW, PY = 10, 20, 30
OUT = "ASCEND_PROFILER_OUTPUT"


def us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def span(start: int, end: int) -> dict:
    return {"ts": us(start), "dur": (end - start) / 1000}


def task(plane: int, kind: str, start: int, end: int, size: int = 0,
         link: str = "INVALID_TYPE") -> dict:
    """A plane task event as msprof writes it (times in ns)."""
    return {"name": kind, "pid": HCCL, "tid": plane + 1, **span(start, end),
            "args": {"notify_id": "18446744073709551615", "duration estimated(us)": 1.0,
                     "stream id": 4, "task id": 807, "context id": 1, "task type": kind,
                     "src rank": 0, "dst rank": 1,
                     "transport type": "LOCAL" if kind == "Notify_Wait" else "SDMA",
                     "size(Byte)": size, "data type": "INVALID_TYPE", "link type": link,
                     "bandwidth(GB/s)": 0.0, "model id": 4294967295}, "ph": "X"}


def hcom(name: str, start: int, end: int, algorithm: str = "MESH-RING") -> dict:
    return {"name": name, "pid": HCCL, "tid": 0, **span(start, end),
            "args": {"connection_id": 1, "model id": 4294967295, "data_type": "FP32",
                     "alg_type": algorithm, "count": 4097000}, "ph": "X"}


def kernel(start: int, end: int, name: str = "aclnnAdd_AddAiCore_Add") -> dict:
    return {"name": name, "pid": HW, "tid": 2, **span(start, end),
            "args": {"Task Type": "AI_CORE"}, "ph": "X"}


def step(number: int, start: int, end: int) -> dict:
    return {"ph": "X", "name": f"ProfilerStep#{number}", "pid": PY, "tid": 7,
            "cat": "cpu_op", **span(start, end), "args": {}}


def metadata(process: str = "HCCL", planes: int = 8) -> list[dict]:
    names = [(PY, "Python"), (HW, "Ascend Hardware"), (HCCL, process)]
    events = [{"name": "process_name", "pid": pid, "tid": 0, "args": {"name": name},
               "ph": "M"} for pid, name in names]
    events.append({"name": "thread_name", "pid": HCCL, "tid": 0,
                   "args": {"name": "Group 0 Communication"}, "ph": "M"})
    events += [{"name": "thread_name", "pid": HCCL, "tid": p + 1,
                "args": {"name": f"Plane {p}"}, "ph": "M"} for p in range(planes)]
    return events


def write_trace_rank(root: Path, rank: int, events: list[dict]) -> Path:
    """A trace-only rank (``rank<r>_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json``)."""
    folder = root / f"rank{rank}_ascend_pt"
    (folder / OUT).mkdir(parents=True)
    (folder / OUT / "trace_view.json").write_text(json.dumps(events))
    (folder / f"profiler_info_{rank}.json").write_text(json.dumps({"rank_id": rank}))
    return folder


# ---------------------------------------------------------------- one op on eight planes

# One AllReduce from 1 ms to 101 ms (times below from the op's start). Plane 0 copies over
# HCCS 10–30 ms and reduces 60–70 ms, plane 1 copies 20–40 ms (1 MB each); plane 3 waits
# 0–50 ms; plane 5 records 80–80.010 ms; planes 2, 4, 6, 7 record 99–99.002 ms.
#   transfer = |[10,40] ∪ [60,70]| = 40 ms
#   wait     = |[0,50]| − |[0,50] ∩ transfer| = 50 − 30 = 20 ms (not idle: a plane waits)
#   busy     = |[0,50] ∪ [60,70] ∪ [80,80.01] ∪ [99,99.002]| = 60.012 ms → idle 39.988 ms
#   other    = 100 − 40 − 20 − 39.988 = 0.012 ms (the records)
#   sync     = wait before the first link transfer (10 ms) = 10 ms
#   critical plane 3 (50 ms); 8 planes; 3 MB; link busy Σ planes = 30 + 20 = 50 ms
OP_START = T0 + 1 * MS
PLANE_TASKS = [(0, "Memcpy", 10, 30, 1_000_000, "HCCS"),
               (0, "Reduce_Inline", 60, 70, 1_000_000, "HCCS"),
               (1, "Memcpy", 20, 40, 1_000_000, "HCCS"),
               (3, "Notify_Wait", 0, 50, 0, "INVALID_TYPE"),
               (5, "Notify_Record", 80, 80.010, 0, "INVALID_TYPE"),
               *((p, "Notify_Record", 99, 99.002, 0, "INVALID_TYPE") for p in (2, 4, 6, 7))]
EIGHT_PLANES = {"elapsed_us": 100_000.0, "transfer_us": 40_000.0, "wait_us": 20_000.0,
                "idle_us": 39_988.0, "other_us": 12.0, "sync_wait_us": 10_000.0,
                "planes": 8, "critical_plane": 3, "critical_wait_us": 50_000.0,
                "bytes": 3_000_000, "link_transfer_us": 40_000.0, "link_busy_us": 50_000.0,
                "link_bytes": 3_000_000}


def _ns(ms: float) -> int:
    return OP_START + round(ms * MS)


def eight_plane_events(process: str = "HCCL") -> list[dict]:
    return [*metadata(process), step(1, T0, T0 + 110 * MS), kernel(T0, T0 + MS // 2),
            hcom("hcom_allReduce__586_0_1", OP_START, OP_START + 100 * MS),
            *(task(p, kind, _ns(a), _ns(b), size, link) for p, kind, a, b, size, link
              in PLANE_TASKS),
            kernel(T0 + 102 * MS, T0 + 103 * MS)]


def _row(run, rank: int = 0, op: int = 0) -> dict:
    frame = run.collectives
    return frame[(frame["rank"] == rank) & (frame["op"] == op)].iloc[0].to_dict()


def _check(row: dict, expected: dict, rel: float = 1e-9) -> None:
    for key, value in expected.items():
        assert row[key] == pytest.approx(value, rel=rel, abs=1e-6), key


@pytest.mark.parametrize("process", ["HCCL", "Communication"])
def test_a_wait_on_one_plane_is_wait_not_idle(tmp_path, process):
    write_trace_rank(tmp_path / "run", 0, eight_plane_events(process))
    run = load_run(tmp_path / "run")
    row = _row(run)
    _check(row, EIGHT_PLANES)
    assert row["elapsed_us"] == pytest.approx(row["transfer_us"] + row["wait_us"]
                                              + row["idle_us"] + row["other_us"])
    assert (row["step"], row["comm_type"], row["seq"], row["algorithm"], row["group"]) == \
        (1, "AllReduce", 0, "MESH-RING", "Group 0")
    assert row["first_transfer_ns"] == _ns(10)
    assert run.collectives_source == {0: "trace_view.json: HCCL plane tasks"}
    links = run.collective_links
    assert links[["link_type", "transfer_us", "bytes"]].values.tolist() == \
        [["HCCS", 40_000.0, 3_000_000]]
    assert list(run.collectives.columns) == list(COLLECTIVE_COLUMNS)
    assert {c: str(t) for c, t in run.collectives.dtypes.items()} == COLLECTIVE_COLUMNS
    assert {c: str(t) for c, t in links.dtypes.items()} == COLLECTIVE_LINK_COLUMNS


def test_tasks_beside_kernel_details_come_from_the_one_read_of_the_trace(tmp_path):
    """A text export: the kernel rows from kernel_details.csv, the tasks from the trace."""
    folder = write_trace_rank(tmp_path / "run", 0, eight_plane_events())
    header = ["Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)"]
    rows = [["1", "aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE", us(T0), "500.0"],
            ["1", "hcom_allReduce__586_0_1", "hcom_allReduce_", "HCCL", us(OP_START),
             "100000.0"],
            ["1", "aclnnAdd_AddAiCore_Add", "Add", "AI_VECTOR_CORE", us(T0 + 102 * MS),
             "1000.0"]]
    with open(folder / OUT / "kernel_details.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([header, *rows])
    run = load_run(tmp_path / "run")
    assert run.meta.format == torch_text.FORMAT
    _check(_row(run), EIGHT_PLANES)


# ---------------------------------------------------------------- a late rank

# Two ranks, three AllReduces each (op i at t_i = 10 + 30 i ms). Rank 1 arrives 10 ms late
# every time: rank 0's op runs t_i … t_i+12, rank 1's t_i+10 … t_i+12. Both record, wait
# for the peer until t_i+10.2 and then copy over HCCS until t_i+12. Rank 0 waits
# 10.19 ms before its copy (its record takes 0.01 ms), rank 1 0.19 ms: sync waits differ
# by exactly 10 ms, and rank 1's ops start 10 ms later.
def late_rank_events(rank: int) -> list[dict]:
    events = [*metadata(planes=1), step(1, T0, T0 + 100 * MS)]
    for i in range(3):
        t = T0 + (10 + 30 * i) * MS
        start = t + (10 * MS if rank else 0)
        events += [kernel(t - 5 * MS, t - 4 * MS),
                   hcom(f"hcom_allReduce__586_{i}_1", start, t + 12 * MS, "RING-RING"),
                   task(0, "Notify_Record", start, start + MS // 100),
                   task(0, "Notify_Wait", start + MS // 100, t + 10_200_000),
                   task(0, "Memcpy", t + 10_200_000, t + 12 * MS, 2_064_384, "HCCS")]
    return events


def test_a_rank_that_arrives_late_waits_less(tmp_path):
    for rank in (0, 1):
        write_trace_rank(tmp_path / "run", rank, late_rank_events(rank))
    frame = load_run(tmp_path / "run").collectives.set_index(["seq", "rank"])
    sync = frame["sync_wait_us"].unstack()
    start = frame["start_ns"].unstack()
    assert sync[0].tolist() == pytest.approx([10_190.0] * 3)
    assert sync[1].tolist() == pytest.approx([190.0] * 3)
    assert (sync[0] - sync[1]).tolist() == pytest.approx([10_000.0] * 3)
    assert (start[1] - start[0]).tolist() == [10 * MS] * 3
    assert frame["transfer_us"].tolist() == pytest.approx([1_800.0] * 6)
    assert set(frame["planes"]) == {1} and set(frame["algorithm"]) == {"RING-RING"}


# ---------------------------------------------------------------- RDMA, steps

def test_an_rdma_send_counts_until_the_wait_that_completes_it(tmp_path):
    """A 4 KB RDMA send 0–1 ms, its notify send 1–1.1 ms, the wait for the peer 1.1–5 ms
    on one plane of a 6 ms op: the data is on the wire until the wait ends, so transfer
    0–5 ms = 5 ms, no wait, idle 1 ms."""
    events = [*metadata(planes=1), step(1, T0, T0 + 20 * MS), kernel(T0, T0 + MS // 2),
              hcom("hcom_allReduce__1_0_1", OP_START, OP_START + 6 * MS),
              task(0, "RDMASend", _ns(0), _ns(1), 4096, "ROCE"),
              task(0, "RDMASend", _ns(1), _ns(1.1), 0, "ROCE"),
              task(0, "Notify_Wait", _ns(1.1), _ns(5))]
    write_trace_rank(tmp_path / "run", 0, events)
    _check(_row(load_run(tmp_path / "run")),
           {"transfer_us": 5_000.0, "wait_us": 0.0, "idle_us": 1_000.0, "other_us": 0.0,
            "sync_wait_us": 0.0, "bytes": 4096, "link_busy_us": 5_000.0})


def test_steps_choose_collectives_as_they_choose_rows(tmp_path):
    """Two steps of one op each: --steps 2 keeps the second, still numbered seq 1."""
    events = [*metadata(planes=1)]
    for number in (1, 2):
        t = T0 + (number - 1) * 50 * MS
        events += [step(number, t, t + 40 * MS), kernel(t, t + MS),
                   hcom(f"hcom_allReduce__1_{number}_1", t + 2 * MS, t + 12 * MS),
                   task(0, "Memcpy", t + 2 * MS, t + 3 * MS, 8, "HCCS")]
    write_trace_rank(tmp_path / "run", 0, events)
    every = load_run(tmp_path / "run")
    assert every.collectives["step"].tolist() == [1, 2]
    chosen = load_run(tmp_path / "run", steps=[(2, 2)])
    assert chosen.collectives[["step", "seq"]].values.tolist() == [[2, 1]]
    assert chosen.collective_links["step"].tolist() == [2]


def test_a_profile_without_tasks_has_no_collectives(tmp_path):
    events = [e for e in eight_plane_events() if "link type" not in e.get("args", {})]
    write_trace_rank(tmp_path / "run", 0, events)
    run = load_run(tmp_path / "run")
    assert run.collectives is None and run.collective_links is None
    assert run.collectives_source == {}


# ---------------------------------------------------------------- the same tasks as a db

LINKS = {0: "ON_CHIP", 1: "HCCS", 2: "PCIE", 3: "ROCE", 65535: "INVALID_TYPE"}


def write_db_rank(root: Path, rank: int, kernels: list[tuple[int, int]],
                  ops: list[tuple[str, int, int, str]],
                  tasks: list[tuple[int, int, int, int, str, int, str]],
                  steps: list[tuple[int, int, int]]) -> Path:
    """A db rank: ``kernels`` (start, end), ``ops`` (name, start, end, algorithm),
    ``tasks`` (op index, plane, start, end, task type, size, link type), ``steps``."""
    folder = root / f"rank{rank}_ascend_pt"
    (folder / OUT).mkdir(parents=True)
    (folder / f"profiler_info_{rank}.json").write_text(json.dumps({"rank_id": rank}))
    strings: dict[str, int] = {}

    def sid(text: str) -> int:
        return strings.setdefault(text, len(strings) + 1)

    with sqlite3.connect(folder / OUT / f"ascend_pytorch_profiler_{rank}.db") as conn:
        conn.executescript(DB_KERNEL_TABLES + """
            CREATE TABLE COMMUNICATION_OP(opName INTEGER, startNs INTEGER, endNs INTEGER,
                              connectionId INTEGER, groupName INTEGER, opId INTEGER,
                              algType INTEGER, opType INTEGER);
            CREATE TABLE COMMUNICATION_TASK_INFO(name INTEGER, globalTaskId INTEGER,
                              taskType INTEGER, planeId INTEGER, groupName INTEGER,
                              transportType INTEGER, size INTEGER, linkType INTEGER,
                              opId INTEGER, rdmaType INTEGER, srcRank INTEGER,
                              dstRank INTEGER);
            CREATE TABLE ENUM_HCCL_LINK_TYPE(id INTEGER, name TEXT);
        """)
        conn.executemany("INSERT INTO ENUM_HCCL_LINK_TYPE VALUES (?, ?)", LINKS.items())
        link_id = {name: code for code, name in LINKS.items()}
        task_id = 0
        for start, end in kernels:
            task_id += 1
            conn.execute("INSERT INTO TASK VALUES (?, ?, 0, NULL, ?)", (start, end, task_id))
            conn.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (?, ?, ?, ?)",
                         (sid("aclnnAdd_AddAiCore_Add"), task_id, sid("AI_CORE"), sid("Add")))
        for number, (name, start, end, algorithm) in enumerate(ops, 1):
            conn.execute("INSERT INTO COMMUNICATION_OP VALUES (?, ?, ?, NULL, ?, ?, ?, ?)",
                         (sid(name), start, end, sid("group"), number, sid(algorithm),
                          sid("hcom_allReduce_")))
        for op, plane, start, end, kind, size, link in tasks:
            task_id += 1
            conn.execute("INSERT INTO TASK VALUES (?, ?, 0, NULL, ?)", (start, end, task_id))
            # between ranks 0 and 1, as ``task`` writes them in a trace
            conn.execute("INSERT INTO COMMUNICATION_TASK_INFO VALUES (?, ?, ?, ?, ?, ?, ?, "
                         "?, ?, 65535, 0, 1)", (sid(ops[op][0]), task_id, sid(kind), plane,
                                          sid("group"), 2 if kind == "Notify_Wait" else 0,
                                          size, link_id[link], op + 1))
        conn.executemany("INSERT INTO STEP_TIME VALUES (?, ?, ?)", steps)
        conn.executemany("INSERT INTO STRING_IDS VALUES (?, ?)",
                         [(i, text) for text, i in strings.items()])
    return folder


def test_the_same_tasks_as_trace_and_as_db_give_the_same_figures(tmp_path):
    write_trace_rank(tmp_path / "trace", 0, eight_plane_events())
    write_db_rank(tmp_path / "db", 0, [(T0, T0 + MS // 2), (T0 + 102 * MS, T0 + 103 * MS)],
                  [("hcom_allReduce__586_0_1", OP_START, OP_START + 100 * MS, "MESH-RING")],
                  [(0, p, _ns(a), _ns(b), kind, size, link)
                   for p, kind, a, b, size, link in PLANE_TASKS],
                  [(1, T0, T0 + 110 * MS)])
    trace, db = load_run(tmp_path / "trace"), load_run(tmp_path / "db")
    assert db.collectives_source == {0: "ascend_pytorch_profiler_0.db: "
                                        "COMMUNICATION_TASK_INFO + TASK"}
    _check(_row(db), EIGHT_PLANES)
    numbers = [c for c, t in COLLECTIVE_COLUMNS.items() if t in ("float64", "int64", "Int64")
               and c not in ("rank",)]
    a = trace.collectives[numbers].astype(float).to_numpy()
    b = db.collectives[numbers].astype(float).to_numpy()
    assert np.allclose(a, b, rtol=0.01)
    assert db.collectives["algorithm"].tolist() == ["MESH-RING"]
    pd.testing.assert_frame_equal(
        trace.collective_links.drop(columns="rank"), db.collective_links.drop(columns="rank"),
        check_categorical=False)


# ---------------------------------------------------------------- small ranks, stacked

def _text_rank(root: Path, rank: int) -> None:
    """A small text export with its step figures and a trace beside holding only tasks."""
    folder = write_trace_rank(root, rank, late_rank_events(rank))
    header = ["Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)"]
    rows = []
    for i in range(3):
        t = T0 + (10 + 30 * i) * MS
        start = t + (10 * MS if rank else 0)
        rows += [["1", "aclnnAdd_AddAiCore_Add", "Add", "AI_CORE", us(t - 5 * MS), "1000.0"],
                 ["1", f"hcom_allReduce__586_{i}_1", "hcom_allReduce_", "HCCL", us(start),
                  f"{(t + 12 * MS - start) / 1000:.3f}"]]
    with open(folder / OUT / "kernel_details.csv", "w", newline="") as handle:
        csv.writer(handle).writerows([header, *rows])
    (folder / OUT / "step_trace_time.csv").write_text(
        "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,"
        "Bubble,Communication(Not Overlapped and Exclude Receive),Preparing\n"
        "1,3000,36000,0,36000,40000,79000,0,36000,0\n")


def test_stacked_small_ranks_get_what_they_get_alone(tmp_path):
    for rank in (0, 1):
        _text_rank(tmp_path / "run", rank)
    plan = rank_reduce.RankPlan()
    datas = [torch_text.read_rank(p) for p in sorted((tmp_path / "run").iterdir())]
    stacked = rank_reduce.reduce_ranks(datas, plan)
    assert all(r.share is not None for r in stacked)  # they were stacked
    alone = [rank_reduce.reduce_kernels(torch_text.read_rank(p), plan)
             for p in sorted((tmp_path / "run").iterdir())]
    for a, b in zip(stacked, alone):
        pd.testing.assert_frame_equal(a.collectives, b.collectives)
        pd.testing.assert_frame_equal(a.collective_links, b.collective_links)
        assert a.collectives_source == b.collectives_source == \
            "trace_view.json: HCCL plane tasks"
    sync = [r.collectives["sync_wait_us"].tolist() for r in stacked]
    assert sync == [pytest.approx([10_190.0] * 3), pytest.approx([190.0] * 3)]


def test_tasks_outside_every_op_are_left_out(tmp_path):
    """Tasks outside every op (a window no op-level event covers) are left out."""
    events = eight_plane_events() + [task(0, "Memcpy", T0 + 105 * MS, T0 + 106 * MS, 8, "HCCS")]
    write_trace_rank(tmp_path / "run", 0, events)
    side = read_trace_side(tmp_path / "run" / "rank0_ascend_pt" / OUT / "trace_view.json")
    frames = collective_frames(side.tasks, None, False)
    _check(frames.collectives.iloc[0].to_dict(), EIGHT_PLANES)


# ---------------------------------------------------------------- task events as bytes

# Beside a kernel_details.csv the task events msprof writes are taken from their bytes
# (hccl_tasks.plain_task_columns); any other form of a task event is parsed. Each variant
# below sits among plain events; the full ijson stream of the trace is the reference.
PLAIN = json.dumps(task(2, "Memcpy", OP_START + 10, OP_START + 2_010, 2_064_384, "HCCS"))
TASK_VARIANTS = {
    "plain": PLAIN,
    "an escape": PLAIN.replace('"name": "Memcpy"', r'"name": "Mem\/cpy"'),
    # parsed as a wanted event (a \u escape may spell any string): never offered as bytes
    "a u escape": PLAIN.replace('"name": "Memcpy"', r'"name": "Mem\u0063py"'),
    "no blanks": json.dumps(json.loads(PLAIN), separators=(",", ":")),
    "blank before a colon": PLAIN.replace('"pid":', '"pid" :'),
    "no task type": PLAIN.replace('"task type": "Memcpy", ', ""),
    "numeric link type": PLAIN.replace('"link type": "HCCS"', '"link type": 1'),
    "size as text": PLAIN.replace('"size(Byte)": 2064384', '"size(Byte)": "2064384"'),
    "size last": PLAIN.replace('"size(Byte)": 2064384, ', "").replace(
        '"model id": 4294967295}', '"model id": 4294967295, "size(Byte)": 7}'),
    "link type last": PLAIN.replace('"link type": "HCCS", ', "").replace(
        '"model id": 4294967295}', '"model id": 4294967295, "link type": "SIO"}'),
    "exponents": PLAIN.replace('"dur": 2.0', '"dur": 2.5e-05').replace(
        '"bandwidth(GB/s)": 0.0', '"bandwidth(GB/s)": 1E+99'),
    "a 20-digit number": PLAIN.replace("4294967295", "18446744073709551615"),
    "a negative pid": PLAIN.replace(f'"pid": {HCCL}', '"pid": -3'),
    "text pid": PLAIN.replace(f'"pid": {HCCL}', f'"pid": "{HCCL}"'),
    "numeric ts": PLAIN.replace(f'"ts": "{us(OP_START + 10)}"', f'"ts": {us(OP_START + 10)}'),
    "non-ASCII": PLAIN.replace('"data type": "INVALID_TYPE"', '"data type": "类型"'),
    "link type twice": PLAIN.replace('"link type": "HCCS"',
                                     '"link type": "HCCS", "link type": "ROCE"'),
    "size twice": PLAIN.replace('"model id": 4294967295}',
                                '"model id": 4294967295, "size(Byte)": 3}'),
    "a key spelled as a value": PLAIN.replace('"data type": "INVALID_TYPE"',
                                              '"data type": "link type"'),
    "a category": PLAIN.replace('"ph": "X"}', '"ph": "X", "cat": "hccl"}'),
    "ph B": PLAIN.replace('"ph": "X"', '"ph": "B"'),
    "an hcom name": PLAIN.replace('"name": "Memcpy"', '"name": "hcom_memcpy_"'),
    "empty name": PLAIN.replace('"name": "Memcpy"', '"name": ""'),
}

# The variants whose batches are all taken from their bytes.
PLAIN_VARIANTS = ("plain", "a u escape", "exponents", "size last", "link type last", "empty name",
                  "a negative pid", "a key spelled as a value")


def _bytes_trace(path: Path, variant: str) -> Path:
    """Plain task events on plane 1 around one event of ``variant`` on plane 2."""
    plain = [json.dumps(task(1, kind, _ns(2 * i), _ns(2 * i + 1), 4 * i, "HCCS"))
             for i, kind in enumerate(["Notify_Record", "Memcpy", "Notify_Wait"] * 4)]
    lines = [*map(json.dumps, [*metadata(), step(1, T0, T0 + 110 * MS),
                               hcom("hcom_allReduce__586_0_1", OP_START,
                                    OP_START + 100 * MS)]),
             *plain[:6], TASK_VARIANTS[variant], *plain[6:]]
    path.write_text("[\n" + ",\n".join(lines) + "\n]\n", encoding="utf-8")
    return path


def _in_order(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(list(frame.columns), kind="stable").reset_index(drop=True)


def _full_stream_tasks(trace: Path):
    return scan_trace(trace, LinkScan(trace, kernels=False)).collective_tasks()


@pytest.mark.parametrize("block", [97, 1 << 20])
@pytest.mark.parametrize("variant", sorted(TASK_VARIANTS))
def test_task_events_from_their_bytes_are_the_parsed_ones(tmp_path, monkeypatch, variant,
                                                          block):
    monkeypatch.setattr(trace_select, "SCAN_BLOCK", block)
    monkeypatch.setattr(trace_events, "CHUNK", block)
    trace = _bytes_trace(tmp_path / "trace_view.json", variant)
    taken = []

    def spy(*args):
        columns = hccl_tasks.plain_task_columns(*args)
        taken.append(columns is not None)
        return columns

    monkeypatch.setattr(host_links, "plain_task_columns", spy)
    got, expected = read_trace_side(trace).tasks, _full_stream_tasks(trace)
    pd.testing.assert_frame_equal(got.ops, expected.ops)
    # in file order, but for the events of one block parsed for other reasons (a \\u)
    pd.testing.assert_frame_equal(_in_order(got.tasks), _in_order(expected.tasks),
                                  check_categorical=variant != "a u escape")
    if variant in PLAIN_VARIANTS:
        assert all(taken)
    else:  # in small blocks the plain events around it still are
        assert any(taken) == (block < len(PLAIN)) and not all(taken)


def test_a_plain_looking_event_that_is_not_json_is_refused_alike(tmp_path):
    """``"pid": 010`` is no JSON number: the full stream says so, as it did before."""
    broken = PLAIN.replace(f'"pid": {HCCL}', '"pid": 010')
    trace = tmp_path / "trace_view.json"
    trace.write_text("[\n" + ",\n".join([*map(json.dumps, metadata()), PLAIN, broken])
                     + "\n]\n")
    with pytest.raises(InputError) as full:
        _full_stream_tasks(trace)
    with pytest.raises(InputError) as ours:
        read_trace_side(trace)
    assert str(ours.value) == str(full.value)


# ---------------------------------------------------------------- real data

PYTORCH = "test/data/pytorch"
OLD = REALDATA / "Ascend__msinsight@c1e639ee2" / PYTORCH  # 2024, Ascend910A
NEW = REALDATA / "Ascend__msinsight" / PYTORCH  # 2025, Ascend910B

# Per (rank, op): elapsed, transfer, wait, idle, sync wait, critical plane, its wait (µs),
# by the separate json script on trace_view.json.
TEXT_OLD = {(0, 0): (53398.483, 476.780, 52219.419, 695.504, 49458.704, 0, 52219.419),
            (0, 3): (2180.142, 819.436, 1344.503, 9.363, 0.020, 0, 1344.503),
            (1, 0): (37702.757, 720.262, 36315.112, 660.643, 27555.405, 0, 36315.112)}
TEXT_NEW = {(0, 0): (79089.520, 274.726, 78793.754, 12.300, 78767.594, 5, 78770.034),
            (0, 2): (2402.388, 2324.967, 60.280, 12.401, 16.700, 1, 188.424),
            (1, 0): (73475.168, 276.085, 73180.182, 14.021, 73150.022, 4, 73168.702)}
FIELDS = ("elapsed_us", "transfer_us", "wait_us", "idle_us", "sync_wait_us",
          "critical_plane", "critical_wait_us", "link_busy_us")


def _per_rank_sum(run, column: str) -> list[float]:
    return run.collectives.groupby("rank")[column].sum().tolist()


@pytest.mark.slow
@needs_realdata
def test_real_text_pair_collectives():
    old, new = load_run(OLD / "text/level1"), load_run(NEW / "text/level1")
    for run, expected in ((old, TEXT_OLD), (new, TEXT_NEW)):
        for (rank, op), values in expected.items():
            row = _row(run, rank, op)
            assert [row[f] for f in FIELDS[:7]] == pytest.approx(values, abs=0.002), \
                (rank, op)
    # old rank 0, AllReduce #0: its link time is its one HCCS transfer union
    assert _row(old, 0, 0)["link_busy_us"] == pytest.approx(354.28, abs=0.002)
    # new rank 0, AllReduce #0: one plane (5) waits 78.76 ms: wait, not idle
    assert _row(new, 0, 0)["wait_us"] >= 75_000 and _row(new, 0, 0)["idle_us"] < 20
    assert set(old.collectives["planes"]) == {1} and set(new.collectives["planes"]) == {8}
    assert set(old.collectives["algorithm"]) == {"RING-RING"}
    assert set(new.collectives["algorithm"]) == {"MESH-RING"}
    # per step: the link time (Σ over planes) grew 8.83 → 27.32 ms on rank 0, the bytes
    # moved over links 106.9 → 427.6 MB; the wall time some link moves data (the union)
    # fell: 11.02 → 4.14 ms of transfer, local copies included
    # (the script sums each plane's union over the whole step; the reduce clips each task to
    # its op's end first: a few ns apart)
    assert _per_rank_sum(old, "link_busy_us") == pytest.approx([8826.837, 11058.618], abs=0.05)
    assert _per_rank_sum(new, "link_busy_us") == pytest.approx([27315.714, 27583.976],
                                                               abs=0.05)
    assert _per_rank_sum(old, "link_bytes") == [106_925_888] * 2
    assert _per_rank_sum(new, "link_bytes") == [427_596_096] * 2
    assert _per_rank_sum(old, "transfer_us") == pytest.approx([11024.006, 13273.428], abs=0.01)
    assert _per_rank_sum(new, "transfer_us") == pytest.approx([4144.483, 4153.062], abs=0.01)
    assert set(new.collectives_source.values()) == {"trace_view.json: HCCL plane tasks"}


@pytest.mark.slow
@needs_realdata
def test_one_plane_figures_agree_with_communication_json():
    """On the 910A capture every task is on plane 0, as communication.json assumes: its
    wait and synchronization equal ours, its transit is our link transfer."""
    run = load_run(OLD / "text/level1/rank0_ascend_pt")
    info = json.loads((OLD / "text/level1/rank0_ascend_pt" / OUT / "communication.json")
                      .read_text())["step50"]["collective"]
    for name, op in info.items():
        if name.startswith("Total"):
            continue
        times = op["Communication Time Info"]
        row = run.collectives[run.collectives["op_name"] == name.split("@")[0]].iloc[0]
        assert row["wait_us"] == pytest.approx(times["Wait Time(ms)"] * 1000, abs=0.01)
        assert row["sync_wait_us"] == pytest.approx(times["Synchronization Time(ms)"] * 1000,
                                                    abs=0.01)
        assert row["link_transfer_us"] == pytest.approx(times["Transit Time(ms)"] * 1000,
                                                        abs=0.01)


# Per (rank, op) of the db exports of the same job (other captures), by the separate
# sqlite3 script: elapsed, transfer, wait, idle, sync wait, critical plane, its wait,
# link busy.
DB_OLD = {(0, 0): (11043.510, 530.977, 9897.367, 608.136, 3782.928, 0, 9897.367, 408.006),
          (1, 0): (4038.161, 738.349, 0.260, 3292.482, 0.010, 0, 0.260, 615.577)}
DB_NEW = {(0, 0): (88750.993, 277.426, 88457.447, 11.380, 88427.227, 6, 88423.547,
                   1821.901),
          (1, 0): (85233.843, 278.066, 84924.836, 22.660, 84909.476, 5, 84906.596,
                   1844.855),
          (0, 3): (8764.155, 317.486, 8403.668, 33.580, 8403.448, 6, 8400.527, 2109.022)}


@pytest.mark.slow
@needs_realdata
def test_real_db_pair_collectives():
    old, new = load_run(OLD / "db/level1"), load_run(NEW / "db/level1")
    for run, expected in ((old, DB_OLD), (new, DB_NEW)):
        for (rank, op), values in expected.items():
            row = _row(run, rank, op)
            assert [row[f] for f in FIELDS] == pytest.approx(values, abs=0.002), (rank, op)
    assert new.collectives_source[0] == ("ascend_pytorch_profiler_0.db: "
                                         "COMMUNICATION_TASK_INFO + TASK")
    assert set(old.collectives["algorithm"]) == {"RING-RING"}
    assert set(new.collectives["algorithm"]) == {"MESH-RING"}
    assert _per_rank_sum(new, "link_bytes") == [427_596_096] * 2
