"""The type checker runs with the README's test command, so CI fails on a type error.

mypy reads its configuration from pyproject.toml ([tool.mypy]): the package, with the
bodies of unannotated functions checked too.
"""

from pathlib import Path

import pytest

api = pytest.importorskip("mypy.api", reason="mypy is a test extra: pip install -e '.[test]'")

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_package_type_checks():
    out, err, status = api.run(["--config-file", str(ROOT / "pyproject.toml"),
                                "--no-error-summary", str(ROOT / "cann_diff")])
    assert status == 0, f"mypy found type errors:\n{out}{err}"
