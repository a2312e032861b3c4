"""Per-rank reduction: summaries are exact where they add up, and bounded where they sample.

The driver never holds every rank's rows: each rank is reduced, in the worker that read it,
to a RunSummary (kernels, communication) and a MemorySummary (memory samples). These tests
check the summaries against the rows they came from (real exports and crafted runs), the
order-statistic sample by hand, and that a run whose durations were sampled gives the same
counts, totals and verdicts as the exact one.
"""

from __future__ import annotations

import csv

import numpy as np
import pandas as pd
import pytest
from conftest import DATA
from profiles import Comm, aclnn, memory_report, write_profile

from cann_diff.errors import InputError
from cann_diff.match import match
from cann_diff.pipeline import Options, diff
from cann_diff.read import FORMATS, RankPlan, RankSource, load_run, read_memory, select_steps
from cann_diff.read import read_and_reduce as read_and_reduce_rank
from cann_diff.read.formats import torch_text
from cann_diff.read.reduce import summary as reduce
from cann_diff.read.reduce.ranks import summary_of
from cann_diff.read.reduce.timeline import exposed_communication_us
from cann_diff.schema import MAX_POINTS
from cann_diff.settings import Limits

LEVEL1 = DATA / "realdata" / "Ascend__msinsight" / "test" / "data" / "pytorch" / "text" / "level1"
RANKS = tuple(range(4))


def test_quantile_sample_by_hand():
    # Row 0 holds 1..10 (shuffled) and keeps 5: Hazen positions (i + ½)·10/5 − ½ = 2i + ½
    # of the sorted values, i.e. halfway between 2i+1 and 2i+2 → 1.5, 3.5, 5.5, 7.5, 9.5
    # (their mean is the row's mean, 5.5). Row 1 keeps both of its 2 values exactly.
    values = np.array([7, 3, 10, 1, 5, 2, 9, 4, 8, 6, 30, 20], dtype=float)
    row = np.array([0] * 10 + [1] * 2)
    rows, picked = reduce.quantile_sample(row, values, np.array([5, 2]))
    assert list(rows) == [0, 0, 0, 0, 0, 1, 1]
    assert list(picked) == [1.5, 3.5, 5.5, 7.5, 9.5, 20.0, 30.0]


def test_sample_fraction_by_hand():
    counts = np.array([10, 2])
    # Budget 6: 10·f rounds to 5 and 2·f to 1 up to f = 0.55 (5.5 rounds to even 6).
    fraction = reduce.sample_fraction(counts, 6)
    assert fraction == pytest.approx(0.55, abs=1e-6)
    assert list(reduce.kept_per_row(counts, fraction)) == [5, 1]
    assert reduce.sample_fraction(counts, 12) == 1.0  # everything fits: nothing sampled
    # Fewer places than rows: one per row, the sample never outgrows the summary.
    assert reduce.sample_fraction(np.array([10, 2, 7]), 3) == 0.0
    assert list(reduce.kept_per_row(np.array([10, 2, 7]), 0.0)) == [1, 1, 1]


def test_summary_of_real_export_adds_up_to_its_rows():
    run = load_run(LEVEL1)
    ops, summary = run.ops, run.summary
    assert summary.kernels == len(ops)
    assert summary.sample_size == len(ops) and not summary.sampled
    by_type = summary.ops.groupby(summary.ops["op_type"].astype(str))
    rows_by_type = ops.groupby(ops["op_type"].astype(str))
    assert by_type["count"].sum().to_dict() == rows_by_type.size().to_dict()
    assert by_type["total_us"].sum().to_dict() == pytest.approx(
        rows_by_type["dur_us"].sum().to_dict())
    exposed = exposed_communication_us(ops)
    assert summary.ops["exposed_us"].sum() == pytest.approx(exposed.sum())
    assert exposed.sum() > 0  # the export has exposed hcom ops, so this compares something
    # Every sample points at a summary row of the same operator and keeps its duration.
    samples = summary.samples.join(summary.ops[["op_type"]], on="row")
    assert sorted(samples["dur_us"]) == sorted(ops["dur_us"])
    assert samples.groupby(samples["op_type"].astype(str)).size().to_dict() == \
        rows_by_type.size().to_dict()


def test_summary_of_communication_json_adds_up(tmp_path):
    built = write_profile(tmp_path, "run", [aclnn("MatMulV3", 100.0, "8,8;8,8"),
                                            Comm("allReduce", 50.0), Comm("allGather", 20.0)],
                          ranks=(0, 1))
    run = load_run(built.path)
    comm, summary = run.comm, run.summary.comm
    assert summary["ops"].sum() == len(comm)
    for column in ("elapse_us", "transit_us", "wait_us"):
        assert summary[column].sum() == pytest.approx(comm[column].sum())
    per_rank = summary.groupby("rank")["ops"].sum()
    assert per_rank.to_dict() == comm.groupby("rank").size().to_dict()


def test_rows_stay_in_the_worker(tmp_path):
    built = write_profile(tmp_path, "run", [aclnn("MatMulV3", 100.0, "8,8;8,8"),
                                            Comm("allReduce", 50.0)])
    rank_dir = next(built.path.iterdir())
    text = next(f for f in FORMATS if f.name == torch_text.FORMAT)
    data = read_and_reduce_rank(RankPlan(max_samples=1000, keep_rows=False),
                                RankSource(rank_dir, text))
    assert data.ops is None and data.comm is None  # only the summary leaves the worker
    assert data.memory is not None and data.memory.raw is None  # memory: summary only
    assert data.has_comm and summary_of(data).kernels == 6  # 2 ops × 3 steps
    run = load_run(built.path, keep_rows=False)
    assert run.ops is None and run.comm is None
    assert run.summary.kernels == 6


def test_select_steps_on_summary_matches_rows(tmp_path):
    schedule = [aclnn("MatMulV3", 100.0, "8,8;8,8"), aclnn("Add", 5.0, "8,8"),
                Comm("allReduce", 50.0)]
    built = write_profile(tmp_path, "run", schedule, ranks=(0, 1), steps=(1, 2, 3, 4),
                          noise=0.2, seed=5)
    run = select_steps(load_run(built.path), [(2, 3)])
    rows, summary = run.ops, run.summary
    assert set(summary.ops["step"]) == {2, 3} == set(rows["step"])
    assert summary.kernels == len(rows)
    assert sorted(summary.samples["dur_us"]) == sorted(rows["dur_us"])
    kept = summary.samples.join(summary.ops[["step"]], on="row")
    assert set(kept["step"]) == {2, 3}
    assert set(summary.comm["step"]) == {2, 3}


def test_steps_are_chosen_before_durations_are_sampled(tmp_path, monkeypatch):
    schedule = [aclnn("MatMulV3", 100.0, "8,8;8,8")] * 50
    built = write_profile(tmp_path, "run", schedule, steps=tuple(range(1, 11)), noise=0.1)
    small = Limits(sample_budget=100)
    assert load_run(built.path, keep_rows=False, limits=small).summary.sampled  # 500 > 100
    one_step = load_run(built.path, keep_rows=False, steps=[(2, 2)])
    assert not one_step.summary.sampled and one_step.summary.sample_size == 50
    assert set(one_step.steps["step"]) == {2}
    with pytest.raises(InputError, match=r"selects no step .*\[1, 2, 3"):
        load_run(built.path, keep_rows=False, steps=[(20, None)])


def _blank_step_ids(rank_dir):
    kernels = rank_dir / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    with open(kernels, newline="") as handle:
        rows = list(csv.reader(handle))
    column = rows[0].index("Step Id")
    for line in rows[1:]:
        line[column] = ""
    with open(kernels, "w", newline="") as handle:
        csv.writer(handle, lineterminator="\r\n").writerows(rows)


@pytest.mark.slow
def test_a_rank_without_step_ids_is_left_out_like_rows_outside_steps(tmp_path):
    schedule = [aclnn("MatMulV3", 100.0, "8,8;8,8"), Comm("allReduce", 50.0)]
    built = write_profile(tmp_path, "run", schedule, ranks=(0, 1, 2), steps=(1, 2, 3, 4))
    _blank_step_ids(next(p for p in built.path.iterdir() if "4000" in p.name))
    run = load_run(built.path, keep_rows=False)
    assert any(w.text.startswith("8 kernel(s) fall outside") for w in run.warnings)  # 2 × 4
    assert set(run.summary.ops["rank"]) == {1, 2} and run.summary.kernels == 16
    operators = diff(built.path, built.path).comparison.operators.set_index("op_type")
    assert operators.loc["MatMulV3", "base_count"] == 1.0  # per (rank, step): 8 units, not 9


def test_mixed_step_sources_warn(tmp_path):
    schedule = [aclnn("MatMulV3", 100.0, "8,8;8,8"), Comm("allReduce", 50.0)]
    built = write_profile(tmp_path, "run", schedule, ranks=(0, 1))
    missing = next(p for p in built.path.iterdir() if "4001" in p.name)
    (missing / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv").unlink()
    run = load_run(built.path)
    assert run.step_source == "mixed"
    assert any("rank(s) 1" in w.text for w in run.warnings)
    assert sorted(run.steps["rank"].unique()) == [0, 1]  # rank 1 from its kernels


def _schedule(rank, step):
    ops = [aclnn("MatMulV3", 100.0 * (1.3 if step > 0 else 1.0), "64,64;64,64")
           for _ in range(20)]
    return ops + [aclnn("Add", 4.0, "64,64") for _ in range(30)] + [Comm("allReduce", 30.0)]


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("sampled")
    base = write_profile(root, "base", lambda r, s: _schedule(r, 0), ranks=RANKS,
                         noise=0.1, seed=1)
    new = write_profile(root, "new", _schedule, ranks=RANKS, noise=0.1, seed=2)
    return base, new


@pytest.mark.slow
def test_sampled_durations_give_the_same_verdicts(pair, monkeypatch):
    exact = diff(*pair)
    sampled = diff(*pair, Options(limits=Limits(sample_budget=400)))
    summary = sampled.comparison.base.summary
    # 4 ranks × 3 steps × 51 kernels = 612, brought down to at most 400.
    assert summary.sampled and summary.kernels == 612
    assert 380 <= summary.sample_size <= 400
    columns = ["key_id", "base_instances", "new_instances", "base_total_us", "new_total_us",
               "base_count_min", "new_count_max", "status"]
    pd.testing.assert_frame_equal(exact.comparison.operators[columns],
                                  sampled.comparison.operators[columns])
    for column in ("new_median_us", "new_p95_us"):
        medians = sampled.comparison.operators.set_index("op_type")[column]
        exact_medians = exact.comparison.operators.set_index("op_type")[column]
        assert medians["MatMulV3"] == pytest.approx(exact_medians["MatMulV3"], rel=0.03)
    assert exact.report.headline == sampled.report.headline
    assert any("evenly spaced quantiles" in w for w in sampled.report.warnings)
    assert not any("evenly spaced quantiles" in w for w in exact.report.warnings)


def test_sample_size_is_bounded_by_the_budget(pair, monkeypatch):
    run = load_run(pair[1].path, keep_rows=False, limits=Limits(sample_budget=200))
    assert run.summary.sample_size <= 200 < run.summary.kernels
    assert run.summary.sampled and 0 < run.summary.fraction < 1


def test_unequal_ranks_keep_the_same_share(tmp_path, monkeypatch):
    # Rank 0 runs 400 extra Adds per step, so it alone exceeds its share of the budget.
    # Its MatMuls (100 µs) must not be thinned harder than rank 1's (130 µs): pooled, the
    # MatMul median stays where the exact one is.
    def schedule(rank, step):
        ops = [aclnn("MatMulV3", 100.0 if rank == 0 else 130.0, "64,64;64,64")] * 40
        return ops + ([aclnn("Add", 4.0, "64,64")] * 400 if rank == 0 else [])
    built = write_profile(tmp_path, "run", schedule, ranks=(0, 1), noise=0.05, seed=4)
    exact = load_run(built.path)
    # 2 × 600 / 2 = 600 per rank
    sampled = load_run(built.path, keep_rows=False, limits=Limits(sample_budget=600))
    kept = sampled.summary.samples.join(sampled.summary.ops[["rank", "op_type"]], on="row")
    per_rank = kept[kept["op_type"] == "MatMulV3"].groupby("rank").size()
    assert per_rank[0] == per_rank[1] > 0
    matmul = exact.ops[exact.ops["op_type"] == "MatMulV3"]["dur_us"]
    sampled_matmul = kept.loc[kept["op_type"] == "MatMulV3", "dur_us"]
    assert sampled_matmul.median() == pytest.approx(matmul.median(), rel=0.02)


def test_jobs_and_library_rows_do_not_change_the_summary(pair):
    one = load_run(pair[0].path, jobs=1, keep_rows=True)
    two = load_run(pair[0].path, jobs=2, keep_rows=False)
    pd.testing.assert_frame_equal(one.summary.ops, two.summary.ops)
    pd.testing.assert_frame_equal(one.summary.samples, two.summary.samples)
    pd.testing.assert_frame_equal(one.summary.comm, two.summary.comm)
    assert one.steps.equals(two.steps)


@pytest.mark.slow
def test_diff_keeps_no_rows(pair):
    result = diff(*pair, Options(jobs=2))
    assert result.comparison.base.ops is None and result.comparison.new.ops is None


# --------------------------------------------------------------------------- memory

MEMORY = DATA / "memory"


@pytest.mark.parametrize("path", [MEMORY, MEMORY / "test_rank_0"], ids=["two ranks", "one"])
def test_memory_summary_adds_up_to_raw_rows(path):
    data = read_memory(path)
    summary = data.summary
    peaks = data.records.groupby(["rank", "component"])[["allocated_mb", "reserved_mb"]].max()
    got = summary.peaks.set_index(["rank", "component"]).sort_index()
    pd.testing.assert_frame_equal(got, peaks.sort_index(), check_dtype=False)
    by_name = data.operators.groupby(["rank", "name"])["size_mb"]
    operators = summary.operators.set_index(["rank", "name"]).sort_index()
    assert operators["count"].to_dict() == by_name.size().astype(float).to_dict()
    assert operators["total_mb"].to_dict() == pytest.approx(by_name.sum().to_dict())
    assert operators["largest_mb"].to_dict() == by_name.max().to_dict()
    modules = summary.modules.set_index(["rank", "component"])["reserved_mb"]
    assert modules.to_dict() == data.modules.groupby(["rank", "component"])["reserved_mb"] \
        .max().to_dict()
    assert len(summary.timelines) == data.records["reserved_mb"].notna().sum()  # < MAX_POINTS


def test_memory_without_rows_compares_the_same(tmp_path):
    base = read_memory(MEMORY / "test_rank_1", keep_rows=False)
    new = read_memory(MEMORY / "test_rank_0", keep_rows=False, jobs=2)
    assert base.records is None and base.operators is None and new.modules is None
    with_rows = memory_report(read_memory(MEMORY / "test_rank_1"),
                               read_memory(MEMORY / "test_rank_0"))
    assert memory_report(base, new).to_dict() == with_rows.to_dict()
    assert with_rows.peak_reserved is not None  # the pair has a peak to compare


def test_memory_timeline_thinned_in_the_worker(tmp_path):
    # 3 ranks × 5000 APP samples: each rank keeps at most MAX_POINTS, its peak included.
    for rank in range(3):
        lines = ["Component,Timestamp(us),Total Allocated(MB),Total Reserved(MB),"
                 "Total Active(MB),Stream Ptr,Device Type"]
        lines += [f"APP,{1_736_410_576_000_000 + i * 10},,"
                  f"{1000 + (100 * (rank + 1) if i == 777 * (rank + 1) else i % 5)},,,NPU:{rank}"
                  for i in range(5000)]
        out = tmp_path / f"r{rank}_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
        out.mkdir(parents=True)
        (out / "memory_record.csv").write_text("\n".join(lines) + "\n")
        (out.parent / f"profiler_info_{rank}.json").write_text("{}")
    data = read_memory(tmp_path, jobs=2, keep_rows=False)
    per_rank = data.summary.timelines.groupby("rank")
    assert per_rank.size().max() <= MAX_POINTS
    assert per_rank["reserved_mb"].max().to_dict() == {0: 1100.0, 1: 1200.0, 2: 1300.0}
    result = memory_report(data, data)
    assert result.peak_reserved.base_rank == 2 and result.base_timeline.rank == 2
    assert max(result.base_timeline.reserved_mb) == 1300.0


def test_a_group_is_filed_where_most_of_its_kernels_ran():
    # Summary rows sorted by rank first: the one AI_CPU instance on rank 0 comes before
    # the ten AI_CORE ones on rank 1, but the group is compute.
    rows = pd.DataFrame({"rank": [0, 1], "step": [1, 1], "op_type": ["Cast", "Cast"],
                         "input_shapes": ["8,8", "8,8"], "family": ["Cast", "Cast"],
                         "category": ["aicpu", "compute"], "count": [1, 10]})
    keys = match(rows, rows).keys
    assert keys["category"].tolist() == ["compute"]


def test_communication_sums_add_each_groups_values_in_row_order():
    """A group's sums are its own values added in row order, whatever stands beside it.

    pandas' grouped sum gave a group of a stack other last bits than the same group alone;
    the sums here are checked against Python's left-to-right ``sum`` of each group.
    """
    rng = np.random.default_rng(7)
    n = 400
    frame = pd.DataFrame({
        "rank": rng.integers(0, 20, n), "step": pd.array(rng.integers(1, 4, n), dtype="Int64"),
        "op_name": "hcom_allReduce__1_1_1", "comm_type": "AllReduce",
        "group": rng.choice(["g1", "g2"], n),
        "wait_us": rng.integers(1, 10**6, n) / 1000, "transit_us": rng.random(n) * 1e3})
    summary = reduce.summarize_comm(frame)
    for row in summary.itertuples():
        mine = frame[(frame["rank"] == row.rank) & (frame["step"] == row.step)
                     & (frame["group"] == row.group)]
        assert row.ops == len(mine)
        assert row.wait_us == sum(mine["wait_us"].tolist())
        assert row.transit_us == sum(mine["transit_us"].tolist())
    assert summary["ops"].sum() == n
