"""Reader for msprof PROF_* directories (cann_diff.read.formats.msprof_dirs) and detection.

Expected rows come from the files through csv/json in the test. Real-data cases skip
when ../shared/realdata is absent; one vllm-ascend PROF dir and one 2023
MindInsight timeline slice are copied into tests/data/formats (see its README.md).
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pytest
from conftest import REALDATA as REAL

from cann_diff.errors import InputError
from cann_diff.read import FORMATS, load_run
from cann_diff.read.formats import msprof_dirs

VLLM = REAL / "vllm-project__vllm-ascend"
MINDINSIGHT = REAL / "mindspore-ai__mindinsight/tests/utils/resource/profiler"
DATA = Path(__file__).parent / "data" / "formats"
needs_vllm = pytest.mark.skipif(not VLLM.exists(), reason="../shared/realdata "
                                                          "(vllm-ascend msprof output) not present")
needs_mindinsight = pytest.mark.skipif(not MINDINSIGHT.exists(),
                                       reason="../shared/realdata (MindInsight 2023 PROF "
                                              "dirs) not present")


def csv_rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def shape(text: str) -> str:
    return "" if text.strip() in ("", "N/A") else text.replace('"', "").replace(" ", "")


def check_op_summary_dir(prof: Path) -> None:
    """load_run(PROF dir) == the op_summary rows: count, types, shapes, ns starts."""
    rows = [r for f in sorted(prof.glob("mindstudio_profiler_output/op_summary_*.csv"))
            for r in csv_rows(f)]
    run = load_run(prof)
    assert run.meta.format == "msprof"
    assert len(run.ops) == len(rows) > 0
    expected = Counter((r["OP Type"], shape(r["Input Shapes"]),
                        int(Decimal(r["Task Start Time(us)"].strip()) * 1000)) for r in rows)
    got = Counter(zip(run.ops["op_type"].astype(str), run.ops["input_shapes"].astype(str),
                      run.ops["start_ns"]))
    assert got == expected
    assert run.ops["step"].isna().all()  # msprof has no framework steps: one unit


def vllm_variants() -> list[Path]:
    return sorted(VLLM.rglob("op_summary_*.csv")) if VLLM.exists() else []


@needs_vllm
@pytest.mark.parametrize("summary", vllm_variants(), ids=lambda p: p.parents[2].name)
def test_every_vllm_ascend_op_summary_variant_reads(summary):
    header = next(csv.reader(open(summary, newline="", encoding="utf-8")))
    assert "Block Num" in header  # the newest header variant (REALDATA.md)
    check_op_summary_dir(summary.parents[1])


def test_vllm_copy_reads_without_realdata():
    check_op_summary_dir(DATA / "vllm_ascend/PROF_000001_20260823165413436_00626258NIRJNPIC")


def timeline_expectation(files: list[Path]) -> Counter:
    """Kernels, copies and op-level collectives of msprof timeline slices, by (name, core)."""
    expected = Counter()
    for file in files:
        events = json.loads(file.read_text("utf-8"))
        processes = {e["pid"]: e["args"]["name"] for e in events
                     if e.get("ph") == "M" and e.get("name") == "process_name"}
        threads = {(e["pid"], e["tid"]): e["args"]["name"] for e in events
                   if e.get("ph") == "M" and e.get("name") == "thread_name"}
        for e in events:
            if e.get("ph") != "X":
                continue
            process = processes.get(e["pid"])
            task = (e.get("args") or {}).get("Task Type")
            if process == "Ascend Hardware" and task in ("AI_CORE", "AI_CPU", "MEMCPY_ASYNC"):
                expected[task] += 1
            elif process == "HCCL" and not threads.get((e["pid"], e["tid"]), "").startswith(
                    "Plane"):
                expected["COMM"] += 1
    return expected


def check_timeline_dir(prof: Path) -> None:
    files = sorted(prof.glob("device_*/timeline/msprof_*.json"))
    run = load_run(prof)
    core_of = {"compute": "AI_CORE", "aicpu": "AI_CPU", "memcpy": "MEMCPY_ASYNC",
               "communication": "COMM"}
    got = Counter(run.ops["category"].astype(str).map(core_of))
    assert got == timeline_expectation(files)
    assert set(run.ops.loc[run.ops["category"] == "communication", "comm_type"]
               .astype(str)) == {"AllReduce"}
    info = json.loads(next(prof.glob("device_*/info.json.*")).read_text())
    assert run.meta.ranks == (info["rank_id"],) and run.meta.device == "Ascend910A"


@needs_mindinsight
@pytest.mark.parametrize("prof", sorted(MINDINSIGHT.glob("PROF_*")) if MINDINSIGHT.exists()
                         else [], ids=lambda p: p.name[-6:])
def test_2023_mindinsight_prof_dirs_read_from_timeline_slices(prof):
    check_timeline_dir(prof)


def test_2023_prof_copy_reads_without_realdata():
    check_timeline_dir(DATA / "mindinsight/PROF_000001_20230818142704322_COJGGGCANRMICFBC")


@needs_mindinsight
def test_2023_mindinsight_parent_folder_reads_both_ranks():
    assert load_run(MINDINSIGHT).meta.ranks == (0, 1)


def test_prof_dir_without_exported_data_is_a_clear_input_error(tmp_path):
    prof = tmp_path / "PROF_000001_20230818142704322_COJGGGCANRMICFBC"
    (prof / "device_0" / "data").mkdir(parents=True)
    with pytest.raises(InputError, match=r"op_summary_\*\.csv.*msprof --export"):
        load_run(prof)


SUMMARY_HEADER = ("Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,"
                  "Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Num,"
                  "Input Shapes,Input Data Types\n")


def test_op_summary_slices_are_concatenated_and_copies_marked_memcpy(tmp_path):
    out = tmp_path / "PROF_000002_20260101000000000_ABCDEF" / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    (out / "op_summary_slice_0_20260101.csv").write_text(
        SUMMARY_HEADER
        + '0,1,1,2,aclnnMm_MatMulV3Common_MatMulV3,MatMulV3,static,AI_CORE,'
          '1787504054381431.513\t,4.8,0,20,"""8,16;16,4""",DT_BF16;DT_BF16\n')
    (out / "op_summary_slice_1_20260101.csv").write_text(
        SUMMARY_HEADER
        + "0,1,2,2,MEMCPY_ASYNC,N/A,N/A,MEMCPY_ASYNC,1787504054381500.000\t,9.5,0,0,N/A,N/A\n"
        + "0,1,3,2,hcom_allReduce__1_0_1,hcom_allReduce_,N/A,COMMUNICATION,"
          "1787504054381600.000\t,20,0,0,N/A,N/A\n")
    (out / "op_statistic_20260101.csv").write_text("Device_id,OP Type\n0,MatMulV3\n")
    run = load_run(out.parent)
    assert list(run.ops["category"].astype(str)) == ["compute", "memcpy", "communication"]
    assert list(run.ops["start_ns"]) == [1787504054381431513, 1787504054381500000,
                                         1787504054381600000]
    assert list(run.ops["input_dtypes"].astype(str)) == ["BF16;BF16", "", ""]
    assert run.ops["op_type_raw"].astype(str).iloc[1] == "MEMCPY_ASYNC"


def test_unknown_layout_lists_every_format_looked_for(tmp_path):
    (tmp_path / "notes.txt").write_text("nothing here")
    with pytest.raises(InputError) as info:
        load_run(tmp_path)
    for fmt in FORMATS:
        assert fmt.looks_for in str(info.value)
    assert {f.name for f in FORMATS} >= {"ascend_db", "ascend_pt_text", "msprof", "trace_json"}
    names = [f.name for f in FORMATS]
    assert names.index("ascend_db") < names.index("ascend_pt_text") < names.index("msprof") \
        < names.index("trace_json")  # FORMATS.md §12 priority


def test_prof_regex_matches_real_names():
    for name in ("PROF_000001_20260823165413436_00626258NIRJNPIC",
                 "PROF_000001_20230818142704322_COJGGGCANRMICFBC"):
        assert re.match(msprof_dirs.PROF_DIR, name)
    assert not msprof_dirs.PROF_DIR.match("PROF_MemoryL0")
