import json

from click.testing import CliRunner
from conftest import EXAMPLES

from cann_diff.cli import main


def run(args):
    return CliRunner().invoke(main, [str(a) for a in args])


def test_example_pair_writes_report_and_verdict(tmp_path):
    out = tmp_path / "out"
    result = run([EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2", "-o", out, "-q"])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["schema"] == "cann-diff/1"
    assert report["step"]["status"] == "regressed"
    ids = {f["id"] for f in report["findings"]}
    assert {"comm-hides-compute", "mc2-split"} <= ids
    for chart in ("step_breakdown.png", "step_waterfall.png", "top_movers.png"):
        assert (out / chart).stat().st_size > 1000
        assert f"]({chart})" in (out / "report.md").read_text()


def test_missing_input_is_one_line_exit_2(tmp_path):
    result = run([tmp_path / "nope", tmp_path / "nope2", "-o", tmp_path / "o"])
    assert result.exit_code == 2
    assert "nope" in result.output and "internal error" not in result.output
    assert isinstance(result.exception, SystemExit)
