"""The console script's exit: exit handlers and streams kept, the interpreter's teardown
skipped, unless a thread still runs (cli.py ``run``).

Each case runs ``run`` in its own interpreter. An object in ``__main__`` whose ``__del__``
writes a file tells the two exits apart: the teardown frees it, a quick exit does not.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = """
import atexit, sys, threading, time
from pathlib import Path
out = Path(sys.argv[1])
atexit.register(lambda: (out / "atexit").write_text("ran"))
class Freed:
    def __del__(self):
        (out / "freed").write_text("teardown")
kept = Freed()
sys.stdout.write("written before the exit;")  # no newline: still in the buffer
if sys.argv[2] == "thread":
    threading.Thread(target=lambda: (time.sleep(0.3),
                                     (out / "thread").write_text("done"))).start()
sys.argv = ["cann-diff", *sys.argv[3:]]
from cann_diff.cli import run
run()
"""


def _run(tmp_path: Path, thread: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), thread, *args],
                          cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_a_finished_command_exits_without_the_teardown(tmp_path):
    done = _run(tmp_path, "none", "--version")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("written before the exit;cann-diff, version ")
    assert (tmp_path / "atexit").read_text() == "ran"
    assert not (tmp_path / "freed").exists()  # nothing was freed one by one


def test_an_error_keeps_its_exit_code_and_message(tmp_path):
    done = _run(tmp_path, "none", str(tmp_path / "missing"), str(tmp_path / "missing"))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines()[-1].startswith("cann-diff: error: ")
    assert (tmp_path / "atexit").read_text() == "ran"
    assert not (tmp_path / "freed").exists()


def test_a_thread_still_running_gets_the_usual_exit(tmp_path):
    done = _run(tmp_path, "thread", "--version")
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "thread").read_text() == "done"  # waited for
    assert (tmp_path / "atexit").read_text() == "ran"
    assert (tmp_path / "freed").read_text() == "teardown"
