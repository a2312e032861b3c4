"""Several candidates at once: ``cann-diff BASE NEW NEW``.

Crafted runs (tests/profiles.py), 1 rank, 6 steps, K = 4 layers per step, kernel noise
σ = 1 % (lognormal), so the reruns differ by noise only:

BASE   (fused, CANN 7-style): RmsNorm 100 | MatmulAllReduce 700 | FlashAttentionScore 500
SPLIT  (CANN 8, no MC2):      RmsNorm 100 | MatMulV3 600 | AllReduce 300 exposed | FA 500
RERUN  the BASE schedule again with another noise seed.

By hand, per step (2 µs gaps): BASE 4·1300 + 11·2 = 5222 µs; SPLIT 4·1500 + 15·2 = 6030
µs, +15.5 %: the split candidate regresses (mc2-split), the rerun changes by noise only.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from profiles import Comm, Kernel, aclnn, write_profile

from cann_diff.cli import main

K = 4
X = "4096,2048;2048,4096"
NORM = "4096,2048;2048"
ATTN = "1,16,4096,128;1,16,4096,128"
STEPS = (1, 2, 3, 4, 5, 6)


def fused_layer():
    return [aclnn("RmsNorm", 100.0, NORM, "AI_VECTOR_CORE"),
            Kernel("aclnnMatmulAllReduce_MatmulAllReduce_MatmulAllReduce", "MatmulAllReduce",
                   "MIX_AIC", 700.0, X + ";4096"),
            aclnn("FlashAttentionScore", 500.0, ATTN, "MIX_AIC")]


def split_layer():
    return [aclnn("RmsNorm", 100.0, NORM, "AI_VECTOR_CORE"), aclnn("MatMulV3", 600.0, X),
            Comm("allReduce", 300.0), aclnn("FlashAttentionScore", 500.0, ATTN, "MIX_AIC")]


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    root = tmp_path_factory.mktemp("candidates")
    base = write_profile(root, "cann7", fused_layer() * K, steps=STEPS, noise=0.01, seed=1)
    split = write_profile(root, "cann8", split_layer() * K, steps=STEPS, noise=0.01, seed=2)
    rerun = write_profile(root, "rerun", fused_layer() * K, steps=STEPS, noise=0.01, seed=3)
    out = root / "out"
    result = CliRunner().invoke(main, [str(base.path), str(split.path), str(rerun.path),
                                       "-o", str(out), "--fail-on-regression", "5", "-q"])
    return result, out


@pytest.mark.slow
def test_gate_fails_naming_the_split_candidate(three):
    result, _ = three
    assert result.exit_code == 1, result.output
    gate_line = [line for line in result.stderr.splitlines() if "gate failed" in line]
    assert len(gate_line) == 1 and "cann8" in gate_line[0] and "rerun" not in gate_line[0]


def test_each_candidate_has_its_full_pairwise_report(three):
    _, out = three
    for name in ("cann7_vs_cann8", "cann7_vs_rerun"):
        assert (out / name / "report.md").is_file()
        pairwise = json.loads((out / name / "report.json").read_text())
        assert pairwise["base"]["label"] == "cann7"


def test_summary_json_lists_candidates_in_order(three):
    _, out = three
    summary = json.loads((out / "report.json").read_text())
    assert summary["schema"] == "cann-diff/1"
    labels = [c["label"] for c in summary["candidates"]]
    assert labels == ["cann8", "rerun"]
    for candidate in summary["candidates"]:
        assert set(candidate) >= {"label", "path", "report", "step", "findings"}
        assert (out / candidate["report"] / "report.json").is_file()
    split, rerun = summary["candidates"]
    # 6030 vs 5222 µs per step by hand (noise 1 %): +15.5 %
    assert split["step"]["delta_pct"] == pytest.approx(15.5, abs=1.0)
    assert split["step"]["status"] == "regressed"
    assert "mc2-split" in {f["id"] for f in split["findings"]}
    assert split["gate_failed"] is True and rerun["gate_failed"] is False


def test_the_rerun_is_all_unchanged(three):
    _, out = three
    rerun = json.loads((out / "cann7_vs_rerun" / "report.json").read_text())
    assert rerun["step"]["status"] == "unchanged"
    assert {op["status"] for op in rerun["operators"]} == {"unchanged"}
    assert not {f["id"] for f in rerun["findings"]} & {"op-regression", "op-improvement",
                                                         "mc2-split", "mc2-fused"}


def test_summary_markdown_tells_the_verdict_across_candidates(three):
    _, out = three
    text = (out / "report.md").read_text()
    verdict = next(line for line in text.splitlines() if line.startswith("**Verdict:**"))
    assert "Only rerun is not slower than cann7" in verdict
    assert "cann8 is 15." in verdict and "MatmulAllReduce split" in verdict
    assert "([full report](<cann7_vs_cann8/report.md>))" in text
    assert "candidates_step.png" in text
    html = (out / "report.html").read_text()
    assert "Only rerun is not slower than cann7" in html and "data:image/png;base64," in html
    assert '<a href="cann7_vs_cann8/report.html">full report</a>' in html
    assert (out / "candidates_step.png").is_file()


@pytest.mark.slow
def test_labels_name_base_and_every_candidate(tmp_path, three):
    _, out = three
    root = out.parent
    result = CliRunner().invoke(main, [str(root / "cann7"), str(root / "cann8"),
                                       str(root / "rerun"), "--labels", "7.0.1.3,8.0.RC2,again",
                                       "-o", str(tmp_path / "o"), "-q", "--no-charts"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "o" / "report.json").read_text())
    assert summary["base"]["label"] == "7.0.1.3"
    assert [c["label"] for c in summary["candidates"]] == ["8.0.RC2", "again"]
    assert (tmp_path / "o" / "7.0.1.3_vs_8.0.RC2" / "report.md").is_file()


@pytest.mark.slow
def test_a_run_against_itself_is_told_apart_by_its_side(tmp_path, three):
    # Same path, same CANN version: only the side can tell them apart; with one candidate
    # it is "new", as everywhere else in the report, and numbered only among several.
    _, out = three
    base = str(out.parent / "cann7")
    result = CliRunner().invoke(main, [base, base, "-o", str(tmp_path / "one"), "-q",
                                       "--no-charts", "--no-html"])
    assert result.exit_code == 0, result.output
    report = json.loads((tmp_path / "one" / "report.json").read_text())
    assert (report["base"]["label"], report["new"]["label"]) == ("cann7 (base)", "cann7 (new)")
    result = CliRunner().invoke(main, [base, base, base, "-o", str(tmp_path / "two"), "-q",
                                       "--no-charts", "--no-html"])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "two" / "report.json").read_text())
    assert [c["label"] for c in summary["candidates"]] == ["cann7 (new1)", "cann7 (new2)"]
    # the summary marks the base "(base)" itself: its label stays as it was
    assert summary["base"]["label"] == "cann7"


@pytest.mark.parametrize("args, message", [
    (["--labels", "a,b"], "needs 3 non-empty names"),
    (["--labels", "a,a,b"], "must differ"),
    (["--new-label", "x"], "with several use --labels"),
])
def test_bad_labels_are_usage_errors(three, args, message):
    _, out = three
    root = out.parent
    result = CliRunner().invoke(main, [str(root / "cann7"), str(root / "cann8"),
                                       str(root / "rerun"), *args, "-q"])
    assert result.exit_code == 2
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1
