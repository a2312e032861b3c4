"""Charts drawn by worker processes and the command together (``chart_workers.ChartWorkers``).

The sharing is checked with fake pools whose workers take a known number of charts, on
fake charts whose "PNG" names the chart, the report and who drew it; then once with real
worker processes and once through the command line, both against charts drawn here.
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import threading
import time
from concurrent.futures import BrokenExecutor, Future
from types import MappingProxyType

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES

from cann_diff import cli
from cann_diff.pipeline import Options, diff
from cann_diff.render import chart_list, chart_workers, charts
from cann_diff.report import frozen, pickled

# Who is drawing, per thread: "worker" while a fake pool runs a task.
WHO = threading.local()
LOG: list[str] = []


def fake_figure(name: str):
    return lambda report: f"{name}:{report['tag']}"


def fake_png(figure: str) -> bytes:
    drawn = f"{figure}@{getattr(WHO, 'now', 'here')}"
    LOG.append(drawn)
    return drawn.encode()


@pytest.fixture
def fake_charts(monkeypatch):
    """Charts a, b, c, d, e and x; x has no data (never drawn). Returns the drawing log."""
    table = tuple((name, (lambda report, name=name: name != "x"), fake_figure(name))
                  for name in "abxcde")
    monkeypatch.setattr(charts, "CHARTS", table)
    monkeypatch.setattr(chart_list, "WANTED", tuple((name, drawn) for name, drawn, _ in table))
    monkeypatch.setattr(charts, "png_bytes", fake_png)
    monkeypatch.setattr(chart_workers, "_unpickled", None)
    LOG.clear()
    return LOG


@pytest.fixture
def fake_summary_chart(monkeypatch):
    """The candidates summary's chart as "<tag>@<who drew it>"."""
    from cann_diff.render import candidates

    monkeypatch.setattr(candidates, "candidates_images",
                        lambda summary: {"candidates_step": f"{summary['tag']}@"
                                         f"{getattr(WHO, 'now', 'here')}".encode()})


def _run(future: Future, func, args) -> None:
    WHO.now = "worker"
    try:
        future.set_result(func(*args))
    except Exception as error:  # noqa: BLE001 (handed back as a worker would)
        future.set_exception(error)
    finally:
        WHO.now = "here"


class FakePool:
    """A worker that draws the first ``quick`` charts at once; each one after those only
    once nothing is queued any more (this process has taken the rest), in a thread."""

    def __init__(self, quick: int) -> None:
        self.quick = quick
        self.submitted: list[str] = []
        self.workers: chart_workers.ChartWorkers | None = None  # whose queue the worker watches
        self.threads: list[threading.Thread] = []

    def submit(self, func, *args) -> Future:
        self.submitted.append(args[1])
        future: Future = Future()
        future.set_running_or_notify_cancel()
        if self.quick > 0:
            self.quick -= 1
            _run(future, func, args)
        else:
            thread = threading.Thread(target=self._later, args=(future, func, args))
            self.threads.append(thread)
            thread.start()
        return future

    def _later(self, future, func, args) -> None:
        deadline = time.monotonic() + 10
        while self.workers is not None and self.workers._queue and \
                time.monotonic() < deadline:
            time.sleep(0.001)
        _run(future, func, args)


def workers_on(pool: FakePool, count: int = 1) -> chart_workers.ChartWorkers:
    workers = chart_workers.ChartWorkers(pool, count)
    pool.workers = workers
    return workers


def here(log: list[str]) -> list[str]:
    return [entry for entry in log if entry.endswith("@here")]


def test_a_slow_worker_draws_only_the_chart_it_was_handed(fake_charts):
    report = {"tag": "r1"}
    images = workers_on(FakePool(0)).images(report)
    assert list(images) == ["a", "b", "c", "d", "e"]  # CHARTS order, x has no data
    assert images["a"] == b"a:r1@worker" and images["b"] == b"b:r1@here"
    # From the last back here; a, handed out first, drawn by the worker meanwhile.
    assert here(fake_charts) == ["e:r1@here", "d:r1@here", "c:r1@here", "b:r1@here"]
    assert sorted(fake_charts) == sorted([*here(fake_charts), "a:r1@worker"])


def test_a_worker_is_handed_the_next_chart_each_time_it_finishes_one(fake_charts):
    report = {"tag": "r1"}
    pool = FakePool(2)
    images = workers_on(pool).images(report)
    # a and b drawn at once, so c was handed out after them; d and e were still queued.
    assert pool.submitted == ["a", "b", "c"]
    assert images == {"a": b"a:r1@worker", "b": b"b:r1@worker", "c": b"c:r1@worker",
                      "d": b"d:r1@here", "e": b"e:r1@here"}
    assert here(fake_charts) == ["e:r1@here", "d:r1@here"]


def test_no_more_charts_are_out_than_workers(fake_charts):
    pool = FakePool(0)
    workers = workers_on(pool, 2)
    report = {"tag": "r1"}
    workers.offer(report)
    assert pool.submitted == ["a", "b"]  # c, d, e wait for a worker to be done
    images = workers.images(report)
    assert pool.submitted == ["a", "b"]  # taken here before either worker was done
    assert [images[name] for name in "abc"] == [b"a:r1@worker", b"b:r1@worker", b"c:r1@here"]


def test_offered_reports_keep_their_own_charts(fake_charts):
    first, second = {"tag": "r1"}, {"tag": "r2"}
    pool = FakePool(7)  # all five of r1 at once, then a and b of r2, and c of r2 handed out
    workers = workers_on(pool)
    workers.offer(first)
    workers.offer(second)
    workers.offer(first)  # offered once only
    assert pool.submitted == ["a", "b", "c", "d", "e", "a", "b", "c"]
    assert workers.images(second) == {"a": b"a:r2@worker", "b": b"b:r2@worker",
                                      "c": b"c:r2@worker", "d": b"d:r2@here",
                                      "e": b"e:r2@here"}
    assert workers.images(first) == {name: f"{name}:r1@worker".encode() for name in "abcde"}
    assert workers._offered == {} and not workers._queue  # nothing held once written


def test_a_chart_that_fails_in_a_worker_fails_the_report(fake_charts, monkeypatch):
    def broken(report):
        raise ValueError("no such font")

    table = list(charts.CHARTS)
    table[1] = ("b", table[1][1], broken)
    monkeypatch.setattr(charts, "CHARTS", tuple(table))
    pool = FakePool(2)
    with pytest.raises(ValueError, match="no such font"):
        workers_on(pool).images({"tag": "r1"})
    assert pool.submitted == ["a", "b"]  # nothing handed out after the failure
    assert fake_charts == ["a:r1@worker", "e:r1@here", "d:r1@here", "c:r1@here"]


def test_a_chart_lost_with_a_dead_worker_is_drawn_here(fake_charts):
    class Broken(FakePool):
        def submit(self, func, *args):
            self.submitted.append(args[1])
            future: Future = Future()
            future.set_exception(BrokenExecutor("a worker died"))  # killed by the OOM killer
            return future

    pool = Broken(0)
    images = workers_on(pool).images({"tag": "r1"})
    assert pool.submitted == ["a"]  # the pool is broken: nothing more handed out
    assert images == {name: f"{name}:r1@here".encode() for name in "abcde"}
    assert fake_charts == ["e:r1@here", "d:r1@here", "c:r1@here", "b:r1@here", "a:r1@here"]


def test_a_pool_that_takes_nothing_more_leaves_the_charts_here(fake_charts):
    class ShutDown:
        def submit(self, func, *args):
            raise RuntimeError("cannot schedule new futures after shutdown")

    images = chart_workers.ChartWorkers(ShutDown()).images({"tag": "r1"})
    assert images == {name: f"{name}:r1@here".encode() for name in "abcde"}


def test_a_pickled_report_keeps_its_read_only_views_and_nothing_else_changes():
    value = {"meta": frozen({"sources": {"kernels": "kernel_details.csv"}}), "n": 3}
    back = pickle.loads(pickled(value))
    assert back == {"meta": {"sources": {"kernels": "kernel_details.csv"}}, "n": 3}
    assert isinstance(back["meta"], MappingProxyType)
    assert isinstance(back["meta"]["sources"], MappingProxyType)
    with pytest.raises(TypeError):  # the process's own pickling of a view is untouched
        pickle.dumps(MappingProxyType({}))


@pytest.mark.parametrize(("jobs", "wanted", "server", "expected"), [
    (1, True, True, 0),  # one job: no worker
    (2, False, True, 0),  # --no-charts
    (2, True, True, 2),  # as many as the jobs: the command draws none itself
    (3, True, False, 0),  # no forkserver (macOS, Windows): drawn here
    (64, True, True, cli.CHART_WORKERS_MAX),
])
def test_chart_workers_come_from_the_jobs(monkeypatch, jobs, wanted, server, expected):
    from cann_diff import processes

    started = []
    monkeypatch.setattr(processes, "start_forkserver",
                        lambda preload: started.append(preload) or server)
    assert cli._chart_workers(jobs, wanted) == expected
    assert started == ([cli.CHART_PRELOAD] if jobs > 1 and wanted else [])


def test_at_most_one_worker_per_chart():
    assert cli.CHART_WORKERS_MAX == len(charts.CHARTS)


class ThreadPool:
    """Workers that draw each chart at once, each in its own thread, a little later."""

    def __init__(self) -> None:
        self.submitted: list[str] = []
        self.running = 0
        self.most = 0  # the most charts drawn at the same time
        self.lock = threading.Lock()

    def submit(self, func, *args) -> Future:
        self.submitted.append(args[1] if len(args) > 1 else func.__name__)
        future: Future = Future()
        future.set_running_or_notify_cancel()
        threading.Thread(target=self._draw, args=(future, func, args)).start()
        return future

    def _draw(self, future, func, args) -> None:
        with self.lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.005)
        with self.lock:
            self.running -= 1
        _run(future, func, args)


def test_without_drawing_here_the_workers_draw_every_chart(fake_charts):
    pool = ThreadPool()
    workers = chart_workers.ChartWorkers(pool, 2, draw_here=False)
    first, second = {"tag": "r1"}, {"tag": "r2"}
    workers.offer(first)
    workers.offer(second)
    assert workers.images(first) == {name: f"{name}:r1@worker".encode() for name in "abcde"}
    assert workers.images(second) == {name: f"{name}:r2@worker".encode() for name in "abcde"}
    assert here(fake_charts) == []
    assert pool.submitted == list("abcde") * 2 and pool.most <= 2


def test_without_drawing_here_a_broken_pool_leaves_the_charts_here(fake_charts):
    class Broken:
        submitted = 0

        def submit(self, func, *args):
            Broken.submitted += 1
            future: Future = Future()
            future.set_exception(BrokenExecutor("a worker died"))
            return future

    images = chart_workers.ChartWorkers(Broken(), 2, draw_here=False).images({"tag": "r1"})
    assert images == {name: f"{name}:r1@here".encode() for name in "abcde"}
    assert Broken.submitted == 1  # the first loss stops the hand-out


def test_the_summary_chart_goes_to_a_worker_unless_the_pool_is_broken(fake_summary_chart):
    pool = ThreadPool()
    workers = chart_workers.ChartWorkers(pool, 2, draw_here=False)
    assert workers.summary_images({"tag": "s"}) == {"candidates_step": b"s@worker"}
    assert pool.submitted == ["draw_summary_pickled"]
    workers._stopped = True  # a worker died earlier
    assert workers.summary_images({"tag": "s"}) == {"candidates_step": b"s@here"}
    drawing_here = chart_workers.ChartWorkers(pool, 1)
    assert drawing_here.summary_images({"tag": "s"}) == {"candidates_step": b"s@here"}


def test_an_offered_summary_is_drawn_after_the_reports_charts_before_it_is_asked_for(
        fake_charts, fake_summary_chart):
    # The command offers the summary before it writes the reports: the first worker left
    # without a report's chart draws it, not the one that is free once the last report is
    # written.
    pool = ThreadPool()
    workers = chart_workers.ChartWorkers(pool, 2, draw_here=False)
    first, second, summary = {"tag": "r1"}, {"tag": "r2"}, {"tag": "s"}
    workers.offer(first)
    workers.offer(second)
    workers.offer_summary(summary)
    workers.offer_summary(summary)  # once
    deadline = time.monotonic() + 10
    while "draw_summary_pickled" not in pool.submitted and time.monotonic() < deadline:
        time.sleep(0.001)
    # handed out last, and before any report's images or the summary's were asked for
    assert pool.submitted == list("abcde") * 2 + ["draw_summary_pickled"]
    assert workers.images(first) == {name: f"{name}:r1@worker".encode() for name in "abcde"}
    assert workers.images(second) == {name: f"{name}:r2@worker".encode() for name in "abcde"}
    assert workers.summary_images(summary) == {"candidates_step": b"s@worker"}
    assert pool.most <= 2 and here(fake_charts) == []


def test_a_summary_offered_to_a_stopped_pool_is_drawn_here(fake_summary_chart):
    pool = ThreadPool()
    workers = chart_workers.ChartWorkers(pool, 2, draw_here=False)
    workers._stopped = True  # a worker died while the reports' charts were drawn
    summary = {"tag": "s"}
    workers.offer_summary(summary)
    assert workers.summary_images(summary) == {"candidates_step": b"s@here"}
    assert pool.submitted == [] and workers._offered == {}


@pytest.mark.slow
def test_with_chart_workers_the_command_imports_no_matplotlib(tmp_path):
    # Every chart, the summary's too, is drawn by the workers: the command never pays
    # matplotlib's import (0.5 s) itself.
    runs = [str(EXAMPLES / name) for name in ("cann7.0.1.3", "cann8.0.RC2", "cann8.0.RC2-mc2")]
    args = [*runs, "-o", str(tmp_path / "out"), "--jobs", "2", "--quiet"]
    code = ("import sys\n"
            "from click.testing import CliRunner\n"
            "from cann_diff import cli\n"
            "if __name__ == '__main__':\n"
            f"    result = CliRunner().invoke(cli.main, {args!r})\n"
            "    print(result.exit_code, 'matplotlib' in sys.modules)\n")
    script = tmp_path / "probe.py"
    script.write_text(code)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-500:]
    assert done.stdout.split()[-2:] == ["0", "False"]
    assert len(list((tmp_path / "out").rglob("*.png"))) >= 13


@pytest.mark.slow
def test_real_workers_draw_the_same_pngs():
    from cann_diff.processes import worker_pool

    report = diff(EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2",
                  Options(jobs=1)).report
    alone = charts.chart_images(report)
    with worker_pool(1, cli.CHART_PRELOAD) as pool:
        workers = chart_workers.ChartWorkers(pool, 1)
        workers.offer(report)
        shared = workers.images(report)
    assert list(shared) == list(alone) and len(alone) >= 6
    assert shared == alone  # byte for byte


@pytest.mark.slow
def test_the_command_writes_the_same_files_with_chart_workers_or_without(tmp_path,
                                                                         monkeypatch):
    runs = [EXAMPLES / name for name in ("cann7.0.1.3", "cann8.0.RC2", "cann8.0.RC2-mc2")]
    outs = {}
    for jobs in ("1", "2"):
        # The same "-o out" from two directories: the command line the reports quote
        # (which leaves --jobs out) is the same.
        here = tmp_path / f"j{jobs}"
        here.mkdir()
        monkeypatch.chdir(here)
        outs[jobs] = here / "out"
        result = CliRunner().invoke(cli.main, [*map(str, runs), "-o", "out",
                                               "--jobs", jobs, "--quiet"])
        assert result.exit_code == 0, result.output
    files = sorted(p.relative_to(outs["1"]) for p in outs["1"].rglob("*") if p.is_file())
    assert sorted(p.relative_to(outs["2"]) for p in outs["2"].rglob("*") if p.is_file()) \
        == files
    assert sum(p.suffix == ".png" for p in files) >= 13  # 2 reports' charts and the summary's
    for path in files:
        assert (outs["1"] / path).read_bytes() == (outs["2"] / path).read_bytes(), path


def test_every_chart_the_list_names_has_a_figure_and_no_other():
    assert [name for name, _ in chart_list.WANTED] == list(charts.FIGURES)


def test_handing_charts_out_imports_no_matplotlib():
    # The command offers its first report before it draws anything itself.
    code = ("import sys, cann_diff.pipeline, cann_diff.render.chart_workers\n"
            "print(sorted(m for m in sys.modules if m.split('.')[0] == 'matplotlib'))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"
