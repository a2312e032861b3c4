"""The report as a document, before any syntax: headings, paragraphs, tables, charts.

``content.py`` turns a Report into these blocks once; ``markdown.py`` and ``html.py``
lay the same blocks out, so report.md and report.html carry the same sections and
words. Text is a tuple of ``Span``: plain text, ``strong``, ``code`` (or code in bold).
Every string from a profile or the command line stays a plain or code span, and each
renderer escapes it for its own syntax (a kernel named ``<img …>`` or ``a|b`` is text
in both).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import format as fmt


@dataclass(frozen=True)
class Span:
    """A run of text: ``style`` is ``""`` (plain), ``strong``, ``code`` or ``strong code``.

    ``report``: the directory (relative to this report) of another report the text links
    to; each renderer links its own file there (report.md from report.md, report.html
    from report.html). ``whole``: the text before it was cut to fit a table (report.html
    shows it on hover), ``""`` when nothing was cut.
    """

    text: str
    style: str = ""
    report: str = ""
    whole: str = ""

    @property
    def is_strong(self) -> bool:
        """Bold (possibly code inside bold)."""
        return "strong" in self.style.split()

    @property
    def is_code(self) -> bool:
        """Literal text."""
        return "code" in self.style.split()


Inline = tuple[Span, ...]


def inline(*parts: str | Span | tuple) -> Inline:
    """Join strings (plain), spans and inlines into one inline."""
    out: list[Span] = []
    for part in parts:
        if isinstance(part, Span):
            out.append(part)
        elif isinstance(part, tuple):
            out.extend(part)
        elif part:
            out.append(Span(str(part)))
    return tuple(out)


def strong(*parts: str | Span | tuple) -> Inline:
    """Bold text; code inside stays code (``**HIGH · `id` · title**``)."""
    return tuple(Span(s.text, "strong code" if s.is_code else "strong") for s in inline(*parts))


def code(text: str, whole: str = "") -> Span:
    """Literal text: shapes, paths, ids, commands; ``whole`` when ``text`` is it cut."""
    return Span(str(text), "code", whole=str(whole) if whole != text else "")


def report_link(text: str, directory: str) -> Span:
    """``text`` linking to the report in ``directory`` (its report.md / report.html)."""
    return Span(str(text), "", str(directory))


def plain_text(text: Inline) -> str:
    """The words of an inline without any markup."""
    return "".join(span.text for span in text)


@dataclass(frozen=True)
class Heading:
    """A section (level 2) or subsection (level 3) title; level 1 is the report title."""

    level: int
    text: Inline
    anchor: str = ""


@dataclass(frozen=True)
class Paragraph:
    """A paragraph; ``role``: ``verdict``, ``absent`` (what is missing and why), ``small``."""

    text: Inline
    role: str = ""


@dataclass(frozen=True)
class Warnings:
    """Caveats that must be seen (⚠ lines right under the verdict)."""

    lines: tuple[Inline, ...]


@dataclass(frozen=True)
class Finding:
    """One verdict: the bold head line and its detail."""

    severity: str
    head: Inline
    detail: Inline


@dataclass(frozen=True)
class Findings:
    """The list of findings."""

    items: tuple[Finding, ...]


@dataclass(frozen=True)
class Bullets:
    """A plain bullet list; ``role``: ``causes`` (the verdict's), else plain."""

    items: tuple[Inline, ...]
    role: str = ""


@dataclass(frozen=True)
class Cell:
    """A table cell; ``sort`` is the raw value a sortable table orders by (None: the text)."""

    text: Inline
    sort: float | None = None


def cell(*parts: str | Span | tuple, sort: float | None = None) -> Cell:
    """A cell of joined text; a missing (NaN) sort value sorts as text."""
    return Cell(inline(*parts), None if sort is None or fmt.is_missing(sort) else float(sort))


@dataclass(frozen=True)
class Table:
    """Rows of cells under ``headers``; ``align`` per column (``left``/``right``) or None.

    ``sortable`` tables can be reordered by a column in report.html; ``prose`` names the
    columns of a few words (a why cell) that report.html wraps at a readable width rather
    than widen the table.
    """

    headers: tuple[str, ...]
    rows: tuple[tuple[Cell, ...], ...]
    align: tuple[str, ...] | None = None
    sortable: bool = False
    prose: tuple[str, ...] = ()


@dataclass(frozen=True)
class Chart:
    """A chart by name (``draw_charts``' key); left out when the chart was not drawn."""

    name: str
    alt: str


@dataclass(frozen=True)
class Notes:
    """Numbered footnotes (the caveats), each already starting with its mark."""

    items: tuple[Inline, ...]


@dataclass(frozen=True)
class Collapsed:
    """Detail a reader opens when wanted: ``summary`` says what it holds (and what differs).

    report.html folds it (``<details>``); report.md shows the summary, then the blocks.
    """

    summary: Inline
    blocks: tuple


Block = Heading | Paragraph | Warnings | Findings | Bullets | Table | Chart | Notes | Collapsed


class Footnotes:
    """Numbered caveats, printed at the end as benchstat does."""

    def __init__(self):
        self.notes: list[Inline] = []

    def mark(self, text: str | Inline) -> str:
        """Register ``text`` (once) and return its superscript mark."""
        note = inline(text)
        if note not in self.notes:
            self.notes.append(note)
        return fmt.footnote_mark(self.notes.index(note) + 1)

    def blocks(self) -> list[Block]:
        """The notes section (nothing when there is no note)."""
        if not self.notes:
            return []
        return [Heading(2, inline("Notes"), "notes"),
                Notes(tuple(inline(f"{fmt.footnote_mark(i)} ", note)
                            for i, note in enumerate(self.notes, 1)))]


def section(title: str, anchor: str) -> Heading:
    """A level-2 heading with its HTML anchor."""
    return Heading(2, inline(title), anchor)


def absent(title: str, text: str) -> Paragraph:
    """One line in place of a section without data: what is absent and why."""
    return Paragraph(inline(strong(f"{title}:"), f" {text}"), "absent")
