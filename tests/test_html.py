"""report.html: one self-contained file with the same sections and words as report.md;
every name from a profile escaped, in HTML and in Markdown.

The structural checks parse the file with html.parser; one test opens it in headless
Chromium (skipped, saying why, when no Chromium is installed).
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
from html import unescape
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES, ROOT
from profiles import Kernel, aclnn, write_profile

from cann_diff.cli import main
from cann_diff.render import html as html_render
from cann_diff.render.markdown import code_span, escape

XSS = "<img src=x onerror=alert(1)>"
CHROMIUM = next((shutil.which(name) for name in ("chromium", "chromium-browser",
                                                  "google-chrome") if shutil.which(name)), None)


class Page(HTMLParser):
    """Every start tag with its attributes, the text, and the h2 headings."""

    def __init__(self, text: str):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.h2: list[str] = []
        self.scripts: list[str] = []
        self._in: list[str] = []
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        self._in.append(tag)
        if tag == "h2":
            self.h2.append("")

    def handle_endtag(self, tag):
        if tag in self._in:
            del self._in[len(self._in) - 1 - self._in[::-1].index(tag):]

    def handle_data(self, data):
        self.text.append(data)
        if "h2" in self._in:
            self.h2[-1] += data
        if self._in and self._in[-1] == "script":
            self.scripts.append(data)


def run(*args) -> None:
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("example")
    run(EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2", "-o", out, "-q")
    return out


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> Path:
    """A pair whose kernel names, types, shapes and labels try to break out of the page."""
    root = tmp_path_factory.mktemp("hostile")
    evil = [Kernel(XSS, XSS, "AI_CORE", 100.0, "8,8;8,8"),
            Kernel("aclnnX_Pipe|Type`Tick", "Pipe|Type`Tick", "AI_CORE", 50.0, "4,4"),
            aclnn("MatMulV3", 200.0, "16,16;16,16")]
    base = write_profile(root, "base", evil).path
    new = write_profile(root, "new", [k.scaled(1.5) for k in evil]).path
    out = root / "out"
    run(base, new, "-o", out, "-q", "--base-label", "<script>alert(2)</script>",
        "--new-label", "new|`label`")
    return out


# --------------------------------------------------------------------------- one file


@pytest.mark.slow
def test_report_html_is_one_file_with_inline_charts_and_no_network(example):
    page = Page((example / "report.html").read_text("utf-8"))
    images = [attrs for tag, attrs in page.tags if tag == "img"]
    linked = sorted(p.name for p in example.glob("*.png"))
    assert len(images) == len(linked) >= 6  # every chart the Markdown links, inline
    for attrs in images:
        assert attrs["src"].startswith("data:image/png;base64,")
        assert base64.b64decode(attrs["src"].split(",", 1)[1])[:8] == b"\x89PNG\r\n\x1a\n"
    for tag, attrs in page.tags:
        for name, value in attrs.items():
            if name in ("src", "href", "action", "srcset", "poster", "data"):
                assert value.startswith(("data:", "#")), (tag, name, value[:60])
    assert not [t for t, a in page.tags if t in ("link", "iframe", "object", "embed")]
    csp = next(a["content"] for t, a in page.tags if a.get("http-equiv") ==
               "Content-Security-Policy")
    assert "default-src 'none'" in csp and "img-src data:" in csp
    # The one script is allowed by its hash, nothing else can run.
    assert len(page.scripts) == 1
    digest = base64.b64encode(hashlib.sha256(page.scripts[0].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp


def test_same_sections_and_words_as_the_markdown(example):
    md = (example / "report.md").read_text("utf-8")
    page = Page((example / "report.html").read_text("utf-8"))
    assert page.h2 == re.findall(r"^## (.+)$", md, re.M)
    text = " ".join(" ".join(page.text).split())
    verdict = re.search(r"^\*\*Verdict:\*\* (.+)$", md, re.M).group(1)
    assert verdict in text
    report = json.loads((example / "report.json").read_text())
    for finding in report["findings"]:
        assert finding["title"] in text and finding["detail"] in text
    assert report["invocation"]["command"] in text and report["invocation"]["date"] in text


def test_operator_tables_are_sortable_by_their_raw_values(example):
    page = Page((example / "report.html").read_text("utf-8"))
    tables = [a for t, a in page.tags if t == "table" and a.get("class") == "sortable"]
    assert len(tables) >= 3  # improvements, below the bar, groups, ranks, families
    sorts = [float(a["data-sort"]) for t, a in page.tags if t == "td" and "data-sort" in a]
    # MatMulV2→MatMulV3 [4096,4096;4096,4096]: -604.7 µs per step, the largest improvement.
    assert any(abs(v + 604.7) < 0.05 for v in sorts)


def test_print_styles_are_there(example):
    html = (example / "report.html").read_text("utf-8")
    assert "@media print" in html and "break-inside: avoid" in html


@pytest.mark.slow
def test_no_html_flag_writes_no_html(tmp_path):
    run(EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2", "-o", tmp_path, "-q",
        "--no-charts", "--no-html")
    assert (tmp_path / "report.md").is_file() and not (tmp_path / "report.html").exists()


@pytest.mark.slow
def test_without_charts_the_html_has_no_images(tmp_path):
    run(EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2", "-o", tmp_path, "-q",
        "--no-charts")
    page = Page((tmp_path / "report.html").read_text("utf-8"))
    assert not [t for t, _ in page.tags if t == "img"]


# --------------------------------------------------------------------------- escaping


@pytest.mark.slow
def test_a_kernel_named_like_markup_is_text_in_the_html(hostile):
    html = (hostile / "report.html").read_text("utf-8")
    page = Page(html)
    assert all(a["src"].startswith("data:") for t, a in page.tags if t == "img")
    assert not [(t, a) for t, a in page.tags for name in a if name.startswith("on")]
    assert len(page.scripts) == 1 and "alert" not in page.scripts[0]
    text = "".join(page.text)
    assert XSS in text and "<script>alert(2)</script>" in text  # shown, as text
    assert "&lt;img src=x onerror=alert(1)&gt;" in html


def test_pipes_and_backticks_in_names_do_not_break_markdown_tables(hostile):
    md = (hostile / "report.md").read_text("utf-8")
    unescaped_pipe = re.compile(r"(?<!\\)\|")
    for table in re.findall(r"(?:^\|.*\|$\n?)+", md, re.M):
        lines = table.strip("\n").split("\n")
        columns = len(unescaped_pipe.findall(lines[0]))
        for line in lines:
            # Pipes inside code spans are escaped too: GitHub splits on every bare one.
            assert len(unescaped_pipe.findall(line)) == columns, line
    assert "Pipe\\|Type\\`Tick" in md
    assert "# cann-diff: \\<script>alert(2)\\</script> vs new\\|\\`label\\`" in md
    assert "<img src" not in md.replace("\\<img src", "")  # no raw tag for GitHub to render


@pytest.mark.parametrize("text, markdown", [
    ("p < 0.05", "p < 0.05"),  # not a tag: left alone
    ("<img src=x>", "\\<img src=x>"),
    ("a|b", "a\\|b"),
    ("torch_npu", "torch_npu"),  # intraword underscores never emphasise
    ("_profiler_level", "\\_profiler_level"),
    ("AllReduce *", "AllReduce \\*"),
    ("[x](http://e)", "\\[x\\](http://e)"),
    ("[4096,4096] -5%", "[4096,4096] -5%"),
    ("&lt;", "&amp;lt;"),
    ("a`b", "a\\`b"),
])
def test_markdown_escape(text, markdown):
    assert escape(text) == markdown


def test_markdown_escape_at_a_line_start():
    assert escape("# not a heading", start=True) == "\\# not a heading"
    assert escape("1. not a list", start=True) == "\\1. not a list"


@pytest.mark.parametrize("text, span", [
    ("4096,4096", "`4096,4096`"),
    ("a`b", "``a`b``"),
    ("`edge", "`` `edge ``"),
])
def test_code_spans_outfence_backticks(text, span):
    assert code_span(text) == span


def test_code_span_in_a_table_escapes_its_pipes():
    assert code_span("a|b", table=True) == "`a\\|b`"


# --------------------------------------------------------------------------- browser


def _checked_copy(report: Path, target: Path) -> Path:
    """The report with a checking script first in <head>, allowed by its hash in the CSP.

    It records errors, console errors and CSP violations, then on load: images that did
    not decode, the h2 headings, and whether a click sorts the first sortable table.
    """
    check = """
window.__errors = [];
window.addEventListener("error", function (e) {
  __errors.push("error: " + (e.message || (e.target && (e.target.src || "").slice(0, 40))));
}, true);
document.addEventListener("securitypolicyviolation", function (e) {
  __errors.push("csp: " + e.violatedDirective);
});
var consoleError = console.error;
console.error = function () {
  __errors.push("console: " + Array.prototype.join.call(arguments, " "));
  consoleError.apply(console, arguments);
};
window.addEventListener("load", function () {
  var images = Array.prototype.slice.call(document.images);
  var table = document.querySelector("table.sortable");
  var headers = Array.prototype.slice.call(table.tHead.rows[0].cells);
  var column = headers.findIndex(function (h) { return h.textContent.trim() === "Δ"; });
  headers[column].querySelector("button").click();
  var values = Array.prototype.map.call(table.tBodies[0].rows, function (row) {
    return parseFloat(row.cells[column].getAttribute("data-sort"));
  });
  var out = document.createElement("pre");
  out.id = "cann-diff-check";
  out.textContent = JSON.stringify({
    images: images.length,
    broken: images.filter(function (i) { return !i.complete || i.naturalWidth === 0; })
                  .map(function (i) { return i.alt; }),
    errors: __errors,
    sections: Array.prototype.map.call(document.querySelectorAll("h2"),
                                       function (h) { return h.textContent; }),
    sorted: values});
  document.body.appendChild(out);
});
"""
    digest = base64.b64encode(hashlib.sha256(check.encode()).digest()).decode()
    html = report.read_text("utf-8")
    html = html.replace("script-src 'sha256-", f"script-src 'sha256-{digest}' 'sha256-", 1)
    html = html.replace("<head>", f"<head><script>{check}</script>", 1)
    target.write_text(html, "utf-8")
    return target


@pytest.mark.slow
@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium on PATH (Debian: apt-get install "
                                             "chromium): the in-browser check is skipped")
def test_report_html_in_headless_chromium(example, tmp_path):
    page = _checked_copy(example / "report.html", tmp_path / "checked.html")
    command = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
               "--disable-background-networking", "--disable-component-update",
               "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
               "--enable-logging=stderr", "--v=0", "--virtual-time-budget=10000",
               "--dump-dom", page.as_uri()]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    found = re.search(r'<pre id="cann-diff-check">(.*?)</pre>', done.stdout, re.S)
    assert found, f"no check result in the DOM; stderr: {done.stderr[-2000:]}"
    check = json.loads(unescape(found.group(1)))
    md = (example / "report.md").read_text("utf-8")
    assert check["images"] == md.count("](") >= 6
    assert check["broken"] == [] and check["errors"] == []
    assert check["sections"] == re.findall(r"^## (.+)$", md, re.M)
    assert check["sorted"] == sorted(check["sorted"], reverse=True)  # first click: largest Δ
    assert "Uncaught" not in done.stderr and "Refused to" not in done.stderr


def test_the_csp_hashes_match_the_style_and_the_script():
    def sha(text: str) -> str:
        return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()

    assert f"'sha256-{sha(html_render.STYLE)}'" in html_render.CSP
    assert f"'sha256-{sha(html_render.SCRIPT)}'" in html_render.CSP


def test_the_readme_shows_a_screenshot_of_the_html():
    shot = ROOT / "docs" / "report-html.png"
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "](docs/report-html.png)" in (ROOT / "README.md").read_text(encoding="utf-8")
