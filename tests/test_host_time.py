"""Host time per step and the split of device idle time (Run.host_steps, Run.step_lanes).

Crafted traces and dbs with the answers worked out by hand in the comments
(docs/formats.md §15: free = device span of the step less the union of its rows; each idle
gap [g0, g1] before the task k starting at g1, launched at L_k, is host-bound over
[g0, min(g1, L_k)]). The real-data figures were computed by a separate script with
``json`` / ``sqlite3`` only, never with the code under test.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pandas as pd
import pytest
from conftest import REALDATA, needs_realdata
from profiles import DB_HOST_TABLES, DB_KERNEL_TABLES

from cann_diff.read import load_run, select_steps
from cann_diff.read.formats.host_links import read_trace_side
from cann_diff.read.reduce.host_time import LANE_POINTS
from cann_diff.schema import HOST_STEP_COLUMNS, STEP_LANE_COLUMNS

T0 = 1_736_413_971_000_000_000  # ns
MS = 1_000_000
PY, HW = 30, 20
OUT = "ASCEND_PROFILER_OUTPUT"


def us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def at(ms: float) -> int:
    return T0 + round(ms * MS)


def span(start: float, end: float) -> dict:
    return {"ts": us(at(start)), "dur": (at(end) - at(start)) / 1000}


def host_op(name: str, start: float, end: float) -> dict:
    return {"ph": "X", "name": name, "pid": PY, "tid": 7, "cat": "cpu_op",
            **span(start, end), "args": {"Sequence number": -1}}


def launched(name: str, launch: float, start: float, end: float) -> list[dict]:
    """A launch flow from the host thread at ``launch`` to a kernel [start, end] (ms)."""
    flow = at(start)
    return [{"ph": "s", "id": flow, "pid": PY, "tid": 7, "ts": us(at(launch)),
             "cat": "async_npu", "name": "torch_to_npu", "bp": "e"},
            {"ph": "f", "id": flow, "pid": HW, "tid": 2, "ts": us(flow), "cat": "async_npu",
             "name": "torch_to_npu", "bp": "e"},
            {"ph": "X", "name": name, "pid": HW, "tid": 2, **span(start, end),
             "args": {"Task Type": "AI_CORE"}}]


META = [{"name": "process_name", "pid": PY, "tid": 0, "args": {"name": "Python"}, "ph": "M"},
        {"name": "process_name", "pid": HW, "tid": 0, "args": {"name": "Ascend Hardware"},
         "ph": "M"}]

# One step, ProfilerStep#1 0–20 ms (ms from T0). The data loader runs 0–2 ms, then three
# aten::add ops launch one kernel each:
#   A 2.0–2.5 launches at 2.1 k1 3–4;  B 2.6–3.0 launches at 2.7 k2 4.5–5.5;
#   C 7.9–8.5 launches at 8.0 k3 9–10 (``delay`` ms later: C, its launch and k3 move).
# Host busy = |[0,2] ∪ [2,2.5] ∪ [2.6,3] ∪ C| = 3.5 ms. Device span 3 … 10 + delay ms,
# busy 3 ms: free 4 + delay ms. Gap 4–4.5 before k2 (launched at 2.7, before the gap):
# not host-bound. Gap 5.5–(9 + delay) before k3, launched at 8 + delay: host-bound
# 2.5 + delay ms, the other 1 ms not. So free_other = 0.5 + 1 = 1.5 ms either way, and
# delaying the launch by 5 ms makes host_bound grow by 5 ms.
DATALOADER = "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"


def host_bound_events(delay: float) -> list[dict]:
    return [*META, host_op("ProfilerStep#1", 0, 20), host_op(DATALOADER, 0, 2),
            host_op("aten::add", 2.0, 2.5), *launched("aclnnAdd_AddAiCore_Add", 2.1, 3, 4),
            host_op("aten::add", 2.6, 3.0), *launched("aclnnAdd_AddAiCore_Add", 2.7, 4.5, 5.5),
            host_op("aten::add", 7.9 + delay, 8.5 + delay),
            *launched("aclnnAdd_AddAiCore_Add", 8.0 + delay, 9 + delay, 10 + delay)]


def write_trace_rank(root: Path, events: list[dict], rank: int = 0) -> Path:
    folder = root / f"rank{rank}_ascend_pt"
    (folder / OUT).mkdir(parents=True)
    (folder / OUT / "trace_view.json").write_text(json.dumps(events))
    (folder / f"profiler_info_{rank}.json").write_text(json.dumps({"rank_id": rank}))
    return root


def expected(delay: float) -> dict:
    return {"step": 1, "step_host_us": 20_000.0, "host_busy_us": 3_500.0,
            "dataloader_us": 2_000.0, "free_us": 4_000.0 + delay * 1000,
            "host_bound_us": 2_500.0 + delay * 1000, "free_other_us": 1_500.0,
            "launches": 3}


def _row(run) -> dict:
    return run.host_steps.iloc[0].to_dict()


@pytest.mark.parametrize("delay", [0.0, 5.0])
def test_a_delayed_launch_is_host_bound(tmp_path, delay):
    run = load_run(write_trace_rank(tmp_path / "run", host_bound_events(delay)))
    row = _row(run)
    for key, value in expected(delay).items():
        assert row[key] == pytest.approx(value), key
    assert {c: str(t) for c, t in run.host_steps.dtypes.items()} == HOST_STEP_COLUMNS


def test_host_bound_grows_by_the_delay(tmp_path):
    base = _row(load_run(write_trace_rank(tmp_path / "base", host_bound_events(0))))
    new = _row(load_run(write_trace_rank(tmp_path / "new", host_bound_events(5))))
    assert new["host_bound_us"] - base["host_bound_us"] == pytest.approx(5_000.0)
    assert new["free_other_us"] == pytest.approx(base["free_other_us"])


def test_without_flows_the_step_thread_is_the_host(tmp_path):
    """No launch flows: nothing is host-bound, the host ops of ProfilerStep's thread count."""
    events = [e for e in host_bound_events(0) if e.get("cat") != "async_npu"]
    row = _row(load_run(write_trace_rank(tmp_path / "run", events)))
    assert (row["host_busy_us"], row["host_bound_us"], row["free_other_us"],
            row["launches"]) == pytest.approx((3_500.0, 0.0, 4_000.0, 0))


def test_a_profile_without_host_side_has_no_host_steps(tmp_path):
    events = [e for e in host_bound_events(0) if e.get("cat") not in ("async_npu", "cpu_op")]
    events.append({"ph": "X", "name": "ProfilerStep#1", "pid": PY, "tid": 7,
                   "cat": "user_annotation_x", **span(0, 20)})
    run = load_run(write_trace_rank(tmp_path / "run", events))
    assert run.host_steps is None


# ---------------------------------------------------------------- the same in a db

def write_db_rank(root: Path, delay: float) -> Path:
    """The host-bound profile as a db: PYTORCH_API (op rows; each kernel's launch record
    carries the connection id its TASK row has), CONNECTION_IDS, TASK, STEP_TIME."""
    folder = root / "rank0_ascend_pt"
    (folder / OUT).mkdir(parents=True)
    (folder / "profiler_info_0.json").write_text(json.dumps({"rank_id": 0}))
    names = {"aclnnAdd_AddAiCore_Add": 1, "AI_CORE": 2, "Add": 3, "aten::add": 4,
             "ProfilerStep#1": 5, DATALOADER: 6, "aclnnAdd": 7}
    host = [("ProfilerStep#1", 0, 20, None), (DATALOADER, 0, 2, None),
            ("aten::add", 2.0, 2.5, None), ("aclnnAdd", 2.1, 2.2, 1),
            ("aten::add", 2.6, 3.0, None), ("aclnnAdd", 2.7, 2.8, 2),
            ("aten::add", 7.9 + delay, 8.5 + delay, None), ("aclnnAdd", 8.0 + delay,
                                                            8.1 + delay, 3)]
    kernels = [(3, 4, 1), (4.5, 5.5, 2), (9 + delay, 10 + delay, 3)]
    with sqlite3.connect(folder / OUT / "ascend_pytorch_profiler_0.db") as conn:
        conn.executescript(DB_KERNEL_TABLES + DB_HOST_TABLES)
        conn.executemany("INSERT INTO STRING_IDS VALUES (?, ?)",
                         [(i, text) for text, i in names.items()])
        conn.executemany("INSERT INTO ENUM_API_TYPE VALUES (?, ?)",
                         [(50001, "op"), (50003, "trace")])
        for number, (start, end, link) in enumerate(kernels, 1):
            conn.execute("INSERT INTO TASK VALUES (?, ?, 0, ?, ?)",
                         (at(start), at(end), 100 + link, number))
            conn.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (1, ?, 2, 3)", (number,))
        for name, start, end, link in host:
            conn.execute("INSERT INTO PYTORCH_API VALUES (?, ?, 7, ?, ?, -1, 50001)",
                         (str(at(start)), str(at(end)), link, names[name]))
            if link is not None:
                conn.execute("INSERT INTO CONNECTION_IDS VALUES (?, ?)", (link, 100 + link))
        conn.execute("INSERT INTO STEP_TIME VALUES (1, ?, ?)", (at(0), at(20)))
    return root


@pytest.mark.parametrize("delay", [0.0, 5.0])
def test_the_db_gives_what_the_trace_gives(tmp_path, delay):
    db = load_run(write_db_rank(tmp_path / "db", delay))
    trace = load_run(write_trace_rank(tmp_path / "trace", host_bound_events(delay)))
    row = _row(db)
    for key, value in expected(delay).items():
        assert row[key] == pytest.approx(value, rel=0.01), key
    pd.testing.assert_frame_equal(db.host_steps, trace.host_steps)


# ---------------------------------------------------------------- step lanes

def lanes_events(spans_ms: list[float]) -> list[dict]:
    """One step per span: ProfilerStep#n, then two kernels filling 0–40 % and 60–100 % of
    the span (a free gap of 20 %), the first launched by an aten op on the host."""
    events, t = [*META], 0.0
    for number, length in enumerate(spans_ms, 1):
        events += [host_op(f"ProfilerStep#{number}", t, t + length + 1),
                   host_op("aten::mm", t + 0.1, t + 0.5),
                   *launched("aclnnMm_MatMulV2_MatMulV2", t + 0.2, t + 1, t + 1 + 0.4 * length),
                   *launched("aclnnAdd_AddAiCore_Add", t + 0.3, t + 1 + 0.6 * length,
                             t + 1 + length)]
        t += length + 10
    return events


@pytest.mark.parametrize("spans_ms, step", [([10, 30, 20], 3),   # median span 20: step 3
                                            ([10, 10, 30], 2),   # a tie: the lower id
                                            ([40], 1)])
def test_lanes_draw_the_median_step(tmp_path, spans_ms, step):
    run = load_run(write_trace_rank(tmp_path / "run", lanes_events(spans_ms)))
    lanes = run.step_lanes[0]
    assert set(lanes["step"]) == {step}
    length = sorted(spans_ms)[(len(spans_ms) - 1) // 2]
    # step start: its ProfilerStep at t, the device 1 ms later
    by_lane = {lane: frame[["start_us", "end_us"]].to_numpy().ravel().tolist()
               for lane, frame in lanes.groupby("lane")}
    assert by_lane["compute"] == pytest.approx([1000, 1000 + 400 * length,
                                                1000 + 600 * length, 1000 + 1000 * length])
    assert by_lane["free"] == pytest.approx([1000 + 400 * length, 1000 + 600 * length])
    assert by_lane["host"] == pytest.approx([100, 500])
    labels = dict(zip(lanes["start_us"], lanes["label"]))
    assert labels[1000] == "MatMulV2" and labels[100] == "aten::mm"
    assert list(lanes.columns) == list(STEP_LANE_COLUMNS)


def test_lanes_hold_at_most_two_thousand_segments(tmp_path):
    """5,000 kernels of 1 µs, 2 µs apart in a 15 ms step: gaps of 1 µs are below
    15 ms / 2000 = 7.5 µs, so they merge into one segment."""
    events = [*META, host_op("ProfilerStep#1", 0, 15)]
    events += [{"ph": "X", "name": "aclnnAdd_AddAiCore_Add", "pid": HW, "tid": 2,
                **span(1 + 0.002 * k, 1 + 0.002 * k + 0.001), "args": {"Task Type": "AI_CORE"}}
               for k in range(5000)]
    events += launched("aclnnAdd_AddAiCore_Add", 10, 14, 14.5)
    run = load_run(write_trace_rank(tmp_path / "run", events))
    lanes = run.step_lanes[0]
    assert (lanes.groupby("lane").size() <= LANE_POINTS).all()
    compute = lanes[lanes["lane"] == "compute"]
    assert compute[["start_us", "end_us"]].to_numpy().ravel().tolist() == pytest.approx(
        [1000, 10999, 14000, 14500])


def test_steps_choose_host_steps_and_lanes(tmp_path):
    run = load_run(write_trace_rank(tmp_path / "run", lanes_events([10, 30, 20])))
    assert run.host_steps["step"].tolist() == [1, 2, 3]
    chosen = load_run(tmp_path / "run", steps=[(1, 2)])
    assert chosen.host_steps["step"].tolist() == [1, 2]
    kept = select_steps(run, [(1, 1)])
    assert kept.host_steps["step"].tolist() == [1] and kept.step_lanes == {}


# ---------------------------------------------------------------- real data

PYTORCH = "test/data/pytorch"
OLD = REALDATA / "Ascend__msinsight@c1e639ee2" / PYTORCH  # 2024, Ascend910A
NEW = REALDATA / "Ascend__msinsight" / PYTORCH  # 2025, Ascend910B
COLUMNS = ("step_host_us", "host_busy_us", "dataloader_us", "free_us", "host_bound_us",
           "launches")
# per rank, by the separate json / sqlite3 scripts (step 50 of each). Host-bound is timed
# from the runtime launch (trace: the HostToDevice flow's start; db: the CANN_API row of
# the task's connectionId); the framework op's torch_to_npu flow gave 784.486, 221.572,
# 13925.391, 14680.610 (text) and 1770.055, 1615.769, 11809.622, 13607.864 (db).
TEXT_OLD = [(98485.775, 92987.777, 2079.189, 7268.635, 1035.062, 346),
            (78598.392, 73105.259, 2149.303, 5849.172, 267.769, 346)]
TEXT_NEW = [(155985.800, 148925.220, 3332.400, 25744.069, 20343.757, 188),
            (153888.390, 145873.490, 3606.230, 26675.287, 21123.782, 190)]
DB_OLD = [(63985.183, 55698.307, 3964.916, 7150.851, 7006.795, 349),
          (52189.366, 46924.973, 2176.565, 8290.687, 7865.916, 349)]
DB_NEW = [(151888.750, 144428.970, 3775.330, 25258.144, 19274.030, 191),
          (148265.420, 140794.770, 3535.990, 25840.499, 20039.571, 191)]


def _figures(run) -> list[tuple]:
    return [tuple(row) for row in run.host_steps[list(COLUMNS)].itertuples(index=False)]


@pytest.mark.slow
@needs_realdata
@pytest.mark.parametrize("kind, base, new", [("text", TEXT_OLD, TEXT_NEW),
                                             ("db", DB_OLD, DB_NEW)])
def test_real_pair_host_steps(kind, base, new):
    old_run, new_run = load_run(OLD / kind / "level1"), load_run(NEW / kind / "level1")
    for run, figures in ((old_run, base), (new_run, new)):
        assert run.host_steps["step"].tolist() == [50, 50]
        for got, want in zip(_figures(run), figures):
            assert got == pytest.approx(want, abs=0.002)
    if kind == "text":  # free (device idle) grew 19.65 ms per step, mean over the ranks
        growth = new_run.host_steps["free_us"].mean() - old_run.host_steps["free_us"].mean()
        assert growth == pytest.approx(19_650.8, abs=0.1)
    assert set(new_run.step_lanes) == {0, 1}
    lanes = new_run.step_lanes[0]
    assert {"compute", "communication", "host", "free", "plane 5"} <= set(lanes["lane"])


@pytest.mark.slow
@needs_realdata
def test_real_host_spans_keep_the_framework_annotations():
    """DistributedDataParallel.forward took 3.07 ms of host time on the 2024 stack and
    19.58 ms on the 2025 one (the separate json script: its cpu_op ``dur``)."""
    for root, ms in ((OLD, 3.074916), (NEW, 19.5785)):
        spans = read_trace_side(root / "text/level1/rank0_ascend_pt" / OUT /
                                "trace_view.json").spans
        forward = spans[spans["name"] == "DistributedDataParallel.forward"]
        assert ((forward["end_ns"] - forward["start_ns"]) / 1e6).tolist() == \
            pytest.approx([ms], abs=1e-6)
