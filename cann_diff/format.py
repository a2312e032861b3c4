"""Number and text formatting, in one place: pure functions on scalars."""

from __future__ import annotations

import math
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # typing.TypeIs is 3.13; the checker brings typing_extensions
    from typing_extensions import TypeIs

SUPERSCRIPTS = str.maketrans("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹")


def is_missing(value: object) -> TypeIs[None]:
    """True for None and NaN (to the type checker: a value that passes is not None)."""
    return value is None or (isinstance(value, float) and math.isnan(value))


def ms(us, signed: bool = False, digits: int = 2) -> str:
    """Microseconds as milliseconds text (``12.35``, ``+1.20``); ``–`` when unknown."""
    if is_missing(us):
        return "–"
    return f"{us / 1000:+,.{digits}f}" if signed else f"{us / 1000:,.{digits}f}"


def us(value, signed: bool = False) -> str:
    """Microseconds with a unit that fits the size (µs below 1 ms, else ms)."""
    if is_missing(value):
        return "–"
    sign = "+" if signed and value > 0 else ""
    if abs(value) < 1000:
        return f"{sign}{value:,.1f} µs"
    return f"{sign}{value / 1000:,.2f} ms"


def pct(value, digits: int = 1) -> str:
    """Signed percentage (``+4.2%``); ``–`` when unknown."""
    if is_missing(value):
        return "–"
    return f"{value:+.{digits}f}%"


def count(value) -> str:
    """Count per step: integers plainly, fractions with two decimals."""
    if is_missing(value):
        return "–"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}"


def p_value(value) -> str:
    """p-value text; ``n/a`` when no test was possible."""
    if is_missing(value):
        return "n/a"
    return "<0.001" if value < 0.001 else f"{value:.3f}"


def p_phrase(value) -> str:
    """``p = 0.012`` or ``p < 0.001``; ``p n/a`` when no test was possible."""
    if is_missing(value):
        return "p n/a"
    return "p < 0.001" if value < 0.001 else f"p = {value:.3f}"


def share_of_change(share) -> str:
    """A part's signed fraction of a change as words: ``71% of the change, against it``.

    None (a part outside the changed total) is ``outside Stage``.
    """
    if share is None or is_missing(share):
        return "outside Stage"
    if share < 0:
        return f"{abs(share) * 100:.0f}% of the change, against it"
    return f"{share * 100:.0f}% of the change"


BELOW_MARK = "†"  # a significant change under its threshold (benchstat shows such a % too)


def status_mark(status: str, delta_pct, below_threshold: bool = False,
                tested: bool = True) -> str:
    """benchstat-style change column: the per-instance change with what backs it.

    ``regressed``/``improved``: the % alone. ``not-significant``: the % with ``~`` (tested,
    not significant). ``untested``: the % with "untested" (the sample sizes cannot reach
    α). ``unchanged``: under the threshold, ``~`` when not significant, the % with
    ``BELOW_MARK`` when significant, "untested" when no test could reach α.
    ``added``/``removed``/``reshaped`` say so; a count
    change is not a speed change, so it shows the per-instance % beside ``count``.
    """
    if status in ("added", "removed", "reshaped"):
        return status
    if status == "count-changed":
        return f"count ({pct(delta_pct)} per instance)" if not is_missing(delta_pct) \
            else "count"
    if status == "unchanged":
        if below_threshold:
            return f"{pct(delta_pct)}{BELOW_MARK}"
        return "~" if tested or is_missing(delta_pct) else f"{pct(delta_pct)} untested"
    if status == "not-significant":
        return f"{pct(delta_pct)} ~"
    if status == "untested":
        return f"{pct(delta_pct)} untested"
    return pct(delta_pct)


def interval(low, high) -> str:
    """Ratio interval new/base as ``[0.934, 0.971]``; empty when unknown."""
    if is_missing(low) or is_missing(high):
        return ""
    return f"[{low:.3f}, {high:.3f}]"


def shapes(text: str, width: int = 38) -> str:
    """Shapes shortened for tables; the full text stays in report.json."""
    if not text:
        return "*"
    return text if len(text) <= width else text[: width - 1] + "…"


def footnote_mark(number: int) -> str:
    """Superscript footnote number (¹, ², …)."""
    return str(number).translate(SUPERSCRIPTS)


# --------------------------------------------------------------------------- text from outside

# Control characters (C0, DEL, C1), zero-width and line/paragraph separators, bidi
# embeddings, overrides and isolates, the byte-order mark: in a name from a profile, a
# path or a label they break a line, recolour a terminal or reorder what a reader sees.
# Lone surrogates too: Python decodes a byte of a file name or argument that is not UTF-8
# (b"\xff", a GBK name) as U+DC80-U+DCFF, which no UTF-8 file, terminal or font takes.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2060-\u2069"
                      "\ud800-\udfff\ufeff\ufffe\uffff]")
# The surrogates Python's surrogateescape makes of the bytes 0x80-0xFF.
_ESCAPED_BYTES = range(0xDC80, 0xDD00)
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# A run of text without blanks longer than this is cut in the middle (a 5,000-character
# kernel name); report.json keeps it whole.
LONG_RUN = 80
TABLE_RUN = 60  # the same in a table cell


def _escape_control(match: re.Match) -> str:
    char = match.group(0)
    code = ord(char)
    if code in _ESCAPED_BYTES:  # the byte the name held: \xff, as Python shows bytes
        return f"\\x{code - 0xDC00:02x}"
    return _NAMED.get(char) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def visible(text: str) -> str:
    r"""Text with every control, invisible or bidi character written as an escape (``\\x1b``).

    A byte that was not UTF-8 (a lone surrogate from ``surrogateescape``) shows as ``\\xff``.
    """
    text = str(text)
    return _CONTROL.sub(_escape_control, text) if _CONTROL.search(text) else text


def clip(text: str, width: int) -> str:
    """``text`` cut in the middle to ``width`` characters, ``…`` where it was cut.

    The end is kept as well as the start: names that differ only in a suffix
    (``…_MatMulV2`` / ``…_MatMulV3``) still differ.
    """
    if len(text) <= width:
        return text
    tail = max(1, width // 4)
    return text[: width - tail - 1] + "…" + text[-tail:]


def clip_runs(text: str, width: int = LONG_RUN) -> str:
    """Every run without blanks longer than ``width`` clipped (``clip``)."""
    if len(text) <= width:
        return text
    return re.sub(r"\S{%d,}" % (width + 1), lambda m: clip(m.group(0), width), text)


def outside_text(text: str, width: int = LONG_RUN) -> str:
    """A string from a profile, path or label made safe to show: visible, long runs clipped."""
    return clip_runs(visible(text), width)
