"""One read per rank: kernels, steps, communication and memory from the same ranks.

Crafted fixtures are written into tmp_path with their answers worked out by hand in the
comments; the real memory file (tests/data/memory/test_rank_0, MI-2023) is paired with
its own kernel_details.csv (tests/data/realdata, same source directory) and the expected
figures are computed here with pandas on the raw files, independently of the readers.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import DATA, REALDATA, needs_realdata
from profiles import aclnn, texts, write_profile

import cann_diff.read
from cann_diff.cli import main
from cann_diff.errors import InputError, SchemaError
from cann_diff.pipeline import Options, diff
from cann_diff.read import load_run, read_memory, select_steps
from cann_diff.settings import Limits, Thresholds

T0 = 1_736_413_971_000_000.0  # µs; every offset below is a whole µs, exact in float64
KERNEL_HEADER = "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us)"
RECORD_HEADER = "Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),Device Type"
MODULE_HEADER = "Component,Timestamp(us),Total Reserved(MB),Device"
MI2023_KERNELS = DATA / "realdata" / "Ascend__msinsight/server/src/test/test_data" \
    / "test_rank_0/ASCEND_PROFILER_OUTPUT/kernel_details.csv"
MEMORY_RANK0 = DATA / "memory" / "test_rank_0"
ST_LEVEL2 = REALDATA / "Ascend__msinsight/test/st/level2"


def write_rank(root: Path, name: str, rank: int, *, kernels=(), records=(), modules=()):
    """One ``*_ascend_pt`` rank: kernels (step, start offset µs, duration µs), memory_record
    rows (component, offset µs, allocated or None, reserved), npu_module_mem rows
    (component, offset µs, reserved); offsets from T0, files left out when empty."""
    out = root / name / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (root / name / f"profiler_info_{rank}.json").write_text("{}")
    if kernels:
        lines = [KERNEL_HEADER] + [f"{step},MatMul,MatMul,AI_CORE,{T0 + start:.3f},{dur}"
                                   for step, start, dur in kernels]
        (out / "kernel_details.csv").write_text("\n".join(lines) + "\n")
    if records:
        lines = [RECORD_HEADER] + [
            f'{c},"{T0 + t:.3f}\t",{"" if a is None else a},{r},NPU:{rank}'
            for c, t, a, r in records]
        (out / "memory_record.csv").write_text("\n".join(lines) + "\n")
    if modules:
        lines = [MODULE_HEADER] + [f"{c},{T0 + t:.3f},{r},NPU:{rank}" for c, t, r in modules]
        (out / "npu_module_mem.csv").write_text("\n".join(lines) + "\n")
    return root / name


def peaks_of(memory) -> dict[str, tuple]:
    """component → (allocated, reserved) peak over ranks, NaN as None."""
    table = memory.summary.peaks.groupby("component")[["allocated_mb", "reserved_mb"]].max()
    return {c: tuple(None if pd.isna(v) else float(v) for v in row)
            for c, row in table.iterrows()}


# --------------------------------------------------------------------------- one rank rule


@pytest.mark.slow
def test_duplicate_rank_keeps_the_newest_dir_for_kernels_and_memory(tmp_path):
    # A rerun copied beside the first: both say profiler_info_0.json. The newer directory
    # (by name) is kept, for its kernels (1 kernel) and its memory (APP peak 1000 MB); the
    # older one (3 kernels, APP peak 1500 MB) is dropped for both. Before, memory read both
    # directories as ranks 0 and 1 and its peak, 1500 MB, came from the dropped run.
    root = tmp_path / "job"
    write_rank(root, "w_20250101000000_ascend_pt", 0,
               kernels=[(1, 0, 10), (1, 100, 10), (1, 200, 10)],
               records=[("APP", 0, None, 1500.0), ("PTA+GE", 50, 700.0, 800.0)])
    write_rank(root, "w_20250102000000_ascend_pt", 0, kernels=[(1, 0, 10)],
               records=[("APP", 0, None, 1000.0), ("PTA+GE", 5, 400.0, 500.0)])
    run = load_run(root)
    assert run.meta.ranks == (0,) and run.memory.ranks == (0,)
    assert run.summary.kernels == 1
    assert "rank 0: several results; using w_20250102000000_ascend_pt, ignoring " \
           "w_20250101000000_ascend_pt" in texts(run.warnings)
    assert peaks_of(run.memory) == {"APP": (None, 1000.0), "PTA+GE": (400.0, 500.0)}
    result = diff(root, root)
    assert result.report.memory.peak_reserved.base_mb == 1000.0
    assert result.report.memory.peak_allocated.new_mb == 400.0
    assert result.report.memory.base_ranks == result.comparison.base.meta.ranks == (0,)
    assert read_memory(root).ranks == (0,)  # the library wrapper: the same rule


def test_memory_only_and_db_only_rank_dirs_are_still_found(tmp_path):
    # No kernel file anywhere: ranks found by their memory files (text, or a db whose
    # only tables are memory) under the id their profiler_info / db name gives.
    write_rank(tmp_path / "job", "a_ascend_pt", 3, records=[("APP", 0, None, 700.0)])
    out = tmp_path / "job" / "b_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    with sqlite3.connect(out / "ascend_pytorch_profiler_5.db") as conn:
        conn.executescript("""
            CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);
            CREATE TABLE NPU_MEM (type INTEGER, ddr NUMERIC, hbm NUMERIC, timestampNs INTEGER,
                                  deviceId INTEGER);
            INSERT INTO STRING_IDS VALUES (1, 'app');
            INSERT INTO NPU_MEM VALUES (1, 0, 943718400, 1736413971000000000, 0);""")
    run = load_run(tmp_path / "job")
    assert run.meta.ranks == (3, 5) and run.memory.ranks == (3, 5)
    assert run.meta.format == "no_kernels" and run.summary.kernels == 0
    assert run.ranks_without_kernels == (3, 5)
    peaks = run.memory.summary.peaks.set_index("rank")["reserved_mb"]
    assert peaks.to_dict() == {3: 700.0, 5: 900.0}  # 943718400 B / 2**20 = 900 MB


def test_a_db_without_anything_usable_is_a_schema_error(tmp_path):
    out = tmp_path / "r_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    with sqlite3.connect(out / "ascend_pytorch_profiler_0.db") as conn:
        conn.execute("CREATE TABLE META_DATA(name TEXT, value TEXT)")
    with pytest.raises(SchemaError, match="COMPUTE_TASK_INFO"):
        load_run(tmp_path / "r_ascend_pt")


# --------------------------------------------------------------------------- one pass

OPENED: list[str] | None = None


def _record_open(event: str, args: tuple) -> None:
    # open() raises one event, and os.open (its opener) another with mode None: one open.
    if OPENED is not None and event == "open" and isinstance(args[0], (str, Path)) \
            and args[1] is not None:
        OPENED.append(str(args[0]))


sys.addaudithook(_record_open)  # audit hooks cannot be removed; it records only in a test


def _with_memory_files(built) -> list[Path]:
    """Add the three memory files to every rank of a written profile; the rank dirs."""
    ranks = sorted(p for p in Path(built).iterdir() if p.is_dir())
    for rank_dir in ranks:
        out = rank_dir / "ASCEND_PROFILER_OUTPUT"
        (out / "memory_record.csv").write_text(
            f"{RECORD_HEADER}\nAPP,{T0:.3f},,1000,NPU:0\nPTA+GE,{T0 + 5:.3f},400,500,NPU:0\n")
        (out / "operator_memory.csv").write_text("Name,Size(KB),Device Type\naten::mm,1024,"
                                                 "NPU:0\n")
        (out / "npu_module_mem.csv").write_text(f"{MODULE_HEADER}\nAPP,{T0:.3f},900,NPU:0\n")
    return ranks


def test_the_pipeline_reads_each_file_of_each_input_once(tmp_path, monkeypatch):
    schedule = [aclnn("MatMulV3", 100.0, "8,8;8,8")]
    base = write_profile(tmp_path, "base", schedule, ranks=(0, 1))
    new = write_profile(tmp_path, "new", schedule, ranks=(0, 1))
    files = [p for rank in _with_memory_files(base) + _with_memory_files(new)
             for p in rank.rglob("*") if p.is_file()]
    # kernel_details, step_trace_time, profiler_info and the three memory files per rank
    assert len(files) == 2 * 2 * 6
    walks = []
    real = cann_diff.read.find_rank_sources
    monkeypatch.setattr(cann_diff.read, "find_rank_sources",
                        lambda path: walks.append(Path(path)) or real(path))
    global OPENED
    OPENED = []
    try:
        result = diff(base, new)
    finally:
        opened, OPENED = OPENED, None
    assert walks == [base.path, new.path]  # each input walked once
    counts = {p: sum(Path(o) == p for o in opened) for p in files}
    assert counts == {p: 1 for p in files}  # and each of its files opened once
    assert result.report.memory.peak_reserved.base_mb == 1000.0  # the memory files were used


# --------------------------------------------------------------------------- --steps

# Three steps of kernels: step 1 spans 0–3000 µs (two kernels), step 2 10000–12000,
# step 3 20000–21000. APP samples: 5000 MB before step 1 (−500 µs), 900 in step 1 (1500),
# 1300 between steps 1 and 2 (6000), 1500 in step 2 (11000), 1700 between 2 and 3
# (15000), 1100 in step 3 (20500), 4000 after step 3 (30000). PTA+GE allocated
# 400 / 700 / 500 in steps 1 / 2 / 3. npu_module_mem APP: 800 in step 1, 950 in step 3.
STEP_KERNELS = [(1, 0, 1000), (1, 2000, 1000), (2, 10000, 2000), (3, 20000, 1000)]
STEP_RECORDS = [("APP", -500, None, 5000.0), ("APP", 1500, None, 900.0),
                ("APP", 6000, None, 1300.0), ("APP", 11000, None, 1500.0),
                ("APP", 15000, None, 1700.0), ("APP", 20500, None, 1100.0),
                ("APP", 30000, None, 4000.0), ("PTA+GE", 1500, 400.0, 600.0),
                ("PTA+GE", 11000, 700.0, 800.0), ("PTA+GE", 20500, 500.0, 650.0)]
STEP_MODULES = [("APP", 1500, 800.0), ("APP", 20500, 950.0)]


@pytest.mark.slow
@pytest.mark.parametrize("ranges, app, allocated, module", [
    (None, 5000.0, 700.0, 950.0),  # every sample
    ([(3, 3)], 1100.0, 500.0, 950.0),  # 20000–21000 µs only
    ([(1, 2)], 1500.0, 700.0, 800.0),  # 0–12000 µs: the gap between 1 and 2 included
    ([(1, 1), (3, 3)], 1100.0, 500.0, 950.0),  # two spans: step 2 and both gaps left out
    ([(2, None)], 1700.0, 700.0, 950.0),  # 10000–21000 µs
])
def test_steps_select_memory_samples(tmp_path, ranges, app, allocated, module):
    rank = write_rank(tmp_path, "r_ascend_pt", 0, kernels=STEP_KERNELS,
                      records=STEP_RECORDS, modules=STEP_MODULES)
    run = load_run(rank, steps=ranges)
    peaks = peaks_of(run.memory)
    assert peaks["APP"][1] == app and peaks["PTA+GE"][0] == allocated
    modules = run.memory.summary.modules.set_index("component")["reserved_mb"]
    assert modules["APP"] == module
    # select_steps on a run read whole gives the same memory as steps= at read time
    whole = select_steps(load_run(rank), ranges)
    pd.testing.assert_frame_equal(whole.memory.summary.peaks, run.memory.summary.peaks)
    pd.testing.assert_frame_equal(whole.memory.summary.timelines,
                                  run.memory.summary.timelines)


def test_steps_timeline_starts_at_the_first_kept_sample(tmp_path):
    rank = write_rank(tmp_path, "r_ascend_pt", 0, kernels=STEP_KERNELS, records=STEP_RECORDS)
    timeline = load_run(rank, steps=[(1, 2)]).memory.summary.timelines
    app = timeline[timeline["component"] == "APP"]
    # APP samples at 1500, 6000, 11000 µs → 0, 4.5, 9.5 ms
    assert app["time_ms"].tolist() == [0.0, 4.5, 9.5]
    assert app["reserved_mb"].tolist() == [900.0, 1300.0, 1500.0]


@pytest.mark.slow
def test_steps_reach_memory_through_the_pipeline(tmp_path):
    base = write_rank(tmp_path / "base", "r_ascend_pt", 0, kernels=STEP_KERNELS,
                      records=STEP_RECORDS)
    bumped = [(c, t, a, r + 600.0 if t == 20500 else r) for c, t, a, r in STEP_RECORDS]
    new = write_rank(tmp_path / "new", "r_ascend_pt", 0, kernels=STEP_KERNELS,
                     records=bumped)
    # step 3 only: APP 1100 → 1700 MB (+54.5 %); over the whole run both peak at 5000
    peak = diff(base, new, Options(steps=[(3, 3)])).report.memory.peak_reserved
    assert (peak.base_mb, peak.new_mb) == (1100.0, 1700.0)
    whole = diff(base, new).report.memory.peak_reserved
    assert (whole.base_mb, whole.new_mb) == (5000.0, 5000.0)


def test_steps_leave_memory_of_a_rank_without_kernels_whole_and_say_so(tmp_path):
    write_rank(tmp_path / "job", "a_ascend_pt", 0, kernels=STEP_KERNELS, records=STEP_RECORDS)
    write_rank(tmp_path / "job", "b_ascend_pt", 1, records=STEP_RECORDS)
    run = load_run(tmp_path / "job", steps=[(3, 3)])
    peaks = run.memory.summary.peaks
    app = peaks[peaks["component"] == "APP"].set_index("rank")["reserved_mb"]
    assert app.to_dict() == {0: 1100.0, 1: 5000.0}
    assert any(w.startswith("rank 1 (b_ascend_pt): no kernel times") for w in
               texts(run.memory.warnings))
    assert "ranks without kernels: 1 (memory only)" in texts(run.warnings)


def _real_step_rank(tmp_path: Path) -> Path:
    """MI-2023 test_rank_0 as it was exported: its memory files beside its kernels."""
    rank = tmp_path / "test_rank_0"
    shutil.copytree(MEMORY_RANK0, rank)
    shutil.copy(MI2023_KERNELS, rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv")
    return rank


def test_steps_select_samples_of_a_real_memory_file(tmp_path):
    rank = _real_step_rank(tmp_path)
    # The step's span straight from the raw kernel file (pandas pads the one short row).
    kernels = pd.read_csv(MI2023_KERNELS, dtype=str)
    assert set(kernels["Step Id"]) == {"2"}
    start = kernels["Start Time(us)"].str.strip().astype(float)
    end = start + kernels["Duration(us)"].astype(float)
    records = pd.read_csv(MEMORY_RANK0 / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv",
                          dtype=str)
    stamp = records["Timestamp(us)"].str.strip().astype(float)
    inside = records[((stamp >= start.min()) & (stamp <= end.max())).to_numpy()]
    numbers = inside[["Total Allocated(MB)", "Total Reserved(MB)"]].astype(float)
    want = numbers.groupby(inside["Component"]).max()
    # Both APP samples precede the first kernel (the driver samples during warm-up).
    assert "APP" not in want.index and "APP" in set(records["Component"])
    run = load_run(rank, steps=[(2, 2)])
    got = run.memory.summary.peaks.set_index("component")[["allocated_mb", "reserved_mb"]]
    assert sorted(got.index) == sorted(want.index)
    for component, row in want.iterrows():
        assert tuple(got.loc[component]) == (row["Total Allocated(MB)"],
                                             row["Total Reserved(MB)"])
    assert "APP" in set(load_run(rank).memory.summary.peaks["component"])  # whole run
    with pytest.raises(InputError, match="selects no step"):
        load_run(rank, steps=[(5, 6)])


# --------------------------------------------------------------------------- no kernels


def _drop_kernels(built, ranks: tuple[int, ...]) -> None:
    for rank_dir in Path(built).iterdir():
        if int(rank_dir.name.split("_")[1]) - 4000 in ranks:  # node0_<4000 + rank>_…
            (rank_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").unlink()


def test_ranks_without_kernels_are_compared_and_can_be_slow(tmp_path):
    # 4 ranks of MatMul 1000 µs + FA 800 µs per step; in the new run rank 3 runs MatMul
    # 1600 µs. Ranks 2 and 3 keep step_trace_time.csv but lose kernel_details.csv: they
    # are still compared from their step figures, and rank 3 is the slow one.
    def schedule(slow):
        return lambda rank, step: [
            aclnn("MatMulV3", 1600.0 if slow and rank == 3 else 1000.0, "64,64;64,64"),
            aclnn("FlashAttentionScore", 800.0, "1,16,64,128", core="MIX_AIC")]
    base = write_profile(tmp_path, "base", schedule(False), ranks=(0, 1, 2, 3))
    new = write_profile(tmp_path, "new", schedule(True), ranks=(0, 1, 2, 3))
    _drop_kernels(base, (2, 3))
    _drop_kernels(new, (2, 3))
    result = diff(base, new)
    ranks = result.comparison.ranks.set_index("rank")
    assert list(ranks.index) == [0, 1, 2, 3]
    steps = (1, 2, 3)
    want = sum(new.figures[(3, s)]["Stage"] - base.figures[(3, s)]["Stage"]
               for s in steps) / len(steps)
    assert want == pytest.approx(600.0)
    assert ranks.loc[3, "delta_stage_us"] == pytest.approx(want, abs=1e-3)
    assert ranks.loc[[0, 1, 2], "delta_stage_us"].abs().max() == pytest.approx(0.0, abs=1e-3)
    slow = [f for f in result.report.to_dict()["findings"] if f["id"] == "slow-rank"]
    assert slow and {f["data"]["rank"] for f in slow} == {3}
    run = result.comparison.new
    assert run.ranks_without_kernels == (2, 3)
    assert "ranks without kernels: 2, 3 (step breakdown only)" in texts(run.warnings)
    assert set(run.summary.ops["rank"]) == {0, 1}  # operators: the ranks with kernels


@pytest.mark.parametrize("stage_unit", [1.0, 1e-3], ids=["µs (as observed)", "ms (as documented)"])
def test_rank_with_only_analysis_db(tmp_path, stage_unit):
    # StepTraceTime stage 800 ms, stored in µs (800000) or ms (800); the CommAnalyzerTime
    # ops span 790 ms (start µs + elapse ms), which tells the two apart.
    out = tmp_path / "job" / "rank_1_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (out.parent / "profiler_info_1.json").write_text("{}")
    with sqlite3.connect(out / "analysis.db") as conn:
        conn.executescript("""
            CREATE TABLE StepTraceTime (deviceId INTEGER, step TEXT, computing NUMERIC,
                communication_not_overlapped NUMERIC, overlapped NUMERIC,
                communication NUMERIC, free NUMERIC, stage NUMERIC, bubble NUMERIC,
                communication_not_overlapped_and_exclude_receive NUMERIC, preparing NUMERIC);
            CREATE TABLE CommAnalyzerTime (hccl_op_name TEXT, group_name TEXT,
                start_timestamp NUMERIC, elapse_time NUMERIC, transit_time NUMERIC,
                wait_time NUMERIC, synchronization_time NUMERIC, idle_time NUMERIC,
                step TEXT, type TEXT);""")
        conn.execute("INSERT INTO StepTraceTime VALUES (1, '13', ?, ?, 0, ?, ?, ?, 0, ?, 0)",
                     [v * stage_unit for v in (500000, 200000, 200000, 100000, 800000,
                                               200000)])
        conn.executemany("INSERT INTO CommAnalyzerTime VALUES (?, 'g', ?, 100, 60, 30, 30, 10,"
                         " 'step13', 'collective')",
                         [("hcom_allReduce__1_0_1", T0), ("hcom_allReduce__1_1_1", T0 + 690000)])
    run = load_run(tmp_path / "job")
    assert run.meta.ranks == (1,) and run.ranks_without_kernels == (1,)
    step = run.steps.iloc[0]
    assert (step["step"], step["stage"], step["computing"]) == (13, 800000.0, 500000.0)
    comm = run.summary.comm.iloc[0]
    assert (comm["ops"], comm["elapse_us"], comm["wait_us"]) == (2, 200000.0, 60000.0)


@pytest.mark.slow
@needs_realdata
def test_cann83_job_against_itself_reports_ranks_0_to_3(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(ST_LEVEL2), str(ST_LEVEL2), "-o", str(out), "-q",
                                       "--no-charts"])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert [row["rank"] for row in report["ranks"]] == [0, 1, 2, 3]
    assert report["base"]["ranks"] == report["new"]["ranks"] == [0, 1, 2, 3]
    assert "ranks without kernels: 1, 3 (step breakdown, communication only)" in \
        report["base"]["warnings"]
    assert pd.read_csv(out / "ranks.csv")["rank"].tolist() == [0, 1, 2, 3]
    # memory: ranks 0 and 2 recorded it; the peak is the larger of their csv maxima
    app = max(pd.read_csv(ST_LEVEL2 / f"rank_{r}_ascend_pt/ASCEND_PROFILER_OUTPUT/"
                                      "memory_record.csv", dtype=str)
              .query("Component == 'APP'")["Total Reserved(MB)"].astype(float).max()
              for r in (0, 2))
    assert report["memory"]["peak_reserved"]["base_mb"] == app
    assert report["memory"]["ranks"]["base"] == [0, 1, 2, 3]


# --------------------------------------------------------------------------- settings


def test_dask_timeout_comes_from_settings(tmp_path, monkeypatch):
    distributed = pytest.importorskip("distributed")
    asked = []

    def refuse(address, timeout, set_as_default):
        asked.append((address, timeout))
        raise OSError("refused")

    monkeypatch.setattr(distributed, "Client", refuse)
    # The scheduler is asked who it is first, within the same timeout.
    monkeypatch.setattr(cann_diff.read.execute, "_identify", lambda address, timeout, _: (
        asked.append(("identify", address, timeout)), {"type": "Scheduler"})[1])
    rank = write_rank(tmp_path, "r_ascend_pt", 0, kernels=[(1, 0, 10)])
    with pytest.raises(InputError, match="cannot reach Dask scheduler"):
        load_run(rank, scheduler="tcp://10.0.0.1:8786", limits=Limits(dask_timeout_s=1.5))
    assert asked == [("identify", "tcp://10.0.0.1:8786", 1.5), ("tcp://10.0.0.1:8786", 1.5)]


@pytest.mark.slow
def test_memory_headline_cut_off_comes_from_settings(tmp_path):
    # APP 10000 → 10200 MB: +200 MB is +2 %, under the 5 % threshold and under 1 GB, so
    # no headline by default; with memory_headline_mb = 150 it makes the headline.
    base = write_rank(tmp_path / "b", "r_ascend_pt", 0, kernels=[(1, 0, 10)],
                      records=[("APP", 0, None, 10000.0)])
    new = write_rank(tmp_path / "n", "r_ascend_pt", 0, kernels=[(1, 0, 10)],
                     records=[("APP", 0, None, 10200.0)])
    assert diff(base, new).report.memory.headline is None
    low = diff(base, new, Options(thresholds=Thresholds(memory_headline_mb=150.0)))
    memory = low.report.memory
    assert memory.headline.startswith("Peak reserved device memory (APP) rose by 200.0 MB")
    assert memory.headline in low.report.headline


@needs_realdata
def test_real_rank_with_only_its_analysis_db(tmp_path):
    # CANN 8.3 rank_1 without its text files: analysis.db alone gives the step breakdown
    # (stored in µs although documented in ms) and the 15 communication ops.
    source = ST_LEVEL2 / "rank_1_ascend_pt"
    rank = tmp_path / "rank_1_ascend_pt"
    (rank / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    shutil.copyfile(source / "profiler_info_1.json", rank / "profiler_info_1.json")
    shutil.copyfile(source / "ASCEND_PROFILER_OUTPUT/analysis.db",
                    rank / "ASCEND_PROFILER_OUTPUT/analysis.db")
    with sqlite3.connect(f"file:{rank / 'ASCEND_PROFILER_OUTPUT/analysis.db'}?mode=ro",
                         uri=True) as conn:
        stage = conn.execute("SELECT stage FROM StepTraceTime").fetchone()[0]
        ops = conn.execute("SELECT count(*) FROM CommAnalyzerTime").fetchone()[0]
    text = pd.read_csv(source / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv")
    run = load_run(rank)
    assert run.meta.ranks == (1,) and run.ranks_without_kernels == (1,)
    assert run.steps["stage"].tolist() == [stage]
    assert stage == pytest.approx(float(text["Stage"].iloc[0]), abs=1.0)  # µs, as the csv
    assert run.summary.comm["ops"].sum() == ops == 15
