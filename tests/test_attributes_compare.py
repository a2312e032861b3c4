"""Why each operator changed (docs/design.md "Why operators changed"): attributes and
pipes compared per key, the five findings, and what report.json carries.

* synthetic summaries with answers worked out by hand: the modal value and its share,
  the change rule (a mixed key whose mode flips on noise does not change; a bias input
  is no format change), kernel names without instance numbers, pipe ratios weighted by
  duration, the why text;
* crafted profiles (torch_npu text, db and msprof layouts), each with one change and its
  known answer: a MatMul shape whose block dim halved (+100 %) → ``placement-changed``
  naming it, in the compute sentence too; an op moved to AI_CPU → ``aicpu-fallback``;
  ND → NZ with a TransData inserted → ``format-changed`` carrying the TransData's time;
  static → dynamic → ``dynamic-shape``; the same type with a new kernel name →
  ``kernel-changed``; A/A pairs with a key that mixes two block dims → none of the five;
* the real 910A → 910B pair: TransData's core change, MatMul's block dim and format
  change, computed here from kernel_details.csv with pandas, are in report.json.
"""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import DATA, REALDATA, needs_realdata
from profiles import Kernel, aclnn, write_profile

from cann_diff.compare.attributes import (
    KERNEL_ITSELF,
    bound_phrases,
    find_changes,
    implementation_name,
    modal_values,
    normalized_value,
    side_cells,
    side_pipes,
    why,
)
from cann_diff.compare.comparability import comparability
from cann_diff.findings.story import comparability_sentence
from cann_diff.match import Matched
from cann_diff.pipeline import compare_runs, diff
from cann_diff.read import load_run
from cann_diff.schema import ATTRIBUTES, PIPES, RunSummary

MINE = ("aicpu-fallback", "kernel-changed", "placement-changed", "format-changed",
        "dynamic-shape")
STEPS = (1, 2, 3, 4, 5)
OUT = "ASCEND_PROFILER_OUTPUT"


# ---------------------------------------------------------------- synthetic summaries


def summary(rows: list[tuple], pipes: list[tuple] | None = None) -> RunSummary:
    """A summary holding only attributes (row, attribute, value, count, total_us) and,
    optionally, pipes (row, pmu_us, {pipe: ratio × µs})."""
    attributes = pd.DataFrame(rows, columns=["row", "attribute", "value", "count",
                                             "total_us"])
    frame = None
    if pipes is not None:
        frame = pd.DataFrame([{"row": r, "pmu_us": us, **{p: sums.get(p, np.nan)
                                                          for p in PIPES}}
                              for r, us, sums in pipes])
    return RunSummary(pd.DataFrame(), pd.DataFrame(), pd.DataFrame(), attributes=attributes,
                      pipes=frame)


def matched(base_keys: list[int], new_keys: list[int]) -> Matched:
    return Matched(pd.DataFrame(), np.array(base_keys), np.array(new_keys))


def changes_of(base: RunSummary, new: RunSummary, keys: Matched) -> pd.DataFrame:
    base_cells, new_cells, texts = side_cells(base, new, keys)
    return find_changes(base_cells, new_cells, texts)


def test_the_modal_value_is_the_value_of_most_kernel_time_with_its_share():
    # Key 0 (rows 0 and 1): block dim 32 on 12 kernels (120 µs) and 16 on 1 (10 µs): the
    # mode is 32, holding 120/130 of the time and 12 of 13 kernels. Key 1: 8 on 3 kernels
    # of 10 µs each against 4 on 1 kernel of 40 µs: time decides, 4 (40 of 70 µs).
    base = summary([(0, "block_dim", "32", 12, 120.0), (1, "block_dim", "16", 1, 10.0),
                    (2, "block_dim", "8", 3, 30.0), (2, "block_dim", "4", 1, 40.0)])
    cells, _, texts = side_cells(base, base, matched([0, 0, 1], [0, 0, 1]))
    modes = modal_values(cells)
    got = {int(c // len(ATTRIBUTES)): (texts[v], s, n, k) for c, v, s, n, k in zip(
        modes.cell, modes.value, modes.share, modes.count, modes.kernels)}
    assert got[0] == ("32", pytest.approx(120 / 130), 12, 13)
    assert got[1] == ("4", pytest.approx(40 / 70), 1, 4)


def test_a_change_needs_another_mode_holding_half_of_the_time():
    # Key 0: 32 (12 kernels, 120 µs) + 16 (1, 10 µs) → 16 on 9 kernels: the new mode
    # holds all of the time where base gave it 10/130: moved ½(|0 − 120/130| + |1 −
    # 10/130|) = 120/130. Key 1: a mixed key, 32 51 µs / 16 49 µs → 32 49 µs / 16 51 µs:
    # the mode flips, but only 2 % of the time moved. Key 2: 8 → 8 (no change).
    base = summary([(0, "block_dim", "32", 12, 120.0), (0, "block_dim", "16", 1, 10.0),
                    (1, "block_dim", "32", 1, 51.0), (1, "block_dim", "16", 1, 49.0),
                    (2, "block_dim", "8", 2, 20.0)])
    new = summary([(0, "block_dim", "16", 9, 90.0),
                   (1, "block_dim", "32", 1, 49.0), (1, "block_dim", "16", 1, 51.0),
                   (2, "block_dim", "8", 2, 25.0)])
    changes = changes_of(base, new, matched([0, 1, 2], [0, 1, 2]))
    assert changes[["key_id", "attribute", "base", "new"]].values.tolist() == \
        [[0, "block_dim", "32", "16"]]
    assert changes["moved_share"].iloc[0] == pytest.approx(120 / 130)


def test_formats_compare_over_the_inputs_both_sides_have():
    # Key 0: ND;ND → ND;ND;ND (a bias input taken in new): no format change. Key 1:
    # FRACTAL_NZ;FRACTAL_NZ → FORMAT_ND;FORMAT_ND;FORMAT_ND: changed, shown as read.
    # Key 2: NC1HWC0 → NC1HWC0:1 (a sub-format): no change.
    base = summary([(0, "input_formats", "ND;ND", 1, 1.0),
                    (1, "input_formats", "FRACTAL_NZ;FRACTAL_NZ", 1, 1.0),
                    (2, "input_formats", "NC1HWC0", 1, 1.0)])
    new = summary([(0, "input_formats", "ND;ND;ND", 1, 1.0),
                   (1, "input_formats", "FORMAT_ND;FORMAT_ND;FORMAT_ND", 1, 1.0),
                   (2, "input_formats", "NC1HWC0:1", 1, 1.0)])
    changes = changes_of(base, new, matched([0, 1, 2], [0, 1, 2]))
    assert changes[["key_id", "base", "new"]].values.tolist() == \
        [[1, "FRACTAL_NZ;FRACTAL_NZ", "ND;ND;ND"]]


def test_values_are_compared_as_normalized_text():
    assert implementation_name("MatMul28") == "MatMul"
    assert implementation_name("trans_TransData_17") == "trans_TransData"
    assert implementation_name("atomic_memset-1_18_186609_1") == "atomic_memset"
    assert implementation_name("LogSoftmaxV2") == "LogSoftmaxV2"
    assert implementation_name("aclnnMm_MatMulCommon_MatMulV2") == \
        "aclnnMm_MatMulCommon_MatMulV2"
    assert normalized_value("block_dim", 32.0) == "32"
    assert normalized_value("hf32", "no") == "NO"
    assert normalized_value("op_state", "Static") == "static"
    assert normalized_value("input_dtypes", "DT_BF16;DT_FLOAT") == "BF16;FLOAT"
    assert normalized_value("core", "N/A") is None
    assert normalized_value("block_dim", None) is None


def test_kernel_instances_and_unrecorded_values_change_nothing():
    # MatMul28 and MatMul34 in base, MatMul5 in new: one implementation. N/A on one side
    # records nothing: a key recorded on one side only has no change.
    base = summary([(0, "implementation", "MatMul28", 1, 10.0),
                    (0, "implementation", "MatMul34", 1, 10.0), (1, "core", "AI_CORE", 1, 5.0)])
    new = summary([(0, "implementation", "MatMul5", 2, 30.0), (1, "core", "N/A", 1, 5.0)])
    assert changes_of(base, new, matched([0, 1], [0, 1])).empty


def test_pipe_ratios_weigh_each_row_by_its_duration_and_the_largest_bounds():
    # Key 0 = rows 0 and 1: row 0 100 µs at MTE2 0.4 (40 µs), cube 0.5 (50 µs); row 1
    # 300 µs at MTE2 0.8 (240 µs), cube 0.1 (30 µs): MTE2 (40 + 240) / 400 = 0.70, cube
    # 80 / 400 = 0.20: memory-bound. Key 1: no ratio above 0, no bound.
    pipes = side_pipes(summary([], [(0, 100.0, {"mte2": 40.0, "cube": 50.0}),
                                    (1, 300.0, {"mte2": 240.0, "cube": 30.0}),
                                    (2, 50.0, {"mte2": 0.0})]), np.array([0, 0, 1]))
    assert pipes.loc[0, "pmu_us"] == pytest.approx(400.0)
    assert pipes.loc[0, "mte2"] == pytest.approx(0.70)
    assert pipes.loc[0, "cube"] == pytest.approx(0.20)
    assert np.isnan(pipes.loc[0, "vector"])
    assert pipes.loc[0, "bound"] == "mte2" and pd.isna(pipes.loc[1, "bound"])


def test_a_pipe_one_side_does_not_record_shows_as_a_dash_not_nan():
    # 910A counters have no fixpipe: a 910B key fixpipe-bound at 0.82 whose 910A twin was
    # MTE3-bound says so with "—" for the unrecorded base ratio.
    table = pd.DataFrame({"bound_pipe": ["fixpipe"], "base_bound": ["mte3"],
                          "new_bound": ["fixpipe"], "base_pipe_ratio": [np.nan],
                          "new_pipe_ratio": [0.82]}, index=[7])
    assert bound_phrases(table).loc[7] == "MTE3-bound → fixpipe-bound (fixpipe —→0.82)"


# ---------------------------------------------------------------- crafted profiles

PMU_COLUMNS = ["aicore_time(us)", "aic_mac_ratio", "aic_mte2_ratio"]


def rewrite(run: Path, rule) -> None:
    """Each rank's kernel_details.csv with every row passed through ``rule(row)`` (a dict
    by header, updated in place); PMU columns are added (N/A unless the rule sets them)."""
    for path in Path(run).glob(f"*/{OUT}/kernel_details.csv"):
        with open(path, newline="") as handle:
            rows = list(csv.reader(handle))
        header = rows[0] + [c for c in PMU_COLUMNS if c not in rows[0]]
        records = [dict(zip(header, row + ["N/A"] * (len(header) - len(row))))
                   for row in rows[1:]]
        for record in records:
            rule(record)
        with open(path, "w", newline="") as handle:
            writer = csv.writer(handle, lineterminator="\r\n")
            writer.writerow(header)
            writer.writerows([[r[c] for c in header] for r in records])


def crafted(root: Path, label: str, ops: list, rule, *, seed: int, noise: float = 0.005,
            steps=STEPS) -> Path:
    run = write_profile(root, label, ops, steps=steps, noise=noise, seed=seed).path
    rewrite(run, rule)
    return run


def kernel_rows(run: Path) -> list[dict]:
    """The kernel rows of a crafted run (one rank), as csv gives them."""
    [path] = Path(run).glob(f"*/{OUT}/kernel_details.csv")
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def as_db(text_run: Path, out: Path) -> Path:
    """A crafted text run written again as a torch_npu db export: TASK ⨝ COMPUTE_TASK_INFO
    with blockDim, opState, inputFormats and hf32Eligible, TASK_PMU_INFO for the PMU
    columns (names through STRING_IDS, busy time in ns), STEP_TIME windows."""
    [rank_dir] = [p for p in Path(text_run).iterdir() if p.is_dir()]
    rows = kernel_rows(text_run)
    folder = out / rank_dir.name / OUT
    folder.mkdir(parents=True)
    info = next(rank_dir.glob("profiler_info_*.json"))
    (out / rank_dir.name / info.name).write_text(info.read_text())
    strings: dict[str, int] = {}

    def sid(text: str) -> int:
        return strings.setdefault(text, len(strings) + 1)

    with sqlite3.connect(folder / "ascend_pytorch_profiler_0.db") as conn:
        conn.executescript("""
            CREATE TABLE STRING_IDS(id INTEGER PRIMARY KEY, value TEXT);
            CREATE TABLE TASK(startNs INTEGER, endNs INTEGER, deviceId INTEGER,
                              globalTaskId INTEGER);
            CREATE TABLE COMPUTE_TASK_INFO(name INTEGER, globalTaskId INTEGER,
                              taskType INTEGER, opType INTEGER, inputShapes INTEGER,
                              inputDataTypes INTEGER, blockDim INTEGER, opState INTEGER,
                              inputFormats INTEGER, hf32Eligible INTEGER);
            CREATE TABLE TASK_PMU_INFO(globalTaskId INTEGER, name INTEGER, value REAL);
            CREATE TABLE STEP_TIME(id INTEGER, startNs INTEGER, endNs INTEGER);
        """)
        windows: dict[int, list[int]] = {}
        for number, row in enumerate(rows):
            start = round(float(row["Start Time(us)"].strip()) * 1000)
            end = start + round(float(row["Duration(us)"]) * 1000)
            step = windows.setdefault(int(row["Step Id"]), [start, end])
            step[0], step[1] = min(step[0], start), max(step[1], end)
            conn.execute("INSERT INTO TASK VALUES (?, ?, 0, ?)", (start, end, number))
            conn.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (sid(row["Name"]), number, sid(row["Accelerator Core"]),
                          sid(row["Type"]), sid(row["Input Shapes"]),
                          sid(row["Input Data Types"]), int(row["Block Dim"]),
                          sid(row["OP State"]), sid(row["Input Formats"]),
                          sid(row["HF32 Eligible"])))
            if row["aicore_time(us)"] != "N/A":
                conn.executemany("INSERT INTO TASK_PMU_INFO VALUES (?, ?, ?)", [
                    (number, sid("aic_total_time"), float(row["aicore_time(us)"]) * 1000),
                    (number, sid("aic_mac_ratio"), float(row["aic_mac_ratio"])),
                    (number, sid("aic_mte2_ratio"), float(row["aic_mte2_ratio"]))])
        conn.executemany("INSERT INTO STEP_TIME VALUES (?, ?, ?)",
                         [(s, a - 1000, b + 1000) for s, (a, b) in windows.items()])
        conn.executemany("INSERT INTO STRING_IDS VALUES (?, ?)",
                         [(i, text) for text, i in strings.items()])
    return out


SUMMARY_HEADER = ["Device_id", "Model ID", "Task ID", "Stream ID", "Op Name", "OP Type",
                  "OP State", "Task Type", "Task Start Time(us)", "Task Duration(us)",
                  "Task Wait Time(us)", "Block Num", "Mix Block Num", "HF32 Eligible",
                  "Input Shapes", "Input Data Types", "Input Formats", *PMU_COLUMNS]


def as_msprof(text_run: Path, out: Path) -> Path:
    """A crafted text run written again as an msprof PROF_* directory (op_summary)."""
    rows = kernel_rows(text_run)
    folder = out / "PROF_000001_20250109171251000_ABCDEFGHIJKLMNOP" / \
        "mindstudio_profiler_output"
    folder.mkdir(parents=True)
    with open(folder / "op_summary_20250109171251.csv", "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(SUMMARY_HEADER)
        for row in rows:
            writer.writerow(["0", "4294967295", row["Task ID"], "2", row["Name"], row["Type"],
                             row["OP State"], row["Accelerator Core"], row["Start Time(us)"],
                             row["Duration(us)"], "0", row["Block Dim"], "0",
                             row["HF32 Eligible"], row["Input Shapes"],
                             row["Input Data Types"], row["Input Formats"],
                             *(row[c] for c in PMU_COLUMNS)])
    return out


def in_layout(run: Path, layout: str, root: Path) -> Path:
    if layout == "text":
        return run
    return (as_db if layout == "db" else as_msprof)(run, root / layout / Path(run).name)


def found(result) -> dict:
    return {f.id: f for f in result.analysis.findings}


def operator(result, op_type: str):
    [row] = [o for o in result.report.operators if o.op_type == op_type]
    return row


# One MatMul shape and an Add per step; in new the MatMul runs on half the cores and
# takes twice as long. Cube-bound in base (mac 0.8, MTE2 0.3), memory-bound in new (mac
# 0.4, MTE2 0.7).
MATMUL = "4096,4096;4096,4096"
HALVED = ([aclnn("MatMulV3", 100.0, MATMUL), aclnn("Add", 50.0, "4096", "AI_VECTOR_CORE")],
          [aclnn("MatMulV3", 200.0, MATMUL), aclnn("Add", 50.0, "4096", "AI_VECTOR_CORE")])


def cores(block_dim: str, mac: str, mte2: str):
    def rule(row: dict) -> None:
        if row["Type"] == "MatMulV3":
            row.update({"Block Dim": block_dim, "aicore_time(us)": row["Duration(us)"],
                        "aic_mac_ratio": mac, "aic_mte2_ratio": mte2})
    return rule


@pytest.fixture(scope="module", params=["text", "db", "msprof"])
def halved(request, tmp_path_factory):
    root = tmp_path_factory.mktemp(f"halved_{request.param}")
    base = crafted(root / "text", "base", HALVED[0], cores("24", "0.8", "0.3"), seed=1)
    new = crafted(root / "text", "new", HALVED[1], cores("12", "0.4", "0.7"), seed=2)
    return request.param, diff(in_layout(base, request.param, root),
                               in_layout(new, request.param, root))


def test_halved_block_dim_raises_placement_changed_naming_the_shape(halved):
    layout, result = halved
    finding = found(result)["placement-changed"]
    matmul = operator(result, "MatMulV3")
    # 5 kernels a side; Δ ≈ +100 µs per step against a step of ~150 µs (1 % is 1.5 µs);
    # msprof's op_summary has no steps: its one unit is the whole capture, 5 × 100 µs.
    assert finding.data["keys"] == [matmul.key_id]
    assert f"MatMulV3 [{MATMUL}] block dim 24 (5 kernels) → 12 (5 kernels)" in finding.detail
    assert finding.delta_us == pytest.approx(matmul.delta_us)
    assert matmul.delta_us == pytest.approx(100.0 * (5 if layout == "msprof" else 1),
                                            rel=0.05)
    assert finding.severity == "medium"
    assert [f for f in found(result) if f in MINE] == ["placement-changed"]
    assert matmul.attributes["base"]["block_dim"] == 24
    assert matmul.attributes["new"]["block_dim"] == 12
    assert list(matmul.attributes["changed"]) == ["block_dim"]
    assert dict(matmul.attributes["new"]["support"]["block_dim"]) == \
        {"share": 1.0, "count": 5, "kernels": 5}
    add = operator(result, "Add")
    assert add.attributes["changed"] == () and add.why is None
    # Pipes: each kernel's ratio, duration-weighted; the same ratio on every kernel.
    assert matmul.attributes["base"]["pipes"]["cube"] == pytest.approx(0.8)
    assert matmul.attributes["new"]["pipes"]["mte2"] == pytest.approx(0.7)
    assert dict(matmul.bound) == {"base": "cube", "new": "mte2", "base_ratio": pytest.approx(0.8),
                                  "new_ratio": pytest.approx(0.7), "pipe": "mte2",
                                  "shift": pytest.approx(0.4)}
    assert matmul.why == "block dim 24→12; cube-bound → memory-bound (MTE2 0.30→0.70)"
    if layout != "msprof":  # one capture without steps: the key is untested there
        assert matmul.status == "regressed"
        assert "MatMul +0.10 ms, regressed: block dim 24 → 12 on 1 shape" in \
            result.analysis.compute_sentence


def test_report_json_carries_the_attributes(halved):
    _, result = halved
    data = result.report.to_dict()  # checked against report.schema.json by conftest
    [row] = [o for o in data["operators"] if o["op_type"] == "MatMulV3"]
    assert row["attributes"]["changed"] == ["block_dim"]
    assert row["attributes"]["base"]["implementations"] == \
        [{"name": "aclnnMatMulV3_MatMulV3_MatMulV3", "count": 5}]
    assert row["bound"]["new"] == "mte2"
    assert row["why"].startswith("block dim 24→12")
    assert json.dumps(data)  # plain JSON: no mapping proxies left


def test_an_op_moved_to_ai_cpu_and_a_new_ai_cpu_op_raise_aicpu_fallback(tmp_path):
    # Cast 10 µs on AI_VECTOR_CORE → 100 µs on AI_CPU, and a dropout mask generator only
    # in new, 40 µs on AI_CPU: +90 + 40 = +130 µs per step, slower by far more than 1 %
    # of the ~70 µs base step: high.
    base_ops = [aclnn("MatMulV3", 50.0, MATMUL), aclnn("Cast", 10.0, "1024", "AI_VECTOR_CORE")]
    new_ops = [aclnn("MatMulV3", 50.0, MATMUL), aclnn("Cast", 100.0, "1024", "AI_CPU"),
               Kernel("StatelessDropOutGenMask", "StatelessDropOutGenMask", "AI_CPU", 40.0,
                      "1024")]
    base = crafted(tmp_path, "base", base_ops, lambda row: None, seed=1, noise=0.0)
    new = crafted(tmp_path, "new", new_ops, lambda row: None, seed=2, noise=0.0)
    result = diff(base, new)
    finding = found(result)["aicpu-fallback"]
    cast, mask = operator(result, "Cast"), operator(result, "StatelessDropOutGenMask")
    assert sorted(finding.data["keys"]) == sorted([cast.key_id, mask.key_id])
    assert finding.data["moved"] == [cast.key_id]
    assert finding.data["only_in_new"] == [mask.key_id]
    assert finding.delta_us == pytest.approx(130.0)
    assert finding.severity == "high"
    assert "Cast [1024] core AI_VECTOR_CORE (5 kernels) → AI_CPU (5 kernels)" in finding.detail
    assert "StatelessDropOutGenMask [1024] only in new" in finding.detail
    assert "placement-changed" not in found(result)  # the move to AI_CPU is said once


def test_nd_to_nz_with_a_transdata_inserted_raises_format_changed_with_its_time(tmp_path):
    # Base: MatMul on ND inputs, 100 µs. New: the same matrices in FRACTAL_NZ (the
    # storage shape 256,256,16,16 folds back to 4096,4096), 80 µs, after a TransData of
    # 4096,4096 (ND → NZ) of 30 µs. The TransData's first input is the MatMul's tensor:
    # linked, +30 µs per step; the finding's time is −20 + 30 = +10 µs.
    nz = "256,256,16,16;256,256,16,16"
    base_ops = [aclnn("MatMulV3", 100.0, MATMUL)]
    new_ops = [Kernel("trans_TransData_1", "TransData", "AI_VECTOR_CORE", 30.0, "4096,4096"),
               aclnn("MatMulV3", 80.0, nz)]

    def formats(row: dict) -> None:
        if row["Type"] == "MatMulV3" and row["Input Shapes"].strip('"') == nz:
            row["Input Formats"] = "FRACTAL_NZ;FRACTAL_NZ"

    base = crafted(tmp_path, "base", base_ops, formats, seed=1, noise=0.0)
    new = crafted(tmp_path, "new", new_ops, formats, seed=2, noise=0.0)
    result = diff(base, new)
    finding = found(result)["format-changed"]
    matmul, transdata = operator(result, "MatMulV3"), operator(result, "TransData")
    assert finding.data["keys"] == [matmul.key_id]
    assert finding.data["conversion_keys"] == [transdata.key_id]
    assert finding.data["conversion_us"] == pytest.approx(30.0)
    assert finding.delta_us == pytest.approx(10.0)
    assert "formats ND (5 kernels) → FRACTAL_NZ (5 kernels)" in finding.detail
    assert "TransData [4096,4096] only in new (+0.03 ms)" in finding.detail
    assert matmul.why == "formats ND→FRACTAL_NZ"


def test_static_to_dynamic_raises_dynamic_shape(tmp_path):
    ops = ([aclnn("RmsNorm", 30.0, "4096,8192;8192")], [aclnn("RmsNorm", 36.0, "4096,8192;8192")])

    def static(row: dict) -> None:
        row["OP State"] = "static"

    base = crafted(tmp_path, "base", ops[0], static, seed=1)
    new = crafted(tmp_path, "new", ops[1], lambda row: None, seed=2)  # profiles: dynamic
    result = diff(base, new)
    finding = found(result)["dynamic-shape"]
    rms = operator(result, "RmsNorm")
    assert finding.data["keys"] == [rms.key_id]
    assert "op state static (5 kernels) → dynamic (5 kernels)" in finding.detail
    assert rms.why.startswith("op state static→dynamic")


def test_the_same_type_on_another_kernel_raises_kernel_changed(tmp_path):
    fia = "FusedInferAttentionScore"
    shapes = "1,32,1,128;1,8,4096,128"
    base = crafted(tmp_path, "base", [Kernel(f"aclnn{fia}V2_IncreFlashAttention_{fia}", fia,
                                             "MIX_AIC", 80.0, shapes)], lambda row: None, seed=1)
    new = crafted(tmp_path, "new", [Kernel(f"aclnn{fia}V2_PagedAttention_{fia}", fia,
                                           "MIX_AIC", 60.0, shapes)], lambda row: None, seed=2)
    result = diff(base, new)
    finding = found(result)["kernel-changed"]
    row = operator(result, fia)
    assert finding.data["keys"] == [row.key_id]
    assert (f"kernel aclnn{fia}V2_IncreFlashAttention_{fia} (5 kernels) → "
            f"aclnn{fia}V2_PagedAttention_{fia} (5 kernels)") in finding.detail
    assert [f for f in found(result) if f in MINE] == ["kernel-changed"]


def test_the_kernel_itself_when_nothing_recorded_changed(halved):
    # The same schedule as ``halved`` with the block dim kept: slower, every attribute alike.
    layout, _ = halved
    if layout != "text":
        return
    root = Path(str(halved[1].comparison.base.meta.path)).parent
    base = crafted(root, "same_base", HALVED[0], cores("24", "0.8", "0.3"), seed=1)
    new = crafted(root, "same_new", HALVED[1], cores("24", "0.8", "0.3"), seed=2)
    matmul = operator(diff(base, new), "MatMulV3")
    assert matmul.status == "regressed"
    assert matmul.why == f"{KERNEL_ITSELF}; cube 0.80→0.80: cube-bound"


def mixed(root: Path, label: str, seed: int) -> Path:
    """A job whose Mul key runs twice a step, once on 8 cores and once on 16, 20 µs each
    (noise 5 %), beside a MatMul on 24 cores: its mode is whichever took longer."""
    ops = [aclnn("MatMulV3", 100.0, MATMUL), aclnn("Mul", 20.0, "1024", "AI_VECTOR_CORE"),
           aclnn("Mul", 20.0, "1024", "AI_VECTOR_CORE")]
    run = write_profile(root, label, ops, steps=STEPS, noise=0.05, seed=seed).path
    turn = iter(range(10 ** 6))

    def rule(row: dict) -> None:
        if row["Type"] == "Mul":
            row["Block Dim"] = "8" if next(turn) % 2 == 0 else "16"

    rewrite(run, rule)
    return run


def test_a_a_pairs_with_a_key_whose_mode_flips_raise_none_of_the_five(tmp_path):
    flipped = 0
    for seed in range(4):
        result = diff(mixed(tmp_path, f"a{seed}", 2 * seed), mixed(tmp_path, f"b{seed}",
                                                                   2 * seed + 1))
        assert [f.id for f in result.analysis.findings if f.id in MINE] == []
        mul = operator(result, "Mul")
        assert mul.attributes["changed"] == ()
        flipped += mul.attributes["base"]["block_dim"] != mul.attributes["new"]["block_dim"]
    assert flipped  # the mode did flip on noise in some pair, and nothing was said


def test_a_run_against_itself_raises_none_of_the_five(halved):
    layout, result = halved
    path = result.comparison.new.meta.path
    same = diff(path, path)
    assert [f.id for f in same.analysis.findings if f.id in MINE] == []
    assert same.comparison.attributes.changes.empty


# ---------------------------------------------------------------- what is not recorded


LEVEL = DATA / "realdata/Ascend__msinsight/test/data/pytorch/text"


def test_level0_says_what_it_does_not_record():
    # Level0's kernel_details.csv holds Block Dim and no PMU columns; profiler_info says
    # aic_metrics ACL_AICORE_NONE: pipes "aic_metrics=ACL_AICORE_NONE", never a guess.
    info = json.loads(next((LEVEL / "level0/rank0_ascend_pt").glob("profiler_info_*.json"))
                      .read_text())
    metrics = info["config"]["experimental_config"]["_aic_metrics"]
    result = diff(LEVEL / "level0/rank0_ascend_pt", LEVEL / "level1/rank0_ascend_pt")
    nr = result.comparison.attributes.not_recorded
    assert nr["base"]["pipes"] == f"aic_metrics={metrics}"
    assert nr["new"]["pipes"] is None
    # Level0 writes Block Dim 0 on every kernel: that records nothing; the kernel name does.
    recorded = [o for o in result.report.operators if o.attributes is not None
                and o.attributes["base"]["implementations"]]
    assert recorded
    assert all(o.attributes["base"]["block_dim"] is None for o in recorded)
    assert all(o.attributes["base"]["pipes"] is None
               and o.attributes["base"]["not_recorded"]["pipes"] == f"aic_metrics={metrics}"
               for o in recorded)


def test_a_run_without_attributes_says_not_recorded_for_a_moved_key():
    keys = pd.DataFrame({"key_id": [0, 1], "base_instances": [5, 5], "new_instances": [5, 5],
                         "category": ["compute", "compute"],
                         "status": ["regressed", "unchanged"]})
    from cann_diff.compare.attributes import empty_attributes
    nothing = replace(empty_attributes(), not_recorded={
        "base": {"attributes": "Level0", "pipes": "aic_metrics=ACL_AICORE_NONE"},
        "new": {"attributes": None, "pipes": None}})
    assert why(keys, nothing).tolist() == ["not recorded (base: Level0)", None]


def test_the_kernel_itself_is_said_only_when_core_and_kernel_are_recorded_on_both_sides():
    # Key 0 records core and kernel on both sides; key 1's base records no core (a
    # Level0 side: Accelerator Core N/A). Both regressed with nothing changed.
    from cann_diff.compare.attributes import AttributeComparison, empty_attributes
    table = pd.DataFrame({"base_core": ["AI_CORE", None], "new_core": ["AI_CORE", "AI_CORE"],
                          "base_implementation": ["MatMul", "MatMul"],
                          "new_implementation": ["MatMul", "MatMul"],
                          "bound_pipe": [None, None]}, index=pd.Index([0, 1], name="key_id"))
    keys = pd.DataFrame({"key_id": [0, 1], "base_instances": [5, 5], "new_instances": [5, 5],
                         "category": ["compute", "compute"],
                         "status": ["regressed", "improved"]})
    attributes = AttributeComparison(table, empty_attributes().changes,
                                     empty_attributes().not_recorded)
    assert why(keys, attributes).tolist() == [
        KERNEL_ITSELF, "no recorded attribute changed (core not recorded)"]


# ---------------------------------------------------------------- the AI Core clock


def test_an_ai_core_clock_change_is_named_with_its_factor(tmp_path):
    # 1800 → 1500 MHz: the same cycles take 1800 / 1500 = 1.20× as long.
    base = load_run(write_profile(tmp_path, "base", HALVED[0]).path)
    new = load_run(write_profile(tmp_path, "new", HALVED[0]).path)
    base = replace(base, meta=replace(base.meta, aicore_freq="1800",
                                      sources={**base.meta.sources, "aicore_freq": "x.db"}))
    new = replace(new, meta=replace(new.meta, aicore_freq="1500",
                                    sources={**new.meta.sources, "aicore_freq": "x.db"}))
    [entry] = comparability(base, new)
    assert (entry.what, entry.base, entry.new) == ("AI Core frequency", "1800 MHz", "1500 MHz")
    result = compare_runs(base, new)
    assert "AI Core frequency 1800 MHz → 1500 MHz (the same cycles take 1.20× as long" in \
        comparability_sentence(result.comparison)
    assert result.report.to_dict()["base"]["aicore_freq"] == "1800"


# ---------------------------------------------------------------- the real 910A → 910B pair

PAIR = ("Ascend__msinsight@c1e639ee2/test/data/pytorch/text/level1/rank0_ascend_pt",
        "Ascend__msinsight/test/data/pytorch/text/level1/rank0_ascend_pt")


def _kernels(path: str) -> pd.DataFrame:
    return pd.read_csv(REALDATA / path / OUT / "kernel_details.csv")


@pytest.fixture(scope="module")
def real_pair():
    if not REALDATA.is_dir():
        pytest.skip("../shared/realdata is not beside the project")
    return diff(*(REALDATA / p for p in PAIR))


@needs_realdata
def test_every_transdata_moved_from_ai_core_to_the_vector_core(real_pair):
    base, new = (_kernels(p) for p in PAIR)
    base_td, new_td = base[base["Type"] == "TransData"], new[new["Type"] == "TransData"]
    # 86 kernels, 1.79 ms, all on AI_CORE → 57, 1.42 ms, all on AI_VECTOR_CORE.
    assert set(base_td["Accelerator Core"]) == {"AI_CORE"}
    assert set(new_td["Accelerator Core"]) == {"AI_VECTOR_CORE"}
    rows = [o for o in real_pair.report.operators if o.family == "TransData"]
    assert sum(o.base_instances for o in rows) == len(base_td) == 86
    assert sum(o.new_instances for o in rows) == len(new_td) == 57
    assert sum(o.attributes["base"]["support"]["core"]["kernels"] for o in rows
               if o.attributes["base"]["core"]) == len(base_td)
    paired = [o for o in rows if o.base_instances and o.new_instances]
    assert paired
    for o in paired:
        assert (o.attributes["base"]["core"], o.attributes["new"]["core"]) == \
            ("AI_CORE", "AI_VECTOR_CORE")
        assert "core" in o.attributes["changed"]
    # Duration-weighted MTE2 ratio of all TransData kernels: 910A's unprefixed column,
    # 910B's vector-core one (TransData runs there alone).
    def weighted(frame: pd.DataFrame, column: str) -> float:
        return float((frame[column] * frame["Duration(us)"]).sum() / frame["Duration(us)"].sum())

    table = real_pair.comparison.attributes.table
    keys = [o.key_id for o in rows]
    for side, frame, column in (("base", base_td, "mte2_ratio"),
                                ("new", new_td, "aiv_mte2_ratio")):
        held = table.loc[table.index.intersection(keys)]
        ours = (held[f"{side}_pipe_mte2"] * held[f"{side}_pmu_us"]).sum() / \
            held[f"{side}_pmu_us"].sum()
        assert ours == pytest.approx(weighted(frame, column), abs=0.005)


@needs_realdata
def test_matmul_runs_on_fewer_cores_and_takes_nd_inputs(real_pair):
    base, new = (_kernels(p) for p in PAIR)
    base_mm = base[base["Type"] == "MatMul"]
    new_mm = new[new["Type"].isin(["MatMulV2", "MatMulV3"])]
    assert set(base_mm["Accelerator Core"]) == set(new_mm["Accelerator Core"]) == {"AI_CORE"}
    assert base_mm["Block Dim"].mode()[0] == 32
    assert set(base_mm["Input Formats"].str.split(";").explode()) == {"FRACTAL_NZ"}
    assert set(new_mm["Input Formats"].str.split(";").explode()) == {"FORMAT_ND"}
    data = real_pair.report.to_dict()
    paired = [o for o in data["operators"] if o["family"] == "MatMul"
              and o["base_instances"] and o["new_instances"]]
    assert paired
    for o in paired:
        base_side, new_side = o["attributes"]["base"], o["attributes"]["new"]
        assert base_side["core"] == new_side["core"] == "AI_CORE"
        assert base_side["block_dim"] == 32
        assert new_side["block_dim"] in set(new_mm["Block Dim"]) - {32}
        assert {"block_dim", "input_formats"} <= set(o["attributes"]["changed"])
        assert set(base_side["input_formats"].split(";")) == {"FRACTAL_NZ"}
        assert set(new_side["input_formats"].split(";")) == {"ND"}
    placement = found(real_pair)["placement-changed"]
    assert {o["key_id"] for o in paired} <= set(placement.data["keys"])
    assert "device differs too" in placement.detail


@needs_realdata
def test_the_level1_vs_level2_control_raises_none_of_the_five():
    root = REALDATA / "Ascend__msinsight/test/data/pytorch"
    for kind in ("text", "db"):
        result = diff(root / kind / "level1", root / kind / "level2")
        assert [f.id for f in result.analysis.findings if f.id in MINE] == []
        assert result.comparison.attributes.recorded
        assert result.comparison.attributes.changes.empty


def test_copies_of_the_2025_level1_run_raise_none_of_the_five(tmp_path):
    source = LEVEL / "level1/rank0_ascend_pt"
    shutil.copytree(source, tmp_path / "copy" / source.name)
    result = diff(source, tmp_path / "copy" / source.name)
    assert result.comparison.attributes.recorded
    assert [f.id for f in result.analysis.findings if f.id in MINE] == []
