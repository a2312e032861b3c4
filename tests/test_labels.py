"""Two inputs with the same default label, told apart wherever a label shows.

A directory compared with itself was labelled ``base:cann7.0.1.3`` and
``new:cann7.0.1.3``; the charts put the side before a label, so their legends read
"base: base:cann7.0.1.3". Now: ``cann7.0.1.3 (base)`` and ``cann7.0.1.3 (new)``, and two
copies of one directory under different parents keep the shortest path suffix that
differs (``a/cann7.0.1.3``, ``b/cann7.0.1.3``).
"""

from __future__ import annotations

import json
import shutil

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES
from matplotlib.text import Text

from cann_diff.cli import main
from cann_diff.render import charts

RUN = EXAMPLES / "cann7.0.1.3"


@pytest.fixture
def chart_texts(monkeypatch):
    """Every text drawn on a chart during the test (titles, ticks, legends)."""
    texts: list[str] = []
    draw = charts.png_bytes

    def drawing(fig):
        fig.canvas.draw()  # drawn: the tick labels hold their text
        texts.extend(t.get_text() for t in fig.findobj(Text) if t.get_text())
        return draw(fig)

    monkeypatch.setattr(charts, "png_bytes", drawing)
    return texts


def run_cli(*args):
    # One job: the charts are drawn in this process, where ``chart_texts`` sees them.
    result = CliRunner().invoke(main, [*map(str, args), "--jobs", "1"])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.slow
def test_a_run_against_itself_is_labelled_by_its_side_everywhere(tmp_path, chart_texts):
    out = tmp_path / "out"
    stdout = run_cli(RUN, RUN, "-o", out)
    base, new = "cann7.0.1.3 (base)", "cann7.0.1.3 (new)"
    report = json.loads((out / "report.json").read_text())
    assert (report["base"]["label"], report["new"]["label"]) == (base, new)
    md = (out / "report.md").read_text()
    assert md.splitlines()[0] == f"# cann-diff: {base} vs {new}"
    html = (out / "report.html").read_text()
    assert f"<title>cann-diff: {base} vs {new}</title>" in html
    assert f"between {base} and {new}" in stdout
    legends = [t for t in chart_texts if "cann7" in t]
    assert f"base: {base}" in legends and f"new: {new}" in legends  # step waterfall
    assert f"base\n{base}" in legends and f"new\n{new}" in legends  # step breakdown
    for text in (md, html, stdout, *chart_texts):
        assert "base:cann7" not in text and "new:cann7" not in text


@pytest.mark.slow
def test_copies_under_different_parents_are_named_by_their_parents(tmp_path, chart_texts):
    for parent in ("a", "b"):
        shutil.copytree(RUN, tmp_path / parent / RUN.name)
    out = tmp_path / "out"
    run_cli(tmp_path / "a" / RUN.name, tmp_path / "b" / RUN.name, "-o", out, "--no-html")
    report = json.loads((out / "report.json").read_text())
    assert (report["base"]["label"], report["new"]["label"]) == ("a/cann7.0.1.3",
                                                                 "b/cann7.0.1.3")
    assert "base: a/cann7.0.1.3" in chart_texts and "new: b/cann7.0.1.3" in chart_texts
    assert (out / "report.md").read_text().startswith(
        "# cann-diff: a/cann7.0.1.3 vs b/cann7.0.1.3\n")
