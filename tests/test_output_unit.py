"""The report is written as one unit: staged, moved into place under a lock, never mixed.

No reader may see report.md of one run beside a chart of another; a second writer to the
same ``-o`` waits; a failure leaves the output directory as it was; a user's own files
there are never touched.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES

import cann_diff.render.files as files
from cann_diff.cli import main
from cann_diff.errors import OutputError, Terminated
from cann_diff.render.files import staged_report

BASE, NEW = EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2"
STALLED_CLI = Path(__file__).resolve().parent / "stalled_cli.py"


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): ("dir" if p.is_dir() else
                                       hashlib.sha256(_content(p)).hexdigest())
            for p in sorted(root.rglob("*"))}


def _content(path: Path) -> bytes:
    """A file's bytes; a report without the command line it records (it names its -o)."""
    data = path.read_bytes()
    if path.name == "report.json":
        report = json.loads(data)
        report.pop("invocation", None)
        return json.dumps(report, sort_keys=True).encode()
    if path.name in ("report.md", "report.html"):
        return b"\n".join(line for line in data.split(b"\n") if b"run as " not in line)
    return data


def stages(out: Path) -> list[Path]:
    return [p for p in out.iterdir() if p.name.startswith(files.STAGE_PREFIX)]


@pytest.fixture
def out(tmp_path) -> Path:
    """An output directory holding an earlier report and a person's own files."""
    out = tmp_path / "out"
    (out / "keep").mkdir(parents=True)
    (out / "report.md").write_text("old report\n")
    (out / "step_breakdown.png").write_bytes(b"old png")
    (out / "ticket-notes.txt").write_text("written by a person\n")
    (out / "keep" / "data.bin").write_bytes(bytes(range(256)))
    return out


# ---------------------------------------------------------------- staged_report itself

def test_every_staged_file_replaces_its_namesake_and_nothing_else_changes(out):
    with staged_report(out) as stage:
        assert stage.parent == out and stage.is_dir() and not list(stage.iterdir())
        (stage / "report.md").write_text("new report\n")
        (stage / "report.json").write_text("{}\n")
        assert (out / "report.md").read_text() == "old report\n"  # nothing moved yet
    assert (out / "report.md").read_text() == "new report\n"
    assert (out / "report.json").read_text() == "{}\n"
    assert (out / "step_breakdown.png").read_bytes() == b"old png"  # not in this report
    assert (out / "ticket-notes.txt").read_text() == "written by a person\n"
    assert (out / "keep" / "data.bin").read_bytes() == bytes(range(256))
    assert stages(out) == []


def test_a_failure_while_staging_leaves_the_output_as_it_was(out):
    before = snapshot(out)
    with pytest.raises(RuntimeError), staged_report(out) as stage:
        (stage / "report.md").write_text("half a report\n")
        files.write_text_atomic(stage / "report.json", "{}\n")
        raise RuntimeError("chart failed")
    assert snapshot(out) == before


def test_report_md_moves_last_so_its_links_are_in_place_first(out, monkeypatch):
    moved = []
    real_replace = os.replace
    monkeypatch.setattr(os, "replace", lambda a, b: (moved.append(Path(b).name),
                                                     real_replace(a, b)))
    with staged_report(out) as stage:
        for name in ("report.md", "report.json", "ranks.csv", "a.png", "z.png"):
            (stage / name).write_text(name)
    assert moved == ["a.png", "ranks.csv", "z.png", "report.json", "report.md"]


def test_a_directory_in_the_way_refuses_before_any_file_moves(out):
    (out / "report.json").mkdir()
    before = snapshot(out)
    with pytest.raises(OutputError, match="is a directory"), staged_report(out) as stage:
        (stage / "a.png").write_text("png")  # sorts (and would move) before report.json
        (stage / "report.json").write_text("{}")
    assert snapshot(out) == before
    assert stages(out) == []


def test_a_stage_left_by_a_killed_writer_is_removed_by_the_next(out):
    stale = out / f"{files.STAGE_PREFIX}k1ll3d"
    stale.mkdir()
    (stale / ".report.md.x.tmp").write_text("half")
    with staged_report(out) as stage:
        (stage / "report.md").write_text("new\n")
    assert not stale.exists()
    assert (out / "report.md").read_text() == "new\n"


def test_a_signal_during_the_moves_is_held_until_all_files_are_in_place(out, monkeypatch):
    previous = signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(Terminated()))
    real_replace = os.replace

    def replace_then_signal(a, b):
        real_replace(a, b)
        os.kill(os.getpid(), signal.SIGTERM)  # CI cancels the job right after the first move

    monkeypatch.setattr(os, "replace", replace_then_signal)
    try:
        with pytest.raises(Terminated), staged_report(out) as stage:
            (stage / "a.png").write_text("new png")
            (stage / "report.md").write_text("new report\n")
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert (out / "a.png").read_text() == "new png"  # the whole report, not half of it
    assert (out / "report.md").read_text() == "new report\n"
    assert stages(out) == []


def test_a_second_writer_waits_for_the_lock_then_fails_naming_the_directory(out):
    holder = os.open(out, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)  # another cann-diff is writing here
    waited = []
    before = snapshot(out)
    try:
        with pytest.raises(OutputError) as caught, \
                staged_report(out, wait_s=0.3, on_wait=lambda: waited.append(1)):
            pytest.fail("entered without the lock")
    finally:
        os.close(holder)
    assert str(caught.value).startswith(f"{out}: another cann-diff has been writing")
    assert caught.value.exit_code == 2
    assert waited == [1]  # told once, not once per poll
    assert snapshot(out) == before
    with staged_report(out, wait_s=0) as stage:  # released: the next writer goes ahead
        (stage / "report.md").write_text("after\n")
    assert (out / "report.md").read_text() == "after\n"


@pytest.mark.slow
def test_the_cli_gives_up_waiting_with_exit_2_and_one_line(out, monkeypatch):
    monkeypatch.setattr(files, "LOCK_WAIT_S", 0.3)
    before = snapshot(out)
    holder = os.open(out, os.O_RDONLY)
    fcntl.flock(holder, fcntl.LOCK_EX)
    try:
        result = CliRunner().invoke(main, [str(BASE), str(NEW), "-o", str(out), "-q"])
    finally:
        os.close(holder)
    assert result.exit_code == 2
    assert result.stderr.splitlines() == [
        f"cann-diff: error: {out}: another cann-diff has been writing a report here for "
        "0.3 s; wait for it to finish or choose another directory with -o"]
    assert snapshot(out) == before


# ---------------------------------------------------------------- real processes

def reference_report(args: list[Path], out: Path) -> dict[str, str]:
    result = CliRunner().invoke(main, [*map(str, args), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    return snapshot(out)


@pytest.mark.slow
def test_two_writers_to_one_output_never_mix_their_reports(out, tmp_path):
    # Two different reports (the pair and the pair reversed), each first written alone.
    first = reference_report([BASE, NEW], tmp_path / "first")
    second = reference_report([NEW, BASE], tmp_path / "second")
    assert first.keys() == second.keys()
    assert all(first[name] != second[name] for name in ("report.md", "report.json"))
    mine = {name: digest for name, digest in snapshot(out).items() if name not in first}
    ready, release = tmp_path / "ready", tmp_path / "release"
    slow = {**os.environ, "STALL_REPLACE_S": "0.2"}  # 0.2 s between two moves
    # The first writer stalls inside its write, holding the lock, until released ...
    writer_one = subprocess.Popen(
        [sys.executable, str(STALLED_CLI), str(BASE), str(NEW), "-o", str(out), "-q"],
        env={**slow, "STALL_READY": str(ready), "STALL_RELEASE": str(release)},
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    writer_two = None
    log = tmp_path / "writer_two.stderr"
    try:
        wait_for(ready.exists, writer_one)
        # ... the second, on the same -o, must say it waits for the first ...
        with open(log, "w") as stderr:
            writer_two = subprocess.Popen(
                [sys.executable, str(STALLED_CLI), str(NEW), str(BASE), "-o", str(out)],
                env=slow, stdout=subprocess.DEVNULL, stderr=stderr)
        wait_for(lambda: "cann-diff: waiting for another cann-diff writing to"
                 in log.read_text(), writer_two)
        release.touch()  # ... and writes only once the first has moved all its files.
        assert writer_one.wait(timeout=120) == 0, writer_one.stderr.read()
        assert writer_two.wait(timeout=120) == 0, log.read_text()
    finally:
        for writer in (writer_one, writer_two):
            if writer is not None:
                writer.kill()
                writer.wait()
    final = snapshot(out)
    assert {name: final[name] for name in second} == second  # every file from one run
    assert {name: final[name] for name in mine} == mine  # the person's files untouched
    assert set(final) == set(second) | set(mine)  # no stage, no *.tmp


def wait_for(condition, process, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert process.poll() is None, f"exited {process.returncode} before the condition"
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


@pytest.mark.slow
def test_a_users_unrelated_files_survive_a_real_run(out):
    before = snapshot(out)
    result = CliRunner().invoke(main, [str(BASE), str(NEW), "-o", str(out), "-q"])
    assert result.exit_code == 0, result.output
    after = snapshot(out)
    for name in ("ticket-notes.txt", "keep", "keep/data.bin"):
        assert after[name] == before[name]
    assert after["report.md"] != before["report.md"]  # the earlier report was replaced
    assert not [name for name in after if name.startswith(".") or name.endswith(".tmp")]
