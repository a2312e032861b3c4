"""Option values, MPLBACKEND and the Dask scheduler: one line and exit 2, never a hang.

Measured before: ``--alpha nan``, ``--threshold nan%`` and ``--fail-on-regression nan``
were accepted (nan compares false with every bound, so the gate never fails);
``MPLBACKEND=no_such_backend`` ended in matplotlib's ValueError (exit 3); ``--scheduler
not-an-address`` and ``ftp://127.0.0.1:1`` printed their error and then hung 60 s in
distributed's ``Client.__del__`` ("Exception ignored … TimeoutError"); a port that
accepts and never answers ran until killed (260 s); a port answering HTTP 400 gave exit 3
MemoryError and the same hang; an unreachable scheduler took 30 s.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES, ROOT

from cann_diff.cli import main
from cann_diff.errors import InputError
from cann_diff.read import execute

BASE, NEW = EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2"


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("cann-diff: error: ") and "Traceback" not in stderr
    return lines[0]


# ---------------------------------------------------------------- numeric options

@pytest.mark.parametrize("args, line", [
    (["--alpha", "nan"], "--alpha: 'nan' is not a finite number"),
    (["--alpha", "inf"], "--alpha: 'inf' is not a finite number"),
    (["--alpha", "0"], "--alpha: must lie strictly between 0 and 1"),
    (["--alpha", "1"], "--alpha: must lie strictly between 0 and 1"),
    (["--alpha", "x"], "--alpha: 'x' is not a number (e.g. 0.05)"),
    (["--threshold", "nan%"], "--threshold: 'nan%' is not a finite number"),
    (["--threshold", "-1"], "--threshold: must not be negative"),
    (["--step-threshold", "inf%"], "--step-threshold: 'inf%' is not a finite number"),
    (["--fail-on-regression", "nan"], "--fail-on-regression: 'nan' is not a finite number"),
    (["--fail-on-regression", "-3"], "--fail-on-regression: must not be negative"),
    (["--top", "0"], "--top: must be at least 1"),
    (["--top", "2.5"], "--top: '2.5' is not a whole number (e.g. 4)"),
    (["--jobs", "0"], "--jobs: must be at least 1"),
    (["-j", "nan"], "--jobs: 'nan' is not a whole number (e.g. 4)"),
    (["--scheduler-timeout", "0"], "--scheduler-timeout: must be more than 0 seconds"),
    (["--scheduler-timeout", "nan"], "--scheduler-timeout: 'nan' is not a finite number"),
    (["--scheduler-timeout", "-1"], "--scheduler-timeout: must be more than 0 seconds"),
])
def test_a_numeric_option_out_of_range_is_one_line_exit_2(args, line, tmp_path):
    result = CliRunner().invoke(main, [str(BASE), str(NEW), "-o", str(tmp_path / "out"),
                                       *args])
    assert result.exit_code == 2, result.output
    assert one_error_line(result.stderr) == f"cann-diff: error: {line}"
    assert not (tmp_path / "out").exists()  # refused before anything was read or made


@pytest.mark.slow
def test_values_in_range_are_taken_as_given(tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(BASE), str(NEW), "-o", str(out), "-q",
                                       "--no-charts", "--alpha", "0.01", "--threshold", "3%",
                                       "--top", "2", "-j", "1", "--fail-on-regression", "0"])
    assert result.exit_code == 1, result.output  # the gate at 0 %: +8.0 % fails it
    assert "gate failed" in result.stderr


# ---------------------------------------------------------------- MPLBACKEND

@pytest.mark.slow
def test_an_unknown_mplbackend_falls_back_to_agg_with_one_warning(tmp_path):
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "cann_diff", str(BASE), str(NEW), "-o",
                           str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "MPLBACKEND": "no_such_backend"})
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "MPLBACKEND" in line]
    assert warned == ["cann-diff: warning: MPLBACKEND='no_such_backend' is not a matplotlib "
                      "backend; charts are drawn with Agg"]
    assert "Traceback" not in done.stderr
    assert (out / "step_breakdown.png").read_bytes()[:4] == b"\x89PNG"


# ---------------------------------------------------------------- --scheduler

@pytest.mark.parametrize("address, problem", [
    ("not-an-address", "no port (1-65535) after the host"),
    ("ftp://127.0.0.1:1", "ftp:// is not a Dask scheduler's scheme"),
    ("tcp://127.0.0.1:0", "no port (1-65535) after the host"),
    ("tcp://127.0.0.1:70000", "no port (1-65535) after the host"),
    ("tcp://:8786", "'' is not a host name or IP address"),
    ("tcp://bad host:8786", "'bad host' is not a host name or IP address"),
    ("tcp://[::zz]:8786", "[::zz] is not an IPv6 address"),
    ("inproc://", "no address after inproc://"),
])
def test_a_malformed_scheduler_address_is_named(address, problem):
    assert execute.scheduler_address_problem(address).startswith(problem)


@pytest.mark.parametrize("address", ["tcp://scheduler:8786", "tls://10.0.0.1:8786",
                                     "127.0.0.1:8786", "tcp://[::1]:8786",
                                     "inproc://192.0.2.2/1234/1", "TCP://node-7.cluster:1"])
def test_a_well_formed_scheduler_address_passes(address):
    assert execute.scheduler_address_problem(address) is None


def cann_diff_process(*args: str, timeout: float = 60) -> tuple[subprocess.CompletedProcess,
                                                                float]:
    """The real command, as a shell runs it: its exit status, stderr and how long it took."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "cann_diff", str(BASE), str(NEW), "-q",
                           "--no-charts", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)
    return done, time.monotonic() - started


@pytest.mark.slow
@pytest.mark.parametrize("address", ["not-an-address", "ftp://127.0.0.1:1"])
def test_a_malformed_address_exits_2_at_once_and_without_a_hang(address, tmp_path):
    pytest.importorskip("distributed")
    done, took = cann_diff_process("--scheduler", address, "-o", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    line = one_error_line(done.stderr)
    assert line.startswith(f"cann-diff: error: --scheduler: {address!r}: ")
    assert took < 20  # was 60 s in Client.__del__, then "Exception ignored … TimeoutError"


class Server:
    """A loopback TCP server that is no Dask scheduler: silent, or answering HTTP 400."""

    def __init__(self, answer: bytes | None):
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.answer, self.held = answer, []
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def address(self) -> str:
        return f"tcp://127.0.0.1:{self.socket.getsockname()[1]}"

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.socket.accept()
            except OSError:
                return
            if self.answer is None:
                self.held.append(connection)  # accepted, never answered
            else:
                connection.recv(64)
                connection.sendall(self.answer)
                connection.close()

    def close(self) -> None:
        self.socket.close()
        for connection in self.held:
            connection.close()


@pytest.fixture
def server(request):
    server = Server(request.param)
    yield server
    server.close()


@pytest.mark.slow
@pytest.mark.parametrize("server", [None], indirect=True, ids=["silent"])
def test_a_server_that_never_answers_is_given_up_after_the_timeout(server, tmp_path):
    pytest.importorskip("distributed")
    done, took = cann_diff_process("--scheduler", server.address, "--scheduler-timeout", "1",
                                   "-o", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr
    assert one_error_line(done.stderr) == (f"cann-diff: error: Dask scheduler {server.address} "
                                           "did not answer within 1 s (--scheduler-timeout)")
    assert took < 20  # was killed after 260 s


@pytest.mark.slow
@pytest.mark.parametrize("server", [b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"],
                         indirect=True, ids=["http-400"])
def test_a_server_that_is_not_dask_is_exit_2_naming_the_address(server, tmp_path):
    pytest.importorskip("distributed")
    done, took = cann_diff_process("--scheduler", server.address, "--scheduler-timeout", "5",
                                   "-o", str(tmp_path / "out"))
    assert done.returncode == 2, done.stderr  # was 3, MemoryError, then a 60 s hang
    assert one_error_line(done.stderr) == (
        f"cann-diff: error: {server.address} is not a Dask scheduler: it does not answer in "
        "Dask's protocol; give the scheduler's address, e.g. tcp://scheduler:8786")
    assert took < 20


@pytest.mark.slow
def test_a_refused_port_is_unreachable_within_the_timeout():
    pytest.importorskip("distributed")
    with socket.create_server(("127.0.0.1", 0)) as free:
        port = free.getsockname()[1]  # closed again: nothing listens there now
    started = time.monotonic()
    with pytest.raises(InputError, match=f"cannot reach Dask scheduler tcp://127.0.0.1:{port}"):
        execute._identify(f"tcp://127.0.0.1:{port}", 0.5, {})
    assert time.monotonic() - started < 5


@pytest.mark.slow
def test_a_dask_worker_is_not_taken_for_the_scheduler():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False,
                                  protocol="tcp", dashboard_address=None) as cluster:
        assert execute._identify(cluster.scheduler_address, 5, {})["type"] == "Scheduler"
        worker = next(iter(cluster.scheduler_info["workers"]))
        with pytest.raises(InputError, match="is a Dask Worker, not the scheduler"):
            execute._identify(worker, 5, {})
