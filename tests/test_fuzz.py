"""Fuzzing the readers: broken copies of real files raise only cann-diff's own errors.

Each case writes one mutated file into a private copy of a real profile from tests/data
and reads the copy with ``load_run``. Mutations: truncation, byte flips, header
shuffles (names moved, duplicated or dropped), cell swaps and hostile cell values for
CSV; for JSON hostile values put in place of a random node; for the db byte flips and
truncation. The property: ``load_run`` returns a Run whose operator durations are finite
and ≥ 0, or raises a ``CannDiffError`` whose message is one line; it never raises
anything else, never takes more than a few seconds, and never changes its input.

Examples are derandomized (same cases on every run, no example database), so CI is
deterministic. ``CANN_DIFF_FUZZ_EXAMPLES`` raises the count per test for a longer hunt.
"""

from __future__ import annotations

import copy
import csv
import gzip
import hashlib
import io
import json
import os
import shutil
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from conftest import DATA
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cann_diff.errors import CannDiffError
from cann_diff.read import load_run

LEVEL1 = DATA / "realdata" / "Ascend__msinsight/test/data/pytorch/text/level1/rank0_ascend_pt"
VLLM = DATA / "formats" / "vllm_ascend" / "PROF_000001_20260823165413436_00626258NIRJNPIC"
FULL_DB = DATA / "realdata" / "Ascend__msinsight/server/src/test/test_data/full_db"
KINETO = DATA / "formats" / "hta"
TIMELINE = DATA / "formats" / "mindinsight" / "PROF_000001_20230818142704322_COJGGGCANRMICFBC"
OUT = "ASCEND_PROFILER_OUTPUT"
EXAMPLES = int(os.environ.get("CANN_DIFF_FUZZ_EXAMPLES", "120"))
SECONDS_PER_CASE = 5.0

FUZZ = settings(max_examples=EXAMPLES, derandomize=True, database=None,
                deadline=timedelta(seconds=SECONDS_PER_CASE), print_blob=True,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])

# Values a broken or hostile export may hold in a cell or a JSON node.
HOSTILE_TEXT = ["", " ", "N/A", "-1", "-0.5", "0", "nan", "NaN", "inf", "-inf", "1e300",
                "1.69512E+15", "9" * 30, "18446744073709551615", "0x1F", "1,5", '"', "\x00",
                "\t", "é", "\ufeff", "a" * 5000, "1736408883704643.212\t", "[[[[", "{}"]
HOSTILE_JSON = [None, True, -1, -1e308, 1e308, 10 ** 400, 0.5, "", "x", "n/a", "-1", [], {},
                [[[[1]]]], {"a": {"b": None}}, "a" * 5000]


# ------------------------------------------------------------------------- mutations

def truncate(data: bytes, draw) -> bytes:
    return data[:draw(st.integers(0, max(len(data) - 1, 0)))]


def flip_bytes(data: bytes, draw) -> bytes:
    out = bytearray(data)
    for _ in range(draw(st.integers(1, 8))):
        out[draw(st.integers(0, len(out) - 1))] = draw(st.integers(0, 255))
    return bytes(out)


def _rows(data: bytes) -> list[list[str]]:
    return list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))


def _csv(rows: list[list[str]]) -> bytes:
    buffer = io.StringIO()
    csv.writer(buffer, lineterminator="\r\n").writerows(rows)
    return buffer.getvalue().encode("utf-8")


def shuffle_header(data: bytes, draw) -> bytes:
    rows = _rows(data)
    header = rows[0]
    how = draw(st.sampled_from(["permute", "duplicate", "drop", "rename"]))
    i = draw(st.integers(0, len(header) - 1))
    j = draw(st.integers(0, len(header) - 1))
    if how == "permute":
        header = draw(st.permutations(header))
    elif how == "duplicate":
        header = [*header[:i], header[j], *header[i + 1:]]
    elif how == "drop":
        header = header[:i] + header[i + 1:]
    else:
        header = [*header[:i], draw(st.sampled_from(HOSTILE_TEXT)), *header[i + 1:]]
    return _csv([list(header), *rows[1:]])


def swap_values(data: bytes, draw) -> bytes:
    rows = _rows(data)
    body = [r for r in range(1, len(rows)) if rows[r]]
    for _ in range(draw(st.integers(1, 4))):
        r = draw(st.sampled_from(body))
        c = draw(st.integers(0, len(rows[r]) - 1))
        if draw(st.booleans()):
            rows[r][c] = draw(st.sampled_from(HOSTILE_TEXT))
        else:  # swap with another cell of the table
            r2 = draw(st.sampled_from(body))
            c2 = draw(st.integers(0, len(rows[r2]) - 1))
            rows[r][c], rows[r2][c2] = rows[r2][c2], rows[r][c]
    if draw(st.booleans()):  # the same value down a whole column
        c = draw(st.integers(0, len(rows[0]) - 1))
        value = draw(st.sampled_from(HOSTILE_TEXT))
        for r in body:
            if c < len(rows[r]):
                rows[r][c] = value
    return _csv(rows)


def _nodes(tree, path=()):
    yield path
    if isinstance(tree, dict):
        for key, value in tree.items():
            yield from _nodes(value, (*path, key))
    elif isinstance(tree, list):
        for index, value in enumerate(tree):
            yield from _nodes(value, (*path, index))


def replace_json_value(data: bytes, draw) -> bytes:
    tree = json.loads(data)
    nodes = list(_nodes(tree))
    for _ in range(draw(st.integers(1, 3))):
        where = draw(st.sampled_from(nodes))
        value = copy.deepcopy(draw(st.sampled_from(HOSTILE_JSON)))
        if not where:
            tree = value
            break
        parent = tree
        for step in where[:-1]:
            parent = parent[step]
        parent[where[-1]] = value
        nodes = list(_nodes(tree))
    return json.dumps(tree).encode("utf-8")


def inside_gzip(mutation):
    """Apply a mutation to the decompressed text of a .gz file and compress it again."""
    def mutated(data: bytes, draw) -> bytes:
        return gzip.compress(mutation(gzip.decompress(data), draw), mtime=0)
    mutated.__name__ = f"gzipped_{mutation.__name__}"
    return mutated


CSV_MUTATIONS = (truncate, flip_bytes, shuffle_header, swap_values)
JSON_MUTATIONS = (truncate, flip_bytes, replace_json_value)
BYTE_MUTATIONS = (truncate, flip_bytes)
GZIP_MUTATIONS = (truncate, flip_bytes, *map(inside_gzip, JSON_MUTATIONS))


# ------------------------------------------------------------------------- harness

def snapshot(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): ("dir" if p.is_dir() else
                                       hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*"))}


@pytest.fixture(scope="module")
def copies(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("fuzz")
    found = _copies(root)
    for path in root.rglob("*"):  # files copied from a read-only share stay writable here
        path.chmod(0o755 if path.is_dir() else 0o644)
    return found


def _copies(root: Path) -> dict[str, Path]:
    return {"level1": Path(shutil.copytree(LEVEL1, root / "level1" / LEVEL1.name)),
            "vllm": Path(shutil.copytree(VLLM, root / "vllm" / VLLM.name)),
            "db": Path(shutil.copytree(FULL_DB, root / "db" / FULL_DB.name)) / "msprof_0.db",
            "kineto": Path(shutil.copytree(KINETO, root / "kineto")) / "test.json.gz",
            "timeline": Path(shutil.copytree(TIMELINE, root / "timeline" / TIMELINE.name))}


def check_reading(target: Path, read: Path, data: bytes) -> None:
    """Write ``data`` into ``target``, read ``read``; only CannDiffError may come out."""
    original = target.read_bytes()
    target.write_bytes(data)
    root = read if read.is_dir() else read.parent
    before = snapshot(root)
    started = time.monotonic()
    try:
        run = load_run(read)
    except CannDiffError as exc:
        text = str(exc)
        assert "\n" not in text and "\r" not in text, text
        assert text.strip(), type(exc).__name__
    else:
        durations = run.ops["dur_us"].to_numpy(np.float64)
        assert np.isfinite(durations).all() and (durations >= 0).all()
        totals = run.summary.ops.select_dtypes("number").to_numpy(np.float64)
        assert np.isfinite(totals[~np.isnan(totals)]).all()
    finally:
        elapsed = time.monotonic() - started
        after = snapshot(root)
        target.write_bytes(original)
    assert after == before  # nothing written beside the input
    assert elapsed < SECONDS_PER_CASE, elapsed


CASES = [
    pytest.param("level1", f"{OUT}/kernel_details.csv", CSV_MUTATIONS, id="kernel_details"),
    pytest.param("level1", f"{OUT}/step_trace_time.csv", CSV_MUTATIONS, id="step_trace_time"),
    pytest.param("level1", f"{OUT}/communication.json", JSON_MUTATIONS, id="communication"),
    pytest.param("level1", "profiler_info_0.json", JSON_MUTATIONS, id="profiler_info"),
    pytest.param("vllm", "mindstudio_profiler_output/op_summary_20260823165421.csv",
                 CSV_MUTATIONS, id="op_summary"),
    pytest.param("vllm", "host/info.json", JSON_MUTATIONS, id="msprof_info"),
    pytest.param("db", "", BYTE_MUTATIONS, id="msprof_db"),
    pytest.param("kineto", "", GZIP_MUTATIONS, id="kineto_trace_gz"),
    pytest.param("timeline", "device_0/timeline/msprof_0_2_1.json", JSON_MUTATIONS,
                 id="msprof_timeline"),
]


@pytest.mark.slow
@pytest.mark.parametrize("copy, relative, mutations", CASES)
@FUZZ
@given(data=st.data())
def test_mutated_file_raises_only_our_errors(copies, copy, relative, mutations, data):
    read = copies[copy]
    target = read / relative if relative else read
    original = target.read_bytes()
    mutation = data.draw(st.sampled_from(mutations), label="mutation")
    mutated = mutation(original, data.draw)
    check_reading(target, read, mutated)
