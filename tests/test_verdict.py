"""The verdict as a headline line, its causes ranked with their shares, and its caveats once.

Crafted runs (tests/profiles.py, no noise, so every figure holds to the µs), worked by hand.
Each step: MatMul, a 2 µs gap, an exposed AllReduce, a 2 µs gap, Add 1,000 µs.

* base ``a``: MatMul 4,000, AllReduce 500 → Stage 5,504 µs (Computing 5,000, exposed 500,
  Free 4);
* ``comm``: MatMul 3,600, AllReduce 1,500 → Stage 6,104: Δ +600 µs (+10.9 %); exposed
  communication +1,000 (167 % of the change), computing −400 (67 % of it, against it) —
  a kernel gain the communication growth hides;
* ``slow``: MatMul 4,400 → Stage 5,904: Δ +400 (+7.3 %), computing +400 (100 %).
"""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner
from conftest import EXAMPLES
from profiles import Comm, aclnn, write_profile

from cann_diff.cli import main
from cann_diff.pipeline import Options, diff
from cann_diff.render.markdown import render_markdown

STEPS = (1, 2, 3, 4, 5)


def schedule(matmul_us: float, allreduce_us: float) -> list:
    return [aclnn("MatMul", matmul_us, "64,64;64,64"), Comm("allReduce", allreduce_us),
            aclnn("Add", 1000, "64")]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("verdict")
    write_profile(root, "a", schedule(4000, 500), steps=STEPS)
    write_profile(root, "comm", schedule(3600, 1500), steps=STEPS)
    write_profile(root, "slow", schedule(4400, 500), steps=STEPS)
    write_profile(root, "once", schedule(4000, 500), steps=(1,))
    write_profile(root, "once_slow", schedule(4400, 500), steps=(1,))
    return root


def verdict_of(runs, base: str, new: str):
    return diff(runs / base, runs / new, Options(base_label=base, new_label=new)).report.verdict


def test_hidden_gain_line_and_causes_by_hand(runs):
    v = verdict_of(runs, "a", "comm")
    # 5,504 → 6,104 µs: +10.9 %; the MatMul gain is 400 µs.
    assert v.line.startswith("comm is 10.9% slower than a: 5.50 → 6.10 ms per step, p = ")
    assert v.line.endswith("; communication growth hides a 0.40 ms kernel gain")
    assert [c.name for c in v.causes] == ["exposed communication", "computing"]
    comm, computing = v.causes
    assert comm.delta_us == pytest.approx(1000, abs=0.01)
    assert comm.share == pytest.approx(1000 / 600, abs=1e-6)
    assert computing.delta_us == pytest.approx(-400, abs=0.01)
    assert computing.share == pytest.approx(-400 / 600, abs=1e-6)
    assert comm.text.startswith("exposed communication +1.00 ms (167% of the change): ")
    assert "AllReduce +1.00 ms" in comm.text
    assert computing.text.startswith("computing -0.40 ms (67% of the change, against it): ")
    assert "MatMul -0.40 ms" in computing.text
    assert v.caveats == ()  # five steps, one stack, one shape set


def test_a_plain_slowdown_has_one_cause(runs):
    v = verdict_of(runs, "a", "slow")
    assert v.line.startswith("slow is 7.3% slower than a: 5.50 → 5.90 ms per step, p = ")
    assert "hides" not in v.line
    assert [(c.name, round(c.delta_us), round(c.share, 6)) for c in v.causes] == \
        [("computing", 400, 1.0)]


def test_noise_names_no_cause(runs):
    v = verdict_of(runs, "a", "a")
    assert v.line == ("No significant change in step time between a and a: 5.50 → 5.50 ms "
                      "per step (+0.0%, p = 1.000)")
    assert v.causes == ()


def test_one_capture_is_a_caveat_said_once(runs, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(runs / "once"), str(runs / "once_slow"), "-o",
                                       str(out), "--no-charts"])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "report.json").read_text())
    codes = [c["code"] for c in data["verdict"]["caveats"]]
    assert codes == ["one-capture"]
    # one capture: no p in the line; the caveat says why, once, in the ⚠ block
    assert data["verdict"]["line"] == "once_slow is 7.3% slower than once: 5.50 → 5.90 ms per step"
    md = (out / "report.md").read_text()
    head = md[:md.index("\n## ")]
    assert head.count("One capture per side") == 1
    assert "> ⚠ One capture per side" in head
    assert "⚠ One capture per side" in result.stdout


def test_every_output_says_the_same_verdict(runs, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(runs / "a"), str(runs / "comm"), "-o", str(out),
                                       "--no-charts"])
    assert result.exit_code == 0, result.output
    data = json.loads((out / "report.json").read_text())
    v = data["verdict"]
    assert data["headline"] and v["line"] and len(v["causes"]) == 2
    stdout = result.stdout.splitlines()
    assert stdout[0] == v["line"]
    assert stdout[1:3] == [f"  {c['text']}" for c in v["causes"]]
    md = (out / "report.md").read_text()
    assert f"**Verdict:** {v['line']}." in md
    bullets = re.findall(r"^- \*\*(.+?)\*\* \((.+?)\): (.+)$", md[:md.index("\n## ")], re.M)
    assert [f"{name} ({share}): {detail}" for name, share, detail in bullets] == \
        [c["text"] for c in v["causes"]]
    html = (out / "report.html").read_text()
    causes = re.search(r'<ul class="causes">(.*?)</ul>', html, re.S).group(1)
    assert causes.count("<li>") == 2
    assert "<strong>exposed communication +1.00 ms</strong> (167% of the change)" in causes


def test_runs_compared_come_after_the_findings_folded(runs, tmp_path):
    out = tmp_path / "out"
    result = CliRunner().invoke(main, [str(runs / "a"), str(runs / "slow"), "-o", str(out),
                                       "--no-charts"])
    assert result.exit_code == 0, result.output
    md = (out / "report.md").read_text()
    assert md.index("## Findings") < md.index("## Runs compared") < md.index("## Step time")
    html = (out / "report.html").read_text()
    runs_section = html[html.index('id="section-runs"'):]
    runs_section = runs_section[:runs_section.index("</section>")]
    summary = re.search(r"<details><summary>(.*?)</summary>", runs_section).group(1)
    # both runs record format, Level1, rank 0 and steps 1-5 alike, and nothing else
    assert summary.startswith("No recorded fact differs")
    assert "<table>" in runs_section


def test_the_example_records_its_stack_and_says_what_differs(tmp_path):
    # examples/*/…/profiler_info_<rank>.json hold cann_version and torch_npu_version
    infos = {run: json.loads(next((EXAMPLES / run).rglob("profiler_info_0.json")).read_text())
             for run in ("cann7.0.1.3", "cann8.0.RC2")}
    assert [infos[r]["cann_version"] for r in infos] == ["7.0.1.3", "8.0.RC2"]
    report = diff(EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2").report
    assert (report.base.versions.cann, report.new.versions.cann) == ("7.0.1.3", "8.0.RC2")
    md = render_markdown(report)
    section = md[md.index("## Runs compared"):]
    first = section.splitlines()[2]
    want = (f"CANN 7.0.1.3 → 8.0.RC2; torch_npu {infos['cann7.0.1.3']['torch_npu_version']} → "
            f"{infos['cann8.0.RC2']['torch_npu_version']} differ")
    assert first.startswith(want), first


def test_one_capture_without_a_change_is_said_by_the_threshold(runs):
    v = verdict_of(runs, "once", "once")
    # no test with one step a side: the 5 % threshold alone decides, and no cause is named
    assert v.line == ("No change in step time beyond the 5% threshold between once and once: "
                      "5.50 → 5.50 ms per step (+0.0%)")
    assert v.causes == ()
    assert [c.code for c in v.caveats] == ["one-capture"]
