"""Kernel attributes and PMU pipe ratios as the readers record them.

``RunSummary.attributes`` (per summary row, attribute and value: kernels and µs) and
``RunSummary.pipes`` (per summary row: µs of the kernels with PMU counters and Σ ratio ×
µs per pipe), read from text exports, dbs and msprof op_summary files. Expectations come
from the files themselves (pandas on kernel_details.csv, sqlite3 on the db) or from
crafted profiles whose values were worked out by hand below; never from the reader.
"""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest
from conftest import DATA, REALDATA, needs_realdata
from profiles import Comm, Kernel, write_profile

from cann_diff.read import load_run, select_steps
from cann_diff.read.formats import kernel_attributes, torch_text
from cann_diff.read.reduce.ranks import RankPlan, reduce_kernels, reduce_ranks, summary_of
from cann_diff.schema import PIPES

OUT = "ASCEND_PROFILER_OUTPUT"
BASE_2024 = DATA / ("cross_stack/qianxiaoxixixi__MsInsightForEveryOne/test/data/pytorch/text/"
                    "level1/rank0_ascend_pt")
NEW_2025 = DATA / "realdata/Ascend__msinsight/test/data/pytorch/text/level1/rank0_ascend_pt"
MSI = REALDATA / "Ascend__msinsight/test/data/pytorch"
KEY = ["rank", "step", "op_type", "input_shapes"]


# ------------------------------------------------------------------ the reader's tables


def attribute_rows(run) -> pd.DataFrame:
    """The run's attribute rows beside their summary row's key (attribute as text)."""
    summary = run.summary
    rows = summary.attributes.merge(summary.ops[KEY], left_on="row", right_index=True,
                                    validate="many_to_one")
    return rows.assign(attribute=rows["attribute"].astype(str),
                       op_type=rows["op_type"].astype(str),
                       input_shapes=rows["input_shapes"].astype(str),
                       value=rows["value"].astype(str))


def pipe_rows(run) -> pd.DataFrame:
    """The run's pipe rows beside their summary row's key."""
    summary = run.summary
    rows = summary.pipes.merge(summary.ops[KEY], left_on="row", right_index=True,
                               validate="one_to_one")
    return rows.assign(op_type=rows["op_type"].astype(str))


def per_type(run) -> pd.DataFrame:
    """(op_type, attribute, value) -> count, total_us over the run."""
    return attribute_rows(run).groupby(["op_type", "attribute", "value"])[
        ["count", "total_us"]].sum()


def pipe_ratios(run) -> pd.DataFrame:
    """Per op_type, each pipe's duration-weighted ratio (Σ ratio·µs / Σ µs)."""
    sums = pipe_rows(run).groupby("op_type")[["pmu_us", *PIPES]].sum(min_count=1)
    return sums[list(PIPES)].div(sums["pmu_us"], axis=0)


# ------------------------------------------------------------- independent expectations


def csv_kernels(rank_dir: Path) -> pd.DataFrame:
    """kernel_details.csv as text, the collectives (core HCCL) left out."""
    table = pd.read_csv(rank_dir / OUT / "kernel_details.csv", dtype=str,
                        keep_default_na=False)
    return table[table["Accelerator Core"] != "HCCL"].reset_index(drop=True)


def csv_pipes(table: pd.DataFrame) -> pd.DataFrame:
    """Each kernel's pipe ratios by the documented vocabulary, in plain pandas.

    A2/A3 (``aic_``/``aiv_``): scalar and MTE2 on both cores, weighted by each core's
    time where the side records a ratio, the plain mean of the sides where no time is
    positive; 910A: the unprefixed ratios, no fixpipe.
    """
    def number(column: str) -> pd.Series:
        return pd.to_numeric(table[column], errors="coerce") if column in table \
            else pd.Series(np.nan, index=table.index)

    if "aic_mac_ratio" not in table:
        names = {"cube": "mac_ratio", "vector": "vec_ratio", "scalar": "scalar_ratio",
                 "mte1": "mte1_ratio", "mte2": "mte2_ratio", "mte3": "mte3_ratio",
                 "fixpipe": "no such column"}
        return pd.DataFrame({pipe: number(column) for pipe, column in names.items()})
    cube_time = number("aicore_time(us)").clip(lower=0).fillna(0)
    vector_time = number("aiv_time(us)").clip(lower=0).fillna(0)

    def both(cube_side: str, vector_side: str) -> pd.Series:
        cube, vector = number(cube_side), number(vector_side)
        cube_weight = cube_time.where(cube.notna(), 0)
        vector_weight = vector_time.where(vector.notna(), 0)
        weight = cube_weight + vector_weight
        weighted = (cube.fillna(0) * cube_weight + vector.fillna(0) * vector_weight) / weight
        return weighted.where(weight > 0, pd.concat([cube, vector], axis=1).mean(axis=1))

    return pd.DataFrame({"cube": number("aic_mac_ratio"), "vector": number("aiv_vec_ratio"),
                         "scalar": both("aic_scalar_ratio", "aiv_scalar_ratio"),
                         "mte1": number("aic_mte1_ratio"),
                         "mte2": both("aic_mte2_ratio", "aiv_mte2_ratio"),
                         "mte3": number("aiv_mte3_ratio"),
                         "fixpipe": number("aic_fixpipe_ratio")})


def csv_pipe_ratios(table: pd.DataFrame) -> pd.DataFrame:
    """Per Type, Σ ratio·µs / Σ µs over the kernels with any PMU ratio."""
    pipes = csv_pipes(table)
    duration = table["Duration(us)"].astype(float)
    measured = pipes.notna().any(axis=1)
    weighted = pipes.mul(duration, axis=0)[measured].groupby(table["Type"][measured])
    return weighted.sum(min_count=1).div(duration[measured].groupby(
        table["Type"][measured]).sum(), axis=0)


# Attribute -> its kernel_details header (core, implementation and the text attributes).
CSV_COLUMNS = {"core": "Accelerator Core", "block_dim": "Block Dim",
               "mix_block_dim": "Mix Block Dim", "op_state": "OP State",
               "input_formats": "Input Formats", "hf32": "HF32 Eligible",
               "implementation": "Name"}


def csv_attributes(table: pd.DataFrame) -> pd.DataFrame:
    """(Type, attribute, value) -> count, total_us; N/A, NULL and a block dim of 0 record
    none."""
    parts = []
    duration = table["Duration(us)"].astype(float)
    for attribute, column in CSV_COLUMNS.items():
        if column not in table:
            continue
        value = table[column].str.strip()
        recorded = ~value.str.upper().isin(["", "N/A", "NA", "NULL"])  # MemSet: NULL
        if attribute == "block_dim":
            recorded &= value != "0"
        parts.append(pd.DataFrame({"op_type": table["Type"], "attribute": attribute,
                                   "value": value, "dur": duration})[recorded])
    rows = pd.concat(parts)
    return rows.groupby(["op_type", "attribute", "value"]).agg(
        count=("dur", "size"), total_us=("dur", "sum"))


# ---------------------------------------------------- 1. the real pair (2024 910A → 2025)


@pytest.fixture(scope="module")
def real_pair():
    return load_run(BASE_2024), load_run(NEW_2025)


@pytest.mark.parametrize("side", [0, 1], ids=["2024 910A", "2025 910B"])
def test_real_attributes_are_the_csv_grouped_by_type(real_pair, side):
    """Every (type, attribute, value) the csv records, with its kernels and µs; nothing
    else (the collectives carry none). The canonical op_type is the csv's Type here."""
    rank_dir = (BASE_2024, NEW_2025)[side]
    expected = csv_attributes(csv_kernels(rank_dir))
    found = per_type(real_pair[side])
    found = found[found.index.get_level_values("attribute") != "input_dtypes"]
    assert sorted(found.index) == sorted(expected.index)
    joined = found.join(expected, suffixes=("", "_csv"))
    assert (joined["count"] == joined["count_csv"]).all()
    assert np.allclose(joined["total_us"], joined["total_us_csv"], rtol=1e-12)


@pytest.mark.parametrize("side", [0, 1], ids=["2024 910A", "2025 910B"])
def test_real_pipes_are_the_csv_duration_weighted(real_pair, side):
    rank_dir = (BASE_2024, NEW_2025)[side]
    expected = csv_pipe_ratios(csv_kernels(rank_dir)).sort_index()
    found = pipe_ratios(real_pair[side]).sort_index()
    assert list(found.index) == list(expected.index)
    pd.testing.assert_frame_equal(found[list(PIPES)], expected[list(PIPES)],
                                  check_names=False, rtol=1e-9)
    assert found["fixpipe"].isna().all() == (side == 0)  # 910A has no fixpipe


def test_real_pair_transdata_moves_to_the_vector_core_and_reads_less(real_pair):
    """TransData: AI_CORE (86 kernels, 1.79 ms) → AI_VECTOR_CORE (57, 1.42 ms); its
    duration-weighted MTE2 ratio 0.49 → 0.35 (both checked against the csv too)."""
    base_csv, new_csv = csv_kernels(BASE_2024), csv_kernels(NEW_2025)
    for run, table, core, count, total_ms, mte2 in (
            (real_pair[0], base_csv, "AI_CORE", 86, 1.79, 0.49),
            (real_pair[1], new_csv, "AI_VECTOR_CORE", 57, 1.42, 0.35)):
        rows = per_type(run).loc[("TransData", "core")]
        assert list(rows.index) == [core]
        kernels = table[table["Type"] == "TransData"]
        assert (kernels["Accelerator Core"] == core).all() and len(kernels) == count
        assert rows.loc[core, "count"] == count
        assert rows.loc[core, "total_us"] / 1000 == pytest.approx(total_ms, abs=0.005)
        assert rows.loc[core, "total_us"] == pytest.approx(
            kernels["Duration(us)"].astype(float).sum())
        assert pipe_ratios(run).loc["TransData", "mte2"] == pytest.approx(mte2, abs=0.005)


def test_real_pair_matmul_block_dim_and_formats(real_pair):
    """The MatMul family: block dim 32 on 12 of 13 kernels (MatMul, BatchMatMul,
    BatchMatMulV2) → 16 and 24 (MatMulV2/V3); formats FRACTAL_NZ → FORMAT_ND."""
    def matmuls(run) -> pd.DataFrame:
        rows = attribute_rows(run)
        return rows[rows["op_type"].str.contains("MatMul", case=False)]

    base, new = matmuls(real_pair[0]), matmuls(real_pair[1])
    assert set(base["op_type"]) == {"MatMul", "BatchMatMul", "BatchMatMulV2"}
    assert set(new["op_type"]) == {"MatMulV2", "MatMulV3"}
    base_dims = base[base["attribute"] == "block_dim"].groupby("value")["count"].sum()
    new_dims = new[new["attribute"] == "block_dim"].groupby("value")["count"].sum()
    assert base_dims.to_dict() == {"30": 1, "32": 12}
    assert new_dims.to_dict() == {"16": 4, "21": 1, "22": 1, "24": 3}
    for rows, table in ((base_dims, csv_kernels(BASE_2024)), (new_dims, csv_kernels(NEW_2025))):
        kernels = table[table["Type"].str.contains("MatMul", case=False)]
        assert rows.to_dict() == kernels["Block Dim"].value_counts().to_dict()

    def formats(rows: pd.DataFrame) -> set[str]:
        values = rows.loc[rows["attribute"] == "input_formats", "value"]
        return {token for value in values for token in value.split(";")}

    assert formats(base) == {"FRACTAL_NZ"} and formats(new) == {"FORMAT_ND"}


def test_a_large_table_read_as_dictionaries_gives_the_same(real_pair, monkeypatch):
    """Above TEXT_TABLE_BYTES the text attributes are read as dictionaries (categoricals):
    the same attribute and pipe rows as the small table's text columns."""
    from cann_diff.read.formats import csv_files

    monkeypatch.setattr(csv_files, "TEXT_TABLE_BYTES", 0)
    as_dictionaries = load_run(NEW_2025)
    for frame, other in ((as_dictionaries.summary.attributes, real_pair[1].summary.attributes),
                         (as_dictionaries.summary.pipes, real_pair[1].summary.pipes)):
        pd.testing.assert_frame_equal(frame, other)


# -------------------------------------------------- 2. text and db of one stack (real)


def _modes(run, attributes=("core", "block_dim", "input_formats")) -> pd.Series:
    """Per (op_type, attribute), the value of the most kernels (ties: the smallest text)."""
    rows = per_type(run).reset_index()
    rows = rows[rows["attribute"].isin(attributes)]
    rows = rows.sort_values(["op_type", "attribute", "count", "value"],
                            ascending=[True, True, False, True])
    return rows.groupby(["op_type", "attribute"])["value"].first()


@needs_realdata
@pytest.mark.parametrize("rank", [0, 1])
def test_text_and_db_twins_give_the_same_modal_placement(rank):
    text = load_run(MSI / f"text/level1/rank{rank}_ascend_pt")
    db = load_run(MSI / f"db/level1/rank{rank}_ascend_pt")
    assert db.meta.format == "ascend_db"
    text_modes, db_modes = _modes(text), _modes(db)
    both = text_modes.index.intersection(db_modes.index)
    assert len(both) > 50  # every compute type the two record
    assert (text_modes[both] == db_modes[both]).all(), \
        text_modes[both][text_modes[both] != db_modes[both]]


def copy_db(rank: int, folder: Path) -> Path:
    """The real db of ``rank`` copied with its WAL, to be read by sqlite3 as it is."""
    for path in (MSI / f"db/level1/rank{rank}_ascend_pt" / OUT).glob(
            f"ascend_pytorch_profiler_{rank}.db*"):
        shutil.copy(path, folder / path.name)
    return folder / f"ascend_pytorch_profiler_{rank}.db"


@needs_realdata
@pytest.mark.parametrize("rank", [0, 1])
def test_real_db_pipes_are_task_pmu_info_pivoted(tmp_path, rank):
    """TASK_PMU_INFO (long: task, metric id, value) pivoted with pandas, busy times ns →
    µs, the documented A2 vocabulary (``csv_pipes``), weighted by TASK durations: the
    ratios per type. (The text twin is another capture: its ratios differ a little.)"""
    with sqlite3.connect(copy_db(rank, tmp_path)) as conn:
        long = pd.read_sql("SELECT P.globalTaskId AS task, S.value AS metric, P.value "
                           "FROM TASK_PMU_INFO P JOIN STRING_IDS S ON S.id = P.name", conn)
        tasks = pd.read_sql("SELECT T.globalTaskId AS task, (T.endNs - T.startNs) / 1000.0 "
                            "AS dur, S.value AS type FROM TASK T JOIN COMPUTE_TASK_INFO C "
                            "ON C.globalTaskId = T.globalTaskId JOIN STRING_IDS S "
                            "ON S.id = C.opType", conn)
    wide = long.pivot_table(index="task", columns="metric", values="value", aggfunc="first")
    wide["aicore_time(us)"] = wide["aic_total_time"] / 1000
    wide["aiv_time(us)"] = wide["aiv_total_time"] / 1000
    table = tasks.join(wide, on="task")
    table = table.assign(**{"Duration(us)": table["dur"].astype(str), "Type": table["type"]})
    expected = csv_pipe_ratios(table.reset_index(drop=True)).sort_index()
    found = pipe_ratios(load_run(MSI / f"db/level1/rank{rank}_ascend_pt")).sort_index()
    assert list(found.index) == list(expected.index)
    pd.testing.assert_frame_equal(found[list(PIPES)], expected[list(PIPES)],
                                  check_names=False, rtol=1e-9)


@needs_realdata
def test_db_without_op_state_or_hf32_columns_has_no_rows_for_them(tmp_path):
    """The real db's COMPUTE_TASK_INFO has neither opState nor hf32Eligible (an older
    schema): no such attribute rows, where the text twin has them for every kernel."""
    with sqlite3.connect(copy_db(0, tmp_path)) as conn:
        columns = {row[1] for row in conn.execute("PRAGMA table_info(COMPUTE_TASK_INFO)")}
    assert "blockDim" in columns and not {"opState", "hf32Eligible"} & columns
    db_rows = attribute_rows(load_run(MSI / "db/level1/rank0_ascend_pt"))
    text_rows = attribute_rows(load_run(MSI / "text/level1/rank0_ascend_pt"))
    assert not db_rows["attribute"].isin(["op_state", "hf32"]).any()
    assert text_rows["attribute"].isin(["op_state", "hf32"]).any()


# ------------------------------------------------ 3. crafted profiles, values by hand

A2_HEADERS = ("aicore_time(us)", "aic_mac_ratio", "aic_scalar_ratio", "aic_mte1_ratio",
              "aic_mte2_ratio", "aic_fixpipe_ratio", "aiv_time(us)", "aiv_vec_ratio",
              "aiv_scalar_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio")
A910_HEADERS = ("aicore_time(us)", "mac_ratio", "vec_ratio", "scalar_ratio", "mte1_ratio",
                "mte2_ratio", "mte3_ratio")
ATTRIBUTE_HEADERS = ("Block Dim", "Mix Block Dim", "OP State", "HF32 Eligible",
                     "Input Formats")
NA = None  # a counter the file writes as N/A

# name: (Type, core, µs, shapes, (block dim, mix block dim, op state, HF32, formats)).
KERNELS = {
    "mm_mix": ("MatMulV3", "MIX_AIC", 10.0, "8,8;8,8",
               ("24", "12", "dynamic", "YES", "FORMAT_ND;FORMAT_ND")),
    "mm_cube": ("MatMulV3", "AI_CORE", 30.0, "8,8;8,8",
                ("20", "0", "static", "NO", "FRACTAL_NZ;FRACTAL_NZ")),
    "add_vec": ("Add", "AI_VECTOR_CORE", 5.0, "4,4;4,4", ("8", "0", "dynamic", "NO", "ND;ND")),
    "mask_cpu": ("DropOutGenMask", "AI_CPU", 7.0, "4,4", ("0", "0", "N/A", "N/A", "N/A")),
    "cast_untimed": ("Cast", "AI_VECTOR_CORE", 4.0, "2,2", ("N/A", "N/A", "dynamic", "NO", "ND")),
    "mul_half": ("Mul", "AI_VECTOR_CORE", 6.0, "2,2;2,2", ("4", "0", "dynamic", "NO", "ND;ND")),
}
# A2 counters in A2_HEADERS order (busy times µs).
A2_COUNTERS = {
    "mm_mix": (8, .6, .1, .3, .5, .2, 2, .4, .6, 0, .7),
    "mm_cube": (30, .8, .3, .1, .2, .1, 0, 0, 0, 0, 0),
    "add_vec": (0, 0, 0, 0, 0, 0, 5, .9, .4, .3, .2),
    "mask_cpu": (NA,) * 11,
    "cast_untimed": (NA, 0, .2, 0, .1, 0, NA, .5, .4, .3, .6),  # no busy time: plain mean
    "mul_half": (3, 0, NA, 0, .2, 0, 3, .1, .5, .4, .3),  # cube-side scalar N/A
}
# Per op_type, by hand: pmu_us, then Σ ratio·µs for cube … fixpipe.
#   MatMulV3: mm_mix scalar (.1·8 + .6·2)/10 = .2, MTE2 (.5·8 + 0·2)/10 = .4; mm_cube
#     runs on the cube side alone: scalar .3, MTE2 .2. Σ: cube .6·10 + .8·30 = 30,
#     vector 4, scalar 2 + 9 = 11, mte1 3 + 3 = 6, mte2 4 + 6 = 10, mte3 7, fixpipe 2 + 3 = 5.
#   Add: the vector side alone: scalar .4·5 = 2, MTE2 .3·5 = 1.5.
#   Cast: no busy time on either side, so the mean: scalar (.2 + .4)/2 · 4 = 1.2, MTE2
#     (.1 + .3)/2 · 4 = .8.
#   Mul: scalar from the vector side only, .5·6 = 3; MTE2 (.2·3 + .4·3)/6 · 6 = 1.8.
#   DropOutGenMask (AI CPU, N/A): no pipes row.
A2_PIPES = {
    "MatMulV3": (40, 30, 4, 11, 6, 10, 7, 5),
    "Add": (5, 0, 4.5, 2, 0, 1.5, 1, 0),
    "Cast": (4, 0, 2, 1.2, 0, .8, 2.4, 0),
    "Mul": (6, 0, .6, 3, 0, 1.8, 1.8, 0),
}
# 910A: one AI Core, unprefixed ratios; only the MatMuls and Add record counters.
A910_COUNTERS = {
    "mm_mix": (10, .5, .1, .2, .3, .4, .05),
    "mm_cube": (30, .9, 0, .1, .2, .3, 0),
    "add_vec": (5, 0, .6, .1, 0, .3, .2),
}
# MatMulV3: cube .5·10 + .9·30 = 32, vector 1, scalar 2 + 3 = 5, mte1 3 + 6 = 9,
# mte2 4 + 9 = 13, mte3 .5; Add: vector 3, scalar .5, mte2 1.5, mte3 1; no fixpipe.
A910_PIPES = {
    "MatMulV3": (40, 32, 1, 5, 9, 13, .5, np.nan),
    "Add": (5, 0, 3, .5, 0, 1.5, 1, np.nan),
}
# Per op_type: (attribute, value, count, µs), for one step, by hand from KERNELS: N/A and
# block dim 0 record nothing; dtypes are write_profile's DT_BF16 per input.
CRAFTED_ATTRIBUTES = {
    "MatMulV3": [("core", "AI_CORE", 1, 30), ("core", "MIX_AIC", 1, 10),
                 ("block_dim", "20", 1, 30), ("block_dim", "24", 1, 10),
                 ("mix_block_dim", "0", 1, 30), ("mix_block_dim", "12", 1, 10),
                 ("op_state", "dynamic", 1, 10), ("op_state", "static", 1, 30),
                 ("input_formats", "FORMAT_ND;FORMAT_ND", 1, 10),
                 ("input_formats", "FRACTAL_NZ;FRACTAL_NZ", 1, 30),
                 ("input_dtypes", "BF16;BF16", 2, 40),
                 ("hf32", "NO", 1, 30), ("hf32", "YES", 1, 10),
                 ("implementation", "mm_cube", 1, 30), ("implementation", "mm_mix", 1, 10)],
    "Add": [("core", "AI_VECTOR_CORE", 1, 5), ("block_dim", "8", 1, 5),
            ("mix_block_dim", "0", 1, 5), ("op_state", "dynamic", 1, 5),
            ("input_formats", "ND;ND", 1, 5), ("input_dtypes", "BF16;BF16", 1, 5),
            ("hf32", "NO", 1, 5), ("implementation", "add_vec", 1, 5)],
    "DropOutGenMask": [("core", "AI_CPU", 1, 7), ("mix_block_dim", "0", 1, 7),
                       ("input_dtypes", "BF16", 1, 7), ("implementation", "mask_cpu", 1, 7)],
    "Cast": [("core", "AI_VECTOR_CORE", 1, 4), ("op_state", "dynamic", 1, 4),
             ("input_formats", "ND", 1, 4), ("input_dtypes", "BF16", 1, 4),
             ("hf32", "NO", 1, 4), ("implementation", "cast_untimed", 1, 4)],
    "Mul": [("core", "AI_VECTOR_CORE", 1, 6), ("block_dim", "4", 1, 6),
            ("mix_block_dim", "0", 1, 6), ("op_state", "dynamic", 1, 6),
            ("input_formats", "ND;ND", 1, 6), ("input_dtypes", "BF16;BF16", 1, 6),
            ("hf32", "NO", 1, 6), ("implementation", "mul_half", 1, 6)],
}


def _text(value) -> str:
    return "N/A" if value is None else f"{value:g}" if isinstance(value, float | int) \
        else str(value)


def rewrite_kernels(rank_dir: Path, update) -> None:
    """kernel_details.csv with ``update(row) -> {header: text}`` applied to every row
    (new headers appended; a row ``update`` leaves out writes N/A in them)."""
    path = rank_dir / OUT / "kernel_details.csv"
    with open(path, newline="") as handle:
        rows = list(csv.DictReader(handle))
    changes = [update(row) for row in rows]
    header = list(rows[0]) + [h for h in dict.fromkeys(k for c in changes for k in c)
                              if h not in rows[0]]
    with open(path, "w", newline="") as handle:
        writer = csv.DictWriter(handle, header, restval="N/A", lineterminator="\r\n")
        writer.writeheader()
        writer.writerows({**row, **change} for row, change in zip(rows, changes))


def crafted_schedule() -> list:
    kernels = [Kernel(name, kind, core, us, shapes)
               for name, (kind, core, us, shapes, _) in KERNELS.items()]
    return [*kernels[:3], Comm("allReduce", 20.0), *kernels[3:]]


def crafted_update(counters: dict, headers: tuple[str, ...]):
    def update(row: dict) -> dict:
        if row["Name"] not in KERNELS:  # the collective: N/A everywhere
            return {h: "N/A" for h in (*ATTRIBUTE_HEADERS, *headers)}
        values = dict(zip(ATTRIBUTE_HEADERS, KERNELS[row["Name"]][4]))
        return values | {h: _text(v) for h, v in zip(headers, counters.get(
            row["Name"], (NA,) * len(headers)))}
    return update


def write_text(root: Path, counters: dict, headers: tuple[str, ...], **options) -> Path:
    run = write_profile(root, "text", crafted_schedule(), steps=(1,), **options).path
    for rank_dir in run.iterdir():
        rewrite_kernels(rank_dir, crafted_update(counters, headers))
    return run


BASE_NS = 1_736_000_000_000_000_000
# Counter -> the TASK_PMU_INFO metric name (busy times in ns there).
DB_METRICS = {"aicore_time(us)": "aic_total_time", "aiv_time(us)": "aiv_total_time"}


def write_db(root: Path, rank: int = 0, frequencies=(1800, 1800, 1650, 0)) -> Path:
    """The A2 kernels as a torch_npu db: COMPUTE_TASK_INFO with the attribute columns,
    TASK_PMU_INFO long (N/A: no row), AICORE_FREQ, one step around every kernel."""
    folder = root / f"rank{rank}_ascend_pt"
    (folder / OUT).mkdir(parents=True)
    (folder / f"profiler_info_{rank}.json").write_text(json.dumps({"rank_id": rank}))
    strings: dict[str, int] = {}

    def sid(text: str) -> int:
        return strings.setdefault(text, len(strings) + 1)

    with sqlite3.connect(folder / OUT / f"ascend_pytorch_profiler_{rank}.db") as conn:
        conn.executescript("""
            CREATE TABLE STRING_IDS(id INTEGER PRIMARY KEY, value TEXT);
            CREATE TABLE TASK(startNs INTEGER, endNs INTEGER, deviceId INTEGER,
                              connectionId INTEGER, globalTaskId INTEGER);
            CREATE TABLE COMPUTE_TASK_INFO(name INTEGER, globalTaskId INTEGER,
                              blockDim INTEGER, mixBlockDim INTEGER, taskType INTEGER,
                              opType INTEGER, inputFormats INTEGER, inputDataTypes INTEGER,
                              inputShapes INTEGER, opState INTEGER, hf32Eligible INTEGER);
            CREATE TABLE TASK_PMU_INFO(globalTaskId INTEGER, name INTEGER, value NUMERIC);
            CREATE TABLE AICORE_FREQ(deviceId INTEGER, timestampNs NUMERIC, freq INTEGER);
            CREATE TABLE STEP_TIME(id INTEGER, startNs INTEGER, endNs INTEGER);
        """)
        start = BASE_NS + 1000
        for task, (name, (kind, core, us, shapes, attrs)) in enumerate(KERNELS.items(), 1):
            block, mix, state, hf32, formats = attrs
            dtypes = ";".join(["DT_BF16"] * (shapes.count(";") + 1))
            conn.execute("INSERT INTO TASK VALUES (?, ?, 0, NULL, ?)",
                         (start, start + int(us * 1000), task))
            conn.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (?,?,?,?,?,?,?,?,?,?,?)",
                         (sid(name), task, None if block == "N/A" else int(block),
                          None if mix == "N/A" else int(mix), sid(core), sid(kind),
                          sid(formats), sid(dtypes), sid(f'"{shapes}"'), sid(state),
                          sid(hf32)))
            for header, value in zip(A2_HEADERS, A2_COUNTERS[name]):
                if value is not None:
                    metric = DB_METRICS.get(header, header)
                    conn.execute("INSERT INTO TASK_PMU_INFO VALUES (?, ?, ?)",
                                 (task, sid(metric), value * 1000 if header in DB_METRICS
                                  else value))
            start += int(us * 1000) + 2000
        conn.executemany("INSERT INTO AICORE_FREQ VALUES (0, ?, ?)",
                         [(BASE_NS + n, freq) for n, freq in enumerate(frequencies)])
        conn.execute("INSERT INTO STEP_TIME VALUES (1, ?, ?)", (BASE_NS, start + 1000))
        conn.executemany("INSERT INTO STRING_IDS VALUES (?, ?)",
                         [(i, text) for text, i in strings.items()])
    return folder


MSPROF_HEADER = ("Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,"
                 "Task Start Time(us),Task Duration(us),Task Wait Time(us),Block Num,"
                 "Mix Block Num,HF32 Eligible,Input Shapes,Input Data Types,"
                 "Input Formats").split(",")


def write_msprof(root: Path) -> Path:
    """The A2 kernels as an msprof op_summary (``Block Num``), frequency in info.json."""
    prof = root / "PROF_000001_20260101000000000_ABCDEFGH"
    out = prof / "mindstudio_profiler_output"
    out.mkdir(parents=True)
    (prof / "device_0").mkdir()
    (prof / "device_0" / "info.json.0").write_text(json.dumps(
        {"DeviceInfo": [{"id": 0, "aic_frequency": "1800", "aiv_frequency": "1800"}]}))
    with open(out / "op_summary_20260101000000.csv", "w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\r\n")
        writer.writerow([*MSPROF_HEADER, *A2_HEADERS])
        start = 1_767_225_600_000_000.0
        for task, (name, (kind, core, us, shapes, attrs)) in enumerate(KERNELS.items(), 1):
            block, mix, state, hf32, formats = attrs
            dtypes = ";".join(["DT_BF16"] * (shapes.count(";") + 1))
            writer.writerow(["0", "4294967295", str(task), "2", name, kind, state, core,
                             f"{start:.3f}\t", f"{us:.3f}", "0", block, mix, hf32,
                             f'"{shapes}"', dtypes, formats,
                             *(_text(v) for v in A2_COUNTERS[name])])
            start += us + 2
    return prof


def _expected_attributes() -> list[tuple]:
    return sorted((op_type, *row) for op_type, rows in CRAFTED_ATTRIBUTES.items()
                  for row in rows)


def _found_attributes(run) -> list[tuple]:
    rows = attribute_rows(run)
    return sorted(zip(rows["op_type"], rows["attribute"], rows["value"],
                      rows["count"].astype(int), rows["total_us"].round(9)))


def _found_pipes(run) -> dict[str, tuple]:
    rows = pipe_rows(run).set_index("op_type")[["pmu_us", *PIPES]]
    return {op_type: tuple(values) for op_type, values in rows.iterrows()}


def _assert_pipes(found: dict[str, tuple], expected: dict[str, tuple]) -> None:
    assert sorted(found) == sorted(expected)
    for op_type, values in expected.items():
        assert np.allclose(found[op_type], values, equal_nan=True, atol=1e-9), op_type


@pytest.fixture(scope="module")
def crafted(tmp_path_factory):
    """The same six kernels as an A2 text export, a db and an msprof op_summary."""
    root = tmp_path_factory.mktemp("crafted")
    return {"text": load_run(write_text(root, A2_COUNTERS, A2_HEADERS)),
            "db": load_run(write_db(root / "db")),
            "msprof": load_run(write_msprof(root / "msprof"))}


@pytest.mark.parametrize("layout", ["text", "db", "msprof"])
def test_crafted_a2_attributes_by_hand(crafted, layout):
    """Each value with its kernels and µs; N/A and a block dim of 0 give no row; the
    collective (text) gives none."""
    assert _found_attributes(crafted[layout]) == _expected_attributes()


@pytest.mark.parametrize("layout", ["text", "db", "msprof"])
def test_crafted_a2_pipes_by_hand(crafted, layout):
    """Scalar and MTE2 weighted by each core's busy time (db: ns → µs), one side where
    the other is N/A, the plain mean where no time is recorded; the AI CPU kernel (all
    N/A) has no pipes row."""
    _assert_pipes(_found_pipes(crafted[layout]), A2_PIPES)


def test_crafted_910a_pipes_by_hand(tmp_path):
    """Unprefixed 910A ratios: one core, no fixpipe (NaN); kernels without counters
    (N/A) add no pipes row and no µs to pmu_us."""
    run = load_run(write_text(tmp_path, A910_COUNTERS, A910_HEADERS))
    _assert_pipes(_found_pipes(run), A910_PIPES)
    assert _found_attributes(run) == _expected_attributes()


def test_runs_without_the_columns_have_no_rows_for_them(tmp_path):
    """Level1 without PMU counters: the attributes, no pipes row. Level0 (core and type
    N/A, block dim 0 on every kernel, no formats/dtypes/state/HF32): only the kernel
    names."""
    level1 = load_run(write_profile(tmp_path, "l1", crafted_schedule(), steps=(1,)).path)
    assert set(attribute_rows(level1)["attribute"]) == {
        "core", "block_dim", "mix_block_dim", "op_state", "input_formats", "input_dtypes",
        "hf32", "implementation"}
    assert level1.summary.pipes is not None and level1.summary.pipes.empty
    level0 = load_run(write_profile(tmp_path, "l0", crafted_schedule(), steps=(1,),
                                    level0=True).path)
    rows = attribute_rows(level0)
    assert set(rows["attribute"]) == {"implementation"}
    assert sorted(rows["value"]) == sorted(KERNELS)
    assert level0.summary.pipes.empty


def test_real_level0_block_dim_of_zero_records_nothing():
    """The real Level0 export writes Block Dim 0 for every kernel (MatMuls included):
    no block dim rows, so a Level0 side never shows a placement 0→32."""
    rank_dir = DATA / "realdata/Ascend__msinsight/test/data/pytorch/text/level0/rank0_ascend_pt"
    table = pd.read_csv(rank_dir / OUT / "kernel_details.csv", dtype=str)
    assert set(table["Block Dim"]) == {"0"}
    assert set(attribute_rows(load_run(rank_dir))["attribute"]) == {"implementation"}


def test_pipe_columns_in_batches_equal_one_batch(monkeypatch):
    """Arrow chunks worked out a few at a time (BATCH_ROWS) give what one pass gives."""
    rng = np.random.default_rng(7)
    length = 1000
    counters = {}
    for field in kernel_attributes.COUNTER_FIELDS:
        if field in kernel_attributes.UNIFIED.values():
            continue
        values = rng.uniform(0, 1 if "ratio" in field else 50, length)
        values[rng.random(length) < 0.1] = np.nan
        counters[field] = values
    counters["pmu_aiv_us"][:40] = 0.0  # no weight on the vector side
    counters["pmu_aicore_us"][:20] = 0.0  # nor on either side: the mean
    whole = kernel_attributes.pipe_columns(counters, length)
    cuts = [0, 97, 300, 301, 640, length]
    chunked = {field: pa.chunked_array([pa.array(values[a:b], from_pandas=True)
                                        for a, b in zip(cuts, cuts[1:])])
               for field, values in counters.items()}
    monkeypatch.setattr(kernel_attributes, "BATCH_ROWS", 128)
    batched = kernel_attributes.pipe_columns(chunked, length)
    assert sorted(batched) == sorted(whole)
    for field in whole:
        assert np.array_equal(batched[field], whole[field], equal_nan=True), field
    # and the plain pandas formula of csv_pipes on the same numbers
    table = pd.DataFrame({("aicore_time(us)" if f == "pmu_aicore_us" else
                           "aiv_time(us)" if f == "pmu_aiv_us" else f): v
                          for f, v in counters.items()})
    expected = csv_pipes(table)
    for pipe in PIPES:
        assert np.allclose(whole[f"pipe_{pipe}"], expected[pipe], equal_nan=True), pipe


# ------------------------------------------------- 4. ranks stacked, steps selected

STACK_RANKS = range(4)
STACK_STEPS = (1, 2, 3)


def _stack_schedule(rank: int, step: int) -> list:
    return [Kernel(f"mm_r{rank}", "MatMulV3", "AI_CORE", 10.0 + rank, "8,8;8,8"),
            Kernel("add", "Add", "AI_VECTOR_CORE", 3.0 + step, "4,4;4,4"),
            Comm("allReduce", 20.0)]


def _block_dim(rank: int, step: int) -> str:
    return f"{rank + 1}{step}"  # rank 0 step 2: 12


def _mac(rank: int, step: int) -> float:
    return round(0.1 * step + 0.01 * rank, 3)


@pytest.fixture(scope="module")
def stack_dirs(tmp_path_factory):
    """Four small ranks; each MatMul's block dim and cube ratio name its rank and step.
    Rank 3 keeps write_profile's header: no PMU counters (a stack of two layouts)."""
    root = tmp_path_factory.mktemp("stacked")
    run = write_profile(root, "run", _stack_schedule, ranks=STACK_RANKS, steps=STACK_STEPS)
    dirs = sorted(p for p in run.path.iterdir() if p.is_dir())
    for rank, rank_dir in enumerate(dirs[:3]):
        def update(row, rank=rank):
            if not row["Name"].startswith("mm_"):
                return {}
            step = int(row["Step Id"])
            return {"Block Dim": _block_dim(rank, step), "aicore_time(us)": row["Duration(us)"],
                    "aic_mac_ratio": str(_mac(rank, step)), "aiv_time(us)": "0"}
        rewrite_kernels(rank_dir, update)
    return dirs


def test_a_stack_gives_each_rank_its_own_attributes_and_pipes(stack_dirs):
    plan = RankPlan(keep_rows=False)
    alone = [reduce_kernels(torch_text.read_rank(d), plan) for d in stack_dirs]
    stacked = reduce_ranks([torch_text.read_rank(d) for d in stack_dirs], plan)
    assert all(r.share is not None for r in stacked)  # reduced as one stack
    for one, other in zip(alone, stacked, strict=True):
        mine, theirs = summary_of(one), summary_of(other)
        for frame, other_frame in ((mine.attributes, theirs.attributes),
                                   (mine.pipes, theirs.pipes)):
            pd.testing.assert_frame_equal(frame, other_frame)
    assert summary_of(stacked[3]).pipes.empty


def _keyed(run, rank_ids=None) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Attributes and pipes by key, in a fixed order (rows renumbered away)."""
    attributes = attribute_rows(run).drop(columns="row").sort_values(
        [*KEY, "attribute", "value"]).reset_index(drop=True)
    pipes = pipe_rows(run).drop(columns="row").assign(
        input_shapes=lambda f: f["input_shapes"].astype(str)).sort_values(KEY).reset_index(
        drop=True)
    return attributes, pipes


def _check_by_hand(run, steps=STACK_STEPS) -> None:
    """Each MatMul row: block dim and cube ratio of its own rank and step."""
    rows = attribute_rows(run)
    dims = rows[(rows["op_type"] == "MatMulV3") & (rows["attribute"] == "block_dim")]
    assert sorted(zip(dims["rank"], dims["step"], dims["value"], dims["count"])) == sorted(
        (r, s, _block_dim(r, s) if r < 3 else "24", 1) for r in STACK_RANKS for s in steps)
    pipes = pipe_rows(run)
    assert set(pipes["op_type"]) == {"MatMulV3"}  # only the MatMuls have counters
    for _, row in pipes.iterrows():
        rank, step = int(row["rank"]), int(row["step"])
        assert rank < 3 and step in steps
        assert row["pmu_us"] == pytest.approx(10.0 + rank)
        assert row["cube"] / row["pmu_us"] == pytest.approx(_mac(rank, step))
    assert len(pipes) == 3 * len(steps)


def test_a_run_of_stacked_ranks_is_each_rank_read_alone(stack_dirs):
    run = load_run(stack_dirs[0].parent)
    _check_by_hand(run)
    attributes, pipes = _keyed(run)
    alone = [_keyed(load_run(d)) for d in stack_dirs]
    pd.testing.assert_frame_equal(
        attributes, pd.concat([a for a, _ in alone]).sort_values(
            [*KEY, "attribute", "value"]).reset_index(drop=True))
    pd.testing.assert_frame_equal(
        pipes, pd.concat([p for _, p in alone]).sort_values(KEY).reset_index(drop=True))


@pytest.mark.parametrize("how", ["read", "select"])
def test_steps_keep_each_row_its_own_attributes(stack_dirs, how):
    """--steps 2-3 when reading (the reduce drops step 1) or after (select_steps): every
    kept row keeps its own values, as the whole run has them for those steps."""
    whole = load_run(stack_dirs[0].parent)
    chosen = load_run(stack_dirs[0].parent, steps=[(2, 3)]) if how == "read" \
        else select_steps(whole, [(2, 3)])
    _check_by_hand(chosen, steps=(2, 3))
    attributes, pipes = _keyed(chosen)
    all_attributes, all_pipes = _keyed(whole)
    pd.testing.assert_frame_equal(
        attributes, all_attributes[all_attributes["step"] >= 2].reset_index(drop=True))
    pd.testing.assert_frame_equal(pipes, all_pipes[all_pipes["step"] >= 2].reset_index(
        drop=True))


# ------------------------------------------------------------ 5. the AI Core frequency


def test_db_frequency_is_the_most_common_positive_value(crafted):
    """AICORE_FREQ 1800, 1800, 1650, 0 → 1800; the file and table named."""
    meta = crafted["db"].meta
    assert meta.aicore_freq == "1800"
    assert meta.detail_sources["aicore_freq"].endswith(
        "ascend_pytorch_profiler_0.db: AICORE_FREQ")


def test_msprof_frequency_from_info_json(crafted):
    meta = crafted["msprof"].meta
    assert meta.aicore_freq == "1800"
    assert meta.detail_sources["aicore_freq"] == "device_0/info.json.0: DeviceInfo aic_frequency"


def test_ranks_at_different_frequencies_are_mixed(tmp_path):
    write_db(tmp_path, 0, (1800, 1800))
    write_db(tmp_path, 1, (1650,))
    assert load_run(tmp_path).meta.aicore_freq == "mixed: 1650 (1 rank), 1800 (1 rank)"


def test_text_without_a_trace_names_where_the_frequency_would_be():
    meta = load_run(NEW_2025).meta  # the tests/data copy has no trace_view.json
    assert meta.aicore_freq is None
    assert meta.detail_sources["aicore_freq"] == "ASCEND_PROFILER_OUTPUT/trace_view.json: " \
                                                 "AI Core Freq"


@needs_realdata
def test_real_db_and_trace_frequency(tmp_path):
    """The real db's AICORE_FREQ (read with sqlite3 from a copy, WAL included) and the
    text twin's trace_view.json ``AI Core Freq`` counters (args.MHz) agree: 1800 MHz."""
    with sqlite3.connect(copy_db(0, tmp_path)) as conn:
        frequencies = pd.Series([f for (f,) in conn.execute("SELECT freq FROM AICORE_FREQ")])
    trace = json.loads((MSI / "text/level1/rank0_ascend_pt" / OUT / "trace_view.json"
                        ).read_text())
    counters = pd.Series([e["args"]["MHz"] for e in trace
                          if e.get("name") == "AI Core Freq" and e.get("ph") == "C"])
    expected = f"{frequencies[frequencies > 0].mode().max():g}"
    assert expected == f"{counters.mode().max():g}" == "1800"
    db = load_run(MSI / "db/level1/rank0_ascend_pt").meta
    text = load_run(MSI / "text/level1/rank0_ascend_pt").meta
    assert db.aicore_freq == text.aicore_freq == expected
    assert db.detail_sources["aicore_freq"].endswith("ascend_pytorch_profiler_0.db: AICORE_FREQ")
    assert text.detail_sources["aicore_freq"] == "ASCEND_PROFILER_OUTPUT/trace_view.json: " \
                                                 "AI Core Freq"
