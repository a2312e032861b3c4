"""The CSV header is read a chunk at a time: the same header as one read of the limit."""

from __future__ import annotations

import dataclasses

import pytest

from cann_diff.errors import InputError
from cann_diff.read.formats import csv_files
from cann_diff.read.formats.csv_files import header_end, read_header


def test_header_end_is_after_the_first_line_break_outside_quotes():
    assert header_end(b"a,b\n1,2\n")[0] == 4
    assert header_end(b"a,b\r\n1,2\r\n")[0] == 5
    assert header_end(b'"x\ny",b\n1,2\n')[0] == 8  # the first break is inside quotes
    assert header_end(b'"a ""q""",b\n')[0] == 12  # doubled quotes stay balanced
    assert header_end(b'"open,b\nstill open') == (-1, 8, 1)  # on from the open line
    assert header_end(b"no break") == (-1, 0, 0)


def test_header_end_goes_on_where_the_last_scan_stopped():
    head = b'"x\ny'
    end, start, quotes = header_end(head)
    assert (end, start, quotes) == (-1, 3, 1)
    assert header_end(head + b'",b\n1\n', start, quotes)[0] == 8


def test_a_header_longer_than_a_chunk_is_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(csv_files, "HEADER_CHUNK_BYTES", 16)
    names = [f"column {i}" for i in range(40)]  # 40 × ~10 bytes: many chunks
    path = tmp_path / "wide.csv"
    path.write_text(",".join(names) + "\n" + ",".join("1" * 40) + "\n")
    assert read_header(path) == names


def test_a_quoted_line_break_across_chunks_stays_in_its_name(tmp_path, monkeypatch):
    monkeypatch.setattr(csv_files, "HEADER_CHUNK_BYTES", 4)
    path = tmp_path / "quoted.csv"
    path.write_bytes(b'\xef\xbb\xbfName,"Start\nTime(us)", Duration(us) \r\nx,1,2\r\n')
    assert read_header(path) == ["Name", "Start\nTime(us)", "Duration(us)"]


def test_a_file_of_one_line_without_a_break_is_its_header(tmp_path):
    path = tmp_path / "one.csv"
    path.write_bytes(b"Name,Type")
    assert read_header(path) == ["Name", "Type"]


def test_no_break_within_the_limit_is_refused_even_read_in_chunks(tmp_path, monkeypatch):
    monkeypatch.setattr(csv_files, "HEADER_CHUNK_BYTES", 1000)
    path = tmp_path / "nobreak.csv"
    limit = csv_files.DEFAULT_LIMITS.max_header_bytes
    path.write_bytes(b"N," * (limit // 2 + 10))  # past the limit, no line break
    with pytest.raises(InputError, match="no header line in the first"):
        read_header(path)


def test_an_odd_quote_in_a_name_reads_as_the_csv_module_reads_it(tmp_path, monkeypatch):
    # A quote inside an unquoted name never balances: no break is outside quotes, and at
    # the limit the csv module reads what was read, a literal quote in the name.
    monkeypatch.setattr(csv_files, "HEADER_CHUNK_BYTES", 16)
    monkeypatch.setattr(csv_files, "DEFAULT_LIMITS",
                        dataclasses.replace(csv_files.DEFAULT_LIMITS, max_header_bytes=64))
    path = tmp_path / "quote.csv"
    path.write_bytes(b'Name,Size",Type\n' + b"a,1,b\n" * 20)  # 136 bytes, past the limit
    assert read_header(path) == ["Name", 'Size"', "Type"]
