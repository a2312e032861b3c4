"""Host↔device copies and HBM bandwidth: copy_summary, the db/trace readers, the comparison.

Crafted inputs carry figures computed by hand in the comments; the real-data tests
recompute HBM bandwidth and copy counts straight from the files, independently of the
readers.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest
from conftest import REALDATA, needs_realdata
from profiles import memory_report, texts

from cann_diff.compare import memory
from cann_diff.compare.memory import copy_summary
from cann_diff.read import read_memory
from cann_diff.read.reduce.summary import summarize_ops
from cann_diff.render.markdown import render_memory_markdown
from cann_diff.schema import conform_ops
from cann_diff.vocab.names import copy_direction

MIB = 2**20
GB = 1e9
MSINSIGHT = REALDATA / "Ascend__msinsight" / "test" / "data" / "pytorch"
MINDINSIGHT_PROF = REALDATA / "mindspore-ai__mindinsight" / "tests" / "utils" / "resource" \
    / "profiler"
VLLM = REALDATA / "vllm-project__vllm-ascend"


# --------------------------------------------------------------------------- helpers


def ops_frame(rows: list[tuple]) -> pd.DataFrame:
    """summary.ops of the Run.ops rows (rank, step, op_name, op_type, category, dur_us)."""
    frame = pd.DataFrame(rows, columns=["rank", "step", "op_name", "op_type", "category",
                                        "dur_us"])
    frame["op_type_raw"] = frame["op_type"]
    frame["family"] = frame["op_type"]
    frame["comm_type"] = ""
    frame["core"] = "UNKNOWN"
    frame["start_ns"] = range(len(frame))
    frame["input_shapes"] = ""
    frame["input_dtypes"] = ""
    return summarize_ops(conform_ops(frame))[0]


def snapshot(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def write_db(root: Path, *, copies, hbm, enum=True) -> Path:
    """A db-only rank dir: MEMCPY_INFO (task, bytes, operation id) and HBM
    (timestampNs, hbmId, 'read'|'write', bytes/s)."""
    out = root / "r0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (root / "r0_ascend_pt" / "profiler_info_0.json").write_text("{}")
    connection = sqlite3.connect(out / "ascend_pytorch_profiler_0.db")
    with connection:
        connection.execute("CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT)")
        connection.executemany("INSERT INTO STRING_IDS VALUES (?, ?)",
                               [(376, "read"), (377, "write")])
        connection.execute("CREATE TABLE MEMCPY_INFO (globalTaskId INTEGER, size INTEGER, "
                           "memcpyOperation INTEGER)")
        connection.executemany("INSERT INTO MEMCPY_INFO VALUES (?, ?, ?)", copies)
        if enum:
            connection.execute("CREATE TABLE ENUM_MEMCPY_OPERATION (id INTEGER PRIMARY KEY, "
                               "name TEXT)")
            connection.executemany("INSERT INTO ENUM_MEMCPY_OPERATION VALUES (?, ?)",
                                   [(0, "host to host"), (1, "host to device"),
                                    (2, "device to host"), (3, "device to device")])
        connection.execute("CREATE TABLE HBM (deviceId INTEGER, timestampNs INTEGER, "
                           "bandwidth NUMERIC, hbmId INTEGER, type INTEGER)")
        connection.executemany(
            "INSERT INTO HBM VALUES (0, ?, ?, ?, ?)",
            [(ts, bps, stack, 376 if kind == "read" else 377) for ts, stack, kind, bps in hbm])
    connection.close()
    return root


# base: task 1 listed twice (counted once, 1 MiB), tasks 1+2 host→device (1 + 3 MiB),
# task 3 device→host (2 MiB), task 4 an operation id missing from the enum (unknown,
# 1 MiB), task 5 host→host (other, 1 MiB).
BASE_COPIES = [(1, MIB, 1), (1, MIB, 1), (2, 3 * MIB, 1), (3, 2 * MIB, 2), (4, MIB, 99),
               (5, MIB, 0)]
# new: host→device 6 MiB in one task, device→device 1 MiB.
NEW_COPIES = [(7, 6 * MIB, 1), (8, MIB, 3)]
# base HBM, stacks summed per sample: read 1+3=4, 6+2=8 GB/s → mean 6, peak 8;
# write 1+1=2, 0.5+0.5=1 → mean 1.5, peak 2.
BASE_HBM = [(1000, 0, "read", 1e9), (1000, 1, "read", 3e9), (2000, 0, "read", 6e9),
            (2000, 1, "read", 2e9), (1000, 0, "write", 1e9), (1000, 1, "write", 1e9),
            (2000, 0, "write", 0.5e9), (2000, 1, "write", 0.5e9)]
# new, one stack: read 10, 2, 3 GB/s → mean 5, peak 10; write 3, 1 → mean 2, peak 3.
NEW_HBM = [(1000, 0, "read", 10e9), (2000, 0, "read", 2e9), (3000, 0, "read", 3e9),
           (1000, 0, "write", 3e9), (2000, 0, "write", 1e9)]


# --------------------------------------------------------------------------- copy_summary


def test_copy_summary_counts_per_unit_by_direction():
    ops = ops_frame([
        (0, 1, "MatMul_1", "MatMul", "compute", 50.0),
        (0, 1, "MEMCPY_ASYNC", "MEMCPY_H2D", "memcpy", 10.0),
        (0, 1, "Memcpy DtoH (Device -> Pinned)", "MEMCPY_D2H", "memcpy", 4.0),
        (0, 2, "MEMCPY_ASYNC", "MEMCPY_ASYNC", "memcpy", 6.0),
        (1, 1, "acl_memcpy_host_to_device", "MEMCPY", "memcpy", 20.0),
        (1, 2, "Add_3", "Add", "compute", 1.0),  # a unit without copies still counts
    ])
    got = copy_summary(ops)
    # 4 (rank, step) units; 4 copies, 40 µs → 1 copy and 10 µs per unit.
    assert got["units"] == 4
    assert got["count"] == pytest.approx(1.0)
    assert got["time_us"] == pytest.approx(10.0)
    assert got["directions"] == {
        "host_to_device": {"count": pytest.approx(0.5), "time_us": pytest.approx(7.5)},
        "device_to_host": {"count": pytest.approx(0.25), "time_us": pytest.approx(1.0)},
        "unknown": {"count": pytest.approx(0.25), "time_us": pytest.approx(1.5)},
    }


def test_copy_summary_without_copies_or_steps():
    assert copy_summary(ops_frame([]))["count"] == 0
    no_steps = ops_frame([(0, pd.NA, "MEMCPY_ASYNC", "MEMCPY_ASYNC", "memcpy", 3.0),
                          (0, pd.NA, "MEMCPY_ASYNC", "MEMCPY_ASYNC", "memcpy", 5.0)])
    got = copy_summary(no_steps)
    assert (got["units"], got["count"], got["time_us"]) == (1, 2.0, 8.0)


def test_copy_direction_needs_a_whole_token():
    text = pd.Series(["MEMCPY_H2D", "Memcpy HtoD (Pinned -> Device)", "device to host",
                      "MEMCPY_ASYNC", "MATH2DX", "D2D_copy"])
    assert list(copy_direction(text)) == ["host_to_device", "host_to_device",
                                          "device_to_host", "unknown", "unknown",
                                          "device_to_device"]


# --------------------------------------------------------------------------- crafted db


def test_db_copies_and_hbm_read_by_hand(tmp_path):
    base_dir = write_db(tmp_path / "base", copies=BASE_COPIES, hbm=BASE_HBM)
    new_dir = write_db(tmp_path / "new", copies=NEW_COPIES, hbm=NEW_HBM)
    before = snapshot(tmp_path)
    base, new = read_memory(base_dir), read_memory(new_dir)
    assert snapshot(tmp_path) == before  # no journal, no -wal/-shm, nothing touched

    copies = base.copies.set_index("direction")
    assert copies.loc["host_to_device", "count"] == 2
    assert copies.loc["host_to_device", "bytes"] == 4 * MIB
    assert copies.loc["device_to_host", "bytes"] == 2 * MIB
    assert copies.loc["unknown", "bytes"] == MIB  # id 99: not in the enum
    assert copies.loc["other", "bytes"] == MIB  # host to host
    hbm = base.hbm.groupby("direction")["gbps"]
    assert hbm.mean().to_dict() == pytest.approx({"read": 6.0, "write": 1.5})
    assert hbm.max().to_dict() == pytest.approx({"read": 8.0, "write": 2.0})

    base_ops = copy_summary(ops_frame([(0, 1, "MEMCPY_ASYNC", "MEMCPY_ASYNC", "memcpy", 8.0),
                                       (0, 2, "MEMCPY_ASYNC", "MEMCPY_ASYNC", "memcpy", 4.0)]))
    new_ops = copy_summary(ops_frame([(0, 1, "MEMCPY_ASYNC", "MEMCPY_ASYNC", "memcpy", 9.0)]))
    result = memory_report(base, new, base_copies=base_ops, new_copies=new_ops).to_dict()
    json.dumps(result, allow_nan=False)

    copies = result["copies"]
    assert copies["units"] == {"base": 2, "new": 1}
    rows = {row["direction"]: row for row in copies["directions"]}
    assert list(rows) == ["host_to_device", "device_to_host", "device_to_device", "other",
                          "unknown"]
    assert (rows["host_to_device"]["base_mb"], rows["host_to_device"]["new_mb"],
            rows["host_to_device"]["delta_mb"]) == (4.0, 6.0, 2.0)
    assert (rows["device_to_device"]["base_mb"], rows["device_to_device"]["new_mb"]) == (0, 1)
    # kernel rows name no direction: count and time sit on "unknown"
    assert rows["unknown"]["base_count"] == 1.0 and rows["unknown"]["new_count"] == 1.0
    assert rows["unknown"]["base_time_us"] == 6.0 and rows["unknown"]["new_time_us"] == 9.0
    assert rows["host_to_device"]["base_count"] == 0.0
    total = copies["total"]
    assert (total["base_count"], total["new_count"]) == (1.0, 1.0)
    assert (total["base_time_us"], total["new_time_us"], total["delta_time_us"]) == (6, 9, 3)
    assert total["delta_pct"] == pytest.approx(50.0)
    assert (total["base_mb"], total["new_mb"], total["delta_mb"]) == (8.0, 7.0, -1.0)

    hbm = {row["direction"]: row for row in result["hbm"]["directions"]}
    assert hbm["read"]["base_mean_gbps"] == pytest.approx(6.0)
    assert hbm["read"]["new_mean_gbps"] == pytest.approx(5.0)
    assert hbm["read"]["delta_mean_gbps"] == pytest.approx(-1.0)
    assert hbm["read"]["delta_mean_pct"] == pytest.approx(-100 / 6)
    assert hbm["read"]["base_peak_gbps"] == pytest.approx(8.0)
    assert hbm["read"]["new_peak_gbps"] == pytest.approx(10.0)
    assert hbm["read"]["delta_peak_pct"] == pytest.approx(25.0)
    assert hbm["write"]["base_mean_gbps"] == pytest.approx(1.5)
    assert hbm["write"]["new_mean_gbps"] == pytest.approx(2.0)
    assert hbm["write"]["new_peak_gbps"] == pytest.approx(3.0)
    assert (hbm["read"]["base_samples"], hbm["read"]["new_samples"]) == (2, 3)

    text = render_memory_markdown(memory_report(base, new, base_copies=base_ops,
                                                 new_copies=new_ops), None)
    assert "### Host↔device copies" in text and "### HBM bandwidth" in text
    assert "| host → device " in text and "| read peak " in text
    assert "+25.0 %" in text  # read peak 8 → 10 GB/s


def test_db_without_enum_names_copies_unknown(tmp_path):
    data = read_memory(write_db(tmp_path, copies=[(1, MIB, 1)], hbm=[], enum=False))
    assert data.copies.to_dict("records") == [{"rank": 0, "direction": "unknown",
                                               "count": 1.0, "bytes": float(MIB)}]
    assert data.hbm.empty


def test_keys_are_documented(tmp_path):
    base = read_memory(write_db(tmp_path / "b", copies=BASE_COPIES, hbm=BASE_HBM))
    result = memory_report(base, base, base_copies=copy_summary(ops_frame([])),
                            new_copies=None).to_dict()
    keys = set(result["copies"]) | set(result["copies"]["total"]) \
        | set(result["hbm"]) | set(result["hbm"]["directions"][0])
    doc = memory.__doc__
    assert sorted(k for k in keys if f'"{k}"' not in doc and f"``{k}``" not in doc) == []


# --------------------------------------------------------------------------- HBM presence


def test_no_hbm_anywhere_is_silent(tmp_path):
    data = read_memory(write_db(tmp_path, copies=[], hbm=[]))
    result = memory_report(data, data)
    assert result.to_dict()["hbm"] is None and result.to_dict()["copies"] is None
    assert not any("HBM" in w.text for w in result.warnings)
    text = render_memory_markdown(result, None)
    assert "HBM" not in text and "copies" not in text


def test_hbm_on_one_side_only_is_a_warning(tmp_path):
    sampled = read_memory(write_db(tmp_path / "a", copies=[], hbm=BASE_HBM))
    unsampled = read_memory(write_db(tmp_path / "b", copies=[], hbm=[]))
    result = memory_report(sampled, unsampled)
    read = result.to_dict()["hbm"]["directions"][0]
    assert read["base_mean_gbps"] == pytest.approx(6.0)
    assert read["new_mean_gbps"] is None and read["delta_mean_gbps"] is None
    assert "HBM bandwidth sampled in the base run only; not compared" in texts(result.warnings)
    assert "| read mean  |" in render_memory_markdown(result, None)


def test_trace_view_hbm_counters(tmp_path):
    """Counters in MB/s (1024²-byte MB), stacks summed; metadata after the events; the
    counters of other processes are ignored."""
    out = tmp_path / "r0_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (tmp_path / "r0_ascend_pt" / "profiler_info_0.json").write_text("{}")
    events = [
        {"name": "HBM 0/Read", "ts": "10.000", "pid": 7, "tid": 0, "ph": "C",
         "args": {"Read(MB/s)": 1000.0}},
        {"name": "HBM 1/Read", "ts": "10.000", "pid": 7, "tid": 0, "ph": "C",
         "args": {"Read(MB/s)": 3000.0}},
        {"name": "HBM 0/Read", "ts": "20.000", "pid": 7, "tid": 0, "ph": "C",
         "args": {"Read(MB/s)": 2000}},
        {"name": "HBM 0/Write", "ts": "10.000", "pid": 7, "tid": 0, "ph": "C",
         "args": {"Write(MB/s)": 500.0}},
        {"name": "APP/DDR", "ts": "10.000", "pid": 8, "tid": 0, "ph": "C",
         "args": {"KB": 1e12}},
        {"name": "process_name", "pid": 8, "tid": 0, "ph": "M", "args": {"name": "NPU MEM"}},
        {"name": "process_name", "pid": 7, "tid": 0, "ph": "M", "args": {"name": "HBM"}},
    ]
    (out / "trace_view.json").write_text(json.dumps(events))
    (out / "memory_record.csv").write_text("Component,Timestamp(us),Total Allocated(MB),"
                                           "Total Reserved(MB),Device Type\n")
    # The kernels come from kernel_details.csv, as in a real text export: the trace is
    # read for its HBM counters only.
    (out / "kernel_details.csv").write_text("Name,Type,Accelerator Core,Start Time(us),"
                                            "Duration(us)\nMatMul,MatMul,AI_CORE,10.000,1\n")
    hbm = read_memory(tmp_path).hbm.groupby("direction")["gbps"]
    scale = MIB / GB
    # read: 4000 and 2000 MB/s → mean 3000, peak 4000; write: one sample of 500.
    assert hbm.mean().to_dict() == pytest.approx({"read": 3000 * scale, "write": 500 * scale})
    assert hbm.max().to_dict() == pytest.approx({"read": 4000 * scale, "write": 500 * scale})


# --------------------------------------------------------------------------- real data


def trace_hbm_by_hand(path: Path) -> dict[str, list[float]]:
    """GB/s per sample and direction, straight from a trace_view.json."""
    events = json.loads(path.read_text())
    pids = {e["pid"] for e in events if e.get("ph") == "M" and e.get("name") == "process_name"
            and e["args"].get("name") == "HBM"}
    sums = defaultdict(float)
    for e in events:
        if e.get("ph") == "C" and e.get("pid") in pids:
            direction = e["name"].split("/")[-1].lower()
            sums[(direction, e["ts"])] += sum(e["args"].values()) * MIB / GB
    out = defaultdict(list)
    for (direction, _), value in sums.items():
        out[direction].append(value)
    return out


def db_hbm_by_hand(path: Path) -> dict[str, list[float]]:
    connection = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    rows = connection.execute(
        "SELECT s.value, SUM(h.bandwidth) FROM HBM h JOIN STRING_IDS s ON s.id = h.type "
        "GROUP BY h.deviceId, s.value, h.timestampNs").fetchall()
    connection.close()
    out = defaultdict(list)
    for direction, bps in rows:
        out[direction].append(bps / GB)
    return out


@pytest.mark.slow
@needs_realdata
@pytest.mark.parametrize("level", ["level1", "level2"])
def test_real_hbm_from_trace_view_and_db(level):
    text_rank = MSINSIGHT / "text" / level / "rank0_ascend_pt"
    db_rank = MSINSIGHT / "db" / level / "rank0_ascend_pt"
    for rank, by_hand in ((text_rank, trace_hbm_by_hand(
            text_rank / "ASCEND_PROFILER_OUTPUT" / "trace_view.json")),
                          (db_rank, db_hbm_by_hand(
            next((db_rank / "ASCEND_PROFILER_OUTPUT").glob("ascend_pytorch_profiler_*.db"))))):
        assert set(by_hand) == {"read", "write"}
        before = snapshot(rank)
        data = read_memory(rank)
        assert snapshot(rank) == before
        result = memory_report(data, data).to_dict()["hbm"]["directions"]
        for row in result:
            samples = by_hand[row["direction"]]
            assert row["base_samples"] == len(samples)
            assert row["base_mean_gbps"] == pytest.approx(sum(samples) / len(samples))
            assert row["base_peak_gbps"] == pytest.approx(max(samples))
            assert row["delta_mean_gbps"] == 0


@needs_realdata
def test_real_msprof_copies_counted_by_the_pipeline():
    """mindinsight's msprof PROF dirs hold MEMCPY_ASYNC device tasks (no direction, no db):
    the pipeline counts them per step like the timeline file says."""
    from cann_diff.pipeline import diff

    base, new = sorted(MINDINSIGHT_PROF.glob("PROF_*"))[:2]
    by_hand = []
    for prof in (base, new):
        events = json.loads(next(prof.rglob("msprof_*.json")).read_text())
        copies = [e for e in events if e.get("ph") == "X" and e.get("name") == "MEMCPY_ASYNC"]
        by_hand.append((len(copies), sum(float(e["dur"]) for e in copies)))
    result = diff(base, new)
    assert result.report.memory is not None
    copies = result.report.memory.to_dict()["copies"]
    assert copies["units"] == {"base": 1, "new": 1}  # one rank, no steps
    total = copies["total"]
    assert (total["base_count"], total["new_count"]) == (by_hand[0][0], by_hand[1][0])
    assert total["base_time_us"] == pytest.approx(by_hand[0][1])
    assert total["new_time_us"] == pytest.approx(by_hand[1][1])
    assert total["base_mb"] is None  # no db: bytes unknown
    assert [row["direction"] for row in copies["directions"]] == ["unknown"]


@needs_realdata
def test_real_vllm_ascend_op_summary_copies():
    """The vllm-ascend msprof PROF dirs: copies counted when op_summary has MEMCPY rows."""
    from cann_diff.pipeline import diff

    summaries = sorted(VLLM.rglob("op_summary_*.csv"))
    if not summaries:
        pytest.skip("no vllm-ascend op_summary files in realdata")
    with_copies = [p for p in summaries if "MEMCPY" in p.read_text(errors="replace").upper()]
    if not with_copies:
        pytest.skip(f"none of the {len(summaries)} vllm-ascend op_summary files has a MEMCPY "
                    "row (checked: 0 copies there)")
    prof = next(p for p in with_copies[0].parents if p.name.startswith("PROF_0"))
    result = diff(prof, prof)
    assert result.report.memory is not None and result.report.memory.to_dict()["copies"]["total"][
        "base_count"] > 0
