"""Verdicts you can sign: status rules, robust step statistics, honest headline arithmetic.

Crafted pairs (tests/profiles.py) whose right answers are worked out below from the
schedules, and real data as regression tests. ``STEP`` (tests/test_statistics.py) is 4
layers of RmsNorm 42 | MatMulV3 610 | FlashAttentionScore 880 | MatMulV3 400 |
AllReduce 300 (exposed) | SwiGlu 95 | MatMulV3 780, a data-parallel AllReduce of 1500 µs
overlapped after layer 2, and ForeachMulScalar 220: kernel time 4·2807 + 220 = 11448 µs
per step, of which MatMulV3 4·1790 = 7160 µs.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from conftest import DATA, REALDATA, needs_realdata
from profiles import Comm, Kernel, aclnn, scaled, write_profile
from test_statistics import STEP

from cann_diff.cli import main
from cann_diff.compare.stats import compare_samples, compare_steps, robust_z
from cann_diff.findings.base import FINDING_IDS
from cann_diff.findings.comm_hides_compute import growth_kind
from cann_diff.pipeline import Options, diff
from cann_diff.settings import Thresholds

STEPS5 = (1, 2, 3, 4, 5)
STEPS12 = tuple(range(1, 13))
ST_LEVEL2 = REALDATA / "Ascend__msinsight/test/st/level2"
MI_TEXT = REALDATA / "Ascend__msinsight/test/data/pytorch/text"


def cli(base, new, out, *args):
    """Run the CLI without charts; return (exit code, report.json)."""
    result = CliRunner().invoke(main, [str(a) for a in (base, new, "-o", out, "-q",
                                                        "--no-charts", *args)])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code, json.loads((Path(out) / "report.json").read_text())


def row(cmp, op_type: str, shapes: str | None = None):
    ops = cmp.operators
    picked = ops[(ops["op_type"] == op_type)
                 & ((ops["input_shapes"] == shapes) if shapes is not None else True)]
    assert len(picked) == 1, picked[["op_type", "input_shapes"]]
    return picked.iloc[0]


def ids(result) -> set[str]:
    return {f.id for f in result.analysis.findings}


# ================================================================ operator status rules


def with_casts(base_casts: int, new_casts: int, cast_us_new: float = 20.0):
    """STEP plus Cast kernels: ``base_casts`` of 20 µs per step, or ``new_casts`` of
    ``cast_us_new``."""
    def build(n, us):
        return [*STEP, *[aclnn("Cast", us, "4096,4096", "AI_VECTOR_CORE")] * n]
    return build(base_casts, 20.0), build(new_casts, cast_us_new)


def test_count_effect_and_instance_effect_by_hand(tmp_path):
    # Cast: base 2 per step at 20 µs, new 3 per step at 22 µs (no noise, 3 steps).
    # Δ per step = 3·22 − 2·20 = 26 µs = count effect (3 − 2)·20 = 20 + per-instance
    # effect 3·(22 − 20) = 6. The count changed: status count-changed; every instance is
    # 10 % slower in every pairwise ratio and in mean alike and Mann-Whitney (6 vs 9,
    # separated) is significant, so the count-changed finding says it got slower per
    # instance too; op-regression counts the Top regressions table's rows, and a
    # count-changed key is not one of them.
    base_schedule, new_schedule = with_casts(2, 3, 22.0)
    base = write_profile(tmp_path, "base", base_schedule)
    new = write_profile(tmp_path, "new", new_schedule)
    result = diff(base.path, new.path)
    cast = row(result.comparison, "Cast")
    assert cast["delta_us"] == pytest.approx(26.0)
    assert cast["count_effect_us"] == pytest.approx(20.0)
    assert cast["instance_effect_us"] == pytest.approx(6.0)
    assert cast["instance_change_pct"] == pytest.approx(10.0)
    assert bool(cast["count_changed"]) and cast["status"] == "count-changed"
    assert bool(cast["significant"]) == (cast["p_value"] < 0.05)
    found = {f.id: f for f in result.analysis.findings}
    assert "op-regression" not in found
    assert "significantly slower: Cast [4096,4096] +10.0%" in found["count-changed"].detail
    assert found["count-changed"].data["count_effect_us"] == pytest.approx(20.0)
    assert "2 → 3 per step" in found["count-changed"].detail
    assert "count-changed" in FINDING_IDS


def test_same_count_same_speed_is_unchanged_with_zero_effects(tmp_path):
    base_schedule, _ = with_casts(2, 2)
    base = write_profile(tmp_path, "base", base_schedule)
    new = write_profile(tmp_path, "new", base_schedule)
    cast = row(diff(base.path, new.path).comparison, "Cast")
    assert (cast["count_effect_us"], cast["instance_effect_us"]) == (0.0, 0.0)
    assert cast["status"] == "unchanged" and not cast["significant"]


@pytest.mark.slow
@pytest.mark.parametrize("factor, status, below", [
    (1.10, "regressed", False),   # significant and ≥ 5 %
    (1.03, "unchanged", True),    # significant, but under the 5 % threshold
    (0.90, "improved", False),
])
def test_per_instance_change_against_the_threshold(tmp_path, factor, status, below):
    # SwiGlu 4 per step × 5 steps = 20 instances a side, noise σ = 0.5 %: a 3 % shift is
    # significant (Mann-Whitney, fully separated samples) but under the 5 % threshold.
    new_schedule = scaled(STEP, factor, only=lambda op: getattr(op, "type", "") == "SwiGlu")
    base = write_profile(tmp_path, "base", STEP, steps=STEPS5, noise=0.005, seed=1)
    new = write_profile(tmp_path, "new", new_schedule, steps=STEPS5, noise=0.005, seed=2)
    swiglu = row(diff(base.path, new.path).comparison, "SwiGlu")
    assert swiglu["significant"] and swiglu["p_value"] < 0.001
    assert swiglu["instance_change_pct"] == pytest.approx((factor - 1) * 100, abs=0.5)
    assert swiglu["status"] == status
    assert bool(swiglu["below_threshold"]) is below
    assert swiglu["count_effect_us"] == pytest.approx(0.0)
    assert swiglu["instance_effect_us"] == pytest.approx(swiglu["delta_us"])


def test_ratio_interval_needs_min_ci_instances_a_side():
    # 1 vs 2 instances once gave [0.004, 246.7]: below 5 a side there is no interval.
    few = compare_samples(np.array([10.0, 11.0, 12.0, 13.0]), np.arange(20.0, 30.0))
    assert few.p_value is not None and (few.ci_low, few.ci_high) == (None, None)
    enough = compare_samples(np.arange(10.0, 15.0), np.arange(20.0, 25.0))
    assert enough.ci_low is not None and enough.ci_low > 1.0


def test_ci_note_names_too_few_instances(tmp_path):
    # Cast: 1 per step, 3 steps = 3 instances a side (< 5): p but no interval.
    base_schedule, new_schedule = with_casts(1, 1, 21.0)
    base = write_profile(tmp_path, "base", base_schedule)
    new = write_profile(tmp_path, "new", new_schedule)
    cmp = diff(base.path, new.path).comparison
    cast = row(cmp, "Cast")
    assert cast["ci_note"] == "n too small"
    # 3 vs 3: Mann-Whitney's smallest p is 2/20 = 0.1 > α, so no test is run: untested.
    assert np.isnan(cast["ci_low"]) and np.isnan(cast["p_value"]) and not cast["tested"]
    assert cast["status"] == "untested"
    rms = row(cmp, "RmsNorm")  # 4 per step × 3 = 12 a side
    assert rms["ci_note"] is None and rms["ci_low"] <= 1.0 <= rms["ci_high"]


def bigger_batch(op, only=lambda op: True):
    """The op with its token dimension doubled (4096 → 8192) and twice the time."""
    if isinstance(op, Kernel) and only(op):
        return replace(op, shapes=op.shapes.replace("4096", "8192", 1), us=op.us * 2)
    return op


def test_bigger_micro_batch_is_reshaped_not_slower(tmp_path):
    # Every compute kernel changes shape: only the family-only rung pairs them. They are
    # `reshaped` (no test, never regressed), and the note says no kernel time is in
    # same-shape keys (0 % of 11448 µs base, 0 % of 22896 µs new).
    base = write_profile(tmp_path, "base", STEP, steps=STEPS5, noise=0.025, seed=1)
    new = write_profile(tmp_path, "new", [bigger_batch(op) for op in STEP], steps=STEPS5,
                        noise=0.025, seed=2)
    result = diff(base.path, new.path)
    compute = result.comparison.operators.query("category == 'compute'")
    assert set(compute["match_kind"]) == {"type-only"}
    assert set(compute["status"]) == {"reshaped"}
    assert compute["p_value"].isna().all() and not compute["significant"].any()
    assert not ids(result) & {"op-regression", "op-improvement"}
    [note] = [n for n in result.comparison.warnings if n.code == "shapes-differ"]
    assert "only 0% of base and 0% of new kernel time" in note.text
    assert result.comparison.warnings[0].code == "shapes-differ"  # first: it qualifies all


@pytest.mark.slow
@pytest.mark.parametrize("family, note", [
    # MatMulV3 reshaped: same-shape base share (11448 − 7160)/11448 = 37 %, new
    # 4288 / (11448 + 7160) = 23 %: below half → note.
    ("MatMulV3", "only 37% of base and 23% of new kernel time"),
    # FlashAttentionScore reshaped: (11448 − 3520)/11448 = 69 %, 7928/14968 = 53 %: none.
    ("FlashAttentionScore", None),
])
def test_shapes_differ_note_below_half_the_kernel_time(tmp_path, family, note):
    base = write_profile(tmp_path, "base", STEP)
    new = write_profile(tmp_path, "new", [bigger_batch(op, lambda k: k.type == family)
                                          for op in STEP])
    notes = [n.text for n in diff(base.path, new.path).comparison.warnings
             if n.code == "shapes-differ"]
    assert (note in notes[0]) if note else not notes


# ================================================================ step: threshold and gate


MC2_X = "4096,2048;2048,4096"
NORM = "4096,2048;2048"
ATTN = "1,16,4096,128;1,16,4096,128"


def fused_layer():
    return [aclnn("RmsNorm", 100.0, NORM, "AI_VECTOR_CORE"),
            Kernel("aclnnMatmulAllReduce_MatmulAllReduce_MatmulAllReduce", "MatmulAllReduce",
                   "MIX_AIC", 700.0, MC2_X + ";4096"),
            aclnn("FlashAttentionScore", 500.0, ATTN, "MIX_AIC")]


def split_layer(comm_us: float):
    return [aclnn("RmsNorm", 94.0, NORM, "AI_VECTOR_CORE"), aclnn("MatMulV3", 600.0, MC2_X),
            Comm("allReduce", comm_us), aclnn("FlashAttentionScore", 470.0, ATTN, "MIX_AIC")]


@pytest.fixture(scope="module")
def mc2_small_split(tmp_path_factory):
    # 4 layers, 2 µs gaps. Base: 4·1300 kernels + 11 gaps = 5222 µs per step; new:
    # 4·(94 + 600 + 180 + 470) = 5376 + 15 gaps = 5406 µs: +3.52 % before noise (σ = 1 %
    # on every kernel, 5 steps: significant). The 5 % operator threshold once decided the
    # step too (status unchanged) while a 3 % gate failed the same run.
    root = tmp_path_factory.mktemp("mc2")
    base = write_profile(root, "base", fused_layer() * 4, steps=STEPS5, noise=0.01, seed=1)
    new = write_profile(root, "new", split_layer(180.0) * 4, steps=STEPS5, noise=0.01, seed=2)
    return base, new


@pytest.mark.slow
def test_step_has_its_own_threshold_and_one_gate(mc2_small_split, tmp_path):
    base, new = mc2_small_split
    built_pct = (new.mean("Stage") / base.mean("Stage") - 1) * 100
    assert built_pct == pytest.approx(3.52, abs=0.3)
    step = diff(base.path, new.path).comparison.step
    # the step figures are the kernel rows' (the one ledger), written to 0.01 µs, where the
    # built Stage is not rounded: they agree to a thousandth of a point
    assert step.delta_pct == pytest.approx(built_pct, abs=5e-3) and step.significant
    assert step.threshold_pct == 2.0 and step.status == "regressed"
    assert step.gate is None  # no gate asked for
    assert step.gate_failed(3.0, 5.0) and not step.gate_failed(5.0, 5.0)
    gated = diff(base.path, new.path, Options(thresholds=Thresholds(fail_on_regression_pct=3.0)))
    assert gated.comparison.step.gate is True and gated.comparison.step.status == "regressed"
    code, report = cli(base.path, new.path, tmp_path / "g3", "--fail-on-regression", "3")
    assert (code, report["step"]["status"]) == (1, "regressed")
    code, report = cli(base.path, new.path, tmp_path / "g5", "--fail-on-regression", "5")
    assert (code, report["step"]["status"]) == (0, "regressed")


@pytest.mark.slow
def test_a_failing_gate_makes_the_step_regressed(tmp_path):
    # Every kernel +1.5 %, noise σ = 0.5 %: significant, under the 2 % step threshold →
    # unchanged with below_threshold; a 1 % gate fails it, and then the status says so.
    base = write_profile(tmp_path, "base", STEP, steps=STEPS5, noise=0.005, seed=1)
    new = write_profile(tmp_path, "new", scaled(STEP, 1.015), steps=STEPS5, noise=0.005,
                        seed=2)
    step = diff(base.path, new.path).comparison.step
    assert 1.0 < step.delta_pct < 2.0 and step.significant
    assert (step.status, step.below_threshold) == ("unchanged", True)
    gated = diff(base.path, new.path, Options(thresholds=Thresholds(fail_on_regression_pct=1.0)))
    assert gated.comparison.step.gate is True
    assert (gated.comparison.step.status, gated.comparison.step.below_threshold) == (
        "regressed", False)


# ================================================================ step: robust screening


def warm_up(first: float, scale: float = 1.0):
    """Step 1 is ``first``× slower than the others (every op), all ops ``scale``×."""
    def schedule(rank, step):
        return scaled(STEP, scale * (first if step == 1 else 1.0))
    return schedule


def test_robust_z_by_hand():
    # 100, 101, 99, 100, 270: median 100, |dev| 0 1 1 0 170 → MAD 1, spread 1.4826;
    # z of 270 = 170/1.4826 = 114.66. With a floor of 2 the spread is 2: z = 85.
    values = np.array([100.0, 101.0, 99.0, 100.0, 270.0])
    np.testing.assert_allclose(robust_z(values, 0.0),
                               [0, 1 / 1.4826, -1 / 1.4826, 0, 170 / 1.4826])
    assert robust_z(values, 2.0)[-1] == pytest.approx(85.0)


@pytest.mark.slow
def test_warm_up_both_sides_no_longer_hides_a_regression(tmp_path):
    # Both runs: step 1 is 2.7× the others; new: every op 10 % slower. All 12 steps:
    # Welch's t sat near 1 (one outlier a side); screened: +10 % (just under, the 2 µs
    # gaps do not grow), significant, and a 5 % gate fails. Over all steps the step test
    # is now Mann-Whitney: each warm-up step moves it by one rank, and it still finds the
    # regression (new's 11 steady steps above base's 11, base's warm-up above all of new
    # but new's own: U = 121 + 12 = 133 of 144).
    base = write_profile(tmp_path, "base", warm_up(2.7), steps=STEPS12, noise=0.025, seed=1)
    new = write_profile(tmp_path, "new", warm_up(2.7, 1.10), steps=STEPS12, noise=0.025,
                        seed=2)
    result = diff(base.path, new.path)
    step = result.comparison.step
    assert [(s.side, s.step) for s in step.screened] == [("base", 1), ("new", 1)]
    assert step.base_steps == step.new_steps == STEPS12[1:]
    stage = {side: [built.figures[(0, s)]["Stage"] for s in STEPS12]
             for side, built in (("base", base), ("new", new))}
    steady = np.mean(stage["new"][1:]) / np.mean(stage["base"][1:]) * 100 - 100
    # the kernel rows' span (written to 0.01 µs) is the step: a thousandth of a point
    assert step.delta_pct == pytest.approx(steady, abs=5e-3)
    assert step.delta_pct == pytest.approx(10.0, abs=0.5) and step.status == "regressed"
    assert step.all_steps.test == "mann-whitney" and step.all_steps.significant is True
    assert step.all_steps.delta_pct == pytest.approx(
        np.mean(stage["new"]) / np.mean(stage["base"]) * 100 - 100, abs=5e-3)
    [note] = [n for n in result.comparison.warnings if n.code == "steps-screened"]
    for side in ("base", "new"):
        assert f"{side} step 1 ({stage[side][0] / 1000:,.2f} ms, 2.7× the median" in note.text
    assert "warm-up steps left out on both sides: base step 1" in result.report.headline
    code, _ = cli(base.path, new.path, tmp_path / "gate", "--fail-on-regression", "5")
    assert code == 1


@pytest.mark.slow
def test_a_slow_first_step_on_one_side_is_named_not_hidden(tmp_path):
    # Only new's step 1 is slow (3.4×); steps 2-12 are identical (no noise): all steps
    # give (3.4 + 11)/12 − 1 = +20 % (just under: gaps do not scale); screened: 0 %.
    # The warm-up position is left out of both sides (base's ordinary step 1 with it).
    base = write_profile(tmp_path, "base", STEP, steps=STEPS12)
    new = write_profile(tmp_path, "new", warm_up(3.4), steps=STEPS12)
    result = diff(base.path, new.path)
    step = result.comparison.step
    assert [(s.side, s.step, s.reason) for s in step.screened] == [("base", 1, "paired"),
                                                                    ("new", 1, "warm-up")]
    warm = step.screened[1]
    assert warm.stage_us == pytest.approx(new.figures[(0, 1)]["Stage"])
    assert warm.median_us == pytest.approx(new.figures[(0, 2)]["Stage"])
    assert warm.stage_us / warm.median_us == pytest.approx(3.4, abs=0.02)
    assert step.base_steps == step.new_steps == STEPS12[1:]
    assert step.delta_pct == pytest.approx(0.0) and step.status == "unchanged"
    assert step.all_steps.delta_pct == pytest.approx(
        (new.mean("Stage") / base.mean("Stage") - 1) * 100, abs=5e-3)
    assert step.all_steps.delta_pct > 19
    # over all steps the test's estimate (Hodges-Lehmann: 11 of 12 steps identical) is
    # 0 %; the mean the slow step moves is said beside it
    assert step.all_steps.shift_pct == pytest.approx(0.0, abs=0.05)
    assert ("new step 1 at 3.4× the median; over all steps +0.0% (mean step +19."
            in result.report.headline)
    # --steps (screen_steps=False) is the user's choice: nothing is screened.
    chosen = diff(base.path, new.path, Options(thresholds=Thresholds(screen_steps=False)))
    assert chosen.comparison.step.screened == ()
    assert chosen.comparison.step.delta_pct == pytest.approx(step.all_steps.delta_pct)
    assert not [n for n in chosen.comparison.warnings if n.code == "steps-screened"]


def test_two_steps_are_never_screened(tmp_path):
    # With 2 steps the median cannot tell which is the odd one (min_screen_steps = 3).
    base = write_profile(tmp_path, "base", STEP, steps=(1, 2))
    new = write_profile(tmp_path, "new", warm_up(3.0), steps=(1, 2))
    assert diff(base.path, new.path).comparison.step.screened == ()


@pytest.mark.slow
@pytest.mark.parametrize("steps", [2, 3, 4, 5])
def test_step_test_is_valid_for_few_steps(steps):
    # A/A with 3 % log-normal step noise: Welch on log step times keeps its false-positive
    # rate at or under α (4000 pairs: binomial SE 0.0034); a 10 % shift with 1 % noise is
    # found at least 3 times out of 4 even with 2 steps, and its ratio interval covers
    # 1.1 in ≥ 94 % of draws (nominal 95 %).
    rng = np.random.default_rng(steps)
    draws = lambda sigma, factor=1.0: factor * np.exp(rng.normal(0.0, sigma, steps))  # noqa: E731
    false = np.mean([compare_steps(draws(0.03), draws(0.03)).p_value < 0.05
                     for _ in range(4000)])
    assert false <= 0.05 + 3 * 0.0034
    power = np.mean([compare_steps(draws(0.01), draws(0.01, 1.1)).p_value < 0.05
                     for _ in range(1000)])
    assert power >= 0.75
    tests = [compare_steps(draws(0.03), draws(0.03, 1.1)) for _ in range(2000)]
    assert np.mean([t.ci_low <= 1.1 <= t.ci_high for t in tests]) >= 0.94


# ================================================================ A/A: nothing to report


@pytest.fixture(scope="module")
def noisy_warm(tmp_path_factory):
    """Base and five reruns (seeds 1-5) of one schedule with a 2.7× warm-up step 1."""
    root = tmp_path_factory.mktemp("aa")
    steps = (1, 2, 3, 4, 5, 6)
    base = write_profile(root, "base", warm_up(2.7), steps=steps, noise=0.025, seed=100)
    reruns = [write_profile(root, f"rerun{seed}", warm_up(2.7), steps=steps, noise=0.025,
                            seed=seed) for seed in range(1, 6)]
    return base, reruns


def test_a_run_against_itself_has_nothing(noisy_warm, tmp_path):
    base, _ = noisy_warm
    code, report = cli(base.path, base.path, tmp_path / "self", "--fail-on-regression", "5")
    assert code == 0 and report["findings"] == []
    assert {op["status"] for op in report["operators"]} == {"unchanged"}
    assert report["step"]["status"] == "unchanged"


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1, 6))
def test_noise_rerun_with_warm_up_has_no_finding_and_passes_the_gate(noisy_warm, tmp_path,
                                                                     seed):
    base, reruns = noisy_warm
    code, report = cli(base.path, reruns[seed - 1].path, tmp_path / "n",
                       "--fail-on-regression", "5")
    assert code == 0
    assert report["findings"] == []
    assert {op["status"] for op in report["operators"]} == {"unchanged"}
    assert report["step"]["status"] == "unchanged"
    step = diff(base.path, reruns[seed - 1].path).comparison.step
    assert [(s.side, s.step) for s in step.screened] == [("base", 1), ("new", 1)]


# ================================================================ one compute arithmetic


@pytest.fixture(scope="module")
def tp_split(tmp_path_factory):
    """MC2 split in a tensor-parallel layer that also runs an ordinary MatMul of shape X.

    Base layer: RmsNorm 100 | MatmulAllReduce 700 (X;4096) | FA 500 | MatMulV3 625 (X).
    New layer:  RmsNorm 94 | MatMulV3 587.5 (X) | AllReduce 300 | FA 470 | MatMulV3 587.5
    (every MatMul of shape X 6 % faster; times chosen to sit on the 0.25 µs grid of
    float µs timestamps). 4 layers, no noise. Per step, by hand:
      MatMulV3 X: base 4 × 625 = 2500, new 8 × 587.5 = 4700; 4 of the 8 replace the
      fused op: MC2 claims 4 × 587.5 = 2350; the other 4 are like for like:
      4 × (587.5 − 625) = −150.
      like-for-like = −150 + RmsNorm 4·(94 − 100) + FA 4·(470 − 500) = −294;
      MC2 = −4·700 + 2350 = −450;
      Computing 4·1925 = 7700 → 4·1739 = 6956: Δ −744 = −294 − 450 (rest 0).
    The count-based pairing used to claim the whole MatMul key: like-for-like −144.
    """
    root = tmp_path_factory.mktemp("tp")
    ordinary = [aclnn("MatMulV3", 625.0, MC2_X)]
    base = write_profile(root, "base", (fused_layer() + ordinary) * 4)
    new_layer = split_layer(300.0)
    new = write_profile(root, "new", (new_layer[:1] + [aclnn("MatMulV3", 587.5, MC2_X)]
                                      + new_layer[2:] + [aclnn("MatMulV3", 587.5, MC2_X)]) * 4)
    return base, new, diff(base.path, new.path)


@pytest.mark.slow
def test_compute_split_rows_by_hand(tp_split):
    base, new, result = tp_split
    split = result.analysis.compute
    assert base.mean("Computing") == pytest.approx(7700.0)
    assert new.mean("Computing") == pytest.approx(6956.0)
    assert split.delta_computing_us == pytest.approx(-744.0)
    assert split.like_for_like_us == pytest.approx(-294.0)
    assert split.mc2_us == pytest.approx(-450.0)
    assert split.like_for_like_by_family["MatMul"] == pytest.approx(-150.0)
    assert split.changed_work_us == pytest.approx(0.0)
    assert split.rest_us == pytest.approx(0.0, abs=1e-6)
    assert sum(value for _, _, value in split.rows()) == pytest.approx(split.delta_computing_us)


@pytest.mark.slow
def test_mc2_claims_only_the_instances_that_replaced_the_fused_op(tp_split):
    _, _, result = tp_split
    [group] = result.analysis.fusion
    matmul = row(result.comparison, "MatMulV3", MC2_X)
    assert group.new_claims[int(matmul["key_id"])] == pytest.approx(4.0)  # of 8 per step
    assert group.split_counts == {"AllReduce": 4, "MatMul": 4}
    # base: 4 fused · 700 = 2800; new: 4 claimed MatMuls · 587.5 + 4 AllReduce · 300.
    assert group.new_total_us == pytest.approx(2350.0 + 1200.0)
    # The MatMul key keeps its own row (its ordinary half is an operator like any other).
    assert int(matmul["key_id"]) not in result.analysis.fusion_keys
    assert "count-changed" not in ids(result)  # the whole count change is the split's
    hidden = next(f for f in result.analysis.findings if f.id == "comm-hides-compute")
    assert hidden.data["delta_matched_kernels_us"] == pytest.approx(-294.0)
    assert "like-for-like kernels got 0.29 ms faster" in result.report.headline


@pytest.mark.slow
def test_example_compute_split_reconciles():
    result = diff(Path(__file__).parent.parent / "examples/cann7.0.1.3",
                  Path(__file__).parent.parent / "examples/cann8.0.RC2")
    split = result.analysis.compute
    breakdown = result.comparison.step.all_steps.breakdown["computing"]
    assert split.delta_computing_us == pytest.approx(breakdown["delta_us"])
    assert sum(v for _, _, v in split.rows()) == pytest.approx(split.delta_computing_us)
    # The example's kernels all run one after another: the kernel rows explain Computing.
    assert abs(split.rest_us) < 1.0
    figure = f"like-for-like kernels got {-split.like_for_like_us / 1000:.2f} ms faster"
    assert figure in result.report.headline


# ================================================================ communication parts


def rewrite_comm_parts(built, transit: float, wait: float) -> None:
    """Give every collective of ``built`` transit/wait shares of its elapse; idle the rest."""
    for path in Path(built.path).glob("*/ASCEND_PROFILER_OUTPUT/communication.json"):
        data = json.loads(path.read_text())
        for step in data.values():
            for op in step["collective"].values():
                info = op["Communication Time Info"]
                elapse = info["Elapse Time(ms)"]
                info["Transit Time(ms)"] = elapse * transit
                info["Wait Time(ms)"] = info["Synchronization Time(ms)"] = elapse * wait
                info["Idle Time(ms)"] = elapse * (1 - transit - wait)
        path.write_text(json.dumps(data))


def comm_layer(scale: float, comm_us: float):
    return [aclnn("RmsNorm", 100 * scale, NORM, "AI_VECTOR_CORE"),
            aclnn("MatMulV3", 700 * scale, MC2_X), Comm("allReduce", comm_us),
            aclnn("FlashAttentionScore", 500 * scale, ATTN, "MIX_AIC")]


@pytest.mark.slow
def test_idle_growth_is_called_idle_with_its_numbers(tmp_path):
    # Compute 15 % faster, exposed AllReduce 4·100 → 4·275 µs per step (same count).
    # Base: transit 60 %, wait 30 %, idle 10 % of 400 µs = 240 / 120 / 40; new: 20 / 25 /
    # 230 of each 275 µs = 80 / 100 / 920 per step. Transit and wait fell; idle grew by
    # 880 µs: the growth is idle time between tasks; transit fell, so not "slower
    # transfers": the same operations (same count) take longer.
    base = write_profile(tmp_path, "base", comm_layer(1.0, 100.0) * 4)
    new = write_profile(tmp_path, "new", comm_layer(0.85, 275.0) * 4)
    rewrite_comm_parts(new, 20 / 275, 25 / 275)
    result = diff(base.path, new.path)
    hidden = next(f for f in result.analysis.findings if f.id == "comm-hides-compute")
    assert hidden.data["growth_kind"] == "idle"
    parts = hidden.data["growth"]["parts"]
    for part, (b, n) in {"transit": (240, 80), "wait": (120, 100), "idle": (40, 920)}.items():
        assert (parts[part]["base"], parts[part]["new"]) == (pytest.approx(b), pytest.approx(n))
    assert ("Growth is mainly idle between tasks (+0.88 ms per step; transfer 0.24 ms → "
            "0.08 ms, waiting for a peer 0.12 ms → 0.10 ms, idle between tasks 0.04 ms → "
            "0.92 ms; from communication.json), from the same operations (same count per "
            "step, transfer did not "
            "grow)") in hidden.detail


@pytest.mark.slow
def test_transfer_growth_with_more_operations(tmp_path):
    # Default shares (transit 60 %): 4 → 8 AllReduce of 100 µs per step; transit grows by
    # 4·60 = 240 µs, wait by 120, idle by 40: transfer, from more operations (+4).
    # Computing 5200 → 4680 (−520), exposed +400 ≥ half of it: the verdict holds.
    base = write_profile(tmp_path, "base", comm_layer(1.0, 100.0) * 4)
    new = write_profile(tmp_path, "new", (comm_layer(0.9, 100.0) + [Comm("allReduce", 100.0)])
                        * 4)
    hidden = next(f for f in diff(base.path, new.path).analysis.findings
                  if f.id == "comm-hides-compute")
    assert hidden.data["growth_kind"] == "transfer"
    assert "mainly transfer (+0.24 ms per step;" in hidden.detail
    assert "from more operations (+4 per step)" in hidden.detail


def allreduce_parts(comm_files) -> dict[str, float]:
    """Elapse, transit, wait and idle of AllReduce per (rank, step), µs, straight from the
    communication.json files (2023 files carry a "Total Op Info" entry: skipped)."""
    sums, units = {"elapse": 0.0, "transit": 0.0, "wait": 0.0}, 0
    for path in comm_files:
        for groups in json.loads(Path(path).read_text()).values():
            units += 1
            for kind in ("collective", "p2p"):
                for name, op in groups.get(kind, {}).items():
                    if "allreduce" in name.lower() and "Total Op Info" not in name:
                        info = op["Communication Time Info"]
                        for part, key in (("elapse", "Elapse"), ("transit", "Transit"),
                                          ("wait", "Wait")):
                            sums[part] += info[f"{key} Time(ms)"] * 1000
    out = {part: value / units for part, value in sums.items()}
    out["idle"] = out["elapse"] - out["transit"] - out["wait"]
    return out


@pytest.mark.slow
def test_real_pair_idle_growth_is_not_the_reason_exposed_communication_fell(tmp_path):
    # MI-2023 (2 ranks) vs MI-2025 Level1 rank 0, both copied under tests/data: AllReduce
    # transit fell (5.40 → 3.68 ms per step), wait fell (110.14 → 5.94) and idle grew
    # (2.99 → 96.37); but exposed communication fell (148.96 → 101.96 ms), by collectives
    # that no longer run (AllGather, Broadcast): the fall is said by what fell, never by
    # the idle time that grew.
    mi = DATA / "realdata/Ascend__msinsight"
    base = tmp_path / "mi2023"
    base.mkdir()
    for rank in (0, 1):
        (base / f"test_rank_{rank}").symlink_to(mi / f"server/src/test/test_data/test_rank_{rank}")
    new = mi / "test/data/pytorch/text/level1/rank0_ascend_pt"
    want_base = allreduce_parts(base.glob("*/ASCEND_PROFILER_OUTPUT/communication.json"))
    want_new = allreduce_parts(new.glob("ASCEND_PROFILER_OUTPUT/communication.json"))
    assert want_base["idle"] == pytest.approx(2994.4, abs=0.1)
    assert want_new["idle"] == pytest.approx(96367.9, abs=0.1)
    cmp = diff(base, new).comparison
    assert cmp.step.breakdown["communication_not_overlapped"]["delta_us"] < 0
    kind, sentence, data = growth_kind(cmp)
    assert kind != "idle" and data["direction"] == -1.0
    assert "fewer operations (-2.5 per step)" in sentence  # AllGather -0.5, Broadcast -2
    allreduce = cmp.comm_types.set_index("comm_type").loc["AllReduce"]
    for part in ("transit", "wait", "idle"):  # the per-type figures still say what grew
        assert allreduce[f"base_{part}_us"] == pytest.approx(want_base[part])
        assert allreduce[f"new_{part}_us"] == pytest.approx(want_new[part])


# ================================================================ headline: Free growth


@pytest.mark.slow
@pytest.mark.parametrize("gap, free_named", [(16.0, True), (8.0, True), (4.0, False)])
def test_headline_names_every_part_of_a_fifth_of_the_step(tmp_path, gap, free_named):
    # New: every kernel +5 % and the launch gap 2 → ``gap`` µs. The builder accounts Free
    # from the schedule (Stage − |∪ kernels|). A part is named when it holds ≥ 20 % of the
    # step change, or when the parts named before it cover less than 80 % of it: Free
    # +364 of +964 µs (38 %) and +156 of +740 µs (21 %) are named, +52 of +628 µs (8 %,
    # computing +572 covering 91 %) is not.
    kernels = lambda op: isinstance(op, Kernel)  # noqa: E731
    base = write_profile(tmp_path, "base", STEP)
    new = write_profile(tmp_path, "new", scaled(STEP, 1.05, only=kernels), gap_us=gap)
    d_free = new.mean("Free") - base.mean("Free")
    d_comp = new.mean("Computing") - base.mean("Computing")
    d_step = new.mean("Stage") - base.mean("Stage")
    headline = diff(base.path, new.path).report.headline
    first, second = sorted([("computing", d_comp), ("Free (device idle)", d_free)],
                           key=lambda part: -abs(part[1]))
    assert f"{first[0]} {first[1] / 1000:+.2f} ms" in headline
    named = abs(second[1]) >= 0.2 * abs(d_step) or abs(d_step - first[1]) > 0.2 * abs(d_step)
    assert (f"{second[0]} {second[1] / 1000:+.2f} ms" in headline) is named
    assert named is free_named


# ================================================================ real data


@pytest.mark.slow
@needs_realdata
def test_st_level2_no_count_change_reads_as_slower():
    result = diff(ST_LEVEL2 / "rank_0_ascend_pt", ST_LEVEL2 / "rank_2_ascend_pt")
    ops = result.comparison.operators
    both = ops[(ops["base_instances"] > 0) & (ops["new_instances"] > 0)]
    counted = both[both["count_changed"]]
    assert len(counted) >= 9
    assert set(counted["status"]) <= {"count-changed", "reshaped"}
    # Cast 70 → 72 instances (p = 0.64) was "significantly slower".
    cast = ops[(ops["op_type"] == "Cast") & (ops["base_instances"] == 70)].iloc[0]
    assert (cast["new_instances"], cast["status"], bool(cast["significant"])) == (
        72, "count-changed", False)
    # significant means p < alpha, nothing else.
    tested = ops[ops["p_value"].notna()]
    assert (tested["significant"] == (tested["p_value"] < 0.05)).all()
    assert not ops.loc[ops["p_value"].isna(), "significant"].any()
    regressed = ops[ops["status"].isin(["regressed", "improved"])]
    assert (regressed["p_value"] < 0.05).all() and not regressed["count_changed"].any()
    assert (regressed["instance_change_pct"].abs() >= 5.0).all()


@pytest.mark.slow
@needs_realdata
@pytest.mark.parametrize("sub", ["", "rank0_ascend_pt"])
def test_mi_level1_vs_level2_calls_nothing_slower_or_faster(sub):
    """One run at two profiler levels: kernels of a few µs move by noise, ≥ 5 % for some,
    but with 2-4 instances a side none is established (not-significant or untested)."""
    result = diff(MI_TEXT / "level1" / sub, MI_TEXT / "level2" / sub)
    ops = result.comparison.operators
    assert set(ops["status"]) <= {"unchanged", "not-significant", "untested"}
    assert not ops["below_threshold"].any()  # no "significant but small" either
    big = ops["instance_change_pct"].abs() >= 5
    assert (ops.loc[big, "status"] != "unchanged").all()
    assert (ops.loc[~big, "status"] == "unchanged").all()
    assert result.comparison.step.status == "unchanged"
    assert result.analysis.findings == ()
    # One run at two profiler levels: kernel figures explain Computing to the µs.
    split = result.analysis.compute
    assert abs(split.rest_us) < 0.1 and split.changed_work_us == 0.0


@pytest.mark.parametrize("slower, gate_pct, code, status", [
    (1.04, "3", 0, "unchanged"),   # 4 % < the one-step 5 %: no test, no failure
    (1.06, "3", 1, "regressed"),   # 6 % ≥ max(3, 5)
    (1.06, "7", 0, "regressed"),   # 6 % ≥ 5 %: regressed, but under the 7 % gate
    (1.08, "7", 1, "regressed"),   # 8 % ≥ max(7, 5)
])
def test_one_step_gate_follows_the_readme_rule(tmp_path, slower, gate_pct, code, status):
    """README: with one step per side no test is possible, a 5 % threshold alone decides;
    the gate fails only at max(PCT, 5 %) — a noisy single capture cannot fail a CI job at
    3 %."""
    base = write_profile(tmp_path, "base", STEP, steps=(1,))
    new = write_profile(tmp_path, "new", scaled(STEP, slower), steps=(1,))
    got, report = cli(base.path, new.path, tmp_path / "out", "--fail-on-regression", gate_pct)
    assert report["step"]["significance"] == "unknown"
    assert report["step"]["delta_pct"] == pytest.approx((slower - 1) * 100, abs=0.3)
    assert (got, report["step"]["status"]) == (code, status)
