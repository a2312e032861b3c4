"""No data is no run; durations that cannot be measurements are said to be so.

Measured before: a rank directory holding a valid SQLite file of one unrelated table (or a
0-byte profiler db) beside an empty ``communication.json`` gave exit 0 and a report of
"53.95 → – ms per step" against nothing. A NEW whose every ``Duration(us)`` is 0 (or the
same for every kernel) gave exit 0 and no word of warning. Now the first is exit 2 naming
what was looked for, the second carries an ``implausible-durations`` note, shown in the
report and on stderr.
"""

from __future__ import annotations

import csv
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES

from cann_diff.cli import main

BASE, NEW = EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2"
RANK0 = next(NEW.glob("*_0_*ascend_pt"), None) or sorted(NEW.iterdir())[0]


def empty_rank(root: Path, db: str) -> Path:
    """A rank directory whose files are there but hold nothing to compare."""
    out = root / "run" / "node0_4000_20241129180000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
    out.mkdir(parents=True)
    shutil.copy(RANK0 / "profiler_info_0.json", out.parent)
    (out / "communication.json").write_text("{}\n")
    database = out / "ascend_pytorch_profiler_0.db"
    if db == "unrelated table":
        with sqlite3.connect(database) as conn:
            conn.execute("CREATE TABLE notes (text TEXT)")
            conn.execute("INSERT INTO notes VALUES ('not a profile')")
    elif db == "0 bytes":
        database.write_bytes(b"")
    return root / "run"


@pytest.mark.slow
@pytest.mark.parametrize("db", ["unrelated table", "0 bytes", "no db"])
def test_a_side_with_no_kernels_steps_or_communication_is_exit_2(db, tmp_path):
    run = empty_rank(tmp_path, db)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(BASE), str(run), "-o", str(out), "--no-charts"])
    assert result.exit_code == 2, result.output
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"cann-diff: error: {run}"), result.stderr
    # what was looked for is named: the tables of a db, or the files of a rank without one;
    # a db of 0 bytes is named as what it is
    assert ("no kernel table(s) COMPUTE_TASK_INFO" in lines[0]
            or (db == "0 bytes" and lines[0].endswith(
                "ascend_pytorch_profiler_0.db: an empty file (0 bytes), not a profiler "
                "database (an interrupted export?)"))
            or "nothing to compare: no kernel rows, no step times and no communication data "
               "(read as no_kernels: ASCEND_PROFILER_OUTPUT/{step_trace_time.csv,"
               "communication.json" in lines[0]), lines[0]
    assert not out.exists()


def with_durations(tmp_path: Path, duration) -> Path:
    """examples/cann8.0.RC2 with every kernel's Duration(us) set by ``duration(row)``."""
    copy = Path(shutil.copytree(NEW, tmp_path / "new"))
    for kernels in copy.glob("*/ASCEND_PROFILER_OUTPUT/kernel_details.csv"):
        with open(kernels, newline="") as handle:
            rows = list(csv.reader(handle))
        column = rows[0].index("Duration(us)")
        for row in rows[1:]:
            row[column] = duration(row)
        with open(kernels, "w", newline="") as handle:
            csv.writer(handle).writerows(rows)
    return copy


@pytest.mark.slow
@pytest.mark.parametrize("duration, sentence", [
    ("0", "implausible kernel durations: all 546 kernels last 0 µs"),
    ("10.0", "implausible kernel durations: all 546 kernels, of 10 operator types, last "
             "exactly 10 µs"),
], ids=["all-zero", "all-identical"])
def test_durations_that_cannot_be_measured_are_flagged(duration, sentence, tmp_path):
    new = with_durations(tmp_path, lambda row: duration)
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(BASE), str(new), "-o", str(out), "--no-charts"])
    assert result.exit_code == 0, result.output
    warned = [line for line in result.stderr.splitlines() if "implausible" in line]
    assert len(warned) == 1 and warned[0].startswith(f"cann-diff: warning: new: {sentence}")
    report = json.loads((out / "report.json").read_text())
    assert any(w.startswith(sentence) for w in report["new"]["warnings"])
    assert not any("implausible" in w for w in report["base"]["warnings"])
    assert sentence in (out / "report.md").read_text()


@pytest.mark.slow
def test_real_durations_raise_no_such_note(tmp_path):
    # One op type at one fixed duration is plausible (a tiny capture); so are real runs.
    result = CliRunner().invoke(main, [str(BASE), str(NEW), "-o", str(tmp_path / "out"),
                                       "--no-charts"])
    assert result.exit_code == 0, result.output
    assert "implausible" not in result.stderr


@pytest.mark.slow
def test_the_headline_claims_no_kernel_gain_for_an_all_zero_run(tmp_path):
    new = with_durations(tmp_path, lambda row: "0")
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(BASE), str(new), "-o", str(out), "-q",
                                       "--no-charts"])
    assert result.exit_code == 0, result.output
    headline = json.loads((out / "report.json").read_text())["headline"]
    assert "faster" not in headline and "hides" not in headline, headline


@pytest.mark.slow
def test_a_link_loop_beside_the_rank_directories_is_skipped_with_a_warning(tmp_path):
    new = Path(shutil.copytree(NEW, tmp_path / "new"))
    (new / "a").symlink_to("b")
    (new / "b").symlink_to("a")  # a loop no reader needs: not a rank directory
    result = CliRunner().invoke(main, [str(BASE), str(new), "-o", str(tmp_path / "out"),
                                       "--no-charts"])
    assert result.exit_code == 0, result.output  # was 2: "a: cannot read: … link loop?"
    assert any("a: cannot read: too many levels of symbolic links" in line
               and line.startswith("cann-diff: warning: ")
               for line in result.stderr.splitlines()), result.stderr
