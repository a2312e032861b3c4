"""Names from a profile, a path or a label are text in every output, never markup.

Hostile strings (Markdown and HTML constructs, line breaks, ESC and other controls, bidi
overrides, ``$…$`` mathtext, a 5,000-character name) go through every field that reaches
a renderer: operator type and name, input shapes, communication group, rank directory,
the labels, the CANN and torch_npu versions of profiler_info. The run must succeed, and
report.md (parsed with a CommonMark parser), report.html (parsed as a DOM) and stdout
must hold no construct the tool did not make.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest
from conftest import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from profiles import Comm, Kernel, write_profile

from cann_diff import format as fmt
from cann_diff.render.document import Paragraph, inline
from cann_diff.render.markdown import to_markdown

HOSTILE = ["SwiGlu\n# LGTM approved", "$\\undefinedmacro{x}$", "Cost $5 and $6", "$x^2$",
           "Esc\x1b[31mred\x1b[0m", "X" * 5000, "RTL\u202eevil\u202c",
           "<img src=x onerror=alert(7)>",
           "pipe|name`tick`~strike~", "[link](http://evil)", "![i](x.png)", "> quote", "- item",
           "1. one", "**bold** _em_", "&lt;entity&gt;", "<script>alert(1)</script>",
           "line\rbreak\x00nul\x85nel\u2028sep"]
LABELS = ("ba\nse<img src=x onerror=alert(7)>", "new\x1b[2J\n# fake $\\bad{x}$")
# What the tool itself writes into report.md: tables, headings, strong, code, line breaks,
# its charts, and <sub> for small print.
OWN_HTML = {"<sub>", "</sub>"}
OWN_IMAGES = {"step_breakdown.png", "step_waterfall.png", "top_movers.png", "families.png",
              "rank_heatmap.png", "rank_steps.png", "memory_timeline.png", "step_timeline.png"}
MD = MarkdownIt("commonmark").enable("table")


def _schedule(scale: float, group: str):
    ops = [Kernel(name, name, "AI_CORE", 100.0 * scale * (1 + i / 10), f"16,{i + 1};{name[:40]}")
           for i, name in enumerate(HOSTILE)]
    return [*ops, Comm("allReduce", 50.0 * scale, group=group)]


def _hostile_profile(root: Path, label: str, scale: float) -> Path:
    run = write_profile(root, label, _schedule(scale, "grp<b>\n# x"), ranks=(0, 1), noise=0.02,
                        seed=int(scale * 10)).path
    for rank_dir in sorted(run.iterdir()):
        info = next(rank_dir.glob("profiler_info_*.json"))
        data = json.loads(info.read_text())
        data["cann_version"] = "8.0\n# fake <b>$x$</b>\x1b"
        data["torch_npu_version"] = "2.1\u202e[x](y)"
        info.write_text(json.dumps(data))
        rank_dir.rename(rank_dir.with_name(rank_dir.name.replace("node0", "n<i>\x1b#")))
    return run


def _walk(tokens):
    for token in tokens:
        yield token
        if token.children:
            yield from _walk(token.children)


class _Dom(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append((tag, dict(attrs)))


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    root = tmp_path_factory.mktemp("hostile")
    base, new = _hostile_profile(root, "base", 1.0), _hostile_profile(root, "new", 1.3)
    out = root / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = subprocess.run([sys.executable, "-m", "cann_diff", str(base), str(new), "-o", str(out),
                          "--labels", ",".join(LABELS), "--top", "40"],
                         capture_output=True, text=True,
                         env=env, timeout=300)
    return run, out


@pytest.mark.slow
def test_a_hostile_profile_still_gives_a_report(hostile_run):
    run, out = hostile_run
    assert run.returncode == 0, run.stderr
    assert {"report.md", "report.html", "report.json", "top_movers.png"} <= \
        {p.name for p in out.iterdir()}
    report = json.loads((out / "report.json").read_text())
    # report.json keeps every name whole, as the profile wrote it.
    assert any(op["op_type"] == "X" * 5000 for op in report["operators"])
    assert report["new"]["label"] == LABELS[1]


@pytest.mark.slow
def test_report_md_holds_no_markup_the_tool_did_not_make(hostile_run):
    _, out = hostile_run
    text = (out / "report.md").read_text()
    tokens = list(_walk(MD.parse(text)))
    html = {t.content for t in tokens if t.type in ("html_inline", "html_block")}
    assert html <= OWN_HTML
    assert {t.attrs["src"] for t in tokens if t.type == "image"} <= OWN_IMAGES
    assert not [t for t in tokens if t.type == "link_open"]
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings[0].startswith("cann-diff:")
    assert not any("LGTM" in h or "fake" in h for h in headings[1:])
    assert not [t for t in tokens if t.type in ("s_open", "em_open")]
    for line in text.splitlines():  # no raw control character, no 5,000-character run
        assert not any(ord(c) < 32 or 0x7f <= ord(c) < 0xa0 or 0x202a <= ord(c) <= 0x202e
                       for c in line), repr(line[:80])
        assert "X" * (fmt.LONG_RUN + 1) not in line


@pytest.mark.slow
def test_report_md_renders_hostile_text_as_the_text(hostile_run):
    _, out = hostile_run
    tokens = list(_walk(MD.parse((out / "report.md").read_text())))
    shown = " ".join(t.content for t in tokens if t.type in ("text", "code_inline"))
    assert "<img src=x onerror=alert(7)>" in shown  # as text, not an image
    assert "SwiGlu\\n# LGTM approved" in shown       # the line break made visible
    assert "Esc\\x1b[31mred" in shown


@pytest.mark.slow
def test_report_html_holds_no_element_or_handler_from_a_name(hostile_run):
    _, out = hostile_run
    dom = _Dom()
    dom.feed((out / "report.html").read_text())
    tags = {tag for tag, _ in dom.tags}
    assert tags <= {"html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "h3",
                    "nav", "ol", "li", "a", "main", "section", "p", "strong", "code", "span",
                    "div", "table", "thead", "tbody", "tr", "th", "td", "figure", "img",
                    "figcaption", "footer", "script", "ul", "sub", "br", "details",
                    "summary"}
    assert [a for _, a in dom.tags if any(k.startswith("on") for k in a)] == []
    assert all(a["src"].startswith("data:image/png;base64,") for t, a in dom.tags if t == "img")
    assert sum(t == "script" for t, _ in dom.tags) == 1  # the tool's own sorter
    assert all(a["href"].startswith("#") for t, a in dom.tags if t == "a")
    # A clipped name keeps its whole text on hover.
    assert any(a.get("title", "").count("X") >= 5000 for t, a in dom.tags if t == "span")


@pytest.mark.slow
def test_stdout_has_one_line_per_record_and_no_control_bytes(hostile_run):
    run, out = hostile_run
    report = json.loads((out / "report.json").read_text())
    lines = run.stdout.splitlines()
    shown = min(5, len(report["findings"]))
    assert len(lines) == 3 + shown + 2  # headline, blank, step, findings, blank, report path
    assert not any(ord(c) < 32 for c in run.stdout.replace("\n", ""))
    assert not [line for line in lines if line.lstrip().startswith(("[high] fake", "# "))]
    assert all(not any(ord(c) < 32 for c in line) for line in run.stderr.splitlines())


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(codec="utf-8"), max_size=60))
def test_any_text_renders_as_itself_in_markdown(text):
    """A paragraph of any text parses back to one paragraph holding that text (visible)."""
    md = to_markdown([Paragraph(inline("x ", text))], {})
    tokens = MD.parse(md)
    assert [t.type for t in tokens] == ["paragraph_open", "inline", "paragraph_close"]
    children = tokens[1].children
    assert {c.type for c in children} <= {"text"}
    shown = "".join(c.content for c in children)
    assert shown == ("x " + fmt.outside_text(text)).strip()
