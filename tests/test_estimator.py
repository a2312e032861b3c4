"""One estimator per key: the p-value method as documented, the Hodges-Lehmann centre, no
per-instance verdict on other work, and operator findings that count their table's rows.

Oracles: ``scipy.stats.mannwhitneyu`` with the method the rule names, brute-force medians
and order statistics of every pairwise ratio, kernel names counted with pandas in the real
files, and crafted profiles whose figures are worked out below.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from statistics import NormalDist

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from conftest import REALDATA, needs_realdata
from profiles import aclnn, write_profile
from scipy import stats

from cann_diff.cli import main
from cann_diff.compare.collectives import Paired, paired_ratio
from cann_diff.compare.operators import no_shapes_note
from cann_diff.compare.stats import (
    EXACT_MAX_PAIRS,
    hodges_lehmann_by_group,
    mann_whitney_tests,
    ratio_estimate,
    sorted_samples,
)
from cann_diff.pipeline import diff
from cann_diff.settings import DEFAULT_THRESHOLDS

MSINSIGHT = "test/data/pytorch/text"
BASE_TEXT = REALDATA / "Ascend__msinsight@c1e639ee2" / MSINSIGHT
NEW_TEXT = REALDATA / "Ascend__msinsight" / MSINSIGHT

# ================================================================ p-values: exact or not

RNG = np.random.default_rng(11)


def _untied(n_base: int, n_new: int, shift: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Distinct durations on the nanosecond grid, new ``shift`` spreads above base."""
    raw = np.concatenate([RNG.normal(0, 1, n_base), RNG.normal(shift, 1, n_new)])
    values = np.round(10.0 + raw.argsort().argsort() * 0.001, 3)
    return values[:n_base], values[n_base:]


# (name, base, new, method the rule names): exact without ties while n·m ≤ the bound.
CASES = [
    ("9 vs 9 untied", *_untied(9, 9, 1.0), "exact"),
    ("16 vs 16 untied: scipy's default would approximate", *_untied(16, 16, 1.0), "exact"),
    ("100 vs 100 at the bound", *_untied(100, 100, 0.4), "exact"),
    ("101 vs 100 over the bound", *_untied(101, 100, 0.4), "asymptotic"),
    ("3 vs 5 with a tie", np.array([1.0, 2.0, 3.0]), np.array([3.0, 4.0, 5.0, 6.0, 7.0]),
     "asymptotic"),
    ("20 vs 30 with ties", np.round(RNG.normal(10, 1, 20), 1),
     np.round(RNG.normal(10.5, 1, 30), 1), "asymptotic"),
]


def test_the_bound_is_the_documented_one():
    assert EXACT_MAX_PAIRS == 10_000
    assert 100 * 100 <= EXACT_MAX_PAIRS < 101 * 100


def test_p_values_equal_scipy_with_the_method_the_rule_names():
    groups = [(np.full(len(b), g), b, np.full(len(n), g), n) for g, (_, b, n, _) in
              enumerate(CASES)]
    base_group, base, new_group, new = (np.concatenate(part) for part in zip(*groups))
    order = RNG.permutation(len(base))  # the one pass must not lean on the input order
    p, exact = mann_whitney_tests(base_group[order], base[order], new_group, new, len(CASES))
    for g, (name, b, n, method) in enumerate(CASES):
        want = stats.mannwhitneyu(b, n, alternative="two-sided", method=method).pvalue
        assert p[g] == pytest.approx(want, rel=1e-9), name
        assert bool(exact[g]) is (method == "exact"), name


def test_fully_separated_16_vs_16_by_hand():
    # Every new value above every base value: U = 256, the most extreme of the C(32, 16)
    # orderings on either side, so the exact p is 2 / C(32, 16) = 3.33e-9; the normal
    # approximation says 1.5e-6 (z = (256 − 128 − 0.5) / √(256·33/12)).
    base, new = np.arange(16.0), np.arange(16.0) + 100
    p, exact = mann_whitney_tests(np.zeros(16, int), base, np.zeros(16, int), new, 1)
    assert exact[0] and p[0] == pytest.approx(2 / math.comb(32, 16), rel=1e-12)
    z = (256 - 128 - 0.5) / math.sqrt(256 * 33 / 12)
    assert 2 * NormalDist().cdf(-z) == pytest.approx(1.5e-6, rel=0.05)


def test_identical_constant_sides_are_exactly_one():
    p, exact = mann_whitney_tests(np.zeros(4, int), np.full(4, 7.0), np.zeros(5, int),
                                  np.full(5, 7.0), 1)
    assert p[0] == 1.0 and exact[0]  # every arrangement gives the same U


@pytest.mark.slow
def test_many_sizes_share_their_null_distribution_and_stay_exact():
    # 300 keys of 1-60 instances a side, untied: each equals scipy's exact p.
    sizes = RNG.integers(1, 60, (300, 2))
    base_group = np.repeat(np.arange(300), sizes[:, 0])
    new_group = np.repeat(np.arange(300), sizes[:, 1])
    values = RNG.permutation(len(base_group) + len(new_group)) * 0.001 + 1.0
    base, new = values[:len(base_group)], values[len(base_group):]
    p, exact = mann_whitney_tests(base_group, base, new_group, new, 300)
    assert exact.all()
    want = [stats.mannwhitneyu(base[base_group == g], new[new_group == g],
                               method="exact").pvalue for g in range(300)]
    np.testing.assert_allclose(p, want, rtol=1e-9, atol=0)


# ================================================================ Hodges-Lehmann


def _brute(base: np.ndarray, new: np.ndarray, confidence: float = 0.95):
    """Median of every pairwise ratio new/base and the interval's order statistics."""
    ratios = np.sort(np.divide.outer(new, base).ravel())
    n, m = len(base), len(new)
    c = math.floor(n * m / 2 - NormalDist().inv_cdf(0.5 + confidence / 2)
                   * math.sqrt(n * m * (n + m + 1) / 12))
    bounds = (ratios[c - 1], ratios[n * m - c]) if c >= 1 else (None, None)
    return float(np.median(ratios)), *bounds


@pytest.mark.parametrize("n_base, n_new", [(1, 1), (2, 3), (4, 4), (5, 5), (7, 12), (40, 31)])
def test_hodges_lehmann_centre_is_the_median_of_pairwise_ratios(n_base, n_new):
    base = np.round(RNG.lognormal(3.0, 0.4, n_base), 3)
    new = np.round(RNG.lognormal(3.1, 0.4, n_new), 3)
    centre, low, high = ratio_estimate(base, new)
    want_centre, want_low, want_high = _brute(base, new)
    assert centre == want_centre
    if want_low is None or min(n_base, n_new) < 2:
        assert (low, high) == (None, None)
    else:
        assert (low, high) == (want_low, want_high)
        assert low <= centre <= high


def test_every_group_at_once_equals_each_alone():
    # Groups of every size, several sharing sizes (they are partitioned together), zero
    # durations (left out) and sides above 300 (read as 300 evenly spaced order statistics).
    sizes = np.vstack([RNG.integers(0, 25, (200, 2)), [[400, 350], [1000, 5], [3, 700]]])
    n = len(sizes)
    base_group = np.repeat(np.arange(n), sizes[:, 0])
    new_group = np.repeat(np.arange(n), sizes[:, 1])
    base = np.round(RNG.lognormal(3.0, 0.5, len(base_group)), 3)
    new = np.round(RNG.lognormal(3.1, 0.5, len(new_group)), 3)
    base[::23] = 0.0
    base_group, base = sorted_samples(base_group, base, n)
    new_group, new = sorted_samples(new_group, new, n)
    centre, low, high = hodges_lehmann_by_group(base_group, base, new_group, new, n)
    for g in range(n):
        b, m = base[base_group == g], new[new_group == g]
        alone = ratio_estimate(b, m, ordered=True)
        if alone[0] is None:
            assert np.isnan(centre[g])
            continue
        assert centre[g] == alone[0]
        if min(len(b), len(m)) < DEFAULT_THRESHOLDS.min_ci_instances or alone[1] is None:
            assert np.isnan(low[g]) and np.isnan(high[g])
        else:
            assert (low[g], high[g]) == alone[1:]
        if len(b) <= 300 and len(m) <= 300:  # no subsample: the brute force itself
            assert centre[g] == _brute(b[b > 0], m)[0]


def test_the_operator_estimate_is_the_hodges_lehmann_centre_of_its_durations(tmp_path):
    # SwiGlu 4 per step × 5 steps a side, 12 % slower, noise 2 %: the % a table prints
    # and the interval beside it come from the durations in kernel_details.csv.
    def schedule(factor):
        return [aclnn("RmsNorm", 40.0, "4096,8192;8192"),
                *[aclnn("SwiGlu", 95.0 * factor, "4096,22016")] * 4]
    base = write_profile(tmp_path, "base", schedule(1.0), steps=(1, 2, 3, 4, 5), noise=0.02,
                         seed=1)
    new = write_profile(tmp_path, "new", schedule(1.12), steps=(1, 2, 3, 4, 5), noise=0.02,
                        seed=2)
    durations = []
    for built in (base, new):
        [csv] = Path(built.path).glob("*/ASCEND_PROFILER_OUTPUT/kernel_details.csv")
        rows = pd.read_csv(csv)
        durations.append(rows.loc[rows["Type"] == "SwiGlu", "Duration(us)"].to_numpy(float))
    centre, low, high = _brute(*durations)
    swiglu = diff(base.path, new.path).comparison.operators.set_index("op_type").loc["SwiGlu"]
    assert swiglu["instance_change_pct"] == pytest.approx((centre - 1) * 100, abs=1e-9)
    assert (swiglu["ci_low"], swiglu["ci_high"]) == pytest.approx((low, high), abs=1e-12)
    assert swiglu["ci_low"] <= centre <= swiglu["ci_high"]
    assert swiglu["status"] == "regressed"
    untied = len(np.unique(np.concatenate(durations))) == 40
    assert swiglu["p_method"] == ("exact" if untied else "asymptotic")


def test_paired_totals_carry_their_own_interval():
    # Five pairs: R = Σnew/Σbase = 165/150 = 1.1; residuals new − 1.1·base =
    # [0, 0, −3, 0, 3]: s² = 18/4, se(R) = √(4.5/5)/30 = 0.031623; the interval is
    # R·exp(±1.96·se/R) = [1.0407, 1.1627]. Below five pairs there is none.
    pairs = Paired(np.array([10.0, 20.0, 30.0, 40.0, 50.0]),
                   np.array([11.0, 22.0, 30.0, 44.0, 58.0]))
    ratio, low, high = paired_ratio(pairs, 0.95, 5)
    se = math.sqrt(4.5 / 5) / 30
    z = NormalDist().inv_cdf(0.975)
    assert ratio == pytest.approx(1.1)
    assert (low, high) == pytest.approx((1.1 * math.exp(-z * se / 1.1),
                                         1.1 * math.exp(z * se / 1.1)))
    short = Paired(pairs.base_us[:4], pairs.new_us[:4])
    assert np.isnan(paired_ratio(short, 0.95, 5)[1])


# ================================================================ no shapes, no verdict


def _level0_pair(tmp_path):
    """Level0 (no shapes): RmsNorm ×4 per step both sides, 20 % slower in new; Cast ×6 of
    20 µs in base, ×2 of 50 µs in new (other casts); 5 steps, noise 1 %."""
    def schedule(rms_us, casts, cast_us):
        return [*[aclnn("RmsNorm", rms_us)] * 4, *[aclnn("Cast", cast_us)] * casts]
    base = write_profile(tmp_path, "base", schedule(40.0, 6, 20.0), steps=(1, 2, 3, 4, 5),
                         noise=0.01, seed=3, level0=True)
    new = write_profile(tmp_path, "new", schedule(48.0, 2, 50.0), steps=(1, 2, 3, 4, 5),
                        noise=0.01, seed=4, level0=True)
    return diff(base.path, new.path)


@pytest.mark.slow
def test_a_type_without_shapes_is_judged_per_instance_only_at_equal_counts(tmp_path):
    result = _level0_pair(tmp_path)
    ops = result.comparison.operators.set_index("op_type")
    rms, cast = ops.loc["RmsNorm"], ops.loc["Cast"]
    assert (rms["base_count"], rms["new_count"]) == (4, 4)
    assert rms["per_instance"] and rms["status"] == "regressed"
    assert rms["instance_change_pct"] == pytest.approx(20.0, abs=2.0)
    # Cast 6 → 2 per step: other work under one name, compared by totals only.
    assert (cast["base_count"], cast["new_count"]) == (6, 2)
    assert not cast["per_instance"] and cast["status"] == "count-changed"
    assert np.isnan(cast["instance_change_pct"]) and np.isnan(cast["p_value"])
    assert cast["p_method"] is None and not cast["tested"]
    # Δ = 2·50 − 6·20 = −20 µs per step (within the noise), all of it count effect.
    assert cast["delta_us"] == pytest.approx(-20.0, abs=3.0)
    assert cast["count_effect_us"] == cast["delta_us"] and cast["instance_effect_us"] == 0
    split = result.analysis.compute
    labels = dict((name, label) for name, label, _ in split.rows())
    assert "no shapes recorded" in labels["like_for_like_us"]
    assert "same shapes" not in labels["like_for_like_us"]
    assert split.count_changed_us == pytest.approx(cast["delta_us"])
    assert split.like_for_like_us == pytest.approx(rms["delta_us"])
    found = {f.id: f for f in result.analysis.findings}
    assert found["op-regression"].title.startswith("1 operator(s)")
    assert "op-improvement" not in found  # Cast −60 % "per instance" was one
    assert found["count-changed"].data["count_effect_us"] == pytest.approx(cast["delta_us"])
    note = no_shapes_note(result.comparison.operators, DEFAULT_THRESHOLDS)
    assert note is not None and note.code == "no-shapes"
    assert (note.data["base_share"], note.data["new_share"]) == (1.0, 1.0)
    assert (note.data["types_per_instance"], note.data["types_by_totals"]) == (1, 1)


@needs_realdata
@pytest.mark.slow
def test_real_level0_calls_no_type_of_another_count_slower_or_faster():
    result = diff(BASE_TEXT / "level0", NEW_TEXT / "level0")
    ops = result.comparison.operators
    # Independently: Cast kernels per rank and step, by name, in the files.
    casts = []
    for root in (BASE_TEXT, NEW_TEXT):
        rows = pd.read_csv(root / "level0/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT"
                           / "kernel_details.csv")
        casts.append(int(rows["Name"].str.contains("Cast").sum()))
    assert casts == [74, 4]
    cast = ops[ops["op_type"] == "Cast"].iloc[0]
    assert (cast["base_count"], cast["new_count"]) == tuple(casts)
    assert cast["status"] == "count-changed" and np.isnan(cast["instance_change_pct"])
    shapeless = ops["input_shapes"].fillna("") == ""
    assert shapeless.all()  # Level0 records no shapes at all
    judged = ops["status"].isin(["regressed", "improved"])
    assert judged.any()
    assert (ops.loc[judged, "base_count"] == ops.loc[judged, "new_count"]).all()
    moved = (ops["base_count"] != ops["new_count"]) & (ops["base_instances"] > 0) \
        & (ops["new_instances"] > 0)
    assert set(ops.loc[moved & ops["same_shape"], "status"]) == {"count-changed"}
    assert ops.loc[moved, "instance_change_pct"].isna().all()
    labels = [label for _, label, _ in result.analysis.compute.rows()]
    assert not any("same shapes" in label for label in labels)
    note = no_shapes_note(ops, DEFAULT_THRESHOLDS)
    assert note is not None and note.data["base_share"] == 1.0


# ================================================================ findings count their rows


def _table_rows(markdown: str, title: str) -> int:
    """Data rows of the Markdown table under ``## title`` (0 when it says there is none)."""
    section = markdown.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]
    return sum(1 for line in section.splitlines() if line.startswith("| ")) - 1 \
        if "|---" in section else 0


@needs_realdata
@pytest.mark.slow
def test_real_level1_findings_count_the_rows_of_their_tables(tmp_path):
    out = tmp_path / "out"
    run = CliRunner().invoke(main, [str(BASE_TEXT / "level1"), str(NEW_TEXT / "level1"), "-o",
                                    str(out), "-q", "--no-charts"])
    assert run.exit_code in (0, 1), run.output
    report = json.loads((out / "report.json").read_text())
    markdown = (out / "report.md").read_text()
    plain = [op for op in report["operators"] if not op["fusion"]]
    findings = {f["id"]: f for f in report["findings"]}
    tables = {"op-regression": ("regressed", "Top regressions"),
              "op-improvement": ("improved", "Top improvements"),
              "count-changed": ("count-changed", "Count changed (instances per step, not speed)")}
    for fid, (status, title) in tables.items():
        rows = sum(op["status"] == status for op in plain)
        if fid in findings:
            assert int(re.match(r"\d+", findings[fid]["title"]).group()) == rows, fid
        else:
            assert rows == 0, fid
        if rows and f"## {title}\n" in markdown:
            assert _table_rows(markdown, title) == min(rows, DEFAULT_THRESHOLDS.top_n), title
    assert {"op-regression", "count-changed"} <= set(findings)
    # The count effect is the split's count row, to the µs.
    split = {row["part"]: row["delta_us"] for row in report["compute"]["rows"]}
    counted = findings["count-changed"]["data"]["count_effect_us"]
    assert counted == pytest.approx(split["count_changed_us"], abs=1e-6)
    shown = f"{counted / 1000:+.2f} ms"
    assert f"count effect {shown} per step on Computing" in findings["count-changed"]["detail"]
    assert f"{shown} from kernels run more or fewer times" in report["compute"]["sentence"]
