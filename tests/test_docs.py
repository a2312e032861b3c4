"""The README and docs/ are part of the product: their commands, links and quoted output stay true.

The README is a user's first screen (at most 150 lines; its first two code blocks are the
commands CI runs); contracts and internals live in docs/, reached by links that must
resolve, anchors included.
"""

import json
import re
import unicodedata
from pathlib import Path
from urllib.parse import unquote

import pytest
from click.testing import CliRunner
from conftest import ROOT

from cann_diff import errors
from cann_diff.cli import main

README_PATH = ROOT / "README.md"
README = README_PATH.read_text(encoding="utf-8")
USAGE = (ROOT / "docs" / "usage.md").read_text(encoding="utf-8")
PAGES = [README_PATH, *sorted((ROOT / "docs").glob("*.md"))]

FENCE = re.compile(r"^```[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
# [text](target) and ![alt](target), target optionally in <>, optionally with a "title".
LINK = re.compile(r"\[[^\]\n]*\]\(\s*<?([^()<>\s]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[a-z][a-z0-9+.-]*:", re.I)
HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t#]*$", re.M)
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"", re.I)


def prose(text: str) -> str:
    """The text without fenced blocks and code spans: a link written as code is no link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens.

    Code spans keep their text, links their label; emphasis marks are punctuation.
    """
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = unicodedata.normalize("NFC", text).lower()
    # GitHub keeps \p{Word} (letters, marks, decimal digits, connectors such as _), - and space.
    kept = "".join(ch for ch in text if ch in "- " or unicodedata.category(ch)[0] in "LM"
                   or unicodedata.category(ch) in ("Nd", "Pc"))
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor GitHub gives a page: its headings' slugs (a repeat gets -1, -2, …)."""
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found = set(HTML_ANCHOR.findall(text))
    for _, title in HEADING.findall(text):
        base = slug(title)
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def relative_links(page: Path) -> list[str]:
    return [t for t in LINK.findall(prose(page.read_text(encoding="utf-8")))
            if not SCHEME.match(t)]


@pytest.mark.parametrize(("heading", "anchor"), [
    # Worked out by hand from GitHub's rule, on headings these pages link to.
    ("report.json", "reportjson"),
    ("Why operators changed", "why-operators-changed"),
    ("1.2 `profiler_info_{rank}.json`", "12-profiler_info_rankjson"),
    ("Round 5: the allocator, the sides' processes, two sorts (2026-12-01, afternoon)",
     "round-5-the-allocator-the-sides-processes-two-sorts-2026-12-01-afternoon"),
    ("Developing: tests, type checks, benchmarks", "developing-tests-type-checks-benchmarks"),
    ("Kernel time by category and Compute by family",
     "kernel-time-by-category-and-compute-by-family"),
    ("14. HCCL task level: where each collective's time went, plane by plane",
     "14-hccl-task-level-where-each-collectives-time-went-plane-by-plane"),
    ("Δ step — [link](x.md)", "δ-step--link"),
])
def test_slug_follows_githubs_rule(heading, anchor):
    assert slug(heading) == anchor


def test_a_repeated_heading_gets_a_numbered_anchor(tmp_path):
    page = tmp_path / "p.md"
    page.write_text("# A\n\n## Notes\n\n```\n## Notes\n```\n\n### Notes\n", encoding="utf-8")
    assert anchors(page) == {"a", "notes", "notes-1"}


def test_links_in_code_are_not_links():
    text = "see [a](a.md) and `[b](b.md)`\n```\n[c](c.md)\n```\n![d](img/d.png \"t\") [e](<e f.md>)"
    assert LINK.findall(prose(text)) == ["a.md", "img/d.png"]


def test_every_relative_link_in_the_readme_and_docs_resolves():
    broken = []
    for page in PAGES:
        for target in relative_links(page):
            path_part, _, anchor = target.partition("#")
            file = (page.parent / unquote(path_part)).resolve() if path_part else page
            where = f"{page.relative_to(ROOT)}: ({target})"
            if not file.exists():
                broken.append(f"{where}: no such file")
            elif anchor and file.suffix == ".md" and unquote(anchor) not in anchors(file):
                broken.append(f"{where}: no heading with anchor #{anchor}")
    assert not broken, "\n".join(broken)


def test_the_readme_links_every_page_of_docs():
    linked = {(README_PATH.parent / t.partition("#")[0]).resolve()
              for t in relative_links(README_PATH)}
    for page in ("usage", "reading-the-report", "clusters", "design", "formats",
                 "architecture", "performance"):
        assert (ROOT / "docs" / f"{page}.md").resolve() in linked, page


def test_readme_fits_on_150_lines():
    assert len(README.splitlines()) <= 150


def ci_readme_commands() -> list[str]:
    """The command after each `# README command N:` comment of .ci/run, in order."""
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    return [lines[i + 1].strip() for i, line in enumerate(lines)
            if re.match(r"#\s*README command \d+", line.strip())]


def test_the_readmes_first_two_code_blocks_are_the_commands_ci_runs():
    install_and_run, run_tests = ci_readme_commands()
    first, second = (block.strip() for block in FENCE.findall(README)[:2])
    assert first == ("pip install -e . && cann-diff examples/cann7.0.1.3 examples/cann8.0.RC2 "
                     "examples/cann8.0.RC2-mc2 -o reports/example")
    assert second == "pip install -e '.[test]' && pytest" == run_tests
    # CI writes beside the committed example, not over it, and quietly: nothing else differs.
    assert install_and_run == (first.replace("-o reports/example", "-o reports/ci-example")
                               + " --quiet")


def test_every_cli_option_is_documented_in_usage_and_the_gates_in_the_readme():
    help_text = CliRunner().invoke(main, ["--help"]).output
    options = set(re.findall(r"(--[a-z][a-z-]+)", help_text)) - {"--help", "--version"}
    assert options, help_text
    missing = sorted(o for o in options if o not in USAGE)
    assert not missing, f"options missing from docs/usage.md: {missing}"
    assert "--fail-on-regression" in README and "--junit" in README


PAIR = ROOT / "reports/example/cann7.0.1.3_vs_cann8.0.RC2/report.json"


def test_readme_quotes_the_committed_example_verdict_and_headline():
    quoted = " ".join(line[2:] for line in README.splitlines() if line.startswith("> "))
    quoted = " ".join(quoted.split())
    summary = json.loads((ROOT / "reports/example/report.json").read_text())
    assert summary["verdict"] in quoted
    verdict = json.loads(PAIR.read_text())["verdict"]
    assert f"**Verdict:** {verdict['line']}." in quoted
    for cause in verdict["causes"]:  # "- **name Δ ms** (share): detail", as report.md has it
        name, _, rest = cause["text"].partition(" (")
        assert f"- **{name}** ({rest}" in quoted, cause["text"]


@pytest.mark.slow
def test_usage_library_example_runs(tmp_path, monkeypatch):
    block = re.search(r"## Library\n\n```python\n(.*?)```", USAGE, re.S).group(1)
    for name in ("baseline", "candidate"):
        (tmp_path / name).symlink_to(ROOT / "examples" / ("cann7.0.1.3" if name == "baseline"
                                                          else "cann8.0.RC2"))
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(block, "docs/usage.md", "exec"), namespace)  # noqa: S102 - our own docs
    committed = json.loads(PAIR.read_text())["headline"]
    assert namespace["result"].report.headline == committed


def test_usage_and_help_list_the_same_exit_codes_as_errors_py():
    table = USAGE.split("## Exit codes", 1)[1].split("\n\n", 2)[1]
    documented = [int(row.split("|")[1]) for row in table.splitlines()[2:]]
    help_text = CliRunner().invoke(main, ["--help"]).output
    block = help_text.split("Exit codes:", 1)[1].split("\n\n", 1)[0]
    in_help = [int(line.split()[0]) for line in block.strip().splitlines()]
    assert documented == in_help == [errors.EXIT_OK, errors.EXIT_REGRESSION,
                                     errors.EXIT_BAD_INPUT, errors.EXIT_INTERNAL,
                                     errors.EXIT_SIGINT, errors.EXIT_SIGTERM]
    assert documented == [0, 1, 2, 3, 130, 143]  # DESIGN.md "Exit codes"


WALKTHROUGH = (ROOT / "docs" / "reading-the-report.md").read_text(encoding="utf-8")
EXAMPLE_MD = (ROOT / "reports/example/cann7.0.1.3_vs_cann8.0.RC2/report.md").read_text(
    encoding="utf-8")


def cells(row: str) -> list[str]:
    return [cell.strip() for cell in row.strip().strip("|").split("|")]


def test_the_walkthrough_quotes_the_committed_example_as_it_is():
    """Each quoted passage and table row of reading-the-report.md is in the example's report.md.

    A quoted row may stop short of the report's row (a column added at the end since).
    """
    report = " ".join(EXAMPLE_MD.split())
    passages = re.findall(r"(?:^> .*\n?)+", WALKTHROUGH, re.M)
    items = [item for passage in passages
             for item in re.split(r"^> - ", passage, flags=re.M) if item.strip()]
    quoted = [" ".join(re.sub(r"^> ?", "", item, flags=re.M).split()) for item in items]
    assert len(quoted) >= 8
    missing = [q for q in quoted if q not in report]
    assert not missing, missing
    report_rows = [cells(line) for line in EXAMPLE_MD.splitlines() if line.startswith("|")]
    rows = [cells(line) for block in FENCE.findall(WALKTHROUGH)
            for line in block.splitlines() if line.startswith("|")]
    assert len(rows) >= 15
    unmatched = [row for row in rows if not any(r[:len(row)] == row for r in report_rows)]
    assert not unmatched, unmatched
