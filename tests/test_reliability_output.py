"""Several candidates are written as one unit; their directory names are unique and stable.

``cann-diff BASE NEW1 NEW2 -o OUT`` writes OUT/<base>_vs_<candidate>/ per candidate and the
summary in OUT. Measured before: with ``b_vs_c2/report.md`` a directory (or ``b_vs_c2`` a
file) the run exited 2, but ``b_vs_c1/`` had already been replaced, so the old summary
pointed at a mix of two runs; ``BASE NEW NEW`` with a label, ``--labels b,a/b,a_b`` and
``--labels b,..,...`` crashed with FileExistsError (exit 3); the ``replacing …`` notice
came before the failure. Now every target is checked before the first move, a move that
fails undoes the moves made (OUT byte for byte as it was), and the notice follows success.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES

import cann_diff.render.files as files
from cann_diff.cli import main
from cann_diff.errors import OutputError
from cann_diff.render.files import staged_report, unique_names

BASE, NEW1, NEW2 = EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2", EXAMPLES / "cann8.0.RC2-mc2"


def snapshot(root: Path) -> dict[str, str]:
    """Every entry under ``root``: the exact bytes of files (invocation and all)."""
    return {str(p.relative_to(root)): ("dir" if p.is_dir() and not p.is_symlink() else
                                       hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*"))}


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.fixture(scope="module")
def earlier(tmp_path_factory) -> Path:
    """OUT holding an earlier three-run report (b vs c1, c2) and a person's own files."""
    out = tmp_path_factory.mktemp("earlier") / "out"
    result = run(BASE, NEW1, NEW2, "-o", out, "--labels", "b,c1,c2", "-q", "--no-charts")
    assert result.exit_code == 0, result.output
    (out / "ticket-notes.txt").write_text("written by a person\n")
    (out / "b_vs_c1" / "mine.txt").write_text("also mine\n")
    return out


@pytest.fixture
def out(earlier, tmp_path) -> Path:
    return Path(shutil.copytree(earlier, tmp_path / "out"))


def one_error_line(result) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("cann-diff: error: ")
    return lines[0]


# ---------------------------------------------------------------- one unit

@pytest.mark.slow
@pytest.mark.parametrize("blocker", ["report.md is a directory", "the directory is a file"])
def test_a_second_pairwise_report_that_cannot_be_written_changes_nothing(out, blocker):
    if blocker == "report.md is a directory":
        (out / "b_vs_c2" / "report.md").unlink()
        (out / "b_vs_c2" / "report.md").mkdir()
        named = out / "b_vs_c2" / "report.md"
    else:
        for entry in (out / "b_vs_c2").iterdir():
            entry.unlink()
        (out / "b_vs_c2").rmdir()
        (out / "b_vs_c2").write_text("a file where a report directory goes\n")
        named = out / "b_vs_c2"
    before = snapshot(out)
    # The candidates swapped: every file of b_vs_c1 and of the summary would change.
    result = run(BASE, NEW2, NEW1, "-o", out, "--labels", "b,c1,c2", "--no-charts")
    assert result.exit_code == 2, result.output
    line = one_error_line(result)
    assert line.startswith(f"cann-diff: error: {named}: ")
    assert "replacing" not in result.output  # nothing was replaced
    assert snapshot(out) == before  # b_vs_c1 and the summary untouched, byte for byte


@pytest.mark.slow
def test_a_move_that_fails_halfway_is_undone(out, monkeypatch):
    """A full disk on the n-th move: the moves already made are put back."""
    before = snapshot(out)
    real_replace = os.replace
    moves = []

    def full_disk_on_the_fifth_report_move(source, target, *args, **kwargs):
        if ".cann-diff-stage-" in str(source) and ".cann-diff-undo" not in str(source):
            moves.append(target)
            if len(moves) == 5:
                raise OSError(errno.ENOSPC, "No space left on device")
        return real_replace(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "replace", full_disk_on_the_fifth_report_move)
    result = run(BASE, NEW2, NEW1, "-o", out, "--labels", "b,c1,c2", "--no-charts")
    assert result.exit_code == 2, result.output
    assert one_error_line(result).endswith(": cannot write: No space left on device")
    assert len(moves) == 5 and "replacing" not in result.output
    assert snapshot(out) == before
    assert not [p for p in out.iterdir() if p.name.startswith(".cann-diff-")]


def test_staged_subdirectories_move_first_and_the_summary_report_md_last(tmp_path,
                                                                         monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    moved = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (moved.append(
        str(Path(b).relative_to(out))), real_replace(a, b)))
    with staged_report(out) as stage:
        for folder in ("b_vs_c1", "b_vs_c2"):
            (stage / folder).mkdir()
            for name in ("report.md", "report.json", "a.png"):
                (stage / folder / name).write_text(name)
        for name in ("report.md", "report.json", "candidates_step.png"):
            (stage / name).write_text(name)
    assert moved == ["b_vs_c1/a.png", "b_vs_c1/report.json", "b_vs_c1/report.md",
                     "b_vs_c2/a.png", "b_vs_c2/report.json", "b_vs_c2/report.md",
                     "candidates_step.png", "report.json", "report.md"]


def test_a_new_pairwise_directory_is_removed_again_when_a_later_move_fails(tmp_path,
                                                                           monkeypatch):
    out = tmp_path / "out"
    out.mkdir()
    (out / "report.md").write_text("old summary\n")
    before = snapshot(out)
    real_replace = os.replace

    def refuse_the_summary(source, target, *args, **kwargs):
        if Path(target) == out / "report.md" and ".cann-diff-undo" not in str(source):
            raise OSError(errno.EIO, "Input/output error")
        return real_replace(source, target, *args, **kwargs)

    monkeypatch.setattr(os, "replace", refuse_the_summary)
    with pytest.raises(OutputError, match="report.md: cannot write: Input/output error"), \
            staged_report(out) as stage:
        (stage / "b_vs_c1").mkdir()
        (stage / "b_vs_c1" / "report.md").write_text("pairwise\n")
        (stage / "report.md").write_text("new summary\n")
    assert snapshot(out) == before  # b_vs_c1 made, then taken away; report.md the old one


@pytest.mark.slow
def test_an_unwritable_pairwise_directory_refuses_before_any_move(out):
    if os.geteuid() == 0:
        pytest.skip("running as root: a directory's permissions do not stop root")
    before = snapshot(out)
    os.chmod(out / "b_vs_c2", 0o555)
    try:
        result = run(BASE, NEW2, NEW1, "-o", out, "--labels", "b,c1,c2", "--no-charts")
    finally:
        os.chmod(out / "b_vs_c2", 0o755)
    assert result.exit_code == 2, result.output
    assert one_error_line(result) == (f"cann-diff: error: {out / 'b_vs_c2'}: cannot write: "
                                      "permission denied")
    assert snapshot(out) == before


@pytest.mark.slow
def test_the_replacing_notice_follows_a_successful_move(out):
    result = run(BASE, NEW2, NEW1, "-o", out, "--labels", "b,c1,c2", "--no-charts")
    assert result.exit_code == 0, result.output
    assert f"cann-diff: replacing report.md, report.json in {out}" in result.stderr.splitlines()
    assert (out / "ticket-notes.txt").read_text() == "written by a person\n"
    assert (out / "b_vs_c1" / "mine.txt").read_text() == "also mine\n"  # never ours to delete


# ---------------------------------------------------------------- names

@pytest.mark.parametrize("names, unique", [
    (["b_vs_a_b", "b_vs_a_b"], ["b_vs_a_b", "b_vs_a_b_2"]),
    (["x", "x", "x_2"], ["x", "x_2", "x_2_2"]),  # a later literal name never takes one
    (["b_vs_A", "b_vs_a"], ["b_vs_A", "b_vs_a_2"]),  # one directory on a case-blind disk
    (["p", "q"], ["p", "q"]),
])
def test_colliding_names_get_a_numeric_suffix_in_order(names, unique):
    assert unique_names(names) == unique
    assert unique_names(names) == unique_names(list(names))  # stable


def test_a_label_of_dots_is_a_safe_name():
    assert [files.safe_name(label) for label in ("..", "...", ".")] == ["run"] * 3


@pytest.mark.slow
@pytest.mark.parametrize("args, directories, labels", [
    (["--labels", "b,a/b,a_b"], ["b_vs_a_b", "b_vs_a_b_2"], ["a/b", "a_b"]),
    (["--labels", "b,..,..."], ["b_vs_run", "b_vs_run_2"], ["..", "..."]),
    # one candidate given twice: compared twice, told apart by its place
    (["--base-label", "x"], ["x_vs_cann8.0.RC2_new1", "x_vs_cann8.0.RC2_new2"],
     ["cann8.0.RC2 (new1)", "cann8.0.RC2 (new2)"]),
    ([], ["cann7.0.1.3_vs_cann8.0.RC2_new1", "cann7.0.1.3_vs_cann8.0.RC2_new2"],
     ["cann8.0.RC2 (new1)", "cann8.0.RC2 (new2)"]),
], ids=["slash-and-underscore", "dots", "twice-with-base-label", "twice"])
def test_every_candidate_gets_its_own_directory(tmp_path, args, directories, labels):
    out = tmp_path / "out"
    result = run(BASE, NEW1, NEW1, "-o", out, *args, "-q", "--no-charts", "--no-html")
    assert result.exit_code == 0, result.output
    summary = json.loads((out / "report.json").read_text())
    assert [c["label"] for c in summary["candidates"]] == labels
    assert [c["report"] for c in summary["candidates"]] == directories
    for directory, label in zip(directories, labels):
        pairwise = json.loads((out / directory / "report.json").read_text())
        assert pairwise["new"]["label"] == label
    assert sorted(p.name for p in out.iterdir()) == sorted([*directories, "report.json",
                                                            "report.md"])
