"""Readers on real profiler output, canonical names and the kernel-interval step breakdown.

Expectations are computed from the input files with the stdlib (``csv``, ``json``,
``decimal``), never taken from cann_diff. The real files live in
``tests/data/realdata/<same path as in ../shared/realdata>`` (see README.md there), so
everything but the CANN 8.3 job (variant E, read from ../shared/realdata only) runs in a
user's clone.

kernel_details.csv header variants (REALDATA.md):

====  ==========================================  ==========================================
id    distinguishing columns                      files here
====  ==========================================  ==========================================
A     no ``OP State``, no ``HF32 Eligible``       msprof-analyze 2023 (591 rows, 19 HCCL)
B     ``OP State`` + ``HF32 Eligible``            msprof-analyze 2025 (29 rows), MI level1/2
C     ``HF32 Eligible`` without ``OP State``      MI-2023 test_rank_1 (22 rows, 2 HCCL)
D     8 columns, Type/Core ``N/A`` (Level0)       MI level0 (191 rows, 4 HCCL)
E     ``Device_id`` 2nd, core ``COMMUNICATION``   CANN 8.3 st/level2 rank_0, rank_2
====  ==========================================  ==========================================
"""

from __future__ import annotations

import csv
import json
import math
import shutil
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import DATA, REALDATA, needs_realdata

from cann_diff.cli import main
from cann_diff.read import load_run
from cann_diff.read.formats import torch_text
from cann_diff.read.reduce.timeline import step_breakdown_from_kernels
from cann_diff.vocab.names import canonical_names

COPIES = DATA / "realdata"
MI_TEXT = "Ascend__msinsight/test/data/pytorch/text"
LEVEL0 = f"{MI_TEXT}/level0/rank0_ascend_pt"
LEVEL1 = f"{MI_TEXT}/level1/rank0_ascend_pt"
LEVEL2 = f"{MI_TEXT}/level2/rank0_ascend_pt"
MI2023 = "Ascend__msinsight/server/src/test/test_data"
TEST_RANK_0 = f"{MI2023}/test_rank_0"
TEST_RANK_1 = f"{MI2023}/test_rank_1"
MA2023 = "Ascend__msprof-analyze/test/ut/advisor/advisor_backend/compute_advice/kernel_details.csv"
MA2025 = "Ascend__msprof-analyze/test/ut/advisor/compute_advice/data/kernel_details.csv"
MA_LEVEL0_EXCERPT = "Ascend__msprof-analyze/test/resource/test.csv"
ST_LEVEL2 = "Ascend__msinsight/test/st/level2"
CANN83_RANK0 = f"{ST_LEVEL2}/rank_0_ascend_pt"
CANN83_RANK2 = f"{ST_LEVEL2}/rank_2_ascend_pt"

COMM_CORES = {"HCCL", "COMMUNICATION"}
# Type column of the hcom rows -> comm_type, written by hand from DESIGN.md.
HCOM_TYPES = {"hcom_allReduce_": "AllReduce", "hcom_allGather_": "AllGather",
              "hcom_reduceScatter_": "ReduceScatter", "hcom_broadcast_": "Broadcast",
              "hcom_batchSendRecv_": "BatchSendRecv", "hcom_send_": "Send",
              "hcom_receive_": "Receive"}


# ---------------------------------------------------------------- independent helpers

def csv_table(path: Path) -> tuple[list[str], list[dict]]:
    """Header and rows of a CSV, read with the stdlib only."""
    with open(path, newline="", encoding="utf-8-sig") as handle:
        reader = csv.DictReader(handle)
        rows = list(reader)
    return list(reader.fieldnames), rows


def us_text_to_ns(text: str) -> int:
    """``"1736408883704643.212\\t"`` -> 1736408883704643212, exactly (Decimal, no float)."""
    return int(Decimal(text.strip()) * 1000)


def plain_shapes(text: str) -> str:
    """``\"\"\"32,3,224,224\"\"\"`` -> ``32,3,224,224``; ``N/A`` -> ``""``."""
    text = text.replace('"', "").replace(" ", "").strip()
    return "" if text.upper() in ("N/A", "") else text


def header_variant(header: list[str]) -> str:
    """Classify a kernel_details.csv header the way REALDATA.md does."""
    if header == ["Step Id", "Name", "Type", "Accelerator Core", "Start Time(us)",
                  "Duration(us)", "Wait Time(us)", "Block Dim"]:
        return "D"
    if len(header) > 1 and header[1] == "Device_id":
        return "E"
    if "OP State" in header and "HF32 Eligible" in header:
        return "B"
    if "HF32 Eligible" in header:
        return "C"
    return "A"


def tree_root(relative: str, real: bool) -> Path:
    return (REALDATA if real else COPIES) / relative


# ---------------------------------------------------------------- kernel_details cases

@dataclass(frozen=True)
class KernelCase:
    """One real kernel_details.csv: where it is, which header variant it should be."""

    relative: str          # a *_ascend_pt dir, or a bare kernel_details.csv
    variant: str
    real_only: bool = False  # read from ../shared/realdata (not copied)

    def csv_path(self) -> Path:
        root = tree_root(self.relative, self.real_only)
        return root if root.suffix == ".csv" else root / "ASCEND_PROFILER_OUTPUT" / \
            "kernel_details.csv"

    def input_dir(self, tmp_path: Path) -> Path:
        """The directory to hand to load_run (a bare CSV is copied into a fake export)."""
        root = tree_root(self.relative, self.real_only)
        if root.suffix != ".csv":
            return root
        out = tmp_path / "bare_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        out.mkdir(parents=True)
        shutil.copyfile(root, out / "kernel_details.csv")
        return out


KERNEL_CASES = [
    pytest.param(KernelCase(MA2023, "A"), id="A-msprof-analyze-2023"),
    pytest.param(KernelCase(MA2025, "B"), id="B-msprof-analyze-2025"),
    pytest.param(KernelCase(LEVEL1, "B"), id="B-MI-level1"),
    pytest.param(KernelCase(LEVEL2, "B"), id="B-MI-level2"),
    pytest.param(KernelCase(TEST_RANK_1, "C"), id="C-MI-2023-test_rank_1"),
    pytest.param(KernelCase(LEVEL0, "D"), id="D-MI-level0"),
    pytest.param(KernelCase(CANN83_RANK0, "E", real_only=True), id="E-CANN8.3-rank_0",
                 marks=needs_realdata),
    pytest.param(KernelCase(CANN83_RANK2, "E", real_only=True), id="E-CANN8.3-rank_2",
                 marks=needs_realdata),
]


@pytest.mark.parametrize("case", KERNEL_CASES)
def test_case_has_the_header_variant_it_claims(case):
    header, _ = csv_table(case.csv_path())
    assert header_variant(header) == case.variant


def test_every_header_variant_is_covered():
    variants = {p.values[0].variant for p in KERNEL_CASES}
    assert variants == {"A", "B", "C", "D", "E"}


@pytest.mark.slow
@pytest.mark.parametrize("case", KERNEL_CASES)
def test_row_count_equals_csv_data_rows(case, tmp_path):
    _, rows = csv_table(case.csv_path())
    run = load_run(case.input_dir(tmp_path))
    assert len(run.ops) == len(rows)


@pytest.mark.parametrize("case", KERNEL_CASES)
def test_communication_total_equals_hccl_rows(case, tmp_path):
    _, rows = csv_table(case.csv_path())
    comm = [float(r["Duration(us)"]) for r in rows if r["Accelerator Core"] in COMM_CORES]
    run = load_run(case.input_dir(tmp_path))
    ops = run.ops[run.ops["category"] == "communication"]
    assert len(ops) == len(comm)
    assert ops["dur_us"].sum() == pytest.approx(math.fsum(comm), rel=1e-12, abs=1e-9)


@pytest.mark.slow
@pytest.mark.parametrize("case", KERNEL_CASES)
def test_start_ns_duration_and_step_match_csv_exactly(case, tmp_path):
    _, rows = csv_table(case.csv_path())
    want = sorted((r["Name"], us_text_to_ns(r["Start Time(us)"]), int(r["Step Id"]))
                  for r in rows)
    run = load_run(case.input_dir(tmp_path))
    got = sorted(zip(run.ops["op_name"].astype(str), run.ops["start_ns"].tolist(),
                     run.ops["step"].astype(int).tolist()))
    assert got == want
    want_dur = sorted(float(r["Duration(us)"]) for r in rows)
    assert sorted(run.ops["dur_us"].tolist()) == pytest.approx(want_dur, rel=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize("case", [p for p in KERNEL_CASES if p.values[0].variant != "D"])
def test_input_shapes_are_unquoted(case, tmp_path):
    _, rows = csv_table(case.csv_path())
    want = sorted((r["Name"], us_text_to_ns(r["Start Time(us)"]), plain_shapes(r["Input Shapes"]))
                  for r in rows)
    run = load_run(case.input_dir(tmp_path))
    got = sorted(zip(run.ops["op_name"].astype(str), run.ops["start_ns"].tolist(),
                     run.ops["input_shapes"].astype(str)))
    assert got == want


# ---------------------------------------------------------------- single values, by hand

@pytest.mark.parametrize("relative, name, raw_start, start_ns", [
    # level1 row 1: `1736408883704643.212<TAB>` unquoted
    (LEVEL1, "trans_TransData_0", "1736408883704643.212\t", 1736408883704643212),
    # MA-2025 row 1: `"1736413971558972.912<TAB>"` quoted
    (MA2025, "aclnnMatmul_MatMulCommon_MatMulV2", "1736413971558972.912\t",
     1736413971558972912),
    # MI-2023: one decimal, no TAB
    (TEST_RANK_1, "hcom_broadcast__483_0", None, None),
])
def test_start_time_keeps_nanoseconds(relative, name, raw_start, start_ns, tmp_path):
    case = KernelCase(relative, "")
    _, rows = csv_table(case.csv_path())
    row = next(r for r in rows if r["Name"] == name)
    if raw_start is not None:
        assert row["Start Time(us)"] == raw_start  # the quirk really is in the file
    else:
        start_ns = us_text_to_ns(row["Start Time(us)"])
    run = load_run(case.input_dir(tmp_path))
    got = run.ops.loc[run.ops["op_name"].astype(str) == name, "start_ns"].tolist()
    assert got[0] == start_ns
    assert run.ops["start_ns"].dtype == np.int64


@pytest.mark.parametrize("name, shapes", [
    ("trans_TransData_0", "32,3,224,224"),
    ("Conv2D1", "32,1,224,224,8;121,4,16,8;64"),
])
def test_triple_quoted_shapes_normalize(name, shapes):
    raw = (COPIES / LEVEL1 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").read_text()
    assert f'"""{shapes}"""' in raw
    run = load_run(COPIES / LEVEL1)
    got = run.ops.loc[run.ops["op_name"].astype(str) == name, "input_shapes"].astype(str)
    assert got.iloc[0] == shapes


# ---------------------------------------------------------------- step_trace_time.csv

STEP_FIELDS = {"Computing": "computing",
               "Communication(Not Overlapped)": "communication_not_overlapped",
               "Overlapped": "overlapped", "Communication": "communication", "Free": "free",
               "Stage": "stage", "Bubble": "bubble", "Preparing": "preparing"}


def test_step_figures_are_float_microseconds():
    run = load_run(COPIES / LEVEL1)
    assert {c: str(run.steps[c].dtype) for c in STEP_FIELDS.values()} == \
        {c: "float64" for c in STEP_FIELDS.values()}


@pytest.mark.parametrize("relative, columns, real_only", [
    pytest.param(LEVEL0, 10, False, id="MI-level0-10cols"),
    pytest.param(LEVEL1, 10, False, id="MI-level1-10cols"),
    pytest.param(LEVEL2, 10, False, id="MI-level2-10cols"),
    pytest.param(TEST_RANK_1, 9, False, id="MI-2023-9cols-no-Preparing"),
    pytest.param(CANN83_RANK0, 11, True, id="CANN8.3-rank_0-11cols", marks=needs_realdata),
    pytest.param(CANN83_RANK2, 11, True, id="CANN8.3-rank_2-11cols", marks=needs_realdata),
])
def test_step_figures_equal_step_trace_time(relative, columns, real_only):
    """The reader parses the file exactly; the run's figures are the one ledger.

    Where the kernel rows cover the step (every real file here but the trimmed 2023 one),
    the run's figures are the kernels' union arithmetic, which the profiler's sums of its
    overlap events match to a fraction of a µs (its own rounding); Preparing is the
    profiler's alone.
    """
    root = tree_root(relative, real_only)
    header, rows = csv_table(root / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")
    assert len(header) == columns
    parsed = torch_text.read_rank(root).steps
    run = load_run(root)
    assert run.step_source == "step_trace_time"
    assert len(run.steps) == len(rows) == len(parsed)
    for row in rows:
        exact = parsed[parsed["step"] == int(row["Step"])].iloc[0]
        got = run.steps[run.steps["step"] == int(row["Step"])].iloc[0]
        for column, field in STEP_FIELDS.items():
            if column in row:
                assert exact[field] == pytest.approx(float(row[column]), rel=1e-12), field
                assert got[field] == pytest.approx(float(row[column]), abs=0.5), field
            else:
                assert pd.isna(exact[field]) and pd.isna(got[field]), field


# ---------------------------------------------------------------- communication.json

def comm_json_ops(path: Path) -> list[tuple[int, str, float]]:
    """(step, op name without @group, elapse ms) of every op, 'Total Op Info' excluded."""
    data = json.loads(path.read_text())
    ops = []
    for step_key, kinds in data.items():
        for entries in kinds.values():
            for key, info in entries.items():
                if key.startswith("Total Op Info"):
                    continue
                ops.append((int(step_key.removeprefix("step")), key.split("@")[0],
                            info["Communication Time Info"]["Elapse Time(ms)"]))
    return ops


def hand_comm_type(name: str) -> str:
    token = name.removeprefix("hcom_").split("_")[0].lower()
    return {"allreduce": "AllReduce", "allgather": "AllGather", "broadcast": "Broadcast",
            "reducescatter": "ReduceScatter", "send": "Send", "receive": "Receive",
            "batchsendrecv": "BatchSendRecv"}[token]


@pytest.mark.parametrize("relative", [LEVEL1, LEVEL2, TEST_RANK_1])
def test_communication_json_rows_and_times(relative):
    root = COPIES / relative
    want = comm_json_ops(root / "ASCEND_PROFILER_OUTPUT" / "communication.json")
    run = load_run(root)
    comm = run.comm
    assert len(comm) == len(want)
    assert sorted(zip(comm["step"].astype(int), comm["op_name"].astype(str))) == \
        sorted((s, n) for s, n, _ in want)
    assert comm["elapse_us"].sum() == pytest.approx(1000 * math.fsum(e for *_, e in want),
                                                    rel=1e-9)
    assert sorted(comm["comm_type"].astype(str)) == sorted(hand_comm_type(n) for _, n, _ in want)


def test_level0_has_no_communication_json_and_says_so():
    assert not (COPIES / LEVEL0 / "ASCEND_PROFILER_OUTPUT" / "communication.json").exists()
    run = load_run(COPIES / LEVEL0)
    assert len(run.comm) == 0
    assert any("communication.json" in w.text for w in run.warnings)


# ---------------------------------------------------------------- profiler_info

@pytest.mark.parametrize("relative, real_only", [
    (LEVEL0, False), (LEVEL1, False), (LEVEL2, False), (TEST_RANK_1, False),
    pytest.param(CANN83_RANK0, True, marks=needs_realdata),
    pytest.param(CANN83_RANK2, True, marks=needs_realdata),
])
def test_profiler_info_gives_rank_level_and_versions(relative, real_only):
    root = tree_root(relative, real_only)
    (info_path,) = root.glob("profiler_info_*.json")
    info = json.loads(info_path.read_text())
    run = load_run(root)
    assert run.meta.ranks == (int(info["rank_id"]),)  # int in 2023-25, "0" in 2025-11
    assert run.meta.profiler_level == info["config"]["experimental_config"]["_profiler_level"]
    assert run.meta.cann_version == info.get("cann_version")
    assert run.meta.torch_npu_version == info.get("torch_npu_version")


# ---------------------------------------------------------------- Level0: types from names

@pytest.mark.parametrize("name, op_type, family, category", [
    ("aclnnMm_MatMulCommon_MatMulV2", "MatMulV2", "MatMul", "compute"),
    ("aclnnMm_MatMulV3Common_MatMulV3", "MatMulV3", "MatMul", "compute"),
    ("ReduceSum7", "ReduceSum", "ReduceSum", "compute"),
    ("trans_TransData_17", "TransData", "TransData", "compute"),
    ("Conv2D1", "Conv2D", "Conv2D", "compute"),
    ("Conv2DBackpropFilter10_MemSet", "MemSet", "MemSet", "compute"),
    ("aclnnLogSoftmax_LogSoftmaxAiCore_LogSoftmaxV2", "LogSoftmaxV2", "LogSoftmax", "compute"),
    ("hcom_allReduce__868_0_1", "AllReduce", "AllReduce", "communication"),
])
def test_level0_types_derive_from_names(name, op_type, family, category):
    _, rows = csv_table(COPIES / LEVEL0 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    assert any(r["Name"] == name and r["Type"] == "N/A" for r in rows)
    run = load_run(COPIES / LEVEL0)
    row = run.ops[run.ops["op_name"].astype(str) == name].iloc[0]
    assert (row["op_type"], row["family"], row["category"]) == (op_type, family, category)


def test_level0_and_level1_of_one_run_give_the_same_op_types():
    _, level1_rows = csv_table(COPIES / LEVEL1 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    # by hand: the Level1 Type column, hcom types mapped to their collective
    want = {HCOM_TYPES.get(r["Type"], r["Type"]) for r in level1_rows}
    level0 = load_run(COPIES / LEVEL0)
    level1 = load_run(COPIES / LEVEL1)
    assert set(level1.ops["op_type"].astype(str)) == want
    assert set(level0.ops["op_type"].astype(str)) == want


# ---------------------------------------------------------------- CANN 8.3 (not copied)

@needs_realdata
@pytest.mark.parametrize("relative", [CANN83_RANK0, CANN83_RANK2])
def test_cann83_communication_rows(relative):
    root = REALDATA / relative
    _, rows = csv_table(root / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    hand = sorted(HCOM_TYPES[r["Type"]] for r in rows if r["Accelerator Core"] == "COMMUNICATION")
    assert hand  # the file does label its collectives COMMUNICATION
    run = load_run(root)
    comm = run.ops[run.ops["category"] == "communication"]
    assert sorted(comm["comm_type"].astype(str)) == hand
    assert set(hand) <= {"AllReduce", "AllGather", "ReduceScatter", "Broadcast", "BatchSendRecv"}
    assert set(comm["core"].astype(str)) == {"COMM"}


@needs_realdata
def test_cann83_parent_dir_reads_the_ranks_that_have_kernels():
    # rank_1 and rank_3 hold only communication/step files, no kernel_details.csv
    found = (REALDATA / ST_LEVEL2).glob("*/ASCEND_PROFILER_OUTPUT/kernel_details.csv")
    with_kernels = sorted(p.parent.parent.name for p in found)
    assert with_kernels == ["rank_0_ascend_pt", "rank_2_ascend_pt"]
    run = load_run(REALDATA / ST_LEVEL2)
    assert run.meta.ranks == (0, 1, 2, 3)  # 1 and 3 for their steps and communication
    assert run.ranks_without_kernels == (1, 3)
    _, rows0 = csv_table(REALDATA / CANN83_RANK0 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    _, rows2 = csv_table(REALDATA / CANN83_RANK2 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    assert (run.ops["rank"] == 0).sum() == len(rows0)
    assert (run.ops["rank"] == 2).sum() == len(rows2)


@pytest.mark.slow
@needs_realdata
def test_cann83_rank0_vs_rank2_report(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(REALDATA / CANN83_RANK0),
                                       str(REALDATA / CANN83_RANK2), "--no-charts", "-q",
                                       "-o", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    stage = {}
    for name, relative in (("base", CANN83_RANK0), ("new", CANN83_RANK2)):
        _, rows = csv_table(REALDATA / relative / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv")
        stage[name] = float(rows[0]["Stage"])
    assert report["step"]["base_us"] == pytest.approx(stage["base"])
    assert report["step"]["new_us"] == pytest.approx(stage["new"])
    assert report["base"]["versions"] == {"cann": "8.3.RC1", "torch_npu": "2.7.1"}


# ---------------------------------------------------------------- done criterion

@pytest.mark.slow
def test_cli_level1_vs_level2_report_json(tmp_path):
    """The done criterion: the MI level1 vs level2 pair through the real command."""
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(COPIES / LEVEL1), str(COPIES / LEVEL2),
                                       "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    step = report["step"]
    # step_trace_time.csv's Stage and exposed communication, which the kernel ledger
    # matches to its rounding (Stage is written to a quarter µs there)
    assert step["base_us"] == pytest.approx(136581.0, abs=0.5)
    assert step["new_us"] == pytest.approx(129862.75, abs=0.5)
    assert step["breakdown"]["communication_not_overlapped"]["base_us"] == \
        pytest.approx(101963.203, abs=0.5)
    hcom = [op for op in report["operators"] if op["op_type"] == "AllReduce"]
    assert hcom and {op["category"] for op in hcom} == {"communication"}
    assert sum(op["base_instances"] for op in hcom) == 4  # 4 hcom_allReduce rows per file
    assert sum(op["new_instances"] for op in hcom) == 4


# ---------------------------------------------------------------- canonical names

@pytest.mark.parametrize("name, type_, core, op_type, family, comm_type, category", [
    ("hcom_allReduce__586_0_1", "hcom_allReduce_", "HCCL",
     "AllReduce", "AllReduce", "AllReduce", "communication"),
    ("hcom_allReduce__586_0_1@17522688603477080586", "hcom_allReduce_", "HCCL",
     "AllReduce", "AllReduce", "AllReduce", "communication"),
    ("hcom_allReduce__868_0_1", "N/A", "HCCL",  # Level0
     "AllReduce", "AllReduce", "AllReduce", "communication"),
    ("HcclAllGather__9_1_2", "", "COMMUNICATION",
     "AllGather", "AllGather", "AllGather", "communication"),
    ("HcclAllreduce__12_3_2", "N/A", "HCCL",
     "AllReduce", "AllReduce", "AllReduce", "communication"),
    ("hcom_allreduce_AicpuKernel_0_1", "N/A", "AI_CPU",
     "AllReduce", "AllReduce", "AllReduce", "communication"),
    ("hcom_reduceScatter__491_6_1", "hcom_reduceScatter_", "COMMUNICATION",
     "ReduceScatter", "ReduceScatter", "ReduceScatter", "communication"),
    ("hcom_batchSendRecv__128_5_1", "hcom_batchSendRecv_", "COMMUNICATION",
     "BatchSendRecv", "BatchSendRecv", "BatchSendRecv", "communication"),
    ("hcom_broadcast__483_0", "hcom_broadcast_", "HCCL",
     "Broadcast", "Broadcast", "Broadcast", "communication"),
    ("hcom_alltoallv__1_1", "hcom_alltoallv_", "HCCL",
     "AllToAllV", "AllToAllV", "AllToAllV", "communication"),
    ("aclnnMatmulAllReduce_MatmulAllReduce_MatmulAllReduce", "MatmulAllReduce", "MIX_AIC",
     "MatmulAllReduce", "MatmulAllReduce", "", "mc2"),
    ("aclnnMatmulAllReduce_MatmulAllReduce_MatmulAllReduce", "N/A", "N/A",  # Level0
     "MatmulAllReduce", "MatmulAllReduce", "", "mc2"),
    ("AllgatherMatmulAicpu", "N/A", "AI_CPU",
     "AllGatherMatmulAicpu", "AllGatherMatmul", "", "mc2"),
    ("ReduceSum7", "N/A", "N/A", "ReduceSum", "ReduceSum", "", "compute"),
    ("trans_TransData_17", "N/A", "N/A", "TransData", "TransData", "", "compute"),
    ("aclnnMm_MatMulCommon_MatMulV2", "N/A", "N/A", "MatMulV2", "MatMul", "", "compute"),
    ("aclnnMatmul_MatMulV3Common_MatMulV3", "MatMulV3", "MIX_AIC",
     "MatMulV3", "MatMul", "", "compute"),
    ("aclnnFlashAttentionScoreGrad_FlashAttentionScoreGrad_FlashAttentionScoreGrad",
     "FlashAttentionScoreGrad", "MIX_AIC",
     "FlashAttentionScoreGrad", "FlashAttentionScoreGrad", "", "compute"),
    ("BatchMatMulV2", "BatchMatMulV2", "AI_CORE", "BatchMatMulV2", "BatchMatMul", "", "compute"),
    ("trans_Cast_5", "Cast", "AI_CPU", "Cast", "Cast", "", "aicpu"),
])
def test_canonical_names(name, type_, core, op_type, family, comm_type, category):
    got = canonical_names(pd.Series([name]), pd.Series([type_]), pd.Series([core])).iloc[0]
    assert (got["op_type"], got["family"], got["comm_type"], got["category"]) == \
        (op_type, family, comm_type, category)


@pytest.mark.parametrize("core, want", [("MIX_AIC", "MIX_AIC"), ("MIX_AIV", "MIX_AIV"),
                                        ("HCCL", "COMM"), ("COMMUNICATION", "COMM"),
                                        ("N/A", "UNKNOWN")])
def test_canonical_core(core, want):
    name = "hcom_allGather__1_1" if want == "COMM" else "MatMulV3"
    type_ = "hcom_allGather_" if want == "COMM" else "MatMulV3"
    got = canonical_names(pd.Series([name]), pd.Series([type_]), pd.Series([core])).iloc[0]
    assert got["core"] == want


def test_real_mix_aic_kernels_are_compute():
    _, rows = csv_table(COPIES / MA2025)
    mix = {r["Name"] for r in rows if r["Accelerator Core"] == "MIX_AIC"}
    assert mix
    names = pd.Series(sorted(mix))
    types = names.map({r["Name"]: r["Type"] for r in rows})
    got = canonical_names(names, types, pd.Series(["MIX_AIC"] * len(names)))
    assert set(got["category"]) == {"compute"}
    assert set(got["core"]) == {"MIX_AIC"}


# ---------------------------------------------------------------- bugs found and fixed

def test_level0_atomic_memset_name_gives_a_memset_type(tmp_path):
    case = KernelCase(MA_LEVEL0_EXCERPT, "")
    run = load_run(case.input_dir(tmp_path))
    got = str(run.ops.loc[run.ops["op_name"].astype(str) == "atomic_memset-1_18_186609_1",
                          "op_type"].iloc[0])
    assert not got.isdigit() and "memset" in got.lower()


def test_mi2023_rank0_short_row_is_a_warning_not_an_error():
    csv_file = COPIES / TEST_RANK_0 / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    with open(csv_file, newline="") as handle:
        rows = list(csv.reader(handle))
    short = [i for i, r in enumerate(rows[1:], 1) if len(r) != len(rows[0])]
    assert short == [16]
    run = load_run(COPIES / TEST_RANK_0)
    assert len(run.ops) in (len(rows) - 2, len(rows) - 1)
    assert any("kernel_details.csv" in w.text for w in run.warnings)


def test_hccl_name_without_suffix():
    got = canonical_names(pd.Series(["HcclAllReduce"]), pd.Series(["N/A"]),
                          pd.Series(["HCCL"])).iloc[0]
    assert (got["op_type"], got["comm_type"]) == ("AllReduce", "AllReduce")


def test_mc2_api_helper_kernel_keeps_its_type():
    got = canonical_names(pd.Series(["aclnnMatmulAllReduce_TransposeAiCore_Transpose"]),
                          pd.Series(["Transpose"]), pd.Series(["AI_CORE"])).iloc[0]
    assert (got["op_type"], got["category"]) == ("Transpose", "compute")


def test_level0_graph_name_of_versioned_type_keeps_family():
    got = canonical_names(pd.Series(["MatMulV21"]), pd.Series(["N/A"]),
                          pd.Series(["N/A"])).iloc[0]
    assert got["family"] == "MatMul"


# ---------------------------------------------------------------- timeline

def kernel_frame(intervals: list[tuple[int, float, float, str]]) -> pd.DataFrame:
    """(step, start µs, end µs, category) -> the columns step_breakdown_from_kernels reads."""
    return pd.DataFrame({
        "rank": np.zeros(len(intervals), dtype=np.int64),
        "step": pd.array([i[0] for i in intervals], dtype="Int64"),
        "start_ns": np.array([round(i[1] * 1000) for i in intervals], dtype=np.int64),
        "dur_us": np.array([i[2] - i[1] for i in intervals], dtype=np.float64),
        "category": [i[3] for i in intervals],
    })


C, M = "compute", "communication"


@pytest.mark.parametrize("intervals, want", [
    # compute [0,10) ∪ [5,15) = [0,15) → 15; comm [12,20) → 8; overlap [12,15) → 3;
    # exposed 8 - 3 = 5; stage [0,20) = 20, busy [0,20) → free 0
    pytest.param([(1, 0, 10, C), (1, 5, 15, C), (1, 12, 20, M)],
                 {1: (15, 8, 3, 5, 0, 20)}, id="brief-example"),
    # compute [0,10), comm [20,25): nothing overlaps; the gap [10,20) is free
    pytest.param([(1, 0, 10, C), (1, 20, 25, M)],
                 {1: (10, 5, 0, 5, 10, 25)}, id="gap-is-free"),
    # comm [2,4) hidden inside compute [0,10): all of it overlapped, none exposed
    pytest.param([(1, 0, 10, C), (1, 2, 4, M)],
                 {1: (10, 2, 2, 0, 0, 10)}, id="comm-hidden"),
    # touching compute [0,10) [10,20) and two overlapping comms [15,30) [25,40):
    # computing 20, comm [15,40) = 25, overlap [15,20) = 5, exposed 20, free 0, stage 40
    pytest.param([(1, 0, 10, C), (1, 10, 20, C), (1, 15, 30, M), (1, 25, 40, M)],
                 {1: (20, 25, 5, 20, 0, 40)}, id="touching-and-overlapping"),
    # two steps are separate groups; step 2 starts at 100
    pytest.param([(1, 0, 10, C), (1, 5, 15, C), (1, 12, 20, M),
                   (2, 100, 110, C), (2, 120, 125, M)],
                 {1: (15, 8, 3, 5, 0, 20), 2: (10, 5, 0, 5, 10, 25)}, id="two-steps"),
    # only compute, with a hole: no communication at all
    pytest.param([(3, 0, 4, C), (3, 6, 10, C)], {3: (8, 0, 0, 0, 2, 10)}, id="compute-only"),
])
def test_step_breakdown_from_kernels(intervals, want):
    got = step_breakdown_from_kernels(kernel_frame(intervals))
    assert sorted(int(s) for s in got["step"]) == sorted(want)
    fields = ["computing", "communication", "overlapped", "communication_not_overlapped",
              "free", "stage"]
    for step, values in want.items():
        row = got[got["step"] == step].iloc[0]
        assert [row[f] for f in fields] == pytest.approx(list(values), abs=1e-9), step


# ---------------------------------------------------------------- the copies are real

COPIED_FILES = sorted(str(p.relative_to(COPIES)) for p in COPIES.rglob("*")
                      if p.is_file() and p.name != "README.md")


@needs_realdata
@pytest.mark.parametrize("relative", COPIED_FILES)
def test_copy_is_byte_identical_to_shared_realdata(relative):
    assert (COPIES / relative).read_bytes() == (REALDATA / relative).read_bytes()


def test_mindspore_ascend_ms_text_export_reads_with_step_ID_header(tmp_path):
    """FORMATS.md §8: a MindSpore result has the torch_npu layout, `Step ID` spelling."""
    source = DATA / "realdata" / "Ascend__msinsight/test/data/pytorch/text/level1/rank0_ascend_pt"
    rank_dir = tmp_path / "worker_1_20250109_ascend_ms"
    shutil.copytree(source, rank_dir)
    kernels = rank_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    text = kernels.read_text()
    kernels.write_text(text.replace("Step Id,", "Step ID,", 1))
    with open(source / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="") as handle:
        rows = list(csv.reader(handle))[1:]
    run = load_run(rank_dir)
    assert run.label == "worker_1_20250109"
    assert len(run.ops) == len(rows)
    assert set(run.ops["step"].dropna().astype(int)) == {int(r[0]) for r in rows}
