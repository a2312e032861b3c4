"""The command line's allocator settings: set for the run and its workers, a user's kept."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

import pytest

from cann_diff import allocator


class _FakeLibc:
    """Records mallopt calls, so that the test process's own allocator is left alone."""

    def __init__(self, _name):
        self.calls: list[tuple[int, int]] = []
        _FakeLibc.last = self

    def mallopt(self, parameter, value):
        self.calls.append((parameter, value))
        return 1


@pytest.fixture
def clean(monkeypatch):
    for name in allocator.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(ctypes, "CDLL", _FakeLibc)
    yield
    for name in allocator.ENVIRONMENT:  # tune() wrote os.environ itself
        monkeypatch.delenv(name, raising=False)


def test_tune_sets_what_workers_inherit(clean, monkeypatch):
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL", raising=False)
    allocator.tune()
    assert "ARROW_DEFAULT_MEMORY_POOL" not in os.environ  # pyarrow keeps its own pool
    assert int(os.environ["MALLOC_MMAP_THRESHOLD_"]) == 32 * 2**20  # glibc's largest
    assert int(os.environ["MALLOC_TRIM_THRESHOLD_"]) == 2**30
    assert os.environ["NUMPY_MADVISE_HUGEPAGE"] == "0"
    # M_MMAP_THRESHOLD is -3 and M_TRIM_THRESHOLD -1 in glibc's <malloc.h>.
    assert _FakeLibc.last.calls == [(-3, 32 * 2**20), (-1, 2**30)]


def test_tune_keeps_the_users_own_settings(clean, monkeypatch):
    monkeypatch.setenv("NUMPY_MADVISE_HUGEPAGE", "1")
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "not a number")  # glibc's to judge
    allocator.tune()  # no error: an unreadable value is left to glibc
    assert os.environ["NUMPY_MADVISE_HUGEPAGE"] == "1"
    assert os.environ["MALLOC_TRIM_THRESHOLD_"] == "not a number"
    assert _FakeLibc.last.calls == [(-3, 32 * 2**20)]


def test_without_glibc_only_the_environment_is_set(clean, monkeypatch):
    def missing(_name):
        raise OSError("libc.so.6: cannot open shared object file")

    monkeypatch.setattr(ctypes, "CDLL", missing)
    allocator.tune()
    assert os.environ["MALLOC_MMAP_THRESHOLD_"] == str(32 * 2**20)


# A child that tunes as the command does, then starts a forkserver (as the command does
# for its workers) and prints what one of its workers sees.
WORKER_PROBE = """
from cann_diff.allocator import tune
tune()
import multiprocessing, os
def probe():
    from numpy._core.multiarray import _get_madvise_hugepage
    return os.environ["MALLOC_MMAP_THRESHOLD_"], _get_madvise_hugepage()
if __name__ == "__main__":
    with multiprocessing.get_context("forkserver").Pool(1) as pool:
        print(*pool.apply(probe))
"""


def test_a_forkserver_worker_starts_with_them(clean, tmp_path):
    if "forkserver" not in __import__("multiprocessing").get_all_start_methods():
        pytest.skip("no forkserver on this platform")
    script = tmp_path / "probe.py"
    script.write_text(WORKER_PROBE)
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         env=os.environ.copy(), timeout=120)
    if "ImportError" in out.stderr and "_get_madvise_hugepage" in out.stderr:
        pytest.skip(f"this numpy does not tell its huge-page setting: {out.stderr[-200:]}")
    assert out.returncode == 0, out.stderr[-500:]
    assert out.stdout.split() == [str(32 * 2**20), "False"]


def test_the_command_line_loads_no_pyarrow_before_it_tunes():
    # numpy reads its huge-page setting when it is imported, and glibc's settings should
    # hold before the large tables are allocated: tune() (in the command, before the
    # pipeline's import) only works if importing the command line loads none of these.
    code = ("import sys, cann_diff.cli; "
            "print(*(name in sys.modules for name in ('pyarrow', 'pandas', 'numpy')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.split() == ["False", "False", "False"]
