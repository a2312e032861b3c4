"""The match ladder on small frames whose keys were worked out by hand.

Each rung numbers its values over both sides and folds a side's groups that share them
into one key (match.py ``_rung``). The frames here have the four columns ``match`` needs;
the shapes are 2-D, so no C0 folding and no attribute inputs apply.
"""

from __future__ import annotations

import pandas as pd

from cann_diff.match import match


def _ops(rows: list[tuple[str, str, str, str]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=["op_type", "input_shapes", "family", "category"])


def test_two_base_types_of_one_family_fold_into_one_key():
    # Base runs MatMulV3 and MatMulV2 on the same shapes; new runs plain MatMul on them.
    # No exact pair: the family rung folds the two base groups into one key.
    base = _ops([("MatMulV3", "8,16;16,8", "MatMul", "AI_CORE"),
                 ("MatMulV2", "8,16;16,8", "MatMul", "AI_CORE"),
                 ("Add", "8,8;8,8", "Add", "AI_VECTOR_CORE")])
    new = _ops([("MatMul", "8,16;16,8", "MatMul", "AI_CORE"),
                ("Add", "8,8;8,8", "Add", "AI_VECTOR_CORE"),
                ("Cast", "8,8", "Cast", "AI_CORE")])
    matched = match(base, new)
    keys = matched.keys.set_index("key_id")
    # Sorted by category, family, shapes, type: AI_CORE Cast (0), AI_CORE MatMul (1),
    # AI_VECTOR_CORE Add (2).
    assert keys["family"].tolist() == ["Cast", "MatMul", "Add"]
    assert keys.loc[1, "op_type"] == "MatMulV2/MatMulV3→MatMul"  # distinct types, sorted
    assert keys.loc[1, "base_op_type"] == "MatMulV2/MatMulV3"
    assert keys.loc[1, "input_shapes"] == "8,16;16,8"
    assert keys["match_kind"].tolist() == [None, "family", "exact"]
    assert keys.loc[0, "base_op_type"] is None and keys.loc[0, "new_op_type"] == "Cast"
    assert matched.base_key.tolist() == [1, 1, 2]
    assert matched.new_key.tolist() == [1, 2, 0]


def test_leftovers_of_each_side_keep_their_own_keys():
    base = _ops([("Relu", "4,4", "Relu", "AI_CORE"), ("Mul", "4,4;4,4", "Mul", "AI_CORE")])
    new = _ops([("Relu", "2,2", "Relu", "AI_CORE"), ("Sub", "4,4;4,4", "Sub", "AI_CORE")])
    matched = match(base, new)
    keys = matched.keys.set_index("key_id")
    # Relu pairs on family alone (type-only, shapes blanked); Mul is removed, Sub added.
    # Order: family Mul (0), Relu (1), Sub (2).
    assert keys["op_type"].tolist() == ["Mul", "Relu", "Sub"]
    assert keys["match_kind"].tolist() == [None, "type-only", None]
    assert keys.loc[1, "input_shapes"] == ""
    assert keys.loc[1, "base_input_shapes"] == "4,4" and keys.loc[1, "new_input_shapes"] == "2,2"
    assert matched.base_key.tolist() == [1, 0]
    assert matched.new_key.tolist() == [1, 2]


def test_one_empty_side_leaves_every_group_unpaired():
    base = _ops([("Relu", "4,4", "Relu", "AI_CORE"), ("Relu", "2,2", "Relu", "AI_CORE")])
    matched = match(base, base.iloc[:0])
    keys = matched.keys.set_index("key_id")
    assert keys["input_shapes"].tolist() == ["2,2", "4,4"]
    assert keys["match_kind"].isna().all()
    assert matched.base_key.tolist() == [1, 0]
    assert matched.new_key.tolist() == []
