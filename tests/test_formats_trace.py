"""Reader for trace_view.json / Kineto traces (cann_diff.read.formats.trace_json).

Expected counts and times come from the files through json/gzip/csv/Decimal in the
test, not from the reader. Real-data cases skip when ../shared/realdata is absent;
the HTA trace_compare pair is copied into tests/data/formats (see its README.md).
"""

from __future__ import annotations

import csv
import gzip
import json
import shutil
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pandas as pd
import pytest
from conftest import REALDATA as REAL

from cann_diff.errors import InputError, SchemaError
from cann_diff.read import load_run
from cann_diff.read.formats import trace_json

TEXT = REAL / "Ascend__msinsight/test/data/pytorch/text"
HTA = REAL / "facebookresearch__HolisticTraceAnalysis/tests/data"
DATA = Path(__file__).parent / "data" / "formats"
needs_text = pytest.mark.skipif(not TEXT.exists(), reason="../shared/realdata (MindStudio "
                                                          "Insight text export) not present")
needs_hta = pytest.mark.skipif(not HTA.exists(), reason="../shared/realdata (HTA Kineto "
                                                        "traces) not present")
GPU_CATS = {"kernel", "gpu_memcpy", "gpu_memset"}


def load_events(path: Path) -> list[dict]:
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        data = json.load(handle)
    return data["traceEvents"] if isinstance(data, dict) else data


def us_to_ns(text: str) -> int:
    return int(Decimal(text.strip()) * 1000)


def trace_only_copy(rank_dir: Path, target: Path) -> Path:
    """A rank dir holding only profiler_info and trace_view.json (no kernel_details.csv)."""
    out = target / rank_dir.name / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    for info in rank_dir.glob("profiler_info*.json"):
        shutil.copy(info, target / rank_dir.name)
    shutil.copy(rank_dir / "ASCEND_PROFILER_OUTPUT/trace_view.json", out)
    return target / rank_dir.name


# --- torch_npu trace_view.json vs its kernel_details.csv -------------------------------


@pytest.mark.slow
@needs_text
@pytest.mark.parametrize("level", ["level0", "level1", "level2"])
def test_trace_only_run_has_kernel_details_count_and_start_times(level, tmp_path):
    rank_dir = TEXT / level / "rank0_ascend_pt"
    with open(rank_dir / "ASCEND_PROFILER_OUTPUT/kernel_details.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    run = load_run(trace_only_copy(rank_dir, tmp_path))
    assert run.meta.format == "trace_json"
    assert len(run.ops) == len(rows)
    # Compute kernels carry the same name and exactly the same ns start as the csv row
    # (communication ops may differ by 1 ns: the two exports round them separately).
    csv_kernels = Counter((r["Name"], us_to_ns(r["Start Time(us)"])) for r in rows
                          if r["Accelerator Core"] not in ("HCCL", "COMMUNICATION"))
    compute = run.ops[run.ops["category"] != "communication"]
    assert Counter(zip(compute["op_name"].astype(str), compute["start_ns"])) == csv_kernels
    text = load_run(rank_dir)
    assert Counter(run.ops["op_type"].astype(str)) == Counter(text.ops["op_type"].astype(str))
    assert Counter(run.ops["category"].astype(str)) == Counter(text.ops["category"].astype(str))


@needs_text
def test_trace_view_file_path_is_accepted():
    trace = TEXT / "level1/rank1_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json"
    assert trace_json.is_rank_dir(trace)
    data = trace_json.read_rank(trace)
    events = load_events(trace)
    steps = [e for e in events if str(e.get("name", "")).startswith("ProfilerStep#")]
    assert set(data.ops["step"].dropna()) == {int(e["name"].split("#")[1]) for e in steps}
    assert data.rank == 1  # from profiler_info_1.json beside the output dir


# --- Kineto (GPU) ----------------------------------------------------------------------


def kineto_files() -> list[Path]:
    return sorted(HTA.rglob("*.json.gz")) if HTA.exists() else []


@pytest.mark.slow
@needs_hta
@pytest.mark.parametrize("trace", kineto_files(), ids=lambda p: p.name)
def test_hta_kineto_traces_read(trace):
    events = load_events(trace)
    device = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS]
    data = trace_json.read_rank(trace)
    assert len(data.ops) == len(device)
    kernels = Counter(e["name"] for e in device if e["cat"] == "kernel")
    names = Counter(data.ops["op_name"].astype(str))
    assert {name: names[name] for name in kernels} == kernels
    run = load_run(trace)
    assert run.meta.format == "trace_json" and len(run.ops) > 0


@pytest.mark.slow
@needs_hta
def test_nccl_kernels_become_communication_and_gemm_family_matmul():
    trace = HTA / "nccl_parser_config/nccl_data.json.gz"
    events = load_events(trace)
    nccl = Counter(e["args"]["Collective name"] for e in events
                   if e.get("cat") == "kernel" and e["name"].startswith("nccl"))
    run = load_run(trace)
    comm = run.ops[run.ops["category"] == "communication"]
    expected = {"allreduce": "AllReduce", "broadcast": "Broadcast"}
    assert Counter(comm["comm_type"].astype(str)) == {expected[k]: v for k, v in nccl.items()}
    sgemm = [e["name"] for e in events if e.get("cat") == "kernel"
             and "s1688gemm" in e["name"] and "conv" not in e["name"].lower()]
    matmul = run.ops[run.ops["family"] == "MatMul"]
    assert len(sgemm) > 0 and set(sgemm) <= set(matmul["op_name"].astype(str))
    assert run.meta.device == "NVIDIA A100-PG509-200" and run.meta.ranks == (0,)


def test_hta_trace_compare_copies_steps_and_copies(tmp_path):
    for name in ("base.json.gz", "test.json.gz"):
        trace = DATA / "hta" / name
        events = load_events(trace)
        windows = [(int(e["name"].split("#")[1]), e["ts"], e["ts"] + e["dur"]) for e in events
                   if str(e.get("name", "")).startswith("ProfilerStep#")]
        device = [e for e in events if e.get("ph") == "X" and e.get("cat") in GPU_CATS]
        expected = Counter(next((s for s, lo, hi in windows if lo <= e["ts"] <= hi), None)
                           for e in device)
        data = trace_json.read_rank(trace)
        got = Counter(None if v is pd.NA else int(v) for v in data.ops["step"])
        assert got == expected
        copies = sum(1 for e in device if e["cat"] == "gpu_memcpy")
        run = load_run(trace)
        assert run.meta.ranks == (1,)
        kept = [e for e in device if any(lo <= e["ts"] <= hi for _, lo, hi in windows)]
        assert len(run.ops) == len(kept)
        assert (data.ops["op_type_raw"].astype(str).str.startswith("MEMCPY")).sum() == copies
    folder = tmp_path / "base"
    folder.mkdir()
    shutil.copy(DATA / "hta" / "base.json.gz", folder)
    assert trace_json.is_rank_dir(folder)  # a folder holding one trace is one rank


def test_gpu_baseline_matches_npu_run_at_family_level(tmp_path):
    """A Kineto GEMM + NCCL AllReduce against an Ascend MatMulV2 + hcom_allReduce."""
    gpu = {"distributedInfo": {"rank": 2}, "traceEvents": [
        {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_128x64_tn", "pid": 0, "tid": 7,
         "ts": 100, "dur": 5, "args": {}},
        {"ph": "X", "cat": "kernel", "name": "ncclKernel_AllReduce_RING_LL_Sum_float(x)",
         "pid": 0, "tid": 9, "ts": 110.5, "dur": 50, "args": {}}],
        "baseTimeNanoseconds": 1700000000000000000}
    npu = [
        {"ph": "M", "name": "process_name", "pid": 7, "tid": 0, "args": {"name": HW}},
        {"ph": "M", "name": "process_name", "pid": 8, "tid": 0, "args": {"name": "HCCL"}},
        {"ph": "M", "name": "thread_name", "pid": 8, "tid": 0,
         "args": {"name": "Group 0 Communication"}},
        {"ph": "X", "name": "aclnnMm_MatMulCommon_MatMulV2", "pid": 7, "tid": 2,
         "ts": "1.000", "dur": 5, "args": {"Task Type": "AI_CORE"}},
        {"ph": "X", "name": "hcom_allReduce__1_0_1", "pid": 8, "tid": 0, "ts": "10.000",
         "dur": 50, "args": {}}]
    (tmp_path / "gpu.json").write_text(json.dumps(gpu))
    (tmp_path / "npu.json").write_text(json.dumps(npu))
    families = [set(load_run(tmp_path / f).ops["family"].astype(str))
                for f in ("gpu.json", "npu.json")]
    assert families[0] == families[1] == {"MatMul", "AllReduce"}
    # Kineto ts are relative to baseTimeNanoseconds (written after traceEvents).
    gpu_run = load_run(tmp_path / "gpu.json")
    assert list(gpu_run.ops["start_ns"]) == [1700000000000100000, 1700000000000110500]
    assert gpu_run.meta.ranks == (2,)


# --- synthetic Ascend trace -------------------------------------------------------------

HW = "Ascend Hardware"


def ascend_trace() -> list[dict]:
    """Metadata last (as torch_npu writes it), non-op tasks, Plane threads, one step."""
    x = {"ph": "X", "pid": 10}
    return [
        {"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#3", "pid": 1, "tid": 1,
         "ts": "1736408883700000.000", "dur": 1000.0},
        {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
         "ts": "1736408883700001.000", "dur": 1.0},
        {**x, "name": "aclnnMm_MatMulV3Common_MatMulV3", "tid": 2, "ts": "1736408883700100.123",
         "dur": 3.5, "args": {"Task Type": "KERNEL_AICORE"}},
        {**x, "name": "Notify Wait", "tid": 2, "ts": "1736408883700200.000", "dur": 1,
         "args": {"Task Type": "Notify Wait"}},
        {**x, "name": "MEMCPY_ASYNC", "tid": 2, "ts": "1736408883700300.000", "dur": 1,
         "args": {"Task Type": "PCIE_DMA_SQE"}},
        {**x, "name": "EVENT_RECORD", "tid": 2, "ts": "1736408883700301.000", "dur": 1,
         "args": {"Task Type": "PLACE_HOLDER_SQE"}},
        {**x, "name": "trans_TransData_4", "tid": 2, "ts": "1736408883702000.999", "dur": 2,
         "args": {"Task Type": "AI_CORE"}},
        {"ph": "X", "pid": 20, "tid": 0, "name": "hcom_allGather__7_1_1",
         "ts": "1736408883700400.000", "dur": 50.0, "args": {}},
        {"ph": "X", "pid": 20, "tid": 1, "name": "Memcpy", "ts": "1736408883700401.000",
         "dur": 5.0, "args": {}},
        {"ph": "M", "name": "process_name", "pid": 1, "tid": 0, "args": {"name": "Python"}},
        {"ph": "M", "name": "process_name", "pid": 10, "tid": 0, "args": {"name": HW}},
        {"ph": "M", "name": "process_labels", "pid": 10, "tid": 0, "args": {"labels": "NPU 3"}},
        {"ph": "M", "name": "process_name", "pid": 20, "tid": 0,
         "args": {"name": "Communication"}},
        {"ph": "M", "name": "thread_name", "pid": 20, "tid": 0,
         "args": {"name": "Group abc Communication"}},
        {"ph": "M", "name": "thread_name", "pid": 20, "tid": 1, "args": {"name": "Plane 0"}},
    ]


def test_synthetic_ascend_trace(tmp_path):
    path = tmp_path / "trace_view.json"
    path.write_text(json.dumps(ascend_trace()))
    data = trace_json.read_rank(tmp_path)
    ops = data.ops
    assert list(ops["op_name"].astype(str)) == ["aclnnMm_MatMulV3Common_MatMulV3",
                                                "hcom_allGather__7_1_1", "trans_TransData_4"]
    assert list(ops["start_ns"]) == [1736408883700100123, 1736408883700400000,
                                     1736408883702000999]
    assert list(ops["core"].astype(str)) == ["AI_CORE", "COMMUNICATION", "AI_CORE"]
    assert list(ops["step"].fillna(-1)) == [3, 3, -1]  # the last starts after the step
    assert data.info["device_id"] == 3
    run = load_run(path)
    assert list(run.ops["op_type"].astype(str)) == ["MatMulV3", "AllGather"]
    gz = tmp_path / "copy.json.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert len(trace_json.read_rank(gz).ops) == 3


@pytest.mark.parametrize("content, error, message", [
    (b'[{"ph": "X", "name": "a", "ts": "1.0"', InputError, "truncated or invalid JSON"),
    (b"", InputError, "empty file"),
    (b'"just a string"', InputError, "not a trace"),
    (b'{"traceEvents": [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 1, "dur": 1,'
     b' "pid": 1, "tid": 1}]}', SchemaError, "no 'Ascend Hardware' process"),
])
def test_bad_trace_files_raise_input_errors(tmp_path, content, error, message):
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(error, match=message):
        load_run(path)


def test_corrupt_gzip_is_an_input_error(tmp_path):
    path = tmp_path / "bad.json.gz"
    path.write_bytes(gzip.compress(b'{"traceEvents": []}')[:-12])
    with pytest.raises(InputError):
        load_run(path)
