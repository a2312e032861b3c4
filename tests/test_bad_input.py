"""Bad input through the command line: exit 2, one line on stderr naming the file, no traceback.

Each case breaks one thing in a copy of the real MI level1 rank 0 export
(tests/data/realdata, see README.md there) and is run as BASE and as NEW against the
intact copy. Also: a missing communication.json is a warning in report.md, inputs are
never modified, and the output directory keeps what was already in it.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import DATA, EXAMPLES

from cann_diff.cli import main

LEVEL1 = DATA / "realdata" / "Ascend__msinsight/test/data/pytorch/text/level1/rank0_ascend_pt"
LEVEL2 = DATA / "realdata" / "Ascend__msinsight/test/data/pytorch/text/level2/rank0_ascend_pt"
KERNELS = Path("ASCEND_PROFILER_OUTPUT") / "kernel_details.csv"
COMM = Path("ASCEND_PROFILER_OUTPUT") / "communication.json"


def run_cli(*args) -> Result:
    return CliRunner().invoke(main, [str(a) for a in args])


def assert_one_line_error(result, *needles: str) -> str:
    """Exit 2, nothing on stdout, exactly one stderr line that names ``needles``."""
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    assert "internal error" not in result.stderr  # a handled input error, not a crash
    assert result.stdout == ""
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def snapshot(root: Path) -> dict[str, str]:
    """Every path below ``root`` -> sha256 of its bytes (``dir`` for directories)."""
    return {str(p.relative_to(root)): ("dir" if p.is_dir() else
                                       hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*"))}


# ---------------------------------------------------------------- broken copies

def rows_of(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def write_rows(path: Path, rows: list[list[str]]) -> None:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8", newline="")


def empty_kernels(rank: Path) -> None:
    (rank / KERNELS).write_bytes(b"")


def header_only(rank: Path) -> None:
    write_rows(rank / KERNELS, rows_of(rank / KERNELS)[:1])


def without_duration(rank: Path) -> None:
    rows = rows_of(rank / KERNELS)
    column = rows[0].index("Duration(us)")
    write_rows(rank / KERNELS, [r[:column] + r[column + 1:] for r in rows])


def truncated_csv(rank: Path) -> None:
    data = (rank / KERNELS).read_bytes()
    lines = data.rstrip(b"\r\n").split(b"\r\n")
    lines[-1] = lines[-1][: len(lines[-1]) // 2]  # the last row cut mid-way, no newline
    (rank / KERNELS).write_bytes(b"\r\n".join(lines))


def truncated_json(rank: Path) -> None:
    data = (rank / COMM).read_bytes()
    (rank / COMM).write_bytes(data[: len(data) // 2])


def non_numeric_start(rank: Path) -> None:
    rows = rows_of(rank / KERNELS)
    column = rows[0].index("Start Time(us)")
    rows[5][column] = "17364088837O4903.918\t"  # letter O for a zero
    write_rows(rank / KERNELS, rows)


def non_numeric_duration(rank: Path) -> None:
    rows = rows_of(rank / KERNELS)
    rows[3][rows[0].index("Duration(us)")] = "N/A"
    write_rows(rank / KERNELS, rows)


def comm_time_not_a_number(rank: Path) -> None:
    data = json.loads((rank / COMM).read_text())
    step = next(iter(data.values()))
    op = next(v for k, v in step["collective"].items() if k.startswith("hcom_"))
    op["Communication Time Info"]["Elapse Time(ms)"] = "n/a"
    (rank / COMM).write_text(json.dumps(data))


def comm_time_info_null(rank: Path) -> None:
    data = json.loads((rank / COMM).read_text())
    step = next(iter(data.values()))
    op = next(v for k, v in step["collective"].items() if k.startswith("hcom_"))
    op["Communication Time Info"] = None
    (rank / COMM).write_text(json.dumps(data))


def profiler_info_config_null(rank: Path) -> None:
    (info,) = rank.glob("profiler_info_*.json")
    data = json.loads(info.read_text())
    data["config"] = None
    info.write_text(json.dumps(data))




# case id, how to break the copy, what the one error line must name
BROKEN = [
    pytest.param(empty_kernels, ("kernel_details.csv",), id="empty-kernel-details"),
    pytest.param(header_only, ("kernel_details.csv",), id="header-only"),
    pytest.param(without_duration, ("kernel_details.csv", "Duration"), id="no-duration-column"),
    pytest.param(truncated_csv, ("kernel_details.csv",), id="truncated-csv"),
    pytest.param(truncated_json, ("communication.json",), id="truncated-communication-json"),
    pytest.param(non_numeric_start, ("kernel_details.csv", "Start Time", "row 6"),
                 id="non-numeric-start-time"),
    pytest.param(non_numeric_duration, ("kernel_details.csv", "Duration", "row 4"),
                 id="non-numeric-duration"),
    pytest.param(comm_time_not_a_number, ("communication.json",),
                 id="communication-json-time-not-a-number"),
    pytest.param(comm_time_info_null, ("communication.json",),
                 id="communication-json-time-info-null"),
    pytest.param(profiler_info_config_null, ("profiler_info_0.json",),
                 id="profiler-info-config-null"),
]


@pytest.fixture
def good(tmp_path) -> Path:
    """An intact copy of the real level1 rank 0 export."""
    return Path(shutil.copytree(LEVEL1, tmp_path / "good" / "rank0_ascend_pt"))


@pytest.mark.slow
@pytest.mark.parametrize("side", ["base", "new"])
@pytest.mark.parametrize("breaker, needles", BROKEN)
def test_broken_file_is_one_line_exit_2(breaker, needles, side, good, tmp_path):
    case = breaker.__name__
    bad = Path(shutil.copytree(LEVEL1, tmp_path / case / "rank0_ascend_pt"))
    breaker(bad)
    out = tmp_path / "out"
    args = (good, bad) if side == "new" else (bad, good)
    result = run_cli(*args, "-o", out, "-q")
    assert_one_line_error(result, case, *needles)
    assert not (out / "report.md").exists() and not (out / "report.json").exists()


def test_missing_directory(good, tmp_path):
    result = run_cli(good, tmp_path / "does_not_exist", "-o", tmp_path / "out", "-q")
    assert_one_line_error(result, "does_not_exist")


def test_directory_without_a_profile_says_what_it_looked_for(good, tmp_path):
    empty = tmp_path / "no_profile_here"
    (empty / "some_ascend_pt" / "ASCEND_PROFILER_OUTPUT").mkdir(parents=True)
    (empty / "notes.txt").write_text("not a profile\n")
    result = run_cli(empty, good, "-o", tmp_path / "out", "-q")
    line = assert_one_line_error(result, "no_profile_here", "kernel_details.csv")
    assert "looked for" in line


# ---------------------------------------------------------------- output directory

@pytest.mark.parametrize("where", ["new-rank-dir", "new-output-dir", "base-itself",
                                   "base-parent-deep"])
def test_output_inside_an_input_is_refused(where, good, tmp_path):
    new = Path(shutil.copytree(LEVEL2, tmp_path / "new" / "rank0_ascend_pt"))
    base_parent = good.parent  # a directory of ranks is a valid input too
    base = base_parent if where == "base-parent-deep" else good
    out = {"new-rank-dir": new / "report",
           "new-output-dir": new / "ASCEND_PROFILER_OUTPUT" / "cmp",
           "base-itself": good,
           "base-parent-deep": good / "deeper" / "report"}[where]
    before = {p: snapshot(p) for p in (base_parent, new)}
    result = run_cli(base, new, "-o", out, "-q")
    assert_one_line_error(result, "inside")
    assert {p: snapshot(p) for p in (base_parent, new)} == before  # nothing written


# ---------------------------------------------------------------- --steps

@pytest.mark.parametrize("spec, named", [("abc", "'abc'"), ("5..7", "'5..7'"), ("-", "'-'"),
                                         ("5,", "''"), ("3-x", "'3-x'"), ("7-5x", "'7-5x'")])
def test_unknown_steps_spec(spec, named, good, tmp_path):
    result = run_cli(good, good, "--steps", spec, "-o", tmp_path / "out", "-q")
    assert_one_line_error(result, named)


def test_steps_selecting_nothing(good, tmp_path):
    # the profile has step 50 only (Step Id column of kernel_details.csv)
    steps = {r[0] for r in rows_of(good / KERNELS)[1:]}
    assert steps == {"50"}
    result = run_cli(good, good, "--steps", "999", "-o", tmp_path / "out", "-q")
    assert_one_line_error(result, "rank0_ascend_pt", "--steps", "50")


# ---------------------------------------------------------------- partial input, safety

def test_header_only_step_trace_time(good, tmp_path):
    bad = Path(shutil.copytree(LEVEL2, tmp_path / "new" / "rank0_ascend_pt"))
    steps_file = bad / "ASCEND_PROFILER_OUTPUT" / "step_trace_time.csv"
    write_rows(steps_file, rows_of(steps_file)[:1])
    out = tmp_path / "out"
    result = run_cli(good, bad, "-o", out, "-q", "--no-charts")
    if result.exit_code == 2:
        assert_one_line_error(result, "step_trace_time.csv")
        return
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    assert report["new"]["step_source"] == "kernels"
    assert report["step"]["new_us"] is not None and report["step"]["new_us"] > 0


def test_missing_communication_json_is_a_warning_in_report_md(good, tmp_path):
    new = Path(shutil.copytree(LEVEL2, tmp_path / "new" / "rank0_ascend_pt"))
    (new / COMM).unlink()
    out = tmp_path / "out"
    result = run_cli(good, new, "-o", out, "-q", "--no-charts")
    assert result.exit_code == 0, result.output
    warnings = [line for line in (out / "report.md").read_text().splitlines()
                if "⚠" in line and "communication.json" in line]
    assert len(warnings) == 1 and "new" in warnings[0]
    report = json.loads((out / "report.json").read_text())
    assert any("communication.json" in w for w in report["new"]["warnings"])
    assert not any("communication.json" in w for w in report["base"]["warnings"])


@pytest.mark.slow
@pytest.mark.parametrize("pair", ["real-level1-vs-level2", "examples"])
def test_inputs_are_byte_identical_after_a_run(pair, tmp_path):
    if pair == "examples":
        base, new = EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2"
    else:
        base = Path(shutil.copytree(LEVEL1, tmp_path / "base" / "rank0_ascend_pt"))
        new = Path(shutil.copytree(LEVEL2, tmp_path / "new" / "rank0_ascend_pt"))
    before = {p: snapshot(p) for p in (base, new)}
    result = run_cli(base, new, "-o", tmp_path / "out", "-q")
    assert result.exit_code == 0, result.output
    assert {p: snapshot(p) for p in (base, new)} == before


@pytest.mark.slow
def test_unrelated_files_in_the_output_dir_survive(good, tmp_path):
    new = Path(shutil.copytree(LEVEL2, tmp_path / "new" / "rank0_ascend_pt"))
    out = tmp_path / "out"
    (out / "keep" / "deep").mkdir(parents=True)
    (out / "ticket-notes.txt").write_text("written by a person\n")
    (out / "keep" / "deep" / "data.bin").write_bytes(bytes(range(256)))
    before = snapshot(out)
    result = run_cli(good, new, "-o", out, "-q")
    assert result.exit_code == 0, result.output
    after = snapshot(out)
    assert {k: v for k, v in after.items() if k in before} == before
    added = set(after) - set(before)
    assert {"report.md", "report.json"} <= added
    assert all(not name.startswith(".") and not name.endswith(".tmp") for name in added), added
