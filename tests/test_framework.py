"""Framework-operator level: kernels attributed to the aten op that launched them, compared.

Expected values come from the raw files with plain json / sqlite3 (or from crafted
profiles whose answer is written down), never from cann_diff's own output.
"""

from __future__ import annotations

import csv
import json
import random
import sqlite3
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import DATA, REALDATA, needs_realdata

from cann_diff.compare.framework import (
    FRAMEWORK_OP_FIELDS,
    OP_RULE_FIELDS,
    align,
    compare_framework,
)
from cann_diff.pipeline import diff
from cann_diff.read import load_run
from cann_diff.read.reduce.framework import Nesting
from cann_diff.schema import UNLINKED

MSI = REALDATA / "Ascend__msinsight/test/data/pytorch"
OUT = "ASCEND_PROFILER_OUTPUT"


def _rank0(run) -> pd.DataFrame:
    frame = run.framework
    return frame[(frame["rank"] == 0) & (frame["name"] != UNLINKED)]


def _per_name(frame: pd.DataFrame) -> dict[str, tuple[int, float]]:
    grouped = frame.groupby("name", observed=True).agg(k=("kernels", "sum"),
                                                       us=("device_us", "sum"))
    return {name: (int(row.k), float(row.us)) for name, row in grouped.iterrows()}


# ---------------------------------------------------------------- real files, by hand

def _hand_text(rank_dir: Path) -> dict[str, tuple[int, float]]:
    """Per framework op name: kernels and µs, from trace_view.json + kernel_details.csv.

    The rule as FORMATS.md §3.3 states it: a torch_to_npu flow starts on the host thread
    at the launch and ends at the kernel's ts; the kernel belongs to the innermost op
    named ``ns::op`` open at the launch; a communication op reached by no flow takes the
    first free flow end inside it.
    """
    events = json.loads((rank_dir / OUT / "trace_view.json").read_text())
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"
           and "::" in e["name"]]
    starts = {e["id"]: e for e in events if e.get("cat") == "async_npu" and e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e.get("cat") == "async_npu" and e["ph"] == "f"}
    owner_of_end = {}
    for flow_id, start in starts.items():
        t = Decimal(start["ts"])
        open_ops = [o for o in ops if o["tid"] == start["tid"] and Decimal(o["ts"]) <= t
                    < Decimal(o["ts"]) + Decimal(str(o["dur"]))]
        if open_ops and flow_id in ends:
            inner = max(open_ops, key=lambda o: (Decimal(o["ts"]), -Decimal(str(o["dur"]))))
            owner_of_end[Decimal(ends[flow_id]["ts"])] = inner["name"]
    with open(rank_dir / OUT / "kernel_details.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    totals: dict[str, list] = defaultdict(lambda: [0, 0.0])
    free = dict(owner_of_end)
    lone = []
    for row in rows:
        start = Decimal(row["Start Time(us)"].strip())
        if start in owner_of_end:
            free.pop(start, None)
            totals[owner_of_end[start]][0] += 1
            totals[owner_of_end[start]][1] += float(row["Duration(us)"])
        else:
            lone.append(row)
    for row in lone:
        start = Decimal(row["Start Time(us)"].strip())
        inside = sorted(t for t in free if start <= t <= start + Decimal(row["Duration(us)"]))
        if row["Type"].startswith("hcom_") and inside:
            totals[free.pop(inside[0])][0] += 1
            totals[owner_of_end[inside[0]]][1] += float(row["Duration(us)"])
    return {name: (k, us) for name, (k, us) in totals.items()}


@needs_realdata
def test_text_level1_table_equals_a_hand_count_of_the_raw_trace():
    expected = _hand_text(MSI / "text/level1/rank0_ascend_pt")
    got = _per_name(_rank0(load_run(MSI / "text/level1")))
    assert set(got) == set(expected)
    for name, (kernels, us) in expected.items():
        assert got[name][0] == kernels, name
        assert got[name][1] == pytest.approx(us, rel=1e-9), name
    # one operator written out: the four c10d::allreduce_ (their hcom ops reached through
    # the SDMA tasks inside three of them) and the conv backward kernels under the aten op
    assert expected["c10d::allreduce_"][0] == 4
    assert expected["aten::convolution_backward"][0] == got["aten::convolution_backward"][0]


def _hand_db(db: Path) -> dict[str, tuple[int, float]]:
    """Per framework op name: kernels and µs, from the db with plain SQL + Python."""
    con = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
    names = dict(con.execute("SELECT id, value FROM STRING_IDS"))
    api = con.execute("SELECT CAST(startNs AS INTEGER), CAST(endNs AS INTEGER), globalTid, "
                      "name, connectionId FROM PYTORCH_API WHERE type = 50001").fetchall()
    framework = [(s, e, t, names[n]) for s, e, t, n, _ in api if "::" in names[n]]
    launch_of = defaultdict(list)  # device connection id -> (thread, launch time)
    for connection, device in con.execute("SELECT id, connectionId FROM CONNECTION_IDS"):
        launch_of[connection].append(device)
    owner = {}
    for start, _, thread, _, connection in api:
        if connection is None:
            continue
        open_ops = [f for f in framework if f[2] == thread and f[0] <= start < f[1]]
        if open_ops:
            inner = max(open_ops, key=lambda f: (f[0], -f[1]))[3]
            for device in launch_of[connection]:
                owner[device] = inner
    kernels = con.execute("SELECT T.connectionId, T.startNs, T.endNs FROM COMPUTE_TASK_INFO C "
                          "JOIN TASK T ON T.globalTaskId = C.globalTaskId").fetchall()
    kernels += con.execute("SELECT connectionId, startNs, endNs FROM COMMUNICATION_OP").fetchall()
    totals: dict[str, list] = defaultdict(lambda: [0, 0.0])
    for connection, start, end in kernels:
        if connection in owner:
            totals[owner[connection]][0] += 1
            totals[owner[connection]][1] += (end - start) / 1000
    con.close()
    return {name: (k, us) for name, (k, us) in totals.items()}


@needs_realdata
def test_db_level1_table_equals_a_hand_count_of_the_raw_db():
    db = MSI / "db/level1/rank0_ascend_pt" / OUT / "ascend_pytorch_profiler_0.db"
    expected = _hand_db(db)
    got = _per_name(_rank0(load_run(MSI / "db/level1")))
    assert got.keys() == expected.keys()
    for name, (kernels, us) in expected.items():
        assert got[name] == (kernels, pytest.approx(us, rel=1e-9)), name
    assert expected["c10d::allreduce_"][0] == 4  # COMMUNICATION_OP rows, by connection id


@pytest.mark.slow
@needs_realdata
def test_text_and_db_twins_give_the_same_framework_table():
    """text/level1 and db/level1 are two captures of one job (start times 28 min apart).

    So names, shapes, modules, kernel types and counts are equal, and device times equal
    within run-to-run noise (the largest gap per operator is 11 %, totals 2.5 %).
    """
    def table(run) -> pd.DataFrame:
        return run.framework.groupby(["rank", "name", "input_shapes", "module", "kernel_type"],
                                     observed=True).agg(kernels=("kernels", "sum"),
                                                        us=("device_us", "sum"))

    text, db = table(load_run(MSI / "text/level1")), table(load_run(MSI / "db/level1"))
    assert text.index.equals(db.index)
    assert (text["kernels"] == db["kernels"]).all()
    assert len(text) > 200 and text["kernels"].sum() == db["kernels"].sum() == 2 * 187 + 8
    big = text["us"] > 50
    ratio = db["us"][big] / text["us"][big]
    assert ratio.between(0.85, 1.18).all()
    assert db["us"].sum() == pytest.approx(text["us"].sum(), rel=0.05)
    conv = text.xs("aten::convolution_backward", level="name")
    assert {"Conv2DBackpropFilter", "Conv2DBackpropInput"} <= set(
        conv.index.get_level_values("kernel_type"))
    modules = set(text.index.get_level_values("module"))
    assert "DistributedDataParallel_0/AlexNet_0/Sequential_0/Conv2d_0" in modules
    assert "DistributedDataParallel_0/AlexNet_0/Sequential_0/Conv2d_0 (backward)" in modules


@pytest.mark.slow
@needs_realdata
def test_same_job_compared_with_itself_across_formats_is_unchanged():
    result = diff(MSI / "text/level1", MSI / "db/level1")
    ops = result.comparison.framework.operators
    assert list(ops.columns[:len(FRAMEWORK_OP_FIELDS)]) == list(FRAMEWORK_OP_FIELDS)
    # Every key pairs exactly with its twin at the same counts, and none is called slower
    # or faster: two instances a side cannot reach α (untested), and where four can the
    # run-to-run noise is not significant.
    assert set(ops["match_kind"]) == {"exact"}
    assert set(ops["status"]) <= {"unchanged", "untested", "not-significant"}
    records = result.report.to_dict()["framework_ops"]
    assert len(records) == len(ops) and set(records[0]) == set(FRAMEWORK_OP_FIELDS
                                                              + OP_RULE_FIELDS)
    json.dumps(result.report.to_dict(), allow_nan=False)
    allreduce = ops[ops["name"] == "c10d::allreduce_"].iloc[0]
    assert allreduce["base_count"] == allreduce["new_count"] == 4  # per step and rank
    assert [k["type"] for k in allreduce["base_kernels"]] == ["AllReduce"]
    assert result.comparison.framework.modules is not None and len(
        result.comparison.framework.modules)


@pytest.mark.slow
@needs_realdata
def test_level0_exports_carry_the_links_too():
    """Unlike msprof or a cluster summary, torch_npu's Level0 keeps torch ops and flows.

    Level0 blanks the kernel Type, not the framework side: the framework table of the
    Level0 capture has the same operators and instance counts as Level1's (same job).
    """
    def instances(run) -> pd.Series:
        frame = run.framework
        return frame.groupby(["rank", "name", "input_shapes"], observed=True)["order"].nunique()

    level0, level1 = load_run(MSI / "text/level0"), load_run(MSI / "text/level1")
    assert level0.framework is not None and level0.framework_note is None
    pd.testing.assert_series_equal(instances(level0), instances(level1))


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.slow
@needs_realdata
def test_profiles_without_links_give_none_and_a_reason(tmp_path):
    kernels_only = DATA / "realdata/Ascend__msinsight/server/src/test/test_data/test_rank_0"
    cluster = REALDATA / "Ascend__msinsight/server/src/test/test_data/cluster_analysis_output"
    msprof = next(REALDATA.glob("vllm-project__vllm-ascend/**/mindstudio_profiler_output")).parent
    for path, why in ((kernels_only, "no trace_view.json"), (cluster, "no host→device links"),
                      (msprof, "no host→device links")):
        run = load_run(path)
        assert run.framework is None
        note = run.framework_note.text
        assert why in note and "comparison unavailable" in note
        result, reason = compare_framework(run, load_run(MSI / "text/level1"))
        assert result is None and why in reason.text
    # a trace without torch_to_npu flows beside a kernel_details.csv
    rank = tmp_path / "rank0_ascend_pt"
    for name in ("kernel_details.csv", "profiler_info_0.json"):
        source = kernels_only / (OUT if name.endswith(".csv") else "") / name
        _write(rank / (OUT if name.endswith(".csv") else "") / name, source.read_text())
    _write(rank / OUT / "trace_view.json", '[{"ph": "X", "name": "aten::mm", "pid": 1, '
                                           '"tid": 1, "ts": "1.000", "dur": 1, "cat": "cpu_op"}]')
    run = load_run(rank)
    assert run.framework is None and "no torch_to_npu flow events" in run.framework_note.text


@needs_realdata
def test_a_trace_only_rank_keeps_its_links_in_the_kernel_pass():
    """msprof-analyze's 2024 trace_view.json alone: kernels and links from one stream."""
    trace = REALDATA / "Ascend__msprof-analyze/test/ut/advisor/timeline_advice/trace_view.json"
    events = json.loads(trace.read_text())
    ends = {Decimal(e["ts"]) for e in events if e.get("cat") == "async_npu" and e["ph"] == "f"}
    run = load_run(trace)
    frame = run.framework
    linked = frame.loc[frame["name"] != UNLINKED, "kernels"].sum()
    assert run.meta.format == "trace_json" and linked > 0
    assert linked <= len(ends)  # every attributed kernel sits at a flow's end
    assert frame["kernels"].sum() == run.summary.kernels
    assert frame.loc[frame["name"] != UNLINKED, "name"].astype(str).str.contains("::").all()


# ---------------------------------------------------------------- crafted pairs

T0_NS = 1_736_413_971_000_000_000


def _us(ns: int) -> str:
    return f"{ns // 1000}.{ns % 1000:03d}"


def write_linked_profile(root: Path, steps: list[list[tuple[str, str, list]]]) -> Path:
    """A torch_npu text export: kernel_details.csv plus a trace_view.json linking them.

    ``steps``: per step, framework ops ``(aten name, input dims, kernels)`` with kernels
    ``(kernel name, Type, µs)``; each op is launched 1 ms ahead of its first kernel, one
    launch record + torch_to_npu flow per kernel; kernels run back to back, 2 µs apart.
    """
    rank = root / "rank0_ascend_pt"
    events, rows = [], []
    device = T0_NS
    for step_id, ops in enumerate(steps, start=1):
        step_start = device - 1_100_000
        for name, dims, kernels in ops:
            host = device - 1_000_000
            events.append({"ph": "X", "name": name, "pid": 1, "tid": 7, "ts": _us(host),
                           "dur": 0.2 * len(kernels) + 0.1, "cat": "cpu_op",
                           "args": {"Sequence number": -1, "Input Dims": dims}})
            for j, (kernel, kind, us) in enumerate(kernels):
                launch = host + 50 + 200 * j
                events += [{"ph": "X", "name": "aclnn" + kind, "pid": 1, "tid": 7,
                            "ts": _us(launch), "dur": 0.1, "cat": "cpu_op"},
                           {"ph": "s", "id": device, "pid": 1, "tid": 7, "ts": _us(launch),
                            "cat": "async_npu", "name": "torch_to_npu", "bp": "e"},
                           {"ph": "f", "id": device, "pid": 2, "tid": 2, "ts": _us(device),
                            "cat": "async_npu", "name": "torch_to_npu", "bp": "e"},
                           {"ph": "X", "name": kernel, "pid": 2, "tid": 2, "ts": _us(device),
                            "dur": us, "args": {"Task Type": "AI_CORE"}}]
                rows.append([str(step_id), kernel, kind, "AI_CORE", _us(device) + "\t",
                             f"{us:.3f}", "0", "24", '"1,2"', "FLOAT"])
                device += int(us * 1000) + 2000
        events.append({"ph": "X", "name": f"ProfilerStep#{step_id}", "pid": 1, "tid": 7,
                       "ts": _us(step_start), "dur": (device - step_start) / 1000,
                       "cat": "cpu_op"})
        device += 5_000_000
    events += [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "Python"}},
               {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "Ascend Hardware"}}]
    _write(rank / OUT / "trace_view.json", json.dumps(events))
    header = ["Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)",
              "Wait Time(us)", "Block Dim", "Input Shapes", "Input Data Types"]
    with open(_write(rank / OUT / "kernel_details.csv", ""), "w", newline="") as handle:
        csv.writer(handle).writerows([header, *rows])
    _write(rank / "profiler_info_0.json", json.dumps({"rank_id": 0}))
    return root


MM = ("aten::mm", "32,64;\r\n64,16", [("aclnnMm_MatMulV2_MatMulV2", "MatMulV2", 50.0)])
CONV_BACKWARD_DIMS = "32,256,13,13;\r\n32,256,13,13;\r\n256,256,3,3;\r\n;\r\n"


def test_renamed_conv_backward_kernels_pair_under_their_aten_op(tmp_path):
    """CANN renames Conv2DBackpropFilterD → Conv2DBackpropFilter (and Input): the kernel
    level sees two added and two removed types; the framework level one operator whose
    kernels changed. Two steps of [mm, conv backward]; per step and rank:
    base 120 + 80 = 200 µs, new 100 + 60 = 160 µs (−20 %)."""
    def steps(filter_kernel, input_kernel):
        conv = ("aten::convolution_backward", CONV_BACKWARD_DIMS,
                [filter_kernel, input_kernel])
        return [[MM, conv], [MM, conv]]

    base = write_linked_profile(tmp_path / "base", steps(
        ("Conv2DBackpropFilterD12", "Conv2DBackpropFilterD", 120.0),
        ("Conv2DBackpropInputD13", "Conv2DBackpropInputD", 80.0)))
    new = write_linked_profile(tmp_path / "new", steps(
        ("aclnnConvolutionBackward_Conv2DBackpropFilter_Conv2DBackpropFilter",
         "Conv2DBackpropFilter", 100.0),
        ("aclnnConvolutionBackward_Conv2DBackpropInput_Conv2DBackpropInput",
         "Conv2DBackpropInput", 60.0)))
    result = diff(base, new)
    ops = result.comparison.framework.operators.set_index("name")
    conv = ops.loc["aten::convolution_backward"]
    assert conv["input_shapes"] == "32,256,13,13;32,256,13,13;256,256,3,3;;"
    assert (conv["base_count"], conv["new_count"]) == (1, 1)
    assert conv["base_device_us"] == pytest.approx(200.0)
    assert conv["new_device_us"] == pytest.approx(160.0)
    assert conv["delta_us"] == pytest.approx(-40.0)
    # −20 % per instance, but 2 instances a side: the smallest Mann-Whitney p is
    # 2 / C(4, 2) = 1/3 > α, so no test can call it: untested (the kernel table's word).
    assert conv["status"] == "untested"
    assert conv["instance_change_pct"] == pytest.approx(-20.0)
    assert conv["base_kernels"] == [
        {"type": "Conv2DBackpropFilterD", "count": 1, "device_us": pytest.approx(120.0)},
        {"type": "Conv2DBackpropInputD", "count": 1, "device_us": pytest.approx(80.0)}]
    assert conv["new_kernels"] == [
        {"type": "Conv2DBackpropFilter", "count": 1, "device_us": pytest.approx(100.0)},
        {"type": "Conv2DBackpropInput", "count": 1, "device_us": pytest.approx(60.0)}]
    mm = ops.loc["aten::mm"]
    assert (mm["base_device_us"], mm["new_device_us"], mm["status"]) == (50.0, 50.0,
                                                                          "unchanged")
    # The kernel level pairs the same rename through data/renames.json (its own rung).
    kernel = result.comparison.operators.set_index("op_type")
    assert "Conv2DBackpropFilterD→Conv2DBackpropFilter" in kernel.index
    assert kernel.loc["Conv2DBackpropFilterD→Conv2DBackpropFilter", "base_total_us"] > 0
    assert result.comparison.framework.modules is None  # no nn.Module events: no module table


def test_an_inserted_op_does_not_shift_the_pairing_of_the_rest(tmp_path):
    add = ("aten::add", "32,16;\r\n32,16", [("aclnnAdd_Add_Add", "Add", 10.0)])
    relu = ("aten::relu", "32,16", [("aclnnRelu_Relu_Relu", "Relu", 4.0)])
    mul = ("aten::mul", "32,16;\r\n32,16", [("aclnnMul_Mul_Mul", "Mul", 8.0)])
    base = write_linked_profile(tmp_path / "base", [[MM, add, MM, mul]])
    new = write_linked_profile(tmp_path / "new", [[MM, add, relu, MM, mul]])
    result, reason = compare_framework(load_run(base), load_run(new))
    assert reason is None
    status = result.operators.set_index("name")["status"]
    assert status.to_dict() == {"aten::relu": "added", "aten::mm": "unchanged",
                                "aten::add": "unchanged", "aten::mul": "unchanged"}
    pairs = result.instances
    matched = pairs.dropna(subset=["base_device_us", "new_device_us"])
    assert list(matched["name"]) == ["aten::mm", "aten::add", "aten::mm", "aten::mul"]
    lone = pairs[pairs["base_device_us"].isna()]
    assert list(lone["name"]) == ["aten::relu"]


def test_no_links_in_one_run_is_reported_not_raised(tmp_path):
    linked = write_linked_profile(tmp_path / "base", [[MM]])
    plain = tmp_path / "new"
    (plain / "rank0_ascend_pt" / OUT).mkdir(parents=True)
    for name in ("kernel_details.csv",):
        source = linked / "rank0_ascend_pt" / OUT / name
        (plain / "rank0_ascend_pt" / OUT / name).write_text(source.read_text())
    result = diff(linked, plain)
    assert result.comparison.framework is None
    assert "new: rank0_ascend_pt: no trace_view.json" in result.comparison.framework_note.text
    assert result.report.to_dict()["framework_ops"] is None


# ---------------------------------------------------------------- building blocks

def _lcs_length(a, b) -> int:
    table = np.zeros((len(a) + 1, len(b) + 1), dtype=int)
    for i, x in enumerate(a):
        for j, y in enumerate(b):
            table[i + 1, j + 1] = table[i, j] + 1 if x == y else max(table[i, j + 1],
                                                                     table[i + 1, j])
    return int(table[-1, -1])


def test_alignment_is_a_longest_common_subsequence():
    rng = random.Random(5)
    for _ in range(300):
        keys = rng.randint(1, 4)
        a = np.array([rng.randrange(keys) for _ in range(rng.randint(0, 24))], dtype=np.int64)
        b = np.array([rng.randrange(keys) for _ in range(rng.randint(0, 24))], dtype=np.int64)
        ia, ib, exact = align(a, b, 60)
        assert exact and len(ia) == len(ib) == _lcs_length(a, b)
        assert (a[ia] == b[ib]).all() and (np.diff(ia) > 0).all() and (np.diff(ib) > 0).all()


def test_alignment_past_its_edit_budget_pairs_by_occurrence():
    a = np.array([0, 1, 2, 3, 0, 1], dtype=np.int64)
    b = np.array([3, 2, 1, 0, 1, 0], dtype=np.int64)
    ia, ib, exact = align(a, b, 2)
    assert not exact  # the k-th 0, 1, 2, 3 of a with the k-th of b
    assert sorted(zip(a[ia].tolist(), ia.tolist(), ib.tolist())) == [
        (0, 0, 3), (0, 4, 5), (1, 1, 2), (1, 5, 4), (2, 2, 1), (3, 3, 0)]


def test_innermost_open_op_of_nested_host_ops():
    # [0,100) holds [10,50) which holds [20,30); [60,90) is a sibling; [100,110) follows
    start = np.array([0, 10, 20, 60, 100])
    end = np.array([100, 50, 30, 90, 110])
    nest = Nesting.of(start, end, np.arange(5))
    times = np.array([5, 15, 25, 30, 55, 70, 100, 120, -1])
    assert nest.innermost(times).tolist() == [0, 1, 2, 1, 0, 3, 4, -1, -1]
    parent = nest.parents()
    by_row = dict(zip(nest.index.tolist(), nest.index[np.maximum(parent, 0)].tolist()))
    assert [by_row[r] if parent[list(nest.index).index(r)] >= 0 else -1
            for r in range(5)] == [-1, 0, 1, 0, -1]
