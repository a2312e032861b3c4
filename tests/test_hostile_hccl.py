"""HCCL task and op rows with impossible times or ids: dropped, counted, never summed.

Each case crafts one rank (trace_view.json or profiler db, through the builders of
test_hccl_tasks.py) and works out by hand what the collectives' split must be once the
impossible rows are left out (docs/formats.md §14.2: transfer = union over planes of the
data-moving tasks, wait = union of Notify_Wait less the transfer union, idle = elapsed
less the union of all tasks), and which warning must say so: the rank, the plane(s), how
many rows and why.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import test_hccl_tasks as tasks
from click.testing import CliRunner

from cann_diff.cli import main
from cann_diff.read import load_run

T0, MS, OUT = tasks.T0, tasks.MS, tasks.OUT
START = T0 + MS  # every op starts here or later; times below in ms from START
US = MS // 1000


def at(ms: float) -> int:
    return START + round(ms * MS)


def trace_rank(root: Path, rank: int, ops: list[tuple[str, float, float]],
               plane_tasks: list[tuple[int, str, float, float, int]]) -> Path:
    """A trace-only rank: ``ops`` (name, start, end ms), ``plane_tasks`` (plane, type,
    start, end ms, bytes; over HCCS when bytes > 0), one step of kernels around them."""
    events = [*tasks.metadata(), tasks.step(1, T0, T0 + 200 * MS),
              tasks.kernel(T0, T0 + MS // 2), tasks.kernel(T0 + 190 * MS, T0 + 191 * MS)]
    events += [tasks.hcom(name, at(a), at(b)) for name, a, b in ops]
    events += [tasks.task(plane, kind, at(a), at(b), size, "HCCS" if size else "INVALID_TYPE")
               for plane, kind, a, b, size in plane_tasks]
    return tasks.write_trace_rank(root, rank, events)


def db_rank(root: Path, rank: int, ops: list[tuple[str, float, float]],
            op_tasks: list[tuple[int, int, str, float | None, float | None, int]]) -> Path:
    """A db rank: ``ops`` (name, start, end ms), ``op_tasks`` (op index, plane, type,
    start, end ms or None for NULL, bytes; over HCCS when bytes > 0)."""
    def ns(ms: float | None) -> int | None:
        return None if ms is None else at(ms)

    return tasks.write_db_rank(
        root, rank, [(T0, T0 + MS // 2), (T0 + 190 * MS, T0 + 191 * MS)],
        [(name, at(a), at(b), "MESH-RING") for name, a, b in ops],
        [(op, plane, ns(a), ns(b), kind, size, "HCCS" if size else "INVALID_TYPE")
         for op, plane, kind, a, b, size in op_tasks],
        [(1, T0, T0 + 200 * MS)])


def hccl_warnings(run) -> list[str]:
    return [note.text for note in run.warnings if "HCCL" in note.text]


def row(run, op: int = 0) -> dict:
    return run.collectives.iloc[op].to_dict()


def check(found: dict, expected: dict) -> None:
    for key, value in expected.items():
        assert found[key] == pytest.approx(value, abs=1e-6), key


# ---------------------------------------------------------------- 1. huge plane ids

# One 10 ms op. Plane 0: Notify_Wait 0–6, Memcpy 1–3 (1000 B); plane P: Notify_Wait 0–6,
# Memcpy 5–7 (2000 B).
#   transfer = |[1,3] ∪ [5,7]| = 4 ms; wait = |[0,6]| − |[0,6] ∩ transfer| = 6 − 3 = 3 ms
#   busy = |[0,7]| = 7 → idle 3 ms, other 0; two planes; both wait 6 ms: the critical
#   plane is the lower id; link busy = 2 (plane 0) + 2 (plane P) = 4 ms; 3000 B.
def huge_plane_tasks(plane: int) -> list:
    return [(0, 0, "Notify_Wait", 0, 6, 0), (0, 0, "Memcpy", 1, 3, 1000),
            (0, plane, "Notify_Wait", 0, 6, 0), (0, plane, "Memcpy", 5, 7, 2000)]


@pytest.mark.parametrize("plane", [4294967295, 2**62, -5])
def test_a_plane_id_is_a_label_never_an_array_size(tmp_path, plane):
    db_rank(tmp_path / "run", 0, [("hcom_allReduce__1_0_1", 0, 10)], huge_plane_tasks(plane))
    run = load_run(tmp_path / "run")
    check(row(run), {"elapsed_us": 10_000.0, "transfer_us": 4_000.0, "wait_us": 3_000.0,
                     "idle_us": 3_000.0, "other_us": 0.0, "planes": 2,
                     "critical_plane": min(0, plane), "critical_wait_us": 6_000.0,
                     "link_busy_us": 4_000.0, "bytes": 3000})
    assert hccl_warnings(run) == []


def test_the_cli_reports_a_plane_4294967295_db(tmp_path):
    """Before: MemoryError (exit 3). Now exit 0 and the split section in report.md."""
    for side in ("base", "new"):
        db_rank(tmp_path / side, 0, [("hcom_allReduce__1_0_1", 0, 10)],
                huge_plane_tasks(4294967295))
    result = CliRunner().invoke(main, [str(tmp_path / "base"), str(tmp_path / "new"), "-o",
                                       str(tmp_path / "out"), "--no-charts", "--no-html"])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    report = (tmp_path / "out" / "report.md").read_text("utf-8")
    assert "Where the collectives' time went" in report
    # transfer 4 ms, wait 3 ms, idle 3 ms per step on both sides
    assert "4.00 → 4.00" in report and "3.00 → 3.00" in report


# ---------------------------------------------------------------- 2. negative task durations

# Rank 3, one 100 µs op. Plane 1 copies 10–20 µs and 40–50 µs (100 B each) over HCCS;
# plane 2 "copies" from 60 µs for −10 µs (300 B). Left out: transfer = link transfer =
# 20 µs (not 30, and not the 300 B), idle 80 µs, one plane.
NEGATIVE = [(1, "Memcpy", 0.010, 0.020, 100), (1, "Memcpy", 0.040, 0.050, 100),
            (2, "Memcpy", 0.060, 0.050, 300)]


@pytest.mark.parametrize("layout", ["trace only", "beside kernel_details.csv"])
def test_a_negative_task_duration_is_dropped_with_a_warning(tmp_path, layout):
    folder = trace_rank(tmp_path / "run", 3, [("hcom_allReduce__1_0_1", 0, 0.1)], NEGATIVE)
    if layout != "trace only":  # the tasks come from the host-side read of the trace
        rows = [["Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)",
                 "Duration(us)"],
                ["1", "aclnnAdd_AddAiCore_Add", "Add", "AI_CORE", tasks.us(T0), "500.0"],
                ["1", "hcom_allReduce__1_0_1", "hcom_allReduce_", "HCCL", tasks.us(at(0)),
                 "100.0"],
                ["1", "aclnnAdd_AddAiCore_Add", "Add", "AI_CORE", tasks.us(T0 + 190 * MS),
                 "1000.0"]]
        with open(folder / OUT / "kernel_details.csv", "w", newline="") as handle:
            csv.writer(handle).writerows(rows)
    run = load_run(tmp_path / "run")
    check(row(run), {"elapsed_us": 100.0, "transfer_us": 20.0, "link_transfer_us": 20.0,
                     "idle_us": 80.0, "bytes": 200, "link_bytes": 200, "planes": 1})
    assert hccl_warnings(run) == [  # once, although the rank's data was built twice
        "rank 3, plane 2: 1 HCCL task(s) dropped: end before start (trace_view.json; not "
        "in the collectives' split)"]


# ---------------------------------------------------------------- 3. outside the windows

def test_trace_tasks_in_no_window_are_counted(tmp_path):
    """Ops 0–10 and 20–30 ms. Copies 2–4 (op 0), 22–25 (op 1); a copy 12–14 on plane 0
    and a wait 35–36 on plane 1 lie in no window: op 0 transfer 2 ms, idle 8; op 1
    transfer 3 ms, idle 7; the other two dropped, counted per plane."""
    trace_rank(tmp_path / "run", 0, [("hcom_allReduce__1_0_1", 0, 10),
                                     ("hcom_allReduce__1_1_1", 20, 30)],
               [(0, "Memcpy", 2, 4, 8), (0, "Memcpy", 22, 25, 8), (0, "Memcpy", 12, 14, 8),
                (1, "Notify_Wait", 35, 36, 0)])
    run = load_run(tmp_path / "run")
    check(row(run, 0), {"transfer_us": 2_000.0, "idle_us": 8_000.0, "bytes": 8})
    check(row(run, 1), {"transfer_us": 3_000.0, "idle_us": 7_000.0, "bytes": 8})
    assert hccl_warnings(run) == [
        "rank 0, planes 0 (1), 1 (1): 2 HCCL task(s) dropped: in no op's time window "
        "(trace_view.json; not in the collectives' split)"]


def test_an_op_whose_tasks_all_fall_elsewhere_says_its_split_is_idle(tmp_path):
    """Every task 50 ms after the one 10 ms op: the op keeps no task (all idle) and the
    warnings say why, instead of a silent 100 % idle."""
    trace_rank(tmp_path / "run", 0, [("hcom_allReduce__1_0_1", 0, 10)],
               [(0, "Memcpy", 50, 52, 8), (0, "Notify_Wait", 52, 53, 0),
                (4, "Memcpy", 50, 51, 8)])
    run = load_run(tmp_path / "run")
    check(row(run), {"elapsed_us": 10_000.0, "idle_us": 10_000.0, "transfer_us": 0.0,
                     "planes": 0})
    assert hccl_warnings(run) == [
        "rank 0, planes 0 (2), 4 (1): 3 HCCL task(s) dropped: in no op's time window "
        "(trace_view.json; not in the collectives' split)",
        "rank 0: 1 of 1 HCCL op(s) hold no task once those are dropped (trace_view.json): "
        "their split shows them all idle"]


def test_db_tasks_outside_the_op_their_op_id_names_are_dropped(tmp_path):
    """Ops 0–10 and 20–30 ms. Op 0's tasks: a copy 2–4, one 8–12 (partly inside: clipped
    to 8–10) and one 22–25 on plane 1 (wholly outside op 0, though inside op 1's window:
    dropped, never moved to op 1). Op 1: a copy 21–23. Op 0 transfer = |[2,4] ∪ [8,10]| =
    4 ms (before: 4 − 12 = −8 ms), op 1 transfer 2 ms."""
    db_rank(tmp_path / "run", 0, [("hcom_allReduce__1_0_1", 0, 10),
                                  ("hcom_allReduce__1_1_1", 20, 30)],
            [(0, 0, "Memcpy", 2, 4, 8), (0, 0, "Memcpy", 8, 12, 8), (0, 1, "Memcpy", 22, 25, 8),
             (1, 0, "Memcpy", 21, 23, 8)])
    run = load_run(tmp_path / "run")
    check(row(run, 0), {"transfer_us": 4_000.0, "idle_us": 6_000.0, "bytes": 16,
                        "planes": 1})
    check(row(run, 1), {"transfer_us": 2_000.0, "idle_us": 8_000.0, "bytes": 8})
    assert hccl_warnings(run) == [
        "rank 0, plane 1: 1 HCCL task(s) dropped: outside their op's time window "
        "(ascend_pytorch_profiler_0.db; not in the collectives' split)"]


# ---------------------------------------------------------------- 4. db end before start

def test_db_tasks_ending_before_they_start_or_untimed_are_dropped(tmp_path):
    """One 10 ms op. Plane 0 waits 0–6 and copies 6–8 ms; plane 1 "waits" from 9 to 1 ms,
    planes 2 and 3 each hold a wait without a start, or without an end (NULL). Kept:
    transfer 2, wait 6, idle 2 ms, one plane (before: the backward wait counted a plane,
    the NULL start read as 0 ns)."""
    db_rank(tmp_path / "run", 0, [("hcom_allReduce__1_0_1", 0, 10)],
            [(0, 0, "Notify_Wait", 0, 6, 0), (0, 0, "Memcpy", 6, 8, 64),
             (0, 1, "Notify_Wait", 9, 1, 0), (0, 2, "Notify_Wait", None, 5, 0),
             (0, 3, "Notify_Wait", 3, None, 0)])
    run = load_run(tmp_path / "run")
    check(row(run), {"transfer_us": 2_000.0, "wait_us": 6_000.0, "idle_us": 2_000.0,
                     "other_us": 0.0, "planes": 1, "critical_plane": 0})
    file = "(ascend_pytorch_profiler_0.db; not in the collectives' split)"
    assert hccl_warnings(run) == [
        f"rank 0, planes 2 (1), 3 (1): 2 HCCL task(s) dropped: time missing or not a number "
        f"{file}",
        f"rank 0, plane 1: 1 HCCL task(s) dropped: end before start {file}"]


def test_the_warning_reaches_report_md(tmp_path):
    for side in ("base", "new"):
        db_rank(tmp_path / side, 0, [("hcom_allReduce__1_0_1", 0, 10)],
                [(0, 0, "Notify_Wait", 0, 6, 0), (0, 0, "Memcpy", 6, 8, 64),
                 (0, 1, "Notify_Wait", 9, 1, 0)])
    result = CliRunner().invoke(main, [str(tmp_path / "base"), str(tmp_path / "new"), "-o",
                                       str(tmp_path / "out"), "--no-charts", "--no-html"])
    assert result.exit_code == 0, result.output
    report = (tmp_path / "out" / "report.md").read_text("utf-8")
    for side in ("base", "new"):
        assert (f"⚠ {side}: rank 0, plane 1: 1 HCCL task(s) dropped: end before start"
                in report)


# ---------------------------------------------------------------- 5. negative op durations

def test_a_trace_op_ending_before_it_starts_is_dropped(tmp_path):
    """Op A 0 → −10 ms (a negative dur), op B 20–30 ms. A and its copy 2–4 ms (now in no
    window) go; B keeps its split: copy 21–24 ms, transfer 3 ms, idle 7 ms, seq 0."""
    trace_rank(tmp_path / "run", 0, [("hcom_allReduce__1_0_1", 0, -10),
                                     ("hcom_allReduce__1_1_1", 20, 30)],
               [(0, "Memcpy", 2, 4, 8), (0, "Memcpy", 21, 24, 8)])
    run = load_run(tmp_path / "run")
    assert run.collectives["op_name"].tolist() == ["hcom_allReduce__1_1_1"]
    check(row(run), {"elapsed_us": 10_000.0, "transfer_us": 3_000.0, "idle_us": 7_000.0,
                     "seq": 0})
    assert hccl_warnings(run) == [
        "rank 0: 1 HCCL op(s) dropped: end before start (hcom_allReduce__1_0_1; "
        "trace_view.json; not in the collectives' split)",
        "rank 0, plane 0: 1 HCCL task(s) dropped: in no op's time window (trace_view.json; "
        "not in the collectives' split)"]


def test_a_db_op_ending_before_it_starts_is_dropped_with_its_tasks(tmp_path):
    """Op A 10 → 0 ms (endNs < startNs) with two tasks, op B 20–30 ms with a copy 20–25:
    A's tasks go with it (counted), B: transfer 5 ms, idle 5 ms."""
    db_rank(tmp_path / "run", 0, [("hcom_allReduce__1_0_1", 10, 0),
                                  ("hcom_allReduce__1_1_1", 20, 30)],
            [(0, 0, "Memcpy", 2, 4, 8), (0, 5, "Notify_Wait", 1, 2, 0),
             (1, 0, "Memcpy", 20, 25, 8)])
    run = load_run(tmp_path / "run")
    assert run.collectives["op_name"].tolist() == ["hcom_allReduce__1_1_1"]
    check(row(run), {"elapsed_us": 10_000.0, "transfer_us": 5_000.0, "idle_us": 5_000.0})
    file = "ascend_pytorch_profiler_0.db; not in the collectives' split"
    assert hccl_warnings(run) == [
        f"rank 0: 1 HCCL op(s) dropped: end before start (hcom_allReduce__1_0_1; {file})",
        f"rank 0, planes 0 (1), 5 (1): 2 HCCL task(s) dropped: their op was dropped "
        f"({file})"]
