"""The newer options meet hostile input with one line and exit 2, never a crash, a lie or a write.

Measured before (on the shipped example pair): ``--steps ²`` crashed with ValueError (exit 3;
``str.isdigit`` takes it, ``int`` does not) and ``--steps ''`` compared every step (exit 0);
a label or directory name of bytes that are not UTF-8 crashed matplotlib (TypeError) or the
report.md write (UnicodeEncodeError), exit 3; a 300-character label gave "File name too
long" (exit 2, the tool's own default name included); a symlink loop as an input crashed
with RuntimeError (exit 3); ``--junit`` wrote into an input (also through a symlinked
folder), overwrote OUT/report.md with XML, and a junit folder that was missing failed only
after the report in OUT had been replaced; the candidates summary wrote labels into its
table headers unescaped (``<script``, ``<svg``, a ``javascript:`` link, U+202E live).
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import DATA, EXAMPLES
from markdown_it import MarkdownIt

import cann_diff.render.files as files
from cann_diff import format as fmt
from cann_diff.cli import main, parse_steps
from cann_diff.errors import UsageError

BASE, NEW1, NEW2 = EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2", EXAMPLES / "cann8.0.RC2-mc2"
QUICK = ("-q", "--no-charts", "--no-html")
MD = MarkdownIt("commonmark").enable("table")


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def one_error_line(result, starts: str = "cann-diff: error: ") -> str:
    """The run's only stderr line, exit 2; no traceback."""
    lines = result.stderr.splitlines()
    assert result.exit_code == 2, (result.exit_code, result.output)
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(starts), lines[0]
    return lines[0]


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root`` with the bytes of each file."""
    return {str(p.relative_to(root)): ("dir" if p.is_dir() and not p.is_symlink() else
                                       hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="module")
def earlier(tmp_path_factory) -> Path:
    """OUT holding an earlier one-candidate report, as CI leaves it."""
    out = tmp_path_factory.mktemp("earlier") / "out"
    result = run(BASE, NEW1, "-o", out, *QUICK)
    assert result.exit_code == 0, result.output
    return out


@pytest.fixture
def out(earlier, tmp_path) -> Path:
    return Path(shutil.copytree(earlier, tmp_path / "out"))


# ---------------------------------------------------------------- 1. --steps

@pytest.mark.parametrize("spec", ["5-⁵", "²", "5,²", "٥", "1-٣", "1" * 19, "9" * 5000, "",
                                  "  ", "5,", "-", "5 7", "5-7-9"])
def test_a_step_spec_that_is_not_ascii_step_numbers_is_a_usage_error(spec, tmp_path):
    result = run(BASE, NEW1, "-o", tmp_path / "out", "--steps", spec, *QUICK)
    line = one_error_line(result, "cann-diff: error: --steps: ")
    assert len(line) < 200  # a 5,000-digit number is cut in the message
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("spec, ranges", [("5-7,9", [(5, 7), (9, 9)]), ("3-", [(3, None)]),
                                          ("-4", [(None, 4)]), (" 5 - 7 ", [(5, 7)]),
                                          ("6", [(6, 6)]), ("0-0", [(0, 0)]),
                                          ("9" * 18, [(10**18 - 1, 10**18 - 1)])])
def test_step_specs_in_ascii_digits_parse_as_before(spec, ranges):
    assert parse_steps(spec) == ranges


@pytest.mark.parametrize("option", ["--top", "--jobs"])
def test_a_count_in_other_digits_is_refused(option):
    with pytest.raises(UsageError):
        from cann_diff.cli import _count

        _count("٥", option)


# ---------------------------------------------------------------- 2. bytes that are not UTF-8

UNDECODABLE_LABEL = os.fsdecode(b"a\xff\xfe")  # what Python's argv holds for these bytes
GBK_NAME = b"\xb2\xe2\xca\xd4"  # "测试" in GBK: not UTF-8


def test_undecodable_bytes_show_as_byte_escapes():
    assert fmt.visible(UNDECODABLE_LABEL) == "a\\xff\\xfe"
    assert fmt.visible(os.fsdecode(GBK_NAME)) == "\\xb2\\xe2\\xca\\xd4"
    assert fmt.visible("x\ud800y") == "x\\ud800y"  # a surrogate no byte made


def test_a_text_file_takes_undecodable_bytes_as_replacement_characters(tmp_path):
    path = files.write_text_atomic(tmp_path / "t.json", json.dumps(
        {"label": UNDECODABLE_LABEL}, ensure_ascii=False))
    assert path.read_bytes() == b'{"label": "a' + "\ufffd\ufffd".encode() + b'"}'


def _cli(*args, cwd: Path) -> subprocess.CompletedProcess:
    """The console command in a child process: its argv and stdout are real OS bytes."""
    return subprocess.run([sys.executable, "-m", "cann_diff", *map(os.fsencode, args)],
                          cwd=cwd, capture_output=True, timeout=300,
                          env={**os.environ, "LC_ALL": "C.UTF-8"})


@pytest.mark.slow
def test_an_undecodable_label_and_directory_name_give_a_whole_report_with_charts(tmp_path):
    gbk_dir = Path(os.fsdecode(os.fsencode(tmp_path) + b"/" + GBK_NAME))
    shutil.copytree(NEW1, gbk_dir)
    out = tmp_path / "out"
    done = _cli(BASE, gbk_dir, "-o", out, "--base-label", UNDECODABLE_LABEL, "-j", "1",
                cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode(errors="backslashreplace")
    stdout = done.stdout.decode("utf-8")  # strict: the output is UTF-8 text
    assert "a\\xff\\xfe" in stdout and "\\xb2\\xe2\\xca\\xd4" in stdout
    markdown = (out / "report.md").read_text(encoding="utf-8")
    heading = next(t for t in MD.parse(markdown) if t.type == "inline")
    assert heading.children[0].content == "cann-diff: a\\xff\\xfe vs \\xb2\\xe2\\xca\\xd4"
    assert "a\\xff\\xfe" in (out / "report.html").read_text(encoding="utf-8")
    data = json.loads((out / "report.json").read_text(encoding="utf-8"))
    assert data["base"]["label"] == b"a\xff\xfe".decode("utf-8", "replace")
    assert data["new"]["label"] == GBK_NAME.decode("utf-8", "replace")
    assert list(out.glob("*.png"))  # the charts were drawn with these labels


@pytest.mark.slow
def test_an_undecodable_candidate_name_reaches_the_summary_and_junit_as_escapes(tmp_path):
    gbk_dir = Path(os.fsdecode(os.fsencode(tmp_path) + b"/" + GBK_NAME))
    shutil.copytree(NEW1, gbk_dir)
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    done = _cli(BASE, gbk_dir, NEW2, "-o", out, "--junit", junit, *QUICK, cwd=tmp_path)
    assert done.returncode == 0, done.stderr.decode(errors="backslashreplace")
    # safe_name keeps [A-Za-z0-9._+-] only: the GBK bytes leave no trace in the name
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        "cann7.0.1.3_vs_cann8.0.RC2-mc2", "cann7.0.1.3_vs_run"]
    summary = (out / "report.md").read_text(encoding="utf-8")
    assert "\\\\xb2\\\\xe2\\\\xca\\\\xd4" in summary  # the backslash itself escaped in Markdown
    suites = ET.parse(junit).getroot().findall("testsuite")
    assert suites[0].get("name") == "cann7.0.1.3 vs \\xb2\\xe2\\xca\\xd4"


# ---------------------------------------------------------------- 3. long names

def test_a_long_name_is_cut_to_the_filesystem_limit_with_a_hash_of_the_whole(tmp_path):
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    for name in ["L" * 300, "é" * 200, "a" * limit]:
        fitted = files.fit_name(name, tmp_path / "not-yet")
        assert len(os.fsencode(fitted)) <= limit
        if len(os.fsencode(name)) > limit:
            assert fitted.endswith("_" + hashlib.sha1(os.fsencode(name)).hexdigest()[:8])
        else:
            assert fitted == name
        (tmp_path / fitted).mkdir()  # the filesystem takes it


@pytest.mark.slow
def test_candidates_with_300_character_labels_get_distinct_cut_directories(tmp_path):
    long = "L" * 300
    result = run(BASE, NEW1, NEW2, "-o", tmp_path / "out", "--labels", f"b,{long},{long}x",
                 *QUICK)
    assert result.exit_code == 0, result.output
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    expected = {f"b_vs_{label}"[:limit - 9] + "_"
                + hashlib.sha1(f"b_vs_{label}".encode()).hexdigest()[:8]
                for label in (long, long + "x")}
    assert {p.name for p in (tmp_path / "out").iterdir() if p.is_dir()} == expected
    summary = json.loads((tmp_path / "out" / "report.json").read_text())
    assert [c["label"] for c in summary["candidates"]] == [long, long + "x"]  # shown whole
    for candidate in summary["candidates"]:
        assert (tmp_path / "out" / candidate["report"] / "report.md").is_file()


@pytest.mark.slow
def test_the_default_directory_of_five_long_candidate_names_fits(tmp_path, monkeypatch):
    names = [f"node0_4000_2024112918000000{i}_ascend_pt_cann8.0.RC2_with_mc2_x{i}"
             for i in range(1, 6)]
    for name in names:
        shutil.copytree(NEW1, tmp_path / "in" / name)
    monkeypatch.chdir(tmp_path)
    result = run(BASE, *[Path("in") / n for n in names], *QUICK)
    assert result.exit_code == 0, result.output
    (out,) = (tmp_path / "reports").iterdir()
    whole = "cann7.0.1.3_vs_" + "_".join(names)  # 15 + 5 × 62 + 4 = 329 characters
    assert len(whole) == 329
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    assert out.name == whole[:limit - 9] + "_" + hashlib.sha1(whole.encode()).hexdigest()[:8]
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        f"cann7.0.1.3_vs_{n}" for n in names]


# ---------------------------------------------------------------- 4. symlink loops

@pytest.mark.parametrize("where", ["base", "candidate", "out", "junit folder"])
def test_a_symlink_loop_is_one_line_naming_it(where, tmp_path):
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    args = {"base": [loop, NEW1, "-o", tmp_path / "o"],
            "candidate": [BASE, NEW1, loop, "-o", tmp_path / "o"],
            "out": [BASE, NEW1, "-o", loop],
            "junit folder": [BASE, NEW1, "-o", tmp_path / "o", "--junit", loop / "j.xml"]}
    line = one_error_line(run(*args[where], *QUICK))
    assert f"{loop}: is a symlink loop" in line
    assert not (tmp_path / "o").exists()


# ---------------------------------------------------------------- 5. --junit

def _refused(out: Path, junit: Path, *inputs: Path, **extra) -> str:
    before = snapshot(out)
    result = run(*(inputs or (BASE, NEW1)), "-o", out, "--junit", junit, *QUICK)
    line = one_error_line(result, "cann-diff: error: --junit: ")
    assert snapshot(out) == before  # nothing read, nothing written
    return line


def test_junit_inside_an_input_is_refused_also_through_a_symlinked_folder(out, tmp_path):
    new = Path(shutil.copytree(NEW1, tmp_path / "new"))
    (tmp_path / "link").symlink_to(new)
    before = snapshot(new)
    for junit in (new / "junit.xml", tmp_path / "link" / "junit.xml",
                  next(new.iterdir()) / "junit.xml"):
        assert "lies inside input" in _refused(out, junit, BASE, new)
    assert snapshot(new) == before


def test_junit_equal_to_an_input_file_is_refused(out, tmp_path):
    trace = Path(shutil.copy(DATA / "formats" / "hta" / "base.json.gz", tmp_path))
    assert "is the input file" in _refused(out, trace, trace, NEW1)


@pytest.mark.parametrize("name", ["report.md", "report.html", "report.json", "ranks.csv",
                                  "step_breakdown.png", "b_vs_c1/report.md"])
def test_junit_may_not_take_the_name_of_a_report_file(out, name):
    (out / "b_vs_c1").mkdir()
    assert "is a file the report writes" in _refused(out, out / name)


def test_junit_may_not_be_out_or_hold_it(out, tmp_path):
    assert "is the output directory" in _refused(out, out)
    fresh = tmp_path / "fresh"
    result = run(BASE, NEW1, "-o", fresh / "deeper", "--junit", fresh, *QUICK)
    assert "holds it" in one_error_line(result)
    assert not fresh.exists()


def test_junit_in_a_missing_folder_is_refused_before_the_report_is_replaced(out, tmp_path):
    assert "does not exist" in _refused(out, tmp_path / "missing" / "junit.xml")


def test_junit_in_an_unwritable_folder_is_refused(out, tmp_path, monkeypatch):
    folder = tmp_path / "readonly"
    folder.mkdir()
    real_access = os.access
    # Tests may run as root, for whom every folder is writable: the check is what is tested.
    monkeypatch.setattr(files.os, "access", lambda path, mode, **kw: False
                        if Path(path) == folder else real_access(path, mode, **kw))
    assert "is not writable" in _refused(out, folder / "junit.xml")


@pytest.mark.slow
def test_junit_for_a_fresh_out_goes_inside_it_with_the_report(tmp_path):
    out = tmp_path / "fresh"
    result = run(BASE, NEW1, "-o", out, "--junit", out / "junit.xml", *QUICK)
    assert result.exit_code == 0, result.output
    assert {p.name for p in out.iterdir()} == {"junit.xml", "report.md", "report.json",
                                               "ranks.csv"}


@pytest.mark.slow
def test_junit_that_cannot_be_written_leaves_the_report_in_out_as_it_was(out, tmp_path,
                                                                          monkeypatch):
    folder = tmp_path / "ci"
    folder.mkdir()
    real_mkstemp = files.tempfile.mkstemp

    def full_disk(*args, **kwargs):
        if Path(kwargs.get("dir", "")) == folder:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_mkstemp(*args, **kwargs)

    monkeypatch.setattr(files.tempfile, "mkstemp", full_disk)
    before = snapshot(out)
    result = run(BASE, NEW2, "-o", out, "--junit", folder / "junit.xml", *QUICK)
    line = one_error_line(result)
    assert "junit.xml: cannot write: No space left on device" in line
    assert snapshot(out) == before  # the earlier report is still whole
    assert list(folder.iterdir()) == []


@pytest.mark.slow
def test_a_report_that_cannot_be_moved_leaves_the_junit_as_it_was(out, tmp_path, monkeypatch):
    junit = tmp_path / "junit.xml"
    junit.write_text("earlier\n")
    real_replace = os.replace

    def failing(source, target, *args, **kwargs):
        if Path(target).name == "report.md" and Path(target).parent == out:
            raise OSError(errno.EIO, "Input/output error")
        return real_replace(source, target, *args, **kwargs)

    monkeypatch.setattr(files.os, "replace", failing)
    before = snapshot(out)
    result = run(BASE, NEW2, "-o", out, "--junit", junit, *QUICK)
    assert "cannot write: Input/output error" in one_error_line(result)
    assert snapshot(out) == before
    assert junit.read_text() == "earlier\n"  # its move, made first, was undone
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junit.xml", "out"]  # no temp left


@pytest.mark.slow
def test_junit_beside_out_replaces_the_earlier_one_with_the_report(out, tmp_path):
    junit = tmp_path / "junit.xml"
    junit.write_text("earlier\n")
    result = run(BASE, NEW2, "-o", out, "--junit", junit, *QUICK)
    assert result.exit_code == 0, result.output
    suite = ET.parse(junit).getroot().find("testsuite")
    assert suite.get("name") == "cann7.0.1.3 vs cann8.0.RC2-mc2"
    assert json.loads((out / "report.json").read_text())["new"]["label"] == "cann8.0.RC2-mc2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junit.xml", "out"]


# ---------------------------------------------------------------- 6. markup in the summary

HOSTILE_LABELS = ("b<script>alert(1)</script>", "c<svg onload=alert(2)>",
                  "[x](javascript:alert(3))<b>bold</b>\u202eevil")


def _walk(tokens):
    for token in tokens:
        yield token
        if token.children:
            yield from _walk(token.children)


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag, attrs) -> None:
        self.tags.append(tag)


@pytest.fixture(scope="module")
def hostile_summary(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hostile") / "out"
    result = run(BASE, NEW1, NEW2, "-o", out, "--labels", ",".join(HOSTILE_LABELS), "-q",
                 "--no-charts")
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.slow
def test_labels_in_the_summary_markdown_are_text_not_markup(hostile_summary):
    markdown = (hostile_summary / "report.md").read_text()
    tokens = list(_walk(MD.parse(markdown)))
    html = [t.content for t in tokens if t.type in ("html_inline", "html_block")]
    assert html == ["<sub>", "</sub>"]  # the footer's, which the tool writes itself
    directories = sorted(p.name for p in hostile_summary.iterdir() if p.is_dir())
    links = sorted(t.attrs["href"] for t in tokens if t.type == "link_open")
    assert links == [f"{d}/report.md" for d in directories]  # only the tool's own links
    assert "\u202e" not in markdown
    header = next(t for t in tokens if t.type == "tr_open")  # the Candidates table's header
    cells = ["".join(c.content for c in t.children if c.type == "text")  # as a reader sees
             for t in tokens[tokens.index(header):] if t.type == "inline"][:4]
    assert cells == ["", f"{HOSTILE_LABELS[0]} (base)", HOSTILE_LABELS[1],
                     HOSTILE_LABELS[2].replace("\u202e", "\\u202e")]


@pytest.mark.slow
def test_labels_in_the_summary_html_are_text_not_markup(hostile_summary):
    page = (hostile_summary / "report.html").read_text()
    parser = _Tags()
    parser.feed(page)
    assert not {"svg", "b"} & set(parser.tags)
    body = page[page.index("</title>"):]
    assert "<script>alert" not in page and "\u202e" not in body
    assert "&lt;svg onload=alert(2)&gt;" in page


@pytest.mark.slow
def test_the_html_title_shows_a_bidi_override_as_an_escape(hostile_summary):
    page = (hostile_summary / "report.html").read_text()
    assert "\u202e" not in page[:page.index("</title>")]


@pytest.mark.parametrize(("option", "value"), [
    ("--threshold", "٥"), ("--step-threshold", "５"), ("--alpha", "０.０５"),
    ("--fail-on-regression", "٣%"), ("--alpha", "0.0٥")])
def test_numbers_in_other_scripts_are_refused(option, value, tmp_path):
    # float() reads Arabic-Indic and full-width digits as ASCII ones: "٥" would be 5 %.
    result = run(BASE, NEW1, "-o", tmp_path / "out", *QUICK, option, value)
    line = one_error_line(result)
    assert line.startswith(f"cann-diff: error: {option}: {value!r} is not ")
    assert not (tmp_path / "out").exists()
