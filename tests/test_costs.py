"""``costs.workers_likely``: the command line's quick look, before any import, at whether
reading will want rank or side workers (then the forkserver starts at once).

The answer is the planner's rule on guessed ranks: each child directory of an input is a
rank, of the size of the first ``SIZE_SAMPLE`` children's mean. With empty ranks each
costs ``READ_S_PER_RANK`` (0.008 s); on 2 jobs spreading n of them saves n × 0.008 / 2
seconds, more than the 0.5 s a pool must save from n = 126 on (124: 0.496 s, 127: 0.508 s).
"""

from __future__ import annotations

import os

import pytest

from cann_diff import costs
from cann_diff.settings import DEFAULT_LIMITS

POOL = DEFAULT_LIMITS.rank_pool_min_s
LARGE = 330 * 10**6  # a 1M-kernel text rank


def _ranks(root, count, size=0, name="node0_{n}_ascend_pt"):
    root.mkdir(parents=True, exist_ok=True)
    for n in range(count):
        rank = root / name.format(n=n) / costs.RANK_OUTPUT
        rank.mkdir(parents=True)
        if size:
            with open(rank / "kernel_details.csv", "wb") as out:
                out.truncate(size)  # sparse: the size without the disk
    return root


def test_many_small_ranks_want_workers_from_the_planner_bound(tmp_path):
    assert POOL == 0.5  # the bound the module docstring computes with
    assert not costs.workers_likely([_ranks(tmp_path / "a", 124)], 2, POOL)
    assert costs.workers_likely([_ranks(tmp_path / "b", 127)], 2, POOL)
    assert not costs.workers_likely([tmp_path / "b"], 1, POOL)  # one job: no workers


def test_four_large_ranks_want_workers_one_does_not(tmp_path):
    four = _ranks(tmp_path / "four", 4, LARGE)
    assert costs.workers_likely([tmp_path / "missing", four], 2, POOL)
    one = _ranks(tmp_path / "one", 1, LARGE)
    assert not costs.workers_likely([one], 2, POOL)
    # One rank given itself: its children (output, framework folders) are not ranks.
    rank = next(one.iterdir())
    (rank / "FRAMEWORK").mkdir()
    with open(rank / "FRAMEWORK" / "big.bin", "wb") as out:
        out.truncate(LARGE)
    assert not costs.workers_likely([rank], 2, POOL)
    renamed = tmp_path / "rank0"
    os.rename(rank, renamed)  # no profiler suffix: the output folder still marks a rank
    assert not costs.workers_likely([renamed], 2, POOL)


def test_the_sample_stands_for_the_other_children(tmp_path):
    root = _ranks(tmp_path / "mixed", costs.SIZE_SAMPLE, LARGE, name="a{n}")
    _ranks(root, 120, name="b{n:03d}")
    # The first children (in name order) are large: all 128 are taken as large.
    assert costs.workers_likely([root], 2, POOL)
    small_first = _ranks(tmp_path / "small_first", 120, name="a{n:03d}")
    _ranks(small_first, 2, LARGE, name="z{n}")
    # Two large ranks after 120 empty ones are not seen by the sample: guessed empty.
    assert not costs.workers_likely([small_first], 2, POOL)


def test_an_msprof_directory_is_one_rank(tmp_path):
    prof = tmp_path / "PROF_000001_20230818142704322_COJGGGCANRMICFBC"
    for child in ("device_0", "device_1", "host"):
        (prof / child).mkdir(parents=True)
        with open(prof / child / "data.bin", "wb") as out:
            out.truncate(LARGE)
    assert not costs.workers_likely([prof], 2, POOL)
    assert not costs.workers_likely([f"{prof}/"], 2, POOL)


def test_two_inputs_of_one_large_rank_each_want_side_workers(tmp_path):
    # One rank of 1M kernels each: 1.493 s by the model overlapped, over SIDES_SAVE_MIN_S;
    # of 0.25M kernels (81 MB) each: 0.3725 s, under it.
    large = [_ranks(tmp_path / side, 1, LARGE) for side in ("base", "new")]
    assert costs.workers_likely(large, 2, POOL)
    assert costs.workers_likely([next(p.iterdir()) for p in large], 2, POOL)  # the ranks
    assert not costs.workers_likely(large[:1], 2, POOL)
    assert not costs.workers_likely(large, 1, POOL)
    quarter = [_ranks(tmp_path / f"q{side}", 1, 81 * 10**6) for side in ("base", "new")]
    assert not costs.workers_likely(quarter, 2, POOL)


def test_guessed_sizes(tmp_path):
    root = _ranks(tmp_path / "many", 10, name="r{n}")
    for n, child in enumerate(sorted(root.iterdir())):
        with open(child / costs.RANK_OUTPUT / "k.csv", "wb") as out:
            out.truncate(1000 * (n + 1))
    # The first 8 (r0, r1, r2..r7 by name) as they are, their mean (4,500) for r8 and r9.
    assert costs.guess_sizes(root) == [1000 * (n + 1) for n in range(8)] + [4500, 4500]
    one = _ranks(tmp_path / "one", 1, 1234)
    assert costs.guess_sizes(one) == [1234]  # one child: one rank of all its bytes
    assert costs.guess_sizes(next(one.iterdir())) == [1234]  # the rank's own export
    data = tmp_path / "trace.json"
    data.write_text("[]")
    assert costs.guess_sizes(data) == [2]
    assert costs.guess_sizes(tmp_path / "missing") == []


@pytest.mark.parametrize("what", ["file", "missing"])
def test_what_is_no_directory_is_no_answer(tmp_path, what):
    path = tmp_path / "x.json"
    if what == "file":
        path.write_text("[]")
    assert not costs.workers_likely([path], 2, POOL)


def test_the_command_starts_the_forkserver_only_on_that_say_so(tmp_path, monkeypatch):
    from cann_diff import cli, processes

    started = []
    monkeypatch.setattr(processes, "start_forkserver", started.append)
    many, few = _ranks(tmp_path / "many", 130), _ranks(tmp_path / "few", 2)
    cli._reading_workers([few, few], 2, None)
    assert started == []
    cli._reading_workers([few, many], 2, "tcp://127.0.0.1:8786")  # Dask reads the ranks
    assert started == []
    cli._reading_workers([few, many], 2, None)
    assert started == [cli.READ_PRELOAD]
