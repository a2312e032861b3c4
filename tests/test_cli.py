import json
import subprocess
import sys
import tomllib

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES, ROOT

import cann_diff
from cann_diff.cli import main


def run(args):
    return CliRunner().invoke(main, [str(a) for a in args])


@pytest.mark.slow
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


# ---------------------------------------------------------------- fast start

HEAVY = ("pandas", "numpy", "scipy", "matplotlib")
# The modules loaded are printed by an exit handler: the command's own exit runs them.
PROBE = """
import atexit, runpy, sys
atexit.register(lambda: print("heavy", sorted({name.split(".")[0] for name in sys.modules}
                                              & set(%r))))
sys.argv = ["cann-diff", *sys.argv[1:]]
runpy.run_module("cann_diff", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("flag", ["--help", "-h", "--version"])
def test_help_and_version_import_no_pandas_numpy_scipy_or_matplotlib(flag):
    done = subprocess.run([sys.executable, "-c", PROBE % (HEAVY,), flag], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[-1] == "heavy []", done.stdout
    assert lines[0].startswith("Usage: cann-diff" if flag != "--version" else "cann-diff")


def test_version_is_the_projects():
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert run(["--version"]).output == f"cann-diff, version {declared}\n"
    assert cann_diff.__version__ == declared


@pytest.mark.slow
def test_public_names_are_the_functions_even_after_their_submodules_load():
    # cann_diff.match and cann_diff.compare are also submodules: importing them must not
    # turn ``from cann_diff import match`` into the module.
    code = ("import cann_diff.compare.operators, cann_diff.match, cann_diff.pipeline\n"
            "from cann_diff import compare, match, diff, load_run, Report, Run\n"
            "import types\n"
            "print(all(callable(f) and not isinstance(f, types.ModuleType)\n"
            "          for f in (compare, match, diff, load_run, Report, Run)))\n"
            "print(compare.__module__, match.__module__, diff.__module__)\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.stdout.splitlines() == ["True", "cann_diff.compare cann_diff.match "
                                                "cann_diff.pipeline"], done.stderr
    assert set(cann_diff.__all__) <= set(dir(cann_diff))
    with pytest.raises(AttributeError):
        cann_diff.no_such_name  # noqa: B018


def test_rank_bars_follow_the_ranks_read_a_chunk_at_a_time():
    # Worker processes report ranks a chunk at a time: 250, 500, … of 1,000. The bar
    # stands at each count (it used to move by one per report: 4 of 1,000 at the end of
    # the chunks), ends at the total, and an input of one rank gets no bar.
    import io

    from cann_diff.cli import RankBars

    bars = RankBars(io.StringIO())
    seen = []
    for done in (250, 500, 750):
        bars("base", done, 1000)
        seen.append(bars.bars["base"].pos)
    bars("new", 1, 3)
    bars("base", 1000, 1000)
    assert seen == [250, 500, 750]
    assert bars.bars["base"].pos == 1000 and bars.bars["new"].pos == 1
    bars("single", 1, 1)
    assert "single" not in bars.bars
