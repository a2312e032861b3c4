"""``--steps`` naming steps a side lacks: a warning per side, exit 2 when it has none.

Crafted pair: base runs steps 1-6, new steps 1-8, each MatMul 1000 µs and RmsNorm 100 µs
(one rank). ``--steps 5-7,9`` asks for 5, 6, 7 and 9: base lacks 7 and 9, new lacks 9;
base compares steps 5-6, new 5-7. ``--steps 9-10`` leaves base no step at all.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from conftest import ROOT
from profiles import aclnn, texts, write_profile

from cann_diff.cli import main
from cann_diff.errors import InputError
from cann_diff.read import STEPS_MISSING, load_run, missing_steps, select_steps

OPS = [aclnn("MatMulV3", 1000.0, "4096,4096;4096,4096"),
       aclnn("RmsNorm", 100.0, "4096", "AI_VECTOR_CORE")]
BASE_NOTE = "--steps: steps 7, 9 are not in this profile (it has steps 1-6)"
NEW_NOTE = "--steps: step 9 is not in this profile (it has steps 1-8)"


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    root = tmp_path_factory.mktemp("steps")
    write_profile(root, "base", OPS, steps=range(1, 7))
    write_profile(root, "new", OPS, steps=range(1, 9))
    return root


@pytest.mark.parametrize("ranges, available, text", [
    ([(5, 7), (9, 9)], [1, 2, 3, 4, 5, 6, 7, 8], "step 9 is not"),
    ([(5, 7), (9, 9)], [1, 2, 3, 4, 5, 6], "steps 7, 9 are not"),
    ([(1, 6)], [1, 2, 4, 6], "steps 3, 5 are not"),
    ([(3, 8)], [1, 2, 3, 4], "steps 5-8 are not"),
    ([(2, None), (10, None)], [1, 2, 3], "steps 10- are not"),
    ([(None, 0), (2, 3)], [1, 2, 3], "steps -0 are not"),
])
def test_the_steps_a_profile_lacks(ranges, available, text):
    note = missing_steps(ranges, available)
    assert note is not None and note.code == STEPS_MISSING
    assert note.text.startswith(f"--steps: {text} in this profile (it has steps ")


@pytest.mark.parametrize("ranges", [[(5, 7)], [(2, None)], [(None, 3)], [(1, 1), (3, 3)]])
def test_no_note_when_every_step_is_there(ranges):
    assert missing_steps(ranges, [1, 2, 3, 5, 6, 7]) is None


def test_steps_of_the_profile_are_named_as_runs():
    assert missing_steps([(9, 9)], [1, 2, 3, 5, 7, 8]).text == (
        "--steps: step 9 is not in this profile (it has steps 1-3, 5, 7-8)")


def test_each_side_warns_in_the_run(pair):
    base = load_run(pair / "base", steps=[(5, 7), (9, 9)], keep_rows=False)
    new = load_run(pair / "new", steps=[(5, 7), (9, 9)], keep_rows=False)
    assert BASE_NOTE in texts(base.warnings) and NEW_NOTE in texts(new.warnings)
    assert sorted(base.steps["step"]) == [5, 6] and sorted(new.steps["step"]) == [5, 6, 7]
    # 2 kernels a step: 2 steps kept on base, 3 on new
    assert (base.summary.kernels, new.summary.kernels) == (4, 6)
    whole = load_run(pair / "new", steps=[(5, 7)], keep_rows=False)
    assert STEPS_MISSING not in {note.code for note in whole.warnings}


def test_select_steps_on_a_run_read_whole_warns_the_same(pair):
    run = select_steps(load_run(pair / "base"), [(5, 7), (9, 9)])
    assert BASE_NOTE in texts(run.warnings)
    assert set(run.summary.ops["step"]) == {5, 6}


@pytest.mark.slow
def test_report_and_stderr_name_the_missing_steps_per_side(pair, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(pair / "base"), str(pair / "new"), "--steps",
                                       "5-7,9", "-o", str(out), "--no-charts"])
    assert result.exit_code == 0, result.output
    assert f"cann-diff: warning: base: {BASE_NOTE}" in result.output
    assert f"cann-diff: warning: new: {NEW_NOTE}" in result.output
    md = (out / "report.md").read_text()
    assert f"⚠ base: {BASE_NOTE}" in md and f"⚠ new: {NEW_NOTE}" in md
    html = (out / "report.html").read_text()
    assert "steps 7, 9 are not in this profile" in html
    assert "step 9 is not in this profile (it has steps 1-8)" in html


@pytest.mark.slow
def test_no_requested_step_on_a_side_is_one_line_and_exit_2(pair):
    with pytest.raises(InputError, match="selects no step"):
        load_run(pair / "base", steps=[(9, 10)])
    done = subprocess.run([sys.executable, "-m", "cann_diff", "base", "new", "--steps", "9-10",
                           "-o", "out", "--no-charts"], cwd=pair, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert done.returncode == 2, done.stderr
    assert done.stderr.splitlines() == [
        "cann-diff: error: base: --steps selects no step of this profile "
        "(it has steps [1, 2, 3, 4, 5, 6])"]
