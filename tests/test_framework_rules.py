"""Framework operators judged by the kernel table's rules, paired by what the op is, rolled up.

Expected values come from the raw files (trace_view.json, kernel_details.csv,
step_trace_time.csv, read with json / csv) or from crafted profiles whose answer is
worked out in the docstrings — never from cann_diff's own output.
"""

from __future__ import annotations

import csv
import json
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REALDATA, needs_realdata
from scipy import stats
from test_framework import write_linked_profile

from cann_diff.compare.framework import (
    FRAMEWORK_OP_FIELDS,
    MODULE_FIELDS,
    MODULE_RULE_FIELDS,
    OP_RULE_FIELDS,
    compare_framework,
    compare_modules,
)
from cann_diff.compare.framework_keys import data_inputs_match, pair_keys
from cann_diff.compare.framework_rollup import families, family_of
from cann_diff.compare.framework_rules import STATUSES, judge
from cann_diff.pipeline import diff
from cann_diff.read import load_run
from cann_diff.read.reduce.framework import conform_framework
from cann_diff.settings import Thresholds
from cann_diff.vocab.tables import package_map

MSI_2024 = REALDATA / "Ascend__msinsight@c1e639ee2/test/data/pytorch/text/level1"
MSI_2025 = REALDATA / "Ascend__msinsight/test/data/pytorch/text/level1"
TEXT = REALDATA / "Ascend__msinsight/test/data/pytorch/text"
OUT = "ASCEND_PROFILER_OUTPUT"
RANK0 = "rank0_ascend_pt"


# ---------------------------------------------------------------- by hand, from the files

def _hand_keys(rank_dir: Path) -> dict[tuple[str, str], list[float]]:
    """Per (framework op, input shapes): the device µs of each of its instances.

    The attribution written out from the raw files: a torch_to_npu (``async_npu``) flow
    starts on the host thread at the launch and ends at the kernel's start; the kernel
    belongs to the innermost ``ns::op`` (aten, npu, c10d) open at the launch on that
    thread; an hcom op that no flow reaches takes the first unclaimed flow end inside it.
    Shapes are the op's ``Input Dims`` with their ``;\\r\\n`` separators made ``;``.
    """
    events = json.loads((rank_dir / OUT / "trace_view.json").read_text())
    ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"
           and "::" in e["name"]]
    by_thread = defaultdict(list)
    for number, op in enumerate(ops):
        by_thread[op["tid"]].append((Decimal(op["ts"]), Decimal(str(op["dur"])), number))
    flows = {(e["id"], e["ph"]): e for e in events if e.get("cat") == "async_npu"}
    owner_at = {}  # flow end (µs) -> the op instance that launched it
    for (flow, phase), start in flows.items():
        if phase != "s" or (flow, "f") not in flows:
            continue
        t = Decimal(start["ts"])
        open_ops = [(ts, -dur, n) for ts, dur, n in by_thread[start["tid"]] if ts <= t < ts + dur]
        if open_ops:
            owner_at[Decimal(flows[(flow, "f")]["ts"])] = max(open_ops)[2]
    with open(rank_dir / OUT / "kernel_details.csv", newline="") as handle:
        kernels = [(Decimal(r["Start Time(us)"].strip()), Decimal(r["Duration(us)"]),
                    r["Name"]) for r in csv.DictReader(handle)]
    per_instance: dict[int, float] = defaultdict(float)
    free = dict(owner_at)
    for start, dur, _ in kernels:
        if start in owner_at:
            free.pop(start, None)
            per_instance[owner_at[start]] += float(dur)
    for start, dur, name in kernels:
        inside = sorted(t for t in free if start <= t <= start + dur)
        if start not in owner_at and name.startswith("hcom_") and inside:
            per_instance[free.pop(inside[0])] += float(dur)
    keys: dict[tuple[str, str], list[float]] = defaultdict(list)
    for number, us in per_instance.items():
        dims = ops[number].get("args", {}).get("Input Dims", "").replace(";\r\n", ";")
        keys[(ops[number]["name"], dims)].append(us)
    return dict(keys)


def _kernel_total(rank_dir: Path) -> float:
    with open(rank_dir / OUT / "kernel_details.csv", newline="") as handle:
        return sum(float(r["Duration(us)"]) for r in csv.DictReader(handle))


def _stage(rank_dir: Path) -> float:
    with open(rank_dir / OUT / "step_trace_time.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    return sum(float(r["Stage"]) for r in rows) / len(rows)


@pytest.fixture(scope="module")
def real_pair():
    """rank 0 of one job on the 2024 and the 2025 stack: the hand tables and the comparison."""
    base_dir, new_dir = MSI_2024 / RANK0, MSI_2025 / RANK0
    result, reason = compare_framework(load_run(base_dir), load_run(new_dir))
    assert reason is None
    return _hand_keys(base_dir), _hand_keys(new_dir), result


def _row(ops: pd.DataFrame, name: str, shapes: str) -> pd.Series:
    rows = ops[(ops["name"] == name) & (ops["input_shapes"] == shapes)]
    assert len(rows) == 1, (name, shapes)
    return rows.iloc[0]


# ---------------------------------------------------------------- the real pair

@pytest.mark.slow
@needs_realdata
@pytest.mark.parametrize("name, shapes", [
    ("aten::convolution_backward", "32,256,13,13;32,384,13,13;256,384,3,3;;;;;;;;"),
    ("aten::topk", "32,1000;;;;"),
    ("aten::mm", "4096,32;32,9216"),
    ("aten::_adaptive_avg_pool2d", "32,256,6,6;")])
def test_large_moves_of_one_instance_a_side_are_untested_not_unchanged(real_pair, name, shapes):
    """One instance a side: the per-instance change is the whole move (+77 %, −92 %, −83 %,
    −83 %), at least the 5 % threshold, and Mann-Whitney's smallest p at 1 vs 1 is
    2 / C(2, 1) = 1 > α: the kernel rule's word is ``untested``."""
    hand_base, hand_new, result = real_pair
    base, new = hand_base[(name, shapes)], hand_new[(name, shapes)]
    assert len(base) == len(new) == 1
    row = _row(result.operators, name, shapes)
    assert row["match_kind"] == "exact"
    assert row["delta_us"] == pytest.approx(new[0] - base[0], rel=1e-9)
    assert row["instance_change_pct"] == pytest.approx((new[0] / base[0] - 1) * 100)
    assert abs(row["instance_change_pct"]) >= 5
    assert row["status"] == "untested" and not row["tested"] and np.isnan(row["p_value"])


@pytest.mark.slow
@needs_realdata
def test_max_pool_backward_whose_indices_changed_shape_pairs_on_its_data_inputs(real_pair):
    """The 2025 stack's mask layout changes the indices input (last) of each
    max_pool2d_with_indices_backward: …;32,192,9,12 → …;32,192,9,384. Its grad and input
    shapes (first two) are the same: by hand, each base key's twin is the new key with the
    same first two inputs."""
    hand_base, hand_new, result = real_pair
    name = "aten::max_pool2d_with_indices_backward"
    base_keys = {s: us for (n, s), us in hand_base.items() if n == name}
    new_keys = {s: us for (n, s), us in hand_new.items() if n == name}
    assert len(base_keys) == len(new_keys) == 3 and not set(base_keys) & set(new_keys)
    ops = result.operators[result.operators["name"] == name]
    assert len(ops) == 3 and set(ops["status"]) <= set(STATUSES) - {"added", "removed"}
    for base_shapes, base_us in base_keys.items():
        lead = base_shapes.split(";")[:2]
        (new_shapes,) = [s for s in new_keys if s.split(";")[:2] == lead]
        row = _row(ops, name, base_shapes)
        assert (row["match_kind"], row["base_input_shapes"], row["new_input_shapes"]) == (
            "data-inputs", base_shapes, new_shapes)
        assert row["base_device_us"] == pytest.approx(sum(base_us))
        assert row["new_device_us"] == pytest.approx(sum(new_keys[new_shapes]))
        assert row["status"] == "untested"  # 1 vs 1 instance, moves of 26 % to 62 %
    # the aligned instances pair each with its twin: none is left alone on either side
    pairs = result.instances[result.instances["name"] == name]
    assert len(pairs) == 3 and pairs[["base_device_us", "new_device_us"]].notna().all(axis=None)


@pytest.mark.slow
@needs_realdata
def test_family_rollup_sums_the_optimizer_rewrite_and_mm_to_addmm(real_pair):
    """SGD's per-parameter add_/add/mul_ became _foreach_* over all of them; mm + bias add
    became addmm. By hand, over every shape of these names:"""
    hand_base, hand_new, result = real_pair

    def total(hand: dict, names: set[str]) -> float:
        return sum(sum(us) for (n, _), us in hand.items() if n in names)

    rollup = result.rollup
    family = rollup[rollup["level"] == "family"].set_index("key")
    for key, names in (("add", {"aten::add", "aten::add_", "aten::_foreach_add",
                                "aten::_foreach_add_"}),
                       ("matmul", {"aten::mm", "aten::addmm", "aten::matmul", "aten::bmm",
                                   "aten::linear"})):
        base, new = total(hand_base, names), total(hand_new, names)
        assert (rollup["key"] == key).sum() == 1  # one line for the whole rewrite
        assert family.loc[key, "base_us"] == pytest.approx(base)
        assert family.loc[key, "new_us"] == pytest.approx(new)
        assert family.loc[key, "delta_us"] == pytest.approx(new - base)
        assert (new - base) / base <= -0.05 and family.loc[key, "status"] == "decreased"
    # add: 2,124.6 → 1,962.2 µs (−7.6 %); matmul: mm −1,512 and addmm +519 together
    assert family.loc["add", "delta_us"] == pytest.approx(-162.4, abs=0.1)
    by_name = rollup[rollup["level"] == "name"].set_index("key")
    assert by_name.loc["aten::mm", "delta_us"] == pytest.approx(-1512.2, abs=0.1)
    assert by_name.loc["aten::addmm", "delta_us"] == pytest.approx(518.7, abs=0.1)
    assert by_name.loc["aten::addmm", "status"] == "added"
    assert family.loc["matmul", "delta_us"] == pytest.approx(-993.5, abs=0.1)


@pytest.mark.slow
@needs_realdata
def test_rollup_levels_add_up_and_modules_take_their_backward(real_pair):
    _, _, result = real_pair
    rollup = result.rollup
    assert list(rollup["level"].drop_duplicates()) == ["name", "family", "module"]
    for level in ("name", "family", "module"):
        part = rollup[rollup["level"] == level]
        assert (part["delta_us"].abs().diff().dropna() <= 1e-9).all()  # |Δ| descending
        assert part["base_us"].sum() == pytest.approx(result.summary.attributed_base_us)
        assert part["new_us"].sum() == pytest.approx(result.summary.attributed_new_us)
    modules = result.modules.set_index("module")["base_device_us"]
    conv = "DistributedDataParallel_0/AlexNet_0/Sequential_0/Conv2d_3"
    row = rollup[(rollup["level"] == "module") & (rollup["key"] == conv)].iloc[0]
    assert row["base_us"] == pytest.approx(modules[conv] + modules[conv + " (backward)"])
    assert not rollup["key"].str.endswith(" (backward)").any()


@pytest.mark.slow
@needs_realdata
def test_attributed_time_equals_an_independent_attribution_of_the_trace(real_pair):
    """Through the async_npu flows every kernel of rank 0 reaches an aten/npu/c10d op:
    80,749.4 µs (2024) and 114,865.6 µs (2025), all of kernel_details.csv. Δ Stage is
    136,581 − 83,643 = 52,938 µs (step_trace_time.csv, one step each)."""
    hand_base, hand_new, result = real_pair
    summary = result.summary
    for hand, attributed, rank_dir, figure in (
            (hand_base, summary.attributed_base_us, MSI_2024 / RANK0, 80_749.4),
            (hand_new, summary.attributed_new_us, MSI_2025 / RANK0, 114_865.6)):
        by_hand = sum(sum(us) for us in hand.values())
        assert by_hand == pytest.approx(figure, abs=0.05)
        assert by_hand == pytest.approx(_kernel_total(rank_dir), rel=1e-9)
        assert attributed == pytest.approx(by_hand, rel=1e-3)
    step = _stage(MSI_2025 / RANK0) - _stage(MSI_2024 / RANK0)
    # Stage is the kernels' span (the one ledger), which step_trace_time.csv writes rounded
    # to a quarter µs
    assert summary.step_delta_us == pytest.approx(step, abs=0.5)
    assert step == pytest.approx(52_938.0)
    assert summary.delta_attributed_us == pytest.approx(114_865.6 - 80_749.4, abs=0.1)
    assert summary.outside_us == pytest.approx(step - (114_865.6 - 80_749.4), abs=0.6)


@pytest.mark.slow
@needs_realdata
def test_n_of_m_counts_every_key_that_is_not_unchanged(real_pair):
    """By hand, a key is ``unchanged`` only when it has the same shapes and instance count
    on both sides and its median instance moved under 5 %; every other key counts."""
    hand_base, hand_new, result = real_pair
    unchanged = [key for key in set(hand_base) & set(hand_new)
                 if len(hand_base[key]) == len(hand_new[key])
                 and abs(np.median(hand_new[key]) / np.median(hand_base[key]) - 1) < 0.05]
    ops = result.operators
    assert result.key_count == len(ops)
    assert result.key_count - result.changed_count == len(unchanged)
    assert result.changed_count == (ops["status"] != "unchanged").sum() > Thresholds().top_n
    assert list(ops.columns) == [*FRAMEWORK_OP_FIELDS, *OP_RULE_FIELDS]


@pytest.mark.slow
@needs_realdata
@pytest.mark.parametrize("ranks, expected", [(RANK0, "untested"), ("", "unchanged")])
def test_allreduce_gets_one_word_in_the_framework_and_the_kernel_table(ranks, expected):
    """Control: one job at profiler level 1 and level 2. Both tables pair the collective's
    instances in launch order and judge the ratio of paired totals with the signed-rank
    test. Rank 0 alone: 4 pairs, totals 105,991.9 → 99,973.3 µs (−5.68 %, over the 5 %
    threshold) and a smallest signed-rank p of 2 / 2⁴ = 0.125 > α: ``untested`` in both,
    ``unchanged`` is out of reach. Both ranks: 8 pairs, −4.33 %: ``unchanged`` in both."""
    durations = {}
    for level in ("level1", "level2"):
        events = []
        for rank_dir in sorted((TEXT / level).glob(ranks or "rank*_ascend_pt")):
            events += json.loads((rank_dir / OUT / "trace_view.json").read_text())
        durations[level] = sum(e["dur"] for e in events
                               if e.get("ph") == "X" and e["name"].startswith("hcom_allReduce"))
    change = (durations["level2"] / durations["level1"] - 1) * 100
    result = diff(TEXT / "level1" / ranks, TEXT / "level2" / ranks)
    kernel = result.comparison.operators.set_index("op_type").loc["AllReduce"]
    framework = result.comparison.framework.operators.set_index("name").loc["c10d::allreduce_"]
    assert kernel["status"] == framework["status"] == expected
    assert kernel["instance_change_pct"] == pytest.approx(change, rel=1e-6)
    assert framework["instance_change_pct"] == pytest.approx(change, rel=1e-6)


# ---------------------------------------------------------------- crafted pairs

def _dims(*inputs: str) -> str:
    return ";\r\n".join(inputs)


def _op(name: str, dims: str, kind: str, *durations: float) -> list[tuple]:
    """One instance of ``name`` per duration, each launching one kernel of type ``kind``."""
    return [(name, dims, [(f"aclnn{kind}_{kind}_{kind}", kind, us)]) for us in durations]


POOL_GRAD = ("4,8,6,6", "4,8,13,13", "", "", "", "", "")


def test_each_status_of_the_kernel_rule_on_one_crafted_pair(tmp_path):
    """One step a side; per key, the answer worked out by hand (threshold 5 %, α 0.05):

    * mul 10.0…10.4 → 12.0…12.4 (5 a side, every new above every base): median 10.2 →
      12.2, +19.6 %; exact Mann-Whitney p = 2 / C(10, 5) = 0.0079, BH over the 4 tested
      keys (mul, add, relu, sigmoid) 0.0079 · 4 / 2 = 0.016 < α: ``regressed``;
    * add 20.0…20.4 → 15.0…15.4: −24.8 %, the same p: ``improved``;
    * relu 5.0…5.4 → 5.05…5.45: +0.96 %: ``unchanged``;
    * sigmoid 10, 12, 14, 16, 18 → 11, 13, 15, 17, 19.5: +7.1 %, interleaved (p ≈ 0.55):
      ``not-significant``;
    * topk 30 → 45: +50 %, but 1 vs 1 (smallest p 1 > α): ``untested``;
    * mm 1 instance → 2: ``count-changed``;
    * max_pool2d_with_indices_backward, indices 4,8,9,4 → 4,8,9,128, 30 → 30 µs: paired
      ``data-inputs``, 0 %: ``unchanged``;
    * linear 4,16;8,16 → 8,16;8,16: paired by ``name``: ``reshaped``;
    * gelu only in new, tanh only in base: ``added``, ``removed``.
    """
    base = [_op("aten::mul", _dims("8,8", "8,8"), "Mul", 10.0, 10.1, 10.2, 10.3, 10.4)
            + _op("aten::add", _dims("8,8", "8,8"), "Add", 20.0, 20.1, 20.2, 20.3, 20.4)
            + _op("aten::relu", "8,8", "Relu", 5.0, 5.1, 5.2, 5.3, 5.4)
            + _op("aten::sigmoid", "8,8", "Sigmoid", 10, 12, 14, 16, 18)
            + _op("aten::topk", _dims("8,8", "", ""), "TopKV2", 30)
            + _op("aten::mm", _dims("32,64", "64,16"), "MatMulV2", 50)
            + _op("aten::max_pool2d_with_indices_backward", _dims(*POOL_GRAD, "4,8,9,4"),
                  "MaxPoolGradWithArgmaxV1", 30)
            + _op("aten::linear", _dims("4,16", "8,16"), "MatMulV2", 25)
            + _op("aten::tanh", "8,8", "Tanh", 9)]
    new = [_op("aten::mul", _dims("8,8", "8,8"), "Mul", 12.0, 12.1, 12.2, 12.3, 12.4)
           + _op("aten::add", _dims("8,8", "8,8"), "Add", 15.0, 15.1, 15.2, 15.3, 15.4)
           + _op("aten::relu", "8,8", "Relu", 5.05, 5.15, 5.25, 5.35, 5.45)
           + _op("aten::sigmoid", "8,8", "Sigmoid", 11, 13, 15, 17, 19.5)
           + _op("aten::topk", _dims("8,8", "", ""), "TopKV2", 45)
           + _op("aten::mm", _dims("32,64", "64,16"), "MatMulV2", 50, 50)
           + _op("aten::max_pool2d_with_indices_backward", _dims(*POOL_GRAD, "4,8,9,128"),
                 "MaxPoolGradWithArgmaxV1", 30)
           + _op("aten::linear", _dims("8,16", "8,16"), "MatMulV2", 40)
           + _op("aten::gelu", "8,8", "Gelu", 7)]
    result, reason = compare_framework(load_run(write_linked_profile(tmp_path / "b", base)),
                                       load_run(write_linked_profile(tmp_path / "n", new)))
    assert reason is None
    ops = result.operators.set_index("name")
    assert ops["status"].to_dict() == {
        "aten::mul": "regressed", "aten::add": "improved", "aten::relu": "unchanged",
        "aten::sigmoid": "not-significant", "aten::topk": "untested",
        "aten::mm": "count-changed", "aten::max_pool2d_with_indices_backward": "unchanged",
        "aten::linear": "reshaped", "aten::gelu": "added", "aten::tanh": "removed"}
    assert ops.loc["aten::mul", "instance_change_pct"] == pytest.approx((12.2 / 10.2 - 1) * 100)
    assert ops.loc["aten::mul", "p_value"] == pytest.approx(2 / 252 * 4 / 2)
    sigmoid = stats.mannwhitneyu([10, 12, 14, 16, 18], [11, 13, 15, 17, 19.5]).pvalue
    assert ops.loc["aten::sigmoid", "p_value"] >= sigmoid > 0.05
    assert ops["tested"].to_dict() == {name: name in ("aten::mul", "aten::add", "aten::relu",
                                                      "aten::sigmoid") for name in ops.index}
    pool = ops.loc["aten::max_pool2d_with_indices_backward"]
    assert pool["match_kind"] == "data-inputs"
    assert pool["input_shapes"] == pool["base_input_shapes"] == ";".join((*POOL_GRAD, "4,8,9,4"))
    assert pool["new_input_shapes"] == ";".join((*POOL_GRAD, "4,8,9,128"))
    linear = ops.loc["aten::linear"]
    assert (linear["match_kind"], linear["delta_us"]) == ("name", pytest.approx(15.0))
    assert np.isnan(linear["instance_change_pct"])
    assert result.changed_count == 8 and result.key_count == 10
    # aligned on the paired keys: the max_pool instances pair although their shapes differ
    pairs = result.instances
    pool_pairs = pairs[pairs["name"] == "aten::max_pool2d_with_indices_backward"]
    assert len(pool_pairs) == 1
    assert pool_pairs[["base_device_us", "new_device_us"]].notna().all(axis=None)


def test_optimizer_rewrite_rolls_up_into_its_family(tmp_path):
    """Base: add_ on three parameters (10 µs each), mm 40 + bias add 5, hardswish_ 6.
    New: one _foreach_add_ 24, addmm 43, hardswish_ 6. By name every line is added or
    removed; by family: add 35 → 24 (−31 %, decreased), matmul 40 → 43 (+7.5 %,
    increased), hardswish (not in the table: the name without aten:: and the final _)
    6 → 6. Attributed 81 → 73 µs; with Δ Stage given as 100 µs, 108 µs lie outside."""
    base = [_op("aten::add_", _dims("16", "16", ""), "Add", 10)
            + _op("aten::add_", _dims("32", "32", ""), "Add", 10)
            + _op("aten::add_", _dims("64", "64", ""), "Add", 10)
            + _op("aten::mm", _dims("4,16", "16,8"), "MatMulV2", 40)
            + _op("aten::add", _dims("4,8", "8", ""), "Add", 5)
            + _op("aten::hardswish_", "4,8", "HardSwish", 6)]
    new = [_op("aten::_foreach_add_", _dims("", "", ""), "ForeachAddList", 24)
           + _op("aten::addmm", _dims("8", "4,16", "16,8", "", ""), "MatMulV2", 43)
           + _op("aten::hardswish_", "4,8", "HardSwish", 6)]
    result, _ = compare_framework(load_run(write_linked_profile(tmp_path / "b", base)),
                                  load_run(write_linked_profile(tmp_path / "n", new)),
                                  step_delta_us=100.0)
    rollup = result.rollup.set_index(["level", "key"])
    expected = {("family", "add"): (35, 24, "decreased"),
                ("family", "matmul"): (40, 43, "increased"),
                ("family", "hardswish"): (6, 6, "unchanged"),
                ("name", "aten::add_"): (30, 0, "removed"),
                ("name", "aten::_foreach_add_"): (0, 24, "added")}
    for key, (base_us, new_us, status) in expected.items():
        assert (rollup.loc[key, "base_us"], rollup.loc[key, "new_us"]) == (
            pytest.approx(base_us), pytest.approx(new_us)), key
        assert rollup.loc[key, "status"] == status, key
    assert list(result.rollup["level"].unique()) == ["name", "family"]  # no module events
    assert list(result.rollup[result.rollup["level"] == "family"]["key"]) == [
        "add", "matmul", "hardswish"]  # by |Δ|: 11, 3, 0
    summary = result.summary
    assert (summary.attributed_base_us, summary.attributed_new_us) == (
        pytest.approx(81.0), pytest.approx(73.0))
    assert (summary.delta_attributed_us, summary.step_delta_us, summary.outside_us) == (
        pytest.approx(-8.0), 100.0, pytest.approx(108.0))


# ---------------------------------------------------------------- building blocks

@pytest.mark.parametrize("base, new, paired", [
    ("32,192,13,13;32,192,27,27;;;;;;32,192,9,12", "32,192,13,13;32,192,27,27;;;;;;32,192,9,384",
     True),                                        # the indices, last
    ("4,8;4,8;4,1;;", "4,8;4,8;4,2;;", True),      # attribute slots after it do not count
    ("4,8;4,8;7;9", "4,8;4,8;6;5", True),          # two trailing inputs
    ("32,4096;4096,4096", "32,4096;4096,1000", False),  # one shared input: another product
    ("4,8;4,8;7;9;3", "4,8;4,8;6;5;2", False),     # three positions differ
    ("4,8;1;4,8;4,8", "4,8;2;4,8;4,8", False),     # not trailing
    ("4,8;4,8;7", "4,8;4,8;7;", False),            # another number of inputs
])
def test_data_inputs_rung_pairs_only_trailing_auxiliary_inputs(base, new, paired):
    assert data_inputs_match(base, new) is paired


def test_ladder_pairs_one_to_one_and_folds_the_rest_by_name():
    """Two base keys that both fit both new keys: no data-inputs pair is certain, so all
    four fold by name. A lone mm on each side with other shapes folds by name too."""
    def frame(keys: list[tuple[str, str]]) -> pd.DataFrame:
        return pd.DataFrame(keys, columns=["name", "input_shapes"])

    pool = "aten::max_pool2d_with_indices_backward"
    base = frame([(pool, "4,8;4,8;1"), (pool, "4,8;4,8;2"), ("aten::mm", "4,8;8,2"),
                  ("aten::add", "4;4")])
    new = frame([(pool, "4,8;4,8;3"), (pool, "4,8;4,8;4"), ("aten::mm", "8,8;8,2"),
                 ("aten::add", "4;4"), ("aten::mul", "4;4")])
    keys = pair_keys(base, new)
    table = keys.table.set_index("name")
    assert table["match_kind"].to_dict() == {
        "aten::add": "exact", pool: "name", "aten::mm": "name", "aten::mul": None}
    assert table.loc["aten::mul", "base_input_shapes"] is None
    assert table.loc[pool, "base_input_shapes"] == "4,8;4,8;1 | 4,8;4,8;2"
    assert table.loc[pool, "new_input_shapes"] == "4,8;4,8;3 | 4,8;4,8;4"
    ids = keys.ids(base, "base"), keys.ids(new, "new")
    assert ids[0][0] == ids[0][1] == ids[1][0] == ids[1][1]  # the four pool keys: one key


def _instances(key: int, durations: list[float], step: int = 1) -> pd.DataFrame:
    return pd.DataFrame({"key": key, "rank": 0, "step": step, "device_us": durations})


def test_a_collective_is_judged_on_pairs_in_launch_order():
    """Six collectives a step, each about 10 % slower (differences 8, 0.2, 0.25, 2, 0.4,
    0.5: all positive, no ties): the exact signed-rank p is 2 / 2⁶ = 0.031 < α and the
    change the ratio of the paired totals, 121.55 / 110.2 − 1 = +10.3 %: ``regressed``.
    Pooled, the mix of sizes hides it: the same durations as a compute key (Mann-Whitney;
    the change the Hodges-Lehmann ratio, the median of the 36 pairwise ratios) are
    ``not-significant``."""
    base_us, new_us = [80, 2.0, 2.1, 20, 3.0, 3.1], [88, 2.2, 2.35, 22, 3.4, 3.6]

    def judged(collective: bool) -> pd.Series:
        return judge(_instances(0, base_us), _instances(0, new_us), 1, (1, 1),
                     np.ones(1, bool), np.array([collective]), Thresholds()).iloc[0]

    paired, pooled = judged(True), judged(False)
    assert paired["status"] == "regressed"
    assert paired["instance_change_pct"] == pytest.approx((121.55 / 110.2 - 1) * 100)
    assert paired["p_value"] == pytest.approx(2 / 64) == pytest.approx(
        stats.wilcoxon(np.subtract(new_us, base_us)).pvalue)
    assert pooled["status"] == "not-significant"
    ratios = np.divide.outer(np.array(new_us), np.array(base_us)).ravel()
    assert pooled["instance_change_pct"] == pytest.approx((np.median(ratios) - 1) * 100)
    assert pooled["p_value"] == pytest.approx(stats.mannwhitneyu(base_us, new_us).pvalue)


def test_per_key_mann_whitney_with_bh_equals_scipy():
    """judge's p per key: scipy's mannwhitneyu (exact when small and untied, else the
    normal approximation), then Benjamini-Hochberg over the keys."""
    rng = np.random.default_rng(3)
    base, new, expected = [], [], []
    for key in range(5):
        b = np.round(rng.lognormal(0, 0.3, rng.integers(5, 30)), 1)  # ties on purpose
        n = np.round(rng.lognormal(0.15 * key, 0.3, rng.integers(5, 30)), 1)
        base.append(_instances(key, list(b)))
        new.append(_instances(key, list(n)))
        expected.append(stats.mannwhitneyu(b, n).pvalue)
    judged = judge(pd.concat(base, ignore_index=True), pd.concat(new, ignore_index=True), 5,
                   (1, 1), np.ones(5, bool), np.zeros(5, bool), Thresholds())
    assert judged["tested"].all()
    assert judged["p_value"].to_numpy() == pytest.approx(
        stats.false_discovery_control(expected), rel=1e-9)


def test_count_change_is_judged_on_the_per_step_ranges():
    """Two steps a side. Key 0: 2 and 3 instances a step → 3 and 4: the ranges [2, 3] and
    [3, 4] overlap, so the count is not called changed (its 5 vs 7 instances, all 10 µs,
    are unchanged). Key 1: 1 and 1 → 2 and 2: ``count-changed``."""
    base = pd.concat([_instances(0, [10] * 2, 1), _instances(0, [10] * 3, 2),
                      _instances(1, [5], 1), _instances(1, [5], 2)], ignore_index=True)
    new = pd.concat([_instances(0, [10] * 3, 1), _instances(0, [10] * 4, 2),
                     _instances(1, [5] * 2, 1), _instances(1, [5] * 2, 2)], ignore_index=True)
    judged = judge(base, new, 2, (2, 2), np.ones(2, bool), np.zeros(2, bool), Thresholds())
    assert list(judged["status"]) == ["unchanged", "count-changed"]
    assert list(judged["base_count"]) == [2.5, 1.0] and list(judged["new_count"]) == [3.5, 2.0]


def test_modules_get_the_same_rule():
    """Per module path, the instances under it: Linear_0 10.0…10.4 µs → 12.0…12.4 µs
    (+19.6 %, every new above every base: p = 2 / C(10, 5), BH over the two tested paths
    × 2 = 0.016 < α): ``regressed``; ReLU_0 the same durations: ``unchanged``; Loss_0
    only in new: ``added``."""
    def rows(module: str, durations: list[float], first: int) -> list[dict]:
        return [{"rank": 0, "step": 1, "order": first + i, "name": "aten::x",
                 "input_shapes": "", "module": module, "occurrence": i,
                 "kernel_type": "Mul", "kernels": 1, "device_us": us}
                for i, us in enumerate(durations)]

    relu = [4.0, 4.1, 4.2, 4.3, 4.4]
    base = conform_framework(pd.DataFrame(rows("M/Linear_0", [10.0, 10.1, 10.2, 10.3, 10.4], 0)
                                          + rows("M/ReLU_0", relu, 5)))
    new = conform_framework(pd.DataFrame(rows("M/Linear_0", [12.0, 12.1, 12.2, 12.3, 12.4], 0)
                                         + rows("M/ReLU_0", relu, 5) + rows("Loss_0", [3.0], 10)))
    modules = compare_modules(base, new, Thresholds())
    assert list(modules.columns) == [*MODULE_FIELDS, *MODULE_RULE_FIELDS]
    table = modules.set_index("module")
    assert table["status"].to_dict() == {
        "M/Linear_0": "regressed", "M/ReLU_0": "unchanged", "Loss_0": "added"}
    assert table.loc["M/Linear_0", "p_value"] == pytest.approx(2 / 252 * 2)


def test_family_table_names_each_operator_once():
    raw = {k: v for k, v in package_map("framework_families.json").items()
           if not k.startswith("_")}
    listed = [name for names in raw.values() for name in names]
    assert len(listed) == len(set(listed)) == len(families())
    names = pd.Series(["aten::_foreach_mul_", "aten::addmm", "aten::relu_", "aten::erf_",
                       "npu::npu_rotary_mul", "c10d::allreduce_", "npu::npu_reshape"])
    assert list(family_of(names)) == ["mul", "matmul", "relu", "erf", "rotary_embedding",
                                      "allreduce", "npu::npu_reshape"]
