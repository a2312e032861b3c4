"""The gate as JUnit XML, the test-report format CI systems show and keep (``--junit FILE``).

One ``testsuite`` per candidate, one ``testcase`` per gated figure: the step time, and
each finding of severity ``high``. The step fails as the exit code does: when the gate
(``--fail-on-regression``) failed, or, without a gate, when the step regressed. A high
finding is a failure for the reviewer to read: its title is the message, its detail the
text. The verdict sentence is the step's failure message. Properties link the report
files, so a CI page leads to the report to attach to the ticket.

Written with the standard library's ElementTree: every string is escaped as XML, and
characters XML 1.0 cannot hold (controls from a profile name) are written as visible
escapes first (``format.visible``).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence
from pathlib import Path

from .. import format as fmt
from ..report.model import Report

CLASSNAME = "cann-diff"


def _text(value: str) -> str:
    return fmt.visible(value)


def step_failed(report: Report) -> bool:
    """Whether the step testcase fails: the gate failed, or without a gate, it regressed."""
    gate = report.step.gate
    return bool(gate) if gate is not None else report.step.status == "regressed"


def _step_case(suite: ET.Element, report: Report, label: str) -> bool:
    s = report.step
    case = ET.SubElement(suite, "testcase", name="step time", classname=f"{CLASSNAME}.{label}")
    failed = step_failed(report)
    gate = f"gate ≥ {s.gate_pct:g}%" if s.gate_pct is not None else "no gate"
    if failed:
        failure = ET.SubElement(case, "failure", type="step-regressed",
                                message=_text(report.headline))
        failure.text = _text(f"step {fmt.ms(s.base_us)} → {fmt.ms(s.new_us)} ms "
                             f"({fmt.pct(s.change_pct)}, {s.status}; {gate})")
    else:
        out = ET.SubElement(case, "system-out")
        out.text = _text(f"step {fmt.ms(s.base_us)} → {fmt.ms(s.new_us)} ms "
                         f"({fmt.pct(s.change_pct)}, {s.status}; {gate}). {report.headline}")
    return failed


def _finding_cases(suite: ET.Element, report: Report, label: str) -> int:
    failures = 0
    for finding in report.findings:
        if finding.severity != "high":
            continue
        case = ET.SubElement(suite, "testcase", name=_text(f"finding {finding.id}"),
                             classname=f"{CLASSNAME}.{label}")
        failure = ET.SubElement(case, "failure", type=finding.id, message=_text(finding.title))
        failure.text = _text(finding.detail)
        failures += 1
    return failures


def junit_xml(reports: Sequence[Report], directories: Sequence[str | Path]) -> str:
    """The JUnit XML of one or several pairwise reports (``directories``: where each is).

    ``directories`` are written as given (relative to where CI collects artifacts, or
    absolute) into the properties ``report.md``, ``report.html`` and ``report.json``.
    """
    root = ET.Element("testsuites", name=CLASSNAME)
    total = failed = 0
    for report, directory in zip(reports, directories):
        label = _text(report.new.label)
        suite = ET.SubElement(root, "testsuite", name=_text(f"{report.base.label} vs "
                                                           f"{report.new.label}"))
        properties = ET.SubElement(suite, "properties")
        for name, value in (("base", report.base.label), ("new", report.new.label),
                            ("step.status", report.step.status),
                            *((f"report.{ext}", str(Path(directory) / f"report.{ext}"))
                              for ext in ("md", "html", "json"))):
            ET.SubElement(properties, "property", name=name, value=_text(value))
        fails = int(_step_case(suite, report, label)) + _finding_cases(suite, report, label)
        cases = len(suite.findall("testcase"))
        suite.set("tests", str(cases))
        suite.set("failures", str(fails))
        suite.set("errors", "0")
        total, failed = total + cases, failed + fails
    root.set("tests", str(total))
    root.set("failures", str(failed))
    root.set("errors", "0")
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, "unicode") + "\n"
