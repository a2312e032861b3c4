"""Finding an input's ranks: which entries are looked at, in which order, what is chosen.

An input of thousands of ranks is listed once and every child probed by each format in
turn, so these helpers work from names (``os.listdir``) rather than globs and path
comparisons; the answers must stay those a glob and a sort of paths gave.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest

from cann_diff.errors import InputError
from cann_diff.read.formats import find_rank_sources
from cann_diff.read.formats.files import list_dir, names_in
from cann_diff.read.formats.sqlite_db import find_db

KERNELS_HEADER = ("Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),"
                  "Input Shapes,Input Data Types\n")


def _touch(path: Path, text: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def test_list_dir_is_sorted_by_name_and_says_when_it_cannot_list(tmp_path):
    for name in ("rank_10", "rank_9", "Rank_2", ".hidden", "rank_1"):
        (tmp_path / name).mkdir()
    # Code-point order, as paths of one directory compare: upper case first, "10" < "9".
    assert [p.name for p in list_dir(tmp_path)] == [".hidden", "Rank_2", "rank_1", "rank_10",
                                                    "rank_9"]
    assert all(p.parent == tmp_path for p in list_dir(tmp_path))
    with pytest.raises(InputError, match="cannot list the directory"):
        list_dir(tmp_path / "absent")
    assert names_in(tmp_path / "absent") == []
    assert names_in(_touch(tmp_path / "a_file")) == []


def test_find_db_takes_the_first_profiler_db_by_name_in_the_rank_then_its_output(tmp_path):
    rank = tmp_path / "rank_ascend_pt"
    out = rank / "ASCEND_PROFILER_OUTPUT"
    _touch(out / "ascend_pytorch_profiler_0.db")
    assert find_db(rank) == out / "ascend_pytorch_profiler_0.db"  # only in the output
    # In the rank directory itself it wins; of two there, the first by name. Other .db
    # files (msprof's, analysis.db, a look-alike) are not the profiler db.
    for name in ("ascend_pytorch_profiler_3.db", "ascend_pytorch_profiler_12.db",
                 "analysis.db", "msprof_20250101.db", "ascend_pytorch_profiler.db.bak"):
        _touch(rank / name)
    assert find_db(rank) == rank / "ascend_pytorch_profiler_12.db"  # "12" < "3" by name
    assert find_db(rank / "analysis.db") is None  # a file is taken for itself
    assert find_db(rank / "ascend_pytorch_profiler_3.db") == rank / "ascend_pytorch_profiler_3.db"
    assert find_db(tmp_path / "absent") is None


def test_find_db_finds_a_fifo_by_its_name(tmp_path):
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs here")
    rank = tmp_path / "rank"
    rank.mkdir()
    os.mkfifo(rank / "ascend_mindspore_profiler_1.db")
    # Found, so that opening it says what it is, instead of the rank being passed over.
    assert find_db(rank) == rank / "ascend_mindspore_profiler_1.db"


def _text_rank(root: Path, name: str) -> Path:
    _touch(root / name / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", KERNELS_HEADER)
    return root / name


def _steps_only_rank(root: Path, name: str) -> Path:
    _touch(root / name / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv",
           "Step,Computing,Communication(Not Overlapped),Free\n1,10,0,0\n")
    return root / name


def _db_rank(root: Path, name: str) -> Path:
    db = root / name / "ASCEND_PROFILER_OUTPUT" / "ascend_pytorch_profiler_0.db"
    db.parent.mkdir(parents=True)
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE COMPUTE_TASK_INFO (name INTEGER)")
    return root / name


def test_ranks_come_in_name_order_kernel_ranks_and_kernel_less_ones_together(tmp_path):
    job = tmp_path / "job"
    _text_rank(job, "r2_ascend_pt")
    _steps_only_rank(job, "r10_ascend_pt")
    _text_rank(job, "r1_ascend_pt")
    _steps_only_rank(job, "r0_ascend_pt")
    _touch(job / "notes.txt", "not a rank")
    (job / "empty_dir").mkdir()
    fmt, sources = find_rank_sources(job)
    assert fmt.name == "ascend_pt_text"
    # The kernel-less ranks are appended after the kernel ranks are found, then all sorted.
    assert [(s.path.name, s.format.name) for s in sources] == [
        ("r0_ascend_pt", "no_kernels"), ("r10_ascend_pt", "no_kernels"),
        ("r1_ascend_pt", "ascend_pt_text"), ("r2_ascend_pt", "ascend_pt_text")]


def test_a_db_with_kernels_takes_priority_over_text_ranks(tmp_path):
    job = tmp_path / "job"
    _text_rank(job, "a_ascend_pt")
    _db_rank(job, "b_ascend_pt")
    fmt, sources = find_rank_sources(job)
    # The db format comes first in priority: its ranks are the input's; a text-only
    # rank is not read beside them.
    assert fmt.name == "ascend_db"
    assert [s.path.name for s in sources] == ["b_ascend_pt"]
