"""The command line's allocator settings: set for the run and its workers, a user's kept."""

from __future__ import annotations

import os

from cann_diff import allocator


def _clear(monkeypatch) -> None:
    for name in allocator.ENVIRONMENT:
        monkeypatch.delenv(name, raising=False)


def test_tune_sets_what_workers_inherit(monkeypatch):
    _clear(monkeypatch)
    allocator.tune()
    assert os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "system"
    assert int(os.environ["MALLOC_MMAP_THRESHOLD_"]) == 32 * 2**20  # glibc's largest
    assert int(os.environ["MALLOC_TRIM_THRESHOLD_"]) == 2**30


def test_tune_keeps_the_users_own_settings(monkeypatch):
    _clear(monkeypatch)
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "jemalloc")
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "not a number")  # glibc's to judge
    allocator.tune()  # no error: an unreadable value is left to glibc
    assert os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "jemalloc"
    assert os.environ["MALLOC_TRIM_THRESHOLD_"] == "not a number"
    assert os.environ["MALLOC_MMAP_THRESHOLD_"] == str(32 * 2**20)


def test_a_worker_process_starts_with_them(monkeypatch, tmp_path):
    import subprocess
    import sys

    _clear(monkeypatch)
    allocator.tune()
    code = "import pyarrow; print(pyarrow.default_memory_pool().backend_name)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, env=os.environ.copy())
    assert out.stdout.strip() == "system"
