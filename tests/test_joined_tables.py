"""Small ranks' step and kernel tables read by Arrow as one text give what each file gives.

``text_batch`` joins the bodies of the tables that share a header, marker rows around
each, and reads them in parts of one block (``csv_files.joined_tables``), then cuts the
table at the markers. These tests check that the joined read is really taken (a spy
refuses the one-file reader), that its rows are the ones worked out by hand, and that
whatever it cannot be sure of (a quote left open, a row Arrow skips, an op named like
the marker, a quote in the header, a byte-order mark) gives the frames each file gives
alone.
"""

from __future__ import annotations

from pathlib import Path

import pandas.testing as pdt
import pytest

from cann_diff.read.formats import csv_files, text_batch
from cann_diff.read.formats.csv_files import (
    FILE_END,
    joined_tables,
    read_kernel_table,
    read_step_trace,
    split_header,
)

HEADER = ("Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,"
          "Bubble,Communication(Not Overlapped and Exclude Receive),Preparing")
# The 2024 layout: no Preparing column, so a second header.
OLD_HEADER = HEADER.removesuffix(",Preparing")


def _write(path: Path, text: str) -> Path:
    path.write_bytes(text.encode())
    return path


@pytest.fixture
def steps(tmp_path) -> list[Path]:
    """Three files of one header (CRLF as torch_npu writes them, LF with empty lines and
    no final line break, a header only) and two of the old header."""
    return [
        _write(tmp_path / "a.csv", f"{HEADER}\r\n1,100.5,20,0,20,3,123.5,0,20,1\r\n"
                                   "2,101,21,0,21,4,126,0,21,2\r\n"),
        _write(tmp_path / "b.csv", f"{HEADER}\n\n3,90,10,1,11,5,105,0,10,0\n\n"
                                   "4,91,11,1,12,6,108,0,11,0"),
        _write(tmp_path / "c.csv", f"{HEADER}\r\n"),
        _write(tmp_path / "d.csv", f"{OLD_HEADER}\n7,50,5,0,5,1,56,0,5\n"),
        _write(tmp_path / "e.csv", f"{OLD_HEADER}\n8,60,6,0,6,2,68,0,6\n"),
    ]


def _refuse(*args, **kwargs):
    raise AssertionError(f"read alone: {args}")


def _same_as_alone(paths: list[Path], got: list) -> None:
    for path, mine in zip(paths, got):
        theirs = read_step_trace(path)
        assert (mine is None) == (theirs is None), path
        if mine is not None:
            pdt.assert_frame_equal(mine, theirs)


def test_the_step_tables_of_a_header_are_read_as_one_text(steps, monkeypatch):
    joined = []
    real = text_batch.joined_tables
    monkeypatch.setattr(text_batch, "joined_tables",
                        lambda bodies, *rest: joined.append(len(bodies)) or real(bodies, *rest))
    monkeypatch.setattr(text_batch, "_regular_steps", _refuse)
    got = text_batch.step_tables(steps)
    assert joined == [3, 2]  # one read per header
    assert got[2] is None  # a header only: no steps
    assert got[0]["step"].tolist() == [1, 2] and got[0]["computing"].tolist() == [100.5, 101]
    assert got[1]["step"].tolist() == [3, 4] and got[1]["free"].tolist() == [5, 6]
    assert got[3]["stage"].tolist() == [56] and got[4]["stage"].tolist() == [68]
    assert got[3]["preparing"].isna().all()  # the old layout has none
    _same_as_alone(steps, got)


def test_each_step_file_is_opened_once(steps, monkeypatch):
    opened = []
    real = csv_files.open_binary
    monkeypatch.setattr(csv_files, "open_binary", lambda path: opened.append(path) or real(path))
    csv_files._HEADERS.clear()
    text_batch.step_tables(steps)
    assert sorted(opened) == sorted(steps)
    # The headers were kept from those reads: asking again opens nothing.
    assert csv_files.read_header(steps[3]) == OLD_HEADER.split(",")
    assert sorted(opened) == sorted(steps)


def _columns() -> dict[str, str]:
    return {"name": "Name", "value": "Value"}


def test_joined_tables_cut_the_table_back_by_file():
    tables = joined_tables([b"a,1\n", b'"x,y",2\nz,3\n'], Path("a.csv"), ["Name", "Value"],
                           _columns(), ("value",))
    assert [t.column("name").to_pylist() for t in tables] == [["a"], ["x,y", "z"]]
    assert [t.column("value").to_pylist() for t in tables] == [[1.0], [2.0, 3.0]]


@pytest.mark.parametrize("bodies", [
    [b'"a,1\n', b"c,2\n"],  # a quote left open swallows the marker after it
    [b"a,1\n", b"b\n"],  # a row of one field, which Arrow skips
    [b"a,1\n", b"b,x\n"],  # no number
    [b"a,1\n", FILE_END.encode() + b",2\n"],  # an op named like the marker
])
def test_joined_tables_give_up_where_the_files_rows_are_unsure(bodies):
    assert joined_tables(bodies, Path("a.csv"), ["Name", "Value"], _columns(),
                         ("value",)) is None


def test_a_lone_carriage_return_is_joined_a_quoted_header_is_not(steps, tmp_path):
    # Arrow ends a row at a lone CR in one file read alone as in the joined text.
    lone = _write(tmp_path / "f.csv", f"{HEADER}\n5,1,1,0,1,1,3,0,1,0\r6,1,1,0,1,1,3,0,1,0\n")
    quoted = _write(tmp_path / "g.csv", f'"Step",{HEADER[5:]}\n9,1,1,0,1,1,3,0,1,0\n')
    cr_header = _write(tmp_path / "h.csv", f"Step\r,{HEADER[5:]}\n9,1,1,0,1,1,3,0,1,0\n")
    assert split_header(quoted) is None and split_header(cr_header) is None
    header, body = split_header(lone)
    assert header == tuple(HEADER.split(",")) and body.count(b"\r") == 1
    paths = [*steps, lone, quoted]
    got = text_batch.step_tables(paths)
    assert got[5]["step"].tolist() == [5, 6]
    _same_as_alone(paths, got)


def test_kernel_tables_are_read_as_one_text_and_cut_at_the_markers(tmp_path, monkeypatch):
    header = "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us)"
    kernels = [
        _write(tmp_path / "k0.csv", f"{header}\r\n1,MatMul_1,MatMul,AI_CORE,100.5\t,2.5\r\n"
                                    "1,Add_1,Add,AI_VECTOR_CORE,103.0\t,1\r\n"),
        _write(tmp_path / "k1.csv", f'{header}\n2,"Cast,1",Cast,AI_CORE,200\t,4.25\n'),
    ]
    monkeypatch.setattr(text_batch, "_regular_kernels", _refuse)
    got = text_batch.kernel_tables(kernels)
    assert got[0][0]["op_name"].tolist() == ["MatMul_1", "Add_1"]
    assert got[0][0]["dur_us"].tolist() == [2.5, 1.0]
    assert got[1][0]["op_name"].tolist() == ["Cast,1"]
    assert got[1][0]["start_ns"].tolist() == [200_000]
    for path, (frame, warnings) in zip(kernels, got):
        alone, alone_warnings = read_kernel_table(path)
        pdt.assert_frame_equal(frame, alone)
        assert warnings == alone_warnings


def test_an_op_named_like_the_marker_is_read_alone(tmp_path):
    header = "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us)"
    kernels = [_write(tmp_path / f"k{n}.csv", f"{header}\n1,{name},Add,AI_CORE,{100 + n},1\n")
               for n, name in enumerate(["Add_1", FILE_END, "Add_2"])]
    got = text_batch.kernel_tables(kernels)
    assert [frame["op_name"].tolist() for frame, _ in got] == [["Add_1"], [FILE_END], ["Add_2"]]
    for path, (frame, _) in zip(kernels, got):
        pdt.assert_frame_equal(frame, read_kernel_table(path)[0])


def test_an_irregular_file_sends_its_header_back_to_one_by_one(steps, monkeypatch):
    bad = _write(steps[0].parent / "x.csv", f"{HEADER}\n9,1,1,0,1,1,3,lots,1,0\n")
    alone = []
    real = text_batch._regular_steps
    monkeypatch.setattr(text_batch, "_regular_steps", lambda path: alone.append(path) or real(path))
    paths = [*steps, bad]
    got = text_batch.step_tables(paths)
    # The new header's four files are read alone; the old header's two still as one text.
    assert alone == [steps[0], steps[1], steps[2], bad]
    assert got[-1]["bubble"].isna().all()  # "lots" read as text: no number
    _same_as_alone(paths, got)


SMALL = "Step,Computing,Communication(Not Overlapped),Free,Stage,Device_id"


@pytest.mark.parametrize("first, second", [
    # A byte-order mark at the start of the first body: Arrow drops one at the start of
    # its text, a file read alone keeps it (and its step is then no number).
    (f"{SMALL}\n\ufeff1,2,3,4,9,0\n", f"{SMALL}\n2,2,3,4,9,0\n"),
    # A quote left open at the end (no line break), beside a header only.
    (f'{SMALL}\n1,2,3,4,9,"0', f"{SMALL}\n"),
    # A quote left open, then a file of a header and an empty line.
    (f'{SMALL}\n1,2,3,4,9,"0\n', f"{SMALL}\n\n"),
])
def test_odd_files_give_what_they_give_alone(tmp_path, first, second):
    paths = [_write(tmp_path / "a.csv", first), _write(tmp_path / "b.csv", second)]
    _same_as_alone(paths, text_batch.step_tables(paths))


def test_tables_past_a_block_are_read_in_parts_of_one_block(tmp_path, monkeypatch):
    """Five step tables of about 1 MB each, one with a quoted line break (a row Arrow
    skips alone): read in parts of at most a block, each as one block, as alone."""
    row = "1,2.5,3,4,9.5,0\n"
    paths = [_write(tmp_path / f"s{n}.csv", f"{SMALL}\n" + row * 60_000
                    + ('7,1,1,1,1,"0\n8",1,1,1,1,0\n' if n == 4 else "")) for n in range(5)]
    parts = []
    real = csv_files._joined_part
    monkeypatch.setattr(csv_files, "_joined_part",
                        lambda bodies, *rest: parts.append(len(bodies)) or real(bodies, *rest))
    got = text_batch.step_tables(paths)
    assert parts == [4, 1]  # 4 × 0.96 MB fit in the 4 MiB block; the fifth is read apart
    assert [len(frame) for frame in got] == [60_000] * 5
    _same_as_alone(paths, got)
