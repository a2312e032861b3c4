"""The read planner's decisions on crafted sizes: where each input and each rank is read.

One cost model (``execute.read_cost_s``: a fixed cost per rank, one per byte) decides side
workers, rank workers and reading here. The sizes below are those of the benchmark's
inputs (benchmarks/generate.py): a 1M-kernel text rank holds ~330 MB, a rank of 164
kernels ~60 kB. No timing here: only what is decided, and that every rank is read once,
in order.
"""

from __future__ import annotations

import pytest

from cann_diff.read import execute
from cann_diff.settings import DEFAULT_LIMITS

LARGE = 330 * 10**6  # one rank of 1M kernels
SMALL = 60 * 10**3  # one rank of 164 kernels
POOL = DEFAULT_LIMITS.rank_pool_min_s


def _plan(sizes, jobs=2, scheduler=None):
    sources = list(range(len(sizes)))
    plan = execute.plan_ranks(sources, jobs, scheduler, 1.0, sizes=sizes, pool_min_s=POOL)
    assert [s for chunk in plan.chunks for s in chunk] == sources  # each once, in order
    return plan


@pytest.mark.parametrize("sizes, jobs", [
    ([LARGE], 2),  # one rank: pyarrow parses it on every core here
    ([LARGE] * 4, 1),  # one job
    ([SMALL] * 8, 2),  # eight small ranks: a pool costs more than it saves
    ([SMALL] * 32, 2),  # what the old count rule sent to processes: ~0.3 s of reading
    ([LARGE, SMALL], 2),  # the large rank is the wall time either way
])
def test_read_here(sizes, jobs):
    plan = _plan(sizes, jobs)
    assert isinstance(plan.executor, execute.InOrder)
    assert len(plan.chunks) == 1


def test_four_large_ranks_spread_one_a_chunk():
    """The issue's case: 4 ranks × 1M rows were read one after the other below 32 ranks."""
    plan = _plan([LARGE] * 4)
    assert plan.executor == execute.Processes(2)
    assert plan.chunks == [[0], [1], [2], [3]]
    assert _plan([LARGE] * 2).chunks == [[0], [1]]
    assert _plan([LARGE] * 4, jobs=8).executor == execute.Processes(4)  # no idle worker


def test_many_small_ranks_spread_in_a_few_chunks_of_equal_cost():
    plan = _plan([SMALL] * 1000)
    assert plan.executor == execute.Processes(2)
    lengths = [len(chunk) for chunk in plan.chunks]
    assert len(lengths) == 2 * execute.TASKS_PER_WORKER
    assert max(lengths) - min(lengths) <= 1


def test_large_ranks_alone_small_ones_together():
    sizes = [SMALL] * 50 + [LARGE] + [SMALL] * 50 + [LARGE]
    plan = _plan(sizes)
    assert isinstance(plan.executor, execute.Processes)
    assert [50] in plan.chunks and [101] in plan.chunks
    small = [chunk for chunk in plan.chunks if LARGE not in [sizes[s] for s in chunk]]
    assert sum(len(chunk) for chunk in small) == 100 and len(small) <= 4


def test_chunks_of_cost_keep_order_and_bound_their_share():
    costs = [1.0, 1.0, 5.0, 0.1, 0.1, 0.1, 3.0, 0.2]
    chunks = execute.chunked_by_cost(list(range(len(costs))), costs, 1)
    assert [s for chunk in chunks for s in chunk] == list(range(len(costs)))
    share = sum(costs) / execute.TASKS_PER_WORKER
    assert all(sum(costs[s] for s in chunk) <= 1.5 * share or len(chunk) == 1
               for chunk in chunks)


def test_dask_chunks_by_count_whatever_the_sizes():
    """A cluster's size is unknown here: its tasks are many and small, the sizes unread."""
    plan = execute.plan_ranks(list(range(100)), 2, "tcp://scheduler:8786", 1.0)
    assert isinstance(plan.executor, execute.Dask)
    assert [len(c) for c in plan.chunks] == [13] * 7 + [9]


def test_a_saving_below_the_pool_cost_reads_here():
    costs = execute.read_cost_s([SMALL] * 200)
    saves = execute.spread_saves_s(costs, 2)
    sources = list(range(200))
    here = execute.plan_ranks(sources, 2, None, 1.0, sizes=[SMALL] * 200, pool_min_s=saves)
    spread = execute.plan_ranks(sources, 2, None, 1.0, sizes=[SMALL] * 200,
                                pool_min_s=saves * 0.99)
    assert isinstance(here.executor, execute.InOrder)
    assert isinstance(spread.executor, execute.Processes)


def _sides(sizes: dict[str, list[int]], jobs: int, scheduler: str | None = None):
    return execute.plan_read(list(sizes), jobs, scheduler, sizes_of=sizes.__getitem__)


def test_with_four_jobs_or_more_sides_in_processes_of_two_jobs_each():
    big = {"base": [LARGE] * 4, "new": [LARGE] * 4}
    assert _sides(big, 2) == execute.ReadPlan(0, 2)  # ranks spread over a shared pool
    assert _sides(big, 3) == execute.ReadPlan(0, 3)
    assert _sides(big, 4) == execute.ReadPlan(2, 2)
    assert _sides(big, 5) == execute.ReadPlan(2, 2)
    three = {"base": [LARGE], "new 1": [LARGE], "new 2": [LARGE]}
    assert _sides(three, 8) == execute.ReadPlan(3, 2)
    assert _sides(three, 4) == execute.ReadPlan(2, 2)


# One rank of 1M kernels costs 0.008 + 4.5e-9 × 330e6 = 1.493 s by the model; of 0.5M
# (161 MB) 0.7325 s, of 0.25M (81 MB) 0.3725 s, of 164 kernels (60 kB) 0.00827 s. With 2
# or 3 jobs, side by side once they overlap 1.0 s: the total less when the last side ends.
HALF = 161 * 10**6
QUARTER = 81 * 10**6


def test_inputs_of_one_large_rank_each_go_side_by_side_one_job_each():
    assert _sides({"base": [LARGE], "new": [LARGE]}, 2) == execute.ReadPlan(2, 1)
    assert _sides({"base": [LARGE], "new": [LARGE]}, 3) == execute.ReadPlan(2, 1)
    # Read here they would be read one after the other: side by side even unbalanced.
    three = {"base": [LARGE], "new 1": [LARGE], "new 2": [LARGE]}
    assert _sides(three, 2) == execute.ReadPlan(2, 1)
    assert _sides(three, 3) == execute.ReadPlan(3, 1)
    # A small rank beside a large one saves 0.008 s spread: the input still counts as one.
    assert _sides({"base": [LARGE, SMALL], "new": [LARGE]}, 2) == execute.ReadPlan(2, 1)
    # A missing input counts nothing: the two others still overlap 1.493 s.
    assert _sides({"base": [], "new 1": [LARGE], "new 2": [LARGE]}, 2) == execute.ReadPlan(2, 1)


def test_inputs_whose_ranks_spread_go_side_by_side_when_they_balance():
    # 1,000 small ranks a side: 8.27 s each, the two side workers end at 8.27 s, the even
    # share of 2 jobs.
    small = {"base": [SMALL] * 1000, "new": [SMALL] * 1000}
    assert _sides(small, 2) == execute.ReadPlan(2, 1)
    # 3 jobs: two side workers end at 8.27 s, over 1.1 × 16.54 / 3 = 6.065 s
    assert _sides(small, 3) == execute.ReadPlan(0, 3)
    # 32 ranks of 10 MB (0.053 s) a side balance; 4 of 1M kernels (1.493 s) are too large
    assert _sides({"base": [10**7] * 32, "new": [10**7] * 32}, 2) == execute.ReadPlan(2, 1)
    assert _sides({"base": [LARGE] * 4, "new": [LARGE] * 4}, 2) == execute.ReadPlan(0, 2)
    # 1,000 small ranks against 100: 8.27 s ends over 1.1 × (8.27 + 0.827) / 2 = 5.003 s
    assert _sides({"base": [SMALL] * 1000, "new": [SMALL] * 100}, 2) == execute.ReadPlan(0, 2)
    # 1,000 small ranks beside 5 of 1M kernels: that input's mean is 1.493 s, not small
    assert _sides({"base": [SMALL] * 1000, "new": [LARGE] * 5}, 2) == execute.ReadPlan(0, 2)
    # three sides of 8.27 s on 2 workers: the third ends at 16.54, over 1.1 × 12.405
    three = {"base": [SMALL] * 1000, "new 1": [SMALL] * 1000, "new 2": [SMALL] * 1000}
    assert _sides(three, 2) == execute.ReadPlan(0, 2)
    assert _sides(three, 3) == execute.ReadPlan(3, 1)
    # 900 against 1,000 ranks: 8.27 s ends within 1.1 × (7.443 + 8.27) / 2 = 8.642 s
    assert _sides({"base": [SMALL] * 900, "new": [SMALL] * 1000}, 2) == execute.ReadPlan(2, 1)
    assert _sides({"base": [SMALL] * 700, "new": [SMALL] * 1000}, 2) == execute.ReadPlan(0, 2)


def test_one_job_sides_only_when_the_reading_pays():
    # overlapped: 0.3725 s, 0.7325 s, and of three 0.7325 s on 2 workers 0.7325 s
    assert _sides({"base": [QUARTER], "new": [QUARTER]}, 2) == execute.ReadPlan(0, 2)
    assert _sides({"base": [HALF], "new": [HALF]}, 2) == execute.ReadPlan(0, 2)
    assert _sides({"base": [HALF], "new 1": [HALF], "new 2": [HALF]}, 2) == execute.ReadPlan(0, 2)
    assert _sides({"base": [HALF], "new 1": [HALF], "new 2": [HALF]}, 3) == execute.ReadPlan(3, 1)
    # one input of 2 × 1M kernels' worth beside one small rank overlaps 0.008 s
    assert _sides({"base": [2 * LARGE], "new": [SMALL]}, 2) == execute.ReadPlan(0, 2)
    assert _sides({"base": [LARGE], "new": [LARGE]}, 1) == execute.ReadPlan(0, 1)
    assert _sides({"base": [LARGE]}, 2) == execute.ReadPlan(0, 2)


def test_small_inputs_or_a_scheduler_read_one_after_the_other():
    small = {"base": [SMALL] * 2, "new": [SMALL] * 2}
    assert _sides(small, 8) == execute.ReadPlan(0, 8)
    assert _sides(small, 2) == execute.ReadPlan(0, 2)
    big = {"base": [LARGE], "new": [LARGE]}
    assert _sides(big, 8, "tcp://scheduler:8786") == execute.ReadPlan(0, 8)
    assert _sides({"base": [LARGE]}, 8) == execute.ReadPlan(0, 8)


def test_sizes_are_not_walked_when_jobs_or_a_scheduler_decide():
    def refuse(path):
        raise AssertionError(f"{path} walked")

    assert execute.plan_read(["a", "b"], 1, None, sizes_of=refuse) == execute.ReadPlan(0, 1)
    assert execute.plan_read(["a", "b"], 2, "tcp://scheduler:8786",
                             sizes_of=refuse) == execute.ReadPlan(0, 2)


def test_the_plan_reads_the_quick_look_of_each_input(tmp_path):
    from profiles import aclnn, write_profile

    run = write_profile(tmp_path, "base", lambda r, s: [aclnn("Add", 3.0, "1;1")],
                        ranks=range(3), steps=(1,)).path
    assert execute.plan_read.__defaults__[0] is execute.guess_sizes
    sizes = execute.guess_sizes(run)
    assert len(sizes) == 3 and all(size > 0 for size in sizes)
    assert execute.guess_sizes(tmp_path / "missing") == []


@pytest.mark.slow  # three pools start
def test_work_meanwhile_runs_once_in_the_first_pool_and_is_dropped_after():
    done = []
    with execute.while_workers_read(lambda: done.append("imported")):
        assert execute.InOrder().run(abs, [-1], lambda *_: None) == [1]
        assert done == []  # reading here: nothing to wait on
        assert execute.Processes(2).run(abs, [-1, -2], lambda *_: None) == [1, 2]
        assert done == ["imported"]
        assert execute.Processes(1).run(abs, [-3], lambda *_: None) == [3]
        assert done == ["imported"]  # once
    with execute.while_workers_read(lambda: done.append("unused")):
        pass
    execute.Processes(1).run(abs, [-4], lambda *_: None)
    assert done == ["imported"]  # a block left without a pool leaves nothing behind
