"""Memory comparison: reading (text + db twins), peaks, operators, modules, rendering.

Crafted fixtures are written into tmp_path; their answers are worked out by hand in the
comments. Real files come from tests/data/memory (see its README.md) and, when present,
from ../shared/realdata; their expected figures are computed here with the csv and
sqlite3 modules, independently of the code under test.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import sqlite3
import struct
from dataclasses import asdict
from pathlib import Path

import pytest
from conftest import REALDATA
from profiles import memory_report

from cann_diff.compare import memory
from cann_diff.errors import InputError, SchemaError
from cann_diff.read import read_memory
from cann_diff.render.charts import draw_memory_chart
from cann_diff.render.markdown import render_memory_markdown
from cann_diff.schema import MAX_POINTS
from cann_diff.settings import Thresholds

DATA = Path(__file__).parent / "data" / "memory"
# ../shared/realdata beside the project; absent in a user's clone
REAL = REALDATA / "Ascend__msinsight"
needs_real = pytest.mark.skipif(not REAL.is_dir(),
                                reason="../shared/realdata (read-only reference data) is absent; "
                                       "tests/data/memory covers the rest")

RECORD_HEADER = ("Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),"
                 "Total Active(MB),Stream Ptr,Device Type")
OPERATOR_HEADER = ("Name,Size(KB),Allocation Time(us),Release Time(us),Duration(us),"
                   "Allocation Total Allocated(MB),Allocation Total Reserved(MB),"
                   "Release Total Allocated(MB),Release Total Reserved(MB),Device Type")
MODULE_HEADER = "Component,Timestamp(us),Total Reserved(MB),Device"
MODULE_HEADER_CANN83 = "Device_id,Component,Timestamp(us),Total Reserved(MB),Device"
KERNEL_HEADER = "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us)"
T0 = 1736408883573957.920  # µs, a real-looking start


# --------------------------------------------------------------------------- helpers


def write_rank(root: Path, name: str, *, rank: int = 0, records=None, operators=None,
               modules=None, module_header: str = MODULE_HEADER, kernels: bool = True) -> Path:
    """Write one crafted ``*_ascend_pt`` dir; None leaves the file out.

    records: (component, t_offset_ms, allocated or None, reserved[, device]);
    operators: (name, size_kb); modules: (component, t_offset_ms, reserved).
    Timestamps carry the real export's trailing TAB. ``kernels`` writes one kernel (step 1,
    at T0, 10 µs): the memory is read with the rank's kernels, in one pass.
    """
    rank_dir = root / name
    out = rank_dir / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    (rank_dir / f"profiler_info_{rank}.json").write_text("{}")
    if kernels:
        (out / "kernel_details.csv").write_text(KERNEL_HEADER + f"\n1,MatMul,MatMul,AI_CORE,"
                                                               f"{T0:.3f},10.0,0\n")
    if records is not None:
        lines = [RECORD_HEADER]
        for component, t_ms, allocated, reserved, *device in records:
            stamp = f'"{T0 + t_ms * 1000:.3f}\t"'
            lines.append(f"{component},{stamp},{'' if allocated is None else allocated},"
                         f"{reserved},,,{device[0] if device else f'NPU:{rank}'}")
        (out / "memory_record.csv").write_text("\n".join(lines) + "\n")
    if operators is not None:
        lines = [OPERATOR_HEADER]
        lines += [f"{name},{size_kb},{T0:.3f},{T0 + 5:.3f},5.0,1,2,1,2,NPU:{rank}"
                  for name, size_kb in operators]
        (out / "operator_memory.csv").write_text("\n".join(lines) + "\n")
    if modules is not None:
        lines = [module_header]
        prefix = f"{rank}," if module_header.startswith("Device_id") else ""
        lines += [f'{prefix}{component},"{T0 + t_ms * 1000:.3f}\t",{reserved},NPU:{rank}'
                  for component, t_ms, reserved in modules]
        (out / "npu_module_mem.csv").write_text("\r\n".join(lines) + "\r\n")
    return rank_dir


def records_with_app_peak(app_peak: float, allocated_peak: float = 500.0) -> list[tuple]:
    """APP samples 900 / peak / 950 MB at 0, 20, 40 ms; PTA+GE allocated 400 / peak."""
    return [
        ("APP", 0.0, None, 900.0),
        ("APP", 20.0, None, app_peak),
        ("APP", 40.0, None, 950.0),
        ("PTA", 5.0, 380.0, 580.0),
        ("PTA+GE", 5.0, 400.0, 600.0),
        ("PTA", 25.0, allocated_peak - 20, 680.0),
        ("GE", 25.0, 20.0, 20.0),
        ("PTA+GE", 25.0, allocated_peak, 700.0),
    ]


BASE_OPERATORS = [("aten::mm", 1024), ("aten::mm", 3072), ("aten::add", 512),
                  ("cann::Graph_1", 2048)]
NEW_OPERATORS = [("aten::mm", 2048), ("aten::mm", 2048), ("aten::mm", 2048),
                 ("aten::add", 512), ("aten::cat", 1024)]
BASE_MODULES = [("APP", 0.0, 700.0), ("APP", 20.0, 800.0), ("HCCL", 0.0, 100.0),
                ("SLOG", 0.0, 0.0)]
NEW_MODULES = [("APP", 0.0, 900.0), ("APP", 20.0, 850.0), ("HCCL", 0.0, 100.0),
               ("SLOG", 0.0, 0.0)]


def crafted_pair(tmp_path: Path, new_app_peak: float, base_app_peak: float = 1000.0,
                 new_allocated_peak: float = 500.0):
    base = write_rank(tmp_path / "base", "r0_ascend_pt",
                      records=records_with_app_peak(base_app_peak), operators=BASE_OPERATORS,
                      modules=BASE_MODULES)
    new = write_rank(tmp_path / "new", "r0_ascend_pt",
                     records=records_with_app_peak(new_app_peak, new_allocated_peak),
                     operators=NEW_OPERATORS, modules=NEW_MODULES,
                     module_header=MODULE_HEADER_CANN83)
    return read_memory(base), read_memory(new)


def csv_rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8-sig") as handle:
        return list(csv.DictReader(handle))


def csv_peak(paths: list[Path], component: str, column: str) -> float:
    """Max of a column over rows of one Component, across files (empty cells skipped)."""
    return max(float(row[column].strip()) for path in paths for row in csv_rows(path)
               if row["Component"].strip() == component and row[column].strip())


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


# --------------------------------------------------------------------------- crafted: peaks


@pytest.mark.slow
@pytest.mark.parametrize("new_peak, threshold, severity, headline", [
    # 1000 → 1200: +200 MB = +20 % ≥ 2 × 5 % → high
    (1200.0, 5.0, "high", True),
    # 1000 → 1060: +6 % ≥ 5 % but < 10 % and < 1 GB → medium
    (1060.0, 5.0, "medium", True),
    # 1000 → 1020: +2 % → neither growth nor headline (20 MB < 1 GB)
    (1020.0, 5.0, None, False),
    # 1000 → 1060 under a 10 % threshold: no growth, no headline
    (1060.0, 10.0, None, False),
    # 1000 → 950: -5 % moves the headline, never raises growth
    (950.0, 5.0, None, True),
])
def test_peak_growth_table(tmp_path, new_peak, threshold, severity, headline):
    base, new = crafted_pair(tmp_path, new_peak)
    result = memory_report(base, new, Thresholds(memory_growth_pct=threshold))
    peak = result.peak_reserved
    assert (peak.component, peak.base_mb, peak.new_mb) == ("APP", 1000.0, new_peak)
    assert peak.delta_mb == pytest.approx(new_peak - 1000.0)
    assert peak.delta_pct == pytest.approx((new_peak - 1000.0) / 10.0)
    assert (result.growth or {}).get("severity") == severity
    assert (result.headline is not None) == headline


def test_twenty_percent_growth_raises_memory_growth(tmp_path):
    base, new = crafted_pair(tmp_path, 1200.0, new_allocated_peak=550.0)
    result = memory_report(base, new)
    growth = result.growth
    assert growth["id"] == "memory-growth"
    assert growth["severity"] == "high"
    assert growth["delta_mb"] == pytest.approx(200.0)
    assert "+20.0 %" in growth["title"]
    # the operator and module that grew most are named
    assert "aten::mm +2.0 MB" in growth["detail"]
    assert "APP +100.0 MB" in growth["detail"]
    # allocated: PTA+GE 500 → 550 = +10 %
    allocated = result.peak_allocated
    assert (allocated.component, allocated.base_mb, allocated.new_mb) == ("PTA+GE", 500.0, 550.0)
    assert result.headline == (
        "Peak reserved device memory (APP) rose by 200.0 MB (+20.0 %): 1,000.0 MB → "
        "1,200.0 MB; peak allocated device memory (PTA+GE) rose by 50.0 MB (+10.0 %): "
        "500.0 MB → 550.0 MB.")


def test_two_percent_change_is_quiet(tmp_path):
    base, new = crafted_pair(tmp_path, 1020.0)
    result = memory_report(base, new)
    assert result.growth is None
    assert result.headline is None
    assert result.to_dict()["growth"] is None


def test_one_gigabyte_moves_headline_below_threshold(tmp_path):
    # 30,000 → 31,100 MB: +1,100 MB is only +3.7 %, but ≥ 1 GB
    base, new = crafted_pair(tmp_path, 31100.0, base_app_peak=30000.0)
    result = memory_report(base, new)
    assert result.growth is None
    assert result.headline.startswith("Peak reserved device memory (APP) rose by 1,100.0 MB")


def test_allocated_peak_without_app_falls_back_and_components_listed(tmp_path):
    records = [r for r in records_with_app_peak(1000.0) if r[0] != "APP"]
    base = read_memory(write_rank(tmp_path / "b", "r_ascend_pt", records=records))
    new = read_memory(write_rank(tmp_path / "n", "r_ascend_pt",
                                 records=records_with_app_peak(1000.0)))
    result = memory_report(base, new)
    # APP only in new → reserved compared on PTA+GE (700 in both), like for like
    assert result.peak_reserved.component == "PTA+GE"
    assert result.peak_reserved.base_mb == result.peak_reserved.new_mb == 700.0
    components = {c.component: asdict(c) for c in result.components}
    assert list(components) == ["APP", "PTA+GE", "PTA", "GE"]
    assert components["APP"]["base_reserved_mb"] is None
    assert components["APP"]["new_reserved_mb"] == 1000.0
    assert components["GE"]["new_allocated_mb"] == 20.0


# --------------------------------------------------------------------------- crafted: tables


def test_operator_allocations_matched_by_name(tmp_path):
    base, new = crafted_pair(tmp_path, 1000.0)
    result = memory_report(base, new)
    rows = {o.name: o for o in result.operators}
    # aten::mm: base 1 + 3 MB (2 allocations, largest 3); new 3 × 2 MB → +2 MB, +50 %
    mm = rows["aten::mm"]
    assert (mm.base_count, mm.new_count) == (2.0, 3.0)
    assert (mm.base_total_mb, mm.new_total_mb, mm.delta_mb) == (4.0, 6.0, 2.0)
    assert (mm.base_largest_mb, mm.new_largest_mb) == (3.0, 2.0)
    assert mm.delta_pct == pytest.approx(50.0) and mm.status == "increased"
    # "cann::" is dropped from graph-engine names (the db twin has none)
    assert rows["Graph_1"].status == "removed" and rows["Graph_1"].delta_mb == -2.0
    assert rows["Graph_1"].new_largest_mb is None
    assert rows["aten::cat"].status == "added" and rows["aten::cat"].delta_pct is None
    # aten::add is unchanged, so it is compared but not listed
    assert "aten::add" not in rows
    assert (result.operators_compared, result.operators_changed) == (4, 3)
    # |Δ| order, ties by name: Graph_1 (2.0) < aten::mm (2.0) < aten::cat (1.0)
    assert [o.name for o in result.operators] == ["Graph_1", "aten::mm", "aten::cat"]
    top = memory_report(base, new, Thresholds(memory_top_n=1))
    assert [o.name for o in top.operators] == ["Graph_1"]


def test_modules_at_their_peak(tmp_path):
    base, new = crafted_pair(tmp_path, 1000.0)
    result = memory_report(base, new)
    # APP 800 → 900 (+12.5 %), HCCL 100 → 100, SLOG zero in both runs: left out
    assert [(m.module, m.base_peak_mb, m.new_peak_mb) for m in result.modules] == [
        ("APP", 800.0, 900.0), ("HCCL", 100.0, 100.0)]
    assert result.modules[0].delta_pct == pytest.approx(12.5)


def test_timeline_starts_at_zero_in_ms(tmp_path):
    base, new = crafted_pair(tmp_path, 1200.0)
    result = memory_report(base, new)
    assert result.timeline_component == "APP"
    assert result.base_timeline.time_ms == (0.0, 20.0, 40.0)
    assert result.base_timeline.reserved_mb == (900.0, 1000.0, 950.0)
    assert result.new_timeline.reserved_mb == (900.0, 1200.0, 950.0)


def test_long_timeline_is_thinned_keeping_the_peak(tmp_path):
    records = [("APP", float(i), None, 1000.0 + (500.0 if i == 3217 else i % 7))
               for i in range(5000)]
    data = read_memory(write_rank(tmp_path, "r_ascend_pt", records=records))
    result = memory_report(data, data)
    series = result.base_timeline
    assert len(series.time_ms) <= MAX_POINTS
    assert max(series.reserved_mb) == 1500.0
    assert 3217.0 in series.time_ms
    assert list(series.time_ms) == sorted(series.time_ms)


def test_several_ranks_peak_is_max_and_operators_per_rank(tmp_path):
    root = tmp_path / "job"
    write_rank(root, "a_ascend_pt", rank=0, records=[("APP", 0.0, None, 1000.0)],
               operators=[("aten::mm", 1024)])
    write_rank(root, "b_ascend_pt", rank=1, records=[("APP", 0.0, None, 1300.0)],
               operators=[("aten::mm", 1024), ("aten::mm", 1024)])
    data = read_memory(root)
    assert data.ranks == (0, 1)
    result = memory_report(data, data)
    assert result.peak_reserved.base_mb == 1300.0 and result.peak_reserved.base_rank == 1
    assert result.base_timeline.rank == 1
    # per rank: (1 + 2) / 2 = 1.5 allocations, 1.5 MB; largest 1 MB
    totals = memory._operator_table(data, data, 5.0).set_index("name").loc["aten::mm"]
    assert (totals["base_count"], totals["base_total_mb"], totals["base_largest_mb"]) == \
        (1.5, 1.5, 1.0)


def test_cpu_rows_are_not_device_memory(tmp_path):
    records = records_with_app_peak(1000.0) + [("PTA", 30.0, 99999.0, 99999.0, "CPU")]
    data = read_memory(write_rank(tmp_path, "r_ascend_pt", records=records))
    assert data.records["reserved_mb"].max() == 1000.0


# --------------------------------------------------------------------------- missing / bad


def test_missing_memory_files_are_warnings(tmp_path):
    only_record = write_rank(tmp_path, "a_ascend_pt", records=records_with_app_peak(1000.0))
    data = read_memory(only_record)
    assert len(data.warnings) == 2
    assert "no operator_memory.csv" in data.warnings[0].text
    assert "no npu_module_mem.csv" in data.warnings[1].text
    assert {w.code for w in data.warnings} == {"memory-not-recorded"}
    nothing = read_memory(write_rank(tmp_path, "b_ascend_pt"))
    assert [w.text.split("; ")[0].split(": ")[1] for w in nothing.warnings] == [
        "no memory_record.csv", "no operator_memory.csv", "no npu_module_mem.csv"]
    result = memory_report(nothing, data)
    assert result.peak_reserved is None and result.peak_allocated is None
    assert result.growth is None and result.headline is None
    assert any(w.text.startswith("base: rank 0 (b_ascend_pt): no memory_record.csv")
               for w in result.warnings)
    json.dumps(result.to_dict(), allow_nan=False)
    assert "## Device memory" in render_memory_markdown(result, None)


def test_truncated_csv_raises_input_error_naming_the_file(tmp_path):
    rank_dir = write_rank(tmp_path, "r_ascend_pt", records=records_with_app_peak(1000.0),
                          operators=BASE_OPERATORS)
    path = rank_dir / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv"
    text = path.read_text()
    path.write_text(text[: text.rindex("\n", 0, len(text) - 1) + 12])  # cut inside last row
    with pytest.raises(InputError) as error:
        read_memory(rank_dir)
    assert error.value.path == str(path)
    assert "memory_record.csv" in str(error.value) and "truncated" in str(error.value)


def test_empty_file_raises_input_error(tmp_path):
    rank_dir = write_rank(tmp_path, "r_ascend_pt", operators=BASE_OPERATORS)
    path = rank_dir / "ASCEND_PROFILER_OUTPUT" / "operator_memory.csv"
    path.write_text("")
    with pytest.raises(InputError, match="operator_memory.csv: empty file"):
        read_memory(rank_dir)


@pytest.mark.parametrize("content, message", [
    (RECORD_HEADER + "\nAPP,1.0,,abc,,,NPU:0\n", r"memory_record.csv: row 2: Total Reserved"),
    (RECORD_HEADER + "\nAPP,1.0,,1,,,NPU:0\nAPP,,,1,,,NPU:0\n",
     r"row 3: Timestamp\(us\) is empty"),
    ("Component,Timestamp(us),Total Allocated(MB)\nAPP,1.0,\n",
     r"missing column\(s\) Total Reserved\(MB\)"),
])
def test_malformed_values_raise_schema_error(tmp_path, content, message):
    rank_dir = write_rank(tmp_path, "r_ascend_pt", records=[])
    (rank_dir / "ASCEND_PROFILER_OUTPUT" / "memory_record.csv").write_text(content)
    with pytest.raises(SchemaError, match=message):
        read_memory(rank_dir)


def test_no_profile_at_all_is_an_input_error(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no profile found"):
        read_memory(tmp_path / "empty")


# --------------------------------------------------------------------------- db twins

MIB = 2**20


def write_db(path: Path, app_peak_mb: float) -> None:
    """The tables torch_npu writes (subset of columns used + a few more), bytes and ns."""
    t0 = 1_736_410_576_000_000_000
    connection = sqlite3.connect(path)
    connection.executescript("""
        CREATE TABLE STRING_IDS (id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE MEMORY_RECORD (component INTEGER, timestamp INTEGER,
            totalAllocated INTEGER, totalReserved INTEGER, totalActive INTEGER,
            streamPtr INTEGER, deviceId INTEGER);
        CREATE TABLE NPU_MEM (type INTEGER, ddr NUMERIC, hbm NUMERIC, timestampNs INTEGER,
            deviceId INTEGER);
        CREATE TABLE OP_MEMORY (name INTEGER, size INTEGER, allocationTime INTEGER,
            releaseTime INTEGER, deviceId INTEGER);
        CREATE TABLE NPU_MODULE_MEM (moduleId INTEGER, timestampNs INTEGER,
            totalReserved NUMERIC, deviceId INTEGER);
        CREATE TABLE ENUM_MODULE (id INTEGER PRIMARY KEY, name TEXT);
    """)
    connection.executemany("INSERT INTO STRING_IDS VALUES (?, ?)", [
        (1, "PTA"), (2, "PTA+GE"), (3, "app"), (4, "device"), (5, "aten::mm"),
        (6, "Graph_1")])
    connection.executemany("INSERT INTO MEMORY_RECORD VALUES (?, ?, ?, ?, 0, 0, 0)", [
        (1, t0 + 5_000_000, 380 * MIB, 580 * MIB), (2, t0 + 5_000_000, 400 * MIB, 600 * MIB),
        (2, t0 + 25_000_000, 500 * MIB, 700 * MIB)])
    # APP = ddr + hbm; the "device" rows must be ignored
    connection.executemany("INSERT INTO NPU_MEM VALUES (?, ?, ?, ?, 0)", [
        (3, 0, 900 * MIB, t0), (3, 100 * MIB, (app_peak_mb - 100) * MIB, t0 + 20_000_000),
        (4, 0, 5000 * MIB, t0)])
    connection.executemany("INSERT INTO OP_MEMORY VALUES (?, ?, 0, 0, 0)", [
        (5, 1024 * 1024), (5, 3072 * 1024), (6, 2048 * 1024)])
    connection.executemany("INSERT INTO ENUM_MODULE VALUES (?, ?)", [(0, "APP"), (1, "HCCL")])
    connection.executemany("INSERT INTO NPU_MODULE_MEM VALUES (?, ?, ?, 0)", [
        (0, t0, 800 * MIB), (1, t0, 100 * MIB), (7, t0, 5 * MIB)])
    connection.commit()
    connection.close()


def db_rank(root: Path, app_peak_mb: float = 1000.0) -> Path:
    """A db-only rank dir (no kernel_details.csv, like the real db exports)."""
    rank_dir = root / "rank0_ascend_pt"
    (rank_dir / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (rank_dir / "profiler_info_0.json").write_text("{}")
    write_db(rank_dir / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db", app_peak_mb)
    return rank_dir


def test_db_twins_read_in_mb_and_untouched(tmp_path):
    rank_dir = db_rank(tmp_path)
    db = rank_dir / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    digest = hashlib.sha256(db.read_bytes()).hexdigest()
    data = read_memory(tmp_path)  # a directory of (db-only) rank dirs
    assert data.warnings == ()
    assert hashlib.sha256(db.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in db.parent.iterdir()) == ["ascend_pytorch_profiler_0.db"]
    app = data.records[data.records["component"] == "APP"]
    assert app["reserved_mb"].tolist() == [900.0, 1000.0]  # "device" rows left out
    assert app["time_us"].tolist() == [1_736_410_576_000_000.0, 1_736_410_576_020_000.0]
    assert sorted(data.operators["size_mb"].tolist()) == [1.0, 2.0, 3.0]
    modules = dict(zip(data.modules["component"], data.modules["reserved_mb"]))
    assert modules == {"APP": 800.0, "HCCL": 100.0, "7": 5.0}


def test_db_and_text_of_one_run_compare_equal(tmp_path):
    text = read_memory(write_rank(tmp_path / "text", "r_ascend_pt",
                                  records=[("APP", 0.0, None, 900.0),
                                           ("APP", 20.0, None, 1000.0),
                                           ("PTA+GE", 5.0, 400.0, 600.0),
                                           ("PTA+GE", 25.0, 500.0, 700.0)],
                                  operators=[("aten::mm", 1024), ("aten::mm", 3072),
                                             ("cann::Graph_1", 2048)]))
    db = read_memory(db_rank(tmp_path / "db"))
    result = memory_report(text, db)
    assert result.peak_reserved.delta_mb == 0.0 and result.peak_reserved.base_mb == 1000.0
    assert result.peak_allocated.delta_mb == 0.0 and result.peak_allocated.new_mb == 500.0
    assert result.operators_changed == 0 and result.operators_compared == 2


def test_text_files_take_precedence_over_db(tmp_path):
    rank_dir = db_rank(tmp_path, app_peak_mb=5000.0)
    out = rank_dir / "ASCEND_PROFILER_OUTPUT"
    (out / "memory_record.csv").write_text(RECORD_HEADER + "\nAPP,1.0,,1234.5,,,NPU:0\n")
    data = read_memory(rank_dir)
    assert data.records["reserved_mb"].tolist() == [1234.5]
    assert len(data.operators) == 3  # operator_memory.csv absent: from OP_MEMORY


def test_corrupt_db_raises_input_error(tmp_path):
    rank_dir = tmp_path / "r_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    rank_dir.mkdir(parents=True)
    db = rank_dir / "ascend_pytorch_profiler_0.db"
    db.write_bytes(b"this is not a database" * 100)
    with pytest.raises(InputError) as error:
        read_memory(tmp_path / "r_ascend_pt")
    assert error.value.path == str(db)


# --------------------------------------------------------------------------- rendering


def test_markdown_section(tmp_path):
    base, new = crafted_pair(tmp_path, 1200.0)
    result = memory_report(base, new)
    text = render_memory_markdown(result, "memory.png")
    assert text == render_memory_markdown(result, "memory.png")
    assert text.startswith("## Device memory\n\n**Peak reserved device memory (APP) rose")
    assert "> ⚠ `memory-growth` (high):" in text
    assert "| Peak reserved (APP)     |   1,000.0 |  1,200.0 | +200.0 | +20.0 % |" in text
    assert "![Device memory over time, base vs new: peak reserved (APP) and peak allocated " \
        "(PTA+GE)](memory.png)" in text
    assert re.search(r"\| aten::mm +\| +2 \| +3 \| +4\.0 \| +6\.0 \| +\+2\.0 \| +\+50\.0 % \|",
                     text)
    assert str(tmp_path) not in text
    assert "![" not in render_memory_markdown(result, None)


def test_markdown_escapes_pipes_in_names(tmp_path):
    base = read_memory(write_rank(tmp_path / "b", "r_ascend_pt", operators=[("a|b", 1024)]))
    new = read_memory(write_rank(tmp_path / "n", "r_ascend_pt", operators=[("a|b", 2048)]))
    assert "| a\\|b " in render_memory_markdown(memory_report(base, new), None)


@pytest.mark.slow
def test_chart_is_fixed_size_and_deterministic(tmp_path):
    base, new = crafted_pair(tmp_path, 1200.0)
    result = memory_report(base, new)
    first = draw_memory_chart(result, tmp_path / "out" / "memory.png")
    again = draw_memory_chart(result, tmp_path / "out" / "memory2.png")
    assert first == tmp_path / "out" / "memory.png"
    assert png_size(first) == (800, 400)
    assert first.read_bytes() == again.read_bytes()


def test_chart_without_samples(tmp_path):
    nothing = read_memory(write_rank(tmp_path, "r_ascend_pt"))
    path = draw_memory_chart(memory_report(nothing, nothing), tmp_path / "empty.png")
    assert png_size(path) == (800, 400)


def test_to_dict_keys_are_documented(tmp_path):
    base, new = crafted_pair(tmp_path, 1200.0)
    result = memory_report(base, new).to_dict()
    json.dumps(result, allow_nan=False)
    doc = memory.__doc__
    keys = set(result) | set(result["peak_reserved"]) | set(result["components"][0]) \
        | set(result["operators"][0]) | set(result["modules"][0]) \
        | set(result["timeline"]) | set(result["timeline"]["base"]) | set(result["growth"])
    undocumented = sorted(k for k in keys if f'"{k}"' not in doc and f"``{k}``" not in doc)
    assert undocumented == []


# --------------------------------------------------------------------------- real files


def test_real_tiny_ranks_from_tests_data():
    """msinsight test_rank_1 (2023) as base, test_rank_0 as new: figures from the csv module."""
    rank0 = DATA / "test_rank_0" / "ASCEND_PROFILER_OUTPUT"
    rank1 = DATA / "test_rank_1" / "ASCEND_PROFILER_OUTPUT"
    base, new = read_memory(DATA / "test_rank_1"), read_memory(DATA / "test_rank_0")
    assert (base.ranks, new.ranks) == ((1,), (0,))
    result = memory_report(base, new)
    reserved = result.peak_reserved
    want_base = csv_peak([rank1 / "memory_record.csv"], "APP", "Total Reserved(MB)")
    want_new = csv_peak([rank0 / "memory_record.csv"], "APP", "Total Reserved(MB)")
    assert (reserved.base_mb, reserved.new_mb) == (want_base, want_new)
    assert reserved.delta_pct == pytest.approx(100 * (want_new - want_base) / want_base)
    allocated = result.peak_allocated
    assert allocated.component == "PTA+GE"
    assert allocated.new_mb == csv_peak([rank0 / "memory_record.csv"], "PTA+GE",
                                        "Total Allocated(MB)")
    # +4.4 %: quiet at the default threshold, medium growth at 4 %
    assert result.growth is None and result.headline is None
    lower = memory_report(base, new, Thresholds(memory_growth_pct=4.0))
    assert lower.growth["severity"] == "medium"
    # operator totals per name, summed with the csv module
    wanted: dict[str, float] = {}
    for row in csv_rows(rank0 / "operator_memory.csv"):
        name = row["Name"].removeprefix("cann::")
        wanted[name] = wanted.get(name, 0.0) + float(row["Size(KB)"]) / 1024
    full = memory_report(base, new, Thresholds(memory_top_n=1000))
    got = {o.name: o.new_total_mb for o in full.operators if o.new_total_mb}
    assert got == pytest.approx(wanted)
    # modules: rank 0 only (test_rank_1 has no npu_module_mem.csv in the source repo)
    module_peaks: dict[str, float] = {}
    for row in csv_rows(rank0 / "npu_module_mem.csv"):
        value = float(row["Total Reserved(MB)"])
        module_peaks[row["Component"]] = max(module_peaks.get(row["Component"], 0.0), value)
    assert {m.module: m.new_peak_mb for m in result.modules} == \
        {k: v for k, v in module_peaks.items() if v > 0}
    assert all(m.base_peak_mb is None for m in result.modules)
    assert any("test_rank_1): no npu_module_mem.csv" in w.text for w in base.warnings)
    assert any("scientific notation" in w.text for w in base.warnings)


def _rank_outputs(root: Path) -> list[Path]:
    return sorted(p for p in root.glob("*/ASCEND_PROFILER_OUTPUT")
                  if (p / "memory_record.csv").is_file())


@pytest.mark.slow
@needs_real
@pytest.mark.parametrize("base_dir, new_dir", [
    ("test/data/pytorch/text/level1", "test/data/pytorch/text/level2"),
    ("test/data/pytorch/text/level0", "test/st/level2"),
])
def test_real_runs_peaks_match_csv(base_dir, new_dir):
    outputs = {side: _rank_outputs(REAL / d) for side, d in (("base", base_dir),
                                                             ("new", new_dir))}
    result = memory_report(read_memory(REAL / base_dir), read_memory(REAL / new_dir))
    for side in ("base", "new"):
        files = [p / "memory_record.csv" for p in outputs[side]]
        assert getattr(result.peak_reserved, f"{side}_mb") == \
            csv_peak(files, "APP", "Total Reserved(MB)")
        assert getattr(result.peak_allocated, f"{side}_mb") == \
            csv_peak(files, "PTA+GE", "Total Allocated(MB)")
    series = result.new_timeline
    assert series.time_ms[0] == 0.0 and max(series.reserved_mb) == result.peak_reserved.new_mb
    json.dumps(result.to_dict(), allow_nan=False)


@pytest.mark.slow
@needs_real
def test_real_db_export_matches_sqlite_and_text():
    """db/level1 (db only) vs text/level1: db figures from plain SQL in this test."""
    db_root = REAL / "test/data/pytorch/db/level1"
    app, allocated = [], []
    for db in sorted(db_root.glob("*/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_*.db")):
        connection = sqlite3.connect(f"file:{db}?mode=ro&immutable=1", uri=True)
        app.append(connection.execute(
            "SELECT max(ddr + hbm) FROM NPU_MEM JOIN STRING_IDS ON id = type "
            "WHERE value = 'app'").fetchone()[0] / MIB)
        allocated.append(connection.execute(
            "SELECT max(totalAllocated) FROM MEMORY_RECORD JOIN STRING_IDS ON id = component "
            "WHERE value = 'PTA+GE'").fetchone()[0] / MIB)
        connection.close()
    text_root = REAL / "test/data/pytorch/text/level1"
    result = memory_report(read_memory(text_root), read_memory(db_root))
    assert result.peak_reserved.new_mb == max(app)
    assert result.peak_allocated.new_mb == max(allocated)
    assert result.peak_reserved.base_mb == csv_peak(
        [p / "memory_record.csv" for p in _rank_outputs(text_root)], "APP", "Total Reserved(MB)")
    # the same job exported twice: well inside any threshold
    assert abs(result.peak_reserved.delta_pct) < 0.01 and result.growth is None


def test_a_db_file_as_input(tmp_path):
    db = db_rank(tmp_path) / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    data = read_memory(db)
    assert data.ranks == (0,)
    assert data.records["reserved_mb"].max() == 1000.0
