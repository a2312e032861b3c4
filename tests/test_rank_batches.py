"""Many ranks stacked at once: the same summaries as each rank read and stacked on its own.

A rank's fixed cost is cut by stacking the ranks' summaries, steps and memory with one
rank column (``derive.concat_ranks``) and by reading each categorical's codes once per
frame (``derive._union``). These tests build ranks that differ in their kernels (so
their categories differ), work the totals out by hand, and check that the stacked run
equals the ranks read one by one. No timing is asserted: that is benchmarks/' job.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from pandas.api.types import union_categoricals
from profiles import Comm, aclnn, write_profile

import cann_diff.read as read
from cann_diff.errors import SchemaError
from cann_diff.read.formats.csv_files import read_step_trace
from cann_diff.read.frames import concat_frames, concat_ranks
from cann_diff.read.reduce.ranks import step_spans, summary_of
from cann_diff.read.reduce.summary import combine
from cann_diff.schema import OP_COLUMNS, conform_ops
from cann_diff.settings import DEFAULT_LIMITS

RANKS = range(5)
STEPS = (3, 4)


def _schedule(rank: int, step: int):
    """Rank r, per step: r + 1 Adds of 2 µs; a MatMul of 10 µs on even ranks, a Cast of
    4 µs on odd ones; an exposed AllReduce of 30 µs on ranks 0-2 only."""
    ops = [aclnn("Add", 2.0, "8,8;8,8") for _ in range(rank + 1)]
    ops.append(aclnn("MatMulV3", 10.0, "8,8;8,8") if rank % 2 == 0 else
               aclnn("Cast", 4.0, "8,8"))
    if rank <= 2:
        ops.append(Comm("allReduce", 30.0))
    return ops


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    root = tmp_path_factory.mktemp("batches")
    return write_profile(root, "base", _schedule, ranks=RANKS, steps=STEPS).path


def _by_key(ops: pd.DataFrame) -> dict[tuple[int, int, str], tuple[int, float, float]]:
    """(rank, step, op_type) → (count, total µs, exposed µs), rounded to the ns."""
    return {(int(r.rank), int(r.step), str(r.op_type)):
            (int(r.count), round(r.total_us, 3), round(r.exposed_us, 3))
            for r in ops.itertuples()}


def _text(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame with categoricals as text, to compare values whatever their categories."""
    return frame.assign(**{c: frame[c].astype(str) for c in frame.columns
                           if isinstance(frame[c].dtype, pd.CategoricalDtype)})


def test_stacked_ranks_add_up_to_the_schedule(cluster):
    run = read.load_run(cluster, keep_rows=False)
    assert run.meta.ranks == tuple(RANKS)
    expected = {}
    for rank in RANKS:
        for step in STEPS:
            expected[(rank, step, "Add")] = (rank + 1, 2.0 * (rank + 1), 0.0)
            if rank % 2 == 0:
                expected[(rank, step, "MatMulV3")] = (1, 10.0, 0.0)
            else:
                expected[(rank, step, "Cast")] = (1, 4.0, 0.0)
            if rank <= 2:  # exposed whole: the schedule runs it alone
                expected[(rank, step, "AllReduce")] = (1, 30.0, 30.0)
    assert _by_key(run.summary.ops) == expected
    # (1+2+3+4+5) Adds + 5 MatMul/Cast + 3 AllReduce, per step.
    assert run.summary.kernels == 2 * (15 + 5 + 3)
    comm = run.summary.comm
    assert sorted(zip(comm["rank"], comm["step"])) == [(r, s) for r in range(3) for s in STEPS]
    assert (comm["ops"] == 1).all()
    # Every rank's steps, under its rank id, in rank order.
    assert list(run.steps["rank"]) == [r for r in RANKS for _ in STEPS]
    assert list(run.steps["step"]) == list(STEPS) * len(RANKS)


@pytest.mark.slow
def test_stacked_at_once_equals_each_rank_alone(cluster):
    """The run of all ranks holds, rank by rank, exactly what each rank's own run holds."""
    together = read.load_run(cluster, keep_rows=False)
    ops = _text(together.summary.ops)
    for number, rank_dir in enumerate(sorted(p for p in cluster.iterdir() if p.is_dir())):
        alone = read.load_run(rank_dir, keep_rows=False)
        assert alone.meta.ranks == (number,)
        mine = ops[ops["rank"] == number].reset_index(drop=True)
        pd.testing.assert_frame_equal(mine, _text(alone.summary.ops), check_exact=True)
        steps = together.steps[together.steps["rank"] == number].reset_index(drop=True)
        pd.testing.assert_frame_equal(steps, alone.steps.reset_index(drop=True),
                                      check_exact=True)


def test_combine_equals_stacking_one_rank_at_a_time(cluster):
    """combine of every rank at once gives each rank's rows, samples renumbered to them."""
    plan = read.RankPlan(keep_rows=False)
    _, sources = read.find_rank_sources(cluster)
    datas = [read.read_and_reduce(plan, s) for s in sources]
    parts = [(10 * n, summary_of(d)) for n, d in enumerate(datas)]  # ids other than positions
    together = combine(parts, DEFAULT_LIMITS.sample_budget)
    offset = 0
    for rank, summary in parts:
        alone = combine([(rank, summary)], DEFAULT_LIMITS.sample_budget)
        rows = together.ops["rank"].to_numpy() == rank
        pd.testing.assert_frame_equal(_text(together.ops[rows].reset_index(drop=True)),
                                      _text(alone.ops), check_exact=True)
        mine = together.samples[np.isin(together.samples["row"], np.flatnonzero(rows))]
        assert list(mine["row"] - offset) == list(alone.samples["row"])
        assert list(mine["dur_us"]) == list(alone.samples["dur_us"])
        offset += int(rows.sum())
    assert offset == len(together.ops)


def test_concat_ranks_equals_an_assign_per_frame():
    """One rank column set once gives what ``assign(rank=…)`` per frame and a concat gave."""
    a = pd.DataFrame({"rank": [0, 0], "name": pd.Categorical(["x", "y"]), "v": [1.0, 2.0]})
    b = pd.DataFrame({"rank": [0], "name": pd.Categorical(["z"]), "v": [3.0]})
    empty = a.iloc[:0]
    c = pd.DataFrame({"rank": [0, 0, 0], "name": pd.Categorical(["y", "w", "x"]),
                      "v": [4.0, 5.0, 6.0]})
    stacked = concat_ranks([a, empty, b, None, c], [7, 8, 9, 10, 11])
    assert list(stacked["rank"]) == [7, 7, 9, 11, 11, 11]
    assert stacked["rank"].dtype == np.int64
    assert list(stacked["v"]) == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    names = union_categoricals([a["name"], b["name"], c["name"]], ignore_order=True)
    assert list(stacked["name"].cat.categories) == list(names.categories) == ["x", "y", "z", "w"]
    assert list(stacked["name"].astype(str)) == ["x", "y", "z", "y", "w", "x"]
    # A frame without the column gets it last; no frame with rows gives no columns.
    tagged = concat_ranks([pd.DataFrame({"v": [1.0]}), pd.DataFrame({"v": [2.0]})], [3, 4])
    assert list(tagged.columns) == ["v", "rank"] and list(tagged["rank"]) == [3, 4]
    assert concat_ranks([empty, None], [1, 2]).columns.empty


def test_union_keeps_the_first_frames_categories_when_all_share_them():
    first = pd.DataFrame({"name": pd.Categorical(["b", "a"], categories=["b", "a"])})
    second = pd.DataFrame({"name": pd.Categorical(["a"], categories=["b", "a"])})
    stacked = concat_frames([first, second])
    assert list(stacked["name"].cat.categories) == ["b", "a"]
    assert list(stacked["name"].cat.codes) == [0, 1, 1]
    grown = concat_frames([second, pd.DataFrame({"name": pd.Categorical(["c", "b"])})])
    assert list(grown["name"].cat.categories) == ["b", "a", "c"]
    assert list(grown["name"].astype(str)) == ["a", "c", "b"]


def test_step_spans_by_hand():
    """Step 2: starts at 1,000 and 1,500 ns, ends 1,000 + 2,000 and 1,500 + 250 → [1, 3] µs."""
    ops = pd.DataFrame({"step": pd.array([2, 1, 2, None, 1], dtype="Int64"),
                        "start_ns": np.array([1_000, 5_000, 1_500, 0, 4_000], dtype=np.int64),
                        "dur_us": [2.0, 0.5, 0.25, 99.0, 0.1]})
    spans = step_spans(ops)
    assert list(spans["step"]) == [1, 2]
    assert spans["step"].dtype == np.int64
    assert list(spans["start_us"]) == [4.0, 1.0]
    assert list(spans["end_us"]) == [5.5, 3.0]
    none = step_spans(ops.assign(step=pd.array([None] * 5, dtype="Int64")))
    assert none.empty and list(none.columns) == ["step", "start_us", "end_us"]


def _step_file(tmp_path, rows: list[str]):
    path = tmp_path / "step_trace_time.csv"
    path.write_text("Step,Computing,Communication(Not Overlapped),Overlapped,Communication,"
                    "Free,Stage,Bubble\n" + "\n".join(rows) + "\n")
    return path


def test_step_figures_parsed_together_stay_per_column(tmp_path):
    frame = read_step_trace(_step_file(tmp_path, ["1,10.5,2,3,5,1.25,20,x",
                                                  "2,11,2.5,N/A,6,1.5,21.5,0"]))
    assert list(frame["computing"]) == [10.5, 11.0]
    assert list(frame["communication_not_overlapped"]) == [2.0, 2.5]
    assert list(frame["stage"]) == [20.0, 21.5]
    assert list(frame["free"]) == [1.25, 1.5]
    assert frame["overlapped"].tolist()[0] == 3.0 and np.isnan(frame["overlapped"].tolist()[1])
    assert frame["bubble"].tolist()[1] == 0.0 and np.isnan(frame["bubble"].tolist()[0])
    assert np.isnan(frame["preparing"]).all()  # not in the file
    assert frame["computing"].dtype == np.float64
    with pytest.raises(SchemaError, match="non-numeric step figures"):  # Free is needed
        read_step_trace(_step_file(tmp_path, ["1,10,2,3,5,lots,20,0"]))


def test_conform_ops_casts_only_what_is_mistyped(cluster):
    run = read.load_run(cluster)
    ops = run.ops
    assert [str(t) for t in ops.dtypes] == list(OP_COLUMNS.values())
    again = conform_ops(ops)
    pd.testing.assert_frame_equal(again, ops, check_exact=True)
    again["dur_us"] = 0.0  # a new frame: the input stays as it was
    assert (ops["dur_us"] > 0).all()
    shuffled = ops[list(OP_COLUMNS)[::-1]].astype({"dur_us": "float32", "op_type": "object"})
    fixed = conform_ops(shuffled)
    assert list(fixed.columns) == list(OP_COLUMNS)
    assert [str(t) for t in fixed.dtypes] == list(OP_COLUMNS.values())
    assert list(fixed["op_type"].astype(str)) == list(ops["op_type"].astype(str))
