"""Hostile profile files the readers must refuse (one line, exit 2) or flag (a warning).

Every input is a copy, in tmp_path, of a small real profile of tests/data (the MI level1
rank 0 text export, the msinsight msprof_0.db), with one file made hostile: a world size
of ``²``, a profiler_metadata.json nested 10,000 deep or written in UTF-16, a trace that
is ``/dev/zero`` or a FIFO, kernels whose STRING_IDS ids are gone, a db of 0 bytes or
without tables. Expected values are read off those inputs by hand.
"""

from __future__ import annotations

import codecs
import json
import os
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from conftest import DATA
from test_hostile import one_error_line, run_subprocess

from cann_diff.cli import main
from cann_diff.read.formats.provenance import rank_facts

LEVEL1 = DATA / "realdata" / "Ascend__msinsight/test/data/pytorch/text/level1/rank0_ascend_pt"
MSPROF_DB = DATA / "realdata" / "Ascend__msinsight/server/src/test/test_data/full_db/msprof_0.db"
OUT = "ASCEND_PROFILER_OUTPUT"
TORCH_DB = "ascend_pytorch_profiler_0.db"
posix_only = pytest.mark.skipif(os.name != "posix", reason="FIFOs and /dev/zero are POSIX")


def copy_of(source: Path, tmp_path: Path, case: str) -> Path:
    return Path(shutil.copytree(source, tmp_path / case / source.name))


def run_cli(base: Path, new: Path, out: Path) -> Result:
    return CliRunner().invoke(main, [str(base), str(new), "-o", str(out), "-q", "--no-charts",
                                     "--no-html"])


def report_of(out: Path) -> tuple[dict, str]:
    return (json.loads((out / "report.json").read_text(encoding="utf-8")),
            (out / "report.md").read_text(encoding="utf-8"))


def write_metadata(rank: Path, content: bytes) -> Path:
    path = rank / "profiler_metadata.json"
    path.write_bytes(content)
    return path


def metadata(world_size, **sizes) -> bytes:
    """A Megatron-style profiler_metadata.json (distributed_args and ENV_VARIABLES)."""
    return json.dumps({"distributed_args": {"world_size": world_size, **sizes},
                       "ENV_VARIABLES": {"HCCL_BUFFSIZE": "200", "ASCEND_LAUNCH": ""}},
                      ensure_ascii=False).encode("utf-8")


# ------------------------------------------------- 1. world_size "²" (was exit 3)

def test_superscript_world_size_is_not_recorded_and_says_why(tmp_path):
    base = copy_of(LEVEL1, tmp_path, "base")
    new = copy_of(LEVEL1, tmp_path, "new")
    write_metadata(new, metadata("²", tensor_model_parallel_size=2))
    result = run_cli(base, new, tmp_path / "out")
    assert result.exit_code == 0, result.output  # was 3: int("²") raised ValueError
    data, _ = report_of(tmp_path / "out")
    assert data["new"]["world_size"] is None
    assert data["new"]["parallel"] == "TP 2"  # the usable sizes of the same object stay
    source = data["new"]["sources"]["world_size"]
    assert source.startswith("profiler_metadata.json: world_size '²'") and "ASCII" in source
    problems = rank_facts(new, "ascend_pt_text").problems
    assert len(problems) == 1
    assert problems[0].startswith("rank0_ascend_pt/profiler_metadata.json: world_size '²'")
    # … and the run says so where a reader looks: the warnings of report.md and report.json
    _, md = report_of(tmp_path / "out")
    assert f"⚠ new: {problems[0]}" in md.replace("\\_", "_")
    assert problems[0] in data["new"]["warnings"]


@pytest.mark.parametrize(("written", "expected"), [
    ("8", 8), (8, 8), (" 16 ", 16),  # digits or a JSON integer
    ("²", None), ("١٢", None),  # Unicode digits: int("١٢") would read 12
    ("0", None), (-4, None), (4.0, None), (True, None), ("4 ranks", None), ([4], None)])
def test_only_ascii_digits_make_a_world_size(tmp_path, written, expected):
    rank = copy_of(LEVEL1, tmp_path, "rank")
    write_metadata(rank, metadata(written))
    found = rank_facts(rank, "ascend_pt_text")
    assert found.facts.get("world_size", (None,))[0] == expected
    assert len(found.problems) == (expected is None)


def test_unusable_parallel_size_is_left_out_of_the_layout(tmp_path):
    rank = copy_of(LEVEL1, tmp_path, "rank")
    write_metadata(rank, metadata(4, tensor_model_parallel_size=2,
                                  pipeline_model_parallel_size="²"))
    found = rank_facts(rank, "ascend_pt_text")
    assert found.facts["world_size"][0] == 4
    assert found.facts["parallel"][0] == "TP 2"  # not "TP 2 · PP ²"
    assert "pipeline_model_parallel_size '²'" in found.problems[0]


# ------------------------------------ 2. metadata nested 10,000 deep, or in UTF-16

def test_metadata_nested_10000_deep_is_named_in_the_report_not_dropped(tmp_path):
    base = copy_of(LEVEL1, tmp_path, "base")
    new = copy_of(LEVEL1, tmp_path, "new")
    write_metadata(base, metadata(2, tensor_model_parallel_size=2))
    write_metadata(new, b'{"distributed_args": ' + b"[" * 10_000 + b"]" * 10_000 + b"}")
    result = run_cli(base, new, tmp_path / "out")
    assert result.exit_code == 0, result.output
    data, md = report_of(tmp_path / "out")
    assert (data["base"]["world_size"], data["new"]["world_size"]) == (2, None)
    for fact in ("world_size", "parallel", "environment"):
        assert data["new"]["sources"][fact].startswith(
            "profiler_metadata.json: JSON nested deeper than 64 levels"), fact
    # The parallelism and environment rows (the base records them) say why new has none.
    assert md.count("not recorded (`profiler_metadata.json`: JSON nested deeper than 64") == 2
    problems = rank_facts(new, "ascend_pt_text").problems
    assert problems == ["rank0_ascend_pt/profiler_metadata.json: JSON nested deeper than 64 "
                        "levels (no profiler writes that; a hostile or broken file?); ignored "
                        "(world_size, parallel, environment not recorded)"]


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_metadata_in_utf16_with_a_byte_order_mark_is_read(tmp_path, encoding):
    base = copy_of(LEVEL1, tmp_path, "base")
    new = copy_of(LEVEL1, tmp_path, "new")
    text = metadata(4, tensor_model_parallel_size=2,
                    pipeline_model_parallel_size=2).decode("utf-8")
    bom = codecs.BOM_UTF16_BE if encoding == "utf-16-be" else b""  # the others write one
    write_metadata(new, bom + text.encode(encoding))
    result = run_cli(base, new, tmp_path / "out")
    assert result.exit_code == 0, result.output
    data, _ = report_of(tmp_path / "out")
    assert data["new"]["world_size"] == 4
    assert data["new"]["parallel"] == "TP 2 · PP 2"
    assert data["new"]["environment"] == "HCCL_BUFFSIZE=200"  # the empty one is not set
    assert rank_facts(new, "ascend_pt_text").problems == []


def test_utf16_without_a_byte_order_mark_is_still_named(tmp_path):
    rank = copy_of(LEVEL1, tmp_path, "rank")
    # ASCII text in UTF-16-LE is valid UTF-8 with a NUL after each character: invalid JSON
    # from its second byte on.
    write_metadata(rank, metadata(4).decode("utf-8").encode("utf-16-le"))
    problems = rank_facts(rank, "ascend_pt_text").problems
    assert len(problems) == 1
    assert problems[0].startswith("rank0_ascend_pt/profiler_metadata.json: truncated or "
                                  "invalid JSON")
    assert "(char 1)" in problems[0]


def test_db_meta_data_nested_deep_is_noted_not_an_internal_error(tmp_path):
    base = tmp_path / "base" / MSPROF_DB.name
    new = tmp_path / "new" / MSPROF_DB.name
    for copy in (base, new):
        copy.parent.mkdir()
        shutil.copyfile(MSPROF_DB, copy)
    with sqlite3.connect(new) as conn:  # msprof_0.db has no META_DATA: add one
        conn.execute("CREATE TABLE META_DATA(name TEXT, value TEXT)")
        conn.execute("INSERT INTO META_DATA VALUES ('DISTRIBUTED_ARGS', ?)",
                     ("[" * 100_000 + "]" * 100_000,))
    result = run_cli(base, new, tmp_path / "out")
    assert result.exit_code == 0, result.output  # was 3: RecursionError in json.loads
    data, _ = report_of(tmp_path / "out")
    assert data["new"]["world_size"] is None
    assert data["new"]["sources"]["world_size"].startswith(
        "msprof_0.db: META_DATA: JSON nested deeper than 64 levels")


# ------------------------------------------- 3. a trace that is /dev/zero or a FIFO

@posix_only
@pytest.mark.parametrize("kind", ["dev-zero", "fifo"])
def test_trace_beside_kernel_details_that_is_no_file_is_named_and_skipped(tmp_path, kind):
    base = copy_of(LEVEL1, tmp_path, "base")
    new = copy_of(LEVEL1, tmp_path, "new")
    trace = new / OUT / "trace_view.json"
    if kind == "fifo":
        os.mkfifo(trace)
    else:
        trace.symlink_to("/dev/zero")
    done = run_subprocess(base, new, tmp_path / "out")  # no hang, no memory eaten
    assert done.returncode == 0, done.stderr
    data, md = report_of(tmp_path / "out")
    assert f"trace_view.json: is {'a named pipe (FIFO)' if kind == 'fifo' else 'a device'}, " \
        "not a regular file" in md.replace("\\_", "_")
    what = "a named pipe (FIFO)" if kind == "fifo" else "a device"
    note = data["new"]["detail_sources"]["hccl_algorithms"]
    assert note.startswith(f"{OUT}/trace_view.json: is {what}, not a regular file")
    assert rank_facts(new, "ascend_pt_text").problems == [
        f"rank0_ascend_pt/{OUT}/trace_view.json: is {what}, not a regular file (host→device "
        "links not read); ignored (hccl_algorithms, aicore_freq not recorded)"]


@posix_only
def test_trace_the_run_needs_that_is_dev_zero_is_refused_in_one_line(tmp_path):
    base = copy_of(LEVEL1, tmp_path, "base")
    new = copy_of(LEVEL1, tmp_path, "new")
    (new / OUT / "kernel_details.csv").unlink()  # the trace is then the only kernel record
    trace = new / OUT / "trace_view.json"
    trace.symlink_to("/dev/zero")
    done = run_subprocess(base, new, tmp_path / "out")
    one_error_line(done.returncode, done.stderr, str(trace), "is a device, not a regular file")
    assert not (tmp_path / "out" / "report.md").exists()


@posix_only
def test_trace_named_as_the_input_that_is_dev_zero_says_what_it_is(tmp_path):
    base = copy_of(LEVEL1, tmp_path, "base")
    trace = tmp_path / "kineto" / "worker0.pt.trace.json"
    trace.parent.mkdir()
    trace.symlink_to("/dev/zero")
    done = run_subprocess(base, trace, tmp_path / "out")  # was: "no profile found: …"
    one_error_line(done.returncode, done.stderr, str(trace), "is a device, not a regular file")


# ------------------------------------------- 4. kernels whose string ids are missing

def test_kernels_with_missing_string_ids_are_named_and_counted(tmp_path):
    base = tmp_path / "base" / MSPROF_DB.name
    new = tmp_path / "new" / MSPROF_DB.name
    for copy in (base, new):
        copy.parent.mkdir()
        shutil.copyfile(MSPROF_DB, copy)
    # Ids 33 and 34 are the name and type of the two aclnnLtScalar_LessAiCore_Less kernels
    # (2 of the db's 11 TASK ⨝ COMPUTE_TASK_INFO rows); no communication op names them.
    with sqlite3.connect(new) as conn:
        conn.execute("DELETE FROM STRING_IDS WHERE id IN (33, 34)")
    result = run_cli(base, new, tmp_path / "out")
    assert result.exit_code == 0, result.output
    data, md = report_of(tmp_path / "out")
    warning = ("new/msprof_0.db: 2 of 11 kernel(s) have a name or type id missing from "
               "STRING_IDS (33, 34): kept as '(unresolved string id N)' operators")
    assert warning in md
    assert "" not in {row["op_type"] for row in data["operators"]}
    # Kept, not dropped: the two kernels (TASK endNs - startNs: 10,300 and 2,000 ns, shapes
    # 1,1,2048,2048 and 1,2048) run as new-only keys; base's Less keys are removed.
    unresolved = {row["input_shapes"]: (row["status"], row["new_total_us"])
                  for row in data["operators"] if row["op_type"] == "(unresolved string id 34)"}
    assert unresolved == {"1,1,2048,2048;": ("added", pytest.approx(10.3)),
                          "1,2048;": ("added", pytest.approx(2.0))}
    less = {row["input_shapes"]: row["status"] for row in data["operators"]
            if row["op_type"] == "Less"}
    assert less == {"1,1,2048,2048;": "removed", "1,2048;": "removed"}


# ------------------------------------------------ 5. a db of 0 bytes or without tables

def rank_with_db(tmp_path: Path, case: str) -> Path:
    rank = tmp_path / case / "node0_1_20250101000000000_ascend_pt"
    (rank / OUT).mkdir(parents=True)
    shutil.copyfile(LEVEL1 / "profiler_info_0.json", rank / "profiler_info_0.json")
    return rank / OUT / TORCH_DB


def no_tables(db: Path) -> None:
    """A valid SQLite file (header page, 8 KiB) whose only table was dropped."""
    with sqlite3.connect(db) as conn:
        conn.execute("CREATE TABLE t(x)")
    with sqlite3.connect(db) as conn:
        conn.execute("DROP TABLE t")
    assert db.read_bytes()[:16] == b"SQLite format 3\x00"


@pytest.mark.parametrize(("make", "why"), [
    (lambda db: db.write_bytes(b""), "an empty file (0 bytes), not a profiler database"),
    (no_tables, "a SQLite database without any table, not a profiler export")])
def test_db_of_no_tables_alone_is_refused_in_one_line(tmp_path, make, why):
    base = copy_of(LEVEL1, tmp_path, "base")
    db = rank_with_db(tmp_path, "new")
    make(db)
    result = run_cli(base, db.parent.parent, tmp_path / "out")
    one_error_line(result.exit_code, result.stderr, str(db), why)
    assert not (tmp_path / "out" / "report.md").exists()


def test_empty_db_beside_kernel_details_gives_way_to_the_text_export(tmp_path):
    base = copy_of(LEVEL1, tmp_path, "base")
    new = copy_of(LEVEL1, tmp_path, "new")
    (new / OUT / TORCH_DB).write_bytes(b"")
    result = run_cli(base, new, tmp_path / "out")
    assert result.exit_code == 0, result.output
    data, _ = report_of(tmp_path / "out")
    assert data["new"]["format"] == "ascend_pt_text"


def test_empty_analysis_db_beside_a_db_is_a_warning(tmp_path):
    base = tmp_path / "base" / MSPROF_DB.name
    base.parent.mkdir()
    shutil.copyfile(MSPROF_DB, base)
    db = rank_with_db(tmp_path, "new")
    shutil.copyfile(MSPROF_DB, db)
    (db.parent / "analysis.db").write_bytes(b"")
    result = run_cli(base, db.parent.parent, tmp_path / "out")
    assert result.exit_code == 0, result.output
    _, md = report_of(tmp_path / "out")
    assert ("node0_1_20250101000000000_ascend_pt/analysis.db: an empty file (0 bytes), not a "
            "profiler database (an interrupted export?); step breakdown and communication "
            "detail unavailable") in md
