"""Hostile input and faults: never hang, never crash, never give a silently wrong answer.

One test per class of fault found in the readers, each on a copy of a real export from
tests/data (or a small crafted one), run through the command line (click's CliRunner,
or a subprocess with a timeout where a regression would hang) or through ``load_run``:

* hangs: FIFOs named like profile files; a gzip trace of blanks (was quadratic);
* crashes: deep JSON nesting (RecursionError, ijson's MemoryError); OS errors while
  finding files (EACCES mocked, as root bypasses permissions; ELOOP, ENAMETOOLONG);
* errors of several lines: ijson/yajl messages;
* silent wrong answers: impossible durations, a duplicate ``Duration(us)`` header, a
  directory named kernel_details.csv, a db with an uncheckpointed ``-wal``, timestamps
  rounded by a spreadsheet, a valid CSV with a 50 MB field.

Bad input must give exit 2 and one stderr line ``cann-diff: error: <file>: <problem>``
naming the file; the inputs must be byte-identical afterwards.
"""

from __future__ import annotations

import csv
import errno
import gzip
import hashlib
import io
import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import DATA, ROOT

from cann_diff.cli import main
from cann_diff.errors import InputError
from cann_diff.read import load_run
from cann_diff.read.formats import files

TEXT = DATA / "realdata" / "Ascend__msinsight/test/data/pytorch/text"
LEVEL1 = TEXT / "level1" / "rank0_ascend_pt"
LEVEL2 = TEXT / "level2" / "rank0_ascend_pt"
RANK1_2023 = DATA / "realdata" / "Ascend__msinsight/server/src/test/test_data/test_rank_1"
VLLM = DATA / "formats" / "vllm_ascend" / "PROF_000001_20260823165413436_00626258NIRJNPIC"
OUT = "ASCEND_PROFILER_OUTPUT"
KERNELS = Path(OUT) / "kernel_details.csv"
HANG_TIMEOUT_S = 120  # a hang fails the test instead of blocking the suite
posix_only = pytest.mark.skipif(os.name != "posix", reason="FIFOs, symlinks and dir_fd are "
                                                           "POSIX features")


# ------------------------------------------------------------------------- helpers

def snapshot(root: Path) -> dict[str, str]:
    """Every entry below ``root`` -> sha256 (``dir``/``fifo``/``link`` for the others)."""
    def digest(p: Path) -> str:
        mode = p.lstat().st_mode
        if stat.S_ISLNK(mode):
            return "link:" + os.readlink(p)
        if stat.S_ISREG(mode):
            return hashlib.sha256(p.read_bytes()).hexdigest()
        return "dir" if stat.S_ISDIR(mode) else "special"
    return {str(p.relative_to(root)): digest(p) for p in sorted(root.rglob("*"))}


def copy_of(source: Path, tmp_path: Path, case: str) -> Path:
    return Path(shutil.copytree(source, tmp_path / case / source.name))


def run_cli(base: Path, new: Path, out: Path):
    return CliRunner().invoke(main, [str(base), str(new), "-o", str(out), "-q", "--no-charts"])


def run_subprocess(base: Path, new: Path, out: Path,
                   quiet: bool = True) -> subprocess.CompletedProcess:
    """The command line in a child process: a regression that blocks fails on the timeout."""
    return subprocess.run([sys.executable, "-m", "cann_diff", str(base), str(new), "-o",
                           str(out), *(["-q"] if quiet else []), "--no-charts"], cwd=ROOT,
                          capture_output=True, text=True, timeout=HANG_TIMEOUT_S)


def one_error_line(code: int, stderr: str, *needles: str) -> str:
    """Exit 2 and exactly one stderr line, the error, naming every needle."""
    assert code == 2, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("cann-diff: error: "), lines[0]
    assert "internal error" not in lines[0] and "Traceback" not in stderr
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


def rows_of(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.reader(handle))


def write_rows(path: Path, rows: list[list[str]]) -> None:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(rows)
    path.write_text(buffer.getvalue(), encoding="utf-8", newline="")


@pytest.fixture
def good(tmp_path) -> Path:
    return copy_of(LEVEL2, tmp_path, "good")


def assert_refused(good: Path, bad: Path, tmp_path: Path, *needles: str) -> str:
    """The CLI refuses ``bad`` (as NEW) in one line naming needles; inputs unchanged."""
    before = {p: snapshot(p) for p in (good, bad)}
    result = run_cli(good, bad, tmp_path / "out")
    line = one_error_line(result.exit_code, result.stderr, *needles)
    assert {p: snapshot(p) for p in (good, bad)} == before
    assert not (tmp_path / "out" / "report.md").exists()
    return line


# ------------------------------------------------------------------------- hangs

def _fifo_in_place(rank: Path, relative: str) -> Path:
    target = rank / relative
    if target.exists():
        target.unlink()
    target.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(target)
    return target


@pytest.mark.slow
@posix_only
@pytest.mark.parametrize("relative", ["profiler_info_0.json", f"{OUT}/kernel_details.csv",
                                      f"{OUT}/step_trace_time.csv",
                                      f"{OUT}/communication.json",
                                      f"{OUT}/ascend_pytorch_profiler_0.db"])
def test_fifo_named_like_a_profile_file_is_refused_not_waited_on(relative, good, tmp_path):
    bad = copy_of(LEVEL1, tmp_path, "fifo")
    fifo = _fifo_in_place(bad, relative)
    before = snapshot(bad)
    done = run_subprocess(good, bad, tmp_path / "out")
    one_error_line(done.returncode, done.stderr, str(fifo), "named pipe (FIFO)")
    assert snapshot(bad) == before


@pytest.mark.slow
@posix_only
def test_fifo_msprof_info_json_is_a_warning_and_the_run_goes_on(tmp_path):
    base = copy_of(VLLM, tmp_path, "base")
    new = copy_of(VLLM, tmp_path, "new")
    _fifo_in_place(new, "host/info.json")
    done = run_subprocess(base, new, tmp_path / "out", quiet=False)
    assert done.returncode in (0, 1), done.stderr
    warnings = [line for line in done.stderr.splitlines() if "info.json" in line]
    assert len(warnings) == 1 and "named pipe (FIFO)" in warnings[0], done.stderr
    assert warnings[0].startswith("cann-diff: warning: new: ")


def test_gzip_trace_of_blanks_is_refused_at_once(tmp_path):
    # 128 MiB of blanks: the old reader joined and stripped its buffer every 64 KiB
    # (2.2 s for 16 MiB, 9.3 s for 32 MiB: quadratic, about 2.5 minutes here).
    trace = tmp_path / "blank" / "trace.json.gz"
    trace.parent.mkdir()
    with gzip.open(trace, "wb", compresslevel=1) as handle:
        for _ in range(128):
            handle.write(b" " * (1 << 20))
    started = time.monotonic()
    with pytest.raises(InputError, match="the first 1 MiB are blank") as caught:
        load_run(trace)
    assert time.monotonic() - started < 10
    assert caught.value.path == str(trace)


def test_json_depth_guard_counts_only_brackets_outside_strings(tmp_path):
    # A bracket inside a string (shape text, escaped quotes) is no nesting; one level
    # past the limit is refused, the limit itself is not.
    limit = files.DEFAULT_LIMITS.max_json_depth
    inside = b'{"a": "[[[[\\"[[[[", "b": [' + b"[" * (limit - 2) + b"]" * (limit - 2) + b"]}"
    files.check_depth(tmp_path / "x.json", inside)
    with pytest.raises(InputError, match=f"deeper than {limit}"):
        files.check_depth(tmp_path / "x.json", b"[" * (limit + 1))
    guard = files.DepthGuard(tmp_path / "x.json")
    for byte in inside:  # one byte at a time: escapes and strings straddle the blocks
        guard.feed(bytes([byte]))
    assert guard.depth == 0 and not guard.in_string


# ------------------------------------------------------------------------- crashes

def test_deeply_nested_communication_json_is_refused(good, tmp_path):
    bad = copy_of(LEVEL1, tmp_path, "deep")
    (bad / OUT / "communication.json").write_text("[" * 100_000 + "]" * 100_000)
    assert_refused(good, bad, tmp_path, "communication.json", "nested deeper than")


def test_deeply_nested_trace_is_refused_before_ijson_sees_it(tmp_path):
    # 78 KiB of brackets made ijson's C backend allocate 3.9 GiB (memory grows with the
    # square of the depth), a MemoryError or the OOM killer.
    rank = tmp_path / "deep_ascend_pt" / OUT
    rank.mkdir(parents=True)
    (rank / "trace_view.json").write_text("[" * 40_000 + "]" * 40_000)
    started = time.monotonic()
    with pytest.raises(InputError, match="nested deeper than"):
        load_run(rank.parent)
    assert time.monotonic() - started < 10


def test_unreadable_output_dir_is_an_error_naming_it(good, tmp_path, monkeypatch):
    # Root ignores permission bits, so EACCES is mocked: stat and listing of anything
    # inside ASCEND_PROFILER_OUTPUT fail as for a directory of mode 000 owned by another
    # user (Path.is_file() raised PermissionError there before).
    bad = copy_of(LEVEL1, tmp_path, "denied")
    denied = str(bad / OUT) + os.sep
    real_stat, real_scandir = os.stat, os.scandir

    def stat_denied(path, *args, **kwargs):
        if os.fspath(path).startswith(denied):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_stat(path, *args, **kwargs)

    def scandir_denied(path="."):
        if (os.fspath(path) + os.sep).startswith(denied):
            raise PermissionError(errno.EACCES, "Permission denied", os.fspath(path))
        return real_scandir(path)

    before = {p: snapshot(p) for p in (good, bad)}
    with monkeypatch.context() as patch:
        patch.setattr(os, "stat", stat_denied)
        patch.setattr(os, "scandir", scandir_denied)
        result = run_cli(good, bad, tmp_path / "out")
    one_error_line(result.exit_code, result.stderr, str(bad / OUT), "permission denied")
    assert {p: snapshot(p) for p in (good, bad)} == before


@posix_only
def test_symlink_loop_for_an_optional_file_is_an_error_not_a_silent_skip(good, tmp_path):
    bad = copy_of(LEVEL1, tmp_path, "loop")
    steps = bad / OUT / "step_trace_time.csv"
    steps.unlink()
    steps.symlink_to(steps.name)  # points at itself: ELOOP
    assert_refused(good, bad, tmp_path, "step_trace_time.csv", "symbolic link")


@posix_only
def test_file_names_past_path_max_are_an_error_not_a_crash(good, tmp_path):
    # The rank directory's own path fits in PATH_MAX (4096), the files inside do not:
    # stat() says ENAMETOOLONG, which Path.is_dir() raised as a bare OSError.
    fd = os.open(tmp_path, os.O_RDONLY)
    length = len(str(tmp_path))
    try:
        while length < 4096 - 300:
            os.mkdir("d" * 200, dir_fd=fd)
            next_fd = os.open("d" * 200, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd, length = next_fd, length + 201
        os.mkdir("r" * (4080 - length), dir_fd=fd)
    finally:
        os.close(fd)
    rank = Path(str(tmp_path) + ("/" + "d" * 200) * ((length - len(str(tmp_path))) // 201)
                + "/" + "r" * (4080 - length))
    assert len(str(rank)) < 4096 < len(str(rank / OUT))
    result = run_cli(good, rank, tmp_path / "out")
    one_error_line(result.exit_code, result.stderr, "file name too long")


# ------------------------------------------------------------------------- one-line errors

def test_ijson_three_line_message_becomes_one_sentence(tmp_path):
    rank = tmp_path / "cut_ascend_pt" / OUT
    rank.mkdir(parents=True)
    (rank / "trace_view.json").write_text('[{"ph": "X", "name": "a", "ts": "1",,}]')
    with pytest.raises(InputError) as caught:
        load_run(rank.parent)
    assert caught.value.message == "truncated or invalid JSON: invalid object key (must be " \
                                   "a string)"


@pytest.mark.parametrize("damage, expected", [
    (lambda data: data[: len(data) // 2], "truncated gzip"),
    (lambda data: data[:10] + bytes(b ^ 0x5A for b in data[10:40]) + data[40:], "corrupt gzip"),
    (lambda data: b"PK" + data[2:], "corrupt gzip"),
])
def test_damaged_gzip_trace_is_one_line(damage, expected, tmp_path):
    kineto = DATA / "formats" / "hta" / "test.json.gz"
    bad = tmp_path / "bad" / "trace.json.gz"
    bad.parent.mkdir()
    bad.write_bytes(damage(kineto.read_bytes()))
    base = tmp_path / "base" / "trace.json.gz"
    base.parent.mkdir()
    shutil.copyfile(kineto, base)
    result = run_cli(base, bad, tmp_path / "out")
    line = one_error_line(result.exit_code, result.stderr, str(bad))
    assert expected in line or "truncated or invalid JSON" in line, line


# ------------------------------------------------------------------------- silent wrong answers

def test_impossible_durations_are_left_out_with_a_warning(tmp_path):
    bad = copy_of(LEVEL1, tmp_path, "durations")
    rows = rows_of(bad / KERNELS)
    column = rows[0].index("Duration(us)")
    kept = sum(float(r[column]) for r in rows[4:])  # rows 1-3 are replaced below
    for row, value in zip(rows[1:4], ["-50", "1e300", "inf"]):
        row[column] = value
    write_rows(bad / KERNELS, rows)
    before = snapshot(bad)
    run = load_run(bad)
    assert snapshot(bad) == before
    assert run.ops["dur_us"].sum() == pytest.approx(kept, abs=1e-6)
    notes = [w.text for w in run.warnings if "left out" in w.text]
    assert notes == [f"rank0_ascend_pt/kernel_details.csv: 3 of {len(rows) - 1} rows left "
                     "out for an impossible Duration(us) (negative, infinite, absurdly long, "
                     "up to 1e+300 µs)"]


def test_mostly_impossible_durations_refuse_the_file(good, tmp_path):
    bad = copy_of(LEVEL1, tmp_path, "negative")
    rows = rows_of(bad / KERNELS)
    column = rows[0].index("Duration(us)")
    for row in rows[1:]:
        row[column] = "-" + row[column]
    write_rows(bad / KERNELS, rows)
    assert_refused(good, bad, tmp_path, "kernel_details.csv",
                   f"{len(rows) - 1} of {len(rows) - 1} rows have an impossible Duration(us)")


def test_duplicate_duration_header_is_refused_naming_it(good, tmp_path):
    bad = copy_of(LEVEL1, tmp_path, "duplicate")
    rows = rows_of(bad / KERNELS)
    write_rows(bad / KERNELS, [[*r, "Duration(us)" if i == 0 else "0.001"]
                               for i, r in enumerate(rows)])
    assert_refused(good, bad, tmp_path, "kernel_details.csv", "'Duration(us)' appears 2 times")


@pytest.mark.parametrize("layout", ["one-rank", "one-of-two-ranks"])
def test_kernel_details_that_is_a_directory_is_refused(layout, good, tmp_path):
    if layout == "one-rank":
        bad = copy_of(LEVEL1, tmp_path, "dir")
        broken = bad
    else:  # inside a directory of ranks, the broken rank must not be passed over
        bad = tmp_path / "cluster"
        shutil.copytree(LEVEL1, bad / "rank0_ascend_pt")
        shutil.copytree(LEVEL1, bad / "rank1_ascend_pt")
        broken = bad / "rank1_ascend_pt"
    (broken / KERNELS).unlink()
    (broken / KERNELS).mkdir()
    assert_refused(good, bad, tmp_path, str(broken / KERNELS), "is a directory")


def _kernel_db(path: Path) -> sqlite3.Connection:
    """A WAL-mode profiler db of 2 kernels of 1000 ns, checkpointed, left open."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.executescript("""
        CREATE TABLE STRING_IDS(id INTEGER PRIMARY KEY, value TEXT);
        CREATE TABLE TASK(startNs INTEGER, endNs INTEGER, deviceId INTEGER,
                          globalTaskId INTEGER);
        CREATE TABLE COMPUTE_TASK_INFO(name INTEGER, globalTaskId INTEGER, opType INTEGER,
                                       taskType INTEGER);
        INSERT INTO STRING_IDS VALUES (1, 'aclnnAdd_AddAiCore_Add'), (2, 'Add'), (3, 'AI_CORE');
    """)
    start = 1_736_413_971_000_000_000
    for task in range(2):
        conn.execute("INSERT INTO TASK VALUES (?, ?, 0, ?)",
                     (start + task * 10_000, start + task * 10_000 + 1000, task))
        conn.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (1, ?, 2, 3)", (task,))
    conn.commit()
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return conn


def test_db_with_an_uncheckpointed_wal_is_read_whole(tmp_path, monkeypatch):
    # immutable=1 ignored the -wal: 4 of the 6 kernels (2/3 of the compute time) were
    # read as if they did not exist.
    writer_dir = tmp_path / "writer"
    writer_dir.mkdir()
    conn = _kernel_db(writer_dir / "ascend_pytorch_profiler_0.db")
    start = 1_736_413_971_000_000_000
    for task in range(2, 6):  # committed to the -wal, never checkpointed into the db
        conn.execute("INSERT INTO TASK VALUES (?, ?, 0, ?)",
                     (start + task * 10_000, start + task * 10_000 + 1000, task))
        conn.execute("INSERT INTO COMPUTE_TASK_INFO VALUES (1, ?, 2, 3)", (task,))
    conn.commit()
    rank = tmp_path / "input" / "rank0_ascend_pt" / OUT
    rank.mkdir(parents=True)
    for name in ("ascend_pytorch_profiler_0.db", "ascend_pytorch_profiler_0.db-wal"):
        shutil.copyfile(writer_dir / name, rank / name)  # as a killed profiler leaves them
    conn.close()
    assert (rank / "ascend_pytorch_profiler_0.db-wal").stat().st_size > 0
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr("tempfile.tempdir", str(scratch))
    before = snapshot(rank.parent)
    run = load_run(rank.parent)
    assert len(run.ops) == 6
    assert run.ops["dur_us"].sum() == pytest.approx(6 * 1.0)  # 3 × the checkpointed 2 µs
    assert snapshot(rank.parent) == before  # no -shm, nothing checkpointed into the input
    assert list(scratch.iterdir()) == []  # the private copy is gone


def _spreadsheet_rounded(value: str) -> str:
    """How a spreadsheet re-saves a 16-digit number: 6 significant digits, ``E+15``."""
    return f"{float(value):.5E}".replace("E+0", "E+")


def test_start_times_rounded_by_a_spreadsheet_are_refused(good, tmp_path):
    # The real 2023 rank (MindStudio Insight test data) re-saved: every start collapses
    # onto 1.69512E+15, and exposed communication came out 4.10 ms instead of 9.79 ms.
    bad = copy_of(RANK1_2023, tmp_path, "resaved")
    rows = rows_of(bad / KERNELS)
    column = rows[0].index("Start Time(us)")
    for row in rows[1:]:
        row[column] = _spreadsheet_rounded(row[column])
    assert {r[column] for r in rows[1:]} == {"1.69512E+15"}
    write_rows(bad / KERNELS, rows)
    line = assert_refused(good, bad, tmp_path, str(bad / KERNELS), "scientific notation",
                          "re-saved by a spreadsheet")
    assert "'1.69512E+15' at row 2" in line


def test_start_times_all_equal_are_refused(good, tmp_path):
    bad = copy_of(LEVEL1, tmp_path, "collapsed")
    rows = rows_of(bad / KERNELS)
    column = rows[0].index("Start Time(us)")
    for row in rows[1:]:
        row[column] = "1736408883700000"
    write_rows(bad / KERNELS, rows)
    assert_refused(good, bad, tmp_path, "kernel_details.csv",
                   f"all {len(rows) - 1} rows have the same Start Time(us)")


@pytest.mark.slow
def test_valid_csv_with_a_50_mb_field_is_read(tmp_path):
    bad = copy_of(LEVEL1, tmp_path, "wide")
    rows = rows_of(bad / KERNELS)
    column = rows[0].index("Input Shapes")
    rows[5][column] = "1," * (25 << 20)  # 50 MiB in one quoted cell
    write_rows(bad / KERNELS, rows)
    run = load_run(bad)
    assert len(run.ops) == len(rows) - 1
    durations = [float(r[rows[0].index("Duration(us)")]) for r in rows[1:]]
    assert run.ops["dur_us"].sum() == pytest.approx(sum(durations))
    assert np.isfinite(run.ops["dur_us"]).all()


def test_csv_without_a_line_break_is_not_read_whole_as_a_header(good, tmp_path):
    bad = copy_of(LEVEL1, tmp_path, "oneline")
    (bad / KERNELS).write_bytes(b"Name," * (1 << 19))  # 2.5 MiB, no line break
    assert_refused(good, bad, tmp_path, "kernel_details.csv", "no header line in the first")


def test_negative_communication_time_is_refused(good, tmp_path):
    bad = copy_of(LEVEL1, tmp_path, "comm")
    data = json.loads((bad / OUT / "communication.json").read_text())
    step = next(iter(data.values()))
    op = next(v for k, v in step["collective"].items() if k.startswith("hcom_"))
    op["Communication Time Info"]["Elapse Time(ms)"] = -3.5
    (bad / OUT / "communication.json").write_text(json.dumps(data))
    assert_refused(good, bad, tmp_path, "communication.json", "Elapse Time(ms) is -3.5")


def test_an_input_name_too_long_is_one_line(tmp_path):
    long_name = tmp_path / ("x" * 300)  # ENAMETOOLONG from stat, not a traceback
    result = CliRunner().invoke(main, [str(long_name), str(tmp_path), "-q"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "file name too long" in result.stderr


@pytest.mark.slow
def test_a_fifo_as_fusion_map_is_refused_not_waited_on(tmp_path):
    fifo = tmp_path / "map.json"
    os.mkfifo(fifo)
    examples = Path(__file__).resolve().parents[1] / "examples"
    done = subprocess.run([sys.executable, "-m", "cann_diff", str(examples / "cann7.0.1.3"),
                           str(examples / "cann8.0.RC2"), "--fusion-map", str(fifo), "-o",
                           str(tmp_path / "out"), "-q", "--no-charts"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert "named pipe" in done.stderr and done.stderr.count("\n") == 1


@pytest.mark.parametrize("step", ["2.5", "9007199254740993"])
def test_a_step_id_that_is_no_integer_is_named_as_written(good, tmp_path, step):
    """The figures of step_trace_time.csv are parsed as numbers; its Step column is read as
    text, so the message quotes the id as the file writes it (a float would print 2.5 as
    np.float64(2.5), and 2**53 + 1, which no float holds, as 9007199254740992.0)."""
    bad = copy_of(LEVEL1, tmp_path, "step")
    steps = bad / OUT / "step_trace_time.csv"
    rows = rows_of(steps)
    rows[1][rows[0].index("Step")] = step
    write_rows(steps, rows)
    assert_refused(good, bad, tmp_path, "step_trace_time.csv", "Step is not an integer",
                   repr(step))
