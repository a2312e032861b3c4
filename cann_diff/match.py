"""Match stage: pair the operators of two runs by canonical type and input shapes.

The ladder (DESIGN.md "Canonical operators"): exact ``op_type`` + shapes, then
``family`` + shapes (``MatMulV2`` ↔ ``MatMulV3``), then ``family`` alone. Whatever is
left is ``added`` or ``removed`` — a result, never an error. Each rung is one outer
merge of the groups still unmatched (datacompy's ``_dataframe_merge`` pattern).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

GROUP_KEY = ["op_type", "input_shapes"]
KEY_COLUMNS = ["key_id", "op_type", "base_op_type", "new_op_type", "family", "input_shapes",
               "category", "match_kind"]


@dataclass(frozen=True)
class Matched:
    """Operator keys of both runs and, per operator row, the key it belongs to.

    ``keys`` has KEY_COLUMNS; ``match_kind`` is ``exact``, ``family``, ``type-only`` or
    None for rows on one side only. ``base_key``/``new_key`` are int arrays aligned
    with the rows matched (``summary.ops`` in the pipeline).
    """

    keys: pd.DataFrame
    base_key: np.ndarray
    new_key: np.ndarray


def _majority_category(ops: pd.DataFrame, row_group: np.ndarray) -> np.ndarray:
    """Per group, the category most of its kernels have (ties: alphabetical).

    A type with the same shapes can run on AI_CORE and on AI_CPU; the group is filed
    where most of its instances ran, whatever the order of the rows.
    """
    weight = ops["count"].to_numpy() if "count" in ops else np.ones(len(ops))
    votes = pd.DataFrame({"group": row_group, "category": ops["category"].astype(str).to_numpy(),
                          "weight": weight}).groupby(["group", "category"], sort=True)["weight"]
    ranked = votes.sum().reset_index().sort_values(["group", "weight", "category"],
                                                   ascending=[True, False, True],
                                                   kind="mergesort")
    return ranked.drop_duplicates("group")["category"].to_numpy()


def _groups(ops: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Distinct (op_type, input_shapes) groups of one side, and each row's group number."""
    grouper = ops.groupby(GROUP_KEY, observed=True, sort=True)
    row_group = grouper.ngroup().to_numpy()
    groups = grouper.agg(family=("family", "first")).reset_index()
    groups["category"] = _majority_category(ops, row_group)
    for column in groups.columns:
        groups[column] = groups[column].astype(str)
    groups["group"] = np.arange(len(groups))
    return groups, row_group


def _label(types: pd.Series) -> str:
    return "/".join(sorted(set(types)))


def _rung(base: pd.DataFrame, new: pd.DataFrame, on: list[str], kind: str):
    """Match the unmatched groups of both sides on ``on``; return pairs and leftovers."""
    fold = {"op_type": ("op_type", _label), "group": ("group", list),
            "family": ("family", "first"), "category": ("category", "first"),
            "input_shapes": ("input_shapes", _label)}
    fold = {k: v for k, v in fold.items() if k not in on}
    b = base.groupby(on, sort=True).agg(**fold).reset_index()
    n = new.groupby(on, sort=True).agg(**fold).reset_index()
    merged = b.merge(n, on=on, how="outer", suffixes=("_base", "_new"), indicator=True)
    both = merged[merged["_merge"] == "both"].copy()
    both["match_kind"] = kind
    left = base[base["group"].isin(_flatten(merged.loc[merged["_merge"] == "left_only",
                                                       "group_base"]))]
    right = new[new["group"].isin(_flatten(merged.loc[merged["_merge"] == "right_only",
                                                      "group_new"]))]
    return both, left, right


def _flatten(lists: pd.Series) -> list[int]:
    return [g for groups in lists for g in (groups if isinstance(groups, list) else [groups])]


def match(base_ops: pd.DataFrame, new_ops: pd.DataFrame) -> Matched:
    """Match the operator groups of two frames (``summary.ops`` or ``Run.ops``).

    Both need ``op_type``, ``input_shapes``, ``family`` and ``category``.
    """
    base_groups, base_row_group = _groups(base_ops)
    new_groups, new_row_group = _groups(new_ops)
    exact = base_groups.merge(new_groups, on=GROUP_KEY, how="outer", suffixes=("_base", "_new"),
                              indicator=True)
    paired = exact[exact["_merge"] == "both"].copy()
    paired["match_kind"] = "exact"
    paired["family"] = paired["family_base"]
    paired["category"] = paired["category_base"]
    paired["op_type_base"] = paired["op_type_new"] = paired["op_type"]
    rest_base = base_groups[base_groups["group"].isin(exact.loc[exact["_merge"] == "left_only",
                                                               "group_base"])]
    rest_new = new_groups[new_groups["group"].isin(exact.loc[exact["_merge"] == "right_only",
                                                            "group_new"])]
    family_pairs, rest_base, rest_new = _rung(rest_base, rest_new, ["family", "input_shapes"],
                                              "family")
    type_pairs, rest_base, rest_new = _rung(rest_base, rest_new, ["family"], "type-only")
    rows = [_key_rows(paired, "exact"), _key_rows(family_pairs, "family"),
            _key_rows(type_pairs, "type-only"), _side_rows(rest_base, "base"),
            _side_rows(rest_new, "new")]
    rows = [r for r in rows if len(r)]
    if not rows:  # neither run has kernels (e.g. two cluster_analysis_output folders)
        empty = pd.DataFrame({c: pd.Series(dtype="int64" if c == "key_id" else "object")
                              for c in KEY_COLUMNS})
        return Matched(empty, np.zeros(len(base_ops), np.int64), np.zeros(len(new_ops), np.int64))
    keys = pd.concat(rows, ignore_index=True)
    keys = keys.sort_values(["category", "family", "input_shapes", "op_type"], kind="stable")
    keys["key_id"] = np.arange(len(keys))
    base_lookup = _group_to_key(keys, "base_groups", len(base_groups))
    new_lookup = _group_to_key(keys, "new_groups", len(new_groups))
    return Matched(keys[KEY_COLUMNS].reset_index(drop=True),
                   base_lookup[base_row_group] if len(base_row_group) else base_row_group,
                   new_lookup[new_row_group] if len(new_row_group) else new_row_group)


def _as_list(value) -> list[int]:
    return value if isinstance(value, list) else [int(value)]


def _key_rows(pairs: pd.DataFrame, kind: str) -> pd.DataFrame:
    if pairs.empty:
        return pd.DataFrame()
    base_type = pairs["op_type_base"] if "op_type_base" in pairs else pairs["op_type"]
    new_type = pairs["op_type_new"] if "op_type_new" in pairs else pairs["op_type"]
    shapes = pairs["input_shapes"] if "input_shapes" in pairs else ""
    if kind == "type-only":
        shapes = ""
    family = pairs["family"] if "family" in pairs else pairs["family_base"]
    category = pairs["category_base"]
    op_type = np.where(base_type == new_type, base_type, base_type + "→" + new_type)
    return pd.DataFrame({
        "op_type": op_type, "base_op_type": base_type.to_numpy(),
        "new_op_type": new_type.to_numpy(), "family": family.to_numpy(),
        "input_shapes": np.asarray(shapes if not np.isscalar(shapes) else [shapes] * len(pairs)),
        "category": category.to_numpy(), "match_kind": kind,
        "base_groups": [_as_list(g) for g in pairs["group_base"]],
        "new_groups": [_as_list(g) for g in pairs["group_new"]],
    })


def _side_rows(groups: pd.DataFrame, side: str) -> pd.DataFrame:
    if groups.empty:
        return pd.DataFrame()
    other = "new" if side == "base" else "base"
    return pd.DataFrame({
        "op_type": groups["op_type"].to_numpy(),
        f"{side}_op_type": groups["op_type"].to_numpy(), f"{other}_op_type": None,
        "family": groups["family"].to_numpy(), "input_shapes": groups["input_shapes"].to_numpy(),
        "category": groups["category"].to_numpy(), "match_kind": None,
        f"{side}_groups": [[int(g)] for g in groups["group"]],
        f"{other}_groups": [[] for _ in range(len(groups))],
    })


def _group_to_key(keys: pd.DataFrame, column: str, n_groups: int) -> np.ndarray:
    lookup = np.full(n_groups, -1, dtype=np.int64)
    exploded = keys[["key_id", column]].explode(column).dropna()
    lookup[exploded[column].to_numpy(np.int64)] = exploded["key_id"].to_numpy(np.int64)
    return lookup
