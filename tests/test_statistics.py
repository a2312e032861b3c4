"""Honest statistics: noise is `~`, real changes are found, the step gate is fair.

Unit tests of cann_diff.compare.stats on tiny samples whose answers are computed by hand,
then end-to-end pairs written by tests/profiles.py:

* LAYER ×4 per step with a data-parallel AllReduce overlapped in the middle,
  1 rank, 5 steps; 8 operator keys (RmsNorm, 3 MatMulV3 shapes,
  FlashAttentionScore, SwiGlu, ForeachMulScalar, AllReduce).
* noise: every kernel instance × exp(N(0, 0.025)), seeds fixed (deterministic).
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from profiles import Comm, aclnn, scaled, write_profile
from scipy import stats as sps

from cann_diff import format as fmt
from cann_diff.cli import main
from cann_diff.compare.stats import (
    adjust_bh,
    compare_samples,
    compare_steps,
    ratio_interval,
    status_of,
)
from cann_diff.pipeline import Options, diff
from cann_diff.settings import Thresholds

NOISE = 0.025
STEPS5 = (1, 2, 3, 4, 5)
ATTN = "1,16,4096,128;1,16,4096,128"


def layer():
    return [aclnn("RmsNorm", 42.0, "4096,4096;4096", "AI_VECTOR_CORE"),
            aclnn("MatMulV3", 610.0, "4096,4096;4096,6144"),
            aclnn("FlashAttentionScore", 880.0, ATTN, "MIX_AIC"),
            aclnn("MatMulV3", 400.0, "4096,2048;2048,4096"),
            Comm("allReduce", 300.0),
            aclnn("SwiGlu", 95.0, "4096,11008", "AI_VECTOR_CORE"),
            aclnn("MatMulV3", 780.0, "4096,5504;5504,4096")]


STEP = [*layer(), *layer(), Comm("allReduce", 1500.0, exposed=False, group="dp"),
        *layer(), *layer(), aclnn("ForeachMulScalar", 220.0, "4096,4096", "AI_VECTOR_CORE")]
N_KEYS = 8


def run_cli(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


def cli_report(base, new, out, *args):
    """Run the CLI (no charts); return (exit code, report.json, report.md, output)."""
    result = run_cli(base, new, "-o", out, "-q", "--no-charts", *args)
    assert result.exit_code in (0, 1), result.output
    return (result.exit_code, json.loads((out / "report.json").read_text()),
            (out / "report.md").read_text(), result.output)


def statuses(report: dict) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for op in report["operators"]:
        out.setdefault(op["status"], []).append(op["op_type"])
    return out


# ================================================================ stats units


@pytest.mark.parametrize("raw, want", [
    # m = 4, sorted 0.01 0.03 0.04 0.2 → p·m/rank 0.04 0.06 0.0533 0.2, then the
    # running minimum from the top: 0.04 0.0533 0.0533 0.2 (original order below).
    ([0.01, 0.04, 0.03, 0.2], [0.04, 0.16 / 3, 0.16 / 3, 0.2]),
    # NaN = untested: left out of m. m = 2: 0.01·2/1 = 0.02, 0.04·2/2 = 0.04.
    ([0.01, math.nan, 0.04], [0.02, math.nan, 0.04]),
    # m = 3, all 0.5: 0.5·3/3 = 0.5 for every rank.
    ([0.5, 0.5, 0.5], [0.5, 0.5, 0.5]),
    # capped at 1: 0.9·2/1 = 1.8 → min(1.8, 0.9·2/2 = 0.9) = 0.9.
    ([0.9, 0.9], [0.9, 0.9]),
    ([math.nan], [math.nan]),
])
def test_adjust_bh_hand_values(raw, want):
    got = adjust_bh(np.array(raw))
    np.testing.assert_allclose(got, want, rtol=1e-9, equal_nan=True)


@pytest.mark.parametrize("sample", [[10.0, 11.0, 12.0, 13.0, 14.0], [7.0] * 6])
def test_compare_samples_identical_is_p_one(sample):
    test = compare_samples(np.array(sample), np.array(sample))
    assert test.p_value == pytest.approx(1.0)
    assert test.ci_low <= 1.0 <= test.ci_high


def test_compare_samples_empty_side_is_untested():
    test = compare_samples(np.array([]), np.array([1.0, 2.0]))
    assert (test.p_value, test.ci_low, test.ci_high) == (None, None, None)


def test_compare_samples_separated_samples_are_significant():
    # 6 vs 6, fully separated: exact two-sided MWU p = 2 / C(12, 6) = 2/924.
    test = compare_samples(np.arange(10.0, 16.0), np.arange(20.0, 26.0))
    assert test.p_value == pytest.approx(2 / 924, rel=1e-6)


def test_ratio_interval_covers_an_exact_20pct_shift():
    rng = np.random.default_rng(1)
    base = 500.0 * rng.lognormal(0.0, 0.03, 40)
    low, high = ratio_interval(base, base * 1.2)
    assert low <= 1.2 <= high
    assert low > 1.0  # excludes "no change"
    assert high / low < 1.05  # and is tight for 3 % noise and 40 samples


def test_ratio_interval_covers_20pct_shift_independent_draws():
    rng = np.random.default_rng(7)
    base = 500.0 * rng.lognormal(0.0, 0.03, 30)
    new = 600.0 * rng.lognormal(0.0, 0.03, 30)
    low, high = ratio_interval(base, new)
    assert low <= 1.2 <= high and low > 1.0


def test_ratio_interval_needs_two_samples_a_side():
    assert ratio_interval(np.array([1.0]), np.array([1.0, 2.0])) == (None, None)


@pytest.mark.parametrize("base, new", [([100.0], [110.0]), ([100.0], [110.0, 111.0, 109.0]),
                                       ([], [])])
def test_compare_steps_one_step_has_no_test(base, new):
    test = compare_steps(np.array(base), np.array(new))
    assert (test.p_value, test.ci_low, test.ci_high) == (None, None, None)


def test_compare_steps_welch_on_logs_3_vs_3_by_hand():
    # Welch's t-test on log step times (the rule changed from raw times: a ratio interval
    # that cannot go negative, log-normal step noise). base 10 11 12, new 13 14 15:
    # log means mb = (ln 10 + ln 11 + ln 12)/3 = 2.39513, mn = (ln 13 + ln 14 + ln 15)/3
    # = 2.63735; sample variances of the logs 0.0083160 and 0.0051216; SE² = (vb + vn)/3
    # = 0.0044792, t = 0.24222 / 0.066927 = 3.6192; Welch df = SE⁴ / ((vb/3)²/2 +
    # (vn/3)²/2) = 3.7860; p = 2·P(T_df > t) ≈ 0.0246.
    lb = [math.log(v) for v in (10, 11, 12)]
    ln = [math.log(v) for v in (13, 14, 15)]
    mb, mn = sum(lb) / 3, sum(ln) / 3
    vb = sum((x - mb) ** 2 for x in lb) / 2
    vn = sum((x - mn) ** 2 for x in ln) / 2
    se2 = vb / 3 + vn / 3
    t = (mn - mb) / math.sqrt(se2)
    df = se2 ** 2 / ((vb / 3) ** 2 / 2 + (vn / 3) ** 2 / 2)
    assert t == pytest.approx(3.6192, abs=1e-3) and df == pytest.approx(3.7860, abs=1e-3)
    p = 2 * sps.t.sf(t, df)
    assert p == pytest.approx(0.0246, abs=5e-4)
    test = compare_steps(np.array([10.0, 11.0, 12.0]), np.array([13.0, 14.0, 15.0]))
    assert test.p_value == pytest.approx(p, rel=1e-6)
    # The interval of the ratio of geometric means: exp((mn − mb) ± t(0.975, df)·SE)
    # = exp(0.24222 ± 0.19003) = [1.0536, 1.5407]; it excludes 1 as p < 0.05 says.
    half = sps.t.ppf(0.975, df) * math.sqrt(se2)
    assert test.ci_low == pytest.approx(math.exp(mn - mb - half), rel=1e-6)
    assert test.ci_high == pytest.approx(math.exp(mn - mb + half), rel=1e-6)
    assert test.ci_low > 1.0


def test_ratio_interval_uses_the_exact_order_statistics():
    # n = m = 10: C = floor(50 − 1.95996·√(100·21/12)) = floor(50 − 25.93) = 24, so the
    # 95 % interval is [D(24), D(77)] of the 100 sorted log-differences (1-based).
    base = np.exp(np.arange(10) * 0.01)
    new = np.exp(np.arange(10) * 0.013 + 0.2)
    diffs = np.sort(np.subtract.outer(np.log(new), np.log(base)).ravel())
    low, high = ratio_interval(base, new)
    assert low == pytest.approx(math.exp(diffs[23]))
    assert high == pytest.approx(math.exp(diffs[76]))


def test_ratio_interval_bounds_are_ratios_of_two_samples_exactly():
    # A bound is one pair's ratio new[i] / base[j], one correctly rounded division: the
    # same bits on every CPU (exp of a log difference differed in its last digit).
    base = np.array([3.0, 7.0, 11.0, 13.0, 17.0, 19.0, 23.0])
    new = np.array([5.0, 9.0, 14.0, 15.0, 21.0, 29.0, 31.0])
    ratios = {float(n / b) for n in new for b in base}
    low, high = ratio_interval(base, new)
    assert low in ratios and high in ratios
    # n = m = 7: C = floor(24.5 − 1.95996·√(49·15/12)) = floor(24.5 − 15.34) = 9, so the
    # interval is [R(9), R(41)] of the 49 sorted ratios (1-based).
    ordered = sorted(float(n / b) for n in new for b in base)
    assert (low, high) == (ordered[8], ordered[40])


def test_ratio_interval_of_ordered_samples_takes_the_same_order_statistics():
    # Above max_pairs a side is cut to evenly spaced order statistics: positions
    # round(linspace(0, n - 1, k)) of the sorted sample. Samples that come ordered (the
    # comparison's slices) are not sorted again; the interval must not change.
    rng = np.random.default_rng(7)
    base = np.sort(rng.lognormal(3.0, 0.2, 5_000).round(3))
    new = np.sort(rng.lognormal(3.1, 0.2, 4_000).round(3))
    k = 100
    picks_b = np.linspace(0, len(base) - 1, k).round().astype(int)
    picks_n = np.linspace(0, len(new) - 1, k).round().astype(int)
    ratios = np.sort(np.divide.outer(new[picks_n], base[picks_b]).ravel())
    # k = 100 a side: C = floor(5000 − 1.95996·√(10⁴·201/12)) = floor(5000 − 802.1) = 4197.
    c = math.floor(k * k / 2 - 1.959963984540054 * math.sqrt(k * k * (2 * k + 1) / 12))
    assert c == 4197
    want = (float(ratios[c - 1]), float(ratios[k * k - c]))
    assert ratio_interval(base, new, max_pairs=k, ordered=True) == want
    shuffled_b, shuffled_n = rng.permutation(base), rng.permutation(new)
    assert ratio_interval(shuffled_b, shuffled_n, max_pairs=k) == want


def test_compare_steps_identical_steps():
    test = compare_steps(np.array([100.0, 102.0, 98.0]), np.array([100.0, 102.0, 98.0]))
    assert test.p_value == pytest.approx(1.0)


@pytest.mark.parametrize("delta, significant, want", [
    (6.0, True, "regressed"), (6.0, False, "unchanged"), (6.0, None, "regressed"),
    (5.0, True, "regressed"), (4.9, True, "unchanged"), (4.9, None, "unchanged"),
    (-5.0, True, "improved"), (-30.0, False, "unchanged"), (-10.0, None, "improved"),
    (math.nan, True, "unchanged"),
])
def test_status_rules(delta, significant, want):
    assert status_of(delta, significant, Thresholds().threshold_pct) == want


def test_unchanged_is_shown_as_tilde():
    assert fmt.status_mark("unchanged", 3.2) == "~"
    assert fmt.status_mark("regressed", 7.25) == "+7.2%"


# ================================================================ A/A and noise


@pytest.fixture(scope="module")
def noisy(tmp_path_factory):
    """Base and five reruns (seeds 1..5) of the same schedule, 5 steps, σ = 2.5 %."""
    root = tmp_path_factory.mktemp("noise")
    base = write_profile(root, "base", STEP, steps=STEPS5, noise=NOISE, seed=100)
    reruns = [write_profile(root, f"rerun{seed}", STEP, steps=STEPS5, noise=NOISE, seed=seed)
              for seed in range(1, 6)]
    return base, reruns


@pytest.mark.slow
def test_a_run_against_itself(noisy, tmp_path):
    base, _ = noisy
    code, report, md, _ = cli_report(base.path, base.path, tmp_path / "aa",
                                     "--fail-on-regression", "1")
    assert code == 0
    assert set(statuses(report)) == {"unchanged"}
    assert len(report["operators"]) == N_KEYS
    assert report["step"]["status"] == "unchanged"
    assert report["step"]["delta_us"] == pytest.approx(0.0)
    assert report["step"]["p_value"] == pytest.approx(1.0)
    assert not [f for f in report["findings"]]
    assert f"{N_KEYS} operator key(s) unchanged in all" in md


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(1, 6))
def test_noise_only_rerun_is_all_unchanged(noisy, tmp_path, seed):
    base, reruns = noisy
    code, report, md, output = cli_report(base.path, reruns[seed - 1].path, tmp_path / "n",
                                          "--fail-on-regression", "1")
    assert code == 0, output
    assert set(statuses(report)) == {"unchanged"}, statuses(report)
    assert report["step"]["status"] == "unchanged"
    assert abs(report["step"]["delta_pct"]) < 1.0  # noise only: the step barely moves
    assert not {f["id"] for f in report["findings"]} & {"op-regression", "op-improvement",
                                                        "comm-hides-compute"}
    assert "No operator regressed per instance, significantly" in md
    assert "No operator improved per instance, significantly" in md


@pytest.mark.slow
@pytest.mark.parametrize("factor, op_type, status, finding", [
    (1.25, "FlashAttentionScore", "regressed", "op-regression"),
    (0.75, "SwiGlu", "improved", "op-improvement"),
])
def test_injected_change_on_one_operator(noisy, tmp_path, factor, op_type, status, finding):
    base, _ = noisy
    schedule = scaled(STEP, factor, only=lambda op: getattr(op, "type", "") == op_type)
    new = write_profile(tmp_path, "new", schedule, steps=STEPS5, noise=NOISE, seed=3)
    report = diff(base.path, new.path).report.to_dict()
    moved = [op for op in report["operators"] if op["status"] != "unchanged"]
    assert [(op["op_type"], op["status"]) for op in moved] == [(op_type, status)]
    op = moved[0]
    assert op["significant"] is True and op["p_value"] < 0.001
    assert op["delta_pct"] == pytest.approx((factor - 1) * 100, abs=3.0)
    assert op["ci_low"] <= factor <= op["ci_high"]
    assert not op["ci_low"] <= 1.0 <= op["ci_high"]
    found = {f["id"]: f for f in report["findings"]}
    assert found[finding]["title"].startswith("1 operator(s)")
    other = "op-improvement" if finding == "op-regression" else "op-regression"
    assert other not in found


@pytest.mark.slow
def test_report_json_carries_statistics_per_operator_and_step(noisy, tmp_path):
    base, _ = noisy
    schedule = scaled(STEP, 1.25, only=lambda op: getattr(op, "type", "") == "SwiGlu")
    new = write_profile(tmp_path, "new", schedule, steps=STEPS5, noise=NOISE, seed=4)
    _, report, _, _ = cli_report(base.path, new.path, tmp_path / "out")
    for op in report["operators"]:
        for key in ("p_value", "significant", "status", "ci_low", "ci_high"):
            assert key in op, key
        assert 0.0 <= op["p_value"] <= 1.0
        assert isinstance(op["significant"], bool)
        assert op["significant"] == (op["p_value"] < 0.05)
        assert 0 < op["ci_low"] <= op["ci_high"]
    step = report["step"]
    for key in ("p_value", "significant", "status", "ci_low", "ci_high"):
        assert key in step, key
    assert 0.0 <= step["p_value"] <= 1.0 and isinstance(step["significant"], bool)
    ratio = step["new_us"] / step["base_us"]
    assert step["ci_low"] <= ratio <= step["ci_high"]
    assert len(step["base_samples"]) == len(step["new_samples"]) == 5


# ================================================================ the step gate


@pytest.mark.slow
def test_step_regression_10pct_fails_the_gate(noisy, tmp_path):
    base, _ = noisy
    new = write_profile(tmp_path, "new", scaled(STEP, 1.10), steps=STEPS5, noise=NOISE,
                        seed=5)
    code, report, _, output = cli_report(base.path, new.path, tmp_path / "out",
                                         "--fail-on-regression", "5")
    # Kernels +10 %, the 2 µs gaps unchanged: the step grows by just under 10 %.
    assert report["step"]["delta_pct"] == pytest.approx(10.0, abs=1.0)
    assert report["step"]["significant"] is True
    assert report["step"]["status"] == "regressed"
    assert code == 1
    assert "gate failed" in output
    # The same change under a 15 % gate passes.
    code, _, _, _ = cli_report(base.path, new.path, tmp_path / "out15",
                               "--fail-on-regression", "15")
    assert code == 0


@pytest.fixture(scope="module")
def one_step(tmp_path_factory):
    """One step per side, no noise: step 12 → +10 % and +3 % variants."""
    root = tmp_path_factory.mktemp("one")
    base = write_profile(root, "base", STEP, steps=(12,))
    plus10 = write_profile(root, "plus10", scaled(STEP, 1.10), steps=(12,))
    plus3 = write_profile(root, "plus3", scaled(STEP, 1.03), steps=(12,))
    return base, plus10, plus3


@pytest.mark.slow
def test_one_step_per_side_threshold_decides_with_footnote(one_step, tmp_path):
    base, plus10, _ = one_step
    code, report, md, _ = cli_report(base.path, plus10.path, tmp_path / "out",
                                     "--fail-on-regression", "5")
    step = report["step"]
    assert step["p_value"] is None and step["significant"] is False
    assert step["significance"] == "unknown"
    assert step["status"] == "regressed"  # +9.9 % ≥ 5 %: the threshold alone decides
    assert code == 1
    assert any("one step per side" in w for w in report["warnings"])
    assert "significance: unknown" in md
    notes = md[md.index("## Notes"):]
    assert "significance of the step change is unknown" in notes


@pytest.mark.slow
def test_one_step_per_side_small_change_is_unchanged(one_step, tmp_path):
    base, _, plus3 = one_step
    code, report, md, _ = cli_report(base.path, plus3.path, tmp_path / "out",
                                     "--fail-on-regression", "5")
    assert report["step"]["significance"] == "unknown"
    assert report["step"]["status"] == "unchanged"  # +3 % < 5 %
    assert code == 0
    assert "significance unknown" in report["headline"]


# ================================================================ step selection


def warm_up_schedule(rank: int, step: int):
    """Step 1 is a warm-up: every kernel 3× slower (new run only)."""
    return scaled(STEP, 3.0) if step == 1 else STEP


@pytest.mark.slow
def test_steps_option_selects_steps(tmp_path):
    steps = (1, 2, 3, 4, 5, 6)
    base = write_profile(tmp_path, "base", STEP, steps=steps, noise=NOISE, seed=11)
    new = write_profile(tmp_path, "new", warm_up_schedule, steps=steps, noise=NOISE, seed=12)
    _, whole, _, _ = cli_report(base.path, new.path, tmp_path / "whole")
    assert whole["base"]["steps"] == list(steps)
    # Rule change: the warm-up step is screened out of the step comparison by default, at
    # the same position on both sides (base's ordinary step 1 goes with it: no side keeps a
    # position the other loses); over all steps new ≈ (3 + 5)/6 = 1.33× base.
    step = diff(base.path, new.path).comparison.step
    assert [(s.side, s.step, s.reason) for s in step.screened] == [("base", 1, "paired"),
                                                                    ("new", 1, "warm-up")]
    assert step.all_steps.delta_pct > 20
    assert abs(step.delta_pct) < 1.0
    assert step.base_steps == step.new_steps == (2, 3, 4, 5, 6)
    _, chosen, _, _ = cli_report(base.path, new.path, tmp_path / "chosen", "--steps", "2-")
    assert chosen["base"]["steps"] == chosen["new"]["steps"] == [2, 3, 4, 5, 6]
    assert len(chosen["step"]["base_samples"]) == len(chosen["step"]["new_samples"]) == 5
    assert chosen["step"]["status"] == "unchanged"
    assert abs(chosen["step"]["delta_pct"]) < 1.0
    assert set(statuses(chosen)) == {"unchanged"}
    assert not any("different steps" in w for w in chosen["warnings"])
    _, picked, _, _ = cli_report(base.path, new.path, tmp_path / "picked", "--steps", "2-3,5")
    assert picked["new"]["steps"] == [2, 3, 5]


@pytest.mark.slow
def test_differing_step_sets_warn(tmp_path):
    base = write_profile(tmp_path, "base", STEP, steps=(1, 2, 3, 4, 5), noise=NOISE, seed=21)
    new = write_profile(tmp_path, "new", STEP, steps=(3, 4, 5, 6, 7), noise=NOISE, seed=22)
    _, report, md, _ = cli_report(base.path, new.path, tmp_path / "out")
    warning = [w for w in report["warnings"] if "different steps" in w]
    assert warning == ["the runs cover different steps (base 1,2,3,4,5, new 3,4,5,6,7); "
                       "figures are per-step averages"]
    assert warning[0] in md[md.index("## Notes"):]
    _, same, _, _ = cli_report(base.path, new.path, tmp_path / "same", "--steps", "3-5")
    assert not any("different steps" in w for w in same["warnings"])


def test_library_steps_option(tmp_path):
    base = write_profile(tmp_path, "base", STEP, steps=(1, 2, 3), noise=NOISE, seed=31)
    result = diff(base.path, base.path, Options(steps=[(2, 2)]))
    assert result.comparison.base_steps == result.comparison.new_steps == (2,)
    assert result.report.step.p_value is None  # one step left per side


# ================================================================ Markdown `~`


def test_a_large_change_too_few_instances_to_test_is_untested(tmp_path):
    # Cast runs once, in step 1 only: 1 instance per side, 20 → 26 µs (+30 %):
    # Mann-Whitney on 1 vs 1 cannot reach p < 0.05 (its smallest p is 2 / C(2, 1) = 1)
    # → status untested, p_value null, shown with its change; never "unchanged".
    def schedule(cast_us):
        def build(rank, step):
            extra = [aclnn("Cast", cast_us, "4096,4096", "AI_VECTOR_CORE")] if step == 1 else []
            return [*STEP, *extra]
        return build

    base = write_profile(tmp_path, "base", schedule(20.0), steps=(1, 2, 3))
    new = write_profile(tmp_path, "new", schedule(26.0), steps=(1, 2, 3))
    _, report, md, _ = cli_report(base.path, new.path, tmp_path / "out")
    cast = next(op for op in report["operators"] if op["op_type"] == "Cast")
    assert cast["status"] == "untested" and cast["delta_pct"] == pytest.approx(30.0)
    assert cast["p_value"] is None and cast["tested"] is False
    rows = [line for line in md.splitlines() if line.startswith("| Cast")]
    assert rows and "| +30.0% untested " in rows[0]


def test_the_smallest_signed_rank_p_of_many_pairs_does_not_overflow():
    from cann_diff.compare import stats

    assert stats.smallest_p_signed_rank(4) == 2 / 16
    assert stats.smallest_p_signed_rank(3200) == 0.0  # 2 / 2^3200 underflows, never raises
    assert stats.smallest_p_signed_rank(0) == 1.0
