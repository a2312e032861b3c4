"""Exit codes: 2 bad input (one line, escaped), 3 a bug, 130 / 143 interrupted (DESIGN.md).

An internal error must not exit 1, which a CI gate reads as "regression"; nor may Ctrl-C
or a CI job's cancellation (SIGTERM). Interrupted runs leave no temporary file, no stage
directory, and the output directory exactly as it was.
"""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES, ROOT

import cann_diff.errors
import cann_diff.pipeline
import cann_diff.render.markdown
from cann_diff.cli import main
from cann_diff.errors import InputError, OutputError, one_line

BASE, NEW = EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2"
STALLED_CLI = Path(__file__).resolve().parent / "stalled_cli.py"
CONTROL = set(map(chr, [*range(32), *range(127, 160)])) - {"\n"}  # "\n" ends the line


def run(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): ("dir" if p.is_dir() else
                                       hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*"))}


def one_stderr_line(result) -> str:
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert not CONTROL & set(lines[0]), repr(lines[0])
    return lines[0]


# ---------------------------------------------------------------- internal error: 3

def broken_stage(*args, **kwargs):
    raise ZeroDivisionError("float division by zero\n    in the\tstep breakdown")


@pytest.mark.slow
@pytest.mark.parametrize("module, stage", [(cann_diff.pipeline, "compare"),
                                           (cann_diff.render.markdown, "render_markdown")],
                         ids=["compare", "render_markdown"])
def test_a_bug_exits_3_with_one_line_and_no_traceback(module, stage, tmp_path, monkeypatch):
    monkeypatch.delenv("CANN_DIFF_DEBUG", raising=False)
    monkeypatch.setattr(module, stage, broken_stage)
    out = tmp_path / "out"
    result = run(BASE, NEW, "-o", out, "-q")
    assert result.exit_code == 3
    assert isinstance(result.exception, SystemExit)
    assert result.stdout == ""
    # the library's two-line message folded: the indentation becomes one space, the tab
    # inside the line is escaped
    assert one_stderr_line(result) == (
        "cann-diff: internal error: ZeroDivisionError: float division by zero in the\\tstep "
        "breakdown — please report it (set CANN_DIFF_DEBUG=1 for the traceback)")
    assert "Traceback" not in result.output
    assert not out.exists() or list(out.iterdir()) == []  # no report, stage nor temp file


def test_cann_diff_debug_shows_the_traceback_and_still_exits_3(tmp_path, monkeypatch):
    monkeypatch.setenv("CANN_DIFF_DEBUG", "1")
    monkeypatch.setattr(cann_diff.pipeline, "compare", broken_stage)
    result = run(BASE, NEW, "-o", tmp_path / "out", "-q")
    assert result.exit_code == 3
    assert result.stderr.startswith("Traceback (most recent call last):")
    assert "in broken_stage" in result.stderr
    assert "ZeroDivisionError: float division by zero" in result.stderr
    assert result.stderr.splitlines()[-1].startswith("cann-diff: internal error: ")


@pytest.mark.slow
def test_a_bug_in_a_real_process_exits_3(tmp_path):
    # The console script path: no CliRunner in between, the exit status the shell sees.
    code = ("import sys, cann_diff.pipeline as p\n"
            "def broken(*a, **k): raise KeyError('rank')\n"
            "p.compare = broken\n"
            "from cann_diff.cli import main\n"
            "main(sys.argv[1:], prog_name='cann-diff')\n")
    done = subprocess.run([sys.executable, "-c", code, str(BASE), str(NEW),
                           "-o", str(tmp_path / "out"), "-q"],
                          cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "CANN_DIFF_DEBUG": ""})
    assert done.returncode == 3, done.stderr
    assert done.stderr.splitlines() == [
        "cann-diff: internal error: KeyError: 'rank' — please report it "
        "(set CANN_DIFF_DEBUG=1 for the traceback)"]


# ---------------------------------------------------------------- one line, always

def test_a_newline_and_an_escape_in_a_path_stay_on_one_line(tmp_path):
    odd = tmp_path / "not a\nprofile\x1b[31m"
    odd.mkdir()
    result = run(odd, NEW, "-o", tmp_path / "out", "-q")
    assert result.exit_code == 2
    line = one_stderr_line(result)
    assert line.startswith(f"cann-diff: error: {tmp_path}/not a\\nprofile\\x1b[31m: ")
    assert "no profile found" in line


def test_an_output_path_with_a_newline_inside_an_input_is_one_line(tmp_path):
    base = tmp_path / "base\nrun"
    base.symlink_to(BASE, target_is_directory=True)
    result = run(base, NEW, "-o", base / "report", "-q")
    assert result.exit_code == 2
    line = one_stderr_line(result)
    assert "base\\nrun/report" in line and "inside input" in line


def test_ijsons_three_line_message_is_folded(tmp_path):
    trace = tmp_path / "trace_view.json"
    # cut off inside the second event: yajl says "premature EOF" over three lines
    trace.write_text('{"traceEvents": [{"ph": "X", "name": "MatMul", "pid": 1, "tid": 1, '
                     '"ts": 1, "dur": 2}, {"ph": ')
    result = run(trace, NEW, "-o", tmp_path / "out", "-q")
    assert result.exit_code == 2
    line = one_stderr_line(result)
    assert line.startswith(f"cann-diff: error: {trace}: truncated or invalid JSON: ")
    assert "premature EOF" in line and "right here" not in line and "^" not in line


@pytest.mark.parametrize("error, expected", [
    (InputError("a\tb", "x"), "a\\tb: x"),
    (InputError("p", "gone", where="line 3\r"), "p: line 3\\r: gone"),
    (OutputError(None, "two\nwords"), "two\\nwords"),  # a bare newline is data: escaped
    (OutputError("o", "first line\n  second line\n"), "o: first line second line"),
    (InputError("bad\udcffname", "\u2028x"), "bad\\udcffname: x"),
])
def test_error_text_is_one_line(error, expected):
    assert str(error) == expected


def test_one_line_drops_caret_pointers():
    message = ("lexical error: invalid char in json text.\n"
               "                                       {\"a\": [1, x]}\n"
               "                     (right here) ------^\n")
    assert one_line(message) == 'lexical error: invalid char in json text. {"a": [1, x]}'


# ---------------------------------------------------------------- interrupted: 130 / 143

@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)],
                         ids=["SIGINT", "SIGTERM"])
def test_a_signal_while_writing_exits_128_plus_it_and_leaves_the_old_report(signum, code,
                                                                            tmp_path):
    out = tmp_path / "out"
    assert run(BASE, NEW, "-o", out, "-q").exit_code == 0  # an earlier, whole report
    (out / "ticket-notes.txt").write_text("written by a person\n")
    before = snapshot(out)
    ready = tmp_path / "ready"
    process = subprocess.Popen(
        [sys.executable, str(STALLED_CLI), str(NEW), str(BASE), "-o", str(out), "-q"],
        env={**os.environ, "STALL_READY": str(ready)}, cwd=tmp_path,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        while not ready.exists() and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), process.communicate()
        stage = [p for p in out.iterdir() if p.name.startswith(".cann-diff-stage-")]
        assert len(stage) == 1 and list(stage[0].glob(".step_breakdown.png.*.tmp"))
        process.send_signal(signum)
        stdout, stderr = process.communicate(timeout=60)
    finally:
        process.kill()
        process.wait()
    assert process.returncode == code, stderr
    assert stderr.splitlines() == ["cann-diff: interrupted"]
    assert stdout == ""
    assert snapshot(out) == before  # no stage, no *.tmp, the earlier report untouched
    assert not list(tmp_path.rglob("*.tmp"))


@pytest.mark.parametrize("error", [InputError("a/kernel_details.csv", "no rows", "line 3"),
                                   OutputError(None, "inside an input"),
                                   cann_diff.errors.UsageError("--top", "must be ≥ 1")])
def test_an_error_pickles_as_itself(error):
    """Worker processes hand errors back pickled: class, parts and line survive."""
    import pickle

    again = pickle.loads(pickle.dumps(error))
    assert type(again) is type(error)
    assert (again.path, again.where, again.message, str(again)) == \
        (error.path, error.where, error.message, str(error))
    assert again.exit_code == error.exit_code == 2
