"""examples/ci/: the GitLab job and the GitHub workflow are valid YAML whose shell lines run
the gate on the shipped example, write the JUnit report CI shows and the files it keeps.

The lines are executed as written (``pip install`` aside: the suite runs the checkout),
with BASELINE / CANDIDATE pointing at the example runs: cann8.0.RC2 is 8.0 % slower than
the baseline (the 3 % gate fails, exit 1), cann8.0.RC2-mc2 4.8 % faster (exit 0).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import xmlschema
import yaml
from conftest import DATA, EXAMPLES, ROOT
from junitparser import JUnitXml

CI = ROOT / "examples" / "ci"
SCHEMA = xmlschema.XMLSchema(DATA / "junit" / "junit-10.xsd")


def _gitlab() -> tuple[list[str], dict, list[str], str]:
    job = yaml.safe_load((CI / "gitlab-ci.yml").read_text())["cann-upgrade-gate"]
    artifacts = job["artifacts"]
    return job["script"], job["variables"], artifacts["paths"], artifacts["reports"]["junit"]


def _github() -> tuple[list[str], dict, list[str], str]:
    job = yaml.safe_load((CI / "github-workflow.yml").read_text())["jobs"]["gate"]
    steps = job["steps"]
    lines = [s["run"] for s in steps if "run" in s]
    junit = next(s["with"]["report_paths"] for s in steps
                 if s.get("uses", "").startswith("mikepenz/action-junit-report"))
    kept = next(s["with"]["path"] for s in steps
                if s.get("uses", "").startswith("actions/upload-artifact")).split()
    return lines, job["env"], kept, junit


def _run(lines: list[str], env: dict, candidate: str, cwd: Path) -> int:
    """The job's shell lines in order, as CI runs them (the first failing one ends it)."""
    environment = {**os.environ, **{k: str(v) for k, v in env.items()},
                   "BASELINE": str(EXAMPLES / "cann7.0.1.3"),
                   "CANDIDATE": str(EXAMPLES / candidate),
                   "PYTHONPATH": str(ROOT), "PATH": f"{Path(sys.executable).parent}:"
                   f"{os.environ.get('PATH', '')}"}
    for line in lines:
        if line.startswith("pip install"):
            continue  # the suite runs this checkout, installed
        code = subprocess.run(["bash", "-c", line], cwd=cwd, env=environment,
                              capture_output=True, text=True, timeout=300).returncode
        if code:
            return code
    return 0


@pytest.mark.slow
@pytest.mark.parametrize("read", [_gitlab, _github], ids=["gitlab", "github"])
@pytest.mark.parametrize(("candidate", "code"), [("cann8.0.RC2", 1), ("cann8.0.RC2-mc2", 0)])
def test_the_ci_example_gates_and_keeps_the_report(read, candidate, code, tmp_path):
    lines, env, kept, junit = read()
    assert env["GATE_PCT"] == "3"
    assert _run(lines, env, candidate, tmp_path) == code
    for path in kept:
        assert (tmp_path / path).is_file(), path
    SCHEMA.validate(str(tmp_path / junit))
    suite = next(iter(JUnitXml.fromfile(str(tmp_path / junit))))
    step = next(case for case in suite if case.name == "step time")
    assert step.is_passed == (code == 0)
