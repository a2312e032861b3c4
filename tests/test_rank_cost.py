"""Many ranks: every way of reading them (in order, worker processes) gives one answer.

The per-rank work is memoized per process and done on codes instead of groupbys
(``vocab/names.py``, ``read/reduce.py``); the ranks of an input are read in worker
processes with ``jobs`` ≥ 2 when the planner's cost model says it pays (``read/execute.py``;
``SPREAD`` says it always does). Timings belong in benchmarks/; these
tests check that the answers stay the same and add up to what was written.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pandas.api.types import union_categoricals
from profiles import Comm, aclnn, write_profile

import cann_diff.read as read
from cann_diff import costs, pipeline
from cann_diff.errors import InputError
from cann_diff.read.frames import concat_frames, cut_rows
from cann_diff.read.reduce.summary import group_ids
from cann_diff.settings import Limits
from cann_diff.vocab import default_vocabulary
from cann_diff.vocab import names as canonical

RANKS = range(6)
STEPS = (1, 2)
SPREAD = Limits(rank_pool_min_s=-1.0)  # any saving pays for a pool: these ranks are tiny


def _schedule(rank: int, step: int):
    """Per step: two MatMuls of 10 + rank µs, one Add of 3 µs, one exposed AllReduce of 20."""
    return [aclnn("MatMulV3", 10.0 + rank, "16,16;16,16"), aclnn("Add", 3.0, "16,16;16,16"),
            aclnn("MatMulV3", 10.0 + rank, "16,16;16,16"), Comm("allReduce", 20.0)]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("ranks")
    return write_profile(root, "base", _schedule, ranks=RANKS, steps=STEPS).path


def _totals(run) -> dict[tuple[int, str], tuple[int, float, float]]:
    ops = run.summary.ops.assign(op_type=run.summary.ops["op_type"].astype(str))
    grouped = ops.groupby(["rank", "op_type"])[["count", "total_us", "exposed_us"]].sum()
    return {key: (int(row["count"]), round(row["total_us"], 6), round(row["exposed_us"], 6))
            for key, row in grouped.iterrows()}


def test_many_ranks_add_up_to_what_was_written(cluster):
    run = read.load_run(cluster, keep_rows=False)
    assert run.meta.ranks == tuple(RANKS)
    totals = _totals(run)
    for rank in RANKS:
        # 2 steps × 2 MatMuls of (10 + rank) µs; 2 Adds of 3 µs; 2 AllReduces of 20 µs,
        # exposed whole (the compute stream waits for them).
        assert totals[(rank, "MatMulV3")] == (4, 4 * (10.0 + rank), 0.0)
        assert totals[(rank, "Add")] == (2, 6.0, 0.0)
        assert totals[(rank, "AllReduce")] == (2, 40.0, 40.0)
    assert run.summary.kernels == len(RANKS) * len(STEPS) * 4
    assert run.summary.ops["total_us"].sum() == pytest.approx(
        sum(2 * (2 * (10 + r) + 3 + 20) for r in RANKS))
    comm = run.summary.comm
    assert comm["ops"].sum() == len(RANKS) * len(STEPS)
    assert sorted(comm["rank"].unique()) == list(RANKS)


def _same_run(a, b) -> None:
    for name in ("ops", "samples", "comm"):
        pd.testing.assert_frame_equal(getattr(a.summary, name), getattr(b.summary, name),
                                      check_exact=True)
    pd.testing.assert_frame_equal(a.steps, b.steps, check_exact=True)
    assert (a.summary.sampled, a.summary.fraction) == (b.summary.sampled, b.summary.fraction)
    assert a.warnings == b.warnings and a.meta == b.meta
    for name in ("peaks", "timelines", "operators", "modules", "hbm"):
        pd.testing.assert_frame_equal(getattr(a.memory.summary, name),
                                      getattr(b.memory.summary, name), check_exact=True)
    for column in a.summary.ops.select_dtypes("category"):
        assert list(a.summary.ops[column].cat.categories) == \
            list(b.summary.ops[column].cat.categories)


@pytest.mark.slow
def test_in_order_and_processes_read_the_same(cluster):
    in_order = read.load_run(cluster, keep_rows=False, jobs=1)
    here = read.load_run(cluster, keep_rows=False, jobs=2)  # too small to spread: here
    processes = read.load_run(cluster, keep_rows=False, jobs=2, limits=SPREAD)
    _same_run(in_order, here)
    _same_run(in_order, processes)
    assert _totals(processes)[(5, "MatMulV3")] == (4, 60.0, 0.0)


@pytest.mark.slow
def test_rows_kept_through_worker_processes(cluster):
    """keep_rows: the canonical rows travel back from the workers, each under its rank."""
    run = read.load_run(cluster, keep_rows=True, jobs=2, limits=SPREAD)
    mm = run.ops[run.ops["op_type"] == "MatMulV3"]
    assert mm.groupby("rank")["dur_us"].sum().to_dict() == {r: 4 * (10.0 + r) for r in RANKS}
    pd.testing.assert_frame_equal(run.ops, read.load_run(cluster, jobs=1).ops, check_exact=True)


def test_a_bad_rank_in_a_worker_is_one_error_as_in_order(cluster, tmp_path):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(cluster, bad)
    victim = sorted(bad.iterdir())[3] / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    victim.write_text(victim.read_text().splitlines()[0] + "\n")  # header only
    with pytest.raises(InputError) as in_order:
        read.load_run(bad, jobs=1)
    with pytest.raises(InputError) as spread:
        read.load_run(bad, jobs=2, limits=SPREAD)
    assert str(spread.value) == str(in_order.value)
    assert "no kernel rows (header only)" in str(spread.value)


@pytest.mark.slow
def test_report_the_same_with_one_job_two_or_four(tmp_path, monkeypatch):
    """Four jobs: each side in a process, its 32 ranks spread over two more (nested pools)."""
    many = range(32)
    base = write_profile(tmp_path, "base", _schedule, ranks=many, steps=STEPS).path
    new = write_profile(tmp_path, "new", lambda r, s: _schedule(r, s)[:3], ranks=many,
                        steps=STEPS).path
    alone = pipeline.diff(base, new, pipeline.Options(jobs=1)).report.to_dict()
    for jobs in (2, 4):
        options = pipeline.Options(jobs=jobs, limits=SPREAD)
        assert pipeline.diff(base, new, options).report.to_dict() == alone
    monkeypatch.setattr(costs, "SIDE_PROCESS_MIN_S", 0)  # small sides: processes the same
    assert pipeline.diff(base, new, pipeline.Options(jobs=4, limits=SPREAD)
                         ).report.to_dict() == alone


def test_a_rank_after_the_first_derives_no_name(cluster, monkeypatch):
    """Ranks of one job share their kernels: the names are derived for the first only."""
    calls = []
    derive = canonical._derive_names

    def counting(names, *args):
        calls.append(len(names))
        return derive(names, *args)

    canonical._KNOWN_NAMES.clear()
    monkeypatch.setattr(canonical, "_derive_names", counting)
    first = read.load_run(cluster, keep_rows=False)
    derived = sum(calls)
    assert derived > 0
    calls.clear()
    again = read.load_run(cluster, keep_rows=False)
    assert sum(calls) == 0
    _same_run(first, again)


def test_memoized_names_equal_the_rules():
    names = pd.Series(["aclnnMatmul_MatMulV3Common_MatMulV3", "hcom_allReduce__586_0_1",
                       "ReduceSum7", "MatmulAllReduce", "memcpy_h2d", ""])
    types = pd.Series(["MatMulV3", "N/A", "N/A", "MatmulAllReduce", "MEMCPY_ASYNC", "N/A"])
    cores = pd.Series(["AI_CORE", "HCCL", "AI_CORE", "MIX_AIC", "AI_CPU", "N/A"])
    canonical._KNOWN_NAMES.clear()
    rules = canonical._derive_names(names, types, cores, default_vocabulary())
    cold = canonical.canonical_names(names, types, cores)
    warm = canonical.canonical_names(names[::-1], types[::-1], cores[::-1])
    pd.testing.assert_frame_equal(cold, rules, check_exact=True)
    pd.testing.assert_frame_equal(warm, rules[::-1], check_exact=True)
    assert list(cold["op_type"]) == ["MatMulV3", "AllReduce", "ReduceSum", "MatmulAllReduce",
                                     "MEMCPY_ASYNC", ""]


def test_group_ids_number_groups_as_a_sorted_groupby():
    rng = np.random.default_rng(7)
    for n in [0, 5000, *rng.integers(1, 80, 50)]:  # none, many, a rank's few
        n = int(n)
        labels = ["b", "a", "c", "zz"]
        frame = pd.DataFrame({
            "rank": rng.integers(0, 3, n),
            "step": pd.array([None if x < 0 else int(x) for x in rng.integers(-1, 4, n)],
                             dtype="Int64"),
            "kind": pd.Categorical(rng.choice([*labels, None], n),
                                   categories=list(rng.permutation(labels))),
            "group": pd.Series(rng.choice(["x", "w", None], n), dtype=object),
        })
        columns = list(rng.permutation(frame.columns))
        expected = frame.groupby(columns, observed=True, sort=True, dropna=False).ngroup()
        assert (group_ids(frame, columns) == expected.to_numpy()).all()


def test_concat_orders_columns_first_seen_and_unions_only_shared_categoricals():
    # Columns in first-seen order whether or not the frames agree on them; a categorical
    # the last frame lacks is not unioned, one every frame holds is.
    a = pd.DataFrame({"x": [1], "op": pd.Categorical(["p"]), "kind": pd.Categorical(["k"])})
    b = pd.DataFrame({"op": pd.Categorical(["q"]), "y": [2.0], "x": [3],
                      "kind": pd.Categorical(["m"])})
    c = pd.DataFrame({"kind": pd.Categorical(["k"]), "x": [4]})
    joined = concat_frames([a, b, c])
    assert list(joined.columns) == ["x", "op", "kind", "y"]
    assert joined["x"].tolist() == [1, 3, 4]
    assert joined["op"].iloc[:2].astype(object).tolist() == ["p", "q"]
    assert joined["op"].isna().tolist() == [False, False, True]
    assert isinstance(joined["kind"].dtype, pd.CategoricalDtype)
    assert list(joined["kind"].cat.categories) == ["k", "m"]
    assert joined["kind"].tolist() == ["k", "m", "k"]
    same = concat_frames([a[["op", "x"]], a[["x", "op"]]])
    assert list(same.columns) == ["op", "x"] and same["x"].tolist() == [1, 1]
    # A name a frame repeats (two categoricals "a") stacks as pd.concat stacks it.
    twice = pd.concat([pd.DataFrame({"a": pd.Categorical(["p"])}),
                       pd.DataFrame({"a": pd.Categorical(["q"])})], axis=1)
    stacked = concat_frames([twice, twice.copy()])
    assert list(stacked.columns) == ["a", "a"]
    assert stacked.iloc[:, 1].astype(object).tolist() == ["q", "q"]


def test_cut_rows_gives_each_part_indexed_from_zero_and_leaves_the_stack_alone():
    stack = pd.DataFrame({"x": [10, 11, 12, 13, 14], "op": pd.Categorical(list("abcab"))},
                         index=[5, 6, 7, 8, 9])
    parts = cut_rows(stack, np.array([0, 2, 2, 5]))
    assert [p["x"].tolist() for p in parts] == [[10, 11], [], [12, 13, 14]]
    assert [list(p.index) for p in parts] == [[0, 1], [], [0, 1, 2]]
    assert all(isinstance(p.index, pd.RangeIndex) for p in parts)
    assert all(p["op"].dtype == stack["op"].dtype for p in parts)
    parts[2].loc[0, "x"] = -1  # a part written to is its own: the stack keeps its rows
    assert stack["x"].tolist() == [10, 11, 12, 13, 14]
    assert list(stack.index) == [5, 6, 7, 8, 9]


def test_concat_of_many_ranks_keeps_union_categoricals_order():
    frames = [pd.DataFrame({"op": pd.Categorical(values), "n": np.arange(len(values))})
              for values in (["b", "a"], ["a", "b"], ["c", None, "a"], [], ["b"])]
    joined = concat_frames(frames)
    on_object = [pd.Categorical.from_codes(f["op"].cat.codes, categories=pd.Index(
        f["op"].cat.categories.astype(object), dtype=object)) for f in frames]
    expected = union_categoricals(on_object, ignore_order=True)
    # pd.Categorical sorts each frame's categories: [a, b], [a, b], [a, c], [], [b]
    assert list(joined["op"].cat.categories) == ["a", "b", "c"] == list(expected.categories)
    assert joined["op"].isna().tolist() == [False] * 5 + [True] + [False] * 2
    assert joined["op"].dropna().tolist() == ["b", "a", "a", "b", "c", "a", "b"]
    assert list(joined["n"]) == [0, 1, 0, 1, 0, 1, 2, 0]
