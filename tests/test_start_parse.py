"""Kernel starts parsed exactly: µs text → int64 ns, on the Arrow path and off it."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from cann_diff.errors import SchemaError
from cann_diff.read.formats import csv_files
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


def test_starts_with_the_profilers_tab_parse_exactly_across_chunks(monkeypatch):
    read = []

    def spy(decimals):
        read.append(len(decimals))
        return unscaled_int64(decimals)

    monkeypatch.setattr(csv_files, "unscaled_int64", spy)
    assert _parse(["1736413971558972.912\t", " 5.5 "], ["-0.5\t"]) == \
        [1736413971558972912, 5500, -500]
    assert read == [3]  # the fast path's buffers gave them


def test_any_unicode_space_is_trimmed_and_a_plus_sign_read():
    assert _parse(["\u00a012.5\u3000", "+1.5", ".25"]) == [12500, 1500, 250]


def test_a_start_beyond_16_whole_digits_is_refused():
    with pytest.raises(SchemaError, match="not a number of µs"):
        _parse(["1.000", "10000000000000000.000"])


@pytest.mark.parametrize("start", ["9223372036854775.808", "-9223372036854775.809"])
def test_a_start_at_the_edge_of_int64_is_refused_not_wrapped(start):
    # 9223372036854775808 ns is one past int64's largest: the text path (four decimals
    # send it there) must refuse it rather than wrap it to a negative start.
    with pytest.raises(SchemaError, match="not a number of µs"):
        _parse(["1.0000", start])


def test_a_trace_timestamp_at_the_edge_of_int64_is_refused_not_wrapped():
    from cann_diff.read.formats.trace_events import ts_to_ns

    assert ts_to_ns(["9223372036854774.999"], Path("trace_view.json")).tolist() == \
        [9223372036854774999]
    with pytest.raises(SchemaError, match="beyond any clock"):
        ts_to_ns(["1.5", "9223372036854775.808"], Path("trace_view.json"))
