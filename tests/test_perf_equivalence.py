"""The fast paths give what the slow, obvious code gives.

The per-key Mann-Whitney tests in one pass (``mann_whitney_by_group``) against
``scipy.stats.mannwhitneyu`` called once per key (exact or asymptotic by the documented
rule), the Benjamini-Hochberg adjustment
against ``scipy.stats.false_discovery_control``, the category check of ``validate``
against a check of every row's string, and ``fast_json.loads`` against ``json.loads``.
"""

from __future__ import annotations

import gc
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REALDATA, needs_realdata
from scipy import stats

from cann_diff.compare import stats as stats_module
from cann_diff.compare.operators import compare_operators
from cann_diff.compare.stats import adjust_bh, mann_whitney_by_group, order_by_group
from cann_diff.errors import SchemaError
from cann_diff.match import match
from cann_diff.processes import pool_context
from cann_diff.read import load_run
from cann_diff.read.formats import fast_json
from cann_diff.schema import validate
from cann_diff.settings import DEFAULT_LIMITS, DEFAULT_THRESHOLDS

LEVELS = REALDATA / "Ascend__msinsight" / "test" / "data" / "pytorch" / "text"


def _scipy_method(b: np.ndarray, n: np.ndarray) -> str:
    """The documented rule: exact where scipy defines it (no ties) and n·m ≤ the bound."""
    tied = len(np.unique(np.concatenate([b, n]))) < len(b) + len(n)
    return "exact" if not tied and len(b) * len(n) <= stats_module.EXACT_MAX_PAIRS \
        else "asymptotic"


def _per_group_scipy(base_group, base, new_group, new, n_groups) -> np.ndarray:
    out = np.full(n_groups, np.nan)
    for g in range(n_groups):
        b, n = base[base_group == g], new[new_group == g]
        if len(b) and len(n):
            if np.all(b == b[0]) and np.all(n == b[0]):
                out[g] = 1.0
            else:
                out[g] = stats.mannwhitneyu(b, n, alternative="two-sided",
                                            method=_scipy_method(b, n)).pvalue
    return out


def _crafted_groups(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, int]:
    """Groups of every kind scipy treats apart: large, small without ties (exact), small
    with ties, heavy ties (rounded values), constant on both sides, one side constant,
    a side missing."""
    rng = np.random.default_rng(seed)
    sizes = [(500, 700), (40, 30), (9, 9), (8, 20), (3, 4), (1, 1), (2, 50), (200, 200),
             (60, 60), (5, 5), (0, 10), (10, 0), (1000, 3)]
    base_group, base, new_group, new = [], [], [], []
    for g, (nb, nn) in enumerate(sizes):
        b = rng.lognormal(3.0, 0.5, nb)
        n = rng.lognormal(3.0 + 0.05 * (g % 3), 0.5, nn)
        if g in (1, 7):  # heavy ties: durations on a 1 µs grid
            b, n = np.round(b / 10), np.round(n / 10)
        if g == 8:  # both sides the same constant
            b, n = np.full(nb, 7.0), np.full(nn, 7.0)
        if g == 9:  # base constant, new another constant
            b, n = np.full(nb, 7.0), np.full(nn, 8.0)
        base_group.append(np.full(nb, g)), base.append(b)
        new_group.append(np.full(nn, g)), new.append(n)
    return (np.concatenate(base_group), np.concatenate(base), np.concatenate(new_group),
            np.concatenate(new), len(sizes))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_pass_mann_whitney_equals_scipy_per_group(seed):
    base_group, base, new_group, new, n_groups = _crafted_groups(seed)
    # Shuffled input: the one-pass test must not rely on the order of the samples.
    rng = np.random.default_rng(seed + 10)
    pb, pn = rng.permutation(len(base)), rng.permutation(len(new))
    got = mann_whitney_by_group(base_group[pb], base[pb], new_group[pn], new[pn], n_groups)
    want = _per_group_scipy(base_group, base, new_group, new, n_groups)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[10]) and np.isnan(got[11])  # a side missing: no test
    assert got[8] == 1.0
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=0, equal_nan=True)
    alpha = DEFAULT_THRESHOLDS.alpha
    np.testing.assert_array_equal(got < alpha, want < alpha)


@pytest.mark.parametrize("seed", [0, 1])
def test_mann_whitney_on_the_nanosecond_grid_equals_scipy(seed):
    # Durations as profilers write them (three decimals of a µs) take the packed sort;
    # the answer must not change with the path.
    base_group, base, new_group, new, n_groups = _crafted_groups(seed)
    base, new = np.round(base, 3), np.round(new, 3)
    both = np.concatenate([base, new])
    assert stats_module._packed(np.concatenate([base_group, new_group]), both,
                                n_groups) is not None
    got = mann_whitney_by_group(base_group, base, new_group, new, n_groups)
    want = _per_group_scipy(base_group, base, new_group, new, n_groups)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=0, equal_nan=True)


@pytest.mark.parametrize("odd", [12.3456789, -0.5, np.inf])
def test_mann_whitney_off_the_grid_falls_back_and_equals_scipy(odd):
    # One value off the grid (more decimals, negative, infinite) sends every group to
    # the general sort; the p-values stay scipy's.
    base_group, base, new_group, new, n_groups = _crafted_groups(4)
    base, new = np.round(base, 3), np.round(new, 3)
    base[0] = odd
    assert stats_module._packed(np.concatenate([base_group, new_group]),
                                np.concatenate([base, new]), n_groups) is None
    got = mann_whitney_by_group(base_group, base, new_group, new, n_groups)
    want = _per_group_scipy(base_group, base, new_group, new, n_groups)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=0, equal_nan=True)


@pytest.mark.parametrize("on_grid", [True, False])
def test_sorted_samples_give_pandas_medians_and_numpy_quantiles(on_grid):
    # Medians and p95 read off the samples sorted once by (key, duration) must be the
    # figures pandas' groupby (and numpy's hazen quantile, for sampled runs) give, to
    # the last bit, on both sorting paths.
    rng = np.random.default_rng(7)
    keys = rng.integers(0, 400, 20_000)
    values = rng.lognormal(3.0, 1.0, 20_000)
    if on_grid:
        values = np.round(values, 3)
    values[:50] = 5.0  # ties
    ordered = stats_module.sorted_samples(keys, values, 400)
    assert (stats_module._packed(keys, values, 400) is not None) == on_grid
    np.testing.assert_array_equal(ordered[0], np.sort(keys))
    np.testing.assert_array_equal(np.sort(ordered[1]), np.sort(values))
    by_key = pd.Series(values).groupby(keys)
    median = stats_module.sorted_group_median(*ordered)
    linear = stats_module.sorted_group_quantile(*ordered, 0.95)
    hazen = stats_module.sorted_group_quantile(*ordered, 0.95, "hazen")
    np.testing.assert_array_equal(median.reindex(by_key.median().index), by_key.median())
    np.testing.assert_array_equal(linear.reindex(by_key.median().index),
                                  by_key.quantile(0.95))
    np.testing.assert_array_equal(
        hazen.reindex(by_key.median().index),
        by_key.agg(lambda v: np.quantile(v, 0.95, method="hazen")))


def test_sorted_group_figures_worked_by_hand():
    # Key 3: [1, 2, 4, 10] → median (2 + 4)/2 = 3; p95 linear at 0.95·3 = 2.85 →
    # 4 + 0.85·6 = 9.1; hazen at 4·0.95 − 0.5 = 3.3 → clipped to the last, 10.
    # Key 8: [7] → 7 everywhere.
    ordered = stats_module.sorted_samples(np.array([3, 8, 3, 3, 3]),
                                          np.array([10.0, 7.0, 2.0, 1.0, 4.0]), 9)
    assert ordered[0].tolist() == [3, 3, 3, 3, 8]
    assert ordered[1].tolist() == [1.0, 2.0, 4.0, 10.0, 7.0]
    assert stats_module.sorted_group_median(*ordered).to_dict() == {3: 3.0, 8: 7.0}
    linear = stats_module.sorted_group_quantile(*ordered, 0.95)
    assert linear[3] == pytest.approx(9.1) and linear[8] == 7.0
    assert stats_module.sorted_group_quantile(*ordered, 0.95, "hazen").to_dict() == {
        3: 10.0, 8: 7.0}


def test_order_by_group_is_stable_for_small_and_large_ids():
    ids = np.array([2, 0, 2, 1, 0])
    assert order_by_group(ids, 3).tolist() == [1, 4, 3, 0, 2]
    assert order_by_group(ids * 20_000, 40_001).tolist() == [1, 4, 3, 0, 2]


def test_hand_worked_mann_whitney():
    # base [1, 2, 3], new [2, 4, 5, 6, 7, 8, 9, 10, 11] in one group, with a tie at 2.
    # Ranks: 1→1, the two 2s→2.5, 3→4; base rank sum 7.5, U1 = 7.5 − 6 = 1.5, U = 25.5;
    # μ = 13.5, tie term 2³−2 = 6, σ = √(27/12·(13 − 6/132)) = 5.3976...;
    # z = (25.5 − 13.5 − 0.5)/σ = 2.1306..., p = 2·(1 − Φ(z)) = 0.03312...
    p = mann_whitney_by_group(np.zeros(3, np.int64), np.array([1.0, 2.0, 3.0]),
                              np.zeros(9, np.int64), np.array([2.0, *range(4, 12)]), 1)
    sigma = np.sqrt(27 / 12 * (13 - 6 / 132))
    z = 11.5 / sigma
    from math import erfc, sqrt
    assert p[0] == pytest.approx(erfc(z / sqrt(2)), rel=1e-12)


def test_benjamini_hochberg_equals_scipy():
    rng = np.random.default_rng(3)
    ps = np.concatenate([rng.uniform(0, 1, 200), rng.uniform(0, 1e-6, 20), [0.5, 0.5, 0.0]])
    with_nan = np.concatenate([ps, [np.nan, np.nan]])
    got = adjust_bh(with_nan)
    assert np.isnan(got[-2:]).all()
    np.testing.assert_allclose(got[:-2], stats.false_discovery_control(ps, method="bh"),
                               rtol=1e-12, atol=0)
    # Worked by hand: sorted [0.001, 0.1, 0.5, 0.6]·4/i = [0.004, 0.2, 0.667, 0.6], the
    # running minimum from the end makes 0.667 → 0.6.
    np.testing.assert_allclose(adjust_bh(np.array([0.5, 0.6, 0.1, 0.001])),
                               [0.6, 0.6, 0.2, 0.004])
    assert adjust_bh(np.array([0.3]))[0] == 0.3


def _scipy_reference(base_run, new_run, matched, table: pd.DataFrame) -> pd.Series:
    """p per key the slow way: one scipy call per same-shape key, then scipy's BH.

    Keys are tested when their sizes can reach α (Mann-Whitney's smallest p 2/C(n+m, n)
    ≤ α; a collective of equal counts, paired in launch order: the signed-rank's 2/2^n);
    a collective paired in launch order gets scipy's Wilcoxon signed-rank test.
    """
    def durations(summary, keys):
        rows = summary.samples["row"].to_numpy()
        return pd.Series(summary.samples["dur_us"].to_numpy()).groupby(keys[rows])

    base = dict(iter(durations(base_run.summary, matched.base_key)))
    new = dict(iter(durations(new_run.summary, matched.new_key)))
    both = table[table["same_shape"] & (table["base_instances"] > 0)
                 & (table["new_instances"] > 0)].set_index("key_id")
    raw = {}
    for key, row in both.iterrows():
        if key not in base or key not in new:
            continue
        b, n = base[key].to_numpy(), new[key].to_numpy()
        if row["category"] == "communication" and len(b) == len(n):  # one rank, one step
            if 2 / 2 ** int(np.count_nonzero(n - b)) <= DEFAULT_THRESHOLDS.alpha:
                raw[key] = stats.wilcoxon(n - b).pvalue
            continue
        if 2 / math.comb(len(b) + len(n), len(b)) > DEFAULT_THRESHOLDS.alpha:
            continue
        raw[key] = (1.0 if np.all(b == b[0]) and np.all(n == b[0]) else
                    stats.mannwhitneyu(b, n, alternative="two-sided",
                                       method=_scipy_method(b, n)).pvalue)
    keys = list(raw)
    return pd.Series(stats.false_discovery_control(list(raw.values()), method="bh"),
                     index=keys)


@pytest.mark.slow
@needs_realdata
def test_operator_p_values_on_real_profiles_equal_per_key_scipy():
    base = load_run(LEVELS / "level1" / "rank0_ascend_pt", keep_rows=False)
    new = load_run(LEVELS / "level2" / "rank0_ascend_pt", keep_rows=False)
    matched = match(base.summary.ops, new.summary.ops)
    table = compare_operators(base, new, matched, DEFAULT_THRESHOLDS, 1, 1)
    want = _scipy_reference(base, new, matched, table)
    assert len(want) >= 4  # keys whose sizes can reach α (3 vs 3 instances cannot)
    got = table.set_index("key_id").loc[want.index, "p_value"]
    np.testing.assert_allclose(got.to_numpy(), want.to_numpy(), rtol=1e-9, atol=0)
    np.testing.assert_array_equal(got.to_numpy() < DEFAULT_THRESHOLDS.alpha,
                                  want.to_numpy() < DEFAULT_THRESHOLDS.alpha)
    untested = table.set_index("key_id").drop(index=want.index)["p_value"]
    assert untested.isna().all()


def _ops_frame(categories: list[str | None]) -> pd.DataFrame:
    from cann_diff.schema import OP_COLUMNS, conform_ops

    n = len(categories)
    frame = pd.DataFrame({c: pd.Series([None] * n, dtype="object") for c in OP_COLUMNS})
    frame["rank"], frame["start_ns"], frame["dur_us"] = 0, 0, 1.0
    frame["step"] = pd.array([1] * n, dtype="Int64")
    frame["category"] = categories
    return conform_ops(frame)


def test_validate_reads_the_categories_used():
    validate(_ops_frame(["compute", "communication", "compute"]))
    bad = _ops_frame(["compute", "teleport"])
    with pytest.raises(SchemaError, match="teleport"):
        validate(bad)
    # A category declared but used by no row is not an error (as before: only the values).
    unused = _ops_frame(["compute"])
    unused["category"] = unused["category"].cat.add_categories(["teleport"])
    validate(unused)
    # A missing category is reported as 'nan', as the string per row did.
    missing = _ops_frame(["compute", None])
    with pytest.raises(SchemaError, match="nan"):
        validate(missing)


COMM = {"step1": {"collective": {"hcom_allReduce__1_0_1": {
    "Communication Time Info": {"Start Timestamp(us)": 1.5e15, "Elapse Time(ms)": 0.25,
                                "Transit Time(ms)": 0.2, "Wait Time(ms)": 0.05},
    "Communication Bandwidth Info": {"HCCS": {"Transit Size(MB)": 1.0,
                                              "Size Distribution": {"1.0": [1, 0.2]}}}}}}}


def test_fast_json_equals_json_and_restores_the_collector():
    data = json.dumps(COMM).encode()
    assert fast_json.loads(data) == json.loads(data)
    assert fast_json.loads(b'{"a": [1, 2.5, "\\u00e9", null, true]}') == {
        "a": [1, 2.5, "é", None, True]}
    assert gc.isenabled()
    gc.disable()
    try:
        fast_json.loads(data)
        assert not gc.isenabled()  # a caller's own setting is left as it was
    finally:
        gc.enable()


def test_fast_json_rejects_bad_input_like_json():
    for bad in (b'{"a": ', b"\xff\xfe", b'{"a": NaN}x'):
        with pytest.raises(ValueError):
            fast_json.loads(bad)
    assert gc.isenabled()


def test_fast_json_without_orjson(monkeypatch):
    monkeypatch.setattr(fast_json, "orjson", None)
    assert fast_json.loads(json.dumps(COMM).encode()) == COMM
    with pytest.raises(ValueError):
        fast_json.loads(b"[1,")


@pytest.mark.slow
def test_the_comparison_does_not_import_scipy_stats(tmp_path):
    # Importing scipy.stats costs more than every per-key test together.
    import subprocess
    import sys

    from conftest import EXAMPLES, ROOT

    base, new = EXAMPLES / "cann7.0.1.3", EXAMPLES / "cann8.0.RC2"
    script = ("import sys; from cann_diff.pipeline import diff; "
              f"diff({str(base)!r}, {str(new)!r}); print('scipy.stats' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True,
                         text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.slow
def test_sides_read_in_worker_processes_give_the_same_report(monkeypatch):
    """The process paths (forkserver) read what the in-process path reads."""
    from cann_diff import costs, pipeline, processes

    examples = Path(__file__).resolve().parents[1] / "examples"
    base, new = examples / "cann7.0.1.3", examples / "cann8.0.RC2"
    alone = pipeline.diff(base, new, pipeline.Options(jobs=1)).report.to_dict()
    monkeypatch.setattr(costs, "SIDE_PROCESS_MIN_S", 0)  # the examples are small
    pools = []
    monkeypatch.setattr(processes, "pool_context",
                        lambda *a: pools.append(a) or pool_context(*a))
    fewer = pipeline.diff(base, new, pipeline.Options(
        jobs=costs.SIDE_PROCESS_MIN_JOBS - 1)).report.to_dict()
    assert pools == []  # too few jobs for two each, too little to read for one each: here
    monkeypatch.setattr(costs, "SIDES_SAVE_MIN_S", 0)
    one_each = pipeline.diff(base, new, pipeline.Options(jobs=2)).report.to_dict()
    assert len(pools) == 1  # two ranks of 164 kernels a side do not spread: one job each
    spread = pipeline.diff(base, new, pipeline.Options(
        jobs=costs.SIDE_PROCESS_MIN_JOBS)).report.to_dict()
    assert len(pools) == 2
    assert spread == alone == fewer == one_each


def _impossible_by_the_rule(start_ns: np.ndarray, dur_us: np.ndarray) -> np.ndarray:
    """The rule as its docstring states it, one row at a time (quadratic: small inputs)."""
    dur = np.asarray(dur_us, dtype=float)
    bad = ~np.isfinite(dur) | (dur < 0) | (dur > DEFAULT_LIMITS.max_duration_s * 1e6)
    start_us = (np.asarray(start_ns, dtype=np.int64) // 1000).astype(float)
    ok = np.flatnonzero(~bad)
    if len(ok) < 2:
        return bad
    for row in ok:
        shorter = ok[dur[ok] < dur[row]]
        if len(shorter):
            span = (start_us[shorter] + dur[shorter]).max() - start_us[shorter].min()
            bad[row] = span > 0 and dur[row] > DEFAULT_LIMITS.absurd_duration_factor * span
    return bad


@pytest.mark.slow
@pytest.mark.parametrize("case", ["plain", "absurd", "ties", "ties-at-cut", "one-instant",
                                  "broken", "absurd-among-the-short"])
def test_impossible_durations_fast_path_equals_the_rule(case):
    # 6,000 rows: above the size where only the shortest 1/64 are sorted exactly.
    rng = np.random.default_rng(7)
    n = 6000
    start = np.sort(rng.integers(0, 10**9, n))
    dur = rng.lognormal(2, 2, n).round(2)
    if case == "absurd":
        dur[[10, 4000]] = 5e10  # > 10,000 × the ~1e6 µs run; equal: judged without each other
    elif case == "ties":
        dur[: n // 2] = dur[0]
    elif case == "ties-at-cut":  # 300 more rows equal to the value the short rows end at
        dur[rng.choice(n, 300, replace=False)] = np.partition(dur, n // 64)[n // 64]
    elif case == "absurd-among-the-short":
        # Hand-worked: rows 0-10 start together; row 10 (2 µs) is 20,000× the 1e-4 µs span
        # of the ten rows shorter than it, so it alone is absurd. The cut (the 94th shortest)
        # is 5 µs and rows 0-10 span 2 µs, so no row of 100 µs can be: the short rows alone
        # are judged.
        start[:11] = start[0]
        dur[:] = 100.0
        dur[:10], dur[10], dur[11:96] = 1e-4, 2.0, 5.0
    elif case == "one-instant":
        start[:] = start[0]  # the shortest rows span nothing: every row falls back
        dur[:200] = 0.0
    elif case == "broken":
        dur[[1, 2, 3]] = [-1.0, np.nan, np.inf]
    from cann_diff.read.formats.values import impossible_durations

    expected = _impossible_by_the_rule(start, dur)
    assert (impossible_durations(start, dur) == expected).all()
    if case == "absurd":
        assert set(np.flatnonzero(expected)) == {10, 4000}
    if case == "absurd-among-the-short":
        assert set(np.flatnonzero(expected)) == {10}


def test_merged_intervals_sorts_only_when_it_must(monkeypatch):
    from cann_diff.read.reduce.timeline import merged_intervals

    sorts = []
    lexsort = np.lexsort
    monkeypatch.setattr(np, "lexsort", lambda keys: sorts.append(1) or lexsort(keys))

    # Hand-worked: group 0 holds [0,10) [5,20) [30,40); group 1 [1,2) [2,3) (touching).
    start = np.array([0, 5, 30, 1, 2], dtype=np.int64)
    end = np.array([10, 20, 40, 2, 3], dtype=np.int64)
    group = np.array([0, 0, 0, 1, 1], dtype=np.int64)
    expected = ([0, 0, 1], [0, 30, 1], [20, 40, 3])  # touching intervals merge
    for order, sorted_ in ((np.arange(5), 0), (np.array([4, 2, 0, 3, 1]), 1)):
        got = merged_intervals(start[order], end[order], group[order])
        assert [list(a) for a in got] == [list(e) for e in expected]
        assert len(sorts) == sorted_  # in order: no sort; shuffled: one
