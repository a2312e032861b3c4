"""Framework modules and name-only pairs: no per-instance figure across unlike operators.

A module's instance is one framework-op instance under it. When the ops under it change
their counts per step (``mul`` + ``mm`` + ``add`` → one ``addmm``) the module is
``count-changed`` and its per-instance % is the ratio of means, as an operator key's;
a name-only pair never joins tensors more than 10× apart in size. Expected values come
from the raw files (trace_view.json, kernel_details.csv read with json / csv) or from
crafted frames whose answer is worked out in the docstrings.
"""

from __future__ import annotations

import csv
import json
from decimal import Decimal
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import REALDATA, needs_realdata

from cann_diff.compare.framework import compare_framework, compare_modules, compare_operators
from cann_diff.compare.framework_keys import input_elements, pair_keys, size_groups
from cann_diff.read import load_run
from cann_diff.read.reduce.framework import conform_framework
from cann_diff.settings import Thresholds

MSI_2024 = REALDATA / "Ascend__msinsight@c1e639ee2/test/data/pytorch/text/level1"
MSI_2025 = REALDATA / "Ascend__msinsight/test/data/pytorch/text/level1"
RANKS = ("rank0_ascend_pt", "rank1_ascend_pt")
OUT = "ASCEND_PROFILER_OUTPUT"
FC = "DistributedDataParallel_0/AlexNet_0/Sequential_1/"


# ---------------------------------------------------------------- by hand, from the files

def _module_ops(rank_dir: Path, module: str, parent: str) -> list[tuple[str, float]]:
    """(op name, device µs) of every op instance the forward call of ``module`` launched.

    The module's forward is the one ``nn.Module: <module>`` event, inside ``parent``'s;
    an op instance is the innermost ``ns::op`` open at a torch_to_npu launch inside it on
    its thread, and its device time the kernels whose start is the flow's end.
    """
    events = json.loads((rank_dir / OUT / "trace_view.json").read_text())
    [mod] = [e for e in events if e.get("name") == f"nn.Module: {module}"]
    [outer] = [e for e in events if e.get("name") == f"nn.Module: {parent}"]
    start, end = Decimal(mod["ts"]), Decimal(mod["ts"]) + Decimal(str(mod["dur"]))
    assert Decimal(outer["ts"]) <= start and end <= Decimal(outer["ts"]) + Decimal(
        str(outer["dur"]))
    ops = [(Decimal(e["ts"]), Decimal(e["ts"]) + Decimal(str(e["dur"])), n)
           for n, e in enumerate(events)
           if e.get("cat") == "cpu_op" and e.get("ph") == "X" and "::" in e["name"]
           and e["tid"] == mod["tid"] and start <= Decimal(e["ts"]) < end]
    flows = {(e["id"], e["ph"]): e for e in events if e.get("cat") == "async_npu"}
    owner_at = {}  # flow end (µs) → the op instance (its event number)
    for (flow, phase), launch in flows.items():
        t = Decimal(launch["ts"])
        if phase == "s" and (flow, "f") in flows and launch["tid"] == mod["tid"] \
                and start <= t < end:
            open_ops = [(ts, -(stop - ts), n) for ts, stop, n in ops if ts <= t < stop]
            if open_ops:
                owner_at[Decimal(flows[(flow, "f")]["ts"])] = max(open_ops)[2]
    with open(rank_dir / OUT / "kernel_details.csv", newline="") as handle:
        kernels = [(Decimal(r["Start Time(us)"].strip()), float(r["Duration(us)"]))
                   for r in csv.DictReader(handle)]
    device: dict[int, float] = {}
    for kernel_start, us in kernels:
        if kernel_start in owner_at:
            number = owner_at[kernel_start]
            device[number] = device.get(number, 0.0) + us
    return [(events[n]["name"], us) for n, us in sorted(device.items())]


@pytest.fixture(scope="module")
def real_pair():
    """The 2-rank job on the 2024 and the 2025 stack, compared at the framework level."""
    result, reason = compare_framework(load_run(MSI_2024), load_run(MSI_2025))
    assert reason is None
    return result


# ---------------------------------------------------------------- the real pair

@pytest.mark.slow
@needs_realdata
@pytest.mark.parametrize("module", ["Linear_0", "Linear_1"])
def test_fc_layers_fused_into_addmm_read_the_ratio_of_means(real_pair, module):
    """In each rank the 2024 stack runs ``mul`` + ``mm`` + ``add`` in the forward of the
    FC layer, the 2025 stack one ``addmm``: 3 → 1 ops a step, ``count-changed``. The
    per-instance % is the ratio of the mean op times over both ranks (Linear_0: 425.6 →
    352.0 µs a rank, 141.9 → 352.0 µs an op, +148 %; Linear_1 +77 %; rank 0 alone
    +144 % and +68 %), never the ratio of the addmm's median to that of a mul, an mm and
    an add (+6479 % and +2292 % before)."""
    base = [op for rank in RANKS for op in _module_ops(MSI_2024 / rank, module, "Sequential_1")]
    new = [op for rank in RANKS for op in _module_ops(MSI_2025 / rank, module, "Sequential_1")]
    assert sorted({name for name, _ in base}) == ["aten::add", "aten::mm", "aten::mul"]
    assert {name for name, _ in new} == {"aten::addmm"}
    base_us, new_us = [us for _, us in base], [us for _, us in new]
    row = real_pair.modules.set_index("module").loc[FC + module]
    assert (row["base_count"], row["new_count"]) == (len(base) / 2, len(new) / 2) == (3, 1)
    assert row["base_device_us"] == pytest.approx(sum(base_us) / 2, rel=1e-9)
    assert row["new_device_us"] == pytest.approx(sum(new_us) / 2, rel=1e-9)
    assert row["status"] == "count-changed"
    means = np.mean(new_us) / np.mean(base_us) - 1
    assert row["instance_change_pct"] == pytest.approx(means * 100, rel=1e-9)
    assert row["instance_change_pct"] < 200  # the medians' ratio read +2292 % and more
    assert not row["tested"] and pd.isna(row["p_value"])


@pytest.mark.slow
@needs_realdata
def test_a_conv_weight_copy_is_no_counterpart_of_the_fc_weight_copies(real_pair):
    """``aten::copy_`` left unpaired by shape: 64,3,11,11 twice in 2024 (the first conv's
    weight, 2 · 23,232 elements), 1000,4096 / 4096,4096 / 4096,9216 twice in 2025 (FC
    weights, 8.2 M to 75.5 M elements: 176× to 1,625× more). Nothing within 10×: the
    conv copy is ``removed``, each FC copy ``added``, and no ``name`` key holds them."""
    conv = "64,3,11,11;64,3,11,11;"
    fc = ["1000,4096;1000,4096;", "4096,4096;4096,4096;", "4096,9216;4096,9216;"]
    conv_elements = 2 * 64 * 3 * 11 * 11
    assert min(2 * 1000 * 4096, 2 * 4096 * 4096, 2 * 4096 * 9216) / conv_elements > 10
    ops = real_pair.operators
    copies = ops[ops["name"] == "aten::copy_"].set_index("input_shapes")
    assert copies.loc[conv, "status"] == "removed" and copies.loc[conv, "match_kind"] is None
    for shapes in fc:
        assert copies.loc[shapes, "status"] == "added", shapes
        assert copies.loc[shapes, "match_kind"] is None
    assert not (ops["match_kind"] == "name").any()  # the pair's only name-only fold is gone


# ---------------------------------------------------------------- crafted frames

def _rows(module: str, ops: list[tuple[str, str, float]], step: int = 1) -> list[dict]:
    """One framework row per (name, shapes, µs) under ``module``, in launch order."""
    return [{"rank": 0, "step": step, "order": i, "name": name, "input_shapes": shapes,
             "module": module, "occurrence": 0, "kernel_type": "K", "kernels": 1,
             "device_us": us} for i, (name, shapes, us) in enumerate(ops)]


def _frame(*parts: list[dict]) -> pd.DataFrame:
    rows = [row for part in parts for row in part]
    order = {}
    for row in rows:  # launch order within the step, whatever the module
        row["order"] = order[row["step"]] = order.get(row["step"], -1) + 1
    frame = pd.DataFrame(rows)
    frame["occurrence"] = frame.groupby(["step", "name", "input_shapes"]).cumcount()
    return conform_framework(frame)


def test_module_status_follows_the_operator_rule():
    """One step a side, threshold 5 %, α 0.05; per module, by hand:

    * Linear_0: mul 5 + mm 40 + add 6 → addmm 60 (3 → 1 ops): ``count-changed``; means
      51 / 3 = 17 → 60, +252.9 % (the medians' ratio, 60 / 6, would read +900 %);
    * Linear_1: mul 4 + mm 40 → addmm 41 + cast 1 (2 → 2 ops, but other ops):
      ``count-changed``; means 22 → 21, −4.5 %, not tested per instance;
    * Conv_0: convolution 8,3,32,32;16,3,3,3 → 16,3,32,32;16,3,3,3 (25,008 → 49,584
      elements, 2×: paired by name, other shapes), 30 → 55 µs: ``reshaped``, no %;
    * ReLU_0: relu 10.0 … 10.4 → 12.0 … 12.4 (the same op, 5 a side, every new above
      every base): medians 10.2 → 12.2, +19.6 %, exact Mann-Whitney p = 2 / C(10, 5),
      the only module tested: ``regressed``;
    * Loss_0 only in new: ``added``.
    """
    x = "8,8;8,8"
    base = _frame(_rows("M/Linear_0", [("aten::mul", x, 5), ("aten::mm", x, 40),
                                       ("aten::add", x, 6)]),
                  _rows("M/Linear_1", [("aten::mul", x, 4), ("aten::mm", x, 40)]),
                  _rows("M/Conv_0", [("aten::convolution", "8,3,32,32;16,3,3,3", 30)]),
                  _rows("M/ReLU_0", [("aten::relu", "8,8", us)
                                     for us in (10.0, 10.1, 10.2, 10.3, 10.4)]))
    new = _frame(_rows("M/Linear_0", [("aten::addmm", x, 60)]),
                 _rows("M/Linear_1", [("aten::addmm", x, 41), ("aten::_to_copy", x, 1)]),
                 _rows("M/Conv_0", [("aten::convolution", "16,3,32,32;16,3,3,3", 55)]),
                 _rows("M/ReLU_0", [("aten::relu", "8,8", us)
                                    for us in (12.0, 12.1, 12.2, 12.3, 12.4)]),
                 _rows("Loss_0", [("aten::nll_loss", "8", 3)]))
    table = compare_modules(base, new, Thresholds()).set_index("module")
    assert table["status"].to_dict() == {
        "M/Linear_0": "count-changed", "M/Linear_1": "count-changed", "M/Conv_0": "reshaped",
        "M/ReLU_0": "regressed", "Loss_0": "added"}
    change = table["instance_change_pct"]
    assert change["M/Linear_0"] == pytest.approx((60 / 17 - 1) * 100)
    assert change["M/Linear_1"] == pytest.approx((21 / 22 - 1) * 100)
    assert np.isnan(change["M/Conv_0"]) and np.isnan(change["Loss_0"])
    assert change["M/ReLU_0"] == pytest.approx((12.2 / 10.2 - 1) * 100)
    assert table["tested"].to_dict() == {m: m == "M/ReLU_0" for m in table.index}
    assert table.loc["M/ReLU_0", "p_value"] == pytest.approx(2 / 252)
    assert (table.loc["M/Linear_1", "base_count"], table.loc["M/Linear_1", "new_count"]) == (2, 2)


def test_module_counts_that_overlap_across_steps_are_not_a_count_change():
    """Two steps a side, one module running relu: 2 and 3 a step → 3 and 2 (ranges [2, 3]
    both sides), all 10 µs → 10 µs: ``unchanged``, as an operator key with those counts."""
    relu = ("aten::relu", "8,8", 10.0)
    base = _frame(_rows("M/ReLU_0", [relu] * 2, 1), _rows("M/ReLU_0", [relu] * 3, 2))
    new = _frame(_rows("M/ReLU_0", [relu] * 3, 1), _rows("M/ReLU_0", [relu] * 2, 2))
    row = compare_modules(base, new, Thresholds()).iloc[0]
    assert (row["status"], row["base_count"], row["new_count"]) == ("unchanged", 2.5, 2.5)


def test_a_count_changed_operator_key_reads_the_ratio_of_means():
    """``aten::add`` 10, 10, 40 µs a step → one 30 µs instance: mean 20 → 30, +50 % (the
    medians' ratio, 10 → 30, would read +200 %); ``count-changed``."""
    add = [("aten::add", "8;8", us) for us in (10, 10, 40)]
    base, new = _frame(_rows("", add)), _frame(_rows("", [("aten::add", "8;8", 30)]))
    table, _, _ = compare_operators(base, new, Thresholds())
    row = table.iloc[0]
    assert row["status"] == "count-changed"
    assert row["instance_change_pct"] == pytest.approx(50.0)


# ---------------------------------------------------------------- name-only pairs

@pytest.mark.parametrize("shapes, elements", [
    ("64,3,11,11;64,3,11,11;", 2 * 64 * 3 * 11 * 11),  # empty slot: an attribute, no tensor
    ("4096;32,9216;9216,4096;;", 4096 + 32 * 9216 + 9216 * 4096),
    ("8,?;4", 4),                                        # a dimension not a number: left out
    (";;", np.nan),                                      # no tensor: size unknown
    ("", np.nan),
])
def test_input_elements_sum_the_product_of_each_tensors_dimensions(shapes, elements):
    assert input_elements(pd.Series([shapes]))[0] == pytest.approx(elements, nan_ok=True)


def _keys(base: list[str], new: list[str], name: str = "aten::copy_") -> pd.DataFrame:
    return pd.DataFrame({"name": name, "input_shapes": [*base, *new],
                         "on_base": [True] * len(base) + [False] * len(new)})


def test_size_groups_link_keys_across_sides_within_ten_times():
    """Base 8,16 (128) and new 16,16 (256): 2×, one group; base 64,3,11,11 (23,232) and
    new 4096,9216 (37.7 M): apart, alone each. A chain (1,000 ↔ 9,000 ↔ 80,000, each
    link under 10×) is one group; a key of unknown size links with every key.

    The groups are a partition of the keys, numbered anyhow: compared as sets."""
    def partition(base: list[str], new: list[str]) -> list[list[int]]:
        groups = size_groups(_keys(base, new))
        return sorted(list(np.flatnonzero(groups == g)) for g in set(groups))

    assert partition(["8,16", "64,3,11,11"], ["16,16", "4096,9216"]) == [[0, 2], [1], [3]]
    assert partition(["1000", "80000"], ["9000"]) == [[0, 1, 2]]
    assert partition(["1000", "80000"], ["200000"]) == [[0], [1, 2]]
    assert partition([";"], ["4", "40000"]) == [[0, 1, 2]]
    assert partition([";;"], [";"]) == [[0, 1]]  # no size on either side: one fold
    assert partition(["4"], ["4"] * 3 + ["41"]) == [[0, 1, 2, 3], [4]]  # 41 / 4 > 10
    # names never mix: a 4 of one name and a 5 of another are two keys alone
    two_names = pd.concat([_keys(["4"], []), _keys([], ["5"], "aten::add")], ignore_index=True)
    assert len(set(size_groups(two_names))) == 2


def test_name_only_pairs_fold_per_size_group():
    """``aten::copy_``: base 8,16 twice and a conv weight 64,3,11,11 twice; new 16,16
    twice and an FC weight 4096,9216 twice. The small copies (256 → 512 elements) fold
    into one ``name`` key; the conv copy is removed and the FC copy added."""
    def frame(shapes: list[str]) -> pd.DataFrame:
        return pd.DataFrame({"name": "aten::copy_", "input_shapes": shapes})

    keys = pair_keys(frame(["8,16;8,16;", "64,3,11,11;64,3,11,11;"]),
                     frame(["16,16;16,16;", "4096,9216;4096,9216;"]))
    table = keys.table
    assert sorted(zip(table["base_input_shapes"].fillna("-"), table["new_input_shapes"].fillna(
        "-"), table["match_kind"].fillna("-"))) == [
        ("-", "4096,9216;4096,9216;", "-"), ("64,3,11,11;64,3,11,11;", "-", "-"),
        ("8,16;8,16;", "16,16;16,16;", "name")]


def _components_pairwise(sizes: list[float | None], n_base: int) -> list[list[int]]:
    """The groups by the definition: every base-new pair linked within 10× (or of unknown
    size), then connected components by repeated merging; O(k²), for small k only."""
    label = list(range(len(sizes)))
    links = [(i, j) for i in range(n_base) for j in range(n_base, len(sizes))
             if sizes[i] is None or sizes[j] is None
             or max(sizes[i], sizes[j]) <= 10 * min(sizes[i], sizes[j])]
    changed = True
    while changed:
        changed = False
        for i, j in links:
            if label[i] != label[j]:
                label[i] = label[j] = min(label[i], label[j])
                changed = True
    return sorted([k for k in range(len(sizes)) if label[k] == g] for g in set(label))


@pytest.mark.slow
def test_size_groups_equal_the_pairwise_components_on_random_keys():
    """The sorted-neighbour cut (size_groups) gives the components the pairwise definition
    gives, on 400 random key sets of 0-6 keys a side (one key in ten of unknown size),
    all at once as 400 names of one table: no group spans two names."""
    rng = np.random.default_rng(7)
    cases = []
    for number in range(400):
        n_base, n_new = (int(n) for n in rng.integers(0, 7, 2))
        sizes = [None if rng.random() < 0.1 else int(10 ** rng.uniform(0, 5))
                 for _ in range(n_base + n_new)]
        text = [";" if size is None else str(size) for size in sizes]
        cases.append((_keys(text[:n_base], text[n_base:], f"op{number}"),
                      _components_pairwise(sizes, n_base)))
    groups = size_groups(pd.concat([keys for keys, _ in cases], ignore_index=True))
    start = 0
    for keys, expected in cases:
        span = np.s_[start:start + len(keys)]
        mine, rest = groups[span], np.delete(groups, span)
        start += len(keys)
        assert sorted(list(np.flatnonzero(mine == g)) for g in set(mine)) == expected, keys
        assert not np.isin(mine, rest).any()
