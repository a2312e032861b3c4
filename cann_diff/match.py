"""Match stage: pair the operators of two runs by canonical type and input shapes.

The ladder (docs/design.md "Canonical operators"), each rung over the groups the rungs above
left unpaired:

1. ``exact`` — same ``op_type`` and ``input_shapes``;
2. ``family`` — same ``family`` and ``input_shapes`` (``MatMulV2`` ↔ ``MatMulV3``, and the
   renames of data/renames.json: ``ReduceSumD`` ↔ ``ReduceSum``);
3. ``renamed`` / ``normalized`` — same ``family`` and ``match_shapes``: the shapes with the
   small attribute inputs newer kernels take set aside and C0 blocks folded out
   (read/canonical.py ``match_shapes``), where one side has no such inputs or both the
   same ones. ``renamed`` when the types differ (``ReduceSumD`` ``32,64,3025`` ↔
   ``ReduceSum`` ``32,64,3025;2``), ``normalized`` when only the shapes did (``Conv2D``
   with C0 16 ↔ C0 8);
4. ``type-only`` — same ``family``, whatever the shapes.

Whatever is left is ``added`` or ``removed`` — a result, never an error. Each rung is one
outer merge of the groups still unmatched (datacompy's ``_dataframe_merge`` pattern).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from .settings import DEFAULT_THRESHOLDS, Thresholds
from .vocab import Vocabulary
from .vocab.shapes import match_shapes

GROUP_KEY = ["op_type", "input_shapes"]
KEY_COLUMNS = ["key_id", "op_type", "base_op_type", "new_op_type", "family", "input_shapes",
               "base_input_shapes", "new_input_shapes", "match_shapes", "category",
               "match_kind"]
MATCH_KINDS = ("exact", "family", "renamed", "normalized", "type-only")


@dataclass(frozen=True)
class Matched:
    """Operator keys of both runs and, per operator row, the key it belongs to.

    ``keys`` has KEY_COLUMNS; ``match_kind`` is one of MATCH_KINDS (the rung that paired
    the key) or None for rows on one side only. ``input_shapes`` is what each side showed
    (``base→new`` where they differ; empty for ``type-only``), ``base_input_shapes`` /
    ``new_input_shapes`` each side's own, ``match_shapes`` the normalized form the
    ``renamed``/``normalized`` rung compared. ``base_key``/``new_key`` are int arrays
    aligned with the rows matched (``summary.ops`` in the pipeline).
    """

    keys: pd.DataFrame
    base_key: np.ndarray
    new_key: np.ndarray


def _majority_category(ops: pd.DataFrame, row_group: np.ndarray) -> np.ndarray:
    """Per group, the category most of its kernels have (ties: alphabetical).

    A type with the same shapes can run on AI_CORE and on AI_CPU; the group is filed
    where most of its instances ran, whatever the order of the rows. The votes are one
    weighted count per (group, category) on the categories' codes: the text of each row's
    category (and a group-by on it) cost ~90 ms a side on 1,000 ranks' summaries.
    """
    weight = ops["count"].to_numpy() if "count" in ops else np.ones(len(ops))
    codes, uniques = pd.factorize(ops["category"])  # a missing category casts no vote
    labels = np.array([str(u) for u in uniques], dtype=object)
    groups = int(row_group.max()) + 1 if len(row_group) else 0
    if not groups or not len(labels):  # no row has a category: none to file under
        return np.full(groups, "", dtype=object)
    order = np.argsort(labels, kind="stable")
    column = np.empty(len(order), dtype=np.int64)
    column[order] = np.arange(len(order))  # columns in alphabetical order: argmax breaks ties
    voted = codes >= 0
    cell = row_group[voted].astype(np.int64) * len(labels) + column[codes[voted]]
    size = groups * len(labels)
    shape = (groups, len(labels))
    votes = np.bincount(cell, weights=weight[voted], minlength=size).reshape(shape)
    # A category none of a group's rows has casts no vote, not a vote of 0.
    held = (np.bincount(cell, minlength=size) > 0).reshape(shape)
    best = labels[order][np.where(held, votes, -np.inf).argmax(axis=1)]
    return np.where(held.any(axis=1), best, "")  # no row with a category: filed under none


def _groups(ops: pd.DataFrame, thresholds: Thresholds,
            vocab: Vocabulary | None) -> tuple[pd.DataFrame, np.ndarray]:
    """Distinct (op_type, input_shapes) groups of one side, and each row's group number."""
    grouper = ops.groupby(GROUP_KEY, observed=True, sort=True)
    row_group = grouper.ngroup().to_numpy()
    groups = grouper.agg(family=("family", "first")).reset_index()
    groups["category"] = _majority_category(ops, row_group)
    for column in groups.columns:
        groups[column] = groups[column].astype(str).astype(object)
    forms = match_shapes(groups["op_type"], groups["input_shapes"],
                         thresholds.attribute_input_max_elements, vocab)
    groups = pd.concat([groups, forms], axis=1)
    groups["group"] = np.arange(len(groups))
    return groups, row_group


# A key's columns as the rungs carry them: the first value (a key has one family, and
# files where the first of its groups is filed), every group, or the distinct values joined.
FOLDS = {"op_type": "joined", "group": "every", "family": "first", "category": "first",
         "input_shapes": "joined", "match_shapes": "joined"}


def _joined(values: np.ndarray, starts: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Per key, its distinct values sorted and joined by "/"; one value stays as it is."""
    out = values[starts].copy()
    for i in np.flatnonzero(sizes > 1):  # only keys that fold several groups
        out[i] = "/".join(sorted(set(values[starts[i]:starts[i] + sizes[i]])))
    return out


def _by_key(side_key: np.ndarray, shared: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One side's rows whose key is in ``shared``, ordered by key; where each key starts."""
    rows = np.flatnonzero(np.isin(side_key, shared))
    rows = rows[np.argsort(side_key[rows], kind="stable")]
    keys = side_key[rows]
    return rows, np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]]) if len(keys) else keys


def _folded(side: pd.DataFrame, rows: np.ndarray, starts: np.ndarray,
            columns: list[str], suffix: str) -> dict[str, object]:
    """One side's ``columns`` folded to one value per key (``FOLDS``), as ``<column>_<suffix>``."""
    sizes = np.diff(np.r_[starts, len(rows)])
    out: dict[str, object] = {}
    for column in columns:
        values = side[column].to_numpy()[rows]
        how = FOLDS[column]
        if how == "first":
            out[f"{column}_{suffix}"] = values[starts]
        elif how == "joined":
            out[f"{column}_{suffix}"] = _joined(values, starts, sizes)
        else:
            parts = np.split(values, starts[1:]) if len(starts) else []
            out[f"{column}_{suffix}"] = [part.tolist() for part in parts]
    return out


def _rung(base: pd.DataFrame, new: pd.DataFrame, on: list[str]):
    """Pair the unmatched groups of both sides on ``on``; return pairs and leftovers.

    Groups sharing a value of ``on`` on one side fold into one key. Every pair has
    ``<column>_base`` and ``<column>_new`` for op_type, input_shapes and match_shapes.
    Pairs come sorted by ``on``; leftovers keep their order. One group-by numbers the
    values of ``on`` over both sides, so a rung is a few array operations rather than a
    group-by of named aggregations a side and a merge (≈ 30 ms a rung on 20 groups).
    """
    folded = [column for column in FOLDS if column not in on]
    numbered = pd.concat([base[on], new[on]], ignore_index=True)
    key = numbered.groupby(on, sort=True).ngroup().to_numpy()
    base_key, new_key = key[:len(base)], key[len(base):]
    shared = np.intersect1d(base_key, new_key)
    base_rows, base_starts = _by_key(base_key, shared)
    new_rows, new_starts = _by_key(new_key, shared)
    pairs: dict[str, object] = {column: base[column].to_numpy()[base_rows[base_starts]]
                                for column in on}
    pairs.update(_folded(base, base_rows, base_starts, folded, "base"))
    pairs.update(_folded(new, new_rows, new_starts, folded, "new"))
    both = pd.DataFrame(pairs)
    for column in ("op_type", "input_shapes", "match_shapes", "family"):
        if column in on:
            both[f"{column}_base"] = both[f"{column}_new"] = both[column]
    return both, base[~np.isin(base_key, shared)], new[~np.isin(new_key, shared)]


def _normalized_rung(base: pd.DataFrame, new: pd.DataFrame):
    """Pair on family + match_shapes where attribute inputs agree or one side has none.

    Three merges: equal attribute inputs (a layout-only change), then base groups without
    attribute inputs against any new group, then the reverse (the kernel that gained
    them). Two sides that both take attribute inputs, but different ones (a reduction
    over one axis vs two), do not pair here.
    """
    on = ["family", "match_shapes"]
    same, base, new = _rung(base, new, [*on, "attribute_inputs"])
    plain_base = base["attribute_inputs"] == ""
    gained, rest, new = _rung(base[plain_base], new, on)
    base = pd.concat([rest, base[~plain_base]])
    plain_new = new["attribute_inputs"] == ""
    lost, base, rest = _rung(base, new[plain_new], on)
    new = pd.concat([rest, new[~plain_new]])
    return pd.concat([same, gained, lost], ignore_index=True), base, new


def match(base_ops: pd.DataFrame, new_ops: pd.DataFrame, *,
          thresholds: Thresholds = DEFAULT_THRESHOLDS,
          vocab: Vocabulary | None = None) -> Matched:
    """Match the operator groups of two frames (``summary.ops`` or ``Run.ops``).

    Both need ``op_type``, ``input_shapes``, ``family`` and ``category``. ``vocab`` holds
    the renames whose ``set_aside_inputs`` are left out of the shapes (None: the package's).
    """
    base_groups, base_row_group = _groups(base_ops, thresholds, vocab)
    new_groups, new_row_group = _groups(new_ops, thresholds, vocab)
    exact, rest_base, rest_new = _rung(base_groups, new_groups, GROUP_KEY)
    family, rest_base, rest_new = _rung(rest_base, rest_new, ["family", "input_shapes"])
    normalized, rest_base, rest_new = _normalized_rung(rest_base, rest_new)
    type_only, rest_base, rest_new = _rung(rest_base, rest_new, ["family"])
    rows = [_key_rows(exact, "exact"), _key_rows(family, "family"),
            _key_rows(normalized, "renamed"), _key_rows(type_only, "type-only"),
            _side_rows(rest_base, "base"), _side_rows(rest_new, "new")]
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


def _arrow(base: np.ndarray, new: np.ndarray) -> np.ndarray:
    """``base`` where both sides agree, else ``base→new``."""
    return np.where(base == new, base, base + "→" + new)


def _key_rows(pairs: pd.DataFrame, kind: str) -> pd.DataFrame:
    if pairs.empty:
        return pd.DataFrame()
    base_type = pairs["op_type_base"].to_numpy(dtype=object)
    new_type = pairs["op_type_new"].to_numpy(dtype=object)
    base_shapes = pairs["input_shapes_base"].to_numpy(dtype=object)
    new_shapes = pairs["input_shapes_new"].to_numpy(dtype=object)
    shapes = _arrow(base_shapes, new_shapes)
    compared = pairs["match_shapes_base"].to_numpy(dtype=object)
    if kind == "type-only":
        shapes = compared = np.full(len(pairs), "", dtype=object)
    # The renamed rung reads "normalized" where only the shapes were normalized.
    rung = np.where(base_type == new_type, "normalized", "renamed") if kind == "renamed" else kind
    return pd.DataFrame({
        "op_type": _arrow(base_type, new_type), "base_op_type": base_type,
        "new_op_type": new_type, "family": pairs["family_base"].to_numpy(),
        "input_shapes": shapes, "base_input_shapes": base_shapes,
        "new_input_shapes": new_shapes, "match_shapes": compared,
        "category": pairs["category_base"].to_numpy(), "match_kind": rung,
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
        f"{side}_input_shapes": groups["input_shapes"].to_numpy(),
        f"{other}_input_shapes": None, "match_shapes": groups["match_shapes"].to_numpy(),
        "category": groups["category"].to_numpy(), "match_kind": None,
        f"{side}_groups": [[int(g)] for g in groups["group"]],
        f"{other}_groups": [[] for _ in range(len(groups))],
    })


def _group_to_key(keys: pd.DataFrame, column: str, n_groups: int) -> np.ndarray:
    lookup = np.full(n_groups, -1, dtype=np.int64)
    exploded = keys[["key_id", column]].explode(column).dropna()
    lookup[exploded[column].to_numpy(np.int64)] = exploded["key_id"].to_numpy(np.int64)
    return lookup
