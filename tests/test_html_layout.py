"""report.html as a browser lays it out: at 1,400 px every column of every table is in view.

Measured in headless Chromium (skipped without one, e.g. in CI): each table's scroll box
is as wide as the table (nothing off its right edge), and the page never scrolls sideways,
at 1,400 px and on a 420 px phone (where wide tables scroll inside their own box).
Input shapes are cut to one line in tables, whole on hover and in report.json.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from html import unescape
from pathlib import Path

import pytest
from conftest import EXAMPLES, REALDATA, needs_realdata

from cann_diff.pipeline import diff
from cann_diff.render.content import SHAPES_SHOWN
from cann_diff.render.html import render_html

BROWSER = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                if shutil.which(n)), None)
needs_browser = pytest.mark.skipif(BROWSER is None, reason="no headless Chromium on PATH")
MI = "Ascend__msinsight{}/test/data/pytorch/text/level1"

# Appended to a copy of the page (its CSP left out so that the probe may run): each table
# box's scroll and client width, then the page's, written into the DOM Chromium dumps.
PROBE = """<script>window.addEventListener('load', () => { const out = [];
document.querySelectorAll('.scroll').forEach(d => out.push(d.scrollWidth + ' ' + d.clientWidth));
out.push('page ' + document.documentElement.scrollWidth + ' ' + innerWidth);
const pre = document.createElement('pre'); pre.id = 'probe'; pre.textContent = out.join('\\n');
document.body.appendChild(pre); });</script>"""


def widths(page: str, width: int, tmp_path: Path) -> tuple[list[tuple[int, int]], tuple]:
    """(scroll, client) width of each table box and of the page, laid out ``width`` px wide.

    A frame ``width`` px wide holds the page: Chromium's window is at least 500 px.
    """
    probed = tmp_path / f"probed{width}.html"
    probed.write_text(re.sub(r'<meta http-equiv="Content-Security-Policy"[^>]*>', "", page)
                      .replace("</body>", PROBE + "</body>"))
    frame = tmp_path / f"frame{width}.html"
    frame.write_text(f'<!DOCTYPE html><iframe src="{probed.name}" style="width:{width}px;'
                     'height:2000px;border:0"></iframe>')
    target = probed if width >= 500 else frame
    dom = subprocess.run([BROWSER, "--headless", "--no-sandbox", "--disable-gpu",
                          f"--user-data-dir={tmp_path / 'profile'}",
                          "--allow-file-access-from-files", f"--window-size={max(width, 500)},900",
                          "--virtual-time-budget=5000", "--dump-dom", target.as_uri()],
                         capture_output=True, text=True, timeout=120).stdout
    if target is frame:  # the frame's document is not in the dump: probe the page alone
        pytest.skip("a frame's DOM is not dumped by this Chromium")
    text = unescape(re.search(r'<pre id="probe">(.*?)</pre>', dom, re.S).group(1))
    lines = text.splitlines()
    boxes = [tuple(map(int, line.split())) for line in lines if not line.startswith("page")]
    page_line = next(line for line in lines if line.startswith("page")).split()[1:]
    return boxes, tuple(map(int, page_line))


def pages():
    yield pytest.param(EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2", id="example")
    yield pytest.param(REALDATA / MI.format("@c1e639ee2"), REALDATA / MI.format(""),
                       id="real-910A-910B", marks=needs_realdata)


@needs_browser
@pytest.mark.slow
@pytest.mark.parametrize("base, new", list(pages()))
def test_every_table_column_is_in_view_at_1400_px(base, new, tmp_path):
    page = render_html(diff(base, new).report)
    boxes, (page_scroll, page_client) = widths(page, 1400, tmp_path)
    assert len(boxes) > 5
    cut = [(scroll, client) for scroll, client in boxes if scroll > client]
    assert cut == [], f"tables wider than their box at 1400 px: {cut}"
    assert page_scroll <= page_client


@needs_browser
@pytest.mark.slow
def test_a_narrow_window_scrolls_tables_not_the_page(tmp_path):
    page = render_html(diff(EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2").report)
    boxes, (page_scroll, page_client) = widths(page, 500, tmp_path)
    assert page_scroll <= page_client
    assert any(scroll > client for scroll, client in boxes)  # wide tables scroll in place


def test_shapes_are_one_line_cut_and_whole_on_hover():
    report = diff(EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2").report
    long = next(op.input_shapes for op in report.operators
                if len(op.input_shapes) > SHAPES_SHOWN)
    page = render_html(report)
    shown = long[:SHAPES_SHOWN - 1] + "…"
    assert f'<code><span title="{long}">{shown}</span></code>' in page
    assert "td code { white-space: nowrap; }" in page
