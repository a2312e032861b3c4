"""The README is part of the product: its commands, options and quoted output stay true."""

import json
import re

import pytest
from click.testing import CliRunner
from conftest import ROOT

from cann_diff import errors
from cann_diff.cli import main

README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_holds_the_two_commands_and_ci_runs_the_same_test_command():
    run = ("pip install -e . && cann-diff examples/cann7.0.1.3 examples/cann8.0.RC2 "
           "examples/cann8.0.RC2-mc2 -o reports/example")
    test = "pip install -e '.[test]' && pytest"
    assert run in README and test in README
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    assert test in ci
    assert run.split(" && ", 1)[1].replace("reports/example", "reports/ci-example") in ci


def test_every_cli_option_is_documented_in_the_readme():
    help_text = CliRunner().invoke(main, ["--help"]).output
    options = set(re.findall(r"(--[a-z][a-z-]+)", help_text)) - {"--help", "--version"}
    assert options, help_text
    missing = sorted(o for o in options if o not in README)
    assert not missing, f"options missing from README: {missing}"


PAIR = ROOT / "reports/example/cann7.0.1.3_vs_cann8.0.RC2/report.json"


def test_readme_quotes_the_committed_example_verdict_and_headline():
    quoted = " ".join(line[2:] for line in README.splitlines() if line.startswith("> "))
    quoted = " ".join(quoted.split())
    summary = json.loads((ROOT / "reports/example/report.json").read_text())
    assert summary["verdict"] in quoted
    assert json.loads(PAIR.read_text())["headline"] in quoted


@pytest.mark.slow
def test_readme_library_example_runs(tmp_path, monkeypatch):
    block = re.search(r"## Library\n\n```python\n(.*?)```", README, re.S).group(1)
    for name in ("baseline", "candidate"):
        (tmp_path / name).symlink_to(ROOT / "examples" / ("cann7.0.1.3" if name == "baseline"
                                                          else "cann8.0.RC2"))
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)  # noqa: S102 - our own README
    committed = json.loads(PAIR.read_text())["headline"]
    assert namespace["result"].report.headline == committed


def test_readme_and_help_list_the_same_exit_codes_as_errors_py():
    table = README.split("### Exit codes", 1)[1].split("\n\n", 2)[1]
    documented = [int(row.split("|")[1]) for row in table.splitlines()[2:]]
    help_text = CliRunner().invoke(main, ["--help"]).output
    block = help_text.split("Exit codes:", 1)[1].split("\n\n", 1)[0]
    in_help = [int(line.split()[0]) for line in block.strip().splitlines()]
    assert documented == in_help == [errors.EXIT_OK, errors.EXIT_REGRESSION,
                                     errors.EXIT_BAD_INPUT, errors.EXIT_INTERNAL,
                                     errors.EXIT_SIGINT, errors.EXIT_SIGTERM]
    assert documented == [0, 1, 2, 3, 130, 143]  # DESIGN.md "Exit codes"
