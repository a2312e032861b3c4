"""Host-bound Free timed from the runtime launch; host op compilation inside the waits.

docs/formats.md §15: a device gap [g0, g1] before task k is host-bound over
[g0, min(g1, L_k)], L_k the runtime's launch of k (trace: its HostToDevice flow; db: the
CANN_API row of its connectionId), else its framework op's torch_to_npu flow;
``compile_us`` is the part of those intervals that ``aclopCompile…`` spans cover. Crafted
profiles with the answers worked out in the comments; on the real pair, oracles written
here with json / csv / sqlite3 alone, never with the code under test.
"""

from __future__ import annotations

import csv
import json
import math
import sqlite3
from collections import defaultdict
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from conftest import REALDATA, needs_realdata
from profiles import DB_HOST_TABLES, DB_KERNEL_TABLES
from test_host_time import META, OUT, at, host_op, span, us, write_trace_rank

from cann_diff.compare import HostTime
from cann_diff.findings.host_bound import host_bound
from cann_diff.read import load_run
from cann_diff.read.formats.host_links import read_trace_side
from cann_diff.read.reduce.host_time import launch_source
from cann_diff.settings import Thresholds

PY, HW, CANN = 30, 20, 40
QUEUE = 8  # the task-queue thread that launches (torch_npu's dequeue thread)

# One step, ProfilerStep#1 0–20 ms. Four kernels (ms from T0), each with the framework
# op's torch_to_npu flow (start on the Python thread) and, but k4, the runtime's
# HostToDevice flow (start on the CANN thread):
#   k1 [3, 4]    torch 2.1, runtime 2.5
#   k2 [9, 10]   torch 2.7, runtime 8.0: aclopCompileAndExecute [5.0, 8.2] (opCompile
#                [5.0, 5.5] inside it) ran before the launch
#   k3 [12, 13]  torch 10.5, runtime 12.005: after k3's start (host and device clocks
#                differ by a few µs), so the whole gap waited
#   k4 [15, 16]  torch 14.0, no runtime record: the framework op's launch times it
# and an aclopCompileAndExecute [3.2, 3.8] while k1 runs (no gap: not counted).
# Device span 3–16, busy 4: free 9 ms. Gaps: [4, 9] host-bound to 8 (4 ms); [10, 12]
# all (2 ms); [13, 15] to 14 (1 ms): host-bound 7, other 2. Compilation inside
# [4, 8] ∪ [10, 12] ∪ [13, 14]: [5, 8] = 3 ms.
# From the torch_to_npu flows alone: [4, 9] 0 (2.7 is before the gap), [10, 12] to 10.5
# (0.5), [13, 15] to 14 (1): 1.5 ms, and no compilation inside: 0.
KERNELS = [  # (start, end, torch launch, runtime launch or None)
    (3.0, 4.0, 2.1, 2.5), (9.0, 10.0, 2.7, 8.0), (12.0, 13.0, 10.5, 12.005),
    (15.0, 16.0, 14.0, None)]
COMPILES = [("AscendCL@aclopCompileAndExecute", 5.0, 8.2), ("AscendCL@opCompile", 5.0, 5.5),
            ("AscendCL@aclopCompileAndExecute", 3.2, 3.8)]
RUNTIME = {"free_us": 9_000.0, "host_bound_us": 7_000.0, "free_other_us": 2_000.0,
           "compile_us": 3_000.0, "launches": 4}
FRAMEWORK = {"free_us": 9_000.0, "host_bound_us": 1_500.0, "free_other_us": 7_500.0,
             "compile_us": 0.0, "launches": 4}


def _flow(cat: str, name: str, flow_id, ph: str, pid: int, tid: int, ms: float) -> dict:
    return {"ph": ph, "id": flow_id, "pid": pid, "tid": tid, "ts": us(at(ms)), "cat": cat,
            "name": name, "bp": "e"}


def launch_events(runtime: bool = True, compiles: bool = True) -> list[dict]:
    """The profile above; without the HostToDevice flows, or the compile events, on asking."""
    events = [*META, {"name": "process_name", "pid": CANN, "tid": 0, "args": {"name": "CANN"},
                      "ph": "M"}, host_op("ProfilerStep#1", 0, 20)]
    for number, (start, end, torch, launch) in enumerate(KERNELS, 1):
        events += [host_op("aten::add", torch - 0.1, torch + 0.1),
                   _flow("async_npu", "torch_to_npu", at(start), "s", PY, 7, torch),
                   _flow("async_npu", "torch_to_npu", at(start), "f", HW, 2, start),
                   {"ph": "X", "name": "aclnnAdd_AddAiCore_Add", "pid": HW, "tid": 2,
                    **span(start, end), "args": {"Task Type": "AI_CORE",
                                                 "connection_id": 900 + number}}]
        if runtime and launch is not None:  # ids as msprof writes them: text past int64
            flow = f"4000{number}068119343529983"
            events += [{"ph": "X", "name": "Node@launch", "pid": CANN, "tid": QUEUE,
                        **span(launch - 0.005, launch + 0.01),
                        "args": {"connection_id": 900 + number}},
                       _flow("HostToDevice", f"HostToDevice{flow}", flow, "s", CANN, QUEUE,
                             launch),
                       _flow("HostToDevice", f"HostToDevice{flow}", flow, "f", HW, 2, start)]
    if compiles:
        events += [{"ph": "X", "name": name, "pid": CANN, "tid": QUEUE, **span(start, end),
                    "args": {"connection_id": 800 + i}}
                   for i, (name, start, end) in enumerate(COMPILES)]
    return events


def _row(run) -> dict:
    assert len(run.host_steps) == 1
    return run.host_steps.iloc[0].to_dict()


@pytest.mark.parametrize("runtime, want", [(True, RUNTIME), (False, FRAMEWORK)])
def test_the_runtime_launch_times_the_wait(tmp_path, runtime, want):
    row = _row(load_run(write_trace_rank(tmp_path / "run", launch_events(runtime))))
    for key, value in want.items():
        assert row[key] == pytest.approx(value), key


def test_without_compile_events_compilation_is_none_or_unknown(tmp_path):
    """A trace that records the CANN level (HostToDevice flows) and no compilation compiled
    nothing: 0. Without the CANN level nothing says whether it compiled: unknown (NaN)."""
    row = _row(load_run(write_trace_rank(tmp_path / "cann", launch_events(compiles=False))))
    assert row["host_bound_us"] == pytest.approx(7_000.0)
    assert row["compile_us"] == 0.0
    bare = _row(load_run(write_trace_rank(tmp_path / "torch",
                                          launch_events(False, compiles=False))))
    assert pd.isna(bare["compile_us"])


def test_the_reader_says_which_launches_it_used(tmp_path):
    for runtime, source in ((True, "HostToDevice flows"), (False, "torch_to_npu flows")):
        root = write_trace_rank(tmp_path / str(runtime), launch_events(runtime))
        links = read_trace_side(root / "rank0_ascend_pt" / OUT / "trace_view.json").links
        assert launch_source(links) == source
        if runtime:  # three flows, each to its kernel; the launch times in ns
            got = sorted(zip(links.launches["device_ns"], links.launches["launch_ns"]))
            assert got == [(at(k[0]), at(k[3])) for k in KERNELS[:3]]
            assert sorted(map(tuple, links.compile.to_numpy())) == sorted(
                (at(start), at(end)) for _, start, end in COMPILES)
    assert launch_source(None) == ""


# ---------------------------------------------------------------- the same in a db

def write_launch_db(root: Path, runtime: bool = True) -> Path:
    """The profile above as a db: PYTORCH_API launch records reach TASK through
    CONNECTION_IDS; CANN_API holds the node-level launch of k1–k3 (connectionId: the
    task's) and the compile rows (level acl)."""
    folder = root / "rank0_ascend_pt"
    (folder / OUT).mkdir(parents=True)
    (folder / "profiler_info_0.json").write_text(json.dumps({"rank_id": 0}))
    names = {"aclnnAdd_AddAiCore_Add": 1, "AI_CORE": 2, "Add": 3, "aten::add": 4,
             "ProfilerStep#1": 5, "aclnnAdd": 6, "launch": 7, "aclopCompileAndExecute": 8,
             "opCompile": 9}
    with sqlite3.connect(folder / OUT / "ascend_pytorch_profiler_0.db") as conn:
        conn.executescript(DB_KERNEL_TABLES + DB_HOST_TABLES + """
            CREATE TABLE CANN_API(startNs INTEGER, endNs INTEGER, type INTEGER,
                              globalTid INTEGER, connectionId INTEGER, name INTEGER);
        """)
        conn.executemany("INSERT INTO STRING_IDS VALUES (?, ?)",
                         [(i, text) for text, i in names.items()])
        conn.executemany("INSERT INTO ENUM_API_TYPE VALUES (?, ?)",
                         [(50001, "op"), (50003, "trace"), (20000, "acl"), (10000, "node")])
        api = "INSERT INTO PYTORCH_API VALUES (?, ?, 7, ?, ?, -1, 50001)"
        conn.execute(api, (str(at(0)), str(at(20)), None, names["ProfilerStep#1"]))
        for number, (start, end, torch, launch) in enumerate(KERNELS, 1):
            link = 900 + number
            conn.execute("INSERT INTO TASK VALUES (?, ?, 0, ?, ?)",
                         (at(start), at(end), link, number))
            conn.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (1, ?, 2, 3)", (number,))
            conn.execute(api, (str(at(torch - 0.1)), str(at(torch + 0.1)), None,
                               names["aten::add"]))
            conn.execute(api, (str(at(torch)), str(at(torch + 0.05)), number, names["aclnnAdd"]))
            conn.execute("INSERT INTO CONNECTION_IDS VALUES (?, ?)", (number, link))
            if runtime and launch is not None:
                conn.execute("INSERT INTO CANN_API VALUES (?, ?, 10000, 8, ?, ?)",
                             (at(launch), at(launch + 0.01), link, names["launch"]))
        for i, (name, start, end) in enumerate(COMPILES):
            conn.execute("INSERT INTO CANN_API VALUES (?, ?, 20000, 8, ?, ?)",
                         (at(start), at(end), 800 + i, names[name.split("@")[1]]))
        conn.execute("INSERT INTO STEP_TIME VALUES (1, ?, ?)", (at(0), at(20)))
    return root


@pytest.mark.parametrize("runtime, want", [(True, RUNTIME), (False, FRAMEWORK)])
def test_the_db_times_the_wait_from_cann_api(tmp_path, runtime, want):
    db = load_run(write_launch_db(tmp_path / "db", runtime))
    row = _row(db)
    for key, value in want.items():
        assert row[key] == pytest.approx(value), key
    trace = load_run(write_trace_rank(tmp_path / "trace", launch_events(runtime)))
    assert row["host_bound_us"] == pytest.approx(_row(trace)["host_bound_us"])


# ---------------------------------------------------------------- the finding

def _comparison(base: dict, new: dict):
    """What ``host_bound`` reads of a Comparison: host figures, thresholds, base step."""
    return SimpleNamespace(host=HostTime(base, new), thresholds=Thresholds(),
                           step=SimpleNamespace(base_us=100_000.0))


def _side(free: float, bound: float, compiling: float | None) -> dict:
    figures = {"step_host_us": 100_000.0, "host_busy_us": math.nan, "dataloader_us": math.nan,
               "free_us": free, "host_bound_us": bound, "free_other_us": free - bound}
    return figures if compiling is None else {**figures, "compile_us": compiling}


# Base step 100 ms: the material floor is 1 ms. Free 7 → 25 ms, host-bound 1 → 19 ms
# (share 100 %). Compilation 0.1 → 2.8 ms grew 2.7 ms ≥ 1 ms: named, 2.7 / 18 = 15 % of
# the host-bound growth. Shrunk, grown by 0.4 ms only, or unknown on a side: not named.
@pytest.mark.parametrize("base_compile, new_compile, named", [
    (100.0, 2_800.0, True), (2_800.0, 100.0, False), (100.0, 500.0, False),
    (math.nan, 2_800.0, False), (None, None, False)])
def test_the_finding_names_compilation_when_it_grew_materially(base_compile, new_compile,
                                                               named):
    found = host_bound(_comparison(_side(7_000.0, 1_000.0, base_compile),
                                   _side(25_000.0, 19_000.0, new_compile)))
    assert len(found) == 1
    finding = found[0]
    assert ("Host op compilation (aclopCompileAndExecute)" in finding.detail) == named
    assert ("compile_delta_us" in finding.data) == named
    if named:
        assert "0.10 ms → 2.80 ms per step (15% of the host-bound growth)" in finding.detail
        assert finding.data["compile_delta_us"] == pytest.approx(2_700.0)
    assert "(100% of Free's growth)" in finding.detail


# ---------------------------------------------------------------- the real pair

PYTORCH = "test/data/pytorch"
OLD = REALDATA / "Ascend__msinsight@c1e639ee2" / PYTORCH  # 2024, Ascend910A
NEW = REALDATA / "Ascend__msinsight" / PYTORCH  # 2025, Ascend910B
COMPILE_API = ("aclopCompile", "aclopCompileAndExecute", "aclopCompileAndExecuteV2",
               "opCompile")


def _ns(text) -> int:
    whole, _, part = str(text).strip().partition(".")
    return int(whole) * 1000 + int((part + "000")[:3])


def _merged(intervals) -> list[list[int]]:
    out: list[list[int]] = []
    for start, end in sorted(intervals):
        if out and start <= out[-1][1]:
            out[-1][1] = max(out[-1][1], end)
        else:
            out.append([start, end])
    return out


def _oracle(rows, launch_of, compiles) -> tuple[float, float]:
    """(host-bound, compilation inside it) µs: rows (start, end, key), launch_of[key]."""
    blocks, first = [], {}
    for start, end, key in sorted(rows):
        if blocks and start <= blocks[-1][1]:
            blocks[-1][1] = max(blocks[-1][1], end)
        else:
            blocks.append([start, end])
        first.setdefault(start, []).append(key)
    bound = inside = 0
    merged = _merged(compiles)
    for (_, g0), (g1, _) in zip(blocks, blocks[1:]):
        launches = [launch_of[k] for k in first[g1] if k in launch_of]
        if launches:
            top = max(g0, min(g1, min(launches)))
            bound += top - g0
            inside += sum(max(0, min(e, top) - max(s, g0)) for s, e in merged)
    return bound / 1000, inside / 1000


def text_oracle(rank_dir: Path) -> tuple[float, float]:
    """Step 50 of a text export: rows from kernel_details.csv and the trace's hcom_* ops;
    launches from the HostToDevice flows (start → every end of an id)."""
    out = rank_dir / OUT
    events = json.loads((out / "trace_view.json").read_text())
    names = {e["pid"]: e["args"]["name"] for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    with open(out / "kernel_details.csv", newline="") as handle:
        rows = [(_ns(r["Start Time(us)"]), _ns(r["Start Time(us)"])
                 + round(float(r["Duration(us)"]) * 1000)) for r in csv.DictReader(handle)
                if r["Step Id"].strip() == "50"]
    low, high = min(r[0] for r in rows), max(r[1] for r in rows)
    rows += [(_ns(e["ts"]), _ns(e["ts"]) + round(e["dur"] * 1000)) for e in events
             if names.get(e.get("pid")) == "HCCL" and e.get("ph") == "X"
             and e["name"].startswith("hcom_") and low <= _ns(e["ts"]) <= high]
    starts, ends = {}, defaultdict(list)
    for e in events:
        if e.get("cat") == "HostToDevice":
            (starts.__setitem__(str(e["id"]), _ns(e["ts"])) if e["ph"] == "s"
             else ends[str(e["id"])].append(_ns(e["ts"])))
    launch_of: dict[int, int] = {}
    for flow, device in ((f, d) for f, ds in ends.items() if f in starts for d in ds):
        launch_of[device] = min(launch_of.get(device, starts[flow]), starts[flow])
    compiles = [(_ns(e["ts"]), _ns(e["ts"]) + round(e["dur"] * 1000)) for e in events
                if e.get("ph") == "X" and e.get("name") in
                {f"AscendCL@{api}" for api in COMPILE_API}]
    return _oracle([(s, e, s) for s, e in rows], launch_of, compiles)


def db_oracle(rank_dir: Path, rank: int) -> tuple[float, float]:
    """Step 50 of a db export: rows TASK ⋈ COMPUTE_TASK_INFO and COMMUNICATION_OP starting
    in STEP_TIME 50; a task's launch: the CANN_API row of its connectionId."""
    db = rank_dir / OUT / f"ascend_pytorch_profiler_{rank}.db"
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        low, high = conn.execute("SELECT startNs, endNs FROM STEP_TIME WHERE id = 50").fetchone()
        rows = conn.execute(
            "SELECT T.startNs, T.endNs, T.connectionId FROM TASK T JOIN COMPUTE_TASK_INFO C "
            "ON C.globalTaskId = T.globalTaskId WHERE T.startNs BETWEEN ?1 AND ?2 UNION ALL "
            "SELECT startNs, endNs, connectionId FROM COMMUNICATION_OP "
            "WHERE startNs BETWEEN ?1 AND ?2", (low, high)).fetchall()
        launch_of = dict(conn.execute("SELECT connectionId, startNs FROM CANN_API"))
        compiles = conn.execute(
            "SELECT startNs, endNs FROM CANN_API WHERE name IN (SELECT id FROM STRING_IDS "
            f"WHERE value IN ({','.join('?' * len(COMPILE_API))}))", COMPILE_API).fetchall()
    return _oracle(rows, launch_of, compiles)


# The oracles give, rank 0 of step 50 (µs): text 1035.062 → 20343.757 host-bound, of it
# 161.602 → 2733.492 compiling; db 7006.795 → 19274.030, 5067.176 → 4574.087. Timed from
# the framework op instead (the former figures): text 784.486 → 13925.391, db 1770.055 →
# 11809.622. The "1.04 → 18.72 ms" is 1.04 → 20.34 ms by the flows themselves.
@pytest.mark.slow
@needs_realdata
@pytest.mark.parametrize("kind", ["text", "db"])
def test_real_new_rank0_host_bound_and_compilation(kind):
    for root in (OLD, NEW):
        rank_dir = root / kind / "level1" / "rank0_ascend_pt"
        want = text_oracle(rank_dir) if kind == "text" else db_oracle(rank_dir, 0)
        run = load_run(root / kind / "level1")
        row = run.host_steps[run.host_steps["rank"] == 0].iloc[0]
        assert (row["host_bound_us"], row["compile_us"]) == pytest.approx(want, abs=0.002)
    if kind == "text":  # the numbers, by the oracle: rank 0 new, base
        assert text_oracle(NEW / "text/level1/rank0_ascend_pt") == pytest.approx(
            (20_343.757, 2_733.492), abs=0.001)



def test_a_flow_without_id_times_nothing(tmp_path):
    """A HostToDevice pair of null ids ending at k4: were it joined, k4 would be launched
    at 8.5 ms, before its gap [13, 15], and host-bound would lose that gap's 1 ms."""
    events = launch_events() + [
        _flow("HostToDevice", "HostToDevice", None, "s", CANN, QUEUE, 8.5),
        _flow("HostToDevice", "HostToDevice", None, "f", HW, 2, 15.0)]
    row = _row(load_run(write_trace_rank(tmp_path / "run", events)))
    assert row["host_bound_us"] == pytest.approx(RUNTIME["host_bound_us"])
