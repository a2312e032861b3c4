"""``--ladder``: profiles as steps of one upgrade path, each change given to its rung.

Crafted runs (tests/profiles.py, no noise: every figure holds to the µs), five steps a
side. Each step: MatMul, an exposed AllReduce of 500 µs, Add 1,000 µs, ops 2 µs apart.

* ``a``: MatMul 4,000 → Stage 5,504 µs (Computing 5,000, exposed 500, Free 4);
* ``b``: MatMul 4,400 — a kernel slowdown: Stage 5,904, Computing +400 (the MatMul key
  +10 % per instance, same kernel and placement: layer ``kernel``);
* ``c``: as ``b`` with ops 302 µs apart — the host launches later: Stage 6,504, Free
  +600 (layer ``dispatch``), Computing unchanged;
* ``a2``: ``a`` again (another directory).

So a → b → c gives +400 µs of computing to rung 1 and +600 µs of Free to rung 2; a → b →
a2 gives computing +400 to rung 1 and has rung 2 undo it; a → a2 → a moves nothing.
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES, REALDATA, ROOT, needs_realdata
from profiles import Comm, aclnn, write_profile

from cann_diff import format as fmt
from cann_diff.cli import main
from cann_diff.pipeline import Options, diff_ladder
from cann_diff.render.ladder import ladder_blocks
from cann_diff.render.markdown import to_markdown
from cann_diff.report.ladder import build_ladder

STEPS = (1, 2, 3, 4, 5)


def schedule(matmul_us: float) -> list:
    return [aclnn("MatMul", matmul_us, "64,64;64,64"), Comm("allReduce", 500),
            aclnn("Add", 1000, "64")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("ladder")
    write_profile(root, "a", schedule(4000), steps=STEPS)
    write_profile(root, "b", schedule(4400), steps=STEPS)
    write_profile(root, "c", schedule(4400), steps=STEPS, gap_us=302)
    write_profile(root, "a2", schedule(4000), steps=STEPS)
    return root


def ladder_of(root, *names):
    results = diff_ladder(root / names[0], [root / n for n in names[1:]], Options(),
                          labels=list(names))
    reports = [r.report for r in results]
    directories = [f"{x}_vs_{y}" for x, y in zip(names, names[1:])]
    return build_ladder(reports[:-1], reports[-1], directories,
                        f"{names[0]}_vs_{names[-1]}"), reports


def test_each_slowdown_is_given_to_its_rung_and_layer(runs):
    ladder, _ = ladder_of(runs, "a", "b", "c")
    parts = {c.item: c for c in ladder.changes if c.kind == "part"}
    assert set(parts) == {"computing", "Free (device idle)"}
    computing, free = parts["computing"], parts["Free (device idle)"]
    assert (computing.rung, computing.layer, computing.undone_at) == (1, "kernel", None)
    assert computing.delta_us == pytest.approx(400, abs=0.01)
    assert (free.rung, free.layer, free.undone_at) == (2, "dispatch", None)
    assert free.delta_us == pytest.approx(600, abs=0.01)
    [matmul] = [c for c in ladder.changes if c.kind == "operator"]
    assert (matmul.item, matmul.rung, matmul.layer) == ("MatMul [64,64;64,64]", 1, "kernel")
    assert matmul.delta_us == pytest.approx(400, abs=0.01)
    assert ladder.verdict == (
        "Along a → b → c the step goes 5.50 → 5.90 → 6.50 ms: c is 18.2% slower than a; "
        "rung 1 (b) adds 0.40 ms of computing [kernel]; rung 2 (c) adds 0.60 ms of Free "
        "(device idle) [dispatch].")
    assert [r.sentence.split(":")[0] for r in ladder.rungs] == [
        "Rung 1 (b) is 7.3% slower (5.50 → 5.90 ms per step, p = 0.004)",
        "Rung 2 (c) is 10.2% slower (5.90 → 6.50 ms per step, p = 0.004)"]


def test_a_change_undone_later_is_reported_as_both(runs):
    ladder, _ = ladder_of(runs, "a", "b", "a2")
    computing = next(c for c in ladder.changes if c.item == "computing")
    assert (computing.rung, computing.undone_at) == (1, 2)
    assert [(m.rung, round(m.delta_us, 2)) for m in computing.moves] == [(1, 400.0),
                                                                       (2, -400.0)]
    matmul = next(c for c in ladder.changes if c.kind == "operator")
    assert (matmul.rung, matmul.undone_at) == (1, 2)
    assert "rung 2 (a2) gives back rung 1's computing (-0.40 ms)" in ladder.verdict
    assert "giving back rung 1's +0.40 ms" in ladder.rungs[1].sentence
    assert ladder.gate.step.status == "unchanged"  # first vs last: back where it started
    md = to_markdown(ladder_blocks(ladder))
    assert "| rung 2 -0.40 ms (undoes it) |" in re.sub(r" +\|", " |", md)


def test_an_a_a_a_ladder_raises_nothing(runs):
    ladder, reports = ladder_of(runs, "a", "a2", "a")
    assert ladder.changes == ()
    assert all(not r.causes for r in ladder.rungs)
    assert ladder.verdict.endswith("; no rung moved the step.")
    assert all(f.severity == "info" for r in reports for f in r.findings)


def test_ladder_figures_are_the_rung_reports(runs):
    """One quantity, one number: every figure of the ladder is its rung report's."""
    assert_consistent(*ladder_of(runs, "a", "b", "c"))


@pytest.mark.slow
@needs_realdata
def test_a_real_ladder_is_consistent_and_text_vs_db_moves_nothing():
    mi = "test/data/pytorch/{}/level1"
    paths = [REALDATA / "Ascend__msinsight@c1e639ee2" / mi.format("text"),
             REALDATA / "Ascend__msinsight" / mi.format("text"),
             REALDATA / "Ascend__msinsight" / mi.format("db")]
    results = diff_ladder(paths[0], paths[1:], Options(), labels=["910A", "910B", "910B-db"])
    reports = [r.report for r in results]
    ladder = build_ladder(reports[:-1], reports[-1], ["r1", "r2"], "gate")
    assert_consistent(ladder, reports)
    # one capture read from its text and its db export: the second rung moves nothing
    assert not ladder.rungs[1].causes
    assert all(c.rung == 1 for c in ladder.changes if c.kind == "part")


def assert_consistent(ladder, reports) -> None:
    rungs, gate = reports[:-1], reports[-1]
    for rung, report in zip(ladder.rungs, rungs):
        assert rung.step == report.step
        assert rung.causes == report.verdict.causes
        shown = f"{fmt.ms(report.step.base_us)} → {fmt.ms(report.step.new_us)} ms per step"
        assert shown in rung.sentence
    for change in ladder.changes:
        for move in change.moves:
            report = rungs[move.rung - 1]
            if change.kind == "part":
                cause = next(c for c in report.verdict.causes if c.name == change.item)
                assert move.delta_us == cause.delta_us
            else:
                ops = [o for o in report.operators if not (o.fusion or o.base_claimed
                                                           or o.new_claimed)
                       and (o.op_type if o.category == "communication"
                            else f"{o.family} [{o.input_shapes}]") == change.item
                       and o.status in ("regressed", "improved", "added", "removed",
                                        "count-changed")]
                assert move.delta_us == pytest.approx(sum(o.delta_us for o in ops), abs=1e-6)
    along = [ladder.parts[0]["stage"], *(p["stage"] for p in ladder.parts[1:])]
    assert along == [rungs[0].step.base_us, rungs[0].step.new_us, rungs[1].step.new_us]
    assert ladder.parts[1]["free"] == rungs[1].step.breakdown.free.base_us
    assert ladder.gate.step == gate.step
    path = re.search(r"the step goes ([\d.]+) → ([\d.]+) → ([\d.]+) ms", ladder.verdict)
    assert list(path.groups()) == [fmt.ms(v) for v in along]


def test_cli_ladder_writes_rungs_gate_summary_and_names_the_rung_in_junit(runs, tmp_path):
    out, junit = tmp_path / "out", tmp_path / "junit.xml"
    result = CliRunner().invoke(main, ["--ladder", str(runs / "a"), str(runs / "b"),
                                       str(runs / "c"), "-o", str(out), "--no-charts",
                                       "--fail-on-regression", "3", "--junit", str(junit)])
    assert result.exit_code == 1, result.output  # the gate: a → c is 18.2 % slower
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["a_vs_b", "a_vs_c",
                                                                  "b_vs_c"]
    data = json.loads((out / "report.json").read_text())
    assert data["kind"] == "ladder" and data["labels"] == ["a", "b", "c"]
    assert [r["report"] for r in data["rungs"]] == ["a_vs_b", "b_vs_c"]
    assert data["gate"]["report"] == "a_vs_c" and data["gate_failed"] is True
    assert result.stdout.splitlines()[0] == data["verdict"]
    step = ET.parse(junit).getroot().find(".//testcase[@name='step time']/failure")
    assert "Introduced along the path by rung 1 (b): computing +0.40 ms; rung 2 (c): Free " \
           "(device idle) +0.60 ms." in step.text
    assert "gate failed" in result.stderr


def test_cli_ladder_needs_two_steps(runs, tmp_path):
    result = CliRunner().invoke(main, ["--ladder", str(runs / "a"), str(runs / "b"), "-o",
                                       str(tmp_path / "out")])
    assert result.exit_code == 2
    assert result.stderr.strip().startswith("cann-diff: error: --ladder: needs BASE and at "
                                            "least two steps")


@pytest.mark.slow
def test_the_example_ladder_tells_the_mc2_story(tmp_path):
    steps = [EXAMPLES / "cann8.0.RC2", EXAMPLES / "cann8.0.RC2-mc2"]
    results = diff_ladder(EXAMPLES / "cann7.0.1.3", steps, Options())
    reports = [r.report for r in results]
    ladder = build_ladder(reports[:-1], reports[-1], ["r1", "r2"], "gate")
    comm = next(c for c in ladder.changes if c.item == "exposed communication")
    fusion = next(c for c in ladder.changes if c.kind == "fusion")
    assert (comm.rung, comm.layer, comm.undone_at) == (1, "communication", 2)
    assert (fusion.item, fusion.rung, fusion.undone_at) == ("MatmulAllReduce fusion", 1, 2)
    assert "rung 1 (cann8.0.RC2) adds 7.30 ms of exposed communication" in ladder.verdict
    assert "MatmulAllReduce split into MatMul + AllReduce" in ladder.verdict
    assert "rung 2 (cann8.0.RC2-mc2) gives back rung 1's exposed communication" in \
        ladder.verdict
    assert "CANN 7.0.1.3 → 8.0.RC2" in ladder.rungs[0].name
    # docs/usage.md quotes the example ladder's verdict as it is
    usage = (ROOT / "docs/usage.md").read_text()
    quote = usage.split("tells its story in one line:", 1)[1].split("\n\n")[1]
    assert " ".join(line.removeprefix("> ") for line in quote.splitlines()) == ladder.verdict
