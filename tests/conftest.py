"""Shared fixtures: where the real data lives, the repository root, and the report schema.

Every report any test builds is checked against the published schema: ``Report.to_dict``
is wrapped for each test, so a key of another type than the schema says, or a value that
is not valid JSON (NaN), fails the test that produced it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from cann_diff.report import Report, json_schema

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data"
REALDATA = ROOT.parent / "shared" / "realdata"
EXAMPLES = ROOT / "examples"

needs_realdata = pytest.mark.skipif(
    not REALDATA.is_dir(),
    reason="../shared/realdata is not beside the project (a user's clone): real-data tests skip")

REPORT_SCHEMA = Draft202012Validator(json_schema())


@pytest.fixture(scope="session")
def example_report() -> Report:
    """The report of the shipped example pair (cann7.0.1.3 vs cann8.0.RC2), built once."""
    from cann_diff.pipeline import diff

    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(ROOT)  # the report shows input paths as given: keep them relative
        return diff("examples/cann7.0.1.3", "examples/cann8.0.RC2").report


def schema_errors(data: dict) -> list[str]:
    """Where ``data`` (a report.json as written) breaks cann_diff/data/report.schema.json."""
    written = json.loads(json.dumps(data, allow_nan=False))
    errors = sorted(REPORT_SCHEMA.iter_errors(written), key=lambda e: list(e.absolute_path))
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:160]}" for e in errors]


@pytest.fixture(autouse=True)
def allocator_environment_restored():
    """The command line (run in-process by CliRunner) writes its allocator settings into
    os.environ for its workers; after each test the environment is as the suite had it."""
    from cann_diff.allocator import ENVIRONMENT

    before = {name: os.environ.get(name) for name in ENVIRONMENT}
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture(autouse=True)
def report_json_follows_the_schema(monkeypatch):
    original = Report.to_dict

    def checked(self):
        data = original(self)
        errors = schema_errors(data)
        if errors:
            raise AssertionError(f"report.json breaks cann_diff/data/report.schema.json "
                                 f"({len(errors)} error(s)): {'; '.join(errors[:5])}")
        return data

    monkeypatch.setattr(Report, "to_dict", checked)
    yield
