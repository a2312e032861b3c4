"""The JSON depth guard: brackets inside strings do not count, escapes are honoured.

Depths below are counted by hand; the property test checks that the escape-free fast path
(structure bytes only) decides exactly as the byte-by-byte scan of the same text.
"""

from pathlib import Path

import numpy as np
import pytest

from cann_diff.errors import InputError
from cann_diff.read.formats.files import DepthGuard, check_depth

HERE = Path("x.json")


@pytest.mark.parametrize("text, depth", [
    (b'{"a": [1, [2]], "b": {}}', 3),
    (b'{"a": "[[[[{{{{", "b": [1]}', 2),  # brackets in a string are text
    (b'[{"k": "a\\"[[[[", "v": [[1]]}]', 4),  # an escaped quote does not end the string
    (b'[{"k": "a\\\\", "v": [[1]]}]', 4),  # an escaped backslash does not escape the quote
    (b'["[[[[[["]', 1),
])
def test_depth_is_the_nesting_outside_strings(text, depth):
    check_depth(HERE, text, limit=depth)
    with pytest.raises(InputError, match="nested deeper than"):
        check_depth(HERE, text, limit=depth - 1)


def test_fed_in_pieces_equals_fed_whole():
    text = b'{"a": "x[", "b": [[{"c": "]}"}]], "d": "\\\\"}'
    for cut in range(1, len(text)):
        guard = DepthGuard(HERE, limit=4)
        guard.feed(text[:cut])
        guard.feed(text[cut:])
        assert guard.depth == 0 and not guard.in_string
        with pytest.raises(InputError):
            pieces = DepthGuard(HERE, limit=3)
            pieces.feed(text[:cut])
            pieces.feed(text[cut:])


def test_the_fast_path_decides_as_the_full_scan():
    rng = np.random.default_rng(7)
    alphabet = np.frombuffer(b'"[]{}ab,: ', dtype=np.uint8)
    for _ in range(500):
        blob = bytes(rng.choice(alphabet, size=int(rng.integers(1, 300))))
        for limit in (1, 2, 4):
            fast, full = DepthGuard(HERE, limit), DepthGuard(HERE, limit)
            outcomes = []
            for guard, scan in ((fast, lambda g: g.feed(blob)),
                                (full, lambda g: g._scan(np.frombuffer(blob, np.uint8), False))):
                try:
                    scan(guard)
                    outcomes.append((guard.depth, guard.in_string))
                except InputError:
                    outcomes.append("refused")
            assert outcomes[0] == outcomes[1], (blob, limit)


def _refused(call) -> bool:
    try:
        call()
    except InputError:
        return True
    return False


def test_a_whole_small_text_is_judged_as_the_guard_judges_it():
    """``check_depth`` cuts a small escape-free text's strings out at its quotes: on random
    texts it refuses exactly those the block scan refuses (an unclosed string included)."""
    rng = np.random.default_rng(11)
    alphabet = np.frombuffer(b'"[]{}ab,: ', dtype=np.uint8)
    refused = 0
    for _ in range(2000):
        blob = bytes(rng.choice(alphabet, size=int(rng.integers(0, 200))))
        for limit in (1, 2, 3):
            mine = _refused(lambda: check_depth(HERE, blob, limit))
            assert mine == _refused(lambda: DepthGuard(HERE, limit).feed(blob)), (blob, limit)
            refused += mine
    assert 1000 < refused < 5000  # both outcomes are well represented


def test_an_unclosed_string_hides_the_brackets_after_it():
    check_depth(HERE, b'[1, "[[[[', limit=1)
    with pytest.raises(InputError, match="nested deeper than 0 levels"):
        check_depth(HERE, b'[1, "[[[[', limit=0)


def test_a_small_escape_free_text_skips_the_block_scan(monkeypatch):
    from cann_diff.read.formats import files

    class Refuse(DepthGuard):
        def feed(self, data):
            raise AssertionError("scanned block by block")

    monkeypatch.setattr(files, "DepthGuard", Refuse)
    check_depth(HERE, b'{"a": [1, {"b": "[["}]}', limit=3)
    with pytest.raises(AssertionError, match="block by block"):
        check_depth(HERE, b'{"a": "\\""}', limit=3)  # an escape: the block scan
