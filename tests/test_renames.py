"""Kernel pairing across CANN renames (data/renames.json) and the ``renamed`` rung.

Crafted pairs: for every rename-table entry and each successor, one base kernel of the
old type and one new kernel of the successor, on shapes no other case uses
(``{i},16,48``, 3-D so that no C0 folding applies), written twice:

* ``plain``     — the same shapes on both sides: the family + shapes rung (``family``);
* ``attribute`` — the successor takes one more input, ``4`` (a 1-D attribute tensor of
  4 values; for TopKD the old kernel's own ``assist_seq`` of 2048 values is its second
  input instead and the successor's ``k`` is a 0-D ``""``): the ``renamed`` rung.

Real pair: rank 0 of one AlexNet-like job on a 2024 stack (C0 = 16, FP16, ``...D``
kernels; tests/data/cross_stack) and a 2025 one (C0 = 8, FP32; tests/data/realdata). The
expected pairs below were read off the two kernel_details.csv by hand: the successor
adds a small input (``;1``, ``;2``, ``4;``, ``;4;``) and halves C0, so C1 doubles.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pandas as pd
import pytest
from conftest import DATA
from profiles import Kernel, write_profile

from cann_diff.errors import InputError
from cann_diff.match import match
from cann_diff.read import load_run
from cann_diff.read.maps import load_vocabulary
from cann_diff.vocab.names import canonical_names
from cann_diff.vocab.shapes import match_shapes

RENAMES = json.loads((Path(__file__).resolve().parent.parent / "cann_diff" / "data"
                      / "renames.json").read_text("utf-8"))
ENTRIES = {k: v for k, v in RENAMES.items() if not k.startswith("_")}
CASES = [(old, new) for old, spec in ENTRIES.items() for new in spec["to"]]

OLD = DATA / "cross_stack/qianxiaoxixixi__MsInsightForEveryOne/test/data/pytorch/text/level1"
NEW = DATA / "realdata/Ascend__msinsight/test/data/pytorch/text/level1"


def _families(types: list[str]) -> list[str]:
    names = pd.Series([f"k_{t}" for t in types])
    return canonical_names(names, pd.Series(types), pd.Series("AI_CORE", index=names.index)
                           )["family"].tolist()


# ------------------------------------------------------------------- the table itself


def test_every_entry_names_its_source_and_successors():
    assert len(ENTRIES) >= 20
    for old, spec in ENTRIES.items():
        assert spec["source"].strip(), old
        assert spec["to"] and all(isinstance(t, str) and t != old for t in spec["to"]), old


def test_an_old_type_and_its_successors_share_the_family_the_table_names():
    for old, spec in ENTRIES.items():
        assert _families([old, *spec["to"]]) == [spec["family"]] * (1 + len(spec["to"])), old


def test_every_d_kernel_of_the_table_has_a_successor_without_the_d():
    d_kernels = [old for old in ENTRIES if old.endswith("D")]
    assert {"ReduceSumD", "TopKD", "Conv2DBackpropFilterD", "Conv2DBackpropInputD"} <= \
        set(d_kernels)
    for old in d_kernels:
        assert any(not new.endswith("D") for new in ENTRIES[old]["to"]), old


# ------------------------------------------------------------------- crafted pairs


def _case_kernels(variant: str):
    base, new, expected = [], [], {}
    for i, (old, successor) in enumerate(CASES):
        shapes = f"{i + 9},16,48"
        base_shapes, new_shapes = shapes, shapes
        if variant == "attribute":
            if ENTRIES[old].get("set_aside_inputs"):
                base_shapes, new_shapes = f"{shapes};2048", f"{shapes};"
            else:
                new_shapes = f"{shapes};4"
        base.append(Kernel(f"{old}_{i}", old, "AI_CORE", 10.0, base_shapes))
        new.append(Kernel(f"{successor}_{i}", successor, "AI_CORE", 10.0, new_shapes))
        expected[(base_shapes, new_shapes)] = (f"{old}→{successor}",
                                               "family" if variant == "plain" else "renamed")
    return base, new, expected


@pytest.fixture(scope="module", params=["plain", "attribute"])
def crafted(request, tmp_path_factory):
    base_ops, new_ops, expected = _case_kernels(request.param)
    root = tmp_path_factory.mktemp(f"renames_{request.param}")
    base = load_run(write_profile(root, "base", base_ops, steps=(1,),
                                  communication_json=False).path)
    new = load_run(write_profile(root, "new", new_ops, steps=(1,),
                                 communication_json=False).path)
    return match(base.summary.ops, new.summary.ops), expected


@pytest.mark.slow
def test_every_rename_pairs_on_the_right_rung(crafted):
    matched, expected = crafted
    keys = matched.keys
    got = {(k.base_input_shapes, k.new_input_shapes): (k.op_type, k.match_kind)
           for k in keys.itertuples()}
    assert got == expected
    assert keys["match_kind"].notna().all() and len(keys) == len(CASES)


def test_a_renamed_key_keeps_both_sides_shapes_and_the_compared_form(crafted):
    matched, expected = crafted
    keys = matched.keys.set_index("base_input_shapes")
    for base_shapes, new_shapes in expected:
        key = keys.loc[base_shapes]
        shown = base_shapes if base_shapes == new_shapes else f"{base_shapes}→{new_shapes}"
        assert key["input_shapes"] == shown
        assert key["match_shapes"] == base_shapes.split(";")[0]


def test_both_sides_taking_different_attribute_inputs_is_no_rename(tmp_path):
    # A sum over two axes is not a sum over one: ReduceSum 32,64,3025;2 vs ;1 share
    # family and data shape but only the family-only rung pairs them.
    base_ops = [Kernel("ReduceSum_a", "ReduceSum", "AI_CORE", 5.0, "32,64,3025;2")]
    new_ops = [Kernel("ReduceSum_b", "ReduceSum", "AI_CORE", 5.0, "32,64,3025;1")]
    base = load_run(write_profile(tmp_path, "base", base_ops, steps=(1,),
                                  communication_json=False).path)
    new = load_run(write_profile(tmp_path, "new", new_ops, steps=(1,),
                                 communication_json=False).path)
    keys = match(base.summary.ops, new.summary.ops).keys
    assert keys[["op_type", "match_kind"]].values.tolist() == [["ReduceSum", "type-only"]]


def test_a_layout_only_change_pairs_as_normalized():
    # Conv2D on C0 = 16 (FP16) vs C0 = 8 (FP32): 4·16 = 8·8 = 64 input channels; the
    # FRACTAL_Z weight 100,12,16,16 / 200,12,16,8 is 12·16 = 192 by 100·16 = 200·8 = 1600.
    ops = pd.DataFrame({"op_type": ["Conv2D"], "family": ["Conv2D"], "category": ["compute"],
                        "input_shapes": ["32,4,27,27,16;100,12,16,16;192"]})
    new = ops.assign(input_shapes=["32,8,27,27,8;200,12,16,8;192"])
    keys = match(ops, new).keys
    assert keys[["match_kind", "match_shapes"]].values.tolist() == \
        [["normalized", "32,64,27,27;192,1600;192"]]


def test_a_key_is_filed_under_the_category_most_of_its_instances_ran_in():
    # Add 8,8 ran 2 + 1 times on AI_CPU and 2 times as compute (3 > 2); Cast 4 ran 2 and 2
    # times (a tie: alphabetical, aicpu); Mul ran once as other, and 0 times as compute in
    # a row of count 0 (1 > 0). A row's weight is its count, not its row.
    ops = pd.DataFrame({
        "op_type": ["Add", "Cast", "Add", "Mul", "Cast", "Add", "Mul"],
        "family": ["Add", "Cast", "Add", "Mul", "Cast", "Add", "Mul"],
        "input_shapes": ["8,8", "4", "8,8", "2", "4", "8,8", "2"],
        "category": pd.Categorical(["aicpu", "compute", "compute", "other", "aicpu", "aicpu",
                                    "compute"]),
        "count": [2, 2, 2, 1, 2, 1, 0]})
    keys = match(ops, ops.iloc[:0]).keys.set_index("op_type")
    assert keys.loc[["Add", "Cast", "Mul"], "category"].tolist() == ["aicpu", "aicpu", "other"]
    # A group none of whose rows has a category is filed under none, not under another's.
    ops.loc[ops["op_type"] == "Mul", "category"] = None
    keys = match(ops, ops.iloc[:0]).keys.set_index("op_type")
    assert keys.loc[["Add", "Cast", "Mul"], "category"].tolist() == ["aicpu", "aicpu", ""]


@pytest.mark.parametrize(("shapes", "expected"), [
    # NC1HWC0 → N,C,H,W with C = C1·C0 rounded up to 32: 3 channels pad to 16 or to 8.
    ("32,1,224,224,16", ("32,32,224,224", "")),
    ("32,1,224,224,8", ("32,32,224,224", "")),
    ("32,12,13,13,16", ("32,192,13,13", "")),
    # FRACTAL_Z / FRACTAL_NZ A,B,16,C0 → B·16, A·C0 (the ND matrix: 576·16 = 9216).
    ("576,256,16,16", ("4096,9216", "")),
    ("4096,9216", ("4096,9216", "")),
    # attribute inputs: 0-D, 1-D of ≤ 8; a 1-D of 9 is data; an op's only input is data.
    ("32,1000;", ("32,1000", "<>")),
    ("4;288,16,16,8;32,32,13,13,8", ("256,2304;32,256,13,13", "<4>")),
    ("32,4096;9", ("32,4096;9", "")),
    ("5", ("5", "")),
    ("", ("", "")),
])
def test_match_shapes_rules(shapes, expected):
    got = match_shapes(pd.Series(["Any"]), pd.Series([shapes]), 8)
    assert tuple(got.iloc[0]) == expected


# ------------------------------------------------------------------- --alias-map


@pytest.mark.slow
def test_an_alias_map_rename_entry_adds_a_family_and_its_set_aside_inputs(tmp_path):
    user = tmp_path / "aliases.json"
    user.write_text(json.dumps({"Gemm": "MatMul", "FancyOpD": {
        "to": ["FancyOpV2"], "family": "FancyOp", "set_aside_inputs": [0],
        "source": "crafted"}}))
    vocab = load_vocabulary(None, user)
    assert vocab.aliases["FancyOpD"] == "FancyOp"
    assert vocab.renames["FancyOpD"].set_aside_inputs == (0,)
    base_ops = [Kernel("FancyOpD_1", "FancyOpD", "AI_CORE", 5.0, "4096;64,64")]
    new_ops = [Kernel("FancyOpV2_1", "FancyOpV2", "AI_CORE", 5.0, "64,64")]
    base = load_run(write_profile(tmp_path, "base", base_ops, steps=(1,),
                                  communication_json=False).path, alias_map=user)
    new = load_run(write_profile(tmp_path, "new", new_ops, steps=(1,),
                                 communication_json=False).path, alias_map=user)
    keys = match(base.summary.ops, new.summary.ops, vocab=base.vocab).keys
    assert keys[["op_type", "match_kind"]].values.tolist() == \
        [["FancyOpD→FancyOpV2", "renamed"]]
    without = match(base.summary.ops, new.summary.ops).keys  # no map: 4096 stays data
    assert without["match_kind"].tolist() == ["type-only"]


def test_a_malformed_rename_entry_is_an_input_error(tmp_path):
    user = tmp_path / "bad.json"
    user.write_text(json.dumps({"FooD": {"to": ["Foo"], "set_aside_inputs": ["x"]}}))
    with pytest.raises(InputError, match="FooD") as error:
        load_vocabulary(None, user)
    assert error.value.path == str(user)


# ------------------------------------------------------------------- the real pair

EXPECTED_RENAMES = {
    ("ReduceSumD", "ReduceSum"): {
        ("32", "32;1"), ("160", "160;1"), ("32,1000", "32,1000;1"),
        ("32,4096", "32,4096;1"), ("32,256,169", "32,256,169;2"),
        ("32,384,169", "32,384,169;2"), ("32,192,729", "32,192,729;2"),
        ("32,64,3025", "32,64,3025;2")},
    ("Conv2DBackpropFilterD", "Conv2DBackpropFilter"): {
        ("32,1,224,224,16;32,4,55,55,16", "32,1,224,224,8;4;32,8,55,55,8"),
        ("32,4,27,27,16;32,12,27,27,16", "32,8,27,27,8;4;32,24,27,27,8"),
        ("32,12,13,13,16;32,24,13,13,16", "32,24,13,13,8;4;32,48,13,13,8"),
        ("32,24,13,13,16;32,16,13,13,16", "32,48,13,13,8;4;32,32,13,13,8"),
        ("32,16,13,13,16;32,16,13,13,16", "32,32,13,13,8;4;32,32,13,13,8")},
    ("Conv2DBackpropInputD", "Conv2DBackpropInput"): {
        ("100,12,16,16;32,12,27,27,16", "4;200,12,16,8;32,24,27,27,8"),
        ("108,24,16,16;32,24,13,13,16", "4;216,24,16,8;32,48,13,13,8"),
        ("144,16,16,16;32,16,13,13,16", "4;288,16,16,8;32,32,13,13,8"),
        ("216,16,16,16;32,16,13,13,16", "4;432,16,16,8;32,32,13,13,8")},
    ("TopKD", "TopKV2"): {("32,1000;2048", "32,1000;")},
    # FRACTAL_NZ 256,2,16,16 is the ND 32,4096 matrix (2·16, 256·16).
    ("MatMul", "MatMulV2"): {
        ("256,2,16,16;256,2,16,16", "32,4096;32,4096"),
        ("256,2,16,16;256,256,16,16", "32,4096;4096,4096"),
        ("256,2,16,16;576,256,16,16", "32,4096;4096,9216")},
    ("MatMul", "MatMulV3"): {("256,2,16,16;576,2,16,16", "32,4096;32,9216")},
}


def _csv_types(path: Path) -> dict[str, int]:
    with open(path / "rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
              newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["Type"]] = counts.get(row["Type"], 0) + 1
    return counts


@pytest.fixture(scope="module")
def real_pair():
    base, new = load_run(OLD), load_run(NEW)
    return base, new, match(base.summary.ops, new.summary.ops)


def test_the_real_pair_holds_the_five_renamed_types():
    old, new = _csv_types(OLD), _csv_types(NEW)
    assert {t: old.get(t, 0) for t in ("ReduceSumD", "Conv2DBackpropFilterD",
                                       "Conv2DBackpropInputD", "TopKD", "MatMul")} == \
        {"ReduceSumD": 10, "Conv2DBackpropFilterD": 5, "Conv2DBackpropInputD": 4,
         "TopKD": 1, "MatMul": 9}
    assert not {"ReduceSumD", "Conv2DBackpropFilterD", "TopKD", "MatMul"} & set(new)


@pytest.mark.slow
def test_the_real_pair_pairs_the_renames_shape_by_shape(real_pair):
    keys = real_pair[2].keys
    renamed = keys[keys["match_kind"] == "renamed"]
    for (old, successor), pairs in EXPECTED_RENAMES.items():
        mine = renamed[(renamed["base_op_type"] == old) & (renamed["new_op_type"] == successor)]
        assert set(zip(mine["base_input_shapes"], mine["new_input_shapes"])) == pairs, old
        assert (mine["op_type"] == f"{old}→{successor}").all()


def test_no_kernel_of_a_renamed_type_is_left_removed(real_pair):
    base, _, matched = real_pair
    ops = base.summary.ops
    keys = matched.keys.set_index("key_id")
    kinds = keys.loc[matched.base_key, "match_kind"].to_numpy()
    for old in ("ReduceSumD", "Conv2DBackpropFilterD", "Conv2DBackpropInputD", "TopKD",
                "MatMul"):
        mine = (ops["op_type"] == old).to_numpy()
        assert mine.any() and pd.notna(kinds[mine]).all(), old


def test_the_real_pair_leaves_fewer_keys_one_sided_than_exact_and_family_alone(real_pair):
    # Before the renamed rung: 72 base keys removed and 34 new keys added (rank 0 vs
    # rank 0). The 5 renamed types alone held 8 + 5 + 4 + 1 base shapes and as many new.
    keys = real_pair[2].keys
    removed, added = keys["new_op_type"].isna().sum(), keys["base_op_type"].isna().sum()
    assert removed <= 72 - 18 and added <= 34 - 18


def test_a_vocabulary_with_user_maps_pickles_whole(tmp_path):
    """Worker processes get the vocabulary itself, not the paths of the user's maps."""
    import pickle

    user = tmp_path / "aliases.json"
    user.write_text(json.dumps({"Gemm": "MatMul", "FancyOpD": {
        "to": ["FancyOpV2"], "family": "FancyOp", "set_aside_inputs": [0]}}))
    vocab = load_vocabulary(None, user)
    again = pickle.loads(pickle.dumps(vocab))
    assert again.key == (None, str(user))
    assert (again.fusion, again.renames, again.aliases) == \
        (vocab.fusion, vocab.renames, vocab.aliases)
    assert again.aliases["FancyOpD"] == "FancyOp" and "MatmulAllReduce" in again.fusion
