"""report.html: the whole report in one self-contained file for a ticket attachment.

The same blocks (``content.py``) as report.md, laid out as HTML: charts inline as PNG
data URIs, a small vanilla script that sorts the tables with ``class="sortable"``, print
styles so that "Save as PDF" gives a clean document. Nothing is fetched: a Content
Security Policy allows images from ``data:`` only and exactly this page's style and
script (by hash), so even an escaped-then-broken name could not run code. Every string
from a profile or the command line goes through ``html.escape``.
"""

from __future__ import annotations

import base64
import hashlib
import struct
from collections.abc import Mapping
from html import escape
from urllib.parse import quote

from .. import format as fmt
from ..report import Report
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
    Table,
    Warnings,
    plain_text,
)

STYLE = """
:root { --ink: #1b1b1b; --muted: #5a5a5a; --rule: #d0d0d0; --band: #f4f6f8;
        --high: #D55E00; --medium: #E69F00; --info: #0072B2; --note: #fff8e1; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", sans-serif;
       color: var(--ink); margin: 0 auto; max-width: 86rem; padding: 1.5rem 2rem 3rem; }
h1 { font-size: 1.6rem; margin: 0 0 .6rem; }
h2 { font-size: 1.25rem; margin: 2rem 0 .6rem; padding-bottom: .2rem;
     border-bottom: 1px solid var(--rule); }
h3 { font-size: 1.05rem; margin: 1.4rem 0 .4rem; }
code { font: .88em/1.3 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
       background: var(--band); padding: 0 .25em; border-radius: 3px;
       overflow-wrap: anywhere; }
.verdict { font-size: 1.08rem; margin-bottom: .3rem; }
ul.causes { margin: .2rem 0 .6rem; padding-left: 1.4rem; }
ul.causes li { margin: .15rem 0; }
details { margin: .6rem 0; }
details > summary { cursor: pointer; }
.warnings, .warning { background: var(--note); border-left: 4px solid var(--medium);
                      padding: .4rem .8rem; margin: .8rem 0; }
.warnings p { margin: .15rem 0; }
.absent { color: var(--muted); }
.small, footer { color: var(--muted); font-size: .85rem; }
nav ol { columns: 2 24rem; column-gap: 2rem; margin: .4rem 0 0; padding-left: 1.6rem;
         font-size: .9rem; }
nav li { break-inside: avoid; }
.scroll { overflow-x: auto; margin: .6rem 0;
          background: linear-gradient(to right, #fff 30%, rgba(255,255,255,0)),
                      linear-gradient(to left, #fff 30%, rgba(255,255,255,0)) 100% 0,
                      radial-gradient(farthest-side at 0 50%, rgba(0,0,0,.22), transparent),
                      radial-gradient(farthest-side at 100% 50%, rgba(0,0,0,.22), transparent)
                      100% 0;
          background-repeat: no-repeat; background-size: 2.5rem 100%, 2.5rem 100%,
                      .9rem 100%, .9rem 100%;
          background-attachment: local, local, scroll, scroll; }
table { border-collapse: collapse; font-size: .86rem; font-variant-numeric: tabular-nums; }
th, td { border: 1px solid var(--rule); padding: .2rem .5rem; vertical-align: top;
         text-align: left; }
th { background: var(--band); }
td.num, th.num { text-align: right; }
td.num { white-space: nowrap; }
td.prose { min-width: 12rem; max-width: 24rem; overflow-wrap: anywhere; }
/* A table's names wrap anywhere rather than widen it; its shapes stay one line, cut to
   fit with the whole text on hover. */
td:first-child { overflow-wrap: anywhere; min-width: 8.5rem; }
td code { white-space: nowrap; }
tbody tr:nth-child(even) { background: #fafbfc; }
th button { font: inherit; font-weight: bold; border: 0; background: none; padding: 0;
            cursor: pointer; color: inherit; text-align: inherit; }
th button::after { content: " \\2195"; color: var(--muted); font-weight: normal; }
th[aria-sort="ascending"] button::after { content: " \\2191"; }
th[aria-sort="descending"] button::after { content: " \\2193"; }
ul.findings { list-style: none; padding: 0; }
ul.findings li { border-left: 4px solid var(--info); padding: .2rem .8rem; margin: .6rem 0; }
ul.findings li.high { border-color: var(--high); }
ul.findings li.medium { border-color: var(--medium); }
ul.findings p { margin: .2rem 0; }
figure { margin: 1rem 0; }
figure img { max-width: 100%; height: auto; border: 1px solid var(--rule); }
figcaption { color: var(--muted); font-size: .85rem; }
.notes p { margin: .1rem 0; font-size: .9rem; }
@page { margin: 14mm 12mm; }
/* A phone: the page's margins give way to the tables (which scroll sideways in their box). */
@media (max-width: 40rem) {
  body { padding: 1rem .75rem 2rem; }
  td:first-child { min-width: 6rem; }
}
@media print {
  body { max-width: none; padding: 0; font-size: 10pt; }
  nav { display: none; }
  h2, h3 { break-after: avoid; }
  figure, tr, .warnings, ul.findings li { break-inside: avoid; }
  thead { display: table-header-group; }
  .scroll { overflow: visible; }
  table { font-size: 8pt; }
  th button::after { content: ""; }
  a { color: inherit; text-decoration: none; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
"""

SCRIPT = """
(function () {
  "use strict";
  function value(cell) {
    var raw = cell.getAttribute("data-sort");
    return raw === null ? null : parseFloat(raw);
  }
  function sortBy(table, column, header) {
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    var descending = header.getAttribute("aria-sort") !== "descending";
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (cell) {
      cell.removeAttribute("aria-sort");
    });
    header.setAttribute("aria-sort", descending ? "descending" : "ascending");
    rows.sort(function (a, b) {
      var x = a.cells[column], y = b.cells[column];
      var vx = value(x), vy = value(y), order;
      if (vx !== null && vy !== null) { order = vx - vy; }
      else if (vx !== null) { return -1; }
      else if (vy !== null) { return 1; }
      else { order = x.textContent.localeCompare(y.textContent); }
      return descending ? -order : order;
    });
    rows.forEach(function (row) { body.appendChild(row); });
  }
  Array.prototype.forEach.call(document.querySelectorAll("table.sortable"), function (table) {
    Array.prototype.forEach.call(table.tHead.rows[0].cells, function (header, column) {
      var button = document.createElement("button");
      button.type = "button";
      button.title = "Sort by this column";
      while (header.firstChild) { button.appendChild(header.firstChild); }
      header.appendChild(button);
      button.addEventListener("click", function () { sortBy(table, column, header); });
    });
  });
}());
"""


def _sha256(text: str) -> str:
    return base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii")


CSP = (f"default-src 'none'; img-src data:; style-src 'sha256-{_sha256(STYLE)}'; "
       f"script-src 'sha256-{_sha256(SCRIPT)}'; base-uri 'none'; form-action 'none'")


def png_data_uri(data: bytes) -> tuple[str, int | None, int | None]:
    """A PNG as a data URI, with its width and height in pixels (None if not a PNG)."""
    size = struct.unpack(">II", data[16:24]) if data[:8] == b"\x89PNG\r\n\x1a\n" else (None,) * 2
    return "data:image/png;base64," + base64.b64encode(data).decode("ascii"), *size


def inline_html(text: Inline) -> str:
    """An inline as HTML: every span escaped, bold runs in one ``<strong>``."""
    out: list[str] = []
    bold: list[str] = []

    def piece(span) -> str:
        shown = fmt.visible(span.text)
        clipped = fmt.clip_runs(shown)
        body = escape(clipped)
        whole = fmt.visible(span.whole) if span.whole else shown
        if clipped != whole:  # the whole text on hover; report.json has it too
            body = f'<span title="{escape(whole)}">{body}</span>'
        if span.report:
            body = f'<a href="{escape(quote(span.report))}/report.html">{body}</a>'
        return f"<code>{body}</code>" if span.is_code else body

    def close() -> None:
        if bold:
            out.append("<strong>" + "".join(bold) + "</strong>")
            bold.clear()

    for span in text:
        if span.is_strong:
            bold.append(piece(span))
        else:
            close()
            out.append(piece(span))
    close()
    return "".join(out)


def _numeric(block: Table, column: int) -> bool:
    """A column whose filled cells all carry a raw value: figures, aligned right."""
    cells = [row[column] for row in block.rows if row[column].text]
    return bool(cells) and all(c.sort is not None for c in cells)


def _table(block: Table) -> str:
    if block.align:
        right = [a == "right" for a in block.align]
    else:
        right = [_numeric(block, i) for i in range(len(block.headers))]
    numeric = ' class="num"'
    # A prose column (a why cell) wraps at a readable width instead of widening the table.
    kinds = [numeric if r else (' class="prose"' if h in block.prose else "")
             for h, r in zip(block.headers, right)]
    head = "".join(f'<th scope="col"{numeric if r else ""}>{escape(fmt.visible(h))}</th>'
                   for h, r in zip(block.headers, right))
    rows = []
    for row in block.rows:
        cells = []
        for c, kind in zip(row, kinds):
            attrs = kind + (f' data-sort="{c.sort!r}"' if c.sort is not None else "")
            cells.append(f"<td{attrs}>{inline_html(c.text)}</td>")
        rows.append("<tr>" + "".join(cells) + "</tr>")
    kind = ' class="sortable"' if block.sortable else ""
    return (f'<div class="scroll"><table{kind}><thead><tr>{head}</tr></thead>'
            f"<tbody>{''.join(rows)}</tbody></table></div>")


def _chart(block: Chart, images: Mapping[str, bytes]) -> str | None:
    data = images.get(block.name)
    if data is None:
        return None
    uri, width, height = png_data_uri(data)
    size = f' width="{width}" height="{height}"' if width else ""
    return (f'<figure id="chart-{escape(block.name)}"><img src="{uri}" alt="{escape(block.alt)}"'
            f"{size}><figcaption>{escape(block.alt)}</figcaption></figure>")


def _block(block: Block, images: Mapping[str, bytes]) -> str | None:
    if isinstance(block, Heading):
        anchor = f' id="{escape(block.anchor)}"' if block.anchor else ""
        return f"<h{block.level}{anchor}>{inline_html(block.text)}</h{block.level}>"
    if isinstance(block, Paragraph):
        role = f' class="{escape(block.role)}"' if block.role else ""
        return f"<p{role}>{inline_html(block.text)}</p>"
    if isinstance(block, Warnings):
        lines = "".join(f"<p>{inline_html(line)}</p>" for line in block.lines)
        return f'<div class="warnings" role="note">{lines}</div>'
    if isinstance(block, Findings):
        items = "".join(f'<li class="{escape(f.severity)}"><p>{inline_html(f.head)}</p>'
                        f"<p>{inline_html(f.detail)}</p></li>" for f in block.items)
        return f'<ul class="findings">{items}</ul>'
    if isinstance(block, Bullets):
        role = f' class="{escape(block.role)}"' if block.role else ""
        return f"<ul{role}>" + "".join(f"<li>{inline_html(i)}</li>" for i in block.items) + \
            "</ul>"
    if isinstance(block, Collapsed):
        inner = (_block(b, images) for b in block.blocks)
        return (f"<details><summary>{inline_html(block.summary)}</summary>"
                + "".join(t for t in inner if t is not None) + "</details>")
    if isinstance(block, Notes):
        items = "".join(f"<p>{inline_html(item)}</p>" for item in block.items)
        return f'<div class="notes">{items}</div>'
    if isinstance(block, Table):
        return _table(block)
    if isinstance(block, Chart):
        return _chart(block, images)
    raise TypeError(f"no HTML layout for {type(block).__name__}")


def to_html(blocks: list[Block], images: Mapping[str, bytes] | None = None,
            generator: str = "cann-diff") -> str:
    """The blocks as one HTML document; ``images`` maps chart names to PNG bytes.

    Blocks before the first level-2 heading form the header, each level-2 heading opens
    a ``<section>``, and a footer paragraph closes the page.
    """
    images = images or {}
    title = next((plain_text(b.text) for b in blocks
                  if isinstance(b, Heading) and b.level == 1), "cann-diff report")
    header: list[str] = []
    sections: list[tuple[Heading, list[str]]] = []  # a level-2 heading and its blocks
    footer: list[str] = []
    for block in blocks:
        if isinstance(block, Paragraph) and block.role == "footer":
            footer.append(f"<p>{inline_html(block.text)}</p>")
            continue
        text = _block(block, images)
        if text is None:
            continue
        if isinstance(block, Heading) and block.level == 2:
            sections.append((block, [text]))
        elif sections:
            sections[-1][1].append(text)
        else:
            header.append(text)
    toc = "".join(f'<li><a href="#{escape(head.anchor)}">{inline_html(head.text)}</a></li>'
                  for head, _ in sections if head.anchor)
    body = "\n".join(f'<section id="section-{escape(head.anchor)}">\n' + "\n".join(parts) +
                      "\n</section>" for head, parts in sections)
    return "\n".join([
        "<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f'<meta name="generator" content="{escape(generator)}">',
        f"<title>{escape(fmt.visible(title))}</title>", f"<style>{STYLE}</style>", "</head>",
        "<body>",
        "<header>", *header, "</header>",
        f'<nav aria-label="Sections"><strong>Sections</strong><ol>{toc}</ol></nav>',
        "<main>", body, "</main>", "<footer>", *footer, "</footer>",
        f"<script>{SCRIPT}</script>", "</body>", "</html>", ""])


def render_html(report: Report, images: Mapping[str, bytes] | None = None) -> str:
    """The whole report.html; ``images`` maps chart names to the PNG bytes drawn."""
    from .content import report_blocks

    images = images or {}
    version = report.tool.version
    return to_html(report_blocks(report, images), images,
                   f"cann-diff {version}" if version else "cann-diff")
