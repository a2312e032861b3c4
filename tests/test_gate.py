"""The step status and the --fail-on-regression gate are one decision (DESIGN.md).

On the shipped example the step grows 53.95 → 58.24 ms per step (+8.0 %, p < 0.001, three
steps per side, computed in examples/generate.py from the simulated schedule).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cann_diff.cli import main

ROOT = Path(__file__).resolve().parents[1]
BASE, NEW = ROOT / "examples" / "cann7.0.1.3", ROOT / "examples" / "cann8.0.RC2"


def run(tmp_path, *args):
    result = CliRunner().invoke(main, [str(BASE), str(NEW), "-o", str(tmp_path), "-q",
                                       "--no-charts", *args])
    return result, json.loads((tmp_path / "report.json").read_text())


@pytest.mark.slow
def test_a_failed_gate_is_never_unchanged(tmp_path):
    # +8 % is under a 10 % step threshold, but over a 3 % gate: one decision, regressed.
    result, report = run(tmp_path, "--step-threshold", "10", "--fail-on-regression", "3")
    assert result.exit_code == 1
    assert report["step"]["status"] == "regressed"


@pytest.mark.slow
def test_without_a_gate_the_step_threshold_decides(tmp_path):
    result, report = run(tmp_path, "--step-threshold", "10")
    assert result.exit_code == 0
    assert report["step"]["status"] == "unchanged"


@pytest.mark.slow
@pytest.mark.parametrize("gate, code", [("8.5", 0), ("7.5", 1)])
def test_the_gate_compares_the_step_change_with_pct(tmp_path, gate, code):
    result, report = run(tmp_path, "--fail-on-regression", gate)
    assert report["step"]["delta_pct"] == pytest.approx(7.95, abs=0.01)
    assert result.exit_code == code
