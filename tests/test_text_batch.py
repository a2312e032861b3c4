"""Small text ranks read as stacks give what each rank read alone gives, errors included.

``torch_text.read_ranks`` reads a run of small ranks' kernel, step and communication
files as stacks (``formats/text_batch.py``). Every test compares it with
``torch_text.read_rank`` of each rank, frame by frame (values, dtypes, index) and
warning by warning; spies check that regular files really went through the stack, so a
stack that quietly fell back to the per-file readers would fail here too. No timing is
asserted: that is benchmarks/' job.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas.testing as pdt
import pytest
from profiles import Comm, aclnn, write_profile

from cann_diff.errors import CannDiffError
from cann_diff.read.formats import text_batch, torch_text
from cann_diff.read.rank_data import RankData

DATA = Path(__file__).parent / "data"


def _schedule(rank: int, step: int):
    ops = [aclnn("Add", 2.0 + rank, "8,8;8,8") for _ in range(rank % 3 + 1)]
    ops.append(aclnn("MatMulV3", 10.0, "8,8;8,8") if rank % 2 == 0 else aclnn("Cast", 4.0))
    if rank != 1:
        ops.append(Comm("allReduce", 30.0 + rank))
    return ops


def _rank_dirs(run: Path) -> list[Path]:
    return sorted(run.glob("*_ascend_pt"), key=lambda p: int(p.name.split("_")[1]))


@pytest.fixture
def run(tmp_path) -> list[Path]:
    """Ranks 0-5 at Level1 and 6-7 at Level0 (no Input Shapes: a second stack); rank 1
    without communication, rank 4 with a step table of a header only."""
    write_profile(tmp_path, "run", _schedule, ranks=range(6), steps=(1, 2))
    write_profile(tmp_path, "run", _schedule, ranks=(6, 7), steps=(1, 2), level0=True)
    dirs = _rank_dirs(tmp_path / "run")
    steps = _out(dirs[4]) / "step_trace_time.csv"
    steps.write_text(steps.read_text().splitlines()[0] + "\r\n")
    assert not (_out(dirs[1]) / "communication.json").exists()
    return dirs


def _out(rank_dir: Path) -> Path:
    return rank_dir / "ASCEND_PROFILER_OUTPUT"


def _same(stacked: RankData, alone: RankData) -> None:
    assert (stacked.source, stacked.format, stacked.rank) == \
        (alone.source, alone.format, alone.rank)
    assert stacked.warnings == alone.warnings
    assert stacked.info == alone.info
    pdt.assert_frame_equal(stacked.ops, alone.ops)
    for mine, theirs in ((stacked.steps, alone.steps), (stacked.comm, alone.comm)):
        assert (mine is None) == (theirs is None)
        if mine is not None:
            pdt.assert_frame_equal(mine, theirs)


def _alone(paths: list[Path]) -> list[RankData]:
    return [torch_text.read_rank(path) for path in paths]


def test_regular_ranks_come_out_of_the_stacks_as_read_alone(run, monkeypatch):
    alone = _alone(run)
    assert alone[6].warnings and "no Input Shapes" in alone[6].warnings[-1]
    assert alone[4].steps is None and alone[1].comm is None
    # The spies go in after the reference read: every regular file must be stacked.
    def refuse(*args, **kwargs):
        raise AssertionError(f"read alone: {args}")

    for name in ("read_kernel_table", "read_step_trace", "read_communication"):
        monkeypatch.setattr(text_batch, name, refuse)
    monkeypatch.setattr(torch_text, "read_rank", refuse)
    stacked = list(torch_text.read_ranks(run))
    assert len(stacked) == len(run)
    for mine, theirs in zip(stacked, alone):
        _same(mine, theirs)
    # Hand-checked: rank r runs r % 3 + 1 Adds, a MatMulV3 or a Cast, and (but rank 1) an
    # AllReduce kernel per step, over 2 steps.
    assert [len(r.ops) for r in stacked] == [2 * (r % 3 + 1 + 1 + (r != 1)) for r in range(8)]
    assert [None if r.comm is None else len(r.comm) for r in stacked] == \
        [2, None, 2, 2, 2, 2, 2, 2]
    assert set(stacked[3].comm["rank"]) == {3}


def _rewrite_csv(path: Path, edit) -> None:
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    rows = edit(rows)
    with open(path, "w", newline="") as handle:
        csv.writer(handle, lineterminator="\r\n").writerows(rows)


def _set_cell(column: str, value: str, row: int = 1):
    def edit(rows):
        rows[row][rows[0].index(column)] = value
        return rows
    return edit


def test_irregular_files_are_read_alone_with_their_warnings(run):
    _rewrite_csv(_out(run[2]) / "kernel_details.csv",
                 lambda rows: [*rows, rows[1][:3]])  # a row of the wrong width
    _rewrite_csv(_out(run[3]) / "kernel_details.csv", _set_cell("Duration(us)", "-5"))
    _rewrite_csv(_out(run[5]) / "step_trace_time.csv", _set_cell("Bubble", "lots"))
    alone = _alone(run)
    assert any("malformed row" in w for w in alone[2].warnings)
    assert any("impossible" in w for w in alone[3].warnings)
    assert alone[5].steps["bubble"].isna().iloc[0]
    for mine, theirs in zip(torch_text.read_ranks(run), alone):
        _same(mine, theirs)


def _error(call) -> tuple[type, str]:
    with pytest.raises(CannDiffError) as caught:
        call()
    return type(caught.value), str(caught.value)


def test_the_first_bad_rank_names_the_error(run):
    """Rank 3's communication is bad and rank 5's kernel starts are all one instant: the
    stacked read raises rank 3's error, as reading the ranks one by one does."""
    comm = _out(run[3]) / "communication.json"
    data = json.loads(comm.read_text())
    op = next(iter(data["step1"]["collective"].values()))
    op["Communication Time Info"]["Wait Time(ms)"] = -1
    comm.write_text(json.dumps(data))
    _rewrite_csv(_out(run[5]) / "kernel_details.csv",
                 lambda rows: [rows[0]] + [r[:8] + [rows[1][8]] + r[9:] for r in rows[1:]])

    def one_by_one():
        for path in run:
            torch_text.read_rank(path)

    expected = _error(one_by_one)
    assert "communication.json" in expected[1] and run[3].name in expected[1]
    assert _error(lambda: list(torch_text.read_ranks(run))) == expected
    # Alone, rank 5's error is its own file's, found in the stack of kernel tables.
    later = run[4:]
    expected_later = _error(lambda: [torch_text.read_rank(path) for path in later])
    assert "same Start Time(us)" in expected_later[1] and run[5].name in expected_later[1]
    assert _error(lambda: list(torch_text.read_ranks(later))) == expected_later


def test_a_large_rank_is_read_alone_in_its_turn(run, monkeypatch):
    alone = _alone(run)
    large = run[2]
    sizes = torch_text._kernel_bytes
    monkeypatch.setattr(torch_text, "_kernel_bytes",
                        lambda path: None if path == large else sizes(path))
    monkeypatch.setattr(torch_text, "BATCH_MAX_RANKS", 2)
    batches = []
    read_batch = torch_text._read_batch
    monkeypatch.setattr(torch_text, "_read_batch",
                        lambda paths: batches.append(list(paths)) or read_batch(paths))
    for mine, theirs in zip(torch_text.read_ranks(run), alone):
        _same(mine, theirs)
    assert [b for b in batches if b] == [run[0:2], run[3:5], run[5:7], run[7:8]]


REAL_RANKS = [
    DATA / "realdata/Ascend__msinsight/server/src/test/test_data/test_rank_0",
    DATA / "realdata/Ascend__msinsight/server/src/test/test_data/test_rank_1",
    *(DATA / f"realdata/Ascend__msinsight/test/data/pytorch/text/{level}/rank0_ascend_pt"
      for level in ("level0", "level1", "level2")),
    DATA / "cross_stack/qianxiaoxixixi__MsInsightForEveryOne/test/data/pytorch/text/level1/"
           "rank0_ascend_pt",
]


def test_real_exports_read_as_stacks_as_alone():
    """Real torch_npu exports of three levels and two stacks: the same rows and notes."""
    for path in REAL_RANKS:
        assert torch_text.is_rank_dir(path), path
    alone = _alone(REAL_RANKS)
    stacked = list(torch_text.read_ranks(REAL_RANKS))
    for mine, theirs in zip(stacked, alone):
        _same(mine, theirs)
    assert sum(len(r.ops) for r in stacked) == sum(len(r.ops) for r in alone) > 0


def test_a_communication_file_without_ops_keeps_its_own_dtypes(run):
    # Alone, a file of no ops gives empty object columns; a slice of the stack would
    # carry the stack's str columns instead.
    (_out(run[2]) / "communication.json").write_text('{"step1": {"p2p": {}, "collective": {}}}')
    alone = _alone(run)
    assert len(alone[2].comm) == 0
    for mine, theirs in zip(torch_text.read_ranks(run), alone):
        _same(mine, theirs)


def test_starts_just_below_zero_keep_their_sign_on_the_slow_parse():
    # Four decimals send the column to the text parse, whose whole part of "-0.5" is 0.
    import pyarrow as pa

    from cann_diff.read.formats.csv_files import parse_us_to_ns

    starts = pa.chunked_array([pa.array(["-0.5", "-0.25", "1736413971000000.1234"])])
    assert parse_us_to_ns(starts, Path("k.csv"), "Start Time(us)").tolist() == \
        [-500, -250, 1736413971000000123]


def test_digits_of_other_scripts_are_refused_as_input(run):
    """A start written in Arabic-Indic digits is bad input (exit 2), not a crash; with an
    earlier rank's bad communication.json, that earlier error is the one raised."""
    from cann_diff.errors import SchemaError

    _rewrite_csv(_out(run[1]) / "kernel_details.csv", _set_cell("Start Time(us)", "١٢٣.5"))
    with pytest.raises(SchemaError, match=r"Start Time\(us\) is not a number of µs"):
        torch_text.read_rank(run[1])
    (_out(run[0]) / "communication.json").write_text('{"step1": [1]}')
    expected = _error(lambda: [torch_text.read_rank(path) for path in run])
    assert "expected an object of p2p/collective ops" in expected[1]
    assert _error(lambda: list(torch_text.read_ranks(run))) == expected


def test_a_list_for_a_time_is_refused_alone_and_in_a_stack(run):
    comm = _out(run[2]) / "communication.json"
    data = json.loads(comm.read_text())
    for kinds in data.values():
        for ops in kinds.values():
            for info in ops.values():
                info["Communication Time Info"]["Elapse Time(ms)"] = []
    comm.write_text(json.dumps(data))
    expected = _error(lambda: torch_text.read_rank(run[2]))
    assert "Elapse Time(ms) is not a number ([])" in expected[1]
    assert _error(lambda: list(torch_text.read_ranks(run))) == expected


def test_an_earlier_ranks_host_side_error_comes_first(run):
    """Rank 0's trace_view.json is cut short, rank 1's kernel table is bad: reading rank
    by rank, rank 0 fails in its reduce (its host side) before rank 1 is read."""
    import cann_diff.read as read

    (_out(run[0]) / "trace_view.json").write_text('[{"ph": "X", "name": ')
    _rewrite_csv(_out(run[1]) / "kernel_details.csv", _set_cell("Duration(us)", "abc"))
    with pytest.raises(CannDiffError) as caught:
        read.load_run(run[0].parent, jobs=1)
    assert "trace_view.json" in str(caught.value) and run[0].name in str(caught.value)


def test_an_unlistable_rank_between_small_ones_waits_its_turn(run, tmp_path):
    """A rank whose directory cannot be examined is read alone when its turn comes: the
    bad rank before it still names the error."""
    loop = run[0].parent / "node0_4999_loop_ascend_pt"
    loop.symlink_to(loop)
    _rewrite_csv(_out(run[0]) / "kernel_details.csv", _set_cell("Duration(us)", "abc"))
    paths = [run[0], run[1], loop]
    expected = _error(lambda: [torch_text.read_rank(path) for path in paths])
    assert run[0].name in expected[1] and "Duration(us)" in expected[1]
    assert _error(lambda: list(torch_text.read_ranks(paths))) == expected
