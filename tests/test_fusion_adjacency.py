"""MC2 splits whose MatMuls share shapes: each fused type gets the MatMuls next to its own
collective (read/reduce/summary.py ``adjacent_kernels``, findings/fusion.py).

A TP 8 layer (H = 4096, k = 1024) whose three MC2 ops all multiply [4096, 1024]×[1024, 4096]
once split, L = 8 layers per step, 3 steps, 1 rank, no noise (tests/profiles.py): every
figure below is exact.

FUSED layer (base):
  RmsNorm 60 | AllGatherMatmul 900 (x 512,1024 · w 1024,4096) | FlashAttentionScore 400 |
  MatmulAllReduce 700 (x 4096,1024 · w 1024,4096 · bias 4096) | RmsNorm 60 |
  MatMulV3 1200 (gate-up 4096,4096 · 4096,2752) | MatmulReduceScatter 1100 (4096,1024 · 1024,4096)
SPLIT layer (new):
  RmsNorm 60 | AllGather 350 → MatMulV3 800 | FlashAttentionScore 400 |
  MatMulV3 600 → AllReduce 300 | RmsNorm 60 | MatMulV3 1200 (gate-up) |
  MatMulV3 950 → ReduceScatter 400
The three split MatMuls are one key (MatMulV3, 4096,1024;1024,4096) of 24 instances per step.

Per step, by hand:
  AllGatherMatmul      base 8 · 900  = 7200   new 8 · (350 + 800) =  9200
  MatmulAllReduce      base 8 · 700  = 5600   new 8 · (600 + 300) =  7200
  MatmulReduceScatter  base 8 · 1100 = 8800   new 8 · (950 + 400) = 10800
By the shared key's mean alone, every type would get (800 + 600 + 950) / 3 = 783.3 µs a
MatMul: MatmulAllReduce 8 · (783.3 + 300) = 8667 (+20 %), MatmulReduceScatter 9467 (−12 %).

``with_ordinary=True`` adds, on both sides, an ordinary MatMul of the same shapes (500 µs)
after the gate-up MatMul of layers 0-3 (between two MatMuls: next to no collective) and,
after the last layer, another (500 µs) feeding a data-parallel AllReduce (2000 µs, another
group): the shared key's AllReduce cell then holds 1 instance per step on the base side and
8 + 1 on the new side.
"""

from __future__ import annotations

import csv
import json
import sqlite3
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REALDATA
from profiles import Comm, Kernel, aclnn, write_profile

from cann_diff.pipeline import diff
from cann_diff.read import load_run, select_steps
from cann_diff.read.formats import torch_text
from cann_diff.read.reduce.ranks import RankPlan, reduce_kernels, reduce_ranks, summary_of
from cann_diff.read.reduce.summary import combine, summarize
from cann_diff.schema import conform_ops
from cann_diff.settings import DEFAULT_LIMITS
from cann_diff.vocab import Vocabulary

L = 8
SHARED = "4096,1024;1024,4096"
AG_FUSED = "512,1024;1024,4096"  # x local rows 4096 / TP 8: the split MatMul gathers them
AR_FUSED = SHARED + ";4096"
NORM = "512,4096;4096"
ATTN = "1,32,4096,128;1,32,4096,128"
GATE_UP = "4096,4096;4096,2752"
DP_GROUP = "6297232067196334501"
STEPS = (1, 2, 3)

TRUTH = {  # (base, new) µs per step, from the docstring
    "AllGatherMatmul": (L * 900.0, L * (350.0 + 800.0)),
    "MatmulAllReduce": (L * 700.0, L * (600.0 + 300.0)),
    "MatmulReduceScatter": (L * 1100.0, L * (950.0 + 400.0)),
}
SPLIT_US = {"AllGatherMatmul": 800.0, "MatmulAllReduce": 600.0, "MatmulReduceScatter": 950.0}
COMM = {"AllGatherMatmul": "AllGather", "MatmulAllReduce": "AllReduce",
        "MatmulReduceScatter": "ReduceScatter"}


def mc2(op_type: str, us: float, shapes: str) -> Kernel:
    return aclnn(op_type, us, shapes, "MIX_AIC")


def layer(index: int, split: bool, with_ordinary: bool, exposed: bool = True) -> list:
    norm = aclnn("RmsNorm", 60.0, NORM, "AI_VECTOR_CORE")
    if split:
        ag = [Comm("allGather", 350.0), aclnn("MatMulV3", 800.0, SHARED)]  # it waits
        ar = [aclnn("MatMulV3", 600.0, SHARED), Comm("allReduce", 300.0, exposed)]
        rs = [aclnn("MatMulV3", 950.0, SHARED), Comm("reduceScatter", 400.0, exposed)]
    else:
        ag = [mc2("AllGatherMatmul", 900.0, AG_FUSED)]
        ar = [mc2("MatmulAllReduce", 700.0, AR_FUSED)]
        rs = [mc2("MatmulReduceScatter", 1100.0, SHARED)]
    ordinary = [aclnn("MatMulV3", 500.0, SHARED)] if with_ordinary and index < L // 2 else []
    return [norm, *ag, aclnn("FlashAttentionScore", 400.0, ATTN, "MIX_AIC"), *ar, norm,
            aclnn("MatMulV3", 1200.0, GATE_UP), *ordinary, *rs]


def schedule(split: bool, with_ordinary: bool = False, exposed: bool = True) -> list:
    ops = [op for i in range(L) for op in layer(i, split, with_ordinary, exposed)]
    tail = [aclnn("MatMulV3", 500.0, SHARED), Comm("allReduce", 2000.0, group=DP_GROUP)]
    return ops + (tail if with_ordinary else [])


# ---------------------------------------------------------------- the same profile as a db

STEP_COLUMNS = ("computing", "communication_not_overlapped", "overlapped", "communication",
                "free", "stage", "bubble", "communication_not_overlapped_and_exclude_receive",
                "preparing")


def as_db(text_run: Path, out: Path) -> Path:
    """Each rank of a text export (write_profile) written again as a torch_npu db export:
    its kernel_details.csv rows as TASK ⨝ COMPUTE_TASK_INFO, its hcom rows as
    COMMUNICATION_OP, its steps as STEP_TIME windows, step_trace_time.csv as StepTraceTime."""
    for rank_dir in sorted(p for p in text_run.iterdir() if p.is_dir()):
        with open(rank_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", newline="") as f:
            rows = list(csv.DictReader(f))
        with open(rank_dir / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv", newline="") as f:
            steps = list(csv.DictReader(f))
        info = next(rank_dir.glob("profiler_info_*.json"))
        rank = json.loads(info.read_text())["rank_id"]
        folder = out / rank_dir.name / "ASCEND_PROFILER_OUTPUT"
        folder.mkdir(parents=True)
        (out / rank_dir.name / info.name).write_text(info.read_text())
        strings: dict[str, int] = {}

        def sid(text: str) -> int:
            return strings.setdefault(text, len(strings) + 1)

        def ns(row: dict) -> tuple[int, int]:
            start = round(float(row["Start Time(us)"].strip()) * 1000)
            return start, start + round(float(row["Duration(us)"]) * 1000)

        with sqlite3.connect(folder / f"ascend_pytorch_profiler_{rank}.db") as conn:
            conn.executescript("""
                CREATE TABLE STRING_IDS(id INTEGER PRIMARY KEY, value TEXT);
                CREATE TABLE TASK(startNs INTEGER, endNs INTEGER, deviceId INTEGER,
                                  globalTaskId INTEGER);
                CREATE TABLE COMPUTE_TASK_INFO(name INTEGER, globalTaskId INTEGER,
                                  taskType INTEGER, opType INTEGER, inputShapes INTEGER,
                                  inputDataTypes INTEGER);
                CREATE TABLE COMMUNICATION_OP(opName INTEGER, startNs INTEGER, endNs INTEGER,
                                  groupName INTEGER, opType INTEGER);
                CREATE TABLE STEP_TIME(id INTEGER, startNs INTEGER, endNs INTEGER);
            """)
            windows: dict[int, list[int]] = {}
            for number, row in enumerate(rows):
                start, end = ns(row)
                step = windows.setdefault(int(row["Step Id"]), [start, end])
                step[0], step[1] = min(step[0], start), max(step[1], end)
                if row["Accelerator Core"] == "HCCL":
                    conn.execute("INSERT INTO COMMUNICATION_OP VALUES (?, ?, ?, ?, ?)",
                                 (sid(row["Name"]), start, end, sid("group"), sid(row["Type"])))
                    continue
                conn.execute("INSERT INTO TASK VALUES (?, ?, 0, ?)", (start, end, number))
                conn.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (?, ?, ?, ?, ?, ?)",
                             (sid(row["Name"]), number, sid(row["Accelerator Core"]),
                              sid(row["Type"]), sid(row["Input Shapes"]),
                              sid(row["Input Data Types"])))
            conn.executemany("INSERT INTO STEP_TIME VALUES (?, ?, ?)",
                             [(s, a - 1000, b + 1000) for s, (a, b) in windows.items()])
            conn.executemany("INSERT INTO STRING_IDS VALUES (?, ?)",
                             [(i, text) for text, i in strings.items()])
        with sqlite3.connect(folder / "analysis.db") as conn:
            conn.execute(f"CREATE TABLE StepTraceTime(step TEXT, "
                         f"{', '.join(c + ' REAL' for c in STEP_COLUMNS)})")
            names = ("Computing", "Communication(Not Overlapped)", "Overlapped",
                     "Communication", "Free", "Stage", "Bubble",
                     "Communication(Not Overlapped and Exclude Receive)", "Preparing")
            conn.executemany(f"INSERT INTO StepTraceTime VALUES "
                             f"({', '.join('?' * (len(names) + 1))})",
                             [(s["Step"], *(float(s[n]) for n in names)) for s in steps])
    return out


def pair(root: Path, layout: str, with_ordinary: bool = False, split_new: bool = True,
         level0: bool = False):
    """Write the base and new profiles and diff them; ``layout``: ``text`` or ``db``."""
    runs = []
    for label, split in (("base", not split_new), ("new", split_new)):
        run = write_profile(root / "text", label, schedule(split, with_ordinary),
                            steps=STEPS, level0=level0).path
        runs.append(run if layout == "text" else as_db(run, root / "db" / label))
    return diff(*runs)


def groups_of(result) -> dict:
    return {g.fused_type: g for g in result.analysis.fusion}


def shared_key(result) -> int:
    ops = result.analysis.operators
    [key] = ops.loc[(ops["op_type"] == "MatMulV3") & (ops["input_shapes"] == SHARED), "key_id"]
    return int(key)


# ---------------------------------------------------------------- the fused types' own times


@pytest.fixture(scope="module", params=["text", "db"])
def triple(request, tmp_path_factory):
    return pair(tmp_path_factory.mktemp(f"triple_{request.param}"), request.param)


def test_each_fused_type_gets_the_time_of_its_own_split_matmuls(triple):
    groups = groups_of(triple)
    assert set(groups) == set(TRUTH)
    for fused_type, (base_us, new_us) in TRUTH.items():
        group = groups[fused_type]
        assert (group.direction, group.base_count, group.new_count) == ("split", L, 0)
        assert group.base_total_us == pytest.approx(base_us)
        assert group.new_total_us == pytest.approx(new_us), fused_type


def test_each_type_claims_its_eight_instances_of_the_shared_key_by_adjacency(triple):
    groups, key = groups_of(triple), shared_key(triple)
    for fused_type, group in groups.items():
        assert group.new_claims[key] == pytest.approx(L), fused_type
        assert group.adjacent_claims == pytest.approx({(key, COMM[fused_type]): L})
        assert group.split_counts == pytest.approx({COMM[fused_type]: L, "MatMul": L})
    # The 24 instances per step are all claimed: the key is listed with the groups.
    assert triple.analysis.fusion_claims[1][key] == pytest.approx(3 * L)


def test_the_new_run_says_which_collective_each_split_matmul_runs_next_to(triple):
    """Per step: 8 MatMuls take what an AllGather gathered (800 µs each), 8 feed an
    AllReduce (600), 8 a ReduceScatter (950); the gate-up MatMul (after an AllReduce, before
    a MatMul) runs next to no collective it feeds or takes from."""
    adjacent = triple.comparison.new.summary.adjacent
    got = {(int(r.step), r.op_type, r.input_shapes, r.comm_type): (r.count, r.total_us)
           for r in adjacent.astype({"op_type": str, "input_shapes": str,
                                     "comm_type": str}).itertuples()}
    want = {(step, "MatMulV3", SHARED, comm): (L, L * SPLIT_US[fused])
            for step in STEPS for fused, comm in COMM.items()}
    assert got.keys() == want.keys()
    for cell, (count, total) in want.items():
        assert got[cell][0] == count and got[cell][1] == pytest.approx(total), cell
    assert triple.comparison.base.summary.adjacent.empty  # fused: no split collective


@pytest.mark.parametrize("layout", ["text", "db"])
def test_ordinary_matmuls_of_the_same_shapes_stay_out(tmp_path, layout):
    """With the ordinary MatMuls and the data-parallel AllReduce (docstring): the shared key
    has 5 instances per step on the base side, 24 + 5 on the new side. Its AllReduce cell
    holds 1 instance (500 µs) on the base side and 8 · 600 + 500 µs on the new side: at
    the cell's marginal time, (8 · 600 + 500 − 500) / (9 − 1) = 600 µs, MatmulAllReduce is
    exact (the new side's mean of the cell, 5300 / 9 = 588.9 µs, would not be)."""
    result = pair(tmp_path, layout, with_ordinary=True)
    groups = groups_of(result)
    for fused_type, (base_us, new_us) in TRUTH.items():
        assert groups[fused_type].base_total_us == pytest.approx(base_us)
        assert groups[fused_type].new_total_us == pytest.approx(new_us), fused_type
    ops = result.analysis.operators.set_index("key_id")
    key = shared_key(result)
    assert (ops.loc[key, "base_count"], ops.loc[key, "new_count"]) == (5, 3 * L + 5)
    assert result.analysis.fusion_claims[1][key] == pytest.approx(3 * L)  # 5 stay ordinary
    assert result.analysis.fusion_claims[0].get(key, 0.0) == 0.0


@pytest.mark.slow
@pytest.mark.parametrize("layout", ["text", "db"])
def test_two_noisy_ranks_with_overlapped_collectives(tmp_path, layout):
    """Two ranks (reduced as one stack), 3 % lognormal noise, the AllReduce and the
    ReduceScatter beside the compute stream (not exposed): each starts with the kernel
    after the MatMul that fed it. Each type's time stays within 10 %."""
    runs = []
    for label, split in (("base", False), ("new", True)):
        run = write_profile(tmp_path / "text", label, schedule(split, True, exposed=False),
                            ranks=(0, 1), steps=STEPS, noise=0.03, seed=int(split)).path
        runs.append(run if layout == "text" else as_db(run, tmp_path / "db" / label))
    groups = groups_of(diff(*runs))
    for fused_type, (base_us, new_us) in TRUTH.items():
        assert groups[fused_type].base_total_us == pytest.approx(base_us, rel=0.10)
        assert groups[fused_type].new_total_us == pytest.approx(new_us, rel=0.10), fused_type
        assert sum(groups[fused_type].adjacent_claims.values()) == pytest.approx(L)


def test_the_reverse_pair_gives_each_type_its_split_time_on_the_base_side(tmp_path):
    result = pair(tmp_path, "text", split_new=False)
    groups = groups_of(result)
    for fused_type, (fused_us, split_us) in TRUTH.items():
        assert groups[fused_type].direction == "fused"
        assert groups[fused_type].base_total_us == pytest.approx(split_us), fused_type
        assert groups[fused_type].new_total_us == pytest.approx(fused_us), fused_type


def test_level0_without_shapes_pairs_by_counts_and_still_by_adjacency(tmp_path):
    """Level0: no Type, no shapes; every MatMulV3 is one key (shapes empty), the
    ordinary gate-up MatMul included. Adjacency still gives each type its own MatMuls."""
    result = pair(tmp_path, "text", level0=True)
    groups = groups_of(result)
    assert set(groups) == set(TRUTH)
    for fused_type, (base_us, new_us) in TRUTH.items():
        assert groups[fused_type].paired_by == "counts"
        assert groups[fused_type].new_total_us == pytest.approx(new_us), fused_type


def test_without_adjacency_the_key_mean_is_used_as_before(tmp_path):
    """A run summarized without adjacency (``adjacent`` None) pairs by keys alone: every
    type gets the shared key's mean, (800 + 600 + 950) / 3 µs a MatMul."""
    import dataclasses

    from cann_diff.compare import compare
    from cann_diff.findings import analyse
    from cann_diff.match import match

    runs = [load_run(write_profile(tmp_path, label, schedule(split), steps=STEPS).path)
            for label, split in (("base", False), ("new", True))]
    base, new = (dataclasses.replace(r, summary=dataclasses.replace(r.summary, adjacent=None))
                 for r in runs)
    cmp = compare(base, new, match(base.summary.ops, new.summary.ops))
    groups = {g.fused_type: g for g in analyse(cmp).fusion}
    mean = (800.0 + 600.0 + 950.0) / 3
    comm_us = {"AllGatherMatmul": 350.0, "MatmulAllReduce": 300.0, "MatmulReduceScatter": 400.0}
    for fused_type, group in groups.items():
        assert not group.adjacent_claims
        assert group.new_total_us == pytest.approx(L * (mean + comm_us[fused_type]))


# ---------------------------------------------------------------- adjacency on crafted frames


def ops_frame(rows: list[tuple], rank: int = 0) -> pd.DataFrame:
    """Canonical rows from (step, op_type, family, category, comm_type, start µs, dur µs,
    shapes)."""
    frame = pd.DataFrame(rows, columns=["step", "op_type", "family", "category", "comm_type",
                                        "start_us", "dur_us", "input_shapes"])
    frame["rank"] = rank
    frame["start_ns"] = (frame.pop("start_us") * 1000).round().astype("int64")
    frame["op_name"] = frame["op_type_raw"] = frame["op_type"]
    frame["core"] = np.where(frame["category"] == "communication", "COMM", "AI_CORE")
    frame["input_dtypes"] = ""
    return conform_ops(frame)


def k(step, start, dur, shapes="8,8;8,8", op_type="MatMulV3", family="MatMul"):
    return (step, op_type, family, "compute", "", start, dur, shapes)


def c(step, comm_type, start, dur):
    return (step, comm_type, comm_type, "communication", comm_type, start, dur, "")


def adjacent_of(ops: pd.DataFrame, vocab=None) -> pd.DataFrame:
    adjacent = summarize(ops, None, vocab=vocab).adjacent
    return adjacent.astype({"op_type": str, "input_shapes": str, "comm_type": str})


def cells(adjacent: pd.DataFrame) -> dict:
    return {(int(r.step), r.op_type, r.input_shapes, r.comm_type): (r.count, r.total_us)
            for r in adjacent.itertuples()}


CASE = [
    # step 1: an Add between the MatMul and the AllReduce is no MatMul-like kernel: the
    # MatMul feeds it. The second MatMul's successor is a Broadcast (no split collective):
    # it is left out of the sequence, so the ReduceScatter after it is what it feeds.
    k(1, 0, 10, "1,1;1,1"), (1, "Add", "Add", "compute", "", 11, 2, ""), c(1, "AllReduce", 14, 5),
    k(1, 20, 10, "2,2;2,2"), c(1, "Broadcast", 31, 1), c(1, "ReduceScatter", 33, 5),
    # the last kernel of step 1 and the first collective of step 2 are of different steps
    k(1, 40, 10, "3,3;3,3"), c(2, "AllReduce", 52, 5),
    # step 2: AllGather → MatMul (takes it) → MatMul → AllReduce (the second one feeds it)
    c(2, "AllGather", 60, 5), k(2, 66, 10, "4,4;4,4"), k(2, 77, 10, "5,5;5,5"),
    c(2, "AllReduce", 88, 5),
    # step 2: AllGather → MatMul → ReduceScatter, one MatMul between: the nearer collective.
    # Gap to the ReduceScatter 3 µs, from the AllGather 1 µs: it takes the AllGather.
    c(2, "AllGather", 100, 5), k(2, 106, 10, "6,6;6,6"), c(2, "ReduceScatter", 119, 5),
    # equal gaps (2 µs each): the one after
    c(2, "AllGather", 130, 5), k(2, 137, 10, "7,7;7,7"), c(2, "ReduceScatter", 149, 5),
    # an AllReduce that starts with the next MatMul (launched beside it): the MatMul before
    # feeds it; the MatMul that starts with it takes no AllReduce
    k(2, 160, 10, "8,8;8,8"), k(2, 171, 10, "9,9;9,9"), c(2, "AllReduce", 171, 5),
]
CASE_CELLS = {(1, "MatMulV3", "1,1;1,1", "AllReduce"): (1, 10.0),
              (1, "MatMulV3", "2,2;2,2", "ReduceScatter"): (1, 10.0),
              (2, "MatMulV3", "4,4;4,4", "AllGather"): (1, 10.0),
              (2, "MatMulV3", "5,5;5,5", "AllReduce"): (1, 10.0),
              (2, "MatMulV3", "6,6;6,6", "AllGather"): (1, 10.0),
              (2, "MatMulV3", "7,7;7,7", "ReduceScatter"): (1, 10.0),
              (2, "MatMulV3", "8,8;8,8", "AllReduce"): (1, 10.0)}


def test_neighbours_worked_by_hand():
    assert cells(adjacent_of(ops_frame(CASE))) == CASE_CELLS


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rows_in_any_order_give_the_same_neighbours(seed):
    """A db's collectives come after its kernels; whatever the row order, the same cells."""
    shuffled = ops_frame(CASE).sample(frac=1.0, random_state=seed).reset_index(drop=True)
    assert cells(adjacent_of(shuffled)) == CASE_CELLS


def test_counts_and_times_add_up_per_rank_and_step():
    """Two ranks, the same MatMul feeding an AllReduce twice a step: one row per (rank,
    step) with count 2 and both durations."""
    one = [k(1, 0, 10), c(1, "AllReduce", 11, 5), k(1, 20, 12), c(1, "AllReduce", 33, 5)]
    frame = pd.concat([ops_frame(one, 0), ops_frame(one, 1)], ignore_index=True)
    assert cells(adjacent_of(frame)) == {(1, "MatMulV3", "8,8;8,8", "AllReduce"): (2, 22.0)}
    assert list(adjacent_of(frame)["rank"]) == [0, 1]


def test_the_vocabulary_names_the_split_compute_families():
    """A user's fusion map with a Conv2D + AllReduce fused type makes Conv2D a split
    compute kernel; the package's own table does not."""
    rows = [k(1, 0, 10, "1,1", "Conv2D", "Conv2D"), c(1, "AllReduce", 11, 5)]
    assert adjacent_of(ops_frame(rows)).empty
    vocab = Vocabulary.build({"ConvAllReduce": {"split": ["Conv2D", "AllReduce"],
                                                "compute": ["Conv2D"], "comm": ["AllReduce"]}})
    assert cells(adjacent_of(ops_frame(rows), vocab)) == {
        (1, "Conv2D", "1,1", "AllReduce"): (1, 10.0)}


def test_adjacent_kernels_needs_a_kernel_and_a_collective():
    only_kernels = ops_frame([k(1, 0, 10), k(1, 20, 10)])
    assert adjacent_of(only_kernels).empty
    assert summarize(only_kernels.iloc[:0], None).adjacent.empty


# ---------------------------------------------------------------- stacks, combine, steps


def stack_schedule(rank: int, step: int) -> list:
    """Ranks with their own MatMul shapes and collectives, small enough to be stacked."""
    rows = f"{8 * (rank + 1)},8;8,8"
    ops = [aclnn("MatMulV3", 10.0 + rank, rows), Comm("allReduce", 5.0 + step)]
    if rank % 2:
        ops = [Comm("allGather", 4.0), aclnn("MatMulV3", 7.0, rows), *ops]
    return ops


@pytest.fixture(scope="module")
def small_ranks(tmp_path_factory):
    root = tmp_path_factory.mktemp("stacked")
    path = write_profile(root, "run", stack_schedule, ranks=range(4), steps=STEPS).path
    return sorted(p for p in path.iterdir() if p.is_dir())


def text(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.astype({c: str for c in ("op_type", "input_shapes", "comm_type")})


def test_a_stack_gives_each_rank_the_adjacency_it_gets_alone(small_ranks):
    plan = RankPlan(keep_rows=False)
    alone = [reduce_kernels(torch_text.read_rank(p), plan) for p in small_ranks]
    stacked = reduce_ranks([torch_text.read_rank(p) for p in small_ranks], plan)
    assert all(r.share is not None for r in stacked)
    for one, other in zip(alone, stacked):
        pd.testing.assert_frame_equal(text(summary_of(one).adjacent),
                                      text(summary_of(other).adjacent))
    # Rank 1 by hand, per step: a MatMul takes the AllGather (7 µs), one feeds the
    # AllReduce (11 µs).
    got = cells(text(summary_of(stacked[1]).adjacent))
    assert got == {key: value for step in STEPS for key, value in (
        ((step, "MatMulV3", "16,8;8,8", "AllGather"), (1, 7.0)),
        ((step, "MatMulV3", "16,8;8,8", "AllReduce"), (1, 11.0)))}


def test_combine_gives_each_row_its_rank_and_select_keeps_chosen_steps(small_ranks):
    datas = reduce_ranks([torch_text.read_rank(p) for p in small_ranks],
                         RankPlan(keep_rows=False))
    ids = [10, 11, 12, 13]
    shares = combine([(i, d.share) for i, d in zip(ids, datas)], DEFAULT_LIMITS.sample_budget)
    owns = combine([(i, summary_of(d)) for i, d in zip(ids, datas)],
                   DEFAULT_LIMITS.sample_budget)
    pd.testing.assert_frame_equal(text(shares.adjacent), text(owns.adjacent))
    # Per step: ranks 0 and 2 one AllReduce cell, ranks 1 and 3 also an AllGather cell.
    assert shares.adjacent.groupby("rank").size().to_dict() == {10: 3, 11: 6, 12: 3, 13: 6}
    run = load_run(small_ranks[0].parent, steps=[(2, 3)])
    assert set(run.summary.adjacent["step"]) == {2, 3}
    assert len(run.summary.adjacent) == 2 * (1 + 2 + 1 + 2)


def test_select_steps_and_ranks_without_step_ids_keep_adjacency_of_kept_steps(tmp_path):
    """``select_steps`` keeps the adjacency of the chosen steps; a rank whose kernels carry
    no step id beside ranks that do is left out whole, its adjacency with it."""
    path = write_profile(tmp_path, "run", stack_schedule, ranks=range(4), steps=STEPS).path
    rank3 = sorted(p for p in path.iterdir() if p.is_dir())[3]
    kernels = rank3 / torch_text.OUTPUT_DIR / torch_text.KERNELS
    with open(kernels, newline="") as handle:
        lines = list(csv.reader(handle))
    for line in lines[1:]:
        line[0] = ""
    with open(kernels, "w", newline="") as handle:
        csv.writer(handle, lineterminator="\r\n").writerows(lines)
    run = load_run(path)
    # Per step: ranks 0 and 2 one AllReduce cell, rank 1 also an AllGather cell; rank 3 out.
    assert run.summary.adjacent.groupby("rank").size().to_dict() == {0: 3, 1: 6, 2: 3}
    chosen = select_steps(run, [(2, 2)])
    assert set(chosen.summary.adjacent["step"]) == {2}
    assert cells(text(chosen.summary.adjacent[chosen.summary.adjacent["rank"] == 1])) == {
        (2, "MatMulV3", "16,8;8,8", "AllGather"): (1, 7.0),
        (2, "MatMulV3", "16,8;8,8", "AllReduce"): (1, 11.0)}


def test_a_summary_without_adjacency_combines_to_none(small_ranks):
    import dataclasses

    datas = reduce_ranks([torch_text.read_rank(p) for p in small_ranks[:2]],
                         RankPlan(keep_rows=False))
    own = summary_of(datas[0])
    bare = dataclasses.replace(summary_of(datas[1]), adjacent=None)
    assert combine([(0, own), (1, bare)], DEFAULT_LIMITS.sample_budget).adjacent is None


# ---------------------------------------------------------------- real profiles

MSI = REALDATA / "Ascend__msinsight/test/data/pytorch"
needs_msi = pytest.mark.skipif(not MSI.is_dir(), reason="../shared/realdata (MindStudio "
                                                        "Insight text/db twins) not present")
SPLIT_FAMILIES = r"^(MatMul|BatchMatMul|GroupedMatmul)(V\d+)?$"
NEIGHBOURS = {"allreduce": "after", "reducescatter": "after", "allgather": "before",
              "alltoallv": "before"}


def by_hand(kernel_details: Path) -> dict:
    """The cells of one real rank, read with pandas alone: the rows sorted by start, kept
    when a MatMul-like compute Type or a hcom row of a split collective; a MatMul right
    before an AllReduce/ReduceScatter, or right after an AllGather, of the same step."""
    raw = pd.read_csv(kernel_details, dtype=str)
    raw["start"] = raw["Start Time(us)"].str.strip().astype(float)
    kind = raw["Name"].str.lower().str.extract(r"^hcom_([a-z]+)_", expand=False).map(NEIGHBOURS)
    kernel = raw["Type"].fillna("").str.match(SPLIT_FAMILIES) & \
        ~raw["Accelerator Core"].isin(["HCCL", "COMMUNICATION", "AI_CPU"])
    seq = raw[kernel | kind.notna()].assign(kind=kind.where(kind.notna(), "kernel"))
    seq = seq.sort_values(["start", "kind"], kind="stable").reset_index(drop=True)
    found = {}
    for i in range(len(seq) - 1):
        here, there = seq.iloc[i], seq.iloc[i + 1]
        if here["Step Id"] != there["Step Id"]:
            continue
        for kernel_row, comm_row, wanted in ((here, there, "after"), (there, here, "before")):
            if kernel_row["kind"] == "kernel" and comm_row["kind"] == wanted:
                comm = {"allreduce": "AllReduce", "reducescatter": "ReduceScatter",
                        "allgather": "AllGather", "alltoallv": "AllToAllV"}[
                    comm_row["Name"].lower().split("_")[1]]
                cell = (int(kernel_row["Step Id"]), kernel_row["Type"],
                        kernel_row["Input Shapes"].replace('"', "").replace(" ", ""), comm)
                count, total = found.get(cell, (0, 0.0))
                found[cell] = (count + 1, total + float(kernel_row["Duration(us)"]))
    return found


@pytest.mark.slow
@needs_msi
@pytest.mark.parametrize("level", ["level1", "level2"])
def test_real_ranks_text_and_db_twins_by_hand(level):
    """The real 2-rank job (no MC2 kernel in it): the MatMuls its data-parallel AllReduces
    follow, as pandas finds them in kernel_details.csv; the db twin names the same, with
    its own durations (TASK end − start: within 5 % of kernel_details.csv's here)."""
    text_run, db_run = load_run(MSI / "text" / level), load_run(MSI / "db" / level)
    for rank in (0, 1):
        kernels = MSI / "text" / level / f"rank{rank}_ascend_pt/ASCEND_PROFILER_OUTPUT" \
                                         "/kernel_details.csv"
        want = by_hand(kernels)
        assert want  # each rank has MatMuls right before an AllReduce
        for run, rel in ((text_run, 1e-9), (db_run, 0.05)):
            adjacent = text(run.summary.adjacent)
            got = cells(adjacent[adjacent["rank"] == rank])
            assert got.keys() == want.keys()
            for cell, (count, total) in want.items():
                assert got[cell][0] == count, cell
                assert got[cell][1] == pytest.approx(total, rel=rel), cell


@pytest.mark.slow
@needs_msi
def test_real_pair_has_no_mc2_group():
    result = diff(REALDATA / "Ascend__msinsight@c1e639ee2/test/data/pytorch/text/level1",
                  MSI / "text" / "level1")
    assert result.analysis.fusion == ()
