"""Several inputs' ranks read by one pool of workers, the next input found while they read.

``execute.shared_workers`` gives the rank chunks of every input one pool: an input's
chunks are queued when its ranks are found (the forkserver started then), all queued
chunks submitted, in order, when the first results are asked for; or, with a forkserver
started before (by the command line), submitted at once. ``pipeline.read_sides``
starts every input before it assembles the first; an input that cannot start raises its
error only after the inputs before it were read, as when read one after the other.
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from profiles import aclnn, write_profile

from cann_diff.errors import CannDiffError, InputError
from cann_diff.pipeline import Options, read_sides
from cann_diff.read import execute


class FakePool:
    """Runs each submitted call at once and remembers what was submitted, in order."""

    def __init__(self, log):
        self.log = log

    def submit_all(self, func, items):
        from concurrent.futures import Future

        futures = []
        for item in items:
            self.log.append(("submit", item))
            future = Future()
            try:
                future.set_result(func(item))
            except Exception as error:  # noqa: BLE001 (the Future carries it)
                future.set_exception(error)
            futures.append(future)
        return futures


@pytest.fixture
def fake_pool(monkeypatch):
    log = []

    @contextmanager
    def pool(workers, preload):
        log.append(("pool", workers))
        yield FakePool(log)
        log.append(("stopped", workers))

    monkeypatch.setattr(execute, "worker_pool", pool)
    monkeypatch.setattr(execute, "start_forkserver", lambda preload: log.append(("fork",)))
    monkeypatch.setattr(execute, "forkserver_started", lambda: False)
    return log


def test_chunks_queue_until_collected_then_go_out_in_order_to_one_pool(fake_pool):
    with execute.shared_workers(3):
        first = execute.start(execute.Processes(2), abs, [-1, -2])
        second = execute.start(execute.Processes(3), abs, [-3, -4, -5])
        # Both inputs found: the forkserver started once, nothing submitted yet.
        assert fake_pool == [("fork",)]
        seen = []
        assert first(lambda done, total: seen.append((done, total))) == [1, 2]
        assert seen == [(1, 2), (2, 2)]
        # The first collect handed out every queued chunk, the first input's first.
        assert fake_pool == [("fork",), ("pool", 3), ("submit", -1), ("submit", -2),
                             ("submit", -3), ("submit", -4), ("submit", -5)]
        assert second(lambda done, total: None) == [3, 4, 5]
        assert fake_pool[-1] == ("submit", -5)  # nothing submitted twice
    assert fake_pool[-1] == ("stopped", 3)


def test_chunks_go_out_at_once_when_the_forkserver_was_started_before(fake_pool,
                                                                      monkeypatch):
    monkeypatch.setattr(execute, "forkserver_started", lambda: True)
    with execute.shared_workers(3):
        first = execute.start(execute.Processes(2), abs, [-1, -2])
        # Its imports had the command's own time: the pool starts and reads the first
        # input while the second one's ranks are found. No forkserver is started here.
        assert fake_pool == [("pool", 3), ("submit", -1), ("submit", -2)]
        second = execute.start(execute.Processes(3), abs, [-3])
        assert fake_pool[-1] == ("submit", -3)
        assert second(lambda done, total: None) == [3]
        assert first(lambda done, total: None) == [1, 2]
        assert [e for e in fake_pool if e[0] != "submit"] == [("pool", 3)]
        assert len(fake_pool) == 4  # nothing submitted twice
    assert fake_pool[-1] == ("stopped", 3)


def test_a_later_input_goes_out_at_once_to_a_running_pool(fake_pool):
    with execute.shared_workers(2):
        first = execute.start(execute.Processes(2), abs, [-1])
        assert first(lambda done, total: None) == [1]  # the pool is started here
        second = execute.start(execute.Processes(2), abs, [-2])
        assert fake_pool[-1] == ("submit", -2)  # before its results are asked for
        assert second(lambda done, total: None) == [2]
    assert fake_pool == [("fork",), ("pool", 2), ("submit", -1), ("submit", -2),
                         ("stopped", 2)]


def test_only_process_chunks_are_shared(fake_pool):
    with execute.shared_workers(2):
        here = execute.start(execute.InOrder(), len, [[1, 2], [3]])
        assert fake_pool == []  # read here, when collected: no pool, no forkserver
        assert here(lambda done, total: None) == [2, 1]
    assert fake_pool == []
    # Outside the block a Processes executor starts its own pool when collected.
    collect = execute.start(execute.Processes(1), abs, [-7])
    assert fake_pool == []
    assert collect(lambda done, total: None) == [7]
    assert fake_pool[0] == ("pool", 1)


def test_a_chunk_error_is_raised_by_its_collect(fake_pool):
    with pytest.raises(ValueError, match="invalid literal"):
        with execute.shared_workers(2):
            first = execute.start(execute.Processes(2), int, ["1", "x"])
            execute.start(execute.Processes(2), int, ["2"])
            first(lambda done, total: None)


class Held:
    """A result whose lifetime a test can watch."""

    def __init__(self, value):
        self.value = value


def test_an_input_s_results_are_not_held_once_collected(fake_pool):
    import gc
    import weakref

    with execute.shared_workers(2):
        first = execute.start(execute.Processes(2), Held, [1, 2])
        execute.start(execute.Processes(2), Held, [3])  # still to collect
        results = first(lambda done, total: None)
        assert [r.value for r in results] == [1, 2]
        watched = weakref.ref(results[0])
        del results
        gc.collect()
        # The closure is still referenced (as the inputs' list holds it), its results not.
        assert first is not None and watched() is None


def test_chunks_collected_after_the_block_are_refused(fake_pool):
    with execute.shared_workers(2):
        late = execute.start(execute.Processes(2), abs, [-1])
    with pytest.raises(RuntimeError, match="after their shared_workers block ended"):
        late(lambda done, total: None)
    assert ("pool", 2) not in fake_pool  # no pool was started that nothing would stop


def test_another_thread_reads_with_its_own_pool(fake_pool):
    import threading

    seen = []
    with execute.shared_workers(2):
        def elsewhere():
            collect = execute.start(execute.Processes(1), abs, [-2])
            seen.append(fake_pool[:])  # not queued here: nothing happened yet
            seen.append(collect(lambda done, total: None))

        thread = threading.Thread(target=elsewhere)
        thread.start()
        thread.join()
    assert seen == [[], [2]]
    assert fake_pool[0] == ("pool", 1)  # its own pool, as outside any block


@pytest.mark.slow  # a real pool of two workers
def test_two_inputs_in_one_real_pool():
    with execute.shared_workers(2):
        first = execute.start(execute.Processes(2), abs, [-1, -2, -3])
        second = execute.start(execute.Processes(2), abs, [-4])
        assert second(lambda done, total: None) == [4]  # collected out of order: fine
        assert first(lambda done, total: None) == [1, 2, 3]


def _profile(tmp_path, label, us):
    return write_profile(tmp_path, label, lambda rank, step: [aclnn("Add", us, "8,8")],
                         ranks=(0,), steps=(1, 2)).path


def test_sides_started_before_either_is_assembled(tmp_path):
    base, new = _profile(tmp_path, "base", 3.0), _profile(tmp_path, "new", 4.0)
    said = []
    runs = read_sides([(base, None, "base"), (new, None, "new")], Options(), said.append)
    assert [run.summary.kernels for run in runs] == [2, 2]  # one Add a step, two steps
    assert said == [f"reading base: {base}", f"reading new: {new}",
                    "  base: 2 kernels, ranks [0]", "  new: 2 kernels, ranks [0]"]


def _unreadable(tmp_path, label):
    """A profile whose ranks are found, but whose kernel table fails when it is read."""
    path = _profile(tmp_path, label, 3.0)
    table = next(path.rglob("kernel_details.csv"))
    table.write_text("Name,Type\nMatMul,MatMul\n")  # no Duration(us): refused when read
    return path, table


def test_an_input_that_cannot_start_fails_after_the_ones_before_it(tmp_path):
    base = _profile(tmp_path, "base", 3.0)
    missing = tmp_path / "missing"
    with pytest.raises(InputError) as raised:
        read_sides([(base, None, "base"), (missing, None, "new")], Options())
    assert str(missing) in str(raised.value)
    # Both bad, the base only when read: the base's error, as when it is read first.
    bad, table = _unreadable(tmp_path, "bad")
    with pytest.raises(CannDiffError) as raised:
        read_sides([(bad, None, "base"), (missing, None, "new")], Options())
    assert str(table) in str(raised.value) and str(missing) not in str(raised.value)


def test_a_bug_in_a_later_input_also_waits_for_the_earlier_ones(tmp_path, monkeypatch):
    import cann_diff.pipeline as pipeline

    bad, table = _unreadable(tmp_path, "bad")
    real = pipeline.start_side

    def start_side(path, *args, **kwargs):
        if path == "buggy":
            raise RuntimeError("a bug")
        return real(path, *args, **kwargs)

    monkeypatch.setattr(pipeline, "start_side", start_side)
    with pytest.raises(CannDiffError) as raised:  # the base's own error comes first
        read_sides([(bad, None, "base"), ("buggy", None, "new")], Options())
    assert str(table) in str(raised.value)
    base = _profile(tmp_path, "base", 3.0)
    with pytest.raises(RuntimeError, match="a bug"):  # then the bug, in its turn
        read_sides([(base, None, "base"), ("buggy", None, "new")], Options())


def test_forkserver_started_says_whether_this_process_started_one():
    import subprocess
    import sys

    # In a fresh interpreter: this one's forkserver may have been started by other tests.
    code = ("from cann_diff import processes as p; before = p.forkserver_started(); "
            "started = p.start_forkserver(('cann_diff.costs',)); "
            "print(before, started, p.forkserver_started())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    assert out == ["False", "True", "True"]
