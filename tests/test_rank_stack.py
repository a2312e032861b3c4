"""Small ranks reduced as one stack give each rank what reducing it alone gives.

``rank_reduce.reduce_ranks`` stacks small ranks and cuts the stack's summary back into
one summary per rank. These tests read crafted ranks twice, reduce one copy rank by rank
(``reduce_kernels``) and the other stacked, and compare every figure a rank carries on:
its summary rows in their order (the ranks run their kernels in different orders, so a
stack's categories are ordered unlike any rank's), its sampled durations, communication
sums, step spans, left-out kernels and step ids. The counts of kernels left outside every
step are also worked out by hand. No timing is asserted: benchmarks/ measures that.
"""

from __future__ import annotations

import csv

import pandas as pd
import pytest
from profiles import Comm, aclnn, write_profile

import cann_diff.read as read
from cann_diff.errors import SchemaError
from cann_diff.read import execute
from cann_diff.read.formats import csv_files, torch_text
from cann_diff.read.reduce import ranks as rank_reduce
from cann_diff.read.reduce.ranks import RankPlan, reduce_kernels, reduce_ranks, summary_of
from cann_diff.read.reduce.summary import combine
from cann_diff.settings import DEFAULT_LIMITS

RANKS = range(6)
STEPS = (1, 2, 3)


def _schedule(rank: int, step: int):
    """Ranks run different kernels in a different order, so their categories differ; the
    MatMul runs between the first Add and the others, which get shorter one by one, so a
    rank's kernels are in the order of neither its summary rows nor their durations."""
    ops = [aclnn("Cast", 4.0 + rank, "8,8")] if rank % 2 else []
    ops += [aclnn("Add", 2.0 + step + 0.1 * (rank - k), "8,8;8,8") for k in range(rank + 1)]
    ops.insert(len(ops) - rank, aclnn("MatMulV3", 10.0, f"{8 * (rank % 3 + 1)},8;8,8"))
    if rank != 4:  # sums of tenths, whose last bits depend on how they are added
        ops += [Comm("allReduce", 30.1 + 0.7 * k + 0.1 * rank) for k in range(4)]
    return ops


def _blank_steps(kernels, rows) -> None:
    """Blank the Step Id of the given data rows (0-based), or of every row with None."""
    with open(kernels, newline="") as handle:
        lines = list(csv.reader(handle))
    for number, line in enumerate(lines[1:]):
        if rows is None or number in rows:
            line[0] = ""
    with open(kernels, "w", newline="") as handle:
        csv.writer(handle, lineterminator="\r\n").writerows(lines)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """Six ranks; rank 1 has its first two kernels outside every step, rank 3 all."""
    root = tmp_path_factory.mktemp("stack")
    path = write_profile(root, "run", _schedule, ranks=RANKS, steps=STEPS).path
    rank_dirs = sorted(p for p in path.iterdir() if p.is_dir())
    _blank_steps(rank_dirs[1] / torch_text.OUTPUT_DIR / torch_text.KERNELS, {0, 1})
    _blank_steps(rank_dirs[3] / torch_text.OUTPUT_DIR / torch_text.KERNELS, None)
    return rank_dirs


def _read(rank_dirs):
    return [torch_text.read_rank(p) for p in rank_dirs]


def _text(frame: pd.DataFrame) -> pd.DataFrame:
    """Categoricals as text: a stack's categories hold every rank's values."""
    return frame.assign(**{c: frame[c].astype(str) for c in frame.columns
                           if isinstance(frame[c].dtype, pd.CategoricalDtype)})


def _assert_same(alone, stacked) -> None:
    """Row for row and in order: summaries, samples, communication sums, spans, rows."""
    for one, other in zip(alone, stacked, strict=True):
        mine, theirs = summary_of(one), summary_of(other)
        for frame, other_frame in ((mine.ops, theirs.ops), (mine.samples, theirs.samples),
                                   (mine.comm, theirs.comm),
                                   (one.step_spans, other.step_spans)):
            pd.testing.assert_frame_equal(_text(frame), _text(other_frame), check_exact=True)
        assert (mine.sampled, mine.fraction) == (theirs.sampled, theirs.fraction)
        assert (one.outside_steps, one.has_kernels, one.has_comm, one.step_ids) == \
            (other.outside_steps, other.has_kernels, other.has_comm, other.step_ids)
        assert (one.framework, one.framework_note) == (other.framework, other.framework_note)
        if one.ops is None:
            assert other.ops is None and other.comm is None
        else:
            pd.testing.assert_frame_equal(_text(one.ops), _text(other.ops), check_exact=True)


@pytest.mark.slow
@pytest.mark.parametrize("plan", [RankPlan(keep_rows=False), RankPlan(keep_rows=True),
                                  RankPlan(keep_rows=False, steps=[(2, 3)]),
                                  RankPlan(keep_rows=True, steps=[(None, 1)]),
                                  RankPlan(keep_rows=False, steps=[(7, 9)])],
                         ids=["summaries", "rows", "steps 2-3", "rows, step 1", "no step"])
def test_a_stack_gives_each_rank_what_it_gives_alone(cluster, plan):
    alone = [reduce_kernels(data, plan) for data in _read(cluster)]
    stacked = reduce_ranks(_read(cluster), plan)
    _assert_same(alone, stacked)


def test_kernels_outside_every_step_by_hand(cluster):
    """Rank 1 loses its two unstepped kernels; rank 3, with no stepped kernel, keeps all."""
    stacked = reduce_ranks(_read(cluster), RankPlan(keep_rows=False))
    assert [d.outside_steps for d in stacked] == [0, 2, 0, 0, 0, 0]
    # Rank 1 per step: a Cast, two Adds, a MatMul, four AllReduces = 8 kernels, 3 steps.
    assert int(summary_of(stacked[1]).ops["count"].sum()) == 8 * 3 - 2
    # Rank 3 per step: Cast, four Adds, MatMul, four AllReduces = 10, all without a step.
    rank3 = summary_of(stacked[3]).ops
    assert int(rank3["count"].sum()) == 10 * 3 and rank3["step"].isna().all()
    assert stacked[3].step_spans.empty
    assert list(stacked[0].step_spans["step"]) == list(STEPS)


def test_stacks_cut_by_rows_and_large_ranks_alone(cluster, monkeypatch):
    """A stack closes at STACK_ROWS rows; a rank above STACK_RANK_ROWS is reduced alone."""
    plan = RankPlan(keep_rows=False)
    alone = [reduce_kernels(data, plan) for data in _read(cluster)]
    stacks = []
    real = rank_reduce._reduce_stack
    monkeypatch.setattr(rank_reduce, "_reduce_stack",
                        lambda stack, p: (stacks.append([len(d.ops) for _, d, _ in stack]),
                                          real(stack, p))[1])
    monkeypatch.setattr(rank_reduce, "STACK_ROWS", 40)
    monkeypatch.setattr(rank_reduce, "STACK_RANK_ROWS", 25)
    stacked = _read(cluster)
    sizes = [len(d.ops) for d in stacked]
    _assert_same(alone, reduce_ranks(stacked, plan))
    # Kernels per rank: 3 steps × (Cast on odd ranks + rank+1 Adds + MatMul + four
    # AllReduces but on rank 4) = 18, 24, 24, 30, 18, 36: the first two fill a stack
    # past 40 rows, ranks 3 and 5 are too large for one.
    assert sizes == [18, 24, 24, 30, 18, 36]
    assert stacks == [[18, 24], [24, 18]]


def test_a_failing_stack_names_the_rank_that_fails_alone(cluster, monkeypatch):
    """The stack is checked as one frame; when it fails, each rank alone raises its error."""
    real = rank_reduce.validate

    def strict(ops):
        if (ops["op_type"].astype(str) == "Cast").any() and ops["rank"].nunique() == 1:
            raise SchemaError(None, "a Cast kernel on this rank")
        if (ops["op_type"].astype(str) == "Cast").any():
            raise SchemaError(None, "somewhere in the stack")
        real(ops)

    monkeypatch.setattr(rank_reduce, "validate", strict)
    alone = []
    reduce_alone = rank_reduce.reduce_kernels
    monkeypatch.setattr(rank_reduce, "reduce_kernels",
                        lambda data, plan: (alone.append(data.source),
                                            reduce_alone(data, plan))[1])
    with pytest.raises(SchemaError, match="a Cast kernel on this rank"):
        reduce_ranks(_read(cluster), RankPlan(keep_rows=False))
    assert alone == cluster[:2]  # rank 0 (no Cast) reduced alone, then rank 1 raised


def test_progress_follows_every_rank_read_in_one_pass(cluster):
    seen = []
    run = read.load_run(cluster[0].parent, keep_rows=False,
                        progress=lambda done, total: seen.append((done, total)))
    assert run.meta.ranks == tuple(RANKS)
    assert seen == [(n, len(RANKS)) for n in range(1, len(RANKS) + 1)]



def test_a_table_read_as_text_gives_what_its_dictionaries_give(cluster, monkeypatch):
    """Below TEXT_TABLE_BYTES a kernel table's text stays text; the ranks' summaries, rows
    and spans are those of the same tables read as dictionaries (categoricals)."""
    plan = RankPlan(keep_rows=True)
    as_text = _read(cluster)
    assert not any(isinstance(d.ops["op_name"].dtype, pd.CategoricalDtype) for d in as_text)
    as_text = reduce_ranks(as_text, plan)
    monkeypatch.setattr(csv_files, "TEXT_TABLE_BYTES", 0)
    as_dictionaries = _read(cluster)
    assert all(isinstance(d.ops["op_name"].dtype, pd.CategoricalDtype) for d in as_dictionaries)
    _assert_same(reduce_ranks(as_dictionaries, plan), as_text)


@pytest.mark.slow
@pytest.mark.parametrize("sampled", [False, True], ids=["every duration", "a sample"])
@pytest.mark.parametrize("order", [[0, 1, 2, 3, 4, 5], [1, 0, 2, 5, 4]],
                         ids=["in slot order", "out of order, a rank left out"])
def test_combine_of_shares_equals_combine_of_the_ranks_own_summaries(cluster, monkeypatch,
                                                                     order, sampled):
    """combine takes consecutive shares of one stack as one slice; the run's summary is the
    one stacking every rank's own summary gives. Also when the side's budget is 3 short:
    the largest fraction that fits is just under 11/12, where rank 5's three rows of 6 Adds
    (one a step) keep 5 durations each, rank 3's two rows of 12 (its kernels have no step)
    keep 11, and every row of 5 or fewer keeps all: ranks 0-2 and 4 keep their samples as
    they are, though ranks beside them in their stack are resampled."""
    monkeypatch.setattr(rank_reduce, "STACK_ROWS", 60)  # stacks of ranks 0-2 and 3-5
    datas = reduce_ranks(_read(cluster), RankPlan(keep_rows=False))
    assert all(d.share is not None for d in datas)
    assert datas[0].share.stack is datas[2].share.stack is not datas[3].share.stack
    budget = DEFAULT_LIMITS.sample_budget
    if sampled:
        budget = sum(int(summary_of(datas[n]).ops["count"].sum()) for n in order) - 3
    ids = [100 + 7 * n for n in order]
    shares = combine([(i, datas[n].share) for i, n in zip(ids, order)], budget)
    owns = combine([(i, summary_of(datas[n])) for i, n in zip(ids, order)], budget)
    for frame, other in ((shares.ops, owns.ops), (shares.samples, owns.samples),
                         (shares.comm, owns.comm)):
        pd.testing.assert_frame_equal(_text(frame), _text(other), check_exact=True)
    assert sorted(set(shares.ops["rank"])) == sorted(ids)
    assert shares.sampled == sampled
    left_out = 3 + (2 if 3 in order else 0) if sampled else 0
    assert len(shares.samples) == shares.ops["count"].sum() - left_out


def test_dask_gets_small_chunks_whatever_the_local_jobs():
    """A Dask cluster's size is unknown here: its tasks hold at most DASK_CHUNK_RANKS ranks."""
    sources = list(range(100))
    assert [len(c) for c in execute.chunked(sources, 1)] == [25] * 4
    chunks = execute.plan_ranks(sources, 1, "tcp://scheduler:8786", 1.0).chunks
    assert [len(c) for c in chunks] == [16] * 6 + [4]
    assert [s for c in chunks for s in c] == sources
