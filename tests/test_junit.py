"""``--junit``: the gate as JUnit XML that CI systems load.

Checked against the JUnit schema Jenkins validates with (tests/data/junit/junit-10.xsd)
and loaded with a JUnit parser (junitparser), on the shipped example whose answers the
README states: cann8.0.RC2 is 8.0 % slower (regressed, comm-hides-compute high), the MC2
candidate 4.8 % faster.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import xmlschema
from conftest import DATA, EXAMPLES
from junitparser import Failure, JUnitXml

from cann_diff.pipeline import Options, diff
from cann_diff.render.junit import junit_xml
from cann_diff.settings import Thresholds

SCHEMA = xmlschema.XMLSchema(DATA / "junit" / "junit-10.xsd")


@pytest.fixture(scope="module")
def example_reports():
    options = Options(thresholds=Thresholds(fail_on_regression_pct=5.0))
    base = EXAMPLES / "cann7.0.1.3"
    return [diff(base, EXAMPLES / name, options).report
            for name in ("cann8.0.RC2", "cann8.0.RC2-mc2")]


def _load(text: str, tmp_path: Path) -> JUnitXml:
    path = tmp_path / "junit.xml"
    path.write_text(text, "utf-8")
    SCHEMA.validate(str(path))
    return JUnitXml.fromfile(str(path))


def test_one_suite_per_candidate_and_the_failed_gate_is_a_failure(example_reports, tmp_path):
    xml = _load(junit_xml(example_reports, ["out/a", "out/b"]), tmp_path)
    suites = list(xml)
    assert [s.name for s in suites] == ["cann7.0.1.3 vs cann8.0.RC2",
                                        "cann7.0.1.3 vs cann8.0.RC2-mc2"]
    slower, faster = suites
    step = next(c for c in slower if c.name == "step time")
    failures = [r for r in step.result if isinstance(r, Failure)]
    assert len(failures) == 1  # +8.0 % against a 5 % gate
    assert failures[0].message == example_reports[0].headline
    high = [c.name for c in slower if c.name.startswith("finding ")]
    assert high == [f"finding {f.id}" for f in example_reports[0].findings
                    if f.severity == "high"]
    assert "finding comm-hides-compute" in high
    assert slower.failures == 1 + len(high) and slower.tests == 1 + len(high)
    # The MC2 candidate is faster: its step passes.
    assert next(c for c in faster if c.name == "step time").is_passed
    props = {p.name: p.value for p in slower.properties()}
    assert props["report.html"] == "out/a/report.html"
    assert props["report.md"] == "out/a/report.md"


def test_without_a_gate_the_step_fails_only_when_it_regressed(example_reports, tmp_path):
    no_gate = [replace(r, step=replace(r.step, gate=None, gate_pct=None))
               for r in example_reports]
    suites = list(_load(junit_xml(no_gate, ["a", "b"]), tmp_path))
    assert not next(c for c in suites[0] if c.name == "step time").is_passed  # regressed
    assert next(c for c in suites[1] if c.name == "step time").is_passed      # improved


def test_control_characters_from_a_label_stay_valid_xml(example_reports, tmp_path):
    hostile = replace(example_reports[0], new=replace(example_reports[0].new,
                                                       label="new\x1b[2J\x00<&>\u202e"))
    xml = _load(junit_xml([hostile], ["a"]), tmp_path)
    suite = next(iter(xml))
    assert suite.name == "cann7.0.1.3 vs new\\x1b[2J\\x00<&>\\u202e"


@pytest.mark.slow
def test_the_cli_writes_junit_beside_the_report_and_exits_as_the_gate(tmp_path):
    from click.testing import CliRunner

    from cann_diff.cli import main

    junit = tmp_path / "ci" / "junit.xml"
    junit.parent.mkdir()
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(EXAMPLES / "cann7.0.1.3"),
                                       str(EXAMPLES / "cann8.0.RC2"),
                                       str(EXAMPLES / "cann8.0.RC2-mc2"), "-o", str(out),
                                       "--fail-on-regression", "3", "--junit", str(junit),
                                       "--no-charts", "--quiet"])
    assert result.exit_code == 1, result.output
    xml = _load(junit.read_text(), tmp_path)
    suites = list(xml)
    assert len(suites) == 2
    props = {p.name: p.value for p in suites[0].properties()}
    assert Path(props["report.html"]).parent.parent == out
    assert Path(props["report.html"]).is_file()
    assert not (out / "junit.xml").exists()  # written where asked, not into OUT
