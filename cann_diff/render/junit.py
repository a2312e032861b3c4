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
from collections.abc import Mapping, Sequence
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


def _step_case(suite: ET.Element, report: Report, label: str, note: str = "") -> bool:
    s = report.step
    case = ET.SubElement(suite, "testcase", name="step time", classname=f"{CLASSNAME}.{label}")
    failed = step_failed(report)
    gate = f"gate ≥ {s.gate_pct:g}%" if s.gate_pct is not None else "no gate"
    if failed:
        failure = ET.SubElement(case, "failure", type="step-regressed",
                                message=_text(report.headline))
        failure.text = _text(f"step {fmt.ms(s.base_us)} → {fmt.ms(s.new_us)} ms "
                             f"({fmt.pct(s.change_pct)}, {s.status}; {gate})"
                             + (f". {note}" if note else ""))
    else:
        out = ET.SubElement(case, "system-out")
        out.text = _text(f"step {fmt.ms(s.base_us)} → {fmt.ms(s.new_us)} ms "
                         f"({fmt.pct(s.change_pct)}, {s.status}; {gate}). {report.headline}")
    return failed


def _finding_cases(suite: ET.Element, report: Report, label: str,
                   notes: Mapping[str, str]) -> int:
    failures = 0
    for finding in report.findings:
        if finding.severity != "high":
            continue
        case = ET.SubElement(suite, "testcase", name=_text(f"finding {finding.id}"),
                             classname=f"{CLASSNAME}.{label}")
        failure = ET.SubElement(case, "failure", type=finding.id, message=_text(finding.title))
        note = notes.get(finding.id, "")
        failure.text = _text(finding.detail + (f" {note}" if note else ""))
        failures += 1
    return failures


def rung_notes(ladder, rungs: Sequence[Report]) -> dict[str, str]:
    """For a ladder's gate: which rung introduced the step change and each high finding.

    ``step``: the rungs whose verdict names causes, with them; a finding id: the first rung
    whose own report raises it.
    """
    moved = [f"rung {r.index} ({r.name}): " + ", ".join(
        f"{c.name} {fmt.ms(c.delta_us, signed=True)} ms" for c in r.causes)
        for r in ladder.rungs if r.causes]
    notes = {"step": "Introduced along the path by " + "; ".join(moved) + "."} if moved else {}
    for index, report in enumerate(rungs, 1):
        for finding in report.findings:
            notes.setdefault(finding.id, f"Introduced at rung {index} "
                                         f"({ladder.rungs[index - 1].name}).")
    return notes


def junit_xml(reports: Sequence[Report], directories: Sequence[str | Path],
              notes: Mapping[str, str] | None = None) -> str:
    """The JUnit XML of one or several pairwise reports (``directories``: where each is).

    ``directories`` are written as given (relative to where CI collects artifacts, or
    absolute) into the properties ``report.md``, ``report.html`` and ``report.json``.
    ``notes`` (a ladder's gate, ``rung_notes``) end the failure texts of the step
    (``step``) and of each finding id: the rung that introduced it.
    """
    notes = notes or {}
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
        fails = int(_step_case(suite, report, label, notes.get("step", ""))) + \
            _finding_cases(suite, report, label, notes)
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
