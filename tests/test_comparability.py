"""Comparability: what besides the stack differs between two runs (compare/comparability.py).

Expected values are read off the input files with plain csv / json / sqlite3, or worked
out by hand for crafted profiles (tests/profiles.py, then edited here), never taken from
cann-diff's output. The real pair is one job on two stacks (MindStudio Insight's test
data at commit c1e639ee2, 2024, and at its head, 2025).
"""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from conftest import REALDATA, needs_realdata
from profiles import Comm, aclnn, write_profile

from cann_diff.compare.comparability import Comparable, comparability
from cann_diff.read import load_run
from cann_diff.read.formats import csv_files, torch_text
from cann_diff.read.reduce.ranks import RankPlan, reduce_kernels, reduce_ranks

OUT = "ASCEND_PROFILER_OUTPUT"
BASE = REALDATA / "Ascend__msinsight@c1e639ee2/test/data/pytorch"  # 2024, Ascend910A
NEW = REALDATA / "Ascend__msinsight/test/data/pytorch"  # 2025, Ascend910B
needs_pair = pytest.mark.skipif(
    not (BASE / "text/level1").is_dir() or not (NEW / "text/level2").is_dir(),
    reason="the MindStudio Insight pair (realdata/Ascend__msinsight@c1e639ee2 and "
           "realdata/Ascend__msinsight) is not beside the project")
COMPUTE_EXCLUDED_CORES = {"HCCL", "COMMUNICATION", "AI_CPU"}  # docs/formats.md §2.4


def entries(base, new) -> list[tuple[str, str, str]]:
    """(what, base, new) of each entry, for comparisons that leave the sources aside."""
    return [(c.what, c.base, c.new) for c in comparability(base, new)]


# --------------------------------------------------------------------------- by hand

def _header(csv_path: Path) -> list[str]:
    with open(csv_path, newline="", encoding="utf-8-sig") as handle:
        return [name.strip() for name in next(csv.reader(handle))]


def _pmu_class(csv_path: Path) -> str:
    """Split cores when any PMU column has the aic_/aiv_ prefix; unified when unprefixed."""
    header = _header(csv_path)
    if any(h.startswith(("aic_", "aiv_")) for h in header):
        return csv_files.SPLIT_CORES
    assert "total_cycles" in header
    return csv_files.UNIFIED_CORE


def _first_dtype(text: str) -> str:
    first = text.strip().strip('"').split(";")[0].strip().upper()
    return first.removeprefix("DT_")


def _shares(us: dict[str, float]) -> dict[str, float]:
    """Percent of compute time per recorded dtype."""
    known = {d: v for d, v in us.items() if d not in ("", "N/A")}
    total = sum(known.values())
    return {d: 100 * v / total for d, v in known.items()}


def _text_dtype_shares(run_dir: Path) -> dict[str, float]:
    """Compute kernels (not HCCL / AI_CPU) of every rank, µs by first input dtype."""
    us: dict[str, float] = {}
    for kernels in sorted(run_dir.glob(f"*_ascend_pt/{OUT}/kernel_details.csv")):
        with open(kernels, newline="", encoding="utf-8-sig") as handle:
            for row in csv.DictReader(handle):
                if row["Accelerator Core"] not in COMPUTE_EXCLUDED_CORES and row["Step Id"]:
                    dtype = _first_dtype(row["Input Data Types"])
                    us[dtype] = us.get(dtype, 0.0) + float(row["Duration(us)"])
    return _shares(us)


def _trace_algorithms(run_dir: Path) -> set[str]:
    found = set()
    for trace in run_dir.glob(f"*_ascend_pt/{OUT}/trace_view.json"):
        for event in json.loads(trace.read_text()):
            args = event.get("args") if isinstance(event, dict) else None
            if str(event.get("name", "")).startswith("hcom_allReduce") and \
                    isinstance(args, dict) and "alg_type" in args:
                found.add(args["alg_type"])
    return found


def _config(run_dir: Path, rank: int = 0) -> dict:
    info = json.loads((run_dir / f"rank{rank}_ascend_pt/profiler_info_{rank}.json").read_text())
    return {**info["config"]["common_config"], **info["config"]["experimental_config"]}


def _db(run_dir: Path, rank: int) -> sqlite3.Connection:
    path = run_dir / f"rank{rank}_ascend_pt/{OUT}/ascend_pytorch_profiler_{rank}.db"
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def _db_facts(run_dir: Path) -> dict:
    """NPU_INFO, HOST_INFO, algType and compute µs by first dtype over both ranks' dbs."""
    chips, hosts, algorithms, us = set(), set(), set(), {}
    for rank in (0, 1):
        with _db(run_dir, rank) as conn:
            chips |= {name for (name,) in conn.execute("SELECT name FROM NPU_INFO")}
            hosts |= {name for (name,) in conn.execute("SELECT hostName FROM HOST_INFO")}
            algorithms |= {value for (value,) in conn.execute(
                "SELECT s.value FROM COMMUNICATION_OP o JOIN STRING_IDS s ON s.id = o.algType")}
            for dtypes, task_type, ns in conn.execute(
                    "SELECT d.value, k.value, t.endNs - t.startNs FROM COMPUTE_TASK_INFO c "
                    "JOIN TASK t ON t.globalTaskId = c.globalTaskId "
                    "JOIN STRING_IDS d ON d.id = c.inputDataTypes "
                    "JOIN STRING_IDS k ON k.id = c.taskType "
                    "JOIN STEP_TIME w ON t.startNs BETWEEN w.startNs AND w.endNs"):
                if task_type not in COMPUTE_EXCLUDED_CORES:
                    us[_first_dtype(dtypes)] = us.get(_first_dtype(dtypes), 0.0) + ns / 1000
    return {"chips": chips, "hosts": hosts, "algorithms": algorithms, "shares": _shares(us)}


# --------------------------------------------------------------------------- real pair

@pytest.mark.slow
@needs_realdata
@needs_pair
def test_real_text_level1_pair_names_chip_hint_dtypes_algorithm_and_two_settings():
    base, new = BASE / "text/level1", NEW / "text/level1"
    # PMU columns: aicore_time(us), total_cycles, vec_time(us) … in 2024; aic_*/aiv_* in 2025.
    assert {_pmu_class(p) for p in base.glob(f"*/{OUT}/kernel_details.csv")} == \
        {csv_files.UNIFIED_CORE}
    assert {_pmu_class(p) for p in new.glob(f"*/{OUT}/kernel_details.csv")} == \
        {csv_files.SPLIT_CORES}
    # Compute time by first input dtype: FLOAT leads both (optimizer and elementwise kernels
    # run fp32), FLOAT16 (Conv2D, MatMul …) falls from ~40% to none: a ≥ 20 point move.
    before, after = _text_dtype_shares(base), _text_dtype_shares(new)
    assert max(before, key=before.get) == max(after, key=after.get) == "FLOAT"
    assert before["FLOAT16"] > 20 and "FLOAT16" not in after
    assert _trace_algorithms(base) == {"RING-RING"} and _trace_algorithms(new) == {"MESH-RING"}
    differing = [k for k, v in _config(base).items() if k != "schedule" and _config(new)[k] != v]
    assert differing == ["with_stack", "_l2_cache"]

    got = comparability(load_run(base, keep_rows=False), load_run(new, keep_rows=False))
    assert [(c.what, c.base, c.new) for c in got] == [
        ("device", csv_files.UNIFIED_CORE, csv_files.SPLIT_CORES),
        ("compute dtype mix", f"FLOAT {before['FLOAT']:.0f}%, FLOAT16 {before['FLOAT16']:.0f}%",
         f"FLOAT {after['FLOAT']:.0f}%, FLOAT16 0%"),
        ("HCCL algorithm (AllReduce)", "RING-RING", "MESH-RING"),
        ("profiler with_stack", "false", "true"),
        ("profiler l2_cache", "false", "true")]
    assert got[0].source == f"{OUT}/kernel_details.csv: PMU columns (a hint)"
    assert got[1].source == f"{OUT}/kernel_details.csv: Input Data Types"
    assert got[2].source == f"{OUT}/trace_view.json: hcom_* args.alg_type"
    assert got[3].source == got[4].source == "profiler_info_0.json"


@pytest.mark.slow
@needs_realdata
@needs_pair
def test_real_db_level1_pair_names_the_chips_of_npu_info_and_the_algorithms():
    base, new = BASE / "db/level1", NEW / "db/level1"
    facts = _db_facts(base), _db_facts(new)
    assert [f["chips"] for f in facts] == [{"Ascend910A"}, {"Ascend910B"}]
    assert [f["algorithms"] for f in facts] == [{"RING-RING"}, {"MESH-RING"}]
    assert [f["hosts"] for f in facts] == [{"ubuntu125"}, {"ubuntu"}]
    before, after = (f["shares"] for f in facts)
    got = comparability(load_run(base, keep_rows=False), load_run(new, keep_rows=False))
    db = f"{OUT}/ascend_pytorch_profiler_0.db"
    assert got == (
        Comparable("device", "Ascend910A", "Ascend910B", f"{db}: NPU_INFO"),
        Comparable("compute dtype mix",
                   f"FLOAT {before['FLOAT']:.0f}%, FLOAT16 {before['FLOAT16']:.0f}%",
                   f"FLOAT {after['FLOAT']:.0f}%, FLOAT16 0%",
                   f"{db}: COMPUTE_TASK_INFO.inputDataTypes"),
        Comparable("HCCL algorithm (AllReduce)", "RING-RING", "MESH-RING",
                   f"{db}: COMMUNICATION_OP.algType"),
        Comparable("profiler with_stack", "false", "true", "profiler_info_0.json"),
        Comparable("profiler l2_cache", "false", "true", "profiler_info_0.json"),
        Comparable("host", "ubuntu125", "ubuntu", f"{db}: HOST_INFO"))


@pytest.mark.slow
@needs_realdata
@needs_pair
def test_a_text_export_against_a_db_export_names_both_sources():
    base, new = BASE / "text/level1", NEW / "db/level1"
    before, after = _text_dtype_shares(base), _db_facts(new)["shares"]
    got = comparability(load_run(base, keep_rows=False), load_run(new, keep_rows=False))
    # The base records no device but PMU columns of a 910A-class chip; the db records the
    # device (NPU_INFO): its class is held against the hint.
    assert [(c.what, c.base, c.new) for c in got] == [
        ("device", "Ascend910A-class (unified AI Core)", "Ascend910B"),
        ("compute dtype mix", f"FLOAT {before['FLOAT']:.0f}%, FLOAT16 {before['FLOAT16']:.0f}%",
         f"FLOAT {after['FLOAT']:.0f}%, FLOAT16 0%"),
        ("HCCL algorithm (AllReduce)", "RING-RING", "MESH-RING"),
        ("profiler with_stack", "false", "true"), ("profiler l2_cache", "false", "true")]
    # How the profile was exported is not what ran: no export_type entry.
    assert got[1].source == (f"base: {OUT}/kernel_details.csv: Input Data Types; new: "
                             f"{OUT}/ascend_pytorch_profiler_0.db: "
                             "COMPUTE_TASK_INFO.inputDataTypes")


@pytest.mark.slow
@needs_realdata
@needs_pair
def test_one_run_at_level1_and_level2_differs_only_in_the_profiler_level():
    level1, level2 = NEW / "text/level1", NEW / "text/level2"
    for rank in (0, 1):  # the two profiler_info files differ in _profiler_level only
        one, two = _config(level1, rank), _config(level2, rank)
        assert [k for k in one if one[k] != two[k]] == ["_profiler_level"]
    assert entries(load_run(level1, keep_rows=False), load_run(level2, keep_rows=False)) == [
        ("profiler level", "Level1", "Level2")]


@pytest.mark.slow
@needs_realdata
@needs_pair
def test_a_real_run_against_itself_has_nothing_to_say():
    run = load_run(NEW / "text/level1", keep_rows=False)
    assert comparability(run, run) == ()


@pytest.mark.slow
@needs_realdata
@needs_pair
def test_real_run_meta_holds_the_profiler_settings_as_profiler_info_writes_them():
    meta = load_run(BASE / "text/level1", keep_rows=False).meta
    config = _config(BASE / "text/level1")
    assert dict(meta.profiler_config) == {
        "level": "Level1", "with_stack": "false", "record_shapes": "true",
        "profile_memory": "true", "with_modules": "true", "with_flops": "false",
        "l2_cache": "false", "aic_metrics": config["_aic_metrics"],
        "data_simplification": "true", "export_type": "text", "activities": "CPU, NPU"}
    assert config["activities"] == ["ProfilerActivity.CPU", "ProfilerActivity.NPU"]
    assert meta.device is None and meta.device_hint == csv_files.UNIFIED_CORE
    assert dict(meta.hccl_algorithms) == {"AllReduce": "RING-RING"}
    assert meta.to_dict()["hccl_algorithms"] == {"AllReduce": "RING-RING"}


# --------------------------------------------------------------------------- crafted

SCHEDULE = [aclnn("MatMulV3", 60.0, "8,8;8,8"), aclnn("Add", 40.0, "8,8;8,8"),
            Comm("allReduce", 30.0)]


def _rank_dirs(run_dir: Path) -> list[Path]:
    return sorted(run_dir.glob("*_ascend_pt"))


def _set_dtypes(rank_dir: Path, by_type: dict[str, str]) -> None:
    """Write ``by_type[Type]`` (one dtype for each input) into Input Data Types."""
    kernels = rank_dir / OUT / "kernel_details.csv"
    with open(kernels, newline="") as handle:
        rows = list(csv.reader(handle))
    at, kind, shapes = (rows[0].index(c) for c in ("Input Data Types", "Type", "Input Shapes"))
    for row in rows[1:]:
        if row[kind] in by_type:
            row[at] = ";".join([by_type[row[kind]]] * (row[shapes].count(";") + 1))
    with open(kernels, "w", newline="") as handle:
        csv.writer(handle, lineterminator="\r\n").writerows(rows)


def _add_column(rank_dir: Path, name: str) -> None:
    """A PMU column (value 0 on every row) at the end of kernel_details.csv."""
    kernels = rank_dir / OUT / "kernel_details.csv"
    with open(kernels, newline="") as handle:
        rows = list(csv.reader(handle))
    rows = [rows[0] + [name]] + [row + ["0"] for row in rows[1:]]
    with open(kernels, "w", newline="") as handle:
        csv.writer(handle, lineterminator="\r\n").writerows(rows)


def _set_config(rank_dir: Path, **experimental_or_common) -> None:
    """Set profiler_info config keys (``_``-prefixed ones are experimental_config's)."""
    info_path = next(rank_dir.glob("profiler_info_*.json"))
    info = json.loads(info_path.read_text())
    config = info["config"]
    for key, value in experimental_or_common.items():
        section = "experimental_config" if key.startswith("_") else "common_config"
        config.setdefault(section, {})[key] = value
    info_path.write_text(json.dumps(info))


def _add_trace(rank_dir: Path, algorithm: str, flows: bool = True) -> None:
    """A trace_view.json beside kernel_details.csv: one torch op and its launch flow (the
    host side the framework level reads), and one op-level AllReduce carrying alg_type."""
    ts = "1736413971000000.000"
    events = [{"ph": "M", "name": "process_name", "pid": 3, "args": {"name": "HCCL"}},
              {"ph": "X", "name": "hcom_allReduce__586_0_1", "pid": 3, "tid": 0, "ts": ts,
               "dur": 30.0, "args": {"data_type": "FP32", "alg_type": algorithm,
                                     "count": 4096}}]
    if flows:
        events += [{"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 1, "tid": 1,
                    "ts": ts, "dur": 5.0, "args": {"Sequence number": -1}},
                   {"ph": "s", "cat": "async_npu", "name": "torch_to_npu", "id": 1, "pid": 1,
                    "tid": 1, "ts": "1736413971000001.000"},
                   {"ph": "f", "cat": "async_npu", "name": "torch_to_npu", "id": 1, "pid": 2,
                    "tid": 2, "ts": "1736413971000002.000", "bp": "e"}]
    (rank_dir / OUT / "trace_view.json").write_text(json.dumps(events))


def _add_chip(rank_dir: Path, platform_version: str, host: str) -> None:
    """A PROF_* directory whose host/info.json names the chip (msprof's CHIP_TABLE)."""
    prof = rank_dir / "PROF_000001_20250109171251000_ABCDEFGHIJKLMNOP"
    (prof / "host").mkdir(parents=True)
    (prof / "host" / "info.json").write_text(json.dumps(
        {"platform_version": platform_version, "hostname": host}))


def test_crafted_pair_lists_every_difference_in_order(tmp_path):
    base = write_profile(tmp_path, "base", SCHEDULE, ranks=(0, 1)).path
    new = write_profile(tmp_path, "new", SCHEDULE, ranks=(0, 1)).path
    for run_dir, chip, host, dtype, stack, algorithm in (
            (base, "1", "node-a", "FLOAT16", False, "RING-RING"),
            (new, "5", "node-b", "FLOAT", True, "MESH-RING")):
        for rank_dir in _rank_dirs(run_dir):
            _add_chip(rank_dir, chip, host)
            _set_dtypes(rank_dir, {"MatMulV3": dtype, "Add": dtype})
            _set_config(rank_dir, with_stack=stack, _l2_cache=False)
            _add_trace(rank_dir, algorithm)
    # Every compute kernel moved from FLOAT16 (100% of 100 µs a step) to FLOAT (100%).
    assert entries(load_run(base), load_run(new)) == [
        ("device", "Ascend910A", "Ascend910B"),  # platform_version 1 and 5 (CHIP_TABLE)
        ("compute dtype mix", "FLOAT16 100%, FLOAT 0%", "FLOAT 100%, FLOAT16 0%"),
        ("HCCL algorithm (AllReduce)", "RING-RING", "MESH-RING"),
        ("profiler with_stack", "false", "true"),
        ("host", "node-a", "node-b")]


def test_ranks_that_disagree_are_mixed_and_differ_from_agreeing_ranks(tmp_path):
    base = write_profile(tmp_path, "base", SCHEDULE, ranks=(0, 1)).path
    new = write_profile(tmp_path, "new", SCHEDULE, ranks=(0, 1)).path
    for rank_dir, stack, algorithm in zip(_rank_dirs(base), (False, True),
                                          ("RING-RING", "MESH-RING")):
        _set_config(rank_dir, with_stack=stack)
        _add_trace(rank_dir, algorithm)
    for rank_dir in _rank_dirs(new):
        _set_config(rank_dir, with_stack=True)
        _add_trace(rank_dir, "MESH-RING")
    meta = load_run(base).meta
    assert dict(meta.hccl_algorithms) == {"AllReduce": "mixed: MESH-RING (1 rank), "
                                                       "RING-RING (1 rank)"}
    assert meta.profiler_config["with_stack"] == "mixed: false (1 rank), true (1 rank)"
    assert entries(load_run(base), load_run(new)) == [
        ("HCCL algorithm (AllReduce)", "mixed: MESH-RING (1 rank), RING-RING (1 rank)",
         "MESH-RING"),
        ("profiler with_stack", "mixed: false (1 rank), true (1 rank)", "true")]


def _dtype_pair(tmp_path, schedule, base_types: dict, new_types: dict):
    base = write_profile(tmp_path, "base", schedule).path
    new = write_profile(tmp_path, "new", schedule).path
    _set_dtypes(_rank_dirs(base)[0], base_types)
    _set_dtypes(_rank_dirs(new)[0], new_types)
    return entries(load_run(base), load_run(new))


def test_a_dtype_share_moving_20_points_counts_though_the_largest_stays(tmp_path):
    schedule = [aclnn("MatMulV3", 60.0, "8,8;8,8"), aclnn("Add", 20.0, "8,8;8,8"),
                aclnn("Mul", 20.0, "8,8;8,8")]
    # FLOAT16 60% stays largest; FLOAT 40% → 20% and BF16 0% → 20%: moves of exactly 20.
    got = _dtype_pair(tmp_path, schedule, {"MatMulV3": "FLOAT16", "Add": "FLOAT", "Mul": "FLOAT"},
                      {"MatMulV3": "FLOAT16", "Add": "FLOAT", "Mul": "DT_BF16"})
    assert got == [("compute dtype mix", "FLOAT16 60%, FLOAT 40%, BF16 0%",
                    "FLOAT16 60%, BF16 20%, FLOAT 20%")]


def test_a_dtype_share_moving_less_than_20_points_is_like_for_like(tmp_path):
    schedule = [aclnn("MatMulV3", 60.0, "8,8;8,8"), aclnn("Add", 25.0, "8,8;8,8"),
                aclnn("Mul", 15.0, "8,8;8,8")]
    # FLOAT 40% → 25%, BF16 0% → 15%: 15 points each, FLOAT16 60% largest on both sides.
    assert _dtype_pair(tmp_path, schedule,
                       {"MatMulV3": "FLOAT16", "Add": "FLOAT", "Mul": "FLOAT"},
                       {"MatMulV3": "FLOAT16", "Add": "FLOAT", "Mul": "BF16"}) == []


def test_what_one_side_does_not_record_is_no_difference(tmp_path):
    base = write_profile(tmp_path, "base", SCHEDULE, level0=True).path  # no dtypes, no config
    new = write_profile(tmp_path, "new", SCHEDULE).path
    new_rank = _rank_dirs(new)[0]
    _set_config(new_rank, with_stack=True, _l2_cache=True)
    _add_chip(new_rank, "5", "node0")
    _add_trace(new_rank, "MESH-RING")
    _add_column(new_rank, "aic_total_cycles")
    # Only _profiler_level is in both profiler_info files; the chip, the hint, the dtypes
    # and the algorithm are on the new side only. The host is node0 on both.
    assert entries(load_run(base), load_run(new)) == [("profiler level", "Level0", "Level1")]


def test_the_pmu_hint_stands_in_only_where_a_side_records_no_device(tmp_path):
    base = write_profile(tmp_path, "base", SCHEDULE).path
    new = write_profile(tmp_path, "new", SCHEDULE).path
    _add_column(_rank_dirs(base)[0], "total_cycles")
    _add_column(_rank_dirs(new)[0], "aic_total_cycles")
    got = comparability(load_run(base), load_run(new))
    assert got == (Comparable("device", csv_files.UNIFIED_CORE, csv_files.SPLIT_CORES,
                              f"{OUT}/kernel_details.csv: PMU columns (a hint)"),)
    _add_chip(_rank_dirs(new)[0], "5", "node0")  # one side records its chip: still the hint
    assert entries(load_run(base), load_run(new))[0][0] == "device"
    _add_chip(_rank_dirs(base)[0], "5", "node0")  # both record Ascend910B: the hint yields
    base_run, new_run = load_run(base), load_run(new)
    assert (base_run.meta.device, new_run.meta.device) == ("Ascend910B", "Ascend910B")
    assert base_run.meta.device_hint == csv_files.UNIFIED_CORE  # kept, but not compared
    assert comparability(base_run, new_run) == ()


def test_world_size_when_recorded_else_the_ranks_read(tmp_path):
    base = write_profile(tmp_path, "base", SCHEDULE, ranks=(0, 1)).path
    new = write_profile(tmp_path, "new", SCHEDULE, ranks=(0, 1, 2)).path
    single = write_profile(tmp_path, "single", SCHEDULE).path
    assert comparability(load_run(base), load_run(new)) == (
        Comparable("ranks read", "2", "3", "the rank results read (no world_size recorded)"),)
    assert comparability(load_run(single), load_run(new)) == ()  # one rank of a job: no count
    for run_dir, size in ((base, 8), (new, 8)):
        for rank_dir in _rank_dirs(run_dir):
            (rank_dir / "profiler_metadata.json").write_text(json.dumps(
                {"distributed_args": {"world_size": size}}))
    assert comparability(load_run(base), load_run(new)) == ()  # 8 and 8, whatever was read
    for rank_dir in _rank_dirs(new):
        (rank_dir / "profiler_metadata.json").write_text(json.dumps(
            {"distributed_args": {"world_size": 16}}))
    assert comparability(load_run(base), load_run(new)) == (
        Comparable("world size", "8", "16", "profiler_metadata.json"),)


def test_a_run_against_itself_and_an_identical_copy_have_nothing_to_say(tmp_path):
    base = write_profile(tmp_path, "base", SCHEDULE, ranks=(0, 1)).path
    for rank_dir in _rank_dirs(base):
        _set_config(rank_dir, with_stack=True)
        _add_trace(rank_dir, "RING-RING")
    copy = Path(shutil.copytree(base, tmp_path / "copy"))
    run = load_run(base)
    assert comparability(run, run) == ()
    assert comparability(run, load_run(copy)) == ()


def test_a_trace_only_rank_names_its_algorithm_without_flow_events(tmp_path):
    rank_dir = tmp_path / "rank0_ascend_pt"
    (rank_dir / OUT).mkdir(parents=True)
    (rank_dir / "profiler_info_0.json").write_text(json.dumps({"config": {}}))
    ts = "1736413971000000.000"
    (rank_dir / OUT / "trace_view.json").write_text(json.dumps([
        {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "Ascend Hardware"}},
        {"ph": "M", "name": "process_name", "pid": 3, "args": {"name": "HCCL"}},
        {"ph": "X", "name": "aclnnMatmul_MatMulV3Common_MatMulV3", "pid": 2, "tid": 1,
         "ts": ts, "dur": 10.0, "args": {"Task Type": "AI_CORE"}},
        {"ph": "X", "name": "hcom_allGather__12_0_1", "pid": 3, "tid": 0, "ts": ts,
         "dur": 4.0, "args": {"alg_type": "NHR"}},
        {"ph": "X", "name": "hcom_allGather__12_1_1", "pid": 3, "tid": 0, "ts": ts,
         "dur": 4.0, "args": {"alg_type": "RING"}}]))
    meta = load_run(rank_dir).meta
    assert meta.format == "trace_json"
    assert dict(meta.hccl_algorithms) == {"AllGather": "NHR/RING"}  # one rank, two algorithms
    assert meta.detail_sources["hccl_algorithms"] == f"{OUT}/trace_view.json: hcom_* args.alg_type"


def test_a_text_export_whose_trace_has_no_flows_records_no_algorithm(tmp_path):
    """The algorithms come with the framework pass's host links; without launch flows that
    pass has none (a profile without CPU activity), so the algorithm is not recorded."""
    base = write_profile(tmp_path, "base", SCHEDULE).path
    _add_trace(_rank_dirs(base)[0], "RING-RING", flows=False)
    meta = load_run(base).meta
    assert dict(meta.hccl_algorithms) == {}
    assert meta.detail_sources["hccl_algorithms"] == f"{OUT}/trace_view.json: hcom_* args.alg_type"


def test_dtype_time_is_the_same_reduced_alone_or_stacked(tmp_path):
    def schedule(rank: int, step: int):
        return [aclnn("MatMulV3", 10.0 * (rank + 1), "8,8;8,8"), aclnn("Add", 2.0 + step),
                aclnn("Cast", 1.5, "8,8"), Comm("allReduce", 30.0)]

    run_dir = write_profile(tmp_path, "run", schedule, ranks=(0, 1, 2)).path
    for rank_dir, dtype in zip(_rank_dirs(run_dir), ("FLOAT16", "FLOAT", "DT_BF16")):
        _set_dtypes(rank_dir, {"MatMulV3": dtype, "Cast": "INT8"})
    plan = RankPlan()
    datas = [torch_text.read_rank(p) for p in _rank_dirs(run_dir)]
    alone = [reduce_kernels(d, plan).dtype_us for d in datas]
    stacked = [r.dtype_us for r in reduce_ranks([torch_text.read_rank(p)
                                                 for p in _rank_dirs(run_dir)], plan)]
    # Steps 1-3: MatMulV3 10·(rank+1) µs, Cast 1.5 µs, Add (no shapes, no dtype) 3+4+5 µs.
    assert alone == stacked == [{"FLOAT16": 30.0, "INT8": 4.5, "": 12.0},
                                {"FLOAT": 60.0, "INT8": 4.5, "": 12.0},
                                {"BF16": 90.0, "INT8": 4.5, "": 12.0}]
    assert load_run(run_dir).dtype_us == {"FLOAT16": 30.0, "FLOAT": 60.0, "BF16": 90.0,
                                          "INT8": 13.5, "": 36.0}


def test_a_recorded_chip_is_held_against_the_other_sides_pmu_hint_by_its_class():
    from cann_diff.compare.comparability import chip_class

    assert chip_class("Ascend910B3") == chip_class("Ascend910_9391") == "Ascend910B-class"
    assert chip_class("Ascend910A") == chip_class("Ascend910ProB") == "Ascend910A-class"
    assert chip_class("Ascend310P3") is None  # no class known: no difference claimed
