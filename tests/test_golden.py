"""Golden report.md files (STYLE.md rule 10).

``tests/golden/<case>.md`` is compared byte for byte. On a mismatch the test writes
``<case>.got.md`` beside it (git-ignored) and fails; ``CANN_DIFF_REGEN=1 pytest
tests/test_golden.py`` rewrites the golden files. Review the diff before committing one.

Cases:

* ``example`` — the shipped pair ``examples/cann7.0.1.3`` vs ``examples/cann8.0.RC2``
  (2 ranks, steps 5-7; MatmulAllReduce split into MatMul + AllReduce: comm-hides-compute).
  The committed ``reports/example/cann7.0.1.3_vs_cann8.0.RC2/report.md`` (the pairwise
  report of the README command, which compares the baseline with two candidates) must equal it
  plus the command line and date that report.json records (the golden carries neither).
* ``no_regression_mi_level1_vs_level2`` — one real run profiled at Level1 and at Level2
  (MindStudio Insight test data, copied in tests/data/realdata): same 191 kernels, one
  step each; a no-regression control whose step status must stay ``unchanged``.
"""

from __future__ import annotations

import difflib
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import DATA, ROOT

from cann_diff.pipeline import Options, diff
from cann_diff.render.markdown import render_markdown
from cann_diff.report import Invocation

GOLDEN = Path(__file__).resolve().parent / "golden"
CHARTS = {"step_breakdown": "step_breakdown.png", "step_waterfall": "step_waterfall.png",
          "top_movers": "top_movers.png", "rank_heatmap": "rank_heatmap.png",
          "rank_steps": "rank_steps.png", "families": "families.png",
          "step_timeline": "step_timeline.png"}
MI_TEXT = DATA / "realdata" / "Ascend__msinsight/test/data/pytorch/text"


def assert_golden(case: str, got: str) -> None:
    """Compare ``got`` with tests/golden/<case>.md; write <case>.got.md on a mismatch."""
    golden = GOLDEN / f"{case}.md"
    got_path = GOLDEN / f"{case}.got.md"
    data = got.encode("utf-8")
    if os.environ.get("CANN_DIFF_REGEN") == "1":
        GOLDEN.mkdir(exist_ok=True)
        golden.write_bytes(data)
        got_path.unlink(missing_ok=True)
        return
    if golden.is_file() and golden.read_bytes() == data:
        got_path.unlink(missing_ok=True)
        return
    got_path.write_bytes(data)
    if not golden.is_file():
        pytest.fail(f"{golden} is missing; wrote {got_path.name}. Run with CANN_DIFF_REGEN=1 "
                    "if the output is right.")
    delta = "".join(difflib.unified_diff(golden.read_text("utf-8").splitlines(True),
                                         got.splitlines(True), str(golden), str(got_path), n=1))
    pytest.fail(f"report.md differs from {golden.name}; wrote {got_path.name}. Run with "
                f"CANN_DIFF_REGEN=1 if the change is intentional.\n{delta[:4000]}")


@pytest.fixture(scope="module")
def example_result():
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)  # the report shows input paths as given: keep them relative
        return diff("examples/cann7.0.1.3", "examples/cann8.0.RC2")


@pytest.fixture(scope="module")
def level_result():
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(MI_TEXT)
        return diff("level1/rank0_ascend_pt", "level2/rank0_ascend_pt",
                    Options(base_label="level1", new_label="level2"))


@pytest.mark.slow
def test_example_report_md(example_result):
    assert_golden("example", render_markdown(example_result.report, CHARTS))


def test_committed_example_report_is_the_golden(example_result):
    example = ROOT / "reports" / "example" / "cann7.0.1.3_vs_cann8.0.RC2"
    invocation = Invocation(**json.loads((example / "report.json").read_text())["invocation"])
    assert invocation.command == ("cann-diff examples/cann7.0.1.3 examples/cann8.0.RC2 "
                                  "examples/cann8.0.RC2-mc2 --out reports/example")
    report = replace(example_result.report, invocation=invocation)
    assert (example / "report.md").read_text("utf-8") == render_markdown(report, CHARTS), (
        "reports/example is stale: rerun the README command `cann-diff examples/cann7.0.1.3 "
        "examples/cann8.0.RC2 examples/cann8.0.RC2-mc2 -o reports/example`")
    # The golden is the same report without the command line and the date.
    golden = (GOLDEN / "example.md").read_text("utf-8").splitlines()
    differing = [line for line in (example / "report.md").read_text("utf-8").splitlines()
                 if line not in golden]
    assert len(differing) == 1
    assert f"run as `{invocation.command}`; dated {invocation.date}" in differing[0]
    # Dated by the profiles, so rerunning the README command rewrites the same bytes.
    assert invocation.date_source == "collected" and invocation.date == "2024-11-29T08:46:40Z"


@pytest.mark.slow
def test_the_readme_command_rewrites_the_committed_example_byte_for_byte(tmp_path):
    (tmp_path / "examples").symlink_to(ROOT / "examples")
    env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
    env["PYTHONPATH"] = str(ROOT)  # this checkout, whatever is installed
    run = subprocess.run([sys.executable, "-m", "cann_diff", "examples/cann7.0.1.3",
                          "examples/cann8.0.RC2", "examples/cann8.0.RC2-mc2", "-o",
                          "reports/example", "--quiet"], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    shipped = ROOT / "reports/example"
    made = sorted(p.relative_to(tmp_path / "reports/example")
                  for p in (tmp_path / "reports/example").rglob("*") if p.is_file())
    assert made == sorted(p.relative_to(shipped) for p in shipped.rglob("*") if p.is_file())
    changed = [str(p) for p in made
               if (tmp_path / "reports/example" / p).read_bytes() != (shipped / p).read_bytes()]
    assert changed == [], "the README command would leave `git status` dirty"


@pytest.mark.slow
def test_no_regression_mi_level1_vs_level2_report_md(level_result):
    assert_golden("no_regression_mi_level1_vs_level2",
                  render_markdown(level_result.report, CHARTS))


def test_no_regression_control_has_no_verdict_of_change(level_result):
    report = level_result.report
    assert report.step.status == "unchanged"
    # The same run at two profiler levels: nothing established as slower or faster (keys
    # moved by ≥ 5 % stay not-significant or untested).
    assert {op.status for op in report.operators} <= {"unchanged", "not-significant",
                                                        "untested"}
    assert not {f.id for f in report.findings} & {"op-regression", "op-improvement",
                                                      "comm-hides-compute", "new-ops",
                                                      "removed-ops"}


def test_one_step_caveat_is_noted_once(level_result):
    md = render_markdown(level_result.report, CHARTS)
    notes = md.split("## Notes", 1)[1]
    assert notes.lower().count("one step per side") == 1
