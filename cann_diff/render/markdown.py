"""report.md from a Report: tables with tabulate, readable when pasted into a ticket.

The words come from ``content.py`` (shared with report.html); this module lays the
blocks out as GitHub Markdown and escapes every piece of text it did not write itself:
a ``|``, a backtick, ``*``, ``_`` or ``<`` in a kernel name, a path or a label stays text
and never breaks a table or starts markup.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from urllib.parse import quote

from tabulate import tabulate

from .. import format as fmt
from ..report.model import Memory, Report
from .content import BREAKDOWN_ROWS, OP_HEADERS
from .document import (
    Block,
    Bullets,
    Chart,
    Collapsed,
    Findings,
    Heading,
    Inline,
    Notes,
    Paragraph,
    Span,
    Table,
    Warnings,
    inline,
)
from .memory_section import memory_blocks

__all__ = ["BREAKDOWN_ROWS", "OP_HEADERS", "escape", "render_markdown", "render_memory_markdown",
           "to_markdown"]

_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")  # may open/close emphasis
_TAG = re.compile(r"<(?=[A-Za-z/!?])")  # a tag or an autolink; "p < 0.05" is left alone
_ENTITY = re.compile(r"&(?=#?\w+;)")
_BLOCK_START = re.compile(r"^(#|>|[-+=]|\d+[.)])")


def escape(text: str, table: bool = False, start: bool = False) -> str:
    """Plain text as Markdown that renders as exactly that text.

    ``table``: inside a table cell (newlines collapse); ``start``: the text begins a
    line, where ``#``, ``>``, ``-`` or ``1.`` would start a block.
    """
    # One space for each run of white space, the spaces between spans kept: a cell of
    # several spans (a code span, then " 32→16") would otherwise run them together.
    text = re.sub(r"\s+", " ", str(text)) if table else str(text)
    text = text.replace("\\", "\\\\")
    text = re.sub(r"([`*~])", r"\\\1", text)  # ~: GitHub's strikethrough
    text = _UNDERSCORE.sub(r"\\_", text)
    text = _TAG.sub(r"\\<", text)
    text = _ENTITY.sub("&amp;", text)
    if "](" in text or "][" in text or "]:" in text:  # would read as a link
        text = text.replace("[", "\\[").replace("]", "\\]")
    text = text.replace("|", "\\|")
    if start and _BLOCK_START.match(text):
        text = "\\" + text
    return text


def code_span(text: str, table: bool = False) -> str:
    """Literal text as a code span whose fence is longer than any backtick run inside."""
    text = " ".join(str(text).split())
    if not text:
        return ""
    runs = re.findall(r"`+", text)
    fence = "`" * (max(map(len, runs)) + 1 if runs else 1)
    pad = " " if text[0] == "`" or text[-1] == "`" else ""
    if table:  # GitHub splits a row on every unescaped pipe, code spans included
        text = text.replace("|", "\\|")
    return f"{fence}{pad}{text}{pad}{fence}"


def _span(span: Span, table: bool, start: bool) -> str:
    """A span as Markdown: control characters made visible, long runs clipped, escaped."""
    text = fmt.outside_text(span.text, fmt.TABLE_RUN if table else fmt.LONG_RUN)
    if span.is_code:
        return code_span(text, table)
    if span.report:
        return f"[{escape(text, table)}](<{quote(span.report)}/report.md>)"
    return escape(text, table, start)


def inline_md(text: Inline, table: bool = False, start: bool = True) -> str:
    """An inline as Markdown; consecutive bold spans share one ``**…**``."""
    out: list[str] = []
    bold: list[str] = []

    def close() -> None:
        if bold:
            out.append("**" + "".join(bold) + "**")
            bold.clear()

    for span in text:
        first = start and not out and not bold
        if span.is_strong:
            bold.append(_span(span, table, False))
        else:
            close()
            out.append(_span(span, table, first))
    close()
    return "".join(out)


def _table(block: Table) -> str:
    """A GitHub table; headers pass the cells' escape (a label can be a header)."""
    rows = [[inline_md(c.text, table=True, start=False).strip() for c in row]
            for row in block.rows]
    headers = [inline_md(inline(h), table=True, start=False).strip() for h in block.headers]
    return tabulate(rows, headers=headers, tablefmt="github",
                    disable_numparse=True, colalign=block.align)


def _block(block: Block, charts: Mapping[str, str]) -> str | None:
    if isinstance(block, Heading):
        return "#" * block.level + " " + inline_md(block.text, start=False)
    if isinstance(block, Paragraph):
        text = inline_md(block.text)
        if block.role == "footer":
            return f"<sub>{text}</sub>"
        return f"> {text}" if block.role == "warning" else text
    if isinstance(block, Warnings):
        # Hard breaks: consecutive ``>`` lines would otherwise run into one paragraph.
        return "  \n".join(f"> {inline_md(line)}" for line in block.lines)
    if isinstance(block, Findings):
        return "\n".join(f"- {inline_md(f.head)}  \n  {inline_md(f.detail)}"
                         for f in block.items)
    if isinstance(block, Bullets):
        return "\n".join(f"- {inline_md(item)}" for item in block.items)
    if isinstance(block, Notes):
        return "\n".join(f"{inline_md(item)}  " for item in block.items)
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, Chart):
        link = charts.get(block.name)
        return f"![{escape(block.alt)}]({link})" if link else None
    if isinstance(block, Collapsed):
        inner = (_block(b, charts) for b in block.blocks)
        return "\n\n".join([inline_md(block.summary), *(t for t in inner if t is not None)])
    raise TypeError(f"no Markdown layout for {type(block).__name__}")


def to_markdown(blocks: list[Block], charts: Mapping[str, str] | None = None) -> str:
    """Blocks as Markdown, one blank line apart; ``charts`` maps chart names to file links."""
    parts = [_block(block, charts or {}) for block in blocks]
    return "\n\n".join(part for part in parts if part is not None) + "\n"


def render_memory_markdown(memory: Memory, chart_name: str | None) -> str:
    """The Markdown "Device memory" section alone; ``chart_name`` is a relative link or None.

    Sizes in MB. Warnings become a bullet list at the end of the section.
    """
    charts = {"memory": chart_name} if chart_name else {}
    return to_markdown(memory_blocks(memory, bool(chart_name)), charts)


def render_markdown(report: Report, charts: dict[str, str] | None = None) -> str:
    """The whole report.md; ``charts`` maps chart names to relative file names."""
    from .content import report_blocks

    charts = charts or {}
    return to_markdown(report_blocks(report, charts), charts)
