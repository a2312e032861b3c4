"""Scale-out: a real ``dask scheduler`` and two ``dask worker`` processes on loopback.

A 200-rank pair read through ``--scheduler`` gives the report.json of the local run (all
but the invocation), and a corrupt rank is exit 2 with one line naming its file on both
paths. The inputs are given relative to the command's working directory, which is not
the workers': paths must reach them absolute. The cluster is this test's own (an OS-chosen
port, written to a scheduler file), torn down when the module ends, also on failure; the
scheduler stops itself after ``IDLE_S`` without clients, the workers once it is gone.

Each rank runs MatMul 1000 µs, FlashAttention 800 µs and an AllReduce
300 µs in each of two steps; the new side has 1 % noise and rank 7's MatMul 1.5× slower.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT
from profiles import Comm, aclnn, write_profile

pytest.importorskip("distributed", reason="the scale-out check needs Dask: pip install "
                                          "'cann-diff[dask]'")

pytestmark = pytest.mark.slow

RANKS = range(200)
BAD_RANK = 17
# Seconds for the cluster to come up, and for one command to finish.
START_S = 60
RUN_S = 180
IDLE_S = 600
STOP_S = 10


def schedule(slow_rank: int | None = None):
    def ops(rank, step):
        matmul = 1000.0 * (1.5 if rank == slow_rank else 1.0)
        return [aclnn("MatMulV3", matmul, "4096,4096;4096,4096"),
                aclnn("FlashAttentionScore", 800.0, "1,16,4096,128", core="MIX_AIC"),
                Comm("allReduce", 300.0)]
    return ops


@pytest.fixture(scope="module")
def pair(tmp_path_factory) -> Path:
    """``base``, ``new`` and ``bad`` (new with one unreadable kernel_details.csv) in one root."""
    root = tmp_path_factory.mktemp("scale_out")
    write_profile(root, "base", schedule(), ranks=RANKS, steps=(1, 2))
    write_profile(root, "new", schedule(slow_rank=7), ranks=RANKS, steps=(1, 2), noise=0.01,
                  seed=3)
    shutil.copytree(root / "new", root / "bad")
    rank = next((root / "bad").glob(f"node0_{4000 + BAD_RANK}_*"))
    kernels = rank / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    text = kernels.read_bytes()  # cut off in its header, then garbage: a write that failed
    kernels.write_bytes(text[:text.index(b"\n") // 2] + b"\x00\xff\xfe\x00")
    return root


def _stop(processes: list[subprocess.Popen]) -> None:
    """Each process group started here, the last first (workers, then their scheduler).

    SIGTERM, then SIGKILL after ``STOP_S``. A worker whose scheduler closed at the same
    moment could wait on the closed stream for good.
    """
    for process in reversed(processes):
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(STOP_S)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(STOP_S)


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory) -> str:
    """The address of a scheduler with two single-threaded worker processes."""
    from distributed import Client

    home = tmp_path_factory.mktemp("cluster")  # the workers' cwd: not the command's
    address_file = home / "scheduler.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}  # this checkout, whatever is installed
    dask = [sys.executable, "-m", "dask"]
    processes: list[subprocess.Popen] = []

    def start(*args: str, log: str) -> None:
        with open(home / log, "wb") as handle:
            processes.append(subprocess.Popen([*dask, *args], cwd=home, env=env,
                                              stdout=handle, stderr=subprocess.STDOUT,
                                              start_new_session=True))

    try:
        start("scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
              "--scheduler-file", str(address_file), "--idle-timeout", f"{IDLE_S}s",
              log="scheduler.log")
        deadline = time.monotonic() + START_S
        while not address_file.exists() and processes[0].poll() is None \
                and time.monotonic() < deadline:
            time.sleep(0.1)
        assert address_file.exists(), (home / "scheduler.log").read_text()
        time.sleep(0.2)  # the file is written whole, then read
        address = json.loads(address_file.read_text())["address"]
        for number in (1, 2):
            start("worker", address, "--nworkers", "1", "--nthreads", "1", "--no-nanny",
                  "--no-dashboard", "--death-timeout", "30",
                  "--local-directory", str(home / f"worker{number}"), log=f"worker{number}.log")
        with Client(address, timeout=START_S, set_as_default=False) as client:
            client.wait_for_workers(2, timeout=START_S)
        yield address
    finally:
        _stop(processes)


def cann_diff(root: Path, *args: str) -> subprocess.CompletedProcess:
    """The command run in ``root`` on the relative paths it is given."""
    return subprocess.run([sys.executable, "-m", "cann_diff", *args, "-q", "--no-charts",
                           "--no-html"], cwd=root, env={**os.environ, "PYTHONPATH": str(ROOT)},
                          capture_output=True, text=True, timeout=RUN_S)


def without_invocation(report: dict) -> dict:
    return {key: value for key, value in report.items() if key != "invocation"}


def test_scheduler_report_is_the_local_one(pair, scheduler):
    local = cann_diff(pair, "base", "new", "-o", "local")
    assert local.returncode == 0, local.stderr
    remote = cann_diff(pair, "base", "new", "-o", "remote", "--scheduler", scheduler)
    assert remote.returncode == 0, remote.stderr
    mine = json.loads((pair / "local" / "report.json").read_text())
    theirs = json.loads((pair / "remote" / "report.json").read_text())
    assert len(mine["ranks"]) == 200 and mine["base"]["path"] == "base"
    assert any(f["id"] == "slow-rank" and f["data"]["rank"] == 7 for f in mine["findings"])
    assert without_invocation(theirs) == without_invocation(mine)


@pytest.mark.parametrize("where", ["local", "scheduler"])
def test_a_bad_rank_is_one_line_naming_its_file(pair, scheduler, where):
    extra = ["--scheduler", scheduler] if where == "scheduler" else []
    done = cann_diff(pair, "base", "bad", "-o", f"bad-{where}", *extra)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("cann-diff: error: "), done.stderr
    rank = next((pair / "bad").glob(f"node0_{4000 + BAD_RANK}_*")).name
    assert f"bad/{rank}/ASCEND_PROFILER_OUTPUT/kernel_details.csv: " in lines[0]
    assert "internal error" not in lines[0]
