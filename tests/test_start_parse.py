"""Kernel starts parsed exactly: µs text → int64 ns, on the Arrow path and off it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from cann_diff.errors import SchemaError
from cann_diff.read.formats.csv_files import parse_us_to_ns, unscaled_int64

DECIMAL = pa.decimal128(23, 3)
PATH = Path("kernel_details.csv")


def _parse(*chunks: list[str]) -> list[int]:
    return parse_us_to_ns(pa.chunked_array([pa.array(c) for c in chunks], type=pa.string()),
                          PATH, "Start Time(us)").tolist()


def test_the_unscaled_decimal_is_the_ns_and_keeps_its_sign():
    values = pa.chunked_array([pa.array(["1736413971558972.912", "-0.5", "0.001"]).cast(DECIMAL)])
    assert unscaled_int64(values).tolist() == [1736413971558972912, -500, 1]


def test_a_sliced_chunk_is_read_from_its_offset():
    whole = pa.array(["1.000", "2.000", "3.250", "4.000"]).cast(DECIMAL)
    values = pa.chunked_array([whole.slice(1, 2), whole.slice(3, 1)])
    assert unscaled_int64(values).tolist() == [2000, 3250, 4000]


def test_a_value_beyond_int64_gives_no_answer():
    # 10^19 ns does not fit an int64 (9.22 × 10^18).
    values = pa.chunked_array([pa.array(["1.000", "10000000000000000.000"]).cast(DECIMAL)])
    assert unscaled_int64(values) is None


def test_starts_with_the_profilers_tab_parse_exactly_across_chunks():
    assert _parse(["1736413971558972.912\t", " 5.5 "], ["-0.5\t"]) == \
        [1736413971558972912, 5500, -500]


def test_other_whitespace_is_stripped_on_the_text_path():
    # A no-break space is no ASCII whitespace: the decimal cast fails, the text parse strips it.
    assert _parse(["\u00a01736413971558972.912\u00a0", "2.000"]) == [1736413971558972912, 2000]


def test_a_start_beyond_16_whole_digits_is_refused():
    with pytest.raises(SchemaError, match="not a number of µs"):
        _parse(["1.000", "10000000000000000.000"])
