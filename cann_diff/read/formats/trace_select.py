r"""The few events a pass needs from a trace's event array, the others never parsed.

A torch_npu trace_view.json spends about a dozen events on each kernel (task queue,
CANN API, HostToDevice, the kernel); the host side of the framework level needs three
of them (the op, the flow's start and end). Streaming the whole array with ijson builds
every event as Python objects: at 1M kernels that cost ~53 s of CPU a side, for a level
whose kernels come from a CSV read in ~3 s. Here the bytes are scanned block by block in numpy
for their structure (the DepthGuard's quote and bracket pass, which also finds where
each top-level event opens and closes and where every string is); an event is parsed
(orjson when importable) only when one of its strings is a wanted value, spelled as is
or with a ``\u`` escape (the only way a JSON string can spell letters otherwise). That
is a superset of the events whose ``cat`` is wanted, so the consumer sees every event
the full parse would have given it, built alike.

Events holding the ``routed`` key and no other wanted string (the HCCL task events, more
than any other kind in a Level1 trace) go to a consumer of their own, which takes their
few fields a batch at a time, past the per-event walk the other events get. It may be
offered their bytes first (a ``take`` hook): a batch it takes from the bytes is never
parsed; it vouches for their syntax itself.

What this pass cannot vouch for, it leaves to the full parse (the caller runs it): an
object-form trace (``{"traceEvents": …}``), nesting past the depth limit, an unclosed
string or array, bytes after the array, an event the parser refuses. The structure of
the whole file is checked, the syntax only inside the events parsed.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from ...settings import DEFAULT_LIMITS
from . import fast_json
from .files import SCAN_BLOCK, DepthGuard
from .trace_events import _first_chunk, _open

_QUOTE, _BACKSLASH, _U = ord('"'), ord("\\"), ord("u")
_OPENERS, _CLOSERS = (ord("{"), ord("[")), (ord("}"), ord("]"))
_EMPTY = np.zeros(0, np.int64)


class NotVouched(Exception):
    """The fast pass cannot stand for the full parse on this file."""


class _Spans(DepthGuard):
    """A DepthGuard over a top-level array that also reports its items and strings.

    Positions are offsets into the stream from its first non-blank byte (the ``[``).
    """

    def __init__(self, path: Path):
        super().__init__(path)
        self.offset = 0     # stream position of the next block's first byte
        self.closed = -1    # position of the array's closing ``]``, -1 while open

    def scan(self, block: bytes) -> tuple[np.ndarray, ...]:
        r"""Real quotes, item starts, item ends (one past the ``}``), ``\u`` escapes of ``block``.

        A backslash ending the block counts as an escape: its ``u`` may be in the next.
        """
        arr = np.frombuffer(block, np.uint8)
        quotes = np.flatnonzero(arr == _QUOTE)
        slashes = np.flatnonzero(arr == _BACKSLASH) if b"\\" in block else _EMPTY
        last = len(arr) - 1
        after = arr[np.minimum(slashes + 1, last)]
        if self.backslashes or (len(slashes) and (slashes[-1] == last
                                                  or bool(np.any(after == _QUOTE)))):
            quotes = quotes[~self._escaped(arr, quotes)]
        else:
            self.backslashes = 0
        escapes = slashes[(after == _U) | (slashes == last)]
        brackets = np.flatnonzero((arr == _OPENERS[0]) | (arr == _CLOSERS[0])
                                  | (arr == _OPENERS[1]) | (arr == _CLOSERS[1]))
        inside = (np.searchsorted(quotes, brackets) + self.in_string) % 2 == 1
        brackets = brackets[~inside]
        kind = arr[brackets]
        opening = (kind == _OPENERS[0]) | (kind == _OPENERS[1])
        depth = self.depth + np.cumsum(np.where(opening, 1, -1), dtype=np.int64)
        base, self.offset = self.offset, self.offset + len(block)
        self.in_string = bool((len(quotes) + self.in_string) % 2)
        if not len(depth):
            return quotes + base, _EMPTY, _EMPTY, escapes + base
        if int(depth.max()) > self.limit or int(depth.min()) < 0:
            raise NotVouched("nesting beyond the limit, or a bracket closing nothing")
        self.depth = int(depth[-1])
        shut = np.flatnonzero(depth == 0)
        if len(shut):
            if shut[0] != len(depth) - 1 or (len(quotes) and quotes[-1] > brackets[-1]):
                raise NotVouched("bytes after the array")
            self.closed = base + int(brackets[-1])
        starts = brackets[opening & (depth == 2)] + base
        ends = brackets[~opening & (depth == 1)] + base + 1
        return quotes + base, starts, ends, escapes + base


def _hits(region: np.ndarray, quotes: np.ndarray, wanted: list[np.ndarray],
          routed: list[np.ndarray] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Positions in ``region`` of the strings that spell a wanted value, and a routed one.

    The strings of one length are picked once for every value of that length.
    """
    if len(quotes) % 2:
        raise NotVouched("a string across the cut")
    opening, closing = quotes[0::2], quotes[1::2]
    length = closing - opening - 1
    routed = routed or []
    by_length = {size: opening[length == size]
                 for size in {len(value) for value in (*wanted, *routed)}}

    def spelling(values: list[np.ndarray]) -> np.ndarray:
        found = [_EMPTY]
        for value in values:
            candidate = by_length[len(value)]
            for at, byte in enumerate(value.tolist(), start=1):  # few survive the first
                candidate = candidate[region[candidate + at] == byte]
            found.append(candidate)
        return np.concatenate(found)

    return spelling(wanted), spelling(routed)


def _parse(items: list) -> list:
    """The items as one JSON array."""
    data = b"[" + b",".join(items) + b"]"
    try:
        orjson = fast_json.orjson  # optional: the standard parser gives the same objects
        return orjson.loads(data) if orjson is not None else json.loads(data)
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError: the full parse says it
        raise NotVouched(f"an event the parser refuses: {exc}") from None


Consumer = Callable[[list], None]
# (region, item starts, item ends, quotes): True when the batch is taken as bytes.
Take = Callable[[np.ndarray, np.ndarray, np.ndarray, np.ndarray], bool]
Routed = tuple[str, Consumer] | tuple[str, Consumer, Take]


def select_events(path: Path, wanted: Iterable[str], consume: Callable[[list], None],
                  routed: Routed | None = None) -> None:
    """Hand ``consume`` every top-level event holding a string in ``wanted`` (and a few more).

    With ``routed`` (key, consumer), an event holding the key and no string of ``wanted``
    goes to that consumer instead, parsed alike. With (key, consumer, take), ``take`` is
    offered each batch of them first: the region of the buffer that holds them (uint8),
    their starts and ends in it (ascending) and the positions of the region's real quotes;
    when it returns True the batch is its own (it must keep no view of the region), else
    the batch is parsed for the consumer. Raises NotVouched when only the full
    parse can answer for the file; the consumers may have seen events by then. Errors
    opening the file are the full parse's own (InputError); reading errors past the start
    become NotVouched, so that the full parse reports them in its words.
    """
    wanted = set(wanted) - ({routed[0]} if routed is not None else set())
    values = [np.frombuffer(v.encode(), np.uint8) for v in sorted(wanted)]
    # The parsed events are freed by their counts; the collector would walk them again and
    # again (it doubled what keeping them costs).
    try:
        with fast_json.collector_paused(), _open(path) as handle:
            block = _first_chunk(handle, path)
            if block[:1] != b"[":
                raise NotVouched("not an array of events")
            _stream(handle, block, _Spans(path), values, consume, routed)
    except (OSError, EOFError, zlib.error) as exc:
        raise NotVouched(f"cannot read: {exc}") from None


def _stream(handle, block: bytes, spans: _Spans, values: list[np.ndarray],
            consume: Callable[[list], None], routed: Routed | None = None) -> None:
    route = [np.frombuffer(routed[0].encode(), np.uint8)] if routed is not None else []
    buffer, base = bytearray(), 0    # bytes from stream position ``base`` on, not yet used
    quotes = starts = escapes = _EMPTY  # carried over: those at or after ``base``
    while block:
        if spans.closed >= 0:  # past the array: blanks only
            if block.strip():
                raise NotVouched("bytes after the array")
            block = handle.read(SCAN_BLOCK)
            continue
        block_quotes, block_starts, ends, block_escapes = spans.scan(block)
        buffer += block
        if len(buffer) > DEFAULT_LIMITS.max_pending_trace_bytes:
            raise NotVouched("an event larger than the pending bound")
        quotes = np.concatenate([quotes, block_quotes])
        starts = np.concatenate([starts, block_starts])
        escapes = np.concatenate([escapes, block_escapes])
        if len(ends):
            cut, count = int(ends[-1]), len(ends)
            if len(starts) not in (count, count + 1):
                raise NotVouched("items do not alternate")
            done, escaped = int(np.searchsorted(quotes, cut)), int(np.searchsorted(escapes, cut))
            region = np.frombuffer(buffer, np.uint8, count=cut - base)
            local = quotes[:done] - base
            found, routed_hits = _hits(region, local, values, route)
            hits = np.concatenate([found, escapes[:escaped] - base])
            item_starts, item_ends = starts[:count] - base, ends - base
            items = _items(item_starts, item_ends, hits)
            aside = _aside(_items(item_starts, item_ends, routed_hits, ordered=True), items,
                           count) if route else items[:0]
            _hand_over(buffer, item_starts, item_ends, items, consume)
            if len(aside) and routed is not None and len(routed) > 2 and \
                    routed[2](region, item_starts[aside], item_ends[aside], local):
                aside = aside[:0]
            del region  # the buffer is resized below
            if routed is not None:
                _hand_over(buffer, item_starts, item_ends, aside, routed[1])
            del buffer[:cut - base]
            base, quotes, starts, escapes = cut, quotes[done:], starts[count:], escapes[escaped:]
        block = handle.read(SCAN_BLOCK)
    if spans.closed < 0 or spans.in_string or buffer[spans.closed - base + 1:].strip():
        raise NotVouched("the array is not closed, or bytes follow it")


def _items(starts: np.ndarray, ends: np.ndarray, hits: np.ndarray,
           ordered: bool = False) -> np.ndarray:
    """The items (``starts``/``ends``) holding a hit, each once, in order.

    ``ordered``: the hits ascend (those of one value do), so no sort is needed.
    """
    item = np.searchsorted(ends, hits, "right")
    item = item[starts[np.minimum(item, len(ends) - 1)] <= hits]
    if not ordered:
        return np.unique(item)
    return item[np.r_[True, item[1:] != item[:-1]]] if len(item) else item


def _aside(routed: np.ndarray, taken: np.ndarray, count: int) -> np.ndarray:
    """The routed items that no wanted string claims already."""
    claimed = np.zeros(count, bool)
    claimed[taken] = True
    return routed[~claimed[routed]]


def _hand_over(buffer: bytearray, starts: np.ndarray, ends: np.ndarray, item: np.ndarray,
               consume: Callable[[list], None]) -> None:
    """Parse the items ``item`` (``starts``/``ends`` in ``buffer``); pass them on.

    Neighbouring items go as one slice with the comma between them: fewer, longer
    slices, and the parser checks those separators too.
    """
    if not len(item):
        return
    runs = np.flatnonzero(np.diff(item) != 1)
    first, last = item[np.r_[0, runs + 1]], item[np.r_[runs, len(item) - 1]]
    view = memoryview(buffer)
    try:
        events = _parse([view[s:e] for s, e in zip(starts[first].tolist(),
                                                   ends[last].tolist())])
    finally:
        view.release()
    consume(events)
