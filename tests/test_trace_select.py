"""The host-side pass over trace_view.json that parses only the events it needs.

read_trace_links scans the bytes for structure and parses only the events holding a
host-side category (read/trace_select.py); anything it cannot vouch for goes to the full
ijson stream. The full stream is the reference: on real traces and on crafted ones with
tricky bytes (quotes, brackets and commas inside strings, escapes, nested event lists,
every block boundary), both must give the same HostLinks, and the crafted ones the
values worked out by hand below.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from conftest import REALDATA, needs_realdata

from cann_diff.errors import InputError
from cann_diff.read.formats import fast_json, host_links, trace_events, trace_select
from cann_diff.read.formats.host_links import HOST_SIDE, LinkScan, read_trace_links
from cann_diff.read.formats.trace_events import scan_trace
from cann_diff.read.formats.trace_select import NotVouched, select_events
from cann_diff.settings import DEFAULT_LIMITS


def reference(trace: Path):
    """HostLinks from the full ijson stream (every event parsed)."""
    return scan_trace(trace, LinkScan(trace, kernels=False)).host_links()


def fast(trace: Path):
    """HostLinks from the selective pass alone; NotVouched when it declines."""
    scan = LinkScan(trace, kernels=False)
    select_events(trace, HOST_SIDE, scan.consume)
    assert scan.parsed_alike()
    return scan.host_links()


def same(a, b) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return all(getattr(a, k).equals(getattr(b, k)) for k in ("ops", "modules", "links"))


# Written by hand, as a profiler or a hostile hand might. Kept: the two aten ops and
# the one with an escaped category, the autograd node, the module, one complete flow.
TRICKY = "[\n" + ",\n".join([
    '{"ph": "X", "cat": "cpu_op", "name": "aten::outer", "pid": 1, "tid": 1, '
    '"ts": "100.000", "dur": 10, "args": {"Input Dims": "2,3", "Sequence number": 5, '
    '"Fwd thread id": 0}}',
    # quotes, brackets, a comma and a trailing backslash inside the name
    r'{"ph": "X", "cat": "cpu_op", "name": "aten::inner \"q\" {x}, [y] },{ \\", '
    r'"pid": 1, "tid": 1, "ts": "101.000", "dur": 2, "args": {"Input Dims": "4"}}',
    '{"ph": "X", "cat": "cpu_op", "name": "aclnnInner", "pid": 1, "tid": 1, '
    '"ts": "101.500", "dur": 0.5}',  # a launch record: not a framework op
    '{"ph": "s", "cat": "async_npu", "name": "torch_to_npu", "id": 7, "pid": 1, '
    '"tid": 1, "ts": "101.600"}',
    '{"ph": "f", "cat": "async_npu", "name": "torch_to_npu", "id": 7, "pid": 9, '
    '"tid": 2, "ts": "200.000"}',
    r'{"ph": "X", "cat": "cpu\u005fop", "name": "aten::escaped_cat", "pid": 1, '
    r'"tid": 1, "ts": "120.000", "dur": 1}',  # cat spelled with an escape: cpu_op
    '{"ph": "X", "cat": "python_function", "name": "nn.Module: Net_0", "pid": 1, '
    '"tid": 1, "ts": "99.000", "dur": 30}',
    # a device event naming cpu_op, with a nested list of event-like objects
    r'{"ph": "X", "cat": "device", "name": "says \"cpu_op\" },{", "pid": 9, "tid": 2, '
    '"ts": "200.000", "dur": 5, "args": {"list": [{"a": 1},{"cat": "cpu_op", '
    '"ph": "X", "name": "aten::fake", "ts": "1.000", "dur": 1}]}}',
    '{"ph": "s", "cat": "async_npu", "name": "torch_to_npu", "id": 8, "pid": 1, '
    '"tid": 1, "ts": "121.000"}',  # a flow that never ends
    '123', '"cpu_op"', '["cpu_op", {"cat": "cpu_op"}]', '{}',  # items that are no events
    '{"ph": "X", "cat": "cpu_op", "name": "MmBackward0", "pid": 1, "tid": 3, '
    '"ts": "130.000", "dur": 4, "args": {"Sequence number": 5, "Fwd thread id": 1}}',
    '{"ph": "X", "cat": "cpu_op", "name": "ConvBackward", "pid": 1, "tid": 3, '
    '"ts": "131.000", "dur": 1, "args": {"Sequence number": -1}}',  # no seq, no ::
]) + "\n]\n"


def check_tricky(links) -> None:
    """The values worked out by hand for TRICKY (thread codes in first-seen order:
    flows' starts (1, 1) -> 0, then ops' (1, 3) -> 1)."""
    ops = links.ops
    assert ops["name"].astype(str).tolist() == [
        "aten::outer", 'aten::inner "q" {x}, [y] },{ \\', "aten::escaped_cat", "MmBackward0"]
    assert ops["start_ns"].tolist() == [100_000, 101_000, 120_000, 130_000]
    assert ops["end_ns"].tolist() == [110_000, 103_000, 121_000, 134_000]
    assert ops["thread"].tolist() == [0, 0, 0, 1]
    assert ops["input_shapes"].astype(str).tolist() == ["2,3", "4", "", ""]
    assert ops["seq"].tolist() == [5, -1, -1, 5]
    assert ops["forward"].tolist() == [True, True, True, False]
    assert links.links.to_dict("records") == [
        {"device_ns": 200_000, "thread": 0, "launch_ns": 101_600}]
    assert links.modules.to_dict("records") == [
        {"thread": 0, "start_ns": 99_000, "end_ns": 129_000, "name": "Net_0"}]


@pytest.fixture
def tricky(tmp_path) -> Path:
    path = tmp_path / "trace_view.json"
    path.write_text(TRICKY)
    json.loads(TRICKY)  # the crafted file is valid JSON
    return path


def test_crafted_trace_gives_the_hand_worked_links(tricky):
    check_tricky(fast(tricky))
    check_tricky(reference(tricky))
    check_tricky(read_trace_links(tricky))


@pytest.mark.parametrize("block", [1, 2, 3, 5, 7, 13, 64, 257])
def test_every_block_boundary_gives_the_same_links(tricky, monkeypatch, block):
    """Blocks this small cut every event, string, escape and backslash run somewhere."""
    monkeypatch.setattr(trace_select, "SCAN_BLOCK", block)
    monkeypatch.setattr(trace_events, "CHUNK", block)  # the first block too
    check_tricky(fast(tricky))


def test_backslash_runs_across_blocks(tmp_path, monkeypatch):
    r"""``\\\"`` (an escaped backslash then an escaped quote) cut at every byte."""
    name = 'aten::a\\\\\\"b\\\\'  # JSON text of: aten::a\"b\
    text = ('[{"ph": "X", "cat": "cpu_op", "name": "' + name + '", "pid": 1, "tid": 1, '
            '"ts": "1.000", "dur": 1},\n{"ph": "s", "cat": "async_npu", "id": 1, '
            '"pid": 1, "tid": 1, "ts": "1.500"},\n{"ph": "f", "cat": "async_npu", '
            '"id": 1, "pid": 2, "tid": 2, "ts": "9.000"}]')
    assert json.loads(text)[0]["name"] == 'aten::a\\"b\\'
    path = tmp_path / "trace_view.json"
    path.write_text(text)
    for block in range(1, 40):
        monkeypatch.setattr(trace_select, "SCAN_BLOCK", block)
        monkeypatch.setattr(trace_events, "CHUNK", block)
        links = fast(path)
        assert links.ops["name"].astype(str).tolist() == ['aten::a\\"b\\']
        assert links.links["launch_ns"].tolist() == [1_500]


def test_without_orjson_the_standard_parser_gives_the_same(tricky, monkeypatch):
    monkeypatch.setattr(fast_json, "orjson", None)
    check_tricky(fast(tricky))


@pytest.mark.slow
@needs_realdata
def test_real_traces_give_the_links_of_the_full_stream():
    traces = sorted(p for p in REALDATA.rglob("trace_view.json") if p.stat().st_size > 1000)
    assert len(traces) >= 5
    linked = 0
    for trace in traces:
        got = fast(trace)  # the selective pass itself, not a fallback
        assert same(got, reference(trace)), trace
        linked += got is not None and len(got.links) > 0
    assert linked >= 5


# ------------------------------------------------------------- left to the full stream

def test_object_form_is_left_to_the_full_stream(tmp_path):
    path = tmp_path / "trace.json"
    events = json.loads(TRICKY)
    path.write_text(json.dumps({"traceEvents": events, "schemaVersion": 1}))
    with pytest.raises(NotVouched):
        fast(path)
    check_tricky(read_trace_links(path))


def test_numeric_timestamps_keep_their_digits(tmp_path):
    """ijson reads ``1764246877073469.640`` as an exact Decimal; a float would not."""
    path = tmp_path / "trace_view.json"
    path.write_text('[{"ph": "s", "cat": "async_npu", "id": 1, "pid": 1, "tid": 1, '
                    '"ts": 1764246877073469.640},\n{"ph": "f", "cat": "async_npu", '
                    '"id": 1, "pid": 2, "tid": 2, "ts": 1764246877073569.641}]')
    scan = LinkScan(path, kernels=False)
    select_events(path, HOST_SIDE, scan.consume)
    assert not scan.parsed_alike()
    links = read_trace_links(path)
    assert links.links.to_dict("records") == [
        {"device_ns": 1764246877073569641, "thread": 0, "launch_ns": 1764246877073469640}]


@pytest.mark.parametrize("text, problem", [
    (TRICKY[:len(TRICKY) // 2], "truncated or invalid JSON"),
    (TRICKY.rstrip()[:-1], "truncated or invalid JSON"),        # no closing ]
    (TRICKY + "x", "truncated or invalid JSON"),                # bytes after the array
    (TRICKY.replace('"ts": "101.600"}', '"ts": "101.600"} x'), "truncated or invalid JSON"),
    ("[" + '{"a": ' * 70 + "1" + "}" * 70 + "]", "nested deeper than"),
    ("", "empty file"),
])
def test_broken_traces_say_what_the_full_stream_says(tmp_path, text, problem):
    path = tmp_path / "trace_view.json"
    path.write_text(text)
    with pytest.raises(InputError) as full:
        reference(path)
    with pytest.raises(InputError) as got:
        read_trace_links(path)
    assert problem in str(got.value) and str(got.value) == str(full.value)


def test_an_event_past_the_pending_bound_is_left_to_the_full_stream(tricky, monkeypatch):
    monkeypatch.setattr(trace_select, "DEFAULT_LIMITS",
                        replace(DEFAULT_LIMITS, max_pending_trace_bytes=100))
    with pytest.raises(NotVouched):
        fast(tricky)
    check_tricky(read_trace_links(tricky))


def test_strings_are_matched_whole(tmp_path):
    """``xcpu_op`` or ``cpu_opx`` is no hit; ``cpu_op`` as a key or name is one (harmless)."""
    path = tmp_path / "trace_view.json"
    path.write_text('[{"cat": "xcpu_op"}, {"cat": "cpu_opx"}, {"cpu_op": 1}, '
                    '{"name": "ac2g"}, {"cat": "python_function"}]')
    seen: list = []
    select_events(path, HOST_SIDE, seen.extend)
    assert seen == [{"cpu_op": 1}, {"name": "ac2g"}, {"cat": "python_function"}]


def test_spans_find_the_items_of_the_array(tmp_path):
    """Item starts and ends, by hand: ``[{…}, [..], "s", {…}]``."""
    text = b'[{"a": "}{"}, [1, {"b": 2}], "s", {"c": "\\"]"}]'
    spans = trace_select._Spans(tmp_path / "t.json")
    quotes, starts, ends, escapes = spans.scan(text)
    assert starts.tolist() == [1, 14, 34]
    assert ends.tolist() == [12, 27, 46]
    assert escapes.tolist() == []
    assert np.array_equal(quotes, [2, 4, 7, 10, 19, 21, 29, 31, 35, 37, 40, 44])  # not 42
    assert spans.closed == len(text) - 1 and spans.depth == 0


def test_read_trace_links_takes_the_selective_pass(tricky, monkeypatch):
    """On a plain torch_npu trace the full stream is never started."""
    def no_full_stream(*args, **kwargs):
        raise AssertionError("fell back to the full stream")

    monkeypatch.setattr(host_links, "scan_trace", no_full_stream)
    check_tricky(read_trace_links(tricky))


@pytest.mark.parametrize("text", ["[]", " \n[ ]\n\n", '[{"cat": "cpu_op"}, 1]'])
def test_arrays_without_links_give_none(tmp_path, text):
    path = tmp_path / "trace_view.json"
    path.write_text(text)
    assert fast(path) is None and reference(path) is None


def test_the_collector_runs_again_after_the_pass(tricky, tmp_path):
    import gc

    assert gc.isenabled()
    select_events(tricky, HOST_SIDE, lambda events: None)
    assert gc.isenabled()
    broken = tmp_path / "object.json"
    broken.write_text('{"traceEvents": []}')
    with pytest.raises(NotVouched):
        select_events(broken, HOST_SIDE, lambda events: None)
    assert gc.isenabled()  # also when the pass gives up
