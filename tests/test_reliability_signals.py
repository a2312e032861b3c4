"""Ctrl-C and SIGTERM with worker processes: one line, exit 130 / 143, nothing left behind.

Real processes, real signals, sent to the whole process group as a terminal (Ctrl-C) or a
CI runner (SIGTERM) sends them. Measured before: ``BASE NEW1 NEW2`` read in side workers,
SIGINT to the group: exit 130, but "cann-diff: interrupted" was followed by 22 lines of
"Process ForkServerProcess-2: Traceback … KeyboardInterrupt" (or the forkserver's own
traceback, interrupted while it imported); rank workers that got SIGINT 0.2 s before
the parent hung the run (5 of 5 tries). Now workers ignore SIGINT and the parent stops
them; no process of the group, no temporary directory and no stage is left.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import EXAMPLES, ROOT
from profiles import aclnn, write_profile

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                       reason="needs /proc to find the worker processes of a run"),
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals and process groups"),
]

# The run takes Ctrl-C as in a terminal even when whatever started the tests ignores SIGINT
# (a background job of a script, nohup): a child inherits the ignoring, and Python then
# installs no KeyboardInterrupt handler, so every SIGINT test would see a run go on to 0.
MAIN = ("import signal; signal.signal(signal.SIGINT, signal.default_int_handler)\n"
        "from cann_diff.cli import main; import sys; main(sys.argv[1:], prog_name='cann-diff')\n")
# The real command; inputs this small are read side by side only with the size floor off.
SIDE_BY_SIDE = ("import cann_diff.costs as costs\n"
                "costs.SIDE_PROCESS_MIN_S = 0\n" + MAIN)
# Ranks this small are spread over worker processes only when any saving pays for a pool
# (``Limits.rank_pool_min_s``, carried by the options into side workers too).
SPREAD = ("import dataclasses, cann_diff.pipeline as pipeline\n"
          "real = pipeline.diff_candidates\n"
          "def spread(base, news, options, *args, **kwargs):\n"
          "    limits = dataclasses.replace(options.limits, rank_pool_min_s=-1.0)\n"
          "    return real(base, news, dataclasses.replace(options, limits=limits), *args,\n"
          "                **kwargs)\n"
          "pipeline.diff_candidates = spread\n")
COMMAND = SPREAD + MAIN
RANKS = range(40)


@pytest.fixture(scope="module")
def clusters(tmp_path_factory) -> tuple[Path, Path]:
    """Two 40-rank runs (2 ops × 200 a step, 4 steps), enough to keep workers busy."""
    root = tmp_path_factory.mktemp("clusters")
    layer = [aclnn("RmsNorm", 100.0, "4096,2048;2048", "AI_VECTOR_CORE"),
             aclnn("MatMulV3", 600.0, "4096,2048;2048,4096")]
    return tuple(write_profile(root, label, layer * 200, ranks=RANKS, steps=(1, 2, 3, 4),
                               noise=0.01, seed=seed).path
                 for label, seed in (("base", 1), ("new", 2)))


def processes_of(group: int) -> list[tuple[int, int, str]]:
    """(pid, parent pid, command line) of every live process in the process group."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            fields = stat.rsplit(")", 1)[1].split()
            command = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if int(fields[2]) == group and fields[0] != "Z":
            found.append((int(entry), int(fields[1]), command.decode(errors="replace")))
    return found


def workers_of(run: subprocess.Popen) -> list[int]:
    """The run's own pool workers: forked by the forkserver the run started."""
    group = processes_of(run.pid)
    servers = {pid for pid, parent, command in group
               if parent == run.pid and "forkserver" in command}
    return [pid for pid, parent, _ in group if parent in servers]


class Run:
    """``cann-diff ARGS`` in its own process group, its temporary files in ``tmp``."""

    def __init__(self, tmp_path: Path, temp: Path, code: str, *args: str | Path):
        self.temp = temp
        self.out = tmp_path / "out"
        self.process = subprocess.Popen(
            [sys.executable, "-c", code, *map(str, args), "-o", str(self.out), "-q",
             "--no-charts"],
            cwd=ROOT, env={**os.environ, "TMPDIR": str(self.temp), "CANN_DIFF_DEBUG": ""},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)

    def wait_for(self, enough, timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while not enough():
            assert self.process.poll() is None, self.process.communicate()
            assert time.monotonic() < deadline, "the workers never started"
            time.sleep(0.02)

    def wait_for_processes(self, count: int) -> None:
        """Until the group holds ``count`` processes beside the run itself."""
        self.wait_for(lambda: len(processes_of(self.process.pid)) > count)

    def wait_for_workers(self, count: int) -> list[int]:
        """Until the run's forkserver has forked ``count`` workers; their pids."""
        self.wait_for(lambda: len(workers_of(self.process)) >= count)
        return workers_of(self.process)

    def finish(self, timeout_s: float = 60) -> tuple[int, str, float]:
        """Exit status, stderr and the seconds it took; the group is killed if it hangs."""
        started = time.monotonic()
        try:
            _, stderr = self.process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.communicate()
            pytest.fail(f"still running {timeout_s:g} s after the signal: it hangs")
        return self.process.returncode, stderr, time.monotonic() - started

    def assert_nothing_left(self) -> None:
        deadline = time.monotonic() + 15  # the forkserver leaves once its clients are gone
        while processes_of(self.process.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processes_of(self.process.pid) == []
        assert list(self.temp.iterdir()) == []  # no worker directory, no db copy
        assert not self.out.exists() or not [p for p in self.out.iterdir()
                                             if p.name.startswith(".cann-diff-")]

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.communicate()


@pytest.fixture
def started(tmp_path):
    # A short TMPDIR of its own: a forkserver's socket lives there, and a socket's path may
    # have at most 107 bytes (pytest's tmp_path under xdist comes close on its own).
    temp = Path(tempfile.mkdtemp(prefix="cdt-", dir="/tmp" if Path("/tmp").is_dir() else None))
    runs: list[Run] = []
    yield lambda code, *args: runs.append(Run(tmp_path, temp, code, *args)) or runs[-1]
    for run in runs:
        run.kill()
    shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_the_group_signalled_while_side_workers_read(started, signum, code):
    run = started(SIDE_BY_SIDE, EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2",
                  EXAMPLES / "cann8.0.RC2-mc2", "--jobs", "4")
    run.wait_for_workers(2)  # the two side workers (three inputs, two at a time)
    os.killpg(run.process.pid, signum)
    status, stderr, took = run.finish()
    assert status == code, stderr
    assert stderr.splitlines() == ["cann-diff: interrupted"]  # no worker's traceback
    assert took < 15
    run.assert_nothing_left()


def test_rank_workers_interrupted_before_the_parent_do_not_hang_it(started, clusters):
    run = started(COMMAND, *clusters, "--jobs", "2")
    workers = run.wait_for_workers(2)
    for worker in workers:  # the terminal's SIGINT, reaching the workers first
        os.kill(worker, signal.SIGINT)
    time.sleep(0.2)
    assert run.process.poll() is None  # the workers ignored it and read on
    assert set(workers) <= set(workers_of(run.process))
    os.kill(run.process.pid, signal.SIGINT)
    status, stderr, took = run.finish()
    assert status == 130, stderr
    assert stderr.splitlines() == ["cann-diff: interrupted"]
    assert took < 15  # hung in 5 of 5 tries before
    run.assert_nothing_left()


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_side_workers_with_their_own_rank_workers_all_stop(started, clusters, signum, code):
    """Four jobs: each side in a process that reads its 40 ranks in two more."""
    run = started(SPREAD + SIDE_BY_SIDE, *clusters, "--jobs", "4")
    # resource tracker, forkserver, two side workers, then a side's forkserver and workers
    run.wait_for_processes(7)
    os.killpg(run.process.pid, signum)
    status, stderr, took = run.finish()
    assert status == code, stderr
    assert stderr.splitlines() == ["cann-diff: interrupted"]
    assert took < 20
    run.assert_nothing_left()


def test_a_long_tmpdir_leaves_the_workers_a_socket(clusters, tmp_path):
    """Side workers and their rank workers under a TMPDIR of 120 bytes and more.

    A forkserver's socket lies in multiprocessing's directory below TMPDIR; past 107 bytes
    its bind failed, exit 3 "internal error: OSError: AF_UNIX path too long" (TMPDIR of 77
    bytes and more). Now that directory alone goes to /tmp; the workers' files stay below
    TMPDIR, and are removed.
    """
    temp = tmp_path / ("t" * max(1, 120 - len(str(tmp_path))))
    temp.mkdir()
    run = Run(tmp_path, temp, SIDE_BY_SIDE, *clusters, "--jobs", "4")
    try:
        status, stderr, _ = run.finish(120)
        assert status == 0, stderr
        assert (run.out / "report.json").is_file()
        run.assert_nothing_left()
    finally:
        run.kill()


DASK_CLUSTER = """
import pathlib, sys, time
import cann_diff.read as ranks
from distributed import LocalCluster

real = ranks.read_and_reduce_many
def stalled(*args, **kwargs):  # a rank that takes its time: the run is surely under way
    pathlib.Path(sys.argv[1]).touch()
    time.sleep(0.5)
    return real(*args, **kwargs)
ranks.read_and_reduce_many = stalled

if __name__ == "__main__":
    with LocalCluster(n_workers=1, threads_per_worker=2, processes=False, protocol="tcp",
                      dashboard_address=None) as cluster:
        print(cluster.scheduler_address, flush=True)
        sys.stdin.read()  # until the test closes it
"""


def test_an_interrupt_while_a_dask_cluster_reads(started, clusters, tmp_path):
    pytest.importorskip("distributed")
    reading = tmp_path / "reading"
    cluster = subprocess.Popen([sys.executable, "-c", DASK_CLUSTER, str(reading)], cwd=ROOT,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        address = cluster.stdout.readline().strip()
        assert address.startswith("tcp://"), address
        run = started(COMMAND, *clusters, "--scheduler", address, "--scheduler-timeout", "30")
        deadline = time.monotonic() + 60
        while not reading.exists():
            assert run.process.poll() is None, run.process.communicate()
            assert time.monotonic() < deadline, "the cluster never started reading"
            time.sleep(0.02)
        os.killpg(run.process.pid, signal.SIGINT)
        status, stderr, took = run.finish()
        assert status == 130, stderr
        assert stderr.splitlines() == ["cann-diff: interrupted"]
        assert took < 20
        run.assert_nothing_left()
        assert cluster.poll() is None  # the shared cluster is left running
    finally:
        cluster.stdin.close()
        try:
            cluster.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(cluster.pid, signal.SIGKILL)
            cluster.wait()
