"""Ranks without memory files share one empty memory summary, and nothing is lost by it.

A worker hands back thousands of small ranks; each used to carry five empty summary frames
and an empty copies frame of its own, pickled and unpickled one by one. Now every rank
without memory holds the same objects, so a chunk pickles them once. These tests pin what
that must not change: a rank with memory keeps its own figures, and a job mixing both
kinds stacks to the same run memory.
"""

from __future__ import annotations

import pickle

from test_memory import records_with_app_peak, write_rank

from cann_diff.read import read_memory
from cann_diff.read.reduce.device_memory import read_rank_memory


def test_ranks_without_memory_share_one_summary_through_a_pickle(tmp_path):
    a = read_rank_memory(write_rank(tmp_path, "a_ascend_pt", rank=0), keep_rows=False)
    b = read_rank_memory(write_rank(tmp_path, "b_ascend_pt", rank=1), keep_rows=False)
    assert not a.recorded and not b.recorded
    assert a.summary is b.summary and a.copies is b.copies
    back = pickle.loads(pickle.dumps([a, b]))
    assert back[0].summary is back[1].summary  # pickled once for the pair
    assert all(len(getattr(a.summary, name)) == 0
               for name in ("peaks", "timelines", "operators", "modules", "hbm"))
    # The rank's own parts stay its own.
    assert (a.name, b.name) == ("a_ascend_pt", "b_ascend_pt")


def test_a_rank_with_memory_keeps_its_own_summary(tmp_path):
    empty = read_rank_memory(write_rank(tmp_path, "a_ascend_pt"), keep_rows=False)
    full = read_rank_memory(write_rank(tmp_path, "b_ascend_pt", rank=1,
                                       records=records_with_app_peak(1000.0)), keep_rows=False)
    assert full.recorded and full.summary is not empty.summary
    assert full.summary.peaks["reserved_mb"].max() == 1000.0


def test_a_job_mixing_ranks_with_and_without_memory_stacks_unchanged(tmp_path):
    # Ranks 0 and 2 hold no memory files, rank 1 peaks at 1300 MB reserved: the run's
    # peak is rank 1's, the empty ranks add no rows, and stacking leaves the shared
    # summary as it was (still empty, no rank column added to it).
    root = tmp_path / "job"
    write_rank(root, "a_ascend_pt", rank=0)
    write_rank(root, "b_ascend_pt", rank=1, records=records_with_app_peak(1300.0))
    write_rank(root, "c_ascend_pt", rank=2)
    data = read_memory(root)
    assert data.ranks == (0, 1, 2)
    peaks = data.summary.peaks
    assert set(peaks["rank"]) == {1}
    assert peaks["reserved_mb"].max() == 1300.0
    shared = read_rank_memory(root / "a_ascend_pt", keep_rows=False).summary
    assert len(shared.peaks) == 0 and "rank" not in shared.peaks.columns


def test_absent_files_share_their_empty_frames_and_stay_empty(tmp_path):
    # With the raw rows kept, two ranks without memory files hand back the same empty
    # frames; stacking a job of them with a rank that has records leaves those frames
    # untouched (no rows, no rank column), and the job's records are rank 1's alone.
    a = read_rank_memory(write_rank(tmp_path, "a_ascend_pt", rank=0), keep_rows=True)
    b = read_rank_memory(write_rank(tmp_path, "b_ascend_pt", rank=1), keep_rows=True)
    assert all(a.raw[name] is b.raw[name] for name in a.raw)
    columns = {name: list(frame.columns) for name, frame in a.raw.items()}
    root = tmp_path / "job"
    write_rank(root, "a_ascend_pt", rank=0)
    write_rank(root, "b_ascend_pt", rank=1, records=records_with_app_peak(1200.0))
    data = read_memory(root)
    assert set(data.summary.peaks["rank"]) == {1}
    assert data.summary.peaks["reserved_mb"].max() == 1200.0  # APP: 900, 1200, 950 MB
    assert all(len(frame) == 0 and list(frame.columns) == columns[name]
               for name, frame in a.raw.items())
